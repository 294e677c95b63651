"""`fastunwind record [-F HZ] [-p PID | -- CMD] [-o FILE] [--format ...]`: one command from a program
to its profile. perf records the program with `--call-graph dwarf` into a pipe; its samples are
unwound and symbolized as they arrive (no stack dump is written to disk) and the output is written
when the program ends, or on Ctrl-C (perf stops cleanly, the output is written). The formats and
options are perf-script's.

With `--bpf` the stacks are unwound in the kernel instead (commands/record_bpf.py): no perf, no
stack copies at all; `-a` samples every process, `--duration` stops after so many seconds.
"""

from __future__ import annotations

import argparse
import os
import sys

from fastunwind import _core
from fastunwind.commands import add_output_argument, add_synth_argument, command_parser, perf_script
from fastunwind.errors import FastunwindError
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

EXAMPLE = """\
examples:
  fastunwind record -o profile.speedscope.json --format speedscope -- ./my-program arg
  fastunwind record -F 4999 --format folded -o stacks.folded -- make -j2
  fastunwind record -p 1234 -o perf.txt           (Ctrl-C to stop)
  sudo fastunwind record --bpf -F 999 -o out.folded -- ./my-program --its-options
  sudo fastunwind record --bpf -p 1234,1240 --duration 10 --format speedscope -o profile.json
  sudo fastunwind record --bpf -a --duration 5 --json
"""

#: samples per second per CPU unless -F says: perf's recording copies a stack per sample, the
#: in-kernel unwinder's costs a walk (docs/BENCHMARKS.md)
DEFAULT_FREQUENCY = {"perf": 999, "bpf": 99}


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "record",
                            "record a program with perf (or in the kernel with --bpf) and write its unwound profile",
                            __doc__, EXAMPLE)
    parser.add_argument("--bpf", action="store_true",
                        help="unwind in the kernel with the BPF unwinder (root)")
    parser.add_argument("-F", "--frequency", type=int, metavar="HZ",
                        help=f"samples per second (default: {DEFAULT_FREQUENCY['perf']}, "
                             f"with --bpf {DEFAULT_FREQUENCY['bpf']} per CPU)")
    parser.add_argument("-e", "--event", default="cpu-clock", help="the event perf samples (default: cpu-clock)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-p", "--pid", metavar="PID[,PID...]", help="record these running processes until Ctrl-C")
    scope.add_argument("-a", "--all-cpus", action="store_true", help="every process (--bpf)")
    parser.add_argument("--duration", type=float, metavar="SECONDS", help="stop after this long (--bpf)")
    parser.add_argument("--format", choices=perf_script.FORMATS, default=None,
                        help="the output, as perf-script's --format (default: perf script's text; with --bpf folded)")
    parser.add_argument("--json", action="store_true", help="with --bpf: the summary as JSON instead of the profile")
    parser.add_argument("--table-mib", type=int, metavar="MIB",
                        help="with --bpf: BPF map memory for unwind tables; beyond it the oldest modules no "
                             "process maps are evicted first (at most 262143; default: the tables the processes "
                             "in scope map at the start and half as much again, from 32 to 512 MiB and a "
                             "sixteenth of the memory, growing up to that limit for modules mapped later)")
    parser.add_argument("--inline", action="store_true", help="inlined functions, as perf-script --inline")
    parser.add_argument("--fields", default="", metavar="+srcline", help="as perf-script -F +srcline")
    add_synth_argument(parser)
    add_output_argument(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to record and its arguments")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.bpf:
        return _record_in_kernel(args)
    from fastunwind.perf.record import PerfRecording, RecordError, perf_record_command

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    for option, given in (("-a", args.all_cpus), ("--duration", args.duration is not None), ("--json", args.json)):
        if given:
            print(f"fastunwind: error: {option} needs --bpf", file=sys.stderr)
            return 2
    if (args.pid is None) == (not command):
        print("fastunwind: error: give either -p PID or -- COMMAND", file=sys.stderr)
        return 2
    frequency = DEFAULT_FREQUENCY["perf"] if args.frequency is None else args.frequency
    if frequency <= 0:
        print(f"fastunwind: error: -F {frequency}: the frequency must be positive", file=sys.stderr)
        return 2
    try:
        recording = PerfRecording(perf_record_command(frequency=frequency, event=args.event, pid=args.pid,
                                                      command=command))
    except RecordError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        return 1
    script_args = argparse.Namespace(
        input=recording.path, label=f"perf record of {' '.join(command) if command else f'pid {args.pid}'}",
        folded=False, stats=False, json=False, format=args.format or "perf", max_frames=_core.PERF_MAX_FRAMES,
        backend=None, synth=args.synth, inline=args.inline, fields=args.fields,
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


def _record_in_kernel(args: argparse.Namespace) -> int:
    from fastunwind.commands import record_bpf

    for option, given in (("--inline", args.inline), ("--fields", bool(args.fields))):
        if given:
            print(f"fastunwind: error: {option} is not available with --bpf", file=sys.stderr)
            return 2
    args.format = args.format or record_bpf.FORMATS[0]
    if args.frequency is None:
        args.frequency = DEFAULT_FREQUENCY["bpf"]
    return record_bpf.run(args)
