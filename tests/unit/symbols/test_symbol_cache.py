"""Symbol tables cached as files (native/core/symbol_cache.h, symbols.cached_table): a table read
back from its file answers every lookup as the built one; a file that is truncated, corrupt, of
another version or made for another key is refused (ValueError) and rebuilt, never used."""

from __future__ import annotations

import mmap
import os
import random
import struct

import pytest

from fastunwind import _core, cache, symbols
from fastunwind.elf import ElfFile, find_debug_file

from tests.support.symbol_section import STB_GLOBAL, SymbolSection

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
KEY = b"elf\0test-key"
HEADER_SIZE = 40


def _lookups(table: _core.SymbolTable, addresses: list[int]) -> list[tuple[str, int] | None]:
    return [table.lookup(a) for a in addresses]


def _addresses(seed: int, low: int, span: int) -> list[int]:
    rng = random.Random(seed)
    return [low + rng.randrange(span) for _ in range(5000)]


def _kallsyms_text() -> bytes:
    lines = [f"{0xffffffff81000000 + 0x40 * i:016x} {'tTwWdb'[i % 6]} function_{i}\n" for i in range(3000)]
    lines.insert(7, "ffffffff81000100 T alias_at_same_address\n")  # of equal addresses the last is kept
    lines.append("ffffffffc0000000 t module_function\t[some_module]\n")
    return "".join(lines).encode()


def test_libc_table_read_back_answers_as_built():
    elf = ElfFile.open(LIBC)
    built = symbols._symbol_table_of(elf, find_debug_file(elf))
    loaded = _core.SymbolTable.from_cache(built.cache_file(KEY), KEY)
    assert len(loaded) == len(built) > 1000
    addresses = _addresses(1, 0, 0x200000)
    assert _lookups(loaded, addresses) == _lookups(built, addresses)
    assert sum(1 for r in _lookups(loaded, addresses) if r) > 100


def test_kallsyms_table_read_back_answers_as_built():
    built = _core.SymbolTable.from_kallsyms(_kallsyms_text())
    loaded = _core.SymbolTable.from_cache(built.cache_file(KEY), KEY)
    assert loaded.usable and len(loaded) == len(built)
    addresses = _addresses(2, 0xffffffff80fff000, 0x40000000)
    assert _lookups(loaded, addresses) == _lookups(built, addresses)
    assert loaded.lookup(0xffffffff81000100) == ("alias_at_same_address", 0)


def test_names_outside_ascii_and_demangling_survive():
    s = SymbolSection()
    s.add("caf\u00e9_\U0001f600".encode(), 0x1000, 16, STB_GLOBAL)
    s.add(b"bad\xffbyte", 0x1100, 16, STB_GLOBAL)  # stored as U+FFFD
    s.add(b"_ZN3foo3barEv", 0x1200, 16, STB_GLOBAL)
    built = _core.SymbolTable.from_elf([s.source()])
    loaded = _core.SymbolTable.from_cache(built.cache_file(KEY), KEY)
    for address in (0x1004, 0x1100, 0x1201):
        assert loaded.lookup(address) == built.lookup(address)
    assert loaded.lookup(0x1201) == ("foo::bar", 1)


def test_unusable_table_stays_unusable():
    hidden = b"".join(b"0000000000000000 T hidden_%d\n" % i for i in range(10))  # kptr_restrict
    built = _core.SymbolTable.from_kallsyms(hidden)
    loaded = _core.SymbolTable.from_cache(built.cache_file(KEY), KEY)
    assert not built.usable and not loaded.usable and loaded.lookup(0) is None


def _file() -> bytes:
    return _core.SymbolTable.from_kallsyms(_kallsyms_text()).cache_file(KEY)


def _with(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value):]


def _refusals() -> dict[str, bytes]:
    data = _file()
    count = struct.unpack_from("<Q", data, 16)[0]
    starts = HEADER_SIZE + (len(KEY) + 7) // 8 * 8
    offsets = starts + 8 * count
    names = offsets + 8 * count
    return {
        "empty": b"",
        "header only": data[:HEADER_SIZE],
        "truncated": data[:-8],
        "longer": data + bytes(8),
        "magic": _with(data, 0, b"XUSYMTAB"),
        "version": _with(data, 8, struct.pack("<I", 99)),
        "unknown flag": _with(data, 12, struct.pack("<I", 0x10)),
        "count": _with(data, 16, struct.pack("<Q", count + 1)),
        "names size": _with(data, 24, struct.pack("<Q", 1 << 40)),
        "starts out of order": _with(data, starts + 8, struct.pack("<Q", 0)),
        "name past the names": _with(data, offsets, struct.pack("<I", 0xFFFFFF00)),
        "name not UTF-8": _with(data, names, b"\xff"),
        "name starting inside a sequence": _with(data, names, b"\x80"),
    }


@pytest.mark.parametrize("case", sorted(_refusals()))
def test_bad_files_are_refused(case: str):
    with pytest.raises(ValueError, match="symbol cache"):
        _core.SymbolTable.from_cache(_refusals()[case], KEY)


def test_another_key_is_refused():
    with pytest.raises(ValueError, match="another file"):
        _core.SymbolTable.from_cache(_file(), KEY + b"x")


def test_cached_table_is_written_then_used_and_rebuilt_when_bad(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    builds = []

    def build() -> _core.SymbolTable:
        builds.append(1)
        return _core.SymbolTable.from_kallsyms(_kallsyms_text())

    first = symbols.cached_table("kallsyms-test", b"key one", build)
    path = os.path.join(cache.cache_dir("symbols"), "kallsyms-test" + symbols.SUFFIX)
    assert os.path.isfile(path) and len(builds) == 1
    again = symbols.cached_table("kallsyms-test", b"key one", build)
    assert len(builds) == 1 and len(again) == len(first)
    assert again.lookup(0xffffffff81000041) == first.lookup(0xffffffff81000041)
    symbols.cached_table("kallsyms-test", b"key two", build)  # another source: rebuilt, rewritten
    assert len(builds) == 2
    with open(path, "r+b") as f:  # corrupt: rebuilt
        with mmap.mmap(f.fileno(), 0) as m:
            m[HEADER_SIZE + 16] ^= 0xFF
    symbols.cached_table("kallsyms-test", b"key two", build)
    assert len(builds) == 3
    assert symbols.cached_table("kallsyms-test", b"key two", build) is not None and len(builds) == 3
    assert [e.kind for e in cache.entries()] == ["symbols"]


def test_symbol_table_for_file_is_cached_per_build_id(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    elf = ElfFile.open(LIBC)
    built = symbols.symbol_table_for_file(elf)
    assert os.listdir(cache.cache_dir("symbols")) == [elf.build_id_hex + symbols.SUFFIX]
    cached = symbols.symbol_table_for_file(elf)
    addresses = _addresses(3, 0, 0x200000)
    assert _lookups(cached, addresses) == _lookups(built, addresses)
