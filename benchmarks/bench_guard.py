"""Benchmark of what the truncation guard (native/core/mapped_file.c) costs where it acts: opening a
guarded mapping (its check that the SIGBUS guard is still in front), and loading a compiled unwind
table (eh_elf: a sealed private copy is dlopen'ed, not the cache file), in process, interleaved.

    .venv/bin/python -m benchmarks.bench_guard [--repeat N] [--count N] [--against CHECKOUT] [--eh-elf-dir DIR]

The best, over `--repeat` rounds, of the CPU time (user + system, getrusage) per operation of
`--count`: `_core.MappedFile` open and close of libc; `_core.EhElf` load (checked) and unload of the
eh_elf of libc and of libLLVM-14 found in `--eh-elf-dir` (`fastunwind compile --cache-dir`-built;
default: the cache). `--against` times the same of another checkout (its venv's interpreter, run
between our rounds). Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LLVM = "/usr/lib/llvm-14/lib/libLLVM-14.so.1"


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def mapped_file(count: int) -> float:
    from fastunwind import _core

    descriptor = os.open(LIBC, os.O_RDONLY)
    try:
        start = cpu()
        for _ in range(count):
            _core.MappedFile(descriptor, LIBC).close()
        return (cpu() - start) / count
    finally:
        os.close(descriptor)


def eh_elf_load(path: str, directory: str | None, count: int) -> float:
    from fastunwind.image import ModuleImage
    from fastunwind.tables import eh_elf

    image = ModuleImage.load(path)
    target = eh_elf.cache_path(image, directory)
    start = cpu()
    for _ in range(count):
        eh_elf.open_cached(image, target)  # unloaded as it is dropped, before the next load
    return (cpu() - start) / count


def measure(count: int, directory: str | None) -> list[float]:
    return [mapped_file(count * 10), *(eh_elf_load(path, directory, count) for path in (LIBC, LLVM))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--count", type=int, default=100, help="loads per round (mapping opens: 10 times as many)")
    parser.add_argument("--against", type=Path, help="another checkout whose .venv times the same before a change")
    parser.add_argument("--eh-elf-dir", help="where the eh_elfs of libc and libLLVM-14 are (default: the cache)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:  # one round, for --against
        print(" ".join(str(value) for value in measure(arguments.count, arguments.eh_elf_dir)))
        return
    names = ["MappedFile open+close, libc", "eh_elf load+unload, libc", "eh_elf load+unload, libLLVM-14"]
    best: dict[str, list[float]] = {}
    for _ in range(arguments.repeat):
        sides = [("ours", measure(arguments.count, arguments.eh_elf_dir))]
        if arguments.against:
            # this script, run by the other checkout's interpreter: its fastunwind is the other's
            command = [str(arguments.against / ".venv" / "bin" / "python"), __file__, "--one", "--count",
                       str(arguments.count)] + (["--eh-elf-dir", arguments.eh_elf_dir] if arguments.eh_elf_dir else [])
            output = subprocess.run(command, cwd=arguments.against, check=True, capture_output=True, text=True).stdout
            sides.append(("before", [float(value) for value in output.split()]))
        for side, times in sides:
            best[side] = [min(pair) for pair in zip(best.get(side, times), times)]
    print(f"| operation | ours (µs) |{' before (µs) | ours / before |' if arguments.against else ''}")
    print(f"|---|---|{'---|---|' if arguments.against else ''}")
    for i, name in enumerate(names):
        row = f"| {name} | {best['ours'][i] * 1e6:.1f} |"
        if arguments.against:
            row += f" {best['before'][i] * 1e6:.1f} | {best['ours'][i] / best['before'][i]:.2f} |"
        print(row)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
