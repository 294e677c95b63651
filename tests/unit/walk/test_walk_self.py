"""The walker on the current process, against glibc's backtrace() taken at the same place
(libgcc's unwinder, in process): every frame above the capture point must agree."""

from __future__ import annotations

import ctypes
import random

import pytest

from fastunwind import _core
from fastunwind.address_space import ImageCache, current_process

IMAGES = ImageCache()


def walk_here(max_frames: int = 256):
    space = current_process(IMAGES)
    (outcome, fault, frames), oracle = _core.unwind_self(space.to_core(), max_frames)
    return space, outcome, fault, frames, oracle


def assert_agrees_with_backtrace(outcome, frames, oracle):
    ours = [frame[0] for frame in frames]
    # frame 0 differs by construction: getcontext() and backtrace() are two call sites
    assert ours[1:] == oracle[1:len(ours)], "\n".join(f"{i}: {a:#x} {b:#x}" for i, (a, b) in enumerate(zip(ours, oracle)))
    assert outcome == "end", outcome
    assert len(ours) == len(oracle)


def test_walk_from_python_matches_backtrace():
    _, outcome, _, frames, oracle = walk_here()
    assert_agrees_with_backtrace(outcome, frames, oracle)
    assert all(kind in (0, 1) and flags == 0 for _, _, kind, flags in frames)  # first frame, then CFI frames


def test_walk_through_deep_c_recursion():
    """Python 3.11 calls Python functions without C recursion; going through map() makes every
    level a few C frames of libpython."""
    def recurse(n):
        return walk_here(1024) if n == 0 else next(map(recurse, [n - 1]))

    _, outcome, _, frames, oracle = recurse(60)
    assert_agrees_with_backtrace(outcome, frames, oracle)
    assert len(frames) > 120


def test_walk_through_a_libc_qsort_callback():
    """libc's qsort calls back into libffi and Python: the stack crosses libc, libffi, libpython."""
    results = []
    comparator_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))

    def compare(a, b):
        if not results:
            results.append(walk_here())
        return a[0] - b[0]

    values = (ctypes.c_int * 8)(*[5, 3, 7, 1, 8, 2, 6, 4])
    libc = ctypes.CDLL("libc.so.6")
    libc.qsort(values, len(values), ctypes.sizeof(ctypes.c_int), comparator_type(compare))
    assert list(values) == sorted(values)
    space, outcome, _, frames, oracle = results[0]
    assert_agrees_with_backtrace(outcome, frames, oracle)
    paths = {space.mappings[m].path.rsplit("/", 1)[-1] for _, m, _, _ in frames if m is not None}
    assert any(p.startswith("libc.so") for p in paths) and any(p.startswith("libffi") for p in paths), paths


def test_frame_limit_is_an_outcome():
    _, outcome, _, frames, _ = walk_here(3)
    assert outcome == "frame_limit" and len(frames) == 3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_registers_and_stack_give_a_classified_outcome(seed):
    """Garbage registers and stack bytes: every walk ends with a named outcome, no crash."""
    rng = random.Random(seed)
    space = current_process(IMAGES)
    core = space.to_core()
    executable = [m for m in space.mappings if m.image is not None]
    outcomes = set()
    for _ in range(300):
        mapping = rng.choice(executable)
        ip = rng.randrange(mapping.start, mapping.end)
        sp = rng.randrange(1 << 47) & ~7
        stack = rng.randbytes(rng.choice([0, 8, 64, 4096]))
        registers = {r: rng.randrange(1 << 64) for r in range(16)}
        registers.update({7: sp, 16: ip})
        if rng.random() < 0.5:
            # a plausible stack: return addresses into real code
            words = [rng.choice([rng.randrange(1 << 64), rng.randrange(mapping.start, mapping.end)])
                     for _ in range(len(stack) // 8)]
            stack = b"".join(w.to_bytes(8, "little") for w in words)
        outcome, _, frames = _core.unwind(core, registers, stack, sp, 64)
        outcomes.add(outcome)
        assert 0 < len(frames) <= 64
    assert outcomes <= {"end", "truncated", "no_unwind_info", "unreadable", "no_progress", "sp_backwards",
                        "expression_error", "register_unknown", "frame_limit"}
