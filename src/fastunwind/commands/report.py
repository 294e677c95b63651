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
from typing import Any, TextIO

from fastunwind import _core
from fastunwind.commands import (add_filter_arguments, add_output_argument, add_synth_argument, command_parser,
                                 no_samples_message, recording_progress, sample_filter, synth_mode)

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
    import json
    import shutil

    from fastunwind.perf.report import parse_sort, report_recording

    try:
        sort = parse_sort(args.sort)
    except ValueError as error:
        print(f"fastunwind: error: --sort {args.sort}: {error} (known: sym, dso, comm, tid, srcline)", file=sys.stderr)
        return 2
    selected = sample_filter(args)
    synth = synth_mode(args)
    out = sys.stdout  # -o: redirected by cli.main
    with recording_progress(args.input) as progress:
        progress.phase("counting")
        table, threads, stats = report_recording(args.input, sort, by_total=args.children, per_thread=args.per_thread,
                                                 limit=args.top, max_frames=args.max_frames, synth=synth,
                                                 sample_filter=selected, on_window=progress.window)
    for note in stats.notes:
        print(f"fastunwind: note: {args.input}: {note}", file=sys.stderr)
    if not table.samples:
        print(no_samples_message(args.input, selected is not None), file=sys.stderr)
        return 1
    if args.json:
        json.dump(_json(table, threads, sort, args.top, stats), out)
        out.write("\n")
    else:
        width = shutil.get_terminal_size().columns if out.isatty() else None
        _print_table(out, table, sort, args.children, width, f"{table.samples} samples of {args.input}")
        if threads is not None:
            _print_threads(out, threads, sort, args.children, width, args.top)
    return 0


def _json_row(row: Any, sort: tuple[str, ...]) -> dict[str, Any]:
    item: dict[str, Any] = {"name": _label(row, sort), "module": row.module or "", "self": row.self,
                            "total": row.total}
    if "comm" in sort:
        item["comm"] = row.comm or ""
    if "tid" in sort:
        item["pid"], item["tid"] = row.pid, row.tid
    if "srcline" in sort:
        item["srcline"] = row.srcline or ""
    return item


def _json(table: Any, threads: Any, sort: tuple[str, ...], limit: int, stats: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"samples": table.samples, "functions": [_json_row(row, sort) for row in table.rows]}
    if stats.synth != "off":
        document["synth"] = {"mode": stats.synth, "synthesized_frames": stats.derived_frames["synthesized"],
                             "corrected_frames": stats.derived_frames["corrected"],
                             "samples": sum(stats.derived_samples.values()),
                             "complete_samples": stats.derived_samples.get("end", 0)}
    if threads is not None:
        document["threads"] = [{"comm": comm, "pid": pid, "tid": tid, "samples": samples,
                                "functions": [_json_row(row, sort) for row in rows]}
                               for (pid, tid, comm), samples, rows in _by_thread(threads, limit)]
    return document


def _label(row: Any, sort: tuple[str, ...]) -> str:
    """An entry's name: its symbol; without sym in the sort, its DSO's name, else its comm."""
    if row.name is not None:
        return str(row.name)
    if row.module is not None:
        return os.path.basename(row.module) or str(row.module)
    if row.srcline is not None:
        return str(row.srcline)
    return str(row.comm or "")


def _columns(row: Any, sort: tuple[str, ...]) -> list[str]:
    """The key columns of a row, in the sort's order (perf's short DSO name: the base name)."""
    cells = {"comm": row.comm or "", "tid": f"{row.pid}/{row.tid}",
             "dso": os.path.basename(row.module or "") or (row.module or ""), "sym": row.name or "",
             "srcline": row.srcline or ""}
    return [cells[key] for key in sort]


HEADINGS = {"comm": "Command", "tid": "Pid/Tid", "dso": "Shared Object", "sym": "Symbol", "srcline": "Source:Line"}


def _print_table(out: TextIO, table: Any, sort: tuple[str, ...], by_total: bool, width: int | None, title: str,
                 samples: int | None = None) -> None:
    """The table: Self and Total as percentages of `samples` (default: the table's) and as counts,
    then the sort's keys; the last column is cut to `width` (None: printed in full)."""
    samples = samples or table.samples
    order = "total" if by_total else "self"
    out.write(f"# {title}, sorted by {order} samples (--sort {','.join(sort)})\n#\n")
    headings = ["Self", "Total", "Self n", "Total n"] + [HEADINGS[key] for key in sort]
    rows = [[f"{100 * row.self / samples:.2f}%", f"{100 * row.total / samples:.2f}%", str(row.self), str(row.total)]
            + _columns(row, sort) for row in table.rows]
    widths = [max([len(heading)] + [len(cells[i]) for cells in rows]) for i, heading in enumerate(headings)]
    numeric = 4  # right-aligned
    lines = [["#" + headings[0].rjust(widths[0] - 1)] + headings[1:]] + rows
    for cells in lines:
        parts = [cell.rjust(widths[i]) if i < numeric else cell.ljust(widths[i]) for i, cell in enumerate(cells[:-1])]
        line = "  ".join(parts + [cells[-1]])
        if width is not None and len(line) > width:
            line = line[:max(width - 1, 0)] + "…"
        out.write(line.rstrip() + "\n")


def _by_thread(threads: Any, limit: int) -> list[tuple[tuple[int, int, str], int, list[Any]]]:
    """The per-thread rows grouped by thread (pid, tid, its first comm), the threads by samples,
    each thread's first `limit` rows (-1: all)."""
    groups: dict[tuple[int, int], list[Any]] = {}
    for row in threads.rows:
        groups.setdefault((row.pid, row.tid), []).append(row)
    sections = [((pid, tid, rows[0].comm or ""), sum(row.self for row in rows), rows if limit < 0 else rows[:limit])
                for (pid, tid), rows in groups.items()]
    sections.sort(key=lambda section: -section[1])
    return sections


def _print_threads(out: TextIO, threads: Any, sort: tuple[str, ...], by_total: bool, width: int | None,
                   limit: int) -> None:
    keys = tuple(key for key in sort if key not in ("comm", "tid"))
    from fastunwind.perf.report import ReportTable

    for (pid, tid, comm), samples, rows in _by_thread(threads, limit):
        out.write("\n")
        title = (f"thread {comm} {pid}/{tid}: {samples} samples "
                 f"({100 * samples / threads.samples:.2f}% of {threads.samples})")
        _print_table(out, ReportTable(samples, rows), keys or ("sym",), by_total, width, title)
