"""The one-stack API (fastunwind.walk.unwind_stack) on real perf samples gives the frames the
batch unwinder gives, and the current-thread walk ends at the thread's start."""

from __future__ import annotations

import array

from fastunwind import _core
from fastunwind.perf_data import Comm, Fork, Mmap, PerfData, Sample
from fastunwind.perf_session import PROT_EXEC, PerfSession
from fastunwind.walk import unwind_current_thread, unwind_stack

#: perf register name of each DWARF register 0..16
DWARF_FROM_PERF = ["ax", "dx", "cx", "bx", "si", "di", "bp", "sp", "r8", "r9", "r10", "r11", "r12", "r13",
                   "r14", "r15", "ip"]


def test_unwind_stack_matches_the_batch_unwinder(perf_recordings):
    perf = PerfData.open(str(perf_recordings.get("c").data_file))
    session = PerfSession()
    space_ids = array.array("I", [0xFFFFFFFF]) * perf.sample_count
    samples = {}
    for event in perf.events():
        if isinstance(event, Mmap):
            session.mmap(event.pid, event.start, event.length, event.pgoff, event.filename, None,
                         bool(event.prot & PROT_EXEC) if event.is_mmap2 else True)
        elif isinstance(event, Comm):
            session.comm(event.pid, event.tid, event.comm, event.exec)
        elif isinstance(event, Fork):
            session.fork(event.pid, event.ppid, event.tid)
        elif isinstance(event, Sample):
            space_ids[event.index] = session.space_index_for(event.pid)
            if len(samples) < 200:
                samples[event.index] = (event, session.spaces[space_ids[event.index]])
    outcomes, starts_b, ips_b, *_ = _core.unwind_samples(perf.native, space_ids.tobytes(),
                                                         [s.to_core() for s in session.spaces], 127)
    starts, ips = array.array("I"), array.array("Q")
    starts.frombytes(starts_b)
    ips.frombytes(ips_b)
    compared = 0
    for index, (sample, space) in samples.items():
        regs = sample.regs
        if not regs:
            continue
        registers = {dwarf: regs[name] for dwarf, name in enumerate(DWARF_FROM_PERF) if name in regs}
        walk = unwind_stack(space, registers, sample.stack, regs["sp"], 127)
        assert [f.ip for f in walk.frames] == list(ips[starts[index]:starts[index + 1]])
        compared += 1
    assert compared > 100


def test_current_thread_walk_is_complete():
    walk = unwind_current_thread()
    assert walk.complete and walk.outcome == "end"
    assert walk.frames[0].kind == "first" and all(f.kind == "cfi" for f in walk.frames[1:])
    assert walk.frames[-1].mapping is not None and "python" in walk.frames[-1].mapping.path
