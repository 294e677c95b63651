"""Time the walker on a recording's samples: the measurement behind `fastunwind bench` and
`benchmarks/bench_unwind.py`.

Only the unwinding is timed: `_core.unwind_samples` reports `walk_ns`, the time of its C loop over
the samples (register extraction, the walks and collecting the frames; the GIL released), so
decoding perf.data, replaying its events and building the unwind tables stay outside. Each pass
walks every sample again with the same address spaces, hence the same walk caches' cold start:
the first pass is what one `perf-script` run pays, the best pass is the warm cost.
"""

from __future__ import annotations

import array
from dataclasses import dataclass, field

from fastunwind import _core
from fastunwind.perf_data import PerfData
from fastunwind.perf_session import Replay
from fastunwind.walk import OUTCOMES


@dataclass
class BackendTiming:
    """One backend's passes over the same samples."""

    backend: str
    samples: int                       #: samples walked (those with user registers in an address space)
    frames: int                        #: frames of one pass
    passes_ns: list[int]               #: walk_ns of each pass
    outcomes: dict[str, int] = field(default_factory=dict)
    pcs: dict[int, tuple[int, ...]] = field(default_factory=dict)  #: sample index -> frame PCs

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


def time_backend(perf: PerfData, replayed: Replay, backend: str, repeat: int, max_frames: int = 127) -> BackendTiming:
    """`repeat` passes of the walker with `backend` over every sample of the replayed recording."""
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    space_ids = replayed.space_ids.tobytes()
    cores = [space.to_core(backend) for space in replayed.session.spaces]
    passes_ns = []
    result = None
    for _ in range(repeat):
        result = _core.unwind_samples(perf.native, space_ids, cores, max_frames)
        passes_ns.append(result[6])
    assert result is not None
    outcome_codes, starts_b, ips_b = result[0], result[1], result[2]
    starts, ips = array.array("I"), array.array("Q")
    starts.frombytes(starts_b)
    ips.frombytes(ips_b)
    timing = BackendTiming(backend, 0, len(ips), passes_ns)
    for index, code in enumerate(outcome_codes):
        if code >= len(OUTCOMES):  # skipped, or no user registers: not walked
            continue
        name = OUTCOMES[code]
        timing.samples += 1
        timing.outcomes[name] = timing.outcomes.get(name, 0) + 1
        timing.pcs[index] = tuple(ips[starts[index]:starts[index + 1]])
    return timing


def differing_samples(a: BackendTiming, b: BackendTiming) -> int:
    """Samples whose frame PCs differ between two timings of the same recording."""
    return sum(1 for index in a.pcs.keys() | b.pcs.keys() if a.pcs.get(index) != b.pcs.get(index))
