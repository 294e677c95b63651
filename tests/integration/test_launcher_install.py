"""`pip install` of fastunwind makes the launcher (native/cli) the `fastunwind` command: a wheel is
built from this checkout and installed into a folder of the test's (`pip install --target`), and
its `fastunwind` is the ELF program, which serves `backtrace -p` itself (FASTUNWIND_NATIVE=require)
and hands a command line it does not serve to `fastunwind-python`, the Python CLI pip installed
beside it with this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder a wheel of this checkout was installed into (its commands in bin/)."""
    wheels, target = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("installed")
    # the build's requirements (pyproject.toml) come from the package index into pip's isolated
    # build environment; the C objects of the checkout's last build are reused
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO_ROOT)],
                           capture_output=True, text=True, timeout=1200)
    if built.returncode != 0:
        lines = [line for line in built.stderr.splitlines() if line.strip()]
        if any("Could not find a version" in line or "NewConnectionError" in line for line in lines):
            pytest.skip(f"the wheel's build requirements cannot be installed (offline?): {lines[-1][:200]}")
        pytest.fail(f"pip wheel failed: {built.stderr[-2000:]}")
    (wheel,) = wheels.glob("fastunwind-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    return target


def run(installed: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if k != "FASTUNWIND_NATIVE"}
    environment.update(PYTHONPATH=str(installed), **env)  # the installed package, not the checkout's
    return subprocess.run([str(installed / "bin" / "fastunwind"), *args], capture_output=True, env=environment,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_the_command_is_the_launcher(installed: Path) -> None:
    assert (installed / "bin" / "fastunwind").read_bytes()[:4] == b"\x7fELF"
    script = (installed / "bin" / "fastunwind-python").read_text()
    assert script.splitlines()[0] == f"#!{sys.executable}"


def test_a_served_command_starts_no_python(installed: Path, tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.2)  # sleep has run its startup: its stack is the same for both runs
        cache = str(tmp_path / "cache")
        python = run(installed, ["backtrace", "-p", str(sleeper.pid)], XDG_CACHE_HOME=cache, FASTUNWIND_NATIVE="0")
        native = run(installed, ["backtrace", "-p", str(sleeper.pid)], XDG_CACHE_HOME=cache,
                     FASTUNWIND_NATIVE="require")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert python.returncode == 0 and b"sleep" in python.stdout
    assert (native.returncode, native.stdout, native.stderr) == (0, python.stdout, python.stderr)


def test_what_it_does_not_serve_runs_the_installed_python_cli(installed: Path) -> None:
    """The installed script, not the interpreter the launcher was built with, runs the Python CLI:
    a wrapper in its place says so on stderr."""
    script = installed / "bin" / "fastunwind-python"
    real = script.with_name("fastunwind-python.real")
    script.rename(real)
    script.write_text(f'#!/bin/sh\necho "via {script.name}" >&2\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    try:
        launched = run(installed, ["--version"])
        refused = run(installed, ["--version"], FASTUNWIND_NATIVE="require")
    finally:
        real.replace(script)
    expected = subprocess.run([sys.executable, "-m", "fastunwind", "--version"], capture_output=True,
                              env={**os.environ, "PYTHONPATH": str(installed)})
    assert (launched.returncode, launched.stdout) == (0, expected.stdout) and expected.stdout.startswith(b"fastunwind ")
    assert launched.stderr == b"via fastunwind-python\n"
    assert refused.returncode == 125 and refused.stdout == b""
