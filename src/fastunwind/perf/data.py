"""Read `perf record` recordings (perf.data, file mode and pipe mode) made with `--call-graph dwarf`.

    >>> perf = PerfData.open("perf.data")  # a recording of yours  # doctest: +SKIP
    >>> perf.has_user_stacks, perf.sample_count  # doctest: +SKIP
    (True, 1234)
    >>> for event in perf.events():  # time order, as perf script delivers them  # doctest: +SKIP
    ...     if isinstance(event, Sample):
    ...         event.pid, hex(event.ip), len(event.stack), event.reg("sp")
    ...     elif isinstance(event, Mmap):
    ...         event.filename, hex(event.start)

Decoding happens in C (native/core/perf_data.c) when the object is created; the samples stay in one
contiguous C array in time order (native code reaches it with fu_perf_object_samples()). Python objects
are made only for the events you iterate.

Ordering: every delivered record (SAMPLE, MMAP/MMAP2, COMM, FORK, EXIT) is sorted by its time with a
stable sort, so equal times keep file order; a record without a time sorts at the time of the record
before it. perf script orders within FINISHED_ROUND windows, which gives the same sequence unless perf
had to deliver a late event out of order.

Errors: a malformed or unsupported recording raises fastunwind.errors.PerfDataError naming the file
offset in hex.

A recording cut short (perf record killed before it rewrote the header, a truncated copy, a pipe
stream that ends inside a record) is read as perf reads it: the records up to the cut, an incomplete
last record dropped, feature sections outside the file absent; `PerfData.cut` says what was found
(None for a whole recording). A file cut before its first complete sample is an error.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterator

from fastunwind import _core
from fastunwind.errors import PerfDataError
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple, cast

if TYPE_CHECKING:
    from typing import Any, BinaryIO, NoReturn, Protocol

    class _ReadableFile(Protocol):
        """A binary file _load_recording reads: a file descriptor, and readinto (sys.stdin.buffer, open(..., "rb"))."""

        def fileno(self) -> int: ...

        def readinto(self, buffer: memoryview, /) -> int | None: ...

__all__ = [
    "PERF_REGS",
    "BuildId",
    "Comm",
    "Exit",
    "Fork",
    "Mmap",
    "PerfAttr",
    "PerfData",
    "PerfDataError",
    "RecordingCut",
    "Sample",
]

#: PERF_SAMPLE_* bits (include/uapi/linux/perf_event.h, native/core/perf_data.h)
SAMPLE_CALLCHAIN = _core.PERF_SAMPLE_CALLCHAIN
SAMPLE_REGS_USER = _core.PERF_SAMPLE_REGS_USER
SAMPLE_STACK_USER = _core.PERF_SAMPLE_STACK_USER

#: perf's x86-64 user registers by perf's number (native/core/x86_64.h)
PERF_REGS: tuple[str, ...] = _core.PERF_REGISTER_NAMES
_REG_NUMBER = {name: number for number, name in enumerate(PERF_REGS)}

# PERF_TYPE_SOFTWARE / PERF_COUNT_SW_DUMMY: perf's side-band-only tracking event, never sampled.


#: perf's feature bits (tools/perf/util/header.h, enum HEADER_*), by number
FEATURE_NAMES = ("RESERVED", "TRACING_DATA", "BUILD_ID", "HOSTNAME", "OSRELEASE", "VERSION", "ARCH", "NRCPUS",
                 "CPUDESC", "CPUID", "TOTAL_MEM", "CMDLINE", "EVENT_DESC", "CPU_TOPOLOGY", "NUMA_TOPOLOGY",
                 "BRANCH_STACK", "PMU_MAPPINGS", "GROUP_DESC", "AUXTRACE", "STAT", "CACHE", "SAMPLE_TIME",
                 "MEM_TOPOLOGY", "CLOCKID", "DIR_FORMAT", "BPF_PROG_INFO", "BPF_BTF", "COMPRESSED", "CPU_PMU_CAPS",
                 "CLOCK_DATA", "HYBRID_TOPOLOGY", "PMU_CAPS")


def feature_name(bit: int) -> str:
    return FEATURE_NAMES[bit] if bit < len(FEATURE_NAMES) else f"feature {bit}"


class RecordingCut(NamedTuple):
    """What the reader found in a recording cut short: `note`, one line as perf's warnings say it
    (data size 0: not properly terminated; truncated at which offset), the feature sections the
    header announces that are absent (by perf's names), and the offset of the incomplete record
    dropped at the end, if one was."""

    note: str
    missing_features: tuple[str, ...]
    dropped_record_offset: int | None


_TYPE_SOFTWARE = 1
_COUNT_SW_DUMMY = 9



class PerfAttr(NamedTuple):
    """One event (struct perf_event_attr) of the recording, with its ids and its name when the
    recording carries one (HEADER_EVENT_DESC, or EVENT_UPDATE in pipe mode)."""

    index: int  # type: ignore[assignment]  # the event's position, in place of tuple.index
    type: int
    config: int
    sample_period: int  # the sample frequency when `freq`
    freq: bool
    sample_type: int
    read_format: int
    sample_id_all: bool
    sample_regs_user: int
    sample_stack_user: int
    sample_regs_intr: int
    branch_sample_type: int
    flags: int
    size: int
    clockid: int
    sample_max_stack: int
    config1: int
    config2: int
    ids: tuple[int, ...]
    name: str | None

    @property
    def has_user_stack(self) -> bool:
        """The samples carry user registers and a user stack dump (--call-graph dwarf)."""
        return (self.sample_type & (SAMPLE_REGS_USER | SAMPLE_STACK_USER)) == (SAMPLE_REGS_USER | SAMPLE_STACK_USER)

    @property
    def is_sampling(self) -> bool:
        """The event takes samples (not perf's dummy side-band tracking event, not a pure counter)."""
        if self.type == _TYPE_SOFTWARE and self.config == _COUNT_SW_DUMMY:
            return False
        return self.sample_period != 0


class Mmap(NamedTuple):
    """PERF_RECORD_MMAP or MMAP2: `length` bytes of `filename` from file offset `pgoff` mapped at
    avma `start`. build_id is hex when the kernel put it in the record (MMAP2 with
    PERF_RECORD_MISC_MMAP_BUILD_ID); maj/min/ino are 0 then and for plain MMAP. time is None without
    sample_id_all."""

    pid: int
    tid: int
    start: int
    length: int
    pgoff: int
    filename: str
    build_id: str | None
    prot: int
    flags: int
    time: int | None
    maj: int = 0
    min: int = 0
    ino: int = 0
    ino_generation: int = 0
    is_mmap2: bool = True
    cpu: int = -1

    @property
    def end(self) -> int:
        return self.start + self.length


class Comm(NamedTuple):
    """PERF_RECORD_COMM: thread `tid` of `pid` is now called `comm`; exec is set when an exec caused
    it (PERF_RECORD_MISC_COMM_EXEC)."""

    pid: int
    tid: int
    comm: str
    exec: bool
    time: int | None


class Fork(NamedTuple):
    """PERF_RECORD_FORK: (pid, tid) was created by (ppid, ptid). time is the sample_id time, or the
    record's own time field without sample_id_all."""

    pid: int
    ppid: int
    tid: int
    ptid: int
    time: int


class Exit(NamedTuple):
    """PERF_RECORD_EXIT: (pid, tid) exited; same layout and time rule as Fork."""

    pid: int
    ppid: int
    tid: int
    ptid: int
    time: int


class BuildId(NamedTuple):
    """One entry of the build-id table (HEADER_BUILD_ID feature, or HEADER_BUILD_ID records in pipe
    mode): a plain (pid, build_id hex, filename) tuple with names. pid is -1 for the kernel and for
    entries perf did not tie to a process."""

    pid: int
    build_id: str
    filename: str


class Sample:
    """A reference to one decoded PERF_RECORD_SAMPLE (index `index` in time order). The main fields
    are plain attributes; the callchain, the user stack and registers are read from the C array on
    access. pid/tid/cpu are -1 and time is None when the event did not sample them; period is the
    attr's sample_period when PERF_SAMPLE_PERIOD is off (what perf script prints)."""

    __slots__ = (
        "_native",
        "addr",
        "attr_index",
        "callchain_count",
        "cpu",
        "file_offset",
        "id",
        "index",
        "ip",
        "misc",
        "period",
        "pid",
        "sample_type",
        "stack_size",
        "stream_id",
        "tid",
        "time",
    )
    _native: _core.PerfData
    index: int
    pid: int
    tid: int
    time: int | None
    ip: int
    cpu: int
    period: int
    attr_index: int
    misc: int
    sample_type: int
    id: int
    addr: int
    stream_id: int
    callchain_count: int
    stack_size: int
    file_offset: int

    def __init__(self, native: _core.PerfData, index: int) -> None:
        set_ = object.__setattr__
        set_(self, "_native", native)
        set_(self, "index", index)
        (pid, tid, time, ip, cpu, period, attr_index, misc, sample_type, id_, addr, stream_id,
         callchain_count, stack_size, file_offset) = native.sample(index)
        for name, value in (("pid", pid), ("tid", tid), ("time", time), ("ip", ip), ("cpu", cpu),
                            ("period", period), ("attr_index", attr_index), ("misc", misc),
                            ("sample_type", sample_type), ("id", id_), ("addr", addr),
                            ("stream_id", stream_id), ("callchain_count", callchain_count),
                            ("stack_size", stack_size), ("file_offset", file_offset)):
            set_(self, name, value)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("Sample is read-only")

    def __repr__(self) -> str:
        time = "None" if self.time is None else str(self.time)
        return (f"Sample(index={self.index}, pid={self.pid}, tid={self.tid}, time={time}, ip={self.ip:#x}, "
                f"cpu={self.cpu}, period={self.period}, attr_index={self.attr_index})")

    @property
    def callchain(self) -> tuple[int, ...]:
        """PERF_SAMPLE_CALLCHAIN entries, PERF_CONTEXT_* markers included (the kernel part only with
        --call-graph dwarf, since perf sets exclude_callchain_user)."""
        return self._native.sample_callchain(self.index)

    @property
    def stack(self) -> bytes:
        """The valid part (dyn_size bytes) of the user stack dump, starting at the user sp."""
        return self._native.sample_stack(self.index)

    @property
    def regs_abi(self) -> int:
        return self._native.sample_regs(self.index)[0]

    @property
    def regs(self) -> dict[str, int]:
        """The sampled user registers by perf name ('ip', 'sp', 'bp', 'r12', ...); empty when the
        sample has none (regs ABI NONE, e.g. a kernel thread)."""
        _abi, mask, values = self._native.sample_regs(self.index)
        names = [PERF_REGS[bit] if bit < len(PERF_REGS) else f"reg{bit}" for bit in range(64) if mask >> bit & 1]
        return dict(zip(names, values)) if values else {}

    def reg(self, register: int | str) -> int | None:
        """One user register by perf number or name; None if not sampled."""
        number = _REG_NUMBER[register] if isinstance(register, str) else register
        return self._native.sample_reg(self.index, number)

    @property
    def is_kernel(self) -> bool:
        """header.misc says the sample was taken in the kernel (PERF_RECORD_MISC_KERNEL)."""
        return (self.misc & 7) == 1

    def extra(self) -> dict[str, Any]:
        """Every other sampled field: read values, raw, branch stack, weight, data_src, transaction,
        intr regs, phys_addr, cgroup, page sizes, aux, the whole stack dump."""
        return self._native.sample_extra(self.index)


Event = Sample | Mmap | Comm | Fork | Exit


def _text(raw: bytes) -> str:
    return os.fsdecode(raw)


# Recordings are read into anonymous memory the kernel backs with 2 MiB pages (MADV_HUGEPAGE)
# rather than mapped from the page cache in 4 KiB pages, or read into ordinary bytes. Every sample's
# registers and stack dump sit a few KiB past the previous one's, so a walk over 4 KiB pages takes
# a TLB miss or two per sample, each a nested page walk in a virtual machine: hackbench's table first
# pass went from 49 to 38 ns/frame and its warm passes from 10.8 to 9.1 (docs/BENCHMARKS.md). Files
# larger than this stay mapped, so that their pages remain the page cache's to reclaim.
HUGE_PAGE_READ_MAX_BYTES = 1 << 30
HUGE_PAGE_BYTES = 2 << 20
#: what a stream of unknown length (a pipe) is first read into; doubled while it goes on, up to
#: STREAM_MAX_BYTES (a file of any size can be opened instead: it is mapped)
STREAM_INITIAL_BYTES = 8 * HUGE_PAGE_BYTES
STREAM_MAX_BYTES = 64 << 30


def _anonymous_memory(size: int) -> mmap.mmap:
    """Anonymous memory of `size` bytes rounded up to a whole number of huge pages (the kernel aligns
    such a mapping to one), advised for them."""
    memory = mmap.mmap(-1, -(-size // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    _advise_huge_pages(memory)
    return memory


def _advise_huge_pages(memory: mmap.mmap) -> None:
    if hasattr(mmap, "MADV_HUGEPAGE"):
        memory.madvise(mmap.MADV_HUGEPAGE)


def _load_recording(f: _ReadableFile, size: int | None = None) -> _core.MappedFile | memoryview:
    """The bytes of the binary file `f`, read to its end into memory advised for huge pages: a
    regular file of `size` bytes (read up to that, or mapped if larger than HUGE_PAGE_READ_MAX_BYTES
    or where huge pages cannot be asked for), or a stream (`size` None) in memory that doubles as it
    fills."""
    if size is not None and (size > HUGE_PAGE_READ_MAX_BYTES or not hasattr(mmap, "MADV_HUGEPAGE")):
        return _core.MappedFile(f.fileno(), str(getattr(f, "name", "perf.data")))
    memory = _anonymous_memory(size if size is not None else STREAM_INITIAL_BYTES)
    limit = size if size is not None else len(memory)
    filled = 0
    while True:
        if filled == limit:
            if size is not None:
                break
            if len(memory) >= STREAM_MAX_BYTES:
                raise PerfDataError(f"a recording streamed in is longer than {STREAM_MAX_BYTES >> 30} GiB: "
                                    "write it to a file and read that")
            try:
                memory.resize(2 * len(memory))  # mremap: the pages move, nothing is copied
            except OSError as error:
                raise PerfDataError(f"a recording streamed in outgrew memory at {filled} bytes ({error}): "
                                    "write it to a file and read that") from None
            _advise_huge_pages(memory)
            limit = len(memory)
        with memoryview(memory) as view, view[filled:limit] as room:
            read = f.readinto(room)
        if not read:  # the end of the stream (or a file that shrank after fstat: what was read)
            break
        filled += read
    return memoryview(memory)[:filled]


class PerfData:
    """A parsed recording. Build it with PerfData.open(path) or PerfData.read(bytes or a binary file
    such as sys.stdin.buffer for `perf record -o - | fastunwind ...`)."""

    def __init__(self, native: _core.PerfData, source: str = "<bytes>") -> None:
        self._native = native
        self._file: BinaryIO | None = None  #: a stream's file (open_stream)
        self._mapped: _core.MappedFile | None = None  #: the file open() mapped, which `native` reads
        self.source = source
        self.attrs: list[PerfAttr] = [
            PerfAttr(index=i, type=a["type"], config=a["config"], sample_period=a["sample_period"], freq=a["freq"],
                     sample_type=a["sample_type"], read_format=a["read_format"], sample_id_all=a["sample_id_all"],
                     sample_regs_user=a["sample_regs_user"], sample_stack_user=a["sample_stack_user"],
                     sample_regs_intr=a["sample_regs_intr"], branch_sample_type=a["branch_sample_type"],
                     flags=a["flags"], size=a["size"], clockid=a["clockid"], sample_max_stack=a["sample_max_stack"],
                     config1=a["config1"], config2=a["config2"], ids=a["ids"], name=a["name"])
            for i, a in enumerate(native.attrs())]
        self.build_ids: list[BuildId] = [BuildId(pid, build_id.hex(), _text(filename))
                                         for pid, build_id, filename, _misc, _offset in native.build_ids()]
        self.cmdline: list[str] = [_text(word) for word in native.cmdline()]

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, max_decompressed: int = 0) -> "PerfData":
        """Parse the recording at `path` (read into huge pages up to HUGE_PAGE_READ_MAX_BYTES, mapped
        beyond). max_decompressed bounds the bytes that PERF_RECORD_COMPRESSED data may expand to
        (0: the default, 4 GiB)."""
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise PerfDataError(f"{os.fspath(path)}: empty file, not a perf.data recording")
            buffer = _load_recording(f, size)
        try:
            native = _core.PerfData(buffer, max_decompressed)
        except PerfDataError as error:
            del buffer  # unmapped once the half-built object lets go of it
            raise PerfDataError(f"{os.fspath(path)}: {error}") from None
        perf = cls(native, os.fspath(path))
        if isinstance(buffer, _core.MappedFile):
            perf._mapped = buffer
        perf.check_unchanged()  # truncated while parsed: its records read as zeros
        return perf

    def check_unchanged(self) -> None:
        """FileChangedError if the recording's file was truncated under its mapping since it was
        opened (native/core/mapped_file.h): for the end of the work on its samples, before output."""
        if self._mapped is not None:
            self._mapped.check()
        self._native.check_unchanged()

    @classmethod
    def open_stream(cls, source: str | os.PathLike[str] | BinaryIO, *, window_bytes: int = 0,
                    max_decompressed: int = 0, decode_ahead: bool = False,
                    executable_mmaps_only: bool = False) -> "PerfData":
        """A recording read window by window, in memory that does not grow with it: a regular file is
        mapped and its pages dropped behind the decoder, a pipe (a path or a binary file such as
        sys.stdin.buffer) is read as it goes. Only the header is decoded here; `native.next_window()`
        gives the next window's records in time order (a `_core.PerfData`), None at the end
        (perf_data.h, "Streaming"). window_bytes: the least bytes of records a window holds (0: the
        default, 8 MiB). decode_ahead: each next window is cut on a thread of its own while the
        caller works on the last (reading and decoding overlap unwinding and writing).
        executable_mmaps_only: MMAP2 records of memory that is not executable are left out (the
        replay ignores them; a python recording has ~400k)."""
        name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else getattr(source, "name", "<stream>")
        f = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source
        try:
            info = os.fstat(f.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size == 0:
                raise PerfDataError(f"{name}: empty file, not a perf.data recording")
            native = _core.PerfData.open_stream(f.fileno(), window_bytes, max_decompressed, decode_ahead,
                                                executable_mmaps_only)
        except PerfDataError as error:
            if f is not source:
                f.close()
            raise PerfDataError(f"{name}: {error}" if not str(error).startswith(f"{name}: ") else str(error)) from None
        perf = cls(native, str(name))
        perf._file = f  # a pipe is read as the windows are asked for; a mapped file needs it no more
        return perf

    @classmethod
    def read(cls, source: bytes | bytearray | memoryview | BinaryIO, *, max_decompressed: int = 0) -> "PerfData":
        """Parse a recording from bytes or from a binary file object read to its end (pipe mode:
        `perf record -o - ...` on stdin), which is read into huge pages as PerfData.open reads a file."""
        data: bytes | bytearray | memoryview | _core.MappedFile
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = source
        elif hasattr(source, "readinto"):
            data = _load_recording(cast("_ReadableFile", source))
        else:
            data = source.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes or a binary file, got {type(data).__name__}")
        return cls(_core.PerfData(bytes(data) if isinstance(data, bytearray) else data, max_decompressed))

    # ---- summary ------------------------------------------------------------------------------

    @property
    def native(self) -> _core.PerfData:
        """The C object; pass it to C code that reads the sample array (fu_perf_object_samples)."""
        return self._native

    @property
    def pipe_mode(self) -> bool:
        return self._native.pipe_mode

    @property
    def sample_count(self) -> int:
        return self._native.sample_count

    @property
    def event_count(self) -> int:
        return self._native.event_count

    @property
    def has_user_stacks(self) -> bool:
        """Every sampling event records user registers and stack (--call-graph dwarf)."""
        sampling = [attr for attr in self.attrs if attr.is_sampling]
        return bool(sampling) and all(attr.has_user_stack for attr in sampling)

    def stats(self) -> dict[str, int]:
        return self._native.stats()

    @property
    def cut(self) -> RecordingCut | None:
        """None for a whole recording; what was cut short and where otherwise (see RecordingCut)."""
        found = self._native.cut()
        if found is None:
            return None
        note, bits, dropped = found
        return RecordingCut(note, tuple(feature_name(bit) for bit in bits), dropped)

    # ---- events -------------------------------------------------------------------------------

    def sample(self, index: int) -> Sample:
        if index < 0:
            index += self.sample_count
        return Sample(self._native, index)

    def samples(self) -> Iterator[Sample]:
        """The samples alone, in time order."""
        native = self._native
        for index in range(native.sample_count):
            yield Sample(native, index)

    def sample_column(self, name: str) -> memoryview:
        """One u64 per sample in time order (time, ip, pid, tid, cpu, period, attr_index,
        callchain_count, stack_size), without making Python objects per sample."""
        return memoryview(self._native.sample_column(name)).cast("Q")

    def _mmap(self, index: int) -> Mmap:
        (pid, tid, start, length, pgoff, filename, build_id, prot, flags, maj, min_, ino, ino_generation, time,
         is_mmap2, _misc, cpu, _offset) = self._native.mmap(index)
        return Mmap(pid, tid, start, length, pgoff, _text(filename), build_id.hex() if build_id is not None else None,
                    prot, flags, time, maj, min_, ino, ino_generation, is_mmap2, cpu)

    def _comm(self, index: int) -> Comm:
        pid, tid, comm, exec_, time, _misc, _offset = self._native.comm(index)
        return Comm(pid, tid, _text(comm), exec_, time)

    def _task(self, index: int) -> Fork | Exit:
        pid, ppid, tid, ptid, record_time, sample_time, is_exit, _offset = self._native.task(index)
        cls = Exit if is_exit else Fork
        return cls(pid, ppid, tid, ptid, sample_time if sample_time is not None else record_time)

    def events(self) -> Iterator[Event]:
        """Samples interleaved with MMAP/COMM/FORK/EXIT records, in time order."""
        kinds, index_bytes = self._native.events()
        indices = memoryview(index_bytes).cast("I")
        native = self._native
        for kind, index in zip(kinds, indices):
            if kind == _core.PERF_EVENT_SAMPLE:
                yield Sample(native, index)
            elif kind == _core.PERF_EVENT_MMAP:
                yield self._mmap(index)
            elif kind == _core.PERF_EVENT_COMM:
                yield self._comm(index)
            else:  # FORK, EXIT
                yield self._task(index)

    def __repr__(self) -> str:
        mode = "pipe" if self.pipe_mode else "file"
        return (f"PerfData({self.source!r}, {mode} mode, {len(self.attrs)} attrs, {self.sample_count} samples, "
                f"{self.event_count} events)")
