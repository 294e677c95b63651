"""Hand-built `.eh_frame_hdr` sections through EhFrameHdr.parse (LSB 5.0 §10.6.2):

    u8 version (1) | u8 eh_frame_ptr_enc | u8 fde_count_enc | u8 table_enc
    encoded eh_frame_ptr | encoded fde_count | fde_count x (initial_location, FDE address)

Table entries are DW_EH_PE_datarel relative to the start of .eh_frame_hdr. The real files' tables are
compared with llvm-readelf in tests/golden/test_cfi_real_binaries.py.
"""

from __future__ import annotations

import struct

import pytest

from fastunwind.cfi import EhFrameHdr
from fastunwind.errors import CfiError

from tests.support.cfi_builder import PE_datarel, PE_omit, PE_pcrel, PE_sdata4, PE_udata4, PE_udata8, PE_uleb128, uleb128

HDR = 0x3000
EH_FRAME = 0x3100
EH_FRAME_SIZE = 0x100
ENTRIES = [(0x1000, 0x3118), (0x1100, 0x3140), (0x1180, 0x3160)]


def build(entries=ENTRIES, *, version=1, ptr_encoding=PE_pcrel | PE_sdata4, count_encoding=PE_udata4,
          table_encoding=PE_datarel | PE_sdata4, eh_frame_ptr=EH_FRAME, count=None) -> bytes:
    data = bytes([version, ptr_encoding, count_encoding, table_encoding])
    if ptr_encoding == PE_pcrel | PE_sdata4:
        data += struct.pack("<i", eh_frame_ptr - (HDR + 4))
    elif ptr_encoding == PE_udata8:
        data += struct.pack("<Q", eh_frame_ptr)
    n = len(entries) if count is None else count
    if count_encoding == PE_udata4:
        data += struct.pack("<I", n)
    elif count_encoding == PE_uleb128:
        data += uleb128(n)
    for location, fde in entries:
        data += struct.pack("<ii", location - HDR, fde - HDR)
    return data


def parse(data, eh_frame=EH_FRAME, size=EH_FRAME_SIZE):
    return EhFrameHdr.parse(data, HDR, eh_frame, size)


def test_what_ld_writes():
    """ld writes 1, 0x1b (pcrel|sdata4), 0x03 (udata4), 0x3b (datarel|sdata4)."""
    hdr = parse(build())
    assert (hdr.address, hdr.eh_frame_ptr, hdr.table_encoding) == (HDR, EH_FRAME, 0x3B)
    assert list(hdr.locations) == [location for location, _ in ENTRIES]
    assert list(hdr.fde_addresses) == [fde for _, fde in ENTRIES]


def test_other_header_encodings():
    hdr = parse(build(ptr_encoding=PE_udata8, count_encoding=PE_uleb128))
    assert hdr.eh_frame_ptr == EH_FRAME and len(hdr.locations) == 3


def test_find_is_a_binary_search_by_initial_location():
    """find(): the entry with the last initial location <= address; whether that FDE covers the
    address is the caller's check (it needs the FDE's range)."""
    hdr = parse(build())
    assert hdr.find(0x0FFF) is None
    assert hdr.find(0x1000) == 0x3118
    assert hdr.find(0x10FF) == 0x3118
    assert hdr.find(0x1100) == 0x3140
    assert hdr.find(0x117F) == 0x3140
    assert hdr.find(0xFFFF_FFFF) == 0x3160


def test_empty_table():
    hdr = parse(build([]))
    assert len(hdr.locations) == 0 and hdr.find(0x1000) is None


def test_entries_below_the_header():
    """Entries are signed offsets from the header: code below .eh_frame_hdr is the usual case."""
    entries = [(0x10, 0x3118), (HDR + 0x10, 0x3140)]
    assert list(parse(build(entries)).locations) == [0x10, HDR + 0x10]


@pytest.mark.parametrize("options, message", [
    pytest.param({"version": 2}, r"\.eh_frame_hdr: unsupported version 2", id="version"),
    pytest.param({"table_encoding": PE_udata4}, r"table encoding 0x03 is not datarel\|sdata4", id="table encoding"),
    pytest.param({"count_encoding": PE_omit}, r"no search table \(count encoding 0xff", id="no table"),
    pytest.param({"table_encoding": PE_omit}, r"no search table", id="table omitted"),
    pytest.param({"count": 1000}, r"1000 entries do not fit in the 24 bytes left", id="count too large"),
    pytest.param({"eh_frame_ptr": 0x3200}, r"eh_frame_ptr 0x3200 is not \.eh_frame's address 0x3100", id="eh_frame_ptr"),
    pytest.param({"entries": [(0x1100, 0x3118), (0x1000, 0x3140)]}, r"table not sorted at entry 1", id="unsorted"),
    pytest.param({"entries": [(0x1000, 0x3118), (0x1100, 0x3200)]}, r"entry 1 points at 0x3200, outside \.eh_frame",
                 id="FDE address past .eh_frame"),
    pytest.param({"entries": [(0x1000, 0x30F0)]}, r"entry 0 points at 0x30f0, outside \.eh_frame",
                 id="FDE address before .eh_frame"),
])
def test_invalid_headers_are_named_errors(options, message):
    with pytest.raises(CfiError, match=message):
        parse(build(**options))


def test_truncated_header():
    with pytest.raises(CfiError, match=r"\.eh_frame_hdr: truncated header \(2 bytes\)"):
        parse(b"\x01\x1b")
    with pytest.raises(CfiError, match=r"bad eh_frame_ptr"):
        parse(b"\x01\x1b\x03\x3b\x00\x00")


def test_without_eh_frame_bounds_nothing_is_checked_against_it():
    hdr = EhFrameHdr.parse(build(eh_frame_ptr=0x9000, entries=[(0x1000, 0x9999)]), HDR)
    assert (hdr.eh_frame_ptr, list(hdr.fde_addresses)) == (0x9000, [0x9999])
