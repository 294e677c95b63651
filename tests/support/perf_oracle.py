"""Record real perf.data files at test time and read them back with `perf script`, the oracle.

Recording needs perf and permission to open cpu-clock events on our own child (perf_event_paranoid
<= 2 suffices for a non-root user's own processes); tests skip with the reason otherwise.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

# A small workload: fork + exec of ls (FORK, EXIT, COMM exec, MMAP2 of a second process), then
# ~30-50 ms of shell arithmetic, about 300-500 samples at one per 0.1 ms of CPU time.
WORKLOAD = ["sh", "-c", "ls / >/dev/null; i=0; while [ $i -lt 25000 ]; do i=$((i+1)); done"]
SAMPLING = ["-e", "cpu-clock", "-c", "100000"]


def paranoid() -> str:
    try:
        return Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    except OSError:
        return "unknown"


def require_perf(tmp: Path) -> None:
    """Skip the calling test unless `perf record` works here."""
    perf = shutil.which("perf")
    if not perf:
        pytest.skip("perf is not installed (linux-perf)")
    probe = tmp / "probe.data"
    result = subprocess.run([perf, "record", "-q", *SAMPLING, "-o", str(probe), "--", "true"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0 or not probe.exists():
        pytest.skip(f"perf record is not permitted here (kernel.perf_event_paranoid = {paranoid()}): "
                    f"{result.stderr.strip()[:300]}")


def record(path: Path, extra: list[str], pipe: bool = False, command: list[str] = WORKLOAD) -> Path:
    """perf record EXTRA -o PATH (or -o - > PATH) -- COMMAND."""
    args = ["perf", "record", "-q", *extra]
    if pipe:
        with open(path, "wb") as out:
            subprocess.run([*args, "-o", "-", "--", *command], stdout=out, stderr=subprocess.PIPE, check=True,
                           stdin=subprocess.DEVNULL)
    else:
        subprocess.run([*args, "-o", str(path), "--", *command], capture_output=True, check=True,
                       stdin=subprocess.DEVNULL)
    return path


def perf_script(path: Path, args: list[str]) -> list[str]:
    result = subprocess.run(["perf", "script", "-i", str(path), "--ns", *args], capture_output=True, text=True,
                            check=True, stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    return [line for line in result.stdout.splitlines() if line.strip()]


_SAMPLE = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?:\[(?P<cpu>\d+)\]\s+)?"
                     r"(?P<sec>\d+)\.(?P<ns>\d{9}):\s+(?P<period>\d+)\s+(?P<ip>[0-9a-f]+)\s*$")


def _time(match: re.Match) -> int:
    return int(match["sec"]) * 1_000_000_000 + int(match["ns"])


def script_samples(path: Path, with_cpu: bool) -> list[tuple]:
    """(pid, tid, time, ip, period[, cpu]) per sample, in perf script's order."""
    fields = "comm,pid,tid,time,ip,period" + (",cpu" if with_cpu else "")
    out = []
    for line in perf_script(path, ["-F", fields, "--no-inline", "-G"]):
        m = _SAMPLE.match(line)
        assert m, f"unexpected perf script line: {line!r}"
        row = (int(m["pid"]), int(m["tid"]), _time(m), int(m["ip"], 16), int(m["period"]))
        out.append(row + ((int(m["cpu"]),) if with_cpu else ()))
    return out


_PREFIX = r"^\s*.*?\s+-?\d+/-?\d+\s+(?:\[\d+\]\s+)?(?P<sec>\d+)\.(?P<ns>\d{9}):\s+"
_MMAP = re.compile(_PREFIX + r"PERF_RECORD_MMAP (?P<pid>-?\d+)/(?P<tid>-?\d+): \[(?P<start>0x[0-9a-f]+)"
                   r"\((?P<len>0x[0-9a-f]+)\) @ (?P<pgoff>0x[0-9a-f]+|0)\]: (?P<prot>[rwx-]) (?P<name>.*)$")
_MMAP2 = re.compile(_PREFIX + r"PERF_RECORD_MMAP2 (?P<pid>-?\d+)/(?P<tid>-?\d+): \[(?P<start>0x[0-9a-f]+)"
                    r"\((?P<len>0x[0-9a-f]+)\) @ (?P<pgoff>0x[0-9a-f]+|0) (?:(?P<maj>[0-9a-f]+):(?P<min>[0-9a-f]+) "
                    r"(?P<ino>\d+) (?P<gen>\d+)|(?P<bid>[0-9a-f]+))\]: (?P<prot>[rwxps-]{4}) (?P<name>.*)$")
_COMM = re.compile(_PREFIX + r"PERF_RECORD_COMM(?P<exec> exec)?: (?P<comm>.*):(?P<pid>-?\d+)/(?P<tid>-?\d+)$")
_TASK = re.compile(_PREFIX + r"PERF_RECORD_(?P<kind>FORK|EXIT)\((?P<pid>-?\d+):(?P<tid>-?\d+)\):"
                   r"\((?P<ppid>-?\d+):(?P<ptid>-?\d+)\)$")


def script_events(path: Path) -> list[tuple]:
    """Samples and MMAP/MMAP2/COMM/FORK/EXIT records in perf script's delivery order, as tuples that
    events_as_tuples() also produces."""
    out = []
    for line in perf_script(path, ["--show-mmap-events", "--show-task-events", "-F", "comm,pid,tid,time,ip,period",
                                   "--no-inline", "-G"]):
        if "PERF_RECORD_" not in line:
            m = _SAMPLE.match(line)
            assert m, f"unexpected perf script line: {line!r}"
            out.append(("sample", int(m["pid"]), int(m["tid"]), _time(m), int(m["ip"], 16)))
        elif m := _MMAP2.match(line):
            out.append(("mmap2", int(m["pid"]), int(m["tid"]), _time(m), int(m["start"], 16), int(m["len"], 16),
                        int(m["pgoff"], 0), m["name"]))
        elif m := _MMAP.match(line):
            out.append(("mmap", int(m["pid"]), int(m["tid"]), _time(m), int(m["start"], 16), int(m["len"], 16),
                        int(m["pgoff"], 0), m["name"]))
        elif m := _COMM.match(line):
            out.append(("comm", int(m["pid"]), int(m["tid"]), _time(m), m["comm"], bool(m["exec"])))
        elif m := _TASK.match(line):
            out.append((m["kind"].lower(), int(m["pid"]), int(m["tid"]), int(m["ppid"]), int(m["ptid"]), _time(m)))
        else:
            raise AssertionError(f"unexpected perf script line: {line!r}")
    return out


def mmap2_details(path: Path) -> list[tuple]:
    """(maj, min, ino, generation, prot) of each MMAP2 record as perf script prints them."""
    out = []
    for line in perf_script(path, ["--show-mmap-events", "-F", "comm,pid,tid,time"]):
        if (m := _MMAP2.match(line)) and m["maj"] is not None:
            out.append((int(m["maj"], 16), int(m["min"], 16), int(m["ino"]), int(m["gen"]), m["prot"]))
    return out
