"""`record --bpf -a`: every process on every CPU, loaded as the kernel reports it sampled (the program
wakes the recorder at a process's first sample). What it measures, on two real programs started
after the recording began (clang-14 on the compiler workload: big tables, libLLVM; hackbench -P:
children forked without exec, walked with their parent's mappings), beside whatever else the
machine runs:

- the accounting: each user sample is walked with its process's mappings or counted `not_loaded`
  (sampled before the recorder loaded the process: one frame, the sampled PC, never complete),
  and the summary's share of complete stacks over the walked ones is that count;
- the loads keep up: each of the programs' processes sampled 50 times or more was walked;
- the walks: at least 95% of the programs' walked user stacks are complete, of those that did not
  reach a table evicted while in use: on a loaded machine the tables the running processes map can
  outgrow the table map (sized from the tables in scope at the start, with half as much again: the
  programs started later, clang-14's 23 MiB, cc1plus's 4.5, come on top), and a frame in a module
  evicted since its process was loaded ends `table_evicted` until the next rescan reloads it. Those
  are counted apart, and only where the recorder reports it evicted modules in use (the modules no
  loaded process maps go first, so a quiet machine evicts none).

Skipped as test_record_bpf.py is."""

from __future__ import annotations

from collections import Counter

import pytest

from scripts import record_workloads
from scripts.bpf_evictions import NAMES, WORKLOADS, record_all_while
from tests.integration.bpf.test_record_bpf import PROBLEM, settings  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

def test_every_process_is_walked_once_loaded_and_its_stacks_complete(settings: record_workloads.Settings) -> None:
    workloads = [record_workloads.WORKLOADS[name] for name in WORKLOADS]
    missing = [name for name, w in zip(WORKLOADS, workloads) if record_workloads.missing_tools(w)]
    if missing:
        pytest.skip(f"{missing} need {[record_workloads.missing_tools(w) for w in workloads]}")
    commands = [w.command(settings) for w in workloads]
    # the first recording builds the programs' compact tables (the test session's cache starts
    # empty): a process whose tables are being built is not loaded meanwhile
    record_all_while(commands)
    profile = record_all_while(commands)
    stats = profile.statistics()
    mine = {s: n for s, n in profile.stacks.items() if profile.comm(s.pid, s.space_pid) in NAMES and s.user}
    assert sum(mine.values()) >= 100, stats

    # the accounting
    assert all(len(s.user) == 1 for s in profile.stacks if s.outcome == "not_loaded")
    user, complete = profile.user_samples()
    assert stats["walked_user_samples"] == user - stats["not_loaded_samples"]
    assert stats["not_loaded_samples"] == sum(n for s, n in profile.stacks.items() if s.outcome == "not_loaded")

    # the loads keep up: a process sampled 50 times was walked
    by_process: Counter[int] = Counter()
    walked: set[int] = set()
    for stack, n in mine.items():
        by_process[stack.pid] += n
        if stack.outcome != "not_loaded":
            walked.add(stack.pid)
    assert all(pid in walked for pid, n in by_process.items() if n >= 50), (by_process, walked)

    # the walks
    outcomes: Counter[str] = Counter()
    for stack, n in mine.items():
        outcomes[stack.outcome] += n
    assert stats["modules_evicted_in_use"] > 0 or not outcomes["table_evicted"], (outcomes, stats)
    mine_walked = sum(outcomes.values()) - outcomes["not_loaded"] - outcomes["table_evicted"]
    assert outcomes["end"] >= 0.95 * mine_walked, (outcomes, stats["modules_evicted_in_use"])
