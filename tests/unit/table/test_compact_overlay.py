"""Compact tables with rows derived from the code laid over the declared ones
(compact_table.h, fu_compact_overlay_of_table): libc's own .eh_frame given as the view, its FDEs
marked corrected or synthesized, must change the rules' origins exactly where the overlay applies
and nothing else; a table's header and rules say what it holds, and bad overlays are refused."""

from __future__ import annotations

import array

import pytest

from fastunwind import _core
from fastunwind.address_space import ModuleImage
from fastunwind.cfi import ENTRY_FDE
from fastunwind.errors import CompactTableError

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
REPAIR = _core.COMPACT_SYNTH_MODES.index("repair") | _core.COMPACT_SYNTH_VERSION << 8


@pytest.fixture(scope="module")
def libc() -> ModuleImage:
    return ModuleImage.load(LIBC)


def _table(image: ModuleImage, origin: int | None) -> _core.CompactTable:
    kind, key = image.cache_key()
    if origin is None:
        return _core.CompactTable(_core.build_compact_table(image.eh_frame, image.debug_frame, kind, key))
    view = image.eh_frame
    fdes = sum(1 for k in view.entry_arrays()[0] if k == ENTRY_FDE)
    return _core.CompactTable(_core.build_compact_table(image.eh_frame, image.debug_frame, kind, key, view,
                                                        bytes([origin]) * fdes, REPAIR))


def _rules(table: _core.CompactTable) -> list[tuple[int, dict[str, object]]]:
    starts, rules = array.array("Q", table.rows()[0]), array.array("I", table.rows()[1])
    return [(start, table.rule(rule)) for start, rule in zip(starts, rules)]


def test_corrected_rows_restate_the_declared_ones_with_their_origin(libc) -> None:
    plain, corrected = _table(libc, None), _table(libc, _core.COMPACT_ORIGIN_CORRECTED)
    assert plain.synth == 0 and corrected.synth == REPAIR
    assert plain.origin_rows == (plain.row_count, 0, 0)
    assert corrected.origin_rows[_core.COMPACT_ORIGIN_CORRECTED] > 20_000
    assert sum(corrected.origin_rows) == corrected.row_count
    # every row's rule is the plain table's rule at the same address but for its origin; rows the
    # overlay does not admit (no info, slow rows, the signal context, undefined return addresses)
    # stay declared
    plain_rule = {start: rule for start, rule in _rules(plain)}
    for start, rule in _rules(corrected):
        declared = plain.rule(plain.lookup(start)[1])
        origin = rule.pop("origin")
        assert rule == {k: v for k, v in declared.items() if k != "origin"}, hex(start)
        if origin == _core.COMPACT_ORIGIN_DECLARED:
            assert declared["cfa"] in ("no_info", "slow", "signal_context", "plt", "deref") or declared["ra_offset"] is None
    assert len(plain_rule) <= corrected.row_count


def test_synthesized_rows_apply_only_where_no_declared_row_does(libc) -> None:
    synthesized = _table(libc, _core.COMPACT_ORIGIN_SYNTHESIZED)
    assert synthesized.origin_rows[1:] == (0, 0)  # libc's view covers only what libc's CFI covers


def test_bad_views_are_refused(libc) -> None:
    kind, key = libc.cache_key()
    with pytest.raises(ValueError, match="synth mode"):
        _core.build_compact_table(libc.eh_frame, None, kind, key, libc.eh_frame, b"")
    with pytest.raises(ValueError, match="synth mode"):
        _core.build_compact_table(libc.eh_frame, None, kind, key, None, b"", REPAIR)
    with pytest.raises(ValueError, match="no origin"):
        _core.build_compact_table(libc.eh_frame, None, kind, key, libc.eh_frame, b"\x01", REPAIR)
    with pytest.raises(ValueError, match="synth mode 3"):
        _core.build_compact_table(libc.eh_frame, None, kind, key, libc.eh_frame, b"\x02" * 5000, 3)
    missing = _core.COMPACT_SYNTH_MODES.index("missing") | _core.COMPACT_SYNTH_VERSION << 8
    with pytest.raises(ValueError, match="origin this mode does not lay over"):
        _core.build_compact_table(libc.eh_frame, None, kind, key, libc.eh_frame, b"\x01" * 5000, missing)


def test_a_table_whose_rows_by_origin_do_not_add_up_is_rejected(libc) -> None:
    data = bytearray(_core.build_compact_table(libc.eh_frame, libc.debug_frame, *libc.cache_key()))
    # origin_row_count[1] sits after covered_bytes: find it from the header layout's end
    offset = _core.COMPACT_HEADER_SIZE - 8 * 3 - 4 - 4 * 3 + 4
    data[offset] ^= 1
    with pytest.raises(CompactTableError, match="rows by origin"):
        _core.CompactTable(bytes(data))
