"""Hand-assembled perf.data bytes: attrs, records and whole recordings in file mode and pipe mode.

Layouts follow include/uapi/linux/perf_event.h and tools/perf/Documentation/perf.data-file-format.txt;
each helper names the struct it writes. Everything is little-endian, as on x86-64.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

# PERF_SAMPLE_*
IP, TID, TIME, ADDR, READ, CALLCHAIN, ID, CPU, PERIOD, STREAM_ID, RAW, BRANCH_STACK, REGS_USER, STACK_USER, \
    WEIGHT, DATA_SRC, IDENTIFIER, TRANSACTION, REGS_INTR, PHYS_ADDR, AUX, CGROUP, DATA_PAGE_SIZE, \
    CODE_PAGE_SIZE, WEIGHT_STRUCT = (1 << bit for bit in range(25))
# read_format
FMT_TOTAL_TIME_ENABLED, FMT_TOTAL_TIME_RUNNING, FMT_ID, FMT_GROUP, FMT_LOST = (1 << bit for bit in range(5))
BRANCH_HW_INDEX = 1 << 17
# record types
MMAP, LOST, COMM, EXIT, THROTTLE, UNTHROTTLE, FORK, READ_RECORD, SAMPLE, MMAP2 = range(1, 11)
KSYMBOL = 17
HEADER_ATTR, HEADER_EVENT_TYPE, HEADER_TRACING_DATA, HEADER_BUILD_ID, FINISHED_ROUND, ID_INDEX, \
    AUXTRACE_INFO, AUXTRACE, AUXTRACE_ERROR, THREAD_MAP, CPU_MAP, STAT_CONFIG, STAT, STAT_ROUND, EVENT_UPDATE, \
    TIME_CONV, HEADER_FEATURE, COMPRESSED, FINISHED_INIT = range(64, 83)
MISC_USER = 2
MISC_KERNEL = 1
MISC_COMM_EXEC = 1 << 13
MISC_MMAP_BUILD_ID = 1 << 14
MISC_BUILD_ID_SIZE = 1 << 15
# features
FEAT_BUILD_ID, FEAT_CMDLINE, FEAT_EVENT_DESC, FEAT_COMPRESSED = 2, 11, 12, 27

FLAG_FREQ = 1 << 10
FLAG_SAMPLE_ID_ALL = 1 << 18
MAGIC = b"PERFILE2"


@dataclass
class Attr:
    """struct perf_event_attr (written at `size` bytes, 136 = PERF_ATTR_SIZE_VER8 by default)."""

    sample_type: int = IP | TID | TIME
    type: int = 1  # PERF_TYPE_SOFTWARE
    config: int = 0  # PERF_COUNT_SW_CPU_CLOCK
    sample_period: int = 100000
    read_format: int = 0
    flags: int = FLAG_SAMPLE_ID_ALL
    branch_sample_type: int = 0
    sample_regs_user: int = 0
    sample_stack_user: int = 0
    sample_regs_intr: int = 0
    size: int = 136
    ids: list[int] = field(default_factory=list)

    def pack(self) -> bytes:
        body = struct.pack("<IIQQQQQIIQQQQIiQIHHIIQQ", self.type, self.size, self.config, self.sample_period,
                           self.sample_type, self.read_format, self.flags, 0, 0, 0, 0, self.branch_sample_type,
                           self.sample_regs_user, self.sample_stack_user, 0, self.sample_regs_intr, 0, 0, 0, 0,
                           0, 0, 0)
        assert len(body) == 136
        if self.size <= 136:
            return body[: max(self.size, 8)] if self.size else body[:64]
        return body + bytes(self.size - 136)


def record(type_: int, body: bytes, misc: int = 0, size: int | None = None) -> bytes:
    """struct perf_event_header + body (size defaults to the real length)."""
    total = 8 + len(body) if size is None else size
    return struct.pack("<IHH", type_, misc, total) + body


def pad8(data: bytes) -> bytes:
    return data + bytes(-len(data) % 8)


def cstring(text: str | bytes, align: int = 8) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    raw += b"\0"
    return raw + bytes(-len(raw) % align)


def sample_id(attr: Attr, pid=0, tid=0, time=0, id_=0, stream_id=0, cpu=0) -> bytes:
    """struct sample_id appended when sample_id_all is set: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER."""
    if not attr.flags & FLAG_SAMPLE_ID_ALL:
        return b""
    st = attr.sample_type
    out = b""
    if st & TID:
        out += struct.pack("<II", pid, tid)
    if st & TIME:
        out += struct.pack("<Q", time)
    if st & ID:
        out += struct.pack("<Q", id_)
    if st & STREAM_ID:
        out += struct.pack("<Q", stream_id)
    if st & CPU:
        out += struct.pack("<II", cpu, 0)
    if st & IDENTIFIER:
        out += struct.pack("<Q", id_)
    return out


def mmap_record(attr: Attr, pid, tid, start, length, pgoff, filename, time=0, id_=0) -> bytes:
    body = struct.pack("<IIQQQ", pid, tid, start, length, pgoff) + cstring(filename)
    return record(MMAP, body + sample_id(attr, pid, tid, time, id_), misc=MISC_USER)


def mmap2_record(attr: Attr, pid, tid, start, length, pgoff, filename, maj=8, min_=1, ino=1234, gen=7,
                 prot=5, flags=2, build_id: bytes | None = None, time=0, id_=0) -> bytes:
    head = struct.pack("<IIQQQ", pid, tid, start, length, pgoff)
    misc = MISC_USER
    if build_id is None:
        middle = struct.pack("<IIQQ", maj, min_, ino, gen)
    else:
        misc |= MISC_MMAP_BUILD_ID
        middle = struct.pack("<BBH", len(build_id), 0, 0) + build_id.ljust(20, b"\0")
    body = head + middle + struct.pack("<II", prot, flags) + cstring(filename)
    return record(MMAP2, body + sample_id(attr, pid, tid, time, id_), misc=misc)


def comm_record(attr: Attr, pid, tid, comm, exec_=False, time=0, id_=0) -> bytes:
    body = struct.pack("<II", pid, tid) + cstring(comm)
    return record(COMM, body + sample_id(attr, pid, tid, time, id_), misc=MISC_COMM_EXEC if exec_ else 0)


def task_record(attr: Attr, type_, pid, ppid, tid, ptid, time=0, id_=0) -> bytes:
    body = struct.pack("<IIIIQ", pid, ppid, tid, ptid, time)
    return record(type_, body + sample_id(attr, pid, tid, time, id_))


def sample_record(attr: Attr, *, misc=MISC_USER, **fields) -> bytes:
    """PERF_RECORD_SAMPLE in the kernel's order (perf_output_sample). Fields not given are 0/empty."""
    st = attr.sample_type
    f = fields.get
    out = b""
    if st & IDENTIFIER:
        out += struct.pack("<Q", f("id", 0))
    if st & IP:
        out += struct.pack("<Q", f("ip", 0))
    if st & TID:
        out += struct.pack("<II", f("pid", 0), f("tid", 0))
    if st & TIME:
        out += struct.pack("<Q", f("time", 0))
    if st & ADDR:
        out += struct.pack("<Q", f("addr", 0))
    if st & ID:
        out += struct.pack("<Q", f("id", 0))
    if st & STREAM_ID:
        out += struct.pack("<Q", f("stream_id", 0))
    if st & CPU:
        out += struct.pack("<II", f("cpu", 0), 0)
    if st & PERIOD:
        out += struct.pack("<Q", f("period", 0))
    if st & READ:
        out += b"".join(struct.pack("<Q", v) for v in f("read", []))
    if st & CALLCHAIN:
        chain = f("callchain", [])
        out += struct.pack("<Q", f("callchain_nr", len(chain))) + b"".join(struct.pack("<Q", v) for v in chain)
    if st & RAW:
        raw = f("raw", b"")
        out += struct.pack("<I", len(raw)) + raw
    if st & BRANCH_STACK:
        branches = f("branches", [])
        out += struct.pack("<Q", len(branches))
        if attr.branch_sample_type & BRANCH_HW_INDEX:
            out += struct.pack("<Q", f("hw_idx", 0))
        out += b"".join(struct.pack("<QQQ", *b) for b in branches)
    if st & REGS_USER:
        regs = f("regs", None)
        if regs is None:
            out += struct.pack("<Q", 0)
        else:
            out += struct.pack("<Q", f("regs_abi", 2)) + b"".join(struct.pack("<Q", v) for v in regs)
    if st & STACK_USER:
        stack = f("stack", b"")
        out += struct.pack("<Q", len(stack))
        if stack:
            out += stack + struct.pack("<Q", f("dyn_size", len(stack)))
    if st & (WEIGHT | WEIGHT_STRUCT):
        out += struct.pack("<Q", f("weight", 0))
    if st & DATA_SRC:
        out += struct.pack("<Q", f("data_src", 0))
    if st & TRANSACTION:
        out += struct.pack("<Q", f("transaction", 0))
    if st & REGS_INTR:
        regs = f("intr_regs", None)
        if regs is None:
            out += struct.pack("<Q", 0)
        else:
            out += struct.pack("<Q", 2) + b"".join(struct.pack("<Q", v) for v in regs)
    if st & PHYS_ADDR:
        out += struct.pack("<Q", f("phys_addr", 0))
    if st & CGROUP:
        out += struct.pack("<Q", f("cgroup", 0))
    if st & DATA_PAGE_SIZE:
        out += struct.pack("<Q", f("data_page_size", 0))
    if st & CODE_PAGE_SIZE:
        out += struct.pack("<Q", f("code_page_size", 0))
    if st & AUX:
        aux = f("aux", b"")
        out += struct.pack("<Q", len(aux)) + aux
    return record(SAMPLE, out, misc=misc)


def header_string(text: str | bytes) -> bytes:
    """struct perf_header_string: u32 len, NUL-padded to 64 (NAME_ALIGN)."""
    raw = cstring(text, 64)
    return struct.pack("<I", len(raw)) + raw


def cmdline_feature(words: list[str]) -> bytes:
    return struct.pack("<I", len(words)) + b"".join(header_string(w) for w in words)


def event_desc_feature(attrs: list[Attr], names: list[str | bytes]) -> bytes:
    out = struct.pack("<II", len(attrs), 136)
    for attr, name in zip(attrs, names):
        packed = Attr(**{**attr.__dict__, "size": 136}).pack()
        out += packed + struct.pack("<I", len(attr.ids)) + header_string(name)
        out += b"".join(struct.pack("<Q", i) for i in attr.ids)
    return out


def build_id_record(pid: int, build_id: bytes, filename: str, with_size: bool = True, misc: int = MISC_USER) -> bytes:
    """struct perf_record_header_build_id: header, s32 pid, u8 build_id[24] (20 + size + pad), name."""
    if with_size:
        misc |= MISC_BUILD_ID_SIZE
        raw = build_id.ljust(20, b"\0") + struct.pack("<BBH", len(build_id), 0, 0)
    else:
        raw = build_id.ljust(24, b"\0")
    body = struct.pack("<i", pid) + raw + cstring(filename, 64)
    return record(HEADER_BUILD_ID, body, misc=misc)


def compressed_feature(mmap_len: int = 528384) -> bytes:
    return struct.pack("<IIIII", 0, 1, 1, 10, mmap_len)


def file_mode(attrs: list[Attr], records: bytes, features: dict[int, bytes] | None = None,
              attr_entry_size: int | None = None) -> bytes:
    """struct perf_file_header (104 bytes), ids, attrs (perf_event_attr + perf_file_section ids),
    data, feature table, feature sections."""
    features = features or {}
    out = bytearray(104)
    ids_offsets = []
    for attr in attrs:
        ids_offsets.append((len(out), 8 * len(attr.ids)))
        out += b"".join(struct.pack("<Q", i) for i in attr.ids)
    attrs_offset = len(out)
    entry = attr_entry_size or (136 + 16)
    for attr, (offset, size) in zip(attrs, ids_offsets):
        packed = attr.pack()
        item = packed + struct.pack("<QQ", offset, size)
        out += item.ljust(entry, b"\0")[:entry] if len(item) <= entry else item[:entry]
    attrs_size = len(out) - attrs_offset
    data_offset = len(out)
    out += records
    data_size = len(out) - data_offset
    bits = [0, 0, 0, 0]
    for feat in features:
        bits[feat // 64] |= 1 << (feat % 64)
    table_offset = len(out)
    out += bytes(16 * len(features))
    for k, feat in enumerate(sorted(features)):
        offset = len(out)
        out += features[feat]
        struct.pack_into("<QQ", out, table_offset + 16 * k, offset, len(features[feat]))
    struct.pack_into("<8sQQQQQQQQ4Q", out, 0, MAGIC, 104, entry, attrs_offset, attrs_size, data_offset,
                     data_size, 0, 0, *bits)
    return bytes(out)


def header_attr_record(attr: Attr) -> bytes:
    return record(HEADER_ATTR, attr.pack() + b"".join(struct.pack("<Q", i) for i in attr.ids))


def header_feature_record(feat: int, payload: bytes) -> bytes:
    return record(HEADER_FEATURE, struct.pack("<Q", feat) + payload)


def pipe_mode(attrs: list[Attr], records: bytes) -> bytes:
    """struct perf_pipe_file_header (magic, size=16), HEADER_ATTR records, then the records."""
    return MAGIC + struct.pack("<Q", 16) + b"".join(header_attr_record(a) for a in attrs) + records


def compress_records(stream: bytes, chunk: int = 4096) -> bytes:
    """What perf record -z writes: the records compressed as one zstd stream, flushed (never ended)
    into COMPRESSED records of at most `chunk` input bytes each, so records straddle them."""
    import zstandard

    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    out = b""
    for start in range(0, len(stream), chunk):
        payload = compressor.compress(stream[start:start + chunk])
        payload += compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        # perf splits payloads above a record's 64 KiB limit; small chunks keep these below it
        assert len(payload) + 8 < 65536
        out += record(COMPRESSED, payload)
    return out
