"""The end of a stack dump (perf's fixed-size copy of the user stack) against the end of the stack:
a walk is complete ("end") only where it reached the outermost frame, and "truncated" where it
needed a byte past the dump, wherever the return-address slot lies: in the dump's last 8 bytes,
across its end, exactly at it. Hand-built stacks over ld.so's own tables (its _start, the entry
code without CFI, calls a function whose first instruction has CFA = rsp + 8), on every backend
(its eh_elf compiled for the compiled ones).

A zero return address read from the dump ends a stack, as in libgcc's and libunwind's unwinders
(walk.h FU_WALK_END): it is a value the stack holds, not a read past the dump."""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from fastunwind import _core
from fastunwind.address_space import ImageCache
from fastunwind.cfi import UnwindInfo
from fastunwind.tables import eh_elf
from fastunwind.walk import unwind_stack

from tests.support.llvm_text import symbol_addresses
from tests.support.mapped_image import BASE, map_code

LD_SO = Path("/lib64/ld-linux-x86-64.so.2")
STACK = 0x7FFF00000000
RBP, RSP, RA = 6, 7, 16
BACKENDS = _core.WALK_BACKENDS  # every backend, the fast paths alone among them


class LdSo:
    """ld.so mapped at BASE: its entry point, and the function _start calls (its first instruction
    has CFA = rsp + 8, the return address at [rsp]: every 8 bytes of a stack of returns into it are
    one frame)."""

    def __init__(self) -> None:
        results = eh_elf.compile_images([ImageCache().get(str(LD_SO))])  # for the compiled backends
        assert not [r for r in results if isinstance(r, Exception)], results
        self.space, self.entry = map_code(LD_SO)  # fresh images: they load the eh_elf just cached
        assert self.space.mappings[0].image.compiled is not None
        info = UnwindInfo.open(str(LD_SO))
        callee = min(fde.pc_begin for fde in info.sections[0].fdes() if fde.pc_begin > self.entry - BASE)
        assert info.lookup(callee)[2].cfa.describe() == "rsp+8"
        self.callee = BASE + callee
        assert self.space.to_core("compiled-only").step_source(self.callee) == "body"
        self.outermost = self.entry + 8  # the return address of _start's call: entry code
        self.inner = self.callee + 1  # a return address whose caller is the callee's first instruction

    def walk(self, backend: str, stack: bytes, ip: int | None = None, rbp: int = 0):
        return unwind_stack(self.space, {RA: self.callee if ip is None else ip, RSP: STACK, RBP: rbp}, stack,
                            STACK, backend=backend)


@pytest.fixture(scope="module")
def ld_so() -> LdSo:
    if not LD_SO.exists():
        pytest.skip(f"{LD_SO} not found")
    return LdSo()


def words(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_outermost_return_address_in_the_last_8_bytes_completes_the_stack(ld_so, backend: str) -> None:
    """perf reads those 8 bytes as 0 (its off-by-one); they hold _start's return address, and _start
    with rbp 0 is the outermost frame: the stack fitted the dump."""
    walk = ld_so.walk(backend, words(ld_so.outermost))
    assert walk.outcome == "end", walk
    assert [frame.ip for frame in walk.frames] == [ld_so.callee, ld_so.outermost]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inner_return_address_in_the_last_8_bytes_is_truncated(ld_so, backend: str) -> None:
    """The caller's frame is recorded from the last 8 bytes; its own return address (at the CFA, the
    dump's end) is past the dump."""
    walk = ld_so.walk(backend, words(ld_so.inner))
    assert walk.outcome == "truncated", walk
    assert walk.fault_address == STACK + 8
    assert [frame.ip for frame in walk.frames] == [ld_so.callee, ld_so.inner]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [0, 1, 4, 7])
def test_a_return_address_slot_at_or_across_the_dump_end_is_truncated(ld_so, backend: str, size: int) -> None:
    """Whatever the bytes the dump holds of the slot (none, or its low ones, zero or not), a slot
    that does not lie wholly in the dump is past it, never a zero return address."""
    for fill in (0, 0xFF):
        walk = ld_so.walk(backend, bytes([fill]) * size)
        assert walk.outcome == "truncated", (size, fill, walk)
        assert walk.fault_address == STACK
        assert [frame.ip for frame in walk.frames] == [ld_so.callee]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_zero_return_address_in_the_last_8_bytes_ends_the_stack(ld_so, backend: str) -> None:
    walk = ld_so.walk(backend, words(ld_so.inner, 0))
    assert walk.outcome == "end", walk
    assert [frame.ip for frame in walk.frames] == [ld_so.callee, ld_so.inner]


@pytest.mark.parametrize("backend", BACKENDS)
def test_frame_pointer_slots_at_the_dump_end(ld_so, backend: str) -> None:
    """The entry code without the outermost mark (rbp not 0) is followed by its frame pointer: the
    saved rbp and return address in the dump's last 16 bytes, into _start with the saved rbp 0, end
    the stack; into an inner function, the next return address is past the dump; a return address
    across the dump's end is never read (no frame chain: not complete)."""
    start = ld_so.entry + 3
    walk = ld_so.walk(backend, words(0, ld_so.outermost), ip=start, rbp=STACK)
    assert (walk.outcome, [frame.ip for frame in walk.frames]) == ("end", [start, ld_so.outermost]), walk
    walk = ld_so.walk(backend, words(STACK + 64, ld_so.inner), ip=start, rbp=STACK)
    assert (walk.outcome, walk.fault_address) == ("truncated", STACK + 16), walk
    assert [frame.ip for frame in walk.frames] == [start, ld_so.inner]
    walk = ld_so.walk(backend, words(0, ld_so.outermost)[:12], ip=start, rbp=STACK)
    assert walk.outcome != "end" and [frame.ip for frame in walk.frames] == [start], walk


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_cut_dump_never_completes_a_different_stack(ld_so, backend: str, data) -> None:
    """Property: a walk of any prefix of a dump either ends ("end") with exactly the whole dump's
    walk, which ends too, or stops short ("truncated") with a prefix of its frames; never "end"
    where the whole dump shows more. Stacks of return addresses (outermost, inner, zero, junk)."""
    choices = st.sampled_from([ld_so.outermost, ld_so.inner, 0, 0x1234])
    values = data.draw(st.lists(choices, min_size=1, max_size=6))
    stack = words(*values)
    cut = data.draw(st.integers(0, len(stack)))
    whole, part = ld_so.walk(backend, stack), ld_so.walk(backend, stack[:cut])
    whole_ips, part_ips = [f.ip for f in whole.frames], [f.ip for f in part.frames]
    if part.outcome == "end":
        assert whole.outcome == "end" and part_ips == whole_ips, (values, cut)
    elif part.outcome == "truncated":
        assert whole_ips[:len(part_ips)] == part_ips and part.fault_address + 8 > STACK + cut, (values, cut)
    else:
        assert (part.outcome, part_ips) == (whole.outcome, whole_ips), (values, cut)


RETURN_IN_A_REGISTER = """
.text
.globl saves_rbx
saves_rbx:
 .cfi_startproc
 .cfi_def_cfa rsp, 16
 .cfi_offset rip, -16
 .cfi_offset rbx, -8
 nop
 nop
 ret
 .cfi_endproc
.globl returns_through_rbx
returns_through_rbx:
 .cfi_startproc
 .cfi_register rip, rbx
 nop
 nop
 ret
 .cfi_endproc
"""


def test_a_return_address_in_a_register_saved_past_the_dump_is_not_the_end(tmp_path: Path) -> None:
    """A caller whose return address is in rbx (DW_CFA_register), rbx saved by its callee past the
    dump: the return address is unknown, not undefined, and the walk fails (register_unknown)
    instead of ending. With the whole dump the same stack goes on, to a zero return address."""
    if not shutil.which("gcc"):
        pytest.skip("gcc not found")
    source, library = tmp_path / "ra.s", tmp_path / "libra.so"
    source.write_text(RETURN_IN_A_REGISTER)
    subprocess.run(["gcc", "-shared", "-nostdlib", str(source), "-o", str(library)], check=True)
    results = eh_elf.compile_images([ImageCache().get(str(library))])
    assert not [r for r in results if isinstance(r, Exception)], results
    space, _entry = map_code(library)
    symbols = symbol_addresses(library)
    callee, caller = BASE + symbols["saves_rbx"] + 1, BASE + symbols["returns_through_rbx"] + 1
    stack = words(caller, 0)  # the return address, then rbx's slot: 0, the caller's return address
    for backend in BACKENDS:
        if backend == "table-only":
            continue  # the compact table leaves register rules to the interpreter: alone, it has no CFI here
        registers = {RA: callee, RSP: STACK, 3: 5}
        whole = unwind_stack(space, registers, stack, STACK, backend=backend)
        assert (whole.outcome, [f.ip for f in whole.frames]) == ("end", [callee, caller]), (backend, whole)
        cut = unwind_stack(space, registers, stack[:8], STACK, backend=backend)
        assert (cut.outcome, [f.ip for f in cut.frames]) == ("register_unknown", [callee, caller]), (backend, cut)
