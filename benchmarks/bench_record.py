"""`fastunwind record`'s overhead on the profiled program, against what a user would otherwise run:
`perf record --call-graph dwarf -o FILE` and then `perf script` on the file. One fixed amount of work
(clang-14 -O2 -c on the compiler workload's generated C file, scripts/record_workloads.py), run

- alone (no profiler);
- under `perf record -e cpu-clock -F HZ --call-graph dwarf -o perf.data`, then `perf script --no-inline`
  to text (fastunwind record writes no inline frames either; perf's addr2line for them takes minutes);
- under `fastunwind record -F HZ --format folded -o out.folded` (perf through a pipe, unwound as
  samples arrive);
- under `fastunwind record --bpf -F HZ -o out.folded` (unwound in the kernel; root only);

at 99 and 999 Hz, interleaved (a burst of load hits every mode), N runs each.

    .venv/bin/python -m benchmarks.bench_record [--repeat N] [--seconds S] [--hz 99,999] [--no-bpf] [--json [FILE]]

Per mode: the profiled program's own wall and CPU seconds (a wrapper around it reports its rusage,
benchmarks/bench_bpf.py), its slowdown against alone (CPU and wall), the recorder's own CPU (every
process of the pipeline but the program: perf record, perf script, fastunwind), the bytes written to
disk (perf.data and perf script's text; the folded profile) and the end-to-end wall time from start
to a finished profile. The machine may be shared: the best and the median of N are both reported.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.bench_bpf import children_cpu, target_times, wrapped, write_json
from scripts import record_workloads

FIGURES = ("target_wall", "target_cpu", "recorder_cpu", "disk_bytes", "end_to_end")

#: one mode's run, in a scratch directory
Mode = Callable[[Path], dict[str, Any]]


def _fastunwind() -> str:
    return str(Path(sys.executable).with_name("fastunwind"))


def measure(steps: list[tuple[list[str], Path | None]], outputs: list[Path], cpu_file: Path) -> dict[str, Any]:
    """Run `steps` (argv, the file its standard output goes to) one after the other, the first running
    the wrapped program, and take the figures; `outputs`: every file the steps write."""
    for path in outputs:
        path.unlink(missing_ok=True)
    before_cpu, start = children_cpu(), time.monotonic()
    for argv, stdout in steps:
        with open(stdout or os.devnull, "wb") as sink:
            subprocess.run(argv, check=True, stdout=sink, stderr=subprocess.DEVNULL)
    end_to_end = time.monotonic() - start
    total_cpu = children_cpu() - before_cpu
    target_cpu, target_wall = target_times(cpu_file)
    return {"target_wall": target_wall, "target_cpu": target_cpu, "recorder_cpu": total_cpu - target_cpu,
            "disk_bytes": sum(path.stat().st_size for path in outputs), "end_to_end": end_to_end}


def modes(command: list[str], frequencies: list[int], bpf: bool) -> list[tuple[str, Mode]]:
    def alone(work: Path) -> dict[str, Any]:
        cpu_file = work / "cpu"
        return measure([(wrapped(command, cpu_file), None)], [], cpu_file)

    def perf(hz: int, work: Path) -> dict[str, Any]:
        cpu_file, data, text = work / "cpu", work / "perf.data", work / "perf.txt"
        return measure([(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), "--call-graph", "dwarf",
                          "-o", str(data), "--", *wrapped(command, cpu_file)], None),
                        (["perf", "script", "--no-inline", "-i", str(data)], text)], [data, text], cpu_file)

    def fastunwind(hz: int, extra: list[str], work: Path) -> dict[str, Any]:
        cpu_file, out = work / "cpu", work / "out.folded"
        return measure([([_fastunwind(), "record", *extra, "-F", str(hz), "--format", "folded", "-o", str(out),
                          "--", *wrapped(command, cpu_file)], None)], [out], cpu_file)

    configs: list[tuple[str, Mode]] = [("alone", alone)]
    for hz in frequencies:
        configs += [(f"perf record + script {hz} Hz", functools.partial(perf, hz)),
                    (f"fastunwind record {hz} Hz", functools.partial(fastunwind, hz, []))]
        if bpf:
            configs.append((f"fastunwind record --bpf {hz} Hz", functools.partial(fastunwind, hz, ["--bpf"])))
    return configs


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best (least) and median of each figure over the runs."""
    return {key: {"best": min(r[key] for r in runs), "median": statistics.median(r[key] for r in runs)}
            for key in FIGURES}


def with_slowdowns(report: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    base = report["alone"]
    for figures in report.values():
        for key in ("target_cpu", "target_wall"):
            figures[f"{key}_slowdown"] = {stat: figures[key][stat] / base[key][stat] for stat in ("best", "median")}
    return report


def _bpf_possible() -> bool:
    return os.geteuid() == 0


def parse_frequencies(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--hz {text!r}: a comma-separated list of integers") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"--hz {text!r}: positive frequencies, at least one")
    return values


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode (default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="the compiler workload's size, in seconds of clang")
    parser.add_argument("--hz", type=parse_frequencies, default=[99, 999], metavar="HZ[,HZ...]",
                        help="sampling frequencies (default 99,999)")
    parser.add_argument("--no-bpf", action="store_true", help="leave out fastunwind record --bpf")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE")
    args = parser.parse_args(argv)
    if args.repeat <= 0 or args.seconds <= 0:
        parser.error(f"--repeat {args.repeat} --seconds {args.seconds:g}: both must be positive")
    return args


def _print_table(command: list[str], repeat: int, report: dict[str, dict[str, Any]]) -> None:
    print(f"command: {' '.join(command)}; best / median of {repeat} interleaved runs "
          f"(a shared machine: other jobs ran meanwhile)")
    print(f"{'mode':<32} {'target wall s':>14} {'target CPU s':>13} {'slowdown CPU':>13} {'slowdown wall':>14} "
          f"{'recorder CPU s':>15} {'disk kB':>9} {'end to end s':>13}")
    for name, r in report.items():
        def pair(key: str, fmt: str, scale: float = 1.0) -> str:
            return f"{r[key]['best'] * scale:{fmt}} / {r[key]['median'] * scale:{fmt}}"
        print(f"{name:<32} {pair('target_wall', '.2f'):>14} {pair('target_cpu', '.2f'):>13} "
              f"{pair('target_cpu_slowdown', '.2f'):>13} {pair('target_wall_slowdown', '.2f'):>14} "
              f"{pair('recorder_cpu', '.2f'):>15} {r['disk_bytes']['best'] / 1e3:>9.0f} "
              f"{pair('end_to_end', '.1f'):>13}")


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    settings = record_workloads.Settings(seconds=args.seconds)
    command = record_workloads.WORKLOADS["compiler"].command(settings)
    bpf = not args.no_bpf and _bpf_possible()
    if not args.no_bpf and not bpf:
        print("bench_record: not root: fastunwind record --bpf left out", file=sys.stderr)
    configs = modes(command, args.hz, bpf)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in configs}
    with tempfile.TemporaryDirectory(prefix="bench-record-") as tmp:
        for _ in range(args.repeat):  # interleaved: a burst of load hits every mode
            for name, run in configs:
                results[name].append(run(Path(tmp)))
    report = with_slowdowns({name: summarize(runs) for name, runs in results.items()})
    if args.json:
        write_json(args.json, {"command": command, "repeat": args.repeat, "results": report})
        return 0
    _print_table(command, args.repeat, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
