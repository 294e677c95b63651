"""Helpers of every test layer (`from tests.support.tools import ...`): run the fastunwind CLI and
readelf, compare with readelf, assemble test sources. tests/conftest.py turns them into fixtures.

The comparison machinery lives in scripts/oracle_files.py so `make sweep` shares it.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scripts import oracle_files


def run_fastunwind(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """`python3 -m fastunwind ARGS` with src/ importable; stdout and stderr captured as bytes."""
    return subprocess.run(oracle_files.tool_command([str(a) for a in args]), capture_output=True,
                          env=oracle_files.subprocess_env(), stdin=subprocess.DEVNULL, **kwargs)


def run_readelf(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["readelf", *[str(a) for a in args]], capture_output=True,
                          env={**os.environ, "LC_ALL": "C"}, stdin=subprocess.DEVNULL, **kwargs)


def assert_matches_readelf(path: str | os.PathLike[str], modes=("interp", "raw")) -> None:
    """`table` == readelf -wF and `table --raw` == readelf -wf on stdout, byte for byte. Our exit
    code must be 0 wherever readelf ran clean; where readelf warns, only stdout is compared."""
    problems = []
    for mode in modes:
        result = oracle_files.compare_file(path, mode)
        if not result.identical:
            problems.append(result.describe())
        elif result.tool_returncode != 0 and not result.readelf_complained():
            problems.append("stdout identical but the tool failed where readelf ran clean\n"
                            + result.describe())
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def assemble_source(source: str | os.PathLike[str], tmp_path: Path, extra_flags=(),
                    output_name: str | None = None) -> Path:
    """Build `source` (a path to .s/.S/.c, or assembly text) into an object in `tmp_path` with
    `gcc -c`, or into an executable when extra_flags holds "--link". Fails the test on a build error."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                    and Path(source).suffix in {".s", ".S", ".c"}):
        source_path = Path(source)
    else:
        source_path = tmp_path / "input.s"
        source_path.write_text(str(source))
    link = "--link" in extra_flags
    flags = [flag for flag in extra_flags if flag != "--link"]
    output = tmp_path / (output_name or source_path.stem + ("" if link else ".o"))
    command = ["gcc", *([] if link else ["-c"]), *flags, "-o", str(output), str(source_path)]
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode != 0:
        pytest.fail(f"{' '.join(command)} failed:\n{built.stderr}", pytrace=False)
    return output
