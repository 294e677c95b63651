"""The program an exec runs: a file's own code where it is an ELF file, else, for a script, the
interpreter its `#!` line names (fs/binfmt_script.c), followed through `env` (the program it runs,
found on PATH) and through interpreters that are scripts themselves, to the ELF file that runs.
`record --bpf -- CMD` sizes its table map from that file's modules (bpf.images_in_scope).
"""

from __future__ import annotations

import os
import shlex
import shutil

from fastunwind.errors import ScriptError

#: the most files one command goes through to its ELF program: the script, the interpreters that
#: are scripts in turn, and what `env` runs (the kernel stops a chain of interpreters at 5 with
#: ELOOP; each `env` starts a new exec)
MAX_INTERPRETERS = 8
#: the bytes of a file the kernel reads for its `#!` line (BINPRM_BUF_SIZE)
SHEBANG_BYTES = 256
ELF_MAGIC = b"\x7fELF"
#: env's options that take a value as the next word (GNU coreutils env)
ENV_OPTIONS_WITH_VALUE = frozenset({"-u", "--unset", "-C", "--chdir"})


def executed_program(path: str, search_path: str | None = None) -> str:
    """The ELF file exec'ing `path` runs: `path` itself, or its script's interpreter, resolved again
    where that is a script or `env` (whose program is looked up in `search_path`, else $PATH), at
    most MAX_INTERPRETERS files. ScriptError where a file or interpreter is missing or unreadable,
    neither ELF nor script, or the chain loops or is longer than the bound."""
    seen: list[str] = []
    current = path
    for _ in range(MAX_INTERPRETERS):
        real = os.path.realpath(current)
        if real in seen:
            raise ScriptError(f"{path}: its interpreters loop ({' -> '.join([*seen, real])})")
        seen.append(real)
        try:
            with open(current, "rb") as f:
                head = f.read(SHEBANG_BYTES)
        except OSError as error:
            raise ScriptError(f"{path}: {'the interpreter ' if current != path else ''}{current}: "
                              f"{error.strerror}") from None
        if head.startswith(ELF_MAGIC):
            return current
        if not head.startswith(b"#!"):
            raise ScriptError(f"{path}: {current} is neither an ELF file nor a script (#!)")
        interpreter, argument = _shebang(head)
        if not interpreter:
            raise ScriptError(f"{path}: {current} has no interpreter after #!")
        if os.path.basename(interpreter) == "env" and os.path.isfile(interpreter):
            current = _env_program(path, argument, search_path)
        else:
            current = interpreter
    raise ScriptError(f"{path}: more than {MAX_INTERPRETERS} files before an ELF program ({' -> '.join(seen)})")


def _shebang(head: bytes) -> tuple[str, str]:
    """The interpreter and its optional single argument of a `#!` line (the kernel's split: the
    interpreter up to the first blank, the rest of the line stripped as one argument)."""
    line = head[2:].split(b"\n", 1)[0].split(b"\0", 1)[0].strip(b" \t")
    interpreter, _, argument = line.replace(b"\t", b" ").partition(b" ")
    return os.fsdecode(interpreter), os.fsdecode(argument.strip(b" "))


def _env_program(path: str, argument: str, search_path: str | None) -> str:
    """The program `env ARGUMENT` runs: ARGUMENT as one word (as the kernel passes it), or split
    with -S; options and NAME=VALUE assignments skipped."""
    if argument.startswith(("-S", "--split-string")):
        rest = argument[2:] if argument.startswith("-S") else argument[len("--split-string"):].lstrip("=")
        try:
            words = shlex.split(rest)
        except ValueError as error:
            raise ScriptError(f"{path}: env -S {rest!r}: {error}") from None
    else:
        words = [argument] if argument else []
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
        elif word in ENV_OPTIONS_WITH_VALUE:
            skip_value = True
        elif word.startswith("-") or ("=" in word and not word.startswith("/")):
            continue
        else:
            found = word if "/" in word else shutil.which(word, path=search_path)
            if found is None:
                raise ScriptError(f"{path}: env's program {word} is not on the PATH")
            return found
    raise ScriptError(f"{path}: env runs no program")
