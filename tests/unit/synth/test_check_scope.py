"""core/check_scope.c: the function symbols, noreturn functions and known entries check reads in C,
held to the Python ELF reader's symbols (elf/__init__.py) on real files, and its hostile input."""

from __future__ import annotations

import array
import struct

import pytest

from fastunwind import _core
from fastunwind.elf import STT_FUNC, ElfFile

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


def _names(symbols: tuple[bytes, bytes, bytes, bytes, bytes, bytes]) -> dict[int, tuple[int, str]]:
    starts, sizes = array.array("Q", symbols[0]), array.array("Q", symbols[1])
    offsets, blob = array.array("I", symbols[2]), symbols[3]
    return {start: (size, blob[offset:blob.index(b"\0", offset)].decode("utf-8", "backslashreplace"))
            for start, size, offset in zip(starts, sizes, offsets)}


@pytest.mark.parametrize("path", [LIBC, LIBSTDCXX])
def test_symbols_agree_with_the_python_reader(path: str) -> None:
    with ElfFile.open(path) as elf:
        symbols = _core.check_symbols([elf.file_view()])
        python = [(s.value, s.size, s.name) for s in elf.symbols()
                  if s.type == STT_FUNC and s.section_index != 0 and s.value and s.name]
    # one name per address: of aliases, the first without a leading underscore, else the first
    expected: dict[int, tuple[int, str]] = {}
    for value, size, name in python:
        if value not in expected or (expected[value][1].startswith("_") and not name.startswith("_")):
            expected[value] = (size, name)
    assert _names(symbols) == expected
    assert list(array.array("Q", symbols[4])) == sorted({v for v, _s, n in python if _core.check_noreturn_name(n)})
    assert list(array.array("Q", symbols[5])) == sorted({v for v, _s, n in python if ".cold" not in n})
    if path == LIBC:
        assert expected and any(name == "abort" for _size, name in expected.values())


def test_a_symbol_table_that_does_not_read_gives_no_symbols() -> None:
    with ElfFile.open(LIBC) as elf:
        data = bytearray(elf.file_view())
        dynsym = next(s for s in elf.sections if s.name == ".dynsym")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, = struct.unpack_from("<H", data, 0x3a)
    struct.pack_into("<Q", data, shoff + dynsym.index * shentsize + 0x38, 23)  # sh_entsize
    starts, _sizes, _offsets, _names_blob, noreturn, entries = _core.check_symbols([bytes(data)])
    assert starts == noreturn == entries == b""


def test_a_symbols_tuple_is_checked_before_use() -> None:
    with ElfFile.open(LIBC) as elf:
        symbols = _core.check_symbols([elf.file_view()])
        starts = array.array("Q", symbols[0])
        starts[0], starts[1] = starts[1], starts[0]
        unsorted = (starts.tobytes(), *symbols[1:])
        with pytest.raises(ValueError):
            _core.check_uncovered(elf.file_view(), None, None, [], unsorted, b"")
        outside = (symbols[0], symbols[1], array.array("I", [len(symbols[3])] * len(starts)).tobytes(), *symbols[3:])
        with pytest.raises(ValueError):
            _core.check_uncovered(elf.file_view(), None, None, [], outside, b"")
        with pytest.raises(ValueError):
            _core.check_uncovered(elf.file_view(), None, None, [], symbols, b"\0" * 7)


def test_without_cfi_every_function_in_code_is_uncovered() -> None:
    with ElfFile.open(LIBC) as elf:
        symbols = _core.check_symbols([elf.file_view()])
        code = [(s.vaddr, elf.segment_data(s)) for s in elf.loaded_segments() if s.flags & 1]
        found = _core.check_uncovered(elf.file_view(), None, None, code, symbols, b"")
    names = _names(symbols)
    in_code = sorted(a for a in names if any(v <= a < v + len(d) for v, d in code))
    assert [start for start, _end, _name in found] == in_code
    assert all(end == start + names[start][0] or names[start][0] == 0 for start, end, _name in found)
    assert all(name == names[start][1] for start, _end, name in found)
