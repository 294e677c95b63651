"""The in-kernel unwinder's cost: `fastunwind record --bpf` against `perf record --call-graph dwarf`
and against no profiler, on a fixed amount of work (clang-14 -O2 -c on the compiler workload's
generated C file, scripts/record_workloads.py).

    .venv/bin/python -m benchmarks.bench_bpf [--repeat N] [--functions N] [--json [FILE]]

Needs root. For each configuration (no profiler; BPF at 99 and 999 Hz; perf at 99 and 999 Hz), N
runs (default 3), the best of each figure:

- target CPU: the profiled program's user + system CPU seconds (getrusage of a wrapper that runs it),
  which includes the kernel's work in its context (the BPF walk, perf's stack copies);
- profiler CPU: the profiler's own CPU seconds (perf record's process; for BPF this process's CPU
  during the recording: loading tables, draining, naming the frames);
- bytes on disk per sample: perf.data's size, or the folded profile's size, over the samples;
- the program's runs per sample taken (above 1: runs for processes out of scope) and its run time
  per run and per user frame walked, from the kernel's own accounting
  (kernel.bpf_stats_enabled is set to 1 for the run and restored; every run of the program counts,
  those that leave at once for a process out of scope too), and the walk alone per frame (the
  program's bpf_ktime_get_ns around its user-stack walks, over the frames they walked), and per
  frame the stack reads (bpf_probe_read_user calls: window refills), slot lookups (rules not in
  the CPU's rule cache), extra lookups (map lookups
  past the block's slot: a dense block's continuations, the dictionary for a rule not packed) and
  mapping searches (frames whose mapping was not among the walk's recent ones);
- the cost split into a fixed part per sample and a part per frame: over the walked samples, the
  least-squares line of each sample's cost on its user frames (BpfProfile.cost_fit, from sums the
  program keeps), for the whole program run of the sample (its own clock from entry to after the
  ring buffer output: registers, scope and pid lookups, kernel stack, walk, output) and for the
  walk alone; the slope is the frame loop's cost per frame, the intercept what a sample costs
  whatever its depth; and, exactly, the program's time outside the walk per walked sample (its
  own clock's total less the walks');
- map memory per table row: the slots the loaded modules occupy (64 bytes each: up to 12 rows of a
  256-byte block of code) over the rows loaded.

The machine may be shared: every figure is a best of N, and the report says so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fastunwind.bpf import BpfRecorder
from scripts import record_workloads

#: runs the program and writes its own CPU and wall seconds ("CPU WALL") to the file argv[1]
WRAPPER = ("import resource, subprocess, sys, time\n"
           "start = time.monotonic()\n"
           "subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)\n"
           "wall = time.monotonic() - start\n"
           "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "open(sys.argv[1], 'w').write(f'{r.ru_utime + r.ru_stime} {wall}')\n")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def wrapped(command: list[str], cpu_file: Path) -> list[str]:
    return [sys.executable, "-c", WRAPPER, str(cpu_file), *command]


def target_times(cpu_file: Path) -> tuple[float, float]:
    """The profiled program's own (CPU, wall) seconds, as the wrapper wrote them."""
    cpu, wall = cpu_file.read_text().split()
    return float(cpu), float(wall)


def run_plain(command: list[str], work: Path) -> dict[str, Any]:
    cpu_file = work / "cpu"
    subprocess.run(wrapped(command, cpu_file), check=True)
    return {"target_cpu": target_times(cpu_file)[0]}


def run_perf(command: list[str], hz: int, work: Path) -> dict[str, Any]:
    cpu_file, data = work / "cpu", work / "perf.data"
    before = children_cpu()
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), "--call-graph", "dwarf", "-o", str(data),
                    "--", *wrapped(command, cpu_file)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    total = children_cpu() - before
    target = target_times(cpu_file)[0]
    samples = _perf_samples(data)
    size = data.stat().st_size
    return {"target_cpu": target, "profiler_cpu": total - target, "samples": samples,
            "disk_bytes_per_sample": size / samples if samples else None}


def _perf_samples(data: Path) -> int:
    text = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid"], capture_output=True, text=True).stdout
    return len(text.splitlines())  # one line per sample: -F tid prints no call chain


def run_bpf(command: list[str], hz: int, work: Path) -> dict[str, Any]:
    cpu_file, out = work / "cpu", work / "out.folded"
    start = _self_cpu()
    recorder = BpfRecorder(frequency=hz)
    child = recorder.launch(wrapped(command, cpu_file))  # the wrapper's children (the program) inherit its event
    profile = recorder.run(lambda: child.poll() is not None)
    with out.open("w") as f:
        profile.write_folded(f)
    profiler = _self_cpu() - start
    stats = profile.statistics()
    samples = int(stats["samples"])
    frames = int(stats["frames"])
    return {"target_cpu": target_times(cpu_file)[0], "profiler_cpu": profiler, "samples": samples,
            "disk_bytes_per_sample": out.stat().st_size / samples if samples else None,
            "bpf_ns_per_sample": stats["bpf_run_ns"] / stats["bpf_runs"] if stats["bpf_runs"] else None,
            "bpf_runs_per_sample": stats["bpf_runs"] / samples if samples else None,
            "bpf_ns_per_frame": stats["bpf_run_ns"] / frames if frames else None,
            "walk_ns_per_frame": stats["walk_ns"] / frames if frames else None,
            "outside_walk_ns_per_sample": (stats["sample_ns"] - stats["walk_ns"]) / stats["walked_samples"]
            if stats["walked_samples"] else None,
            "fit_sample_fixed_ns": stats["fit_sample_fixed_ns"],
            "fit_sample_ns_per_frame": stats["fit_sample_ns_per_frame"],
            "fit_walk_fixed_ns": stats["fit_walk_fixed_ns"],
            "fit_walk_ns_per_frame": stats["fit_walk_ns_per_frame"],
            "stack_reads_per_frame": stats["stack_reads"] / frames if frames else None,
            "slot_lookups_per_frame": stats["slot_lookups"] / frames if frames else None,
            "extra_lookups_per_frame": stats["extra_lookups"] / frames if frames else None,
            "mapping_searches_per_frame": stats["mapping_searches"] / frames if frames else None,
            "complete_user_share": stats["complete_user_samples"] / stats["user_samples"]
            if stats["user_samples"] else None,
            "map_bytes_per_row": stats["table_slot_bytes"] / stats["table_rows_loaded"]
            if stats["table_rows_loaded"] else None}


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = {k for r in runs for k in r}
    higher_is_better = {"complete_user_share", "samples"}
    out: dict[str, Any] = {}
    for k in sorted(keys):
        values = [r[k] for r in runs if r.get(k) is not None]
        out[k] = (max(values) if k in higher_is_better else min(values)) if values else None
    return out


def write_json(destination: str, report: dict[str, Any]) -> None:
    """`--json [FILE]`: the report to standard output ("-") or to FILE."""
    text = json.dumps(report, indent=1)
    if destination == "-":
        print(text)
    else:
        Path(destination).write_text(text + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="the compiler workload's size, in seconds of clang")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_bpf: needs root (the BPF unwinder and perf)", file=sys.stderr)
        return 77
    settings = record_workloads.Settings(seconds=args.seconds)
    command = record_workloads.WORKLOADS["compiler"].command(settings)
    stats_file = Path("/proc/sys/kernel/bpf_stats_enabled")
    saved = stats_file.read_text().strip()
    stats_file.write_text("1")
    configs = [("none", lambda w: run_plain(command, w))]
    for hz in (99, 999):
        configs += [(f"bpf {hz} Hz", lambda w, hz=hz: run_bpf(command, hz, w)),
                    (f"perf dwarf {hz} Hz", lambda w, hz=hz: run_perf(command, hz, w))]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in configs}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-bpf-") as tmp:
            for _ in range(args.repeat):  # interleaved: a burst of load hits every configuration
                for name, run in configs:
                    results[name].append(run(Path(tmp)))
    finally:
        stats_file.write_text(saved)
    report = {name: best(runs) for name, runs in results.items()}
    base = report["none"]["target_cpu"]
    for name, r in report.items():
        r["target_slowdown"] = r["target_cpu"] / base
    if args.json:
        write_json(args.json, {"command": command, "repeat": args.repeat, "results": report})
        return 0
    print(f"command: {' '.join(command)}; best of {args.repeat} (a shared machine: other jobs ran meanwhile)")
    print(f"{'configuration':<18} {'target CPU s':>12} {'slowdown':>9} {'profiler CPU s':>14} {'samples':>8} "
          f"{'disk B/sample':>13} {'runs/sample':>11} {'BPF ns/sample':>13} {'BPF ns/frame':>12} {'walk ns/frame':>13} "
          f"{'reads/frame':>11} {'slots/frame':>11} {'lookups/frame':>13} {'searches/frame':>14} {'complete':>8} {'map B/row':>9} "
          f"{'outside walk ns/sample':>22} {'fit: sample ns + ns/frame':>25} {'fit: walk ns + ns/frame':>23}")
    for name, r in report.items():
        def cell(key: str, fmt: str, width: int) -> str:
            v = r.get(key)
            return f"{v:{width}{fmt}}" if v is not None else f"{'-':>{width}}"
        print(f"{name:<18} {cell('target_cpu', '.2f', 12)} {cell('target_slowdown', '.3f', 9)} "
              f"{cell('profiler_cpu', '.2f', 14)} {cell('samples', 'd', 8)} {cell('disk_bytes_per_sample', '.0f', 13)} "
              f"{cell('bpf_runs_per_sample', '.2f', 11)} {cell('bpf_ns_per_sample', '.0f', 13)} {cell('bpf_ns_per_frame', '.1f', 12)} "
              f"{cell('walk_ns_per_frame', '.1f', 13)} {cell('stack_reads_per_frame', '.3f', 11)} "
              f"{cell('slot_lookups_per_frame', '.3f', 11)} {cell('extra_lookups_per_frame', '.3f', 13)} "
              f"{cell('mapping_searches_per_frame', '.3f', 14)} "
              f"{cell('complete_user_share', '.3f', 8)} {cell('map_bytes_per_row', '.2f', 9)} "
              f"{cell('outside_walk_ns_per_sample', '.0f', 22)} {cell('fit_sample_fixed_ns', '.0f', 12)} +{cell('fit_sample_ns_per_frame', '.1f', 12)} "
              f"{cell('fit_walk_fixed_ns', '.0f', 11)} +{cell('fit_walk_ns_per_frame', '.1f', 11)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
