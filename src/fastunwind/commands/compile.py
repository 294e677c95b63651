"""`fastunwind compile FILE...`: compile the unwind tables of ELF files to native code (eh_elf).

Each file's DWARF rows become C (one entry point, `fu_eh_elf_step`, see fastunwind/tables/eh_elf.py),
built with the system C compiler ($CC, default cc) into a shared object cached under
$XDG_CACHE_HOME/fastunwind/eh_elf/ by build-id. The walker then uses it for that file: backend
"compiled" for every row, "auto" for the rows its compact table leaves to the interpreter (DWARF
expressions). A file whose valid eh_elf is already cached is not rebuilt (--force does).
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from fastunwind.commands import add_output_argument, command_parser
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any
    from fastunwind.address_space import ModuleImage
    from fastunwind.errors import EhElfError
    from fastunwind.tables.eh_elf import CompileResult

EXAMPLE = """\
examples:
  fastunwind compile /lib/x86_64-linux-gnu/libc.so.6
  fastunwind compile --deps /usr/bin/hackbench          # the program, libc, ld.so: like ldd
  fastunwind compile --from perf.data -j 2              # every module the recording maps
  fastunwind compile --emit-c /tmp/libc-c /lib/x86_64-linux-gnu/libc.so.6   # the C, to read
  CC=clang-14 fastunwind compile ./a.out
"""


def add_parser(subparsers: Any) -> None:
    parser = command_parser(subparsers, "compile",
                            "compile ELF files' unwind tables to native code (eh_elf), cached for the walker", __doc__, EXAMPLE)
    parser.add_argument("files", nargs="*", metavar="FILE", help="ELF files (executables, shared libraries)")
    parser.add_argument("--deps", action="store_true", help="also every shared library they load (like ldd)")
    parser.add_argument("--from", dest="perf_data", metavar="PERF_DATA",
                        help="also every file a perf.data recording maps executable")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help="compiler processes at once (default: the CPU count)")
    parser.add_argument("--force", action="store_true", help="rebuild even when a valid eh_elf is cached")
    parser.add_argument("--cache-dir", help="where eh_elfs go (default: $XDG_CACHE_HOME/fastunwind/eh_elf)")
    parser.add_argument("--emit-c", metavar="DIR",
                        help="only write the generated C of the (single) FILE into DIR; nothing is compiled")
    parser.add_argument("--json", action="store_true", help="one JSON object per file on stdout")
    parser.add_argument("--lookup", choices=("table", "tree"), default="table",
                        help="how the code finds a PC's row: a searched table (default: smaller) or the "
                             "paper's if-tree (docs/EH_ELF.md compares them)")
    add_output_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fastunwind.address_space import ModuleImage
    from fastunwind.elf.dynamic import with_dependencies
    from fastunwind.errors import EhElfError, FastunwindError
    from fastunwind.perf.replay import recorded_files
    from fastunwind.tables import eh_elf

    if args.jobs is not None and args.jobs < 1:
        raise EhElfError(f"-j {args.jobs}: at least one compiler process is needed")
    paths = list(args.files)
    if args.perf_data:
        paths += recorded_files(args.perf_data)
    if not paths:
        raise EhElfError("nothing to compile: give ELF files, or --from perf.data")
    if args.emit_c:
        if len(paths) != 1:
            raise EhElfError(f"--emit-c writes one file's C: got {len(paths)} files")
        generated = eh_elf.write_sources(ModuleImage.load(paths[0]), args.emit_c, args.lookup)
        print(f"{paths[0]}: {', '.join(generated.units)} in {args.emit_c} ({generated.range_count} ranges, "
              f"{generated.body_count} bodies)")
        return 0
    missing: list[str] = []
    if args.deps:
        paths, missing = with_dependencies(paths)
    status = 0
    for name in missing:
        print(f"fastunwind: warning: {name}: not found", file=sys.stderr)
    named = set(args.files)
    images = []
    for path in dict.fromkeys(paths):
        try:
            image = ModuleImage.load(path)
        except FastunwindError as error:  # its message names the file
            print(f"fastunwind: error: {error}", file=sys.stderr)
            status = 1
            continue
        except OSError as error:
            print(f"fastunwind: error: {path}: {error.strerror or error}", file=sys.stderr)
            status = 1
            continue
        if path not in named and not any(t is not None and t.row_count for t in (image.eh_frame, image.debug_frame)):
            # a dependency or a recorded module without CFI (data-only libraries like libicudata)
            print(f"{path}: skipped: no call frame information", file=sys.stderr)
            continue
        images.append(image)
    if not images:
        return status
    results = _compile_with_progress(eh_elf, images, args)
    for result in results:
        if isinstance(result, EhElfError):
            status = 1
            print(f"fastunwind: error: {result}", file=sys.stderr)
        elif args.json:
            import json

            print(json.dumps({
                "file": result.path, "eh_elf": result.target, "source": result.source,
                "ranges": result.ranges, "bodies": result.bodies, "units": result.units,
                "interpret_ranges": result.interpret_ranges,
                "generate_seconds": round(result.generate_seconds, 4),
                "compile_seconds": round(result.compile_seconds, 4),
            }))
        elif result.source == "cache":
            print(f"{result.path}: cached {result.target}")
        else:
            print(f"{result.path}: built {result.target} ({result.ranges} ranges, {result.bodies} bodies, "
                  f"{result.units} units; generated in {result.generate_seconds:.2f} s, compiled in "
                  f"{result.compile_seconds:.2f} s)")
    return status


def _compile_with_progress(eh_elf: ModuleType, images: list[ModuleImage], args: argparse.Namespace
                           ) -> list[CompileResult | EhElfError]:
    """Compile with a progress bar on stderr, on a terminal only: one step per C unit compiled (a
    file found in the cache is one step), the total growing as each file's units are generated."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task("compiling unwind tables", total=0)
        units = 0

        def on_unit(path: str, unit: str, compiled: bool) -> None:
            nonlocal units
            if compiled:  # a compiler thread: rich's updates take its lock
                progress.update(task, advance=1, description=f"compiled {path} ({unit})")
            else:
                units += 1
                progress.update(task, total=units)

        def on_file(path: str, result: object) -> None:
            nonlocal units
            if getattr(result, "source", None) == "cache":
                units += 1
                progress.update(task, total=units, advance=1, description=f"cached {path}")

        results: list[CompileResult | EhElfError] = eh_elf.compile_images(
            images, jobs=args.jobs, directory=args.cache_dir, force=args.force, lookup=args.lookup,
            on_progress=on_file, on_unit=on_unit)
        return results
