"""script.executed_program: the ELF file an exec of a command runs, a script's interpreter followed
through `#!` lines, `env` and PATH, nested up to MAX_INTERPRETERS; `record --bpf -- CMD` sizes its
table map from that file's modules (bpf.images_in_scope)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fastunwind import bpf
from fastunwind.address_space import ImageCache
from fastunwind.errors import ScriptError
from fastunwind.script import MAX_INTERPRETERS, executed_program

PYTHON = os.path.realpath(sys.executable)  # an ELF file
ENV = "/usr/bin/env"


def script(path: Path, first_line: str) -> str:
    path.write_text(first_line + "\nbody\n")
    path.chmod(0o755)
    return str(path)


def test_an_elf_program_is_itself() -> None:
    assert executed_program(PYTHON) == PYTHON


def test_a_script_runs_its_interpreter(tmp_path: Path) -> None:
    assert executed_program(script(tmp_path / "s", f"#!{PYTHON}")) == PYTHON
    # blanks around the interpreter, and its single argument
    assert executed_program(script(tmp_path / "t", f"#! \t{PYTHON}   -u -X dev ")) == PYTHON


@pytest.mark.skipif(not os.path.isfile(ENV), reason=f"no {ENV}")
def test_env_runs_its_program_from_the_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mypython").symlink_to(PYTHON)
    path = str(bin_dir)
    assert executed_program(script(tmp_path / "s", f"#!{ENV} mypython"), path) == str(bin_dir / "mypython")
    # -S splits the rest: options, NAME=VALUE and -u NAME are skipped
    line = f"#!{ENV} -S -i -u HOME LANG=C mypython -u"
    assert executed_program(script(tmp_path / "t", line), path) == str(bin_dir / "mypython")
    # a path is taken as it is
    assert executed_program(script(tmp_path / "u", f"#!{ENV} {PYTHON}"), "") == PYTHON


@pytest.mark.skipif(not os.path.isfile(ENV), reason=f"no {ENV}")
def test_a_script_whose_interpreter_is_a_script(tmp_path: Path) -> None:
    inner = script(tmp_path / "inner", f"#!{PYTHON}")
    middle = script(tmp_path / "middle", f"#!{inner}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "middle").symlink_to(middle)
    assert executed_program(script(tmp_path / "outer", f"#!{ENV} middle"), str(bin_dir)) == PYTHON


def test_a_missing_interpreter_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"s: the interpreter /nonexistent/python9: No such file or directory"):
        executed_program(script(tmp_path / "s", "#!/nonexistent/python9"))
    if os.path.isfile(ENV):
        with pytest.raises(ScriptError, match="env's program python9-missing is not on the PATH"):
            executed_program(script(tmp_path / "t", f"#!{ENV} python9-missing"), str(tmp_path))
        with pytest.raises(ScriptError, match="env runs no program"):
            executed_program(script(tmp_path / "u", f"#!{ENV}"))
    with pytest.raises(ScriptError, match="no interpreter after #!"):
        executed_program(script(tmp_path / "v", "#!   "))
    with pytest.raises(ScriptError, match="neither an ELF file nor a script"):
        executed_program(script(tmp_path / "w", "echo hello"))
    with pytest.raises(ScriptError, match="No such file or directory"):
        executed_program(str(tmp_path / "absent"))


def test_a_loop_of_scripts_is_an_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    script(a, f"#!{b}")
    script(b, f"#!{a}")
    with pytest.raises(ScriptError, match="its interpreters loop"):
        executed_program(str(a))
    with pytest.raises(ScriptError, match="its interpreters loop"):
        executed_program(script(tmp_path / "self", f"#!{tmp_path / 'self'}"))


def test_a_chain_past_the_bound_is_an_error(tmp_path: Path) -> None:
    previous = PYTHON
    for i in range(MAX_INTERPRETERS):
        previous = script(tmp_path / f"s{i}", f"#!{previous}")
    with pytest.raises(ScriptError, match=f"more than {MAX_INTERPRETERS} files before an ELF program"):
        executed_program(previous)
    # one fewer: the program is found
    assert executed_program(str(tmp_path / f"s{MAX_INTERPRETERS - 2}")) == PYTHON


def test_a_script_command_s_scope_is_its_interpreter_s_modules(tmp_path: Path) -> None:
    images = ImageCache()
    by_interpreter = {i.cache_name() for i in bpf.images_in_scope(images, programs=[PYTHON])}
    by_script = {i.cache_name() for i in bpf.images_in_scope(images, programs=[script(tmp_path / "s", f"#!{PYTHON}")])}
    assert by_script == by_interpreter and len(by_script) >= 2  # python and at least libc
    # an interpreter that is missing: nothing of the command is in scope
    assert bpf.images_in_scope(images, programs=[script(tmp_path / "t", "#!/nonexistent/python9")]) == []
