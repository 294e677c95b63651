"""Benchmark of `fastunwind core` against `eu-stack --core` and `gdb -batch -ex 'thread apply all bt'`
on the same core file, side by side in one run.

    .venv/bin/python -m benchmarks.bench_core [--repeat N] [--threads N] [CORE --exe EXE]

Without CORE, it builds workloads/live/many_threads.c (gcc -O2 -fomit-frame-pointer; the process
benchmarks/bench_backtrace.py snapshots live), runs it with `--threads` threads (default 64) each
`--depth` frames deep (default 40) in a recursion, blocked in pause(), and takes gdb's gcore of it. Each round runs the three whole processes interleaved (one untimed warm-up
each): `fastunwind core CORE`, `eu-stack --core=CORE -e EXE`, `gdb -batch -nx -ex 'thread
apply all bt' EXE CORE`, stdout to /dev/null. Ours is the venv's `fastunwind` command, as a user runs
it (the launcher: native/cli, served in C once the warm-up's Python path has cached the modules'
tables), and beside it the same command's Python path (FASTUNWIND_NATIVE=0). Reported per command: best and median CPU time (user +
system of the process, from wait4's rusage, which load on the machine inflates less than wall time),
best wall time and peak RSS; the ratios are the peers' best CPU time over ours. Also timed in
process: `fastunwind.core.open(CORE).threads()` (parse, files checked by build-id, tables, walks
and names; the interpreter's start-up excluded), and the walks alone (`_core.unwind_core` on every
thread, warm). Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "workloads" / "live" / "many_threads.c"


#: the `fastunwind` command a user runs: the venv's (the launcher `make build` installs there)
COMMAND = str(Path(sys.executable).parent / "fastunwind")


def run_once(command: list[str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, peak RSS in KiB) of one run, stdout and stderr discarded; a leading
    NAME=VALUE word is set in its environment."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "LC_ALL": "C"}
    while command and "=" in command[0] and not command[0].startswith("/"):
        name, _, value = command[0].partition("=")
        env[name] = value
        command = command[1:]
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, env=env)
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0 and os.waitstatus_to_exitcode(status) not in (0, 2):
        raise SystemExit(f"{command[0]} failed: status {status}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss


def make_core(out: Path, threads: int, depth: int) -> tuple[Path, Path]:
    exe = out / "many_threads"
    subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-pthread", "-o", str(exe), str(SOURCE)], check=True)
    process = subprocess.Popen([str(exe), str(threads), str(depth)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise SystemExit(f"{exe} did not get ready")
        pid = process.pid
        subprocess.run(["gcore", "-o", str(out / "core"), str(pid)], check=True, capture_output=True)
    finally:
        process.kill()
        process.wait()
    return out / f"core.{pid}", exe


def in_process(core: Path, exe: Path, repeat: int) -> tuple[float, float, int, int]:
    """(best seconds of open + threads(), best seconds of the walks alone (warm, unnamed), threads,
    frames) in this process."""
    from fastunwind import _core
    from fastunwind import core as core_files

    best, walks, threads, frames = float("inf"), float("inf"), 0, 0
    for _ in range(repeat):
        started = time.perf_counter()
        with core_files.open(core, exe=str(exe)) as opened:
            walked = opened.threads()
            space = opened.space.to_core()
            registers = [regs for *_ids, regs in opened._core.threads()]
            walk_started = time.perf_counter()
            for regs in registers:
                _core.unwind_core(space, opened._core, regs)
            walks = min(walks, time.perf_counter() - walk_started)
        best = min(best, walk_started - started)
        threads, frames = len(walked), sum(len(thread.frames) for thread in walked)
    return best, walks, threads, frames


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("core", nargs="?", help="a core file (default: a gcore of many_threads made here)")
    parser.add_argument("--exe", help="the core's program (with CORE)")
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--depth", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        if args.core:
            core, exe = Path(args.core), Path(args.exe)
        else:
            core, exe = make_core(Path(scratch), args.threads, args.depth)
        commands = {
            "fastunwind core": [COMMAND, "core", "--exe", str(exe), str(core)],
            "fastunwind core (its Python path, FASTUNWIND_NATIVE=0)": ["FASTUNWIND_NATIVE=0", COMMAND, "core", "--exe",
                                                                      str(exe), str(core)],
            "eu-stack --core": ["eu-stack", f"--core={core}", f"--executable={exe}"],
            "gdb thread apply all bt": ["gdb", "-batch", "-nx", "-ex", "thread apply all bt", str(exe), str(core)],
        }
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
        for command in commands.values():
            run_once(command)  # warm-up: page cache, bytecode, our table cache
        for _ in range(args.repeat):
            for name, command in commands.items():
                runs[name].append(run_once(command))
        seconds, walks, threads, frames = in_process(core, exe, args.repeat)
        size = core.stat().st_size
    ours = min(cpu for cpu, _wall, _rss in runs["fastunwind core"])
    load = os.getloadavg()[0]
    print(f"core: {threads} threads, {frames} frames, {size / 2**20:.1f} MiB; {args.repeat} interleaved rounds; "
          f"load average {load:.1f}")
    print("| command | best CPU s | median CPU s | best wall s | peak RSS MiB | peer CPU / ours |")
    print("|---|---|---|---|---|---|")
    for name, samples in runs.items():
        cpus = [cpu for cpu, _wall, _rss in samples]
        print(f"| `{name}` | {min(cpus):.3f} | {statistics.median(cpus):.3f} | "
              f"{min(wall for _cpu, wall, _rss in samples):.3f} | {max(rss for *_, rss in samples) / 1024:.1f} | "
              f"{min(cpus) / ours:.1f}x |")
    print(f"| `fastunwind.core.open(CORE).threads()` in process (best) | | | {seconds:.4f} | | |")
    print(f"| of which the {threads} walks in C (`_core.unwind_core`, warm, best) | | | {walks:.4f} | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
