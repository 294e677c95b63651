"""Address spaces: which module is mapped where, with the unwind tables the walker needs.

A `ModuleImage` is one ELF file opened once: its CFI (`.eh_frame`, and `.debug_frame` from the file
or its separate debug file), its compact unwind table (built from both, or loaded from the cache),
its read-only PT_LOAD bytes (the walker may read them), its build-id. An `AddressSpace` is a set of
executable mappings of images; `to_core()` hands it to the C walker.

Compact tables (native/compact_table.h) are cached as mmap-able files under
`$XDG_CACHE_HOME/fastunwind/compact/` (default `~/.cache/...`), one per build-id
(`<build-id hex>.fut`; `nobuildid-<sha256 of path, size, mtime>.fut` for a file without one),
written atomically (a temporary file in the same directory, then rename), so processes may share
the directory. A cached file is used only after the C core has validated all of it and its key and
source row counts match the module; otherwise it is rebuilt. FASTUNWIND_COMPACT=0 disables compact
tables (the walker then uses the DWARF tables only); FASTUNWIND_BACKEND (one of BACKENDS: auto, dwarf,
table, compiled, ...) sets the default backend of `AddressSpace.to_core()`.

A mapping [start, end) of file offset `pgoff` places the file's svma `s` at avma `s + bias`, where
bias = start - pgoff + p_offset - p_vaddr of the PT_LOAD segment the mapping maps (gABI "Program
Loading": a segment's file offset and vaddr are congruent modulo the page size); for an executable
mapping, the executable segment among those whose pages hold pgoff (`bias_for_mapping`).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fastunwind import _core, cache
from fastunwind.cfi import DEBUG_FRAME, EH_FRAME, UnwindInfo
from fastunwind.elf import ElfFile
from fastunwind.errors import CompactTableError, ElfError, FastunwindError

PT_LOAD = 1
PF_X, PF_W = 1, 2
PAGE_SIZE = 4096  #: x86-64 Linux mappings are 4 KiB-granular
BACKENDS: tuple[str, ...] = _core.WALK_BACKENDS  #: walk.h fu_backend, by code
COMPACT_SUFFIX = cache.KINDS["compact"]


def compact_cache_dir() -> str:
    """Where compact tables are cached: $XDG_CACHE_HOME/fastunwind/compact (~/.cache by default)."""
    return cache.cache_dir("compact")


def compact_tables_enabled() -> bool:
    return os.environ.get("FASTUNWIND_COMPACT", "1") != "0"


def default_backend() -> str:
    backend = os.environ.get("FASTUNWIND_BACKEND", "auto")
    return backend if backend in BACKENDS else "auto"


def _write_atomically(path: str, data: bytes) -> None:
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


class ModuleImage:
    """An ELF file's unwinding data, loaded once and shared by every mapping of it."""

    def __init__(self, path: str, elf: ElfFile, unwind: UnwindInfo) -> None:
        self.path = path
        self.elf = elf
        self.unwind = unwind
        self.build_id = elf.build_id
        tables = {section.kind: section.core for section in reversed(unwind.sections)}
        self.eh_frame = tables.get(EH_FRAME)
        self.debug_frame = tables.get(DEBUG_FRAME)
        #: read-only PT_LOAD bytes by svma: constants an expression may read
        self.segments = [
            (segment.vaddr, elf.segment_data(segment))
            for segment in elf.segments
            if segment.type == PT_LOAD and not segment.flags & PF_W and segment.filesz
        ]
        self._compact: _core.CompactTable | None = None
        self._compact_loaded = False
        self._compiled: _core.EhElf | None = None
        self._compiled_loaded = False
        #: why there is no compact table (building failed), else None
        self.compact_error: str | None = None
        #: "cache" or "built": where the compact table came from (None before it is needed)
        self.compact_source: str | None = None

    # ---- the compact table ---------------------------------------------------------------------
    def compact_key(self) -> tuple[int, bytes]:
        """(key kind, key) the compact table is cached under: the build-id, or for a file without
        one a SHA-256 of its real path, size and mtime."""
        if self.build_id:
            return _core.COMPACT_KEY_BUILD_ID, bytes(self.build_id)
        st = os.stat(self.path)
        identity = f"{os.path.realpath(self.path)}\0{st.st_size}\0{st.st_mtime_ns}".encode()
        import hashlib  # only for files without a build-id: loading OpenSSL costs ~2.5 ms of start-up

        return _core.COMPACT_KEY_FILE_HASH, hashlib.sha256(identity).digest()

    def compact_cache_path(self, cache_dir: str | None = None) -> str:
        kind, key = self.compact_key()
        name = key.hex() if kind == _core.COMPACT_KEY_BUILD_ID else f"nobuildid-{key.hex()}"
        return os.path.join(cache_dir or compact_cache_dir(), name + COMPACT_SUFFIX)

    def _matches(self, table: _core.CompactTable, kind: int, key: bytes) -> bool:
        """The table was built for this module from the tables loaded now (a debug file installed
        since changes the .debug_frame rows)."""
        return (table.key_kind == kind and table.key == key
                and table.eh_frame_row_count == (self.eh_frame.row_count if self.eh_frame else None)
                and table.debug_frame_row_count == (self.debug_frame.row_count if self.debug_frame else None))

    def _open_cached(self, path: str, kind: int, key: bytes) -> _core.CompactTable | None:
        """The validated table of the cache file, or None if it is missing, corrupt, truncated, of
        another version or built for another file."""
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size < _core.COMPACT_HEADER_SIZE:
                    return None
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        try:
            table = _core.CompactTable(mapped)
        except CompactTableError:
            mapped.close()
            return None
        return table if self._matches(table, kind, key) else None

    def load_compact_table(self, cache_dir: str | None = None, *, use_cache: bool = True) -> _core.CompactTable | None:
        """The module's compact table: from the cache when a valid one is there, else built from
        the DWARF tables and written to the cache. None when it cannot be built (compact_error
        says why); the walker then uses the DWARF tables."""
        kind, key = self.compact_key()
        path = self.compact_cache_path(cache_dir)
        if use_cache:
            table = self._open_cached(path, kind, key)
            if table is not None:
                self.compact_source = "cache"
                return table
        try:
            data = _core.build_compact_table(self.eh_frame, self.debug_frame, kind, key)
        except CompactTableError as error:
            self.compact_error = str(error)
            return None
        if use_cache:
            try:
                _write_atomically(path, data)
            except OSError:
                pass  # a read-only or full cache: the table in memory serves this process
        self.compact_source = "built"
        return _core.CompactTable(data)

    @property
    def compact(self) -> _core.CompactTable | None:
        """The compact table (loaded on first use), or None if disabled or unbuildable."""
        if not self._compact_loaded:
            self._compact_loaded = True
            if compact_tables_enabled():
                self._compact = self.load_compact_table()
        return self._compact

    @property
    def compiled(self) -> _core.EhElf | None:
        """The module's compiled unwind table (eh_elf) if `fastunwind compile` cached a valid one
        (checked: ABI and generator version, build-id, DWARF rows), else None. Never built here:
        compiling takes seconds. FASTUNWIND_COMPILED=0 disables them."""
        if not self._compiled_loaded:
            self._compiled_loaded = True
            if os.environ.get("FASTUNWIND_COMPILED", "1") != "0":
                from fastunwind import eh_elf  # eh_elf imports this module

                self._compiled = eh_elf.load(self)
        return self._compiled

    def compact_statistics(self) -> dict[str, Any] | None:
        """Size and coverage of the compact table: bytes per row (gaps between FDEs are rows too)
        and per DWARF row, and the fraction of rows and of code bytes on the slow path."""
        table = self.compact
        if table is None:
            return None
        dwarf_rows = sum(t.row_count for t in (self.eh_frame, self.debug_frame) if t is not None)
        rows = table.row_count
        return {
            "path": self.path, "source": self.compact_source, "bytes": table.size, "rows": rows,
            "dwarf_rows": dwarf_rows, "rules": table.rule_count, "gap_rows": table.no_info_row_count,
            "slow_rows": table.slow_row_count,
            "bytes_per_row": table.size / rows if rows else 0.0,
            "bytes_per_dwarf_row": table.size / dwarf_rows if dwarf_rows else 0.0,
            "slow_row_fraction": table.slow_row_count / rows if rows else 0.0,
            "slow_byte_fraction": table.slow_bytes / table.covered_bytes if table.covered_bytes else 0.0,
        }

    @classmethod
    def load(cls, path: str) -> ModuleImage:
        elf = ElfFile.open(path)
        try:
            unwind = UnwindInfo.from_elf(elf, strict=False)
        except FastunwindError:
            elf.close()
            raise
        return cls(path, elf, unwind)

    def bias_for_mapping(self, start: int, end: int, pgoff: int) -> int | None:
        """avma - svma for an executable mapping [start, end) of file offset `pgoff`, or None if no
        PT_LOAD segment holds that offset.

        Several segments may hold the mapping's first page: lld and mold start the executable
        segment in the file page where the read-only one ends (`R` at offset 0 and `R E` at 0x770
        of the same page, mapped at different addresses). The bias is the one of the segment the
        mapping really maps: the executable one (PF_X) among those holding `pgoff`, else one whose
        addresses overlap the mapping under that bias, else the first (a file mapped executable
        without PF_X segments)."""
        candidates = []
        for segment in self.elf.segments:
            # mappings start on a page; the segment's first page begins below p_offset
            first_page = segment.offset - segment.offset % PAGE_SIZE
            if segment.type == PT_LOAD and first_page <= pgoff < segment.offset + segment.filesz:
                candidates.append((segment, start - pgoff + segment.offset - segment.vaddr))
        if not candidates:
            return None
        for segment, bias in candidates:
            if segment.flags & PF_X:
                return bias
        for segment, bias in candidates:
            if segment.vaddr + bias < end and start < segment.vaddr + bias + segment.memsz:
                return bias
        return candidates[0][1]


@dataclass(frozen=True, slots=True)
class Mapping:
    """An executable mapping of a module image."""

    start: int
    end: int
    pgoff: int
    path: str
    image: ModuleImage | None  #: None: a file we could not read (anonymous, JIT, deleted)
    bias: int


class ImageCache:
    """Module images by path, opened once. A path whose file cannot be read is remembered as such."""

    def __init__(self) -> None:
        self._images: dict[str, ModuleImage | None] = {}

    def has(self, path: str) -> bool:
        """Whether `path` was opened (or found unusable) already."""
        return path in self._images

    def get(self, path: str) -> ModuleImage | None:
        if path not in self._images:
            try:
                self._images[path] = ModuleImage.load(path) if os.path.isfile(path) else None
            except (OSError, ElfError):
                self._images[path] = None
        return self._images[path]


class AddressSpace:
    """Executable mappings, sorted, non-overlapping; `modules` index them for the walker."""

    def __init__(self, mappings: Iterable[Mapping]) -> None:
        self.mappings = sorted(mappings, key=lambda m: m.start)
        self._cores: dict[str, _core.AddressSpace] = {}

    def to_core(self, backend: str | None = None) -> _core.AddressSpace:
        """The C walker's view. `backend` (walk.h, fu_backend): "auto" (per row the compact table's
        rule, else the module's eh_elf if one is cached, then the DWARF tables), "dwarf" (DWARF tables only),
        "table" (compact tables, then DWARF), "compiled" (eh_elfs, then DWARF), "table-only" /
        "compiled-only" (that fast path alone, for tests and benchmarks); default
        FASTUNWIND_BACKEND, else "auto"."""
        backend = backend or default_backend()
        core = self._cores.get(backend)
        if core is None:
            use_compact = backend in ("auto", "table", "table-only")
            use_compiled = backend in ("auto", "compiled", "compiled-only")

            core = self._cores[backend] = _core.AddressSpace(
                [
                    (
                        m.start,
                        m.end,
                        m.bias,
                        m.image.eh_frame if m.image else None,
                        m.image.debug_frame if m.image else None,
                        m.image.segments if m.image else [],
                        index,
                        m.image.compact if m.image and use_compact else None,
                        m.image.compiled if m.image and use_compiled else None,
                        m.image.elf.entry if m.image else 0,
                    )
                    for index, m in enumerate(self.mappings)
                ],
                backend=backend,
            )
        return core


def parse_proc_maps(text: str, images: ImageCache) -> AddressSpace:
    """An AddressSpace from /proc/PID/maps text: its executable file mappings."""
    mappings = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "x" not in fields[1] or not fields[5].startswith("/"):
            continue
        start_text, end_text = fields[0].split("-")
        start, end, pgoff = int(start_text, 16), int(end_text, 16), int(fields[2], 16)
        path = fields[5]
        image = images.get(path)
        bias = image.bias_for_mapping(start, end, pgoff) if image else None
        mappings.append(Mapping(start, end, pgoff, path, image if bias is not None else None, bias or 0))
    return AddressSpace(mappings)


def current_process(images: ImageCache | None = None) -> AddressSpace:
    with open("/proc/self/maps") as maps:
        return parse_proc_maps(maps.read(), images or ImageCache())
