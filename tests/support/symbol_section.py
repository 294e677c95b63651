"""ELF symbol tables built entry by entry, for the tests of `_core.SymbolTable` (native/core/symbols.c)."""

from __future__ import annotations

import struct

STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_GNU_IFUNC = 0, 1, 2, 10
SHN_ABS = 0xFFF1
#: section_flags of the built tables: section 1 is a text section, section 2 is not
TEXT_FLAGS = b"\x00\x01\x00"


class SymbolSection:
    """A .symtab and its string table, built entry by entry."""

    def __init__(self, elf_class: int = 64) -> None:
        self.elf_class = elf_class
        self.strings = bytearray(b"\0")
        self.entries = bytearray(24 if elf_class == 64 else 16)  # entry 0 is the null symbol

    def add(self, name: bytes | None, value: int, size: int, bind: int = STB_GLOBAL, kind: int = STT_FUNC,
            shndx: int = 1, name_offset: int | None = None) -> None:
        if name_offset is None:
            name_offset = 0 if name is None else len(self.strings)
            if name is not None:
                self.strings += name + b"\0"
        info = bind << 4 | kind
        if self.elf_class == 64:
            self.entries += struct.pack("<IBBHQQ", name_offset, info, 0, shndx, value, size)
        else:
            self.entries += struct.pack("<IIIBBH", name_offset, value, size, info, 0, shndx)

    def source(self) -> tuple[bytes, bytes, int, bytes]:
        return bytes(self.entries), bytes(self.strings), self.elf_class, TEXT_FLAGS
