"""Hand-written CFI cases (this folder's .s/.c/.cc files, see README.md), built at test time with
gcc into a temporary folder and compared with readelf: `table` == -wF, `table --raw` == -wf.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fastunwind.cfi import Rule, RuleKind, UnwindInfo

from tests.support.paths import CASES_DIR
from tests.support.tools import assemble_source, assert_matches_readelf, run_fastunwind, run_readelf

# A linked variant gives the rows real addresses and lets ld rewrite .eh_frame (CIE merging,
# .eh_frame_hdr); -nostdlib -static -no-pie keeps absolute pointer encodings linkable. ld warns
# that _start is missing, which is harmless here.
LINK_BARE = ("--link", "-nostdlib", "-static", "-no-pie")

# (test id, source file, gcc flags)
CASES = [
    ("opcodes_gas", "opcodes_gas.s", ()),
    ("opcodes_gas-linked", "opcodes_gas.s", LINK_BARE),
    ("opcodes_escape", "opcodes_escape.s", ()),
    ("opcodes_escape-linked", "opcodes_escape.s", LINK_BARE),
    ("cfa_rule_transitions", "cfa_rule_transitions.s", ()),
    ("expressions", "expressions.s", ()),
    ("expressions_exotic", "expressions_exotic.s", ()),
    ("registers", "registers.s", ()),
    ("registers_out_of_range", "registers_out_of_range.s", ()),
    ("debug_frame_only", "debug_frame_only.s", ()),
    ("debug_frame_only-linked", "debug_frame_only.s", LINK_BARE),
    ("both_sections", "both_sections.s", ()),
    ("both_sections-linked", "both_sections.s", LINK_BARE),
    ("signal_frame", "signal_frame.s", ()),
    ("signal_frame-linked", "signal_frame.s", LINK_BARE),
    ("personality", "personality.s", ()),
    ("personality-linked", "personality.s", LINK_BARE),
    ("personality_2byte", "personality_2byte.s", ()),
    ("handwritten_eh_frame", "handwritten_eh_frame.s", ()),
    ("handwritten_eh_frame-linked", "handwritten_eh_frame.s", LINK_BARE),
    ("handwritten_debug_frame", "handwritten_debug_frame.s", ()),
    ("handwritten_debug_frame-linked", "handwritten_debug_frame.s", LINK_BARE),
    ("forward_cie_reference", "forward_cie_reference.s", ()),
    ("drap-O2", "drap.c", ("-O2",)),
    ("drap-O2-mstackrealign", "drap.c", ("-O2", "-mstackrealign")),
    ("drap-O0", "drap.c", ("-O0",)),
    ("drap-debug_frame", "drap.c", ("-O2", "-fomit-frame-pointer", "-g", "-fno-asynchronous-unwind-tables")),
    ("plt-pie", "plt_main.c", ("--link", "-O2")),
    ("plt-no-pie-now", "plt_main.c", ("--link", "-O2", "-no-pie", "-Wl,-z,now")),
    ("plt-ibt", "plt_main.c", ("--link", "-O2", "-fcf-protection=full", "-Wl,-z,ibtplt")),
    ("exceptions", "exceptions.cc", ("-O2",)),
]

# Every DW_CFA opcode of DWARF 5 (section 7.24, table 7.29) and the two GNU ones that x86-64
# code uses; DW_CFA_GNU_window_save is SPARC-only (AArch64 reuses it) and left out.
REQUIRED_OPCODES = {
    "DW_CFA_advance_loc", "DW_CFA_offset", "DW_CFA_restore", "DW_CFA_nop", "DW_CFA_set_loc",
    "DW_CFA_advance_loc1", "DW_CFA_advance_loc2", "DW_CFA_advance_loc4", "DW_CFA_offset_extended",
    "DW_CFA_restore_extended", "DW_CFA_undefined", "DW_CFA_same_value", "DW_CFA_register",
    "DW_CFA_remember_state", "DW_CFA_restore_state", "DW_CFA_def_cfa", "DW_CFA_def_cfa_register",
    "DW_CFA_def_cfa_offset", "DW_CFA_def_cfa_expression", "DW_CFA_expression",
    "DW_CFA_offset_extended_sf", "DW_CFA_def_cfa_sf", "DW_CFA_def_cfa_offset_sf",
    "DW_CFA_val_offset", "DW_CFA_val_offset_sf", "DW_CFA_val_expression",
    "DW_CFA_GNU_args_size", "DW_CFA_GNU_negative_offset_extended",
}


@pytest.fixture(scope="session")
def built_cases(tmp_path_factory):
    """Build each case once per session, on first use: {test id: path}."""
    built: dict[str, Path] = {}

    def build(case_id: str) -> Path:
        if case_id not in built:
            _, source, flags = next(case for case in CASES if case[0] == case_id)
            directory = tmp_path_factory.mktemp(case_id)
            compiler_flags = tuple(flags)
            if source.endswith(".cc"):
                compiler_flags += ("-x", "c++")
            built[case_id] = assemble_source(CASES_DIR / source, directory, compiler_flags,
                                             output_name=case_id + ("" if "--link" in flags else ".o"))
        return built[case_id]

    return build


# Cases where fastunwind deliberately differs from readelf (docs/DESIGN.md, "readelf quirks").
EXPECTED_DIVERGENCES = {
    # Registers above readelf's 126 named columns: readelf prints "bad register:" lines between
    # the rows and drops the rules; fastunwind refuses columns >= 128 as a classified error.
    "registers_out_of_range",
    # A .debug_frame FDE whose CIE comes later (DWARF 5 §6.4.1: the CIE pointer is a plain section
    # offset, no order required): readelf prints the CIE's length as the FDE's and evaluates the
    # FDE without the CIE's initial instructions (it reads forward CIEs without running them);
    # llvm-dwarfdump-14 rejects it ("unable to get CIE for FDE"). Checked against the spec below.
    "forward_cie_reference",
}


@pytest.mark.parametrize("mode", ["interp", "raw"])
@pytest.mark.parametrize("case_id", [case[0] for case in CASES if case[0] not in EXPECTED_DIVERGENCES])
def test_case_matches_readelf(built_cases, case_id, mode):
    assert_matches_readelf(built_cases(case_id), modes=(mode,))


def test_registers_out_of_range_are_a_classified_error(built_cases):
    path = built_cases("registers_out_of_range")
    raw = run_fastunwind(["table", "--raw", str(path)])
    assert raw.stdout == run_readelf(["--debug-dump=frames", path]).stdout  # listing, "bad register:" included
    assert raw.returncode == 1
    assert b"register 130 exceeds the limit of 128 columns" in raw.stderr


def test_forward_cie_reference_starts_from_the_cie_rules(built_cases):
    """The FDE's row is its CIE's initial rules (def_cfa rsp+8, ra at CFA-8) plus its own
    DW_CFA_undefined rbx, whatever the order of the two entries in the section."""
    info = UnwindInfo.open(built_cases("forward_cie_reference"))
    (section,) = info.sections
    (fde,) = section.fdes()
    assert fde.offset == 0 and fde.cie.offset == 0x20
    (row,) = section.rows(fde)
    assert row.cfa == Rule(RuleKind.CFA_REG_OFFSET, register=7, offset=8)
    assert row.registers == {3: Rule(RuleKind.UNDEFINED), 16: Rule(RuleKind.OFFSET, offset=-8)}


def test_every_cfa_opcode_is_covered(built_cases):
    """The README's claim, checked: readelf -wf of the cases shows every required opcode."""
    seen: set[str] = set()
    for case_id, _, _ in CASES:
        listing = run_readelf(["--debug-dump=frames", built_cases(case_id)]).stdout.decode()
        seen |= set(re.findall(r"\b(DW_CFA_\w+)", listing))
    assert REQUIRED_OPCODES <= seen, f"not covered: {sorted(REQUIRED_OPCODES - seen)}"
