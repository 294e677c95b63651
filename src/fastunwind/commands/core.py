"""`fastunwind core FILE`: every thread's stack from an ELF core file (the kernel's or gdb's gcore).

The threads are walked in C over the core's memory and the files the process had mapped, each
checked against the build-id the core holds for it: a file that differs, or is missing, is named
on stderr (one line per module) and not used; the vDSO comes from the core. `--synth` as
perf-script's (default missing): code without CFI is walked through rows derived from its machine
code. Frame 0's address is
the interrupted PC, a caller's its return address (as eu-stack prints them). Exit status 0 when
every stack reached its outermost frame, 2 when one did not (its last line says why), 1 when the
core cannot be read.
"""

from __future__ import annotations

import argparse
import sys

from fastunwind.commands import (add_snapshot_output_arguments, add_synth_argument, command_parser, synth_mode,
                                 write_snapshot)
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

EXAMPLE = """\
examples:
  fastunwind core core.1234
  fastunwind core --exe ./myprogram --registers core.1234
  fastunwind core --sysroot /srv/their-root --json -o stacks.json core.1234
"""

#: exit status when a thread's stack did not reach its outermost frame
INCOMPLETE_STATUS = 2


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "core", "print every thread's stack from a core file", __doc__, EXAMPLE)
    parser.add_argument("file", help="ELF core file")
    parser.add_argument("--exe", metavar="EXE", help="the program's file, where its path in the core is not it")
    parser.add_argument("--sysroot", metavar="DIR", help="look the core's files up under DIR (a core from another "
                                                          "machine)")
    add_snapshot_output_arguments(parser)
    add_synth_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fastunwind import core

    synth = synth_mode(args)
    with core.open(args.file, exe=args.exe, sysroot=args.sysroot) as opened:
        for problem in opened.problems:
            print(f"fastunwind: warning: {problem}", file=sys.stderr)
        snapshot = opened.snapshot(with_registers=args.registers or args.json, synth=synth)
    write_snapshot(snapshot, args)
    return 0 if snapshot.complete else INCOMPLETE_STATUS
