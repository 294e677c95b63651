"""`record --bpf` across an exec: the kernel walks a stack only with the mappings of the address space
being sampled (the process's identity, mm's start_code, end_code, start_stack and start_brk, checked
at every sample against what user space read around /proc/PID/maps), never with those of the image
the process ran before its exec, even where the new image's code lies at the old one's addresses.
Skipped as test_record_bpf.py is."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from fastunwind.bpf import BpfRecorder
from tests.integration.bpf.test_record_bpf import FREQUENCY, PROBLEM

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

#: One source, two programs: built with HOT_FRAME 72 (exec_old) and 24 (exec_new), non-PIE, their code
#: at the same addresses (the two `hot`s have the same size; nothing else differs). main spins in
#: outer -> hot for argv[1] seconds, (CPU seconds), then execs argv[2..] if given. At hot's loop the old program's CFI
#: says CFA = rsp + 80; on the new program's stack rsp + 72 holds outer's return address into main, so
#: a walk with the old table would skip `outer` and still reach _start: complete, and wrong.
EXEC_SAME_ADDRESSES = r"""
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#define STR2(x) #x
#define STR(x) STR2(x)
void outer(long n);
__asm__(".text\n"
        ".globl hot\n.type hot,@function\nhot:\n.cfi_startproc\n"
        "  sub $" STR(HOT_FRAME) ", %rsp\n  .cfi_def_cfa_offset " STR(HOT_FRAME) " + 8\n"
        "1: dec %rdi\n  jnz 1b\n"
        "  add $" STR(HOT_FRAME) ", %rsp\n  .cfi_def_cfa_offset 8\n  ret\n.cfi_endproc\n"
        ".size hot, .-hot\n"
        ".globl outer\n.type outer,@function\nouter:\n.cfi_startproc\n"
        "  push %rbx\n  .cfi_def_cfa_offset 16\n  .cfi_offset %rbx, -16\n"
        "  sub $32, %rsp\n  .cfi_def_cfa_offset 48\n"
        "  call hot\n"
        "  add $32, %rsp\n  .cfi_def_cfa_offset 16\n  pop %rbx\n  .cfi_def_cfa_offset 8\n  ret\n.cfi_endproc\n"
        ".size outer, .-outer\n");
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv)
{
    double end = now() + atof(argv[1]);
    while (now() < end)
        outer(200000);
    if (argc > 2)
        execv(argv[2], argv + 2);
    return 0;
}
"""


def build(tmp_path: Path, name: str, hot_frame: int) -> Path:
    source = tmp_path / "exec_same_addresses.c"
    source.write_text(EXEC_SAME_ADDRESSES)
    program = tmp_path / name
    subprocess.run(["gcc", "-O1", "-no-pie", "-fno-pie", f"-DHOT_FRAME={hot_frame}", "-o", str(program), str(source)],
                   check=True)
    return program


def symbol_address(program: Path, name: str) -> str:
    out = subprocess.run(["nm", str(program)], capture_output=True, text=True, check=True).stdout
    return next(line.split()[0] for line in out.splitlines() if line.split()[-1] == name)


def test_an_exec_into_code_at_the_same_addresses_is_never_walked_with_the_old_table(tmp_path: Path) -> None:
    old, new = build(tmp_path, "exec_old", 72), build(tmp_path, "exec_new", 24)
    assert all(symbol_address(old, f) == symbol_address(new, f) for f in ("hot", "outer", "main"))
    # without address randomization (setarch -R, inherited across the exec) libc, ld.so and the stack
    # are where they were too: every PC of the new program lies in the old program's mappings, so
    # nothing but the address space's identity tells the kernel that they are stale
    recorder = BpfRecorder(frequency=FREQUENCY)
    child = recorder.launch(["setarch", "-R", str(old), "0.6", str(new), "1.2"], stdout=subprocess.DEVNULL)
    try:
        profile = recorder.run(lambda: child.poll() is not None)
    finally:
        child.wait()
    assert child.returncode == 0
    # the samples of the new image (the command name the kernel saw at each sample) in hot
    in_hot = Counter(s for _, _, _, comm, s in profile.sample_log()
                     if comm == "exec_new" and s.user and profile.frames(s._replace(kernel=()))[-1:] == ["hot"])
    complete: Counter[tuple[str, ...]] = Counter()
    for stack, n in in_hot.items():
        if stack.outcome == "end":
            complete[tuple(profile.frames(stack._replace(kernel=())))] += n
    assert sum(complete.values()) >= 100, profile.statistics()
    # the new program's own table only: hot's caller is outer
    assert all(frames[-3:] == ("main", "outer", "hot") for frames in complete), complete
    # the window was there: samples of the new image taken before its mappings were reloaded
    assert profile.counters["space_changed"] > 0, profile.counters
