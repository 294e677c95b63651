"""Hand-assembled recordings cut short: perf record killed before it rewrote the header (data size
0), copies truncated in the data section or in the feature sections, pipe streams that end inside a
record. The reader keeps every complete record before the cut, drops the incomplete one without
reading past it, treats feature sections outside the file as absent, and says so in
PerfData.cut; a cut before the first complete sample, and the hostile variants, stay errors."""
from __future__ import annotations

import struct

import pytest

from fastunwind.errors import PerfDataError
from fastunwind.perf.data import PerfData

from tests.support import perf_builder as b

DATA_OFFSET_FIELD, DATA_SIZE_FIELD = 0x28, 0x30  # struct perf_file_header: data.offset, data.size


def recording(samples: int = 3):
    """A file-mode recording of `samples` IP samples with a CMDLINE and an EVENT_DESC feature, and
    the file offsets where each sample record starts and where the data ends."""
    attr = b.Attr(sample_type=b.IP | b.TID | b.TIME, ids=[7])
    records = [b.sample_record(attr, ip=0x1000 + i, pid=1, tid=1, time=10 + i) for i in range(samples)]
    features = {b.FEAT_CMDLINE: b.cmdline_feature(["perf", "record"]),
                b.FEAT_EVENT_DESC: b.event_desc_feature([attr], ["cpu-clock"])}
    data = b.file_mode([attr], b"".join(records), features)
    data_offset = struct.unpack_from("<Q", data, DATA_OFFSET_FIELD)[0]
    starts = [data_offset + sum(map(len, records[:i])) for i in range(samples)]
    return data, starts, data_offset + sum(map(len, records))


def unterminated(data: bytes) -> bytearray:
    """What a killed perf record leaves: the header's data size still 0 (feature bits set)."""
    killed = bytearray(data)
    struct.pack_into("<Q", killed, DATA_SIZE_FIELD, 0)
    return killed


def test_whole_recording_has_no_cut():
    data, _, _ = recording()
    perf = PerfData.read(data)
    assert perf.cut is None and perf.sample_count == 3 and perf.cmdline == ["perf", "record"]


def test_data_size_zero_reads_to_the_end_and_features_are_absent():
    data, starts, data_end = recording()
    killed = unterminated(data[:data_end])  # killed before the feature sections were written
    perf = PerfData.read(bytes(killed))
    assert [s.ip for s in perf.samples()] == [0x1000, 0x1001, 0x1002]
    assert perf.cut.note == (f"perf.data+0x30: data size is 0: the recording was not properly terminated "
                             f"(perf record killed?); records read from {starts[0]:#x} to the file's end "
                             f"at {data_end:#x}; 2 feature sections absent")
    assert perf.cut.missing_features == ("CMDLINE", "EVENT_DESC") and perf.cut.dropped_record_offset is None
    assert perf.cmdline == [] and perf.attrs[0].name is None


def test_data_size_zero_cut_inside_a_sample_drops_it():
    data, starts, _ = recording()
    killed = unterminated(data[:starts[2] + 13])
    perf = PerfData.read(bytes(killed))
    assert perf.sample_count == 2
    assert perf.cut.dropped_record_offset == starts[2]
    assert f"the incomplete record at {starts[2]:#x} (0xd of its {starts[1] - starts[0]:#x} bytes) was dropped" \
        in perf.cut.note


def test_data_size_zero_inside_a_record_header():
    data, starts, _ = recording()
    perf = PerfData.read(bytes(unterminated(data[:starts[1] + 5])))
    assert perf.sample_count == 1
    assert f"the incomplete record at {starts[1]:#x} (0x5 bytes of its header) was dropped" in perf.cut.note


def test_finished_recording_without_records_is_not_cut():
    """Data size 0 is also a finished recording with no records: its feature table then sits at
    the data offset, every section inside the file."""
    attr = b.Attr(sample_type=b.IP)
    data = b.file_mode([attr], b"", {b.FEAT_CMDLINE: b.cmdline_feature(["perf"])})
    perf = PerfData.read(data)
    assert perf.cut is None and perf.cmdline == ["perf"]


@pytest.mark.parametrize("inside", [1, 8, 20, 31])  # a sample record is 32 bytes
def test_truncated_in_the_data_section(inside):
    data, starts, _ = recording()
    perf = PerfData.read(data[:starts[1] + inside])
    assert perf.sample_count == 1 and perf.sample(0).ip == 0x1000
    assert perf.cut.note.startswith(f"the file is truncated: it ends at {starts[1] + inside:#x}, inside its data "
                                    f"section [{starts[0]:#x}, {starts[0] + 3 * 32:#x})")
    assert perf.cut.dropped_record_offset == starts[1]
    assert perf.cut.missing_features == ("CMDLINE", "EVENT_DESC")


def test_truncated_at_a_record_boundary_drops_nothing():
    data, starts, data_end = recording()
    perf = PerfData.read(data[:starts[2]])
    assert perf.sample_count == 2 and perf.cut.dropped_record_offset is None
    assert perf.cut.note.endswith("; 2 feature sections absent")


def test_truncated_in_the_feature_sections():
    data, _, data_end = recording()
    perf = PerfData.read(data[:-3])  # EVENT_DESC, the last section, loses its end
    assert perf.sample_count == 3 and perf.cmdline == ["perf", "record"]
    assert perf.cut.missing_features == ("EVENT_DESC",) and perf.attrs[0].name is None
    assert perf.cut.note == (f"the file is truncated: it ends at {len(data) - 3:#x}, before some of its feature "
                             "sections; 1 feature section absent")
    table_cut = PerfData.read(data[:data_end + 8])  # inside the feature table itself
    assert table_cut.sample_count == 3 and table_cut.cut.missing_features == ("CMDLINE", "EVENT_DESC")


def test_truncated_compressed_recording():
    attr = b.Attr(sample_type=b.IP | b.TID | b.TIME)
    stream = b"".join(b.sample_record(attr, ip=i, pid=1, tid=1, time=i) for i in range(200))
    data = b.file_mode([attr], b.compress_records(stream, chunk=1000))
    perf = PerfData.read(data[:len(data) // 2])
    assert 0 < perf.sample_count < 200
    assert [s.ip for s in perf.samples()] == list(range(perf.sample_count))
    assert "bytes of an incomplete compressed record were dropped" in perf.cut.note or perf.cut.dropped_record_offset


# ---- what stays an error ---------------------------------------------------------------------------


def test_cut_before_the_first_sample_is_an_error():
    data, starts, _ = recording()
    with pytest.raises(PerfDataError, match=rf"perf.data\+0x0: data section \[{starts[0]:#x}, \+0x60\) lies "
                                            r"outside the file \(.* truncated\) and no complete sample"):
        PerfData.read(data[:starts[0] + 20])
    with pytest.raises(PerfDataError, match=r"data size is 0 \(the recording was not properly terminated\) and no "
                                            rf"complete sample lies between the data offset {starts[0]:#x}"):
        PerfData.read(bytes(unterminated(data[:starts[0] + 20])))


def test_cut_in_the_header_or_the_attrs_is_an_error():
    data, _, _ = recording()
    for size, message in ((50, "too short for a perf.data header|header of 0x68 bytes overruns"),
                          (0x70, "lies outside the file")):
        with pytest.raises(PerfDataError, match=message):
            PerfData.read(data[:size])


def test_data_offset_outside_the_file_is_an_error():
    data, _, _ = recording()
    hostile = bytearray(data)
    struct.pack_into("<Q", hostile, DATA_OFFSET_FIELD, 1 << 40)
    with pytest.raises(PerfDataError, match=r"perf.data\+0x0: data section \[0x10000000000, \+0x60\) lies outside"):
        PerfData.read(bytes(hostile))


def test_zero_size_record_after_a_cut_ends_the_data_but_not_before_a_sample():
    data, starts, data_end = recording()
    killed = unterminated(data[:data_end]) + b.record(b.SAMPLE, b"", size=0) + bytes(64)
    perf = PerfData.read(bytes(killed))
    assert perf.sample_count == 3 and perf.cut.dropped_record_offset == data_end
    first_zero = unterminated(data[:starts[0]]) + b.record(b.SAMPLE, b"", size=0) + bytes(64)
    with pytest.raises(PerfDataError, match="no complete sample"):
        PerfData.read(bytes(first_zero))


def test_zero_size_record_in_a_whole_file_is_an_error():
    attr = b.Attr(sample_type=b.IP)
    data = b.file_mode([attr], b.sample_record(attr, ip=1) + b.record(b.SAMPLE, b"", size=0))
    with pytest.raises(PerfDataError, match=r"SAMPLE record \(type 9\) has size 0x0, below the 8-byte header"):
        PerfData.read(data)


def test_pipe_stream_cut_before_any_sample_is_an_error():
    attr = b.Attr(sample_type=b.IP)
    data = b.pipe_mode([attr], b.sample_record(attr, ip=1))
    with pytest.raises(PerfDataError, match=r"the stream ends inside a record \(0x5 bytes present\) before any"):
        PerfData.read(data[:-11])
