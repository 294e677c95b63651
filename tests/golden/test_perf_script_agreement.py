"""`fastunwind perf-script` against `perf script` (perf 6.1, libunwind inside) on recordings made at
test time: user frames (DSO, address) sample by sample, every difference classified.

One class of difference is perf's, not ours: when the sampled stack is deeper than perf's stack
copy (8 KiB by default), perf's access_mem reads 0 for the next return address and prints it,
decremented, as `ffffffffffffffff [unknown] ([unknown])`; it does so for the copy's last 8 bytes
too (an off-by-one in its range check), where fastunwind reads one more real frame. fastunwind
ends such a stack with the outcome "truncated" and prints nothing past it. The test checks both halves: that the address is
mapped nowhere in the process, and that our outcome for those samples is "truncated" — unless the
frame we read from the copy's last 8 bytes is the stack's outermost one (perf's sentinel stands in
its place): the stack fitted the copy, and we end it there with "end". The LLVM oracles say which
code begins a stack (tests/support/llvm_text.py begins_a_stack): where llvm-dwarfdump's row leaves
the return address undefined (glibc's _start, clone3), or ld.so's _start, which has no CFI.

A failure keeps the recording (.build/failed-recordings/) and prints the samples concerned.

Another is perf printing no user frame at all for a sample that has user registers: its libunwind
glue prints nothing, not even the sampled IP, when libunwind cannot start a walk (seen on a new
thread's first instructions in clone3, whose stack is a few bytes deep). perf's own dump of the
sample's user registers (`perf script -F uregs`) is the second oracle: our first frame is at that
IP (the DSO-relative address we print keeps the IP's offset in its page).
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess

import pytest

from fastunwind.perf_script import render_perf_script, unwind_recording

from tests.support.llvm_text import begins_a_stack
from tests.support.paths import REPO_ROOT
from tests.support.perf_compare import compare, user_addresses
from tests.support.perf_script_format import Sample, parse

PERF_ZERO_RETURN_ADDRESS = 0xFFFFFFFFFFFFFFFF  # perf printed 0 - 1
#: workloads of the walker issue: the bundled C program, python3, hackbench (both modes), clang-14
WORKLOADS = ["c", "python", "hackbench-threads", "hackbench-processes", "compiler"]
AGREEMENT_TARGET = 0.99


def perf_read_past_its_stack_copy(ours: Sample | None, perf: Sample | None) -> bool:
    """perf's stack = ours, then the 0-1 frame(s) it read beyond its stack copy. perf treats the
    last 8 bytes of the copy as outside it too (its access_mem tests `addr + 8 >= end`), so its
    sentinel may also stand where our last frame is, read from those 8 bytes."""
    if ours is None or perf is None:
        return False
    mine, theirs = user_addresses(ours), user_addresses(perf)
    first_sentinel = next((i for i, (_dso, address) in enumerate(theirs) if address == PERF_ZERO_RETURN_ADDRESS),
                          None)
    return (first_sentinel is not None and first_sentinel in (len(mine) - 1, len(mine))
            and theirs[:first_sentinel] == mine[:first_sentinel]
            and all(address == PERF_ZERO_RETURN_ADDRESS for _dso, address in theirs[first_sentinel:]))


def ends_at_the_outermost_frame(ours: Sample, perf: Sample) -> bool:
    """Of a stack perf_read_past_its_stack_copy: perf's sentinel stands where our last frame is (we
    read it from the copy's last 8 bytes), and that frame begins the stack (begins_a_stack: the
    address perf-script prints for a caller is the file offset of its return address - 1)."""
    mine, theirs = user_addresses(ours), user_addresses(perf)
    if not mine or len(theirs) != len(mine) or theirs[-1][1] != PERF_ZERO_RETURN_ADDRESS:
        return False
    dso, address = mine[-1]
    return dso.startswith("/") and begins_a_stack(dso, address)


FAILED_RECORDINGS = REPO_ROOT / ".build" / "failed-recordings"


def keep_recording(workload: str, recording) -> Path:
    """Copy a recording whose check failed (and its perf script text) where the next run leaves it."""
    kept = FAILED_RECORDINGS / f"{workload}-{recording.data_file.stat().st_mtime_ns}"
    kept.mkdir(parents=True, exist_ok=True)
    for source in (recording.data_file, recording.script_file):
        if source is not None:
            shutil.copy2(source, kept / source.name)
    return kept


PAGE_SIZE = 4096


def perf_user_ips(data_file) -> dict[tuple[int, str], int]:
    """The user IP of every sample with user registers, by (tid, time), as perf dumps them."""
    dump = subprocess.run(["perf", "script", "-F", "tid,time,uregs", "-i", str(data_file)], capture_output=True,
                          text=True, check=True).stdout
    return {(int(tid), time): int(ip, 16)
            for tid, time, ip in re.findall(r"^\s*(\d+)\s+(\d+\.\d+):.*?\bIP:0x([0-9a-f]+)", dump, re.MULTILINE)}


def perf_printed_no_user_frame(comparison, user_ips: dict[tuple[int, str], int]) -> bool:
    """perf printed no user frame for a sample whose user registers it has, and ours starts at
    their IP."""
    ours, perf = comparison.ours, comparison.perf
    if ours is None or perf is None or perf.user_frames() or not ours.user_frames():
        return False
    ip = user_ips.get(comparison.key)
    return ip is not None and ip % PAGE_SIZE == ours.user_frames()[0].ip % PAGE_SIZE


@pytest.mark.parametrize("workload", WORKLOADS)
def test_user_frames_agree_with_perf_script(workload, perf_recordings, perf_script_samples, tmp_path):
    recording = perf_recordings.get(workload)
    unwound, stats = unwind_recording(str(recording.data_file))
    text = io.StringIO()
    render_perf_script(unwound, text)
    ours = parse(text.getvalue())
    report = compare(ours, perf_script_samples(workload))
    outcome_by_key = {(s.tid, f"{s.time // 1_000_000_000}.{s.time % 1_000_000_000 // 1000:06d}"): s.outcome
                      for s in unwound}
    past_copy = [c for c in report.differences() if perf_read_past_its_stack_copy(c.ours, c.perf)]
    wrong_outcome = [c for c in past_copy if outcome_by_key[c.key] != "truncated"
                     and not (outcome_by_key[c.key] == "end" and ends_at_the_outermost_frame(c.ours, c.perf))]
    if wrong_outcome:
        kept = keep_recording(workload, recording)
        pytest.fail(f"{len(wrong_outcome)} stacks perf read past its copy of without our outcome \"truncated\" "
                    f"(recording kept in {kept}):\n"
                    + "\n".join(f"outcome {outcome_by_key[c.key]}: {c.describe(context=len(c.ours.user_frames()))}"
                                 for c in wrong_outcome[:5]))
    user_ips = perf_user_ips(recording.data_file)
    no_user_frame = [c for c in report.differences() if perf_printed_no_user_frame(c, user_ips)]
    perf_wrong = past_copy + no_user_frame
    unexplained = [c for c in report.differences() if c not in perf_wrong]
    (tmp_path / f"{workload}-report.txt").write_text(report.describe(limit=len(report.comparisons)))
    total = len(report.comparisons)
    agreeing = report.identical + len(perf_wrong)
    print(f"{workload}: {report.identical}/{total} identical, {len(past_copy)} where perf read past its "
          f"stack copy, {len(no_user_frame)} where it printed no user frame, {len(unexplained)} other "
          f"differences; outcomes {dict(stats.outcomes)}")
    assert total > 100, f"{workload}: only {total} samples recorded"
    if agreeing < AGREEMENT_TARGET * total:
        pytest.fail(f"recording kept in {keep_recording(workload, recording)}:\n{report.describe(limit=15)}")


def test_perf_zero_frame_is_mapped_nowhere(perf_recordings):
    """The frame perf prints after reading past its copy is no code: no mapping of the process
    contains 0xffffffffffffffff (it is 0 - 1)."""
    from fastunwind.perf.data import Mmap, PerfData

    recording = perf_recordings.get("c")
    perf = PerfData.open(str(recording.data_file))
    mappings = [e for e in perf.events() if isinstance(e, Mmap)]
    assert mappings
    assert not any(m.start <= PERF_ZERO_RETURN_ADDRESS < m.start + m.length for m in mappings)
