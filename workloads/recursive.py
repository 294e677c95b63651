#!/usr/bin/env python3
"""A CPU-bound, deeply recursive Python program: the interpreter's C stack under perf.

    python3 workloads/recursive.py SECONDS [DEPTH]

Recurses DEPTH (default 500) Python frames deep, does arithmetic at the bottom, unwinds and starts
over until SECONDS of its own CPU time have passed (so a loaded machine records as many
cpu-clock samples as an idle one). Since CPython 3.11 a Python-to-Python call does not
recurse in C (the frames are pushed inside one _PyEval_EvalFrameDefault), so the native stack stays
shallow while the Python stack is deep; built-ins called at each level (sum, sorted, a lambda through
map) do re-enter the evaluation loop from C and so show up as native frames.
"""
from __future__ import annotations

import sys
import time


def recursive_descent_work(depth: int, seed: int) -> int:
    if depth == 0:
        total = 0
        for value in range(2000):
            total = (total * 31 + (value ^ seed)) & 0xFFFFFFFF
        return total
    # Not a tail call: the result is used after the call returns, so every frame stays live.
    below = recursive_descent_work(depth - 1, seed * 7 + depth)
    if depth % 50 == 0:
        # Every 50 levels, call back into Python from C (map -> lambda), so a sample can hold
        # interpreter frames below and above a C built-in.
        below ^= sum(map(lambda x: x * depth, range(20)))
    return (below + depth) & 0xFFFFFFFF


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    seconds = float(argv[1])
    depth = int(argv[2]) if len(argv) == 3 else 500
    sys.setrecursionlimit(max(sys.getrecursionlimit(), depth + 100))
    deadline = time.process_time() + seconds
    result, rounds = 0, 0
    while time.process_time() < deadline:
        result ^= recursive_descent_work(depth, rounds)
        rounds += 1
    return 0 if result >= 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
