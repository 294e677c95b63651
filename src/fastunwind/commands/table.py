"""`fastunwind table FILE`: the unwind table of an ELF file.

By default the output is byte for byte what `readelf --debug-dump=frames-interp FILE` prints;
`--raw` matches `readelf --debug-dump=frames`; `--json` streams rows with their full rules;
`--summary` fits on one screen.
"""

from __future__ import annotations

import argparse
import sys

from fastunwind.commands import add_output_argument, command_parser
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, TextIO
    from fastunwind.cfi import CfiSection

EXAMPLE = """\
examples:
  fastunwind table /lib/x86_64-linux-gnu/libc.so.6 | diff - <(readelf -wF /lib/x86_64-linux-gnu/libc.so.6)
  fastunwind table --summary /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1
  fastunwind table --json ./a.out | jq '.sections[0].fdes[0].rows[0]'
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "table",
                            "print the unwind table of an ELF file (readelf -wF format, raw, JSON or summary)", __doc__, EXAMPLE)
    parser.add_argument("file", help="ELF file (executable, shared library, object or debug file)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--raw", action="store_true", help="instruction listing, like readelf -wf")
    mode.add_argument("--json", action="store_true", help="rows with every register rule, as JSON")
    mode.add_argument("--summary", action="store_true", help="one-screen summary: entries, rows, rules, expressions")
    parser.add_argument(
        "--no-follow-links", action="store_true",
        help="do not show the separate debug files that readelf follows by default",
    )
    add_output_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # imported here: the readelf-format path needs neither the dataclass API nor rich
    if args.summary:
        return _summary(args.file, sys.stdout)
    if args.json:
        return _json(args.file, sys.stdout)
    from fastunwind.cfi_print import render_file

    sys.stdout.flush()
    errors = render_file(args.file, sys.stdout.buffer, raw=args.raw, follow_links=not args.no_follow_links)
    sys.stdout.flush()
    for error in errors:
        print(f"fastunwind: error: {error}", file=sys.stderr)
    return 1 if errors else 0


def _json(path: str, out: TextIO) -> int:
    import json

    from fastunwind.cfi import UnwindInfo

    info = UnwindInfo.open(path, strict=False)
    out.write('{"file": %s, "sections": [' % json.dumps(path))
    for section_number, section in enumerate(info.sections):
        if section_number:
            out.write(", ")
        out.write(
            '{"name": %s, "path": %s, "address": %d, "fdes": ['
            % (json.dumps(section.name), json.dumps(section.path), section.address)
        )
        for fde_number, fde in enumerate(section.fdes()):
            if fde_number:
                out.write(", ")
            head = {
                "offset": fde.offset,
                "cie_offset": fde.cie.offset,
                "augmentation": fde.cie.augmentation,
                "pc_begin": fde.pc_begin,
                "pc_end": fde.pc_end,
                "signal_frame": fde.signal_frame,
                "lsda": fde.lsda,
            }
            rows = [row.to_json() for row in section.rows(fde)]
            out.write(json.dumps({**head, "rows": rows}))
        out.write('], "errors": %s}' % json.dumps([str(e) for e in section.errors]))
    out.write("]}\n")
    return 1 if any(section.errors for section in info.sections) else 0


def section_statistics(section: CfiSection) -> dict[str, Any]:
    """Counts of rows by CFA rule, register rules by kind and expressions (by row), computed per
    distinct state rather than per row."""
    from collections import Counter

    from fastunwind.cfi import RuleKind, register_name

    _, state_ids = section.row_arrays()
    rows_per_state = Counter(state_ids)
    cfa_rules: Counter[str] = Counter()
    register_rules: Counter[str] = Counter()
    expressions: Counter[str] = Counter()
    for state_id, rows in rows_per_state.items():
        cfa, registers = section.state(state_id)
        if cfa.kind == RuleKind.CFA_EXPRESSION:
            cfa_rules["expression"] += rows
            expressions[f"CFA={cfa.describe()}"] += rows
        elif cfa.kind == RuleKind.CFA_REG_OFFSET:
            cfa_rules[f"{register_name(cfa.register)}+k"] += rows
        else:
            cfa_rules["none"] += rows
        for column, rule in registers.items():
            register_rules[rule.kind.name.lower()] += rows
            if rule.kind in (RuleKind.EXPRESSION, RuleKind.VAL_EXPRESSION):
                expressions[f"{register_name(column)}={rule.describe()}"] += rows
    fdes = sum(1 for _ in section.fdes())
    return {
        "fdes": fdes,
        "cies": sum(1 for _ in section.cies()),
        "rows": section.row_count,
        "states": section.state_count,
        "cfa_rules": cfa_rules,
        "register_rules": register_rules,
        "expressions": expressions,
        "errors": [str(error) for error in section.errors],
        "memory": section.memory(),
    }


def _summary(path: str, out: TextIO) -> int:
    import time

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from fastunwind.cfi import DEBUG_FRAME, UnwindInfo

    console = Console(file=out, highlight=False)
    started = time.perf_counter()
    info = UnwindInfo.open(path, strict=False)
    elapsed = time.perf_counter() - started
    console.print(f"[bold]{escape(path)}[/bold]  parsed and evaluated in {elapsed * 1000:.1f} ms")
    if info.eh_frame_hdr is not None:
        console.print(f".eh_frame_hdr: {len(info.eh_frame_hdr.locations)} sorted entries, used for lookups")
    else:
        console.print(f".eh_frame_hdr: not used ({info.eh_frame_hdr_error}); lookups use the linear index")
    status = 0
    for section in info.sections:
        stats = section_statistics(section)
        origin = "" if section.path == path else f" (from {section.path})"
        memory = sum(stats["memory"].values())
        per_row = memory / stats["rows"] if stats["rows"] else 0.0
        console.print(
            f"\n[bold]{section.name}[/bold]{origin}: {stats['cies']} CIEs, {stats['fdes']} FDEs, "
            f"{stats['rows']} rows, {stats['states']} distinct row states, "
            f"{memory / 1e6:.1f} MB in memory ({per_row:.1f} bytes/row)"
        )
        rules = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        rules.add_column("CFA rule")
        rules.add_column("rows", justify="right")
        rules.add_column("register rule")
        rules.add_column("rows x columns", justify="right")
        cfa = stats["cfa_rules"].most_common(6)
        regs = stats["register_rules"].most_common(6)
        for i in range(max(len(cfa), len(regs))):
            left = cfa[i] if i < len(cfa) else ("", "")
            right = regs[i] if i < len(regs) else ("", "")
            rules.add_row(left[0], str(left[1]), right[0], str(right[1]))
        console.print(rules)
        if stats["expressions"]:
            console.print(f"expressions ({len(stats['expressions'])} distinct), by rows:")
            for text, rows in stats["expressions"].most_common(4):
                console.print(f"  {rows:>8}  {text}", soft_wrap=True)
        if stats["errors"]:
            status = 1
            console.print(f"[red]{len(stats['errors'])} malformed entries[/red], first: {stats['errors'][0]}")
    if not info.sections:
        console.print("no .eh_frame or .debug_frame section")
    elif not any(s.kind == DEBUG_FRAME for s in info.sections):
        console.print("\n(no .debug_frame, in the file or a separate debug file)")
    return status
