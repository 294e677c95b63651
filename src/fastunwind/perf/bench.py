"""Time the walker on a recording's samples: the measurement behind `fastunwind bench` and
`benchmarks/bench_unwind.py`.

Only the unwinding is timed: `perf.walk.walk_samples` reports `walk_ns`, the time of its C loop over
the samples (register extraction, the walks and collecting the frames; the GIL released), so
decoding perf.data, replaying its events and building the unwind tables stay outside. Each pass
walks every sample again with the same address spaces, whose walk caches persist across calls
(as the peers' caches do): the first pass starts them empty and pays what one `perf-script` run
pays, the best pass is the warm cost. With `evict=True` the first pass starts from CPU caches
holding none of the samples (evict_caches), whatever ran before it.
"""

from __future__ import annotations

import array
import ctypes
import functools
from collections import Counter
from dataclasses import dataclass

from fastunwind.perf.data import PerfData
from fastunwind.perf.replay import Replay
from fastunwind.perf.walk import DEFAULT_MAX_FRAMES, walk_samples
from fastunwind.walk import OUTCOMES


@dataclass
class BackendTiming:
    """One backend's passes over the same samples, and what its last pass found (unwind_samples'
    arrays: an outcome code per sample, where each sample's frames start, the frame PCs)."""

    backend: str
    passes_ns: list[int]               #: walk_ns of each pass
    outcome_codes: bytes
    starts: array.array[int]
    ips: array.array[int]

    @property
    def frames(self) -> int:
        """Frames of one pass."""
        return len(self.ips)

    @functools.cached_property
    def outcomes(self) -> dict[str, int]:
        """Walked samples (those with user registers in an address space) by outcome."""
        counts = Counter(self.outcome_codes)
        return {OUTCOMES[code]: n for code, n in counts.items() if code < len(OUTCOMES)}

    @property
    def samples(self) -> int:
        return sum(self.outcomes.values())

    @functools.cached_property
    def pcs(self) -> dict[int, tuple[int, ...]]:
        """Sample index -> its frame PCs, for the walked samples (a Python object per sample: for
        reports that compare samples one by one)."""
        return {index: tuple(self.ips[self.starts[index]:self.starts[index + 1]])
                for index, code in enumerate(self.outcome_codes) if code < len(OUTCOMES)}

    @property
    def total_ns(self) -> int:
        return sum(self.passes_ns)

    def ns_per_frame(self, which: str = "all") -> float:
        """`all` passes, the `first` or the `best` one, per frame of a pass."""
        if not self.frames:
            return 0.0
        if which == "first":
            return self.passes_ns[0] / self.frames
        if which == "best":
            return min(self.passes_ns) / self.frames
        return self.total_ns / (self.frames * len(self.passes_ns))


#: Memory written by evict_caches, as the peers' harnesses do before their first pass
#: (bench_evict_caches in benchmarks/peers/samples.c). Every first pass then starts with the samples
#: paged in but out of the CPU caches: a cold unwinder on cold data, as in one `perf script` run.
#: 256 MiB: this VM reports a 32 MiB L3, yet after 64 MiB hackbench's table first pass still found
#: some of its lines (42 ns/frame against 45-48 after 128 MiB to 1 GiB, medians of 8-10 runs).
EVICT_BYTES = 256 << 20
#: ... written in pieces of this size: one memset of it all is above glibc's non-temporal threshold
#: (about 3/4 of the L3), so it streams past the caches and leaves what was in them there (after
#: one 64 MiB memset that first pass took 20-45 ns/frame, depending on what had run before).
EVICT_PIECE_BYTES = 64 << 10


@functools.cache
def _evict_buffer() -> bytearray:
    return bytearray(EVICT_BYTES)


def evict_caches() -> None:
    """Write EVICT_BYTES of other memory, so that the CPU caches hold none of the samples."""
    start = ctypes.addressof(ctypes.c_char.from_buffer(_evict_buffer()))
    for offset in range(0, EVICT_BYTES, EVICT_PIECE_BYTES):
        ctypes.memset(start + offset, 1, EVICT_PIECE_BYTES)


def time_backend(perf: PerfData, replayed: Replay, backend: str, repeat: int, max_frames: int = DEFAULT_MAX_FRAMES, *,
                 evict: bool = False) -> BackendTiming:
    """`repeat` passes of the walker with `backend` over every sample of the replayed recording;
    `evict`: evict_caches() right before the first."""
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    space_ids = replayed.space_ids.tobytes()
    cores = [space.to_core(backend) for space in replayed.session.spaces]
    if evict:
        evict_caches()
    passes_ns = []
    result = None
    for _ in range(repeat):
        # one thread: the walker's own speed per frame (perf-script walks a window on every CPU)
        result = walk_samples(perf.native, space_ids, cores, max_frames, threads=1)
        passes_ns.append(result.walk_ns)
    assert result is not None
    starts, ips = array.array("I"), array.array("Q")
    starts.frombytes(result.frame_starts)
    ips.frombytes(result.ips)
    return BackendTiming(backend, passes_ns, result.outcomes, starts, ips)


def differing_samples(a: BackendTiming, b: BackendTiming) -> int:
    """Samples whose frame PCs differ between two timings of the same recording (compared whole
    first: the common case, identical frames, costs no Python per sample)."""
    if a.starts == b.starts and a.ips == b.ips and a.outcome_codes == b.outcome_codes:
        return 0
    return sum(1 for index in a.pcs.keys() | b.pcs.keys() if a.pcs.get(index) != b.pcs.get(index))
