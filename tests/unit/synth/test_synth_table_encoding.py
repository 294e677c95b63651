"""The synthesized table's `.debug_frame` encoding (native/core/synth_table.c) round-trips every kind
of rule: a declared FDE of hand-built CFI with every rule shape the DWARF table has (offsets that
do not factor by -8, a negative CFA offset, register, val_offset, expressions, undefined and same
value, a column above 63, DW_CFA_restore back to no rule) is encoded in the view and parsed back to
the same rows."""

from __future__ import annotations

import array

import pytest

from fastunwind import _core
from fastunwind.cfi import DEBUG_FRAME as CORE_DEBUG_FRAME
from fastunwind.cfi import EH_FRAME as CORE_EH_FRAME
from tests.support import cfi_builder as b

BREG7_16 = bytes([0x77, 0x10])  # DW_OP_breg7 (rsp) +16
BREG6_8_DEREF = bytes([0x76, 0x08, 0x06])  # DW_OP_breg6 (rbp) +8; DW_OP_deref


def section() -> bytes:
    frame = b.FrameSection(b.EH_FRAME, address=0x2000)
    cie = frame.cie(augmentation="zR", fde_encoding=b.PE_pcrel | b.PE_sdata4, code_align=1, data_align=-1,
                    instructions=[b.def_cfa(7, 8), b.offset(16, 8)])
    frame.fde(cie, pc_begin=0x1000, pc_range=0x100, instructions=[
        b.advance_loc(1), b.def_cfa_offset(13),            # a CFA offset that -8 does not factor
        b.offset(3, 11),                                   # rbx at CFA-11
        b.advance_loc(2), b.register(6, 12),               # rbp in r12
        b.val_offset(12, 24),                              # r12 = CFA-24
        b.expression(14, BREG7_16),                        # r14 at [rsp+16]
        b.advance_loc1(70), b.def_cfa_sf(6, 2),            # CFA = rbp-2 (factored by -1)
        b.undefined(15), b.same_value(13),
        b.offset_extended(70, 16),                         # a column past 63
        b.advance_loc1(200), b.def_cfa_expression(BREG6_8_DEREF),
        b.val_expression(3, BREG7_16),
        b.advance_loc2(300), b.def_cfa(7, 8), b.restore(3), b.restore(6), b.restore_extended(70),
        b.advance_loc(1),                                  # an advance with no change: a row as readelf prints it
    ])
    frame.fde(cie, pc_begin=0x1200, pc_range=0x10, instructions=[b.nop(), b.nop()])  # nops only: no rows shown
    return frame.build()


def rows(table: _core.CfiTable) -> list[list[tuple[int, object]]]:
    """Per FDE, its rows as (address, CFA, {column: rule}) with expressions as their bytes' text."""
    kinds, first_rows, counts, _begin, _range = table.entry_arrays()
    addresses = memoryview(table.rows()[0]).cast("Q")
    states = memoryview(table.rows()[1]).cast("I")
    first, count = memoryview(first_rows).cast("I"), memoryview(counts).cast("I")

    def rule(raw: tuple[int, int, int, int]) -> tuple[int, int, object]:
        kind, register, value, length = raw
        if length:
            return kind, register, table.format_expression(value, length, "llvm")
        return kind, register, value

    out = []
    for entry, kind in enumerate(kinds):
        if kind != 1:  # FDEs only
            continue
        fde = []
        for k in range(first[entry], first[entry] + count[entry]):
            cfa, columns = table.state(states[k])
            fde.append((addresses[k], rule(cfa), {column: rule(r) for column, r in columns}))
        out.append(fde)
    return out


@pytest.mark.parametrize("mode", [_core.SYNTH_MISSING, _core.SYNTH_REPAIR])
def test_every_rule_shape_round_trips(mode: int) -> None:
    original = _core.CfiTable(section(), CORE_EH_FRAME, 0x2000)
    encoded, ranges, uncovered, counts = _core.synth_table(original, None, [], [], b"", b"", b"", b"", b"", mode)
    assert uncovered == [] and counts["corrected_kept_declared"] == 0
    parsed = _core.CfiTable(encoded, CORE_DEBUG_FRAME, 0)
    assert parsed.error_count == 0, parsed.errors()
    assert rows(parsed) == rows(original)
    assert len(ranges) == 2 * 8 * len(_core.SYNTH_RANGE_FIELD_NAMES)


def test_the_nop_only_fde_prints_no_rows_as_readelf_prints_none() -> None:
    original = _core.CfiTable(section(), CORE_EH_FRAME, 0x2000)
    encoded = _core.synth_table(original, None, [], [], b"", b"", b"", b"", b"", _core.SYNTH_MISSING)[0]
    text = _core.CfiTable(encoded, CORE_DEBUG_FRAME, 0).render()
    assert text is not None
    assert text.rstrip().endswith(b"pc=0000000000001200..0000000000001210")


def test_code_without_cfi_found_from_two_starts_gives_no_overlapping_fdes() -> None:
    """A function symbol and a call target inside the same code without CFI: the first synthesized
    range ends where the second starts."""
    code = bytes([0x53,                    # 0x1000 push %rbx
                  0x48, 0x83, 0xEC, 0x10,  # 0x1001 sub $16, %rsp
                  0x48, 0x83, 0xC4, 0x10,  # 0x1005 add $16, %rsp
                  0x5B,                    # 0x1009 pop %rbx
                  0xC3])                   # 0x100a ret
    segments = [(0x1000, code)]
    uncovered = array.array("Q", [0x1000, 0x100B, 0x1005, 0x100B]).tobytes()  # (start, end) pairs
    encoded, ranges_bytes, results, _counts = _core.synth_table(None, None, segments, segments, b"", b"", b"", b"",
                                                                 uncovered, _core.SYNTH_MISSING)
    fields = len(_core.SYNTH_RANGE_FIELD_NAMES)
    values = memoryview(ranges_bytes).cast("Q")
    spans = [(values[i], values[i + 1]) for i in range(0, len(values), fields)]
    assert [decided for _s, _e, decided, _n, _r in results] == [True, True]
    assert spans[0] == (0x1000, 0x1005) and spans[1][0] == 0x1005, spans
    parsed = _core.CfiTable(encoded, CORE_DEBUG_FRAME, 0)
    _kinds, _first, _count, begin, length = parsed.entry_arrays()
    starts, lengths = memoryview(begin).cast("Q"), memoryview(length).cast("Q")
    fdes = sorted((starts[i], starts[i] + lengths[i]) for i in range(len(starts)) if lengths[i])
    assert all(a[1] <= b[0] for a, b in zip(fdes, fdes[1:])), fdes
