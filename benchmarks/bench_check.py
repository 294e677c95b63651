"""Benchmark of `fastunwind check` against `readelf -wF` on the same file, side by side in one run.

    .venv/bin/python -m benchmarks.bench_check [--repeat N] [FILE]
    make bench-check

FILE defaults to libLLVM-14 (95k FDEs). Each round runs, interleaved so that drift in the machine
hits every side: `python -m fastunwind check FILE` (one thread: decoding, interpretation and the
comparison of every instruction of every FDE, plus start-up and the ELF/CFI load), the same with
`-j 2`, and `readelf --debug-dump=frames-interp FILE` (which only evaluates and prints the rows, to
/dev/null). Commands get one untimed warm-up run (page cache). Reported per command: best and median
CPU time (user + system of the child alone, from wait4: what load on a shared machine inflates
least) and best wall time; FDEs per CPU-second of `check` on one thread (per core); check's CPU time
over readelf's against issue 23's target (at most 2x, i.e. >= 100k FDEs/s per core on libLLVM-14),
and `-j 2`'s wall time over readelf's. Also timed: Zydis alone decoding the file's .text linearly
(benchmarks/peers/zydis_decode.c, with and without operands), and check's own decoder (its fast
path, Zydis behind it) over the same bytes: the floor under check's decoding. Nothing here asserts
a timing.
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

from fastunwind.elf import ElfFile

LIBLLVM = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_RATIO = 2.0  #: check's time / readelf -wF's
TARGET_FDES_PER_SECOND = 100_000  #: per core


def timed(command: list[str], capture: bool) -> tuple[float, float, str]:
    """(CPU seconds of the child alone, wall seconds, its stdout if `capture`) of one run."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, text=True,
                             env={**os.environ, "PYTHONPATH": os.path.join(REPO, "src"), "LC_ALL": "C"})
    output = child.stdout.read() if child.stdout else ""
    _pid, _status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if child.stdout:
        child.stdout.close()
    return usage.ru_utime + usage.ru_stime, wall, output


def zydis_alone(path: str) -> list[tuple[int, float]] | None:
    """[(instructions, seconds)] of Zydis with operands, Zydis without, and check's decoder (the fast
    path, Zydis behind it) over `path`'s .text, best of 3; None if the harness cannot be built."""
    with ElfFile.open(path) as elf:
        text = elf.section(".text")
    if text is None:
        return None
    with tempfile.TemporaryDirectory() as out:
        built = subprocess.run(["make", "-s", "-C", os.path.join(REPO, "benchmarks", "peers"), f"OUT={out}",
                                f"{out}/zydis_decode"], capture_output=True, text=True)
        if built.returncode:
            print(f"  (Zydis alone not measured: {built.stderr.strip()[-200:]})")
            return None
        runs = []
        for _ in range(3):
            ran = subprocess.run([f"{out}/zydis_decode", path, str(text.offset), str(text.size)],
                                 capture_output=True, text=True, check=True)
            runs.append([(int(fields[1]), float(fields[2])) for fields in (line.split() for line in ran.stdout.splitlines())])
    return [min((run[k] for run in runs), key=lambda item: item[1]) for k in range(3)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", default=LIBLLVM)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    check = [sys.executable, "-m", "fastunwind", "check", args.file]
    commands = {
        "fastunwind check": check,
        "fastunwind check -j 2": [*check[:4], "-j", "2", args.file],
        "readelf -wF": ["readelf", "--debug-dump=frames-interp", args.file],
    }
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    wall: dict[str, list[float]] = {name: [] for name in commands}
    summary = ""
    for name, command in commands.items():  # warm-up
        _cpu, _wall, output = timed(command, name.startswith("fastunwind"))
        summary = summary or output
    for _ in range(args.repeat):
        for name, command in commands.items():
            seconds, elapsed, _ = timed(command, False)
            cpu[name].append(seconds)
            wall[name].append(elapsed)
    found = re.search(r": (\d+) FDEs:", summary)
    fdes = int(found.group(1)) if found else 0
    readelf_cpu, readelf_wall = min(cpu["readelf -wF"]), min(wall["readelf -wF"])
    print(f"{args.file}: {fdes} FDEs; {args.repeat} interleaved runs, load average {os.getloadavg()[0]:.1f}")
    print(summary.splitlines()[0] if summary else "(no check summary)")
    print(f"  {'':<22} {'best CPU':>9} {'median CPU':>11} {'best wall':>10} {'CPU / readelf':>14}")
    for name in commands:
        rate = f"  {fdes / min(cpu[name]):>9,.0f} FDEs per CPU-second" if name == "fastunwind check" and fdes else ""
        print(f"  {name:<22} {min(cpu[name]):8.3f}s {statistics.median(cpu[name]):10.3f}s {min(wall[name]):9.3f}s"
              f" {min(cpu[name]) / readelf_cpu:13.2f}x{rate}")
    decode = zydis_alone(args.file)
    if decode:
        (count, full), (_, instruction_only), (_, fast_path) = decode
        print(f"  Zydis alone over .text ({count:,} instructions): {full:.3f} s with operands "
              f"({full / readelf_wall:.2f}x readelf's wall time), {instruction_only:.3f} s without")
        print(f"  check's decoder alone (fast path, Zydis behind it): {fast_path:.3f} s "
              f"({fast_path / readelf_wall:.2f}x readelf's wall time)")
    ratio = min(cpu["fastunwind check"]) / readelf_cpu
    met = "met" if ratio <= TARGET_RATIO else "not met"
    print(f"check / readelf -wF, CPU time on one thread: {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x: {met}); "
          f"check -j 2 / readelf, wall time: {min(wall['fastunwind check -j 2']) / readelf_wall:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
