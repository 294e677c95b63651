"""The `fastunwind` command line: a thin shell over the library, one module per command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from fastunwind import __version__
from fastunwind.commands import bench, cache, check, lookup, perf_script, record, report, table
from fastunwind.commands import compile as compile_command
from fastunwind.errors import FastunwindError

COMMANDS = (table, lookup, check, perf_script, report, record, bench, compile_command, cache)


#: the command name each module registers (its add_parser's first argument)
COMMAND_NAMES = {
    "table": table, "lookup": lookup, "perf-script": perf_script, "report": report, "bench": bench, "compile": compile_command,
    "cache": cache, "check": check, "record": record,
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with `only`, just that command's subparser (argparse spends ~2 ms per
    subparser, a third of a short command's run)."""
    parser = argparse.ArgumentParser(
        prog="fastunwind",
        description="Fast, trustworthy DWARF call frame information for Linux x86-64.",
        epilog="Run 'fastunwind COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"fastunwind {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in (COMMAND_NAMES[only],) if only else COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    first = arguments[0] if arguments else None
    parser = build_parser(first if first in COMMAND_NAMES else None)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as usage:
        # argparse exits 2 on a usage error; a command whose 2 means something else names its own
        usage_status = getattr(COMMAND_NAMES.get(first or ""), "USAGE_ERROR_STATUS", None)
        if usage.code == 2 and usage_status is not None:
            return int(usage_status)
        raise
    try:
        return int(args.run(args))
    except FastunwindError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `fastunwind table big.so | head`: stop quietly, like readelf; stdout goes to /dev/null so
        # that the interpreter's final flush does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # a missing or unreadable file
        where = f"{error.filename}: " if error.filename else ""
        print(f"fastunwind: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1
