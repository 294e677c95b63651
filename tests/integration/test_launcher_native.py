"""The launcher's native `backtrace -p` (native/cli) against the Python path, byte for byte: on
real processes (a program whose threads are held in hard frames, Debian's python3 with its
extension modules, a deleted program read through map_files, a program path and a thread name
that are not UTF-8), in text, --registers, --json, --tid and -o; FASTUNWIND_NATIVE=require proves
the launcher served each one itself. Every bad input (no such process, a zombie, a kernel thread,
a thread of another process, permission denied, already traced) gives the Python CLI's one line and
status, and the target runs on. The caches are a directory of the test's: the Python path's first
run fills them, as a user's first run does."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_backtrace_live import PROGRAM, assert_left_running, sigstop, start, stop, thread_states
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
    return subprocess.run([str(LAUNCHER), *args], capture_output=True, env=env, stdin=subprocess.DEVNULL, timeout=120,
                          **kwargs)  # type: ignore[call-overload]


def assert_native_is_python(args: list[str], cache: Path) -> bytes:
    """The Python path's output (run first: it fills the caches), then the launcher's own (required
    native), identical: stdout, stderr, status. The launcher's stdout."""
    python = launch(args, cache, native="0")
    assert python.returncode == 0, python.stderr
    native = launch(args, cache, native="require")
    assert native.stderr == python.stderr, native.stderr
    assert (native.returncode, native.stdout) == (python.returncode, python.stdout)
    return native.stdout


@pytest.fixture(scope="module")
def blocked_threads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    binary = tmp_path_factory.mktemp("native") / "blocked_threads"
    subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-pthread", "-o", str(binary), str(PROGRAM)], check=True)
    process = start([str(binary)], ready="ready")
    sigstop(process.pid)  # every run sees the same state (the leaf thread spins)
    yield process.pid
    stop(process)


@pytest.mark.parametrize("options", [[], ["--registers"], ["--json"], ["--json", "--registers"]],
                         ids=["text", "registers", "json", "json-registers"])
def test_blocked_threads(blocked_threads: int, options: list[str], cache: Path) -> None:
    out = assert_native_is_python(["backtrace", "-p", str(blocked_threads), *options], cache)
    assert b"recurse" in out and b"on_usr1" in out
    assert set(thread_states(blocked_threads).values()) == {"T"}  # the fixture's SIGSTOP, nothing else


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


@pytest.fixture()
def running() -> Iterator[subprocess.Popen[str]]:
    process = start(["python3", "-c", "import threading, time\n"
                     "[threading.Thread(target=time.sleep, args=(1000,), daemon=True).start() for _ in range(4)]\n"
                     "print('ready', flush=True)\ntime.sleep(1000)"], ready="ready")
    yield process
    stop(process)


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
