"""The differential check: one unwind step compiled (eh_elf) and interpreted (the DWARF backend of
the walker), from the same random register and memory states, at every interval of a module's
rows (first byte, last byte, one inside; the gaps between FDEs; just outside the covered range)."""

from __future__ import annotations

import array
import random
from collections import Counter
from dataclasses import dataclass, field

from fastunwind import _core
from fastunwind.address_space import ModuleImage

# the differential test reuses the compact table test's random states and record decoding
from tests.support.step_batch import (BIAS, RECORD_SIZE, REGISTERS, STACK_ADDRESS, STATE_WORDS, decode,
                                      random_stack, random_states)

NO_OUTCOME = _core.STEP_NO_OUTCOME
STATUSES = _core.EH_ELF_STATUSES
FRAME_POINTER_KIND = 3  #: walk.h FU_FRAME_FP
NO_UNWIND_INFO = 2  #: walk.h FU_WALK_NO_UNWIND_INFO
FAILED = 0xFF  #: kind -1 as an unsigned byte


@dataclass
class Agreement:
    module: str
    seed: int
    states: int = 0
    statuses: Counter = field(default_factory=Counter)  #: compiled step's status names
    mismatches: list[str] = field(default_factory=list)

    @property
    def recovered(self) -> int:
        return self.statuses["cfi"] + self.statuses["signal"]


def pcs_to_check(image: ModuleImage, rng: random.Random) -> list[int]:
    """svmas: every interval's first and last byte and one inside (gaps between FDEs included, as the
    walker's lookup resolves them: _core.eh_elf_rows), and around the covered range."""
    base, end, starts_bytes, _keys, _ = _core.eh_elf_rows(image.eh_frame, image.debug_frame)
    starts = array.array("Q")
    starts.frombytes(starts_bytes)
    ends = list(starts[1:]) + [end]
    out = []
    for start, stop in zip(starts, ends):
        out += [start, stop - 1, rng.randrange(start, stop)]
    if starts:
        out += [base - 1, end, end + 1, 0, (1 << 64) - 1]
    return out


def dwarf_space(image: ModuleImage, base: int, end: int) -> _core.AddressSpace:
    start = BIAS + max(base - 0x1000, 0)
    module = (start, BIAS + end + 0x1000, BIAS, image.eh_frame, image.debug_frame, image.segments, 0)
    return _core.AddressSpace([module], backend="dwarf")


def agree(compiled: bytes, dwarf: bytes) -> bool:
    """The compiled step's record equals the interpreter's; where the compiled code answers "no
    unwind information", the interpreter found no row either (it tried the frame pointer)."""
    status = compiled[3]
    if compiled[1] == NO_OUTCOME and compiled[0] == FAILED:
        if STATUSES[status] == "no_info":
            return dwarf[0] == FRAME_POINTER_KIND or (dwarf[0] == FAILED and dwarf[1] == NO_UNWIND_INFO)
        return False  # INTERPRET is counted, not compared; anything else is a bug
    if compiled[0] == FAILED:
        # the frame flags of a failed step say whether its CFI was a signal frame: the compiled
        # step does not report them (the walker knows from the status of a successful one)
        return compiled[:2] == dwarf[:2] and compiled[4:] == dwarf[4:]
    return compiled[:3] == dwarf[:3] and compiled[4:] == dwarf[4:]


def check_module(image: ModuleImage, eh_elf: _core.EhElf, seed: int, per_address: int = 2,
                 batch: int = 20000) -> Agreement:
    rng = random.Random(seed)
    result = Agreement(image.path, seed)
    base, end, *_ = _core.eh_elf_rows(image.eh_frame, image.debug_frame)
    space = dwarf_space(image, base, end)
    stack = random_stack(rng, base, end)
    svmas = [pc for pc in pcs_to_check(image, rng) for _ in range(per_address)]
    for first in range(0, len(svmas), batch):
        chunk = svmas[first:first + batch]
        compare_states(eh_elf, space, chunk, random_states(rng, chunk), stack, result)
    return result


def compare_states(eh_elf: _core.EhElf, space: _core.AddressSpace, svmas: list[int], states_b: bytes, stack: bytes,
                   result: Agreement) -> None:
    """One compiled and one interpreted step from each state (at svmas[i]) over `stack` at
    STACK_ADDRESS, counted and compared into `result`."""
    states = array.array("Q")
    states.frombytes(states_b)
    dwarf = _core.step_batch(space, states_b, stack, STACK_ADDRESS)
    compiled = _core.eh_elf_step_batch(eh_elf, space, states_b, stack, STACK_ADDRESS, BIAS)
    for i, svma in enumerate(svmas):
        at = slice(i * RECORD_SIZE, (i + 1) * RECORD_SIZE)
        ours, theirs = compiled[at], dwarf[at]
        result.states += 1
        status = ours[3] if ours[1] == NO_OUTCOME and ours[0] == FAILED else None
        result.statuses[STATUSES[status] if status is not None else _name(ours)] += 1
        if status is not None and STATUSES[status] == "interpret":
            continue
        if not agree(ours, theirs) and len(result.mismatches) < 10:
            state = states[i * STATE_WORDS:(i + 1) * STATE_WORDS]
            valid = state[REGISTERS] & 0xFFFFFFFF
            regs = " ".join(f"r{r}={state[r]:#x}" for r in range(REGISTERS) if valid >> r & 1)
            result.mismatches.append(
                f"svma {svma:#x}, return address: {bool(state[REGISTERS] >> 32)}, {regs}\n"
                f"  compiled: {decode(ours)} (status byte {ours[3]})\n  dwarf:    {decode(theirs)}")


def _name(record: bytes) -> str:
    if record[0] != FAILED:
        return "signal" if record[0] == 2 else "cfi"
    return {1: "past_dump", 3: "unreadable", 6: "expression_error", 7: "register_unknown"}.get(record[1], "?")
