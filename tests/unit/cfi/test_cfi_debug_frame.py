"""`.debug_frame` through UnwindInfo: a program compiled with -g -fno-asynchronous-unwind-tables
(its own functions described only in .debug_frame, the crt start-up code still in .eh_frame), the
same program stripped with its debug information moved to a separate file found through
`.gnu_debuglink` (GDB manual §18.3), and the debug file on its own.
"""

from __future__ import annotations

import shutil

import pytest

from fastunwind.cfi import DEBUG_FRAME, EH_FRAME, RuleKind, UnwindInfo
from fastunwind.errors import NoUnwindInfo

from tests.support.llvm_text import build_debug_frame_program

OWN_FUNCTIONS = ("main", "nested", "accumulate")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_debug_frame_program(tmp_path_factory.mktemp("debug_frame_program"))


def section_names(info):
    return [(section.name, section.kind) for section in info.sections]


def test_both_sections_present(built):
    info = UnwindInfo.open(built.program)
    assert section_names(info) == [(".eh_frame", EH_FRAME), (".debug_frame", DEBUG_FRAME)]
    assert all(section.path == str(built.program) for section in info.sections)
    assert info.eh_frame_hdr is not None


def test_own_functions_come_from_debug_frame_crt_from_eh_frame(built):
    info = UnwindInfo.open(built.program)
    for name in OWN_FUNCTIONS:
        section, fde, row = info.lookup(built.functions[name])
        assert section.name == ".debug_frame", name
        assert fde.pc_begin == built.functions[name]
        assert fde.cie.augmentation == "" and fde.cie.version in (1, 3, 4)
        # at the entry point: CFA = rsp+8, return address at CFA-8 (System V AMD64 ABI §3.2.2)
        assert row.cfa.describe() == "rsp+8"
        assert row.registers[16].describe() == "[CFA-8]"
    section, fde, row = info.lookup(built.functions["_start"])
    assert section.name == ".eh_frame"
    assert row.registers[16].kind == RuleKind.UNDEFINED  # _start: the outermost frame
    eh_frame = info.sections[0]
    for name in OWN_FUNCTIONS:
        with pytest.raises(NoUnwindInfo):
            eh_frame.lookup(built.functions[name])


def test_stripped_program_gets_debug_frame_from_the_debug_file(built):
    info = UnwindInfo.open(built.stripped)
    assert section_names(info) == [(".eh_frame", EH_FRAME), (".debug_frame", DEBUG_FRAME)]
    assert info.sections[0].path == str(built.stripped)
    assert info.sections[1].path == str(built.debug_file)
    reference = UnwindInfo.open(built.program)
    for name in OWN_FUNCTIONS + ("_start",):
        address = built.functions[name]
        section, fde, row = info.lookup(address)
        ref_section, ref_fde, ref_row = reference.lookup(address)
        assert section.name == ref_section.name
        assert (fde.offset, fde.pc_begin, fde.pc_end) == (ref_fde.offset, ref_fde.pc_begin, ref_fde.pc_end)
        assert row == ref_row
        if name in OWN_FUNCTIONS:
            assert section.path == str(built.debug_file)


def test_separate_debug_disabled(built):
    info = UnwindInfo.open(built.stripped, separate_debug=False)
    assert section_names(info) == [(".eh_frame", EH_FRAME)]
    with pytest.raises(NoUnwindInfo, match=f"no FDE covers 0x{built.functions['main']:x}"):
        info.lookup(built.functions["main"])


def test_debug_file_alone(built):
    info = UnwindInfo.open(built.debug_file)
    assert section_names(info) == [(".debug_frame", DEBUG_FRAME)]  # its .eh_frame is SHT_NOBITS
    assert info.eh_frame_hdr is None and info.eh_frame_hdr_error
    assert info.lookup(built.functions["nested"])[1].pc_begin == built.functions["nested"]


@pytest.mark.parametrize("replacement", ["not an ELF file", "another ELF file (CRC mismatch)", "missing"])
def test_debuglink_to_a_wrong_or_missing_file_is_ignored(built, tmp_path, replacement):
    """.gnu_debuglink names the file and its CRC-32: a file of that name that is not ELF, or whose
    CRC differs, is not used; a missing one neither. The program still opens, with .eh_frame only."""
    stripped = tmp_path / built.stripped.name
    shutil.copy(built.stripped, stripped)
    candidate = tmp_path / built.debug_file.name
    if replacement == "not an ELF file":
        candidate.write_bytes(b"this is not ELF\n" * 64)
    elif replacement.startswith("another ELF"):
        shutil.copy(built.program, candidate)
    info = UnwindInfo.open(stripped)
    assert section_names(info) == [(".eh_frame", EH_FRAME)]
