"""Helpers for the cli layer: run `python -m fastunwind` with src/ importable and a controlled
environment, and build small ELF files (a tiny program, a copy with a broken CIE, a truncated copy).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.paths import SRC

# SGR parameters that set a colour (foreground, background, 256/true colour, bright variants)
_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_COLOUR_PARAMETERS = {*map(str, range(30, 39)), *map(str, range(40, 49)), *map(str, range(90, 98)),
                      *map(str, range(100, 108))}

SMALL_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long work(long n)
{
    long *values = malloc(sizeof *values * (size_t)n);
    long total = 0;
    for (long i = 0; i < n; i++)
        values[i] = i * i;
    for (long i = 0; i < n; i++)
        total += values[i];
    free(values);
    return total;
}

int main(int argc, char **argv)
{
    (void)argv;
    printf("%ld\n", work(argc + 10));
    return 0;
}
"""


def run_cli(args: list, *, env: dict | None = None, drop: tuple = ("NO_COLOR", "FORCE_COLOR")) -> subprocess.CompletedProcess:
    """`python -m fastunwind ARGS` -> CompletedProcess (text). The environment is the test's minus
    `drop`, plus `env`, with src/ first on PYTHONPATH."""
    environment = {key: value for key, value in os.environ.items() if key not in drop}
    environment["PYTHONPATH"] = os.pathsep.join([str(SRC), environment.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "fastunwind", *map(str, args)], capture_output=True, text=True,
                          env=environment, stdin=subprocess.DEVNULL, timeout=60)


def colour_codes(text: str) -> list[str]:
    """The SGR sequences in `text` that set a colour (bold, underline etc. are not colour)."""
    found = []
    for parameters in _SGR.findall(text):
        if set(parameters.split(";")) & _COLOUR_PARAMETERS:
            found.append(parameters)
    return found


def build_small_program(directory: Path) -> Path:
    source = directory / "small.c"
    source.write_text(SMALL_PROGRAM)
    program = directory / "small"
    subprocess.run(["gcc", "-O2", "-o", str(program), str(source)], check=True, capture_output=True)
    return program


def build_split_debug_program(directory: Path) -> tuple[Path, Path]:
    """The small program built with -g -fno-asynchronous-unwind-tables (its code described in
    .debug_frame only), stripped, its debug information in a separate file named by
    .gnu_debuglink: (stripped program, debug file)."""
    source = directory / "small.c"
    source.write_text(SMALL_PROGRAM)
    program = directory / "small-g"
    subprocess.run(["gcc", "-O2", "-g", "-fno-asynchronous-unwind-tables", "-o", str(program), str(source)],
                   check=True, capture_output=True)
    debug_file = directory / "small-g.debug"
    stripped = directory / "small-g.stripped"
    subprocess.run(["objcopy", "--only-keep-debug", str(program), str(debug_file)], check=True)
    subprocess.run(["objcopy", "--strip-debug", f"--add-gnu-debuglink={debug_file}", str(program), str(stripped)],
                   check=True)
    return stripped, debug_file


def with_broken_cie(program: Path, output: Path) -> Path:
    """A copy of `program` whose first .eh_frame CIE claims version 9 (unsupported): every FDE using
    it is malformed, the rest of the file is fine."""
    from elftools.elf.elffile import ELFFile

    with open(program, "rb") as stream:
        offset = ELFFile(stream).get_section_by_name(".eh_frame")["sh_offset"]
    data = bytearray(program.read_bytes())
    assert data[offset + 4:offset + 9] == b"\0\0\0\0\x01", "expected a version 1 CIE first"
    data[offset + 8] = 9
    output.write_bytes(bytes(data))
    return output
