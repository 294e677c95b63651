"""The compact table backend on real recordings: walking every sample with compact tables first
("auto", the default that perf-script and the agreement tests with perf use) gives exactly the
frames and outcomes of the DWARF interpreter alone, in a first batch and in later ones whose walk
caches are warm."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from fastunwind import _core
from fastunwind.perf.bench import time_backend
from fastunwind.perf.data import PerfData
from fastunwind.perf.replay import replay

WORKLOADS = ["c", "python", "hackbench-threads", "compiler"]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_compact_backend_walks_as_the_dwarf_backend(workload, perf_recordings):
    perf = PerfData.open(str(perf_recordings.get(workload).data_file))
    replayed = replay(perf)
    spaces = replayed.session.spaces
    space_ids = replayed.space_ids.tobytes()
    by_backend = {backend: _core.unwind_samples(perf.native, space_ids, [s.to_core(backend) for s in spaces], 127)
                  for backend in ("dwarf", "auto", "table", "table-only")}
    dwarf, auto, compact_only = by_backend["dwarf"], by_backend["auto"], by_backend["table-only"]
    assert auto[:6] == dwarf[:6], "frames, modules, kinds or outcomes differ between the compact and DWARF backends"
    assert by_backend["table"][:6] == dwarf[:6], "the table backend (compact, then DWARF) differs from DWARF alone"
    images = {m.image for s in spaces for m in s.mappings if m.image is not None}
    assert images and all(image.compact is not None for image in images), \
        [image.compact_error for image in images if image.compact is None]
    # the compact tables alone already give most frames: the fast path is what ran
    assert len(compact_only[2]) >= 0.5 * len(dwarf[2])
    slow = sum(image.compact.slow_row_count for image in images)
    rows = sum(image.compact.row_count for image in images)
    print(f"{workload}: {len(dwarf[2]) // 8} frames identical; {len(images)} modules, {rows} compact rows, "
          f"{slow} on the slow path")


@pytest.mark.parametrize("workload", ["c", "hackbench-threads"])
def test_walk_caches_kept_across_batches_change_nothing(workload, perf_recordings):
    """Each core AddressSpace keeps its walk cache across unwind_samples calls and lends it to one
    batch at a time (a batch on another thread meanwhile walks with a cache of its own): a later
    batch, which finds every PC settled, and concurrent batches give the first batch's frames."""
    perf = PerfData.open(str(perf_recordings.get(workload).data_file))
    replayed = replay(perf)
    space_ids = replayed.space_ids.tobytes()
    cores = [s.to_core("table") for s in replayed.session.spaces]

    def batch(_=None):
        return _core.unwind_samples(perf.native, space_ids, cores, 127)[:6]

    first = batch()
    assert batch() == first
    with ThreadPoolExecutor(4) as pool:
        assert all(result == first for result in pool.map(batch, range(8)))


def test_batches_of_other_recordings_in_turn_change_nothing(perf_recordings):
    """unwind_samples keeps the last batch's buffers for the next batch (perf_walk.c spare_buffers):
    batches of a big and a small recording in turn, and concurrent ones, give each its own frames,
    nothing of the batch whose buffers they reuse."""
    batches = {}
    for workload in ("c", "hackbench-threads"):
        perf = PerfData.open(str(perf_recordings.get(workload).data_file))
        replayed = replay(perf)
        cores = [s.to_core("auto") for s in replayed.session.spaces]
        batches[workload] = (perf, replayed.space_ids.tobytes(), cores)

    def batch(workload):
        perf, space_ids, cores = batches[workload]
        return _core.unwind_samples(perf.native, space_ids, cores, 127)[:6]

    first = {workload: batch(workload) for workload in batches}
    # which is bigger depends on the machine's load (hackbench's samples follow the CPU it gets)
    big, small = sorted(first, key=lambda workload: len(first[workload][2]), reverse=True)
    assert len(first[big][2]) > len(first[small][2])  # the big batch's buffers go to the small one
    for workload in (small, big, big, small, big):
        assert batch(workload) == first[workload]
    order = [big, small] * 6
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(batch, order)) == [first[workload] for workload in order]


def test_shapes_are_not_followed_where_a_return_address_differs(perf_recordings, tmp_path):
    """Shapes (walk.h): a walk from an IP walked before takes the earlier walk's frames only where
    the stack holds the same return addresses at the same places. In a copy of hackbench's
    recording (a few stacks, sampled over and over), the first caller's return address of every
    other repeat of a stack is moved by one byte: the table backend, whose walks follow shapes,
    gives exactly what the DWARF interpreter (no shapes) gives, and the changed samples' frames
    show the changed return address, not the shape's."""
    original = perf_recordings.get("hackbench-threads").data_file
    perf = PerfData.open(str(original))
    replayed = replay(perf)
    walked = time_backend(perf, replayed, "table", 1)
    outcomes, starts, ips = walked.outcome_codes, walked.starts, walked.ips
    data = bytearray(original.read_bytes())
    seen, changed = set(), {}
    for index, sample in enumerate(replayed.samples):
        frames = ips[starts[index]:starts[index + 1]]
        if outcomes[index] != _core.WALK_OUTCOMES.index("end") or len(frames) < 3 or frames[0] not in seen:
            seen.add(frames[0] if frames else None)
            continue
        if index % 2:
            continue  # left as it was: its walk follows the shape
        stack = bytes(sample.stack)
        at = stack.find(frames[1].to_bytes(8, "little"))
        where = data.find(stack[:64], sample.file_offset)  # the dump's place in the file
        if at < 0 or where < 0:
            continue
        data[where + at:where + at + 8] = (frames[1] + 1).to_bytes(8, "little")
        changed[index] = frames[1] + 1
    assert len(changed) >= 50, f"only {len(changed)} repeated stacks to change"
    copy = tmp_path / "changed.data"
    copy.write_bytes(bytes(data))
    perf_changed = PerfData.open(str(copy))
    replayed_changed = replay(perf_changed)
    table = time_backend(perf_changed, replayed_changed, "table", 1)
    dwarf = time_backend(perf_changed, replayed_changed, "dwarf", 1)
    assert (table.outcome_codes, table.starts, table.ips) == (dwarf.outcome_codes, dwarf.starts, dwarf.ips)
    starts_changed, ips_changed = table.starts, table.ips
    assert all(ips_changed[starts_changed[index] + 1] == ra for index, ra in changed.items())
