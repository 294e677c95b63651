"""Benchmark of opening a module as the unwinder does (core/elf_file.c through `_core`): the headers,
the build-id, the process entry, a mapping's bias and the separate debug file, against pyelftools
reading the same facts (sections, segments, the build-id note), in process, interleaved.

    .venv/bin/python -m benchmarks.bench_elf_open [--repeat N] [--count N] [--against CHECKOUT] [FILE...]

Per file (default: libc, ld.so, libLLVM-14): the best, over `--repeat` rounds, of the CPU time
(user + system, getrusage) per open of `--count` opens. Ours: `ModuleImage.load`, `build_id`,
`process_entry`, `bias_for_mapping` of an executable mapping, `find_debug_file`, close. pyelftools:
`ELFFile` over the file, every section and segment header, the NT_GNU_BUILD_ID note. `--against`
times ours of another checkout too (its venv's interpreter, run here between our rounds): the
figure before a change. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from pathlib import Path

FILES = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", "/usr/lib/llvm-14/lib/libLLVM-14.so.1"]


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ours(path: str, count: int) -> float:
    from fastunwind.elf import find_debug_file
    from fastunwind.image import ModuleImage

    start = cpu()
    for _ in range(count):
        image = ModuleImage.load(path)
        _ = image.build_id, image.process_entry
        image.bias_for_mapping(0x7F0000028000, 0x7F00001BD000, 0x28000)
        find_debug_file(image.elf)
        image.elf.close()
    return (cpu() - start) / count


def pyelftools(path: str, count: int) -> float:
    from elftools.elf.elffile import ELFFile

    start = cpu()
    for _ in range(count):
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            for section in elf.iter_sections():
                if section.header.sh_type == "SHT_NOTE":
                    for note in section.iter_notes():
                        if note.n_type == "NT_GNU_BUILD_ID":
                            break
            for _segment in elf.iter_segments():
                pass
    return (cpu() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--against", type=Path, help="another checkout whose .venv times ours before a change")
    parser.add_argument("--one", choices=["ours", "pyelftools"], help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", default=[f for f in FILES if Path(f).exists()])
    arguments = parser.parse_args()
    if arguments.one:  # one round of one side, for --against
        measure = ours if arguments.one == "ours" else pyelftools
        print(" ".join(str(measure(path, arguments.count)) for path in arguments.files))
        return
    best: dict[str, list[float]] = {}
    for _ in range(arguments.repeat):
        sides = [("ours", [ours(path, arguments.count) for path in arguments.files]),
                 ("pyelftools", [pyelftools(path, arguments.count) for path in arguments.files])]
        if arguments.against:
            # this script, run by the other checkout's interpreter: its fastunwind is the other's
            output = subprocess.run([str(arguments.against / ".venv" / "bin" / "python"), __file__, "--one", "ours",
                                     "--count", str(arguments.count), *arguments.files],
                                    cwd=arguments.against, check=True, capture_output=True, text=True).stdout
            sides.append(("before", [float(value) for value in output.split()]))
        for side, times in sides:
            best[side] = [min(pair) for pair in zip(best.get(side, times), times)]
    print(f"| file | ours (µs) | pyelftools (µs) | pyelftools / ours |{' before (µs) | before / ours |' if arguments.against else ''}")
    print(f"|---|---|---|---|{'---|---|' if arguments.against else ''}")
    for i, path in enumerate(arguments.files):
        mine, peer = best["ours"][i], best["pyelftools"][i]
        row = f"| {Path(path).name} | {mine * 1e6:.0f} | {peer * 1e6:.0f} | {peer / mine:.1f} |"
        if arguments.against:
            before = best["before"][i]
            row += f" {before * 1e6:.0f} | {before / mine:.1f} |"
        print(row)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
