"""Compact unwind tables (native/core/compact_table.h) for a module image: built from its DWARF tables
by the C core, cached as mmap-able files under `$XDG_CACHE_HOME/fastunwind/compact/` (default
`~/.cache/...`), one per build-id (`<build-id hex>.fut`; `nobuildid-<sha256 of path, size,
mtime>.fut` for a file without one), written atomically (cache.write_atomically), so processes may
share the directory. A cached file is used only after the C core has validated all of it and its
key and the sizes of the sections it was built from match the module; otherwise it is rebuilt. FASTUNWIND_COMPACT=0 disables
compact tables (the walker then uses the DWARF tables only).

With synthesized rows (`synth` "missing" or "repair", SYNTH_MODES): the module's table with rows
derived from its machine code laid over the declared ones (tables/synthesized.py), cached beside
the plain one as `<key>.synth-<mode>-v<COMPACT_SYNTH_VERSION>.fut` and checked for the same mode
and version when read.
"""

from __future__ import annotations

import os

from fastunwind import _core, cache
from fastunwind.elf import CheckedRead
from fastunwind.errors import CompactTableError, FileChangedError
from fastunwind.image import ModuleImage
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

#: the image.memo keys of this module (per synth mode: _TABLE + mode, ...)
_TABLE, _SOURCE, _ERROR, _MAPPED = "compact", "compact.source", "compact.error", "compact.mapped"
#: --synth: no synthesized rows; rows derived from the code where no CFI covers it; those and
#: derived rows in place of declared ones the check proved wrong (compact_table.h, FU_COMPACT_SYNTH_*)
SYNTH_MODES = _core.COMPACT_SYNTH_MODES  #: by code: "off", "missing", "repair"


def synth_value(synth: str) -> int:
    """The header's `synth` of a table with `synth`'s rows: the mode and the synthesis's version."""
    code = SYNTH_MODES.index(synth)
    return code | _core.COMPACT_SYNTH_VERSION << 8 if code else 0


def cache_dir() -> str:
    """Where compact tables are cached: $XDG_CACHE_HOME/fastunwind/compact (~/.cache by default)."""
    return cache.cache_dir("compact")


def enabled() -> bool:
    return os.environ.get("FASTUNWIND_COMPACT", "1") != "0"


def cache_path(image: ModuleImage, directory: str | None = None, synth: str = "off") -> str:
    return os.path.join(directory or cache_dir(), image.cache_name() + _core.compact_cache_suffix(SYNTH_MODES.index(synth)))


def _matches(image: ModuleImage, table: _core.CompactTable, kind: int, key: bytes, synth: str) -> bool:
    """The table was built for this module from the sections it has now (a debug file installed
    since brings a .debug_frame), with `synth`'s rows of this version of the synthesis; checked
    from the section headers, without parsing the sections."""
    return (table.key_kind == kind and table.key == key and table.synth == synth_value(synth)
            and (table.eh_frame_size, table.debug_frame_size) == image.frame_sizes())


def _open_cached(image: ModuleImage, path: str, kind: int, key: bytes, synth: str) -> _core.CompactTable | None:
    """The validated table of the cache file, or None if it is missing, corrupt, truncated, of
    another version or built for another file."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size < _core.COMPACT_HEADER_SIZE:
                return None
            mapped = _core.MappedFile(f.fileno(), path)
    except (OSError, ValueError):
        return None
    try:
        table = _core.CompactTable(mapped)
    except CompactTableError:
        mapped.close()
        return None
    if mapped.changed:  # truncated while validated: built again
        return None
    # validating read every page; the walker touches few of them (they come back from the page
    # cache when it does): a 5.7 MB table of libLLVM would otherwise stay resident, unused
    mapped.release_pages()
    if not _matches(image, table, kind, key, synth):
        return None
    image.memo[_MAPPED + synth] = mapped  # the walker reads it in place: checked with the image's files
    return table


def load(image: ModuleImage, directory: str | None = None, *, use_cache: bool = True,
         synth: str = "off") -> _core.CompactTable | None:
    """The module's compact table (with `synth`'s rows derived from the code): from the cache when
    a valid one is there, else built from the DWARF tables (and the code) and written to the cache.
    None when it cannot be built (error(image) says why); the walker then uses the DWARF tables."""
    kind, key = image.cache_key()
    path = cache_path(image, directory, synth)
    if use_cache:
        table = _open_cached(image, path, kind, key, synth)
        if table is not None:
            image.memo[_SOURCE + synth] = "cache"
            return table
    try:
        with CheckedRead(image.check_unchanged):  # never a table of zeros, in the cache or the walker
            if synth == "off":
                data = _core.build_compact_table(image.eh_frame, image.debug_frame, kind, key)
            else:
                from fastunwind.tables import synthesized

                view, origins = synthesized.view(image, synth)
                data = _core.build_compact_table(image.eh_frame, image.debug_frame, kind, key, view, origins,
                                                 synth_value(synth))
    except (CompactTableError, ValueError, FileChangedError) as error:
        image.memo[_ERROR + synth] = str(error)
        return None
    if use_cache:
        try:
            cache.write_atomically(path, data)
        except OSError:
            pass  # a read-only or full cache: the table in memory serves this process
    image.memo[_SOURCE + synth] = "built"
    return _core.CompactTable(data)


def for_image(image: ModuleImage, synth: str = "off") -> _core.CompactTable | None:
    """The image's compact table with `synth`'s rows (loaded on first use, then kept in its memo),
    or None if disabled or unbuildable."""
    if _TABLE + synth not in image.memo:
        image.memo[_TABLE + synth] = load(image, synth=synth) if enabled() else None
    table: _core.CompactTable | None = image.memo[_TABLE + synth]
    return table


def source(image: ModuleImage, synth: str = "off") -> str | None:
    """"cache" or "built": where the compact table came from (None before it is needed)."""
    value: str | None = image.memo.get(_SOURCE + synth)
    return value


def error(image: ModuleImage, synth: str = "off") -> str | None:
    """Why there is no compact table (building failed), else None."""
    value: str | None = image.memo.get(_ERROR + synth)
    return value


def statistics(image: ModuleImage, synth: str = "off") -> dict[str, Any] | None:
    """Size and coverage of the compact table: bytes per row (gaps between FDEs are rows too)
    and per DWARF row, the fraction of rows and of code bytes on the slow path, and the rows
    derived from the code (corrected, synthesized)."""
    table = for_image(image, synth)
    if table is None:
        return None
    dwarf_rows = image.dwarf_row_count()
    rows = table.row_count
    return {
        "path": image.path, "source": source(image, synth), "bytes": table.size, "rows": rows,
        "corrected_rows": table.origin_rows[_core.COMPACT_ORIGIN_CORRECTED],
        "synthesized_rows": table.origin_rows[_core.COMPACT_ORIGIN_SYNTHESIZED],
        "dwarf_rows": dwarf_rows, "rules": table.rule_count, "gap_rows": table.no_info_row_count,
        "slow_rows": table.slow_row_count,
        "bytes_per_row": table.size / rows if rows else 0.0,
        "bytes_per_dwarf_row": table.size / dwarf_rows if dwarf_rows else 0.0,
        "slow_row_fraction": table.slow_row_count / rows if rows else 0.0,
        "slow_byte_fraction": table.slow_bytes / table.covered_bytes if table.covered_bytes else 0.0,
    }
