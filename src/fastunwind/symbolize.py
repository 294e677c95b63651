"""Function names for addresses: `.symtab` (from the file or its separate debug file) and `.dynsym`
of a module, and the kernel's symbols.

Tables are `fastunwind._core.SymbolTable`s, built and searched in C (native/symbols.c): sorted by
address, one symbol per address. Where several symbols start at one address (aliases), the choice
follows perf's preferences: a sized one over a zero-sized one, non-weak over weak, global over
local, fewer leading underscores. A symbol without a size extends to the next symbol, as perf fixes
them up. `table.lookup(address)` gives (name, offset into the symbol) or None.
"""

from __future__ import annotations

import mmap
import os

from fastunwind import _core
from fastunwind.elf import SHT_DYNSYM, SHT_SYMTAB, ElfFile, find_debug_file
from fastunwind.errors import ElfError
from fastunwind.perf_data import build_id_cache_file

SymbolTable = _core.SymbolTable


def symbol_table_for_file(elf: ElfFile) -> SymbolTable:
    """The function symbols of the file's and its separate debug file's .symtab and .dynsym (the
    debug file's first: they win ties between aliases)."""
    sources = [elf]
    debug_path = find_debug_file(elf)
    debug = None
    if debug_path:
        try:
            debug = ElfFile.open(debug_path)
            sources.insert(0, debug)
        except (OSError, ElfError):
            debug = None
    try:
        sections = []
        for source in sources:
            for section in source.sections:
                if section.type not in (SHT_SYMTAB, SHT_DYNSYM) or section.link >= len(source.sections):
                    continue
                try:
                    sections.append((source.section_data(section),
                                     source.section_data(source.sections[section.link]), source.elf_class))
                except ElfError:
                    continue  # an unreadable symbol table only costs names
        return SymbolTable.from_elf(sections)
    finally:
        if debug is not None:
            debug.close()


def _read_mapped(path: str) -> bytes | mmap.mmap:
    """A file's bytes: a regular file mapped with its pages in memory at once (5 MB of kallsyms
    read() costs 1-4 ms of copying, mapped 0.5 ms), a /proc file (size 0) read."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > 0:
            try:
                return mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                                 prot=mmap.PROT_READ)
            except (OSError, ValueError):
                pass
        return f.read()


def kallsyms_bytes(build_id: str | None = None) -> bytes | mmap.mmap:
    """kallsyms' text: perf's build-id-cache copy for the kernel with `build_id` when there is one,
    else /proc/kallsyms; empty if neither is readable."""
    candidates = [build_id_cache_file("[kernel.kallsyms]", build_id, "kallsyms")] if build_id else []
    for path in [*candidates, "/proc/kallsyms"]:
        try:
            return _read_mapped(path)
        except OSError:
            continue
    return b""


def kernel_symbol_table(build_id: str | None = None, addresses: bytes | None = None) -> SymbolTable:
    """The kernel's function symbols (kallsyms): perf's build-id-cache copy for the recording's
    kernel when there is one (the right kernel, and a plain file: reading /proc/kallsyms costs
    ~50 ms of kernel time), else /proc/kallsyms. Its `usable` is False when neither is readable or
    the addresses are hidden (kptr_restrict; root sees them). With `addresses` (bytes of u64), only
    the symbols their lookups need are kept (one pass, ~4 ms instead of ~12 for all ~120k)."""
    data = kallsyms_bytes(build_id)
    return SymbolTable.from_kallsyms(data) if addresses is None else SymbolTable.from_kallsyms(data, addresses)
