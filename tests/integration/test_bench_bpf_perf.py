"""bench_bpf's perf configurations: the share of perf's stacks that unwind to their end depends on
how much stack each sample copies, which is why the benchmark runs perf at its largest size too.
Needs root (perf record of a child at -F 999 is allowed to users only by a low perf_event_paranoid)
and perf."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchmarks import bench_bpf
from scripts import record_workloads

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("perf") is None,
                                reason="needs root and perf (Debian's linux-perf)")


def test_perf_copies_a_deep_programs_whole_stack_only_at_its_largest_size(tmp_path: Path) -> None:
    command = record_workloads.WORKLOADS["compiler"].command(
        record_workloads.Settings(seconds=0.5, build_dir=tmp_path / "workloads"))
    default = bench_bpf.run_perf(command, 999, tmp_path)
    largest = bench_bpf.run_perf(command, 999, tmp_path, stack_bytes=bench_bpf.PERF_LARGEST_STACK)
    assert default["samples"] > 100 and largest["samples"] > 100
    # the compiler's stacks run deeper than perf's default 8 KiB: few of them are whole there
    assert default["complete_user_share"] < 0.5
    assert largest["complete_user_share"] >= 0.95
    assert largest["disk_bytes_per_sample"] > 4 * default["disk_bytes_per_sample"]
