"""`fastunwind backtrace -p PID` against the oracles: every thread's PCs as eu-stack -p prints them,
each frame's registers as gdb knows them, on a program whose threads are held in hard frames
(workloads/live/blocked_threads.c, built here without frame pointers) and on Debian's own programs;
and every failure a clear line with the target left running."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fastunwind
from fastunwind import _core, cache, live, stacks
from fastunwind.address_space import VDSO, ImageCache
from fastunwind.elf import find_debug_file
from fastunwind.errors import LiveError
from tests.support.cores import (assert_signal_frames_named_as, eu_stack_frames, sigstop, states_when_stopped,
                                  thread_states)
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not (shutil.which("eu-stack") and shutil.which("gdb") and shutil.which("gcc")),
                                reason="needs eu-stack, gdb and gcc (make test installs them)")

PROGRAM = REPO_ROOT / "workloads" / "live" / "blocked_threads.c"
GDB_FRAMES = Path(__file__).parents[1] / "support" / "gdb_frames.py"
THREAD_NAMES = {"recursion", "signal", "qsort", "leaf", "realign"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fastunwind", *args], capture_output=True, text=True, timeout=60)


def start(argv: list[str], ready: str | None = None) -> subprocess.Popen[str]:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    if ready is not None:
        assert process.stdout is not None and process.stdout.readline().strip() == ready
    else:
        time.sleep(0.3)
    return process


def stop(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()


@pytest.fixture(scope="module")
def blocked_threads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    binary = tmp_path_factory.mktemp("live") / "blocked_threads"
    subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-pthread", "-o", str(binary), str(PROGRAM)], check=True)
    process = start([str(binary)], ready="ready")
    sigstop(process.pid)  # every tool sees the same state (the leaf thread spins)
    yield process.pid
    stop(process)


def eu_stack(pid: int) -> dict[int, list[tuple[int, str | None]]]:
    return eu_stack_frames(["-p", str(pid)])


def gdb_frames(pid: int) -> list[dict[str, object]]:
    text = subprocess.run(["gdb", "-batch", "-nx", "-p", str(pid), "-x", str(GDB_FRAMES)], capture_output=True,
                          text=True, timeout=120).stdout
    line = next(line for line in text.splitlines() if line.startswith("FRAMES "))
    frames: list[dict[str, object]] = json.loads(line[len("FRAMES "):])
    return frames


def assert_same_pcs_as_eu_stack(pid: int) -> fastunwind.stacks.ProcessSnapshot:  # type: ignore[name-defined]
    snapshot = fastunwind.backtrace(pid)
    named = eu_stack(pid)
    ours = {thread.tid: [frame.address for frame in thread.frames] for thread in snapshot.threads}
    assert set(ours) == set(named)
    outcomes = {thread.tid: thread.outcome for thread in snapshot.threads}
    for tid, frames in named.items():
        assert ours[tid] == [pc for pc, _symbol in frames], f"thread {tid}, outcome {outcomes[tid]}"
    # signal trampolines and the frames they interrupted, named as eu-stack does
    for thread in snapshot.threads:
        assert_signal_frames_named_as(thread.frames, named[thread.tid])
    return snapshot


def test_blocked_threads_pcs_are_eu_stacks(blocked_threads: int) -> None:
    snapshot = assert_same_pcs_as_eu_stack(blocked_threads)
    assert THREAD_NAMES <= {thread.name for thread in snapshot.threads}
    assert all(thread.complete for thread in snapshot.threads)
    names = {thread.name: [frame.symbol for frame in thread.frames] for thread in snapshot.threads}
    assert names["recursion"].count("recurse") == 51
    assert {"on_usr1", "__restore_rt", "signal_thread"} <= set(names["signal"])
    assert names["qsort"][2] == "compare" and "qsort_thread" in names["qsort"]
    assert names["leaf"][0] == "spin_leaf"
    assert any(name and name.startswith("realigned") for name in names["realign"])


def test_two_snapshots_share_the_vdsos_symbol_cache_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vDSO's symbol table is cached under its build-id and keyed by it (core/cache_paths.h: an
    image copied from memory has no file to identify): a second snapshot of the process, with
    other files open at the numbers the first used, finds the entry the first wrote and keeps it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    process = start(["sleep", "60"])
    opened: list[int] = []
    try:
        entries = []
        for _snapshot in range(2):
            space, _maps = live.address_space(process.pid, ImageCache())
            image = next(m.image for m in space.mappings if m.path == VDSO)
            assert image is not None and image.elf.in_memory and image.build_id
            # as a snapshot does: /proc/PID/mem open while frames are named
            opened.append(os.open(f"/proc/{process.pid}/mem", os.O_RDONLY))
            stacks.symbol_table(image)
            entry = Path(cache.cache_dir("symbols")) / (image.build_id.hex() + cache.KINDS["symbols"])
            entries.append((entry.stat().st_ino, entry.stat().st_mtime_ns))
            key = _core.symbol_key_memory_image(image.build_id.hex(), find_debug_file(image.elf) or "")
            _core.SymbolTable.from_cache(entry.read_bytes(), key)  # ValueError: another key
        assert entries[0] == entries[1], "the second snapshot rewrote the vDSO's entry: its key changed"
    finally:
        for fd in opened:
            os.close(fd)
        stop(process)


def test_a_deleted_program_is_read_through_map_files(tmp_path: Path) -> None:
    """The program's file deleted while it runs: its frames are unwound and named from the mapping
    itself (/proc/PID/map_files), the module named as the maps name it."""
    binary = tmp_path / "blocked_threads"
    subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-pthread", "-o", str(binary), str(PROGRAM)], check=True)
    process = start([str(binary)], ready="ready")
    try:
        binary.unlink()
        sigstop(process.pid)
        snapshot = fastunwind.backtrace(process.pid)
        assert all(thread.complete for thread in snapshot.threads)
        names = {thread.name: [frame.symbol for frame in thread.frames] for thread in snapshot.threads}
        assert names["recursion"].count("recurse") == 51 and "on_usr1" in names["signal"]
        assert str(binary) in {frame.module for thread in snapshot.threads for frame in thread.frames}
    finally:
        stop(process)


def test_blocked_threads_registers_are_gdbs(blocked_threads: int) -> None:
    snapshot = fastunwind.backtrace(blocked_threads, with_registers=True)
    ours = {(thread.tid, number): frame for thread in snapshot.threads for number, frame in enumerate(thread.frames)}
    compared = 0
    compared_names: set[str] = set()  # gdb's `info registers` names compared, frame 0's eflags and segments too
    for oracle in gdb_frames(blocked_threads):
        frame = ours.get((int(oracle["tid"]), int(oracle["frame"])))  # type: ignore[call-overload]
        if frame is None:
            continue
        assert frame.address == oracle["pc"]
        for name, value in oracle["registers"].items():  # type: ignore[attr-defined]
            if frame.registers[name] is not None:
                assert frame.registers[name] == value, (oracle["tid"], oracle["frame"], name)
                compared += 1
                compared_names.add(name)
    assert compared > 500
    assert compared_names == set(fastunwind.stacks.REGISTER_NAMES + fastunwind.stacks.STATE_REGISTER_NAMES)


#: programs built here from workloads/live: (source, compiler command before "-o OUT SOURCE")
BUILT_PROGRAMS = {
    "c++": ("waiting_threads.cpp", ["g++", "-O2", "-pthread"]),
    "rust": ("sleeping_threads.rs", ["rustc", "-C", "opt-level=2", "-C", "debuginfo=0"]),
}


@pytest.mark.parametrize("language", sorted(BUILT_PROGRAMS))
def test_built_programs_pcs_are_eu_stacks(language: str, tmp_path: Path) -> None:
    source, compiler = BUILT_PROGRAMS[language]
    if not shutil.which(compiler[0]):
        pytest.skip(f"{compiler[0]} is not installed")
    binary = tmp_path / source.split(".")[0]
    subprocess.run([*compiler, "-o", str(binary), str(PROGRAM.parent / source)], check=True, cwd=tmp_path)
    process = start([str(binary)], ready="ready")
    try:
        sigstop(process.pid)
        snapshot = assert_same_pcs_as_eu_stack(process.pid)
        assert len(snapshot.threads) == (5 if language == "c++" else 4)
        assert all(thread.complete for thread in snapshot.threads)
    finally:
        stop(process)


@pytest.mark.parametrize("argv", [["sleep", "1000"],
                                  ["python3", "-c", "import threading, time\n"
                                   "[threading.Thread(target=time.sleep, args=(1000,), daemon=True).start() "
                                   "for _ in range(3)]\ntime.sleep(1000)"]],
                         ids=["sleep", "python3"])
def test_debian_programs_pcs_are_eu_stacks(argv: list[str]) -> None:
    process = start(argv)
    try:
        sigstop(process.pid)
        snapshot = assert_same_pcs_as_eu_stack(process.pid)
        assert all(thread.complete for thread in snapshot.threads)
    finally:
        stop(process)


def test_cli_text_json_and_threads_released(blocked_threads: int, tmp_path: Path) -> None:
    tids = sorted(thread_states(blocked_threads))
    text = cli("backtrace", "-p", str(blocked_threads), "--tid", str(tids[1]), "--registers")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"PID {blocked_threads}" and lines[1].startswith(f"TID {tids[1]} (")
    assert re.match(r"#0  0x[0-9a-f]{16} in \S+\+0x[0-9a-f]+ \(/", lines[2])
    assert "rip 0x" in text.stdout and "<unknown>" in text.stdout
    to_file = cli("backtrace", "-p", str(blocked_threads), "--tid", str(tids[1]), "-o", str(tmp_path / "out"))
    assert to_file.returncode == 0 and to_file.stdout == ""
    assert (tmp_path / "out").read_text().splitlines()[:2] == lines[:2]
    document = json.loads(cli("backtrace", "-p", str(blocked_threads), "--json").stdout)
    assert document["pid"] == blocked_threads and len(document["threads"]) == len(tids)
    frame = document["threads"][0]["frames"][0]
    assert set(frame) == {"address", "symbol", "offset", "module", "registers"}
    assert frame["registers"]["rip"] == frame["address"]
    # still stopped by the SIGSTOP the fixture sent (a group stop), and by nothing else
    assert states_when_stopped(blocked_threads) == {"T"}


@pytest.fixture()
def running() -> Iterator[subprocess.Popen[str]]:
    process = start(["python3", "-c", "import threading, time\n"
                     "[threading.Thread(target=time.sleep, args=(1000,), daemon=True).start() for _ in range(4)]\n"
                     "print('ready', flush=True)\ntime.sleep(1000)"], ready="ready")
    yield process
    stop(process)


def traced_by(pid: int, tracer: int) -> bool:
    """Whether a thread of `pid` is traced by process `tracer` now."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if f"TracerPid:\t{tracer}\n" in Path(f"/proc/{pid}/task/{tid}/status").read_text():
                return True
        except (FileNotFoundError, ProcessLookupError):
            continue
    return False


def assert_left_running(pid: int) -> None:
    states = set(thread_states(pid).values())
    assert "t" not in states and "T" not in states


def test_a_running_target_keeps_running(running: subprocess.Popen[str]) -> None:
    snapshot = fastunwind.backtrace(running.pid)
    assert len(snapshot.threads) == 5 and all(thread.complete for thread in snapshot.threads)
    assert all(0 < thread.stopped_ns < 10**9 for thread in snapshot.threads)
    assert_left_running(running.pid)


def test_a_thread_name_that_is_not_utf8_is_shown_escaped() -> None:
    """A thread's name is any bytes the program set (/proc comm): shown with `\\xNN` escapes, in
    the text and the JSON, never an error."""
    process = start(["python3", "-c", "import time\n"
                     "with open('/proc/self/comm', 'wb') as comm:\n    comm.write(bytes([0xff, 0x62, 0xfe]))\n"
                     "print('ready', flush=True)\ntime.sleep(1000)"], ready="ready")
    try:
        text = cli("backtrace", "-p", str(process.pid))
        assert text.returncode == 0, text.stderr
        assert f"TID {process.pid} (\\xffb\\xfe):" in text.stdout.splitlines()
        as_json = cli("backtrace", "-p", str(process.pid), "--json")
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout)["threads"][0]["name"] == "\\xffb\\xfe"
        assert_left_running(process.pid)
    finally:
        stop(process)


def test_a_program_path_that_is_not_utf8_is_read(tmp_path: Path) -> None:
    """A mapped file's path is any bytes (/proc/PID/maps): decoded as the file system's names are
    (os.fsdecode), so that the file is opened through it and the frames name it; the text output
    writes it back as its bytes, also under a strict encoding. (Through the CLI: in this process
    the file's image would stay mapped.)"""
    program = os.fsencode(tmp_path) + b"/sleep-\xff"
    shutil.copy("/bin/sleep", program)
    process = start([os.fsdecode(program), "1000"])
    try:
        as_json = cli("backtrace", "-p", str(process.pid), "--json")
        assert as_json.returncode == 0, as_json.stderr
        frames = json.loads(as_json.stdout)["threads"][0]["frames"]
        assert os.fsdecode(program) in {frame["module"] for frame in frames}
        strict = subprocess.run([sys.executable, "-m", "fastunwind", "backtrace", "-p", str(process.pid)],
                                capture_output=True, timeout=60,
                                env={**os.environ, "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict"})
        assert strict.returncode == 0 and strict.stderr == b"", strict.stderr
        assert b"(" + program + b")" in strict.stdout
        assert_left_running(process.pid)
    finally:
        stop(process)


def test_bad_input_is_one_line_and_the_target_runs_on(running: subprocess.Popen[str]) -> None:
    zombie = subprocess.Popen(["true"])
    time.sleep(0.2)  # exited, not reaped: a zombie
    cases = {
        "no process 999999999": ["-p", "999999999"],
        f"thread 1 is not a thread of process {running.pid}": ["-p", str(running.pid), "--tid", "1"],
        f"process {zombie.pid} has exited": ["-p", str(zombie.pid)],
        "process 2 is a kernel thread": ["-p", "2"],  # kthreadd
    }
    for message, args in cases.items():
        result = cli("backtrace", *args)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr.startswith(f"fastunwind: error: {message}") and result.stderr.count("\n") == 1
        assert_left_running(running.pid)
    zombie.wait()
    with pytest.raises(LiveError, match="this process"):
        fastunwind.backtrace(os.getpid())


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to drop to nobody")
def test_permission_denied_is_one_line(running: subprocess.Popen[str]) -> None:
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
                             "fastunwind", "backtrace", "-p", str(running.pid)], capture_output=True, text=True,
                            timeout=60, cwd="/")
    assert result.returncode == 1
    assert result.stderr.startswith(f"fastunwind: error: cannot trace process {running.pid}: permission denied")
    assert_left_running(running.pid)


def test_already_traced_is_one_line(running: subprocess.Popen[str]) -> None:
    tracer = subprocess.Popen(["gdb", "-batch", "-nx", "-p", str(running.pid), "-ex", "shell sleep 5"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while "TracerPid:\t0" in Path(f"/proc/{running.pid}/status").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = cli("backtrace", "-p", str(running.pid))
        assert result.returncode == 1
        assert "already traced by process" in result.stderr and result.stderr.count("\n") == 1
    finally:
        tracer.wait(timeout=60)
    time.sleep(0.2)
    assert_left_running(running.pid)


def test_threads_appearing_and_vanishing_are_classified() -> None:
    """A process whose threads come and go while it is snapshot: each snapshot lists the threads it
    found, a thread gone meanwhile with the outcome "exited" and no frames, every other one walked;
    the process runs on."""
    churn = start(["python3", "-c", "import threading, time\n"
                   "def short(): time.sleep(0.0005)\n"
                   "print('ready', flush=True)\n"
                   "while True:\n"
                   "    ts = [threading.Thread(target=short) for _ in range(20)]\n"
                   "    [t.start() for t in ts]; [t.join() for t in ts]"], ready="ready")
    outcomes: set[str] = set()
    try:
        for _ in range(20):
            snapshot = fastunwind.backtrace(churn.pid)
            for thread in snapshot.threads:
                outcomes.add(thread.outcome)
                assert thread.outcome in ("end", "exited") or not thread.complete
                assert (thread.outcome == "exited") == (thread.frames == ())
            assert_left_running(churn.pid)
    finally:
        stop(churn)
    assert "end" in outcomes


def test_a_process_exiting_mid_snapshot_is_an_error_or_a_partial_snapshot() -> None:
    """Processes of 100 threads that exit while they are snapshot, at different moments: each
    snapshot is either a LiveError saying the process is gone, or threads each walked or marked
    exited; nothing else (no crash, no hang)."""
    seen: set[str] = set()
    for delay in (0.0, 0.005, 0.01, 0.02, 0.04, 0.08):
        process = start(["python3", "-c", "import os, threading, time\n"
                         "[threading.Thread(target=time.sleep, args=(1000,), daemon=True).start() for _ in range(100)]\n"
                         f"print('ready', flush=True)\ntime.sleep({delay})\nos._exit(0)"], ready="ready")
        try:
            snapshot = fastunwind.backtrace(process.pid)
        except LiveError as error:
            assert re.search(r"no process|exited", str(error)), error
            seen.add("error")
        else:
            for thread in snapshot.threads:
                assert thread.outcome in ("exited", "not_permitted") or thread.frames, thread
                seen.add(thread.outcome)
        finally:
            process.wait(timeout=60)
    assert seen


#: a process of 200 sleeping threads that prints "ready"
MANY_THREADS = ["python3", "-c", "import threading, time\n"
                "[threading.Thread(target=time.sleep, args=(1000,), daemon=True).start() for _ in range(200)]\n"
                "print('ready', flush=True)\ntime.sleep(1000)"]


def signal_mid_snapshot(command: list[str], target: int, signal_number: int, pause: float,
                        env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the snapshot `command` of process `target` and send it `signal_number` once the snapshot
    is under way (a thread traced by it; polled every `pause` s), or once it is done: (its status,
    its stderr), after checking the status is done (0), interrupted (130) or killed, and that every
    thread of the target runs on."""
    tracer = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 30
    while tracer.poll() is None and time.monotonic() < deadline and not traced_by(target, tracer.pid):
        time.sleep(pause)
    tracer.send_signal(signal_number)
    _, stderr = tracer.communicate(timeout=60)
    assert tracer.returncode in (0, 130, -signal.SIGKILL), stderr
    time.sleep(0.1)
    assert_left_running(target)
    return tracer.returncode, stderr


def test_killed_mid_snapshot_leaves_no_thread_stopped(tmp_path: Path) -> None:
    """SIGINT, SIGTERM and SIGKILL to `fastunwind backtrace` at random points of a snapshot of 200
    threads: the target's threads all run on (the capture releases each before the next; the
    kernel releases a dead tracer's tracees)."""
    target = start(MANY_THREADS, ready="ready")
    try:
        for number, signal_number in enumerate([signal.SIGINT, signal.SIGTERM, signal.SIGKILL] * 2):
            # the signal once the snapshot is under way, or once it is done; not during the
            # interpreter's start-up, whose failures are Python's own
            returncode, stderr = signal_mid_snapshot(
                [sys.executable, "-m", "fastunwind", "backtrace", "-p", str(target.pid), "-o", str(tmp_path / "out.txt")],
                target.pid, signal_number, 0.001 * number)
            if returncode == 130:
                assert stderr.count("\n") == 1 and "interrupted" in stderr
    finally:
        stop(target)
