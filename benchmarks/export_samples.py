"""Export the user samples of a perf.data recording to a flat file the peer harnesses can read.

    .venv/bin/python -m benchmarks.export_samples RECORDING.data OUT.samples

The recording is replayed with fastunwind's own API, as `perf_script.unwind_recording` does
(`PerfData` in time order, `PerfSession` for MMAP/COMM/FORK), so the peers (libunwind, libdw, the
frame-pointer walk in benchmarks/peers/) unwind exactly the samples, registers, stack bytes and
address spaces that fastunwind's walker gets. Only samples with user registers (rip and rsp) are
written.

File format, version 1, every integer little-endian, no padding:

    header   char magic[8] = "FUSAMPLE"; u32 version = 1; u32 space_count; u32 sample_count;
             u32 register_count = 17; u64 stack_bytes (sum of every sample's stack_size)
    space    u32 mapping_count, then mapping_count times:
               u64 start; u64 end          avma range of the executable mapping
               u64 pgoff                   file offset mapped at start
               u64 bias                    avma = svma + bias (address_space.py)
               u32 flags                   MAPPING_USABLE: fastunwind read the file and its build-id
                                           matches the recording; the peers use the others for nothing
               u32 path_length; path bytes (no NUL)
    sample   u32 space                     index of its address space
             u32 register_valid            bit n: registers[n] was sampled
             u32 perf_sample_index         index in PerfData's time order (for agreement checks)
             u32 tid
             u64 registers[17]             DWARF x86-64 numbering: rax rdx rcx rbx rsi rdi rbp rsp
                                           r8..r15 rip (System V AMD64 ABI, figure 3.36)
             u64 stack_address             the sampled rsp: avma of the dump's first byte
             u64 stack_size                valid bytes of the dump (perf's dyn_size)
             stack bytes
"""

from __future__ import annotations

import argparse
import array
import os
import struct
import sys
from dataclasses import dataclass
from typing import BinaryIO

from fastunwind import _core
from fastunwind.address_space import AddressSpace
from fastunwind.perf.data import PerfData, Sample
from fastunwind.perf.script import RECORD_HINT
from fastunwind.perf.replay import NO_SPACE, Replay, replay

MAGIC = b"FUSAMPLE"
VERSION = 1
MAPPING_USABLE = 1
#: perf register names of the DWARF registers 0..16 (native/core/x86_64.h)
DWARF_REGISTERS = tuple(_core.PERF_REGISTER_NAMES[_core.PERF_REGISTER_DWARF.index(dwarf)]
                        for dwarf in range(_core.WALK_REGISTERS))
REGISTER_SP = _core.REG_RSP
@dataclass
class Exported:
    """A recording replayed (fastunwind.perf_session.replay) and the samples worth exporting: those
    with the user IP and SP."""

    perf: PerfData
    replayed: Replay

    @property
    def spaces(self) -> list[AddressSpace]:
        return self.replayed.session.spaces

    @property
    def samples(self) -> list[Sample]:
        return self.replayed.samples

    @property
    def space_ids(self) -> array.array:
        return self.replayed.space_ids

    def exported(self) -> list[int]:
        return [index for index, sample in enumerate(self.replayed.samples)
                if self.replayed.space_ids[index] != NO_SPACE
                and sample.reg("ip") is not None and sample.reg("sp") is not None]


def replay_recording(path: str) -> Exported:
    perf = PerfData.open(path)
    if not perf.has_user_stacks:
        raise SystemExit(f"{path}: the recording has no user registers and stack dumps; {RECORD_HINT}")
    return Exported(perf, replay(perf))


def write_samples(replay_: Exported, out: BinaryIO) -> dict[str, int]:
    exported = replay_.exported()
    stacks = [replay_.samples[index].stack for index in exported]
    out.write(MAGIC + struct.pack("<IIIIQ", VERSION, len(replay_.spaces), len(exported), len(DWARF_REGISTERS),
                                  sum(map(len, stacks))))
    usable = 0
    for space in replay_.spaces:
        out.write(struct.pack("<I", len(space.mappings)))
        for mapping in space.mappings:
            path = os.fsencode(mapping.path)
            flags = MAPPING_USABLE if mapping.image is not None else 0
            usable += flags
            out.write(struct.pack("<QQQQII", mapping.start, mapping.end, mapping.pgoff, mapping.bias & (2**64 - 1),
                                  flags, len(path)) + path)
    for index, stack in zip(exported, stacks):
        sample = replay_.samples[index]
        regs = sample.regs
        values = [regs.get(name) for name in DWARF_REGISTERS]
        valid = sum(1 << n for n, value in enumerate(values) if value is not None)
        out.write(struct.pack("<IIII17QQQ", replay_.space_ids[index], valid, index, sample.tid & 0xFFFFFFFF,
                              *[value or 0 for value in values], values[REGISTER_SP], len(stack)))
        out.write(stack)
    return {"samples": len(exported), "spaces": len(replay_.spaces), "usable_mappings": usable,
            "stack_bytes": sum(map(len, stacks))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write the user samples of a perf.data recording (registers, stack dumps, address spaces) "
                    "to a flat file for the peer unwinders in benchmarks/peers/.",
        epilog="example: .venv/bin/python -m benchmarks.export_samples hackbench.data /tmp/hackbench.samples")
    parser.add_argument("recording")
    parser.add_argument("out")
    arguments = parser.parse_args(argv)
    with open(arguments.out, "wb") as out:
        summary = write_samples(replay_recording(arguments.recording), out)
    print(f"{arguments.out}: {summary['samples']} samples, {summary['spaces']} address spaces, "
          f"{summary['usable_mappings']} usable mappings, {summary['stack_bytes']} stack bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
