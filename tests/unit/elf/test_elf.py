"""Tests of the ELF reader (src/fastunwind/elf.py).

Layers, in order: real system files against `readelf` (sections, segments, symbols, build-id);
small programs and objects built here with gcc/as/objcopy, compared with `readelf -x`, `readelf -z -x`
and `readelf -z -R` (decompression, relocation exactly as binutils 2.40 applies it); separate debug
file lookup in a temporary tree; hostile input (hand-patched headers, truncation at many lengths,
seeded random byte flips) that must raise ElfError and nothing else.

Set FASTUNWIND_FUZZ_SEED to replay a fuzz run; the seed used is printed (shown by pytest on failure).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time
import types
import zlib
from pathlib import Path

import pytest

from fastunwind.elf import (
    EM_386,
    EM_X86_64,
    SHF_COMPRESSED,
    SHT_NOBITS,
    SHT_REL,
    SHT_RELA,
    ElfFile,
    Section,
    find_debug_file,
)
from fastunwind.errors import ElfError

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBLLVM = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
TOOLS = ("gcc", "as", "ld", "readelf", "objcopy")

needs_tools = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in TOOLS), reason="needs gcc, as, ld, readelf, objcopy"
)
needs_libc = pytest.mark.skipif(not os.path.exists(LIBC), reason=f"needs {LIBC}")


# --- oracles: readelf output, parsed ----------------------------------------------------------------


def run(*command: str | os.PathLike[str]) -> str:
    """stdout of a tool, in the C locale so readelf's output can be parsed."""
    return subprocess.run(
        [os.fspath(part) for part in command],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},
        stdin=subprocess.DEVNULL,
    ).stdout


def readelf_hex_dump(path: Path | str, section: str, *options: str) -> bytes:
    """Bytes of `readelf <options> -x/-R section path` output ("  0xADDR 4 groups of 8 hex  ASCII")."""
    data = bytearray()
    for line in run("readelf", *options, section, path).splitlines():
        match = re.match(r"^  0x[0-9a-f]+ (.*)$", line)
        if match:
            # 16 bytes as hex, a space after every 4 bytes: 36 columns, then the ASCII column.
            data += bytes.fromhex(match.group(1)[:36])
    return bytes(data)


SECTION_TYPE_NAMES = {
    "NULL": 0, "PROGBITS": 1, "SYMTAB": 2, "STRTAB": 3, "RELA": 4, "HASH": 5, "DYNAMIC": 6,
    "NOTE": 7, "NOBITS": 8, "REL": 9, "DYNSYM": 11, "INIT_ARRAY": 14, "FINI_ARRAY": 15,
    "PREINIT_ARRAY": 16, "GROUP": 17, "GNU_HASH": 0x6FFFFFF6, "VERDEF": 0x6FFFFFFD,
    "VERNEED": 0x6FFFFFFE, "VERSYM": 0x6FFFFFFF, "X86_64_UNWIND": 0x70000001,
}  # fmt: skip
SECTION_FLAG_LETTERS = {
    "W": 0x1, "A": 0x2, "X": 0x4, "M": 0x10, "S": 0x20, "I": 0x40, "L": 0x80, "O": 0x100,
    "G": 0x200, "T": 0x400, "C": 0x800, "E": 0x80000000,
}  # fmt: skip


def readelf_sections(path: Path | str) -> list[dict]:
    rows = []
    for line in run("readelf", "-S", "-W", path).splitlines():
        match = re.match(r"^\s*\[\s*(\d+)\] (.*)$", line)
        if not match:
            continue
        rest = match.group(2)
        tokens = rest.split()
        # The name column is empty for section 0 (and any unnamed section): the line has a blank there.
        name = "" if rest.startswith(" ") else tokens.pop(0)
        type_name, address, offset, size, entsize = tokens[:5]
        tail = tokens[5:]
        flags = tail.pop(0) if len(tail) == 4 else ""
        link, info, align = (int(value) for value in tail)
        rows.append(
            dict(index=int(match.group(1)), name=name, type_name=type_name, addr=int(address, 16),
                 offset=int(offset, 16), size=int(size, 16), entsize=int(entsize, 16), flags=flags,
                 link=link, info=info, addralign=align)
        )  # fmt: skip
    return rows


SEGMENT_TYPE_NAMES = {
    "NULL": 0, "LOAD": 1, "DYNAMIC": 2, "INTERP": 3, "NOTE": 4, "SHLIB": 5, "PHDR": 6, "TLS": 7,
    "GNU_EH_FRAME": 0x6474E550, "GNU_STACK": 0x6474E551, "GNU_RELRO": 0x6474E552,
    "GNU_PROPERTY": 0x6474E553,
}  # fmt: skip


def readelf_segments(path: Path | str) -> list[dict]:
    rows = []
    pattern = re.compile(
        r"^  (\S+)\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x([0-9a-f]+) 0x([0-9a-f]+) 0x([0-9a-f]+) (.{3}) "
        r"0x([0-9a-f]+)$"
    )
    for line in run("readelf", "-l", "-W", path).splitlines():
        match = pattern.match(line)
        if match:
            type_name, offset, vaddr, paddr, filesz, memsz, flags, align = match.groups()
            rows.append(
                dict(type_name=type_name, offset=int(offset, 16), vaddr=int(vaddr, 16),
                     paddr=int(paddr, 16), filesz=int(filesz, 16), memsz=int(memsz, 16),
                     flags=(4 if flags[0] == "R" else 0) | (2 if flags[1] == "W" else 0)
                     | (1 if flags[2] == "E" else 0), align=int(align, 16))
            )  # fmt: skip
    return rows


SYMBOL_TYPE_NAMES = {
    "NOTYPE": 0, "OBJECT": 1, "FUNC": 2, "SECTION": 3, "FILE": 4, "COMMON": 5, "TLS": 6, "IFUNC": 10,
}  # fmt: skip
SYMBOL_BIND_NAMES = {"LOCAL": 0, "GLOBAL": 1, "WEAK": 2, "UNIQUE": 10}
SYMBOL_INDEX_NAMES = {"UND": 0, "ABS": 0xFFF1, "COM": 0xFFF2}


def readelf_symbols(path: Path | str) -> tuple[int, list[dict]]:
    """(sum of the "contains N entries" counts, every symbol row in order)."""
    declared = 0
    rows = []
    row_pattern = re.compile(r"^\s*(\d+): ([0-9a-f]+)\s+(\S+) (\S+)\s+(\S+)\s+(\S+)\s+(\S+) ?(.*)$")
    for line in run("readelf", "-s", "-W", path).splitlines():
        header = re.match(r"^Symbol table '.*' contains (\d+) entr", line)
        if header:
            declared += int(header.group(1))
            continue
        match = row_pattern.match(line)
        if match:
            _number, value, size, type_name, bind, _visibility, index, name = match.groups()
            rows.append(
                dict(value=int(value, 16), size=int(size, 0), type_name=type_name, bind_name=bind,
                     index_name=index, name=re.sub(r"@.*$", "", name.split(" ")[0]))
            )  # fmt: skip
    return declared, rows


# --- what every ElfFile must survive ---------------------------------------------------------------


def exercise(elf: ElfFile) -> None:
    """Call every query; each may raise ElfError (the caller checks that nothing else escapes)."""

    def attempt(call, *arguments, **keywords):
        try:
            result = call(*arguments, **keywords)
            if isinstance(result, memoryview):
                bytes(result[:16])
                result.release()
        except ElfError as error:
            assert elf.path in str(error), f"error message does not name the file: {error}"

    for section in elf.sections:
        attempt(elf.section_data, section)
        attempt(elf.relocated_section_data, section, strict=bool(section.index % 2))
    attempt(elf.symbols)
    attempt(lambda: elf.build_id)
    attempt(lambda: elf.debuglink)
    attempt(lambda: (elf.first_load_vaddr, elf.text_section_addr, elf.section(".debug_frame")))


def open_or_error(data: bytes | bytearray | memoryview, name: str) -> ElfFile | None:
    try:
        return ElfFile.from_bytes(data, name)
    except ElfError as error:
        assert name in str(error)
        return None


# --- programs and objects built for the tests -------------------------------------------------------

PROGRAM_SOURCE = r"""
#include <stdio.h>
#include <string.h>
static int table[] = {1, 2, 3, 4};
int *table_pointer = table;
const char *greeting = "hello";
__attribute__((noinline)) static long recurse(long n) {
    return n <= 1 ? 1 : n * recurse(n - 1) + table[n & 3];
}
__attribute__((noinline)) int with_alloca(int n) {
    char *buffer = __builtin_alloca(n + 16);
    memset(buffer, n, n + 16);
    return buffer[n / 2] + (int)recurse(n);
}
int main(int argc, char **argv) {
    (void)argv;
    printf("%s %d\n", greeting, with_alloca(argc + 3));
    return 0;
}
"""

OTHER_SOURCE = "int other(int x) { return x * 7; }\nint main(void) { return other(1); }\n"

# Every x86-64 relocation kind readelf applies, and the cases it skips (32S: unknown to readelf;
# symbols of type IFUNC and TLS: "unexpected symbol type"). The expected bytes come from readelf -R.
RELOCATIONS_X86_64 = r"""
    .text
    .globl foo
    .type foo,@function
foo: ret
    .size foo, .-foo
bar: nop
    ret
    .globl ifn
    .type ifn,@gnu_indirect_function
ifn: ret
    .section .tbss,"awT",@nobits
    .globl tlsvar
    .type tlsvar,@object
tlsvar: .zero 4
    .section .mydata,"a"
    .quad foo + 5
    .long foo
    .long foo - .
    .long bar - .
    .reloc ., R_X86_64_32S, foo+3
    .long 0x11111111
    .reloc ., R_X86_64_NONE, foo
    .long 0x22222222
    .reloc ., R_X86_64_64, ifn
    .quad 0x3333
    .reloc ., R_X86_64_32, tlsvar
    .long 0x4444
    .long undefined_sym + 7
    .reloc ., R_X86_64_PC32, bar
    .long 0
"""
# PC64 cannot be represented in x32 objects, so it is only in the ELF64 variant.
RELOCATIONS_X86_64_PC64 = """
    .quad foo - .
    .reloc ., R_X86_64_PC64, bar+2
    .quad 0
"""

# i386 uses SHT_REL: the addend is in place.
RELOCATIONS_I386 = r"""
    .text
    .globl foo
foo: ret
bar: nop
    ret
    .section .mydata,"a"
    .long foo + 0x10
    .long foo - .
    .long bar - . + 4
    .reloc ., R_386_16, foo
    .long 0x5555
    .reloc ., R_386_NONE, foo
    .long 0x6666
"""

START_I386 = r"""
    .text
    .globl _start
_start:
    movl $1, %eax
    int $0x80
    .data
value: .long _start
"""


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> types.SimpleNamespace:
    if any(shutil.which(tool) is None for tool in TOOLS):
        pytest.skip("needs gcc, as, ld, readelf, objcopy")
    directory = tmp_path_factory.mktemp("elf")
    source = directory / "program.c"
    source.write_text(PROGRAM_SOURCE)
    paths = types.SimpleNamespace(directory=directory)

    def path(name: str) -> Path:
        result = directory / name
        setattr(paths, name.replace(".", "_").replace("-", "_"), result)
        return result

    run("gcc", "-g", "-O2", "-Wl,--build-id", source, "-o", path("program"))
    run("gcc", "-O2", "-no-pie", source, "-o", path("program-nopie"))
    run("gcc", "-O2", "-c", source, "-o", path("eh_frame.o"))
    run("gcc", "-g", "-O2", "-fno-asynchronous-unwind-tables", "-c", source, "-o", path("debug_frame.o"))
    run("gcc", "-g", "-gz", "-O2", "-fno-asynchronous-unwind-tables", "-c", source, "-o", path("gz.o"))
    run("objcopy", "--compress-debug-sections=zlib", paths.program, path("program-zlib"))
    run("objcopy", "--compress-debug-sections=zlib-gnu", paths.program, path("program-zlib-gnu"))
    try:
        run("objcopy", "--compress-debug-sections=zstd", paths.program, path("program-zstd"))
    except subprocess.CalledProcessError:
        paths.program_zstd = None
    (directory / "relocations64.s").write_text(RELOCATIONS_X86_64 + RELOCATIONS_X86_64_PC64)
    (directory / "relocations_x32.s").write_text(RELOCATIONS_X86_64)
    (directory / "relocations32.s").write_text(RELOCATIONS_I386)
    (directory / "start32.s").write_text(START_I386)
    run("as", directory / "relocations64.s", "-o", path("relocations64.o"))
    run("as", "--x32", directory / "relocations_x32.s", "-o", path("relocations_x32.o"))
    run("as", "--32", directory / "relocations32.s", "-o", path("relocations32.o"))
    run("as", "--32", directory / "start32.s", "-o", directory / "start32.o")
    run("ld", "-m", "elf_i386", directory / "start32.o", "-o", path("exec32"))
    return paths


def built_files(built: types.SimpleNamespace) -> list[Path]:
    names = [
        "program", "program_nopie", "eh_frame_o", "debug_frame_o", "gz_o", "program_zlib",
        "program_zlib_gnu", "program_zstd", "relocations64_o", "relocations_x32_o", "relocations32_o",
        "exec32",
    ]  # fmt: skip
    return [getattr(built, name) for name in names if getattr(built, name) is not None]


# --- real files against readelf -----------------------------------------------------------------------


def check_against_readelf(path: Path | str) -> None:
    with ElfFile.open(path) as elf:
        expected_sections = readelf_sections(path)
        assert len(elf.sections) == len(expected_sections)
        for section, expected in zip(elf.sections, expected_sections):
            assert section.index == expected["index"]
            assert section.name == expected["name"]
            assert (section.addr, section.offset, section.size, section.entsize) == (
                expected["addr"], expected["offset"], expected["size"], expected["entsize"],
            ), section  # fmt: skip
            assert (section.link, section.info, section.addralign) == (
                expected["link"], expected["info"], expected["addralign"],
            ), section  # fmt: skip
            if expected["type_name"] in SECTION_TYPE_NAMES:
                assert section.type == SECTION_TYPE_NAMES[expected["type_name"]], section
            if set(expected["flags"]) <= set(SECTION_FLAG_LETTERS):
                letters = {letter for letter, bit in SECTION_FLAG_LETTERS.items() if section.flags & bit}
                assert letters == set(expected["flags"]), section
        expected_segments = readelf_segments(path)
        assert len(elf.segments) == len(expected_segments)
        for segment, expected in zip(elf.segments, expected_segments):
            assert (segment.offset, segment.vaddr, segment.paddr, segment.filesz, segment.memsz) == (
                expected["offset"], expected["vaddr"], expected["paddr"], expected["filesz"],
                expected["memsz"],
            ), segment  # fmt: skip
            assert (segment.flags, segment.align) == (expected["flags"], expected["align"]), segment
            if expected["type_name"] in SEGMENT_TYPE_NAMES:
                assert segment.type == SEGMENT_TYPE_NAMES[expected["type_name"]], segment
        declared, expected_symbols = readelf_symbols(path)
        symbols = elf.symbols()
        assert len(symbols) == declared == len(expected_symbols)
        for number, (symbol, expected) in enumerate(zip(symbols, expected_symbols)):
            assert (symbol.value, symbol.size) == (expected["value"], expected["size"]), (number, symbol)
            # readelf shows the section's name for an unnamed STT_SECTION symbol
            name = symbol.name
            is_section_symbol = symbol.type == SYMBOL_TYPE_NAMES["SECTION"]
            if not name and is_section_symbol and symbol.section_index < len(elf.sections):
                name = elf.sections[symbol.section_index].name
            assert name.split("@")[0] == expected["name"], (path, number, symbol)
            if expected["type_name"] in SYMBOL_TYPE_NAMES:
                assert symbol.type == SYMBOL_TYPE_NAMES[expected["type_name"]], (number, symbol)
            if expected["bind_name"] in SYMBOL_BIND_NAMES:
                assert symbol.bind == SYMBOL_BIND_NAMES[expected["bind_name"]], (number, symbol)
            index_name = expected["index_name"]
            expected_index = SYMBOL_INDEX_NAMES.get(index_name)
            if expected_index is None:
                expected_index = int(index_name)
            assert symbol.section_index == expected_index, (path, number, symbol)


@needs_libc
def test_libc_matches_readelf() -> None:
    check_against_readelf(LIBC)


@needs_libc
def test_libc_build_id_matches_readelf_notes() -> None:
    match = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", LIBC))
    assert match is not None
    with ElfFile.open(LIBC) as elf:
        assert elf.build_id_hex == match.group(1)
        assert elf.build_id == bytes.fromhex(match.group(1))
        assert elf.elf_class == 64 and elf.elf_type == "DYN" and elf.machine == EM_X86_64
        assert elf.first_load_vaddr == 0
        text = [row for row in readelf_sections(LIBC) if row["name"] == ".text"][0]
        assert elf.text_section_addr == text["addr"]
        header = run("readelf", "-h", LIBC)
        assert elf.entry == int(re.search(r"Entry point address:\s+(0x[0-9a-f]+)", header).group(1), 16)


@needs_tools
def test_built_files_match_readelf(built: types.SimpleNamespace) -> None:
    for path in built_files(built):
        check_against_readelf(path)


@needs_tools
def test_elf32_header_fields(built: types.SimpleNamespace) -> None:
    with ElfFile.open(built.exec32) as elf:
        assert (elf.elf_class, elf.elf_type, elf.machine) == (32, "EXEC", EM_386)
        assert elf.entry == elf.text_section_addr
        assert elf.first_load_vaddr == 0x8048000
    with ElfFile.open(built.relocations_x32_o) as elf:
        assert (elf.elf_class, elf.elf_type, elf.machine) == (32, "REL", EM_X86_64)


@needs_tools
def test_first_load_vaddr_of_position_dependent_program(built: types.SimpleNamespace) -> None:
    with ElfFile.open(built.program_nopie) as elf:
        assert elf.elf_type == "EXEC"
        assert elf.first_load_vaddr == 0x400000
    with ElfFile.open(built.program) as elf:
        assert elf.elf_type == "DYN"
        assert elf.first_load_vaddr == 0


@pytest.mark.skipif(not os.path.exists(LIBLLVM), reason=f"needs {LIBLLVM}")
def test_large_library_opens_without_reading_it() -> None:
    started = time.perf_counter()
    with ElfFile.open(LIBLLVM) as elf:
        eh_frame = elf.section(".eh_frame")
        assert eh_frame is not None
        data = elf.section_data(eh_frame)
        assert isinstance(data, memoryview) and len(data) == eh_frame.size  # zero copy
        assert elf.build_id is not None
        del data
    assert time.perf_counter() - started < 1.0


@needs_libc
def test_lifetime() -> None:
    elf = ElfFile.open(LIBC)
    view = elf.section_data(elf.section(".eh_frame"))
    elf.close()  # a view is still alive: close must not fail
    assert bytes(view[:4]) != b""
    elf.close()
    with pytest.raises(ValueError):
        elf.section_data(elf.section(".eh_frame"))
    with ElfFile.open(LIBC) as elf:
        assert elf.section(".no_such_section") is None
        assert elf.section_data(elf.section(".bss")) == b""  # SHT_NOBITS


# --- compressed sections ----------------------------------------------------------------------------


def debug_sections(elf: ElfFile) -> list[Section]:
    return [section for section in elf.sections if section.name.startswith((".debug", ".zdebug"))]


@needs_tools
@pytest.mark.parametrize("variant", ["program_zlib", "program_zlib_gnu", "program_zstd"])
def test_compressed_sections_equal_uncompressed(built: types.SimpleNamespace, variant: str) -> None:
    path = getattr(built, variant)
    if path is None:
        pytest.skip("objcopy cannot write zstd")
    if variant == "program_zstd":
        pytest.importorskip("zstandard")
    with ElfFile.open(built.program) as plain, ElfFile.open(path) as compressed:
        sections = debug_sections(compressed)
        assert sections
        # objcopy leaves a section uncompressed when compression does not make it smaller
        if variant == "program_zlib_gnu":
            assert sum(section.name.startswith(".zdebug") for section in sections) >= 4
        else:
            assert sum(section.is_compressed for section in sections) >= 4
        for section in sections:
            original = plain.section(section.name.replace(".zdebug", ".debug", 1))
            assert bytes(compressed.section_data(section)) == bytes(plain.section_data(original)), (
                section
            )
            # section(".debug_x") finds ".zdebug_x" too
            assert compressed.section(original.name) is not None
        # and against readelf's own decompression
        info = compressed.section(".debug_info")
        assert bytes(compressed.section_data(info)) == readelf_hex_dump(path, info.name, "-z", "-x")


@needs_tools
def test_zstd_without_zstandard_module_says_what_to_install(
    built: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    if built.program_zstd is None:
        pytest.skip("objcopy cannot write zstd")
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard -> ImportError
    with ElfFile.open(built.program_zstd) as elf:
        with pytest.raises(ElfError, match=r"install fastunwind\[zstd\]"):
            elf.section_data(elf.section(".debug_info"))


# --- relocations, against readelf -R ------------------------------------------------------------------


def relocated_sections(elf: ElfFile) -> list[Section]:
    targets = {section.info for section in elf.sections if section.type in (SHT_RELA, SHT_REL)}
    return [elf.sections[index] for index in sorted(targets)]


@needs_tools
@pytest.mark.parametrize(
    "name",
    ["eh_frame_o", "debug_frame_o", "gz_o", "relocations64_o", "relocations_x32_o", "relocations32_o"],
)
def test_relocated_data_matches_readelf(built: types.SimpleNamespace, name: str) -> None:
    path = getattr(built, name)
    with ElfFile.open(path) as elf:
        sections = relocated_sections(elf)
        names = {section.name for section in sections}
        if name == "eh_frame_o":
            assert ".eh_frame" in names
        if name in ("debug_frame_o", "gz_o"):
            assert ".debug_frame" in names and ".eh_frame" not in names
        for section in sections:
            if section.type == SHT_NOBITS or section.size == 0:
                continue
            expected = readelf_hex_dump(path, section.name, "-z", "-R")
            actual = elf.relocated_section_data(section)
            assert bytes(actual) == expected, f"{path} {section.name}"
            assert bytes(elf.section_data(section)) == readelf_hex_dump(path, section.name, "-z", "-x")


@needs_tools
def test_relocations_readelf_skips_raise_in_strict_mode(built: types.SimpleNamespace) -> None:
    with ElfFile.open(built.relocations64_o) as elf:
        with pytest.raises(ElfError, match=r"relocation type 11 "):  # R_X86_64_32S
            elf.relocated_section_data(elf.section(".mydata"), strict=True)
    with ElfFile.open(built.relocations32_o) as elf:
        with pytest.raises(ElfError, match=r"relocation type 20 "):  # R_386_16
            elf.relocated_section_data(elf.section(".mydata"), strict=True)


@needs_tools
def test_non_relocatable_files_are_returned_unchanged(built: types.SimpleNamespace) -> None:
    with ElfFile.open(built.program) as elf:
        eh_frame = elf.section(".eh_frame")
        assert bytes(elf.relocated_section_data(eh_frame)) == bytes(elf.section_data(eh_frame))


def section_header_offset(image: bytes | bytearray, index: int) -> int:
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    return shoff + index * 64


@needs_tools
def test_patched_relocations_match_readelf(built: types.SimpleNamespace, tmp_path: Path) -> None:
    """Relocations readelf skips (offset past the section, symbol index past the table): same bytes."""
    image = bytearray(built.relocations64_o.read_bytes())
    elf = ElfFile.from_bytes(bytes(image))
    relocation_section = elf.section(".rela.mydata")
    target = elf.section(".mydata")
    # relocation 0: r_offset = size of the section - 2 (an 8-byte write would overrun)
    struct.pack_into("<Q", image, relocation_section.offset, target.size - 2)
    # relocation 1: symbol index 0x999
    (info,) = struct.unpack_from("<Q", image, relocation_section.offset + 24 + 8)
    new_info = (0x999 << 32) | (info & 0xFFFFFFFF)
    struct.pack_into("<Q", image, relocation_section.offset + 24 + 8, new_info)
    patched = tmp_path / "patched.o"
    patched.write_bytes(image)
    with ElfFile.open(patched) as elf:
        assert bytes(elf.relocated_section_data(elf.section(".mydata"))) == readelf_hex_dump(
            patched, ".mydata", "-R"
        )
        with pytest.raises(ElfError, match=r"offset 0x3e \+ 0x8 bytes is outside"):
            elf.relocated_section_data(elf.section(".mydata"), strict=True)


# --- separate debug files ---------------------------------------------------------------------------


@pytest.fixture()
def stripped_program(built: types.SimpleNamespace, tmp_path: Path) -> types.SimpleNamespace:
    """program.stripped with a .gnu_debuglink to program.debug, in tmp_path/bin; a debug root."""
    binary_directory = tmp_path / "bin"
    binary_directory.mkdir()
    debug = tmp_path / "program.debug"
    run("objcopy", "--only-keep-debug", built.program, debug)
    stripped = binary_directory / "program.stripped"
    run("objcopy", "--strip-debug", f"--add-gnu-debuglink={debug}", built.program, stripped)
    root = tmp_path / "debugroot"
    root.mkdir()
    return types.SimpleNamespace(debug=debug, stripped=stripped, directory=binary_directory, root=root)


@needs_tools
def test_debuglink_fields(stripped_program: types.SimpleNamespace) -> None:
    with ElfFile.open(stripped_program.stripped) as elf:
        name, crc = elf.debuglink
        assert name == "program.debug"
        assert crc == zlib.crc32(stripped_program.debug.read_bytes())
        assert elf.section(".debug_info") is None


@needs_tools
@pytest.mark.parametrize("layout", ["same directory", ".debug directory", "root + directory"])
def test_find_debug_file_by_debuglink(stripped_program: types.SimpleNamespace, layout: str) -> None:
    if layout == "same directory":
        destination = stripped_program.directory / "program.debug"
    elif layout == ".debug directory":
        destination = stripped_program.directory / ".debug" / "program.debug"
    else:
        relative_directory = str(stripped_program.directory).lstrip("/")
        destination = stripped_program.root / relative_directory / "program.debug"
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(stripped_program.debug, destination)
    with ElfFile.open(stripped_program.stripped) as elf:
        assert find_debug_file(elf, roots=(str(stripped_program.root),)) == str(destination)
        # a wrong CRC is not accepted
        destination.write_bytes(stripped_program.debug.read_bytes() + b"\0")
        assert find_debug_file(elf, roots=(str(stripped_program.root),)) is None


@needs_tools
def test_find_debug_file_by_build_id(
    stripped_program: types.SimpleNamespace, built: types.SimpleNamespace, tmp_path: Path
) -> None:
    with ElfFile.open(stripped_program.stripped) as elf:
        build_id = elf.build_id_hex
        assert build_id is not None and len(build_id) == 40
        destination = stripped_program.root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
        destination.parent.mkdir(parents=True)
        # A file at the build-id path whose own build-id differs is refused.
        other_source = tmp_path / "other.c"
        other_source.write_text(OTHER_SOURCE)
        run("gcc", "-g", "-Wl,--build-id", other_source, "-o", destination)
        assert find_debug_file(elf, roots=(str(stripped_program.root),)) is None
        shutil.copy(stripped_program.debug, destination)
        roots = (str(tmp_path / "nowhere"), str(stripped_program.root))
        assert find_debug_file(elf, roots=roots) == str(destination)
        with ElfFile.open(find_debug_file(elf, roots=(str(stripped_program.root),))) as debug:
            assert debug.build_id == elf.build_id
            assert debug.section(".debug_info") is not None


@needs_libc
def test_find_installed_libc_debug_file() -> None:
    with ElfFile.open(LIBC) as elf:
        expected = f"/usr/lib/debug/.build-id/{elf.build_id_hex[:2]}/{elf.build_id_hex[2:]}.debug"
        if not os.path.exists(expected):
            pytest.skip("libc6-dbg is not installed")
        found = find_debug_file(elf)
        assert found == expected
        with ElfFile.open(found) as debug:
            assert debug.build_id == elf.build_id


# --- hostile input -------------------------------------------------------------------------------------


def expect_elf_error(data: bytes | bytearray, match: str) -> ElfError:
    with pytest.raises(ElfError, match=match) as caught:
        elf = ElfFile.from_bytes(bytes(data), "hostile.so")
        exercise_strict(elf)
    assert "hostile.so" in str(caught.value)
    return caught.value


def exercise_strict(elf: ElfFile) -> None:
    for section in elf.sections:
        elf.section_data(section)
    elf.symbols()
    elf.build_id


@needs_tools
def test_bad_headers(built: types.SimpleNamespace) -> None:
    original = built.program.read_bytes()
    size = len(original)

    def patched(offset: int, fmt: str, value: int) -> bytearray:
        image = bytearray(original)
        struct.pack_into(fmt, image, offset, value)
        return image

    expect_elf_error(b"", r"too short for e_ident")
    expect_elf_error(b"MZ" + original[2:], r"not an ELF file")
    expect_elf_error(original[:0x20], r"ELF header at offset 0x10")
    expect_elf_error(patched(4, "<B", 3), r"bad EI_CLASS at offset 0x4: 0x3")
    expect_elf_error(patched(5, "<B", 2), r"big-endian")
    expect_elf_error(patched(0x28, "<Q", size), r"section header 0 \(e_shoff\) at offset 0x%x" % size)
    expect_elf_error(patched(0x28, "<Q", 1 << 63), r"e_shoff")
    expect_elf_error(patched(0x28, "<Q", size - 100), r"section header table .* extends beyond")
    expect_elf_error(patched(0x3C, "<H", 0xFFF0), r"section header table \(0xfff0 entries")
    expect_elf_error(patched(0x3A, "<H", 40), r"bad e_shentsize 0x28")
    expect_elf_error(patched(0x3E, "<H", 0x9999), r"e_shstrndx\) 0x9999")
    expect_elf_error(patched(0x20, "<Q", size - 8), r"program header table")
    expect_elf_error(patched(0x38, "<H", 0x7FFF), r"program header table")
    # e_shnum = 0: the count comes from section 0's sh_size (0 here), so e_shstrndx is out of range
    expect_elf_error(patched(0x3C, "<H", 0), r"not below the section count 0x0")
    # e_shstrndx = SHN_XINDEX: the index comes from section 0's sh_link (0 here): no names at all
    elf = ElfFile.from_bytes(bytes(patched(0x3E, "<H", 0xFFFF)))
    assert {section.name for section in elf.sections} == {""}


@needs_tools
def test_bad_sections(built: types.SimpleNamespace) -> None:
    original = built.program.read_bytes()
    elf = ElfFile.from_bytes(original)
    eh_frame = elf.section(".eh_frame")
    header = section_header_offset(original, eh_frame.index)

    image = bytearray(original)
    struct.pack_into("<Q", image, header + 24, len(original) - 16)  # sh_offset near EOF
    error = expect_elf_error(image, r"'\.eh_frame' at offset 0x%x with size 0x%x extends beyond the end"
                             % (len(original) - 16, eh_frame.size))  # fmt: skip
    assert "hostile.so" in str(error)

    image = bytearray(original)
    struct.pack_into("<Q", image, header + 32, 1 << 62)  # sh_size huge
    expect_elf_error(image, r"\.eh_frame")

    image = bytearray(original)
    struct.pack_into("<I", image, header, 0xFFFFFF)  # sh_name outside .shstrtab
    expect_elf_error(image, r"name of section \[%d\].*string offset 0xffffff" % eh_frame.index)

    symtab = elf.section(".symtab")
    image = bytearray(original)
    struct.pack_into("<Q", image, section_header_offset(original, symtab.index) + 56, 7)  # sh_entsize
    expect_elf_error(image, r"bad sh_entsize 0x7")
    image = bytearray(original)
    struct.pack_into("<I", image, section_header_offset(original, symtab.index) + 40, 0x7777)  # sh_link
    expect_elf_error(image, r"sh_link\) 0x7777")

    # an unterminated section name table
    shstrtab = elf.sections[struct.unpack_from("<H", original, 0x3E)[0]]
    image = bytearray(original)
    image[shstrtab.offset : shstrtab.offset + shstrtab.size] = b"x" * shstrtab.size
    expect_elf_error(image, r"not NUL-terminated")

    # a note whose n_descsz overruns the section
    build_id_section = elf.section(".note.gnu.build-id")
    image = bytearray(original)
    struct.pack_into("<I", image, build_id_section.offset + 4, 0x1000)
    expect_elf_error(image, r"n_descsz 0x1000 overruns")


@needs_tools
def test_bad_compression_headers(built: types.SimpleNamespace) -> None:
    original = built.program_zlib.read_bytes()
    elf = ElfFile.from_bytes(original)
    info = elf.section(".debug_info")
    assert info.flags & SHF_COMPRESSED
    declared_size = struct.unpack_from("<Q", original, info.offset + 8)[0]

    def patched(offset: int, fmt: str, value: int) -> bytearray:
        image = bytearray(original)
        struct.pack_into(fmt, image, info.offset + offset, value)
        return image

    expect_elf_error(patched(0, "<I", 7), r"unknown compression type \(ch_type\) 0x7")
    expect_elf_error(patched(8, "<Q", declared_size + 1), r"declared size 0x%x: got 0x%x bytes" % (
        declared_size + 1, declared_size))  # fmt: skip
    expect_elf_error(
        patched(8, "<Q", declared_size - 1), r"got more than 0x%x bytes" % (declared_size - 1)
    )
    expect_elf_error(patched(8, "<Q", 1 << 40), r"exceeds the limit")
    expect_elf_error(patched(24, "<I", 0xDEADBEEF), r"corrupt zlib data")
    # the compressed stream cut short: sh_size - 4
    image = bytearray(original)
    struct.pack_into("<Q", image, section_header_offset(original, info.index) + 32, info.size - 4)
    expect_elf_error(image, r"zlib stream truncated")
    # a section too small for its compression header
    image = bytearray(original)
    struct.pack_into("<Q", image, section_header_offset(original, info.index) + 32, 10)
    expect_elf_error(image, r"too small for a compression header")

    gnu = built.program_zlib_gnu.read_bytes()
    zdebug_info = ElfFile.from_bytes(gnu).section(".zdebug_info")
    image = bytearray(gnu)
    struct.pack_into(">Q", image, zdebug_info.offset + 4, 3)
    expect_elf_error(image, r"\.zdebug_info.*got more than 0x3 bytes")
    image = bytearray(gnu)
    struct.pack_into("<Q", image, section_header_offset(gnu, zdebug_info.index) + 32, 6)
    expect_elf_error(image, r"too small for its 'ZLIB' header")

    if built.program_zstd is not None and _has_zstandard():
        zstd = built.program_zstd.read_bytes()
        zstd_info = ElfFile.from_bytes(zstd).section(".debug_info")
        image = bytearray(zstd)
        struct.pack_into("<Q", image, zstd_info.offset + 8, 5)
        expect_elf_error(image, r"got more than 0x5 bytes")
        image = bytearray(zstd)
        image[zstd_info.offset + 24 : zstd_info.offset + 28] = b"\xff\xff\xff\xff"
        expect_elf_error(image, r"corrupt zstd data")


def _has_zstandard() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


@needs_tools
def test_debuglink_malformed(built: types.SimpleNamespace, tmp_path: Path) -> None:
    stripped = tmp_path / "stripped"
    run("objcopy", "--strip-debug", f"--add-gnu-debuglink={built.program}", built.program, stripped)
    original = stripped.read_bytes()
    section = ElfFile.from_bytes(original).section(".gnu_debuglink")
    image = bytearray(original)
    image[section.offset : section.offset + section.size] = b"a" * section.size
    with pytest.raises(ElfError, match="not NUL-terminated"):
        ElfFile.from_bytes(bytes(image)).debuglink
    image = bytearray(original)
    struct.pack_into("<Q", image, section_header_offset(original, section.index) + 32, 9)
    with pytest.raises(ElfError, match="no room for the CRC"):
        ElfFile.from_bytes(bytes(image)).debuglink


def test_open_rejects_non_regular_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ElfError, match="not a regular file"):
        ElfFile.open(tmp_path)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(ElfError, match=r"empty file"):
        ElfFile.open(empty)
    with pytest.raises(FileNotFoundError):
        ElfFile.open(tmp_path / "missing")


def fuzz_seed() -> int:
    seed = int(os.environ.get("FASTUNWIND_FUZZ_SEED", random.randrange(1 << 32)))
    print(f"fuzz seed: FASTUNWIND_FUZZ_SEED={seed}")
    return seed


@needs_tools
def test_truncated_files(built: types.SimpleNamespace, tmp_path: Path) -> None:
    for path in (built.program, built.gz_o, built.relocations32_o, built.program_zlib):
        image = path.read_bytes()
        # every length through the headers and then about 400 lengths spread over the file
        lengths = sorted(set(range(0, 200)) | set(range(200, len(image), max(1, len(image) // 400))))
        for length in lengths:
            elf = open_or_error(memoryview(image)[:length], f"{path.name}[:{length}]")
            if elf is not None:
                exercise(elf)
        # a few through a real file, so ElfFile.open sees them too
        for length in (1, 16, 63, 64, len(image) // 2, len(image) - 1):
            truncated = tmp_path / f"{path.name}.{length}"
            truncated.write_bytes(image[:length])
            try:
                with ElfFile.open(truncated) as elf:
                    exercise(elf)
            except ElfError as error:
                assert str(truncated) in str(error)


def section_header_table(image: bytes) -> tuple[int, int, int]:
    """(file offset of e_shoff, e_shoff, table size in bytes) for ELF32 or ELF64."""
    if image[4] == 2:
        (shoff,) = struct.unpack_from("<Q", image, 0x28)
        entry_size, (count,) = 64, struct.unpack_from("<H", image, 0x3C)
        return 0x28, shoff, entry_size * count
    (shoff,) = struct.unpack_from("<I", image, 0x20)
    (count,) = struct.unpack_from("<H", image, 0x30)
    return 0x20, shoff, 40 * count


@needs_tools
def test_truncated_contents_with_headers_kept(built: types.SimpleNamespace) -> None:
    """Cut the file at many lengths but append the section header table again (e_shoff patched),
    so every section that now extends past the end is reached through valid headers."""
    for path in (built.program, built.gz_o, built.relocations32_o, built.program_zlib, built.exec32):
        image = path.read_bytes()
        field, shoff, table_size = section_header_table(image)
        table = image[shoff : shoff + table_size]
        for length in range(0, shoff, max(1, shoff // 300)):
            mutant = bytearray(image[:length].ljust(64, b"\0")) + table
            mutant[:64] = image[:64]
            struct.pack_into("<Q" if image[4] == 2 else "<I", mutant, field, len(mutant) - len(table))
            elf = open_or_error(mutant, f"{path.name}[:{length}]+headers")
            if elf is not None:
                exercise(elf)


def structure_offsets(image: bytes) -> list[tuple[int, int]]:
    """(offset, length) ranges holding headers and small tables: where a flipped byte matters most."""
    elf = ElfFile.from_bytes(image)
    ranges = [(0, 64)]
    if elf.elf_class == 64:
        (phoff,) = struct.unpack_from("<Q", image, 0x20)
        ranges.append((phoff, len(elf.segments) * 56))
    else:
        (phoff,) = struct.unpack_from("<I", image, 0x1C)
        ranges.append((phoff, len(elf.segments) * 32))
    _field, shoff, table_size = section_header_table(image)
    ranges.append((shoff, table_size))
    for section in elf.sections:
        if section.type != SHT_NOBITS and section.size:
            ranges.append((section.offset, min(section.size, 64)))
    return [(offset, length) for offset, length in ranges if length > 0]


#: Mutants per run: about 2700 a second on the development machine, so this takes about 3 s.
FUZZ_MUTANTS = int(os.environ.get("FASTUNWIND_FUZZ_MUTANTS", 8000))


@needs_tools
def test_random_byte_flips(built: types.SimpleNamespace) -> None:
    seed = fuzz_seed()
    generator = random.Random(seed)
    paths = [built.program, built.gz_o, built.eh_frame_o, built.relocations32_o, built.program_zlib,
             built.program_zlib_gnu, built.relocations_x32_o, built.exec32]  # fmt: skip
    if built.program_zstd is not None and _has_zstandard():
        paths.append(built.program_zstd)
    images = [(path, path.read_bytes()) for path in paths]
    regions = {path: structure_offsets(image) for path, image in images}
    opened = 0
    for mutant_number in range(FUZZ_MUTANTS):
        path, image = images[mutant_number % len(images)]
        mutant = bytearray(image)
        for _ in range(generator.randint(1, 6)):
            if generator.random() < 0.7:  # mostly in headers and tables, where a flip is not inert
                offset, length = generator.choice(regions[path])
                position = offset + generator.randrange(length)
            else:
                position = generator.randrange(len(mutant))
            if generator.random() < 0.5:
                mutant[position] ^= 1 << generator.randrange(8)
            else:
                mutant[position] = generator.choice((0, 0xFF, 0x7F, 0x80, generator.randrange(256)))
        name = f"{path.name} (seed {seed}, mutant {mutant_number})"
        try:
            elf = open_or_error(mutant, name)
            if elf is not None:
                opened += 1
                exercise(elf)
        except AssertionError:
            raise
        except Exception as error:  # reported with the seed that replays it
            raise AssertionError(f"{name}: {type(error).__name__}: {error}") from error
    assert opened > FUZZ_MUTANTS // 2, "most mutants should get past the headers"


@needs_libc
def test_random_byte_flips_in_libc_headers() -> None:
    seed = fuzz_seed()
    generator = random.Random(seed)
    image = Path(LIBC).read_bytes()
    regions = structure_offsets(image)
    for mutant_number in range(150):
        mutant = bytearray(image)
        for _ in range(generator.randint(1, 4)):
            offset, length = generator.choice(regions)
            mutant[offset + generator.randrange(length)] = generator.randrange(256)
        name = f"libc (seed {seed}, mutant {mutant_number})"
        try:
            elf = open_or_error(mutant, name)
            if elf is not None:
                exercise(elf)
        except AssertionError:
            raise
        except Exception as error:  # reported with the seed that replays it
            raise AssertionError(f"{name}: {type(error).__name__}: {error}") from error
