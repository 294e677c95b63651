"""End to end: `fastunwind perf-script -i X > /dev/null` against
`perf script --no-inline -F comm,tid,time,ip,sym,symoff,dso -i X > /dev/null`, whole processes.

    .venv/bin/python benchmarks/bench_perf_script.py [RECORDING.data] [--runs N] [--folded] [--json]

The two commands run interleaved (load from elsewhere on the machine hits both), after one untimed
warm-up of each (page cache, perf's build-id cache, our compact-table cache); best of N and median
are printed with the ratio perf script ÷ ours (above 1: we are faster). Ours runs from this
checkout's `src` with its bytecode cached under a temporary PYTHONPYCACHEPREFIX, as an installed
package runs (the development environment may set PYTHONDONTWRITEBYTECODE=1, which makes every start
compile the package). The default recording is .build/bench-unwind/recordings/hackbench-threads.data
(`make bench-unwind` records it). bench_unwind.py reuses `end_to_end` for its report.
"""

from __future__ import annotations

import argparse
import json
import os
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


def time_command(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    with open(os.devnull, "wb") as null:
        completed = subprocess.run(command, stdout=null, stderr=subprocess.PIPE, env=env, check=False)
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed ({completed.returncode}):\n"
                         f"{completed.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def ours_command(recording: str, extra: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """Our CLI from this checkout, and its environment (bytecode cached in a temporary directory)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench-perf-script-pycache-")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "src"), *filter(None, [env.get("PYTHONPATH")])])
    return [sys.executable, "-m", "fastunwind", "perf-script", "-i", recording, *(extra or [])], env


def end_to_end(recording: str, runs: int, extra: list[str] | None = None) -> dict[str, Any]:
    ours, env = ours_command(recording, extra)
    theirs = ["perf", "script", "--no-inline", "-F", PERF_SCRIPT_FIELDS, "-i", recording]
    time_command(ours, env)
    time_command(theirs, env)  # warm-up: page cache, perf's build-id cache lookups
    ours_s, theirs_s = [], []
    for _ in range(runs):
        ours_s.append(time_command(ours, env))
        theirs_s.append(time_command(theirs, env))
    return {"recording": recording, "ours_command": shlex.join(ours) + " > /dev/null",
            "perf_command": shlex.join(theirs) + " > /dev/null", "ours_seconds": ours_s, "perf_seconds": theirs_s,
            "ours_best": min(ours_s), "perf_best": min(theirs_s), "ours_median": statistics.median(ours_s),
            "perf_median": statistics.median(theirs_s), "ratio": min(theirs_s) / min(ours_s),
            "median_ratio": statistics.median(theirs_s) / statistics.median(ours_s)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recording", nargs="?", default=DEFAULT_RECORDING)
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each command (default 10)")
    parser.add_argument("--folded", action="store_true", help="time ours with --folded (perf's command unchanged)")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    arguments = parser.parse_args(argv)
    if arguments.runs < 1:
        parser.error("--runs must be at least 1")
    if not os.path.isfile(arguments.recording):
        parser.error(f"{arguments.recording}: no such recording (make bench-unwind records the default one)")
    extra = ["--folded"] if arguments.folded else None
    result = end_to_end(os.path.abspath(arguments.recording), arguments.runs, extra)
    result["load_average"] = os.getloadavg()
    if arguments.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return 0
    print(f"ours: {result['ours_command']}\nperf: {result['perf_command']}")
    print(f"best of {arguments.runs}: ours {1e3 * result['ours_best']:.1f} ms, perf script "
          f"{1e3 * result['perf_best']:.1f} ms, perf script ÷ ours = {result['ratio']:.2f}x")
    print(f"median:     ours {1e3 * result['ours_median']:.1f} ms, perf script "
          f"{1e3 * result['perf_median']:.1f} ms, perf script ÷ ours = {result['median_ratio']:.2f}x")
    print(f"load average {result['load_average'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
