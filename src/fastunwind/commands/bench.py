"""`fastunwind bench [-i perf.data]`: time fastunwind's walker on a recording's samples, backend
by backend, in one run: ns per frame over all passes, the first (cold) pass and the best (warm)
pass, frames, outcomes, and whether every backend found the same frames.

Only the unwinding is timed (see fastunwind.bench). Every backend's first pass starts alike: one
untimed walk of the samples first (it pages in their stack dumps and the memory the walks write
their frames to), then, before each backend, 256 MiB of other memory written so that the CPU
caches hold none of them (fastunwind.bench.evict_caches), as `benchmarks/bench_unwind.py` and the
peers' harnesses do. The side-by-side comparison with libunwind,
libdw and a frame-pointer walk needs their C harnesses, built from a source checkout:
`--peers` runs `benchmarks/bench_unwind.py` there on the same recording.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

from fastunwind import _core
from fastunwind._core import WALK_BACKENDS as BACKENDS  # address_space.h fu_backend
from fastunwind.commands import add_output_argument, command_parser
from fastunwind.errors import FastunwindError
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any
    from fastunwind.perf.bench import BackendTiming

EXAMPLE = """\
examples:
  fastunwind bench -i perf.data
  fastunwind bench -i perf.data --backend auto,dwarf --repeat 20
  fastunwind bench -i perf.data --json
  fastunwind bench -i perf.data --peers      # from a source checkout: also libunwind, libdw, fp
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "bench",
                            "time the walker on a recording, backend by backend (and against peers with --peers)", __doc__, EXAMPLE)
    parser.add_argument("-i", "--input", default="perf.data", help="the recording (default: perf.data)")
    parser.add_argument("--backend", default="auto,table,dwarf",
                        help=f"comma-separated backends to time, of {', '.join(BACKENDS)} (default: auto,table,dwarf)")
    parser.add_argument("--repeat", type=int, default=10, help="passes per backend (default: 10)")
    parser.add_argument("--max-frames", type=int, default=_core.PERF_MAX_FRAMES,
                        help=f"frames per stack (default: {_core.PERF_MAX_FRAMES}, as perf)")
    parser.add_argument("--json", action="store_true",
                        help='one JSON object: {"recording", "samples", "repeat", "backends": [{"backend", "frames", '
                             '"ns_per_frame": {"all", "first", "best"}, "outcomes", "same_frames"}]}')
    parser.add_argument("--peers", action="store_true",
                        help="also run benchmarks/bench_unwind.py (libunwind, libdw, frame pointers) on the recording")
    add_output_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fastunwind.perf.bench import differing_samples, time_backend
    from fastunwind.perf.data import PerfData
    from fastunwind.perf.replay import replay

    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown or not backends:
        raise FastunwindError(f"--backend: {', '.join(unknown) or 'none given'}: choose from {', '.join(BACKENDS)}")
    if args.repeat < 1:
        raise FastunwindError("--repeat must be at least 1")
    started = time.perf_counter()
    perf = PerfData.open(args.input)
    replayed = replay(perf)
    setup_seconds = time.perf_counter() - started
    time_backend(perf, replayed, "dwarf", 1, args.max_frames)  # untimed: pages the samples in
    timings = [time_backend(perf, replayed, backend, args.repeat, args.max_frames, evict=True) for backend in backends]
    if args.json:
        import json

        print(json.dumps(_json(args.input, setup_seconds, args.repeat, timings, differing_samples)))
    else:
        _print(args.input, setup_seconds, args.repeat, timings, differing_samples)
    if args.peers:
        return _run_peers(args)
    return 0


def _print(recording: str, setup_seconds: float, repeat: int, timings: list[BackendTiming],
           differing_samples: Callable[[BackendTiming, BackendTiming], int]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    reference = timings[0]
    console.print(f"{escape(recording)}: {reference.samples} samples walked; decoding, replay and unwind tables "
                  f"{setup_seconds * 1000:.0f} ms (not timed below); {repeat} passes per backend")
    table = Table("backend", "frames", "ns/frame all / first / best", "ns/sample", "outcomes",
                  f"same frames as {reference.backend}", box=None)
    for t in timings:
        per_sample = t.total_ns / (t.samples * len(t.passes_ns)) if t.samples else 0.0
        outcomes = ", ".join(f"{name} {count}" for name, count in sorted(t.outcomes.items(), key=lambda kv: -kv[1]))
        same = "—" if t is reference else f"{t.samples - differing_samples(reference, t)} of {t.samples}"
        table.add_row(t.backend, f"{t.frames:,}", f"{t.ns_per_frame('all'):.1f} / {t.ns_per_frame('first'):.1f} / "
                      f"{t.ns_per_frame('best'):.1f}", f"{per_sample:.0f}", outcomes, same)
    console.print(table)


def _json(recording: str, setup_seconds: float, repeat: int, timings: list[BackendTiming],
          differing_samples: Callable[[BackendTiming, BackendTiming], int]) -> dict[str, Any]:
    """What _print shows, as one object; "same_frames": samples whose frames are the first backend's."""
    reference = timings[0]
    return {"recording": recording, "samples": reference.samples, "setup_seconds": round(setup_seconds, 6),
            "repeat": repeat,
            "backends": [{"backend": t.backend, "frames": t.frames,
                          "ns_per_frame": {which: round(t.ns_per_frame(which), 3) for which in ("all", "first", "best")},
                          "outcomes": dict(t.outcomes),
                          "same_frames": t.samples - (0 if t is reference else differing_samples(reference, t))}
                         for t in timings]}


def _run_peers(args: argparse.Namespace) -> int:
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_unwind.py"
    if not script.is_file():
        raise FastunwindError("--peers needs a source checkout of fastunwind (benchmarks/bench_unwind.py builds "
                              "the libunwind, libdw and frame-pointer harnesses); run `make bench-unwind` there")
    # the same passes as the backends above: one round of --repeat
    command = [sys.executable, str(script), os.path.abspath(args.input), "--repeat", str(args.repeat), "--rounds", "1"]
    return subprocess.run(command, cwd=script.parents[1]).returncode
