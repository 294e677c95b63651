"""benchmarks/bench_record.py's argument handling and its slowdown arithmetic (no recording, no timing)."""

from __future__ import annotations

import pytest

from benchmarks import bench_record


def test_defaults_measure_99_and_999_hz() -> None:
    args = bench_record.parse_arguments([])
    assert (args.hz, args.repeat, args.no_bpf) == ([99, 999], 3, False)


def test_frequencies_are_a_comma_separated_list() -> None:
    assert bench_record.parse_arguments(["--hz", "49,4999", "--no-bpf"]).hz == [49, 4999]


@pytest.mark.parametrize("argv", [["--hz", "fast"], ["--hz", "0"], ["--hz", ""], ["--repeat", "0"],
                                  ["--seconds", "-1"]])
def test_bad_arguments_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench_record.parse_arguments(argv)
    assert exit_info.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_modes_interleave_every_frequency_and_leave_bpf_out_when_asked() -> None:
    names = [name for name, _ in bench_record.modes(["true"], [99, 999], bpf=False)]
    assert names == ["alone", "perf record + script 99 Hz", "fastunwind record 99 Hz",
                     "perf record + script 999 Hz", "fastunwind record 999 Hz"]
    assert len(bench_record.modes(["true"], [99], bpf=True)) == 4


def test_slowdowns_are_against_the_program_alone() -> None:
    runs = {"alone": [dict.fromkeys(bench_record.FIGURES, 2.0), dict.fromkeys(bench_record.FIGURES, 4.0)],
            "profiled": [dict.fromkeys(bench_record.FIGURES, 3.0), dict.fromkeys(bench_record.FIGURES, 9.0)]}
    report = bench_record.with_slowdowns({name: bench_record.summarize(r) for name, r in runs.items()})
    assert report["profiled"]["target_cpu_slowdown"] == {"best": 1.5, "median": 2.0}
    assert report["alone"]["target_wall_slowdown"] == {"best": 1.0, "median": 1.0}
