"""The perf-map parser (native/perf_map.c) through SymbolTable.from_perf_map: perf's line format,
its quirks, and hostile input (huge lines, long numbers, binary garbage): fewer symbols, never a crash."""

from __future__ import annotations

import random

from fastunwind import _core

MAX_LINE = 65536  # FU_PERF_MAP_MAX_LINE


def test_lines_as_perf_reads_them():
    text = (b"7f0000001000 40 jitted_function\n"
            b"7f0000002000 10 LazyCompile:*add /srv/app.js:12:3\n"  # the name is the rest of the line
            b"7f0000003000 0 zero_sized\n")
    t = _core.SymbolTable.from_perf_map(text)
    assert t.lookup(0x7F0000001000) == ("jitted_function", 0)
    assert t.lookup(0x7F000000103F) == ("jitted_function", 0x3F)
    assert t.lookup(0x7F0000001040) is None
    assert t.lookup(0x7F0000002008) == ("LazyCompile:*add /srv/app.js:12:3", 8)
    assert t.lookup(0x7F0000003000) == ("zero_sized", 0)
    assert t.lookup(0x7F0000003001) is None


def test_the_last_entry_at_an_address_wins():
    """A JIT that recompiles into the same place writes a new line; the newest code is the last."""
    t = _core.SymbolTable.from_perf_map(b"1000 10 old\n1000 20 new\n")
    assert t.lookup(0x1018) == ("new", 0x18)


def test_malformed_lines_are_skipped():
    text = (b"\n"
            b"zz 10 not_hex\n"                              # as perf: start 0, size 0, name " 10 not_hex"
            b"1000 10 ab\n"                                 # perf drops names of 2 bytes or fewer
            b"1000\n"
            b"12345678901234567 10 seventeen_digits\n"     # more than a u64
            b"2000 10 fine\r\n"
            b"3000 10 " + b"x" * MAX_LINE + b"\n"           # longer than FU_PERF_MAP_MAX_LINE
            b"4000 10 last_without_newline")
    t = _core.SymbolTable.from_perf_map(text)
    assert t.lookup(0) == (" 10 not_hex", 0)
    assert t.lookup(0x1000) is None
    assert t.lookup(0x2000) == ("fine\r", 0)
    assert t.lookup(0x3000) is None
    assert t.lookup(0x4004) == ("last_without_newline", 4)


def test_hostile_input():
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for _ in range(200):
        size = rng.choice((0, 1, 7, 100, 5000))
        text = bytes(rng.choice(b"0123456789abcdef \n\x00\xff") for _ in range(size))
        t = _core.SymbolTable.from_perf_map(text)
        assert len(t) <= text.count(b"\n") + 1, f"seed {seed}"
        t.lookup(rng.randrange(2**64))
    huge = b"ffffffffffffffff ffffffffffffffff wraps_past_the_top\n"
    t = _core.SymbolTable.from_perf_map(huge)
    assert t.lookup(2**64 - 1) == ("wraps_past_the_top", 0)
