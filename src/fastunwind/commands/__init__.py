"""One module per CLI command; each has add_parser(subparsers) and run(args) -> exit status."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def command_parser(subparsers: Any, name: str, summary: str, description: str | None, example: str
                   ) -> argparse.ArgumentParser:
    """A command's subparser: `summary` in the command list, the module's docstring as its
    description and its examples after the options, both kept as written."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=summary, description=description, epilog=example, formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def add_snapshot_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that print thread stacks (stacks.py): --registers, --json, -o."""
    parser.add_argument("--registers", action="store_true",
                        help="every register each frame recovers (<unknown> where no unwind rule recovers one)")
    parser.add_argument("--json", action="store_true",
                        help='one JSON document: {"pid", "threads": [{"tid", "name", "outcome", "frames": '
                             '[{"address", "symbol", "offset", "module", "registers"}]}]}')
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")


def write_snapshot(snapshot: Any, args: argparse.Namespace) -> None:
    """A snapshot of thread stacks (stacks.ProcessSnapshot) as text, or JSON with --json, to -o FILE
    or stdout."""
    from fastunwind import stacks

    render = stacks.render_json if args.json else stacks.render_text
    if args.output:
        with open(args.output, "w") as out:
            render(snapshot, out)
    else:
        render(snapshot, sys.stdout)


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """perf script's and perf report's sample filters, with perf's names and syntax."""
    group = parser.add_argument_group("sample filters (perf's syntax)")
    group.add_argument("--comm", "--comms", dest="comm", metavar="COMM[,COMM...]",
                       help="only samples of threads of these names")
    group.add_argument("--pid", metavar="PID[,PID...]", help="only samples of these processes")
    group.add_argument("--tid", metavar="TID[,TID...]", help="only samples of these threads")
    group.add_argument("--cpu", metavar="CPUS", help="only samples taken on these CPUs (0-2,4)")
    group.add_argument("--time", metavar="START,END",
                       help="only samples in this time range, seconds as perf script prints them "
                            "(either side may be empty; several ranges separated by spaces)")


def sample_filter(args: argparse.Namespace) -> Any:
    """The SampleFilter of the arguments (perf/sample_filter.py), None without filters; a bad value
    is one line on stderr and SystemExit(2)."""
    if not any((args.comm, args.pid, args.tid, args.cpu, args.time)):
        return None
    from fastunwind.perf.sample_filter import SampleFilter, parse_cpus, parse_ids, parse_names, parse_times

    try:
        return SampleFilter(pids=parse_ids(args.pid, "pid list") if args.pid else (),
                            tids=parse_ids(args.tid, "tid list") if args.tid else (),
                            cpus=parse_cpus(args.cpu) if args.cpu else (),
                            ranges=parse_times(args.time) if args.time else (),
                            comms=parse_names(args.comm) if args.comm else ())
    except ValueError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def no_samples_message(path: str, filtered: bool) -> str:
    """The error of a run that found no sample (one line)."""
    what = "no samples selected by the filters" if filtered else "no samples in the recording"
    return f"fastunwind: error: {path}: {what}"
