"""The launcher's native `backtrace -p` (native/cli) against the Python path, byte for byte: on
real processes (a program whose threads are held in hard frames, Debian's python3 with its
extension modules, a deleted program read through map_files, a program path and a thread name
that are not UTF-8), in text, --registers, --json, --tid and -o; FASTUNWIND_NATIVE=require proves
the launcher served each one itself. Every bad input (no such process, a zombie, a kernel thread,
a thread of another process, permission denied, already traced) gives the Python CLI's one line and
status, and the target runs on. `core` likewise, on a gcore of the same program: text, --registers,
--json, -o, a replaced program (its warning), --exe, --sysroot, a truncated core, unreadable ones.
The caches are a directory of the test's: the Python path's first
run fills them, as a user's first run does."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

# the programs and their fixtures are those of the tests of each path
from tests.integration.test_backtrace_live import (MANY_THREADS, PROGRAM, assert_left_running, blocked_threads, running,
                                                   sigstop, signal_mid_snapshot, start, states_when_stopped, stop,
                                                   thread_states)
from tests.integration.test_core_cli import gcore, replaced_program, sysroot_of
from tests.support import cores
from tests.unit.coredump import test_hostile_cores as hostile_cores
from tests.support.paths import LAUNCHER

pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc (make test installs it)")


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def launch(args: list[str], cache: Path, native: str | None = None, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
    env["XDG_CACHE_HOME"] = str(cache)
    if native is not None:
        env["FASTUNWIND_NATIVE"] = native
    return subprocess.run([str(LAUNCHER), *args], capture_output=True, env=env, stdin=subprocess.DEVNULL,
                          **{"timeout": 120, **kwargs})  # type: ignore[call-overload]


def assert_native_is_python(args: list[str], cache: Path) -> bytes:
    """The Python path's output (run first: it fills the caches), then the launcher's own (required
    native), identical: stdout, stderr, status. The launcher's stdout."""
    python = launch(args, cache, native="0")
    assert python.returncode == 0, python.stderr
    native = launch(args, cache, native="require")
    assert native.stderr == python.stderr, native.stderr
    assert (native.returncode, native.stdout) == (python.returncode, python.stdout)
    return native.stdout


@pytest.mark.parametrize("options", [[], ["--registers"], ["--json"], ["--json", "--registers"]],
                         ids=["text", "registers", "json", "json-registers"])
def test_blocked_threads(blocked_threads: int, options: list[str], cache: Path) -> None:
    out = assert_native_is_python(["backtrace", "-p", str(blocked_threads), *options], cache)
    assert b"recurse" in out and b"on_usr1" in out
    assert states_when_stopped(blocked_threads) == {"T"}  # the fixture's SIGSTOP, nothing else


def test_tids_and_output_file(blocked_threads: int, cache: Path, tmp_path: Path) -> None:
    tids = sorted(thread_states(blocked_threads))
    args = ["backtrace", "--tid", str(tids[2]), "-p", str(blocked_threads), "--tid", str(tids[0]), "--tid",
            str(tids[2])]
    assert_native_is_python(args, cache)
    for native, name in (("0", "python.txt"), ("require", "native.txt")):
        result = launch([*args, "-o", str(tmp_path / name)], cache, native=native)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert (tmp_path / "native.txt").read_bytes() == (tmp_path / "python.txt").read_bytes()


def test_debian_python_with_threads(cache: Path) -> None:
    process = start(["python3", "-c", "import threading, time, json, decimal, ssl\n"
                     "[threading.Thread(target=time.sleep, args=(1000,), daemon=True).start() for _ in range(3)]\n"
                     "print('ready', flush=True)\ntime.sleep(1000)"], ready="ready")
    try:
        time.sleep(0.2)
        for options in ([], ["--json"]):
            assert_native_is_python(["backtrace", "-p", str(process.pid), *options], cache)
        assert_left_running(process.pid)
    finally:
        stop(process)


def test_a_deleted_program(tmp_path: Path, cache: Path) -> None:
    binary = tmp_path / "blocked_threads"
    subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-pthread", "-o", str(binary), str(PROGRAM)], check=True)
    process = start([str(binary)], ready="ready")
    try:
        binary.unlink()
        sigstop(process.pid)
        out = assert_native_is_python(["backtrace", "-p", str(process.pid), "--json"], cache)
        assert str(binary).encode() in out
    finally:
        stop(process)


def test_names_that_are_not_utf8(tmp_path: Path, cache: Path) -> None:
    program = os.fsencode(tmp_path) + b"/sleep-\xff\xc3\xa9"
    shutil.copy("/bin/sleep", program)
    sleeper = start([os.fsdecode(program), "1000"])
    named = start(["python3", "-c", "import time\n"
                   "with open('/proc/self/comm', 'wb') as comm:\n    comm.write(bytes([0xff, 0x62, 0xc3, 0xa9, 0x5c]))\n"
                   "print('ready', flush=True)\ntime.sleep(1000)"], ready="ready")
    try:
        for pid in (sleeper.pid, named.pid):
            for options in ([], ["--json"]):
                assert_native_is_python(["backtrace", "-p", str(pid), *options], cache)
    finally:
        stop(sleeper)
        stop(named)


def assert_same_failure(args: list[str], cache: Path, **kwargs: object) -> None:
    launched, python = launch(args, cache, **kwargs), launch(args, cache, native="0", **kwargs)
    assert python.returncode == 1 and python.stderr.count(b"\n") == 1, python.stderr
    assert (launched.returncode, launched.stdout, launched.stderr) == (python.returncode, python.stdout,
                                                                       python.stderr)


def test_bad_input_is_the_python_clis(running: subprocess.Popen[str], cache: Path) -> None:
    zombie = subprocess.Popen(["true"])
    time.sleep(0.2)  # exited, not reaped: a zombie
    try:
        for args in (["-p", "999999999"], ["-p", str(running.pid), "--tid", "1"], ["-p", str(zombie.pid)],
                     ["-p", "2"], ["-p", str(running.pid), "-o", "/nonexistent/out"]):
            assert_same_failure(["backtrace", *args], cache)
            assert_left_running(running.pid)
    finally:
        zombie.wait()


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to drop to nobody")
def test_permission_denied_is_the_python_clis(running: subprocess.Popen[str], tmp_path: Path) -> None:
    if subprocess.run([*AS_NOBODY, str(LAUNCHER), "--version"], capture_output=True, cwd="/").returncode != 0:
        pytest.skip("nobody cannot run the Python CLI through the launcher here (its interpreter is not theirs)")
    tmp_path.chmod(0o777)
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
    results = []
    for native in ("1", "0"):
        results.append(subprocess.run([*AS_NOBODY, str(LAUNCHER),
                                       "backtrace", "-p", str(running.pid)], capture_output=True, timeout=60, cwd="/",
                                      env={**env, "FASTUNWIND_NATIVE": native, "XDG_CACHE_HOME": str(cache)}))
    assert results[1].returncode == 1 and b"permission denied" in results[1].stderr
    assert [(r.returncode, r.stdout, r.stderr) for r in results] == [(1, b"", results[1].stderr)] * 2
    assert_left_running(running.pid)


def test_already_traced_is_the_python_clis(running: subprocess.Popen[str], cache: Path) -> None:
    tracer = subprocess.Popen(["gdb", "-batch", "-nx", "-p", str(running.pid), "-ex", "shell sleep 8"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while "TracerPid:\t0" in Path(f"/proc/{running.pid}/status").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert_same_failure(["backtrace", "-p", str(running.pid)], cache)
    finally:
        tracer.wait(timeout=60)
    time.sleep(0.2)
    assert_left_running(running.pid)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to drop to nobody")
def test_permission_denied_is_left_to_the_python_cli(running: subprocess.Popen[str], tmp_path: Path) -> None:
    """Whoever may not trace the target: the launcher writes nothing of its own and leaves the
    words to the Python CLI (required native, it says it did not serve), the target running."""
    result = subprocess.run([*AS_NOBODY, str(LAUNCHER), "backtrace", "-p", str(running.pid)], capture_output=True,
                            timeout=60, cwd="/", env={**os.environ, "FASTUNWIND_NATIVE": "require",
                                                      "XDG_CACHE_HOME": str(tmp_path)})
    assert (result.returncode, result.stdout) == (125, b"")
    assert result.stderr.startswith(b"fastunwind: not served natively: ")
    assert_left_running(running.pid)


def test_signals_mid_snapshot_leave_no_thread_stopped(tmp_path: Path, cache: Path) -> None:
    """SIGINT, SIGTERM and SIGKILL to the launcher's native snapshot of 200 threads at random
    points: its handlers note the signal and stop between threads (each released before the next),
    with the Python CLI's line and status (130); the target's threads all run on."""
    target = start(MANY_THREADS, ready="ready")
    try:
        assert_native_is_python(["backtrace", "-p", str(target.pid), "--tid", str(target.pid)], cache)
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "FASTUNWIND_NATIVE": "require"}
        outcomes = set()
        for number, signal_number in enumerate([signal.SIGINT, signal.SIGTERM, signal.SIGKILL] * 3):
            command = [str(LAUNCHER), "backtrace", "-p", str(target.pid), "-o", str(tmp_path / "out")]
            returncode, stderr = signal_mid_snapshot(command, target.pid, signal_number, 0.0002 * number, env)
            if returncode == 130:
                assert stderr == "fastunwind: interrupted\n"
            outcomes.add(returncode)
        assert outcomes - {0}, "no signal arrived during a snapshot"
    finally:
        stop(target)


# ---- core files --------------------------------------------------------------------------------

def assert_core_native_is_python(args: list[str], cache: Path, status: tuple[int, ...] = (0,)) -> bytes:
    """As assert_native_is_python, for `core`: the Python path's status one of `status` (2: a stack
    incomplete); the warnings (stderr) compared too. The warnings."""
    python = launch(args, cache, native="0")
    assert python.returncode in status, python.stderr
    native = launch(args, cache, native="require")
    assert (native.returncode, native.stdout, native.stderr) == (python.returncode, python.stdout, python.stderr), \
        native.stderr
    return native.stderr


@pytest.mark.parametrize("options", [[], ["--registers"], ["--json"]], ids=["text", "registers", "json"])
def test_core(gcore: tuple[Path, Path], options: list[str], cache: Path) -> None:
    _program, core = gcore
    assert_core_native_is_python(["core", *options, str(core)], cache)


def test_core_output_file(gcore: tuple[Path, Path], cache: Path, tmp_path: Path) -> None:
    _program, core = gcore
    assert_core_native_is_python(["core", str(core)], cache)
    for native, name in (("0", "python.json"), ("require", "native.json")):
        result = launch(["core", "--json", "-o", str(tmp_path / name), str(core)], cache, native=native)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert (tmp_path / "native.json").read_bytes() == (tmp_path / "python.json").read_bytes()


def test_core_replaced_program_exe_and_sysroot(gcore: tuple[Path, Path], cache: Path, tmp_path: Path) -> None:
    program, core = gcore
    sysroot = sysroot_of(core, tmp_path / "root")
    original = replaced_program(program, tmp_path)
    try:
        warnings = assert_core_native_is_python(["core", str(core)], cache, status=(0, 2))
        assert b"build-id" in warnings and b"not used" in warnings
        assert_core_native_is_python(["core", "--exe", str(original), str(core)], cache)
        assert_core_native_is_python(["core", "--sysroot", str(sysroot), str(core)], cache)
        (sysroot / str(program).lstrip("/")).unlink()
        warnings = assert_core_native_is_python(["core", "--sysroot", f"{sysroot}/", str(core)], cache, status=(0, 2))
        assert b"not found: not used" in warnings
    finally:
        shutil.copy2(original, program)


def test_a_truncated_core(gcore: tuple[Path, Path], cache: Path, tmp_path: Path) -> None:
    _program, core = gcore
    data = core.read_bytes()
    truncated = tmp_path / "truncated"
    for cut in (len(data) - 5 * 4096, len(data) * 3 // 4):
        truncated.write_bytes(data[:cut])
        python = launch(["core", str(truncated)], cache, native="0")
        if python.returncode == 1:  # an error (the notes cut): the Python CLI's
            assert_same_failure(["core", str(truncated)], cache)
        else:  # a warning, and the stacks the memory left allows
            assert b"truncated" in python.stderr
            assert_core_native_is_python(["core", str(truncated)], cache, status=(0, 2))


def test_unreadable_cores_are_the_python_clis(tmp_path: Path, cache: Path) -> None:
    not_core = tmp_path / "not-a-core"
    not_core.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 100)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for path in (not_core, tmp_path / "nothing", empty, tmp_path):
        assert_same_failure(["core", str(path)], cache)


def test_a_core_of_as_many_mapped_files_and_segments_as_allowed(tmp_path: Path, cache: Path) -> None:
    """FU_CORE_MAX_FILES mapped files, each a path of its own (their first 120 bytes alike) starting
    at a segment of its own (one warning each), as the Python path reads them. The launcher groups
    them by path and finds their segments without a scan per file: with one, its run of this core
    was a minute and more against the Python path's seconds; it is given 20 s, tens of times what it
    takes on a loaded machine (a hang detector, not a speed test)."""
    entries = [(0x10000000 + 0x2000 * i, 0x10000000 + 0x2000 * i + 0x1000, 0, b"/nonexistent/" + b"d" * 107 + b"/%d" % i)
               for i in range(65536)]  # FU_CORE_MAX_FILES (coredump.h)
    notes = (hostile_cores.note(hostile_cores.NT_PRSTATUS, hostile_cores.prstatus(42, 0x401000, 0x7FF100))
             + hostile_cores.note(hostile_cores.NT_FILE, hostile_cores.files_note(entries)))
    # e_phnum is 16 bits (0xffff would mean "more, in section 0"): the notes and 65,532 loads
    loads = [(start, end - start, b"", 5) for start, end, _, _ in entries[:0xfffc]]
    core = tmp_path / "core"
    core.write_bytes(hostile_cores.build(notes, loads))
    python = launch(["core", str(core)], cache, native="0")
    assert python.returncode == 2 and python.stderr.count(b": not found: not used\n") == 0xfffc, python.stderr[-300:]
    native = launch(["core", str(core)], cache, native="require", timeout=20)
    assert (native.returncode, native.stdout, native.stderr) == (python.returncode, python.stdout, python.stderr)


__all__ = ["blocked_threads", "gcore", "running"]  # fixtures of the other modules, used here by name


@pytest.mark.parametrize("mode", ["segv", "abort"])
def test_kernel_cores(gcore: tuple[Path, Path], mode: str, cache: Path, tmp_path: Path) -> None:
    """The kernel's core of the program crashing (a null pointer, abort()), its other threads in
    their hard frames: the launcher's output is the Python path's."""
    program, _core = gcore
    try:
        core = cores.kernel_core(program, mode, tmp_path)
    except cores.CoreUnavailable as error:
        pytest.skip(str(error))
    for options in ([], ["--json"]):
        assert_core_native_is_python(["core", *options, str(core)], cache, status=(0, 2))
