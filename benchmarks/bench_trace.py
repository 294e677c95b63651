"""Benchmark of `fastunwind check --trace`: instructions stepped per second on real commands.

    .venv/bin/python -m benchmarks.bench_trace [--repeat N]
    make bench-trace

Four ways of running the same command, interleaved round by round:
- `trace`: the tracer as `check --trace` runs it (every module compared);
- `step only`: the same tracer stepping everything but comparing in no module (`modules=
  ["/nonexistent"], step_all=True`): the shadow stack, module lookup and decoding stay, the row
  lookup and comparison go;
- `ptrace floor`: a 20-line C loop (written and compiled here) doing only PTRACE_GETREGS,
  PTRACE_SINGLESTEP and waitpid per instruction, the cost no single-stepping tracer avoids;
- `program only`: `--trace-modules` the command's own file: the libraries run between
  breakpoints; its time is given as the instructions the full trace stepped per second of it.
Commands: /bin/true, `ls /usr` and a gcc -O2 program converting a string with strtod (libc's mpn
code). Reported: steps and best steps per second of each. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastunwind.trace import trace_command

FLOOR_SOURCE = r"""
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    pid_t child = fork();
    if (child == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    long steps = 0;
    waitpid(child, &status, 0);
    for (;;) {
        struct user_regs_struct regs;
        ptrace(PTRACE_GETREGS, child, 0, &regs);
        ptrace(PTRACE_SINGLESTEP, child, 0, 0);
        waitpid(child, &status, 0);
        steps++;
        if (WIFEXITED(status) || WIFSIGNALED(status))
            break;
    }
    printf("%ld\n", steps);
    return 0;
}
"""

STRTOD_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) { printf("%.1f\n", strtod(argv[1], 0)); return 0; }
"""


def _compile(directory: Path, name: str, source: str) -> str:
    (directory / f"{name}.c").write_text(source)
    subprocess.run(["gcc", "-O2", "-o", str(directory / name), str(directory / f"{name}.c")], check=True)
    return str(directory / name)


def _floor(floor: str, command: list[str]) -> tuple[int, float]:
    started = time.perf_counter()
    ran = subprocess.run([floor, *command], capture_output=True, text=True, check=True)
    return int(ran.stdout.split()[-1]), time.perf_counter() - started


def _traced(command: list[str], modules: list[str] | None, step_all: bool = False) -> tuple[int, float]:
    """The command's output goes to /dev/null (the tracee inherits file descriptor 1)."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        result = trace_command(command, modules=modules, step_all=step_all)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    return result.counts["steps"], result.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fastunwind-bench-trace-") as temporary:
        directory = Path(temporary)
        floor = _compile(directory, "floor", FLOOR_SOURCE)
        strtod = _compile(directory, "strtod", STRTOD_SOURCE)
        commands = [["/bin/true"], ["/bin/ls", "/usr"], [strtod, "1e200"]]
        print(f"{'command':<16} {'way':<14} {'steps':>9} {'best s':>8} {'best steps/s':>13}")
        for command in commands:
            best: dict[str, tuple[int, float]] = {}
            program = [Path(command[0]).name]
            for _ in range(args.repeat):
                for way, run in (("trace", lambda: _traced(command, None)),
                                 ("step only", lambda: _traced(command, ["/nonexistent"], step_all=True)),
                                 ("ptrace floor", lambda: _floor(floor, command)),
                                 ("program only", lambda: _traced(command, program))):
                    steps, seconds = run()
                    if way not in best or seconds < best[way][1]:
                        best[way] = (steps, seconds)
            name = " ".join([program[0], *command[1:]])
            full_steps = best["trace"][0]
            for way, (steps, seconds) in best.items():
                rate = (full_steps if way == "program only" else steps) / seconds
                print(f"{name:<16} {way:<14} {steps:>9,} {seconds:>8.2f} {rate:>13,.0f}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
