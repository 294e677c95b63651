"""`fastunwind synth FILE`: the file's unwind table with the machine code's word where its CFI is
missing or proven wrong.

The file is checked first (as `fastunwind check` does); then every FDE's rows are collected, each
FDE marked by where they come from: `declared` (the file's own), `corrected` (with --mode repair:
an FDE the check proved wrong, its rows derived from the code) or `synthesized` (code without CFI:
function symbols and call targets no FDE covers, rows derived from the code).

The table is printed in the layout of `readelf --debug-dump=frames-interp` (-wF) for the
`.debug_frame` section it is written as, each FDE header followed by `# declared: ...`,
`# corrected: ...` or `# synthesized: ...`; a declared FDE's rows are byte for byte those readelf
prints for the file itself. `--json` gives the FDEs with their pc ranges, origins and rows.

`--write-debug-file OUT` writes an ELF debug file (the layout of `objcopy --only-keep-debug`: the
headers, the notes with the build-id, the symbols and DWARF, no code or data) whose `.debug_frame`
holds the table; OUT a directory writes it at OUT/.build-id/xx/yyyy.debug, where gdb (`set
debug-file-directory OUT` before it reads the program: `gdb -iex ...`) and libdw (/usr/lib/debug,
eu-stack's --debuginfo-path) look for it. (perf 6.1 and libunwind on Debian 12 read no .debug_frame.)

Modes: `missing` (default) the declared FDEs plus synthesized ones for code without CFI; `repair`
also the corrected FDEs in place of those the check proved wrong (undecided ones stay declared).

Exit status: 0 the table was made (and written); 1 a failure (the file cannot be read or is not
x86-64 ELF, the debug file cannot be written).
"""

from __future__ import annotations

import argparse
import sys

from fastunwind.commands import add_output_argument, command_parser
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

EXAMPLE = """\
examples:
  fastunwind synth ./program                         # declared rows, and synthesized ones where no CFI
  fastunwind synth --mode repair --json -o table.json /lib/x86_64-linux-gnu/libc.so.6
  fastunwind synth --mode repair --write-debug-file /tmp/debug ./program
  gdb -iex 'set debug-file-directory /tmp/debug' ./program   # gdb unwinds through the synthesized rows
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "synth", "the unwind table with synthesized and corrected rows", __doc__,
                            EXAMPLE)
    parser.add_argument("file", metavar="FILE", help="an x86-64 ELF executable or shared object")
    parser.add_argument("--mode", choices=("missing", "repair"), default="missing",
                        help="missing: synthesize rows for code without CFI (default); repair: also replace the "
                             "FDEs the check proved wrong")
    parser.add_argument("--json", action="store_true",
                        help="{file, mode, fdes: [{pc_begin, pc_end, origin, section, entry, rows}], uncovered}")
    add_output_argument(parser)
    parser.add_argument("--write-debug-file", metavar="OUT",
                        help="write an ELF debug file whose .debug_frame holds the table to OUT (a directory: at "
                             "OUT/.build-id/xx/yyyy.debug)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="threads checking FDEs in parallel (default 1)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fastunwind import synth

    if args.jobs < 1:
        print(f"fastunwind: error: -j {args.jobs}: at least one thread is needed", file=sys.stderr)
        return 1
    synthesis = synth.synthesize(args.file, args.mode, jobs=args.jobs)
    sys.stdout.flush()
    with open(sys.stdout.fileno(), "wb", closefd=False) as out:  # the -o file when cli.main opened one
        if args.json:
            synth.write_json(synthesis, out)
        else:
            out.flush()
            synth.render(synthesis, out.fileno())  # printed by the C core, a chunk at a time
    if args.write_debug_file:
        written = synth.write_debug_file(synthesis, args.write_debug_file)
        counts = synthesis.counts()
        print(f"fastunwind: wrote {written}: {counts['declared']} declared, {counts['corrected']} corrected, "
              f"{counts['synthesized']} synthesized FDEs", file=sys.stderr)
    return 0
