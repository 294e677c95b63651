"""Function names for addresses: `.symtab` (from the file or its separate debug file) and `.dynsym`.

Symbols are looked up by svma with a binary search over a sorted array built once per image. Where
several symbols start at one address (aliases), the choice follows perf's preferences: a sized one
over a zero-sized one, non-weak over weak, global over local, fewer leading underscores.
A symbol without a size extends to the next symbol, as perf fixes them up.
"""

from __future__ import annotations

import array
import bisect

from collections.abc import Iterable

from fastunwind import _core
from fastunwind.elf import SHT_DYNSYM, SHT_SYMTAB, ElfFile, find_debug_file
from fastunwind.errors import ElfError

STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2


def _preference(name: str, size: int, bind: int) -> tuple[int, int, int, int]:
    """Sort key: smaller is better (see the module docstring)."""
    underscores = len(name) - len(name.lstrip("_"))
    return (size == 0, bind == STB_WEAK, bind != STB_GLOBAL, underscores)


class SymbolTable:
    """Function symbols of one module, by svma."""

    def __init__(self, symbols: Iterable[tuple[int, int, str, int]]) -> None:
        best: dict[int, tuple[tuple[int, int, int, int], int, str]] = {}
        for value, size, name, bind in symbols:
            key = _preference(name, size, bind)
            current = best.get(value)
            if current is None or key < current[0]:
                best[value] = (key, size, name)
        starts = sorted(best)
        self._starts = array.array("Q", starts)
        self._names = [best[s][2] for s in starts]
        ends = []
        for i, start in enumerate(starts):
            size = best[start][1]
            following = starts[i + 1] if i + 1 < len(starts) else start + max(size, 1)
            ends.append(start + size if size else following)
        self._ends = array.array("Q", ends)

    @classmethod
    def for_file(cls, elf: ElfFile) -> SymbolTable:
        """From the file's and its separate debug file's .symtab and .dynsym (decoded in C)."""
        sources = [elf]
        debug_path = find_debug_file(elf)
        debug = None
        if debug_path:
            try:
                debug = ElfFile.open(debug_path)
                sources.insert(0, debug)
            except (OSError, ElfError):
                debug = None
        symbols: list[tuple[int, int, str, int]] = []
        try:
            for source in sources:
                for section in source.sections:
                    if section.type not in (SHT_SYMTAB, SHT_DYNSYM) or section.link >= len(source.sections):
                        continue
                    try:
                        table = source.section_data(section)
                        strings = source.section_data(source.sections[section.link])
                    except ElfError:
                        continue  # an unreadable symbol table only costs names
                    values_b, sizes_b, binds, names = _core.function_symbols(table, strings, source.elf_class)
                    values, sizes = array.array("Q"), array.array("Q")
                    values.frombytes(values_b)
                    sizes.frombytes(sizes_b)
                    symbols.extend(zip(values, sizes, (n.decode(errors="replace") for n in names), binds))
        finally:
            if debug is not None:
                debug.close()
        return cls(symbols)

    def lookup(self, svma: int) -> tuple[str, int] | None:
        """(name, offset into the function) or None."""
        i = bisect.bisect_right(self._starts, svma) - 1
        if i < 0 or svma >= self._ends[i]:
            return None
        return self._names[i], svma - self._starts[i]

    def __len__(self) -> int:
        return len(self._starts)
