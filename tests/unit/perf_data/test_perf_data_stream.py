"""The reader as a stream (PerfData.open_stream, perf_data.h "Streaming"): windows cut at
FINISHED_ROUND by perf's ordered-events rule give, concatenated, the whole-file order; a pipe and a
file stream the same; memory stays bounded on a recording many windows long."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from fastunwind.errors import PerfDataError
from fastunwind.perf.data import PerfData

from tests.support import perf_builder as b

DWARF_ATTR = {"sample_type": b.IP | b.TID | b.TIME | b.CALLCHAIN | b.REGS_USER | b.STACK_USER,
              "sample_regs_user": 0xff0fff, "sample_stack_user": 8192}


def windows(path, window_bytes=1, decode_ahead=False):
    """[(kinds, sample ips, sample times)] of every window of the stream of `path`."""
    perf = PerfData.open_stream(path, window_bytes=window_bytes, decode_ahead=decode_ahead)
    out = []
    while (window := perf.native.next_window()) is not None:
        kinds, _indices = window.events()
        out.append((bytes(kinds), list(memoryview(window.sample_column("ip")).cast("Q")),
                    list(memoryview(window.sample_column("time")).cast("Q"))))
    return perf, out


def flatten(ws):
    return (b"".join(k for k, _, _ in ws), [i for _, ips, _ in ws for i in ips], [t for _, _, ts in ws for t in ts])


def whole(path):
    perf = PerfData.open(path)
    kinds, _ = perf.native.events()
    return bytes(kinds), list(perf.sample_column("ip")), list(perf.sample_column("time"))


def rounds_recording(attr, rounds, per_round, jitter):
    """Samples in rounds, each round's times interleaved out of order by up to `jitter` (as CPUs'
    buffers are drained in turn), no record older than the round before last's newest."""
    records = []
    t = 1000
    for r in range(rounds):
        times = [t + (i * 7919) % jitter + i for i in range(per_round)]
        records += [b.sample_record(attr, ip=0x1000 + r * per_round + i, pid=1, tid=1, time=tt,
                                    regs=list(range(20)), stack=bytes([i % 256]) * 64) for i, tt in enumerate(times)]
        records.append(b.record(b.FINISHED_ROUND, b""))
        t += per_round
    return b.comm_record(attr, 1, 1, "w", time=1) + b"".join(records)


@pytest.mark.parametrize("mode", ["file", "pipe"])
def test_windows_concatenated_are_the_whole_file_order(tmp_path, mode):
    attr = b.Attr(**DWARF_ATTR)
    records = rounds_recording(attr, 12, 40, 30)
    data = b.file_mode([attr], records) if mode == "file" else b.pipe_mode([attr], records)
    path = tmp_path / "r.data"
    path.write_bytes(data)
    for decode_ahead in (False, True):
        _perf, ws = windows(path, window_bytes=1, decode_ahead=decode_ahead)
        assert len(ws) > 5  # one window per round, but for the rule's lag
        assert flatten(ws) == whole(path)
        _perf, ws = windows(path, window_bytes=0)  # default: the whole recording fits one window
        assert flatten(ws) == whole(path)


def test_a_window_takes_what_is_older_than_the_round_before_last():
    """perf's OE_FLUSH__ROUND: at the k-th FINISHED_ROUND the records up to the newest time seen
    at the (k-1)-th go; the first round delivers nothing."""
    attr = b.Attr(sample_type=b.IP | b.TID | b.TIME)
    records = (b.sample_record(attr, ip=1, time=30) + b.sample_record(attr, ip=2, time=10)
               + b.record(b.FINISHED_ROUND, b"")
               + b.sample_record(attr, ip=3, time=20) + b.sample_record(attr, ip=4, time=40)
               + b.record(b.FINISHED_ROUND, b"")
               + b.sample_record(attr, ip=5, time=35) + b.record(b.FINISHED_ROUND, b""))
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".data") as f:
        f.write(b.file_mode([attr], records))
        f.flush()
        _perf, ws = windows(f.name)
    assert [ips for _, ips, _ in ws] == [[2, 3, 1], [5, 4]]


def test_a_record_older_than_a_delivered_window_is_counted_and_delivered_late(tmp_path):
    attr = b.Attr(sample_type=b.IP | b.TID | b.TIME)
    records = (b.sample_record(attr, ip=1, time=10) + b.record(b.FINISHED_ROUND, b"")
               + b.sample_record(attr, ip=2, time=20) + b.record(b.FINISHED_ROUND, b"")
               + b.sample_record(attr, ip=3, time=5) + b.record(b.FINISHED_ROUND, b""))
    path = tmp_path / "late.data"
    path.write_bytes(b.file_mode([attr], records))
    perf, ws = windows(path)
    assert [i for _, ips, _ in ws for i in ips] == [1, 3, 2]  # perf script's order too
    assert perf.stats()["out_of_order"] == 1


def test_a_pipe_streams_as_the_file(tmp_path):
    attr = b.Attr(**DWARF_ATTR)
    data = b.pipe_mode([attr], rounds_recording(attr, 8, 30, 20))
    path = tmp_path / "p.data"
    path.write_bytes(data)
    read, write = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write, data), os.close(write)))
    writer.start()
    with os.fdopen(read, "rb") as stream:
        perf, ws = windows(stream, decode_ahead=True)
        assert flatten(ws) == whole(path)
        assert perf.attrs and perf.attrs[0].has_user_stack  # a pipe's HEADER_ATTR decoded at open
    writer.join()


@pytest.mark.parametrize("cut_bytes", [100, 3])
def test_a_cut_stream_gives_the_records_before_the_cut(tmp_path, cut_bytes):
    """A stream that ends inside a record (perf record killed; a copy cut short) gives every record
    before it, in the whole file's order of those records, and says where the last one was cut."""
    attr = b.Attr(**DWARF_ATTR)
    data = b.pipe_mode([attr], rounds_recording(attr, 4, 10, 5))
    path = tmp_path / "cut.data"
    path.write_bytes(data[: len(data) - cut_bytes])
    perf, ws = windows(path)
    assert flatten(ws) == whole(path)
    assert perf.cut is not None and perf.cut.dropped_record_offset is not None
    assert "the stream ends inside a record" in perf.cut.note


def test_a_stream_cut_before_any_sample_is_an_error(tmp_path):
    attr = b.Attr(**DWARF_ATTR)
    data = b.pipe_mode([attr], rounds_recording(attr, 1, 1, 1))
    path = tmp_path / "cut.data"
    path.write_bytes(data[: len(data) - 20])
    with pytest.raises(PerfDataError, match="ends inside a record .* before any complete sample"):
        windows(path)


def test_compressed_records_stream(tmp_path):
    attr = b.Attr(**DWARF_ATTR)
    plain = rounds_recording(attr, 6, 30, 10)
    data = b.file_mode([attr], b.compress_records(plain, chunk=3000), {b.FEAT_COMPRESSED: b.compressed_feature()})
    path = tmp_path / "z.data"
    path.write_bytes(data)
    _perf, ws = windows(path, window_bytes=1, decode_ahead=True)
    assert flatten(ws) == whole(path)


MEMORY_PROBE = textwrap.dedent("""
    import sys
    from fastunwind.perf.data import PerfData

    def status(field):  # KiB
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

    perf = PerfData.open_stream(sys.argv[1], window_bytes=int(sys.argv[2]), decode_ahead=True)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) restarts from the resident size now
    before = status("VmRSS")
    total = 0
    while (window := perf.native.next_window()) is not None:
        for i in range(window.sample_count):  # every stack dump is read
            total += len(window.sample_stack(i))
    print(status("VmHWM") - before, total)
""")


@pytest.mark.parametrize("through", ["file", "pipe"])
def test_memory_does_not_grow_with_the_recording(tmp_path, through):
    """A 48 MiB recording streamed in 1 MiB windows: the peak RSS of a subprocess exceeds its
    resident size before the first window by a few windows, not by the recording (read whole, it
    grows by 48 MiB). The peak is VmHWM reset through /proc/self/clear_refs: ru_maxrss would
    include the pytest process the subprocess was forked from (exec keeps the old mm's peak)."""
    attr = b.Attr(**DWARF_ATTR)
    sample = b.sample_record(attr, ip=0x1000, pid=1, tid=1, time=0, regs=list(range(20)), stack=bytes(8000))
    per_round = 64
    rounds = (48 << 20) // (len(sample) * per_round)
    chunks = [b.comm_record(attr, 1, 1, "w", time=1)]
    for r in range(rounds):
        chunks += [b.sample_record(attr, ip=0x1000 + i, pid=1, tid=1, time=10 + r * per_round + i,
                                   regs=list(range(20)), stack=bytes(8000)) for i in range(per_round)]
        chunks.append(b.record(b.FINISHED_ROUND, b""))
    data = b.pipe_mode([attr], b"".join(chunks))
    path = tmp_path / "big.data"
    path.write_bytes(data)
    del chunks
    command = [sys.executable, "-c", MEMORY_PROBE, str(path) if through == "file" else "/dev/stdin", str(1 << 20)]
    if through == "file":
        result = subprocess.run(command, capture_output=True, text=True, check=True)
    else:  # a real pipe: cat writes the recording into it
        cat = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
        result = subprocess.run(command, capture_output=True, text=True, check=True, stdin=cat.stdout)
        cat.stdout.close()
        cat.wait()
    grown_kib, stack_bytes = map(int, result.stdout.split())
    assert stack_bytes == rounds * per_round * 8000
    assert grown_kib < 16 * 1024, f"peak RSS grew by {grown_kib} KiB streaming {len(data) >> 20} MiB"


def test_threads_may_ask_a_stream_while_its_next_window_is_cut_ahead(tmp_path):
    """Each call waits for the window being cut ahead without the GIL: two threads waiting at once
    once joined the cutting thread twice and hung."""
    attr = b.Attr(**DWARF_ATTR)
    path = tmp_path / "r.data"
    path.write_bytes(b.file_mode([attr], rounds_recording(attr, 40, 40, 30)))
    perf = PerfData.open_stream(path, window_bytes=1, decode_ahead=True)
    asked = []

    def ask() -> None:
        for _ in range(50):
            asked.append(len(perf.native.build_ids()))

    windows = 0
    while perf.native.next_window() is not None:
        windows += 1
        threads = [threading.Thread(target=ask, daemon=True) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
            assert not thread.is_alive(), "a thread asking the stream hung"
    assert windows > 5 and len(asked) == 150 * windows
