"""The C core's ELF reader (core/elf_file.c, `_core.elf_*`), the one the launcher and ElfFile use:
its sections, segments, build-id and entry compared with readelf's (-S, -l, -n, -h, -d) on real
files (libc, ld.so, libc's debug file, a Rust and a Go program, programs linked by bfd, gold, lld
and mold), and its rules on hand-built bytes (ELF32, notes padded to 8, the bias where two segments
share a page, the debug files to try and their order, hostile notes and links)."""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fastunwind import _core
from fastunwind.elf import ElfFile
from fastunwind.errors import ElfError

from tests.support.linkers import LAYOUTS, build_linked

LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")
LD_SO = Path("/lib64/ld-linux-x86-64.so.2")

SECTION_LINE = re.compile(
    r"^\s*\[\s*(\d+)\]\s+(.*?)\s+(\S+)\s+([0-9a-f]{16})\s+([0-9a-f]{6,})\s+([0-9a-f]{6,})\s+([0-9a-f]{2})"
    r"\s+([A-Za-z]*)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")
SEGMENT_LINE = re.compile(
    r"^\s+([A-Z_]+|LOOS\+0x[0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)"
    r"\s+0x([0-9a-f]+)\s+([RWE ]+?)\s+(0x[0-9a-f]+|0)$")  # lld writes an alignment of 0 as "0"
SEGMENT_TYPES = {"NULL": 0, "LOAD": 1, "DYNAMIC": 2, "INTERP": 3, "NOTE": 4, "PHDR": 6, "TLS": 7,
                 "GNU_EH_FRAME": 0x6474E550, "GNU_STACK": 0x6474E551, "GNU_RELRO": 0x6474E552,
                 "GNU_PROPERTY": 0x6474E553}
SECTION_FLAGS = {"W": 0x1, "A": 0x2, "X": 0x4}
SEGMENT_FLAGS = {"R": 0x4, "W": 0x2, "E": 0x1}


def readelf(*arguments: str | Path) -> str:
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    return subprocess.run(["readelf", *map(str, arguments)], check=True, capture_output=True, text=True).stdout


def expected_sections(path: Path) -> list[tuple[int, str, int, int, int, int, int, int, int]]:
    """(index, name, W/A/X flags, addr, offset, size, entsize, link, info, addralign) of readelf -SW."""
    rows = []
    for line in readelf("-SW", path).splitlines():
        match = SECTION_LINE.match(line)
        if match:
            index, name, _type, addr, off, size, es, flags, link, info, align = match.groups()
            wax = sum(bit for letter, bit in SECTION_FLAGS.items() if letter in flags)
            rows.append((int(index), name, wax, int(addr, 16), int(off, 16), int(size, 16), int(es, 16), int(link),
                         int(info), int(align)))
    return rows


def expected_segments(path: Path) -> list[tuple[int | None, int, int, int, int, int, int, int]]:
    """(type or None for one readelf names otherwise, flags, offset, vaddr, paddr, filesz, memsz, align)."""
    rows = []
    for line in readelf("-lW", path).splitlines():
        match = SEGMENT_LINE.match(line)
        if match:
            kind, off, vaddr, paddr, filesz, memsz, flags, align = match.groups()
            rows.append((SEGMENT_TYPES.get(kind), sum(SEGMENT_FLAGS[f] for f in flags if f != " "), int(off, 16),
                         int(vaddr, 16), int(paddr, 16), int(filesz, 16), int(memsz, 16), int(align, 0)))
    return rows


def compare_with_readelf(path: Path) -> None:
    data = path.read_bytes()
    elf_class, elf_type, machine, entry, sections, segments = _core.elf_headers(data)
    assert elf_class == 64 and machine == 62
    ours = [(index, name, flags & 7, addr, offset, size, entsize, link, info, align)
            for index, name, _type, flags, addr, offset, size, link, info, align, entsize in sections]
    assert ours == expected_sections(path)
    expected = expected_segments(path)
    assert len(segments) == len(expected)
    for (kind, flags, offset, vaddr, paddr, filesz, memsz, align), want in zip(segments, expected):
        assert (kind if want[0] is not None else None, flags & 7, offset, vaddr, paddr, filesz, memsz, align) == want
    # the segments the walker reads: the LOADs with file bytes, the read-only ones for expressions
    loads = [i for i, want in enumerate(expected) if want[0] == 1 and want[5]]
    assert _core.elf_loaded_segments(data, False) == loads
    assert _core.elf_loaded_segments(data, True) == [i for i in loads if not expected[i][1] & 2]
    bases = {row[1]: row[3] for row in reversed(expected_sections(path))}
    assert _core.elf_pointer_bases(data) == (bases.get(".text", 0), bases.get(".got", 0))
    header = readelf("-h", path)
    assert entry == int(re.search(r"Entry point address:\s+0x([0-9a-f]+)", header).group(1), 16)
    assert elf_type == {"EXEC": 2, "DYN": 3}[re.search(r"Type:\s+(\S+)", header).group(1)]
    notes = re.search(r"Build ID: ([0-9a-f]+)", readelf("-n", path))
    build_id = _core.elf_build_id(data)
    assert (build_id.hex() if build_id else None) == (notes.group(1) if notes else None)
    # the entry a process starts at: an executable's, a file with an interpreter, or one needing no library
    interpreter = any(kind == 3 for kind, *_ in segments)
    needed = "(NEEDED)" in readelf("-dW", path)
    assert _core.elf_process_entry(data) == (entry if elf_type == 2 or interpreter or not needed else 0)


@pytest.mark.parametrize("path", [LIBC, LD_SO], ids=["libc", "ld.so"])
def test_system_files_against_readelf(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is not here")
    compare_with_readelf(path)
    if path == LIBC:
        assert _core.elf_process_entry(path.read_bytes()) != 0  # libc.so.6 has PT_INTERP: it runs


def test_libc_debug_file_against_readelf() -> None:
    with ElfFile.open(LIBC) as elf:
        debug = Path(f"/usr/lib/debug/.build-id/{elf.build_id_hex[:2]}/{elf.build_id_hex[2:]}.debug")
    if not debug.exists():
        pytest.skip("libc6-dbg is not installed")
    compare_with_readelf(debug)  # its loaded sections are SHT_NOBITS


@pytest.mark.parametrize("layout", LAYOUTS)
def test_linked_programs_against_readelf(layout: str, tmp_path: Path) -> None:
    compare_with_readelf(build_linked(layout, tmp_path))


def test_rust_program_against_readelf(tmp_path: Path) -> None:
    if shutil.which("rustc") is None:
        pytest.skip("rustc is not installed")
    source = tmp_path / "hello.rs"
    source.write_text('fn main() { println!("hello"); }\n')
    subprocess.run(["rustc", "-O", "-o", str(tmp_path / "hello"), str(source)], check=True, capture_output=True)
    compare_with_readelf(tmp_path / "hello")


def test_go_program_against_readelf(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        pytest.skip("go (golang-go) is not installed")
    source = tmp_path / "hello.go"
    source.write_text('package main\n\nimport "os"\n\nfunc main() { os.Exit(0) }\n')
    environment = {**os.environ, "GOCACHE": str(tmp_path / "cache"), "GOPATH": str(tmp_path / "gopath"),
                   "GO111MODULE": "off", "CGO_ENABLED": "0"}
    subprocess.run(["go", "build", "-o", str(tmp_path / "hello"), str(source)], check=True, capture_output=True,
                   env=environment, cwd=tmp_path)
    compare_with_readelf(tmp_path / "hello")  # Go's own linker: a "Go" note, no GNU build-id


# --- hand-built bytes -------------------------------------------------------------------------------


def elf32(sections: list[tuple[str, int, bytes]], segments: list[tuple[int, int, int, int, int]],
          alignment: int = 1) -> bytes:
    """A little-endian ELF32 file: sections (name, type, bytes) after the header, a name table last,
    each aligned to `alignment` (sh_addralign); segments (type, flags, offset, vaddr, filesz)."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name, _, _ in sections) + b".shstrtab\0"
    body = bytearray(52 + 32 * len(segments))
    headers = [bytes(40)]
    name_at = 1
    for name, kind, data in sections + [(".shstrtab", 3, names)]:
        body += bytes(-len(body) % alignment)
        headers.append(struct.pack("<10I", name_at, kind, 0, 0, len(body), len(data), 0, 0, alignment, 0))
        body += data
        name_at += len(name) + 1
    while len(body) % 4:
        body += b"\0"
    shoff = len(body)
    body += b"".join(headers)
    struct.pack_into("<16sHHIIIIIHHHHHH", body, 0, b"\x7fELF\x01\x01\x01", 2, 3, 1, 0x8048000, 52, shoff, 0, 52,
                     32, len(segments), 40, len(headers), len(headers) - 1)
    for i, (kind, flags, offset, vaddr, filesz) in enumerate(segments):
        struct.pack_into("<8I", body, 52 + 32 * i, kind, offset, vaddr, vaddr, filesz, filesz, flags, 0x1000)
    return bytes(body)


def note(owner: bytes, kind: int, descriptor: bytes, padding: int = 4) -> bytes:
    def pad(data: bytes) -> bytes:
        return data + bytes(-len(data) % padding)

    head = struct.pack("<III", len(owner) + 1, len(descriptor), kind) + owner + b"\0"
    return pad(head) + pad(descriptor)


def test_elf32_headers_and_build_id() -> None:
    notes = note(b"GNU", 1, b"\1\2\3\4") + note(b"GNU", 3, bytes(range(20)))
    data = elf32([(".note.gnu.build-id", 7, notes), (".text", 1, b"\x90" * 16)], [(1, 5, 0, 0x8048000, 0x100)])
    elf_class, elf_type, machine, entry, sections, segments = _core.elf_headers(data)
    assert (elf_class, elf_type, machine, entry) == (32, 2, 3, 0x8048000)
    assert [s[1] for s in sections] == ["", ".note.gnu.build-id", ".text", ".shstrtab"]
    assert segments == [(1, 5, 0, 0x8048000, 0x8048000, 0x100, 0x100, 0x1000)]
    assert _core.elf_build_id(data) == bytes(range(20))
    assert _core.elf_process_entry(data) == 0x8048000  # ET_EXEC
    with ElfFile.from_bytes(data) as elf:
        assert elf.elf_class == 32 and elf.build_id == bytes(range(20))


def test_notes_padded_to_8_as_note_gnu_property() -> None:
    region = note(b"GNU", 5, bytes(12), padding=8) + note(b"GNU", 3, b"\xaa" * 8, padding=8)
    assert _core.elf_build_id(elf32([(".note.gnu.property", 7, region)], [], alignment=8)) == b"\xaa" * 8
    # read with 4-byte padding (a section aligned to 4), the same bytes are another (malformed) region
    with pytest.raises(ElfError):
        _core.elf_build_id(elf32([(".note.gnu.property", 7, region + b"\1")], [], alignment=4))


@pytest.mark.parametrize("region, message", [
    (b"\1\0\0\0", r"section \[1\] '\.note': note header at offset 0x34 is truncated \(0x4 bytes left\)"),
    (struct.pack("<III", 99, 0, 3) + b"GNU\0", r"n_namesz 0x63 overruns"),
    (struct.pack("<III", 4, 99, 3) + b"GNU\0", r"n_descsz 0x63 overruns"),
    (struct.pack("<III", 4, 0, 3) + b"GNU\0", r"a build-id of 0x0 bytes \(expected 1 to 0x40\)"),
    (note(b"X", 1, b"") * 4097, r"more than 4096 notes"),
])
def test_hostile_notes(region: bytes, message: str) -> None:
    # the region at file offset 0x34, right after the ELF32 header
    with pytest.raises(ElfError, match=message):
        _core.elf_build_id(elf32([(".note", 7, region)], []))


def test_a_compressed_note_section_with_a_name_that_is_not_text() -> None:
    """The message names the section with its bytes escaped: an ElfError, not a UnicodeDecodeError."""
    data = bytearray(elf32([(".noteZZ", 7, note(b"GNU", 3, b"\1" * 20))], []))
    name = data.index(b".noteZZ")
    data[name + 5:name + 7] = b"\xff\xfe"
    shoff = struct.unpack_from("<I", data, 32)[0]
    struct.pack_into("<I", data, shoff + 40 + 8, 0x800)  # section 1's sh_flags: SHF_COMPRESSED
    with pytest.raises(ElfError, match=r"section \[1\] '\.note\\xff\\xfe': compressed \(SHF_COMPRESSED\), "
                                        r"which a \.note\\xff\\xfe section never is"):
        _core.elf_build_id(bytes(data))


def test_bias_of_a_mapping_where_two_segments_share_a_page() -> None:
    # lld's layout: R at offset 0 (vaddr 0), R E at 0x770 (vaddr 0x1770): one file page, two segments
    data = elf32([], [(1, 4, 0, 0, 0x770), (1, 5, 0x770, 0x1770, 0x400)])
    assert _core.elf_mapping_bias(data, 0x10000, 0x11000, 0) == 0x10000 - 0x1000
    # the page at offset 0 holds the executable segment's start: a mapping there maps code
    assert _core.elf_offset_executable(data, 0) and not _core.elf_offset_executable(data, 0x2000)
    # without PF_X, the first one overlapping the mapping under its bias
    data = elf32([], [(1, 4, 0x100, 0x100, 0x670), (1, 6, 0x770, 0x1770, 0x400)])
    assert _core.elf_mapping_bias(data, 0x11000, 0x12000, 0) == 0x11000
    assert _core.elf_mapping_bias(data, 0x10000, 0x11000, 0x5000) is None
    # a file linked above where it is mapped: a negative bias, as the Python arithmetic gives it
    data = elf32([], [(1, 5, 0, 0x20000000, 0x1000)])
    assert _core.elf_mapping_bias(data, 0x10000, 0x11000, 0) == 0x10000 - 0x20000000


def test_debug_file_candidates_in_order() -> None:
    build_id = bytes.fromhex("93ac61ec")
    candidates, ignored = _core.elf_debug_file_candidates(
        build_id, b"libc.debug", "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ["/usr/lib/debug", "/opt/debug/", ""])
    assert not ignored
    by_id, by_link = _core.ELF_DEBUG_BY_BUILD_ID, _core.ELF_DEBUG_BY_LINK
    assert candidates == [
        ("/usr/lib/debug/.build-id/93/ac61ec.debug", by_id), ("/opt/debug/.build-id/93/ac61ec.debug", by_id),
        (".build-id/93/ac61ec.debug", by_id),
        ("/lib/x86_64-linux-gnu/libc.debug", by_link), ("/lib/x86_64-linux-gnu/.debug/libc.debug", by_link),
        ("/usr/lib/x86_64-linux-gnu/libc.debug", by_link), ("/usr/lib/x86_64-linux-gnu/.debug/libc.debug", by_link),
        ("/usr/lib/debug/lib/x86_64-linux-gnu/libc.debug", by_link),
        ("/usr/lib/debug/usr/lib/x86_64-linux-gnu/libc.debug", by_link),
        ("/opt/debug/lib/x86_64-linux-gnu/libc.debug", by_link),
        ("/opt/debug/usr/lib/x86_64-linux-gnu/libc.debug", by_link),
        ("lib/x86_64-linux-gnu/libc.debug", by_link), ("usr/lib/x86_64-linux-gnu/libc.debug", by_link),
    ]
    # each as os.path.join builds it, the file's directory once when the path has no symlink
    for path, _rule in candidates[3:]:
        assert os.path.normpath(path) == path
    same, _ = _core.elf_debug_file_candidates(None, b"x.debug", "/x", "/x", ["/usr/lib/debug"])
    assert same == [("/x.debug", by_link), ("/.debug/x.debug", by_link), ("/usr/lib/debug/x.debug", by_link)]
    # a one-byte build-id names no file; a link name that is a path is ignored
    assert _core.elf_debug_file_candidates(b"\1", None, "/x", "/x", ["/r"]) == ([], False)
    for name in (b"", b".", b"..", b"a/b"):
        assert _core.elf_debug_file_candidates(None, name, "/x", "/x", ["/r"]) == ([], True)


def test_hostile_debuglink_is_an_elf_error() -> None:
    for contents, message in ((b"\0\0\0\0\0\0\0\0", "file name is empty"), (b"abc", "not NUL-terminated"),
                              (b"ab\0", "no room for the CRC")):
        data = elf32([(".gnu_debuglink", 1, contents)], [])
        with pytest.raises(ElfError, match=message):
            _core.elf_debuglink(data)
    data = elf32([(".gnu_debuglink", 1, b"name.debug\0\0" + struct.pack("<I", 0x1234))], [])
    assert _core.elf_debuglink(data) == (b"name.debug", 0x1234)
