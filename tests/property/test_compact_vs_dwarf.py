"""Property: one unwind step with the compact table gives exactly what the DWARF interpreter gives,
at every row of real libraries (first byte, last byte, one inside, the gaps between FDEs and just
outside the table), from random register and memory states. The seed is printed; rerun one with
FASTUNWIND_TEST_SEED=N."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from fastunwind import _core
from fastunwind.address_space import ModuleImage

from tests.support.step_batch import (CASES, CASES_DIR, RECORD_SIZE, STACK_ADDRESS, STATE_WORDS, check_module, decode,
                                      module_spaces,
                                      random_stack, seed_from_environment, signal_context_states, signal_trampoline_fde)

LIBRARIES = {
    "libc": "/lib/x86_64-linux-gnu/libc.so.6",
    "ld.so": "/lib64/ld-linux-x86-64.so.2",
    "libstdc++": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "libm": "/lib/x86_64-linux-gnu/libm.so.6",
    # ffmpeg's encoders (ffmpeg is among the Makefile's packages): GCC's DRAP frames by the hundred,
    # CFA dereferenced through rbp, saves relative to rbp (and r13's to the CFA)
    "libx265": "/usr/lib/x86_64-linux-gnu/libx265.so.199",
    "libSvtAv1Enc": "/usr/lib/x86_64-linux-gnu/libSvtAv1Enc.so.1.4.1",
}


def run(image: ModuleImage, seed: int, per_address: int, min_recovered: float) -> None:
    compact = image.load_compact_table(use_cache=False)
    assert compact is not None, image.compact_error
    result = check_module(image, compact, seed, per_address)
    kinds = Counter(compact.rule(i)["cfa"] for i in range(compact.rule_count))
    rbp_slots = sum(1 for i in range(compact.rule_count) if compact.rule(i)["saved_at_rbp"])
    print(f"{image.path}: seed {seed}, {result.states} states, {result.fast_states} in compact rows, "
          f"{result.recovered} recovered a caller; {compact.row_count} rows, {compact.slow_row_count} slow; "
          f"rules by CFA kind {dict(kinds)}, {rbp_slots} with saves relative to rbp")
    assert result.states > 0
    assert not result.mismatches, f"seed {seed}:\n" + "\n".join(result.mismatches)
    assert result.recovered >= min_recovered * result.states, "the random states hardly ever unwind: vacuous"


@pytest.mark.parametrize("name", LIBRARIES)
def test_every_row_of_a_library_steps_as_the_dwarf_interpreter(name):
    path = LIBRARIES[name]
    if not os.path.exists(path):
        pytest.skip(f"{path} not installed")
    run(ModuleImage.load(path), seed_from_environment(sum(map(ord, name))), per_address=2, min_recovered=0.5)


@pytest.mark.parametrize("case,source,flags", CASES, ids=[c[0] for c in CASES])
def test_hand_written_cases_step_as_the_dwarf_interpreter(case, source, flags, tmp_path, assemble):
    binary = assemble(CASES_DIR / source, tmp_path, flags)
    run(ModuleImage.load(str(binary)), seed_from_environment(sum(map(ord, case))), per_address=40, min_recovered=0.04)


def test_the_signal_trampoline_has_a_rule_of_its_own_that_steps_as_the_dwarf_interpreter():
    """glibc's __restore_rt row is FU_COMPACT_CFA_SIGNAL_CONTEXT, not a slow row; from random states
    with the signal context anywhere from inside the dump to past its end, the table's step equals
    the interpreter's (registers, a signal frame, or the fault address of the first slot past the
    dump)."""
    path = LIBRARIES["libc"]
    image = ModuleImage.load(path)
    compact = image.load_compact_table(use_cache=False)
    fde = signal_trampoline_fde(path)
    assert compact.rule(compact.lookup(fde.pc_begin)[1])["cfa"] == "signal_context"
    seed = seed_from_environment(1717)
    rng = random.Random(seed)
    states = signal_context_states(rng, fde.pc_begin)
    stack = random_stack(rng, compact.base_svma, compact.end_svma)
    spaces = module_spaces(image, compact)
    records = {b: _core.step_batch(space, states, stack, STACK_ADDRESS) for b, space in spaces.items()}
    outcomes = Counter()
    for i in range(len(states) // (8 * STATE_WORDS)):
        at = slice(i * RECORD_SIZE, (i + 1) * RECORD_SIZE)
        dwarf = records["dwarf"][at]
        outcomes[" ".join(decode(dwarf).split()[:2])] += 1
        for backend in ("table-only", "auto"):
            assert records[backend][at] == dwarf, (f"seed {seed}, state {i}, {backend}:\n  {decode(records[backend][at])}"
                                                   f"\n  dwarf: {decode(dwarf)}")
    assert outcomes["kind 2"] and outcomes["failed truncated"], outcomes  # in the window, and past the end
