"""The in-kernel unwinder's cost: `fastunwind record --bpf` against `perf record --call-graph dwarf`
(perf's default 8 KiB of stack a sample, and its largest, 64 KiB: the size at which its stacks are
as complete as ours) and against no profiler, on a fixed amount of work (clang-14 -O2 -c on the compiler workload's
generated C file, scripts/record_workloads.py).

    .venv/bin/python -m benchmarks.bench_bpf [--repeat N] [--seconds S] [--rounds R] [--overhead-seconds S]
        [--rounds-99 R] [--seconds-99 S] [--json [FILE]]
    .venv/bin/python -m benchmarks.bench_bpf --pool FILE... [--json [FILE]]

Needs root. For each configuration (no profiler; BPF at 99 and 999 Hz, the program timing its walks
and samples; perf at 99 and 999 Hz, with 8 and with 64 KiB of stack), N runs (default 3), the best of each figure:

- target CPU: the profiled program's user + system CPU seconds (getrusage of a wrapper that runs it),
  which includes the kernel's work in its context (the BPF walk, perf's stack copies);
- profiler CPU: the profiler's own CPU seconds (perf record's process; for BPF this process's CPU
  during the recording: loading tables, draining, naming the frames);
- bytes on disk per sample: perf.data's size, or the folded profile's size, over the samples;
- the share of user stacks complete (walked to their outermost frame): BPF's own outcomes, and
  for perf, fastunwind perf-script's offline unwinding of the recording (a stack whose chain runs
  past the copied bytes is truncated);
- the program's runs per sample taken (above 1: runs for processes out of scope) and its run time
  per run and per user frame walked, from the kernel's own accounting
  (kernel.bpf_stats_enabled is set to 1 for the run and restored; every run of the program counts,
  those that leave at once for a process out of scope too), and the walk alone per frame (the
  program's bpf_ktime_get_ns around its user-stack walks, over the frames they walked), and per
  frame the stack reads (bpf_probe_read_user calls: window refills), slot lookups (rules not in
  the CPU's rule cache), extra lookups (map lookups
  past the block's slot: a dense block's continuations, the dictionary for a rule not packed) and
  mapping searches (frames whose mapping was not among the walk's recent ones), and the share of
  frames whose rule came from the CPU's previous walk (the memo: looked up by no map);
- the cost split into a fixed part per sample and a part per frame: over the walked samples, the
  least-squares line of each sample's cost on its user frames (BpfProfile.cost_fit, from sums the
  program keeps), for the whole program run of the sample (its own clock from entry to after its
  record in the CPU's batch: registers, scope and pid lookups, kernel stack, walk, the record and
  the batch's send when it sent it) and for the
  walk alone; the slope is the frame loop's cost per frame, the intercept what a sample costs
  whatever its depth; and, exactly, the program's time outside the walk per walked sample (its
  own clock's total less the walks'); and the walk's cost on the frames of each kind apart, the
  least-squares plane of each walk's ns on its frames looked up and its frames from the memo
  (bpf.walk_fit_by_source): a fixed part, ns per frame looked up, ns per frame from the memo, the
  three from one run (the one whose walk cost least per frame), not each its own best;
- map memory per table row: the slots the loaded modules occupy (64 bytes each: up to 12 rows of a
  512-byte block of code) over the rows loaded.

The machine may be shared: every figure is a best of N, and the report says so.

The overhead on the profiled program (`--rounds R`, default 30; 0 leaves it out) is decided apart,
by a paired test, since a best of three cannot separate a 1% difference on a loaded machine: R
rounds of a shorter run of the same program (`--overhead-seconds`, default 0.5), each round running
the eight configurations once in an order rotated from round to round (a burst of load falls on a
different configuration each time: no profiler, bpf and perf dwarf with 8 and 64 KiB at 99 and 999
Hz, and perf record without stacks at 999 Hz, the cost of the sampling alone); then bpf 99 Hz
against perf dwarf 99 Hz (8 KiB) alone (`--rounds-99`, default 100, of a longer run, `--seconds-99`,
default 2.0: 1.5 s of clang), whose difference is too small for the first rounds. These runs are `record --bpf` as users run it (the program's timing off,
the command's tables loaded before it starts) and perf record, with nothing done after (no profile
written, no perf script). Within a round, each profiled run is paired with its partner
(bpf against each perf at the same rate, each against the round's run without a profiler); over the
rounds, for the target's CPU and its wall time:

- the sign test: how many rounds the first of the pair is below the second, and the exact
  two-sided binomial p-value of that count under "either is as likely to be lower" (ties left out);
- the median of the paired ratios, with its distribution-free 95% interval (the order statistics
  whose ranks the binomial distribution of n, 1/2 puts 2.5% beyond on each side);
- the verdict: "below perf's" or "above perf's" when the sign test's p is below 0.05, else "not
  shown".

Each comparison is also given as time per sample (us / sample: the median ratio's excess over the
samples, cpu-clock taking ~H a second of the program's CPU at H Hz, with the interval's): against
none, what a sample costs the program; against perf without stacks, what each profiler's stacks
cost beyond the sampling itself.

`--pool FILE...` measures nothing: it takes the paired rounds of several runs' `--json FILE` reports
(of the same tree, on the same program: reports of different trees, `tree` in the report, or rounds
of different commands are refused) and gives the
verdict tables of all their rounds together, each round still paired within itself. A run's 30
rounds decide a difference of ~1% of the program's CPU at best; three runs pooled, ~0.6%.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from collections.abc import Callable
from functools import partial
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
    times = target_times(cpu_file)
    return {"target_cpu": times[0], "target_times": times}


def run_perf(command: list[str], hz: int, work: Path, details: bool = True, stacks: bool = True,
             stack_bytes: int | None = None) -> dict[str, Any]:
    """One recording (`stacks`: --call-graph dwarf, with `stack_bytes` of stack a sample if given
    (else perf's default, 8 KiB), else the samples alone: their IP, thread and time); without
    `details` only the target's times (the overhead rounds). With them, the share of user stacks
    that unwind to their end offline (fastunwind perf-script: the copied stack holds the whole
    chain)."""
    cpu_file, data = work / "cpu", work / "perf.data"
    before = children_cpu()
    call_graph = ["--call-graph", "dwarf" if stack_bytes is None else f"dwarf,{stack_bytes}"] if stacks else []
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), *call_graph, "-o", str(data),
                    "--", *wrapped(command, cpu_file)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    total = children_cpu() - before
    times = target_times(cpu_file)
    target = times[0]
    if not details:
        return {"target_cpu": target, "target_times": times}
    samples = _perf_samples(data)
    size = data.stat().st_size
    return {"target_cpu": target, "target_times": times, "profiler_cpu": total - target, "samples": samples,
            "disk_bytes_per_sample": size / samples if samples else None,
            "complete_user_share": _perf_complete_share(data) if stacks else None}


def _perf_samples(data: Path) -> int:
    text = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid"], capture_output=True, text=True).stdout
    return len(text.splitlines())  # one line per sample: -F tid prints no call chain


def _perf_complete_share(data: Path) -> float | None:
    """The share of the recording's user stacks that fastunwind unwinds offline to their end (the
    outcome "end"; the others ran out of copied stack, or of unwind information)."""
    result = subprocess.run([sys.executable, "-m", "fastunwind", "perf-script", "-i", str(data), "--json"],
                            capture_output=True, text=True, check=True)
    stats = json.loads(result.stdout)
    unwound = int(stats["unwound_samples"])
    return stats["outcomes"].get("end", 0) / unwound if unwound else None


def run_bpf(command: list[str], hz: int, work: Path, details: bool = True) -> dict[str, Any]:
    """One recording; with `details` the program times its walks and samples (the ns figures: two
    clock reads more per sample) and the profile is written; without, as `record --bpf` runs, only
    the target's times (the overhead rounds)."""
    cpu_file, out = work / "cpu", work / "out.folded"
    start = _self_cpu()
    recorder = BpfRecorder(frequency=hz, timing=details)
    program = shutil.which(command[0])
    if program:
        recorder.preload(program)  # as `record --bpf -- CMD` does for CMD (launch preloads the wrapper)
    child = recorder.launch(wrapped(command, cpu_file))  # the wrapper's children (the program) inherit its event
    profile = recorder.run(lambda: child.poll() is not None)
    if not details:
        times = target_times(cpu_file)
        return {"target_cpu": times[0], "target_times": times}
    with out.open("w") as f:
        profile.write_folded(f)
    profiler = _self_cpu() - start
    stats = profile.statistics()
    samples = int(stats["samples"])
    frames = int(stats["frames"])
    times = target_times(cpu_file)
    return {"target_cpu": times[0], "target_times": times, "profiler_cpu": profiler, "samples": samples,
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
            "memo_frames_per_frame": stats["memo_frames"] / frames if frames else None,
            "fit_walk_by_source_fixed_ns": stats["fit_walk_by_source_fixed_ns"],
            "fit_walk_ns_per_looked_up_frame": stats["fit_walk_ns_per_looked_up_frame"],
            "fit_walk_ns_per_memo_frame": stats["fit_walk_ns_per_memo_frame"],
            "complete_user_share": stats["complete_user_samples"] / stats["user_samples"]
            if stats["user_samples"] else None,
            "map_bytes_per_row": stats["table_slot_bytes"] / stats["table_rows_loaded"]
            if stats["table_rows_loaded"] else None}


#: the sign test's level for a verdict
SIGNIFICANCE = 0.05
#: "perf samples 999 Hz" is perf record without stacks: what sampling alone costs the program (the
#: timer's interrupt, a 40-byte record), which both profilers pay; each profiler's cost per sample
#: beyond it is its own (the walk and its record; the 8 KiB stack copy and its bigger ring)
CONFIGURATIONS = ("none", "bpf 99 Hz", "perf dwarf 99 Hz", "perf dwarf 64 KiB 99 Hz", "bpf 999 Hz", "perf dwarf 999 Hz",
                  "perf dwarf 64 KiB 999 Hz", "perf samples 999 Hz")
#: "perf dwarf 64 KiB" copies perf's largest user stack a sample (its dump size is a 16-bit field:
#: `--call-graph dwarf,65528` is the most perf record accepts); perf's default, 8 KiB, holds the
#: whole chain of few of a deep program's stacks (clang-14: ~1.5% of its samples unwind to their
#: end from 8 KiB, ~80% from 32 KiB, all from 64 KiB), so this is perf giving the profile that
#: `record --bpf` gives
PERF_LARGEST_STACK = 65528
#: the 99 Hz comparison decided apart, in rounds of these two alone (in alternating order), each
#: run longer: the difference is a few tenths of a percent of the program's CPU, which 30 rounds of
#: a 0.37 s compile leave inside the runs' own spread (on the quiet machine, a 95% interval of
#: 0.986-1.007 for the median ratio); 100 rounds of a 1.5 s compile take ~8 minutes there
DECIDER = ("bpf 99 Hz", "perf dwarf 99 Hz")
DECIDER_ROUNDS = 100
DECIDER_SECONDS = 2.0


def sign_test(pairs: list[tuple[float, float]]) -> tuple[int, int, float]:
    """(rounds where a < b, rounds where a > b, the exact two-sided binomial p-value of those counts
    under p = 1/2); ties are left out."""
    below = sum(a < b for a, b in pairs)
    above = sum(a > b for a, b in pairs)
    n = below + above
    if n == 0:
        return 0, 0, 1.0
    tail = sum(math.comb(n, k) for k in range(min(below, above) + 1)) / 2 ** n
    return below, above, min(1.0, 2 * tail)


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """The median of `values` and its distribution-free interval: the order statistics of ranks k
    and n + 1 - k, k the largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (None, None
    when n is too small for one)."""
    ordered = sorted(values)
    n = len(ordered)
    median = statistics.median(ordered)
    k, below = 0, 0.0
    while k < n and below + math.comb(n, k) / 2 ** n <= (1 - confidence) / 2:
        below += math.comb(n, k) / 2 ** n
        k += 1
    if k == 0:
        return median, None, None
    return median, ordered[k - 1], ordered[n - k]


def rotated(names: tuple[str, ...], round_index: int) -> list[str]:
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


def paired(rounds: list[dict[str, tuple[float, float]]], first: str, second: str, which: int) -> dict[str, Any]:
    """The sign test and the median ratio of `first` over `second` (which: 0 CPU, 1 wall) over the rounds."""
    pairs = [(r[first][which], r[second][which]) for r in rounds]
    below, above, p = sign_test(pairs)
    median, low, high = median_interval([a / b for a, b in pairs])
    verdict = ("not shown" if p >= SIGNIFICANCE else "below" if below > above else "above")
    return {"below": below, "above": above, "p": p, "median_ratio": median, "ratio_low": low, "ratio_high": high,
            "verdict": verdict}


def overhead(command: list[str], rounds: int, names: tuple[str, ...], work: Path) -> dict[str, Any]:
    """The target's (CPU, wall) seconds under each of the configurations `names`, `rounds` rounds in
    rotating order (runs without details: `record --bpf` as it runs, perf without its script), and
    the paired comparisons among them: bpf against perf at each rate, each against none."""
    runs = configurations(command, details=False)
    measured: list[dict[str, tuple[float, float]]] = []
    for i in range(rounds):
        measured.append({name: runs[name](work)["target_times"] for name in rotated(names, i)})
    return {"rounds": measured, "comparisons": comparisons(measured, names), "configurations": names,
            "median_cpu": {name: statistics.median(r[name][0] for r in measured) for name in names}}


def comparisons(measured: list[dict[str, tuple[float, float]]], names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The paired comparisons of the rounds `measured` of the configurations `names`, CPU then wall:
    bpf against perf at each rate, and each against none, where both were run."""
    out = {}
    for hz in (99, 999):
        bpf, perf, whole = f"bpf {hz} Hz", f"perf dwarf {hz} Hz", f"perf dwarf 64 KiB {hz} Hz"
        for which, measure in enumerate(("cpu", "wall")):
            bare = f"perf samples {hz} Hz"
            for first, second in ((bpf, perf), (bpf, whole), (bpf, "none"), (perf, "none"), (whole, "none"),
                                  (bpf, bare), (perf, bare), (whole, bare), (bare, "none")):
                if first in names and second in names:
                    out[f"{first} / {second}, {measure}"] = paired(measured, first, second, which)
    return out


class PoolError(ValueError):
    """Reports that cannot be pooled: no paired rounds, or rounds of different programs or
    configurations."""


#: the report's parts whose rounds are pooled, with the key of the command they ran
POOLED_PARTS = (("overhead", "overhead_command"), ("overhead_99", "overhead_99_command"))


def pooled(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The paired rounds of several `--json` reports taken together: per part (the five
    configurations' rounds, the 99 Hz rounds), the rounds of every report that ran it, on one
    command and the same configurations, and their comparisons (the report's `overhead` and
    `overhead_99`, as one run gives them, with `runs`: how many reports gave rounds)."""
    trees = {r.get("tree") for r in reports}
    if len(trees) > 1:
        raise PoolError(f"reports of different trees cannot be pooled: {', '.join(sorted(map(str, trees)))}")
    out: dict[str, Any] = {"runs": len(reports), "tree": trees.pop() if trees else None}
    for part, command_key in POOLED_PARTS:
        found = [(r[command_key], r[part]) for r in reports if r.get(part)]
        if not found:
            out[part], out[command_key] = None, None
            continue
        command, first = found[0]
        names = tuple(first["configurations"])
        for other_command, other in found[1:]:
            if other_command != command or tuple(other["configurations"]) != names:
                raise PoolError(f"{part}: rounds of {' '.join(other_command)} ({', '.join(other['configurations'])}) "
                                f"cannot be pooled with those of {' '.join(command)} ({', '.join(names)})")
        measured = [{name: (float(times[0]), float(times[1])) for name, times in r.items()}
                    for _, result in found for r in result["rounds"]]
        out[command_key] = command
        out[part] = {"rounds": measured, "comparisons": comparisons(measured, names), "configurations": names,
                     "median_cpu": {name: statistics.median(r[name][0] for r in measured) for name in names},
                     "runs": len(found)}
    if out["overhead"] is None and out["overhead_99"] is None:
        raise PoolError("no report holds paired rounds (--rounds or --rounds-99 above 0)")
    return out


def pool_main(files: list[str], destination: str | None) -> int:
    """`--pool FILE...`: the pooled verdict tables of the reports, printed (and with `--json`, written)."""
    try:
        report = pooled([json.loads(Path(f).read_text()) for f in files])
    except (OSError, ValueError, KeyError, TypeError) as e:  # json.JSONDecodeError and PoolError are ValueErrors
        print(f"bench_bpf --pool: {e}", file=sys.stderr)
        return 2
    report["pooled_files"] = files
    if destination:
        write_json(destination, report)
        if destination == "-":
            return 0
    for part, command_key in POOLED_PARTS:
        if report[part] is not None:
            print_overhead(report[command_key], report[part], f"pooled from {report[part]['runs']} runs")
    return 0


def configurations(command: list[str], details: bool = True) -> dict[str, Callable[[Path], dict[str, Any]]]:
    """CONFIGURATIONS' runs of `command`, each given a work directory."""
    runs: dict[str, Callable[[Path], dict[str, Any]]] = {"none": partial(run_plain, command)}
    for hz in (99, 999):
        runs[f"bpf {hz} Hz"] = partial(run_bpf, command, hz, details=details)
        runs[f"perf dwarf {hz} Hz"] = partial(run_perf, command, hz, details=details)
        runs[f"perf dwarf 64 KiB {hz} Hz"] = partial(run_perf, command, hz, details=details,
                                                     stack_bytes=PERF_LARGEST_STACK)
    runs["perf samples 999 Hz"] = partial(run_perf, command, 999, details=details, stacks=False)
    return runs


#: the plane of the walk's cost on its two kinds of frames: taken whole from one run (the one whose
#: walk cost least per frame), since its three coefficients trade off against each other
SOURCE_FIT = ("fit_walk_by_source_fixed_ns", "fit_walk_ns_per_looked_up_frame", "fit_walk_ns_per_memo_frame")


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = {k for r in runs for k in r} - {"target_times"} - set(SOURCE_FIT)
    higher_is_better = {"complete_user_share", "samples"}
    out: dict[str, Any] = {}
    for k in sorted(keys):
        values = [r[k] for r in runs if r.get(k) is not None]
        out[k] = (max(values) if k in higher_is_better else min(values)) if values else None
    fitted = [r for r in runs if r.get(SOURCE_FIT[0]) is not None]
    if fitted:
        cheapest = min(fitted, key=lambda r: r["walk_ns_per_frame"])
        out.update({k: cheapest[k] for k in SOURCE_FIT})
    return out


def tree() -> str | None:
    """The measured tree: its commit, with "+changes" when files differ from it (None outside git)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        changes = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if changes else "")


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
    parser.add_argument("--rounds", type=int, default=30, help="rounds of the paired overhead comparison (0: none)")
    parser.add_argument("--overhead-seconds", type=float, default=0.5,
                        help="the compiler workload's size in the overhead rounds")
    parser.add_argument("--rounds-99", type=int, default=DECIDER_ROUNDS,
                        help="rounds of bpf 99 Hz against perf dwarf 99 Hz alone (0: none)")
    parser.add_argument("--seconds-99", type=float, default=DECIDER_SECONDS,
                        help="the compiler workload's size in the 99 Hz rounds")
    parser.add_argument("--pool", nargs="+", metavar="FILE",
                        help="measure nothing: the verdicts of the paired rounds of these --json reports together")
    args = parser.parse_args(argv)
    if args.pool:
        return pool_main(args.pool, args.json)
    if os.geteuid() != 0:
        print("bench_bpf: needs root (the BPF unwinder and perf)", file=sys.stderr)
        return 77
    settings = record_workloads.Settings(seconds=args.seconds)
    command = record_workloads.WORKLOADS["compiler"].command(settings)
    stats_file = Path("/proc/sys/kernel/bpf_stats_enabled")
    saved = stats_file.read_text().strip()
    stats_file.write_text("1")
    short = record_workloads.WORKLOADS["compiler"].command(record_workloads.Settings(seconds=args.overhead_seconds))
    at_99 = record_workloads.WORKLOADS["compiler"].command(record_workloads.Settings(seconds=args.seconds_99))
    configs = configurations(command)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    loads = [os.getloadavg()[0]]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-bpf-") as tmp:
            for _ in range(args.repeat):  # interleaved: a burst of load hits every configuration
                for name, run in configs.items():
                    results[name].append(run(Path(tmp)))
            loads.append(os.getloadavg()[0])
            paired_runs = overhead(short, args.rounds, CONFIGURATIONS, Path(tmp)) if args.rounds > 0 else None
            loads.append(os.getloadavg()[0])
            decider = (overhead(at_99, args.rounds_99, DECIDER, Path(tmp)) if args.rounds_99 > 0 else None)
            loads.append(os.getloadavg()[0])
    finally:
        stats_file.write_text(saved)
    report = {name: best(runs) for name, runs in results.items()}
    base = report["none"]["target_cpu"]
    for name, r in report.items():
        r["target_slowdown"] = r["target_cpu"] / base
    if args.json:
        write_json(args.json, {"tree": tree(), "command": command, "repeat": args.repeat, "results": report,
                               "overhead_command": short, "overhead": paired_runs, "overhead_99_command": at_99,
                               "overhead_99": decider, "load_average": loads})
        if args.json == "-":
            return 0
    print(f"load average (1 min) at the start and after each part: {', '.join(f'{x:.1f}' for x in loads)}")
    print(f"command: {' '.join(command)}; best of {args.repeat} (a shared machine: other jobs ran meanwhile)")
    print(f"{'configuration':<18} {'target CPU s':>12} {'slowdown':>9} {'profiler CPU s':>14} {'samples':>8} "
          f"{'disk B/sample':>13} {'runs/sample':>11} {'BPF ns/sample':>13} {'BPF ns/frame':>12} {'walk ns/frame':>13} "
          f"{'reads/frame':>11} {'slots/frame':>11} {'lookups/frame':>13} {'searches/frame':>14} {'complete':>8} {'map B/row':>9} "
          f"{'outside walk ns/sample':>22} {'fit: sample ns + ns/frame':>25} {'fit: walk ns + ns/frame':>23} "
          f"{'memo/frame':>10} {'fit: walk ns + ns/looked up + ns/memo':>37}")
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
              f"{cell('fit_walk_fixed_ns', '.0f', 11)} +{cell('fit_walk_ns_per_frame', '.1f', 11)} "
              f"{cell('memo_frames_per_frame', '.3f', 10)} {cell('fit_walk_by_source_fixed_ns', '.0f', 11)} "
              f"+{cell('fit_walk_ns_per_looked_up_frame', '.1f', 12)} +{cell('fit_walk_ns_per_memo_frame', '.1f', 11)}")
    if paired_runs is not None:
        print_overhead(short, paired_runs, "one run")
    if decider is not None:
        print_overhead(at_99, decider, "one run")
    return 0


def print_overhead(command: list[str], result: dict[str, Any], source: str) -> None:
    medians = ", ".join(f"{name} {cpu:.3f}" for name, cpu in result["median_cpu"].items())
    print(f"\noverhead on the profiled program: {' '.join(command)}, {len(result['rounds'])} rounds in rotating order, "
          f"{source} (median target CPU s: {medians})")
    print(f"{'comparison':<46} {'lower':>5} {'higher':>6} {'sign test p':>11} {'median ratio':>12} "
          f"{'95% interval':>15} {'us / sample (95%)':>24}  verdict")
    for name, c in result["comparisons"].items():
        interval = f"{c['ratio_low']:.3f}-{c['ratio_high']:.3f}" if c["ratio_low"] is not None else "-"
        excess = per_sample(name, c)
        cost = (f"{excess[0]:.1f} ({excess[1]:.1f} to {excess[2]:.1f})" if excess[1] is not None and excess[2] is not None
                else f"{excess[0]:.1f}")
        print(f"{name:<46} {c['below']:>5} {c['above']:>6} {c['p']:>11.2g} {c['median_ratio']:>12.3f} "
              f"{interval:>15} {cost:>24}  {c['verdict']}")


def per_sample(name: str, comparison: dict[str, Any]) -> tuple[float, float | None, float | None]:
    """The paired comparison `name` ("FIRST at H Hz / SECOND, cpu or wall") as the first's time per
    sample beyond the second's, in microseconds, with its interval: at H Hz cpu-clock takes ~H
    samples a second of the program's CPU, so a ratio r is (r - 1) / H seconds a sample."""
    hz = int(name.split(" Hz")[0].split()[-1])

    def us(ratio: float | None) -> float | None:
        return None if ratio is None else (ratio - 1) / hz * 1e6
    median = us(comparison["median_ratio"])
    assert median is not None
    return median, us(comparison["ratio_low"]), us(comparison["ratio_high"])


if __name__ == "__main__":
    sys.exit(main())
