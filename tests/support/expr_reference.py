"""DWARF expression encoders and a small pure-Python reference evaluator (DWARF 5 §2.5), for the
operations call frame information may use (§6.4.2: no DW_OP_call*, DW_OP_push_object_address or
DW_OP_call_frame_cfa).

Semantics on the 64-bit generic type, as the runtime unwinder (libgcc unwind-dw2.c
execute_stack_op) implements them:
  * arithmetic wraps modulo 2**64;
  * DW_OP_div divides signed (§2.5.1.4 "using signed division"), truncating toward zero;
  * DW_OP_mod is unsigned (libgcc computes `second % first` on _Unwind_Word);
  * DW_OP_shr is logical, DW_OP_shra arithmetic; the relational operators compare signed (§2.5.1.4);
  * DW_OP_regN / DW_OP_regx push the register's value (libgcc treats them as in CFI "the value");
  * DW_OP_deref reads address-size (8) bytes, DW_OP_deref_size n bytes zero-extended (§2.5.1.3).
Shift counts of 64 or more are outside what this reference models (C leaves them undefined).
"""

from __future__ import annotations

import struct

MASK = 2**64 - 1


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40):
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


# ---- encoders (opcodes: DWARF 5 table 7.9) -------------------------------------------------------
def addr(value: int) -> bytes: return b"\x03" + struct.pack("<Q", value)
def deref() -> bytes: return b"\x06"
def const1u(v: int) -> bytes: return b"\x08" + struct.pack("<B", v)
def const1s(v: int) -> bytes: return b"\x09" + struct.pack("<b", v)
def const2u(v: int) -> bytes: return b"\x0a" + struct.pack("<H", v)
def const2s(v: int) -> bytes: return b"\x0b" + struct.pack("<h", v)
def const4u(v: int) -> bytes: return b"\x0c" + struct.pack("<I", v)
def const4s(v: int) -> bytes: return b"\x0d" + struct.pack("<i", v)
def const8u(v: int) -> bytes: return b"\x0e" + struct.pack("<Q", v)
def const8s(v: int) -> bytes: return b"\x0f" + struct.pack("<q", v)
def constu(v: int) -> bytes: return b"\x10" + _uleb(v)
def consts(v: int) -> bytes: return b"\x11" + _sleb(v)
def dup() -> bytes: return b"\x12"
def drop() -> bytes: return b"\x13"
def over() -> bytes: return b"\x14"
def pick(i: int) -> bytes: return b"\x15" + bytes([i])
def swap() -> bytes: return b"\x16"
def rot() -> bytes: return b"\x17"
def abs_() -> bytes: return b"\x19"
def and_() -> bytes: return b"\x1a"
def div() -> bytes: return b"\x1b"
def minus() -> bytes: return b"\x1c"
def mod() -> bytes: return b"\x1d"
def mul() -> bytes: return b"\x1e"
def neg() -> bytes: return b"\x1f"
def not_() -> bytes: return b"\x20"
def or_() -> bytes: return b"\x21"
def plus() -> bytes: return b"\x22"
def plus_uconst(v: int) -> bytes: return b"\x23" + _uleb(v)
def shl() -> bytes: return b"\x24"
def shr() -> bytes: return b"\x25"
def shra() -> bytes: return b"\x26"
def xor() -> bytes: return b"\x27"
def bra(delta: int) -> bytes: return b"\x28" + struct.pack("<h", delta)
def eq() -> bytes: return b"\x29"
def ge() -> bytes: return b"\x2a"
def gt() -> bytes: return b"\x2b"
def le() -> bytes: return b"\x2c"
def lt() -> bytes: return b"\x2d"
def ne() -> bytes: return b"\x2e"
def skip(delta: int) -> bytes: return b"\x2f" + struct.pack("<h", delta)
def lit(n: int) -> bytes: assert 0 <= n < 32; return bytes([0x30 + n])
def reg(n: int) -> bytes: assert 0 <= n < 32; return bytes([0x50 + n])
def breg(n: int, offset: int) -> bytes: assert 0 <= n < 32; return bytes([0x70 + n]) + _sleb(offset)
def regx(n: int) -> bytes: return b"\x90" + _uleb(n)
def bregx(n: int, offset: int) -> bytes: return b"\x92" + _uleb(n) + _sleb(offset)
def deref_size(n: int) -> bytes: return b"\x94" + bytes([n])
def nop() -> bytes: return b"\x96"


# ---- reference evaluator ---------------------------------------------------------------------------
class ReferenceError(Exception):
    """The expression is invalid for the reference (the C core must reject it too)."""


def _signed(v: int) -> int:
    return v - 2**64 if v >> 63 else v


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ReferenceError("truncated operand")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def uleb(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result & MASK

    def sleb(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                if byte & 0x40:
                    result -= 1 << shift
                return result


_BINARY = {
    0x1A: lambda b, a: b & a,
    0x1C: lambda b, a: b - a,
    0x1E: lambda b, a: b * a,
    0x21: lambda b, a: b | a,
    0x22: lambda b, a: b + a,
    0x24: lambda b, a: b << a,
    0x25: lambda b, a: b >> a,
    0x26: lambda b, a: _signed(b) >> a,
    0x27: lambda b, a: b ^ a,
    0x29: lambda b, a: int(_signed(b) == _signed(a)),
    0x2A: lambda b, a: int(_signed(b) >= _signed(a)),
    0x2B: lambda b, a: int(_signed(b) > _signed(a)),
    0x2C: lambda b, a: int(_signed(b) <= _signed(a)),
    0x2D: lambda b, a: int(_signed(b) < _signed(a)),
    0x2E: lambda b, a: int(_signed(b) != _signed(a)),
}


def evaluate(expression: bytes, registers: dict[int, int], read=None, initial: int | None = None,
             max_steps: int = 4096, max_depth: int = 64) -> int:
    stack: list[int] = [] if initial is None else [initial & MASK]
    reader = _Reader(expression)
    steps = 0

    def pop() -> int:
        if not stack:
            raise ReferenceError("stack underflow")
        return stack.pop()

    def need(n: int) -> None:
        if len(stack) < n:
            raise ReferenceError("stack underflow")

    def register_value(n: int) -> int:
        if n not in registers:
            raise ReferenceError(f"register {n} unknown")
        return registers[n] & MASK

    while reader.pos < len(expression):
        steps += 1
        if steps > max_steps:
            raise ReferenceError("step limit")
        op = reader.take(1)[0]
        push = None
        if 0x30 <= op <= 0x4F:
            push = op - 0x30
        elif 0x50 <= op <= 0x6F:
            push = register_value(op - 0x50)
        elif 0x70 <= op <= 0x8F:
            push = register_value(op - 0x70) + reader.sleb()
        elif op == 0x03:
            push = struct.unpack("<Q", reader.take(8))[0]
        elif op in (0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F):
            size = {0x08: 1, 0x09: 1, 0x0A: 2, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8, 0x0F: 8}[op]
            push = int.from_bytes(reader.take(size), "little", signed=bool(op & 1))
        elif op == 0x10:
            push = reader.uleb()
        elif op == 0x11:
            push = reader.sleb()
        elif op == 0x12:
            need(1)
            push = stack[-1]
        elif op == 0x13:
            pop()
        elif op == 0x14:
            need(2)
            push = stack[-2]
        elif op == 0x15:
            index = reader.take(1)[0]
            need(index + 1)
            push = stack[-1 - index]
        elif op == 0x16:
            need(2)
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif op == 0x17:
            need(3)
            # the top becomes the third entry, the second the top, the third the second
            stack[-3], stack[-2], stack[-1] = stack[-1], stack[-3], stack[-2]
        elif op == 0x19:
            push = abs(_signed(pop()))
        elif op == 0x1F:
            push = -pop()
        elif op == 0x20:
            push = ~pop()
        elif op == 0x23:
            need(1)
            push = pop() + reader.uleb()
        elif op in (0x1B, 0x1D):
            need(2)
            a, b = pop(), pop()
            if a == 0:
                raise ReferenceError("division by zero")
            if op == 0x1D:
                push = b % a
            else:
                quotient = abs(_signed(b)) // abs(_signed(a))
                push = -quotient if (_signed(b) < 0) != (_signed(a) < 0) else quotient
        elif op in _BINARY:
            need(2)
            a, b = pop(), pop()
            push = _BINARY[op](b, a)
        elif op in (0x2F, 0x28):
            delta = struct.unpack("<h", reader.take(2))[0]
            if op == 0x2F or pop() != 0:
                target = reader.pos + delta
                if not 0 <= target <= len(expression):
                    raise ReferenceError("jump outside the expression")
                reader.pos = target
        elif op == 0x06 or op == 0x94:
            size = 8 if op == 0x06 else reader.take(1)[0]
            need(1)
            if not 1 <= size <= 8 or read is None:
                raise ReferenceError("bad deref")
            address = pop()
            value = read(address, size)
            if value is None:
                raise ReferenceError("unreadable")
            push = int.from_bytes(value, "little")
        elif op == 0x90:
            push = register_value(reader.uleb())
        elif op == 0x92:
            n = reader.uleb()
            push = register_value(n) + reader.sleb()
        elif op == 0x96:
            pass
        else:
            raise ReferenceError(f"operation 0x{op:02x} not modelled")
        if push is not None:
            if len(stack) == max_depth:
                raise ReferenceError("stack overflow")
            stack.append(push & MASK)
    if not stack:
        raise ReferenceError("empty stack")
    return stack[-1]
