"""UnwindInfo / CfiSection / EhFrameHdr on the system's libc and dynamic loader.

* lookup() at every row start of a sample of FDEs agrees with CfiSection.rows();
* lookups through `.eh_frame_hdr` (UnwindInfo.lookup) agree with the linear index built from
  `.eh_frame` (CfiSection.lookup) for thousands of random addresses (fixed, printed seed) and at every
  FDE boundary;
* EhFrameHdr.parse agrees entry by entry with `llvm-readelf-14 --unwind`;
* addresses in gaps between FDEs raise NoUnwindInfo;
* row_arrays() sizes and invariants;
* the PLT FDE and the signal trampoline (`__restore_rt`) FDE: rows, CFA and register rules compared
  with `llvm-dwarfdump-14 --eh-frame` (Rule.describe() and to_json()["text"]). Every row of every FDE
  against llvm-dwarfdump is tests/golden/test_llvm_dwarfdump_rows.py's job.
"""

from __future__ import annotations

import os
import random

import pytest

from fastunwind import _core
from fastunwind.cfi import EH_FRAME, EhFrameHdr, UnwindInfo
from fastunwind.elf import ElfFile
from fastunwind.errors import NoUnwindInfo

from tests.support.llvm_text import (
    LD_SO, LIBC, LLVM_DWARFDUMP, LLVM_READELF, assert_rows_match_llvm, llvm_eh_frame_hdr, llvm_fdes, require,
)

FILES = [pytest.param(LIBC, id="libc"), pytest.param(LD_SO, id="ld.so")]
SEED = int(os.environ.get("FASTUNWIND_API_SEED", "20250611"))
RANDOM_ADDRESSES = 4000


@pytest.fixture(scope="module", params=FILES)
def opened(request):
    path = request.param
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    info = UnwindInfo.open(path)
    eh_frame = next(section for section in info.sections if section.kind == EH_FRAME)
    return path, info, eh_frame


def comparable(fde, row):
    return (fde.offset, row.start, row.end, row.cfa, dict(row.registers))


def test_open_uses_the_eh_frame_hdr(opened):
    path, info, eh_frame = opened
    assert info.eh_frame_hdr is not None, info.eh_frame_hdr_error
    assert info.eh_frame_hdr_error is None
    assert eh_frame.errors == []
    assert len(info.eh_frame_hdr.locations) == sum(1 for _ in eh_frame.fdes())


def test_lookup_at_every_row_start_agrees_with_rows(opened):
    path, info, eh_frame = opened
    fdes = list(eh_frame.fdes())
    checked = 0
    for fde in fdes[::5]:
        rows = eh_frame.rows(fde)
        assert rows[0].start == fde.pc_begin and rows[-1].end == fde.pc_end
        for index, row in enumerate(rows):
            if row.start == row.end:
                continue  # a zero advance: the next row (same start) is the one in force
            for address in (row.start, row.end - 1):
                section, found_fde, found = info.lookup(address)
                assert section is eh_frame
                assert comparable(found_fde, found) == comparable(fde, row), hex(address)
                checked += 1
    assert checked > 100


def test_hdr_lookup_agrees_with_the_linear_index(opened):
    """UnwindInfo.lookup binary-searches .eh_frame_hdr; CfiSection.lookup uses the index built from
    .eh_frame itself. Both must give the same FDE and row, or both NoUnwindInfo."""
    path, info, eh_frame = opened
    fdes = sorted(eh_frame.fdes(), key=lambda f: f.pc_begin)
    low, high = fdes[0].pc_begin - 0x100, fdes[-1].pc_end + 0x100
    generator = random.Random(SEED)
    print(f"\n[api] random addresses: seed {SEED} (FASTUNWIND_API_SEED), {RANDOM_ADDRESSES} in [0x{low:x}, 0x{high:x})")
    addresses = [generator.randrange(low, high) for _ in range(RANDOM_ADDRESSES)]
    for fde in fdes:
        addresses += [fde.pc_begin - 1, fde.pc_begin, fde.pc_end - 1, fde.pc_end]
    covered = 0
    for address in addresses:
        try:
            linear = comparable(*eh_frame.lookup(address))
        except NoUnwindInfo:
            linear = None
        try:
            section, fde, row = info.lookup(address)
            via_hdr = comparable(fde, row)
        except NoUnwindInfo:
            via_hdr = None
        assert via_hdr == linear, f"0x{address:x} (seed {SEED})"
        covered += linear is not None
    assert covered > RANDOM_ADDRESSES // 2


def test_gaps_between_fdes_raise_no_unwind_info(opened):
    path, info, eh_frame = opened
    fdes = sorted(eh_frame.fdes(), key=lambda f: f.pc_begin)
    gaps = [(a.pc_end, b.pc_begin) for a, b in zip(fdes, fdes[1:]) if a.pc_end < b.pc_begin]
    gaps += [(0, fdes[0].pc_begin), (fdes[-1].pc_end, fdes[-1].pc_end + 0x1000)]
    assert len(gaps) > 2, "expected gaps (alignment padding) between FDEs"
    for start, end in gaps:
        for address in {start, (start + end) // 2, end - 1}:
            with pytest.raises(NoUnwindInfo, match=f"0x{address:x}"):
                info.lookup(address)
            with pytest.raises(NoUnwindInfo):
                eh_frame.lookup(address)


def test_eh_frame_hdr_matches_llvm_readelf(opened):
    require(LLVM_READELF)
    path, info, eh_frame = opened
    oracle = llvm_eh_frame_hdr(path)
    hdr = info.eh_frame_hdr
    assert hdr.eh_frame_ptr == oracle.eh_frame_ptr == eh_frame.address
    assert hdr.table_encoding == oracle.table_encoding == 0x3B
    assert len(hdr.locations) == len(hdr.fde_addresses) == oracle.fde_count == len(oracle.entries)
    for index, (location, address) in enumerate(oracle.entries):
        assert (hdr.locations[index], hdr.fde_addresses[index]) == (location, address), f"entry {index}"


def test_eh_frame_hdr_parse_directly_and_find(opened):
    path, info, eh_frame = opened
    with ElfFile.open(path) as elf:
        section = elf.section(".eh_frame_hdr")
        hdr = EhFrameHdr.parse(bytes(elf.section_data(section)), section.addr, eh_frame.address, len(eh_frame._data))
    assert list(hdr.locations) == list(info.eh_frame_hdr.locations)
    for fde in eh_frame.fdes():
        if fde.pc_end > fde.pc_begin:
            assert hdr.find(fde.pc_begin) == eh_frame.address + fde.offset
    assert hdr.find(hdr.locations[0] - 1) is None


def test_row_arrays(opened):
    path, info, eh_frame = opened
    starts, state_ids = eh_frame.row_arrays()
    assert len(starts) == len(state_ids) == eh_frame.row_count
    assert starts.itemsize == 8 and state_ids.itemsize == 4
    assert max(state_ids) < eh_frame.state_count <= eh_frame.row_count
    # every entry's rows, CIEs included, partition the arrays
    table = eh_frame._table
    assert sum(table.entry(i)["row_count"] for i in range(table.entry_count)) == eh_frame.row_count
    for fde in eh_frame.fdes():
        mine = starts[fde.first_row:fde.first_row + fde.row_count]
        assert len(mine) == fde.row_count >= 1
        assert mine[0] == fde.pc_begin
        assert list(mine) == sorted(mine)
        assert mine[-1] <= fde.pc_end
    assert sum(eh_frame.memory().values()) > 0


# ---- expressions against llvm-dwarfdump ------------------------------------------------------------------

@pytest.fixture(scope="module")
def libc_llvm():
    require(LLVM_DWARFDUMP)
    return llvm_fdes(LIBC)


@pytest.fixture(scope="module")
def libc_eh_frame():
    info = UnwindInfo.open(LIBC)
    return next(section for section in info.sections if section.kind == EH_FRAME)


def test_plt_fde_matches_llvm_dwarfdump(libc_eh_frame, libc_llvm):
    plt = [fde for fde in libc_eh_frame.fdes()
           if any(row.cfa.expression == _core.COMPACT_PLT_EXPRESSION for row in libc_eh_frame.rows(fde))]
    assert len(plt) == 1
    (fde,) = plt
    rows = libc_eh_frame.rows(fde)
    assert rows[-1].cfa.describe() == ("DW_OP_breg7 RSP+8, DW_OP_breg16 RIP+0, DW_OP_lit15, DW_OP_and, "
                                       "DW_OP_lit11, DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus")
    assert_rows_match_llvm(libc_eh_frame, fde, libc_llvm[fde.pc_begin].rows)


def test_signal_trampoline_fde_matches_llvm_dwarfdump(libc_eh_frame, libc_llvm):
    """__restore_rt: a "zRS" CIE, CFA = [rsp+160] (uc_mcontext's saved rsp) and every register an
    expression into the ucontext on the stack."""
    signal = [fde for fde in libc_eh_frame.fdes() if fde.signal_frame]
    assert len(signal) == 1
    (fde,) = signal
    assert "S" in fde.cie.augmentation
    (row,) = libc_eh_frame.rows(fde)
    assert row.cfa.describe() == "DW_OP_breg7 RSP+160, DW_OP_deref"
    assert row.registers[0].describe() == "[DW_OP_breg7 RSP+144]"
    assert row.registers[16].describe() == "[DW_OP_breg7 RSP+168]"
    assert len(row.registers) == 17
    assert_rows_match_llvm(libc_eh_frame, fde, libc_llvm[fde.pc_begin].rows)
