"""Hostile core files: the C parser (native/core/coredump.c) gives a CoreFileError naming what is
wrong and where, or a core whose damage is reported, never a crash, a hang or a read outside the
file. Cores are built here byte by byte; a real gcore is cut and mutated too.
"""
from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from fastunwind import _core
from fastunwind import core as core_files
from fastunwind.address_space import ImageCache
from fastunwind.errors import CoreFileError

NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_FILE = 1, 3, 6, 0x46494C45
PT_LOAD, PT_NOTE = 1, 4
STACK = 0x7FF000
#: mutants of a real gcore's headers and notes parsed and walked (a second or two)
MUTANTS = 300


def note(kind: int, desc: bytes, name: bytes = b"CORE\0") -> bytes:
    pad = lambda data: data + b"\0" * (-len(data) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), kind) + pad(name) + pad(desc)


def prstatus(tid: int, rip: int, rsp: int) -> bytes:
    registers = [0] * 27
    registers[16], registers[19] = rip, rsp
    return struct.pack("<12xH18xI76x", 11, tid) + struct.pack("<27Q", *registers) + b"\0" * 8


def files_note(entries: list[tuple[int, int, int, bytes]], count: int | None = None) -> bytes:
    header = struct.pack("<QQ", len(entries) if count is None else count, 4096)
    return header + b"".join(struct.pack("<QQQ", s, e, o) for s, e, o, _ in entries) + \
        b"".join(path + b"\0" for *_, path in entries)


def build(notes: bytes, loads: list[tuple[int, int, bytes] | tuple[int, int, bytes, int]] = (), *,
          phnum: int | None = None,
          note_offset: int | None = None, machine: int = 62, elf_type: int = 4) -> bytes:
    """A core: ELF header, PT_NOTE, a PT_LOAD per (vaddr, memsz, bytes[, p_flags: RW]), notes, then
    the bytes."""
    count = 1 + len(loads)
    data_start = 64 + 56 * count
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack(
        "<HHIQQQIHHHHHH", elf_type, machine, 1, 0, 64, 0, 0, 64, 56, count if phnum is None else phnum, 64, 0, 0)
    phdrs = struct.pack("<IIQQQQQQ", PT_NOTE, 4, data_start if note_offset is None else note_offset, 0, 0,
                        len(notes), 0, 4)
    offset = data_start + len(notes)
    body = notes
    for vaddr, memsz, content, *flags in loads:
        phdrs += struct.pack("<IIQQQQQQ", PT_LOAD, flags[0] if flags else 6, offset, vaddr, 0, len(content), memsz,
                             4096)
        offset += len(content)
        body += content
    return header + phdrs + body


def with_shoff(data: bytes, shoff: int) -> bytes:
    return data[:40] + struct.pack("<Q", shoff) + data[48:]


def good_notes() -> bytes:
    return (note(NT_PRSTATUS, prstatus(42, 0x401000, STACK + 0x100)) + note(NT_PRPSINFO, b"\0" * 136)
            + note(NT_AUXV, struct.pack("<4Q", 9, 0x401000, 0, 0))
            + note(NT_FILE, files_note([(0x400000, 0x402000, 0, b"/nonexistent/program")])))


def test_a_well_formed_core() -> None:
    parsed = _core.CoreFile(build(good_notes(), [(STACK, 0x1000, b"\xab" * 0x1000)]))
    assert [(tid, signal) for tid, signal, *_ in parsed.threads()] == [(42, 11)]
    assert parsed.files() == [(0x400000, 0x402000, 0, b"/nonexistent/program")]
    assert parsed.auxv == (0, 0x401000, 0)
    assert parsed.read(STACK + 8, 4) == b"\xab" * 4 and parsed.read(STACK + 0xFFE, 4) is None


@pytest.mark.parametrize("data, message", [
    (b"", "not an ELF file"),
    (b"\x7fELF" + b"\0" * 10, "not an ELF file"),
    (b"\x7fELF\x01\x01" + b"\0" * 58, "not a 64-bit little-endian"),
    (build(good_notes(), elf_type=2), "not a core file"),
    (build(good_notes(), machine=183), "not x86-64"),
    (build(good_notes(), phnum=0x3000), "program headers at 0x40 run past the end"),
    (with_shoff(build(good_notes(), phnum=0xFFFF), 1 << 40), "PN_XNUM"),
    (build(good_notes(), note_offset=1 << 40), "PT_NOTE"),
    (build(struct.pack("<III", 5, 0xFFFFFFF0, 1) + b"CORE\0\0\0\0"), "overrun the PT_NOTE"),
    (build(struct.pack("<III", 0xFFFFFFFF, 4, 1)), "overrun the PT_NOTE"),
    (build(note(NT_PRSTATUS, b"\0" * 100)), "NT_PRSTATUS at offset 0x78: 100 bytes"),
    (build(note(NT_FILE, files_note([], count=1 << 40))), "more than 65536"),
    (build(note(NT_FILE, files_note([(0, 4096, 0, b"/x")], count=1000))), "do not fit"),
    (build(note(NT_FILE, files_note([(0, 4096, 0, b"/x")])[:-1] + b"y")), "not terminated"),
    (build(note(NT_FILE, files_note([(8192, 4096, 0, b"/x")]))), "range 0x2000-0x1000"),
    (build(note(NT_FILE, files_note([(0, 4096, 0, b"/x")])) * 2), "a second NT_FILE"),
    (build(note(NT_FILE, files_note([(0, 8192, 0, b"/x"), (4096, 12288, 0, b"/y")]))), "below the end of entry 0"),
    (build(note(NT_AUXV, struct.pack("<Q", 5) * 4000)), "more than 1024 entries"),
    (build(b"", [(STACK, 0x2000, b""), (STACK + 0x1000, 0x1000, b"")]), "overlap"),
    (build(b"", [(STACK, 0x10, b"\0" * 0x20)]), "filesz 0x20, memsz 0x10"),
])
def test_malformed_cores_are_a_typed_error(data: bytes, message: str) -> None:
    with pytest.raises(CoreFileError, match=message):
        _core.CoreFile(data)


def test_a_truncated_load_is_reported_and_its_memory_missing(tmp_path: Path) -> None:
    program_text = (0x400000, 0x2000, b"", 5)  # R E, its bytes not dumped
    data = build(good_notes(), [program_text, (STACK, 0x1000, b"\xab" * 0x1000)])[:-0x800]
    path = tmp_path / "core"
    path.write_bytes(data)
    with core_files.open(path) as opened:
        assert opened.truncated_bytes == 0x800
        assert any("truncated: 0x800 bytes" in line for line in opened.problems)
        assert any("/nonexistent/program: not found: not used" in line for line in opened.problems)
        (thread,) = opened.threads()
    assert not thread.complete  # the program is missing: no table covers its PC


def test_an_empty_core_file_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(CoreFileError, match="empty"):
        core_files.open(tmp_path / "empty")


@pytest.fixture(scope="module")
def real_core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support import cores

    out = tmp_path_factory.mktemp("real")
    try:
        with cores.running(["/usr/bin/sleep", "60"], out, prints_ready=False) as pid:
            return cores.gcore_of(pid, out / "sleep")
    except cores.CoreUnavailable as error:
        pytest.skip(str(error))


def notes_range(data: bytes) -> tuple[int, int]:
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    for index in range(phnum):
        kind, _flags, offset, _vaddr, _paddr, size = struct.unpack_from("<IIQQQQ", data, phoff + 56 * index)
        if kind == PT_NOTE:
            return offset, size
    raise AssertionError("no PT_NOTE")


def test_cut_and_mutated_real_cores_never_crash(real_core: Path, tmp_path: Path) -> None:
    original = real_core.read_bytes()
    notes, size = notes_range(original)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    outcomes: dict[str, int] = {}
    images = ImageCache()  # the files the mutants map, opened once
    for index in range(MUTANTS):
        data = bytearray(original)
        start, length = (notes, size) if index % 2 else (0, 64 + 56 * 40)
        if index % 5 == 0:
            data = data[:rng.randrange(len(data))]  # a cut anywhere: headers, notes or memory
        else:
            for _ in range(rng.randrange(1, 8)):
                where = start + rng.randrange(length)
                if where < len(data):
                    data[where] ^= 1 << rng.randrange(8)
        path = tmp_path / "mutant"
        path.write_bytes(bytes(data))
        try:
            with core_files.CoreFile(path, images=images) as opened:
                threads = opened.threads(with_registers=True)
            result = "complete" if threads and all(t.complete for t in threads) else "incomplete or no thread"
        except CoreFileError as error:
            assert str(error).startswith(str(path)), error
            result = "CoreFileError"
        outcomes[result] = outcomes.get(result, 0) + 1
    print(f"seed {seed}: {outcomes}")
    assert outcomes.get("CoreFileError", 0) > 0 and sum(outcomes.values()) == MUTANTS


def test_an_exe_for_a_core_without_the_program_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "core"
    path.write_bytes(build(note(NT_PRSTATUS, prstatus(7, 0x401000, STACK)), [(STACK, 0x1000, b"\0" * 0x1000)]))
    with core_files.open(path, exe="/bin/true") as opened:
        assert opened.problems == ["--exe /bin/true: no mapping of the core holds the program's headers "
                                   "(AT_PHDR 0x0): not used"]


def _elf_page(phoff: int, notes_offset: int, notes_size: int) -> bytes:
    header = bytearray(4096)
    header[:5] = b"\x7fELF\x02"
    struct.pack_into("<Q", header, 32, phoff)
    struct.pack_into("<HH", header, 54, 56, 1)
    if phoff + 56 <= len(header):
        struct.pack_into("<IIQQQQ", header, phoff, 4, 0, notes_offset, 0, 0, notes_size)  # PT_NOTE
    return bytes(header)


@pytest.mark.parametrize("phoff, notes_offset, notes_size", [
    (2**64 - 8, 0, 0),            # program headers past the end of the address space
    (64, 2**64 - 16, 36),         # a note segment past it
    (64, 256, 2**63),             # a note segment of 8 EiB
])
def test_a_hostile_elf_header_in_the_core_gives_no_build_id(phoff, notes_offset, notes_size) -> None:
    base = 2**64 - 2 * 4096
    page = _elf_page(phoff, notes_offset, notes_size)
    core = _core.CoreFile(build(note(NT_PRSTATUS, prstatus(7, 0x401000, STACK)), [(base, 4096, page)]))
    assert core.read(base, 4) == b"\x7fELF"
    assert core.build_id_at(base) is None


def test_the_build_id_of_a_file_page_in_the_core() -> None:
    base = 0x7F0000000000
    build_id = bytes(range(20))
    gnu = struct.pack("<III", 4, 20, 3) + b"GNU\0" + build_id
    property_note = struct.pack("<III", 4, 16, 5) + b"GNU\0" + bytes(16)
    page = bytearray(_elf_page(64, 512, len(property_note)))
    page[512:512 + len(property_note)] = property_note
    page[1024:1024 + len(gnu)] = gnu
    struct.pack_into("<HH", page, 54, 56, 2)
    struct.pack_into("<IIQQQQ", page, 64 + 56, 4, 0, 1024, 0, 0, len(gnu))  # a second PT_NOTE
    core = _core.CoreFile(build(note(NT_PRSTATUS, prstatus(7, 0x401000, STACK)), [(base, 4096, bytes(page))]))
    assert core.build_id_at(base) == build_id
    assert core.build_id_at(base + 4096) is None  # not held
