"""fastunwind._core.SymbolTable (native/symbols.c): perf's choice between aliases, symbol ends,
kallsyms lookups, with and without the query-only pass, against straightforward Python oracles."""

from __future__ import annotations

import bisect
import random
import struct

import pytest

from fastunwind import _core
from fastunwind.elf import SHT_DYNSYM, SHT_SYMTAB, ElfFile, find_debug_file
from fastunwind.symbolize import symbol_table_for_file

STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_OBJECT, STT_FUNC, STT_GNU_IFUNC = 1, 2, 10
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


class SymbolSection:
    """A .symtab and its string table, built entry by entry."""

    def __init__(self, elf_class: int = 64) -> None:
        self.elf_class = elf_class
        self.strings = bytearray(b"\0")
        self.entries = bytearray(24 if elf_class == 64 else 16)  # entry 0 is the null symbol

    def add(self, name: bytes | None, value: int, size: int, bind: int = STB_GLOBAL, kind: int = STT_FUNC,
            shndx: int = 1, name_offset: int | None = None) -> None:
        if name_offset is None:
            name_offset = 0 if name is None else len(self.strings)
            if name is not None:
                self.strings += name + b"\0"
        info = bind << 4 | kind
        if self.elf_class == 64:
            self.entries += struct.pack("<IBBHQQ", name_offset, info, 0, shndx, value, size)
        else:
            self.entries += struct.pack("<IIIBBH", name_offset, value, size, info, 0, shndx)

    def source(self) -> tuple[bytes, bytes, int]:
        return bytes(self.entries), bytes(self.strings), self.elf_class


def test_alias_preference_follows_perf():
    s = SymbolSection()
    s.add(b"__weak_sized", 0x1000, 16, STB_WEAK)
    s.add(b"global_unsized", 0x1000, 0)
    s.add(b"local_sized", 0x1000, 16, STB_LOCAL)
    s.add(b"__global_sized", 0x1000, 16)
    s.add(b"global_sized", 0x1000, 16)
    s.add(b"global_sized_too", 0x1000, 16)  # ties with the one before: the first one met wins
    table = _core.SymbolTable.from_elf([s.source()])
    assert len(table) == 1
    assert table.lookup(0x1004) == ("global_sized", 4)


def test_sources_in_order_of_preference_and_symbol_ends():
    debug, main = SymbolSection(), SymbolSection()
    debug.add(b"from_debug_file", 0x2000, 0x10)
    main.add(b"from_file", 0x2000, 0x10)
    main.add(b"unsized", 0x3000, 0)  # extends to the next symbol
    main.add(b"next", 0x3100, 0x20)
    main.add(b"unsized_before_ifunc", 0x4000, 0)
    main.add(b"ifunc", 0x5000, 8, kind=STT_GNU_IFUNC)
    main.add(b"object", 0x6000, 8, kind=STT_OBJECT)
    main.add(b"undefined", 0x7000, 8, shndx=0)
    main.add(None, 0x8000, 8)  # no name
    main.add(None, 0x9000, 8, name_offset=10**6)  # a name outside the string table
    main.add(b"last_unsized", 0xA000, 0)  # the last one: to its start + 1
    table = _core.SymbolTable.from_elf([debug.source(), main.source()])
    assert table.lookup(0x2000) == ("from_debug_file", 0)
    assert table.lookup(0x2010) is None  # past the sized symbol, before the next
    assert table.lookup(0x30FF) == ("unsized", 0xFF)
    assert table.lookup(0x3100) == ("next", 0)
    assert table.lookup(0x4FFF) == ("unsized_before_ifunc", 0xFFF)
    assert table.lookup(0xA000) == ("last_unsized", 0)
    assert table.lookup(0xA001) is None
    assert table.lookup(0x5007) == ("ifunc", 7)
    for address in (0x6000, 0x7000, 0x8000, 0x9000, 0xFFF, -1, 1 << 64):
        assert table.lookup(address) is None


def test_elf32_and_invalid_utf8_names():
    s = SymbolSection(32)
    s.add(b"caf\xe9", 0x100, 4)
    table = _core.SymbolTable.from_elf([s.source()])
    assert table.lookup(0x102) == ("caf\ufffd", 2)


def test_bad_sources_are_refused():
    with pytest.raises(ValueError):
        _core.SymbolTable.from_elf([(b"", b"", 16)])
    with pytest.raises(TypeError):
        _core.SymbolTable.from_elf([(b"", b"")])
    with pytest.raises(TypeError):
        _core.SymbolTable()
    # a truncated table: the whole entries only
    s = SymbolSection()
    s.add(b"f", 0x10, 4)
    entries, strings, elf_class = s.source()
    assert _core.SymbolTable.from_elf([(entries[:-1], strings, elf_class)]).lookup(0x10) is None


def _python_symbol_table(elf: ElfFile) -> tuple[list[int], list[int], list[str]]:
    """The symbols as fastunwind's Python implementation chose them before they moved to C."""
    debug_path = find_debug_file(elf)
    sources = [ElfFile.open(debug_path), elf] if debug_path else [elf]
    best: dict[int, tuple[tuple, int, str]] = {}
    for source in sources:
        for section in source.sections:
            if section.type not in (SHT_SYMTAB, SHT_DYNSYM):
                continue
            data, strings = source.section_data(section), bytes(source.section_data(source.sections[section.link]))
            for offset in range(0, len(data) - 23, 24):
                name_offset, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, offset)
                if info & 0xF not in (STT_FUNC, STT_GNU_IFUNC) or shndx == 0 or name_offset == 0:
                    continue
                name = strings[name_offset:strings.index(b"\0", name_offset)].decode(errors="replace")
                bind = info >> 4
                key = (size == 0, bind == STB_WEAK, bind != STB_GLOBAL, len(name) - len(name.lstrip("_")))
                if value not in best or key < best[value][0]:
                    best[value] = (key, size, name)
    if debug_path:
        sources[0].close()
    starts = sorted(best)
    ends = [start + best[start][1] if best[start][1] else (starts[i + 1] if i + 1 < len(starts) else start + 1)
            for i, start in enumerate(starts)]
    return starts, ends, [best[s][2] for s in starts]


def test_libc_matches_the_python_implementation():
    try:
        elf = ElfFile.open(LIBC)
    except OSError:
        pytest.skip(f"{LIBC} not readable")
    with elf:
        starts, ends, names = _python_symbol_table(elf)
        table = symbol_table_for_file(elf)
    assert len(table) == len(starts) > 1000
    rng = random.Random(7)
    probes = [a for s, e in zip(starts, ends) for a in (s, e - 1, e, s + rng.randrange(max(1, e - s)))]
    for address in probes:
        i = bisect.bisect_right(starts, address) - 1
        expected = (names[i], address - starts[i]) if i >= 0 and address < ends[i] else None
        assert table.lookup(address) == expected, hex(address)


def _kallsyms_text(rng: random.Random) -> tuple[bytes, list[tuple[int, str]]]:
    """A kallsyms-like text: sorted kernel symbols, then modules' out of order, aliases at one
    address, data symbols between; and the function symbols in file order."""
    lines, functions = [], []
    addresses = sorted(rng.sample(range(0xFFFFFFFF81000000, 0xFFFFFFFF81000000 + 10**6, 16), 400))
    addresses += sorted(rng.sample(range(0xFFFFFFFFC0000000, 0xFFFFFFFFC0000000 + 10**5, 16), 100), reverse=True)
    for n, address in enumerate(addresses):
        for alias in range(rng.choice((1, 1, 1, 2, 3))):
            kind = rng.choice("tTtTwWdDrRb")
            name = f"sym_{n}_{alias}"
            module = "\t[mod]" if address >= 0xFFFFFFFFC0000000 else ""
            lines.append(f"{address:016x} {kind} {name}{module}")
            if kind in "tTwW":
                functions.append((address, name))
    lines.append("garbage line")
    return ("\n".join(lines) + "\n").encode(), functions


def test_kallsyms_lookups_with_and_without_the_query_pass():
    rng = random.Random(11)
    text, functions = _kallsyms_text(rng)
    ordered = sorted(range(len(functions)), key=lambda i: functions[i][0])  # stable: file order among equals
    starts = [functions[i][0] for i in ordered]
    full = _core.SymbolTable.from_kallsyms(text)
    low, high = starts[0] - 64, starts[-1] + 64
    queries = [rng.randrange(low, high) for _ in range(2000)] + starts[:50] + [low, high, starts[-1]] * 2
    reduced = _core.SymbolTable.from_kallsyms(text, struct.pack(f"<{len(queries)}Q", *queries))
    assert full.usable and reduced.usable and len(reduced) < len(full)
    for address in queries:
        i = bisect.bisect_right(starts, address) - 1
        expected = (functions[ordered[i]][1], address - starts[i]) if i >= 0 else None
        assert full.lookup(address) == expected
        assert reduced.lookup(address) == expected


def test_kallsyms_without_addresses_is_not_usable():
    hidden = b"0000000000000000 T _stext\n0000000000000000 t other\n"
    for table in (_core.SymbolTable.from_kallsyms(hidden),
                  _core.SymbolTable.from_kallsyms(hidden, struct.pack("<Q", 5)),
                  _core.SymbolTable.from_kallsyms(b""), _core.SymbolTable.from_kallsyms(b"", b"")):
        assert not table.usable and table.lookup(5) is None
    with pytest.raises(ValueError):
        _core.SymbolTable.from_kallsyms(hidden, b"123")
