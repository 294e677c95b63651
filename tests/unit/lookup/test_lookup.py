"""CfiSection.lookup over several hand-built FDEs: ranges, empty ranges, overlaps, and the row
chosen inside an FDE.
"""

from __future__ import annotations

import pytest

from fastunwind.errors import NoUnwindInfo

from tests.support.cfi_eval import (
    EH_FRAME, SECTION_ADDRESS, FrameSection, advance_loc, cfa, def_cfa, def_cfa_offset, offset, parse_section,
)


@pytest.fixture(scope="module")
def section():
    builder = FrameSection(EH_FRAME, SECTION_ADDRESS)
    cie = builder.cie(augmentation="zR", instructions=[def_cfa(7, 8), offset(16, 1)])
    builder.fde(cie, pc_begin=0x1000, pc_range=0x100, instructions=[def_cfa_offset(16)])
    builder.fde(cie, pc_begin=0x1080, pc_range=0x10, instructions=[def_cfa_offset(32)])   # inside the first
    builder.fde(cie, pc_begin=0x2000, pc_range=0, instructions=[def_cfa_offset(48)])      # empty range
    builder.fde(cie, pc_begin=0x3000, pc_range=0x10, instructions=[def_cfa_offset(64)])
    builder.fde(cie, pc_begin=0x3000, pc_range=0x20, instructions=[def_cfa_offset(80)])   # same start
    builder.fde(cie, pc_begin=0x4000, pc_range=0x40,
                instructions=[advance_loc(0x10), def_cfa_offset(24), advance_loc(0x10), def_cfa_offset(8)])
    return parse_section(builder)


def cfa_offset_at(section, address):
    return section.lookup(address)[1].cfa.offset


@pytest.mark.parametrize("address, expected", [
    (0x1000, 16), (0x107F, 16),
    (0x1080, 32), (0x108F, 32),       # the FDE that starts last wins where two overlap
    (0x4000, 8), (0x400F, 8), (0x4010, 24), (0x401F, 24), (0x4020, 8), (0x403F, 8),
])
def test_lookup(section, address, expected):
    assert cfa_offset_at(section, address) == expected


@pytest.mark.parametrize("address", [0x0FFF, 0x1100, 0x2000, 0x2001, 0x4040, 0xFFFF_FFFF_FFFF_FFFF])
def test_not_covered(section, address):
    with pytest.raises(NoUnwindInfo, match=f"no FDE in .eh_frame covers 0x{address:x}"):
        section.lookup(address)


def test_nested_fde_shadows_the_outer_one_after_its_end(section):
    """Pinned: the index keeps FDEs sorted by start and checks only the last one starting at or
    below the address, as a binary search over .eh_frame_hdr does (libgcc's
    unwind-dw2-fde.c binary_search_*_fdes fails the same way): 0x1090-0x10ff is inside the first FDE
    but answers NoUnwindInfo because the nested FDE [0x1080, 0x1090) starts later. Overlapping FDEs
    are a toolchain bug; this records what is answered."""
    for address in (0x1090, 0x10FF):
        with pytest.raises(NoUnwindInfo):
            section.lookup(address)


def test_same_start_later_entry_wins(section):
    """Two FDEs with one initial location: the one later in the section is in the index last."""
    fde, row = section.lookup(0x3000)
    assert (fde.pc_end, row.cfa) == (0x3020, cfa(7, 80))
    assert cfa_offset_at(section, 0x301F) == 80


def test_empty_fde_is_not_indexed_but_listed(section):
    empty = [fde for fde in section.fdes() if fde.pc_begin == 0x2000]
    assert len(empty) == 1 and empty[0].pc_end == 0x2000
    assert section._table.indexed_fde_count == 5
