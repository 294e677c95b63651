"""Hostile CFI and DWARF expressions through the Python API: every malformed input is a typed error
(CfiError / ExprError) whose message names the entry — CIE or FDE, section and offset in hex — and
the problem with its value; never a crash, never a hang.

Three parts:
  - hand-assembled byte cases (hostile_builder.Frames), one per way an entry can be broken, each
    asserting the message it must produce;
  - the expression evaluator's bounds and errors (_core.evaluate_expression);
  - a seeded mutation run over libc's real .eh_frame (tests/support/cfi_mutation_worker.py, in a
    subprocess so that a crash or hang fails the test instead of killing pytest). It prints its
    seed; FASTUNWIND_MUTATION_SEED=<seed> repeats a run.

The C core's own sanitizer run over the same kinds of input is `make asan` (native/fuzz).
"""
from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import textwrap

import pytest

from fastunwind import _core
from fastunwind.cfi import CfiSection
from fastunwind.errors import CfiError, ExprError, NoUnwindInfo

from tests.support.hostile_builder import (
    CIE_INSNS,
    DEBUG_FRAME,
    EH_FRAME,
    Frames,
    nested_entry_value,
    sleb,
    uleb,
)
from tests.support.paths import REPO_ROOT, SRC

MAX_STATE_STACK = _core.MAX_STATE_STACK
MAX_COLUMNS = _core.MAX_COLUMNS
EXPR_STACK = _core.EXPR_STACK
EXPR_MAX_STEPS = _core.EXPR_MAX_STEPS

SECTION_NAMES = {EH_FRAME: ".eh_frame", DEBUG_FRAME: ".debug_frame"}


def one_fde(insns: bytes, **cie_args) -> tuple[bytes, int, int]:
    """A CIE at 0 and one FDE with `insns`: (bytes, FDE offset, offset of the first instruction)."""
    frames = Frames()
    cie = frames.cie(**cie_args)
    fde = frames.fde(cie, insns)
    return frames.bytes(), fde, frames.insns_at[fde]


def expect_error(data: bytes, kind: int, entry: str, offset: int, *problem: str) -> None:
    """strict=True raises CfiError("<entry> at <section>+0x<offset>: <problem...>"); strict=False
    lists the same message first."""
    prefix = f"{entry} at {SECTION_NAMES[kind]}+0x{offset:x}: "
    with pytest.raises(CfiError) as raised:
        CfiSection(data, kind, 0, strict=True)
    message = str(raised.value)
    assert message.startswith(prefix), f"{message!r} does not start with {prefix!r}"
    for fragment in problem:
        assert fragment in message, f"{fragment!r} missing from {message!r}"
    lenient = CfiSection(data, kind, 0, strict=False)
    assert lenient.errors and str(lenient.errors[0]) == message


# ---- framing: lengths --------------------------------------------------------------------------


def test_length_overrunning_the_section():
    frames = Frames()
    frames.cie()
    at = frames.raw(struct.pack("<I", 0x1000) + b"\0" * 12)
    expect_error(frames.bytes(), EH_FRAME, "FDE", at, "length 0x1000 overruns the section (0xc bytes left)")


def test_truncated_length_field():
    frames = Frames()
    frames.cie()
    at = frames.raw(b"\x10\x00")
    expect_error(frames.bytes(), EH_FRAME, "FDE", at, "truncated length field (2 bytes left)")


def test_64bit_length_overrunning_the_section():
    frames = Frames()
    frames.cie()
    at = frames.raw(b"\xff\xff\xff\xff" + struct.pack("<Q", 0x100000000) + b"\0" * 8)
    expect_error(frames.bytes(), EH_FRAME, "FDE", at, "length 0x100000000 overruns the section (0x8 bytes left)")


def test_64bit_length_field_truncated():
    frames = Frames()
    frames.cie()
    at = frames.raw(b"\xff\xff\xff\xff\x10\x00")  # the escape, then 2 of the 8 length bytes
    expect_error(frames.bytes(), EH_FRAME, "FDE", at, "truncated 64-bit length field", "2 bytes")


def test_entry_too_short_for_its_id():
    frames = Frames()
    frames.cie()
    at = frames.raw(struct.pack("<I", 2) + b"\0\0")
    expect_error(frames.bytes(), EH_FRAME, "FDE", at, "entry too short for its CIE id / pointer")


# ---- CIE pointers -------------------------------------------------------------------------------


def test_cie_pointer_before_the_section():
    frames = Frames()
    cie = frames.cie()
    fde = frames.fde(cie, pointer=0x100)
    target = (fde + 4 - 0x100) % 2**64
    expect_error(frames.bytes(), EH_FRAME, "FDE", fde,
                 f"CIE pointer 0x100 does not lead to a CIE (target offset 0x{target:x})")


def test_cie_pointer_into_the_middle_of_a_cie():
    frames = Frames()
    cie = frames.cie()
    fde = frames.fde(cie, pointer=0x1A - 3)
    assert fde == 0x16
    expect_error(frames.bytes(), EH_FRAME, "FDE", fde, "CIE pointer 0x17 does not lead to a CIE (target offset 0x3)")


def test_cie_pointer_to_an_fde():
    frames = Frames()
    cie = frames.cie()
    first = frames.fde(cie, b"\x41")
    second = frames.fde(first)  # "its CIE" is the FDE before it
    pointer = second + 4 - first
    expect_error(frames.bytes(), EH_FRAME, "FDE", second,
                 f"CIE pointer 0x{pointer:x} does not lead to a CIE (target offset 0x{first:x})")


def test_cie_pointer_forward_beyond_the_end():
    frames = Frames()
    cie = frames.cie()
    fde = frames.fde(cie, pointer=-0x1000)
    expect_error(frames.bytes(), EH_FRAME, "FDE", fde,
                 f"CIE pointer 0xfffff000 does not lead to a CIE (target offset 0x{fde + 4 + 0x1000:x})")


def test_debug_frame_cie_pointer_to_an_fde_and_beyond_the_end():
    frames = Frames(DEBUG_FRAME)
    cie = frames.cie()
    first = frames.fde(cie)
    second = frames.fde(first)
    expect_error(frames.bytes(), DEBUG_FRAME, "FDE", second,
                 f"CIE pointer 0x{first:x} does not lead to a CIE (target offset 0x{first:x})")
    frames = Frames(DEBUG_FRAME)
    frames.cie()
    fde = frames.fde(0, pointer=0x7FFF0000)
    expect_error(frames.bytes(), DEBUG_FRAME, "FDE", fde, "CIE pointer 0x7fff0000 does not lead to a CIE")


def test_forward_cie_reference_is_accepted():
    """An FDE before its CIE (readelf accepts it): the 18-byte FDE, then the CIE at 18."""
    frames = Frames()
    frames.fde(18, b"\x41", pointer=4 - 18)
    assert len(frames.data) == 18
    frames.cie()
    section = CfiSection(frames.bytes(), EH_FRAME, 0, strict=True)
    assert not section.errors


# ---- CIE headers --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 2, 5, 255])
def test_unsupported_cie_version(version):
    frames = Frames()
    frames.cie(version=version)
    fde = frames.fde(0, b"\x41")
    data = frames.bytes()
    expect_error(data, EH_FRAME, "CIE", 0, f"unsupported CIE version {version} (expected 1, 3 or 4)")
    errors = [str(e) for e in CfiSection(data, EH_FRAME, 0, strict=False).errors]
    assert errors[1] == f"FDE at .eh_frame+0x{fde:x}: its CIE at 0x0 is malformed"


def test_augmentation_without_nul():
    data = struct.pack("<II", 8, 0) + b"\x01zRzR"
    expect_error(data, EH_FRAME, "CIE", 0, "augmentation string has no terminating NUL")


def test_augmentation_string_too_long():
    frames = Frames()
    frames.cie(header=b"\x01z" + b"R" * 40 + b"\0\x01\x78\x10\x01\x03")
    expect_error(frames.bytes(), EH_FRAME, "CIE", 0, "augmentation string longer than 32 bytes")


def test_unknown_augmentation_without_z():
    frames = Frames()
    frames.cie(augmentation=b"xyz")
    expect_error(frames.bytes(), EH_FRAME, "CIE", 0, "unknown augmentation \"xyz\" without 'z'")


def test_augmentation_data_length_overrun():
    frames = Frames()
    frames.cie(header=b"\x01zR\0\x01\x78\x10\x7f\x03")
    expect_error(frames.bytes(), EH_FRAME, "CIE", 0, "augmentation data length 0x7f overruns the entry")


def test_fde_augmentation_data_length_overrun():
    frames = Frames()
    cie = frames.cie()
    fde = frames.fde(cie, augmentation=None, head=struct.pack("<II", 0x1000, 4) + b"\x7f")
    expect_error(frames.bytes(), EH_FRAME, "FDE", fde, "augmentation data length 0x7f overruns the entry")


def test_return_address_column_beyond_the_limit():
    frames = Frames()
    frames.cie(version=3, ra=1000)
    expect_error(frames.bytes(), EH_FRAME, "CIE", 0,
                 f"return address column 1000 exceeds the limit of {MAX_COLUMNS} columns")


@pytest.mark.parametrize("address_size", [0, 9])
def test_version_4_bad_address_size(address_size):
    frames = Frames(DEBUG_FRAME)
    frames.cie(header=bytes([4]) + b"\0" + bytes([address_size, 0]) + b"\x01\x78\x10")
    expect_error(frames.bytes(), DEBUG_FRAME, "CIE", 0, f"invalid address size {address_size}")


# ---- pointer encodings (LSB 5.0 §10.5) ---------------------------------------------------------


@pytest.mark.parametrize("encoding", [0x05, 0x06, 0x07, 0x0D, 0x0E, 0x0F, 0x60, 0x70])
def test_bad_fde_pointer_encoding(encoding):
    frames = Frames()
    cie = frames.cie(augmentation_data=bytes([encoding]))
    fde = frames.fde(cie, b"\x41")
    expect_error(frames.bytes(), EH_FRAME, "FDE", fde,
                 f"truncated or invalid initial location (encoding 0x{encoding:02x})")


@pytest.mark.parametrize("encoding", [0x07, 0x60, 0x70])
def test_bad_personality_encoding(encoding):
    frames = Frames()
    frames.cie(augmentation=b"zPR", augmentation_data=bytes([encoding]) + b"\0" * 4 + bytes([0x03]))
    expect_error(frames.bytes(), EH_FRAME, "CIE", 0, f"bad personality pointer (encoding 0x{encoding:02x})")


@pytest.mark.parametrize("encoding", [0x07, 0x70])
def test_bad_lsda_encoding(encoding):
    frames = Frames()
    cie = frames.cie(augmentation=b"zLR", augmentation_data=bytes([encoding, 0x03]))
    fde = frames.fde(cie, b"\x41", augmentation=b"\x10\0\0\0")
    expect_error(frames.bytes(), EH_FRAME, "FDE", fde, f"bad LSDA pointer (encoding 0x{encoding:02x})")


def test_indirect_pointer_outside_the_segments():
    frames = Frames()
    cie = frames.cie(augmentation_data=bytes([0x80 | 0x03]))
    fde = frames.fde(cie, b"\x41")
    expect_error(frames.bytes(), EH_FRAME, "FDE", fde, "indirect initial location points outside the file's segments")


# ---- call frame instructions (DWARF 5 §6.4.2) --------------------------------------------------


@pytest.mark.parametrize("opcode", list(range(0x17, 0x1D)) + list(range(0x30, 0x40)))
def test_unknown_cfa_opcode(opcode):
    data, fde, insns = one_fde(bytes([0x41, opcode, 0x41]))
    expect_error(data, EH_FRAME, "FDE", fde, f"unknown call frame instruction 0x{opcode:02x}",
                 f"(instruction at offset 0x{insns + 1:x})")


def test_truncated_uleb_operand():
    data, fde, insns = one_fde(b"\x0e\x87")  # DW_CFA_def_cfa_offset, ULEB continues past the end
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"DW_CFA_def_cfa_offset: operands truncated or too large (instruction at offset 0x{insns:x})")


def test_uleb_operand_beyond_64_bits():
    data, fde, insns = one_fde(b"\x0e" + b"\xff" * 10 + b"\x7f")
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"DW_CFA_def_cfa_offset: operands truncated or too large (instruction at offset 0x{insns:x})")


def test_truncated_advance_loc4():
    data, fde, insns = one_fde(b"\x41\x04\x01\x02")
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"DW_CFA_advance_loc4: operands truncated or too large (instruction at offset 0x{insns + 1:x})")


def test_restore_state_on_an_empty_stack():
    data, fde, insns = one_fde(b"\x41\x0b")
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"DW_CFA_restore_state with an empty state stack (instruction at offset 0x{insns + 1:x})")


def test_remember_state_nesting_limit():
    data, _, _ = one_fde(b"\x0a" * MAX_STATE_STACK + b"\x41" + b"\x0b" * MAX_STATE_STACK)
    assert not CfiSection(data, EH_FRAME, 0, strict=True).errors
    data, fde, insns = one_fde(b"\x0a" * (MAX_STATE_STACK + 1))
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"DW_CFA_remember_state nested deeper than {MAX_STATE_STACK} "
                 f"(instruction at offset 0x{insns + MAX_STATE_STACK:x})")


def test_remember_state_nesting_limit_in_a_cie():
    frames = Frames()
    frames.cie(CIE_INSNS + b"\x0a" * (MAX_STATE_STACK + 1))
    insns = frames.insns_at[0] + len(CIE_INSNS)
    expect_error(frames.bytes(), EH_FRAME, "CIE", 0,
                 f"DW_CFA_remember_state nested deeper than {MAX_STATE_STACK} (instruction at offset 0x{insns + MAX_STATE_STACK:x})")


@pytest.mark.parametrize(
    "name, encode",
    [
        ("DW_CFA_offset_extended", lambda reg: b"\x05" + uleb(reg) + b"\x01"),
        ("DW_CFA_val_offset", lambda reg: b"\x14" + uleb(reg) + b"\x01"),
        ("DW_CFA_restore_extended", lambda reg: b"\x06" + uleb(reg)),
        ("DW_CFA_undefined", lambda reg: b"\x07" + uleb(reg)),
        ("DW_CFA_same_value", lambda reg: b"\x08" + uleb(reg)),
        ("DW_CFA_register", lambda reg: b"\x09" + uleb(reg) + b"\x03"),
        ("DW_CFA_expression", lambda reg: b"\x10" + uleb(reg) + b"\x02\x77\x00"),
        ("DW_CFA_GNU_negative_offset_extended", lambda reg: b"\x2f" + uleb(reg) + b"\x01"),
    ],
)
@pytest.mark.parametrize("register", [MAX_COLUMNS, 1000, 2**64 - 1])
def test_register_number_beyond_the_limit(name, encode, register):
    data, fde, insns = one_fde(encode(register))
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"{name}: register {register} exceeds the limit of {MAX_COLUMNS} columns "
                 f"(instruction at offset 0x{insns:x})")


def test_register_number_at_the_limit_is_accepted():
    data, _, _ = one_fde(b"\x05" + uleb(MAX_COLUMNS - 1) + b"\x01")
    assert not CfiSection(data, EH_FRAME, 0, strict=True).errors


def test_second_register_of_dw_cfa_register_beyond_the_limit():
    data, fde, insns = one_fde(b"\x09\x03" + uleb(1000))
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"DW_CFA_register: register 1000 exceeds the limit of {MAX_COLUMNS} columns "
                 f"(instruction at offset 0x{insns:x})")


def test_expression_length_overrun():
    data, fde, insns = one_fde(b"\x10\x03\x40\x77")
    expect_error(data, EH_FRAME, "FDE", fde,
                 f"DW_CFA_expression: expression length 0x40 overruns the entry (instruction at offset 0x{insns:x})")
    data, fde, insns = one_fde(b"\x0f\x7f\x77\x00")
    expect_error(data, EH_FRAME, "FDE", fde, "DW_CFA_def_cfa_expression: expression length 0x7f overruns the entry")


@pytest.mark.parametrize("name, opcode, operand", [("DW_CFA_def_cfa", 0x0C, b"\x10"),
                                                   ("DW_CFA_def_cfa_sf", 0x12, b"\x02"),
                                                   ("DW_CFA_def_cfa_register", 0x0D, b"")])
def test_cfa_register_beyond_16_bits(name, opcode, operand):
    """The CFA register is not a rule column: any 16-bit number is kept, a wider one is an error."""
    for register in (MAX_COLUMNS, 1000, 0xFFFF):
        data, _, _ = one_fde(bytes([opcode]) + uleb(register) + operand)
        assert not CfiSection(data, EH_FRAME, 0, strict=True).errors
    for register in (0x10000, 2**64 - 1):
        data, fde, insns = one_fde(bytes([opcode]) + uleb(register) + operand)
        expect_error(data, EH_FRAME, "FDE", fde,
                     f"{name}: CFA register {register} is not a register number (instruction at offset 0x{insns:x})")


def test_factored_offsets_at_the_int64_edges_do_not_fail():
    """operand x data_align wraps to INT64_MIN, then DW_CFA_GNU_negative_offset_extended negates it:
    no error, whatever the value (the C core must not overflow a signed integer; `make asan`)."""
    for insns, data_align in ((b"\x2f\x03" + uleb(2**60), -8), (b"\x11\x03" + sleb(-(2**63)), -8),
                              (b"\x12\x07" + sleb(-(2**63)), 1)):
        data, _, _ = one_fde(insns, header=b"\x01zR\0\x01" + sleb(data_align) + b"\x10\x01\x03")
        section = CfiSection(data, EH_FRAME, 0, strict=True)
        assert section.render()


def test_non_utf8_augmentation_is_quoted():
    """An augmentation string is arbitrary bytes: messages quote the odd ones as \\xNN."""
    frames = Frames()
    frames.cie(augmentation=b"x\xd6\\")
    expect_error(frames.bytes(), EH_FRAME, "CIE", 0, 'unknown augmentation "x\\xd6\\x5c" without \'z\'')


def test_non_utf8_augmentation_after_z_is_usable():
    """After 'z' an unknown character ends what can be interpreted (LSB 5.0 §10.6.1.1); the CIE
    stays usable and its augmentation crosses into Python byte for byte (as Latin-1)."""
    frames = Frames()
    cie = frames.cie(augmentation=b"zR\xd6", augmentation_data=b"\x03")
    frames.fde(cie, b"\x41")
    section = CfiSection(frames.bytes(), EH_FRAME, 0, strict=True)
    assert [c.augmentation for c in section.cies()] == ["zR\xd6"]
    assert len(list(section.fdes())) == 1


# ---- strict=False keeps the good entries -------------------------------------------------------


def test_lenient_parse_keeps_good_entries():
    frames = Frames()
    cie = frames.cie()
    frames.fde(cie, b"\x41\x0e\x10", pc_begin=0x1000, pc_range=0x40)
    bad = frames.fde(cie, b"\x41\x17", pc_begin=0x2000, pc_range=0x40)
    frames.fde(cie, b"\x41\x0e\x10", pc_begin=0x3000, pc_range=0x40)
    data = frames.bytes()
    with pytest.raises(CfiError, match=rf"^FDE at \.eh_frame\+0x{bad:x}: unknown call frame instruction 0x17"):
        CfiSection(data, EH_FRAME, 0, strict=True)
    section = CfiSection(data, EH_FRAME, 0, strict=False)
    assert [str(e).split(":")[0] for e in section.errors] == [f"FDE at .eh_frame+0x{bad:x}"]
    for pc in (0x1000, 0x1001, 0x3000, 0x303F):
        fde, _row = section.lookup(pc)
        assert fde.pc_begin <= pc < fde.pc_end
    with pytest.raises(NoUnwindInfo):
        section.lookup(0x2001)
    assert section.render() and section.render(raw=True)


# ---- DWARF expressions (DWARF 5 §2.5) -----------------------------------------------------------


def evaluate(expr: bytes, registers=None, read=None, initial=None) -> int:
    return _core.evaluate_expression(expr, registers or {}, read=read, initial=initial)


def expect_expr_error(expr: bytes, message: str, **kwargs) -> None:
    with pytest.raises(ExprError) as raised:
        evaluate(expr, **kwargs)
    assert str(raised.value) == message


def test_expression_loop_hits_the_step_bound():
    expect_expr_error(b"\x96\x2f\xfc\xff", f"expression executed more than {EXPR_MAX_STEPS} operations")  # nop; skip -4
    expect_expr_error(b"\x12\x13\x2f\xfb\xff", f"expression executed more than {EXPR_MAX_STEPS} operations",
                      initial=1)  # dup; drop; skip -5


def test_dup_skip_loop_ends_at_the_stack_bound():
    # DW_OP_dup; DW_OP_skip -4: every pass pushes one value, so the stack bound ends it first
    expect_expr_error(b"\x12\x2f\xfc\xff", f"expression stack deeper than {EXPR_STACK} values", initial=7)


def test_expression_stack_overflow():
    assert evaluate(b"\x30" * EXPR_STACK) == 0
    expect_expr_error(b"\x30" * (EXPR_STACK + 1), f"expression stack deeper than {EXPR_STACK} values")


def test_expression_stack_underflow():
    expect_expr_error(b"\x22", "DW_OP_plus at expression offset 0x0: stack underflow")
    expect_expr_error(b"\x30\x22", "DW_OP_plus at expression offset 0x1: stack underflow")
    expect_expr_error(b"\x17", "DW_OP_rot at expression offset 0x0: stack underflow", initial=1)
    expect_expr_error(b"\x30\x15\x05", "DW_OP_pick at expression offset 0x1: stack underflow")
    expect_expr_error(b"", "expression left an empty stack")


def test_expression_division_by_zero():
    expect_expr_error(b"\x31\x30\x1b", "DW_OP_div by zero at expression offset 0x2")
    expect_expr_error(b"\x31\x30\x1d", "DW_OP_mod by zero at expression offset 0x2")
    # INT64_MIN / -1 wraps instead of trapping
    assert evaluate(b"\x0e" + struct.pack("<Q", 2**63) + b"\x11\x7f\x1b") == 2**63


def test_expression_skip_out_of_range():
    expect_expr_error(b"\x2f\x10\x00", "DW_OP_skip at expression offset 0x0 jumps outside the expression (to 19)")
    expect_expr_error(b"\x2f\xf0\xff", "DW_OP_skip at expression offset 0x0 jumps outside the expression (to -13)")
    expect_expr_error(b"\x31\x28\x00\x01", "DW_OP_bra at expression offset 0x1 jumps outside the expression (to 260)")


def test_expression_unknown_operation():
    expect_expr_error(b"\x30\xff", "unknown operation 0xff at expression offset 0x1")
    expect_expr_error(b"\x30\x18", "DW_OP_xderef at expression offset 0x1 is not allowed in call frame information")


def test_expression_truncated_operand():
    expect_expr_error(b"\x0e\x01\x02", "DW_OP_const8u at expression offset 0x0: truncated operand")
    expect_expr_error(b"\x92\x87", "DW_OP_bregx at expression offset 0x0: truncated operand")


def test_expression_unreadable_memory():
    registers = {7: 0x7FF000}
    expect_expr_error(b"\x77\x08\x06", "DW_OP_deref: memory at 0x7ff008 is unreadable", registers=registers,
                      read=lambda address, size: None)
    expect_expr_error(b"\x77\x08\x06", "DW_OP_deref: memory at 0x7ff008 is unreadable", registers=registers)
    expect_expr_error(b"\x77\x00\x94\x09", "DW_OP_deref_size of 9 bytes", registers=registers)
    memory = {0x7FF008: struct.pack("<Q", 0x1234)}
    assert evaluate(b"\x77\x08\x06", registers, read=lambda address, size: memory.get(address)) == 0x1234


def test_expression_unknown_register():
    expect_expr_error(b"\x76\x00", "DW_OP_breg6: value of register 6 is unknown")
    expect_expr_error(b"\x92" + uleb(1000) + b"\x00", "DW_OP_bregx: value of register 1000 is unknown")


# ---- no crash on deep nesting (a child process: a stack overflow must not take pytest down) ----


def run_child(code: str, timeout: float = 30) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True,
                          text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)


def test_nested_entry_value_printing_is_bounded():
    assert _core.format_expression(nested_entry_value(3)) == \
        "DW_OP_entry_value: (DW_OP_entry_value: (DW_OP_entry_value: ()))"
    text = _core.format_expression(nested_entry_value(40))
    assert text.count("DW_OP_entry_value") < 40 and "nested deeper than" in text


def test_deeply_nested_entry_value_does_not_crash_the_printers():
    result = run_child(f"""
        from fastunwind import _core
        from fastunwind.cfi import CfiSection
        from tests.support.hostile_builder import Frames, nested_entry_value, uleb
        expr = nested_entry_value({300_000})
        _core.format_expression(expr, "readelf")
        frames = Frames()
        cie = frames.cie()
        frames.fde(cie, b"\\x10\\x06" + uleb(len(expr)) + expr)
        CfiSection(frames.bytes(), 0, 0, strict=False).render(raw=True)
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.returncode, result.stderr[-2000:])


# ---- seeded mutations of a real .eh_frame --------------------------------------------------------

LIBC_CANDIDATES = ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6")
MUTATIONS = 2000
# The batch takes ~5 s; the bound catches a hang without waiting long.
BATCH_TIMEOUT = 45


def test_mutated_libc_eh_frame(tmp_path):
    libc = next((path for path in LIBC_CANDIDATES if os.path.exists(path)), None)
    if libc is None:
        pytest.skip("no libc.so.6 found")
    seed_text = os.environ.get("FASTUNWIND_MUTATION_SEED")
    seed = int(seed_text, 0) if seed_text else random.SystemRandom().randrange(2**32)
    print(f"mutation seed {seed} (repeat with FASTUNWIND_MUTATION_SEED={seed})")
    command = [sys.executable, "-m", "tests.support.cfi_mutation_worker", "--seed", str(seed),
               "--count", str(MUTATIONS), "--save-dir", str(tmp_path), libc]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    reproduce = (f"FASTUNWIND_MUTATION_SEED={seed}; one mutation alone, from the repository root: "
                 f"{' '.join(command[:3])} --seed {seed} --only N {libc}")
    try:
        result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=BATCH_TIMEOUT,
                                env=env, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired as timeout:
        started = (timeout.stdout or b"").decode(errors="replace").split()
        last = next((word for word in reversed(started) if word.isdigit()), "?")
        pytest.fail(f"mutation batch hung (> {BATCH_TIMEOUT} s) at mutation {last}; {reproduce}")
    if result.returncode != 0:
        started = result.stdout.split()
        last = next((word for word in reversed(started) if word.isdigit()), "?")
        pytest.fail(f"mutation worker failed (exit {result.returncode}) at mutation {last}; {reproduce}\n"
                    f"{result.stderr[-4000:]}")
    summary = result.stdout.strip().splitlines()[-1]
    print(summary)
    assert summary.startswith(f"done {MUTATIONS} mutations"), summary
