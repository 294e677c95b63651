"""Core files made at test time, and what the oracles read from them.

* `blocked_threads`: workloads/live/blocked_threads.c (shared with the live tests) built with gcc -O2
  -fomit-frame-pointer, whose threads stop in a deep recursion, a signal handler, qsort's
  comparator, a busy leaf and a stack-realigning function;
* `gcore_of`: gdb's gcore of a running process; `kernel_core`: the kernel's core of a program that
  crashes (SIGSEGV, abort), under RLIMIT_CORE unlimited; where /proc/sys/kernel/core_pattern pipes
  cores to a handler, a plain pattern is set for the run and restored (root only);
* `sigstop`: a live process stopped whole, so that every tool sees the same state;
* the oracles: `eu_stack_pcs` (eu-stack -p or --core: each thread's PCs, frame 0 the interrupted one,
  callers' return addresses), `gdb_frames` (gdb_frames.py, gdb's Python API on the core: each
  frame's PC and the registers gdb knows there) and `libunwind_stacks` (libunwind's ptrace and
  coredump walkers: benchmarks/peers/libunwind_stacks.c, built once into .build/peers).

Every helper raises CoreUnavailable with a reason fit for `pytest.skip` when the machine cannot
give what it needs.
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any
from pathlib import Path

from tests.support.paths import REPO_ROOT, WORKLOADS_DIR

BLOCKED_THREADS_SOURCE = WORKLOADS_DIR / "live" / "blocked_threads.c"
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
#: seconds a program has to print "ready", and a tool to read a core
TIMEOUT = 60
#: the signal trampoline's symbol as eu-stack and glibc name it
SIGNAL_TRAMPOLINE = "__restore_rt"
#: gdb's Python script printing every thread's frames and registers (shared with the live tests)
GDB_FRAMES = Path(__file__).parent / "gdb_frames.py"
#: the peers' harnesses (benchmarks/peers/Makefile) and where the tests build them: once, kept
#: between sessions (make rebuilds one only when its source changes)
PEERS_SOURCE = REPO_ROOT / "benchmarks" / "peers"
PEERS_BUILD = REPO_ROOT / ".build" / "peers"
#: the ways workloads/live/blocked_threads.c crashes for a kernel core
KERNEL_CORE_MODES = ("segv", "abort")


class CoreUnavailable(Exception):
    """A core or an oracle's reading of it cannot be had here; the message says why."""


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise CoreUnavailable(f"{tool} is not installed")
    return path


def blocked_threads(out_dir: Path) -> Path:
    """workloads/live/blocked_threads.c built with gcc -O2 -fomit-frame-pointer -g -pthread."""
    require("gcc")
    exe = out_dir / "blocked_threads"
    built = subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-g", "-pthread", "-o", str(exe),
                            str(BLOCKED_THREADS_SOURCE)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise CoreUnavailable(f"gcc could not build {BLOCKED_THREADS_SOURCE.name}: {built.stderr[-500:]}")
    return exe


def _unlimited_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def wait_ready(process: subprocess.Popen[str]) -> None:
    """Until the program prints its "ready" line (every thread in place)."""
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.strip() != "ready":
        process.kill()
        raise CoreUnavailable(f"{process.args} did not get ready: {line!r}")


#: seconds a program that says nothing is given to reach where it blocks (sleep's nanosleep)
SETTLE_SECONDS = 0.5


@contextlib.contextmanager
def running(command: list[str], cwd: Path, *, prints_ready: bool) -> Iterator[int]:
    """The pid of a program left running for the block (killed on leaving): one that prints
    "ready" once in place, or else given SETTLE_SECONDS."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        if prints_ready:
            wait_ready(process)
        else:
            time.sleep(SETTLE_SECONDS)
        yield process.pid
    finally:
        process.kill()
        process.wait()


def gcore_of(pid: int, prefix: Path) -> Path:
    """gdb's gcore of process `pid`, written as PREFIX.PID."""
    require("gcore")
    result = subprocess.run(["gcore", "-o", str(prefix), str(pid)], capture_output=True, text=True, timeout=TIMEOUT)
    core = Path(f"{prefix}.{pid}")
    if result.returncode != 0 or not core.exists():
        raise CoreUnavailable(f"gcore could not dump {pid}: {(result.stderr or result.stdout)[-500:]}")
    return core


@contextlib.contextmanager
def plain_core_pattern() -> Iterator[None]:
    """The kernel's core pattern as "core" (a file in the crashing process's directory) for the
    block: set only where it pipes cores to a handler (systemd-coredump, apport), and restored."""
    try:
        pattern = CORE_PATTERN.read_text()
    except OSError as error:
        raise CoreUnavailable(f"cannot read {CORE_PATTERN}: {error}") from error
    if not pattern.startswith("|"):
        yield
        return
    if os.geteuid() != 0:
        raise CoreUnavailable(f"cores go to a handler ({pattern.strip()}) and only root may change that")
    CORE_PATTERN.write_text("core")
    try:
        yield
    finally:
        CORE_PATTERN.write_text(pattern)


def kernel_core(exe: Path, mode: str, out_dir: Path) -> Path:
    """The kernel's core of `exe mode` (blocked_threads' segv or abort), dumped into `out_dir`."""
    work = out_dir / f"kernel-{mode}"
    work.mkdir(exist_ok=True)
    with plain_core_pattern():
        pattern = CORE_PATTERN.read_text().strip()
        if "/" in pattern:
            raise CoreUnavailable(f"the core pattern {pattern!r} writes cores elsewhere than the process's directory")
        process = subprocess.Popen([str(exe), mode], cwd=work, stdout=subprocess.PIPE, text=True,
                                   preexec_fn=_unlimited_cores, stdin=subprocess.DEVNULL)
        wait_ready(process)
        status = process.wait(timeout=TIMEOUT)
    cores = sorted(work.glob("core*"))
    if status >= 0 or not cores:
        raise CoreUnavailable(f"the kernel wrote no core of {exe.name} {mode} (status {status}, pattern "
                              f"{pattern!r}, pid {process.pid}): is RLIMIT_CORE capped or the file system read-only?")
    return cores[-1]


def kernel_cores(exe: Path, out_dir: Path) -> dict[str, Path | str]:
    """The kernel's core of blocked_threads crashing each way of KERNEL_CORE_MODES, by mode, or why
    it could not be made."""
    made: dict[str, Path | str] = {}
    for mode in KERNEL_CORE_MODES:
        try:
            made[mode] = kernel_core(exe, mode, out_dir)
        except CoreUnavailable as error:
            made[mode] = str(error)
    return made


def thread_states(pid: int) -> dict[int, str]:
    """Each thread's state letter (/proc/PID/task/TID/stat), by thread id."""
    states = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:  # the name in it: any bytes
                states[int(tid)] = stat.read().rpartition(b")")[2].split()[0].decode()
        except (FileNotFoundError, ProcessLookupError):  # the thread exited since the listing
            continue
    return states


#: How long a thread released from ptrace may take to be back in its process's group stop: a
#: PTRACE_DETACH of a thread in a group stop wakes it so that it re-enters the stop itself, so for
#: a moment it is running (R).
RESTOP_SECONDS = 5


def states_when_stopped(pid: int, timeout: float = RESTOP_SECONDS) -> set[str]:
    """The process's thread states once all are stopped (T), or as they are after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while (states := set(thread_states(pid).values())) != {"T"} and time.monotonic() < deadline:
        time.sleep(0.01)
    return states


def sigstop(pid: int) -> None:
    """Stop the whole process and wait until every thread is stopped (a signal is asynchronous: a
    thread still running would show the oracles another PC than ours)."""
    os.kill(pid, signal.SIGSTOP)
    states_when_stopped(pid, 30)


def libunwind_stacks(arguments: list[str]) -> dict[int, dict[str, Any]]:
    """libunwind's walk of every thread by thread id, for `arguments`: `-p PID` (its ptrace walker)
    or `--core CORE` (its coredump library): {"frames": [{"pc", "unwind_info", "registers"}], "end"}
    as benchmarks/peers/libunwind_stacks.c prints them."""
    require("make")
    if subprocess.run([require("pkg-config"), "--exists", "libunwind-ptrace", "libunwind-coredump"]).returncode != 0:
        raise CoreUnavailable("libunwind-dev is not installed (make test installs it)")
    harness = PEERS_BUILD / "libunwind_stacks"
    PEERS_BUILD.mkdir(parents=True, exist_ok=True)
    built = subprocess.run(["make", "-s", "-C", str(PEERS_SOURCE), f"OUT={PEERS_BUILD}", str(harness)],
                           capture_output=True, text=True)
    assert built.returncode == 0, f"the libunwind harness did not build: {built.stderr[-2000:]}"
    result = subprocess.run([str(harness), *arguments], capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, f"libunwind_stacks {' '.join(arguments)} failed: {result.stderr[-2000:]}"
    return {thread["tid"]: thread for thread in json.loads(result.stdout)["threads"]}


def eu_stack_frames(arguments: list[str]) -> dict[int, list[tuple[int, str | None]]]:
    """eu-stack's frames by thread id, each (PC, symbol or None): frame 0's PC the interrupted one,
    callers' their return addresses; for its `arguments`: `-p PID`, or `--core=CORE [--executable=EXE]`."""
    result = subprocess.run([require("eu-stack"), *arguments], capture_output=True, text=True, timeout=TIMEOUT)
    threads: dict[int, list[tuple[int, str | None]]] = {}
    current: list[tuple[int, str | None]] | None = None
    for line in result.stdout.splitlines():
        if line.startswith("TID "):
            current = threads.setdefault(int(line[4:].rstrip(":")), [])
        elif line.startswith("#") and current is not None:
            # "#N  0xPC[ - 1][ symbol]": " - 1" where eu-stack looks a return address up at PC - 1
            fields = line.split()[1:]
            rest = fields[3:] if fields[1:3] == ["-", "1"] else fields[1:]
            current.append((int(fields[0], 16), rest[0] if rest else None))
    if not threads:
        raise CoreUnavailable(f"eu-stack {' '.join(arguments)} read no thread: {result.stderr[-500:]}")
    return threads


def eu_stack_pcs(arguments: list[str]) -> dict[int, list[int]]:
    """eu-stack's PCs by thread id (eu_stack_frames without the symbols)."""
    return {tid: [pc for pc, _symbol in frames] for tid, frames in eu_stack_frames(arguments).items()}


def eu_stack_core_arguments(core: Path, exe: Path | None = None) -> list[str]:
    return [f"--core={core}", *([f"--executable={exe}"] if exe else [])]


def eu_stack_of_core(core: Path, exe: Path | None = None) -> dict[int, list[int]]:
    return eu_stack_pcs(eu_stack_core_arguments(core, exe))


def assert_signal_frames_named_as(frames: Sequence[Any], theirs: Sequence[tuple[int, str | None]]) -> int:
    """Asserts that the signal trampolines among eu-stack's frames `theirs` (__restore_rt) and the
    frames they return into (a signal's interrupted PC) are named in our `frames` (stacks.Frame)
    as eu-stack names them; returns how many such frames were compared."""
    compared = 0
    for number, (_pc, symbol) in enumerate(theirs[:len(frames)]):
        if symbol == SIGNAL_TRAMPOLINE:
            for pair in range(number, min(number + 2, len(theirs), len(frames))):
                assert frames[pair].symbol == theirs[pair][1], (pair, frames[pair], theirs[pair])
                compared += 1
    return compared


def gdb_frames(core: Path, exe: Path | None) -> dict[int, list[dict[str, object]]]:
    """gdb's frames of every thread of the core (tests/support/gdb_frames.py, the live tests' script:
    real frames only, inlined calls' left out), by thread id: [{"pc", "registers": {name: value}}],
    the registers gdb prints as <not saved> left out."""
    command = [require("gdb"), "-batch", "-nx"] + ([str(exe), str(core)] if exe else ["-c", str(core)])
    result = subprocess.run([*command, "-x", str(GDB_FRAMES)], capture_output=True, text=True, timeout=TIMEOUT * 5)
    line = next((line for line in result.stdout.splitlines() if line.startswith("FRAMES ")), None)
    if line is None:
        raise CoreUnavailable(f"gdb read no frames of {core}: {result.stderr[-500:]}")
    threads: dict[int, list[dict[str, object]]] = {}
    for frame in json.loads(line[len("FRAMES "):]):
        threads.setdefault(int(frame["tid"]), []).append(frame)
    return threads
