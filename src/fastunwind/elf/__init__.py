"""ELF reader: the first stage of fastunwind (file -> sections, segments, symbols, notes).

What this stage gives the later ones (cfi_parse, table, lookup):

* the bytes of `.eh_frame`, `.eh_frame_hdr` and `.debug_frame`, zero-copy where the file stores them
  as they are, decompressed where the file compresses them (gABI `SHF_COMPRESSED`, GNU `.zdebug_*`),
  relocated for relocatable objects (`ET_REL`) exactly as `readelf --relocated-dump` shows them;
* the addresses a loader's bias is relative to (`first_load_vaddr`), the build-id and `.gnu_debuglink`
  needed to find a separate debug file (`find_debug_file`).

Design:

* The file is mapped read-only (`_core.MappedFile`, guarded against truncation in place:
  `check_unchanged`); nothing is read until asked for, so opening a 100 MB library costs one ELF
  header, one program header table and one section header table.
* The headers, the build-id note, `.gnu_debuglink`, the process entry, a mapping's bias and the
  separate debug files to try are read by the C core (core/elf_file.c, through `_core.elf_*`): the
  one reader the launcher uses too. What only Python reads (symbols, relocations, decompression)
  is here.
* Every offset and size taken from the file goes through a bounds check (`ElfFile._file_slice`
  here) comparing lengths (`size <= file_size - offset`) so no check can overflow, and raises
  `ElfError` naming the structure, the file, the offset in hex and the bad value.
* Every loop driven by the file has a named bound (the `MAX_*` constants below, FU_ELF_MAX_* in C).

References: System V ABI gABI, chapter 4 "Object Files" (ELF header, sections, extended section
numbering, compression header, notes, symbols); chapter 5 "Program Loading" (program headers);
System V AMD64 ABI §4.4 (x86-64 relocation types); GDB manual §18.3 "Debugging Information in Separate
Files" (build-id and debuglink lookup); binutils 2.40 `readelf.c` `apply_relocations` (relocations).
"""

from __future__ import annotations

import collections
import functools
import os
import stat
import struct
import zlib
from collections.abc import Iterator
from types import TracebackType

from fastunwind import _core
from fastunwind.errors import ElfError, FileChangedError
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable
    from typing import TypeVar

    #: what a reader of core/elf_file.c gives back (ElfFile._in_core)
    _T = TypeVar("_T")


def _logger() -> "logging.Logger":  # logging is imported on first use: it costs 5 ms of every CLI start
    import logging

    return logging.getLogger(__name__)

#: What `section_data` returns: a zero-copy view into the mapped file, or bytes it had to build.
SectionBytes = memoryview | bytes

# --- ELF constants (gABI chapter 4) ------------------------------------------------------------------

EI_NIDENT = 16

ET_NONE = 0
ET_REL = 1
ET_EXEC = 2
ET_DYN = 3
ET_CORE = 4
_ELF_TYPE_NAMES = {ET_REL: "REL", ET_EXEC: "EXEC", ET_DYN: "DYN", ET_CORE: "CORE"}

EM_386 = 3
EM_IAMCU = 6
EM_X86_64 = 62
EM_L1OM = 180
EM_K1OM = 181

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF

SHT_NULL = 0
SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_RELA = 4
SHT_HASH = 5
SHT_DYNAMIC = 6
SHT_NOTE = 7
SHT_NOBITS = 8
SHT_REL = 9
SHT_DYNSYM = 11
SHT_SYMTAB_SHNDX = 18

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_COMPRESSED = 0x800

PT_NULL = 0
PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3
PT_NOTE = 4
PT_PHDR = 6
PT_TLS = 7
PT_GNU_EH_FRAME = 0x6474E550

PF_X = 0x1
PF_W = 0x2
PF_R = 0x4

STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_SECTION = 3
STT_FILE = 4
STT_COMMON = 5
STT_TLS = 6
STB_LOCAL = 0
STB_GLOBAL = 1
STB_WEAK = 2

ELFCOMPRESS_ZLIB = 1
ELFCOMPRESS_ZSTD = 2

NT_GNU_BUILD_ID = 3

#: Legacy GNU compressed debug sections (`.zdebug_*`, `objcopy --compress-debug-sections=zlib-gnu`):
#: b"ZLIB", the uncompressed size as 8 bytes big-endian, then one zlib stream.
ZDEBUG_PREFIX = ".zdebug"
ZDEBUG_MAGIC = b"ZLIB"
ZDEBUG_HEADER = struct.Struct(">4sQ")

# x86-64 (System V AMD64 ABI §4.4.1, table 4.10) and i386 relocation types used by readelf.
R_X86_64_NONE = 0
R_X86_64_64 = 1
R_X86_64_PC32 = 2
R_X86_64_32 = 10
R_X86_64_32S = 11
R_X86_64_PC64 = 24
R_386_NONE = 0
R_386_32 = 1
R_386_PC32 = 2

# --- Bounds on input-driven work ----------------------------------------------------------------------

# The headers', notes' and build-id's bounds are the C reader's (core/elf_file.h FU_ELF_MAX_*).
#: Symbols in one symbol table, as the C symbolizer bounds them (native/core/symbols.h). libLLVM-14.so.1
#: (105 MB) has 44983 in .dynsym; big debug builds reach a few million in .symtab.
MAX_SYMBOL_COUNT: int = _core.MAX_SYMBOLS
#: Relocations against one section (a .o's .rela.debug_info reaches about a million).
MAX_RELOCATION_COUNT = 1 << 26
#: Length of one name in a string table (the longest mangled C++ names are a few 10 KB).
MAX_NAME_LENGTH: int = _core.ELF_MAX_NAME_LENGTH
#: Size of one decompressed section. A debug section of 4 GiB cannot be addressed by 32-bit DWARF
#: offsets anyway, and the cap keeps a forged ch_size from asking for terabytes.
MAX_DECOMPRESSED_SIZE = 4 << 30
#: Concatenated zlib streams in one compressed section: readelf and BFD accept several; every tool
#: we know writes one.
MAX_ZLIB_STREAMS = 1 << 10
#: Output chunk when reading a zstd stream: a forged frame content size must not become one
#: allocation of that size.
ZSTD_READ_CHUNK = 1 << 20

# --- Struct layouts (little-endian only) ------------------------------------------------------------


class _Layout(NamedTuple):
    """The on-disk record formats of one ELF class."""

    header: struct.Struct  # after e_ident
    section_header: struct.Struct
    program_header: struct.Struct
    symbol: struct.Struct
    rela: struct.Struct
    rel: struct.Struct
    compression_header: struct.Struct
    relocation_symbol_shift: int
    relocation_type_mask: int


_LAYOUT_64 = _Layout(
    # e_type e_machine e_version e_entry e_phoff e_shoff e_flags e_ehsize e_phentsize e_phnum
    # e_shentsize e_shnum e_shstrndx
    header=struct.Struct("<HHIQQQIHHHHHH"),
    # sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link sh_info sh_addralign sh_entsize
    section_header=struct.Struct("<IIQQQQIIQQ"),
    # p_type p_flags p_offset p_vaddr p_paddr p_filesz p_memsz p_align
    program_header=struct.Struct("<IIQQQQQQ"),
    # st_name st_info st_other st_shndx st_value st_size
    symbol=struct.Struct("<IBBHQQ"),
    rela=struct.Struct("<QQq"),
    rel=struct.Struct("<QQ"),
    # ch_type ch_reserved ch_size ch_addralign
    compression_header=struct.Struct("<IIQQ"),
    relocation_symbol_shift=32,
    relocation_type_mask=0xFFFFFFFF,
)

_LAYOUT_32 = _Layout(
    header=struct.Struct("<HHIIIIIHHHHHH"),
    section_header=struct.Struct("<IIIIIIIIII"),
    # p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags p_align (flags moved in ELF64)
    program_header=struct.Struct("<IIIIIIII"),
    # st_name st_value st_size st_info st_other st_shndx
    symbol=struct.Struct("<IIIBBH"),
    rela=struct.Struct("<IIi"),
    rel=struct.Struct("<II"),
    # ch_type ch_size ch_addralign
    compression_header=struct.Struct("<III"),
    relocation_symbol_shift=8,
    relocation_type_mask=0xFF,
)

_U32 = struct.Struct("<I")

# --- Public records --------------------------------------------------------------------------------


class Section(NamedTuple):
    """One section header (gABI "Section Header"), with its name resolved."""

    index: int  # type: ignore[assignment]  # a public field: shadows tuple.index, as it always has
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int

    @property
    def is_compressed(self) -> bool:
        """True if the data start with a gABI compression header (SHF_COMPRESSED)."""
        return bool(self.flags & SHF_COMPRESSED)


class Segment(NamedTuple):
    """One program header (gABI "Program Header"); flags are PF_R | PF_W | PF_X."""

    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int


class Symbol(NamedTuple):
    """One symbol table entry. type is STT_*, bind is STB_*; section_index is st_shndx, or the
    SHT_SYMTAB_SHNDX entry when st_shndx is SHN_XINDEX; special indexes (SHN_ABS, SHN_COMMON) as is."""

    name: str
    value: int
    size: int
    type: int
    bind: int
    section_index: int


# --- The reader -------------------------------------------------------------------------------------


class ElfFile:
    """A little-endian ELF32 or ELF64 file, mapped read-only.

    Use `ElfFile.open(path)` (preferably as a context manager) or `ElfFile.from_bytes(data)`.
    Views returned by `section_data` point into the mapping: drop them before `close()`, or the
    mapping lives on until they are garbage-collected (close() never fails because of them).
    """

    path: str
    elf_class: int
    elf_type: str | int
    elf_type_number: int
    machine: int
    entry: int
    file_size: int
    sections: list[Section]
    segments: list[Segment]

    def __init__(self, data: memoryview, path: str, mapping: _core.MappedFile | None = None) -> None:
        """Parse the headers of `data`; prefer `open` / `from_bytes`, which build `data`."""
        self.path = path
        self._view: memoryview | None = data
        self._mapping = mapping
        #: parsed from bytes in memory (from_bytes: a vDSO copy), not from a file at `path`
        self.in_memory = mapping is None
        self.file_size = len(data)
        with CheckedRead(self.check_unchanged):
            self._parse_headers()
        self._symbols: tuple[Symbol, ...] | None = None
        self._section_by_name: dict[str, Section] = {}
        for section in self.sections:
            self._section_by_name.setdefault(section.name, section)

    # --- construction and lifetime ---

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> "ElfFile":
        """Map the file at `path` read-only and parse its ELF, program and section headers.

        Raises OSError if the file cannot be opened, ElfError if it is not a supported ELF file."""
        path_text = os.fspath(path)
        # O_NONBLOCK: opening a FIFO must not hang; we refuse non-regular files right after.
        descriptor = os.open(path_text, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            file_status = os.fstat(descriptor)
            if not stat.S_ISREG(file_status.st_mode):
                raise ElfError(f"{path_text}: not a regular file (mode 0o{file_status.st_mode:o})")
            if file_status.st_size == 0:
                raise ElfError(f"{path_text}: empty file, too short for an ELF header (size 0x0)")
            try:
                mapping = _core.MappedFile(descriptor, path_text)
            except (OSError, ValueError) as error:
                raise ElfError(f"{path_text}: cannot map the file: {error}") from error
        finally:
            os.close(descriptor)
        view = memoryview(mapping)
        try:
            return cls(view, path_text, mapping)
        except BaseException:
            view.release()
            try:
                mapping.close()
            except BufferError:
                # Slices made while parsing are still referenced by the traceback; the mapping
                # goes away with them.
                pass
            raise

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, path: str = "<memory>") -> "ElfFile":
        """Parse an ELF image held in memory (`path` only names it in error messages)."""
        view = memoryview(data).cast("B")
        return cls(view, path)

    def close(self) -> None:
        """Release the mapping. Idempotent."""
        if self._view is not None:
            try:
                self._view.release()
            except BufferError:
                pass
            self._view = None
        if self._mapping is not None:
            try:
                self._mapping.close()
            except BufferError:
                # A caller still holds a section view: the mapping is unmapped when the last view
                # is garbage-collected.
                pass
            self._mapping = None

    def release_resident_pages(self) -> None:
        """Let the kernel take back the pages of the file read so far (a symbol table's sections,
        once the table is built); any touched again are mapped again from the page cache."""
        if self._mapping is not None:
            self._mapping.release_pages()

    def check_unchanged(self) -> None:
        """FileChangedError if the file was truncated under its mapping since it was opened (pages
        past its new end were read as zeros: native/core/mapped_file.h); for the end of each
        operation that read it. Nothing for an image in memory."""
        if self._mapping is not None:
            self._mapping.check()

    def __enter__(self) -> "ElfFile":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ElfFile({self.path!r}, ELF{self.elf_class} {self.elf_type} machine {self.machine}, "
            f"{len(self.sections)} sections, {len(self.segments)} segments)"
        )

    # --- bounded access to the file bytes ---

    def file_view(self) -> memoryview:
        """The whole file's bytes (zero copy), for a reader of the C core."""
        if self._view is None:
            raise ValueError(f"{self.path}: ElfFile is closed")
        return self._view

    def _file_slice(self, offset: int, size: int, what: str) -> memoryview:
        """The bytes [offset, offset + size) of the file, or ElfError if they are not all there."""
        if offset < 0 or size < 0 or offset > self.file_size or size > self.file_size - offset:
            raise ElfError(
                f"{self.path}: {what} at offset 0x{offset:x} with size 0x{size:x} extends beyond the "
                f"end of the file (size 0x{self.file_size:x})"
            )
        return self.file_view()[offset : offset + size]

    # --- headers ---

    def _parse_headers(self) -> None:
        """The ELF header, section and program headers, by the C core's reader (core/elf_file.c):
        the one reader the launcher uses too."""
        elf_class, elf_type, self.machine, self.entry, sections, segments = self._in_core(_core.elf_headers)
        self.elf_class, self._layout = elf_class, _LAYOUT_64 if elf_class == 64 else _LAYOUT_32
        self.elf_type_number = elf_type
        self.elf_type = _ELF_TYPE_NAMES.get(elf_type, elf_type)
        self.sections = [Section(*fields) for fields in sections]
        self.segments = [Segment(*fields) for fields in segments]

    def _in_core(self, read: "Callable[[memoryview], _T]") -> "_T":
        """`read` (a reader of core/elf_file.c) over the file's bytes, its ElfError naming the file."""
        try:
            return read(self.file_view())
        except ElfError as error:
            raise ElfError(f"{self.path}: {error}") from None

    # --- sections ---

    def segment_data(self, segment: Segment) -> memoryview:
        """The file bytes of a segment (its p_filesz bytes at p_offset), zero copy."""
        return self._file_slice(segment.offset, segment.filesz, f"segment at file offset 0x{segment.offset:x}")

    def section(self, name: str) -> Section | None:
        """The first section called `name`; for `.debug_*` names, the legacy `.zdebug_*` section
        if there is no `.debug_*` one (its data are decompressed by `section_data` all the same)."""
        found = self._section_by_name.get(name)
        if found is None and name.startswith(".debug"):
            found = self._section_by_name.get(ZDEBUG_PREFIX + name[len(".debug") :])
        return found

    def _where(self, section: Section) -> str:
        return f"{self.path}: section [{section.index}] {section.name!r}"

    def _raw_section_data(self, section: Section) -> memoryview:
        if section.type == SHT_NOBITS:
            return memoryview(b"")
        return self._file_slice(
            section.offset, section.size, f"section [{section.index}] {section.name!r}"
        )

    def section_data(self, section: Section) -> SectionBytes:
        """The contents of `section`: a view into the file, or decompressed bytes.

        SHT_NOBITS sections are empty. SHF_COMPRESSED sections are decompressed (ELFCOMPRESS_ZLIB
        with zlib, ELFCOMPRESS_ZSTD with the optional `zstandard` module); so are legacy GNU
        `.zdebug_*` sections. The result has exactly the size the compression header declares."""
        raw = self._raw_section_data(section)
        compression = self._compression(section, raw)
        if compression is None:
            return raw
        compression_type, uncompressed_size, header_size = compression
        where = f"{self._where(section)}, compressed data at offset 0x{section.offset + header_size:x}"
        payload = raw[header_size:]
        if compression_type == ELFCOMPRESS_ZLIB:
            return _decompress_zlib(payload, uncompressed_size, where)
        if compression_type == ELFCOMPRESS_ZSTD:
            return _decompress_zstd(payload, uncompressed_size, where)
        raise ElfError(
            f"{self._where(section)}: unknown compression type (ch_type) 0x{compression_type:x} "
            f"at offset 0x{section.offset:x}"
        )

    def section_data_size(self, section: Section) -> int:
        """The size of `section_data(section)`, from the headers alone (a compressed section is not
        decompressed)."""
        raw = self._raw_section_data(section)
        compression = self._compression(section, raw)
        return len(raw) if compression is None else compression[1]

    def _compression(self, section: Section, raw: memoryview) -> tuple[int, int, int] | None:
        """(compression type, uncompressed size, header size) of a compressed section: gABI
        "Compression Header" (Elf{32,64}_Chdr, SHF_COMPRESSED) or a GNU `.zdebug_*` 'ZLIB' header;
        None for a section stored as it is."""
        where = self._where(section)
        if section.is_compressed:
            record = self._layout.compression_header
            if len(raw) < record.size:
                raise ElfError(
                    f"{where}: SHF_COMPRESSED section of 0x{len(raw):x} bytes at offset "
                    f"0x{section.offset:x} is too small for a compression header (0x{record.size:x} bytes)"
                )
            fields = record.unpack_from(raw, 0)
            if self.elf_class == 64:
                compression_type, _reserved, uncompressed_size, _alignment = fields
            else:
                compression_type, uncompressed_size, _alignment = fields
            return compression_type, uncompressed_size, record.size
        if section.name.startswith(ZDEBUG_PREFIX) and raw[: len(ZDEBUG_MAGIC)] == ZDEBUG_MAGIC:
            if len(raw) < ZDEBUG_HEADER.size:
                raise ElfError(
                    f"{where}: .zdebug section of 0x{len(raw):x} bytes at offset "
                    f"0x{section.offset:x} is too small for its 'ZLIB' header "
                    f"(0x{ZDEBUG_HEADER.size:x} bytes)"
                )
            _magic, uncompressed_size = ZDEBUG_HEADER.unpack_from(raw, 0)
            return ELFCOMPRESS_ZLIB, uncompressed_size, ZDEBUG_HEADER.size
        return None

    # --- relocations (ET_REL only) ---

    def relocated_section_data(self, section: Section, *, strict: bool = False) -> SectionBytes:
        """`section_data(section)` with the relocations that target it applied, the way binutils
        2.40 `readelf --relocated-dump` (`apply_relocations` in readelf.c) applies them.

        Only ET_REL files are relocated; for others the data are returned unchanged. As in readelf:

        * only the first SHT_RELA/SHT_REL section whose sh_info is this section (and whose size is
          not 0 and sh_link is a valid index) is applied;
        * each section is taken to be at address 0: symbol values are used as stored, and a
          PC-relative relocation writes S + A - r_offset (r_offset, not sh_addr + r_offset);
        * the addend is r_addend for SHT_RELA, the bytes in place for SHT_REL;
        * relocation types readelf does not know for the machine (for x86-64 all but NONE, 64,
          PC32, 32, PC64: 32S is not among them), offsets outside the section, symbol indexes
          outside the table, and symbols of a type above STT_SECTION other than STT_COMMON are
          skipped with a warning (logged here), or raise ElfError when `strict` is true.

        Raises ElfError for a machine other than x86-64/i386, or a malformed relocation or symbol
        table."""
        data = self.section_data(section)
        if self.elf_type_number != ET_REL:
            return data
        relocation_section = self._relocation_section_for(section)
        if relocation_section is None:
            return data
        kinds = _READELF_RELOCATION_KINDS.get(self.machine)
        if kinds is None:
            raise ElfError(
                f"{self._where(section)}: applying relocations of machine (e_machine) "
                f"0x{self.machine:x} is not supported (only x86-64 and i386)"
            )
        symbol_section = self.sections[relocation_section.link]
        if symbol_section.type not in (SHT_SYMTAB, SHT_DYNSYM):
            raise ElfError(
                f"{self._where(relocation_section)}: sh_link 0x{relocation_section.link:x} names "
                f"section {symbol_section.name!r} of type 0x{symbol_section.type:x}, not a symbol table"
            )
        symbol_values_and_infos = [
            (fields[1], fields[3]) if self.elf_class == 32 else (fields[4], fields[1])
            for fields in self._symbol_records(symbol_section)
        ]
        is_rela = relocation_section.type == SHT_RELA
        layout = self._layout
        record = layout.rela if is_rela else layout.rel
        count = relocation_section.size // record.size
        if count > MAX_RELOCATION_COUNT:
            raise ElfError(
                f"{self._where(relocation_section)}: 0x{count:x} relocations exceed the limit "
                f"0x{MAX_RELOCATION_COUNT:x}"
            )
        table = self._file_slice(
            relocation_section.offset,
            count * record.size,
            f"relocation section [{relocation_section.index}] {relocation_section.name!r}",
        )
        output = bytearray(data)
        section_size = len(output)
        symbol_count = len(symbol_values_and_infos)
        skipped: collections.Counter[str] = collections.Counter()
        first_skip: dict[str, str] = {}

        def skip(reason: str, detail: str) -> None:
            if strict:
                raise ElfError(f"{self._where(relocation_section)}: {detail}")
            skipped[reason] += 1
            first_skip.setdefault(reason, detail)

        for number, fields in enumerate(record.iter_unpack(table)):
            offset, info = fields[0], fields[1]
            relocation_type = info & layout.relocation_type_mask
            symbol_index = info >> layout.relocation_symbol_shift
            if relocation_type not in kinds:
                skip(
                    "unsupported type",
                    f"relocation #{number} at offset 0x{offset:x}: relocation type {relocation_type} is "
                    f"not applied by readelf for machine {self.machine} (section {section.name!r})",
                )
                continue
            kind = kinds[relocation_type]
            if kind is None:  # R_*_NONE
                continue
            size, is_pc_relative = kind
            if offset > section_size - size:
                skip(
                    "offset outside the section",
                    f"relocation #{number}: offset 0x{offset:x} + 0x{size:x} bytes is outside section "
                    f"{section.name!r} (size 0x{section_size:x})",
                )
                continue
            if symbol_index >= symbol_count:
                skip(
                    "bad symbol index",
                    f"relocation #{number} at offset 0x{offset:x}: symbol index "
                    f"0x{symbol_index:x} is not below the symbol count 0x{symbol_count:x}",
                )
                continue
            symbol_value, symbol_info = symbol_values_and_infos[symbol_index]
            symbol_type = symbol_info & 0xF
            if symbol_index != 0 and symbol_type > STT_SECTION and symbol_type != STT_COMMON:
                skip(
                    "unexpected symbol type",
                    f"relocation #{number} at offset 0x{offset:x}: symbol 0x{symbol_index:x} has type "
                    f"{symbol_type}, above STT_SECTION",
                )
                continue
            mask = (1 << (8 * size)) - 1
            if is_rela:
                addend = fields[2]
            else:
                addend = int.from_bytes(output[offset : offset + size], "little")
            value = addend + symbol_value
            if is_pc_relative:
                value -= offset
            output[offset : offset + size] = (value & mask).to_bytes(size, "little")
        for reason, count_skipped in skipped.items():
            _logger().warning(
                "%s: skipped %d relocation(s) (%s) like readelf does; first: %s",
                self._where(relocation_section),
                count_skipped,
                reason,
                first_skip[reason],
            )
        return bytes(output)

    def _relocation_section_for(self, section: Section) -> Section | None:
        """readelf's choice: the first SHT_RELA/SHT_REL section targeting `section`."""
        return self._relocation_sections_by_target.get(section.index)

    @functools.cached_property
    def _relocation_sections_by_target(self) -> dict[int, Section]:
        # One pass instead of one per section: -ffunction-sections objects have 100k sections.
        count = len(self.sections)
        by_target: dict[int, Section] = {}
        for candidate in self.sections:
            if (
                candidate.type in (SHT_RELA, SHT_REL)
                and candidate.info < count
                and candidate.size != 0
                and candidate.link < count
            ):
                by_target.setdefault(candidate.info, candidate)
        return by_target

    # --- symbols ---

    def _symbol_records(self, symbol_section: Section) -> Iterator[tuple[int, ...]]:
        record = self._layout.symbol
        where = self._where(symbol_section)
        if symbol_section.size == 0 or symbol_section.type == SHT_NOBITS:
            return iter(())
        if symbol_section.entsize != record.size:
            raise ElfError(
                f"{where}: bad sh_entsize 0x{symbol_section.entsize:x} for a symbol table "
                f"(expected 0x{record.size:x})"
            )
        if symbol_section.size % record.size != 0:
            raise ElfError(
                f"{where}: size 0x{symbol_section.size:x} is not a multiple of the symbol size "
                f"0x{record.size:x}"
            )
        count = symbol_section.size // record.size
        if count > MAX_SYMBOL_COUNT:
            raise ElfError(f"{where}: 0x{count:x} symbols exceed the limit 0x{MAX_SYMBOL_COUNT:x}")
        table = self._file_slice(
            symbol_section.offset, symbol_section.size, f"symbol table [{symbol_section.index}]"
        )
        return record.iter_unpack(table)

    def symbols(self) -> list[Symbol]:
        """Every entry of every SHT_SYMTAB (.symtab) and SHT_DYNSYM (.dynsym) section, in section
        order, including each table's null entry 0 (so list positions match readelf -s numbers)."""
        if self._symbols is None:
            result: list[Symbol] = []
            with CheckedRead(self.check_unchanged):
                for symbol_section in self.sections:
                    if symbol_section.type in (SHT_SYMTAB, SHT_DYNSYM):
                        result.extend(self._symbols_of(symbol_section))
            self._symbols = tuple(result)
        return list(self._symbols)

    def _symbols_of(self, symbol_section: Section) -> list[Symbol]:
        where = self._where(symbol_section)
        records = list(self._symbol_records(symbol_section))
        if not records:
            return []
        if symbol_section.link >= len(self.sections):
            raise ElfError(
                f"{where}: string table index (sh_link) 0x{symbol_section.link:x} is not below the "
                f"section count 0x{len(self.sections):x}"
            )
        string_section = self.sections[symbol_section.link]
        strings = bytes(self._raw_section_data(string_section))
        extended_indexes = self._extended_section_indexes(symbol_section, len(records))
        symbols = []
        is_64 = self.elf_class == 64
        for number, fields in enumerate(records):
            if is_64:
                name_offset, info, _other, section_index, value, size = fields
            else:
                name_offset, value, size, info, _other, section_index = fields
            if section_index == SHN_XINDEX and extended_indexes is not None:
                section_index = extended_indexes[number]
            # _string_at inline for the names that end inside the table (libLLVM-14: 45k symbols);
            # the others go through it, for its error
            end = strings.find(b"\0", name_offset, name_offset + MAX_NAME_LENGTH + 1) if name_offset < len(strings) else -1
            name = (strings[name_offset:end].decode("utf-8", "backslashreplace") if end >= 0
                    else _string_at(strings, name_offset, f"{where}: name of symbol {number}"))
            symbols.append(Symbol(name, value, size, info & 0xF, info >> 4, section_index))
        return symbols

    def _extended_section_indexes(self, symbol_section: Section, count: int) -> tuple[int, ...] | None:
        """gABI SHT_SYMTAB_SHNDX: the real st_shndx of symbols whose st_shndx is SHN_XINDEX."""
        for candidate in self.sections:
            if candidate.type == SHT_SYMTAB_SHNDX and candidate.link == symbol_section.index:
                if candidate.size < count * _U32.size:
                    raise ElfError(
                        f"{self._where(candidate)}: SHT_SYMTAB_SHNDX size 0x{candidate.size:x} is too "
                        f"small for 0x{count:x} symbols"
                    )
                data = self._file_slice(
                    candidate.offset, count * _U32.size, f"section [{candidate.index}]"
                )
                return struct.unpack_from(f"<{count}I", data)
        return None

    # --- notes, build-id, debuglink ---

    @functools.cached_property
    def build_id(self) -> bytes | None:
        """The NT_GNU_BUILD_ID note (owner "GNU"): from SHT_NOTE sections first, then PT_NOTE
        segments (a stripped file may have no section headers)."""
        return self._in_core(_core.elf_build_id)

    @property
    def build_id_hex(self) -> str | None:
        """The build-id in lowercase hex, as `readelf -n` and debuginfod print it."""
        build_id = self.build_id
        return None if build_id is None else build_id.hex()

    @functools.cached_property
    def debuglink(self) -> tuple[str, int] | None:
        """(file name, CRC-32) from `.gnu_debuglink`: a NUL-terminated name, zero padding to a
        multiple of 4, then the CRC-32 (zlib.crc32) of the whole debug file, in file byte order."""
        link = self._in_core(_core.elf_debuglink)
        return None if link is None else (os.fsdecode(link[0]), link[1])

    @functools.cached_property
    def process_entry(self) -> int:
        """Where a process starts running this file, else 0 (core/elf_file.h fu_elf_process_entry):
        e_entry of an executable or of a file that needs no library, never a shared library's."""
        return self._in_core(_core.elf_process_entry)

    def mapping_bias(self, start: int, end: int, pgoff: int) -> int | None:
        """avma - svma of an executable mapping [start, end) of file offset `pgoff`, or None if no
        PT_LOAD segment holds that offset (core/elf_file.h fu_elf_mapping_bias: the segment the
        mapping really maps, where lld and mold put two in one page)."""
        return self._in_core(lambda data: _core.elf_mapping_bias(data, start, end, pgoff))

    def loaded_segments(self, read_only: bool = False) -> list[Segment]:
        """The segments the walker reads as the file's bytes at their svma (core/elf_file.h
        fu_elf_segment_loaded): the PT_LOADs with bytes in the file; `read_only`, those not
        writable (the constants a DWARF expression may read)."""
        return [self.segments[i] for i in self._in_core(lambda data: _core.elf_loaded_segments(data, read_only))]

    def pointer_bases(self) -> tuple[int, int]:
        """(sh_addr of .text, of .got), 0 for one missing: what a CFI section's DW_EH_PE_textrel and
        DW_EH_PE_datarel pointers are relative to (core/elf_file.h fu_elf_pointer_bases)."""
        return self._in_core(_core.elf_pointer_bases)

    def offset_executable(self, pgoff: int) -> bool:
        """Whether a PT_LOAD segment whose pages hold file offset `pgoff` is executable: whether a
        mapping of the file at that offset maps code (core/elf_file.h fu_elf_offset_executable)."""
        return self._in_core(lambda data: _core.elf_offset_executable(data, pgoff))

    # --- addresses ---

    @property
    def text_section_addr(self) -> int | None:
        """sh_addr of `.text`, or None if there is none."""
        text = self.section(".text")
        return None if text is None else text.addr

    @property
    def first_load_vaddr(self) -> int | None:
        """p_vaddr - p_offset of the PT_LOAD with the lowest p_vaddr: the address the file's offset 0
        is linked at, which a loader's bias (avma - svma) is relative to. None without PT_LOAD."""
        loads = [segment for segment in self.segments if segment.type == PT_LOAD]
        if not loads:
            return None
        lowest = min(loads, key=lambda segment: segment.vaddr)
        return lowest.vaddr - lowest.offset


# readelf's relocation knowledge (is_none_reloc, is_32bit_abs_reloc, is_32bit_pcrel_reloc,
# is_64bit_abs_reloc, is_64bit_pcrel_reloc): type -> (size in bytes, PC-relative), None = NONE.
_X86_64_RELOCATION_KINDS: dict[int, tuple[int, bool] | None] = {
    R_X86_64_NONE: None,
    R_X86_64_64: (8, False),
    R_X86_64_PC32: (4, True),
    R_X86_64_32: (4, False),
    R_X86_64_PC64: (8, True),
}
_I386_RELOCATION_KINDS: dict[int, tuple[int, bool] | None] = {
    R_386_NONE: None,
    R_386_32: (4, False),
    R_386_PC32: (4, True),
}
_READELF_RELOCATION_KINDS = {
    EM_X86_64: _X86_64_RELOCATION_KINDS,
    EM_L1OM: _X86_64_RELOCATION_KINDS,
    EM_K1OM: _X86_64_RELOCATION_KINDS,
    EM_386: _I386_RELOCATION_KINDS,
    EM_IAMCU: _I386_RELOCATION_KINDS,
}


# --- helpers -----------------------------------------------------------------------------------------


class CheckedRead:
    """An operation over mapped files (`with CheckedRead(image.check_unchanged): ...`): the SIGBUS
    guard is put back in front of a handler installed over it since (faulthandler.enable() after the
    import) when it starts, and the checks run at its end, whether it returned or raised, so a file
    truncated under its mapping meanwhile gives FileChangedError in place of a result, or of the
    error its zeros caused (native/core/mapped_file.h)."""

    def __init__(self, *checks: "Callable[[], None]") -> None:
        self._checks = checks

    def __enter__(self) -> None:
        _core.guard_mapped_files()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        for check in self._checks:
            check()


def _string_at(table: bytes, offset: int, where: str) -> str:
    """The NUL-terminated string at `offset` of a string table (gABI "String Table")."""
    if offset == 0 and not table:
        return ""  # index 0 is the empty name, even in an empty table
    if offset >= len(table):
        raise ElfError(
            f"{where}: string offset 0x{offset:x} is outside the string table (size 0x{len(table):x})"
        )
    end = table.find(b"\0", offset, offset + MAX_NAME_LENGTH + 1)
    if end < 0:
        raise ElfError(
            f"{where}: string at offset 0x{offset:x} is not NUL-terminated within the table "
            f"(or longer than 0x{MAX_NAME_LENGTH:x} bytes)"
        )
    return table[offset:end].decode("utf-8", "backslashreplace")


def _check_uncompressed_size(uncompressed_size: int, where: str) -> None:
    if uncompressed_size > MAX_DECOMPRESSED_SIZE:
        raise ElfError(
            f"{where}: declared uncompressed size 0x{uncompressed_size:x} exceeds the limit "
            f"0x{MAX_DECOMPRESSED_SIZE:x}"
        )


def _size_mismatch(where: str, declared: int, actual: str) -> ElfError:
    return ElfError(
        f"{where}: decompressed size does not match the declared size 0x{declared:x}: got {actual}"
    )


def _decompress_zlib(payload: memoryview, uncompressed_size: int, where: str) -> bytes:
    """Inflate one or more concatenated zlib streams into exactly `uncompressed_size` bytes."""
    _check_uncompressed_size(uncompressed_size, where)
    pieces: list[bytes] = []
    produced = 0
    remaining: bytes | memoryview = payload
    for _ in range(MAX_ZLIB_STREAMS):
        decompressor = zlib.decompressobj()
        try:
            # max_length = room + 1 so that one byte too many is seen; it is never 0 (0 = no limit).
            piece = decompressor.decompress(remaining, uncompressed_size - produced + 1)
        except zlib.error as error:
            raise ElfError(f"{where}: corrupt zlib data: {error}") from error
        pieces.append(piece)
        produced += len(piece)
        if produced > uncompressed_size:
            raise _size_mismatch(where, uncompressed_size, f"more than 0x{uncompressed_size:x} bytes")
        if not decompressor.eof:
            raise _size_mismatch(
                where, uncompressed_size, f"0x{produced:x} bytes, zlib stream truncated"
            )
        remaining = decompressor.unused_data
        if not remaining:
            break
    else:
        raise ElfError(f"{where}: more than {MAX_ZLIB_STREAMS} concatenated zlib streams")
    if produced != uncompressed_size:
        raise _size_mismatch(where, uncompressed_size, f"0x{produced:x} bytes")
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _decompress_zstd(payload: memoryview, uncompressed_size: int, where: str) -> bytes:
    """Decompress zstd frames (possibly several, as ZSTD_decompress accepts) into exactly
    `uncompressed_size` bytes."""
    _check_uncompressed_size(uncompressed_size, where)
    try:
        import zstandard
    except ImportError as error:
        raise ElfError(
            f"{where}: section is compressed with zstd (ELFCOMPRESS_ZSTD); install fastunwind[zstd] "
            "(the zstandard module) to read it"
        ) from error
    pieces: list[bytes] = []
    produced = 0
    # Each read returns at least one byte or ends the stream, so this bound is never reached by a
    # stream that stays within the declared size.
    read_limit = uncompressed_size // ZSTD_READ_CHUNK + 2
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(bytes(payload), read_across_frames=True)
        for _ in range(read_limit):
            piece = reader.read(min(ZSTD_READ_CHUNK, uncompressed_size - produced + 1))
            if not piece:
                break
            pieces.append(piece)
            produced += len(piece)
            if produced > uncompressed_size:
                raise _size_mismatch(
                    where, uncompressed_size, f"more than 0x{uncompressed_size:x} bytes"
                )
        else:
            raise ElfError(f"{where}: zstd stream did not end within {read_limit} reads")
    except zstandard.ZstdError as error:
        raise ElfError(f"{where}: corrupt zstd data: {error}") from error
    if produced != uncompressed_size:
        raise _size_mismatch(where, uncompressed_size, f"0x{produced:x} bytes")
    return b"".join(pieces)


# --- separate debug files ------------------------------------------------------------------------------

DEFAULT_DEBUG_ROOTS = ("/usr/lib/debug",)


def find_debug_file(
    elf: ElfFile, roots: tuple[str, ...] | list[str] = DEFAULT_DEBUG_ROOTS
) -> str | None:
    """The path of the separate debug file of `elf`, or None (GDB manual §18.3).

    1. By build-id: `<root>/.build-id/<first 2 hex digits>/<rest>.debug`, accepted only if that
       file's own build-id is the same.
    2. By `.gnu_debuglink`: `<dir>/<name>`, `<dir>/.debug/<name>`, `<root>/<dir>/<name>` where
       <dir> is the directory of `elf` (as given, then with symlinks resolved), accepted only if the
       CRC-32 of the candidate file matches the one in `.gnu_debuglink`.

    Candidates that are missing, unreadable or not ELF are skipped."""
    for candidate in _debug_candidates(elf, elf.build_id, None, roots):
        if os.path.isfile(candidate) and _has_build_id(candidate, elf.build_id):
            return candidate
    link = elf.debuglink  # read only when no file by build-id is found, as the loader reads it
    if link is None:
        return None
    name, crc = link
    for candidate in _debug_candidates(elf, None, name, roots):
        if os.path.isfile(candidate) and not _is_same_file(candidate, elf.path) and file_crc32(candidate) == crc:
            return candidate
    return None


def _debug_candidates(
    elf: ElfFile, build_id: bytes | None, link_name: str | None, roots: tuple[str, ...] | list[str]
) -> list[str]:
    """The paths the C core's rule (core/elf_file.h fu_elf_debug_candidates) tries, in order, by
    `build_id` or by the debuglink `link_name`."""
    candidates, link_ignored = _core.elf_debug_file_candidates(
        build_id, None if link_name is None else os.fsencode(link_name), os.path.abspath(elf.path),
        os.path.realpath(elf.path), list(roots))
    if link_ignored:
        _logger().warning("%s: .gnu_debuglink name %r is not a plain file name; ignored", elf.path, link_name)
    return [path for path, _rule in candidates]


def _has_build_id(path: str, build_id: bytes | None) -> bool:
    try:
        with ElfFile.open(path) as candidate:
            return candidate.build_id == build_id
    except (OSError, ElfError) as error:
        _logger().debug("%s: not a usable debug file: %s", path, error)
        return False


def _is_same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def file_crc32(path: str) -> int | None:
    """zlib.crc32 of the whole file, computed over a read-only mapping (no Python loop)."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return zlib.crc32(b"")
            with _core.MappedFile(handle.fileno(), path) as mapping:
                crc = zlib.crc32(mapping)
                mapping.check()
                return crc
    except (OSError, ValueError, FileChangedError) as error:
        _logger().debug("%s: cannot compute CRC-32: %s", path, error)
        return None


__all__ = [
    "DEFAULT_DEBUG_ROOTS",
    "CheckedRead",
    "ElfFile",
    "Section",
    "SectionBytes",
    "Segment",
    "Symbol",
    "find_debug_file",
]
