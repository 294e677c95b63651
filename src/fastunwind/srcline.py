"""Source lines and inline chains of a module's code (native/core/srcline.h: DWARF line tables and
inlined-subroutine DIEs through elfutils' libdw), from the file that holds the module's DWARF,
looked for as perf and gdb look: the separate debug file by build-id or `.gnu_debuglink`
(elf.find_debug_file: /usr/lib/debug), perf's build-id cache (`~/.debug/.build-id/xx/rest/debug`),
a debuginfod server when $DEBUGINFOD_URLS is set (elf/debuginfod.py), else the module itself.

A debug file whose DWARF sections are compressed (Debian's -dbg and -dbgsym files are) is opened
through a decompressed copy kept in the cache (`debug/<build-id>.debug`, made once with objcopy
--decompress-debug-sections): libdw inflates every compressed section at each open, 0.13 s for
libc's debug file against 0.01 s for its copy.
"""

from __future__ import annotations

import os

from fastunwind import _core
from fastunwind.cache import cache_dir
from fastunwind.elf import ElfFile, find_debug_file
from fastunwind.elf.build_id_cache import build_id_cache_root
from fastunwind.elf.debuginfod import DebuginfodClient
from fastunwind.errors import FastunwindError
from fastunwind.typecheck import NamedTuple

__all__ = ["SourceLocation", "debug_file_with_dwarf", "open_source_lines", "source_chain"]


class SourceLocation(NamedTuple):
    function: str | None
    file: str | None
    line: int  #: 0: not known


def _has_dwarf_lines(path: str) -> bool:
    try:
        with ElfFile.open(path) as elf:
            section = elf.section(".debug_line") or elf.section(".zdebug_line")
            return section is not None and section.size > 0
    except (OSError, FastunwindError):
        return False


def _decompressed(path: str, build_id: str | None) -> str:
    """`path`, or its cached copy with the DWARF decompressed when its sections are compressed
    (the file itself if the copy cannot be made: objcopy missing, the cache not writable)."""
    try:
        with ElfFile.open(path) as elf:
            compressed = any(s.name.startswith(".zdebug_") or (s.name.startswith(".debug_") and s.is_compressed)
                             for s in elf.sections)
            key = build_id or elf.build_id_hex
    except (OSError, FastunwindError):
        return path
    import shutil  # only for a compressed debug file: subprocess costs ~3 ms of every start
    import subprocess

    if not compressed or key is None or shutil.which("objcopy") is None:
        return path
    copy = os.path.join(cache_dir("debug"), f"{key}.debug")
    if os.path.isfile(copy) and os.path.getmtime(copy) >= os.path.getmtime(path):
        return copy
    temporary = f"{copy}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        subprocess.run(["objcopy", "--decompress-debug-sections", path, temporary], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.replace(temporary, copy)
    except (OSError, subprocess.CalledProcessError):
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return path
    return copy


def debug_file_with_dwarf(elf: ElfFile, debuginfod: DebuginfodClient | None = None) -> str | None:
    """The file holding the DWARF of `elf`'s code (see the module's doc), or None."""
    candidates = [find_debug_file(elf)]
    build_id = elf.build_id_hex
    if build_id is not None and len(build_id) > 2:
        candidates.append(os.path.join(build_id_cache_root(), ".build-id", build_id[:2], build_id[2:], "debug"))
    for candidate in candidates:
        if candidate is not None and _has_dwarf_lines(candidate):
            return candidate
    if _has_dwarf_lines(elf.path):
        return elf.path
    if debuginfod is not None and build_id is not None:
        return debuginfod.debuginfo(build_id)
    return None


def open_source_lines(elf: ElfFile, debuginfod: DebuginfodClient | None = None) -> _core.SourceLines | None:
    """The source lines of `elf`'s code, None if no DWARF for it is found."""
    path = debug_file_with_dwarf(elf, debuginfod)
    return _core.SourceLines.open(_decompressed(path, elf.build_id_hex)) if path is not None else None


def source_chain(lines: _core.SourceLines, svma: int) -> list[SourceLocation]:
    """The chain at `svma`, innermost first: the line, then each inlined call site (srcline.h)."""
    return [SourceLocation(*location) for location in lines.lookup(svma)]
