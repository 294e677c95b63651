"""Real recordings made at test time, decoded and compared with `perf script` (the oracle): every
sample's pid/tid/time/ip/period (and cpu where sampled), every MMAP/MMAP2/COMM/FORK/EXIT record, and
the delivery order of both together. Recordings: --call-graph dwarf in file mode, -z, pipe mode,
pipe mode with -z, two events with --sample-cpu, and --call-graph fp."""
from __future__ import annotations

import ctypes
import mmap
import subprocess
from pathlib import Path

import pytest

import fastunwind.perf.data as perf_data
from fastunwind import _core
from fastunwind.errors import PerfDataError
from fastunwind.perf.data import Comm, Exit, Fork, Mmap, PerfData, Sample

from tests.support import perf_oracle as oracle

DWARF = [*oracle.SAMPLING, "--call-graph", "dwarf"]
RECORDINGS = {
    "dwarf": (DWARF, False),
    "dwarf_z": ([*DWARF, "-z"], False),
    "pipe": (DWARF, True),
    "pipe_z": ([*DWARF, "-z"], True),
    "two_events": (["-e", "cpu-clock", "-e", "task-clock", "-c", "100000", "--call-graph", "dwarf", "--sample-cpu"],
                   False),
    "fp": ([*oracle.SAMPLING, "--call-graph", "fp"], False),
}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("perf_data")
    oracle.require_perf(tmp)
    return {name: oracle.record(tmp / f"{name}.data", extra, pipe) for name, (extra, pipe) in RECORDINGS.items()}


def events_as_tuples(perf: PerfData) -> list[tuple]:
    out = []
    for e in perf.events():
        if isinstance(e, Sample):
            out.append(("sample", e.pid, e.tid, e.time, e.ip))
        elif isinstance(e, Mmap):
            out.append(("mmap2" if e.is_mmap2 else "mmap", e.pid, e.tid, e.time or 0, e.start, e.length, e.pgoff,
                        e.filename))
        elif isinstance(e, Comm):
            out.append(("comm", e.pid, e.tid, e.time or 0, e.comm, e.exec))
        elif isinstance(e, (Fork, Exit)):
            out.append(("fork" if isinstance(e, Fork) else "exit", e.pid, e.tid, e.ppid, e.ptid, e.time))
    return out


@pytest.mark.parametrize("name", list(RECORDINGS))
def test_samples_match_perf_script(recordings, name):
    path = recordings[name]
    perf = PerfData.open(path)
    with_cpu = name == "two_events"
    expected = oracle.script_samples(path, with_cpu)
    ours = [(s.pid, s.tid, s.time, s.ip, s.period) + ((s.cpu,) if with_cpu else ()) for s in perf.samples()]
    assert perf.sample_count == len(expected) > 50
    assert ours == expected


@pytest.mark.parametrize("name", list(RECORDINGS))
def test_events_match_perf_script(recordings, name):
    path = recordings[name]
    expected = oracle.script_events(path)
    ours = events_as_tuples(PerfData.open(path))
    kinds = {e[0] for e in expected}
    assert {"sample", "mmap", "mmap2", "comm", "fork", "exit"} <= kinds
    assert ours == expected


def test_mmap2_inode_fields(recordings):
    path = recordings["dwarf"]
    ours = [(m.maj, m.min, m.ino, m.ino_generation) for m in PerfData.open(path).events()
            if isinstance(m, Mmap) and m.is_mmap2]
    assert ours == [detail[:4] for detail in oracle.mmap2_details(path)]
    prot = [m.prot for m in PerfData.open(path).events() if isinstance(m, Mmap) and m.is_mmap2]
    assert len(prot) == len(ours) and all(p & 4 or p & 1 for p in prot)  # PROT_EXEC or PROT_READ


@pytest.mark.parametrize("name", ["dwarf", "dwarf_z", "pipe", "pipe_z", "two_events"])
def test_dwarf_samples_carry_user_stacks(recordings, name):
    perf = PerfData.open(recordings[name])
    assert perf.has_user_stacks
    user = [s for s in perf.samples() if not s.is_kernel and s.regs]
    assert len(user) > 10
    for s in user:
        # the dump starts at the user sp, and the sampled ip is the user ip
        assert s.reg("ip") == s.ip and s.reg("sp") is not None
        assert len(s.stack) <= 8192 and len(s.stack) == s.stack_size
        assert set(s.regs) >= {"ip", "sp", "bp", "r15"}
    # The kernel copies the dump in NMI context and stops at the first page that is not resident:
    # a sample now and then carries an empty dump (dyn_size 0), most carry bytes.
    assert sum(1 for s in user if s.stack) >= 0.9 * len(user)


def test_fp_recording_has_no_user_stacks(recordings):
    perf = PerfData.open(recordings["fp"])
    assert not perf.has_user_stacks
    assert any(len(s.callchain) > 2 for s in perf.samples())
    assert all(s.stack == b"" and s.regs == {} for s in perf.samples())


def test_two_events_names_and_attribution(recordings):
    perf = PerfData.open(recordings["two_events"])
    assert [a.name for a in perf.attrs] == ["cpu-clock", "task-clock"]
    assert {s.attr_index for s in perf.samples()} == {0, 1}
    assert all(s.cpu >= 0 for s in perf.samples())


def test_compressed_equals_plain_shape(recordings):
    for name in ("dwarf_z", "pipe_z"):
        perf = PerfData.open(recordings[name])
        assert perf.native.decompressed_size > 0 and perf.stats()["compressed_records"] > 0


def test_decompressed_records_sit_in_memory_advised_for_huge_pages(recordings):
    # read from bytes, not PerfData.open: the only mapping of this size advised for huge pages
    # is then the decompressed buffer, trimmed to the bytes it holds
    perf = PerfData.read(recordings["dwarf_z"].read_bytes())
    pages = -(-perf.native.decompressed_size // mmap.PAGESIZE) * mmap.PAGESIZE
    assert any(end - start == pages and "hg" in flags for start, end, flags in _mappings())
    assert perf.sample_count == PerfData.open(recordings["dwarf_z"]).sample_count


def test_header_features(recordings):
    perf = PerfData.open(recordings["dwarf"])
    assert perf.cmdline[:2] == ["/usr/bin/perf", "record"] or perf.cmdline[1] == "record"
    assert "dwarf" in perf.cmdline
    assert perf.attrs[0].name == "cpu-clock"
    # build-ids: perf record writes them for the DSOs that got samples
    assert perf.build_ids and all(len(b.build_id) in (32, 40) for b in perf.build_ids)
    piped = PerfData.open(recordings["pipe"])
    assert piped.pipe_mode and "dwarf" in piped.cmdline and piped.attrs[0].name == "cpu-clock"


def test_read_from_bytes_and_file_object(recordings):
    path = recordings["pipe"]
    with open(path, "rb") as f:
        from_file = PerfData.read(f)
    from_bytes = PerfData.read(path.read_bytes())
    assert from_file.sample_count == from_bytes.sample_count == PerfData.open(path).sample_count


def _mappings() -> list[tuple[int, int, list[str]]]:
    """This process's mappings as (start, end, VmFlags), from /proc/self/smaps."""
    mappings = []
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(part, 16) for part in head.split("-"))
            elif head == "VmFlags:":
                mappings.append((start, end, line.split()[1:]))
    return mappings


def _vm_flags_at(address: int) -> list[str]:
    """The VmFlags of this process's mapping that holds `address`."""
    for start, end, flags in _mappings():
        if start <= address < end:
            return flags
    raise AssertionError(f"no mapping holds {address:#x}")


def test_open_reads_into_huge_pages_and_maps_beyond_the_bound(recordings, monkeypatch):
    path = recordings["dwarf"]
    with open(path, "rb") as f:
        loaded = perf_data._load_recording(f, path.stat().st_size)
    assert isinstance(loaded, memoryview) and loaded.tobytes() == path.read_bytes()
    address = ctypes.addressof(ctypes.c_char.from_buffer(loaded))
    assert "hg" in _vm_flags_at(address)  # MADV_HUGEPAGE
    loaded.release()
    read = events_as_tuples(PerfData.open(path))
    monkeypatch.setattr(perf_data, "HUGE_PAGE_READ_MAX_BYTES", 0)
    with open(path, "rb") as f:
        assert isinstance(perf_data._load_recording(f, path.stat().st_size), _core.MappedFile)
    assert events_as_tuples(PerfData.open(path)) == read


def test_read_reads_a_stream_into_huge_pages_as_it_grows(recordings, monkeypatch):
    # pages of 4 KiB standing for huge pages, so that this small recording outgrows its first
    # memory several times over
    path = recordings["pipe"]
    monkeypatch.setattr(perf_data, "HUGE_PAGE_BYTES", mmap.PAGESIZE)
    monkeypatch.setattr(perf_data, "STREAM_INITIAL_BYTES", mmap.PAGESIZE)
    assert path.stat().st_size > 8 * mmap.PAGESIZE
    with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as cat:
        loaded = perf_data._load_recording(cat.stdout)
    assert isinstance(loaded, memoryview) and loaded.tobytes() == path.read_bytes()
    assert "hg" in _vm_flags_at(ctypes.addressof(ctypes.c_char.from_buffer(loaded)))
    loaded.release()
    with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as cat:
        assert events_as_tuples(PerfData.read(cat.stdout)) == events_as_tuples(PerfData.open(path))
    monkeypatch.setattr(perf_data, "STREAM_MAX_BYTES", 2 * mmap.PAGESIZE)  # the bound on a stream
    with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as cat, \
            pytest.raises(PerfDataError, match="write it to a file"):
        PerfData.read(cat.stdout)
