"""`fastunwind backtrace -p --json` and `fastunwind core --json` against libunwind's ptrace and
coredump walkers (libunwind 1.6.2 from libunwind-dev, through benchmarks/peers/libunwind_stacks.c),
the third oracle beside eu-stack and gdb (tests/integration/test_backtrace_live.py,
tests/golden/test_core_against_eu_stack.py).

The material: workloads/live/blocked_threads.c (gcc -O2 -fomit-frame-pointer: threads in a deep
recursion, a signal handler, qsort's comparator, a busy leaf and a stack-realigning function)
stopped by SIGSTOP and walked live, then gdb's gcore of that same stopped process, and the kernel's
cores of it crashing by SIGSEGV and by abort(); a Rust program (workloads/live/sleeping_threads.rs)
and a thread held after its epilogue's pops (workloads/live/popped_registers.c), walked live; and
Debian's python3, live and from its gcore. For every thread: its PCs identical to libunwind's, or ours longer where libunwind
stops early (where it finds no CFI, it goes on by guesses: its frames are compared up to there),
and then eu-stack (the second oracle) has every one of ours; each frame's rip, rsp,
rbp, rbx and r12-r15 identical to libunwind's for as long as every step of libunwind's walk so far
used CFI (once it guesses, its registers are a guess too).

The differences kept, each with its reason:

* libunwind 1.6.2 finds no CFI in a module whose executable segment does not start at a page
  boundary of its file (rustc's executables: its linker lays them out so, `LOAD 0x015600
  0x16600`): its dwarf_find_unwind_table looks for the PT_LOAD whose p_offset equals the mapping's
  page offset exactly, finds none, and the walk goes on by guesses from the frame pointer, ending
  as if at the outermost frame; eu-stack walks every frame we do.
* Cores: libunwind 1.6.2's coredump library alone walks no core of a program built today past its
  first frame (its find_proc_info takes every module's text to start at file offset 0, and gcore
  dumps no file-backed text), and its register accessor reads r8-r14 as r15; the harness gives it
  the core's memory, the mapped files and the registers itself (libunwind_stacks.c says how), and
  the walk is libunwind's.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fastunwind.stacks import COMPLETE
from tests.support import cores
from tests.support.cores import CoreUnavailable
from tests.support.paths import WORKLOADS_DIR
from tests.support.tools import run_fastunwind

#: the registers libunwind_stacks prints at every frame
REGISTERS = ("rip", "rsp", "rbp", "rbx", "r12", "r13", "r14", "r15")


@dataclass
class Agreement:
    """How our threads compare with libunwind's: the threads whose PCs are libunwind's; where
    libunwind stopped early or went on by guesses, how many of the thread's frames it reached by
    CFI; the registers compared."""
    identical: list[int] = field(default_factory=list)
    libunwind_stopped_early: dict[int, int] = field(default_factory=dict)
    registers_compared: int = 0


def ours(arguments: list[str]) -> dict[int, dict[str, Any]]:
    """Our threads by thread id, as `fastunwind ARGUMENTS --json --registers` prints them."""
    result = run_fastunwind([*arguments, "--json", "--registers"], timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    return {thread["tid"]: thread for thread in json.loads(result.stdout)["threads"]}


def libunwind(arguments: list[str]) -> dict[int, dict[str, Any]]:
    try:
        return cores.libunwind_stacks(arguments)
    except CoreUnavailable as error:
        pytest.skip(str(error))


def compare(our_threads: dict[int, dict[str, Any]], their_threads: dict[int, dict[str, Any]],
            second_oracle: Callable[[], dict[int, list[int]]]) -> Agreement:
    """Asserts every thread agrees with libunwind's (see the module's docstring); eu-stack's PCs
    (`second_oracle`) are asked for only where libunwind stopped early."""
    assert sorted(our_threads) == sorted(their_threads)
    agreement = Agreement()
    second: dict[int, list[int]] | None = None
    for tid, thread in our_threads.items():
        assert thread["outcome"] == COMPLETE, (tid, thread["outcome"])
        frames, theirs = thread["frames"], their_threads[tid]["frames"]
        pcs, their_pcs = [frame["address"] for frame in frames], [frame["pc"] for frame in theirs]
        if pcs == their_pcs:
            assert their_threads[tid]["end"] == "outermost", (tid, their_threads[tid]["end"])
            agreement.identical.append(tid)
        else:
            # up to the first frame libunwind found no CFI for, its frames are ours; its steps from
            # there on are guesses, and where it ends them is not the outermost frame
            walked = next((number + 1 for number, frame in enumerate(theirs) if not frame["unwind_info"]),
                          len(theirs))
            assert walked < len(pcs) and pcs[:walked] == their_pcs[:walked], (
                tid, [hex(pc) for pc in pcs], [hex(pc) for pc in their_pcs])
            second = second_oracle() if second is None else second
            assert second[tid] == pcs, (tid, "eu-stack has other frames than ours")
            agreement.libunwind_stopped_early[tid] = walked
        for our_frame, their_frame in zip(frames, theirs):
            for name, value in their_frame["registers"].items():
                assert our_frame["registers"][name] == value, (tid, hex(our_frame["address"]), name, value)
                agreement.registers_compared += 1
            if not their_frame["unwind_info"]:
                break  # libunwind's step to the caller is a guess
    return agreement


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return cores.blocked_threads(tmp_path_factory.mktemp("libunwind"))
    except CoreUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def stopped(program: Path) -> Iterator[int]:
    """blocked_threads running, then stopped whole: every tool sees the same state (the leaf spins)."""
    with cores.running([str(program)], program.parent, prints_ready=True) as pid:
        cores.sigstop(pid)
        yield pid


def assert_blocked_threads_agree(agreement: Agreement, threads: int) -> None:
    """blocked_threads' every thread identical to libunwind's, every register of every frame compared."""
    assert agreement.libunwind_stopped_early == {} and len(agreement.identical) == threads
    assert agreement.registers_compared > 600


def test_live_threads_are_libunwinds(stopped: int) -> None:
    agreement = compare(ours(["backtrace", "-p", str(stopped)]), libunwind(["-p", str(stopped)]),
                        lambda: cores.eu_stack_pcs(["-p", str(stopped)]))
    assert_blocked_threads_agree(agreement, 6)
    # libunwind released every thread: the process is still in the stop the fixture sent, untraced
    assert cores.states_when_stopped(stopped) == {"T"}
    assert "TracerPid:\t0\n" in Path(f"/proc/{stopped}/status").read_text()


@pytest.mark.parametrize("kind", ("gcore", *cores.KERNEL_CORE_MODES))
def test_core_threads_are_libunwinds(kind: str, program: Path, stopped: int,
                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    out = tmp_path_factory.mktemp(kind)
    try:
        core = cores.gcore_of(stopped, out / "gcore") if kind == "gcore" else cores.kernel_core(program, kind, out)
    except CoreUnavailable as error:
        pytest.skip(str(error))
    agreement = compare(ours(["core", str(core)]), libunwind(["--core", str(core)]),
                        lambda: cores.eu_stack_of_core(core, program))
    # a crash's core has the crashing main thread's frames besides the five blocked ones
    assert_blocked_threads_agree(agreement, 6)


def test_debian_python3_live_and_its_gcore_are_libunwinds(tmp_path: Path) -> None:
    """Debian's own python3 (its threads in select and the GIL's condition wait), live and from
    gdb's gcore of the same stopped process."""
    command = ["/usr/bin/python3", "-c", "import threading, time\n"
               "[threading.Thread(target=time.sleep, args=(1000,), daemon=True).start() for _ in range(3)]\n"
               "print('ready', flush=True)\ntime.sleep(1000)"]
    with cores.running(command, tmp_path, prints_ready=True) as pid:
        cores.sigstop(pid)
        live = compare(ours(["backtrace", "-p", str(pid)]), libunwind(["-p", str(pid)]),
                       lambda: cores.eu_stack_pcs(["-p", str(pid)]))
        try:
            core = cores.gcore_of(pid, tmp_path / "python3")
        except CoreUnavailable as error:
            pytest.skip(str(error))
    from_core = compare(ours(["core", str(core)]), libunwind(["--core", str(core)]),
                        lambda: cores.eu_stack_of_core(core))
    for agreement in (live, from_core):
        assert len(agreement.identical) == 4 and agreement.libunwind_stopped_early == {}
        assert agreement.registers_compared > 200


def test_libunwind_stops_early_in_rusts_layout_and_eu_stack_has_ours(tmp_path: Path) -> None:
    if not shutil.which("rustc"):
        pytest.skip("rustc is not installed")
    binary = tmp_path / "sleeping_threads"
    subprocess.run(["rustc", "-C", "opt-level=2", "-C", "debuginfo=0", "-o", str(binary),
                    str(WORKLOADS_DIR / "live" / "sleeping_threads.rs")], check=True, cwd=tmp_path)
    with cores.running([str(binary)], tmp_path, prints_ready=True) as pid:
        cores.sigstop(pid)
        our_threads, their_threads = ours(["backtrace", "-p", str(pid)]), libunwind(["-p", str(pid)])
        agreement = compare(our_threads, their_threads, lambda: cores.eu_stack_pcs(["-p", str(pid)]))
    # every thread runs through the executable, and libunwind stops in it
    assert sorted(agreement.libunwind_stopped_early) == sorted(our_threads) and len(our_threads) == 4
    for tid, thread in their_threads.items():
        in_executable = [their["unwind_info"] for our, their in zip(our_threads[tid]["frames"], thread["frames"])
                         if our["module"] == str(binary)]
        # the reason: no CFI found for any of its frames there
        assert in_executable and not any(in_executable), tid
    assert agreement.registers_compared > 40


def test_registers_popped_into_the_red_zone_are_libunwinds_live(tmp_path: Path) -> None:
    """A thread held after its epilogue's pops, where the CFI (as clang writes it) still names the
    saved registers' slots, below rsp: the live snapshot copies the red zone too, so the caller's
    rbx and r12 are read there as libunwind reads them from the process, not left unknown."""
    binary = tmp_path / "popped_registers"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(WORKLOADS_DIR / "live" / "popped_registers.c")],
                   check=True)
    with cores.running([str(binary)], tmp_path, prints_ready=True) as pid:
        cores.sigstop(pid)
        our_threads = ours(["backtrace", "-p", str(pid)])
        agreement = compare(our_threads, libunwind(["-p", str(pid)]), lambda: cores.eu_stack_pcs(["-p", str(pid)]))
    assert len(agreement.identical) == 2
    popped = next(thread for thread in our_threads.values() if thread["name"] == "popped")
    assert popped["frames"][0]["symbol"] == "popped_spin"
    caller = popped["frames"][1]["registers"]
    assert caller["rbx"] is not None and caller["r12"] is not None
