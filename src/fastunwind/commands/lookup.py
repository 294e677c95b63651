"""`fastunwind lookup FILE ADDRESS`: the unwind row in force at an address of an ELF file.

ADDRESS is an address as stated in the file (svma), in hex (0x...) or decimal. The FDE is found
through `.eh_frame_hdr`'s binary search table when it is valid, else through the index built from
`.eh_frame`; `.debug_frame` (also from a separate debug file) is searched after `.eh_frame`.
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
  fastunwind lookup /lib/x86_64-linux-gnu/libc.so.6 0x27290
  fastunwind lookup --json /lib/x86_64-linux-gnu/libc.so.6 0x27290
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "lookup",
                            "print the unwind row that applies at an address", __doc__, EXAMPLE)
    parser.add_argument("file", help="ELF file")
    parser.add_argument("address", type=address, help="address in the file (svma), e.g. 0x27290")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_output_argument(parser)
    parser.set_defaults(run=run)


def address(text: str) -> int:
    """An address argument: hex with 0x, or decimal (argparse names this function in its error)."""
    value = int(text, 0)
    if value < 0:
        raise ValueError(text)
    return value


def run(args: argparse.Namespace) -> int:
    from fastunwind.cfi import RETURN_ADDRESS_COLUMN, UnwindInfo, register_name

    info = UnwindInfo.open(args.file, strict=False)
    section, fde, row = info.lookup(args.address)
    if args.json:
        import json  # here: the text answer would pay ~5.6M instructions for it

        json.dump(
            {
                "address": args.address,
                "section": section.name,
                "path": section.path,
                "fde_offset": fde.offset,
                "cie_offset": fde.cie.offset,
                "pc_begin": fde.pc_begin,
                "pc_end": fde.pc_end,
                "signal_frame": fde.signal_frame,
                "row": row.to_json(),
            },
            sys.stdout,
        )
        print()
        return 0
    origin = "" if section.path == args.file else f" of {section.path}"
    print(
        f"0x{args.address:x}: FDE at {section.name}+0x{fde.offset:x}{origin} "
        f"(pc 0x{fde.pc_begin:x}..0x{fde.pc_end:x}, CIE at 0x{fde.cie.offset:x} \"{fde.cie.augmentation}\""
        f"{', signal frame' if fde.signal_frame else ''})"
    )
    print(f"row 0x{row.start:x}..0x{row.end:x}")
    print(f"  CFA = {row.cfa.describe()}")
    for column, rule in sorted(row.registers.items()):
        name = "ra" if column == RETURN_ADDRESS_COLUMN else register_name(column)
        print(f"  {name:<5} = {rule.describe()}")
    return 0
