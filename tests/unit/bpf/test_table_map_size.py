"""table_map_size: the BPF table map sized from the tables in scope at the start of a recording (the
default of `record --bpf` without --table-mib): those and half as much again, rounded up to a MiB,
never below the default map, never above the named limit (table_map_limit: TABLE_MAP_LIMIT_MIB and
a share of the machine's memory)."""

from __future__ import annotations

import os

import pytest

from fastunwind import _core, bpf
from fastunwind.bpf import TableMap, table_map_limit, table_map_size

MIB = (1 << 20) // _core.BPF_SLOT_BYTES  #: slots in a MiB


def test_tables_that_fit_the_default_with_their_headroom_get_the_default() -> None:
    assert table_map_size(0) == TableMap(_core.BPF_DEFAULT_SLOTS, "default", 0)
    # 21 MiB and half again: 31.5, within the 32 of the default
    assert table_map_size(21 * MIB) == TableMap(_core.BPF_DEFAULT_SLOTS, "default", 21 * MIB)


def test_tables_past_the_default_get_half_as_much_again_rounded_up_to_a_mib() -> None:
    size = table_map_size(40 * MIB + 1, limit=1 << 30)
    assert size.chosen_by == "tables in scope" and size.in_scope_slots == 40 * MIB + 1
    assert size.slots == 61 * MIB  # 60 MiB and a slot and a half: the MiB above
    assert table_map_size(22 * MIB, limit=1 << 30).slots == 33 * MIB


def test_the_named_limit_holds() -> None:
    assert table_map_size(100 * MIB, limit=64 * MIB) == TableMap(64 * MIB, "limit", 100 * MIB)
    assert table_map_size(10**9).slots == table_map_limit()


def test_the_limit_is_the_named_mib_and_a_share_of_the_memory_at_least_the_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert table_map_limit() == max(_core.BPF_DEFAULT_SLOTS,
                                    min(bpf.TABLE_MAP_LIMIT_MIB * MIB, ram // bpf.TABLE_MAP_RAM_SHARE // 64))
    assert table_map_limit() * _core.BPF_SLOT_BYTES <= max(32 << 20, ram // bpf.TABLE_MAP_RAM_SHARE)
    monkeypatch.setattr(bpf, "TABLE_MAP_LIMIT_MIB", 1)
    assert table_map_limit() == _core.BPF_DEFAULT_SLOTS
