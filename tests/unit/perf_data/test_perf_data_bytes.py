"""Hand-assembled recordings: every record type the reader uses or skips, every sample field, both
file layouts, the id → attr mapping, compression, ordering, and the named errors."""
from __future__ import annotations

import struct

import pytest

from fastunwind.errors import FastunwindError, PerfDataError
from fastunwind.perf.data import Comm, Exit, Fork, Mmap, PerfData

from tests.support import perf_builder as b

DWARF_ATTR = {"sample_type": b.IP | b.TID | b.TIME | b.CALLCHAIN | b.REGS_USER | b.STACK_USER,
                  "sample_regs_user": 0xff0fff, "sample_stack_user": 8192}


def both_modes(attrs, records, features=None):
    """The same recording as a file-mode file and as a pipe-mode stream."""
    pipe_records = records
    if features:
        pipe_records = b"".join(b.header_feature_record(k, v) for k, v in features.items()
                                if k != b.FEAT_BUILD_ID) + records
    return [PerfData.read(b.file_mode(attrs, records, features)), PerfData.read(b.pipe_mode(attrs, pipe_records))]


# ---- layouts -------------------------------------------------------------------------------------


def test_empty_file_mode_and_pipe_mode():
    for perf in both_modes([b.Attr()], b""):
        assert perf.sample_count == 0 and list(perf.events()) == []
        assert len(perf.attrs) == 1 and perf.attrs[0].sample_period == 100000
    assert PerfData.read(b.pipe_mode([b.Attr()], b"")).pipe_mode


def test_error_is_a_fastunwind_error():
    assert issubclass(PerfDataError, FastunwindError)


def test_attr_fields_and_names_from_event_desc():
    attrs = [b.Attr(ids=[11, 12], **DWARF_ATTR), b.Attr(config=1, ids=[13], flags=b.FLAG_SAMPLE_ID_ALL | b.FLAG_FREQ,
                                                         sample_period=4000, **{k: v for k, v in DWARF_ATTR.items()})]
    for attr in attrs:
        attr.sample_type |= b.ID
    features = {b.FEAT_EVENT_DESC: b.event_desc_feature(attrs, ["cpu-clock", "task-clock"]),
                b.FEAT_CMDLINE: b.cmdline_feature(["/usr/bin/perf", "record", "-g"])}
    for perf in both_modes(attrs, b"", features):
        first, second = perf.attrs
        assert (first.name, second.name) == ("cpu-clock", "task-clock")
        assert first.ids == (11, 12) and second.ids == (13,)
        assert second.freq and not first.freq and second.sample_period == 4000
        assert first.sample_regs_user == 0xff0fff and first.sample_stack_user == 8192
        assert first.sample_id_all and first.has_user_stack
        assert perf.has_user_stacks
        assert perf.cmdline == ["/usr/bin/perf", "record", "-g"]


def test_event_name_that_is_not_utf8_is_shown_escaped():
    # perf writes the name's bytes as they are; a mutated file once made attrs() raise UnicodeDecodeError
    attrs = [b.Attr(ids=[11], **DWARF_ATTR)]
    attrs[0].sample_type |= b.ID
    features = {b.FEAT_EVENT_DESC: b.event_desc_feature(attrs, [b"cpu\xf6clock"])}
    for perf in both_modes(attrs, b"", features):
        assert perf.attrs[0].name == "cpu\\xf6clock"


@pytest.mark.parametrize("size", [64, 72, 80, 96, 104, 112, 120, 128, 136, 200])
def test_attr_of_any_size(size):
    attr = b.Attr(size=size, sample_type=b.IP | b.TID)
    records = b.sample_record(attr, ip=0x1234, pid=5, tid=6)
    perf = PerfData.read(b.file_mode([attr], records, attr_entry_size=size + 16))
    assert perf.attrs[0].size == size
    assert perf.attrs[0].sample_type == b.IP | b.TID
    assert perf.sample(0).ip == 0x1234
    assert PerfData.read(b.pipe_mode([attr], records)).sample(0).pid == 5


def test_attr_size_zero_means_ver0():
    attr = b.Attr(size=0, sample_type=b.IP)
    perf = PerfData.read(b.pipe_mode([attr], b.sample_record(attr, ip=7)))
    assert perf.attrs[0].size == 64 and perf.sample(0).ip == 7


@pytest.mark.parametrize("size", [8, 32, 63, 4097])
def test_bad_attr_size(size):
    attr = b.Attr(size=size)
    data = b.pipe_mode([attr], b"")
    with pytest.raises(PerfDataError, match="perf_event_attr size|overruns"):
        PerfData.read(data)


def test_old_72_byte_file_header_without_features():
    attr = b.Attr(sample_type=b.IP)
    data = bytearray(b.file_mode([attr], b.sample_record(attr, ip=9)))
    struct.pack_into("<Q", data, 8, 72)
    assert PerfData.read(bytes(data)).sample(0).ip == 9


@pytest.mark.parametrize("magic,message", [(b"2ELIFREP", "big-endian"), (b"PERFFILE", "version 1"),
                                           (b"NOTPERF!", "bad magic")])
def test_magic(magic, message):
    data = magic + b.file_mode([b.Attr()], b"")[8:]
    with pytest.raises(PerfDataError, match=message):
        PerfData.read(data)


# ---- side-band records ---------------------------------------------------------------------------


def test_mmap_mmap2_comm_fork_exit():
    attr = b.Attr(sample_type=b.IP | b.TID | b.TIME | b.CPU)
    records = (b.comm_record(attr, 10, 10, "sh", time=100)
               + b.task_record(attr, b.FORK, 11, 10, 11, 10, time=200)
               + b.comm_record(attr, 11, 11, "ls", exec_=True, time=300)
               + b.mmap_record(attr, 11, 11, 0x400000, 0x1000, 0, "/bin/ls", time=400)
               + b.mmap2_record(attr, 11, 11, 0x7f0000000000, 0x2000, 0x1000, "/lib/libc.so.6", maj=254, min_=1,
                                ino=99, gen=3, prot=5, flags=2, time=500)
               + b.mmap2_record(attr, 11, 11, 0x7f0000100000, 0x3000, 0, "/lib/libm.so.6",
                                build_id=bytes(range(20)), time=600)
               + b.task_record(attr, b.EXIT, 11, 10, 11, 10, time=700))
    for perf in both_modes([attr], records):
        events = list(perf.events())
        assert [type(e) for e in events] == [Comm, Fork, Comm, Mmap, Mmap, Mmap, Exit]
        assert events[0] == Comm(10, 10, "sh", False, 100)
        assert events[1] == Fork(pid=11, ppid=10, tid=11, ptid=10, time=200)
        assert events[2] == Comm(11, 11, "ls", True, 300)
        plain = events[3]
        assert (plain.filename, plain.start, plain.length, plain.pgoff, plain.is_mmap2, plain.build_id) == (
            "/bin/ls", 0x400000, 0x1000, 0, False, None)
        libc = events[4]
        assert (libc.maj, libc.min, libc.ino, libc.ino_generation, libc.prot, libc.flags, libc.time) == (
            254, 1, 99, 3, 5, 2, 500)
        assert libc.build_id is None and libc.end == 0x7f0000002000
        libm = events[5]
        assert libm.build_id == bytes(range(20)).hex() and (libm.maj, libm.ino) == (0, 0)
        assert events[6] == Exit(pid=11, ppid=10, tid=11, ptid=10, time=700)


def test_mmap2_build_id_shorter_than_20():
    attr = b.Attr()
    perf = PerfData.read(b.pipe_mode([attr], b.mmap2_record(attr, 1, 1, 0, 4096, 0, "x", build_id=b"\xab" * 16)))
    assert next(perf.events()).build_id == "ab" * 16


def test_without_sample_id_all_times_are_none_and_fork_uses_its_own_time():
    attr = b.Attr(flags=0, sample_type=b.IP | b.TID | b.TIME)
    records = (b.comm_record(attr, 1, 1, "a") + b.task_record(attr, b.FORK, 2, 1, 2, 1, time=55)
               + b.sample_record(attr, ip=1, pid=2, tid=2, time=60))
    perf = PerfData.read(b.file_mode([attr], records))
    comm, fork, sample = perf.events()
    assert comm.time is None and fork.time == 55 and sample.time == 60


def test_build_ids_feature_and_pipe_records():
    attr = b.Attr()
    section = (b.build_id_record(-1, bytes(range(20)), "[kernel.kallsyms]", misc=b.MISC_KERNEL)
               + b.build_id_record(42, b"\x11" * 16, "/usr/lib/libfoo.so")
               + b.build_id_record(43, b"\x22" * 20, "/old/perf", with_size=False))
    perf = PerfData.read(b.file_mode([attr], b"", {b.FEAT_BUILD_ID: section}))
    expected = [(-1, bytes(range(20)).hex(), "[kernel.kallsyms]"), (42, "11" * 16, "/usr/lib/libfoo.so"),
                (43, "22" * 20, "/old/perf")]
    assert [tuple(x) for x in perf.build_ids] == expected
    piped = PerfData.read(b.pipe_mode([attr], section))
    assert [tuple(x) for x in piped.build_ids] == expected


def test_event_update_names_in_pipe_mode():
    attrs = [b.Attr(sample_type=b.IP | b.ID, ids=[5]), b.Attr(sample_type=b.IP | b.ID, ids=[6])]
    update = b.record(b.EVENT_UPDATE, struct.pack("<QQ", 2, 6) + b.cstring("task-clock"))
    unit = b.record(b.EVENT_UPDATE, struct.pack("<QQ", 0, 5) + b.cstring("msec"))
    perf = PerfData.read(b.pipe_mode(attrs, unit + update))
    assert [a.name for a in perf.attrs] == [None, "task-clock"]


def test_skipped_records_by_size():
    """Records the reader does not use are skipped by their size, payload-carrying ones with it."""
    attr = b.Attr(sample_type=b.IP)
    tracing = b.record(b.HEADER_TRACING_DATA, struct.pack("<I", 13)) + b"T" * 13 + bytes(3)
    auxtrace = b.record(b.AUXTRACE, struct.pack("<QQQIIII", 24, 0, 0, 0, 0, 0, 0)) + b"A" * 24
    skipped = (b.record(b.LOST, struct.pack("<QQ", 1, 17)) + b.record(b.THROTTLE, bytes(24))
               + b.record(b.UNTHROTTLE, bytes(24)) + b.record(b.KSYMBOL, bytes(40))
               + b.record(b.FINISHED_ROUND, b"") + b.record(b.FINISHED_INIT, b"")
               + b.record(b.ID_INDEX, bytes(40)) + b.record(b.THREAD_MAP, bytes(24))
               + b.record(b.CPU_MAP, bytes(16)) + b.record(b.TIME_CONV, bytes(56))
               + b.record(b.STAT_CONFIG, bytes(8)) + b.record(b.STAT, bytes(40)) + b.record(b.STAT_ROUND, bytes(16))
               + b.record(b.HEADER_EVENT_TYPE, bytes(72)) + b.record(b.AUXTRACE_INFO, bytes(16))
               + b.record(b.AUXTRACE_ERROR, bytes(48)) + b.record(999, b"future!!") + b.record(40, b"")
               + b.header_feature_record(3, b.header_string("hostname")) + b.header_feature_record(32, b"")
               + tracing + auxtrace)
    for perf in both_modes([attr], skipped + b.sample_record(attr, ip=0xabc)):
        assert perf.sample_count == 1 and perf.sample(0).ip == 0xabc
        assert perf.stats()["lost"] == 17


# ---- samples ----------------------------------------------------------------------------------------


def test_every_sample_field_in_kernel_order():
    attr = b.Attr(sample_type=(b.IDENTIFIER | b.IP | b.TID | b.TIME | b.ADDR | b.ID | b.STREAM_ID | b.CPU | b.PERIOD
                               | b.READ | b.CALLCHAIN | b.RAW | b.BRANCH_STACK | b.REGS_USER | b.STACK_USER | b.WEIGHT
                               | b.DATA_SRC | b.TRANSACTION | b.REGS_INTR | b.PHYS_ADDR | b.CGROUP
                               | b.DATA_PAGE_SIZE | b.CODE_PAGE_SIZE | b.AUX),
                  read_format=b.FMT_TOTAL_TIME_ENABLED | b.FMT_TOTAL_TIME_RUNNING | b.FMT_ID | b.FMT_LOST,
                  branch_sample_type=b.BRANCH_HW_INDEX, sample_regs_user=0b1011_0000_1000_0001,
                  sample_regs_intr=0b11, ids=[77])
    stack = bytes(range(64))
    record = b.sample_record(
        attr, id=77, ip=0x401000, pid=100, tid=101, time=123456789, addr=0xdead, stream_id=88, cpu=3, period=999,
        read=[5000, 10, 9, 77, 2], callchain=[0xfffffffffffffe00, 0xffffffff81000000], raw=b"rawdata!" + bytes(4),
        branches=[(1, 2, 3), (4, 5, 6)], hw_idx=1, regs=[10, 20, 30, 40, 50], stack=stack, dyn_size=48,
        weight=0x1_0002_00000003, data_src=0x55, transaction=0x66, intr_regs=[7, 8], phys_addr=0x77,
        cgroup=0x88, data_page_size=4096, code_page_size=2 << 20, aux=b"auxdata!")
    for perf in both_modes([attr], record):
        s = perf.sample(0)
        assert (s.id, s.ip, s.pid, s.tid, s.time, s.addr, s.stream_id, s.cpu, s.period) == (
            77, 0x401000, 100, 101, 123456789, 0xdead, 88, 3, 999)
        assert s.callchain == (0xfffffffffffffe00, 0xffffffff81000000)
        # registers come in ascending bit order of the mask: bits 0, 7, 12, 13, 15
        assert s.regs == {"ax": 10, "sp": 20, "ds": 30, "es": 40, "gs": 50}
        assert s.reg("sp") == 20 and s.reg(15) == 50 and s.reg("bp") is None and s.reg(63) is None
        assert s.stack == stack[:48] and s.stack_size == 48
        extra = s.extra()
        assert extra["read"] == (5000, 10, 9, 77, 2)
        assert (extra["time_enabled"], extra["time_running"], extra["read_value_count"]) == (10, 9, 1)
        assert extra["raw"] == b"rawdata!" + bytes(4)
        assert extra["branches"] == (1, 2, 3, 4, 5, 6) and extra["branch_hw_index"] == 1
        assert extra["stack_dump"] == stack and extra["stack_dump_size"] == 64
        assert (extra["weight"], extra["data_src"], extra["transaction"]) == (0x1_0002_00000003, 0x55, 0x66)
        assert extra["intr_regs"] == (7, 8)
        assert (extra["phys_addr"], extra["cgroup"], extra["data_page_size"], extra["code_page_size"]) == (
            0x77, 0x88, 4096, 2 << 20)
        assert extra["aux"] == b"auxdata!"


def test_read_group_format():
    attr = b.Attr(sample_type=b.IP | b.READ | b.PERIOD, read_format=b.FMT_GROUP | b.FMT_ID | b.FMT_TOTAL_TIME_ENABLED)
    record = b.sample_record(attr, ip=1, period=5, read=[2, 1000, 11, 1, 22, 2])
    extra = PerfData.read(b.pipe_mode([attr], record)).sample(0).extra()
    assert extra["read_value_count"] == 2 and extra["read"] == (2, 1000, 11, 1, 22, 2)


def test_weight_struct_and_branches_without_hw_index():
    attr = b.Attr(sample_type=b.IP | b.BRANCH_STACK | b.WEIGHT_STRUCT)
    record = b.sample_record(attr, ip=1, branches=[(7, 8, 9)], weight=42)
    extra = PerfData.read(b.pipe_mode([attr], record)).sample(0).extra()
    assert extra["branches"] == (7, 8, 9) and extra["branch_hw_index"] == 2**64 - 1 and extra["weight"] == 42


def test_absent_fields_follow_perf():
    """No TID/CPU/TIME/PERIOD: pid/tid/cpu -1, time None, period = the attr's sample_period."""
    attr = b.Attr(sample_type=b.IP, sample_period=4321)
    s = PerfData.read(b.pipe_mode([attr], b.sample_record(attr, ip=5))).sample(0)
    assert (s.pid, s.tid, s.cpu, s.time, s.period) == (-1, -1, -1, None, 4321)
    assert s.callchain == () and s.stack == b"" and s.regs == {}


def test_zero_size_stack_and_abi_none_regs():
    attr = b.Attr(**DWARF_ATTR)
    s = PerfData.read(b.pipe_mode([attr], b.sample_record(attr, ip=5, stack=b"", regs=None))).sample(0)
    assert s.stack == b"" and s.stack_size == 0 and s.regs == {} and s.regs_abi == 0 and s.reg("sp") is None


def test_dyn_size_larger_than_dump_is_an_error():
    attr = b.Attr(**DWARF_ATTR)
    data = b.pipe_mode([attr], b.sample_record(attr, regs=[0] * 20, stack=bytes(16), dyn_size=17))
    with pytest.raises(PerfDataError, match="dyn_size 0x11 exceeds the dumped size 0x10"):
        PerfData.read(data)


def test_huge_callchain_count_is_an_error():
    attr = b.Attr(sample_type=b.IP | b.CALLCHAIN)
    data = b.pipe_mode([attr], b.sample_record(attr, callchain=[1, 2], callchain_nr=2**61))
    with pytest.raises(PerfDataError, match=r"callchain of 0x2000000000000000 entries overruns the record"):
        PerfData.read(data)


def test_unaligned_records_are_realigned():
    """A HEADER_TRACING_DATA record is 12 bytes (perf pads only its payload): later records sit at
    4-byte offsets; callchains are still handed out 8-byte aligned, values intact."""
    attr = b.Attr(sample_type=b.IP | b.CALLCHAIN)
    tracing = b.record(b.HEADER_TRACING_DATA, struct.pack("<I", 8)) + b"T" * 8
    data = b.pipe_mode([attr], tracing + b.sample_record(attr, ip=3, callchain=[0x1111, 0x2222, 0x3333]))
    assert PerfData.read(data).sample(0).callchain == (0x1111, 0x2222, 0x3333)


# ---- several events -----------------------------------------------------------------------------


@pytest.mark.parametrize("id_bit", [b.ID, b.IDENTIFIER])
def test_samples_map_to_attrs_by_id(id_bit):
    attrs = [b.Attr(sample_type=b.IP | b.TID | b.TIME | id_bit, ids=[101, 102], sample_period=1000),
             b.Attr(sample_type=b.IP | b.TID | b.TIME | id_bit | b.PERIOD, ids=[201], sample_period=2000)]
    records = (b.sample_record(attrs[0], id=102, ip=1, time=10) + b.sample_record(attrs[1], id=201, ip=2, time=20,
                                                                                    period=7)
               + b.comm_record(attrs[1], 5, 5, "x", time=30, id_=201) + b.sample_record(attrs[0], id=0, ip=3, time=40))
    for perf in both_modes(attrs, records):
        samples = list(perf.samples())
        assert [(s.attr_index, s.ip, s.period) for s in samples] == [(0, 1, 1000), (1, 2, 7), (0, 3, 1000)]


def test_unknown_id_is_an_error():
    attrs = [b.Attr(sample_type=b.IP | b.ID, ids=[1]), b.Attr(sample_type=b.IP | b.ID, ids=[2])]
    with pytest.raises(PerfDataError, match="event id 0x3 matches no attr"):
        PerfData.read(b.pipe_mode(attrs, b.sample_record(attrs[0], id=3, ip=1)))


def test_several_attrs_without_ids_is_an_error():
    attrs = [b.Attr(sample_type=b.IP), b.Attr(sample_type=b.IP)]
    with pytest.raises(PerfDataError, match="samples carry no id"):
        PerfData.read(b.pipe_mode(attrs, b.sample_record(attrs[0], ip=1)))


def test_sample_before_any_attr():
    data = b.MAGIC + struct.pack("<Q", 16) + b.sample_record(b.Attr(sample_type=b.IP), ip=1)
    with pytest.raises(PerfDataError, match=r"perf.data\+0x10: SAMPLE record before any attr"):
        PerfData.read(data)


def test_has_user_stacks_ignores_dummy_event():
    dwarf = b.Attr(ids=[1], **{**DWARF_ATTR, "sample_type": DWARF_ATTR["sample_type"] | b.ID})
    dummy = b.Attr(config=9, sample_type=b.IP | b.ID, ids=[2], sample_period=1)
    assert PerfData.read(b.pipe_mode([dwarf, dummy], b"")).has_user_stacks
    fp = b.Attr(sample_type=b.IP | b.ID | b.CALLCHAIN, ids=[3])
    assert not PerfData.read(b.pipe_mode([dwarf, fp], b"")).has_user_stacks


# ---- ordering ----------------------------------------------------------------------------------


def test_events_in_time_order_stable_for_ties():
    attr = b.Attr(sample_type=b.IP | b.TID | b.TIME)
    records = (b.sample_record(attr, ip=1, time=30) + b.mmap_record(attr, 1, 1, 0, 1, 0, "a", time=10)
               + b.sample_record(attr, ip=2, time=20) + b.record(b.FINISHED_ROUND, b"")
               + b.sample_record(attr, ip=3, time=20) + b.comm_record(attr, 1, 1, "c", time=20)
               + b.sample_record(attr, ip=4, time=5))
    perf = PerfData.read(b.file_mode([attr], records))
    seen = [(type(e).__name__, e.time) for e in perf.events()]
    assert seen == [("Sample", 5), ("Mmap", 10), ("Sample", 20), ("Sample", 20), ("Comm", 20), ("Sample", 30)]
    assert [s.ip for s in perf.samples()] == [4, 2, 3, 1]
    assert [s.index for s in perf.samples()] == [0, 1, 2, 3]
    assert list(perf.sample_column("ip")) == [4, 2, 3, 1]


def test_records_without_time_keep_their_place():
    attr = b.Attr(sample_type=b.IP | b.TIME, flags=0)
    records = (b.sample_record(attr, ip=1, time=50) + b.comm_record(attr, 1, 1, "x")
               + b.sample_record(attr, ip=2, time=40) + b.sample_record(attr, ip=3, time=60))
    kinds = [type(e).__name__ + str(getattr(e, "ip", "")) for e in PerfData.read(b.file_mode([attr], records)).events()]
    # the COMM sorts at time 50 (the record before it), after the sample at 40
    assert kinds == ["Sample2", "Sample1", "Comm", "Sample3"]


# ---- compression --------------------------------------------------------------------------------


def _many_samples(attr, n):
    return b"".join(b.sample_record(attr, ip=0x1000 + i, pid=1, tid=1, time=1000 + i, regs=list(range(20)),
                                    stack=bytes([i % 256]) * 512) for i in range(n))


def test_compressed_stream_across_records_file_and_pipe():
    attr = b.Attr(**DWARF_ATTR)
    plain = b.comm_record(attr, 1, 1, "w", time=1) + _many_samples(attr, 40)
    compressed = b.compress_records(plain, chunk=1000)  # records straddle COMPRESSED records
    for data in (b.file_mode([attr], compressed, {b.FEAT_COMPRESSED: b.compressed_feature()}),
                 b.pipe_mode([attr], b.header_feature_record(b.FEAT_COMPRESSED, b.compressed_feature()) + compressed)):
        perf = PerfData.read(data)
        assert perf.sample_count == 40
        assert [s.ip for s in perf.samples()] == [0x1000 + i for i in range(40)]
        assert perf.sample(7).stack == bytes([7]) * 512
        assert perf.native.decompressed_size == len(plain)
        assert perf.stats()["compression_type"] == 1


def test_compressed_mixed_with_plain_records():
    attr = b.Attr(sample_type=b.IP | b.TIME)
    first = b.compress_records(b.sample_record(attr, ip=1, time=10))
    data = b.pipe_mode([attr], b.sample_record(attr, ip=2, time=5) + first + b.record(b.FINISHED_ROUND, b"")
                       + b.sample_record(attr, ip=3, time=20))
    assert [s.ip for s in PerfData.read(data).samples()] == [2, 1, 3]


def test_decompressed_bound_is_enforced():
    attr = b.Attr(**DWARF_ATTR)
    data = b.pipe_mode([attr], b.compress_records(_many_samples(attr, 200), chunk=60000))
    assert PerfData.read(data).sample_count == 200
    with pytest.raises(PerfDataError, match="exceed the bound of 0x10000 bytes"):
        PerfData.read(data, max_decompressed=0x10000)


def test_corrupt_compressed_payload():
    attr = b.Attr(sample_type=b.IP)
    data = b.pipe_mode([attr], b.record(b.COMPRESSED, b"\x28\xb5\x2f\xfd" + b"\xff" * 28))
    with pytest.raises(PerfDataError, match=r"perf.data\+0x[0-9a-f]+: COMPRESSED: zstd: "):
        PerfData.read(data)


def test_compressed_stream_ending_inside_a_record():
    attr = b.Attr(sample_type=b.IP)
    whole = b.sample_record(attr, ip=1) + b.sample_record(attr, ip=2)
    data = b.pipe_mode([attr], b.compress_records(whole[:-4]))
    with pytest.raises(PerfDataError, match=r"COMPRESSED stream\+0x10\): the compressed stream ends inside a record"):
        PerfData.read(data)


def test_compressed_inside_compressed_is_an_error():
    attr = b.Attr(sample_type=b.IP)
    inner = b.compress_records(b.sample_record(attr, ip=1))
    with pytest.raises(PerfDataError, match="COMPRESSED record inside a compressed stream"):
        PerfData.read(b.pipe_mode([attr], b.compress_records(inner)))


# ---- framing errors -------------------------------------------------------------------------------


def test_record_size_below_header():
    attr = b.Attr()
    data = b.pipe_mode([attr], b.record(b.SAMPLE, b"", size=4) + bytes(8))
    offset = len(b.pipe_mode([attr], b""))
    with pytest.raises(PerfDataError, match=rf"perf.data\+{offset:#x}: SAMPLE record \(type 9\) has size 0x4, below"):
        PerfData.read(data)


def test_record_past_the_end():
    # in a whole file the data section holds whole records; a pipe stream that ends inside one was
    # cut short (tests/unit/perf_data/test_perf_data_cut.py)
    attr = b.Attr()
    data = b.file_mode([attr], b.record(b.COMM, bytes(16), size=200))
    with pytest.raises(PerfDataError, match="COMM record .* of size 0xc8 runs 0xb0 bytes past the end"):
        PerfData.read(data)


def test_file_data_section_outside_file():
    data = bytearray(b.file_mode([b.Attr()], b""))
    struct.pack_into("<Q", data, 48, 1 << 40)  # data.size
    with pytest.raises(PerfDataError, match=r"perf.data\+0x0: data section .* lies outside the file"):
        PerfData.read(bytes(data))


def test_truncated_pipe_stream_at_record_boundary_is_fine():
    attr = b.Attr(sample_type=b.IP)
    data = b.pipe_mode([attr], b.sample_record(attr, ip=1) + b.sample_record(attr, ip=2))
    whole = PerfData.read(data[:-16])
    assert whole.sample_count == 1 and whole.cut is None
    cut = PerfData.read(data[:-12])  # perf record -o - killed: the stream ends inside a record
    assert cut.sample_count == 1
    assert cut.cut.note == (f"the stream ends inside a record; the incomplete record at {len(data) - 16:#x} "
                            "(0x4 bytes of its header) was dropped")


def test_sample_fields_overrun_named():
    attr = b.Attr(sample_type=b.IP | b.TID | b.REGS_USER, sample_regs_user=0xff)
    data = b.pipe_mode([attr], b.sample_record(attr, ip=1, regs=[1, 2, 3]))
    with pytest.raises(PerfDataError, match="ends inside REGS_USER registers: 0x40 bytes needed, 0x18 left"):
        PerfData.read(data)


def test_many_attrs_interleaved_with_samples_stays_linear():
    """Pipe mode: 4096 HEADER_ATTRs, each followed by a sample of its id. The id table grows
    incrementally, so this takes milliseconds, not a rebuild per attr."""
    import time

    attrs = [b.Attr(sample_type=b.IP | b.IDENTIFIER, ids=[1000 + i, 50000 + i]) for i in range(4096)]
    stream = b"".join(b.header_attr_record(a) + b.sample_record(a, id=50000 + i, ip=i) for i, a in enumerate(attrs))
    start = time.perf_counter()
    perf = PerfData.read(b.MAGIC + struct.pack("<Q", 16) + stream)
    assert time.perf_counter() - start < 2.0
    assert perf.sample_count == 4096 and perf.sample(4095).attr_index == 4095


def test_attr_count_limit():
    attr = b.Attr(sample_type=b.IP)
    data = b.MAGIC + struct.pack("<Q", 16) + b.header_attr_record(attr) * 4097
    with pytest.raises(PerfDataError, match="more than 4096 attrs"):
        PerfData.read(data)
