"""`fastunwind check FILE...`: the CFI of ELF files against their machine code.

Every FDE (`.eh_frame`, `.debug_frame`, a separate debug file's included) is interpreted
instruction by instruction from its code and its declared rows compared with the derived ones: the
CFA, the return address and rbx, rbp, r12-r15. An FDE `agree`s, is a `mismatch` (the addresses where
a declared rule recovers a wrong value, declared vs derived), or is `undecided` (why). Overlapping
FDEs, empty ones and ones outside executable code are mismatches of their range. Functions and call
targets no FDE covers are listed as `uncovered`.

By default a summary per file (counts, undecided FDEs by cause, the first mismatches); `--verbose`
lists every mismatch with all its findings, every undecided FDE and every uncovered range.

With `--trace -- CMD ARGS...` the CFI is checked dynamically instead: CMD runs single-stepped
under ptrace, and at every instruction of its modules the declared CFA, return-address slot and
saved registers are compared with the truth kept from its calls and returns; FDEs where they
disagree are listed (fastunwind/trace.py).

Exit status: 0 every FDE agrees; 1 a mismatch (with --trace, a disagreement); 2 only undecided FDEs
besides agreeing ones (code without CFI is listed, not judged: nearly every program has some, crti's
_init and _fini); 3 a failure: a file could not be
checked (the command could not be traced), a usage error, or the report was cut short (its reader
went away: `fastunwind check libc.so.6 | head`), so that no incomplete run passes for a clean one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable

from fastunwind.commands import add_output_argument, command_parser
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

EXAMPLE = """\
examples:
  fastunwind check /lib/x86_64-linux-gnu/libc.so.6
  fastunwind check --verbose ./program            # every mismatch and undecided FDE, every uncovered range
  fastunwind check --json -j 2 /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 > llvm.json
  fastunwind check --trace -- ls -l /                # single-step ls: declared CFI against calls and returns
  fastunwind check --trace --trace-modules ./program --max-steps 20000000 -- ./program input
"""

EXIT_AGREE, EXIT_MISMATCH, EXIT_UNDECIDED, EXIT_FAILURE = 0, 1, 2, 3
#: argparse's usage errors exit with this instead of its 2, which here means "only undecided"
USAGE_ERROR_STATUS = EXIT_FAILURE
#: mismatching FDEs the default summary names (--verbose lists them all)
SUMMARY_MISMATCHES = 5
#: FDEs above which a progress bar is worth drawing (on a terminal)
PROGRESS_FDES = 20000


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "check", "check CFI against the machine code", __doc__, EXAMPLE)
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="ELF files; with --trace, the command and its arguments (after --)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every mismatch (with its findings), undecided FDE and uncovered range")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per file: {file, fdes: [...], uncovered: [...]}")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="threads checking FDEs in parallel (default 1)")
    trace = parser.add_argument_group("dynamic validation")
    trace.add_argument("--trace", action="store_true",
                       help="run the command given after -- single-stepped under ptrace and compare the declared "
                            "CFI with its calls and returns at every instruction")
    trace.add_argument("--max-steps", type=int, default=0, metavar="N",
                       help="instructions to step at most (default: %d); the command is killed there"
                            % _core_default_steps())
    trace.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                       help="kill the command after this long (default: none)")
    trace.add_argument("--trace-modules", action="append", metavar="NAME",
                       help="compare only in modules whose path contains NAME (repeatable; default: every module); "
                            "the others run between breakpoints instead of being stepped")
    trace.add_argument("--step-all", action="store_true",
                       help="with --trace-modules, step the other modules too (slower; nothing is missed)")
    add_output_argument(parser)
    parser.set_defaults(run=run)


def _core_default_steps() -> int:
    from fastunwind import _core

    return _core.TRACE_DEFAULT_MAX_STEPS


def run(args: argparse.Namespace) -> int:
    from fastunwind.errors import FastunwindError

    if args.trace:
        return _trace(args)
    if not args.files:
        print("fastunwind: error: check needs at least one FILE (or --trace -- CMD)", file=sys.stderr)
        return EXIT_FAILURE
    if args.jobs < 1:
        print(f"fastunwind: error: -j {args.jobs}: at least one thread is needed", file=sys.stderr)
        return EXIT_FAILURE
    statuses = []
    for path in args.files:
        try:
            statuses.append(_check_one(path, args))
        except BrokenPipeError:
            # the reader went away: stop quietly (stdout to /dev/null so that the interpreter's final
            # flush does not fail again), and fail, since the report is incomplete
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_FAILURE
        except (FastunwindError, OSError) as error:
            where = "" if str(error).startswith(path) else f"{path}: "
            print(f"fastunwind: error: {where}{getattr(error, 'strerror', None) or error}", file=sys.stderr)
            statuses.append(EXIT_FAILURE)
        except Exception as error:  # noqa: BLE001 - a bug or MemoryError: one line and exit 3, not a traceback
            print(f"fastunwind: error: {path}: {type(error).__name__}: {error}", file=sys.stderr)
            statuses.append(EXIT_FAILURE)
    for status in (EXIT_FAILURE, EXIT_MISMATCH, EXIT_UNDECIDED):
        if status in statuses:
            return status
    return EXIT_AGREE


#: elements of a long list encoded by one json.dumps call (_print_json)
JSON_BATCH = 4096


def _print_json(document: dict[str, Any]) -> None:
    """`document` as json.dump writes it, one line. Encoded by json.dumps (json.dump encodes in Python
    chunk by chunk: libLLVM-14's 95k FDEs took 0.59 s against 0.14 s), a long list JSON_BATCH elements
    at a time (its text whole would be +40 MB at the peak)."""
    import json  # here: every other command's start-up would pay for it

    out = sys.stdout
    out.write("{")
    for n, (key, value) in enumerate(document.items()):
        out.write(f"{', ' if n else ''}{json.dumps(key)}: ")
        if isinstance(value, list) and len(value) > JSON_BATCH:
            out.write("[")
            for start in range(0, len(value), JSON_BATCH):
                out.write(f"{', ' if start else ''}{json.dumps(value[start:start + JSON_BATCH])[1:-1]}")
            out.write("]")
        else:
            out.write(json.dumps(value))
    out.write("}\n")


def _check_one(path: str, args: argparse.Namespace) -> int:
    from fastunwind.check import check_file, reason_class

    started = time.perf_counter()
    with _progress(path) as progress:
        result = check_file(path, jobs=args.jobs, progress=progress)
    seconds = time.perf_counter() - started
    if args.json:
        _print_json(result.to_json())
        return result.exit_status
    counts = result.counts()
    exit_status = result.exit_status_of(counts)
    fdes = counts.fdes
    compared = counts.instructions_agree + counts.instructions_mismatch + counts.instructions_unknown
    print(f"{path}: {counts.fde_total} FDEs: {fdes['agree']} agree, {fdes['mismatch']} mismatch, "
          f"{fdes['undecided']} undecided ({counts.decided_percent:.2f}% decided); instructions of decided FDEs: "
          f"{counts.instructions_agree} of {compared} agree ({counts.agreement_percent:.3f}%); "
          f"{counts.uncovered} uncovered ranges; {seconds:.2f} s")
    if args.verbose and (counts.instructions_unreached or counts.instructions_skipped):
        print(f"  instructions of decided FDEs left unchecked: {counts.instructions_unreached} no path reached "
              "(in mismatching FDEs: elsewhere code no path reaches makes an FDE undecided; per FDE in --json), "
              f"{counts.instructions_skipped} in outermost-frame rows (return address undefined)")
    if args.verbose and counts.from_declared_entry:
        print(f"  {counts.from_declared_entry} FDEs start inside a function (.cold parts): checked from their "
              "first declared row")
    if args.verbose:
        for verdict in result.not_agreeing():
            unreached = verdict.instructions[3]
            print(f"  {verdict.verdict:<9} {verdict.section} {verdict.pc_begin:#x}..{verdict.pc_end:#x}"
                  f"{': ' + verdict.reason if verdict.reason else ''}"
                  f"{f' ({unreached} instructions unreached)' if unreached else ''}")
            for finding in verdict.findings:
                print(f"    {finding.address:#x} {finding.what:<5} declared {finding.declared:<16} "
                      f"derived {finding.derived}")
            if verdict.findings_truncated:
                print(f"    ... {verdict.finding_total} findings in all, the first {len(verdict.findings)} listed")
        for uncovered in result.uncovered:
            print(f"  uncovered {uncovered.start:#x}..{uncovered.end:#x} {uncovered.symbol}")
    else:
        not_agreeing = list(result.not_agreeing())
        reasons = Counter(reason_class(v.reason) for v in not_agreeing if v.verdict == "undecided")
        for reason, n in reasons.most_common(5):
            print(f"  undecided {n:>6}  {reason}")
        mismatches = [v for v in not_agreeing if v.verdict == "mismatch"]
        for verdict in mismatches[:SUMMARY_MISMATCHES]:
            first = verdict.findings[0] if verdict.findings else None
            detail = (f": at {first.address:#x} {first.what} declared {first.declared}, derived {first.derived}"
                      if first else "")
            print(f"  mismatch  {verdict.section} {verdict.pc_begin:#x}..{verdict.pc_end:#x}{detail}")
        if len(mismatches) > SUMMARY_MISMATCHES:
            print(f"  ... {len(mismatches) - SUMMARY_MISMATCHES} more mismatching FDEs (--verbose lists them all)")
    return exit_status


def _trace(args: argparse.Namespace) -> int:
    from fastunwind.errors import TraceError
    from fastunwind.trace import trace_command

    if not args.files:
        print("fastunwind: error: check --trace needs a command after --", file=sys.stderr)
        return EXIT_FAILURE
    if args.max_steps < 0 or args.timeout < 0:
        print("fastunwind: error: --max-steps and --timeout cannot be negative", file=sys.stderr)
        return EXIT_FAILURE
    try:
        result = trace_command(args.files, max_steps=args.max_steps, timeout=args.timeout,
                               modules=args.trace_modules, step_all=args.step_all)
    except TraceError as error:
        print(f"fastunwind: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:  # the command was killed before the interrupt reached Python
        print(f"fastunwind: interrupted: {' '.join(args.files)} was killed", file=sys.stderr)
        return EXIT_FAILURE
    status = EXIT_MISMATCH if result.counts["disagreeing"] else EXIT_AGREE
    if args.json:
        _print_json(result.to_json())
        return status
    c = result.counts
    ended = (f"exited with {result.exit_status}" if result.outcome == "exited" else
             f"killed by signal {result.exit_status}" if result.outcome == "killed" else
             f"stopped: {result.outcome}, killed")
    print(f"{' '.join(result.command)}: {ended}; {c['steps']} instructions stepped in {result.seconds:.2f} s "
          f"({result.steps_per_second:,.0f}/s)")
    print(f"  checked {c['checked']}: {c['agreeing']} agree, {c['disagreeing']} disagree, in {len(result.fdes)} FDEs; "
          f"not checked: {c['no_cfi']} without CFI, {c['unknown_truth']} before any call, "
          f"{c['in_signal_handler']} in signal handlers, {c['signal_frames']} in signal frames, "
          f"{c['not_evaluable']} not evaluable, {c['unchecked_module']} in modules not asked about"
          + (f"; ran through them {c['runs']} times" if c["runs"] else ""))
    for fde in result.disagreeing_fdes:
        print(f"  disagree  {fde.module.path} {fde.section} {fde.pc_begin:#x}..{fde.pc_end:#x} {fde.symbol}: "
              f"{fde.disagreeing} of {fde.checked} steps")
        for disagreement in fde.disagreements:
            print(f"    {disagreement.address:#x} {disagreement.describe()}")
    return status




class _progress:
    """A progress bar over the FDEs of a long file on stderr, on a terminal only (rich is imported only
    then)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> Callable[[int, int], None]:
        return self.update

    def update(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < PROGRESS_FDES or not sys.stderr.isatty():
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(file=sys.stderr), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(f"checking {os.path.basename(self.path)}", total=total)
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
