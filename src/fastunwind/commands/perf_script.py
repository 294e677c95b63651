"""`fastunwind perf-script [-i perf.data]`: the stacks of a `perf record --call-graph dwarf`
recording, unwound by fastunwind.

The default output is the format of `perf script --no-inline -F comm,tid,time,event,ip,sym,symoff,dso`
(user frames from fastunwind's unwinding, kernel frames from the sample's kernel callchain);
`--format folded` (or `--folded`) prints collapsed stacks with counts (FlameGraph's format),
`--format speedscope` speedscope's file (one sampled profile per thread, every sample), `--format
gecko` the Firefox profiler's (profiler.firefox.com: a thread per tid, every sample with its time,
a marker per stack that did not reach its end), `--format html` a self-contained flame graph page
(zoom, search, per-thread views; no network loads); `-o FILE` writes to a file; `--stats` prints
the outcome of every unwind, frames per sample and the time spent, and with `--synth` the frames
unwound through rows derived from the machine code (`--json`: the same as one JSON object). On a
terminal a long recording shows a progress bar on stderr.
`--inline` adds the functions inlined at each frame's address and `-F +srcline` each frame's source
line, as perf script prints them (from the modules' DWARF, their separate debug files, or a
debuginfod server when DEBUGINFOD_URLS is set).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable

from fastunwind import _core
from fastunwind.commands import (add_filter_arguments, add_output_argument, add_synth_argument, command_parser,
                                 no_samples_message, recording_progress, sample_filter, synth_mode)
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

EXAMPLE = """\
examples:
  perf record --call-graph dwarf -e cpu-clock -F 999 -o perf.data -- ./my-program
  fastunwind perf-script -i perf.data | head
  fastunwind perf-script -i perf.data --folded | flamegraph.pl > flame.svg
  fastunwind perf-script -i perf.data --stats
  fastunwind perf-script -i perf.data --stats --synth repair
  fastunwind perf-script -i perf.data --format speedscope -o profile.speedscope.json
  fastunwind perf-script -i perf.data --format gecko -o profile.json   # open in profiler.firefox.com
  fastunwind perf-script -i perf.data --format html -o flame.html
  fastunwind perf-script -i perf.data --comm python3 --time 12883.9,12884.5
  fastunwind perf-script -i perf.data --inline -F +srcline
  perf record -o - --call-graph dwarf -- ./app | fastunwind perf-script -i -
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "perf-script",
                            "unwind a perf.data recording and print its stacks (perf script format, folded, stats)", __doc__, EXAMPLE)
    parser.add_argument("-i", "--input", default="perf.data",
                        help="the recording, - for standard input (perf record -o - | ...) (default: perf.data)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--folded", action="store_true", help="the same as --format folded")
    mode.add_argument("--stats", action="store_true", help="unwinding outcomes, frames per sample, ns per frame")
    mode.add_argument("--json", action="store_true", help="the statistics of --stats as one JSON object")
    parser.add_argument("--format", choices=FORMATS, default="perf",
                        help="perf: perf script's text (default); folded: collapsed stacks with counts, for flame "
                             "graphs; speedscope: speedscope's JSON file, a sampled profile per thread; gecko: the "
                             "Firefox profiler's processed profile, a thread per tid; html: a self-contained "
                             "flame graph page")
    add_output_argument(parser)
    parser.add_argument("--max-frames", type=int, default=_core.PERF_MAX_FRAMES,
                        help=f"frames per stack (default: {_core.PERF_MAX_FRAMES}, as perf)")
    parser.add_argument("--backend", choices=[b for b in _core.WALK_BACKENDS if not b.endswith("-only")], default=None,
                        help="unwind tables to use: compiled eh_elfs (see `fastunwind compile`), compact tables or "
                             "the DWARF interpreter, each with the interpreter for what it leaves; auto (default): "
                             "the compact table, and a module's eh_elf, if compiled, for the rows the table "
                             "leaves to the interpreter")
    add_synth_argument(parser)
    inline = parser.add_mutually_exclusive_group()
    inline.add_argument("--inline", action="store_true",
                        help="a line for each function inlined at a frame's address, before the frame (perf script "
                             "--inline)")
    inline.add_argument("--no-inline", action="store_false", dest="inline", help="no inlined functions (the default)")
    parser.add_argument("-F", "--fields", default="", metavar="+srcline",
                        help="+srcline: each frame's source file:line after it (perf script -F +srcline)")
    add_filter_arguments(parser)
    parser.set_defaults(run=run)


#: the fields -F may add to perf script's text
FIELDS = {"srcline": _core.UNWOUND_SRCLINE}


def srcline_fields(inline: bool, fields: str) -> int:
    """The _core.UNWOUND_* flags of --inline and -F (perf's "+field,+field" syntax); ValueError
    naming a field this text does not have."""
    flags = _core.UNWOUND_INLINE if inline else 0
    for field in filter(None, fields.split(",")):
        name = field.lstrip("+")
        if name not in FIELDS:
            raise ValueError(f"-F {fields}: only {', '.join('+' + f for f in FIELDS)} can be added")
        flags |= FIELDS[name]
    return flags


#: the outputs of --format
FORMATS = ("perf", "folded", "speedscope", "gecko", "html")

#: the formats written from a whole profile (native/core/profile.h) once every window is read
PROFILE_FORMATS = ("speedscope", "gecko", "html")


def run(args: argparse.Namespace) -> int:
    # The run makes few Python objects (none per sample) and no cycles worth collecting; importing
    # and creating the library's classes would trigger ~10 collections (1.7 ms on hackbench).
    gc.disable()
    try:
        fields = srcline_fields(args.inline, args.fields)
    except ValueError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        return 2
    selected = sample_filter(args)
    synth = synth_mode(args)
    from fastunwind.perf.script import stream_recording, write_flame_graph, write_gecko, write_speedscope

    # The recording is read window by window (memory does not grow with it) and each window's text
    # written before the next is read; --folded merges the windows' stacks and writes them at the end.
    output_format = "folded" if args.folded else args.format
    statistics = args.stats or args.json
    whole = output_format in PROFILE_FORMATS
    mode = "stats" if statistics or whole else "folded" if output_format == "folded" else "text"
    profile = _core.Profile() if whole and not statistics else None
    with recording_progress(args.input) as progress:
        progress.phase({"text": "unwinding and writing", "folded": "unwinding", "stats": "counting"}[mode])
        stats = stream_recording(args.input, sys.stdout, mode=mode, max_frames=args.max_frames, backend=args.backend,
                                 synth=synth, on_phase=progress.phase, on_window=progress.window,
                                 sample_filter=selected, consumers=[profile] if profile else (),
                                 srcline_fields=fields)
        if profile is not None and stats.samples:
            progress.phase(f"writing the {output_format} file")
            writers: dict[str, Callable[[_core.Profile, Any, str], None]] = {
                "speedscope": write_speedscope, "gecko": write_gecko, "html": write_flame_graph}
            writers[output_format](profile, sys.stdout, os.path.basename(_label(args)))
    for note in stats.notes:  # one line each on stderr, as perf's warnings
        print(f"fastunwind: note: {_label(args)}: {note}", file=sys.stderr)
    if not stats.samples:
        print(no_samples_message(_label(args), selected is not None), file=sys.stderr)
        return 1
    _warn_unusable_modules(stats)
    if args.json:
        import json

        json.dump(_stats_json(stats), sys.stdout)
        sys.stdout.write("\n")
    elif args.stats:
        _print_stats(stats)
    return 0


def _label(args: argparse.Namespace) -> str:
    """What messages call the recording: its path, or what `record` names the pipe it reads."""
    return str(getattr(args, "label", None) or args.input)


def _warn_unusable_modules(stats: Any) -> None:
    """One line on stderr per module whose recorded file is not to be had: its frames stay
    unnamed and the stacks through it stop there."""
    from fastunwind.elf.build_id_cache import build_id_cache_root

    cache = build_id_cache_root()
    for path in sorted(stats.replaced_modules):
        print(f"fastunwind: warning: {path}: changed since the recording (another build-id) and no copy "
              f"with the recorded build-id in {cache}: not used", file=sys.stderr)
    for path in sorted(stats.missing_modules):
        print(f"fastunwind: warning: {path}: not readable here and no copy with the recorded build-id in "
              f"{cache}: not used", file=sys.stderr)


def _stats_json(stats: Any) -> dict[str, Any]:
    """--json: what --stats prints, as one object."""
    depths = stats.frames_per_sample
    counted = sum(depths.values())
    derived = stats.synth != "off"
    return {
        "samples": stats.samples, "unwound_samples": stats.unwound_samples, "frames": stats.frames,
        "source": stats.source, "walk_ns": stats.walk_ns, "seconds": round(stats.total_seconds, 6),
        "outcomes": dict(stats.outcomes.most_common()),
        "frames_per_sample": {"mean": round(sum(d * n for d, n in depths.items()) / counted, 3) if counted else 0.0,
                              "max": max(depths, default=0)},
        "modules": [{"path": t["path"], "compact_table": t["source"], "bytes_per_row": round(t["bytes_per_row"], 3),
                     "slow_rows": t["slow_rows"], "rows": t["rows"],
                     **({"synthesized_rows": t["synthesized_rows"], "corrected_rows": t["corrected_rows"]} if derived else {})}
                    for t in sorted(stats.tables(), key=lambda t: t["path"])],
        "synth": {"mode": stats.synth, "synthesized_frames": stats.derived_frames["synthesized"],
                  "corrected_frames": stats.derived_frames["corrected"],
                  "samples": sum(stats.derived_samples.values()),
                  "complete_samples": stats.derived_samples.get("end", 0)} if derived else None,
        "cut": stats.cut.note if stats.cut is not None else None,
        "replaced_modules": sorted(stats.replaced_modules), "missing_modules": sorted(stats.missing_modules),
    }


def _print_stats(stats: Any) -> None:
    from rich.console import Console
    from rich.markup import escape  # paths like perf's [vdso] are not markup
    from rich.table import Table

    console = Console(highlight=False)
    per_frame = stats.walk_ns / stats.frames if stats.frames else 0.0
    if stats.source == "dwarf":
        console.print(
            f"{stats.samples} samples, {stats.unwound_samples} with user stacks, {stats.frames} user frames; "
            f"unwinding took {stats.walk_ns / 1e6:.2f} ms ({per_frame:.1f} ns/frame), "
            f"{stats.total_seconds:.2f} s in all"
        )
    else:
        what = "callchains" if stats.source == "callchain" else "sampled IPs"
        console.print(f"{stats.samples} samples, {stats.unwound_samples} with user frames, {stats.frames} user "
                      f"frames from the kernel's {what} (not unwound: no user stacks recorded); "
                      f"{stats.total_seconds:.2f} s in all")
    if stats.cut is not None:
        console.print(f"[yellow]cut short:[/yellow] {escape(stats.cut.note)}")
        if stats.cut.missing_features:
            console.print(f"feature sections absent: {', '.join(stats.cut.missing_features)}")
    outcomes = Table("outcome", "samples", box=None)
    for name, count in stats.outcomes.most_common():
        outcomes.add_row(name, str(count))
    console.print(outcomes)
    if stats.synth != "off":
        derived = sum(stats.derived_samples.values())
        complete = stats.derived_samples.get("end", 0)
        console.print(f"synthesized rows ({stats.synth}): {stats.derived_frames['synthesized']} frames through "
                      f"synthesized rows, {stats.derived_frames['corrected']} through corrected rows, in {derived} "
                      f"samples ({complete} of them complete)")
    depths = sorted(stats.frames_per_sample.items())
    if depths:
        mean = sum(d * n for d, n in depths) / max(1, sum(n for _, n in depths))
        console.print(f"frames per sample: mean {mean:.1f}, max {depths[-1][0]}")
    table_statistics = stats.tables()
    if table_statistics:
        derived = ("synthesized rows", "corrected rows") if stats.synth != "off" else ()
        tables = Table("module", "compact table", "bytes/row", "slow-path rows", *derived, box=None)
        for t in sorted(table_statistics, key=lambda t: t["path"]):
            tables.add_row(escape(t["path"]), t["source"], f"{t['bytes_per_row']:.1f}",
                           f"{t['slow_rows']} of {t['rows']} ({100 * t['slow_row_fraction']:.2f}%)",
                           *((str(t["synthesized_rows"]), str(t["corrected_rows"])) if derived else ()))
        console.print(tables)
    for path in sorted(stats.replaced_modules):
        console.print(f"[yellow]replaced since recording (build-id differs), not used:[/yellow] {escape(path)}")
    for path in sorted(stats.missing_modules):
        console.print(f"[yellow]not readable here:[/yellow] {escape(path)}")
