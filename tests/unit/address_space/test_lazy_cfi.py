"""A module's DWARF tables are parsed only when the walker may ask them: a module whose cached
compact table states every row (no slow rows) is unwound from that table alone, so opening
libLLVM-14 for a recording costs a mapped file instead of parsing 95k FDEs."""
from __future__ import annotations

import os
import struct

import pytest

from fastunwind import _core
from fastunwind.address_space import AddressSpace, ImageCache, Mapping, ModuleImage
from fastunwind.elf import PF_X, PT_LOAD

WITHOUT_SLOW_ROWS = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
WITH_SLOW_ROWS = "/lib64/ld-linux-x86-64.so.2"  # a row the compact format cannot state
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"  # 7 slow rows
BIG = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"  # a compact table of 5.7 MB
BASE = 0x7F0000000000


def _space(path: str) -> tuple[AddressSpace, ModuleImage]:
    """A new process's view of `path`: opened afresh, mapped at BASE."""
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    image = ImageCache().get(path)
    assert image is not None and not image.cfi_parsed  # opening reads headers only
    code = next(s for s in image.elf.segments if s.type == PT_LOAD and s.flags & PF_X)
    return AddressSpace([Mapping(BASE + code.vaddr, BASE + code.vaddr + code.memsz, code.offset, path, image,
                                 BASE)]), image


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return str(tmp_path)


def test_a_cached_table_without_slow_rows_leaves_the_dwarf_tables_unparsed(cache):
    space, image = _space(WITHOUT_SLOW_ROWS)
    space.to_core("auto")  # builds the compact table: that parses them
    assert image.cfi_parsed and image.compact.slow_row_count == 0
    space, image = _space(WITHOUT_SLOW_ROWS)  # the table comes from the cache now
    for backend in ("auto", "table", "table-only"):
        space.to_core(backend)
    assert image.compact_source == "cache" and not image.cfi_parsed
    space.to_core("dwarf")
    assert image.cfi_parsed


def _row(table: _core.CfiTable, pc: int) -> tuple[int, int, object] | None:
    """What a lookup at `pc` finds: the FDE, the row's address and its rules (state ids differ
    between tables, the rules do not)."""
    found = table.lookup(pc)
    if found is None:
        return None
    fde, row = found
    addresses, states = table.rows()
    return (fde, struct.unpack_from("<Q", addresses, 8 * row)[0],
            table.state(struct.unpack_from("<I", states, 4 * row)[0]))


@pytest.mark.parametrize("path", [WITH_SLOW_ROWS, LIBC])
def test_slow_rows_need_only_the_fdes_around_them(cache, path):
    """The walker asks the DWARF tables at the compact table's slow rows only: the module gets
    tables of the FDEs a lookup there can return, which answer there as the whole tables do."""
    _space(path)[0].to_core("auto")
    space, image = _space(path)
    space.to_core("auto")
    table = image.compact
    assert image.compact_source == "cache" and table is not None and table.slow_row_count > 0
    assert not image.cfi_parsed
    ranges = table.slow_ranges()
    assert ranges
    eh_frame, debug_frame = image.slow_row_tables(ranges)
    assert eh_frame is not None and debug_frame is None
    whole = image.eh_frame
    assert whole is not None and eh_frame.indexed_fde_count * 20 < whole.indexed_fde_count
    pairs = struct.unpack(f"<{len(ranges) // 8}Q", ranges)
    checked = 0
    for start, end in zip(pairs[::2], pairs[1::2]):
        for pc in range(start, min(end, start + 4096)):
            assert _row(eh_frame, pc) == _row(whole, pc), hex(pc)
            checked += 1
    assert checked >= table.slow_row_count


def test_fdes_that_shadow_a_slow_row_are_kept():
    """A lookup takes the last FDE starting at or below the address: one starting between the
    FDE that covers a slow row and the row (overlapping FDEs, as hand-written assembly makes) is
    evaluated too, so that the subset answers as the whole table."""
    cie = _cie()
    outer = _fde(len(cie), 0x1000, 0x100, b"\x0e\x10")  # CFA rsp+16 from 0x1000
    inner = _fde(len(cie) + len(outer), 0x1010, 0x10, b"\x0e\x20")  # ends at 0x1020, below the row
    far = _fde(len(cie) + len(outer) + len(inner), 0x2000, 0x10, b"")
    data = cie + outer + inner + far
    whole = _core.CfiTable(data, 0, 0)
    subset = _core.CfiTable(data, 0, 0, ranges=struct.pack("<QQ", 0x1080, 0x1090))
    assert subset.indexed_fde_count == 2 and whole.indexed_fde_count == 3
    for pc in range(0x1000, 0x2010, 8):
        if 0x1080 <= pc < 0x1090:
            assert _row(subset, pc) == _row(whole, pc)
    assert _row(whole, 0x1080) is None  # the inner FDE shadows the outer one past its end


def _cie() -> bytes:
    """A .debug_frame-style CIE in .eh_frame form: version 1, "zR", code 1, data -8, RA 16,
    pcrel|sdata4 pointers, CFA rsp+8, RA at CFA-8."""
    body = struct.pack("<I", 0) + b"\x01zR\x00\x01\x78\x10\x01\x1b" + b"\x0c\x07\x08\x90\x01"
    body += b"\x00" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def _fde(offset: int, start: int, size: int, instructions: bytes) -> bytes:
    """An FDE at section offset `offset` for [start, start + size), its CIE at offset 0."""
    pointer_field = offset + 8  # the pc_begin field's offset: pcrel from there
    body = struct.pack("<Iii", offset + 4, start - pointer_field, size) + b"\x00" + instructions
    body += b"\x00" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def test_a_table_built_before_a_debug_file_was_installed_is_rebuilt(cache, monkeypatch):
    """The cache entry records the sizes of the sections it was built from; a module that has a
    .debug_frame now (its debug file installed since) rebuilds it, without parsing to find out."""
    _space(WITHOUT_SLOW_ROWS)[0].to_core("auto")
    space, image = _space(WITHOUT_SLOW_ROWS)
    eh_frame_size, _ = image.frame_sizes()
    monkeypatch.setattr(type(image), "frame_sizes", lambda self: (eh_frame_size, 1234))
    assert image.load_compact_table(os.path.join(cache, "fastunwind", "compact")) is not None
    assert image.compact_source == "built"


def _resident_kb(path: str) -> int:
    """Resident KiB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if fields and "-" in fields[0] and not fields[0].endswith(":"):
                inside = fields[-1] == path
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


def test_a_validated_cached_table_does_not_stay_resident(cache):
    """Validation reads the whole file; the walker then touches a few pages of it (the kernel maps
    the page cache's folio around each page touched: up to 2 MiB on ext4 here)."""
    _space(BIG)[0].to_core("auto")
    space, image = _space(BIG)
    table = image.compact
    assert image.compact_source == "cache" and table is not None
    assert _resident_kb(os.path.realpath(image.compact_cache_path())) * 1024 < table.size / 2
