"""kept_mappings: the executable mappings of a process the BPF unwinder holds, past its bound
(_core.BPF_MAX_MAPPINGS) the program's own, then the largest, then the lowest; in address order."""

from __future__ import annotations

from fastunwind import _core
from fastunwind.address_space import Mapping
from fastunwind.bpf import kept_mappings

PAGE = 0x1000


def mapping(start: int, pages: int) -> Mapping:
    return Mapping(start, start + pages * PAGE, 0, f"/lib{start:x}.so", None, 0)


def test_within_the_bound_every_mapping_is_kept_in_address_order() -> None:
    mappings = [mapping(0x7000_0000 - i * 0x10000, 1 + i % 3) for i in range(_core.BPF_MAX_MAPPINGS)]
    assert kept_mappings(mappings, 0) == sorted(mappings, key=lambda m: m.start)


def test_past_the_bound_the_program_then_the_largest_then_the_lowest_are_kept() -> None:
    program = mapping(0x40_0000, 1)
    big = [mapping(0x7100_0000 + i * 0x100000, 16) for i in range(10)]
    small = [mapping(0x7000_0000 + i * 0x10000, 1) for i in range(_core.BPF_MAX_MAPPINGS)]
    kept = kept_mappings([*small, program, *big], program.start + 0x10)
    assert len(kept) == _core.BPF_MAX_MAPPINGS
    assert kept == sorted(kept, key=lambda m: m.start)
    assert program in kept and all(m in kept for m in big)
    # the small ones left out are the highest
    assert [m for m in small if m not in kept] == small[_core.BPF_MAX_MAPPINGS - 11:]
