"""A module's DWARF tables are parsed only when the walker may ask them: a module whose cached
compact table states every row (no slow rows) is unwound from that table alone, so opening
libLLVM-14 for a recording costs a mapped file instead of parsing 95k FDEs."""
from __future__ import annotations

import os

import pytest

from fastunwind.address_space import AddressSpace, ImageCache, Mapping, ModuleImage
from fastunwind.elf import PF_X, PT_LOAD

WITHOUT_SLOW_ROWS = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
WITH_SLOW_ROWS = "/lib64/ld-linux-x86-64.so.2"  # a row the compact format cannot state
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


def test_slow_rows_need_the_dwarf_tables(cache):
    _space(WITH_SLOW_ROWS)[0].to_core("auto")
    space, image = _space(WITH_SLOW_ROWS)
    space.to_core("auto")
    assert image.compact_source == "cache" and image.compact.slow_row_count > 0 and image.cfi_parsed


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
