"""The walk in the kernel ends a stack with the outcome the C walker gives the same stack: the C
walker (`backtrace -p`, reading the live process) is the reference. One program, its stack in memory
of its own making, spinning in a leaf whose save slot for rbp lies in a page it cannot read, above
one of three callers: the outermost frame, a frame saving r12 relative to rbp, a frame whose CFA is
read through rbp. Skipped as test_record_bpf.py is."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from fastunwind.bpf import BpfProfile
from tests.integration.bpf.test_record_bpf import PROBLEM, record_command
from tests.support.tools import assemble_source

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

#: `spin` moves rsp onto a stack of the program's making: one page it cannot read, then two it can,
#: rsp 8 bytes into those. At spin_loop the CFI says CFA = rsp + 16, the return address at CFA - 8
#: (a caller's code, written there by main) and rbp saved at CFA - 48: in the unreadable page. So rbp
#: is unknown in the caller, which is (argv[1]) `outer_end` (the outermost frame: its return address
#: undefined), `outer_save` (r12 saved at rbp - 8, DW_CFA_expression) or `outer_cfa` (CFA = *(rbp -
#: 8), GCC's DRAP form).
STACK_OF_ITS_OWN = r"""
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
void spin(unsigned long *rsp, long n);
extern char outer_end_return[], outer_save_return[], outer_cfa_return[];
__asm__(".text\n"
        ".globl spin\n.type spin,@function\nspin:\n.cfi_startproc\n"
        "  mov %rsp, %rax\n  mov %rdi, %rsp\n"
        "  .cfi_def_cfa_offset 16\n  .cfi_offset %rbp, -48\n"
        ".globl spin_loop\n.type spin_loop,@function\nspin_loop:\n"
        "  dec %rsi\n  jnz spin_loop\n"
        "  mov %rax, %rsp\n  .cfi_def_cfa_offset 8\n  .cfi_restore %rbp\n  ret\n"
        ".size spin_loop, .-spin_loop\n.cfi_endproc\n.size spin, spin_loop - spin\n"
        ".globl outer_end\n.type outer_end,@function\nouter_end:\n.cfi_startproc\n  .cfi_undefined %rip\n"
        "  nop\n.globl outer_end_return\nouter_end_return:\n  nop\n  ret\n.cfi_endproc\n.size outer_end, .-outer_end\n"
        ".globl outer_save\n.type outer_save,@function\nouter_save:\n.cfi_startproc\n"
        "  .cfi_def_cfa_offset 16\n  .cfi_escape 0x10, 0x0c, 0x02, 0x76, 0x78\n" /* r12 at rbp - 8 */
        "  nop\n.globl outer_save_return\nouter_save_return:\n  nop\n  ret\n.cfi_endproc\n.size outer_save, .-outer_save\n"
        ".globl outer_cfa\n.type outer_cfa,@function\nouter_cfa:\n.cfi_startproc\n"
        "  .cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06\n" /* CFA = *(rbp - 8) */
        "  nop\n.globl outer_cfa_return\nouter_cfa_return:\n  nop\n  ret\n.cfi_endproc\n.size outer_cfa, .-outer_cfa\n");
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv)
{
    char *region = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region, 4096, PROT_NONE) != 0)
        return 1;
    unsigned long *rsp = (unsigned long *)(region + 4096 + 8);
    rsp[1] = (unsigned long)(strcmp(argv[1], "end") == 0    ? outer_end_return
                             : strcmp(argv[1], "save") == 0 ? outer_save_return
                                                            : outer_cfa_return);
    double end = now() + atof(argv[2]);
    while (now() < end)
        spin(rsp, 20000000);
    return 0;
}
"""


def build(directory: Path, name: str, text: str) -> Path:
    """The C program `text` built as `directory/name`."""
    source = directory / f"{name}.c"
    source.write_text(text)
    return assemble_source(source, directory, ("--link", "-O1"))


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("outcomes")
    return build(directory, "own_stack", STACK_OF_ITS_OWN)


def c_walker_outcome(program: Path, caller: str) -> tuple[str, list[str]]:
    """The C walker's outcome and frames (leaf first) for the program spinning in spin_loop."""
    child = subprocess.Popen([str(program), caller, "30"])
    try:
        for _ in range(50):  # bounded: a few tries land between two calls of spin
            time.sleep(0.1)
            text = subprocess.run([sys.executable, "-m", "fastunwind", "backtrace", "-p", str(child.pid), "--json"],
                                  capture_output=True, text=True, check=True).stdout
            thread = json.loads(text)["threads"][0]
            symbols = [frame["symbol"] for frame in thread["frames"]]
            if symbols[:1] == ["spin_loop"]:
                return thread["outcome"], symbols
        raise AssertionError(f"no backtrace of {program} {caller} stopped in spin_loop")
    finally:
        child.kill()
        child.wait()


def kernel_outcomes(profile: BpfProfile, name: str) -> Counter[str]:
    """The outcomes of the program's walks that started in spin_loop (not those sampled before the
    exec was seen: `no_process`)."""
    out: Counter[str] = Counter()
    for stack, samples in profile.stacks.items():
        if (profile.comm(stack.pid, stack.space_pid) == name and stack.user and stack.outcome != "no_process" and
                profile.user_name(stack.pid, stack.user[0], False) == "spin_loop"):
            out[stack.outcome] += samples
    return out


@pytest.mark.parametrize(("caller", "expected"), [("end", "end"), ("save", "expression_error"),
                                                  ("cfa", "expression_error")])
def test_an_unreadable_save_slot_and_an_unknown_rbp_end_walks_as_the_c_walker_ends_them(
        program: Path, caller: str, expected: str) -> None:
    outcome, symbols = c_walker_outcome(program, caller)
    assert outcome == expected, (outcome, symbols)
    profile = record_command([str(program), caller, "1"])
    outcomes = kernel_outcomes(profile, program.name)
    assert sum(outcomes.values()) >= 50, (outcomes, profile.statistics())
    assert set(outcomes) == {outcome}, outcomes
