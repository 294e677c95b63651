"""The PLT synthesizer (native/plt.c) on hand-built stubs of every layout native/plt.h lists, on
hostile input (truncated sections, bogus relocation and symbol indices, jumps to no slot), and on
real binaries linked here by bfd, lld and mold, against objdump's `<name@plt>` labels."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

from fastunwind import _core
from fastunwind.elf import ElfFile
from fastunwind.symbols import symbol_table_for_file

from tests.support.paths import SYMBOL_PROGRAMS

R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_IRELATIVE = 6, 7, 37


class Dynamic:
    """.dynsym, .dynstr and relocations, built entry by entry."""

    def __init__(self) -> None:
        self.strings = bytearray(b"\0")
        self.symbols = bytearray(24)  # the null symbol
        self.relocations = bytearray()

    def symbol(self, name: bytes) -> int:
        self.symbols += struct.pack("<IBBHQQ", len(self.strings), 0x12, 0, 0, 0, 0)
        self.strings += name + b"\0"
        return len(self.symbols) // 24 - 1

    def relocate(self, slot: int, symbol: int, kind: int = R_X86_64_JUMP_SLOT, addend: int = 0) -> None:
        self.relocations += struct.pack("<QQq", slot, symbol << 32 | kind, addend)

    def plt(self, sections: list[tuple[int, bytes, int, int, bool]]):
        return bytes(self.symbols), bytes(self.strings), [bytes(self.relocations)], sections


def jump(entry_address: int, offset_of_jump: int, slot: int) -> bytes:
    """ff 25 disp32 at entry_address + offset_of_jump, reading `slot`."""
    return b"\xff\x25" + struct.pack("<i", slot - (entry_address + offset_of_jump + 6))


ENDBR64 = b"\xf3\x0f\x1e\xfa"


def table(plt) -> _core.SymbolTable:
    return _core.SymbolTable.from_elf([], plt=plt)


def test_bfd_lazy_plt_and_plt_got():
    d = Dynamic()
    memcmp, qsort, finalize = d.symbol(b"memcmp"), d.symbol(b"qsort"), d.symbol(b"__cxa_finalize")
    header = b"\xff\x35" + bytes(4) + b"\xff\x25" + bytes(4) + b"\x0f\x1f\x40\x00"
    plt = header
    for index, slot in enumerate((0x4018, 0x4020)):
        address = 0x1020 + 16 * (index + 1)
        plt += jump(address, 0, slot) + b"\x68" + struct.pack("<I", index) + b"\xe9" + bytes(4)
    d.relocate(0x4018, memcmp)
    d.relocate(0x4020, qsort)
    d.relocate(0x3FE0, finalize, R_X86_64_GLOB_DAT)
    plt_got = jump(0x1050, 0, 0x3FE0) + b"\x66\x90"
    t = table(d.plt([(0x1020, plt, 16, 16, False), (0x1050, plt_got, 8, 8, True)]))
    assert t.lookup(0x1020) is None  # the header is not a stub
    assert t.lookup(0x1030) == ("memcmp@plt", 0)
    assert t.lookup(0x104F) == ("qsort@plt", 0xF)
    assert t.lookup(0x1057) == ("__cxa_finalize@plt", 7)
    assert t.lookup(0x1058) is None


def test_ibt_plt_sec_lld_bfd_and_mold_layouts():
    d = Dynamic()
    names = [b"strlen", b"memcmp", b"_ZNSt6vectorIiSaIiEE9push_backERKi"]
    slots = [0x3D30 + 8 * i for i in range(len(names))]
    for name, slot in zip(names, slots):
        d.relocate(slot, d.symbol(name))
    lazy = b"".join(ENDBR64 + b"\x68" + struct.pack("<I", i) + b"\xe9" + bytes(4) + b"\x66\x90" for i in range(3))
    lld_sec = b"".join(ENDBR64 + jump(0x1AE0 + 16 * i, 4, s) + b"\x66\x0f\x1f\x44\x00\x00" for i, s in enumerate(slots))
    bfd_sec = b"".join(ENDBR64 + b"\xf2" + jump(0x2AE0 + 16 * i, 5, s) + b"\x0f\x1f\x44\x00\x00" for i, s in enumerate(slots))
    mold = bytes(32) + b"".join(ENDBR64 + b"\x41\xbb" + struct.pack("<I", i) + jump(0x3A20 + 16 * i, 10, s)
                                for i, s in enumerate(slots))
    t = table(d.plt([(0x1A90, lazy, 0, 16, False), (0x1AE0, lld_sec, 0, 16, False), (0x2AE0, bfd_sec, 16, 16, False),
                     (0x3A00, mold, 0, 16, False)]))
    assert t.lookup(0x1A90) is None  # IBT's lazy entries jump to the header, through no slot
    for base in (0x1AE0, 0x2AE0, 0x3A20):
        assert t.lookup(base) == ("strlen@plt", 0)
        assert t.lookup(base + 0x13) == ("memcmp@plt", 3)
        assert t.lookup(base + 0x20) == ("std::vector<int, std::allocator<int> >::push_back@plt", 0)


def test_irelative_slots_are_named_as_objdump_names_them():
    d = Dynamic()
    d.relocate(0x5000, 0, R_X86_64_IRELATIVE, 0x9F550)
    t = table(d.plt([(0x1000, jump(0x1000, 0, 0x5000) + bytes(10), 16, 16, False)]))
    assert t.lookup(0x1000) == ("*ABS*+0x9f550@plt", 0)


def test_hostile_input_gives_fewer_names_never_a_crash():
    d = Dynamic()
    good = d.symbol(b"good")
    d.relocate(0x5000, good)
    d.relocate(0x5008, 10**6)  # a symbol index past .dynsym
    d.relocate(0x5010, 0)  # JUMP_SLOT without a symbol
    d.symbols += struct.pack("<IBBHQQ", 10**6, 0x12, 0, 0, 0, 0)  # a name past .dynstr
    d.relocate(0x5018, len(d.symbols) // 24 - 1)
    d.symbols += struct.pack("<IBBHQQ", len(d.strings), 0x12, 0, 0, 0, 0)
    d.strings += b"unterminated"  # no NUL before the end of .dynstr
    d.relocate(0x5020, len(d.symbols) // 24 - 1)
    entries = b"".join(jump(0x1000 + 16 * i, 0, 0x5000 + 8 * i) + bytes(10) for i in range(5))
    entries += jump(0x1050, 0, 0x9999) + bytes(10)  # a slot without a relocation
    t = table(d.plt([(0x1000, entries, 16, 16, False)]))
    assert t.lookup(0x1000) == ("good@plt", 0)
    assert [t.lookup(0x1000 + 16 * i) for i in range(1, 6)] == [None] * 5
    symbols, strings, relocations, sections = d.plt([(0x1000, entries, 16, 16, False)])
    # truncated everything: a partial entry, relocation or symbol is not read
    for cut in range(0, 40, 3):
        t = table((symbols[:cut], strings[:cut], [relocations[0][:cut]], [(0x1000, entries[:cut], 16, 16, False)]))
        assert len(t) <= 1
    t = table((b"", b"", [b""], [(2**64 - 16, entries[:16], 16, 16, False)]))  # addresses wrap: no slot
    assert len(t) == 0
    with pytest.raises(ValueError):
        table((symbols, strings, [relocations[0]] * 5, sections))
    with pytest.raises(TypeError):
        table((symbols, strings, relocations))


def test_symbols_of_the_file_win_over_stubs():
    """mold names its stubs memcmp$plt in .symtab; perf prints those, so do we."""
    d = Dynamic()
    d.relocate(0x5000, d.symbol(b"memcmp"))
    strings = b"\0memcmp$plt\0"
    symtab = bytes(24) + struct.pack("<IBBHQQ", 1, 0x02, 0, 1, 0x1000, 0)
    t = _core.SymbolTable.from_elf([(symtab, strings, 64, b"\0\1")],
                                   plt=d.plt([(0x1000, jump(0x1000, 0, 0x5000) + bytes(10), 16, 16, False)]))
    assert t.lookup(0x1004) == ("memcmp$plt", 4)


LINKERS = {"bfd": [], "lld": ["-fuse-ld=lld"], "mold": ["-fuse-ld=mold"]}
LAYOUTS = {"lazy": [], "ibt": ["-fcf-protection", "-Wl,-z,ibtplt"], "now": ["-Wl,-z,now"]}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("linker", sorted(LINKERS))
def test_real_stubs_match_objdump(tmp_path, linker, layout):
    if shutil.which("gcc") is None or shutil.which("objdump") is None:
        pytest.skip("gcc and objdump (binutils) are needed")
    if linker != "bfd" and shutil.which({"lld": "ld.lld", "mold": "mold"}[linker]) is None:
        pytest.skip(f"{linker} is not installed")
    flags = LAYOUTS[layout] + LINKERS[linker]
    if linker == "lld" and layout == "ibt":
        flags = ["-fcf-protection", "-fuse-ld=lld", "-Wl,-z,force-ibt"]
    binary = tmp_path / "plt"
    subprocess.run(["gcc", "-O2", *flags, "-o", binary, SYMBOL_PROGRAMS / "plt_calls.c"], check=True, capture_output=True)
    labels = {}
    for line in subprocess.run(["objdump", "-d", binary], check=True, capture_output=True, text=True).stdout.splitlines():
        match = re.fullmatch(r"([0-9a-f]+) <(.+@plt)>:", line)
        if match:
            labels[int(match[1], 16)] = match[2]
    assert labels, "objdump names no stub"
    with ElfFile.open(str(binary)) as elf:
        t = symbol_table_for_file(elf)
    for address, name in labels.items():
        found = t.lookup(address)
        # mold's own .symtab names (memcmp$plt, __cxa_finalize$pltgot) win, as they do in perf
        mold_names = (name.replace("@plt", "$plt"), name.replace("@plt", "$pltgot"))
        assert found == (name, 0) or (linker == "mold" and found[0] in mold_names), hex(address)
