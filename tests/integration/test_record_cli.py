"""`fastunwind record`: perf record driven through a pipe, the samples unwound as they arrive.

- A real program recorded by `record` gives the folded stacks an offline `perf record` +
  `fastunwind perf-script --format folded` of a similar run gives: the same hottest stacks (two
  runs sample differently: compared statistically).
- Pipe mode and file mode of one recording decode alike: `perf record -o - > pipe.data`, turned
  into a file-mode perf.data by `perf inject`, prints the same text through perf-script.
- perf missing, perf not allowed to record, bad arguments: one line and a non-zero status.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from fastunwind.perf.record import explain_failure

from scripts import record_workloads
from tests.support.paths import WORKLOADS_DIR
from tests.support.tools import run_fastunwind

#: the share of samples the hottest stacks of the two runs must have in common
SHARED_TOP = 0.6


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("record")
    problem = record_workloads.perf_problem(directory)
    if problem:
        pytest.skip(problem.message)
    out = directory / "inline_calls"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(out), str(WORKLOADS_DIR / "srcline" / "inline_calls.c")], check=True)
    return out


def _folded(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        # kernel frames above the user leaf depend on interrupts of the moment: user stacks only
        user = ";".join(frame for frame in stack.split(";") if not frame.startswith(("asm_", "sysvec_", "__irq")))
        counts[user.split(";asm_")[0]] += int(count)
    return counts


def test_record_matches_offline_recording(program: Path, tmp_path: Path) -> None:
    recorded = tmp_path / "recorded.folded"
    result = run_fastunwind(["record", "-F", "1000", "-o", recorded, "--format", "folded", "--", program, "4000"])
    assert result.returncode == 0, result.stderr
    assert b"wrote" in result.stderr
    data = tmp_path / "offline.data"
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1000", "--call-graph", "dwarf", "-o", str(data),
                    "--", str(program), "4000"], check=True, capture_output=True)
    offline = run_fastunwind(["perf-script", "-i", data, "--format", "folded"], check=True).stdout.decode()
    ours, theirs = _folded(recorded.read_text()), _folded(offline)
    assert sum(ours.values()) > 100 and sum(theirs.values()) > 100
    top = [stack for stack, _ in ours.most_common(3)]
    assert top[0] in dict(theirs.most_common(3))
    share = lambda counts, stack: counts[stack] / sum(counts.values())  # noqa: E731
    assert sum(min(share(ours, s), share(theirs, s)) for s in top) >= SHARED_TOP * sum(share(ours, s) for s in top)


def test_pipe_mode_decodes_as_file_mode(program: Path, tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.data"
    with open(pipe, "wb") as out:
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1000", "--call-graph", "dwarf", "-o", "-",
                        "--", str(program), "4000"], check=True, stdout=out, stderr=subprocess.DEVNULL)
    file_mode = tmp_path / "file.data"
    with open(pipe, "rb") as stdin:  # perf inject reads a pipe-mode file from its standard input, not -i
        subprocess.run(["perf", "inject", "-o", str(file_mode)], stdin=stdin, check=True, capture_output=True)
    from_pipe = run_fastunwind(["perf-script", "-i", pipe], check=True).stdout
    from_file = run_fastunwind(["perf-script", "-i", file_mode], check=True).stdout
    with open(pipe, "rb") as stdin:
        from_stdin = subprocess.run([*_cli(), "perf-script", "-i", "-"], stdin=stdin, capture_output=True,
                                    env=_env(), check=True).stdout
    assert from_pipe.count(b"cpu-clock") > 100
    assert from_pipe == from_file == from_stdin


def _cli() -> list[str]:
    from scripts import oracle_files

    return oracle_files.tool_command([])


def _env() -> dict[str, str]:
    from scripts import oracle_files

    return oracle_files.subprocess_env()


def test_bad_arguments_are_one_line(program: Path, tmp_path: Path) -> None:
    neither = run_fastunwind(["record", "-o", tmp_path / "x"])
    both = run_fastunwind(["record", "-p", "1", "--", program])
    assert neither.returncode == both.returncode == 2
    assert neither.stderr.decode().count("\n") == 1 and b"-p PID or -- COMMAND" in neither.stderr
    unwritable = run_fastunwind(["record", "-o", tmp_path / "missing" / "out", "--", program, "10"])
    assert unwritable.returncode == 1 and unwritable.stderr.startswith(b"fastunwind: error: cannot write ")


def test_perf_missing_is_one_line(tmp_path: Path) -> None:
    env = {**_env(), "PATH": str(tmp_path)}  # no perf there (the interpreter is named by its full path)
    result = subprocess.run([*_cli(), "record", "--", "true"], capture_output=True, env=env)
    assert result.returncode == 1
    assert result.stderr.decode().strip() == "fastunwind: error: perf is not installed (Debian: apt-get install linux-perf)"


def test_not_permitted_names_the_sysctl() -> None:
    message = explain_failure(255, "Error:\nAccess to performance monitoring and observability operations is limited.\n"
                                   "Consider adjusting /proc/sys/kernel/perf_event_paranoid setting")
    assert "kernel.perf_event_paranoid = " in message and "sudo sysctl kernel.perf_event_paranoid=1" in message
    assert "\n" not in message
    assert explain_failure(1, "failed to mmap\n") == "perf record failed (exit status 1): failed to mmap"
