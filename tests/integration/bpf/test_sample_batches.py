"""`record --bpf`'s samples travel in per-CPU batches (bpf_layout.h fu_bpf_batch): each CPU's samples
are appended to a map of its own and sent through the ring buffer a batch at a time, and what is
left in the batches when the recording ends is taken by the recorder once the events are closed.
What must hold: every sample the program took reaches the profile once (the profile's samples, by
outcome, are the program's own counts of its runs), the ones still in the batches at the end among
them, and the log is in time order though the batches arrive CPU by CPU.

Skipped as test_record_bpf.py is."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from fastunwind import _core
from fastunwind.bpf import BpfProfile, BpfRecorder
from scripts import record_workloads
from tests.integration.bpf.test_record_bpf import PROBLEM, settings  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

#: a busy Python for about a second: its stacks are ~200 bytes, so at 99 Hz its ~100 samples fill
#: less than one batch
SPINNER = [sys.executable, "-c", "import time\nend = time.time() + 1\nwhile time.time() < end: pass"]


def assert_every_sample_once(profile: BpfProfile) -> None:
    """The profile holds each sample the program took, once: by outcome, the program's counts."""
    by_outcome: Counter[str] = Counter()
    for stack, n in profile.stacks.items():
        by_outcome[stack.outcome] += n
    stats = profile.statistics()
    assert stats["samples_dropped"] == 0 and stats["samples_unlogged"] == 0, stats
    assert profile.samples == profile.counters["samples"], stats
    assert dict(by_outcome) == profile.outcomes, (by_outcome, profile.outcomes)
    times = [t for t, *_ in profile.sample_log()]
    assert len(times) == profile.samples and times == sorted(times)


def test_the_samples_left_in_the_batches_reach_the_profile() -> None:
    recorder = BpfRecorder(frequency=99)
    child = recorder.launch(SPINNER, stdout=subprocess.DEVNULL)
    taken_before_the_end: list[int] = []

    def until() -> bool:
        if child.poll() is None:
            return False
        taken_before_the_end.append(recorder._session.logged)  # sent through the ring buffer
        return True

    try:
        profile = recorder.run(until)
    finally:
        child.wait()
    assert profile.samples >= 50, profile.statistics()
    assert taken_before_the_end[0] < profile.samples  # the rest were in the batches
    assert_every_sample_once(profile)


#: the most samples a batch holds (of no user frame: 56 bytes each)
BATCH_SAMPLES = 579


def test_sample_counts_are_the_programs_runs_and_full_batches_arrive_while_recording(
        settings: record_workloads.Settings) -> None:
    # 999 Hz on the C workload: ~1500 samples, batches sent whole while it runs
    recorder = BpfRecorder(frequency=999)
    child = recorder.launch(record_workloads.WORKLOADS["c"].command(settings), stdout=subprocess.DEVNULL)
    taken_before_the_end: list[int] = []

    def until() -> bool:
        if child.poll() is None:
            return False
        taken_before_the_end.append(recorder._session.logged)
        return True

    try:
        profile = recorder.run(until)
    finally:
        child.wait()
    assert profile.samples >= BATCH_SAMPLES, profile.statistics()
    assert profile.counters["walked_samples"] >= 0.9 * profile.samples, profile.statistics()
    assert_every_sample_once(profile)
    # the recorder takes the batches sent as it goes, not only at the end: at most a batch a CPU is
    # left (told apart where the workload had the CPU for more samples than that)
    left_at_most = BATCH_SAMPLES * (os.cpu_count() or 1)
    if profile.samples > 2 * left_at_most:
        assert taken_before_the_end[0] >= profile.samples - left_at_most, (taken_before_the_end, profile.samples)


def test_a_stopped_session_takes_its_samples_once_and_attaches_no_more() -> None:
    session = _core.BpfSession(1024)
    try:
        session.stop()
        session.stop()
        assert session.logged == 0
        with pytest.raises(ValueError, match="sampling has ended"):
            session.attach_thread(99, os.getpid())
    finally:
        session.close()
