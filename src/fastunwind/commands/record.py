"""`fastunwind record [-F HZ] [-p PID | -- CMD] -o FILE [--format ...]`: one command from a program
to its profile. perf records the program with `--call-graph dwarf` into a pipe; its samples are
unwound and symbolized as they arrive (no stack dump is written to disk) and the output is written
when the program ends, or on Ctrl-C (perf stops cleanly, the output is written). The formats and
options are perf-script's.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from fastunwind import _core
from fastunwind.commands import command_parser, perf_script
from fastunwind.errors import FastunwindError

EXAMPLE = """\
examples:
  fastunwind record -o profile.speedscope.json --format speedscope -- ./my-program arg
  fastunwind record -F 4999 --format folded -o stacks.folded -- make -j2
  fastunwind record -p 1234 -o perf.txt           (Ctrl-C to stop)
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "record",
                            "record a program with perf and write its unwound profile (perf-script's formats)",
                            __doc__, EXAMPLE)
    parser.add_argument("-F", "--frequency", type=int, default=999, metavar="HZ",
                        help="samples per second (default: 999)")
    parser.add_argument("-e", "--event", default="cpu-clock", help="the event sampled (default: cpu-clock)")
    parser.add_argument("-p", "--pid", type=int, help="record this running process until Ctrl-C")
    parser.add_argument("-o", "--output", help="write to this file (default: standard output)")
    parser.add_argument("--format", choices=perf_script.FORMATS, default="perf",
                        help="the output, as perf-script's --format (default: perf script's text)")
    parser.add_argument("--inline", action="store_true", help="inlined functions, as perf-script --inline")
    parser.add_argument("--fields", default="", metavar="+srcline", help="as perf-script -F +srcline")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to record and its arguments")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fastunwind.perf.record import PerfRecording, RecordError, perf_record_command

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if (args.pid is None) == (not command):
        print("fastunwind: error: give either -p PID or -- COMMAND", file=sys.stderr)
        return 2
    if args.frequency <= 0:
        print(f"fastunwind: error: -F {args.frequency}: the frequency must be positive", file=sys.stderr)
        return 2
    if args.output:  # an unwritable output is found before anything is recorded
        try:
            with open(args.output, "ab"):
                pass
        except OSError as error:
            print(f"fastunwind: error: cannot write {args.output}: {error.strerror or error}", file=sys.stderr)
            return 1
    try:
        recording = PerfRecording(perf_record_command(frequency=args.frequency, event=args.event, pid=args.pid,
                                                      command=command))
    except RecordError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        return 1
    script_args = argparse.Namespace(
        input=recording.path, label=f"perf record of {' '.join(command) if command else f'pid {args.pid}'}",
        folded=False, stats=False, format=args.format, output=args.output,
        max_frames=_core.PERF_MAX_FRAMES, backend=None, inline=args.inline, fields=args.fields,
        comm=None, pid=None, tid=None, cpu=None, time=None)
    failure: FastunwindError | None = None
    try:
        status = perf_script.run(script_args)
    except FastunwindError as error:  # an empty or broken stream: perf's failure explains it, if it failed
        status, failure = 1, error
    except BaseException:
        recording.stop()
        raise
    try:
        recording.finish()
    except RecordError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        return 1
    if failure is not None:
        raise failure
    if status == 0 and args.output:
        print(f"fastunwind: wrote {os.path.abspath(args.output)}", file=sys.stderr)
    return status
