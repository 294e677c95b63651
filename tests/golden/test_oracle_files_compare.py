"""The streaming comparison itself (scripts/oracle_files.py), checked on small fake outputs so a
harness bug cannot pass as "identical"."""
from __future__ import annotations

import sys

from scripts import oracle_files


def _printer(text: str, exit_code: int = 0) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stdout.write({text!r}); sys.exit({exit_code})"]


def test_identical_outputs():
    result = oracle_files.compare_outputs(_printer("a\nb\n"), _printer("a\nb\n"))
    assert result.identical and result.bytes_compared == 4


def test_first_difference_line_and_context():
    ours = "".join(f"line {i}\n" for i in range(1, 100)).replace("line 57\n", "line 57 changed\n")
    theirs = "".join(f"line {i}\n" for i in range(1, 100))
    result = oracle_files.compare_outputs(_printer(ours), _printer(theirs))
    assert not result.identical
    assert result.first_difference_line == 57
    text = result.describe()
    assert "'line 56'" in text and "'line 57 changed'" in text and "'line 57'" in text


def test_truncated_output_is_a_difference():
    result = oracle_files.compare_outputs(_printer("a\nb\n"), _printer("a\nb\nc\n"))
    assert not result.identical and result.first_difference_line == 3
    assert "tool    <end of output>" in result.describe()


def test_difference_beyond_one_chunk():
    line = "x" * 100 + "\n"
    lines = oracle_files.CHUNK // len(line) * 3
    write = "import sys; line = 'x' * 100 + '\\n'; sys.stdout.write("
    theirs = [sys.executable, "-c", write + f"line * {lines})"]
    ours = [sys.executable, "-c", write + f"line * {lines - 5} + 'y' * 100 + '\\n' + line * 4)"]
    result = oracle_files.compare_outputs(ours, theirs)
    assert not result.identical and result.first_difference_line == lines - 4


def test_exit_code_and_stderr_are_reported():
    result = oracle_files.compare_outputs(
        [sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"], _printer(""))
    assert result.identical and result.tool_returncode == 3 and "boom" in result.tool_stderr
