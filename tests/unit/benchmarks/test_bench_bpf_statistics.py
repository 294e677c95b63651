"""bench_bpf's paired overhead test: the sign test's p-value and the median's distribution-free
interval, against values computed by hand from the binomial distribution."""

from __future__ import annotations

import math

import json
from pathlib import Path

import pytest

from benchmarks.bench_bpf import (CONFIGURATIONS, DECIDER, SOURCE_FIT, PoolError, best, comparisons, main,
                                  median_interval, paired, per_sample, pooled, rotated, sign_test)


def test_the_sign_test_is_the_exact_two_sided_binomial() -> None:
    # 20 rounds below, 10 above: 2 * P(X <= 10), X ~ Binomial(30, 1/2)
    below, above, p = sign_test([(1.0, 2.0)] * 20 + [(2.0, 1.0)] * 10)
    assert (below, above) == (20, 10)
    assert math.isclose(p, 2 * sum(math.comb(30, k) for k in range(11)) / 2 ** 30)
    # ties are left out; an even split is p = 1
    assert sign_test([(1.0, 1.0)] * 5 + [(1.0, 2.0), (2.0, 1.0)]) == (1, 1, 1.0)
    assert sign_test([]) == (0, 0, 1.0)


def test_the_median_interval_is_the_binomial_order_statistics() -> None:
    # n = 30: P(X <= 9) = 0.0214 <= 0.025 < P(X <= 10) = 0.0494: ranks 10 and 21
    median, low, high = median_interval([float(v) for v in range(30)])
    assert (median, low, high) == (14.5, 9.0, 20.0)
    # five values cannot hold a 95% interval (P(X = 0) = 1/32 > 0.025)
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (3.0, None, None)


def test_a_verdict_needs_the_sign_test() -> None:
    rounds = [{"a": (1.0, 1.0), "b": (1.1, 1.0)}] * 12
    assert paired(rounds, "a", "b", 0)["verdict"] == "below"
    assert paired(rounds, "b", "a", 0)["verdict"] == "above"
    assert paired(rounds, "a", "b", 1)["verdict"] == "not shown"  # all ties in wall
    mixed = [{"a": (1.0, 0.0), "b": (1.1, 0.0)}, {"a": (1.1, 0.0), "b": (1.0, 0.0)}] * 6
    assert paired(mixed, "a", "b", 0)["verdict"] == "not shown"


def test_each_configuration_comes_first_in_turn() -> None:
    firsts = [rotated(CONFIGURATIONS, i)[0] for i in range(len(CONFIGURATIONS))]
    assert sorted(firsts) == sorted(CONFIGURATIONS)
    assert all(sorted(rotated(CONFIGURATIONS, i)) == sorted(CONFIGURATIONS) for i in range(7))


def test_the_99_hz_rounds_compare_bpf_with_perf_alone() -> None:
    rounds = [{"bpf 99 Hz": (1.0, 2.0), "perf dwarf 99 Hz": (1.1, 1.0)}] * 10
    found = comparisons(rounds, DECIDER)
    assert list(found) == ["bpf 99 Hz / perf dwarf 99 Hz, cpu", "bpf 99 Hz / perf dwarf 99 Hz, wall"]
    assert found["bpf 99 Hz / perf dwarf 99 Hz, cpu"]["verdict"] == "below"
    assert found["bpf 99 Hz / perf dwarf 99 Hz, wall"]["verdict"] == "above"
    # the eight configurations: at each rate bpf against each perf, and the three profilers
    # against none, and at 999 Hz each profiler against perf without stacks and that against none,
    # for CPU and wall
    eight = [{name: (1.0, 1.0) for name in CONFIGURATIONS}] * 3
    found = comparisons(eight, CONFIGURATIONS)
    assert len(found) == 28 and "perf dwarf 999 Hz / perf samples 999 Hz, cpu" in found
    assert "bpf 99 Hz / perf dwarf 64 KiB 99 Hz, cpu" in found
    assert "perf dwarf 64 KiB 999 Hz / perf samples 999 Hz, wall" in found


def test_the_cost_per_sample_is_the_ratios_excess_over_the_samples() -> None:
    # a median ratio of 1.01 at 999 Hz is 10 us a sample; at 99 Hz, 101 us
    c = {"median_ratio": 1.01, "ratio_low": 1.0, "ratio_high": None}
    median, low, high = per_sample("bpf 999 Hz / perf samples 999 Hz, cpu", c)
    assert math.isclose(median, 0.01 / 999 * 1e6) and low == 0.0 and high is None
    assert math.isclose(per_sample("perf dwarf 99 Hz / none, wall", c)[0], 0.01 / 99 * 1e6)


def report(rounds: list[dict[str, tuple[float, float]]], command: list[str], tree: str = "abc") -> dict[str, object]:
    """A --json report holding only the 99 Hz rounds, as bench_bpf writes it (the rounds as JSON lists)."""
    decided = json.loads(json.dumps({"rounds": rounds, "configurations": DECIDER}))
    return {"tree": tree, "overhead": None, "overhead_command": ["cc"], "overhead_99": decided,
            "overhead_99_command": command}


def test_pooled_rounds_decide_what_each_run_alone_does_not() -> None:
    # each run: 8 rounds below, 4 above (p = 0.39); three runs: 24 and 12 (p = 0.065); four: 32, 16
    run = [{"bpf 99 Hz": (1.0, 1.0), "perf dwarf 99 Hz": (1.1, 1.0)}] * 8 + \
          [{"bpf 99 Hz": (1.1, 1.0), "perf dwarf 99 Hz": (1.0, 1.0)}] * 4
    alone = pooled([report(run, ["clang"])])["overhead_99"]["comparisons"]["bpf 99 Hz / perf dwarf 99 Hz, cpu"]
    assert alone["verdict"] == "not shown"
    four = pooled([report(run, ["clang"])] * 4)
    cpu = four["overhead_99"]["comparisons"]["bpf 99 Hz / perf dwarf 99 Hz, cpu"]
    assert (cpu["below"], cpu["above"], cpu["verdict"]) == (32, 16, "below")
    assert math.isclose(cpu["p"], sign_test([(1.0, 2.0)] * 32 + [(2.0, 1.0)] * 16)[2])
    assert four["overhead_99"]["runs"] == 4 and four["overhead"] is None and four["tree"] == "abc"


def test_only_rounds_of_one_program_and_one_tree_are_pooled() -> None:
    run = [{"bpf 99 Hz": (1.0, 1.0), "perf dwarf 99 Hz": (1.1, 1.0)}] * 3
    with pytest.raises(PoolError, match="cannot be pooled"):
        pooled([report(run, ["clang", "a.c"]), report(run, ["clang", "b.c"])])
    with pytest.raises(PoolError, match="different trees"):
        pooled([report(run, ["clang"], "abc"), report(run, ["clang"], "abc+changes")])
    with pytest.raises(PoolError, match="no report holds paired rounds"):
        pooled([{"overhead": None, "overhead_99": None}])


def test_pool_prints_the_verdict_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = [{"bpf 99 Hz": (1.0, 1.0), "perf dwarf 99 Hz": (1.1, 1.2)}] * 6
    files = []
    for i in range(2):
        files.append(tmp_path / f"{i}.json")
        files[-1].write_text(json.dumps(report(run, ["clang"])))
    assert main(["--pool", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "12 rounds in rotating order, pooled from 2 runs" in out
    assert "bpf 99 Hz / perf dwarf 99 Hz, cpu" in out and "below" in out
    (tmp_path / "bad.json").write_text("{")
    assert main(["--pool", str(tmp_path / "bad.json")]) == 2
    assert "bench_bpf --pool" in capsys.readouterr().err
