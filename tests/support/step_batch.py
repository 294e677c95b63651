"""Shared by the compact table and eh_elf property tests (tests/property/) and benchmarks/bench_eh_elf.py:
one unwind step, from random register and memory states, with the compact backend and with the DWARF
backend, at chosen addresses of a module; and the hand-written cases (tests/golden/cases/) that both
property tests link and step through."""

from __future__ import annotations

import array
import os
import random
from dataclasses import dataclass, field

from fastunwind import _core
from fastunwind.address_space import ModuleImage
from fastunwind.cfi import EH_FRAME, Fde, UnwindInfo

from tests.support.paths import CASES_DIR  # noqa: F401 (with CASES)

REGISTERS = 17  #: DWARF 0..16 (16: the IP)
RSP, RBP, RA = 7, 6, 16
STATE_WORDS = REGISTERS + 1  #: walk_binding.c fu_step_state: regs[17], then valid | ip_is_return_address << 32
RECORD_SIZE = 8 + 8 + 8 * REGISTERS  #: fu_step_record
STACK_ADDRESS = 0x7FFD_1234_0000
STACK_SIZE = 64 * 1024
#: where the module is mapped: avma = svma + BIAS
BIAS = 0x7F00_0000_0000
OUTCOMES = ("end", "truncated", "no_unwind_info", "unreadable", "no_progress", "sp_backwards",
            "expression_error", "register_unknown", "frame_limit")
#: drap.c calls an external consume(); any code address links it (it never runs)
DEFINE_CONSUME = "-Wl,--defsym,consume=main"
#: hand-written cases that reach each compact CFA kind and the slow path: DRAP (CFA by
#: DW_OP_breg; DW_OP_deref, and r10-based CFA in the prologue), both PLT flavours (the lazy one is
#: recognised, the IBT one is not), signal frames, registers beyond the walker's, CFA expressions
CASES = [
    ("drap-O2", "drap.c", ("--link", "-O2", DEFINE_CONSUME)),
    ("drap-O2-mstackrealign", "drap.c", ("--link", "-O2", "-mstackrealign", DEFINE_CONSUME)),
    ("drap-O0", "drap.c", ("--link", "-O0", DEFINE_CONSUME)),
    ("plt-no-pie-now", "plt_main.c", ("--link", "-O2", "-no-pie", "-Wl,-z,now")),
    ("plt-ibt", "plt_main.c", ("--link", "-O2", "-fcf-protection=full", "-Wl,-z,ibtplt")),
    ("signal_frame", "signal_frame.s", ("--link", "-nostdlib", "-static", "-no-pie")),
    ("registers", "registers.s", ("--link", "-nostdlib", "-static", "-no-pie")),
    ("expressions", "expressions.s", ("--link", "-nostdlib", "-static", "-no-pie")),
    ("opcodes_gas", "opcodes_gas.s", ("--link", "-nostdlib", "-static", "-no-pie")),
    ("cfa_rule_transitions", "cfa_rule_transitions.s", ("--link", "-nostdlib", "-static", "-no-pie")),
    ("both_sections", "both_sections.s", ("--link", "-nostdlib", "-static", "-no-pie")),
]


@dataclass
class Agreement:
    module: str
    seed: int
    states: int = 0
    fast_states: int = 0  #: looked up in a row the compact table answers itself
    recovered: int = 0  #: steps that gave the caller's registers (not a failure)
    mismatches: list[str] = field(default_factory=list)


def module_spaces(image: ModuleImage, compact: _core.CompactTable, backends=("dwarf", "auto", "table-only"),
                  compiled=None) -> dict[str, _core.AddressSpace]:
    """The module alone (with its eh_elf if `compiled` is given), mapped at BIAS over its covered
    range and a page either side, once per backend."""
    start = BIAS + max(compact.base_svma - 0x1000, 0)
    end = BIAS + compact.end_svma + 0x1000
    module = (start, end, BIAS, image.eh_frame, image.debug_frame, image.segments, 0, compact, compiled)
    return {backend: _core.AddressSpace([module], backend=backend) for backend in backends}


def addresses_to_check(compact: _core.CompactTable, rng: random.Random) -> list[int]:
    """svma of every row's first and last byte and one byte inside, and just outside the table."""
    starts_b, _ = compact.rows()
    starts = array.array("Q")
    starts.frombytes(starts_b)
    out = []
    ends = list(starts[1:]) + [compact.end_svma]
    for start, end in zip(starts, ends):
        out += [start, end - 1, rng.randrange(start, end)]
    if compact.row_count:
        out += [compact.base_svma - 1, compact.end_svma, compact.end_svma + 1]
    return out


def random_state(rng: random.Random, avma: int) -> list[int]:
    """Registers (some unknown) for a frame at `avma`: rsp in the stack dump (sometimes near its end,
    so reads run past it), rbp near rsp or anywhere, other registers random or stack pointers."""
    regs = [0] * REGISTERS
    for r in range(REGISTERS):
        choice = rng.random()
        regs[r] = (STACK_ADDRESS + 8 * rng.randrange(STACK_SIZE // 8) if choice < 0.3
                   else rng.randrange(1 << 64))
    if rng.random() < 0.85:
        regs[RSP] = STACK_ADDRESS + 8 * rng.randrange(64, STACK_SIZE // 8 - 64)
    else:
        regs[RSP] = STACK_ADDRESS + STACK_SIZE - 8 * rng.randrange(0, 64)
    if rng.random() < 0.5:
        regs[RBP] = regs[RSP] + 8 * rng.randrange(0, 64)
    valid = 0
    for r in range(REGISTERS):
        if r == RA or rng.random() < 0.9:
            valid |= 1 << r
    return_address = rng.random() < 0.5
    regs[RA] = avma + 1 if return_address else avma  # the lookup address is avma either way
    return regs + [valid | (int(return_address) << 32)]


def signal_trampoline_fde(path: str) -> Fde:
    """The one signal-frame FDE ('S' augmentation) of a library's .eh_frame: glibc's __restore_rt."""
    (section,) = [s for s in UnwindInfo.open(path).sections if s.kind == EH_FRAME]
    (fde,) = [fde for fde in section.fdes() if fde.signal_frame]
    return fde


def signal_context_states(rng: random.Random, svma: int) -> bytes:
    """random_states at `svma` (a signal trampoline, mapped at BIAS) whose rsp, known, slides over
    the dump's last 208 bytes and 16 past its end, 4 states each: the signal context at rsp lies in
    the window, straddles its end, or is past it."""
    states = array.array("Q")
    for rsp in range(STACK_ADDRESS + STACK_SIZE - 208, STACK_ADDRESS + STACK_SIZE + 16, 8):
        for _ in range(4):
            state = random_state(rng, svma + BIAS)
            state[RSP] = rsp
            state[REGISTERS] |= 1 << RSP
            states.extend(state)
    return states.tobytes()


def random_stack(rng: random.Random, base_svma: int, end_svma: int) -> bytes:
    """STACK_SIZE random bytes with plausible return addresses (into [base_svma, end_svma) mapped at
    BIAS) and stack pointers planted among the words, so that random steps go somewhere."""
    words = array.array("Q", rng.randbytes(STACK_SIZE))
    for i in range(0, len(words), 3):
        words[i] = BIAS + rng.randrange(base_svma, max(end_svma, base_svma + 1))
    for i in range(1, len(words), 5):
        words[i] = STACK_ADDRESS + 8 * rng.randrange(STACK_SIZE // 8)
    return words.tobytes()


def random_states(rng: random.Random, svmas: list[int]) -> bytes:
    """One random_state per svma (mapped at BIAS), in step_batch's state format."""
    states = array.array("Q")
    for svma in svmas:
        states.extend(random_state(rng, (svma + BIAS) & ((1 << 64) - 1)))
    return states.tobytes()


def check_module(image: ModuleImage, compact: _core.CompactTable, seed: int, per_address: int = 2,
                 batch: int = 20000) -> Agreement:
    """Step from `per_address` random states at every address of addresses_to_check, with each
    backend; "auto" must equal "dwarf" everywhere, "table-only" must equal "dwarf" where the row is
    not on the slow path."""
    rng = random.Random(seed)
    result = Agreement(image.path, seed)
    spaces = module_spaces(image, compact)
    stack = random_stack(rng, compact.base_svma, compact.end_svma)
    slow_rules = {i for i in range(compact.rule_count) if compact.rule(i)["cfa"] == "slow"}
    addresses = addresses_to_check(compact, rng)
    svmas = [a for a in addresses for _ in range(per_address)]
    for first in range(0, len(svmas), batch):
        chunk = svmas[first:first + batch]
        states_b = random_states(rng, chunk)
        states = array.array("Q")
        states.frombytes(states_b)
        records = {b: _core.step_batch(space, states_b, stack, STACK_ADDRESS) for b, space in spaces.items()}
        for i, svma in enumerate(chunk):
            found = compact.lookup(svma)
            slow = found is not None and found[1] in slow_rules
            at = slice(i * RECORD_SIZE, (i + 1) * RECORD_SIZE)
            dwarf = records["dwarf"][at]
            result.states += 1
            result.fast_states += not slow
            result.recovered += dwarf[0] != 0xFF  # kind -1: failed
            for backend in ("auto",) if slow else ("auto", "table-only"):
                if records[backend][at] != dwarf and len(result.mismatches) < 10:
                    result.mismatches.append(describe(svma, states[i * STATE_WORDS:(i + 1) * STATE_WORDS],
                                                      backend, records[backend][at], dwarf, found, compact))
    return result


def decode(record: bytes) -> str:
    kind = int.from_bytes(record[0:1], "little", signed=True)
    if kind < 0:
        fault = int.from_bytes(record[8:16], "little")
        return f"failed {OUTCOMES[record[1]]} at {fault:#x}"
    valid = int.from_bytes(record[4:8], "little")
    regs = array.array("Q", record[16:])
    shown = " ".join(f"r{r}={regs[r]:#x}" for r in range(REGISTERS) if valid >> r & 1)
    return f"kind {kind} flags {record[2]} valid {valid:#x}: {shown}"


def describe(svma, state, backend, theirs, dwarf, found, compact) -> str:
    valid = state[REGISTERS] & 0xFFFFFFFF
    regs = " ".join(f"r{r}={state[r]:#x}" for r in range(REGISTERS) if valid >> r & 1)
    rule = compact.rule(found[1]) if found else None
    return (f"svma {svma:#x} (rule {rule}), return address: {bool(state[REGISTERS] >> 32)}, {regs}\n"
            f"  {backend}: {decode(theirs)}\n  dwarf: {decode(dwarf)}")


def seed_from_environment(default: int) -> int:
    return int(os.environ.get("FASTUNWIND_TEST_SEED", default))
