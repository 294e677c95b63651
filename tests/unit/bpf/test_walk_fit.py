"""The BPF walk's cost split between the frames whose rule was looked up and those whose rule came
from the previous walk's memo: the least-squares plane through the sums the program keeps, against
samples built on a known plane and against a least-squares solution by hand."""

from __future__ import annotations

import math

from fastunwind.bpf import walk_fit_by_source


def sums(samples: list[tuple[int, int, int]]) -> dict[str, int]:
    """The program's counters for walked samples of (frames n, frames from the memo m, walk ns t)."""
    return {"walked_samples": len(samples), "frames": sum(n for n, _, _ in samples),
            "frames_squared": sum(n * n for n, _, _ in samples), "memo_frames": sum(m for _, m, _ in samples),
            "memo_frames_squared": sum(m * m for _, m, _ in samples),
            "memo_by_frames": sum(n * m for n, m, _ in samples), "walk_ns": sum(t for _, _, t in samples),
            "walk_ns_by_frames": sum(n * t for n, _, t in samples),
            "walk_ns_by_memo": sum(m * t for _, m, t in samples)}


def test_samples_on_a_plane_give_its_coefficients() -> None:
    # t = 900 + 250 (n - m) + 60 m
    samples = [(n, m, 900 + 250 * (n - m) + 60 * m) for n, m in [(30, 20), (35, 26), (12, 0), (40, 31), (8, 5)]]
    fit = walk_fit_by_source(sums(samples))
    assert fit is not None
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(fit, (900.0, 250.0, 60.0)))


def test_noisy_samples_give_the_least_squares_plane() -> None:
    # (x = n - m, y = m, t) = (1, 0, 10), (0, 1, 5), (1, 1, 14), (2, 1, 20): by hand, t = 2.5 + 7.5 x + 3 y
    # leaves the residuals 0, -0.5, 1, -0.5, orthogonal to 1, x and y (the normal equations)
    samples = [(1, 0, 10), (1, 1, 5), (2, 1, 14), (3, 1, 20)]
    fit = walk_fit_by_source(sums(samples))
    assert fit is not None
    assert all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(fit, (2.5, 7.5, 3.0)))


def test_no_fit_where_the_samples_cannot_tell_the_frames_apart() -> None:
    assert walk_fit_by_source(sums([(10, 0, 1000), (20, 0, 2000), (30, 0, 3000)])) is None  # no memo frame
    assert walk_fit_by_source(sums([(10, 5, 1000), (20, 10, 2000), (30, 15, 3000)])) is None  # a fixed share
    assert walk_fit_by_source(sums([(10, 5, 1000), (20, 3, 2000)])) is None  # two samples
    assert walk_fit_by_source({}) is None
