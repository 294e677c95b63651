"""Benchmark of `fastunwind synth` against `readelf -wF` on the same file, side by side in one run.

    .venv/bin/python -m benchmarks.bench_synth [--repeat N] [FILE...]
    make bench-synth

FILE defaults to libc (issue 23's target: synth of libc in at most 1 s) and libLLVM-14 (95k FDEs).
Each round runs, interleaved so that drift in the machine hits every side:
`python -m fastunwind synth FILE --mode missing -o /dev/null` and `--mode repair` (the check of every
FDE, the collection of the view, its `.debug_frame` encoding, parsing it back and printing it as
readelf does), `--mode repair --write-debug-file` (the same plus the ELF debug file) and
`readelf --debug-dump=frames-interp FILE > /dev/null` (which only evaluates and prints the file's
own rows). One untimed warm-up run each (page cache). Reported per command: best and median CPU
time (user + system, of that child alone: wait4) and its peak RSS, and synth's CPU time over
readelf's. Also, in this process, `synth.synthesize` alone (no interpreter start-up, no printing):
best CPU time. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBLLVM = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_SECONDS = 1.0  #: issue 23: synth of libc


def run_child(command: list[str]) -> tuple[float, int]:
    """CPU seconds (user + system) and peak RSS (KiB) of `command`, its output discarded."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": os.path.join(REPO, "src"), "LC_ALL": "C"})
    _pid, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def in_process(path: str, repeat: int) -> float:
    from fastunwind import synth

    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        synth.synthesize(path, "repair")
        best = min(best, time.process_time() - started)
    return best


def bench(path: str, repeat: int) -> None:
    fastunwind = [sys.executable, "-m", "fastunwind", "synth", path, "-o", os.devnull]
    with tempfile.TemporaryDirectory() as scratch:
        commands = {
            "synth --mode missing": fastunwind + ["--mode", "missing"],
            "synth --mode repair": fastunwind + ["--mode", "repair"],
            "synth --mode repair --write-debug-file": fastunwind + ["--mode", "repair", "--write-debug-file",
                                                                    os.path.join(scratch, "file.debug")],
            # -wN: not the debug file of the same build-id a -dbg package may install
            "readelf -wF": ["readelf", "-wN", "--debug-dump=frames-interp", path],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        rss: dict[str, int] = {}
        for command in commands.values():
            run_child(command)  # warm-up
        for _ in range(repeat):
            for name, command in commands.items():
                seconds, peak = run_child(command)
                times[name].append(seconds)
                rss[name] = max(rss.get(name, 0), peak)
    readelf = min(times["readelf -wF"])
    print(f"{path} ({os.path.getsize(path) / 1e6:.1f} MB), best of {repeat}, CPU time:")
    for name, samples in times.items():
        ratio = "" if name == "readelf -wF" else f"  {min(samples) / readelf:5.2f}x readelf"
        print(f"  {name:<40} best {min(samples):6.3f} s  median {statistics.median(samples):6.3f} s  "
              f"peak RSS {rss[name] / 1024:6.1f} MB{ratio}")
    alone = in_process(path, repeat)
    target = f" (issue 23: at most {TARGET_SECONDS:.0f} s)" if path == LIBC else ""
    print(f"  synth.synthesize(repair) in process: best {alone:.3f} s CPU{target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("files", nargs="*", default=[p for p in (LIBC, LIBLLVM) if os.path.exists(p)])
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} (shared: figures are CPU time)")
    for path in args.files:
        bench(path, args.repeat)


if __name__ == "__main__":
    main()
