"""`fastunwind record --bpf`: stacks unwound in the kernel, against perf's DWARF recording of the same
program unwound offline, on the project's workloads (scripts/record_workloads.py), and on hostile
stacks. Skipped, with the kernel's reason, where the BPF unwinder cannot be loaded (not root, no
CONFIG_BPF_SYSCALL or BTF).

The statistic for "the same profile", on the folded stacks each tool writes (user frames from the
outermost, then the kernel frames of a sample taken in the kernel: such a sample ends in the kernel
on both sides, never in the user PC at its kernel entry on one side only): the two hottest complete
stacks of each run are among the three hottest of the other, and every leaf function holding at
least 5% of either run's samples has shares p1, p2 that a two-proportion z-test does not separate at
4 sigma:
|p1 - p2| <= 4 * sqrt(p (1 - p) (1/n1 + 1/n2)), p the pooled share (a 4-sigma bound leaves one false
alarm in ~16,000 comparisons of equal distributions).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest

from fastunwind import _core
from fastunwind.bpf import BpfProfile, BpfRecorder, BpfStack
from fastunwind.commands.record_bpf import FORMATS, write_profile
from fastunwind.errors import BpfError
from scripts import record_workloads, synth_unwind
from tests.integration.test_perf_script_formats import _root_is_outcome, check_gecko, check_speedscope
from tests.support.paths import CORPUS_SOURCES, REPO_ROOT

FREQUENCY = 499


def _bpf_problem() -> str | None:
    if os.geteuid() != 0:
        return "the BPF unwinder needs root (CAP_BPF and CAP_PERFMON)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux): CO-RE cannot relocate the program"
    try:
        _core.BpfSession(1024).close()
    except BpfError as error:
        return f"the kernel refused the BPF unwinder: {error}"
    return None


PROBLEM = _bpf_problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> record_workloads.Settings:
    s = record_workloads.Settings(seconds=1.5, frequency=FREQUENCY,
                                  build_dir=tmp_path_factory.mktemp("bpf-workloads"))
    record_workloads.build(s)
    return s


def record_command(command: list[str], timing: bool = False) -> BpfProfile:
    recorder = BpfRecorder(frequency=FREQUENCY, timing=timing)
    child = recorder.launch(command, stdout=subprocess.DEVNULL)
    try:
        return recorder.run(lambda: child.poll() is not None)
    finally:
        child.wait()


def user_folded(profile: BpfProfile) -> Counter[str]:
    """Folded user stacks, kernel frames left out: a sample taken in the kernel ends in the user PC at
    its kernel entry. For checks of the user walk alone: perf-script's folded stacks, as
    BpfProfile.folded's, end with the kernel frames of such a sample."""
    out: Counter[str] = Counter()
    for stack, samples in profile.stacks.items():
        if stack.outcome != "kernel_only":
            kernel_free = stack._replace(kernel=())
            out[";".join([profile.comm(stack.pid, stack.space_pid), *profile.frames(kernel_free)])] += samples
    return out


def perf_record(data: Path) -> list[str]:
    """The command line of perf's DWARF recording into `data`, the recorded command to follow."""
    return ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(FREQUENCY), "--call-graph", "dwarf", "-o", str(data),
            "--"]


def perf_folded(command: list[str], tmp_path: Path) -> Counter[str]:
    data = tmp_path / "perf.data"
    subprocess.run([*perf_record(data), *command], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return folded_recording(data)


def folded_recording(data: Path) -> Counter[str]:
    text = subprocess.run([sys.executable, "-m", "fastunwind", "perf-script", "-i", str(data), "--format", "folded"],
                          check=True, capture_output=True, text=True).stdout
    out: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        out[stack] += int(count)
    return out


OUTCOME_MARK = re.compile(r"\[[a-z_]+\]")


def complete(folded: Counter[str]) -> Counter[str]:
    """The stacks without an outcome after the command name ("comm;[truncated];..." is not complete)."""
    return Counter({s: n for s, n in folded.items()
                    if not (OUTCOME_MARK.fullmatch(s.split(";")[1]) and s.split(";")[1] != "[unknown]")})


def leaves(folded: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for stack, n in folded.items():
        out[stack.rsplit(";", 1)[-1]] += n
    return out


def assert_same_profile(bpf: Counter[str], perf: Counter[str]) -> None:
    top_bpf = [s for s, _ in complete(bpf).most_common(3)]
    top_perf = [s for s, _ in complete(perf).most_common(3)]
    assert set(top_bpf[:2]) <= set(top_perf) and set(top_perf[:2]) <= set(top_bpf), (top_bpf, top_perf)
    bpf_leaves, perf_leaves = leaves(bpf), leaves(perf)
    n1, n2 = sum(bpf_leaves.values()), sum(perf_leaves.values())
    for leaf in set(bpf_leaves) | set(perf_leaves):
        p1, p2 = bpf_leaves[leaf] / n1, perf_leaves[leaf] / n2
        if max(p1, p2) < 0.05:
            continue
        pooled = (bpf_leaves[leaf] + perf_leaves[leaf]) / (n1 + n2)
        bound = 4 * math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
        assert abs(p1 - p2) <= bound, f"{leaf}: {p1:.3f} of {n1} BPF samples, {p2:.3f} of {n2} perf samples"


@pytest.fixture(scope="module")
def c_run(settings: record_workloads.Settings, tmp_path_factory: pytest.TempPathFactory) -> tuple[BpfProfile, Path]:
    """One run of the C workload recorded by `record --bpf` and by perf's DWARF recording at once (the
    BPF recorder follows `perf record -- cworkload`): the workload is driven by time, so two separate
    runs on a loaded machine spend different shares in its phases, where one run gives both profilers
    the same phases."""
    data = tmp_path_factory.mktemp("c-run") / "perf.data"
    return record_command([*perf_record(data), *record_workloads.WORKLOADS["c"].command(settings)]), data


@pytest.fixture(scope="module")
def c_profile(c_run: tuple[BpfProfile, Path]) -> BpfProfile:
    return c_run[0]


def workload_folded(profile: BpfProfile, comm: str) -> Counter[str]:
    """The folded stacks of the processes named `comm`, as `record --bpf --format folded` writes them:
    kernel frames last, as perf-script's."""
    return Counter({s: n for s, n in profile.folded().items() if s.startswith(f"{comm};")})


@pytest.fixture(scope="module")
def c_perf_folded(c_run: tuple[BpfProfile, Path]) -> Counter[str]:
    return folded_recording(c_run[1])


def test_the_c_workload_matches_perf_dwarf_unwound_offline(c_run: tuple[BpfProfile, Path],
                                                           c_perf_folded: Counter[str]) -> None:
    profile, _ = c_run
    assert_same_profile(workload_folded(profile, "cworkload"), c_perf_folded)
    # its phases that the BPF walk cannot finish end with an outcome, never as complete stacks
    folded = user_folded(profile)
    assert all(not s.startswith("cworkload;recurse_deep_nontail") for s in folded)
    assert profile.outcomes.get("frame_limit", 0) > 0  # 200 frames deep: past BPF_MAX_FRAMES
    # the DRAP frames (saves relative to rbp, a dereferenced CFA) are compact rules the kernel applies
    drap = Counter({s: n for s, n in folded.items() if "drap_realigned_vla" in s})
    through = sum(n for s, n in complete(drap).items() if ";main;phase_drap_realign;" in s)
    assert drap and through >= 0.95 * sum(drap.values()), drap


def test_the_comparison_tells_apart_a_profile_that_lost_a_leaf_frame(c_run: tuple[BpfProfile, Path],
                                                                     c_perf_folded: Counter[str]) -> None:
    """The statistic is no formality: every leaf function it compares (5% of perf's samples), its
    samples given to its caller in the BPF profile (as a walk that dropped the leaf's frames would
    report them), makes the recording that matches perf's (the test above) differ from it."""
    ours = workload_folded(c_run[0], "cworkload")
    perf_leaves = leaves(c_perf_folded)
    compared = [leaf for leaf, n in perf_leaves.items() if n >= 0.05 * sum(perf_leaves.values())]

    def without_leaf(leaf: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for stack, n in ours.items():
            frames = stack.split(";")
            while len(frames) > 1 and frames[-1] == leaf:
                frames.pop()
            out[";".join(frames)] += n
        return out

    def told_apart(bpf: Counter[str]) -> bool:
        try:
            assert_same_profile(bpf, c_perf_folded)
        except AssertionError:
            return True
        return False

    assert compared, perf_leaves
    assert [leaf for leaf in compared if not told_apart(without_leaf(leaf))] == []


@pytest.mark.parametrize("name", ["compiler", "hackbench-processes"])
def test_user_stacks_are_complete(settings: record_workloads.Settings, name: str) -> None:
    workload = record_workloads.WORKLOADS[name]
    if record_workloads.missing_tools(workload):
        pytest.skip(f"{name} needs {record_workloads.missing_tools(workload)}")
    # the first recording builds the modules' compact tables (the test session's cache starts empty:
    # seconds for libLLVM-14, while its frames have no table); the second finds them cached, as
    # every recording after a module's first does
    record_command(workload.command(settings))
    profile = record_command(workload.command(settings))
    user, complete_user = profile.user_samples()
    # the first samples of a process may still come before its mappings are loaded (no_process):
    # they count against the target
    assert user >= 50, profile.statistics()
    assert complete_user >= 0.95 * user, profile.statistics()
    if name == "compiler":
        # a compiler's outer frames stay from sample to sample: most frames' rules come from the
        # CPU's previous walk (the memo), and the stacks above are complete with them
        stats = profile.statistics()
        memo, frames = stats["memo_frames"], stats["frames"]
        assert isinstance(memo, int) and isinstance(frames, int) and memo >= 0.3 * frames, stats


def test_the_program_times_its_walks_only_when_asked(settings: record_workloads.Settings) -> None:
    """The clock reads around the walk and the sample (bench_bpf's figures) are made only with
    `timing`: without, the time counters stay at zero and the statistics give no time; with, every
    walked sample is timed, the walk within the sample."""
    command = record_workloads.WORKLOADS["compiler"].command(settings)
    untimed = record_command(command)
    assert untimed.counters["walked_samples"] >= 50, untimed.statistics()
    assert untimed.counters["walk_ns"] == untimed.counters["sample_ns"] == 0
    stats = untimed.statistics()
    assert stats["walk_ns"] is None and stats["sample_ns"] is None and stats["fit_walk_ns_per_frame"] is None
    timed = record_command(command, timing=True)
    walk, sample = timed.counters["walk_ns"], timed.counters["sample_ns"]
    assert timed.counters["walked_samples"] >= 50 and 0 < walk < sample, timed.statistics()
    assert timed.statistics()["fit_walk_ns_per_frame"] is not None


def test_stacks_through_drap_frames_are_complete(tmp_path: Path) -> None:
    """The corpus's realigning program (workloads/corpus/realigned.c, gcc -O2 -mstackrealign): its
    DRAP frames, a CFA dereferenced through rbp and callee-saved registers relative to rbp (r13, the
    nested function's DRAP register, relative to the CFA), are walked in the kernel to _start."""
    program = tmp_path / "c-realigned"
    subprocess.run(["gcc", "-O2", "-mstackrealign", str(CORPUS_SOURCES / "realigned.c"), "-o", str(program)],
                   check=True)
    record_command([str(program), "0.2"])  # the first run builds the module's compact table
    profile = record_command([str(program), "1.5"])
    folded = Counter({s: n for s, n in user_folded(profile).items() if s.startswith("c-realigned;")})
    total = sum(folded.values())
    through = Counter({s: n for s, n in folded.items() if ";realigned;" in s or ";inner." in s})
    assert total >= 50 and sum(through.values()) >= 0.3 * total, (profile.statistics(), folded.most_common(5))
    assert sum(complete(through).values()) >= 0.95 * sum(through.values()), through.most_common(5)
    assert sum(complete(folded).values()) >= 0.95 * total, folded.most_common(5)


HOSTILE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
/* Points rsp and rbp into random bytes and spins in code without CFI: every walk starts on a garbage stack. */
int main(int argc, char **argv) {
    static uint64_t junk[1 << 14];
    srand((unsigned)time(NULL));
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
        junk[i] = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 10) ^ (uint64_t)rand();
    long rounds = atol(argv[1]);
    for (long r = 0; r < rounds; r++) {
        uint64_t *stack = &junk[(r * 977) % ((1 << 14) - 64)];
        __asm__ volatile(
            "mov %%rsp, %%r12\n\tmov %%rbp, %%r13\n\t"
            "mov %0, %%rsp\n\tmov 8(%0), %%rbp\n\t"
            "mov $200000, %%ecx\n1:\n\tdec %%ecx\n\tjnz 1b\n\t"
            "mov %%r12, %%rsp\n\tmov %%r13, %%rbp\n\t"
            : : "r"(stack) : "rcx", "r12", "r13", "memory");
    }
    return 0;
}
"""


def test_hostile_stacks_end_with_an_outcome(tmp_path: Path) -> None:
    source = tmp_path / "hostile.c"
    source.write_text(HOSTILE)
    program = tmp_path / "hostile"
    subprocess.run(["gcc", "-O1", "-fno-asynchronous-unwind-tables", "-o", str(program), str(source)], check=True)
    profile = record_command([str(program), "20000"])
    mine = {s: n for s, n in profile.stacks.items() if profile.comm(s.pid, s.space_pid) == "hostile"}
    assert sum(mine.values()) >= 20, profile.statistics()
    # the walks started on random bytes end with an outcome; the only complete stacks are those
    # sampled outside the spin (filling the junk), which reach _start
    assert sum(n for s, n in mine.items() if s.outcome in ("no_unwind_info", "unreadable")) >= 10, mine
    assert all(profile.frames(s)[0] == "_start" for s in mine if s.outcome == "end"), mine


#: A caller whose CFA is computed from r12 (`.cfi_def_cfa_register r12`) above a leaf that saves r12,
#: zeroes it and spins: past the leaf, r12 is known only from the leaf's save slot.
CFA_FROM_R12 = r"""
#include <stdlib.h>
void spin_saving_r12(long n);
long through_r12(long n);
__asm__(".text\n"
        ".globl spin_saving_r12\n.type spin_saving_r12,@function\nspin_saving_r12:\n.cfi_startproc\n"
        "  push %r12\n  .cfi_def_cfa_offset 16\n  .cfi_offset %r12, -16\n"
        "  xor %r12d, %r12d\n"
        "1: add $1, %r12\n  cmp %rdi, %r12\n  jb 1b\n"
        "  pop %r12\n  .cfi_def_cfa_offset 8\n  .cfi_restore %r12\n  ret\n.cfi_endproc\n"
        ".size spin_saving_r12, .-spin_saving_r12\n"
        ".globl through_r12\n.type through_r12,@function\nthrough_r12:\n.cfi_startproc\n"
        "  push %r12\n  .cfi_def_cfa_offset 16\n  .cfi_offset %r12, -16\n"
        "  mov %rsp, %r12\n  .cfi_def_cfa_register %r12\n"
        "  sub $64, %rsp\n  call spin_saving_r12\n"
        "  mov %r12, %rsp\n  .cfi_def_cfa_register %rsp\n"
        "  pop %r12\n  .cfi_def_cfa_offset 8\n  .cfi_restore %r12\n  xor %eax, %eax\n  ret\n.cfi_endproc\n"
        ".size through_r12, .-through_r12\n");
int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < rounds; i++)
        through_r12(1000000);
    return 0;
}
"""


def test_a_cfa_from_a_register_a_callee_saved_unwinds_like_perf(tmp_path: Path) -> None:
    source = tmp_path / "cfa_r12.c"
    source.write_text(CFA_FROM_R12)
    program = tmp_path / "cfa_r12"
    subprocess.run(["gcc", "-O1", "-o", str(program), str(source)], check=True)
    command = [str(program), "1500"]
    profile = record_command(command)
    mine = {s: n for s, n in profile.stacks.items() if profile.comm(s.pid, s.space_pid) == "cfa_r12"}
    # (not `no_process`: sampled before the exec was seen and the program's tables loaded)
    spinning = {s: n for s, n in mine.items() if s.user and s.outcome != "no_process" and
                profile.frames(s._replace(kernel=()))[-1:] == ["spin_saving_r12"]}
    total = sum(spinning.values())
    assert total >= 50, profile.statistics()
    # r12 comes back from the leaf's save slot: the walk goes on through the caller to _start
    complete_samples = sum(n for s, n in spinning.items() if s.outcome == "end")
    assert complete_samples >= 0.95 * total, {s.outcome: n for s, n in spinning.items()}
    # the same frames as perf's DWARF recording unwound offline (its hottest stack)
    hottest = complete(workload_folded(profile, "cfa_r12")).most_common(1)[0][0]
    assert hottest == complete(perf_folded(command, tmp_path)).most_common(1)[0][0]
    assert hottest.endswith(";main;through_r12;spin_saving_r12")


def record_synth(command: list[str], synth: str) -> tuple[BpfProfile, dict[BpfStack, int]]:
    recorder = BpfRecorder(frequency=FREQUENCY, synth=synth)
    child = recorder.launch(command, stdout=subprocess.DEVNULL)
    try:
        profile = recorder.run(lambda: child.poll() is not None)
    finally:
        child.wait()
    name = Path(command[0]).name[:15]
    return profile, {s: n for s, n in profile.stacks.items() if profile.comm(s.pid, s.space_pid) == name and s.user}


def test_rows_derived_from_the_code_unwind_code_without_cfi_in_the_kernel(tmp_path: Path) -> None:
    """The seeded program of `make synth-unwind`: its loops in code without CFI (spin_no_cfi,
    spin_c) end without unwind information with the CFI alone and reach _start through synthesized
    rows with --synth missing; with repair (corrected rows for its wrong CFI too) every loop does.
    A short recording in each mode first builds and caches its tables (until a module's table is
    built, its code is walked by frame pointer)."""
    program = synth_unwind.build_seeded(tmp_path)
    command = synth_unwind.seeded_command(program, 1.5)
    without_cfi = {"spin_no_cfi", "spin_c"}
    for synth in ("off", "missing", "repair"):
        record_synth(synth_unwind.seeded_command(program, 0.1), synth)
        profile, mine = record_synth(command, synth)
        walked = {s: n for s, n in mine.items() if s.outcome != "no_process"}  # before the exec was seen
        there = {s: n for s, n in walked.items() if profile.frames(s._replace(kernel=()))[-1] in without_cfi}
        assert sum(walked.values()) >= 100 and sum(there.values()) >= 20, profile.statistics()
        complete_there = sum(n for s, n in there.items() if s.outcome == "end") / sum(there.values())
        complete_all = sum(n for s, n in walked.items() if s.outcome == "end") / sum(walked.values())
        expected = {"off": complete_there == 0, "missing": complete_there >= 0.9, "repair": complete_all >= 0.95}
        assert expected[synth], (synth, complete_there, complete_all, profile.outcomes)
        # a stack is complete only from _start, whatever rows it went through
        assert all(profile.frames(s)[0] == "_start" for s in mine if s.outcome == "end"), synth
        derived = profile.statistics()["derived_frames"]
        assert (derived == 0) if synth == "off" else (derived > 0), (synth, derived)


def bpf_fds() -> int:
    """This process's BPF objects (programs, maps, links, BTF) and perf events."""
    links = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
             if os.path.exists(f"/proc/self/fd/{fd}")]
    return sum(link.startswith(("anon_inode:bpf", "anon_inode:[perf_event]", "anon_inode:btf")) for link in links)


def test_the_session_releases_its_programs_maps_and_events() -> None:
    before = bpf_fds()
    recorder = BpfRecorder(frequency=FREQUENCY)
    recorder.add(os.getpid())
    assert bpf_fds() > before
    deadline = time.monotonic() + 0.5
    recorder.run(lambda: time.monotonic() > deadline)
    assert bpf_fds() == before


def bpf_map_ids(name: str) -> set[int]:
    """The ids of the kernel's BPF maps named `name`."""
    shown = json.loads(subprocess.run(["bpftool", "map", "show", "-j"], capture_output=True, text=True,
                                      check=True).stdout)
    return {m["id"] for m in shown if m.get("name") == name}


def test_the_per_cpu_rule_caches_go_with_the_session() -> None:
    """Each possible CPU's rule cache is maps the session creates after loading (bpf_session.c): held by
    the outer map alone, so the kernel frees them with it."""
    before = bpf_map_ids("fu_rule_cache")
    recorder = BpfRecorder(frequency=FREQUENCY)
    recorder.add(os.getpid())
    parts = bpf_map_ids("fu_rule_cache") - before
    assert len(parts) >= 2 * (os.cpu_count() or 1), parts
    deadline = time.monotonic() + 0.3
    recorder.run(lambda: time.monotonic() > deadline)
    freed = time.monotonic() + 30  # the kernel frees a map after an RCU grace period
    while bpf_map_ids("fu_rule_cache") & parts and time.monotonic() < freed:
        time.sleep(0.1)
    assert not bpf_map_ids("fu_rule_cache") & parts


def test_ctrl_c_detaches_and_writes_the_profile(tmp_path: Path) -> None:
    out = tmp_path / "out.folded"
    spinner = [sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass"]
    recorder = subprocess.Popen([sys.executable, "-m", "fastunwind", "record", "--bpf", "-F", str(FREQUENCY),
                                 "-o", str(out), "--", *spinner], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    time.sleep(4)
    os.killpg(recorder.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the recorder and its command
    _, stderr = recorder.communicate(timeout=60)
    assert recorder.returncode == 0, stderr
    assert "samples" in stderr and out.read_text().strip()
    shown = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True).stdout
    assert f"({recorder.pid})" not in shown


#: Names itself (its comm) argv[1], then spins for argv[2] seconds in a thread it starts, in a child
#: it forks and in itself.
SPIN_NAMED = """import os, sys, threading, time
open("/proc/self/comm", "w").write(sys.argv[1])
end = time.time() + float(sys.argv[2])
def spin():
    while time.time() < end:
        pass
threading.Thread(target=spin).start()
child = os.fork()
spin()
if child:
    os.waitpid(child, 0)
"""


@pytest.mark.parametrize("target", ["command", "running"])
def test_a_target_is_sampled_with_its_threads_and_children_and_nothing_else(target: str) -> None:
    outside = subprocess.Popen([sys.executable, "-c", SPIN_NAMED, "outscope", "30"])
    try:
        recorder = BpfRecorder(frequency=FREQUENCY)
        spinner = [sys.executable, "-c", SPIN_NAMED, "inscope", "2.5"]
        if target == "command":  # -- CMD: followed from its first instruction
            child = recorder.launch(spinner)
        else:  # -p PID: its thread and child running already
            child = subprocess.Popen(spinner)
            time.sleep(0.5)
            recorder.add(child.pid)
        try:
            profile = recorder.run(lambda: child.poll() is not None)
        finally:
            child.wait()
    finally:
        outside.kill()
        outside.wait()
    sampled = {(comm, stack.pid, tid) for _, tid, _, comm, stack in profile.sample_log()}
    inside = {(pid, tid) for comm, pid, tid in sampled if comm == "inscope"}
    # the command's two threads and its forked child, which the events reach by inheritance alone;
    # the spinner outside the command, on the same CPUs, never
    assert len({pid for pid, _ in inside}) >= 2 and len({tid for _, tid in inside}) >= 3, sampled
    assert not any(comm == "outscope" for comm, _, _ in sampled), sampled


def test_record_needs_a_target() -> None:
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf"], capture_output=True, text=True)
    assert result.returncode == 2 and "-a, -p PID or -- CMD" in result.stderr


def pipes() -> int:
    return sum(os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}"))


def test_a_command_the_recorder_cannot_follow_fails_with_the_reason() -> None:
    # above the kernel's highest sampling rate: perf_event_open refuses; the gate's pipe to the killed
    # command once raised BrokenPipeError in place of that reason, and stayed open
    recorder = BpfRecorder(frequency=10**9)
    before = pipes()
    try:
        with pytest.raises(BpfError, match="perf_event_open"):
            recorder.launch(["true"])
        assert pipes() == before
    finally:
        recorder.close()


@pytest.mark.parametrize("duration", ["nan", "-1", "inf"])
def test_a_duration_that_is_no_number_of_seconds_is_an_error(duration: str) -> None:
    # nan was never reached: -p of a running process recorded until Ctrl-C
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "--duration", duration, "-p",
                             str(os.getpid())], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"--duration {float(duration)}: not a number of seconds" in result.stderr


def test_sizes_past_the_maps_bounds_are_errors_not_other_sizes() -> None:
    # 2^32 + 16,384 slots once made a map of 16,384 (1 MiB), and the recording went on
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "--table-mib", "262145",
                             "--duration", "0.1", "--", "true"], capture_output=True, text=True)
    assert result.returncode == 2 and "--table-mib 262145: at most 262143" in result.stderr
    with pytest.raises(ValueError, match="at most 4294967295"):
        _core.BpfSession(_core.BPF_MAX_SLOTS + 1)
    session = _core.BpfSession(1024)
    try:
        with pytest.raises(OverflowError):  # once sampled at 99 Hz: the frequency's low 64 bits
            session.attach_thread(2**64 + FREQUENCY, os.getpid())
        with pytest.raises(ValueError, match="a thread id"):  # once the thread 2^32 lower
            session.attach_thread(FREQUENCY, 2**32 + os.getpid())
    finally:
        session.close()


def test_evicted_tables_end_stacks_as_table_evicted(settings: record_workloads.Settings) -> None:
    # slots for about one libc: loading the program's modules evicts one in use, again and again
    recorder = BpfRecorder(frequency=FREQUENCY, slot_capacity=5_000)
    child = recorder.launch(record_workloads.WORKLOADS["c"].command(settings), stdout=subprocess.DEVNULL)
    try:
        profile = recorder.run(lambda: child.poll() is not None)
    finally:
        child.wait()
    assert profile.samples >= 50 and profile.slots_used <= 5_000
    assert profile.outcomes.get("table_evicted", 0) > 0 and profile.evicted_in_use > 0, profile.statistics()
    # a stack is complete only where every frame had its table: from _start
    assert all(profile.frames(s)[0] == "_start" for s in profile.stacks if s.outcome == "end")


def expected_stacks(profile: BpfProfile) -> dict[tuple[int, int], Counter[tuple[str, ...]]]:
    """Per thread (pid, tid), its samples' stacks as the profile files hold them: names from the
    root, an incomplete stack rooted at "[OUTCOME]", kernel frames last."""
    out: dict[tuple[int, int], Counter[tuple[str, ...]]] = {}
    for _, tid, _, _, stack in profile.sample_log():
        out.setdefault((stack.pid, tid), Counter())[tuple(profile.frames(stack) or ["[no frames]"])] += 1
    return out


def written(profile: BpfProfile, output_format: str) -> str:
    out = StringIO()
    write_profile(profile, output_format, out, "cworkload <&>")
    return out.getvalue()


def check_folded_file(profile: BpfProfile, text: str) -> None:
    lines = Counter({line.rpartition(" ")[0]: int(line.rpartition(" ")[2]) for line in text.splitlines()})
    assert lines == profile.folded() and sum(lines.values()) == profile.samples


def check_speedscope_file(profile: BpfProfile, text: str) -> None:
    document = json.loads(text)
    check_speedscope(document)
    names = [frame["name"] for frame in document["shared"]["frames"]]
    found: dict[tuple[int, int], Counter[tuple[str, ...]]] = {}
    for sampled in document["profiles"]:  # "comm pid/tid": a profile per thread
        pid, tid = sampled["name"].rsplit(" ", 1)[1].split("/")
        assert sampled["weights"] == [1] * len(sampled["samples"])
        found[(int(pid), int(tid))] = Counter(tuple(names[i] for i in stack) for stack in sampled["samples"])
    assert found == expected_stacks(profile)


def check_gecko_file(profile: BpfProfile, text: str) -> None:
    document = json.loads(text, parse_float=Decimal)
    check_gecko(document)
    assert abs(float(document["meta"]["interval"]) - 1000 / FREQUENCY) < 1e-6  # written to the ns
    # each sample in its thread at the time the kernel took it (CLOCK_MONOTONIC ms, as perf's)
    expected: dict[int, Counter[tuple[int, tuple[str, ...]]]] = {}
    for time_ns, tid, _, _, stack in profile.sample_log():
        expected.setdefault(tid, Counter())[(time_ns // 1000, tuple(profile.frames(stack) or ["[no frames]"]))] += 1
    found: dict[int, Counter[tuple[int, tuple[str, ...]]]] = {}
    markers = incomplete = 0
    for thread in document["threads"]:
        strings, stacks = thread["stringArray"], thread["stackTable"]
        name = [strings[n] for n in thread["funcTable"]["name"]]
        samples = found.setdefault(int(thread["tid"]), Counter())
        for stack, time in zip(thread["samples"]["stack"], thread["samples"]["time"]):
            incomplete += _root_is_outcome(thread, stack)
            frames = []
            while stack is not None:
                frames.append(name[stacks["frame"][stack]])
                stack = stacks["prefix"][stack]
            samples[(int(time * 1000), tuple(reversed(frames)))] += 1
        markers += thread["markers"]["length"]
    assert found == expected
    # a marker per sample whose user stack did not reach its end
    assert markers == incomplete == sum(n for s, n in profile.stacks.items() if profile.incomplete(s))


def check_html_file(profile: BpfProfile, text: str) -> None:
    head, _, rest = text.partition('<script type="application/json" id="profile-data">')
    data = json.loads(rest.partition("</script>")[0])
    assert "<title>cworkload &lt;&amp;&gt;" in head and data["samples"] == profile.samples
    names, parents, functions = data["names"], data["parent"], data["function"]
    assert len(parents) == len(functions) and all(-1 <= p < i for i, p in enumerate(parents))
    found: dict[tuple[int, int], Counter[tuple[str, ...]]] = {}
    for thread in data["threads"]:
        pid, tid = thread["name"].rsplit(" ", 1)[1].split("/")
        samples = found.setdefault((int(pid), int(tid)), Counter())
        pairs = thread["self"]
        for node, count in zip(pairs[::2], pairs[1::2]):  # every node kept: none merged
            stack = []
            while node != -1:
                stack.append(names[functions[node]])
                node = parents[node]
            samples[tuple(reversed(stack))] += count
        assert sum(samples.values()) == thread["samples"]
    assert found == expected_stacks(profile)


PERF_HEADER = re.compile(r"(?P<comm>\S.*?) +(?P<tid>\d+) +(?P<sec>\d+)\.(?P<usec>\d{6}): cpu-clock: ")
#: a C++ name may hold spaces and parentheses; the dso, in the line's last parentheses, holds no parentheses
PERF_FRAME = re.compile(r"\t *(?P<address>-?[0-9a-f]+) (?P<symbol>.+) \((?P<dso>[^()]*)\)")


def perf_samples(text: str) -> list[tuple[dict[str, str], list[re.Match[str]]]]:
    """perf script's text as (header fields, frame lines) per sample."""
    samples = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        header, *lines = block.strip("\n").split("\n")
        matched = PERF_HEADER.fullmatch(header)
        assert matched, header
        frames = [PERF_FRAME.fullmatch(line) for line in lines]
        assert all(frames), lines
        samples.append((matched.groupdict(), frames))  # type: ignore[arg-type]
    return samples


def check_perf_file(profile: BpfProfile, text: str) -> None:
    """A sample per logged sample, in the log's order, with its thread, command name, time (to the
    µs) and its stack's frames, leaf first: the names the other formats give (a symbol+offset, or
    [unknown] in the frame's dso)."""
    samples = perf_samples(text)
    log = profile.sample_log()
    assert len(samples) == len(log) == profile.samples
    for (header, frames), (time_ns, tid, _, comm, stack) in zip(samples, log):
        assert (header["comm"], int(header["tid"])) == (comm, tid)
        assert int(header["sec"]) * 1_000_000 + int(header["usec"]) == time_ns // 1000
        names = profile.frames(stack)
        names = names[1:] if profile.incomplete(stack) else names
        leaf_first = [f["symbol"].rpartition("+0x")[0] or f["symbol"] for f in frames]
        assert len(leaf_first) == len(names)
        for shown, name in zip(leaf_first, reversed(names)):
            assert shown == name or (shown == "[unknown]" and name.startswith("[unknown")), (shown, name)


CHECKS = {"folded": check_folded_file, "perf": check_perf_file, "speedscope": check_speedscope_file,
          "gecko": check_gecko_file, "html": check_html_file}


@pytest.mark.parametrize("output_format", FORMATS)
def test_each_format_holds_every_sample(c_profile: BpfProfile, output_format: str) -> None:
    assert c_profile.samples >= 50 and c_profile.outcomes.get("frame_limit", 0) > 0, c_profile.statistics()
    CHECKS[output_format](c_profile, written(c_profile, output_format))


def test_perf_scripts_text_holds_cxx_names_with_spaces(settings: record_workloads.Settings) -> None:
    """A compiler's frames are C++ functions whose names hold spaces (a template's "> >", its
    arguments' ", "): each line keeps the name whole, the dso after it, as perf script prints them."""
    profile = record_command(record_workloads.WORKLOADS["compiler"].command(settings))
    assert any(" " in name for stack in profile.stacks for name in profile.frames(stack)), profile.statistics()
    check_perf_file(profile, written(profile, "perf"))


def test_record_writes_the_format_to_the_file(settings: record_workloads.Settings, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "-F", str(FREQUENCY), "--format",
                             "gecko", "-o", str(out), "--", *record_workloads.WORKLOADS["c"].command(settings)],
                            cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "", result.stderr
    document = json.loads(out.read_text(), parse_float=Decimal)
    check_gecko(document)
    reported = int(re.search(r"fastunwind record: (\d+) samples", result.stderr)[1])  # type: ignore[index]
    assert 50 <= sum(thread["samples"]["length"] for thread in document["threads"]) <= reported


def test_perf_scripts_text_has_the_frames_of_perfs_dwarf_recording(c_run: tuple[BpfProfile, Path]) -> None:
    """Every chain of callers holding 5% of the complete stacks of the `perf record --call-graph dwarf`
    recording of the same run, unwound offline, is in `record --bpf --format perf` line for line
    (addresses, symbol+offset, dso; a frame a signal interrupted at its PC, the other callers at their
    return address - 1; the user frames of both, a sample taken in the kernel from the user PC at its
    kernel entry). Not the reverse: the BPF walk completes stacks deeper than perf's 8 KiB copy."""
    def complete_blocks(text: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for _, frames in perf_samples(text):
            user = [f[0] for f in frames if f["dso"] != "[kernel.kallsyms]"]
            if user and user[-1].split()[1].startswith("_start+"):
                out["\n".join(user[1:])] += 1  # the callers: the leaf's exact PC varies by sample
        return out

    profile, data = c_run
    theirs = complete_blocks(subprocess.run([sys.executable, "-m", "fastunwind", "perf-script", "-i", str(data)],
                                            check=True, capture_output=True, text=True).stdout)
    ours = complete_blocks(written(profile, "perf"))
    hot = [chain for chain, n in theirs.items() if n >= 0.05 * sum(theirs.values())]
    assert hot and all(chain in ours for chain in hot), [chain for chain in hot if chain not in ours]