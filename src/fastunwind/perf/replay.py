"""Replay a perf.data recording: processes and their address spaces over time, and the samples to
unwind in each.

The events are replayed in C (native/core/perf_replay.c), in time order as `perf script` does:
MMAP/MMAP2 add executable mappings (a new mapping replaces what it overlaps, as mmap(2) does), COMM
with the exec flag starts a new address space, FORK copies the parent's (threads of one process
share it). Every sample is tied to the address space of its pid at that moment; equal snapshots are
shared, so a recording with a few hundred mmaps needs only a few hundred address spaces, whatever
its sample count. This module opens the modules of those spaces (once per file).

A module is used only if its file is the one that was recorded: when the recording has a build-id
for the mapping (MMAP2 build-id, or the HEADER_BUILD_ID feature) and the file on disk has another
one or is gone, perf's build-id cache (~/.debug, where `perf record` copies every file it saw)
provides the recorded file; without a copy there the mapping is reported as replaced (or missing)
and gets no unwind tables.
"""

from __future__ import annotations

import array
import os
import re
from collections.abc import Sequence

from fastunwind import _core
from fastunwind.address_space import AddressSpace, ImageCache, Mapping, ModuleImage
from fastunwind.elf.build_id_cache import build_id_cache_candidates
from fastunwind.perf.data import PerfData
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple, overload

if TYPE_CHECKING:
    from fastunwind.perf.data import Sample

NO_SPACE = _core.REPLAY_NONE  #: a sample without an address space (unwind_samples skips it)
NO_COMM = _core.REPLAY_NONE  #: a sample without a thread name (the event index does not list it)


# NamedTuples rather than dataclasses: ~0.1 ms of start-up each instead of ~0.5
class SessionStatistics(NamedTuple):
    replaced_modules: set[str]  #: build-id differs from the recording's
    missing_modules: set[str]  #: file not readable here
    samples_without_process: int


class PerfSession(NamedTuple):
    """The address spaces of a recording (`spaces`), the mappings they hold (`mappings`; a space's
    `space_mappings` entry lists its mappings as indices into it, as u32 bytes) and the module
    images opened for them."""

    images: ImageCache
    spaces: list[AddressSpace]
    mappings: list[Mapping]
    space_mappings: list[bytes]
    statistics: SessionStatistics


class Replayed(NamedTuple):
    """What the C replay returns for a recording or a window (`_core.Replay.feed`, native/core/perf_replay.c),
    by name: one object per feed, none per sample. Per sample (u32 bytes) its address space id and
    thread name id; what the feed added: thread names, address spaces (each the u32 bytes of its
    mapping indices), executable mappings (start, end, pgoff, index into `files`), files (name,
    recorded build-id or None); and the samples so far without a process."""

    space_ids: bytes
    comm_ids: bytes
    comm_names: list[bytes]
    space_mappings: list[bytes]
    mappings: list[tuple[int, int, int, int]]
    files: list[tuple[bytes, bytes | None]]
    samples_without_process: int


class Samples(Sequence["Sample"]):
    """The recording's samples in time order, made on access (no Python object per sample
    otherwise)."""

    def __init__(self, perf: PerfData) -> None:
        self._perf = perf

    def __len__(self) -> int:
        return self._perf.sample_count

    @overload
    def __getitem__(self, index: int) -> "Sample": ...

    @overload
    def __getitem__(self, index: slice) -> "list[Sample]": ...

    def __getitem__(self, index: int | slice) -> "Sample | list[Sample]":
        if isinstance(index, slice):
            return [self._perf.sample(i) for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(f"sample {index} of {len(self)}")
        return self._perf.sample(index)


class Replay(NamedTuple):
    """A recording replayed: its session, and per sample (in the reader's time order) the index of
    its address space in `session.spaces` (`space_ids`) and of its thread's name at that moment in
    `comm_names` (`comm_ids`, both u32 arrays)."""

    session: PerfSession
    space_ids: array.array[int]
    comm_ids: array.array[int]
    comm_names: list[bytes]
    samples: Samples

    @property
    def comms(self) -> list[str]:
        """Each sample's thread name (a Python object per sample: for the API, not the CLI)."""
        names = [os.fsdecode(name) for name in self.comm_names]
        return [names[i] if i != NO_COMM else "" for i in self.comm_ids]


VDSO = "[vdso]"
#: executable mappings without a file: perf's anonymous and "no DSO" names (util/map.c)
ANONYMOUS_NAMES = ("//anon", "/dev/zero", "/anon_hugepage")
ANONYMOUS_PREFIXES = ("/SYSV", "/memfd:")
#: the name perf gives the anonymous executable mappings of process PID (util/map.c, map__new)
PERF_MAP_PATH = re.compile(r"/tmp/perf-(\d+)\.map")


def _is_anonymous(filename: str) -> bool:
    """No file to read: perf's pseudo names ([heap], [anon:...]), anonymous mappings, and JIT
    code named after its perf map (its symbols: the map, perf/script.py)."""
    return (not filename.startswith("/") or filename in ANONYMOUS_NAMES or filename.startswith(ANONYMOUS_PREFIXES)
            or PERF_MAP_PATH.fullmatch(filename) is not None)


def _same_build_id(expected: bytes, image: ModuleImage) -> bool:
    """The recorded build-id (perf pads it with zeros to 20 bytes) is the file's."""
    return image.build_id is not None and expected[: len(image.build_id)] == image.build_id


def _cached_copy(images: ImageCache, filename: str, expected: bytes, file: str = "elf") -> ModuleImage | None:
    """The copy of `filename` with build-id `expected` that `perf record` kept in its build-id cache
    (build_id_cache_candidates, in their order), or None."""
    for path in build_id_cache_candidates(filename, expected, file):
        image = images.get(path)
        if image is not None and _same_build_id(expected, image):
            return image
    return None


def _usable_image(images: ImageCache, filename: str, build_id: bytes | None, recorded: dict[str, bytes],
                  statistics: SessionStatistics) -> ModuleImage | None:
    """The module image for a mapping of `filename`: the file itself when its build-id is the
    recorded one (the MMAP2 record's, else the recording's build-id table), else perf's copy of
    the recorded file in its build-id cache (a binary rebuilt or deleted since the recording, as
    perf finds it), else None, and the file is counted as replaced or missing. The vDSO comes from
    the build-id cache alone, where `perf record` saves the one it saw (another kernel's vDSO is
    never used)."""
    expected = build_id or recorded.get(filename)
    if filename == VDSO:
        return _cached_copy(images, VDSO, expected, "vdso") if expected else None
    if _is_anonymous(filename):
        return None
    image = images.get(filename)
    if image is not None and (not expected or image.build_id is None or _same_build_id(expected, image)):
        return image
    cached = _cached_copy(images, filename, expected) if expected else None
    if cached is not None:
        return cached
    (statistics.missing_modules if image is None else statistics.replaced_modules).add(filename)
    return None


#: threads that open a feed's new modules (ELF headers, .eh_frame and .debug_frame parsed and
#: evaluated in C without the GIL, compact tables): clang-14's libLLVM and libclang-cpp take about
#: 0.2 and 0.1 s, most of a 55 MB recording's end-to-end time, so two threads take a third off it.
OPEN_MODULE_THREADS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def _open_modules(images: ImageCache, paths: list[str]) -> None:
    """Open the modules at `paths` into `images` (its cache), the biggest first, on up to
    OPEN_MODULE_THREADS threads; the ones already open or not files are left for _usable_image."""
    sized = []
    for path in dict.fromkeys(paths):
        try:
            if not _is_anonymous(path) and not images.has(path):
                sized.append((os.path.getsize(path), path))
        except OSError:
            continue
    if len(sized) < 2 or OPEN_MODULE_THREADS < 2:
        return
    queue = [path for _size, path in sorted(sized)]  # popped from the end: the biggest first

    def work() -> None:
        while queue:
            try:
                path = queue.pop()
            except IndexError:
                return
            images.get(path)

    import threading

    threads = [threading.Thread(target=work) for _ in range(min(OPEN_MODULE_THREADS, len(queue)) - 1)]
    for thread in threads:
        thread.start()
    work()
    for thread in threads:
        thread.join()


class Replayer:
    """The replay fed window by window (a stream, `PerfData.open_stream`), or once with a whole
    recording: the C replay keeps processes and address spaces across feeds; this keeps the Python
    side (module images, mappings, spaces, thread names), each list growing by what a feed adds."""

    def __init__(self, perf: PerfData, images: ImageCache | None = None) -> None:
        self.perf = perf
        self.images = images or ImageCache()
        self.statistics = SessionStatistics(set(), set(), 0)
        self.samples_without_process = 0
        self._native = _core.Replay()
        self._recorded: dict[str, bytes] = {}
        self._recorded_count = -1
        self.file_images: list[tuple[str, ModuleImage | None]] = []
        self.mappings: list[Mapping] = []
        self.spaces: list[AddressSpace] = []
        self.space_mappings: list[bytes] = []
        self.comm_names: list[bytes] = []

    def _recorded_build_ids(self) -> dict[str, bytes]:
        if self._recorded_count >= 0 and not self.perf.pipe_mode:
            return self._recorded  # a file's build-id table is in its header
        build_ids = self.perf.native.build_ids()
        if len(build_ids) != self._recorded_count:  # a pipe's HEADER_BUILD_ID records arrive as it goes
            self._recorded = {os.fsdecode(filename): bytes(build_id) for _pid, build_id, filename, _m, _o in build_ids}
            self._recorded_count = len(build_ids)
        return self._recorded

    def feed(self, window: _core.PerfData) -> tuple[bytes, bytes]:
        """Replay the window's events; its samples' space ids and comm ids (bytes of u32). The new
        mappings, spaces and names are appended to the lists."""
        fed = Replayed._make(self._native.feed(window))
        self.samples_without_process = fed.samples_without_process
        files = fed.files
        if files:
            _open_modules(self.images, [os.fsdecode(raw) for raw, _build_id in files])
            recorded = self._recorded_build_ids()
            # every executable file mapped is checked (missing, replaced), in order of first mapping
            self.file_images.extend((name, _usable_image(self.images, name, build_id, recorded, self.statistics))
                                    for name, build_id in ((os.fsdecode(raw), build_id) for raw, build_id in files))
        for start, end, pgoff, file in fed.mappings:
            path, image = self.file_images[file]
            bias = image.bias_for_mapping(start, end, pgoff) if image is not None else None
            self.mappings.append(Mapping(start, end, pgoff, path, image if bias is not None else None, bias or 0))
        mappings = self.mappings
        for ids in fed.space_mappings:
            indices = array.array("I")
            indices.frombytes(ids)
            self.spaces.append(AddressSpace([mappings[i] for i in indices]))
        self.space_mappings.extend(fed.space_mappings)
        self.comm_names.extend(fed.comm_names)
        return fed.space_ids, fed.comm_ids

    def session(self) -> PerfSession:
        statistics = self.statistics._replace(samples_without_process=self.samples_without_process)
        return PerfSession(self.images, self.spaces, self.mappings, self.space_mappings, statistics)


def replay(perf: PerfData, images: ImageCache | None = None) -> Replay:
    """Replay the recording's events in time order (MMAP/MMAP2 executable mappings, COMM, FORK)
    and tie every sample to its process's address space at that moment. Kernel-mode samples get
    one too: they carry the user registers and stack of the syscall entry."""
    replayer = Replayer(perf, images)
    space_ids_b, comm_ids_b = replayer.feed(perf.native)
    space_ids, comm_ids = array.array("I"), array.array("I")
    space_ids.frombytes(space_ids_b)
    comm_ids.frombytes(comm_ids_b)
    return Replay(replayer.session(), space_ids, comm_ids, replayer.comm_names, Samples(perf))


def recorded_files(path: str) -> list[str]:
    """The files a perf.data recording's address spaces map executable, each once, in order of first
    mapping: those the replay uses, so pseudo files ([vdso], //anon), files not present here and
    files replaced since the recording (build-id) are left out."""
    session = replay(PerfData.open(path)).session
    return list(dict.fromkeys(m.image.path for m in session.mappings if m.image is not None))
