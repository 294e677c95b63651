"""Mutate a real .eh_frame and feed each mutant to CfiSection(strict=False) and both renderers.

    python -m tests.support.cfi_mutation_worker --seed S --count N [--only I] [--save-dir DIR] ELF
    (from the repository root)

Run by tests/fuzz/test_hostile_input.py in a child process (a crash or a hang then fails the test instead of
taking pytest down). Prints the index of each mutation before running it, so the last number printed
names the mutation that crashed or hung, and ends with "done N mutations ...". Mutation I of seed S
is the same bytes on every run: `--only I` replays it alone.

Accepted outcomes are success and CfiError; every error must name its entry ("FDE at
.eh_frame+0x1a: ..."). Anything else exits 1 after saving the input in --save-dir.

Most mutants are a window of the real section (one of its CIEs and a run of its FDEs, re-pointed at
that CIE), which keeps a mutant's render near 1 ms; every 50th mutates the whole section.
"""
from __future__ import annotations

import argparse
import random
import re
import struct
import sys
import time
import traceback
from pathlib import Path

from fastunwind import _core
from fastunwind.cfi import EH_FRAME, CfiSection
from fastunwind.elf import ElfFile
from fastunwind.errors import CfiError

from tests.support.hostile_builder import uleb

ERROR_FORMAT = re.compile(r"^(CIE|FDE) at \.eh_frame\+0x([0-9a-f]+): \S")
# One mutant parses and renders in ~1 ms (windows) to ~30 ms (the whole libc section); 2 s means a
# super-linear path.
SLOW_MUTATION_SECONDS = 2.0
WHOLE_SECTION_EVERY = 50
MAX_WINDOW_FDES = 200
# DW_EH_PE values LSB 5.0 §10.5 leaves undefined (formats 0x05-0x07, 0x0d-0x0f; applications
# 0x60, 0x70), plus the legal but unusual aligned and indirect forms.
BAD_ENCODINGS = (0x05, 0x06, 0x07, 0x0D, 0x0E, 0x0F, 0x60, 0x70, 0x65, 0x7B, 0x50, 0x80, 0x9B, 0x51)
UNKNOWN_OPCODES = tuple(range(0x17, 0x1D)) + tuple(range(0x30, 0x40))


class Entry:
    """An entry of a well-formed section: where it is, its body after the id, its CIE."""

    def __init__(self, offset: int, body: bytes, is_cie: bool, cie_offset: int) -> None:
        self.offset, self.body, self.is_cie, self.cie_offset = offset, body, is_cie, cie_offset


def walk(data: bytes) -> list[Entry]:
    """The 32-bit entries of a well-formed .eh_frame (what ld writes for x86-64)."""
    entries, offset = [], 0
    while len(data) - offset >= 8:
        length, pointer = struct.unpack_from("<II", data, offset)
        if length == 0:
            break
        body = data[offset + 8 : offset + 4 + length]
        is_cie = pointer == 0
        entries.append(Entry(offset, body, is_cie, offset if is_cie else offset + 4 - pointer))
        offset += 4 + length
    return entries


def frame(bodies: list[tuple[bool, bytes]]) -> bytearray:
    """Serialise (is_cie, body) pairs; every FDE points at the CIE that precedes it most closely."""
    out, cie_at = bytearray(), 0
    for is_cie, body in bodies:
        offset = len(out)
        if is_cie:
            cie_at = offset
        pointer = 0 if is_cie else offset + 4 - cie_at
        out += struct.pack("<II", 4 + len(body), pointer) + body
    return out


def augmentation_data_range(cie_body: bytes) -> tuple[int, int] | None:
    """(start, length) of a 'z' CIE's augmentation data within its body (version 1 or 3), or None
    if the body (perhaps mutated already) does not have one."""
    if len(cie_body) < 2 or cie_body[1:2] != b"z" or 0 not in cie_body[1:]:
        return None
    position = cie_body.index(0, 1) + 1
    for _ in range(2 if cie_body[0] == 1 else 3):  # code/data alignment (and a ULEB RA column)
        while position < len(cie_body) and cie_body[position] & 0x80:
            position += 1
        position += 1
    if cie_body[0] == 1:
        position += 1
    if position >= len(cie_body):
        return None
    length = cie_body[position]  # one ULEB byte: < 0x80 in what ld writes
    if length & 0x80 or position + 1 + length > len(cie_body):
        return None
    return position + 1, length


def huge_register_insn(rng: random.Random) -> bytes:
    register = rng.choice((128, 1000, 0xFFFF, 2**32, 2**63, 2**64 - 1))
    opcode = rng.choice((0x05, 0x06, 0x07, 0x08, 0x09, 0x0C, 0x0D, 0x10, 0x14, 0x16, 0x2F))
    operand = b"\xff" * 10 + b"\x7f" if rng.random() < 0.1 else uleb(register)
    if opcode in (0x06, 0x07, 0x08, 0x0D):
        return bytes([opcode]) + operand
    if opcode in (0x10, 0x16):
        return bytes([opcode]) + operand + b"\x02\x77\x00"
    if opcode == 0x09:
        return bytes([opcode, 0x03]) + operand if rng.random() < 0.5 else bytes([opcode]) + operand + b"\x07"
    return bytes([opcode]) + operand + uleb(rng.randrange(1 << rng.choice((7, 32, 64))))


def instruction_payload(rng: random.Random) -> bytes:
    choice = rng.randrange(5)
    if choice == 0:  # remember_state runs around the bound (FU_MAX_STATE_STACK), maybe restored
        run = rng.choice((1, _core.MAX_STATE_STACK, _core.MAX_STATE_STACK + 1, rng.randrange(1, 400)))
        return b"\x0a" * run + (b"\x0b" * rng.randrange(0, run + 2) if rng.random() < 0.5 else b"")
    if choice == 1:
        return b"\x0b" * rng.randrange(1, 5)
    if choice == 2:
        return bytes([rng.choice(UNKNOWN_OPCODES)])
    if choice == 3:
        return huge_register_insn(rng)
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))


def structural_mutation(bodies: list[tuple[bool, bytes]], rng: random.Random) -> None:
    """Change an entry's instructions or its CIE's encodings; lengths and pointers stay right."""
    index = rng.randrange(len(bodies))
    is_cie, body = bodies[index]
    if rng.random() < 0.25:
        cies = [i for i, (cie, _) in enumerate(bodies) if cie]
        index = rng.choice(cies)
        body = bodies[index][1]
        found = augmentation_data_range(body)
        if found and found[1]:
            start, length = found
            at = start + rng.randrange(length)
            bodies[index] = (True, body[:at] + bytes([rng.choice(BAD_ENCODINGS)]) + body[at + 1 :])
            return
    payload = instruction_payload(rng)
    if rng.random() < 0.7:
        body = body + payload  # after the last instruction: always past the header
    elif rng.random() < 0.5:
        at = rng.randrange(len(body) + 1)
        body = body[:at] + payload + body[at:]
    else:
        at = rng.randrange(len(body) + 1)
        body = body[:at] + payload + body[at + len(payload) :]
    bodies[index] = (is_cie, body)


def byte_mutation(data: bytearray, entries: list[Entry], rng: random.Random) -> bytearray:
    """Damage the framing: flips, truncation, lengths, CIE pointers, splices."""
    choice = rng.randrange(5)
    if not data:
        return data
    if choice == 0:
        for _ in range(rng.randrange(1, 9)):
            at = rng.randrange(len(data))
            data[at] = data[at] ^ (1 << rng.randrange(8)) if rng.random() < 0.5 else rng.randrange(256)
        return data
    if choice == 1:
        return data[: rng.randrange(len(data))]
    inside = [e for e in entries if e.offset + 8 <= len(data)]
    if not inside:
        return data
    entry = rng.choice(inside)
    if choice == 2:
        old = struct.unpack_from("<I", data, entry.offset)[0]
        new = rng.choice((0, 1, 3, 4, old - 1, old + 1, old + 4, old * 2, 0xFFFFFFF0, 0xFFFFFFFF,
                          rng.randrange(2**32)))
        struct.pack_into("<I", data, entry.offset, new & 0xFFFFFFFF)
        if new == 0xFFFFFFFF and rng.random() < 0.5:  # 64-bit escape with a (maybe cut) 8-byte length
            data[entry.offset + 4 : entry.offset + 4] = struct.pack("<Q", rng.randrange(2**64))[: rng.randrange(9)]
        return data
    if choice == 3:
        field = entry.offset + 4
        other = rng.choice(inside)
        pointer = rng.choice((0, 4, field - other.offset, field - other.offset - 1, -(len(data) - field + 16),
                              0x7FFFFFF0, rng.randrange(2**32)))
        struct.pack_into("<I", data, field, pointer & 0xFFFFFFFF)
        return data
    size = rng.randrange(1, 64)
    source, target = rng.randrange(len(data)), rng.randrange(len(data))
    chunk = data[source : source + size]
    data[target : target + len(chunk)] = chunk
    return data


def make_mutant(original: bytes, entries: list[Entry], seed: int, index: int) -> bytes:
    rng = random.Random(f"{seed}:{index}")
    if index % WHOLE_SECTION_EVERY == WHOLE_SECTION_EVERY - 1:
        data, window_entries = bytearray(original), entries
        for _ in range(rng.randrange(1, 4)):
            data = byte_mutation(data, window_entries, rng)
        return bytes(data)
    fdes = [i for i, e in enumerate(entries) if not e.is_cie]
    start = rng.choice(fdes)
    cie_offset = entries[start].cie_offset
    cie = next(e for e in entries if e.offset == cie_offset)
    run = [e for e in entries[start : start + rng.randrange(1, MAX_WINDOW_FDES)] if not e.is_cie]
    bodies = [(True, cie.body)] + [(False, e.body) for e in run]
    for _ in range(rng.randrange(0, 3)):
        structural_mutation(bodies, rng)
    data = frame(bodies)
    if rng.random() < 0.6:
        window_entries = walk(bytes(data))
        for _ in range(rng.randrange(1, 3)):
            data = byte_mutation(data, window_entries, rng)
    return bytes(data)


def check(data: bytes, address: int) -> int:
    """Parse leniently and render both ways; returns the number of bad entries."""
    section = CfiSection(data, EH_FRAME, address, strict=False)
    for error in section.errors:
        if not isinstance(error, CfiError) or not ERROR_FORMAT.match(str(error)):
            raise AssertionError(f"error does not name its entry: {error!r}")
    section.render()
    section.render(raw=True)
    try:
        CfiSection(data, EH_FRAME, address, strict=True)
    except CfiError as error:
        if not section.errors or str(error) != str(section.errors[0]):
            raise AssertionError(f"strict error {error!r} is not the first lenient error") from None
    else:
        if section.errors:
            raise AssertionError("strict=True accepted a section with errors")
    return len(section.errors)


def save_failure(args: argparse.Namespace, data: bytes, index: int) -> int:
    where = ""
    if args.save_dir:
        path = args.save_dir / f"mutation-{args.seed}-{index}.bin"
        path.write_bytes(data)
        where = f", input saved to {path}"
    print(f"mutation {index} of seed {args.seed} raised an unexpected exception{where}; "
          f"first bytes: {data[:64].hex()}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--only", type=int, default=None, help="run mutation ONLY alone")
    parser.add_argument("--save-dir", type=Path, default=None, help="where a failing input is written")
    parser.add_argument("elf", help="ELF file whose .eh_frame is mutated (libc.so.6)")
    args = parser.parse_args(argv)

    elf = ElfFile.open(args.elf)
    section = elf.section(".eh_frame")
    original = bytes(elf.section_data(section))
    entries = walk(original)
    indices = [args.only] if args.only is not None else range(args.count)
    bad_inputs = slowest = 0
    slowest_index, started = -1, time.perf_counter()
    for index in indices:
        print(index, flush=True)
        data = make_mutant(original, entries, args.seed, index)
        began = time.perf_counter()
        try:
            bad_inputs += check(data, section.addr) > 0
        except CfiError:
            bad_inputs += 1  # a table-wide failure is still a typed error
        except Exception:  # noqa: BLE001 - anything but CfiError is the finding: report and save it
            traceback.print_exc()
            return save_failure(args, data, index)
        elapsed = time.perf_counter() - began
        if elapsed > slowest:
            slowest, slowest_index = elapsed, index
        if elapsed > SLOW_MUTATION_SECONDS:
            print(f"mutation {index} of seed {args.seed} took {elapsed:.1f} s", file=sys.stderr)
            return 1
    print(f"done {len(indices)} mutations in {time.perf_counter() - started:.1f} s, {bad_inputs} with "
          f"errors, slowest {slowest * 1000:.0f} ms (mutation {slowest_index})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
