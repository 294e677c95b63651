"""Benchmark of `fastunwind check` against `readelf -wF` on the same file, side by side in one run.

    .venv/bin/python -m benchmarks.bench_check [--repeat N] [FILE]
    make bench-check

FILE defaults to libLLVM-14 (95k FDEs). Each round runs, interleaved so that drift in the machine
hits every side: `python -m fastunwind check FILE` (one thread: decoding, interpretation and the
comparison of every instruction of every FDE, plus start-up and the ELF/CFI load), the same with
`-j 2`, and `readelf --debug-dump=frames-interp FILE > /dev/null` (which only evaluates and prints
the rows). Commands get one untimed warm-up run (page cache). Reported: best and median wall time,
FDEs per second of `check` (per core for -j 1), and check's time over readelf's against issue 23's
target (at most 2x, i.e. >= 100k FDEs/s per core on libLLVM-14). Also timed: Zydis alone decoding
the file's .text linearly (benchmarks/peers/zydis_decode.c, with and without operands), and check's
own decoder (its fast path, Zydis behind it) over the same bytes: the floor under check's decoding. Nothing here asserts a timing.
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


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    ran = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env={**os.environ, "PYTHONPATH": os.path.join(REPO, "src"), "LC_ALL": "C"})
    return time.perf_counter() - started, ran.stdout


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
        "readelf -wF": ["sh", "-c", f"readelf --debug-dump=frames-interp {args.file} > /dev/null"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    summary = ""
    for name, command in commands.items():  # warm-up
        _, output = timed(command)
        summary = summary or output
    for _ in range(args.repeat):
        for name, command in commands.items():
            seconds, _ = timed(command)
            samples[name].append(seconds)
    fdes = int(re.search(r": (\d+) FDEs:", summary).group(1)) if re.search(r": (\d+) FDEs:", summary) else 0
    print(f"{args.file}: {fdes} FDEs; best / median of {args.repeat} interleaved runs")
    print(summary.splitlines()[0] if summary else "(no check summary)")
    for name, values in samples.items():
        rate = f"  {fdes / min(values):>9,.0f} FDEs/s" if name.startswith("fastunwind") and fdes else ""
        print(f"  {name:<22} {min(values):6.3f} s  {statistics.median(values):6.3f} s{rate}")
    decode = zydis_alone(args.file)
    if decode:
        (count, full), (_, instruction_only), (_, fast_path) = decode
        readelf = min(samples['readelf -wF'])
        print(f"  Zydis alone over .text ({count:,} instructions): {full:.3f} s with operands "
              f"({full / readelf:.2f}x readelf), {instruction_only:.3f} s without")
        print(f"  check's decoder alone (fast path, Zydis behind it): {fast_path:.3f} s ({fast_path / readelf:.2f}x readelf)")
    ratio = min(samples["fastunwind check"]) / min(samples["readelf -wF"])
    met = "met" if ratio <= TARGET_RATIO else "not met"
    print(f"check / readelf -wF: {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x: {met}); "
          f"-j 2 / readelf: {min(samples['fastunwind check -j 2']) / min(samples['readelf -wF']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
