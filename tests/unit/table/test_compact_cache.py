"""The compact table file: validated before use (every corruption below is rejected with a named
error), cached by build-id, written atomically, rebuilt when stale, shared by concurrent processes."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from fastunwind import _core
from fastunwind.address_space import ModuleImage
from fastunwind.errors import CompactTableError

from tests.support.paths import SRC

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LD_SO = "/lib64/ld-linux-x86-64.so.2"
# fu_compact_header field offsets (native/compact_table.h)
VERSION, FILE_SIZE, ROW_COUNT, RULE_COUNT = 8, 16, 40, 44
OFFSETS = 128  #: row_start_offset, rule_index_offset, rules_offset, page_index_offset (u64 each)


@pytest.fixture(scope="module")
def ld_so() -> ModuleImage:
    return ModuleImage.load(LD_SO)


@pytest.fixture(scope="module")
def table_bytes(ld_so) -> bytes:
    kind, key = ld_so.compact_key()
    return _core.build_compact_table(ld_so.eh_frame, ld_so.debug_frame, kind, key)


def offsets(data: bytes) -> tuple[int, int, int, int]:
    return struct.unpack_from("<QQQQ", data, OFFSETS)


def rejected(data: bytes | bytearray, message: str) -> None:
    with pytest.raises(CompactTableError, match=message):
        _core.CompactTable(bytes(data))


def test_a_built_table_validates_and_keeps_its_key(ld_so, table_bytes):
    table = _core.CompactTable(table_bytes)
    kind, key = ld_so.compact_key()
    assert (table.key_kind, table.key) == (kind, key) and table.size == len(table_bytes)
    assert table.row_count > 0 and table.page_count > 0
    assert table.size / table.row_count <= 8


@pytest.mark.parametrize("cut", [0, 7, 100, -1, -4])
def test_a_truncated_table_is_rejected(table_bytes, cut):
    rejected(table_bytes[:cut] if cut >= 0 else table_bytes[:len(table_bytes) + cut], "truncated")


def test_bad_magic_and_other_versions_are_rejected(table_bytes):
    data = bytearray(table_bytes)
    data[0:8] = b"NOTATABL"
    rejected(data, "bad magic")
    data = bytearray(table_bytes)
    struct.pack_into("<I", data, VERSION, _core.COMPACT_VERSION + 1)
    rejected(data, "version")


def test_unsorted_row_starts_are_rejected(table_bytes):
    data = bytearray(table_bytes)
    starts = offsets(data)[0]
    first, second = struct.unpack_from("<II", data, starts + 4)
    struct.pack_into("<II", data, starts + 4, second, first)
    rejected(data, "not sorted")


def test_a_rule_index_out_of_range_is_rejected(table_bytes):
    data = bytearray(table_bytes)
    rule_index = offsets(data)[1]
    struct.pack_into("<H", data, rule_index + 2, struct.unpack_from("<I", data, RULE_COUNT)[0])
    rejected(data, "names rule")


def test_a_rule_naming_a_register_the_walker_lacks_is_rejected(table_bytes):
    data = bytearray(table_bytes)
    rules = offsets(data)[2]
    data[rules + 1] = 200  # cfa_register of rule 0
    rejected(data, "rule 0 is invalid")


def test_a_wrong_page_index_entry_is_rejected(table_bytes):
    data = bytearray(table_bytes)
    pages = offsets(data)[3]
    struct.pack_into("<I", data, pages + 4, struct.unpack_from("<I", data, pages + 4)[0] + 1)
    rejected(data, "page 1 names row")


def test_counts_that_overrun_the_file_are_rejected(table_bytes):
    data = bytearray(table_bytes)
    struct.pack_into("<I", data, ROW_COUNT, 0xFFFFFFF0)
    rejected(data, "outside")


def test_built_once_then_loaded_from_the_cache(tmp_path):
    first = ModuleImage.load(LD_SO)
    table = first.load_compact_table(str(tmp_path))
    path = Path(first.compact_cache_path(str(tmp_path)))
    assert first.compact_source == "built" and path.exists()
    assert path.name == first.build_id.hex() + ".fut"
    assert sorted(os.listdir(tmp_path)) == [path.name], "a temporary file was left behind"
    second = ModuleImage.load(LD_SO)
    cached = second.load_compact_table(str(tmp_path))
    assert second.compact_source == "cache"
    assert cached.rows() == table.rows() and cached.size == table.size


def test_the_environment_chooses_the_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    image = ModuleImage.load(LD_SO)
    assert image.compact is not None
    assert Path(image.compact_cache_path()).parent == tmp_path / "fastunwind" / "compact"
    assert Path(image.compact_cache_path()).exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "other_version"])
def test_a_damaged_cache_file_is_rebuilt(tmp_path, damage):
    image = ModuleImage.load(LD_SO)
    image.load_compact_table(str(tmp_path))
    path = Path(image.compact_cache_path(str(tmp_path)))
    good = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(os.urandom(len(good)))
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        data = bytearray(good)
        struct.pack_into("<I", data, VERSION, _core.COMPACT_VERSION - 1)
        path.write_bytes(bytes(data))
    again = ModuleImage.load(LD_SO)
    assert again.load_compact_table(str(tmp_path)) is not None
    assert again.compact_source == "built"
    assert path.read_bytes() == good


def test_a_table_of_another_build_id_is_not_used(tmp_path):
    """ld.so's table placed under libc's build-id: valid as a file, wrong for libc; rebuilt."""
    libc = ModuleImage.load(LIBC)
    ld_so = ModuleImage.load(LD_SO)
    ld_so.load_compact_table(str(tmp_path))
    Path(libc.compact_cache_path(str(tmp_path))).write_bytes(Path(ld_so.compact_cache_path(str(tmp_path))).read_bytes())
    table = libc.load_compact_table(str(tmp_path))
    assert libc.compact_source == "built" and table.key == libc.build_id


def test_a_table_built_from_other_sections_is_not_used(tmp_path):
    """Same build-id, but built before the separate debug file (.debug_frame) was there."""
    image = ModuleImage.load(LIBC)
    kind, key = image.compact_key()
    without_debug = _core.build_compact_table(image.eh_frame, None, kind, key)
    Path(image.compact_cache_path(str(tmp_path))).parent.mkdir(parents=True, exist_ok=True)
    Path(image.compact_cache_path(str(tmp_path))).write_bytes(without_debug)
    image.load_compact_table(str(tmp_path))
    expected = "built" if image.debug_frame is not None else "cache"
    assert image.compact_source == expected


def test_a_failed_write_leaves_no_temporary_and_still_gives_the_table(tmp_path, monkeypatch):
    def fail(*_args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", fail)
    image = ModuleImage.load(LD_SO)
    assert image.load_compact_table(str(tmp_path)) is not None
    assert os.listdir(tmp_path) == []


def test_concurrent_processes_share_the_cache(tmp_path):
    script = ("import sys; from fastunwind.address_space import ModuleImage; "
              "t = ModuleImage.load(sys.argv[1]).load_compact_table(sys.argv[2]); print(t.size)")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    processes = [subprocess.Popen([sys.executable, "-c", script, LIBC, str(tmp_path)], stdout=subprocess.PIPE,
                                  text=True, env=env) for _ in range(6)]
    sizes = {p.communicate()[0].strip() for p in processes}
    assert all(p.returncode == 0 for p in processes)
    assert len(sizes) == 1
    names = os.listdir(tmp_path)
    assert len(names) == 1 and names[0].endswith(".fut"), names
    image = ModuleImage.load(LIBC)
    image.load_compact_table(str(tmp_path))
    assert image.compact_source == "cache"


def test_a_file_without_build_id_is_keyed_by_path_size_and_mtime(tmp_path):
    source = tmp_path / "f.s"
    source.write_text(".text\n.globl _start\n_start:\n.cfi_startproc\nnop\nret\n.cfi_endproc\n")
    binary = tmp_path / "nobuildid"
    subprocess.run(["gcc", "-nostdlib", "-static", "-Wl,--build-id=none", "-o", str(binary), str(source)], check=True)
    image = ModuleImage.load(str(binary))
    assert image.build_id is None
    kind, key = image.compact_key()
    assert kind == _core.COMPACT_KEY_FILE_HASH and len(key) == 32
    cache = tmp_path / "cache"
    image.load_compact_table(str(cache))
    assert Path(image.compact_cache_path(str(cache))).name.startswith("nobuildid-")
    os.utime(binary, ns=(1, 1))  # another mtime: another key, the old file is not used
    changed = ModuleImage.load(str(binary))
    assert changed.compact_key() != (kind, key)
    changed.load_compact_table(str(cache))
    assert changed.compact_source == "built"
