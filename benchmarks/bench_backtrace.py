"""Every thread's stack of a live process, end to end: `fastunwind backtrace -p PID` against
`eu-stack -p PID` and `gdb -batch -ex 'thread apply all bt' -p PID`, on the same process
(workloads/live/many_threads.c: 64 threads ~40 frames deep, built here without frame pointers),
and how long each thread is stopped by ours.

    .venv/bin/python -m benchmarks.bench_backtrace [--threads 64] [--depth 40] [--runs 5]

Whole processes, interleaved, after one untimed warm-up of each (page cache, our compact-table
cache); the figure is the best of N of user + system CPU time of the command and its children
(getrusage(RUSAGE_CHILDREN)), with wall time beside it, the ratio peer ÷ ours (above 1: we are
faster) and the median peak RSS (`/usr/bin/time -f %M`). Ours is the venv's `fastunwind` command, as
a user runs it (the launcher, native/cli: served in C once the warm-up's Python path has cached the
modules' tables), and beside it the same command's Python path (FASTUNWIND_NATIVE=0, through
/usr/bin/env), its bytecode cached. The stop time comes from
`fastunwind.backtrace` in this process (live.h: PTRACE_INTERRUPT to PTRACE_DETACH, per thread).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "workloads" / "live" / "many_threads.c"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU s, wall s, peak RSS KiB) of one run; the RSS from /usr/bin/time -f %M, the process's own
    (time's ~2 MiB fork is not counted in it)."""
    cpu, wall = children_cpu(), time.perf_counter()
    with tempfile.NamedTemporaryFile("r") as rss:
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env, check=True)
        peak = int(rss.read().split()[-1])
    return children_cpu() - cpu, time.perf_counter() - wall, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--depth", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        binary = Path(scratch) / "many_threads"
        subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-pthread", "-o", str(binary), str(PROGRAM)], check=True)
        target = subprocess.Popen([str(binary), str(args.threads), str(args.depth)], stdout=subprocess.PIPE, text=True)
        try:
            assert target.stdout is not None and target.stdout.readline().strip() == "ready"
            pid = str(target.pid)
            env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PYTHONPYCACHEPREFIX=str(Path(scratch) / "pycache"))
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            command = str(Path(sys.executable).parent / "fastunwind")  # the venv's: the launcher
            commands = {
                "fastunwind backtrace -p": [command, "backtrace", "-p", pid],
                "fastunwind backtrace -p (its Python path, FASTUNWIND_NATIVE=0)": [
                    "/usr/bin/env", "FASTUNWIND_NATIVE=0", command, "backtrace", "-p", pid],
                "eu-stack -p": ["eu-stack", "-p", pid],
                "gdb -batch 'thread apply all bt'": ["gdb", "-batch", "-nx", "-ex", "thread apply all bt", "-p", pid],
            }
            times: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
            for command in commands.values():
                run_once(command, env)
            for _ in range(args.runs):
                for name, command in commands.items():
                    times[name].append(run_once(command, env))
            sys.path.insert(0, str(REPO / "src"))
            import fastunwind

            snapshot = fastunwind.backtrace(target.pid)
            frames = sum(len(thread.frames) for thread in snapshot.threads)
            stopped = [thread.stopped_ns / 1000 for thread in snapshot.threads]
        finally:
            target.kill()
            target.wait()
    ours = min(cpu for cpu, _, _ in times["fastunwind backtrace -p"])
    print(f"{args.threads} threads, {frames} frames in all; best of {args.runs} runs (CPU time of the command and "
          f"its children; wall time beside it; peak RSS: median)")
    print("| command | CPU s | wall s | ratio (CPU) peer ÷ ours | peak RSS MiB |")
    print("|---|---|---|---|---|")
    for name, measured in times.items():
        cpu = min(c for c, _, _ in measured)
        wall = min(w for _, w, _ in measured)
        rss = statistics.median(r for _, _, r in measured) / 1024
        print(f"| `{name}` | {cpu:.3f} | {wall:.3f} | {cpu / ours:.1f}x | {rss:.1f} |")
    print(f"each thread stopped (fastunwind.backtrace): median {statistics.median(stopped):.0f} µs, "
          f"max {max(stopped):.0f} µs; the whole process never stopped at once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
