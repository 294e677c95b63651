"""Hostile input: truncations at every (or many) points and seeded random mutations of hand-built
and real recordings. The only acceptable failure is PerfDataError naming an offset; a crash, a hang or
any other exception fails. Mutations run in a subprocess with a timeout and print their seed; replay
with PERF_FUZZ_SEED=<seed>."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastunwind.errors import PerfDataError
from fastunwind.perf.data import PerfData

from tests.support import perf_builder as b
from tests.support import perf_oracle as oracle
from tests.support.paths import REPO_ROOT, SRC

MUTATIONS = int(os.environ.get("PERF_FUZZ_MUTATIONS", "300"))


def hand_built() -> dict[str, bytes]:
    attr = b.Attr(sample_type=(b.IDENTIFIER | b.IP | b.TID | b.TIME | b.CPU | b.PERIOD | b.READ | b.CALLCHAIN | b.RAW
                               | b.BRANCH_STACK | b.REGS_USER | b.STACK_USER | b.WEIGHT | b.AUX),
                  read_format=b.FMT_GROUP | b.FMT_ID | b.FMT_LOST, branch_sample_type=b.BRANCH_HW_INDEX,
                  sample_regs_user=0xff0fff, sample_stack_user=256, ids=[1, 2])
    other = b.Attr(sample_type=attr.sample_type, read_format=attr.read_format, branch_sample_type=b.BRANCH_HW_INDEX,
                   sample_regs_user=0xff0fff, ids=[3])
    records = (b.comm_record(attr, 1, 1, "sh", time=1, id_=1) + b.task_record(attr, b.FORK, 2, 1, 2, 1, time=2, id_=1)
               + b.mmap_record(attr, 2, 2, 0x400000, 0x1000, 0, "/bin/x", time=3, id_=3)
               + b.mmap2_record(attr, 2, 2, 0x7f0000000000, 0x2000, 0, "/lib/y.so", build_id=b"\x01" * 20, time=4)
               + b"".join(b.sample_record(attr if i % 2 else other, id=1 if i % 2 else 3, ip=0x400100 + i, pid=2,
                                          tid=2, time=10 + i, cpu=1, period=100, read=[1, 5, 1, 0],
                                          callchain=[0xfffffffffffffe00, 0xffffffff81000000 + i], raw=b"abcd",
                                          branches=[(1, 2, 3)], regs=list(range(20)), stack=bytes(range(64)) * 2,
                                          weight=3, aux=b"12345678") for i in range(6))
               + b.record(b.FINISHED_ROUND, b"") + b.task_record(attr, b.EXIT, 2, 1, 2, 1, time=30, id_=1))
    features = {b.FEAT_CMDLINE: b.cmdline_feature(["perf", "record"]),
                b.FEAT_EVENT_DESC: b.event_desc_feature([attr, other], ["a", "b"]),
                b.FEAT_BUILD_ID: b.build_id_record(-1, b"\x02" * 20, "[kernel.kallsyms]")}
    tracing = b.record(b.HEADER_TRACING_DATA, b"\x05\0\0\0") + b"xxxxx\0\0\0"
    return {
        "file": b.file_mode([attr, other], records, features),
        "pipe": b.pipe_mode([attr, other], tracing + records),
        "pipe_z": b.pipe_mode([attr, other], b.compress_records(records, chunk=300)),
        "file_z": b.file_mode([attr, other], b.compress_records(records, chunk=500), features),
    }


def parse_or_perf_error(data: bytes) -> None:
    try:
        perf = PerfData.read(data)
        for event in perf.events():
            if hasattr(event, "callchain"):
                event.callchain, event.stack, event.regs, event.extra()
    except PerfDataError as error:
        assert "perf.data+0x" in str(error), str(error)


@pytest.mark.parametrize("name", ["file", "pipe", "pipe_z", "file_z"])
def test_every_truncation_of_hand_built(name):
    data = hand_built()[name]
    PerfData.read(data)  # the untouched recording is valid
    for length in range(len(data)):
        parse_or_perf_error(data[:length])


@pytest.fixture(scope="module")
def small_recordings(tmp_path_factory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("perf_hostile")
    oracle.require_perf(tmp)
    dwarf = [*oracle.SAMPLING, "--call-graph", "dwarf,1024"]
    command = ["ls", "/"]
    paths = [oracle.record(tmp / "file.data", dwarf, command=command),
             oracle.record(tmp / "pipe.data", dwarf, pipe=True, command=command),
             oracle.record(tmp / "z.data", [*dwarf, "-z"], command=command),
             oracle.record(tmp / "pipe_z.data", [*dwarf, "-z"], pipe=True, command=command)]
    for name, data in hand_built().items():
        path = tmp / f"hand_{name}.data"
        path.write_bytes(data)
        paths.append(path)
    return paths


def test_many_truncations_of_real_recordings(small_recordings):
    for path in small_recordings[:4]:
        data = path.read_bytes()
        points = set(range(min(len(data), 400))) | {len(data) * k // 400 for k in range(400)}
        for length in sorted(points):
            parse_or_perf_error(data[:length])


def test_seeded_mutations_only_raise_perf_data_error(small_recordings):
    seed = int(os.environ.get("PERF_FUZZ_SEED", time.time_ns() % 1_000_000_007))
    print(f"perf.data mutation seed: {seed} (replay with PERF_FUZZ_SEED={seed})")
    result = subprocess.run([sys.executable, "-m", "tests.support.perf_mutation_worker", str(seed), str(MUTATIONS),
                             *map(str, small_recordings)], capture_output=True, text=True, timeout=300, check=False,
                            cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(SRC)})
    print(result.stdout[-2000:])
    assert result.returncode == 0, f"seed {seed}: {result.stdout[-3000:]}{result.stderr[-3000:]}"


def test_empty_and_tiny_inputs(tmp_path):
    for data in (b"", b"P", b"PERFILE2", b"PERFILE2" + bytes(8), b"PERFILE2" + b"\x10" + bytes(7) + b"\x01"):
        with pytest.raises(PerfDataError):
            PerfData.read(data)
    empty = tmp_path / "empty.data"
    empty.write_bytes(b"")
    with pytest.raises(PerfDataError, match="empty file"):
        PerfData.open(empty)
    # a pipe header alone is a valid, empty recording
    assert PerfData.read(b"PERFILE2" + b"\x10" + bytes(7)).sample_count == 0
