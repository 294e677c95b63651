"""Benchmark of the CFI core: parse + evaluate, printing, pyelftools, memory per row.

    .venv/bin/python -m benchmarks.bench_cfi [--repeat N] [--json out.json]
    make bench

Everything is measured in one run, side by side, and reported as ratios (the other tool's time
divided by ours, so a ratio above 1 means we are faster):

1. parse + evaluate the complete `.eh_frame` of libLLVM-14 in process (`CfiSection` construction
   from section bytes already in memory; and the same including `ElfFile.open`), against the wall
   time of `readelf --debug-dump=frames-interp FILE > /dev/null`. Target: ours <= 1/4 of readelf.
2. printing: `python -m fastunwind table FILE > /dev/null` (whole CLI process) against
   `readelf -wF FILE > /dev/null`, for libLLVM-14 and libc. Target: no slower than readelf.
3. pyelftools 0.33 decoding every FDE of libc's `.eh_frame` (`get_decoded()` on each entry of
   `EH_CFI_entries()`), against our parse + evaluate of the same section and our `table` CLI.
   Target: ours >= 20x faster. pyelftools fails on some FDEs; they are counted, not hidden.
4. bytes per row of the evaluated table (`CfiSection.memory()`), and peak RSS growth while building
   it, measured in a fresh subprocess.

Timings are best-of-N and median; subprocess commands get one untimed warm-up run (page cache)
and are run interleaved (ours, theirs, ours, ...) so that drift in the machine hits both sides.
Nothing here asserts a timing: targets are reported as met or not met.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

LIBLLVM = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The brief's minimum repetitions: best-of-5 for our in-process timings, best-of-3 for readelf.
MIN_REPEAT_OURS = 5
MIN_REPEAT_READELF = 3

#: Targets, as "other tool's time / ours" (>= this is met).
TARGET_PARSE_VS_READELF = 4.0
TARGET_PRINT_VS_READELF = 1.0
TARGET_VS_PYELFTOOLS = 20.0


# ---- samples ---------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Wall-clock samples of one measured thing, in seconds."""

    label: str
    command: str
    samples: list[float] = field(default_factory=list)
    #: exit statuses seen (processes only): readelf -wF libc.so.6 exits 1 with its full output when
    #: it follows libc's separate debug file, whose .eh_frame is NOBITS
    exit_statuses: list[int] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "best": self.best, "median": self.median}


@dataclass
class Comparison:
    """theirs / ours, against a target ratio."""

    what: str
    ours: Timing
    theirs: Timing
    target: float

    @property
    def ratio_best(self) -> float:
        return self.theirs.best / self.ours.best

    @property
    def ratio_median(self) -> float:
        return self.theirs.median / self.ours.median

    @property
    def met(self) -> bool:
        return self.ratio_best >= self.target

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "ours": self.ours.to_json(),
            "theirs": self.theirs.to_json(),
            "ratio_best": self.ratio_best,
            "ratio_median": self.ratio_median,
            "target_ratio": self.target,
            "met": self.met,
        }


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


Environment = dict[str, str] | None


def run_quiet(argv: Sequence[str], env: Environment = None) -> tuple[float, int]:
    """(wall time, exit status) of a whole process with stdout to /dev/null (stderr kept)."""
    started = time.perf_counter()
    completed = subprocess.run(argv, stdout=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - started, completed.returncode


def time_commands_interleaved(commands: list[tuple[Timing, list[str], int, Environment]]) -> None:
    """Run each command once untimed (page cache, bytecode cache), then round-robin until each has
    its repetitions."""
    for _, argv, _, env in commands:
        run_quiet(argv, env)
    for round_number in range(max(repeat for _, _, repeat, _ in commands)):
        for timing, argv, repeat, env in commands:
            if round_number < repeat:
                elapsed, status = run_quiet(argv, env)
                timing.samples.append(elapsed)
                if status not in timing.exit_statuses:
                    timing.exit_statuses.append(status)
    for timing, _, _, _ in commands:
        if any(timing.exit_statuses):
            progress(f"note: exit statuses {timing.exit_statuses} from {timing.command}")


def time_in_process(timing: Timing, body: Callable[[], object], repeat: int) -> object:
    """Best-of-N of `body()`; the result of one call is freed before the next starts."""
    result = None
    for _ in range(repeat):
        result = None
        gc.collect()
        started = time.perf_counter()
        result = body()
        timing.samples.append(time.perf_counter() - started)
    return result


def same_output(first: list[str], second: list[str], env: Environment = None) -> bool:
    """Whether two commands print the same bytes (checked once, untimed)."""
    a = subprocess.run(first, capture_output=True, env=env, check=False).stdout
    b = subprocess.run(second, capture_output=True, check=False).stdout
    return a == b and len(a) > 0


# ---- the machine ------------------------------------------------------------------------------------


def python_environments(cache_directory: str) -> tuple[dict[str, str], dict[str, str]]:
    """(with a bytecode cache, without one) for our CLI processes.

    An installed package runs from cached bytecode. This repository's environment may set
    PYTHONDONTWRITEBYTECODE=1, and an editable install then compiles every module of the package on
    each start (measured: about 16 ms more for `import fastunwind.cli`). The CLI figures use a cache kept
    under a temporary PYTHONPYCACHEPREFIX, so nothing is written beside the sources; the start-up
    floor is also reported without it (our modules compiled on every start, unless a __pycache__
    already sits beside them)."""
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = os.path.join(cache_directory, "cached")
    # Without a prefix the standard library still loads from its own __pycache__, as it does here.
    uncached = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    uncached["PYTHONDONTWRITEBYTECODE"] = "1"
    return cached, uncached


def machine() -> dict[str, Any]:
    cpu_model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    readelf = subprocess.run(["readelf", "--version"], capture_output=True, text=True, check=False)
    try:
        import elftools

        pyelftools_version = elftools.__version__
    except ImportError:
        pyelftools_version = None
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "native", "src"],
                           capture_output=True, text=True, check=False)
    import fastunwind._core as core

    return {
        "nproc": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "cpu_model": cpu_model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "readelf": readelf.stdout.splitlines()[0] if readelf.stdout else "not found",
        "pyelftools": pyelftools_version,
        "fastunwind_commit": (commit.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty.stdout.strip() else ""),
        "extension": os.path.relpath(core.__file__, REPO),
        # others may rebuild the extension while a run is going: its build time dates the figures
        "extension_built": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(core.__file__))),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
    }


# ---- 1. parse + evaluate ----------------------------------------------------------------------------


def bench_parse(path: str, repeat: int) -> tuple[Timing, Timing, dict[str, Any]]:
    """CfiSection construction from loaded bytes, and the same including ElfFile.open."""
    from fastunwind.cfi import EH_FRAME, CfiSection
    from fastunwind.elf import ElfFile

    name = os.path.basename(path)
    construct = Timing(f"{name}: CfiSection construction", f"CfiSection(eh_frame_bytes, EH_FRAME, addr) [{path}]")
    total = Timing(f"{name}: open ELF + CfiSection", f"ElfFile.open + section_data + CfiSection [{path}]")

    with ElfFile.open(path) as elf:
        section = elf.section(".eh_frame")
        data = bytes(elf.section_data(section))  # in memory: no page faults in the timed part
        address = section.addr
    table = time_in_process(construct, lambda: CfiSection(data, EH_FRAME, address, strict=False), repeat)

    def open_and_build() -> CfiSection:
        with ElfFile.open(path) as elf:
            eh_frame = elf.section(".eh_frame")
            return CfiSection(elf.section_data(eh_frame), EH_FRAME, eh_frame.addr, strict=False)

    time_in_process(total, open_and_build, repeat)
    memory = table.memory()
    facts = {
        "path": path,
        "eh_frame_bytes": len(data),
        "entries": table.entry_count,
        "fdes": sum(1 for _ in table.fdes()),
        "rows": table.row_count,
        "states": table.state_count,
        "errors": [str(error) for error in table.errors],
        "memory": memory,
        "memory_total": sum(memory.values()),
        "bytes_per_row": sum(memory.values()) / table.row_count if table.row_count else 0.0,
        "row_array_bytes_per_row": memory.get("rows", 0) / table.row_count if table.row_count else 0.0,
    }
    return construct, total, facts


def bench_render_in_process(path: str, repeat: int) -> Timing:
    """What `fastunwind table` does, in process like the pyelftools figure (no interpreter start):
    open the file and its separate debug file, parse, evaluate and print every frame section."""
    from fastunwind.cfi_print import render_file

    timing = Timing(f"{os.path.basename(path)}: render_file in process",
                    f"fastunwind.readelf_format.render_file({path!r}, /dev/null)")
    with open(os.devnull, "wb") as sink:
        time_in_process(timing, lambda: render_file(path, sink), repeat)
    return timing


#: Run in a fresh interpreter: memory growth of building one table, the section bytes already copied:
#: peak = VmHWM after - VmRSS before (VmHWM reset first), held = VmRSS after - VmRSS before.
#: VmHWM/VmRSS (/proc/self/status) rather than getrusage's ru_maxrss: Linux carries the parent's
#: peak over fork + exec into ru_maxrss (exec_mmap -> setmax_mm_hiwater_rss), so a child of this
#: benchmark, which holds libLLVM's tables, would report our peak, not its own.
RSS_PROBE = r"""
import json, sys
from fastunwind.cfi import EH_FRAME, CfiSection
from fastunwind.elf import ElfFile

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise SystemExit(f"no {field} in /proc/self/status")

with ElfFile.open(sys.argv[1]) as elf:
    section = elf.section(".eh_frame")
    data = bytes(elf.section_data(section))
    address = section.addr
# Reset VmHWM to the current RSS ("5" > clear_refs, Linux >= 4.0): the file mapping and the copy
# above raised it, and the table's own transient peak must not hide under that.
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    peak_reset = True
except OSError:
    peak_reset = False
before_peak, before_now = status("VmHWM"), status("VmRSS")
table = CfiSection(data, EH_FRAME, address, strict=False)
after_peak, after_now = status("VmHWM"), status("VmRSS")
print(json.dumps({"peak_reset": peak_reset, "peak_before": before_peak, "rss_before": before_now,
                  "peak_growth": after_peak - before_now, "held_growth": after_now - before_now,
                  "rows": table.row_count, "memory_total": sum(table.memory().values())}))
"""


def bench_rss(path: str) -> dict[str, Any]:
    completed = subprocess.run([sys.executable, "-c", RSS_PROBE, path], capture_output=True, text=True, check=True)
    return json.loads(completed.stdout)


# ---- 3. pyelftools ----------------------------------------------------------------------------------


def bench_pyelftools(path: str, runs: int) -> tuple[Timing, dict[str, Any]]:
    """ELFFile(f).get_dwarf_info(), then get_decoded() on every FDE of EH_CFI_entries()."""
    from elftools.dwarf.callframe import CIE, FDE
    from elftools.elf.elffile import ELFFile

    timing = Timing(
        f"{os.path.basename(path)}: pyelftools decode",
        f"ELFFile(f).get_dwarf_info(); [e.get_decoded() for e in dwarfinfo.EH_CFI_entries()] [{path}]",
    )
    facts: dict[str, Any] = {}
    for _ in range(runs):
        gc.collect()
        failures: collections.Counter[tuple[str, str]] = collections.Counter()
        failed_fdes: list[dict[str, Any]] = []
        counts: collections.Counter[str] = collections.Counter()
        fde_rows: dict[int, int] = {}
        rows = 0
        started = time.perf_counter()
        with open(path, "rb") as f:
            dwarf_info = ELFFile(f).get_dwarf_info()
            entries = dwarf_info.EH_CFI_entries()
            for entry in entries:
                if not isinstance(entry, (CIE, FDE)):  # the ZERO terminator has nothing to decode
                    counts[type(entry).__name__] += 1
                    continue
                counts[type(entry).__name__] += 1
                try:
                    decoded_rows = len(entry.get_decoded().table)
                    rows += decoded_rows
                    if isinstance(entry, FDE):
                        fde_rows[entry.offset] = decoded_rows
                except Exception as error:  # noqa: BLE001 - counting pyelftools' failures is the point
                    failures[(type(error).__name__, str(error))] += 1
                    if len(failed_fdes) < 10:
                        failed_fdes.append({
                            "offset": entry.offset,
                            "pc_begin": entry.header.get("initial_location"),
                            "pc_range": entry.header.get("address_range"),
                            "opcodes": sorted({instr.opcode for instr in entry.instructions}),
                            "error": f"{type(error).__name__}: {error}",
                        })
        timing.samples.append(time.perf_counter() - started)
        ours = our_fde_rows(path)
        differing = [offset for offset, count in fde_rows.items() if ours.get(offset) != count]
        facts = {
            "fde_rows_decoded": sum(fde_rows.values()),
            "fdes_decoded": len(fde_rows),
            "fdes_with_other_row_count_than_ours": len(differing),
            "our_rows_in_decoded_fdes": sum(ours.get(offset, 0) for offset in fde_rows),
            "entries": dict(counts),
            "rows_decoded": rows,
            "failed_entries": sum(failures.values()),
            "failures": [{"type": t, "message": m, "count": c} for (t, m), c in failures.most_common()],
            "failed_examples": failed_fdes,
        }
    # The opcodes of a failed FDE, by name, so the one pyelftools' decoder lacks can be spotted.
    for example in facts.get("failed_examples", []):
        example["opcodes"] = [getattr(opcode, "FQN", f"0x{int(opcode):x}") for opcode in example["opcodes"]]
    return timing, facts


def our_fde_rows(path: str) -> dict[int, int]:
    """Row count of every FDE of our .eh_frame table, by section offset (untimed)."""
    from fastunwind.cfi import EH_FRAME, CfiSection
    from fastunwind.elf import ElfFile

    with ElfFile.open(path) as elf:
        section = elf.section(".eh_frame")
        table = CfiSection(bytes(elf.section_data(section)), EH_FRAME, section.addr, strict=False)
    return {fde.offset: fde.row_count for fde in table.fdes()}


# ---- report -----------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.2f} s"


def ratio(value: float) -> str:
    return f"{value:,.1f}x" if value >= 10 else f"{value:.2f}x"


def markdown(results: dict[str, Any], comparisons: list[Comparison], reproduce: str) -> str:
    m = results["machine"]
    lines = [
        f"Machine: {m['cpu_model']}, {m['nproc']} CPUs, Linux {m['kernel']}; Python {m['python']}; "
        f"{m['readelf']}; pyelftools {m['pyelftools']}; fastunwind {m['fastunwind_commit']}, "
        f"extension built {m['extension_built']}.",
        f"Load average (1 min) at start / end: {m['load_average_at_start'][0]:.2f} / {m['load_average_at_end'][0]:.2f}.",
        f"Command: `{reproduce}`",
        "",
        "| measure | ours (best / median) | other (best / median) | other ÷ ours (best / median) | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        lines.append(
            f"| {c.what} | {ms(c.ours.best)} / {ms(c.ours.median)} | {ms(c.theirs.best)} / {ms(c.theirs.median)} "
            f"| {ratio(c.ratio_best)} / {ratio(c.ratio_median)} | ≥ {c.target:g}x | {'yes' if c.met else '**no**'} |"
        )
    lines += ["", "| library | .eh_frame | FDEs | rows | states | table bytes | bytes/row | peak RSS growth | RSS held |",
              "|---|---|---|---|---|---|---|---|---|"]
    for key in ("libllvm", "libc"):
        facts = results["tables"][key]
        rss = results["rss"][key]
        lines.append(
            f"| {os.path.basename(facts['path'])} | {facts['eh_frame_bytes']:,} B | {facts['fdes']:,} | {facts['rows']:,} "
            f"| {facts['states']:,} | {facts['memory_total'] / 1e6:.1f} MB | {facts['bytes_per_row']:.1f} "
            f"| {rss['peak_growth'] / 1e6:.1f} MB | {rss['held_growth'] / 1e6:.1f} MB |"
        )
    pe = results.get("pyelftools")
    if pe:
        failures = "; ".join(f"{f['count']} × {f['type']}: {f['message']}" for f in pe["failures"]) or "none"
        entries = ", ".join(f"{count} {kind}" for kind, count in pe["entries"].items())
        lines += ["", f"pyelftools: {entries}; {pe['failed_entries']} FDE(s) failed ({failures}). "
                      f"In the {pe['fdes_decoded']:,} FDEs it decoded: {pe['fde_rows_decoded']:,} rows "
                      f"(ours: {pe['our_rows_in_decoded_fdes']:,}), {pe['fdes_with_other_row_count_than_ours']} "
                      f"FDEs with a row count other than ours."]
        for example in pe["failed_examples"]:
            lines.append(f"Failed: FDE at .eh_frame+0x{example['offset']:x}, pc 0x{example['pc_begin']:x}"
                         f"+0x{example['pc_range']:x}, opcodes {', '.join(example['opcodes'])}.")
    same = results["same_output"]
    lines += ["", "Output identical to readelf -wF: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in same.items()) + "."]
    statuses = [f"`{c.command}` exited {c.exit_statuses}" for c in results["nonzero_exits"]]
    if statuses:
        lines.append("Non-zero exit statuses (timed anyway, output complete): " + "; ".join(statuses) + ".")
    return "\n".join(lines)


def rich_report(results: dict[str, Any], comparisons: list[Comparison], reproduce: str) -> None:
    from rich.console import Console
    from rich.table import Table

    # Piped output (make bench | tee) would otherwise be squeezed to 80 columns.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    m = results["machine"]
    console.print(f"[bold]machine[/bold]  {m['cpu_model']}, nproc {m['nproc']}, Linux {m['kernel']}, load average "
                  f"{m['load_average_at_start'][0]:.2f} at start, {m['load_average_at_end'][0]:.2f} at end")
    console.print(f"[bold]versions[/bold] Python {m['python']}; {m['readelf']}; pyelftools {m['pyelftools']}; "
                  f"fastunwind {m['fastunwind_commit']}")
    console.print(f"[bold]command[/bold]  {reproduce}")

    table = Table(title="CFI core: other tool's time ÷ ours (above 1: we are faster)", header_style="bold")
    for column, justify in (("measure", "left"), ("ours best", "right"), ("ours median", "right"),
                            ("other best", "right"), ("other median", "right"), ("ratio best", "right"),
                            ("ratio median", "right"), ("target", "right"), ("met", "center")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for c in comparisons:
        table.add_row(c.what, ms(c.ours.best), ms(c.ours.median), ms(c.theirs.best), ms(c.theirs.median),
                      ratio(c.ratio_best), ratio(c.ratio_median), f"≥ {c.target:g}x",
                      "[green]yes[/green]" if c.met else "[red]no[/red]")
    console.print(table)

    memory = Table(title="Evaluated table in memory", header_style="bold")
    for column in ("library", "FDEs", "rows", "states", "rows part", "states part", "entries part",
                   "bytes/row", "peak RSS growth", "RSS held"):
        memory.add_column(column, justify="left" if column == "library" else "right")
    for key in ("libllvm", "libc"):
        f = results["tables"][key]
        rss = results["rss"][key]
        memory.add_row(os.path.basename(f["path"]), f"{f['fdes']:,}", f"{f['rows']:,}", f"{f['states']:,}",
                       f"{f['memory']['rows'] / 1e6:.2f} MB", f"{f['memory']['states'] / 1e6:.2f} MB",
                       f"{f['memory']['entries'] / 1e6:.2f} MB", f"{f['bytes_per_row']:.1f}",
                       f"{rss['peak_growth'] / 1e6:.1f} MB", f"{rss['held_growth'] / 1e6:.1f} MB")
    console.print(memory)
    for timing in results["nonzero_exits"]:
        console.print(f"exit statuses {timing.exit_statuses} from {timing.command} (timed anyway)")
    pe = results.get("pyelftools")
    if pe:
        console.print(f"pyelftools: {pe['failed_entries']} of {pe['entries'].get('FDE', 0)} FDEs failed to decode; "
                      f"the {pe['fdes_decoded']:,} it decoded have {pe['fde_rows_decoded']:,} rows "
                      f"(ours: {pe['our_rows_in_decoded_fdes']:,}; "
                      f"{pe['fdes_with_other_row_count_than_ours']} FDEs differ in row count)")
        for failure in pe["failures"]:
            console.print(f"  {failure['count']} × {failure['type']}: {failure['message']}")
        for example in pe["failed_examples"]:
            console.print(f"  FDE at .eh_frame+0x{example['offset']:x} pc=0x{example['pc_begin']:x}"
                          f"+0x{example['pc_range']:x}, opcodes {', '.join(example['opcodes'])}")


# ---- main -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example:\n  .venv/bin/python -m benchmarks.bench_cfi --repeat 7 --json bench.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--repeat", type=int, default=7,
                        help="repetitions of every timed thing except pyelftools (default 7; "
                             f"the figures need at least {MIN_REPEAT_OURS})")
    parser.add_argument("--pyelftools-runs", type=int, default=1, choices=(0, 1, 2),
                        help="runs of pyelftools on libc (about 1.5 s each; 0 skips it)")
    parser.add_argument("--json", metavar="FILE", help="also write every sample and count as JSON")
    parser.add_argument("--libllvm", default=LIBLLVM, help=f"the large library (default {LIBLLVM})")
    parser.add_argument("--libc", default=LIBC, help=f"the small library (default {LIBC})")
    args = parser.parse_args(argv)
    if args.repeat < MIN_REPEAT_OURS:
        progress(f"warning: --repeat {args.repeat} is below the {MIN_REPEAT_OURS} the published figures use")

    libllvm = os.path.realpath(args.libllvm)
    libc = os.path.realpath(args.libc)
    python = sys.executable
    reproduce = shlex.join([os.path.relpath(python) if python.startswith(REPO) else python,
                            "-m", "benchmarks.bench_cfi", *(argv if argv is not None else sys.argv[1:])])
    repeat_readelf = max(args.repeat, MIN_REPEAT_READELF)
    results: dict[str, Any] = {"machine": machine(), "reproduce": reproduce, "repeat": args.repeat}
    cache_directory = tempfile.mkdtemp(prefix="fastunwind-bench-pycache-")
    cached, uncached = python_environments(cache_directory)
    comparisons: list[Comparison] = []

    # 1. parse + evaluate, libLLVM, against readelf -wF
    progress(f"1. parse + evaluate {libllvm} in process, {args.repeat} times")
    construct, total, facts_llvm = bench_parse(libllvm, args.repeat)
    readelf_interp = Timing(f"readelf frames-interp {os.path.basename(libllvm)}",
                            f"readelf --debug-dump=frames-interp {libllvm} > /dev/null")
    progress(f"1. {readelf_interp.command}, {repeat_readelf} times")
    time_commands_interleaved([(readelf_interp, ["readelf", "--debug-dump=frames-interp", libllvm], repeat_readelf, None)])
    comparisons.append(Comparison("libLLVM parse+eval (CfiSection) vs readelf -wF", construct, readelf_interp,
                                  TARGET_PARSE_VS_READELF))
    comparisons.append(Comparison("libLLVM open ELF + parse+eval vs readelf -wF", total, readelf_interp,
                                  TARGET_PARSE_VS_READELF))

    # 2. printing, whole processes
    same: dict[str, bool] = {}
    cli_timings: dict[str, Timing] = {}
    readelf_print: dict[str, Timing] = {}
    for key, path in (("libLLVM", libllvm), ("libc", libc)):
        ours_argv = [python, "-m", "fastunwind", "table", path]
        readelf_argv = ["readelf", "-wF", path]
        ours = Timing(f"fastunwind table {os.path.basename(path)}", shlex.join(ours_argv) + " > /dev/null")
        theirs = Timing(f"readelf -wF {os.path.basename(path)}", shlex.join(readelf_argv) + " > /dev/null")
        progress(f"2. {ours.command} and {theirs.command}, {args.repeat} / {repeat_readelf} times, interleaved")
        time_commands_interleaved([(ours, ours_argv, args.repeat, cached), (theirs, readelf_argv, repeat_readelf, None)])
        same[key] = same_output(ours_argv, readelf_argv, cached)
        cli_timings[key] = ours
        readelf_print[key] = theirs
        comparisons.append(Comparison(f"{key} print: fastunwind table vs readelf -wF (processes)", ours, theirs,
                                      TARGET_PRINT_VS_READELF))
    results["same_output"] = same

    # Python's own start-up and our imports: the floor under every CLI figure above
    import_cli = [python, "-c", "import fastunwind.cli"]
    startup = {
        "interpreter": Timing("python -c pass", shlex.join([python, "-c", "pass"])),
        "import_cached": Timing("python -c 'import fastunwind.cli', bytecode cached", shlex.join(import_cli)),
        "import_uncached": Timing("python -c 'import fastunwind.cli', no bytecode cache", shlex.join(import_cli)),
    }
    progress("2. Python start-up, the floor under the CLI figures")
    time_commands_interleaved([
        (startup["interpreter"], [python, "-c", "pass"], args.repeat, cached),
        (startup["import_cached"], import_cli, args.repeat, cached),
        (startup["import_uncached"], import_cli, args.repeat, uncached),
    ])

    # 3. pyelftools on libc
    progress(f"3. parse + evaluate {libc} in process, {args.repeat} times")
    construct_libc, total_libc, facts_libc = bench_parse(libc, args.repeat)
    if args.pyelftools_runs:
        progress(f"3. pyelftools on {libc}, {args.pyelftools_runs} run(s)")
        pyelftools_timing, pyelftools_facts = bench_pyelftools(libc, args.pyelftools_runs)
        results["pyelftools"] = pyelftools_facts
        comparisons.append(Comparison("libc parse+eval (CfiSection) vs pyelftools decode", construct_libc,
                                      pyelftools_timing, TARGET_VS_PYELFTOOLS))
        comparisons.append(Comparison("libc open ELF + parse+eval vs pyelftools decode", total_libc,
                                      pyelftools_timing, TARGET_VS_PYELFTOOLS))
        printing = bench_render_in_process(libc, args.repeat)
        comparisons.append(Comparison("libc print in process (readelf-format text, all sections) vs pyelftools decode",
                                      printing, pyelftools_timing, TARGET_VS_PYELFTOOLS))
        comparisons.append(Comparison("libc fastunwind table (whole process, start-up included) vs pyelftools decode",
                                      cli_timings["libc"], pyelftools_timing, TARGET_VS_PYELFTOOLS))

    # 4. memory
    progress("4. RSS growth of one table, in fresh subprocesses")
    results["tables"] = {"libllvm": facts_llvm, "libc": facts_libc}
    results["rss"] = {"libllvm": bench_rss(libllvm), "libc": bench_rss(libc)}
    results["timings"] = {**{f"startup_{k}": t.to_json() for k, t in startup.items()}, "libc_construct": construct_libc.to_json(),
                          "libc_total": total_libc.to_json()}
    results["comparisons"] = [c.to_json() for c in comparisons]
    timed_processes = [readelf_interp, *cli_timings.values(), *readelf_print.values(), *startup.values()]
    results["nonzero_exits"] = [t for t in timed_processes if any(t.exit_statuses)]

    shutil.rmtree(cache_directory, ignore_errors=True)
    results["machine"]["load_average_at_end"] = os.getloadavg()

    floor = "; ".join(f"`{t.label}` {ms(t.best)} best / {ms(t.median)} median" for t in startup.values())
    rich_report(results, comparisons, reproduce)
    print(f"\nStart-up floor under every CLI figure: {floor}.")
    print("\n```markdown")
    print(markdown(results, comparisons, reproduce))
    print(f"\nStart-up floor (included in every CLI figure): {floor}.")
    print("```")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**results, "nonzero_exits": [t.to_json() for t in results["nonzero_exits"]]}, f, indent=2, default=str)
            f.write("\n")
        progress(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
