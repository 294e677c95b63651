"""A stack ends at the process's entry code: the bytes at a file's ELF entry point that no CFI covers
(ld.so's _start, a program's assembly _start), where rbp is 0 (the psABI's mark of the outermost
frame). ld.so's _start is what every process runs first: a sample taken before the program's own
_start is reached ends there, and perf's recordings of programs exec'd while recording are full of
them."""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fastunwind import _core
from fastunwind.address_space import AddressSpace
from fastunwind.cfi import UnwindInfo
from fastunwind.errors import NoUnwindInfo
from fastunwind.walk import unwind_stack

from tests.support.mapped_image import BASE, map_code

LD_SO = Path("/lib64/ld-linux-x86-64.so.2")
STACK = 0x7FFF00000000
RBP, RSP, RA = 6, 7, 16
BACKENDS = ("auto", "dwarf", "table", "compiled")
ENTRY_CODE_MAX_BYTES = 64  # walk.h FU_ENTRY_CODE_MAX_BYTES


def _walk(space: AddressSpace, backend: str, ip: int, rbp: int, stack: bytes):
    return unwind_stack(space, {RA: ip, RSP: STACK, RBP: rbp}, stack, STACK, backend=backend)


@pytest.fixture(scope="module")
def ld_so() -> tuple[AddressSpace, int]:
    if not LD_SO.exists():
        pytest.skip(f"{LD_SO} not found")
    space, entry = map_code(LD_SO)
    with pytest.raises(NoUnwindInfo):
        UnwindInfo.open(str(LD_SO)).lookup(entry - BASE)  # the premise: no FDE covers _start
    return space, entry


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sample_in_ld_so_start_is_a_complete_stack(ld_so, backend: str) -> None:
    space, entry = ld_so
    assert space.to_core(backend).step_source(entry) == "entry_code"
    walk = _walk(space, backend, entry + 3, 0, bytes(64))
    assert walk.outcome == "end" and len(walk.frames) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_from_ld_so_start_ends_the_stack_there(ld_so, backend: str) -> None:
    """_start calls _dl_start 3 bytes in: a stack whose caller returns into _start ends with it."""
    space, entry = ld_so
    info = UnwindInfo.open(str(LD_SO))
    callee = min(fde.pc_begin for fde in info.sections[0].fdes() if fde.pc_begin > entry - BASE)
    assert info.lookup(callee)[2].cfa.describe() == "rsp+8"
    stack = struct.pack("<Q", entry + 8) + bytes(56)  # at the callee's first instruction: ra at [rsp]
    walk = _walk(space, backend, BASE + callee, 0, stack)
    assert walk.outcome == "end", walk
    assert [frame.ip for frame in walk.frames] == [BASE + callee, entry + 8]


@pytest.mark.parametrize("backend", BACKENDS)
def test_entry_code_without_the_outermost_mark_is_not_the_end(ld_so, backend: str) -> None:
    """rbp not 0: not the psABI's outermost frame; with no CFI and no frame chain the walk fails."""
    space, entry = ld_so
    walk = _walk(space, backend, entry + 3, 0x1234, bytes(64))
    assert walk.outcome == "no_unwind_info"


def test_the_compact_table_alone_gives_the_same_entry_code(ld_so) -> None:
    """A module unwound from its compact table alone (one without slow rows: its DWARF tables are
    not parsed) finds its entry code from the table's rows: the same bytes as from the DWARF tables."""
    space, entry = ld_so
    (mapping,) = space.mappings
    image = mapping.image
    assert image is not None and image.compact is not None

    def core(eh_frame, debug_frame):
        return _core.AddressSpace([(mapping.start, mapping.end, mapping.bias, eh_frame, debug_frame, image.segments, 0,
                                    image.compact, None, image.elf.entry)], backend="table")

    dwarf, alone = core(image.eh_frame, image.debug_frame), core(None, None)
    for pc in range(entry - 8, entry + ENTRY_CODE_MAX_BYTES + 8):
        assert (dwarf.step_source(pc) == "entry_code") == (alone.step_source(pc) == "entry_code"), hex(pc)
    assert alone.step_source(entry) == "entry_code"


def test_an_entry_point_with_cfi_is_left_to_it() -> None:
    """glibc's crt1 _start has an FDE (rip undefined): its CFI ends the stack, not this rule."""
    program = Path(shutil.which("true") or "/bin/true")
    space, entry = map_code(program)
    info = UnwindInfo.open(str(program))
    info.lookup(entry - BASE)
    assert space.to_core("dwarf").step_source(entry) != "entry_code"


def test_entry_code_is_bounded_in_a_program_without_cfi(tmp_path: Path) -> None:
    """A program with no CFI at all: only the first FU_ENTRY_CODE_MAX_BYTES at e_entry are entry
    code, not the rest of its text."""
    if not shutil.which("gcc"):
        pytest.skip("gcc not found")
    source = tmp_path / "start.s"
    source.write_text(".globl _start\n_start:\n xor %ebp, %ebp\n call work\n" + " nop\n" * 100
                      + "work:\n" + " nop\n" * 200 + " ret\n")
    program = tmp_path / "start"
    subprocess.run(["gcc", "-nostdlib", "-static", "-no-pie", str(source), "-o", str(program)], check=True)
    space, entry = map_code(program)
    for backend in BACKENDS:
        core = space.to_core(backend)
        assert core.step_source(entry) == "entry_code"
        assert core.step_source(entry + ENTRY_CODE_MAX_BYTES - 1) == "entry_code"
        assert core.step_source(entry + ENTRY_CODE_MAX_BYTES) != "entry_code"


def test_a_shared_librarys_entry_point_is_not_entry_code(tmp_path: Path) -> None:
    """A shared library's e_entry is no process's first code (linkers often leave it at .text's
    start, crtstuff's deregister_tm_clones, without CFI): a frame there with rbp 0 does not end the
    stack. The same code in a file a process starts (no library needed) is entry code."""
    if not shutil.which("gcc"):
        pytest.skip("gcc not found")
    source = tmp_path / "first.s"
    source.write_text(".text\n.globl first\nfirst:\n" + " nop\n" * 32 + " ret\n")
    library, alone = tmp_path / "libfirst.so", tmp_path / "alone.so"
    subprocess.run(["gcc", "-shared", "-Wl,-e,first", str(source), "-o", str(library), "-Wl,--no-as-needed", "-lc"],
                   check=True)
    subprocess.run(["gcc", "-shared", "-nostdlib", "-Wl,-e,first", str(source), "-o", str(alone)], check=True)
    for path, is_entry_code in ((library, False), (alone, True)):
        space, entry = map_code(path)
        assert entry != BASE, path  # the premise: e_entry set
        for backend in BACKENDS:
            assert (space.to_core(backend).step_source(entry) == "entry_code") == is_entry_code, (path, backend)
            walk = _walk(space, backend, entry + 4, 0, bytes(64))
            assert (walk.outcome == "end") == is_entry_code, (path, backend, walk)
