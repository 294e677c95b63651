"""The compact unwind table: size, slow-path share, lookup speed, and the walker's ns/frame with the
compact backend against the DWARF interpreter on the same perf samples.

    .venv/bin/python -m benchmarks.bench_compact [RECORDING.data ...] [--repeat N] [--reuse] [--json [FILE]]

Without recordings, the workloads hackbench-threads, c, python and compiler are recorded first with
scripts/record_workloads.py into .build/bench-compact/recordings (`--reuse` keeps recordings
already there). Then:

1. tables: for libc, libstdc++, libLLVM-14 and python3.11 (those installed), the compact table is
   built (not read from the cache) and its bytes per row (gaps between FDEs are rows too), bytes
   per DWARF row, rule count, slow-path rows and code bytes, and build time are reported;
2. lookups: fu_compact_find over 1M random covered addresses of each library, a plain binary
   search over the u32 row starts against a two-level variant (a page index of 4 KiB pages first);
3. walker: per recording, `_core.unwind_samples` over all samples with backend "dwarf", "auto"
   (compact first) and "table-only" (compact table alone), N passes each, interleaved; the figure is
   walk_ns / frames (walk_ns times the C loop over samples, GIL released). The frames of "auto"
   must equal those of "dwarf" exactly; the script fails otherwise.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import random
import statistics
import sys
import time
from typing import Any

from fastunwind import _core
from fastunwind.address_space import ModuleImage
from fastunwind.perf.data import PerfData
from fastunwind.perf.replay import replay

from benchmarks.bench_unwind import record_defaults

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORK = os.path.join(REPO, ".build", "bench-compact")
DEFAULT_WORKLOADS = ("hackbench-threads", "c", "python", "compiler")
LIBRARIES = ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
             "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1", "/usr/bin/python3.11")
MAX_FRAMES = _core.PERF_MAX_FRAMES
LOOKUPS = 1_000_000
BACKENDS = ("dwarf", "auto", "table-only")


def table_figures(path: str, rng: random.Random) -> dict[str, Any]:
    image = ModuleImage.load(os.path.realpath(path))
    started = time.perf_counter()
    table = image.load_compact_table(use_cache=False)
    build_ms = (time.perf_counter() - started) * 1000
    if table is None:
        return {"path": path, "error": image.compact_error}
    dwarf_rows = sum(t.row_count for t in (image.eh_frame, image.debug_frame) if t is not None)
    addresses = array.array("Q", (rng.randrange(table.base_svma, table.end_svma) for _ in range(LOOKUPS)))
    lookups = {}
    for two_level in (False, True, False, True):  # plain binary search, then the page index
        ns, _checksum = table.benchmark_lookups(addresses.tobytes(), 3, two_level)
        key = "two_level" if two_level else "binary_search"
        lookups[key] = min(lookups.get(key, float("inf")), ns / (3 * LOOKUPS))
    return {
        "path": path, "bytes": table.size, "rows": table.row_count, "dwarf_rows": dwarf_rows,
        "rules": table.rule_count, "gap_rows": table.no_info_row_count, "slow_rows": table.slow_row_count,
        "bytes_per_row": table.size / table.row_count, "bytes_per_dwarf_row": table.size / dwarf_rows,
        "slow_row_fraction": table.slow_row_count / table.row_count,
        "slow_byte_fraction": table.slow_bytes / table.covered_bytes if table.covered_bytes else 0.0,
        "build_ms": build_ms, "has_debug_frame": image.debug_frame is not None,
        "lookup_ns": lookups, "page_index_bytes": 4 * ((table.end_svma - table.base_svma) // 4096 + 2),
    }


def walker_figures(recording: str, repeat: int) -> dict[str, Any]:
    perf = PerfData.open(recording)
    replayed = replay(perf)
    space_ids = replayed.space_ids.tobytes()
    cores = {backend: [space.to_core(backend) for space in replayed.session.spaces] for backend in BACKENDS}
    passes: dict[str, list[int]] = {backend: [] for backend in BACKENDS}
    results: dict[str, tuple] = {}
    for _ in range(repeat):
        for backend in BACKENDS:
            result = _core.unwind_samples(perf.native, space_ids, cores[backend], MAX_FRAMES, threads=1)
            passes[backend].append(result[6])
            results[backend] = result
    if results["auto"][:6] != results["dwarf"][:6]:
        raise SystemExit(f"{recording}: the compact backend's frames differ from the DWARF backend's")
    out: dict[str, Any] = {"recording": recording, "samples": perf.sample_count}
    for backend in BACKENDS:
        frames = len(results[backend][2]) // 8
        outcomes = results[backend][0]
        out[backend] = {
            "frames": frames,
            "ns_per_frame_best": min(passes[backend]) / frames,
            "ns_per_frame_median": statistics.median(passes[backend]) / frames,
            "ns_per_frame_first": passes[backend][0] / frames,
            "incomplete_samples": sum(1 for o in outcomes if o not in (0, 0xFE, 0xFF)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="*")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--json", nargs="?", const="-", default=None)
    args = parser.parse_args(argv)
    rng = random.Random(1)
    tables = [table_figures(path, rng) for path in LIBRARIES if os.path.exists(path)]
    print("| module | compact rows (DWARF rows) | rules | bytes | bytes/row | bytes/DWARF row | slow rows | "
          "slow code bytes | build ms | lookup ns: binary search / two-level |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in tables:
        if "error" in t:
            print(f"| {t['path']} | {t['error']} |")
            continue
        print(f"| {os.path.basename(t['path'])} | {t['rows']:,} ({t['dwarf_rows']:,}) | {t['rules']} | {t['bytes']:,} | "
              f"{t['bytes_per_row']:.2f} | {t['bytes_per_dwarf_row']:.2f} | {t['slow_rows']} "
              f"({t['slow_row_fraction']:.3%}) | {t['slow_byte_fraction']:.3%} | {t['build_ms']:.1f} | "
              f"{t['lookup_ns']['binary_search']:.1f} / {t['lookup_ns']['two_level']:.1f} |")
    recordings = args.recordings or record_defaults(args.reuse, args.seconds, DEFAULT_WORKLOADS, WORK)
    walks = [walker_figures(path, args.repeat) for path in recordings]
    print()
    print("| recording | frames | ns/frame dwarf: best / median / first | auto (compact first) | compact only "
          "| dwarf ÷ auto (best) | compact-only incomplete samples (dwarf) |")
    print("|---|---|---|---|---|---|---|")
    for w in walks:
        d, a, c = w["dwarf"], w["auto"], w["table-only"]
        print(f"| {os.path.basename(w['recording'])} | {d['frames']:,} | {d['ns_per_frame_best']:.1f} / "
              f"{d['ns_per_frame_median']:.1f} / {d['ns_per_frame_first']:.1f} | {a['ns_per_frame_best']:.1f} / "
              f"{a['ns_per_frame_median']:.1f} / {a['ns_per_frame_first']:.1f} | {c['ns_per_frame_best']:.1f} / "
              f"{c['ns_per_frame_median']:.1f} / {c['ns_per_frame_first']:.1f} | "
              f"{d['ns_per_frame_best'] / a['ns_per_frame_best']:.2f}x | {c['incomplete_samples']} "
              f"({d['incomplete_samples']}) |")
    if args.json:
        text = json.dumps({"tables": tables, "walks": walks}, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as out:
                out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
