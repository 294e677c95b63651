"""Walk a batch of perf samples: every sample of a recording (or of a window of a stream) in one C
call (native/core/perf_walk.c; the GIL released, spread over the CPUs), with the address spaces the
replay gave them (perf/replay.py). The one home of the `_core.unwind_samples` and
`_core.callchain_samples` calls: perf/script.py and perf/bench.py walk through `walk_samples`.

A recording made with `--call-graph dwarf` has user registers and stack dumps, which the walker
unwinds. Without them the frames are each sample's callchain as the kernel recorded it
(`perf record -g`, `--call-graph fp` or `lbr`), or its sampled IP alone (`recording_source`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fastunwind import _core
from fastunwind.perf.data import SAMPLE_CALLCHAIN, PerfData
from fastunwind.typecheck import NamedTuple

#: perf's default callchain depth (kernel.perf_event_max_stack)
DEFAULT_MAX_FRAMES = _core.PERF_MAX_FRAMES
#: what the frames of a recording come from (recording_source)
SOURCE_DWARF, SOURCE_CALLCHAIN, SOURCE_IP = "dwarf", "callchain", "ip"


class UnwindBatch(NamedTuple):
    """What one batch walk returns, by name (one object per batch, none per sample): per sample an
    outcome code (u8: walk.h fu_walk_outcome, or a SAMPLE_* code of perf_walk.c) and where its frames
    start (u32, one more than the samples), per frame its avma (u64), module index (u32), kind and
    flags (u8: walk.h fu_frame_kind, FU_FRAME_*), and the time of the C loop in ns."""

    outcomes: bytes
    frame_starts: bytes
    ips: bytes
    modules: bytes
    kinds: bytes
    flags: bytes
    walk_ns: int


def recording_source(perf: PerfData) -> str:
    """Where a recording's frames come from: its user stacks (every sampling event has user
    registers and stack dumps: --call-graph dwarf), the kernel's callchains (perf record -g,
    --call-graph fp or lbr), or the sampled IPs alone (no call graph)."""
    if perf.has_user_stacks:
        return SOURCE_DWARF
    sampling = [attr for attr in perf.attrs if attr.is_sampling] or perf.attrs
    if any(attr.sample_type & SAMPLE_CALLCHAIN for attr in sampling):
        return SOURCE_CALLCHAIN
    return SOURCE_IP


def walk_samples(perf: _core.PerfData, space_ids: bytes, spaces: Sequence[_core.AddressSpace],
                 max_frames: int = DEFAULT_MAX_FRAMES, *, source: str = SOURCE_DWARF,
                 threads: int = 0) -> UnwindBatch:
    """The frames of every sample of `perf` (a recording or a stream's window): unwound from its user
    stack with the address space `spaces[space_ids[i]]` (u32 ids) when `source` is SOURCE_DWARF, else
    its callchain (or IP). `threads`: walker threads (0: one per CPU, or FASTUNWIND_THREADS)."""
    if source == SOURCE_DWARF:
        return UnwindBatch._make(_core.unwind_samples(perf, space_ids, spaces, max_frames, threads))
    return UnwindBatch._make(_core.callchain_samples(perf, space_ids, spaces, max_frames))
