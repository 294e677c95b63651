"""`fastunwind backtrace -p PID`: every thread's stack of a running process, as eu-stack and gdb's
`thread apply all bt` show it: frame number, address (frame 0: the interrupted PC; callers: return
addresses), function+offset and module; `--registers` adds each register every frame recovers
(`<unknown>` where no unwind rule recovers one), `--json` the same as one JSON document. Each
thread is stopped alone and only while its registers and stack are copied (live.py); every thread
is released, also on an error, Ctrl-C or SIGTERM. `--synth` as perf-script's (default missing):
code without CFI is walked through rows derived from its machine code.
"""

from __future__ import annotations

import argparse
import gc
import signal

from fastunwind.commands import (add_snapshot_output_arguments, add_synth_argument, command_parser, synth_mode,
                                 write_snapshot)
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, NoReturn

EXAMPLE = """\
examples:
  fastunwind backtrace -p 1234
  fastunwind backtrace -p 1234 --tid 1240 --registers
  fastunwind backtrace -p 1234 --json -o stacks.json
  fastunwind backtrace -p 1234 --synth off       # the CFI alone
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "backtrace", "every thread's stack of a live process (like eu-stack -p)",
                            __doc__, EXAMPLE)
    parser.add_argument("-p", "--pid", type=int, required=True, help="the process")
    parser.add_argument("--tid", type=int, action="append", metavar="TID",
                        help="only this thread (repeat for several)")
    add_snapshot_output_arguments(parser)
    add_synth_argument(parser)
    parser.set_defaults(run=run)


def _interrupted(signum: int, _frame: Any) -> NoReturn:
    raise KeyboardInterrupt(signum)


def run(args: argparse.Namespace) -> int:
    # The snapshot's objects (a frame per distinct frame, a tuple per walker frame) hold no cycles:
    # no collections during the run, and the interpreter's collections at exit skip what start-up
    # made (frozen); they were a tenth of a run's instructions.
    gc.disable()
    gc.freeze()
    from fastunwind import live

    synth = synth_mode(args)

    previous = signal.signal(signal.SIGTERM, _interrupted)  # cli.main reports the KeyboardInterrupt
    try:
        snapshot = live.backtrace(args.pid, args.tid, with_registers=args.registers or args.json,
                                 synth=synth)
    finally:
        signal.signal(signal.SIGTERM, previous)
    write_snapshot(snapshot, args)
    return 0
