"""Compiled unwind tables (eh_elf): generation and compile time, generated code size against the
DWARF tables, and the time of one unwind step against the DWARF interpreter and the compact table.

    .venv/bin/python -m benchmarks.bench_eh_elf [--jobs N] [--opt -O2] [--skip-llvm] [--json]

Every build goes to a fresh temporary cache (nothing is reused). Reported:

1. per file (libc, ld.so, libstdc++, libLLVM-14, hackbench): ranges, bodies, translation units,
   generation time (Python + the C row export), compile wall time with -j N, and the generated
   .text + .rodata of the shared object against .eh_frame and .eh_frame + .eh_frame_hdr;
2. hackbench's closure (hackbench, libc, ld.so and what `--deps` finds): wall time of
   `fastunwind compile --deps /usr/bin/hackbench`, as one `compile_images` call;
3. step time on libc: 200k random register/stack states at random covered PCs, one step each,
   through `_core.eh_elf_step_batch` (compiled), `_core.step_batch` with backend "dwarf" and with
   the compact table backend; ns per step = batch time / states (both loops are C, GIL released,
   including the same record-building work), best of 5.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

from fastunwind import _core, eh_elf
from fastunwind.address_space import ModuleImage
from fastunwind.elf import ElfFile

# the random register and stack states of the compact/eh_elf property tests
from tests.support.step_batch import BIAS, STACK_ADDRESS, random_stack, random_states

FILES = {
    "libc": "/lib/x86_64-linux-gnu/libc.so.6",
    "ld.so": "/lib64/ld-linux-x86-64.so.2",
    "libstdc++": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "libLLVM-14": "/usr/lib/llvm-14/lib/libLLVM-14.so.1",
    "hackbench": "/usr/bin/hackbench",
}


def section_sizes(path: str, names: tuple[str, ...]) -> dict[str, int]:
    with ElfFile.open(path) as elf:
        return {name: (elf.section(name).size if elf.section(name) else 0) for name in names}


def build_one(path: str, jobs: int, lookup: str) -> dict:
    image = ModuleImage.load(path)
    with tempfile.TemporaryDirectory(prefix="bench-eh-elf-") as cache:
        started = time.perf_counter()
        (result,) = eh_elf.compile_images([image], jobs=jobs, directory=cache, lookup=lookup)
        wall = time.perf_counter() - started
        if isinstance(result, Exception):
            raise result
        generated = section_sizes(result.target, (".text", ".rodata"))
    dwarf = section_sizes(path, (".eh_frame", ".eh_frame_hdr"))
    code = generated[".text"] + generated[".rodata"]
    return {
        "file": path, "ranges": result.ranges, "bodies": result.bodies, "units": result.units,
        "generate_s": result.generate_seconds, "compile_wall_s": wall - result.generate_seconds,
        "compiler_cpu_s": result.compile_seconds, "text": generated[".text"], "rodata": generated[".rodata"],
        "eh_frame": dwarf[".eh_frame"], "eh_frame_hdr": dwarf[".eh_frame_hdr"],
        "growth_vs_eh_frame": code / dwarf[".eh_frame"],
        "growth_vs_eh_frame_and_hdr": code / (dwarf[".eh_frame"] + dwarf[".eh_frame_hdr"]),
    }


def closure(jobs: int, lookup: str) -> dict:
    paths, missing = eh_elf.with_dependencies([FILES["hackbench"]])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-eh-elf-") as cache:
        images = [ModuleImage.load(p) for p in paths]
        results = eh_elf.compile_images(images, jobs=jobs, directory=cache, lookup=lookup)
    wall = time.perf_counter() - started
    failed = [str(r) for r in results if isinstance(r, Exception)]
    return {"files": paths, "missing": missing, "wall_s": wall, "failed": failed}


def step_times(path: str, lookup: str, states_count: int = 200_000, repeat: int = 5) -> dict:
    image = ModuleImage.load(path)
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="bench-eh-elf-") as cache:
        (built,) = eh_elf.compile_images([image], directory=cache, lookup=lookup)
        if isinstance(built, Exception):
            raise built
        base, end, starts_b, _, _ = _core.eh_elf_rows(image.eh_frame, image.debug_frame)
        compact = _core.CompactTable(_core.build_compact_table(image.eh_frame, image.debug_frame,
                                                               *image.compact_key()))
        module = (BIAS + base - 0x1000, BIAS + end + 0x1000, BIAS, image.eh_frame, image.debug_frame,
                  image.segments, 0, compact)
        spaces = {name: _core.AddressSpace([module], backend=name) for name in ("dwarf", "table")}
        stack = random_stack(rng, base, end)
        states_b = random_states(rng, [rng.randrange(base, end) for _ in range(states_count)])
        timings: dict[str, float] = {}
        for _ in range(repeat):
            for name, run in [("compiled", lambda: _core.eh_elf_step_batch(built.eh_elf, spaces["dwarf"], states_b,
                                                                           stack, STACK_ADDRESS, BIAS))] + [
                    (name, lambda s=space: _core.step_batch(s, states_b, stack, STACK_ADDRESS))
                    for name, space in spaces.items()]:
                started = time.perf_counter_ns()
                run()
                elapsed = (time.perf_counter_ns() - started) / states_count
                timings[name] = min(timings.get(name, elapsed), elapsed)
    return {"file": path, "states": states_count, "ns_per_step": timings}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--opt", default=None, help="compiler optimization flag (default: the generator's, -O2)")
    parser.add_argument("--skip-llvm", action="store_true", help="leave out libLLVM-14 (compiles in ~5 s)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--lookup", choices=eh_elf.LOOKUPS, default="table",
                        help="the range lookup generated: the default table, or the paper's if-tree")
    args = parser.parse_args()
    if args.opt:
        eh_elf.OPTIMIZATION = args.opt
    report: dict = {"jobs": args.jobs, "opt": eh_elf.OPTIMIZATION, "cc": eh_elf.compiler(), "lookup": args.lookup,
                    "files": []}
    for name, path in FILES.items():
        if not os.path.isfile(path) or (args.skip_llvm and name == "libLLVM-14"):
            continue
        report["files"].append({"name": name, **build_one(path, args.jobs, args.lookup)})
    if os.path.isfile(FILES["hackbench"]):
        report["hackbench_closure"] = closure(args.jobs, args.lookup)
    report["steps"] = step_times(FILES["libc"], args.lookup)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"eh_elf generator {eh_elf.GENERATOR_VERSION}, {args.lookup} lookup, {' '.join(report['cc'])} "
          f"{report['opt']}, -j {args.jobs}")
    print(f"{'file':<11} {'ranges':>8} {'bodies':>6} {'units':>5} {'gen s':>6} {'cc wall s':>9} {'cc cpu s':>8} "
          f"{'.text':>8} {'.rodata':>9} {'.eh_frame':>9} {'+hdr':>8} {'x eh_frame':>10} {'x +hdr':>7}")
    for f in report["files"]:
        print(f"{f['name']:<11} {f['ranges']:>8} {f['bodies']:>6} {f['units']:>5} {f['generate_s']:>6.2f} "
              f"{f['compile_wall_s']:>9.2f} {f['compiler_cpu_s']:>8.2f} {f['text']:>8} {f['rodata']:>9} "
              f"{f['eh_frame']:>9} {f['eh_frame_hdr']:>8} {f['growth_vs_eh_frame']:>10.2f} "
              f"{f['growth_vs_eh_frame_and_hdr']:>7.2f}")
    total_code = sum(f["text"] + f["rodata"] for f in report["files"])
    total_dwarf = sum(f["eh_frame"] for f in report["files"])
    print(f"overall growth vs .eh_frame: {total_code / total_dwarf:.2f}x (the paper: 2.41x on libc, 2.44x overall)")
    if "hackbench_closure" in report:
        c = report["hackbench_closure"]
        print(f"hackbench closure ({len(c['files'])} files: {', '.join(map(os.path.basename, c['files']))}): "
              f"{c['wall_s']:.2f} s wall" + (f", FAILED {c['failed']}" if c["failed"] else ""))
    s = report["steps"]
    print(f"one step on {s['file']} ({s['states']} random states, best of 5): "
          + ", ".join(f"{name} {ns:.1f} ns" for name, ns in s["ns_per_step"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
