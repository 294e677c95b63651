"""Unwind a perf.data recording and print its stacks: `perf script` text, folded stacks, statistics.

The pipeline: the perf.data reader (C) decodes samples; `PerfSession` replays MMAP/COMM/FORK in time
order into address spaces; one C call unwinds every sample (GIL released); this module resolves the
frames to DSOs and symbols and renders them.

perf script's text format (perf 6.1, `-F comm,tid,time,ip,sym,symoff,dso`): a header
`comm  tid  sec.usec: ` per sample, then one line per frame, `\\t%16x sym+0xoff (dso)`, kernel
frames first, and a blank line. A user frame's address is the DSO-relative address perf computes
(`avma - map start + pgoff`); caller frames are printed at their return address minus one, except
the frame a signal interrupted (its IP is the interrupted instruction, not a return address).
"""

from __future__ import annotations

import array
import bisect
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO

from fastunwind import _core
from fastunwind.address_space import ImageCache, Mapping
from fastunwind.errors import PerfDataError
from fastunwind.perf_data import PerfData
from fastunwind.perf_session import replay
from fastunwind.symbolize import SymbolTable
from fastunwind.walk import FRAME_KINDS, OUTCOMES

#: perf's default callchain depth (kernel.perf_event_max_stack)
DEFAULT_MAX_FRAMES = 127
#: callchain entries at or above this are PERF_CONTEXT_* markers (include/uapi/linux/perf_event.h)
PERF_CONTEXT_MAX = (1 << 64) - 4095
OUTCOME_NAMES = {**dict(enumerate(OUTCOMES)), _core.SAMPLE_NO_USER_REGISTERS: "no_user_registers",
                 _core.SAMPLE_SKIPPED: "skipped"}

#: fu_frame_kind code of a frame recovered through a signal frame's CFI
FRAME_SIGNAL = FRAME_KINDS.index("signal")
NO_MODULE = 0xFFFFFFFF  #: fu_frame.module of an IP in no mapping
RECORD_HINT = ("record with user registers and stack, e.g.: "
               "perf record --call-graph dwarf -e cpu-clock -F 999 -- COMMAND")


@dataclass(frozen=True, slots=True)
class Frame:
    address: int  #: DSO-relative address as perf prints it
    symbol: str | None
    offset: int
    dso: str


@dataclass(frozen=True, slots=True)
class UnwoundSample:
    comm: str
    pid: int
    tid: int
    time: int  #: ns
    outcome: str
    kernel: tuple[Frame, ...]
    user: tuple[Frame, ...]


@dataclass
class Statistics:
    samples: int = 0
    unwound_samples: int = 0
    frames: int = 0
    walk_ns: int = 0
    total_seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    frames_per_sample: Counter[int] = field(default_factory=Counter)
    replaced_modules: set[str] = field(default_factory=set)
    missing_modules: set[str] = field(default_factory=set)
    #: per module with unwind tables: its compact table's size and slow-path share
    tables: list[dict] = field(default_factory=list)


class KernelSymbols:
    """/proc/kallsyms, when readable with real addresses (root or kptr_restrict=0). Its ~120k
    lines are parsed in C (a Python loop over them cost 130 ms, as long as the rest of a
    hackbench `perf-script`)."""

    def __init__(self, build_id: str | None = None) -> None:
        data = b""
        # perf record saves the kernel's symbols in its build-id cache: the right ones for the
        # recording's kernel, and a plain file (reading /proc/kallsyms costs ~50 ms of kernel time)
        for path in ([os.path.expanduser(f"~/.debug/[kernel.kallsyms]/{build_id}/kallsyms")] if build_id else []) + [
                "/proc/kallsyms"]:
            try:
                with open(path, "rb") as f:
                    data = f.read()
                break
            except OSError:
                continue
        addresses_b, names = _core.kallsyms_symbols(data)
        addresses = array.array("Q")
        addresses.frombytes(addresses_b)
        order = sorted(range(len(addresses)), key=addresses.__getitem__)
        self._starts = array.array("Q", [addresses[i] for i in order])
        self._names = [names[i] for i in order]
        self.usable = bool(self._starts) and self._starts[-1] != 0

    def lookup(self, address: int) -> tuple[str, int] | None:
        if not self.usable:
            return None
        i = bisect.bisect_right(self._starts, address) - 1
        return (self._names[i].decode(errors="replace"), address - self._starts[i]) if i >= 0 else None


class Symbolizer:
    """Frames for addresses; every distinct (mapping, address) is resolved once."""

    def __init__(self, kernel_build_id: str | None = None) -> None:
        self._kernel_build_id = kernel_build_id
        self._tables: dict[str, SymbolTable | None] = {}
        self._kernel: KernelSymbols | None = None
        self._kernel_frames: dict[int, Frame] = {}
        self._user_frames: dict[tuple[int, int], Frame] = {}

    def user_frame(self, mapping: Mapping | None, avma: int) -> Frame:
        key = (id(mapping), avma)
        frame = self._user_frames.get(key)
        if frame is None:
            frame = self._user_frames[key] = self._resolve_user(mapping, avma)
        return frame

    def _resolve_user(self, mapping: Mapping | None, avma: int) -> Frame:
        if mapping is None:
            return Frame(avma, None, 0, "[unknown]")
        address = avma - mapping.start + mapping.pgoff
        symbol = None
        if mapping.image is not None:
            table = self._tables.get(mapping.path)
            if mapping.path not in self._tables:
                table = self._tables[mapping.path] = SymbolTable.for_file(mapping.image.elf)
            symbol = table.lookup(avma - mapping.bias) if table else None
        if symbol is None:
            return Frame(address, None, 0, mapping.path)
        return Frame(address, symbol[0], symbol[1], mapping.path)

    def kernel_frame(self, ip: int) -> Frame:
        frame = self._kernel_frames.get(ip)
        if frame is None:
            if self._kernel is None:
                self._kernel = KernelSymbols(self._kernel_build_id)  # paid only with kernel frames
            found = self._kernel.lookup(ip)
            frame = self._kernel_frames[ip] = Frame(ip, found[0] if found else None, found[1] if found else 0,
                                                    "[kernel.kallsyms]")
        return frame


def unwind_recording(path: str, *, max_frames: int = DEFAULT_MAX_FRAMES, images: ImageCache | None = None
                     ) -> tuple[list[UnwoundSample], Statistics]:
    started = time.perf_counter()
    perf = PerfData.open(path)
    if not perf.has_user_stacks:
        raise PerfDataError(f"{path}: the recording has no user registers and stack dumps; {RECORD_HINT}")
    replayed = replay(perf, images)
    session, space_ids, samples, comms = replayed.session, replayed.space_ids, replayed.samples, replayed.comms
    cores = [space.to_core() for space in session.spaces]
    outcomes, starts_b, ips_b, modules_b, kinds_b, _flags, walk_ns = _core.unwind_samples(
        perf.native, space_ids.tobytes(), cores, max_frames
    )
    starts = array.array("I")
    starts.frombytes(starts_b)
    ips = array.array("Q")
    ips.frombytes(ips_b)
    modules = array.array("I")
    modules.frombytes(modules_b)
    symbolizer = Symbolizer(next((b.build_id for b in perf.build_ids if b.filename == "[kernel.kallsyms]"), None))
    stats = Statistics(samples=perf.sample_count, walk_ns=walk_ns, frames=len(ips))
    images = {id(m.image): m.image for space in session.spaces for m in space.mappings if m.image is not None}
    stats.tables = [t for t in (image.compact_statistics() for image in images.values()) if t]
    stats.replaced_modules = session.statistics.replaced_modules
    stats.missing_modules = session.statistics.missing_modules
    out: list[UnwoundSample] = []
    for index, sample in enumerate(samples):
        outcome = OUTCOME_NAMES.get(outcomes[index], "?")
        stats.outcomes[outcome] += 1
        kernel = tuple(symbolizer.kernel_frame(ip) for ip in sample.callchain
                       if ip < PERF_CONTEXT_MAX and ip >= 1 << 63)
        user: list[Frame] = []
        first, last = starts[index], starts[index + 1]
        if last > first:
            stats.unwound_samples += 1
            space = session.spaces[space_ids[index]]
            for k in range(first, last):
                avma = ips[k]
                # perf prints callers at return address - 1, except the frame a signal
                # interrupted, whose IP is the interrupted instruction itself
                if k > first and kinds_b[k] != FRAME_SIGNAL:
                    avma -= 1
                m = modules[k]
                user.append(symbolizer.user_frame(space.mappings[m] if m != NO_MODULE else None, avma))
        stats.frames_per_sample[last - first] += 1
        out.append(UnwoundSample(comms[index], sample.pid, sample.tid, sample.time, outcome, kernel, tuple(user)))
    out = demangle(out)
    stats.total_seconds = time.perf_counter() - started
    return out, stats


def demangle(samples: list[UnwoundSample]) -> list[UnwoundSample]:
    """C++ names demangled without parameters, as perf prints them, through one `c++filt -p`
    (binutils) run over the distinct mangled names; unchanged if c++filt is missing."""
    import dataclasses
    import shutil
    import subprocess

    mangled = sorted({f.symbol for s in samples for f in s.user if f.symbol and f.symbol.startswith("_Z")})
    if not mangled or shutil.which("c++filt") is None:
        return samples
    result = subprocess.run(["c++filt", "-p"], input="\n".join(mangled) + "\n", capture_output=True, text=True)
    names = result.stdout.splitlines()
    if result.returncode != 0 or len(names) != len(mangled):
        return samples
    plain = dict(zip(mangled, names))

    def fix(frame: Frame) -> Frame:
        return dataclasses.replace(frame, symbol=plain[frame.symbol]) if frame.symbol in plain else frame

    return [dataclasses.replace(s, user=tuple(fix(f) for f in s.user)) for s in samples]


def format_frame(frame: Frame) -> str:
    name = f"{frame.symbol}+0x{frame.offset:x}" if frame.symbol is not None else "[unknown]"
    return f"\t{frame.address:16x} {name} ({frame.dso})\n"


def render_perf_script(samples: list[UnwoundSample], out: TextIO) -> None:
    lines: dict[Frame, str] = {}  # frames repeat: format each once
    for sample in samples:
        seconds, nanoseconds = divmod(sample.time, 1_000_000_000)
        parts = [f"{sample.comm} {sample.tid:5d} {seconds:5d}.{nanoseconds // 1000:06d}: \n"]
        for frame in (*sample.kernel, *sample.user):
            line = lines.get(frame)
            if line is None:
                line = lines[frame] = format_frame(frame)
            parts.append(line)
        parts.append("\n")
        out.write("".join(parts))


def folded_stacks(samples: list[UnwoundSample]) -> Iterator[tuple[str, int]]:
    """FlameGraph's collapsed format: `comm;root;...;leaf count`, most frequent first. A stack
    that did not reach its end is rooted at `[truncated]` (or the failure's name) so that it is
    never drawn as a complete one."""
    counts: Counter[str] = Counter()
    for sample in samples:
        names = [f.symbol or f"[unknown {f.dso.rsplit('/', 1)[-1]}]" for f in (*sample.kernel, *sample.user)]
        root = [] if sample.outcome == "end" or not sample.user else [f"[{sample.outcome}]"]
        counts[";".join([sample.comm, *root, *reversed(names)])] += 1
    return iter(counts.most_common())
