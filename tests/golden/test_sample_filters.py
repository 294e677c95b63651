"""perf script's sample filters (--pid, --tid, --cpu, --time, --comm) against perf script's own on
the same recording: the same samples kept (tid and time of each), for perf-script and report; a
filter that selects nothing is one line and a failure."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.paths import SRC

_HEAD = re.compile(r"^\S.*?\s(-?\d+)\s+(\d+\.\d+):", re.MULTILINE)


def ours(verb: str, *args: str) -> subprocess.CompletedProcess:
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
           **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}}
    return subprocess.run([sys.executable, "-m", "fastunwind", verb, *args], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL)


def kept(text: str) -> list[tuple[int, str]]:
    return [(int(tid), time) for tid, time in _HEAD.findall(text)]


def perfs(data: str, *args: str) -> list[tuple[int, str]]:
    text = subprocess.run(["perf", "script", "-F", "comm,tid,time", "-i", data, *args], capture_output=True,
                          text=True, check=True).stdout
    return [(int(tid), time) for tid, time in re.findall(r"^\s*\S.*?\s(-?\d+)\s+(\d+\.\d+):", text, re.MULTILINE)]


@pytest.fixture(scope="module")
def hackbench(perf_recordings) -> str:
    return str(perf_recordings.get("hackbench-threads").data_file)


def recorded_pids(data: str) -> list[int]:
    """The process ids of the recording's samples, as perf script prints them."""
    text = subprocess.run(["perf", "script", "-F", "pid", "-i", data], capture_output=True, text=True,
                          check=True).stdout
    return sorted({int(pid) for pid in text.split()})


def test_every_filter_keeps_perfs_samples(hackbench):
    everything = perfs(hackbench)
    tids = sorted({tid for tid, _time in everything})
    pid = recorded_pids(hackbench)[0]  # not the lowest tid: pids wrap (pid_max), a thread's may be lower
    times = sorted(time for _tid, time in everything)
    middle = f"{times[len(times) // 3]},{times[2 * len(times) // 3]}"
    in_the_middle = next(tid for tid, time in everything if time == times[len(times) // 2])
    for args in (["--tid", f"{tids[0]},{tids[-1]}"], ["--pid", str(pid)], ["--time", middle], ["--time", f",{times[len(times) // 2]}"], ["--comms", "hackbench"],
                 ["--tid", str(in_the_middle), "--time", middle]):
        result = ours("perf-script", "-i", hackbench, *args)
        expected = perfs(hackbench, *args)
        assert result.returncode == 0 and expected, (args, result.stderr)
        assert kept(result.stdout) == expected, args
        report = json.loads(ours("report", "-i", hackbench, "--json", *args).stdout)
        assert report["samples"] == len(expected), args


def test_a_filter_that_selects_nothing_is_an_error(hackbench):
    for args in (["--comm", "no-such-command"], ["--time", "1,2"], ["--pid", "1"]):
        for verb in ("perf-script", "report"):
            result = ours(verb, "-i", hackbench, *args)
            assert result.returncode == 1 and result.stdout == ""
            assert result.stderr.splitlines() == [f"fastunwind: error: {hackbench}: no samples selected by the filters"]


#: perf script's --time percentages (tools/perf/Documentation/perf-script.txt, util/time-utils.c)
PERCENTAGES = ("10%/2", "0%-10%", "10%/1,10%/3", "0%-10%,30%-40%", "50%", "33.3%/3", "0%-100%", "25%/4,")
BAD_PERCENTAGES = ("10%/2x", "110%", "10%,20%", "0%-", "10%/1,0%-10%", "50%,", "5%/0", "abc%")


def test_time_percentages_keep_perfs_samples(hackbench):
    for percentages in PERCENTAGES:
        expected = perfs(hackbench, "--time", percentages)
        assert expected, percentages
        assert kept(ours("perf-script", "-i", hackbench, "--time", percentages).stdout) == expected, percentages
        report = json.loads(ours("report", "-i", hackbench, "--json", "--time", percentages).stdout)
        assert report["samples"] == len(expected), percentages


def test_time_percentages_perf_refuses_are_refused(hackbench):
    for percentages in BAD_PERCENTAGES:
        refused = subprocess.run(["perf", "script", "-i", hackbench, "--time", percentages], capture_output=True,
                                 text=True)
        assert refused.stdout == "" and "Invalid time string" in refused.stderr, percentages
        result = ours("perf-script", "-i", hackbench, "--time", percentages)
        assert result.returncode == 2 and result.stdout == "", percentages
        assert result.stderr == f"fastunwind: error: time {percentages!r}: percentages of the recording are a%/n " \
            "(the nth slice of a%), a%-b% or a%, several separated by commas, each within 0%-100%\n"


def test_time_percentages_need_the_recordings_sample_times(hackbench):
    """A pipe's recording has no HEADER_SAMPLE_TIME: perf refuses percentages there, and so do we."""
    piped = subprocess.run(["perf", "inject", "-i", hackbench, "-o", "-"], capture_output=True, check=True).stdout
    refused = subprocess.run(["perf", "script", "-i", "-", "--time", "10%/2"], input=piped, capture_output=True)
    assert refused.stdout == b"" and b"no first/last sample time" in refused.stderr
    for verb in ("perf-script", "report"):
        env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)}
        result = subprocess.run([sys.executable, "-m", "fastunwind", verb, "-i", "-", "--time", "10%/2"],
                                input=piped, capture_output=True, env=env)
        assert result.returncode == 1 and result.stdout == b""
        assert b"no first/last sample time in the recording" in result.stderr
        assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("args, message", [(["--time", "10%/2x"], "percentages of the recording"),
                                           (["--cpu", "2-1"], "cpu list"), (["--pid", "x"], "pid list"),
                                           (["--time", "1.0123456789,"], "sec.nsec")])
def test_bad_filters_are_one_line(hackbench, args, message):
    result = ours("report", "-i", hackbench, *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.fixture(scope="module")
def with_cpus(perf_recordings, tmp_path_factory) -> str:
    """The C workload recorded with each sample's CPU (perf record --sample-cpu)."""
    data = tmp_path_factory.mktemp("filters") / "c-cpus.data"
    subprocess.run(["perf", "record", "-q", "--sample-cpu", "-e", "cpu-clock", "-F", "1000", "--call-graph", "dwarf",
                    "-o", str(data), "--", *perf_recordings.get("c").command], check=True, capture_output=True)
    return str(data)


def test_cpu_lists_keep_perfs_samples(with_cpus, hackbench):
    cpus = subprocess.run(["perf", "script", "-F", "cpu", "-i", with_cpus], capture_output=True, text=True,
                          check=True).stdout.split()
    first = cpus[0].strip("[]").lstrip("0") or "0"
    for args in (["--cpu", first], ["--cpu", "0-1"], ["--cpu", "1,0"]):
        expected = perfs(with_cpus, *args)
        assert kept(ours("perf-script", "-i", with_cpus, *args).stdout) == expected and expected, args
    # without CPUs in the samples perf refuses --cpu ("File does not contain CPU events"), and so do we
    result = ours("report", "-i", hackbench, "--cpu", "0")
    assert result.returncode == 1 and "do not record their CPU" in result.stderr
    assert len(result.stderr.splitlines()) == 1
