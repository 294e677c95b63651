"""`fastunwind report [-i perf.data]`: the functions of a `perf record --call-graph dwarf` recording
by samples, as `perf report --stdio` counts them.

Self samples are those whose first frame is in the function (`perf report --no-children`); total
samples those with the function anywhere on the stack, counted once per sample however often
recursion repeats it (`--children`). The table is sorted by self samples, or by total with
`--children`; `--sort` takes perf's keys (sym, dso, comm, tid, srcline) and combinations; `--per-thread`
adds a section for every thread. On a terminal the columns fit its width; piped or written with
`-o`, names are printed in full. `--json` gives {"samples", "functions": [{"name", "module", "self",
"total"}]} (with "comm", "pid", "tid" in each function when the sort has those keys, and "threads"
with --per-thread), and with synthesized rows (`--synth`, default missing) "synth": {"mode",
"synthesized_frames", "corrected_frames", "samples", "complete_samples"}: the frames whose step used
a row derived from the machine code, and the samples that have one.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

from fastunwind import _core
from fastunwind.commands import (add_filter_arguments, add_output_argument, add_synth_argument, command_parser,
                                 no_samples_message, recording_progress, sample_filter, synth_mode, terminal_columns)
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any
    from fastunwind.perf.report import CountedReport, ReportRow

EXAMPLE = """\
examples:
  perf record --call-graph dwarf -e cpu-clock -F 999 -o perf.data -- ./my-program
  fastunwind report -i perf.data | head -20
  fastunwind report -i perf.data --children --sort dso,sym
  fastunwind report -i perf.data --per-thread --top 5
  fastunwind report -i perf.data --tid 1234,1235 --cpu 0-1
  fastunwind report -i perf.data --json -o report.json
  fastunwind report -i perf.data --synth repair --top 10
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "report",
                            "the functions of a perf.data recording by self and total samples (perf report)",
                            __doc__, EXAMPLE)
    parser.add_argument("-i", "--input", default="perf.data",
                        help="the recording, - for standard input (default: perf.data)")
    add_output_argument(parser)
    children = parser.add_mutually_exclusive_group()
    children.add_argument("--children", action="store_true",
                          help="sort by total samples (the function anywhere on the stack), as perf report --children")
    children.add_argument("--no-children", action="store_false", dest="children",
                          help="sort by self samples (the default), as perf report --no-children")
    parser.add_argument("-s", "--sort", default="sym",
                        help="keys of an entry, comma-separated: sym, dso, comm, tid, srcline (default: sym)")
    parser.add_argument("--per-thread", action="store_true", help="a section of the table for every thread")
    parser.add_argument("--top", type=int, default=-1, metavar="N",
                        help="at most N rows (per thread with --per-thread; default: all)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--max-frames", type=int, default=_core.PERF_MAX_FRAMES,
                        help=f"frames per stack (default: {_core.PERF_MAX_FRAMES}, as perf)")
    add_synth_argument(parser)
    add_filter_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    gc.disable()  # as perf-script: few objects, none per sample
    from fastunwind.perf.report import SORT_KEYS, count_recording, parse_sort, render_report

    try:
        sort = parse_sort(args.sort)
    except ValueError as error:
        print(f"fastunwind: error: --sort {args.sort}: {error} (known: {', '.join(SORT_KEYS)})", file=sys.stderr)
        return 2
    selected = sample_filter(args)
    synth = synth_mode(args)
    out = sys.stdout  # -o: redirected by cli.main
    with recording_progress(args.input) as progress:
        progress.phase("counting")
        counted = count_recording(args.input, sort, per_thread=args.per_thread, max_frames=args.max_frames,
                                  synth=synth, sample_filter=selected, on_window=progress.window)
    for note in counted.stats.notes:
        print(f"fastunwind: note: {args.input}: {note}", file=sys.stderr)
    if not counted.table.samples:
        print(no_samples_message(args.input, selected is not None), file=sys.stderr)
        return 1
    if args.json:
        import json  # here: the text report would pay ~5.6M instructions for it

        json.dump(_json(counted, sort, args.children, args.top), out)
        out.write("\n")
    else:
        width = terminal_columns() if out.isatty() else None
        text = render_report(counted, sort, args.input, by_total=args.children, limit=args.top, width=width)
        out.flush()
        out.buffer.write(text)
    return 0


def _json_row(row: ReportRow, sort: tuple[str, ...]) -> dict[str, Any]:
    item: dict[str, Any] = {"name": _label(row), "module": row.module or "", "self": row.self, "total": row.total}
    if "comm" in sort:
        item["comm"] = row.comm or ""
    if "tid" in sort:
        item["pid"], item["tid"] = row.pid, row.tid
    if "srcline" in sort:
        item["srcline"] = row.srcline or ""
    return item


def _json(counted: CountedReport, sort: tuple[str, ...], by_total: bool, limit: int) -> dict[str, Any]:
    from fastunwind.perf.report import ReportRow

    stats = counted.stats
    rows = [ReportRow(*row) for row in counted.table.rows(by_total, limit)]
    document: dict[str, Any] = {"samples": counted.table.samples, "functions": [_json_row(row, sort) for row in rows]}
    if stats.synth != "off":
        document["synth"] = {"mode": stats.synth, "synthesized_frames": stats.derived_frames["synthesized"],
                             "corrected_frames": stats.derived_frames["corrected"],
                             "samples": sum(stats.derived_samples.values()),
                             "complete_samples": stats.derived_samples.get("end", 0)}
    if counted.threads is not None:
        document["threads"] = [{"comm": comm or "", "pid": pid, "tid": tid, "samples": samples,
                                "functions": [_json_row(ReportRow(*row), sort) for row in thread_rows]}
                               for comm, pid, tid, samples, thread_rows in counted.threads.threads(by_total, limit)]
    return document


def _label(row: ReportRow) -> str:
    """An entry's name: its symbol; without sym in the sort, its DSO's name, else its comm."""
    if row.name is not None:
        return str(row.name)
    if row.module is not None:
        return os.path.basename(row.module) or str(row.module)
    if row.srcline is not None:
        return str(row.srcline)
    return str(row.comm or "")
