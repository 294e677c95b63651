"""`fastunwind cache`: what fastunwind keeps under $XDG_CACHE_HOME/fastunwind (compact tables,
compiled eh_elfs, symbol tables), and room made there: `--max-size` removes the least recently used
entries until the caches fit, `--clear` removes them all. Removing is always safe: an entry is
rebuilt when needed (compact and symbol tables on the fly, eh_elfs by `fastunwind compile`).
"""

from __future__ import annotations

import argparse
import re

from fastunwind.commands import add_output_argument, command_parser

from fastunwind.errors import FastunwindError
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

EXAMPLE = """\
examples:
  fastunwind cache
  fastunwind cache --max-size 500M
  fastunwind cache --clear
  fastunwind cache --json
"""

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes of `text`: a number with an optional K, M or G (powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)B?\s*", text, re.IGNORECASE)
    if not match:
        raise FastunwindError(f"--max-size {text!r}: a size like 500M, 2G or 100000")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "cache",
                            "list, prune or clear the caches of compact tables, compiled eh_elfs and symbol tables", __doc__, EXAMPLE)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--max-size", metavar="SIZE", help="remove least recently used entries until the caches fit")
    action.add_argument("--clear", action="store_true", help="remove every entry")
    parser.add_argument("--json", action="store_true",
                        help='one JSON object: {"root", "entries", "bytes", "kinds": [...], "removed"}')
    add_output_argument(parser)
    parser.set_defaults(run=run)


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def run(args: argparse.Namespace) -> int:
    from fastunwind import cache

    removed = None
    if args.clear or args.max_size is not None:
        removed = cache.clear() if args.clear else cache.prune(parse_size(args.max_size))
    current = cache.entries()
    kinds = [(kind, [e for e in current if e.kind == kind]) for kind in cache.KINDS]
    if args.json:
        import json

        document: dict[str, Any] = {
            "root": cache.cache_root(), "entries": len(current), "bytes": sum(e.size for e in current),
            "kinds": [{"kind": kind, "entries": len(mine), "bytes": sum(e.size for e in mine),
                       "directory": cache.cache_dir(kind)} for kind, mine in kinds]}
        if removed is not None:
            document["removed"] = {"entries": len(removed), "bytes": sum(e.size for e in removed)}
        print(json.dumps(document))
        return 0
    if removed is not None:
        print(f"removed {len(removed)} entries, {_human(sum(e.size for e in removed))}")
    print(f"{cache.cache_root()}: {len(current)} entries, {_human(sum(e.size for e in current))}")
    width = max((len(kind) for kind, _ in kinds), default=0)
    for kind, mine in kinds:
        print(f"  {kind:{width}} {len(mine):5} entries  {_human(sum(e.size for e in mine)):>10}  {cache.cache_dir(kind)}")
    return 0
