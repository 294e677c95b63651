"""One module per CLI command; each has add_parser(subparsers) and run(args) -> exit status."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Iterator

from fastunwind.errors import FastunwindError
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


#: the terminal width help is laid out for when neither COLUMNS nor the terminal says (shutil's)
FALLBACK_COLUMNS = 80


def terminal_columns() -> int:
    """The terminal's width as shutil.get_terminal_size() gives it: COLUMNS, else stdout's
    terminal, else FALLBACK_COLUMNS."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or FALLBACK_COLUMNS


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout for the width argparse would choose, found without shutil: argparse
    imports shutil (with bz2, lzma and fnmatch: ~7M instructions, ~2 ms) for it whenever a parser
    adds an argument, a cost of every command's start."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        # argparse's margin of 2 columns
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)


class RawDescriptionFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """HelpFormatter keeping the description and epilog as written."""


def command_parser(subparsers: Any, name: str, summary: str, description: str | None, example: str
                   ) -> argparse.ArgumentParser:
    """A command's subparser: `summary` in the command list, the module's docstring as its
    description and its examples after the options, both kept as written."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=summary, description=description, epilog=example, formatter_class=RawDescriptionFormatter)
    return parser


def add_snapshot_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the commands that print thread stacks (stacks.py): --registers, --json, -o."""
    parser.add_argument("--registers", action="store_true",
                        help="every register each frame recovers (<unknown> where no unwind rule recovers one)")
    parser.add_argument("--json", action="store_true",
                        help='one JSON document: {"pid", "threads": [{"tid", "name", "outcome", "frames": '
                             '[{"address", "symbol", "offset", "module", "registers"}]}]} ("derived" on a frame whose step used '
                             'rows derived from the code, --synth)')
    add_output_argument(parser)


def write_snapshot(snapshot: Any, args: argparse.Namespace) -> None:
    """A snapshot of thread stacks (stacks.ProcessSnapshot) as text, or JSON with --json, to
    standard output (the -o file: cli.main redirects it)."""
    from fastunwind import stacks

    render = stacks.render_json if args.json else stacks.render_text
    render(snapshot, sys.stdout)


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """perf script's and perf report's sample filters, with perf's names and syntax."""
    group = parser.add_argument_group("sample filters (perf's syntax)")
    group.add_argument("--comm", "--comms", dest="comm", metavar="COMM[,COMM...]",
                       help="only samples of threads of these names")
    group.add_argument("--pid", metavar="PID[,PID...]", help="only samples of these processes")
    group.add_argument("--tid", metavar="TID[,TID...]", help="only samples of these threads")
    group.add_argument("--cpu", metavar="CPUS", help="only samples taken on these CPUs (0-2,4)")
    group.add_argument("--time", metavar="START,END",
                       help="only samples in this time range, seconds as perf script prints them "
                            "(either side may be empty; several ranges separated by spaces), or in "
                            "percentages of the recording: 10%%/2 (the second 10%% slice), 0%%-10%%, 50%%, "
                            "several separated by commas")


def add_synth_argument(parser: argparse.ArgumentParser) -> None:
    """--synth: rows derived from the machine code (tables/compact.py, SYNTH_MODES)."""
    from fastunwind._core import COMPACT_SYNTH_MODES, WALK_BACKENDS_WITH_COMPACT

    parser.add_argument("--synth", choices=COMPACT_SYNTH_MODES, default=None,
                        help="unwind rows derived from the machine code (`fastunwind check`'s interpreter): "
                             "missing (default with the auto and table backends): where no CFI covers the code, "
                             "instead of guessing with the frame pointer; repair: also in place of declared rows "
                             "the check proves wrong; off: the CFI alone (the only choice with backends "
                             f"other than {' and '.join(b for b in WALK_BACKENDS_WITH_COMPACT if '-' not in b)})")


def synth_mode(args: argparse.Namespace) -> str:
    """The --synth of the arguments: as given, else missing where the backend has compact tables
    (default_backend() when none is given) and off where it has not; a mode the backend cannot
    serve is one line on stderr and SystemExit(2)."""
    from fastunwind.address_space import check_synth, default_backend
    from fastunwind._core import WALK_BACKENDS_WITH_COMPACT

    backend = getattr(args, "backend", None) or default_backend()
    synth: str = args.synth or ("missing" if backend in WALK_BACKENDS_WITH_COMPACT else "off")
    try:
        check_synth(backend, synth)
    except ValueError as error:
        print(f"fastunwind: error: --synth {synth}: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    return synth


def sample_filter(args: argparse.Namespace) -> Any:
    """The SampleFilter of the arguments (perf/sample_filter.py), None without filters; a bad value
    is one line on stderr and SystemExit(2)."""
    if not any((args.comm, args.pid, args.tid, args.cpu, args.time)):
        return None
    from fastunwind.perf.sample_filter import (SampleFilter, parse_cpus, parse_ids, parse_names, parse_time_percentages,
                                               parse_times)

    percentages = bool(args.time) and "%" in args.time  # perf's test: a "%" anywhere
    try:
        return SampleFilter(pids=parse_ids(args.pid, "pid list") if args.pid else (),
                            tids=parse_ids(args.tid, "tid list") if args.tid else (),
                            cpus=parse_cpus(args.cpu) if args.cpu else (),
                            ranges=parse_times(args.time) if args.time and not percentages else (),
                            percent_ranges=parse_time_percentages(args.time) if percentages else (),
                            comms=parse_names(args.comm) if args.comm else ())
    except ValueError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def no_samples_message(path: str, filtered: bool) -> str:
    """The error of a run that found no sample (one line)."""
    what = "no samples selected by the filters" if filtered else "no samples in the recording"
    return f"fastunwind: error: {path}: {what}"


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    """-o FILE: what the command prints goes to FILE (cli.main opens it, output_to)."""
    parser.add_argument("-o", "--output", metavar="FILE", help="write the output to this file (default: standard output)")


#: how output writes a character its encoding cannot: a name's undecodable byte (os.fsdecode's
#: surrogate) as that byte
OUTPUT_ERRORS = "surrogateescape"


@contextlib.contextmanager
def output_to(path: str | None) -> Iterator[None]:
    """Standard output, or the file `path` for everything the command prints (print, rich, bytes
    through sys.stdout.buffer), opened before any work: a path that cannot be written is a
    FastunwindError (one line). Either writes the names read from the system (paths decoded with
    os.fsdecode: surrogateescape) back as their bytes, whatever the locale's error handler."""
    if path is None:
        if isinstance(sys.stdout, io.TextIOWrapper):
            sys.stdout.reconfigure(errors=OUTPUT_ERRORS)
        yield
        return
    try:
        out = open(path, "w", encoding="utf-8", errors=OUTPUT_ERRORS)
    except OSError as error:
        raise FastunwindError(f"cannot write {path}: {error.strerror or error}") from None
    with out, contextlib.redirect_stdout(out):
        yield


#: recordings at least this big get a progress bar on a terminal (about a second of work)
LONG_INPUT_BYTES = 64 << 20


class RecordingProgress:
    """What a long run over a recording reports: its phase, and how much of the recording's time
    span has been read (a window at a time). This one shows nothing; `recording_progress` gives one
    that draws a bar."""

    def phase(self, name: str) -> None:
        """The run starts phase `name` ("unwinding", "writing the html file"...)."""

    def window(self, fraction: float | None) -> None:
        """A window is done: `fraction` of the recording's span is read (None: not known)."""


class _RecordingBar(RecordingProgress):
    STEPS = 1000  # the bar moves by 0.1% of the span

    def __init__(self, progress: Any, name: str) -> None:
        self._progress = progress
        self._name = name
        self._task = progress.add_task(name, total=self.STEPS)

    def phase(self, name: str) -> None:
        self._progress.update(self._task, description=f"{self._name}: {name}")

    def window(self, fraction: float | None) -> None:
        if fraction is not None:
            self._progress.update(self._task, completed=round(self.STEPS * min(max(fraction, 0.0), 1.0)))


@contextlib.contextmanager
def recording_progress(path: str) -> Iterator[RecordingProgress]:
    """A progress bar on stderr over a long recording (LONG_INPUT_BYTES or more) when stderr is a
    terminal; otherwise a RecordingProgress that shows nothing (and rich is not imported). Colour
    follows rich, which honours NO_COLOR."""
    try:
        long_input = os.path.getsize(path) >= LONG_INPUT_BYTES
    except OSError:
        long_input = False  # reading the recording reports the error
    if not (long_input and sys.stderr.isatty()):
        yield RecordingProgress()
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                  console=Console(file=sys.stderr), transient=True) as progress:
        yield _RecordingBar(progress, os.path.basename(path))
