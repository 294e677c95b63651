"""The `fastunwind` command line: a thin shell over the library, one module per command."""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from fastunwind import __version__
from fastunwind.commands import HelpFormatter, output_to
from fastunwind.errors import FastunwindError
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NoReturn

#: exit status after Ctrl-C (128 + SIGINT, as a shell reports an interrupted command)
INTERRUPTED_STATUS = 130

#: the command name each module of fastunwind.commands registers (its add_parser's first
#: argument), in the order of the command list; a command runs importing its module alone
COMMAND_MODULES = {
    "table": "table", "lookup": "lookup", "check": "check", "synth": "synth", "perf-script": "perf_script",
    "report": "report", "record": "record", "bench": "bench", "compile": "compile", "cache": "cache",
    "backtrace": "backtrace", "core": "core",
}


def command_module(name: str) -> ModuleType:
    """The module of the command `name` (a key of COMMAND_MODULES)."""
    return importlib.import_module(f"fastunwind.commands.{COMMAND_MODULES[name]}")


def usage_error_status(name: str | None, default: int | None) -> int | None:
    """The exit status the command `name` gives a usage error or a failure when its 1 or 2 means
    something else (check: 1 a mismatch, 2 undecided), else `default`."""
    if name not in COMMAND_MODULES:
        return default
    status = getattr(command_module(name), "USAGE_ERROR_STATUS", default)
    return None if status is None else int(status)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with `only`, just that command's subparser (argparse spends ~2 ms per
    subparser, a third of a short command's run, and each command's module is imported)."""
    parser = argparse.ArgumentParser(
        prog="fastunwind",
        description="Fast, trustworthy DWARF call frame information for Linux x86-64.",
        epilog="Run 'fastunwind COMMAND --help' for a command's options and an example.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fastunwind {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in (only,) if only else COMMAND_MODULES:
        command_module(name).add_parser(subparsers)
    return parser


def exit_now(status: int) -> NoReturn:
    """End the process with `status` once the output is flushed and the exit handlers have run,
    without the interpreter's teardown: its last garbage collection and the freeing of every
    module's objects are ~8 ms of a perf-script run (a perf record of hackbench-processes.data's),
    for memory the kernel takes back anyway. A thread that is not a daemon is waited for as
    Python's own exit would, so then the exit is Python's."""
    threading = sys.modules.get("threading")
    if threading is not None and any(thread.is_alive() and not thread.daemon and thread is not threading.main_thread()
                                     for thread in threading.enumerate()):
        sys.exit(status)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: Python's exit reports it as it always does
        sys.exit(status)
    atexit._run_exitfuncs()
    os._exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    first = arguments[0] if arguments else None
    parser = build_parser(first if first in COMMAND_MODULES else None)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as usage:
        # argparse exits 2 on a usage error; a command whose 2 means something else names its own
        usage_status = usage_error_status(first, None)
        if usage.code == 2 and usage_status is not None:
            return int(usage_status)
        raise
    gc.enable()  # off during start-up (__main__); perf-script, report and backtrace turn it off again
    try:
        with output_to(getattr(args, "output", None)):
            return int(args.run(args))
    except FastunwindError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        # a command whose 1 means something else (check: a mismatch) names its failure status
        return usage_error_status(first, 1) or 1
    except KeyboardInterrupt:  # Ctrl-C (backtrace turns SIGTERM into it too); nothing is left half done
        print("fastunwind: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except BrokenPipeError:
        # `fastunwind table big.so | head`: stop quietly, like readelf; stdout goes to /dev/null so
        # that the interpreter's final flush does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # a missing or unreadable file
        where = f"{error.filename}: " if error.filename else ""
        print(f"fastunwind: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1
