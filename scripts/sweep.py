"""Compare fastunwind against readelf on EVERY ELF file with CFI on this machine (`make sweep`).

For each file from scripts/oracle_files.py, `fastunwind table FILE` must equal
`readelf --debug-dump=frames-interp FILE` and `table --raw FILE` must equal
`readelf --debug-dump=frames FILE` (stdout, byte for byte). Files run in parallel, largest first so
the 100 MB libraries do not finish last. Exit status 1 if any file differs.

examples:
  python3 -m scripts.sweep                 # all ~1,800 files, both modes (from the repository root)
  python3 -m scripts.sweep --json > s.json # machine-readable summary
  python3 -m scripts.sweep --mode raw /usr/lib/x86_64-linux-gnu/libc.so.6 -v
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from scripts import oracle_files


def check_file(path: Path, modes: list[str]) -> dict:
    outcome = {"path": str(path), "identical": True, "modes": {}}
    for mode in modes:
        result = oracle_files.compare_file(path, mode)
        entry = {"identical": result.identical, "tool_exit": result.tool_returncode,
                 "readelf_exit": result.readelf_returncode, "bytes_compared": result.bytes_compared}
        if not result.identical:
            outcome["identical"] = False
            entry["first_difference_line"] = result.first_difference_line
            entry["description"] = result.describe()
        outcome["modes"][mode] = entry
    return outcome


def _progress(total: int, quiet: bool):
    """A rich progress bar if rich is importable and stderr is a terminal, else a plain counter."""
    if quiet:
        return None, lambda: None
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        state = {"done": 0}

        def advance() -> None:
            state["done"] += 1
            if state["done"] % 50 == 0 or state["done"] == total:
                print(f"  {state['done']}/{total} files", file=sys.stderr, flush=True)

        return None, advance
    progress = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        transient=True)
    task = progress.add_task("sweep", total=total)
    return progress, lambda: progress.advance(task)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("examples:")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", help="files to check (default: every enumerated file)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    parser.add_argument("--mode", choices=["interp", "raw", "both"], default="both")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show the first differing lines of each differing file")
    options = parser.parse_args(argv)

    modes = ["interp", "raw"] if options.mode == "both" else [options.mode]
    if options.paths:
        files = [Path(p) for p in options.paths]
        sizes = {p: 0 for p in files}
    else:
        enumerated = oracle_files.enumerate_files()
        files = [item.path for item in enumerated]
        sizes = {item.path: item.cfi_bytes for item in enumerated}
    files.sort(key=lambda p: -sizes.get(p, 0))

    started = time.monotonic()
    results = []
    progress, advance = _progress(len(files), options.json and not sys.stderr.isatty())
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        if progress:
            progress.start()
        try:
            futures = [pool.submit(check_file, path, modes) for path in files]
            for future in as_completed(futures):
                results.append(future.result())
                advance()
        finally:
            if progress:
                progress.stop()
    elapsed = time.monotonic() - started

    results.sort(key=lambda r: r["path"])
    differing = [r for r in results if not r["identical"]]
    identical = len(results) - len(differing)
    if options.json:
        summary = {"total": len(results), "identical": identical, "differing": differing,
                   "modes": modes, "seconds": round(elapsed, 1)}
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        for result in differing:
            lines = [f"{mode}: line {entry['first_difference_line']}"
                     for mode, entry in result["modes"].items() if not entry["identical"]]
            print(f"DIFFERS {result['path']}  ({', '.join(lines)})")
            if options.verbose:
                for mode, entry in result["modes"].items():
                    if not entry["identical"]:
                        print("    " + entry["description"].replace("\n", "\n    "))
        print(f"{identical}/{len(results)} files identical to readelf ({'+'.join(modes)}) "
              f"in {elapsed:.0f} s")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
