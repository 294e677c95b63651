"""fastunwind._core.SymbolTable (native/symbols.c): perf 6.1's symbol filter (functions, labels in
text sections), end fix-up and choice between aliases, kallsyms lookups, with and without the
query-only pass, against straightforward Python oracles."""

from __future__ import annotations

import bisect
import random
import struct

import pytest

from fastunwind import _core
from fastunwind.elf import SHT_DYNSYM, SHT_SYMTAB, ElfFile, find_debug_file
from fastunwind.symbols import symbol_table_for_file

from tests.support.symbol_section import (SHN_ABS, STB_GLOBAL, STB_LOCAL, STB_WEAK, STT_FUNC, STT_GNU_IFUNC,
                                         STT_NOTYPE, STT_OBJECT, SymbolSection)

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def test_alias_preference_follows_perf():
    """choose_best_symbol: sized, non-weak, global, fewer leading underscores, longer name, first."""
    s = SymbolSection()
    s.add(b"__weak_sized", 0x1000, 16, STB_WEAK)
    s.add(b"global_unsized", 0x1000, 0)  # zero-sized, and stays so: the next symbol starts here too
    s.add(b"local_sized_with_a_long_name", 0x1000, 16, STB_LOCAL)
    s.add(b"__global_sized_long_name", 0x1000, 16)
    s.add(b"global_sized", 0x1000, 16)
    s.add(b"global_sizes", 0x1000, 16)  # ties with the one before: the first one met wins
    s.add(b"short", 0x2000, 8)
    s.add(b"longer", 0x2000, 8)  # the longer name wins
    s.add(b"_ZN3foo3barEv", 0x3000, 8)  # demangled "foo::bar": no underscore, 8 bytes
    s.add(b"_foo_bar_x", 0x3000, 8)
    table = _core.SymbolTable.from_elf([s.source()])
    assert len(table) == 3
    assert table.lookup(0x1004) == ("global_sized", 4)
    assert table.lookup(0x2000) == ("longer", 0)
    assert table.lookup(0x3001) == ("foo::bar", 1)


def test_zero_sized_symbols_are_extended_before_aliases_are_chosen():
    """perf fixes ends (symbols__fixup_end) before it removes duplicates: the last zero-sized symbol
    of an address reaches the next address, and then competes as a sized one."""
    s = SymbolSection()
    s.add(b"weak_sized", 0x1000, 4, STB_WEAK)
    s.add(b"global_unsized", 0x1000, 0)
    s.add(b"next", 0x1100, 4)
    table = _core.SymbolTable.from_elf([s.source()])
    assert table.lookup(0x10FF) == ("global_unsized", 0xFF)


def test_labels_in_text_sections_count():
    s = SymbolSection()
    s.add(b"_start", 0x1000, 0, kind=STT_NOTYPE)  # ld.so's _start in libc6-dbg's debug file
    s.add(b"data_label", 0x2000, 0, kind=STT_NOTYPE, shndx=2)  # not a text section
    s.add(b"absolute", 0x3000, 0, kind=STT_NOTYPE, shndx=SHN_ABS)
    s.add(b"object", 0x4000, 8, kind=STT_OBJECT)
    table = _core.SymbolTable.from_elf([s.source()])
    assert len(table) == 1
    assert table.lookup(0x1007) == ("_start", 7)
    # the last symbol, zero-sized, reaches the end of the page after its start's page
    assert table.lookup(0x1FFF) == ("_start", 0xFFF)
    assert table.lookup(0x2000) is None


def test_sources_and_symbol_ends():
    main = SymbolSection()
    main.add(b"from_file", 0x2000, 0x10)
    main.add(b"unsized", 0x3000, 0)  # extends to the next symbol
    main.add(b"next", 0x3100, 0x20)
    main.add(b"unsized_before_ifunc", 0x4000, 0)
    main.add(b"ifunc", 0x5000, 8, kind=STT_GNU_IFUNC)
    main.add(b"object", 0x6000, 8, kind=STT_OBJECT)
    main.add(b"undefined", 0x7000, 8, shndx=0)
    main.add(None, 0x8000, 8)  # no name
    main.add(None, 0x9000, 8, name_offset=10**6)  # a name outside the string table
    main.add(b"last_unsized", 0xA010, 0)  # the last one: to the end of the next page
    table = _core.SymbolTable.from_elf([main.source()])
    assert table.lookup(0x2000) == ("from_file", 0)
    assert table.lookup(0x2010) is None  # past the sized symbol, before the next
    assert table.lookup(0x30FF) == ("unsized", 0xFF)
    assert table.lookup(0x3100) == ("next", 0)
    assert table.lookup(0x4FFF) == ("unsized_before_ifunc", 0xFFF)
    assert table.lookup(0xA010) == ("last_unsized", 0)
    assert table.lookup(0xBFFF) == ("last_unsized", 0x1FEF)
    assert table.lookup(0xC000) is None
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
        _core.SymbolTable.from_elf([(b"", b"", 16, b"")])
    with pytest.raises(TypeError):
        _core.SymbolTable.from_elf([(b"", b"", 64)])
    with pytest.raises(TypeError):
        _core.SymbolTable()
    # a truncated table: the whole entries only
    s = SymbolSection()
    s.add(b"f", 0x10, 4)
    entries, strings, elf_class, flags = s.source()
    assert _core.SymbolTable.from_elf([(entries[:-1], strings, elf_class, flags)]).lookup(0x10) is None


def _python_symbol_table(elf: ElfFile) -> tuple[list[int], list[int], list[str]]:
    """perf 6.1's symbols (dso__load_sym, symbols__fixup_end, symbols__fixup_duplicate) in Python:
    one table (the debug file's .symtab, else the file's .symtab, else .dynsym), no demangling
    (libc's names are C)."""
    debug_path = find_debug_file(elf)
    source = ElfFile.open(debug_path) if debug_path else elf
    kinds = (SHT_SYMTAB,) if any(s.type == SHT_SYMTAB for s in source.sections) else (SHT_DYNSYM,)
    symbols = []  # (value, order, size, bind, name)
    for section in source.sections:
        if section.type not in kinds:
            continue
        data, strings = source.section_data(section), bytes(source.section_data(source.sections[section.link]))
        for offset in range(0, len(data) - 23, 24):
            name_offset, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, offset)
            function = info & 0xF in (STT_FUNC, STT_GNU_IFUNC)
            label = (info & 0xF == STT_NOTYPE and shndx not in (0, SHN_ABS) and shndx < len(source.sections)
                     and "text" in source.sections[shndx].name)
            if not (function or label) or shndx == 0 or name_offset == 0:
                continue
            name = strings[name_offset:strings.index(b"\0", name_offset)].decode(errors="replace")
            symbols.append([value, len(symbols), value + size, info >> 4, name])
    if debug_path:
        source.close()
    symbols.sort(key=lambda s: (s[0], s[1]))
    for i, s in enumerate(symbols):
        if s[2] == s[0]:
            s[2] = symbols[i + 1][0] if i + 1 < len(symbols) else (s[0] + 4095) // 4096 * 4096 + 4096
    best: dict[int, list] = {}
    for s in symbols:
        key = lambda t: (t[2] == t[0], t[3] == STB_WEAK, t[3] != STB_GLOBAL,  # noqa: E731
                         len(t[4]) - len(t[4].lstrip("_")), -len(t[4]))
        if s[0] not in best or key(s) < key(best[s[0]]):
            best[s[0]] = s
    starts = sorted(best)
    return starts, [best[s][2] for s in starts], [best[s][4] for s in starts]


def test_libc_matches_the_python_implementation():
    try:
        elf = ElfFile.open(LIBC)
    except OSError:
        pytest.skip(f"{LIBC} not readable")
    with elf:
        starts, ends, names = _python_symbol_table(elf)
        table = symbol_table_for_file(elf)
    assert len(table) >= len(starts) > 1000  # and the PLT stubs
    rng = random.Random(7)
    probes = [a for s, e in zip(starts, ends) for a in (s, e - 1, e, s + rng.randrange(max(1, e - s)))]
    for address in probes:
        i = bisect.bisect_right(starts, address) - 1
        expected = (names[i], address - starts[i]) if i >= 0 and address < ends[i] else None
        found = table.lookup(address)
        if found is not None and found[0].endswith("@plt"):
            continue  # a PLT stub (tests/unit/symbols/test_plt.py)
        assert found == expected, hex(address)


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
