"""The registers a walk starts from (perf_walk.c's extraction from a sample's REGS_USER block, with
a straight-line copy for perf's own mask): every DWARF register 0..16 takes the value of the perf
register of the same name, for perf's mask and for others, and registers the mask leaves out are
unknown."""
from __future__ import annotations

import pytest

from fastunwind import _core
from fastunwind.perf.data import PerfData

from tests.support import perf_builder as b

#: perf's x86-64 register numbering (arch/x86/include/uapi/asm/perf_regs.h)
PERF_NAMES = ["ax", "bx", "cx", "dx", "si", "di", "bp", "sp", "ip", "flags", "cs", "ss", "ds", "es", "fs", "gs",
              "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]
#: the perf register of each DWARF register 0..16
DWARF_NAMES = ["ax", "dx", "cx", "bx", "si", "di", "bp", "sp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
               "r15", "ip"]
PERF_DEFAULT_MASK = 0xff0fff  #: what `perf record --call-graph dwarf` samples on x86-64


def recording(mask: int) -> tuple[bytes, dict[str, int]]:
    """One sample whose register `name` holds a value that names it."""
    attr = b.Attr(sample_type=b.IP | b.TID | b.REGS_USER | b.STACK_USER, sample_regs_user=mask,
                  sample_stack_user=64)
    sampled = [name for bit, name in enumerate(PERF_NAMES) if mask >> bit & 1]
    values = {name: 0x1111_0000_0000_0000 * (1 + PERF_NAMES.index(name) % 15) + PERF_NAMES.index(name)
              for name in sampled}
    sample = b.sample_record(attr, ip=values.get("ip", 0), pid=1, tid=1, regs=[values[n] for n in sampled],
                             stack=bytes(64))
    return b.file_mode([attr], sample), values


@pytest.mark.parametrize("mask", [PERF_DEFAULT_MASK, 0xffffff, 0x1ff, 0xff01ff, 0xf000c1, 0x100])
def test_each_dwarf_register_takes_its_perf_register(mask):
    data, values = recording(mask)
    perf = PerfData.read(data)
    registers = _core.sample_walk_registers(perf.native, 0)
    assert registers == tuple(values.get(name) for name in DWARF_NAMES)


def test_a_sample_without_user_registers_has_none():
    attr = b.Attr(sample_type=b.IP | b.TID | b.REGS_USER, sample_regs_user=PERF_DEFAULT_MASK)
    perf = PerfData.read(b.file_mode([attr], b.sample_record(attr, ip=1, pid=1, tid=1)))
    assert _core.sample_walk_registers(perf.native, 0) == (None,) * 17
    with pytest.raises(IndexError):
        _core.sample_walk_registers(perf.native, 1)
