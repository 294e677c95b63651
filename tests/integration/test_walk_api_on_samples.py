"""The one-stack API (fastunwind.walk.unwind_stack) on real perf samples gives the frames the
batch unwinder gives (which also shows that the batch's walk cache, keyed by PC and kept across
samples, changes nothing: unwind_stack walks without one; on c-fp, runs of frame-pointer frames
are followed from the cache without the register buffers), and the current-thread walk ends at the
thread's start."""

from __future__ import annotations

import array

import pytest

from fastunwind import _core
from fastunwind.perf.data import PerfData
from fastunwind.perf.replay import replay
from fastunwind.walk import FRAME_KINDS, unwind_current_thread, unwind_stack

#: perf register name of each DWARF register 0..16
DWARF_FROM_PERF = ["ax", "dx", "cx", "bx", "si", "di", "bp", "sp", "r8", "r9", "r10", "r11", "r12", "r13",
                   "r14", "r15", "ip"]


@pytest.mark.parametrize("workload", ["c", "c-fp"])
def test_unwind_stack_matches_the_batch_unwinder(perf_recordings, workload):
    perf = PerfData.open(str(perf_recordings.get(workload).data_file))
    replayed = replay(perf)
    session, space_ids = replayed.session, replayed.space_ids
    samples = {index: (sample, session.spaces[space_ids[index]])
               for index, sample in enumerate(replayed.samples)}
    outcomes, starts_b, ips_b, _modules, kinds_b, *_ = _core.unwind_samples(perf.native, space_ids.tobytes(),
                                                         [s.to_core() for s in session.spaces], 127)
    starts, ips, kinds = array.array("I"), array.array("Q"), array.array("B")
    starts.frombytes(starts_b)
    ips.frombytes(ips_b)
    kinds.frombytes(kinds_b)
    compared = 0
    for index, (sample, space) in samples.items():
        regs = sample.regs
        if not regs:
            continue
        registers = {dwarf: regs[name] for dwarf, name in enumerate(DWARF_FROM_PERF) if name in regs}
        walk = unwind_stack(space, registers, sample.stack, regs["sp"], 127)
        assert [f.ip for f in walk.frames] == list(ips[starts[index]:starts[index + 1]])
        assert [f.kind for f in walk.frames] == [FRAME_KINDS[k] for k in kinds[starts[index]:starts[index + 1]]]
        assert walk.outcome == _core.WALK_OUTCOMES[outcomes[index]]
        compared += 1
    assert compared > 100
    if workload == "c-fp":  # runs of frame-pointer frames were walked
        assert any(kinds[k] == kinds[k + 1] == FRAME_KINDS.index("frame_pointer") for k in range(len(kinds) - 1))


def test_current_thread_walk_is_complete():
    walk = unwind_current_thread()
    assert walk.complete and walk.outcome == "end"
    assert walk.frames[0].kind == "first" and all(f.kind == "cfi" for f in walk.frames[1:])
    assert walk.frames[-1].mapping is not None and "python" in walk.frames[-1].mapping.path
