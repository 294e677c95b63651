"""A damaged `.eh_frame_hdr` must not cost correct answers: UnwindInfo records why it is not used
(`eh_frame_hdr_error`) and looks FDEs up through the index built from `.eh_frame` instead.
"""

from __future__ import annotations

import pytest

from fastunwind.cfi import UnwindInfo
from fastunwind.errors import NoUnwindInfo

from tests.support.llvm_text import build_debug_frame_program


def _damaged_copy(program, output, patch):
    from elftools.elf.elffile import ELFFile

    with open(program, "rb") as stream:
        offset = ELFFile(stream).get_section_by_name(".eh_frame_hdr")["sh_offset"]
    data = bytearray(program.read_bytes())
    patch(data, offset)
    output.write_bytes(bytes(data))
    return output


def _swap_first_entries(data, at):
    """The table starts 12 bytes in (4 header bytes, eh_frame_ptr and fde_count as 4 bytes each)."""
    first, second = bytes(data[at + 12:at + 20]), bytes(data[at + 20:at + 28])
    data[at + 12:at + 28] = second + first


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_debug_frame_program(tmp_path_factory.mktemp("hdr_fallback"))


@pytest.mark.parametrize("name, patch, reason", [
    ("version", lambda data, at: data.__setitem__(at, 7), "unsupported version 7"),
    ("table encoding", lambda data, at: data.__setitem__(at + 3, 0x03), "table encoding 0x03 is not datarel|sdata4"),
    ("eh_frame_ptr", lambda data, at: data.__setitem__(at + 4, data[at + 4] ^ 0x40), "is not .eh_frame's address"),
    ("unsorted", lambda data, at: _swap_first_entries(data, at), "table not sorted"),
])
def test_damaged_hdr_falls_back_to_the_linear_index(built, tmp_path, name, patch, reason):
    reference = UnwindInfo.open(built.program)
    damaged = UnwindInfo.open(_damaged_copy(built.program, tmp_path / "damaged", patch))
    assert damaged.eh_frame_hdr is None
    assert reason in damaged.eh_frame_hdr_error
    for address in built.functions.values():
        section, fde, row = damaged.lookup(address)
        ref_section, ref_fde, ref_row = reference.lookup(address)
        assert (section.name, fde.offset, row) == (ref_section.name, ref_fde.offset, ref_row)


def test_incomplete_hdr_hides_an_fde_like_it_would_from_the_runtime(built, tmp_path):
    """Pinned: a well-formed table that lacks an FDE (here the first entry overwritten by the
    second) is still used, so UnwindInfo.lookup misses that FDE, as libgcc's hdr search would;
    CfiSection.lookup (the linear index) still finds it. The entry count is not checked against the
    number of FDEs in .eh_frame."""
    def duplicate_second_entry(data, at):
        data[at + 12:at + 20] = data[at + 20:at + 28]

    damaged = UnwindInfo.open(_damaged_copy(built.program, tmp_path / "incomplete", duplicate_second_entry))
    assert damaged.eh_frame_hdr is not None and damaged.eh_frame_hdr_error is None
    eh_frame = damaged.sections[0]
    first = min(eh_frame.fdes(), key=lambda fde: fde.pc_begin)
    assert eh_frame.lookup(first.pc_begin)[0].offset == first.offset
    with pytest.raises(NoUnwindInfo):
        damaged.lookup(first.pc_begin)
