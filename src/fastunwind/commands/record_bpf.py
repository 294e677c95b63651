"""`fastunwind record --bpf` (the options: commands/record.py): a profile unwound in the kernel, with
no stack copied to disk.

A BPF program attached to a cpu-clock event on every CPU (-F HZ) walks each sample's user stack from
the compact tables fastunwind loads into BPF maps (native/bpf) and sends each sample (its thread,
time, CPU and stack with its kernel part) through a ring buffer; the profile is written at the end:
folded stacks, perf script's text (`--format perf`: a sample per record, with its thread, command
name and time), or speedscope's file, the Firefox profiler's or the HTML flame graph, by
perf-script's writers (native/core/profile.h; each sample in its thread at its time). What is
sampled:
a command (`-- CMD ...`, with the processes it starts), running processes (`-p PID[,PID]`) or every
process (`-a`); it stops when they have exited, after --duration seconds, or on Ctrl-C. A stack that
did not reach the outermost frame starts with its outcome ("[frame_limit]", "[slow_row]",
"[no_unwind_info]", "[unreadable]", ...); the summary on standard error counts the samples by
outcome. The tables' BPF map is allocated at the start: `--table-mib` MiB, else the tables of the
modules in scope then (a script's: its interpreter's) and half as much again (32 to 512 MiB, at most
a sixteenth of the memory; smaller where the kernel refuses that much), growing by 4 MiB segments up
to that limit where a module mapped since would evict another; the summary says its size, what it
grew to and its peak use. `--json`
writes that summary as JSON instead of the profile. `--synth` as perf-script's: the tables loaded
into the kernel hold rows derived from the machine code where no CFI covers it (missing, the
default) and, with repair, in place of declared rows proven wrong; off: the CFI alone.

Needs root (or CAP_BPF and CAP_PERFMON), a kernel with CONFIG_BPF_SYSCALL and BTF
(/sys/kernel/btf/vmlinux): otherwise it fails with the kernel's reason.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable

from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, TextIO
    from fastunwind.bpf import BpfProfile

#: the formats of the in-kernel profile
FORMATS = ("folded", "perf", "speedscope", "gecko", "html")


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _counted(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _summary(stats: dict[str, Any]) -> str:
    user, complete = int(stats["user_samples"]), int(stats["complete_user_samples"])
    walked = int(stats["walked_user_samples"])
    outcomes = ", ".join(f"{name} {n}" for name, n in sorted(stats["outcomes"].items(), key=lambda i: -i[1]))
    runs, run_ns = int(stats["bpf_runs"]), int(stats["bpf_run_ns"])
    cost = f"; BPF {run_ns / runs:.0f} ns per sample" if runs else ""
    left_out = (f", {_counted(stats['processes_left_out'], 'process', 'processes')} left out: the unwinder had no "
                "room for them" if stats["processes_left_out"] else "")
    not_loaded = (f", {complete} of the {walked} walked with their process's mappings ({_share(complete, walked)}); "
                  f"{_counted(stats['not_loaded_samples'], 'sample')} of "
                  f"{_counted(stats['not_loaded_processes'], 'process', 'processes')} taken before loading "
                  f"({stats['processes_never_walked']} of them never walked{left_out})"
                  if stats["not_loaded_samples"] else "")
    return (f"fastunwind record: {stats['samples']} samples, {complete} of {user} user stacks complete "
            f"({_share(complete, user)}){not_loaded}; outcomes: {outcomes or 'none'}; {stats['frame_pointer_frames']} frames by frame pointer, "
            f"{stats['derived_frames']} through derived rows (--synth {stats['synth']}); "
            f"{stats['modules_loaded']} modules loaded ({stats['modules_without_table']} without CFI); "
            f"{_table_map(stats)}{cost}{_lost(stats)}{_mappings_left_out(stats)}")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def _table_map(stats: dict[str, Any]) -> str:
    """The table map's size, how it was chosen, what it grew to, and its peak use."""
    chosen_by = stats["table_map_chosen_by"]
    in_scope = f"the tables in scope at the start take {_mib(stats['table_in_scope_bytes'])}"
    how = {"--table-mib": "--table-mib", "default": f"the default: {in_scope}",
           "tables in scope": f"{in_scope}, and half as much again", "limit": f"the limit: {in_scope}"}[chosen_by]
    refused = len(stats["table_map_refused"])
    how += f"; the kernel refused {_counted(refused, 'larger one')}" if refused else ""
    grown = stats["table_map_end_slot_bytes"]
    grown_to = f", grown to {_mib(grown)} by modules mapped since" if grown > stats["table_map_slot_bytes"] else ""
    return (f"table map {_mib(stats['table_map_slot_bytes'])} ({how}){grown_to}, "
            f"at most {_mib(stats['table_slots_peak_bytes'])} used")


def _mappings_left_out(stats: dict[str, Any]) -> str:
    """The processes with more executable mappings than the unwinder holds, when there are some."""
    from fastunwind import _core

    processes = int(stats["processes_with_mappings_left_out"])
    return (f"; {_counted(processes, 'process', 'processes')} with more than {_core.BPF_MAX_MAPPINGS} executable "
            f"mappings: {_counted(int(stats['mappings_left_out']), 'mapping')} left out (a frame in one ends "
            "mappings_left_out)" if processes else "")


def _lost(stats: dict[str, Any]) -> str:
    """What the profile lacks, when it lacks something: samples the ring buffer had no room for,
    samples past the log's bound (in the folded counts, not in per-sample formats), tables evicted
    while in use."""
    dropped, unlogged = int(stats["samples_dropped"]), int(stats["samples_unlogged"])
    evicted = int(stats["modules_evicted_in_use"])
    return ((f"; {dropped} samples dropped (the ring buffer was full)" if dropped else "") +
            (f"; {unlogged} samples past the log's bound (counted in folded stacks only)" if unlogged else "") +
            (f"; {_counted(evicted, 'module')} evicted while in use (their frames end table_evicted until "
             f"reloaded; --table-mib {stats['table_mib_for_every_table']} holds every table this recording loaded)"
             if evicted else ""))


def run(args: argparse.Namespace) -> int:
    import json

    from fastunwind import _core
    from fastunwind.bpf import BpfRecorder

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if bool(command) + args.all_cpus + bool(args.pid) != 1:
        print("fastunwind: error: record --bpf needs one of -a, -p PID or -- CMD", file=sys.stderr)
        return 2
    if args.frequency <= 0 or (args.table_mib is not None and args.table_mib <= 0):
        print("fastunwind: error: -F and --table-mib must be above 0", file=sys.stderr)
        return 2
    # nan would never be reached: a recording without end
    if args.duration is not None and not 0 <= args.duration < math.inf:
        print(f"fastunwind: error: --duration {args.duration}: not a number of seconds", file=sys.stderr)
        return 2
    try:
        pids = [int(p) for p in args.pid.split(",")] if args.pid else []
    except ValueError:
        print(f"fastunwind: error: -p {args.pid}: not a list of process ids", file=sys.stderr)
        return 2
    gone = [pid for pid in pids if pid <= 0 or not os.path.isdir(f"/proc/{pid}")]
    if gone:  # as backtrace -p says it (live.py), not an empty profile
        print(f"fastunwind: error: no process {gone[0]}", file=sys.stderr)
        return 1
    slots = args.table_mib * 1024 * 1024 // _core.BPF_SLOT_BYTES if args.table_mib is not None else None
    if slots is not None and slots > _core.BPF_MAX_SLOTS:
        print(f"fastunwind: error: --table-mib {args.table_mib}: at most "
              f"{_core.BPF_MAX_SLOTS * _core.BPF_SLOT_BYTES >> 20}", file=sys.stderr)
        return 2
    recorder = BpfRecorder(frequency=args.frequency, pids=pids, sample_all=args.all_cpus, slot_capacity=slots,
                           programs=command[:1], synth=args.synth or "missing")
    for refusal in recorder.table_map.refused:
        print(f"fastunwind record: {refusal}; trying a smaller table map", file=sys.stderr)
    child = None
    try:
        if command:
            child = recorder.launch(command)
        if args.all_cpus:
            recorder.add_running()
    except BaseException:
        recorder.close()
        raise
    deadline = time.monotonic() + args.duration if args.duration is not None else None

    def finished() -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            return True
        if child is not None:
            return child.poll() is not None
        return bool(pids) and not recorder.any_alive()

    try:
        profile = recorder.run(finished)
    finally:
        if child is not None and child.poll() is None and deadline is not None:
            child.terminate()
        if child is not None:
            child.wait()
    stats = profile.statistics()
    print(_summary(stats), file=sys.stderr)
    if args.json:
        json.dump(stats, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        write_profile(profile, args.format, sys.stdout, " ".join(command) or "fastunwind record --bpf")
    return 0


def write_profile(profile: BpfProfile, output_format: str, out: TextIO, name: str) -> None:
    """The profile in one of FORMATS, named `name` (speedscope's and the Firefox profiler's files,
    the flame graph's title)."""
    if output_format == "folded":
        profile.write_folded(out)
        return
    if output_format == "perf":
        profile.write_perf_script(out)
        return
    from fastunwind import _core
    from fastunwind.perf.script import write_flame_graph, write_gecko, write_speedscope

    writers: dict[str, Callable[[_core.Profile, TextIO, str], None]] = {
        "speedscope": write_speedscope, "gecko": write_gecko, "html": write_flame_graph}
    writers[output_format](profile.core_profile(), out, name)
