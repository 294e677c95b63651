"""perf's build-id cache (`~/.debug`, perf-buildid-cache(1)): where `perf record` keeps a copy of
every file it saw, by path and build-id. A source of ELF files like the file system (DESIGN.md,
"Modules"): the replay (perf/replay.py) and the symbol tables (symbols.py) look files up here.
"""

from __future__ import annotations

import os


def build_id_cache_root() -> str:
    """perf's build-id cache: $PERF_BUILDID_DIR, else ~/.debug."""
    return os.environ.get("PERF_BUILDID_DIR") or os.path.expanduser("~/.debug")


def build_id_cache_file(name: str, build_id: str, file: str) -> str:
    """Where perf's build-id cache keeps its copy of `name` (a DSO path or a pseudo file such as
    [kernel.kallsyms] or [vdso]) with `build_id` (hex): `name/build_id/file` under
    build_id_cache_root() (perf's `file` is "kallsyms", "vdso" or "elf")."""
    return os.path.join(build_id_cache_root(), name.lstrip("/"), build_id, file)
