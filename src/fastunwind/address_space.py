"""Address spaces: which module is mapped where, with the unwind tables the walker needs.

A `ModuleImage` (image.py) is one ELF file opened once: its CFI (`.eh_frame`, and `.debug_frame`
from the file or its separate debug file), its read-only PT_LOAD bytes (the walker may read them),
its build-id; the one here also gives its tables (tables/): its compact unwind table (built, or
loaded from the cache) and its compiled eh_elf (if `fastunwind compile` cached one). An
`AddressSpace` is a set of executable mappings of images; `to_core()` hands it to the C walker
(native/core/walk.c), with the tables its backend uses.

FASTUNWIND_BACKEND (one of BACKENDS: auto, dwarf, table, compiled, ...) sets the default backend of
`AddressSpace.to_core()`; FASTUNWIND_COMPACT=0 and FASTUNWIND_COMPILED=0 disable the tables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from fastunwind import _core, image
from fastunwind.elf import ElfFile
from fastunwind.errors import ElfError, FileChangedError
from fastunwind.tables import compact, eh_elf
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from typing import Any

BACKENDS: tuple[str, ...] = _core.WALK_BACKENDS  #: address_space.h fu_backend, by code


def default_backend() -> str:
    backend = os.environ.get("FASTUNWIND_BACKEND", _core.WALK_DEFAULT_BACKEND)
    return backend if backend in BACKENDS else _core.WALK_DEFAULT_BACKEND


def check_synth(backend: str, synth: str) -> None:
    """ValueError unless `synth` is a mode and `backend` one that can serve its rows: synthesized
    rows live in compact tables, which the dwarf and compiled backends do not ask."""
    if synth not in compact.SYNTH_MODES:
        raise ValueError(f"synth must be one of {', '.join(compact.SYNTH_MODES)}, not {synth!r}")
    if synth != "off" and backend not in _core.WALK_BACKENDS_WITH_COMPACT:
        raise ValueError(f"synthesized rows are served by compact tables: backend {backend} has none "
                         "(use --synth off, or the auto or table backend)")


class ModuleImage(image.ModuleImage):
    """An ELF file's unwinding data (image.ModuleImage) with its unwind tables: the functions of
    tables/compact.py and tables/eh_elf.py, as the properties and methods the walker's callers use."""

    @property
    def compact(self) -> _core.CompactTable | None:
        """The compact table (loaded on first use), or None if disabled or unbuildable."""
        return compact.for_image(self)

    @property
    def compact_source(self) -> str | None:
        """"cache" or "built": where the compact table came from (None before it is needed)."""
        return compact.source(self)

    @property
    def compact_error(self) -> str | None:
        """Why there is no compact table (building failed), else None."""
        return compact.error(self)

    def compact_cache_path(self, cache_dir: str | None = None) -> str:
        return compact.cache_path(self, cache_dir)

    def load_compact_table(self, cache_dir: str | None = None, *, use_cache: bool = True
                           ) -> _core.CompactTable | None:
        """tables.compact.load: from the cache, else built (and cached); None if unbuildable."""
        return compact.load(self, cache_dir, use_cache=use_cache)

    def compact_statistics(self, synth: str = "off") -> dict[str, Any] | None:
        return compact.statistics(self, synth)

    @property
    def compiled(self) -> _core.EhElf | None:
        """The module's compiled unwind table (eh_elf) if `fastunwind compile` cached a valid one
        (checked: ABI and generator version, build-id, CFI section sizes), else None. Never built here:
        compiling takes seconds. FASTUNWIND_COMPILED=0 disables them."""
        return eh_elf.for_image(self)


class Mapping(NamedTuple):
    """An executable mapping of a module image."""

    start: int
    end: int
    pgoff: int
    path: str
    image: ModuleImage | None  #: None: a file we could not read (anonymous, JIT, deleted)
    bias: int


class ImageCache:
    """Module images by path (or by what `key` says identifies a path's file), opened once. A path
    whose file cannot be read is remembered as such."""

    def __init__(self) -> None:
        self._images: dict[object, ModuleImage | None] = {}
        self._changed: dict[object, str] = {}

    def key(self, path: str) -> object:
        """What the cache knows a path's image by: the path itself."""
        return path

    def has(self, path: str) -> bool:
        """Whether `path` was opened (or found unusable) already."""
        return self.key(path) in self._images

    def get(self, path: str) -> ModuleImage | None:
        key = self.key(path)
        if key not in self._images:
            try:
                self._images[key] = ModuleImage.load(path) if os.path.isfile(path) else None
            except (OSError, ElfError):
                self._images[key] = None
            except FileChangedError as error:
                self._images[key] = None
                self._changed[key] = str(error)
        return self._images[key]

    def changed(self, path: str) -> str | None:
        """Why `path` has no image when it was truncated while opened (FileChangedError's message),
        else None."""
        return self._changed.get(self.key(path))


class AddressSpace:
    """Executable mappings, sorted, non-overlapping; `modules` index them for the walker."""

    def __init__(self, mappings: Iterable[Mapping]) -> None:
        self.mappings = sorted(mappings, key=lambda m: m.start)
        self._cores: dict[str, _core.AddressSpace] = {}

    def check_unchanged(self) -> None:
        """FileChangedError if a module's file was truncated under its mapping (ModuleImage
        .check_unchanged): for the end of a walk over the space."""
        for mapping in self.mappings:
            if mapping.image is not None:
                mapping.image.check_unchanged()

    def to_core(self, backend: str | None = None, synth: str = "off") -> _core.AddressSpace:
        """The C walker's view. `backend` (address_space.h, fu_backend): "auto" (per row the compact table's
        rule, else the module's eh_elf if one is cached, then the DWARF tables), "dwarf" (DWARF tables only),
        "table" (compact tables, then DWARF), "compiled" (eh_elfs, then DWARF), "table-only" /
        "compiled-only" (that fast path alone, for tests and benchmarks); default
        FASTUNWIND_BACKEND, else "auto". `synth` (tables.compact.SYNTH_MODES): the compact tables with
        rows derived from the machine code, "missing" where no CFI covers it, "repair" also in place
        of declared rows proven wrong; only backends that use compact tables have them
        (check_synth says which)."""
        backend = backend or default_backend()
        check_synth(backend, synth)
        core = self._cores.get(backend + synth)
        if core is None:
            use_compact = backend in _core.WALK_BACKENDS_WITH_COMPACT
            use_compiled = backend in _core.WALK_BACKENDS_WITH_EH_ELF
            modules: list[_core._ModuleTuple] = []
            for index, m in enumerate(self.mappings):
                image = m.image
                if image is None:
                    modules.append((m.start, m.end, m.bias, None, None, [], index, None, None, 0))
                    continue
                table = compact.for_image(image, synth) if use_compact else None
                # step() asks the DWARF tables for the compact table's slow rows only: none, not
                # parsed; a few, only the FDEs around them evaluated
                eh_frame, debug_frame = None, None
                if table is None:
                    eh_frame, debug_frame = image.eh_frame, image.debug_frame
                elif table.slow_row_count > 0:
                    ranges = table.slow_ranges()
                    eh_frame, debug_frame = ((image.eh_frame, image.debug_frame) if ranges is None
                                             else image.slow_row_tables(ranges))
                modules.append((m.start, m.end, m.bias, eh_frame, debug_frame, image.segments, index, table,
                                eh_elf.for_image(image) if use_compiled else None, image.process_entry))
            core = self._cores[backend + synth] = _core.AddressSpace(modules, backend=backend)
        return core


#: the kernel's name of the vDSO mapping in /proc/PID/maps
VDSO = "[vdso]"
#: what /proc/PID/maps appends to the path of a mapped file that was deleted (or replaced)
DELETED_SUFFIX = " (deleted)"

#: where a process's mapped file can be opened, for /proc/PID/maps's (path, start, end, inode):
#: the path itself, or one through /proc (live.py: the process's root, its map_files)
Locate = Callable[[str, int, int, int], str]


def parse_proc_maps(text: str, images: ImageCache, locate: Locate | None = None,
                    vdso: ModuleImage | None = None) -> AddressSpace:
    """An AddressSpace from /proc/PID/maps text: its executable file mappings (named by the path
    the maps give, opened where `locate` says), and the vDSO's mapping with `vdso` as its image."""
    mappings = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "x" not in fields[1] or not (fields[5].startswith("/") or fields[5] == VDSO):
            continue
        start_text, end_text = fields[0].split("-")
        start, end, pgoff = int(start_text, 16), int(end_text, 16), int(fields[2], 16)
        path = fields[5]
        if path == VDSO:
            image = vdso
        elif locate:
            path = path.removesuffix(DELETED_SUFFIX)
            image = images.get(locate(path, start, end, int(fields[4])))
        else:  # a deleted file's path may name another file now
            image = None if path.endswith(DELETED_SUFFIX) else images.get(path)
        bias = _bias(image, start, end, pgoff) if image else None
        mappings.append(Mapping(start, end, pgoff, path, image if bias is not None else None, bias or 0))
    return AddressSpace(mappings)


def _bias(image: ModuleImage, start: int, end: int, pgoff: int) -> int | None:
    """The image's bias for the mapping, or None where its file no longer reads as the ELF file it
    was when opened (rewritten in place since, as a build does: its section headers past its new
    end): a mapping without an image, as ImageCache.get makes one whose file does not load."""
    try:
        return image.bias_for_mapping(start, end, pgoff)
    except ElfError:
        return None


def vdso_image_of(data: bytes) -> ModuleImage:
    """The vDSO's image parsed from its bytes (a process's or a core's copy; no file behind it:
    symbols.py keys its symbol table by its build-id). Raises ElfError."""
    image = ModuleImage(VDSO, ElfFile.from_bytes(data, VDSO))
    image.memory_copy = bytes(data)
    return image


def vdso_image(maps: str, memory_path: str) -> ModuleImage | None:
    """The vDSO's image from the memory of the process whose maps text is `maps` (its own copy:
    the kernel's, which may be another kernel's in a container or after an update), parsed from
    the copied bytes; None without a vDSO or if its memory cannot be read."""
    ranges = [line.split()[0] for line in maps.splitlines() if line.rstrip().endswith(VDSO)]
    if not ranges:
        return None
    start, end = (int(text, 16) for text in ranges[0].split("-"))
    try:
        with open(memory_path, "rb") as memory:
            memory.seek(start)
            data = memory.read(end - start)
        return vdso_image_of(data)
    except (OSError, ElfError):
        return None


def current_process(images: ImageCache | None = None) -> AddressSpace:
    """This process's address space. Its maps' paths are any bytes: decoded as os.fsdecode does
    (surrogateescape), as every reader of a maps file here."""
    with open("/proc/self/maps", errors="surrogateescape") as maps:
        return parse_proc_maps(maps.read(), images or ImageCache())
