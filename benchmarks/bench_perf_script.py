"""End to end: `fastunwind perf-script -i X > /dev/null` against
`perf script --no-inline -F comm,tid,time,ip,sym,symoff,dso -i X > /dev/null`, whole processes:
time and peak RSS; with --report, `fastunwind report -i X` against `perf report --stdio -i X`; with
--srcline, both with inline frames and source lines (`--inline -F +srcline` against perf script's
`--inline -F ...,srcline`).

    .venv/bin/python -m benchmarks.bench_perf_script [RECORDING.data ...] [--runs N] [--folded | --report | --srcline] [--json]
    make bench-perf-script   # records the 50 MB, 400 MB and 2 GB recordings first, then this

Each command runs under `/usr/bin/time -f %M`, whose peak RSS (KiB) of the process is reported (the
median over the runs; /usr/bin/time forks a process of its own of ~2 MiB, so the figure is the
command's, not this harness's), and its CPU time (user + system of all its threads, from
`getrusage(RUSAGE_CHILDREN)`: on a machine loaded by other work the wall times stretch, the CPU
times much less); several recordings give one table row each.

The two commands run interleaved (load from elsewhere on the machine hits both), after one untimed
warm-up of each (page cache, perf's build-id cache, our compact-table cache); best of N and median
are printed with the ratio perf script ÷ ours (above 1: we are faster). Ours is the venv's
`fastunwind` command, as a user runs it (the launcher, native/cli: `perf-script -i X` served in C
once the warm-up's Python path has cached the tables; other command lines are its Python CLI's),
the Python CLI from this checkout's `src` with its bytecode cached under a temporary
PYTHONPYCACHEPREFIX, as an installed package runs (the development environment may set
PYTHONDONTWRITEBYTECODE=1, which makes every start compile the package). The default recording is .build/bench-unwind/recordings/hackbench-threads.data
(`make bench-unwind` records it). bench_unwind.py reuses `end_to_end` for its report.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RECORDING = os.path.join(REPO, ".build", "bench-unwind", "recordings", "hackbench-threads.data")
PERF_SCRIPT_FIELDS = "comm,tid,time,ip,sym,symoff,dso"


PEAK_RSS: dict[str, list[int]] = {}  #: KiB per command line, one per run of time_command
CPU_SECONDS: dict[str, list[float]] = {}  #: user + system seconds per command line, one per run


def time_command(command: list[str], env: dict[str, str]) -> float:
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        wrapped = ["/usr/bin/time", "-f", "%M", "-o", rss.name, *command] if os.path.exists("/usr/bin/time") \
            else command
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        with open(os.devnull, "wb") as null:
            completed = subprocess.run(wrapped, stdout=null, stderr=subprocess.PIPE, env=env, check=False)
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        CPU_SECONDS.setdefault(shlex.join(command), []).append(
            after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if completed.returncode != 0:
            raise SystemExit(f"{shlex.join(command)} failed ({completed.returncode}):\n"
                             f"{completed.stderr.decode(errors='replace')[-2000:]}")
        text = rss.read().strip().splitlines()
        if wrapped is not command and text and text[-1].isdigit():
            PEAK_RSS.setdefault(shlex.join(command), []).append(int(text[-1]))
    return elapsed


def ours_command(recording: str, extra: list[str] | None = None, verb: str = "perf-script"
                 ) -> tuple[list[str], dict[str, str]]:
    """Our command (the venv's launcher, whose Python CLI is this checkout's), and its environment
    (bytecode cached in a temporary directory)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench-perf-script-pycache-")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "src"), *filter(None, [env.get("PYTHONPATH")])])
    command = os.path.join(os.path.dirname(sys.executable), "fastunwind")
    return [command, verb, "-i", recording, *(extra or [])], env


def end_to_end(recording: str, runs: int, extra: list[str] | None = None, report: bool = False,
               srcline: bool = False) -> dict[str, Any]:
    ours, env = ours_command(recording, extra, "report" if report else "perf-script")
    theirs = (["perf", "report", "--stdio", "-i", recording] if report
              else ["perf", "script", "--inline", "-F", PERF_SCRIPT_FIELDS + ",srcline", "-i", recording] if srcline
              else ["perf", "script", "--no-inline", "-F", PERF_SCRIPT_FIELDS, "-i", recording])
    time_command(ours, env)
    time_command(theirs, env)  # warm-up: page cache, perf's build-id cache lookups
    ours_s, theirs_s = [], []
    for _ in range(runs):
        ours_s.append(time_command(ours, env))
        theirs_s.append(time_command(theirs, env))
    ours_rss, theirs_rss = PEAK_RSS.get(shlex.join(ours), [])[-runs:], PEAK_RSS.get(shlex.join(theirs), [])[-runs:]
    ours_cpu, theirs_cpu = CPU_SECONDS[shlex.join(ours)][-runs:], CPU_SECONDS[shlex.join(theirs)][-runs:]
    return {"recording": recording, "bytes": os.path.getsize(recording),
            "ours_peak_rss_kib": statistics.median(ours_rss) if ours_rss else None,
            "perf_peak_rss_kib": statistics.median(theirs_rss) if theirs_rss else None,
            "ours_command": shlex.join(ours) + " > /dev/null",
            "perf_command": shlex.join(theirs) + " > /dev/null", "ours_seconds": ours_s, "perf_seconds": theirs_s,
            "ours_best": min(ours_s), "perf_best": min(theirs_s), "ours_median": statistics.median(ours_s),
            "perf_median": statistics.median(theirs_s), "ratio": min(theirs_s) / min(ours_s),
            "median_ratio": statistics.median(theirs_s) / statistics.median(ours_s),
            "ours_cpu_seconds": ours_cpu, "perf_cpu_seconds": theirs_cpu, "ours_cpu_best": min(ours_cpu),
            "perf_cpu_best": min(theirs_cpu), "cpu_ratio": min(theirs_cpu) / min(ours_cpu)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recording", nargs="*", default=[DEFAULT_RECORDING])
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each command (default 10)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--folded", action="store_true", help="time ours with --folded (perf's command unchanged)")
    mode.add_argument("--report", action="store_true", help="fastunwind report against perf report --stdio")
    mode.add_argument("--srcline", action="store_true",
                      help="inline frames and source lines: --inline -F +srcline against perf script's")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    parser.add_argument("--table", action="store_true", help="end with a Markdown table (always for several)")
    arguments = parser.parse_args(argv)
    if arguments.runs < 1:
        parser.error("--runs must be at least 1")
    for recording in arguments.recording:
        if not os.path.isfile(recording):
            parser.error(f"{recording}: no such recording (make bench-unwind records the default one, "
                         "make bench-perf-script the big ones)")
    extra = ["--folded"] if arguments.folded else ["--inline", "-F", "+srcline"] if arguments.srcline else None
    peer = "perf report" if arguments.report else "perf script"
    results = []
    for recording in arguments.recording:
        result = end_to_end(os.path.abspath(recording), arguments.runs, extra, arguments.report, arguments.srcline)
        result["load_average"] = os.getloadavg()
        results.append(result)
        if arguments.json:
            continue
        print(f"ours: {result['ours_command']}\nperf: {result['perf_command']}")
        print(f"best of {arguments.runs}: ours {1e3 * result['ours_best']:.1f} ms, {peer} "
              f"{1e3 * result['perf_best']:.1f} ms, {peer} ÷ ours = {result['ratio']:.2f}x")
        print(f"median:     ours {1e3 * result['ours_median']:.1f} ms, {peer} "
              f"{1e3 * result['perf_median']:.1f} ms, {peer} ÷ ours = {result['median_ratio']:.2f}x")
        print(f"CPU (user + system, best): ours {1e3 * result['ours_cpu_best']:.1f} ms, {peer} "
              f"{1e3 * result['perf_cpu_best']:.1f} ms, {peer} ÷ ours = {result['cpu_ratio']:.2f}x")
        if result["ours_peak_rss_kib"] is not None:
            print(f"peak RSS (median): ours {result['ours_peak_rss_kib'] / 1024:.0f} MiB, {peer} "
                  f"{result['perf_peak_rss_kib'] / 1024:.0f} MiB")
        print(f"load average {result['load_average'][0]:.2f}\n", flush=True)
    if arguments.json:
        json.dump(results if len(results) > 1 else results[0], sys.stdout, indent=1)
        print()
        return 0
    if len(results) > 1 or arguments.table:
        print(f"| recording | size | {peer} | fastunwind | perf ÷ ours (best of {arguments.runs}, median) "
              "| CPU perf ÷ ours | peak RSS perf / ours |")
        print("|---|---|---|---|---|---|---|")
        for r in results:
            rss = (f"{r['perf_peak_rss_kib'] / 1024:.0f} / {r['ours_peak_rss_kib'] / 1024:.0f} MiB"
                   if r["ours_peak_rss_kib"] is not None else "n/a")
            print(f"| {os.path.basename(r['recording'])} | {r['bytes'] / 1e6:.0f} MB | {r['perf_best']:.2f} s "
                  f"| {r['ours_best']:.3f} s | **{r['ratio']:.1f}x** ({r['median_ratio']:.1f}x) "
                  f"| {r['cpu_ratio']:.1f}x ({1e3 * r['perf_cpu_best']:.0f} / {1e3 * r['ours_cpu_best']:.0f} ms) | {rss} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
