"""Benchmark of the CLI's start-up: short commands on a small file, whole processes, as a script or an
editor runs them in a loop.

    .venv/bin/python -m benchmarks.bench_startup [--runs N] [--against CHECKOUT] [--instructions] [FILE]

Each command is run through the venv's `fastunwind` launcher (which hands it to the Python CLI),
on FILE (default /usr/bin/true, 92 FDEs): `table` (readelf's format), `table --summary`, `check`,
`lookup` of FILE's first FDE's first address, and the floors `python -c pass` and
`python -c 'import argparse'` of the same interpreter. `--against` runs the same commands with
that checkout's launcher (its own venv, its own Python code), interleaved with ours round by
round, so that load from elsewhere hits both. Every process runs with its own bytecode cache under
a temporary PYTHONPYCACHEPREFIX (warmed by one untimed run), as an installed package runs from
cached bytecode; the development environment may set PYTHONDONTWRITEBYTECODE=1, which would
compile the package on every start. Reported per command: the median and best wall time of
`--runs` runs; with `--instructions`, also the instructions of one run (the launcher and the
interpreter it becomes) under valgrind's callgrind, which load from elsewhere does not change.
Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILE = "/usr/bin/true"


def first_fde_address(path: str) -> str:
    """The first address of the first FDE of `path`'s unwind table, in hex."""
    from fastunwind.cfi import UnwindInfo

    for section in UnwindInfo.open(path, strict=False).sections:
        for fde in section.fdes():
            return hex(fde.pc_begin)
    raise SystemExit(f"{path}: no FDEs")


def commands(checkout: str, path: str, address: str) -> dict[str, list[str]]:
    """Each timed command line, run with `checkout`'s venv."""
    launcher = os.path.join(checkout, ".venv", "bin", "fastunwind")
    python = os.path.join(checkout, ".venv", "bin", "python")
    return {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import argparse'": [python, "-c", "import argparse"],
        "table FILE": [launcher, "table", path],
        "table --summary FILE": [launcher, "table", "--summary", path],
        "check FILE": [launcher, "check", path],
        f"lookup FILE {address}": [launcher, "lookup", path, address],
    }


def environment(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "FASTUNWIND_NATIVE")}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def wall(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    # check's 2 (an undecided FDE) and lookup's 1 are answers, not failures: the output is not needed
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def instructions(command: list[str], env: dict[str, str]) -> int:
    """Instructions of one run of `command` and of the programs it execs (callgrind)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--trace-children=yes",
                           *command], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    counts = re.findall(r"Collected : (\d+)", done.stderr)
    if not counts:
        raise SystemExit(f"callgrind counted nothing for {command}:\n{done.stderr[-2000:]}")
    return sum(int(count) for count in counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", default=DEFAULT_FILE)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--against", metavar="CHECKOUT", help="another checkout, timed interleaved with this one")
    parser.add_argument("--instructions", action="store_true", help="also count one run's instructions (callgrind)")
    args = parser.parse_args()
    address = first_fde_address(args.file)
    checkouts = {"this": REPO, **({"against": os.path.abspath(args.against)} if args.against else {})}
    scratch = tempfile.mkdtemp(prefix="bench-startup-pycache-")
    envs = {side: environment(os.path.join(scratch, side)) for side in checkouts}
    lines = {side: commands(checkout, args.file, address) for side, checkout in checkouts.items()}
    times: dict[tuple[str, str], list[float]] = {}
    print(f"load average at start: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    for name in lines["this"]:
        for side in checkouts:
            wall(lines[side][name], envs[side])  # warm-up: the bytecode cache, the page cache
        for _ in range(args.runs):
            for side in checkouts:
                times.setdefault((name, side), []).append(wall(lines[side][name], envs[side]))
    print(f"load average at end: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    counted = {(name, side): instructions(lines[side][name], envs[side])
               for name in lines["this"] for side in checkouts} if args.instructions else {}
    sides = list(checkouts)
    heads = [f"{side}: median (best) ms" for side in sides] + [f"{side}: instructions" for side in sides if counted]
    print(f"| command ({args.file}, {args.runs} runs) | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for name in lines["this"]:
        cells = []
        for side in sides:
            samples = times[(name, side)]
            cells.append(f"{statistics.median(samples) * 1e3:.1f} ({min(samples) * 1e3:.1f})")
        cells += [f"{counted[(name, side)] / 1e6:.1f}M" for side in sides if counted]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
