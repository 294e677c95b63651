"""scripts/record_workloads.py: how it tells "perf may not record here" and "no perf" apart, with a
fake perf on PATH printing what perf 6.1 prints in each case."""
from __future__ import annotations

import os
import stat

import pytest

from scripts import record_workloads

# perf 6.1 as an unprivileged user with kernel.perf_event_paranoid=3 (Debian's default).
PARANOID_ERROR = """\
Error:
Access to performance monitoring and observability operations is limited.
Consider adjusting /proc/sys/kernel/perf_event_paranoid setting to open
access to performance monitoring and observability operations for processes
without CAP_PERFMON, CAP_SYS_PTRACE or CAP_SYS_ADMIN Linux capability.
perf_event_paranoid setting is 3:
"""
NO_SYSCALL_ERROR = "Error:\nThe sys_perf_event_open() syscall returned with 38 (Function not implemented) for event (cpu-clock).\n"


@pytest.fixture
def fake_perf(tmp_path, monkeypatch):
    def install(stderr: str, status: int) -> None:
        script = tmp_path / "bin" / "perf"
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"#!/bin/sh\ncat >&2 <<'END'\n{stderr}END\nexit {status}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return install


def test_not_permitted(fake_perf, tmp_path, capsys):
    fake_perf(PARANOID_ERROR, 255)
    problem = record_workloads.perf_problem(tmp_path / "out")
    assert problem.exit_status == record_workloads.EXIT_PERF_NOT_PERMITTED == 77
    assert "sysctl kernel.perf_event_paranoid=1" in problem.message and "root" in problem.message
    assert record_workloads.main([str(tmp_path / "out")]) == 77
    assert "sudo sysctl kernel.perf_event_paranoid=1" in capsys.readouterr().err


def test_perf_event_open_missing(fake_perf, tmp_path):
    fake_perf(NO_SYSCALL_ERROR, 255)
    problem = record_workloads.perf_problem(tmp_path)
    assert problem.exit_status == record_workloads.EXIT_PERF_UNAVAILABLE == 69
    assert "perf_event_open is not available" in problem.message


def test_perf_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = record_workloads.perf_problem(tmp_path)
    assert problem.exit_status == 69 and "linux-perf" in problem.message


def test_unknown_workload_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as raised:
        record_workloads.main(["/nonexistent", "--only", "c,nosuch"])
    assert raised.value.code == 2 and "nosuch" in capsys.readouterr().err


def test_missing_tool_skips_the_workload(tmp_path, monkeypatch):
    workload = record_workloads.Workload("fake", "needs a tool that is not there", ("no-such-tool-xyz",),
                                         lambda settings: ["no-such-tool-xyz"], "apt-get install xyz")
    recording = record_workloads.record(workload, tmp_path, record_workloads.Settings(build_dir=tmp_path))
    assert recording.status == "skipped" and recording.reason == "no-such-tool-xyz not found (apt-get install xyz)"
