"""The BPF table map's growth (bpf_session.c grow_slots, bpf.open_table_map): where a module would
evict another, the map grows by segments of BPF_SEGMENT_SLOTS (maps of their own in an array of maps)
up to its limit, then evicts as before; the walk reads a module whose slots lie in the segments (or
across the map's end) as any other. A Python that imports an extension module after the recording
started, with the map nearly full at the start, is unwound through it; one that loads libLLVM-14 and
other big libraries (ctypes) after the start of `record --bpf -- CMD` grows the default map, none
evicted, and the summary says what it grew to. Skipped as test_record_bpf.py is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fastunwind import _core, bpf
from fastunwind.address_space import ImageCache
from fastunwind.bpf import BpfRecorder, TableMap, open_table_map, table_slots
from fastunwind.elf.dynamic import with_dependencies
from tests.integration.bpf.test_record_bpf import FREQUENCY, PROBLEM
from tests.integration.bpf.test_table_eviction import IDENTITY, slots, tables
from tests.integration.bpf.test_table_map_size import LIBRARIES
from tests.support.paths import SRC

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

SEGMENT = _core.BPF_SEGMENT_SLOTS
#: waits for a line, sleeps past the recording's first rescan, then imports decimal (_decimal, an
#: extension module: mapped now) and computes square roots in it for 2 s
LATE_IMPORT = """import sys, time
print("ready", flush=True)
sys.stdin.readline()
time.sleep(0.7)
import decimal
decimal.getcontext().prec = 3000
end = time.monotonic() + 2
while time.monotonic() < end:
    decimal.Decimal(2).sqrt()
"""


def test_a_module_that_does_not_fit_grows_the_map_evicting_none() -> None:
    libc, libstdcxx, libm = tables()
    start = slots(libc) + 16
    session = _core.BpfSession(start, slot_limit=start + 4 * SEGMENT)
    try:
        first = session.load_module(libc)
        assert session.set_process(1, IDENTITY, [(0x10000, 0x20000, 0, *first)])
        second = session.load_module(libstdcxx)  # past the map's end: into a segment, libc kept
        grown = session.slot_capacity
        assert grown == start + SEGMENT * -(-slots(libstdcxx) // SEGMENT)
        third = session.load_module(libm)
        assert all(session.module_loaded(*m) for m in (first, second, third))
        assert session.evicted_in_use == 0
        assert session.slots_used == slots(libc) + slots(libstdcxx) + slots(libm)
        assert session.table_bytes >= session.slot_capacity * _core.BPF_SLOT_BYTES
    finally:
        session.close()


def test_past_its_limit_the_map_evicts_as_without_growth() -> None:
    libc, libstdcxx, _ = tables()
    start = slots(libc) + 16
    # a segment short of room for one: no growth, libc (mapped by process 1) evicted
    session = _core.BpfSession(start, slot_limit=start + SEGMENT - 1)
    try:
        first = session.load_module(libc)
        assert session.set_process(1, IDENTITY, [(0x10000, 0x20000, 0, *first)])
        session.load_module(libstdcxx)
        assert session.slot_capacity == start and not session.module_loaded(*first)
        assert session.evicted_in_use == 1
    finally:
        session.close()
    # asked for without a limit: never grows
    session = _core.BpfSession(start)
    try:
        session.load_module(libc)
        session.load_module(libstdcxx)
        assert session.slot_capacity == start
    finally:
        session.close()


@pytest.mark.parametrize("chosen_by, grows", [("tables in scope", True), ("default", True), ("--table-mib", False)])
def test_a_map_grows_unless_its_size_was_asked_for(chosen_by: str, grows: bool) -> None:
    libc, libstdcxx, _ = tables()
    start = slots(libc) + 16
    session, size = open_table_map(TableMap(start, chosen_by, 0), timing=False)
    try:
        first = session.load_module(libc)
        session.load_module(libstdcxx)
        assert size.slots == start and (session.slot_capacity > start) == grows
        assert session.module_loaded(*first) == grows
    finally:
        session.close()


def test_a_module_imported_after_the_start_is_unwound_through(monkeypatch: pytest.MonkeyPatch) -> None:
    child = subprocess.Popen([sys.executable, "-c", LATE_IMPORT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "ready\n"
        # the map of the tables in scope and 16 slots: nearly full at the start
        monkeypatch.setattr(bpf, "table_map_size", lambda in_scope: TableMap(in_scope + 16, "tables in scope", in_scope))
        recorder = BpfRecorder(frequency=FREQUENCY, pids=[child.pid])
        child.stdin.write("\n")
        child.stdin.flush()
        profile = recorder.run(lambda: child.poll() is not None)
    finally:
        child.kill()
        child.wait()
    use = profile.table_use
    assert use.slots_end > use.table_map.slots and use.slots_peak > use.table_map.slots, use
    stats = profile.statistics()
    assert stats["modules_evicted_in_use"] == 0 and stats["table_map_end_slot_bytes"] > stats["table_map_slot_bytes"]
    # the samples whose leaf is in _decimal (its user leaf's line of perf script's text names the file)
    in_late = {s: n for s, n in profile.stacks.items() if s.pid == child.pid and s.user and
               "_decimal" in profile.perf_block(s).splitlines()[len(s.kernel)]}
    samples = sum(in_late.values())
    complete = sum(n for s, n in in_late.items() if s.outcome == "end")
    # its frames unwound to the outermost (python's main), not ended at a table evicted or missing
    assert samples >= 50 and complete >= 0.9 * samples, by_outcome(in_late)


def test_libraries_loaded_after_the_start_grow_the_map_and_the_summary_says_so() -> None:
    libraries = [path for path in LIBRARIES if os.path.exists(path)]
    images = ImageCache()
    # their tables built now (into the cache, as the recording finds them) and counted
    later = table_slots(filter(None, (images.get(p) for p in with_dependencies(libraries)[0])), "missing")
    if later <= _core.BPF_DEFAULT_SLOTS:
        pytest.skip(f"the libraries installed here take {later} slots, within the default map: {LIBRARIES}")
    # a plugin host: nothing big mapped at the start (the default map), then libLLVM-14 and the others
    host = "import ctypes, sys, time\ntime.sleep(1)\nheld = [ctypes.CDLL(p) for p in sys.argv[1:]]\ntime.sleep(4)\n"
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "--json", "-F", str(FREQUENCY),
                             "--", sys.executable, "-c", host, *libraries], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=300)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["table_map_chosen_by"] == "default" and stats["table_map_slot_bytes"] == 32 << 20
    assert stats["table_map_end_slot_bytes"] >= stats["table_slots_peak_bytes"] > 32 << 20, stats
    assert stats["modules_evicted_in_use"] == 0
    grown = stats["table_map_end_slot_bytes"] / (1 << 20)
    assert "table map 32.0 MiB (the default: " in result.stderr and f", grown to {grown:.1f} MiB by modules mapped " \
        "since, at most " in result.stderr, result.stderr


def by_outcome(stacks: dict[bpf.BpfStack, int]) -> dict[str, int]:
    """Samples by outcome, for a failure's message."""
    out: dict[str, int] = {}
    for stack, n in stacks.items():
        out[stack.outcome] = out.get(stack.outcome, 0) + n
    return out
