"""Structural faults of an FDE table, found by check_fdes (native/core/check.c) on a hand-built
`.eh_frame` over hand-assembled code: overlapping FDEs, an empty range, a range outside the
executable segments; and FDEs whose first row is not a function's entry (a `.cold` part) checked
from that row."""

from __future__ import annotations

import array

import pytest

from fastunwind import _core
from tests.support.cfi_builder import (EH_FRAME, PE_absptr, FrameSection, advance_loc, def_cfa, def_cfa_offset, offset,
                                      gnu_args_size, restore, undefined)

CODE_START = 0x1000
# push rbx; pop rbx; ret (4 bytes: 0x1000..0x1003), then push rbp; sub rsp,8; ud2 (a .cold-like part)
CODE = bytes.fromhex("53 5b c3 90 55 4883ec08 0f0b")


def check(fdes: list[tuple[int, int, list[bytes]]], function_entries: tuple[int, ...] = (), code: bytes = CODE,
          foreign_entries: tuple[int, ...] = ()) -> dict[int, tuple[int, str, tuple[tuple[int, int, str, str], ...]]]:
    return {begin: (verdict, reason, findings) for begin, (verdict, reason, findings, _fields)
            in check_with_fields(fdes, function_entries, code, foreign_entries=foreign_entries).items()}


def check_with_fields(fdes: list[tuple[int, int, list[bytes]]], function_entries: tuple[int, ...] = (),
                      code: bytes = CODE, work: array.array[int] | None = None, foreign_entries: tuple[int, ...] = ()
                      ) -> dict[int, tuple[int, str, tuple[tuple[int, int, str, str], ...], dict[str, int]]]:
    """Per FDE start: verdict, reason, findings and the result's fields by name; `work` counts the
    decoded instructions interpreted; `foreign_entries`: addresses other FDEs enter."""
    work = array.array("Q", [0]) if work is None else work
    section = FrameSection(EH_FRAME, address=0x8000)
    cie = section.cie(augmentation="zR", fde_encoding=PE_absptr, instructions=[def_cfa(7, 8), offset(16, 1)])
    for begin, size, instructions in fdes:
        section.fde(cie, pc_begin=begin, pc_range=size, instructions=instructions)
    table = _core.CfiTable(section.build(), EH_FRAME, 0x8000)
    entries = [i for i in range(table.entry_count) if table.entry(i)["kind"] == 1]
    results, details, _uncovered, _called, _foreign = _core.check_fdes(
        table, array.array("I", entries).tobytes(), _core.check_overlaps(table), [(CODE_START, code)],
        [(CODE_START, code)], b"", array.array("Q", function_entries).tobytes(), table, None, work,
        array.array("Q", sorted(foreign_entries)).tobytes())
    fields = array.array("I", results)
    by_begin = {}
    for position, entry in enumerate(entries):
        reason, findings = next(((r, f) for p, r, f in details if p == position), ("", ()))
        names = _core.CHECK_RESULT_FIELD_NAMES
        by_name = dict(zip(names, fields[position * len(names):(position + 1) * len(names)]))
        by_begin[table.entry(entry)["pc_begin"]] = (by_name["verdict"], reason, findings, by_name)
    return by_begin


def test_correct_fde_agrees() -> None:
    verdict, reason, findings = check([(0x1000, 3, [advance_loc(1), def_cfa_offset(16), offset(3, 2),
                                                   advance_loc(1), def_cfa_offset(8)])])[0x1000]
    assert verdict == _core.CHECK_AGREE, (reason, findings)


def test_overlapping_fdes_are_mismatches_of_their_range() -> None:
    result = check([(0x1000, 3, [advance_loc(1), def_cfa_offset(16), advance_loc(1), def_cfa_offset(8)]),
                    (0x1002, 2, [])])
    for begin in (0x1000, 0x1002):
        verdict, _reason, findings = result[begin]
        assert verdict == _core.CHECK_MISMATCH
        assert findings[0][1] == _core.CHECK_WHAT_RANGE and findings[0][3].startswith("overlaps ")


def test_empty_range_and_range_outside_code() -> None:
    result = check([(0x1000, 0, []), (0x5000, 16, [])])
    assert result[0x1000][0] == _core.CHECK_MISMATCH and result[0x1000][2][0][3] == "empty range"
    assert result[0x5000][0] == _core.CHECK_MISMATCH and result[0x5000][2][0][3] == "outside executable code"


def test_part_that_starts_inside_a_function_is_checked_from_its_first_row() -> None:
    # 0x1004: CFA rsp+16 with rbx saved (as a .cold part's first row), then push rbp; sub rsp,8; ud2
    good = [def_cfa_offset(16), offset(3, 2), advance_loc(1), def_cfa_offset(24), advance_loc(4), def_cfa_offset(32)]
    verdict, reason, findings = check([(0x1004, 7, good)])[0x1004]
    assert verdict == _core.CHECK_AGREE, (reason, findings)
    wrong = [def_cfa_offset(16), offset(3, 2), advance_loc(1), def_cfa_offset(24), advance_loc(4), def_cfa_offset(40)]
    verdict, _reason, findings = check([(0x1004, 7, wrong)])[0x1004]
    assert verdict == _core.CHECK_MISMATCH
    assert [(address, declared, derived) for address, _what, declared, derived in findings] == [
        (0x1009, "rsp+40", "rsp+32")]


def test_nested_fdes_overlap_however_many_start_between() -> None:
    # an outer FDE over the whole code, five small ones inside it after a nested one: the lookback of
    # a few sorted neighbours cannot see the outer one from the last
    code_fdes = [(0x1000, 11, []), (0x1000, 1, [])] + [(0x1001 + k, 1, []) for k in range(5)] + [(0x1008, 1, [])]
    result = check(code_fdes)
    assert result[0x1008][0] == _core.CHECK_MISMATCH
    assert result[0x1008][2][0][3] == "overlaps 1000..100b"


def test_overlap_is_a_mismatch_even_where_the_code_is_undecided() -> None:
    # two FDEs over the .cold-like part whose first row is a CFA expression (not a starting state)
    expression_cfa = bytes([0x0f, 2, 0x77, 16])  # DW_CFA_def_cfa_expression: DW_OP_breg7 16
    result = check([(0x1004, 7, [expression_cfa]), (0x1005, 2, [])])
    verdict, reason, findings = result[0x1004]
    assert verdict == _core.CHECK_MISMATCH, reason
    assert findings[0][1] == _core.CHECK_WHAT_RANGE


def test_first_row_at_a_known_function_entry_is_checked_against_the_entry_state() -> None:
    # the same part as above, but 0x1004 is a function's entry (a symbol, a call target): its first
    # row (CFA rsp+16, rbx saved) is wrong there, and found at 0x1004
    good_as_part = [def_cfa_offset(16), offset(3, 2), advance_loc(1), def_cfa_offset(24), advance_loc(4),
                    def_cfa_offset(32)]
    verdict, _reason, findings = check([(0x1004, 7, good_as_part)], function_entries=(0x1004,))[0x1004]
    assert verdict == _core.CHECK_MISMATCH
    assert findings[0][0] == 0x1004 and findings[0][2:] == ("rsp+16", "rsp+8")


def test_code_no_path_reaches_is_counted() -> None:
    # ret; push rbx; pop rbx; ret: three instructions after the ret that nothing jumps to
    _verdict, _reason, _findings, fields = check_with_fields([(0x1000, 4, [])], code=bytes.fromhex("c3 53 5b c3"))[0x1000]
    assert fields["unreached"] == 3 and fields["agree"] == 1


def test_padding_after_the_last_instruction_is_not_unreached_code() -> None:
    # ret; int3; int3; nop; ud2
    verdict, reason, _findings, fields = check_with_fields([(0x1000, 6, [])], code=bytes.fromhex("c3 cc cc 90 0f0b"))[0x1000]
    assert verdict == _core.CHECK_AGREE, reason
    assert fields["unreached"] == 0 and fields["agree"] == 1


def test_outermost_frame_rows_are_skipped_not_agreed() -> None:
    # the return address undefined (as _start's): nothing to compare
    verdict, _reason, _findings, fields = check_with_fields([(0x1000, 3, [undefined(16)])])[0x1000]
    assert verdict == _core.CHECK_AGREE
    assert fields["skipped"] == 3 and fields["agree"] == 0


def test_identical_fdes_are_interpreted_once() -> None:
    # 200 copies of one FDE (as a hostile file over a huge function would have): one interpretation
    rows = [advance_loc(1), def_cfa_offset(16), offset(3, 2), advance_loc(1), def_cfa_offset(8)]
    work = array.array("Q", [0])
    check_with_fields([(0x1000, 3, rows)], work=work)
    once = work[0]
    work = array.array("Q", [0])
    results = check_with_fields([(0x1000, 3, rows)] * 200, work=work)
    assert work[0] == once == 3
    assert results[0x1000][0] == _core.CHECK_MISMATCH  # the copies overlap one another


def test_work_limit_makes_the_remaining_fdes_undecided() -> None:
    rows = [advance_loc(1), def_cfa_offset(16), offset(3, 2), advance_loc(1), def_cfa_offset(8)]
    work = array.array("Q", [_core.CHECK_MAX_FILE_INSTRUCTIONS])
    verdict, reason, _findings, _fields = check_with_fields([(0x1000, 3, rows)], work=work)[0x1000]
    assert verdict == _core.CHECK_UNDECIDED and reason.startswith("work limit: ")


def test_unreached_code_is_undecided_until_something_enters_it() -> None:
    # jmp 1f; push rbx; pop rbx; 1: ret -- the push and pop are reached only by a jump from elsewhere
    code = bytes.fromhex("eb02 53 5b c3")
    cfi = [advance_loc(3), def_cfa_offset(16), offset(3, 2), advance_loc(1), def_cfa_offset(8), restore(3)]
    verdict, reason, _findings = check([(0x1000, 5, cfi)], code=code)[0x1000]
    assert verdict == _core.CHECK_UNDECIDED
    assert reason == "2 instructions no path reaches were not checked (the first at 0x1002)"
    verdict, reason, findings = check([(0x1000, 5, cfi)], code=code, foreign_entries=(0x1002,))[0x1000]
    assert verdict == _core.CHECK_AGREE, (reason, findings)
    wrong = [advance_loc(3), def_cfa_offset(24), offset(3, 2), advance_loc(1), def_cfa_offset(8), restore(3)]
    verdict, _reason, findings = check([(0x1000, 5, wrong)], code=code, foreign_entries=(0x1002,))[0x1000]
    assert verdict == _core.CHECK_MISMATCH and findings[0][0] == 0x1003, "checked from the entry's declared row"


def test_landing_pad_entered_with_the_pushed_arguments_popped() -> None:
    # push rbx; push rax; push rax (two arguments); call; add rsp,16; pop rbx; ret; pad: pop rbx; ret
    # and the LSDA (at 0x1020, in the same segment): the call's range [3, 8) lands at the pad, 0x100e
    code = bytes.fromhex("53 50 50 e8f80f0000 4883c410 5b c3 5b c3").ljust(0x20, b"\xcc") + bytes.fromhex(
        "ff ff 01 04 03 05 0e 00")
    section = FrameSection(EH_FRAME, address=0x8000)
    cie = section.cie(augmentation="zLR", fde_encoding=PE_absptr, lsda_encoding=PE_absptr,
                      instructions=[def_cfa(7, 8), offset(16, 1)])
    rows = [advance_loc(1), def_cfa_offset(16), offset(3, 2), advance_loc(1), def_cfa_offset(24), advance_loc(1),
            def_cfa_offset(32), gnu_args_size(16), advance_loc(9), def_cfa_offset(16), gnu_args_size(0),
            advance_loc(1), def_cfa_offset(8), restore(3), advance_loc(1), def_cfa_offset(16), offset(3, 2),
            advance_loc(1), def_cfa_offset(8), restore(3)]
    section.fde(cie, pc_begin=0x1000, pc_range=0x10, lsda=0x1020, instructions=rows)
    table = _core.CfiTable(section.build(), EH_FRAME, 0x8000)
    entry = next(i for i in range(table.entry_count) if table.entry(i)["kind"] == 1)
    results, details, _uncovered, _called, _foreign = _core.check_fdes(
        table, array.array("I", [entry]).tobytes(), _core.check_overlaps(table), [(CODE_START, code)],
        [(CODE_START, code)], b"", b"", table, None, array.array("Q", [0]))
    fields = dict(zip(_core.CHECK_RESULT_FIELD_NAMES, array.array("I", results)))
    assert fields["verdict"] == _core.CHECK_AGREE, details
    assert fields["unreached"] == 0 and fields["agree"] == 9, "the pad's two instructions are checked too"


def test_code_addresses_named_come_out_once_each_in_address_order() -> None:
    """check_fdes' `uncovered` (code no FDE covers) and `called_non_entry` (call targets starting an
    FDE without an entry row) hold each address once, sorted, however often and in whatever order
    the batch's code names it (check.c collects them and looks them up once, in address order)."""
    def call(at: int, target: int) -> bytes:
        return b"\xe8" + (target - (at + 5)).to_bytes(4, "little", signed=True)
    uncovered_at, cold_at = 0x1030, 0x1020
    # 0x1000: calls to the code without CFI, to the .cold-like part twice, and to the first again
    first = call(0x1000, uncovered_at) + call(0x1005, cold_at) + call(0x100a, cold_at) + call(0x100f, uncovered_at)
    code = first + b"\xc3" + b"\x90" * (0x18 - len(first) - 1)
    code += call(0x1018, uncovered_at) + b"\xc3" + b"\x90" * 2  # 0x1018..0x1020: calls it too
    code += b"\x5b\xc3" + b"\x90" * 14  # 0x1020: pop rbx; ret under CFA rsp+16 (no entry row)
    code += b"\xc3"  # 0x1030: no FDE
    section = FrameSection(EH_FRAME, address=0x8000)
    cie = section.cie(augmentation="zR", fde_encoding=PE_absptr, instructions=[def_cfa(7, 8), offset(16, 1)])
    section.fde(cie, pc_begin=0x1000, pc_range=0x15, instructions=[])
    section.fde(cie, pc_begin=0x1018, pc_range=6, instructions=[])
    section.fde(cie, pc_begin=cold_at, pc_range=2, instructions=[def_cfa_offset(16), offset(3, 2)])
    table = _core.CfiTable(section.build(), EH_FRAME, 0x8000)
    entries = [i for i in range(table.entry_count) if table.entry(i)["kind"] == 1]
    _results, _details, uncovered, called, _foreign = _core.check_fdes(
        table, array.array("I", entries).tobytes(), _core.check_overlaps(table), [(CODE_START, code)],
        [(CODE_START, code)], b"", b"", table, None, array.array("Q", [0]))
    assert list(array.array("Q", uncovered)) == [uncovered_at]
    assert list(array.array("Q", called)) == [cold_at]


def test_overlaps_naming_no_fde_of_the_table_are_an_error() -> None:
    """check_fdes takes the overlaps as bytes: a partner that is no FDE of the table (out of range, or
    the CIE) is a ValueError naming it, never an index read outside the table."""
    section = FrameSection(EH_FRAME, address=0x8000)
    cie = section.cie(augmentation="zR", fde_encoding=PE_absptr, instructions=[def_cfa(7, 8), offset(16, 1)])
    section.fde(cie, pc_begin=0x1000, pc_range=3, instructions=[])
    table = _core.CfiTable(section.build(), EH_FRAME, 0x8000)
    entry = next(i for i in range(table.entry_count) if table.entry(i)["kind"] == 1)
    cie_entry = next(i for i in range(table.entry_count) if table.entry(i)["kind"] != 1)
    for partner in (table.entry_count, 0xfffffffe, cie_entry):
        overlaps = array.array("I", [0xffffffff] * table.entry_count)
        overlaps[entry] = partner
        with pytest.raises(ValueError, match=f"overlap partner {partner} of entry {entry}"):
            _core.check_fdes(table, array.array("I", [entry]).tobytes(), overlaps.tobytes(), [(CODE_START, CODE)],
                             [(CODE_START, CODE)], b"", b"", table, None, array.array("Q", [0]))
