"""The C pipeline behind `fastunwind perf-script` (native/perf_replay.c, native/perf_script.c)
against the Python implementation it replaced, on real recordings: the replay's address space and
thread name of every sample, the perf script text and the folded stacks, rendered from the same
unwound samples through the Python API."""

from __future__ import annotations

import io
from collections import Counter

import pytest

from fastunwind import _core
from fastunwind.perf.data import Comm, Fork, Mmap, PerfData, Sample
from fastunwind.perf_script import render_folded, render_perf_script, unwind_recording
from fastunwind.perf.replay import replay

RECORDINGS = ["c", "python", "hackbench-processes"]


def python_replay(perf: PerfData) -> tuple[list[tuple], list[str]]:
    """Per sample, its process's executable mappings (start, end, pgoff, path) and its thread's
    name: the rules of perf_session.replay as its Python version applied them."""
    mappings: dict[int, list[tuple]] = {}
    process_comm: dict[int, str] = {}
    comms: dict[int, str] = {}
    spaces: list[tuple] = [()] * perf.sample_count
    names = [""] * perf.sample_count
    for event in perf.events():
        if isinstance(event, Sample):
            spaces[event.index] = tuple(mappings.setdefault(event.pid, []))
            process_comm.setdefault(event.pid, "")
            names[event.index] = comms.get(event.tid) or process_comm[event.pid]
        elif isinstance(event, Mmap):
            if (event.is_mmap2 and not event.prot & 4) or event.length <= 0:
                continue
            end = event.start + event.length
            kept = [m for m in mappings.get(event.pid, []) if m[1] <= event.start or m[0] >= end]
            mappings[event.pid] = sorted(kept + [(event.start, end, event.pgoff, event.filename)])
            process_comm.setdefault(event.pid, "")
        elif isinstance(event, Comm):
            comms[event.tid] = event.comm
            process_comm.setdefault(event.pid, "")
            if event.pid == event.tid:
                process_comm[event.pid] = event.comm
            if event.exec:
                mappings[event.pid] = []
        elif isinstance(event, Fork) and event.pid != event.ppid:
            if event.ppid in process_comm:
                mappings[event.pid] = list(mappings.get(event.ppid, []))
                process_comm[event.pid] = process_comm[event.ppid]
            process_comm.setdefault(event.pid, "")
            if event.ppid in comms and event.tid not in comms:
                comms[event.tid] = comms[event.ppid]
    return spaces, names


@pytest.mark.parametrize("name", RECORDINGS)
def test_replay_matches_the_python_rules(name, perf_recordings):
    perf = PerfData.open(str(perf_recordings.get(name).data_file))
    replayed = replay(perf)
    spaces, names = python_replay(perf)
    ours = [tuple((m.start, m.end, m.pgoff, m.path) for m in replayed.session.spaces[i].mappings)
            for i in replayed.space_ids]
    assert ours == spaces
    assert replayed.comms == names
    assert len(replayed.samples) == perf.sample_count and replayed.samples[-1].index == perf.sample_count - 1


def python_text(samples, event: str) -> str:
    """perf script's text of UnwoundSamples of one event, formatted as the Python renderer did."""
    parts = []
    for s in samples:
        seconds, nanoseconds = divmod(s.time, 1_000_000_000)
        parts.append(f"{s.comm} {s.tid:5d} {seconds:5d}.{nanoseconds // 1000:06d}: {event}: \n")
        for f in (*s.kernel, *s.user):
            name = f"{f.symbol}+0x{f.offset:x}" if f.symbol is not None else "[unknown]"
            parts.append(f"\t{f.address:16x} {name} ({f.dso})\n")
        parts.append("\n")
    return "".join(parts)


def python_folded(samples) -> str:
    counts: Counter[str] = Counter()
    for s in samples:
        names = [f.symbol or f"[unknown {f.dso.rsplit('/', 1)[-1]}]" for f in (*s.kernel, *s.user)]
        root = [] if s.outcome == "end" or not s.user else [f"[{s.outcome}]"]
        counts[";".join([s.comm, *root, *reversed(names)])] += 1
    return "".join(f"{stack} {count}\n" for stack, count in counts.most_common())


@pytest.mark.parametrize("name", RECORDINGS)
def test_rendering_matches_the_python_formatting(name, perf_recordings):
    unwound, stats = unwind_recording(str(perf_recordings.get(name).data_file))
    (attr,) = PerfData.open(str(perf_recordings.get(name).data_file)).attrs
    assert attr.name == "cpu-clock"
    samples = list(unwound)
    assert len(samples) == stats.samples > 100
    assert sum(len(s.user) for s in samples) == stats.frames
    assert Counter(s.outcome for s in samples) == stats.outcomes
    text, binary = io.StringIO(), io.BytesIO()
    render_perf_script(unwound, text)
    render_perf_script(unwound, binary)
    assert text.getvalue() == binary.getvalue().decode() == python_text(samples, attr.name)
    folded = io.StringIO()
    render_folded(unwound, folded)
    assert folded.getvalue() == python_folded(samples)


def test_bad_arguments_are_refused(perf_recordings):
    perf = PerfData.open(str(perf_recordings.get("c").data_file))
    replayed = replay(perf)
    n = perf.sample_count
    space_ids = replayed.space_ids.tobytes()
    unwound = _core.unwind_samples(perf.native, space_ids, [s.to_core() for s in replayed.session.spaces], 127)
    mappings = [(m.start, m.pgoff, m.bias, m.path, None) for m in replayed.session.mappings]
    args = [perf.native, space_ids, replayed.comm_ids.tobytes(), replayed.comm_names, unwound,
            replayed.session.space_mappings, mappings, lambda addresses: None, ("?",) * 256]
    assert _core.symbolize_samples(*args).sample_count == n
    for index, bad, error in [(1, space_ids[:-4], ValueError),
                              (4, (unwound[0][:-1], *unwound[1:]), ValueError),
                              (5, [b"\xff\xff\x00\x00"], ValueError),
                              (3, [], ValueError),
                              (8, ("?",) * 3, TypeError)]:
        changed = list(args)
        changed[index] = bad
        with pytest.raises(error):
            _core.symbolize_samples(*changed)
    with pytest.raises(TypeError):
        _core.replay_recording(b"not a recording")
