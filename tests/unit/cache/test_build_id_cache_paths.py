"""perf's build-id cache paths and the compact tables' entry names (core/cache_paths.c): the one
home the Python path (elf/build_id_cache.py, perf/replay.py, tables/compact.py) and the launcher
share, against the layout perf-buildid-cache(1) documents and perf record writes."""

from __future__ import annotations

import pytest

from fastunwind import _core
from fastunwind.elf.build_id_cache import build_id_cache_candidates, build_id_cache_file, build_id_cache_root


def test_the_root_is_perf_buildid_dir_else_home_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERF_BUILDID_DIR", "/srv/ids/")
    assert build_id_cache_root() == "/srv/ids/"
    assert build_id_cache_file("/usr/lib/libc.so.6", "ab12", "elf") == "/srv/ids/usr/lib/libc.so.6/ab12/elf"
    monkeypatch.delenv("PERF_BUILDID_DIR")
    monkeypatch.setenv("HOME", "/home/u")
    assert build_id_cache_root() == "/home/u/.debug"
    assert build_id_cache_file("[kernel.kallsyms]", "ff", "kallsyms") == "/home/u/.debug/[kernel.kallsyms]/ff/kallsyms"


def test_candidates_by_name_then_by_build_id_unpadded_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERF_BUILDID_DIR", "/c")
    lld = bytes(range(1, 9)) + bytes(12)  # an 8-byte note, padded to 20 by the recording
    short, padded = lld[:8].hex(), lld.hex()
    assert build_id_cache_candidates("/bin/app (deleted)", lld, "elf") == [
        f"/c/bin/app (deleted)/{short}/elf", f"/c/bin/app (deleted)/{padded}/elf",
        f"/c/bin/app/{short}/elf", f"/c/bin/app/{padded}/elf",
        f"/c/.build-id/01/{short[2:]}/elf", f"/c/.build-id/01/{padded[2:]}/elf"]
    gnu = bytes(range(1, 21))
    assert build_id_cache_candidates("[vdso]", gnu, "vdso") == [
        f"/c/[vdso]/{gnu.hex()}/vdso", f"/c/.build-id/01/{gnu.hex()[2:]}/vdso"]
    with pytest.raises(ValueError):
        build_id_cache_candidates("/bin/app", bytes(40), "elf")


def test_compact_entry_suffixes() -> None:
    assert [_core.compact_cache_suffix(code) for code in range(len(_core.COMPACT_SYNTH_MODES))] == [
        ".fut", f".synth-missing-v{_core.COMPACT_SYNTH_VERSION}.fut", f".synth-repair-v{_core.COMPACT_SYNTH_VERSION}.fut"]
    with pytest.raises(ValueError):
        _core.compact_cache_suffix(len(_core.COMPACT_SYNTH_MODES))
