"""`fastunwind report` against `perf report --stdio` (perf 6.1) on the same recordings.

Self samples depend on each sample's first frame alone (the sampled IP), so they must agree on every
recording, unwound or not: the top 20 functions by self samples and their counts are perf's, and the
counts add up to the samples. Total (children) samples depend on the whole stack, so they are
compared where perf and fastunwind unwind the same stacks: the C workload recorded again with a fixed
period (`-c`), so that perf's period-weighted percentages are sample shares; perf report runs with
`--no-inline`, as the frames are perf script's `--no-inline` ones.

Kept difference: perf names a caller frame without a symbol by its address in the process in
`--children` entries (fill_callchain_info takes the callchain node's ip) and by its DSO-relative
address in self entries; fastunwind names both by the DSO-relative address. Such rows are compared by
count only, not by name.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from fastunwind.perf.report import report_recording

WORKLOADS = ["c", "python", "hackbench-threads", "compiler"]
TOP = 20
_SELF_LINE = re.compile(r"^\s*([\d.]+)%\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(.+?)\s*$")
_CHILDREN_LINE = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(.+?)\s*$")
_ADDRESS = re.compile(r"0x[0-9a-f]{16}")


def perf_report(data_file: Path, children: bool) -> list[tuple[str, str, float, int]]:
    """perf's entries (dso, symbol, percentage: children or self, self samples), in its order."""
    command = ["perf", "report", "--stdio", "--no-inline", "-n", "--sort", "dso,sym", "-g", "none",
               "--children" if children else "--no-children", "-i", str(data_file)]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    entries = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = (_CHILDREN_LINE if children else _SELF_LINE).match(line)
        if match is None:
            continue
        if children:
            percent, _self, samples, dso, _level, symbol = match.groups()
        else:
            percent, samples, dso, _level, symbol = match.groups()
        entries.append((dso, symbol, float(percent), int(samples)))
    return entries


@pytest.mark.parametrize("workload", WORKLOADS)
def test_top_self_functions_and_counts_are_perfs(perf_recordings, workload):
    recording = perf_recordings.get(workload)
    table, _threads, _stats = report_recording(str(recording.data_file), ("dso", "sym"))
    assert sum(row.self for row in table.rows) == table.samples
    perf = perf_report(recording.data_file, children=False)
    assert sum(samples for *_key, samples in perf) == table.samples
    # overloads share a demangled name (perf 6.1 prints C++ names without parameters) and are rows of
    # their own in both reports: entries are matched as (dso, name, count) multisets
    perf_entries = Counter((dso, symbol, samples) for dso, symbol, _percent, samples in perf)
    ours = [row for row in table.rows if row.self][:TOP]
    for row in ours:
        key = (os.path.basename(row.module or ""), row.name, row.self)
        assert perf_entries[key] > 0, f"{key[:2]}: {row.self} samples, perf: " + str(
            [entry for entry in perf_entries if entry[:2] == key[:2]])
        perf_entries[key] -= 1
    # the same top 20 (ties aside: the 20th count decides)
    assert sorted((samples for *_key, samples in perf), reverse=True)[:TOP] == [row.self for row in ours]


@pytest.fixture(scope="module")
def fixed_period_recording(perf_recordings, tmp_path_factory) -> Path:
    """The C workload recorded with one period for every sample (perf record -c)."""
    recording = perf_recordings.get("c")
    data_file = tmp_path_factory.mktemp("report") / "c-fixed-period.data"
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-c", "1000000", "--call-graph", "dwarf",
                    "-o", str(data_file), "--", *recording.command], check=True, capture_output=True)
    return data_file


def test_total_samples_are_perfs_children(fixed_period_recording):
    table, _threads, _stats = report_recording(str(fixed_period_recording), ("dso", "sym"), by_total=True)
    perf = perf_report(fixed_period_recording, children=True)
    named = {(dso, symbol): percent for dso, symbol, percent, _samples in perf if not _ADDRESS.fullmatch(symbol)}
    by_address = sorted((percent for _dso, symbol, percent, _samples in perf if _ADDRESS.fullmatch(symbol)),
                        reverse=True)
    ours = table.rows[:TOP]
    assert ours[0].total > table.samples // 2  # main and its callers: most samples
    for row in ours:
        share = round(100 * row.total / table.samples, 2)
        if row.name is not None and _ADDRESS.fullmatch(row.name):
            assert share in by_address, f"{row.name}: {share}% is no address entry of perf's"
            continue
        key = (os.path.basename(row.module or ""), row.name)
        assert named.get(key) == pytest.approx(share, abs=0.011), f"{key}: perf {named.get(key)}%, fastunwind {share}%"
