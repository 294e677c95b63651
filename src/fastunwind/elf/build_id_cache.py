"""perf's build-id cache (`~/.debug`, perf-buildid-cache(1)): where `perf record` keeps a copy of
every file it saw, by path and build-id. A source of ELF files like the file system (DESIGN.md,
"Modules"): the replay (perf/replay.py) and the symbol tables (symbols.py) look files up here.
"""

from __future__ import annotations

from fastunwind import _core


def build_id_cache_root() -> str:
    """perf's build-id cache: $PERF_BUILDID_DIR, else ~/.debug (core/cache_paths.c: one home
    for this and the launcher)."""
    return _core.build_id_cache_root()


def build_id_cache_file(name: str, build_id: str, file: str) -> str:
    """Where perf's build-id cache keeps its copy of `name` (a DSO path or a pseudo file such as
    [kernel.kallsyms] or [vdso]) with `build_id` (hex): `name/build_id/file` under
    build_id_cache_root() (perf's `file` is "kallsyms", "vdso" or "elf")."""
    return _core.build_id_cache_file(name, build_id, file)


def build_id_cache_candidates(name: str, build_id: bytes, file: str) -> list[str]:
    """Where perf may keep its copy of `name` recorded with `build_id` (padded with zeros to 20
    bytes in a recording), in the order they are tried: by name (and the name of a deleted file
    without its " (deleted)"), then under .build-id/, each with the build-id unpadded, then as
    recorded (perf names the directory by the build-id as long as the file's note: lld writes 8
    bytes, GNU ld 20)."""
    return _core.build_id_cache_candidates(name, build_id, file)
