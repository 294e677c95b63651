"""Unwind a perf.data recording and print its stacks: `perf script` text, folded stacks, statistics.

The pipeline, with no Python per sample or per frame: the perf.data reader (C) decodes samples;
the replay (C, `perf.replay.replay`) ties each to an address space; one C call unwinds every
sample (GIL released, perf/walk.py); one more (native/core/perf_script.c) resolves every distinct frame to its DSO and
symbol and keeps the result, which renders perf script's text or folded stacks in C. Python opens
the modules and symbol tables (once per file); names are demangled in C (native/core/demangle.c).

perf script's text format (perf 6.1, `-F comm,tid,time,event,ip,sym,symoff,dso`): a header
`comm  tid  sec.usec: event: ` per sample, then one line per frame, `\\t%16x sym+0xoff (dso)`, kernel
frames first, and a blank line. A user frame's address is the DSO-relative address perf computes
(`avma - map start + pgoff`); caller frames are printed at their return address minus one, except
the frame a signal interrupted (its IP is the interrupted instruction, not a return address).

The samples are also a Python sequence of `UnwoundSample`s, made on access (for the API and tests).
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from fastunwind import _core
from fastunwind.address_space import ImageCache, Mapping, ModuleImage
from fastunwind.errors import PerfDataError
from fastunwind.perf.data import PerfData, RecordingCut
from fastunwind.perf.replay import PERF_MAP_PATH, Replayer, replay
from fastunwind.perf.sample_filter import SampleFilter
from fastunwind.perf.walk import (DEFAULT_MAX_FRAMES, SOURCE_CALLCHAIN, SOURCE_DWARF, SOURCE_IP, UnwindBatch,
                                  recording_source, walk_samples)
from fastunwind._core import SourceLines, SymbolTable
from fastunwind.elf.debuginfod import DebuginfodClient
from fastunwind.srcline import open_source_lines
from fastunwind.symbols import (cached_kernel_symbol_table, kallsyms_bytes, kernel_symbol_table,
                                perf_map_table, symbol_table_for_file, table_from_file)
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple, cast, overload

if TYPE_CHECKING:
    from typing import Any, BinaryIO, TextIO

__all__ = ["DEFAULT_MAX_FRAMES", "OUTCOME_NAME_BY_CODE", "OUTCOME_NAMES", "PHASES", "RECORD_HINT", "SOURCE_CALLCHAIN",
           "SOURCE_DWARF", "SOURCE_IP", "Frame", "PerfDataError", "Statistics", "UnwoundRecording", "UnwoundSample",
           "recording_source", "render_folded", "render_perf_script", "stream_recording", "unwind_recording",
           "write_flame_graph", "write_gecko", "write_speedscope"]
#: the outcome name of every code a sample can have (perf_walk.h), "?" for codes without one
OUTCOME_NAME_BY_CODE: tuple[str, ...] = _core.SAMPLE_OUTCOMES
OUTCOME_NAMES = {code: name for code, name in enumerate(OUTCOME_NAME_BY_CODE) if name != "?"}
RECORD_HINT = ("record with user registers and stack, e.g.: "
               "perf record --call-graph dwarf -e cpu-clock -F 999 -- COMMAND")


# records of the Python API: NamedTuples (a frozen dataclass costs ~1 ms of start-up each)
class Frame(NamedTuple):
    address: int  #: DSO-relative address as perf prints it
    symbol: str | None
    offset: int
    dso: str


class UnwoundSample(NamedTuple):
    comm: str
    pid: int
    tid: int
    time: int | None  #: ns
    outcome: str
    kernel: tuple[Frame, ...]
    user: tuple[Frame, ...]


class Statistics:
    """What a run counted, filled in as the windows go (a plain class: the dataclasses module alone
    costs ~6 ms of every start)."""

    def __init__(self, *, samples: int = 0, unwound_samples: int = 0, frames: int = 0, walk_ns: int = 0,
                 frames_per_sample: Counter[int] | None = None, replaced_modules: set[str] | None = None,
                 missing_modules: set[str] | None = None, source: str = SOURCE_DWARF,
                 cut: RecordingCut | None = None) -> None:
        self.samples = samples
        self.unwound_samples = unwound_samples
        self.frames = frames
        self.walk_ns = walk_ns
        self.total_seconds = 0.0
        self.outcomes: Counter[str] = Counter()
        self.frames_per_sample: Counter[int] = frames_per_sample if frames_per_sample is not None else Counter()
        self.replaced_modules = replaced_modules if replaced_modules is not None else set()
        self.missing_modules = missing_modules if missing_modules is not None else set()
        #: the modules the recording's samples were unwound in
        self.images: list[ModuleImage] = []
        #: where the frames come from: SOURCE_DWARF (user stacks unwound), SOURCE_CALLCHAIN (the
        #: kernel's callchain, perf record -g / lbr) or SOURCE_IP (the sampled IP alone)
        self.source = source
        #: a recording cut short: what was found (perf.data.RecordingCut), else None
        self.cut = cut
        #: lines about source lines not to be had (a debuginfod server given up on)
        self.source_notes: list[str] = []
        #: the synthesized rows the walks had (tables.compact.SYNTH_MODES)
        self.synth = "off"
        #: frames whose step used a row derived from the code: {"corrected": n, "synthesized": n}
        self.derived_frames: Counter[str] = Counter()
        #: samples with such a frame, by outcome name
        self.derived_samples: Counter[str] = Counter()

    def add_batch(self, batch: UnwindBatch) -> None:
        """Count a walked batch's frames that rest on derived rows (C counts: nothing per frame here)."""
        if self.synth == "off":
            return
        self.derived_frames["corrected"] += batch.flags.count(_core.FRAME_CORRECTED)
        self.derived_frames["synthesized"] += batch.flags.count(_core.FRAME_SYNTHESIZED)
        flagged = _core.flagged_samples(batch.outcomes, batch.frame_starts, batch.flags,
                                        _core.FRAME_CORRECTED | _core.FRAME_SYNTHESIZED)
        for code, count in flagged.items():
            self.derived_samples[OUTCOME_NAME_BY_CODE[code]] += count

    def tables(self) -> list[dict[str, Any]]:
        """Per module with a compact table: its size and slow-path share (compact.statistics; this
        parses the module's DWARF tables, for their row counts)."""
        return [t for t in (image.compact_statistics(self.synth) for image in self.images) if t]

    @property
    def notes(self) -> list[str]:
        """One line each about how the recording was read (a cut, frames not unwound), for stderr."""
        notes = list(self.source_notes)
        if self.cut is not None:
            notes.append(f"{self.cut.note}; {self.samples} complete samples read")
        if self.source == SOURCE_CALLCHAIN:
            notes.append("no user stacks in the recording: printing the kernel's callchains (perf record -g, "
                         "--call-graph fp or lbr); DWARF unwinding needs perf record --call-graph dwarf")
        elif self.source == SOURCE_IP:
            notes.append("no call graph in the recording: printing the sampled IPs; DWARF unwinding needs "
                         "perf record --call-graph dwarf")
        return notes


class UnwoundRecording(Sequence[UnwoundSample]):
    """A recording's samples, unwound and symbolized (`native`: the C result that renders them).
    Indexing gives `UnwoundSample`s, made on access."""

    def __init__(self, native: _core.UnwoundSamples) -> None:
        self.native = native
        self._frames: dict[int, Frame] = {}

    def __len__(self) -> int:
        return self.native.sample_count

    def _frame(self, index: int) -> Frame:
        frame = self._frames.get(index)
        if frame is None:
            frame = self._frames[index] = Frame(*self.native.frame(index))
        return frame

    @overload
    def __getitem__(self, index: int) -> UnwoundSample: ...

    @overload
    def __getitem__(self, index: slice) -> list[UnwoundSample]: ...

    def __getitem__(self, index: int | slice) -> UnwoundSample | list[UnwoundSample]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        comm, pid, tid, time_ns, outcome, kernel, user = self.native.sample(index)
        return UnwoundSample(os.fsdecode(comm), pid, tid, time_ns, OUTCOME_NAME_BY_CODE[outcome],
                             tuple(map(self._frame, kernel)), tuple(map(self._frame, user)))


class _SymbolTables:
    """Symbol tables by key (a module's path, KERNEL), each made once: when a frame first needs it,
    or ahead, on one worker thread, while the main thread walks (`prefetch`; the C builders run
    without the GIL, so on two CPUs the tables cost the walk nothing). A table asked for while the
    worker makes it is waited for; one the worker has not started is made by the asker."""

    KERNEL = "[kernel.kallsyms]"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, SymbolTable | BaseException | None] = {}
        self._queued: dict[str, Callable[[], SymbolTable | None]] = {}  #: in order
        self._making: dict[str, threading.Event] = {}
        self._worker: threading.Thread | None = None

    def prefetch(self, key: str, make: Callable[[], SymbolTable | None]) -> None:
        """Queue `make` for the worker (nothing if `key` is known), on machines with a second CPU."""
        if PREFETCH_CPUS < 2:
            return
        with self._lock:
            if key in self._made or key in self._queued or key in self._making:
                return
            self._queued[key] = make
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="fastunwind-symbols", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queued:
                    self._worker = None
                    return
                key = next(iter(self._queued))
                make = self._queued.pop(key)
                done = self._making[key] = threading.Event()
            self._finish(key, make, done)

    def _finish(self, key: str, make: Callable[[], SymbolTable | None], done: threading.Event) -> None:
        try:
            made: SymbolTable | BaseException | None = make()
        except Exception as error:  # given to the asker, raised there
            made = error
        with self._lock:
            self._made[key] = made
            del self._making[key]
        done.set()

    def get(self, key: str, make: Callable[[], SymbolTable | None]) -> SymbolTable | None:
        with self._lock:
            done = self._making.get(key)
            if done is None and key not in self._made:
                make = self._queued.pop(key, make)
                done = self._making[key] = threading.Event()
                mine = True
            else:
                mine = False
        if mine and done is not None:
            self._finish(key, make, done)
        elif done is not None:
            done.wait()
        made = self._made[key]
        if isinstance(made, BaseException):
            raise made
        return made


#: _SymbolTables.prefetch works ahead only with a second CPU to work on
PREFETCH_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


class _SymbolLoader:
    """A module's symbol table, loaded when a frame first needs it (or ahead); one per file."""

    def __init__(self, image: ModuleImage, tables: _SymbolTables) -> None:
        self._image = image
        self._tables = tables

    def make(self) -> SymbolTable:
        table = symbol_table_for_file(self._image.elf)
        self._image.elf.release_resident_pages()  # libLLVM-14's .dynsym and .dynstr: 12 MB
        return table

    def __call__(self) -> SymbolTable | None:
        return self._tables.get(self._image.path, self.make)


class _PerfMapLoader:
    """The symbols of JIT code: the process's /tmp/perf-PID.map, read when a frame first needs it
    (perf reads it at `perf script` time too); one per file."""

    def __init__(self, path: str, tables: _SymbolTables) -> None:
        self._path = path
        self._tables = tables

    def __call__(self) -> SymbolTable | None:
        return self._tables.get(self._path, lambda: perf_map_table(self._path))


class _SourceLinesStore:
    """Each module's source lines (SourceLines), opened when a frame first needs them and kept for
    the run, by path; debug files missing here are fetched from $DEBUGINFOD_URLS' servers."""

    def __init__(self) -> None:
        self._opened: dict[str, SourceLines | None] = {}
        self.debuginfod = DebuginfodClient()

    def loader(self, mapping: Mapping) -> Callable[[], SourceLines | None] | None:
        image = mapping.image
        if image is None:
            return None
        return lambda: self._open(image)

    def _open(self, image: ModuleImage) -> SourceLines | None:
        if image.path not in self._opened:
            self._opened[image.path] = open_source_lines(image.elf, self.debuginfod)
        return self._opened[image.path]


#: what symbolize_samples is told of a mapping: (start, pgoff, bias, path, its symbol table's loader
#: [, its source lines' loader])
MappingRow = (tuple[int, int, int, str, "Callable[[], SymbolTable | None] | None"]
              | tuple[int, int, int, str, "Callable[[], SymbolTable | None] | None",
                      "Callable[[], SourceLines | None] | None"])


def _mapping_row(mapping: Mapping, tables: _SymbolTables, sources: _SourceLinesStore | None) -> MappingRow:
    symbols = _symbol_loader(mapping, tables)
    if sources is None:
        return (mapping.start, mapping.pgoff, mapping.bias, mapping.path, symbols)
    return (mapping.start, mapping.pgoff, mapping.bias, mapping.path, symbols, sources.loader(mapping))


def _symbol_loader(mapping: Mapping, tables: _SymbolTables) -> Callable[[], SymbolTable | None] | None:
    if mapping.image is not None:
        return _SymbolLoader(mapping.image, tables)
    if PERF_MAP_PATH.fullmatch(mapping.path):
        return _PerfMapLoader(mapping.path, tables)
    return None


#: the phases of unwind_recording, in order, as its `on_phase` callback names them
PHASES = ("decoding", "replaying", "unwinding", "symbolizing")


def unwind_recording(path: str, *, max_frames: int = DEFAULT_MAX_FRAMES, images: ImageCache | None = None,
                     backend: str | None = None, synth: str = "off", on_phase: Callable[[str], None] | None = None,
                     srcline_fields: int = 0) -> tuple[UnwoundRecording, Statistics]:
    """Unwind every sample of the recording at `path` ("-": standard input, as `perf script -i -`
    reads a `perf record -o -` pipe). `backend`, `synth`: see AddressSpace.to_core (default
    FASTUNWIND_BACKEND, else "auto"; no synthesized rows). `on_phase(name)` is called as each of
    PHASES starts (for a progress display; each phase is one call into C). `srcline_fields`:
    _core.UNWOUND_INLINE and/or UNWOUND_SRCLINE, what the text shows of the frames' source (perf
    script's --inline, -F +srcline)."""
    phase = on_phase or (lambda name: None)
    started = time.perf_counter()
    phase("decoding")
    perf = PerfData.read(sys.stdin.buffer) if path == "-" else PerfData.open(path)
    source = recording_source(perf)
    phase("replaying")
    replayed = replay(perf, images)
    session = replayed.session
    space_ids = replayed.space_ids.tobytes()
    phase("unwinding")
    # without user stacks nothing is unwound: the frames are each sample's callchain (or IP)
    unwound = walk_samples(perf.native, space_ids, [space.to_core(backend, synth) for space in session.spaces],
                           max_frames, source=source)
    tables = _SymbolTables()
    sources = _SourceLinesStore() if srcline_fields else None
    mappings: list[MappingRow] = [_mapping_row(m, tables, sources) for m in session.mappings]
    kernel_build_id = next((b.build_id for b in perf.build_ids if b.filename == "[kernel.kallsyms]"), None)
    phase("symbolizing")
    native = _core.symbolize_samples(
        perf.native, space_ids, replayed.comm_ids.tobytes(), replayed.comm_names, unwound, session.space_mappings,
        mappings, lambda addresses: kernel_symbol_table(kernel_build_id, addresses), OUTCOME_NAME_BY_CODE,
        srcline_fields)
    unwound_samples, frames, outcomes, depths = native.statistics()
    stats = Statistics(samples=perf.sample_count, unwound_samples=unwound_samples, frames=frames, walk_ns=unwound.walk_ns,
                       frames_per_sample=Counter(depths), replaced_modules=session.statistics.replaced_modules,
                       missing_modules=session.statistics.missing_modules, source=source, cut=perf.cut)
    if sources is not None:
        stats.source_notes = sources.debuginfod.failures
    for code, count in outcomes.items():
        stats.outcomes[OUTCOME_NAME_BY_CODE[code]] += count
    stats.synth = synth
    stats.add_batch(unwound)
    stats.images = list({id(m.image): m.image for m in session.mappings if m.image is not None}.values())
    _check_unchanged(perf, stats.images)
    stats.total_seconds = time.perf_counter() - started
    return UnwoundRecording(native), stats


def _check_unchanged(perf: PerfData, images: Iterable[ModuleImage | None]) -> None:
    """FileChangedError if the recording or a module's file was truncated under its mapping while
    samples were read, walked or named: before anything of them is written. The SIGBUS guard is then
    put back in front of a handler installed over it meanwhile, for the next window."""
    _core.guard_mapped_files()
    perf.check_unchanged()
    for image in images:
        if image is not None:
            image.check_unchanged()


#: FASTUNWIND_WINDOW_BYTES: the least bytes of records a window of a stream holds (tests force small
#: windows with it); unset: perf_data.h's FU_PERF_DEFAULT_WINDOW_BYTES
WINDOW_BYTES_VARIABLE = "FASTUNWIND_WINDOW_BYTES"


class _KernelSymbols:
    """The kernel's symbol table for a stream's windows. A file names its kernel in its header: the
    whole table is made ahead (_SymbolTables.prefetch). Otherwise (a pipe, whose build-ids arrive
    as records, or one CPU) the first window's lookups get a table of just the symbols they need
    (as unwind_recording's single call), later windows' the whole table, made once. kallsyms is
    read once (/proc/kallsyms costs ~50 ms of kernel time a read)."""

    def __init__(self, perf: PerfData, tables: _SymbolTables) -> None:
        self._perf = perf
        self._tables = tables
        self._data: bytes | _core.MappedFile | None = None
        self._ahead = not perf.pipe_mode and PREFETCH_CPUS > 1
        #: read here when the table is made ahead: the worker does not touch the recording
        self._ahead_build_id = self._build_id() if self._ahead else None
        if self._ahead:
            tables.prefetch(tables.KERNEL, self._whole)

    def _build_id(self) -> str | None:
        return next((b.hex() for _pid, b, name, _m, _o in self._perf.native.build_ids()
                     if name == b"[kernel.kallsyms]"), None)

    def _kernel_build_id(self) -> str | None:
        return self._ahead_build_id if self._ahead else self._build_id()

    def _kallsyms(self) -> bytes | _core.MappedFile:
        if self._data is None:
            self._data = kallsyms_bytes(self._kernel_build_id())
        return self._data

    def _whole(self) -> SymbolTable:
        table = (cached_kernel_symbol_table(self._kernel_build_id())
                 or table_from_file(SymbolTable.from_kallsyms, self._kallsyms()))
        self._data = b""  # the text (5 MB) is not read again
        return table

    def __call__(self, addresses: bytes) -> SymbolTable | None:
        if self._data is None and not self._ahead:
            return table_from_file(SymbolTable.from_kallsyms, self._kallsyms(), addresses)
        return self._tables.get(self._tables.KERNEL, self._whole)


def stream_recording(path: str, out: TextIO | BinaryIO | None, *, mode: str = "text", max_frames: int = DEFAULT_MAX_FRAMES,
                     images: ImageCache | None = None, backend: str | None = None, synth: str = "off",
                     window_bytes: int | None = None, on_phase: Callable[[str], None] | None = None,
                     on_window: Callable[[float | None], None] | None = None,
                     consumers: Sequence[_core.Report | _core.Profile] = (), sample_filter: SampleFilter | None = None,
                     srcline_fields: int = 0) -> Statistics:
    """Unwind the recording at `path` ("-": standard input) window by window and write each window's
    perf script text (`mode` "text"), or the folded stacks of the whole recording ("folded"), or
    nothing ("stats": the statistics only), in memory that does not grow with the recording
    (perf_data.h, "Streaming"; docs/DESIGN.md). The output is unwind_recording's, rendered.
    `on_phase(name)`: called before the folded stacks are written (for a progress display);
    `on_window(fraction)` after each window, with the share of the recording's time span read
    (from its header's first and last sample times; None without them, as in a pipe's).
    `consumers`: each window's symbolized samples are added to each (C: perf report's table,
    native/core/report.h; speedscope's file, native/core/profile.h).
    `sample_filter`: only its samples are replayed, walked and written (perf/sample_filter.py).
    `backend`, `synth`: see AddressSpace.to_core. `srcline_fields`: as unwind_recording's (each
    frame's source line, for a report sorted by it)."""
    started = time.perf_counter()
    if window_bytes is None:
        window_bytes = int(os.environ.get(WINDOW_BYTES_VARIABLE) or 0)
    perf = PerfData.open_stream(sys.stdin.buffer if path == "-" else path, window_bytes=window_bytes,
                                decode_ahead=True, executable_mmaps_only=True)
    source = recording_source(perf)
    replayer = Replayer(perf, images)
    tables = _SymbolTables()
    sources = _SourceLinesStore() if srcline_fields else None
    kernel_loader = _KernelSymbols(perf, tables)
    stats = Statistics(source=source)
    stats.synth = synth
    if sources is not None:
        stats.source_notes = sources.debuginfod.failures
    core_spaces: list[_core.AddressSpace] = []
    mappings: list[MappingRow] = []
    folded = _core.FoldedStacks() if mode == "folded" else None
    write = _text_sink(out) if mode == "text" and out is not None else None
    if sample_filter is not None and sample_filter.cpus:
        sampling = [attr for attr in perf.attrs if attr.is_sampling] or perf.attrs
        if not all(attr.sample_type & _core.PERF_SAMPLE_CPU for attr in sampling):
            raise PerfDataError(f"{path}: the samples do not record their CPU (perf record -a or --sample-cpu "
                                "records it): --cpu cannot select")
    stream = perf.native
    if sample_filter is not None and sample_filter.percent_ranges:
        first, last = stream.sample_time
        # perf's test; perf script reads a pipe's HEADER_SAMPLE_TIME (if any) only after the filter is set
        if perf.pipe_mode or (not first and not last):
            raise PerfDataError(f"{path}: no first/last sample time in the recording (perf record writes them to a "
                                "file's header, not to a pipe): --time percentages need them")
        sample_filter = sample_filter.with_span(first, last)
    first_time, last_time = stream.sample_time
    while (window := stream.next_window()) is not None:
        if on_window is not None:
            on_window(_span_read(window, first_time, last_time))
        if sample_filter is not None:
            sample_filter.select(window)
        space_ids, comm_ids = replayer.feed(window)
        if sample_filter is not None:
            space_ids, comm_ids = sample_filter.select_comms(window, space_ids, comm_ids, replayer.comm_names)
        core_spaces.extend(space.to_core(backend, synth) for space in replayer.spaces[len(core_spaces):])
        new_mappings = len(mappings)
        mappings.extend(_mapping_row(m, tables, sources) for m in replayer.mappings[len(mappings):])
        for row in mappings[new_mappings:]:
            if isinstance(row[4], _SymbolLoader):
                tables.prefetch(row[3], row[4].make)
        # without user stacks nothing is unwound: the frames are each sample's callchain (or IP)
        unwound = walk_samples(window, space_ids, core_spaces, max_frames, source=source)
        native = _core.symbolize_samples(window, space_ids, comm_ids, replayer.comm_names, unwound,
                                         replayer.space_mappings, mappings, kernel_loader, OUTCOME_NAME_BY_CODE,
                                         srcline_fields)
        stats.samples += window.sample_count
        stats.walk_ns += unwound.walk_ns
        stats.add_batch(unwound)
        _check_unchanged(perf, (image for _path, image in replayer.file_images))
        if write is not None:  # mode "text"
            native.render(write)
        elif folded is not None:
            folded.add(native)
        for consumer in consumers:
            consumer.add(native)
        unwound_samples, frames, outcomes, depths = native.statistics()
        stats.unwound_samples += unwound_samples
        stats.frames += frames
        stats.frames_per_sample.update(depths)
        for code, count in outcomes.items():
            stats.outcomes[OUTCOME_NAME_BY_CODE[code]] += count
        del native, unwound, window
    if folded is not None:
        if on_phase:
            on_phase("writing folded stacks")
        folded.write(_writer(out if out is not None else sys.stdout))
    stats.cut = perf.cut  # known at the end: a pipe or a file may end inside a record
    session = replayer.session()
    stats.replaced_modules = session.statistics.replaced_modules
    stats.missing_modules = session.statistics.missing_modules
    stats.images = list({id(m.image): m.image for m in session.mappings if m.image is not None}.values())
    stats.total_seconds = time.perf_counter() - started
    return stats


def _span_read(window: _core.PerfData, first_time: int, last_time: int) -> float | None:
    """The share of the span from first_time to last_time up to the window's last sample."""
    if last_time <= first_time or not window.sample_count:
        return None
    last = int.from_bytes(window.sample_column("time")[-8:], sys.byteorder)
    return (last - first_time) / (last_time - first_time)


def write_speedscope(profile: _core.Profile, out: TextIO | BinaryIO, name: str) -> None:
    """speedscope's file of the samples added to `profile`, named `name`, to a text or binary file."""
    profile.speedscope(_writer(out), name)


def write_gecko(profile: _core.Profile, out: TextIO | BinaryIO, name: str) -> None:
    """The Firefox profiler's processed profile of the samples added to `profile` (its product named
    `name`), to a text or binary file."""
    profile.gecko(_writer(out), name)


#: the stacks an HTML flame graph holds at most (the smaller ones merged, native/core/profile.h):
#: 30000 nodes are about 0.5 MB of page and 0.1 s of the browser's work (the page draws at most
#: 4000 frames of them at a time)
FLAME_GRAPH_MAX_NODES = 30000


def write_flame_graph(profile: _core.Profile, out: TextIO | BinaryIO, title: str,
                      max_nodes: int = FLAME_GRAPH_MAX_NODES) -> None:
    """A self-contained HTML flame graph of the samples added to `profile` (perf/flamegraph.html
    with the profile's data written into it), to a text or binary file."""
    import html  # only here, as pathlib is not used: both cost start-up of every perf-script run

    with open(os.path.join(os.path.dirname(__file__), "flamegraph.html"), encoding="utf-8") as template_file:
        template = template_file.read()
    head, tail = template.split("{{DATA}}")
    head = head.replace("{{TITLE}}", html.escape(title))  # after the split: a title may hold anything
    write = _writer(out)
    write(head.encode())
    profile.flame(write, max_nodes)
    write(tail.encode())


def _text_sink(out: TextIO | BinaryIO) -> Callable[[bytes], object] | int:
    """Where a stream's text goes: the file descriptor of a plain file or pipe (its Python buffers
    flushed; the text is written by C with write(2), without a bytes object per chunk: ~200 MB of
    copying on the 1.9 GB recording), else _writer's callable (io.BytesIO, and wrappers such as
    gzip.GzipFile whose fileno() is the compressed file's)."""
    write = _writer(out)
    binary = getattr(out, "buffer", out)
    if not isinstance(binary, (io.BufferedWriter, io.BufferedRandom, io.FileIO)):
        return write
    try:
        fd = binary.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return write
    binary.flush()
    return fd


def _writer(out: TextIO | BinaryIO) -> Callable[[bytes], object]:
    """A callable taking bytes for `out`: the binary buffer under a text file that has one
    (sys.stdout), decoded text for one that has not (io.StringIO), else `out.write`. Chunks end at a
    sample's or line's end, so no character is split."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()
        return cast(Callable[[bytes], object], buffer.write)
    if isinstance(out, io.TextIOBase):
        text = out
        return lambda chunk: text.write(chunk.decode("utf-8", "surrogateescape"))
    return cast("BinaryIO", out).write


def render_perf_script(samples: UnwoundRecording, out: TextIO | BinaryIO) -> None:
    """perf script's text for every sample, to a text or binary file."""
    samples.native.render(_writer(out))


def render_folded(samples: UnwoundRecording, out: TextIO | BinaryIO) -> None:
    """FlameGraph's collapsed format, `comm;root;...;leaf count` lines, most frequent first. A stack
    that did not reach its end is rooted at `[truncated]` (or the failure's name) so that it is
    never drawn as a complete one."""
    samples.native.folded(_writer(out))
