"""Function names for addresses: a module's symbols as perf 6.1 keeps them, JIT perf maps, and the
kernel's symbols.

Tables are `fastunwind._core.SymbolTable`s, built and searched in C (native/core/symbols.c): sorted by
address, one symbol per address. Like perf (dso__load), a module's symbols come from one table: the
separate debug file's .symtab, else the file's .symtab, else its .dynsym. perf's rules follow:
functions and labels in text sections, zero-sized symbols extended to the next one, its choice
between aliases (choose_best_symbol), names demangled (C++, Rust legacy and v0, with libiberty,
in C). PLT stubs (.plt, .plt.sec, .plt.got) are named `symbol@plt` from the file's relocations
(native/core/plt.c). `table.lookup(address)` gives (name, offset into the symbol) or None.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from fastunwind import _core, cache
from fastunwind.elf import (SHT_DYNSYM, SHT_NOBITS, SHT_RELA, SHT_SYMTAB, CheckedRead, ElfFile, SectionBytes,
                            find_debug_file)
from fastunwind.errors import ElfError, FileChangedError
from fastunwind._core import SymbolTable
from fastunwind.elf.build_id_cache import build_id_cache_file

EM_X86_64 = 62
#: sections holding PLT stubs, and the relocation sections naming their GOT slots (native/core/plt.h)
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")
PLT_RELOCATION_SECTIONS = (".rela.plt", ".rela.dyn")


def _symbol_section(elf: ElfFile, kind: int) -> tuple[SectionBytes, SectionBytes, int, bytes] | None:
    """(symbols, strings, elf_class, section_flags) of the file's section of type `kind`; bit 0 of
    section_flags[i]: section i's name contains "text" (where perf accepts labels)."""
    for section in elf.sections:
        if section.type != kind or section.link >= len(elf.sections):
            continue
        try:
            flags = bytes(1 if "text" in s.name else 0 for s in elf.sections)
            return (elf.section_data(section), elf.section_data(elf.sections[section.link]), elf.elf_class, flags)
        except ElfError:
            return None  # an unreadable symbol table only costs names
    return None


def _plt_input(elf: ElfFile) -> tuple[SectionBytes, SectionBytes, list[SectionBytes],
                                     list[tuple[int, SectionBytes, int, int, bool]]] | None:
    """The PLT synthesizer's input (native/core/plt.h): .dynsym, .dynstr, the relocation sections, and
    the PLT sections as (address, bytes, sh_entsize, sh_addralign, is .plt.got); None without them
    (or for another machine than x86-64)."""
    if elf.elf_class != 64 or elf.machine != EM_X86_64:
        return None
    by_name = {s.name: s for s in elf.sections}
    dynsym = next((s for s in elf.sections if s.type == SHT_DYNSYM and s.link < len(elf.sections)), None)
    if dynsym is None:
        return None
    try:
        relocations = [elf.section_data(by_name[name]) for name in PLT_RELOCATION_SECTIONS
                       if name in by_name and by_name[name].type == SHT_RELA]
        sections = [(s.addr, elf.section_data(s), s.entsize, s.addralign, s.name == ".plt.got")
                    for s in (by_name.get(name) for name in PLT_SECTIONS) if s is not None and s.type != SHT_NOBITS]
        if not relocations or not sections:
            return None
        return elf.section_data(dynsym), elf.section_data(elf.sections[dynsym.link]), relocations, sections
    except ElfError:
        return None


def symbol_table_for_file(elf: ElfFile) -> SymbolTable:
    """The symbols perf 6.1 shows for `elf`: of its separate debug file's .symtab, else its own
    .symtab, else its .dynsym (the first that exists), with its PLT stubs named. Cached per
    build-id (cached_table), for the file and the debug file it was built from."""
    debug_path = find_debug_file(elf)
    build_id = elf.build_id_hex
    if build_id is None:
        return _symbol_table_of(elf, debug_path)
    # an image copied from memory (the vDSO) has no file to identify: its build-id names it
    key = (_core.symbol_key_memory_image(build_id, debug_path or "") if elf.in_memory
           else _core.symbol_key_elf(build_id, elf.path, debug_path or ""))
    return cached_table(build_id, key, lambda: _symbol_table_of(elf, debug_path))


def _symbol_table_of(elf: ElfFile, debug_path: str | None) -> SymbolTable:
    source, debug = None, None
    if debug_path:
        try:
            debug = ElfFile.open(debug_path)
            source = _symbol_section(debug, SHT_SYMTAB)
        except (OSError, ElfError):
            source = None
    try:  # no table from the zeros of a file truncated while read
        with CheckedRead(*(file.check_unchanged for file in (elf, debug) if file is not None)):
            source = source or _symbol_section(elf, SHT_SYMTAB) or _symbol_section(elf, SHT_DYNSYM)
            return SymbolTable.from_elf([source] if source else [], plt=_plt_input(elf))
    finally:
        if debug is not None:
            debug.close()


def perf_map_table(path: str) -> SymbolTable | None:
    """The symbols of a JIT's perf map (`/tmp/perf-PID.map`), None if it cannot be read."""
    try:
        return table_from_file(SymbolTable.from_perf_map, _read_mapped(path))
    except (OSError, FileChangedError):
        return None


def _read_mapped(path: str) -> bytes | _core.MappedFile:
    """A file's bytes: a regular file mapped with its pages in memory at once (5 MB of kallsyms
    read() costs 1-4 ms of copying, mapped 0.5 ms), a /proc file (size 0) read."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > 0:
            try:
                return _core.MappedFile(f.fileno(), path, populate=True)
            except (OSError, ValueError):
                pass
        return f.read()


def table_from_file(build: Callable[..., SymbolTable], data: bytes | _core.MappedFile, *args: bytes) -> SymbolTable:
    """`build(data, *args)`; FileChangedError when `data` is a mapped file truncated meanwhile (its
    pages past the new end read as zeros)."""
    table = build(data, *args)
    if isinstance(data, _core.MappedFile):
        data.check()
    return table


def kallsyms_bytes(build_id: str | None = None) -> bytes | _core.MappedFile:
    """kallsyms' text: perf's build-id-cache copy for the kernel with `build_id` when there is one,
    else /proc/kallsyms; empty if neither is readable."""
    candidates = [build_id_cache_file("[kernel.kallsyms]", build_id, "kallsyms")] if build_id else []
    for path in [*candidates, "/proc/kallsyms"]:
        try:
            return _read_mapped(path)
        except OSError:
            continue
    return b""


def cached_kernel_symbol_table(build_id: str | None) -> SymbolTable | None:
    """The kernel's whole symbol table from the cache, when perf's build-id cache holds the kallsyms
    of the kernel with `build_id` and it is cached (cached_table); None otherwise (/proc/kallsyms
    changes with every boot and module load: it is not cached)."""
    if build_id is None:
        return None
    path = build_id_cache_file("[kernel.kallsyms]", build_id, "kallsyms")
    key = _core.symbol_key_kallsyms(path)
    if key is None:
        return None
    return cached_table(f"kallsyms-{build_id}", key, lambda: table_from_file(SymbolTable.from_kallsyms, _read_mapped(path)))


#: cache entries of symbol tables (native/core/symbol_cache.h)
SUFFIX = cache.KINDS["symbols"]


def cached_table(name: str, key_bytes: bytes, build: Callable[[], SymbolTable]) -> SymbolTable:
    """The table `build` makes, from the cache entry `name` when it holds one made for `key_bytes`
    (what the table is built from, core/cache_paths.h: checked, with the whole file, in C), else
    built and written there. A cache that cannot be written costs only the next run's build."""
    path = os.path.join(cache.cache_dir("symbols"), name + SUFFIX)
    try:
        with open(path, "rb") as f:
            mapped = _core.MappedFile(f.fileno(), path)
    except (OSError, ValueError):  # missing, or empty
        mapped = None
    if mapped is not None:
        try:
            table = SymbolTable.from_cache(mapped, key_bytes)
        except ValueError:  # another version, another file's, or corrupt: rebuilt below
            mapped.close()
        else:
            if not mapped.changed:  # truncated while checked: rebuilt below
                # checking read every page; lookups touch few of them (back from the page cache then)
                mapped.release_pages()
                return table
    table = build()
    try:
        cache.write_atomically(path, table.cache_file(key_bytes))
    except (OSError, ValueError):
        pass
    return table


def kernel_symbol_table(build_id: str | None = None, addresses: bytes | None = None) -> SymbolTable:
    """The kernel's function symbols (kallsyms): perf's build-id-cache copy for the recording's
    kernel when there is one (the right kernel, and a plain file: reading /proc/kallsyms costs
    ~50 ms of kernel time), else /proc/kallsyms. Its `usable` is False when neither is readable or
    the addresses are hidden (kptr_restrict; root sees them). With `addresses` (bytes of u64), only
    the symbols their lookups need are kept (one pass, ~4 ms instead of ~12 for all ~120k)."""
    data = kallsyms_bytes(build_id)
    return table_from_file(SymbolTable.from_kallsyms, data, *([] if addresses is None else [addresses]))
