"""fastunwind's caches, under $XDG_CACHE_HOME/fastunwind (~/.cache/fastunwind by default), one
directory per kind of entry, each entry named by the key it was built for (a build-id, or a hash of
path, size and mtime):

    compact/<key>.fut   compact unwind tables (tables/compact.py builds them on demand)
    eh_elf/<key>.so     compiled unwind tables (tables/eh_elf.py, built by `fastunwind compile`)
    symbols/<build-id>.fus, symbols/kallsyms-<build-id>.fus
                        symbol tables of ELF files and of the kernel (symbols.py builds them on demand)
    debug/<key>.debug   debug files with their DWARF decompressed (srcline.py: libdw decompresses
                        every section of a compressed one at each open, 0.13 s for libc's)
    recordings/DEV-INODE-SIZE-MTIME.needs
                        the files a recording's perf-script run needs, by the recording's identity
                        (the launcher's check before its first write to a pipe: native/cli/recording.c)

Entries are written atomically (a temporary file renamed into place) and checked when read, so any
of them may be deleted at any time: a missing one is rebuilt when needed. `fastunwind cache` lists,
prunes (least recently used first) and clears them.
"""

from __future__ import annotations

import os
import time

from fastunwind import _core
from fastunwind.typecheck import NamedTuple

#: kind -> the suffix of its entries
KINDS = {"compact": ".fut", "eh_elf": ".so", "symbols": ".fus", "debug": ".debug",
         _core.NEEDS_CACHE_KIND: _core.NEEDS_CACHE_SUFFIX}
#: a temporary file this old was left by a writer that died (a live one renames within seconds)
STALE_TEMPORARY_SECONDS = 3600


def cache_root() -> str:
    """$XDG_CACHE_HOME/fastunwind, else ~/.cache/fastunwind (core/cache_paths.c: the launcher's too)."""
    return _core.cache_root()


def cache_dir(kind: str) -> str:
    """The directory of one kind of entry (a key of KINDS)."""
    if kind not in KINDS:
        raise ValueError(f"no cache kind {kind!r}: {', '.join(KINDS)}")
    return os.path.join(cache_root(), kind)


def write_atomically(path: str, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one: a temporary
    file in the same directory, renamed over `path` (rename(2) is atomic within a file system).
    Concurrent writers each rename their own complete file; the last one wins."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    import tempfile  # only when a table is written: ~3 ms of start-up otherwise

    fd, temporary = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


class Entry(NamedTuple):
    kind: str
    path: str
    size: int
    used: float  #: last access or modification, whichever is later (seconds since the epoch)


def entries() -> list[Entry]:
    """Every entry of every kind, least recently used first."""
    found = []
    for kind, suffix in KINDS.items():
        try:
            names = os.listdir(cache_dir(kind))
        except FileNotFoundError:
            continue
        for name in names:
            if not name.endswith(suffix):
                continue
            path = os.path.join(cache_dir(kind), name)
            try:
                st = os.stat(path)
            except FileNotFoundError:  # removed meanwhile by another process
                continue
            found.append(Entry(kind, path, st.st_size, max(st.st_atime, st.st_mtime)))
    return sorted(found, key=lambda e: e.used)


def _remove(entry: Entry) -> bool:
    try:
        os.unlink(entry.path)
        return True
    except FileNotFoundError:
        return False


def prune(max_bytes: int) -> list[Entry]:
    """Remove the least recently used entries until the caches hold at most `max_bytes`; the
    entries removed."""
    current = entries()
    total = sum(e.size for e in current)
    removed = []
    for entry in current:
        if total <= max_bytes:
            break
        if _remove(entry):
            removed.append(entry)
        total -= entry.size
    return removed


def clear() -> list[Entry]:
    """Remove every entry, and temporary files that writers left more than an hour ago."""
    removed = [e for e in entries() if _remove(e)]
    now = time.time()
    for kind in KINDS:
        try:
            names = os.listdir(cache_dir(kind))
        except FileNotFoundError:
            continue
        for name in names:
            path = os.path.join(cache_dir(kind), name)
            try:
                if name.endswith(".tmp") and now - os.stat(path).st_mtime > STALE_TEMPORARY_SECONDS:
                    os.unlink(path)
            except FileNotFoundError:
                pass
    return removed
