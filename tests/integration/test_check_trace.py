"""Dynamic validation (`check --trace`): programs single-stepped under ptrace.

- The seeded faults of test_check_seeded.py (assembly with wrong `.cfi_*`, inline assembly moving
  rsp), called from a program: the tracer finds each disagreement between the seeded labels, in
  the seeded column, and nowhere else; every static `mismatch` of the library is confirmed.
- A real program (gcc -O2, calling into libc: qsort with a callback, a signal handler, longjmp,
  printf) and /bin/true: no disagreement in the program, libc or ld.so.
- Bad commands: missing, killed, exiting at once, forking, looping past the step limit or the
  timeout: a classified outcome, never a hang or a process left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fastunwind.check import FileCheck, check_file
from fastunwind.elf import ElfFile
from fastunwind.errors import TraceError
from fastunwind.trace import TraceResult, trace_command
from scripts import oracle_files
from tests.integration.test_check_seeded import ASSEMBLY, C_SOURCE

SEEDED_MAIN = r"""
#include <stdio.h>
extern void good_frame(void);
extern void off_by_8(void (*)(void));
extern void missing_sub_adjust(void (*)(void));
extern void wrong_slot(void (*)(void));
extern long correct_c(long);
extern void inline_asm_moves_rsp(long);
extern void all_off(void);
extern void early_cfa(void);
extern void calls_wrong(void);
static volatile int calls;
static void callback(void) { calls++; }
int main(void) {
    good_frame();
    off_by_8(callback);
    missing_sub_adjust(callback);
    wrong_slot(callback);
    long total = correct_c(4);
    inline_asm_moves_rsp(total);
    all_off();
    early_cfa();
    calls_wrong();
    printf("%d %ld\n", calls, total);
    return 0;
}
"""

PROGRAM = r"""
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static jmp_buf resume;
static volatile sig_atomic_t handled;
static int compare(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }
static void on_signal(int signal) { handled += signal; }
__attribute__((noinline)) static void jump_out(int depth) {
    if (depth == 0)
        longjmp(resume, 1);
    jump_out(depth - 1);
    __asm__ volatile("" ::: "memory");
}
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "all";
    if (!strcmp(mode, "kill"))
        raise(SIGKILL);
    if (!strcmp(mode, "exit"))
        _exit(7);
    if (!strcmp(mode, "loop"))
        for (;;)
            __asm__ volatile("");
    if (!strcmp(mode, "fork")) {
        pid_t child = fork();
        if (child == 0)
            _exit(3);
        int status;
        waitpid(child, &status, 0);
        return WEXITSTATUS(status);
    }
    int values[64];
    for (int i = 0; i < 64; i++)
        values[i] = (i * 37) % 64;
    qsort(values, 64, sizeof values[0], compare);
    signal(SIGUSR1, on_signal);
    raise(SIGUSR1);
    if (!setjmp(resume))
        jump_out(5);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    char *text = malloc(64);
    snprintf(text, 64, "%d %d %d", values[63], (int)handled, now.tv_sec > 0);
    puts(text);
    free(text);
    return 0;
}
"""


def _compile(directory: Path, name: str, sources: list[Path], *extra: str) -> Path:
    output = directory / name
    built = subprocess.run(["gcc", "-O2", "-o", str(output), *map(str, sources), *extra], capture_output=True,
                           text=True)
    if built.returncode:
        pytest.fail(f"gcc failed:\n{built.stderr}", pytrace=False)
    return output


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FileCheck, dict[str, int], TraceResult]:
    directory = tmp_path_factory.mktemp("trace-seeded")
    (directory / "faults.S").write_text(ASSEMBLY)
    (directory / "correct.c").write_text(C_SOURCE)
    (directory / "main.c").write_text(SEEDED_MAIN)
    library = _compile(directory, "libseeded.so", [directory / "faults.S", directory / "correct.c"],
                       "-shared", "-fPIC")
    program = _compile(directory, "seeded", [directory / "main.c"], f"-L{directory}", "-lseeded",
                       f"-Wl,-rpath,{directory}")
    with ElfFile.open(library) as elf:
        symbols = {s.name: s.value for s in elf.symbols() if s.name}
    return library, check_file(str(library)), symbols, trace_command([str(program)])


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trace-program")
    (directory / "program.c").write_text(PROGRAM)
    return _compile(directory, "program", [directory / "program.c"])


def _fde_at(result: TraceResult, path: Path, address: int):  # type: ignore[no-untyped-def]
    for fde in result.fdes:
        if fde.module.path == str(path) and fde.pc_begin <= address < fde.pc_end:
            return fde
    raise AssertionError(f"the trace never ran {address:#x} of {path}")


@pytest.mark.parametrize("function, columns", [
    ("off_by_8", {"cfa"}),
    ("missing_sub_adjust", {"cfa"}),
    ("wrong_slot", {"rbx"}),
    ("inline_asm", {"cfa"}),
])
def test_seeded_fault_disagrees_exactly_where_seeded(seeded, function: str, columns: set[str]) -> None:
    library, _check, symbols, result = seeded
    start, end = symbols[f"{function}_bad_start"], symbols[f"{function}_bad_end"]
    fde = _fde_at(result, library, start)
    addresses = {d.address for d in fde.disagreements}
    assert fde.disagreeing > 0 and fde.checked > fde.disagreeing
    assert min(addresses) == start and max(addresses) < end, [hex(a) for a in sorted(addresses)]
    assert {d.what for d in fde.disagreements} == columns


def test_seeded_cfa_disagreements_are_the_seeded_offsets(seeded) -> None:
    library, _check, symbols, result = seeded
    off_by_8 = _fde_at(result, library, symbols["off_by_8_bad_start"])
    assert {d.declared - d.truth for d in off_by_8.disagreements} == {8}
    missing = _fde_at(result, library, symbols["missing_sub_adjust_bad_start"])
    assert {d.declared - d.truth for d in missing.disagreements} == {-40}


@pytest.mark.parametrize("function", ["good_frame", "calls_no_cfi", "correct_c", "sink"])
def test_correct_functions_agree(seeded, function: str) -> None:
    library, _check, symbols, result = seeded
    fde = _fde_at(result, library, symbols[function])
    assert fde.checked > 0 and fde.disagreeing == 0, fde.disagreements


def test_every_static_mismatch_is_confirmed(seeded) -> None:
    library, check, _symbols, result = seeded
    static = {(v.pc_begin, v.pc_end) for v in check.verdicts() if v.verdict == "mismatch"}
    dynamic = {(f.pc_begin, f.pc_end) for f in result.disagreeing_fdes}
    assert static == dynamic
    assert {f.module.path for f in result.disagreeing_fdes} == {str(library)}


def test_code_without_cfi_is_counted_not_judged(seeded) -> None:
    _library, _check, _symbols, result = seeded
    assert result.counts["no_cfi"] >= 4  # no_cfi's four instructions, no_symbol_code's ret, ld.so's _start
    assert result.outcome == "exited" and result.exit_status == 0


def test_real_program_agrees_everywhere(program: Path) -> None:
    result = trace_command([str(program)])
    assert result.outcome == "exited" and result.exit_status == 0
    c = result.counts
    # The one explained disagreement: glibc's __longjmp (sysdeps/x86_64/__longjmp.S, "We add unwind
    # information for the target here") declares, once it has loaded the jmp_buf, the frame it jumps
    # to (CFA = rdi, the registers from the buffer, the return address in rdx), not its own.
    explained = [f for f in result.disagreeing_fdes if "libc.so" in f.module.path and f.symbol == "__longjmp"]
    unexplained = [f for f in result.disagreeing_fdes if f not in explained]
    assert unexplained == [], [(f.module.path, f.symbol, f.disagreements) for f in unexplained]
    assert len(explained) == 1 and explained[0].disagreeing < 10
    assert {d.address for d in explained[0].disagreements} == {explained[0].disagreements[0].address}
    assert c["handlers"] == 1 and c["in_signal_handler"] > 0 and c["signal_frames"] > 0
    assert c["checked"] > 0.99 * c["steps"]
    checked_paths = {f.module.path for f in result.fdes}
    assert str(program) in checked_paths
    assert any("libc.so" in path for path in checked_paths) and any("ld-linux" in path for path in checked_paths)
    assert "[vdso]" in checked_paths  # clock_gettime runs in the vDSO, whose CFI is checked too


def test_true_agrees_everywhere() -> None:
    result = trace_command(["true"])
    assert result.outcome == "exited" and result.counts["disagreeing"] == 0
    assert result.counts["agreeing"] > 0.99 * result.counts["steps"]


def test_trace_modules_runs_through_the_others(program: Path) -> None:
    """Only the program compared: libc and ld.so run between breakpoints (main entered from
    __libc_start_main, qsort's callback, the signal handler), and the program's steps are the same
    as when everything is stepped."""
    skipped = trace_command([str(program)], modules=[program.name])
    stepped = trace_command([str(program)], modules=[program.name], step_all=True)
    for result in (skipped, stepped):
        assert result.outcome == "exited" and result.counts["disagreeing"] == 0
        assert {f.module.path for f in result.fdes} == {str(program)}
    assert skipped.counts["runs"] > 0 and stepped.counts["runs"] == 0
    assert skipped.counts["steps"] * 20 < stepped.counts["steps"]
    by_fde = {(f.pc_begin, f.pc_end): f.checked for f in stepped.fdes}
    # the one difference: entered at its breakpoint, the signal handler is judged as a called function
    assert {key: n for key, n in by_fde.items() if n} == {(f.pc_begin, f.pc_end): f.checked
                                                          for f in skipped.fdes if (f.pc_begin, f.pc_end) in by_fde}


def test_trace_modules_finds_the_seeded_faults(seeded) -> None:
    library, _check, _symbols, result = seeded
    skipped = trace_command([str(library.parent / "seeded")], modules=["libseeded"])
    assert skipped.counts["runs"] > 0
    assert ({(f.pc_begin, f.pc_end, f.disagreeing) for f in skipped.disagreeing_fdes}
            == {(f.pc_begin, f.pc_end, f.disagreeing) for f in result.disagreeing_fdes})


def _left_behind(program: Path) -> list[str]:
    """Processes still running `program` (stopped or not)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.readlink(f"/proc/{entry}/exe") == str(program):
                found.append(entry)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("mode, outcome, status", [
    ("kill", "killed", 9),
    ("exit", "exited", 7),
    ("fork", "exited", 3),
])
def test_command_endings_are_classified(program: Path, mode: str, outcome: str, status: int) -> None:
    result = trace_command([str(program), mode])
    assert (result.outcome, result.exit_status) == (outcome, status)
    assert result.counts["disagreeing"] == 0
    assert _left_behind(program) == []


def test_step_limit_and_timeout_kill_the_command(program: Path) -> None:
    limited = trace_command([str(program), "loop"], max_steps=30000)
    assert limited.outcome == "step-limit" and limited.counts["steps"] == 30000
    timed = trace_command([str(program), "loop"], max_steps=10**9, timeout=0.5)
    assert timed.outcome == "timeout" and timed.seconds < 5
    assert _left_behind(program) == []


def test_missing_command_is_an_error() -> None:
    with pytest.raises(TraceError, match="command not found"):
        trace_command(["fastunwind-no-such-command"])
    with pytest.raises(TraceError, match="cannot execute /etc/hostname: "):  # not a program
        trace_command(["/etc/hostname"])


def test_cli(seeded, fastunwind_cli) -> None:
    library, _check, symbols, _result = seeded
    program = library.parent / "seeded"
    ran = fastunwind_cli(["check", "--trace", "--json", "--", str(program)])
    assert ran.returncode == 1, ran.stderr
    report = json.loads(ran.stdout.splitlines()[-1])
    assert report["outcome"] == "exited"
    assert {f["pc_begin"] for f in report["fdes"]} == {
        symbols["off_by_8"], symbols["missing_sub_adjust"], symbols["wrong_slot"], symbols["inline_asm_moves_rsp"],
        symbols["all_off"], symbols["early_cfa"], symbols["called_wrong_bad_start"]}
    text = fastunwind_cli(["check", "--trace", "--", str(program)])
    assert text.returncode == 1 and b"disagree" in text.stdout and b"off_by_8" in text.stdout
    missing = fastunwind_cli(["check", "--trace", "--", "fastunwind-no-such-command"])
    assert missing.returncode == 3 and b"command not found" in missing.stderr


STRTOD = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) { printf("%.1f\n", strtod(argv[1], 0)); return 0; }
"""


def test_libc_static_mismatches_are_confirmed(tmp_path: Path) -> None:
    """glibc's __mpn_addmul_1 and __mpn_submul_1 (hand-written assembly: `push %rbx; push %rbp` under
    an FDE without directives) are `check`'s mismatches in libc; strtod of 1e60 runs them."""
    (tmp_path / "strtod.c").write_text(STRTOD)
    program = _compile(tmp_path, "strtod", [tmp_path / "strtod.c"])
    result = trace_command([str(program), "1e60"])
    libc = {f.module.path for f in result.fdes if "/libc.so" in f.module.path}
    assert len(libc) == 1
    static = {(v.pc_begin, v.pc_end): v for v in check_file(libc.pop()).verdicts() if v.verdict == "mismatch"}
    dynamic = {(f.pc_begin, f.pc_end): f for f in result.disagreeing_fdes}
    assert {f.symbol for f in dynamic.values()} == {"__mpn_addmul_1", "__mpn_submul_1"}
    assert set(dynamic) <= set(static)
    for key, fde in dynamic.items():
        first_static = min(finding.address for finding in static[key].findings)
        assert fde.disagreements[0].address == first_static  # the instruction after `push %rbx`
        assert [d.declared - d.truth for d in fde.disagreements[:2]] == [-8, -16]


THREADS = r"""
#include <pthread.h>
#include <stdio.h>
static int work(int n) { int total = 0; for (int i = 0; i < n; i++) total += i * i; return total; }
static void *run(void *arg) { for (int k = 0; k < 100; k++) work(1000); return arg; }
int main(void) {
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], 0, run, 0);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], 0);
    printf("%d\n", work(10));
    return 0;
}
"""


def test_threads_lift_the_breakpoints(tmp_path: Path) -> None:
    """Threads run untraced: once the command creates one, no int3 may stay planted for it to hit
    (it would die of SIGTRAP); the main thread is stepped from then on."""
    (tmp_path / "threads.c").write_text(THREADS)
    program = _compile(tmp_path, "threads", [tmp_path / "threads.c"], "-pthread")
    result = trace_command([str(program)], modules=[program.name])
    assert (result.outcome, result.exit_status) == ("exited", 0)
    assert result.counts["threads_seen"] == 1 and result.counts["disagreeing"] == 0


def test_ctrl_c_kills_the_command(program: Path) -> None:
    """SIGINT to the terminal's process group (Ctrl-C) reaches the tracer and the command: the
    command is gone, the CLI says so and exits 3."""
    command = oracle_files.tool_command(["check", "--trace", "--max-steps", "100000000", "--", str(program), "loop"])
    # SIGINT at its default in the CLI whatever this run inherited (a job started in the background
    # by a shell without job control ignores it, and Python then installs no handler)
    tracer = subprocess.Popen(command, env=oracle_files.subprocess_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 30
        while not _left_behind(program) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        os.killpg(tracer.pid, signal.SIGINT)
        _stdout, stderr = tracer.communicate(timeout=30)
    finally:
        if tracer.poll() is None:  # not even the test's failure leaves the tracer and its command running
            os.killpg(tracer.pid, signal.SIGKILL)
            tracer.wait()
    assert tracer.returncode == 3 and b"interrupted" in stderr, stderr
    assert _left_behind(program) == []


EXCEPTIONS = r"""
#include <cstdio>
#include <stdexcept>
__attribute__((noinline)) int thrower(int n) {
    if (n == 0)
        throw std::runtime_error("deep");
    return thrower(n - 1) + 1;
}
int main() {
    int caught = 0;
    for (int i = 0; i < 2; i++) {
        try {
            thrower(3);
        } catch (const std::exception &) {
            caught++;
        }
    }
    std::printf("%d\n", caught);
    return 0;
}
"""


def test_exceptions_resynchronise_the_shadow_stack(tmp_path: Path) -> None:
    """A C++ throw unwinds four frames into a landing pad: the shadow stack follows (no CFA or
    return-address disagreement anywhere). The one explained class: libgcc's
    _Unwind_RaiseException ends with __builtin_eh_return, whose uw_install_context writes the
    handler's registers into the function's own save slots so that its epilogue restores them:
    from then on those slots hold the landing pad's values, not the entry values."""
    (tmp_path / "exceptions.cc").write_text(EXCEPTIONS)
    program = tmp_path / "exceptions"
    built = subprocess.run(["g++", "-O2", "-o", str(program), str(tmp_path / "exceptions.cc")], capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr
    result = trace_command([str(program)], modules=[str(program), "libgcc_s", "libstdc++"])
    assert (result.outcome, result.exit_status) == ("exited", 0)
    assert {(f.module.path.rsplit("/", 1)[-1], f.symbol) for f in result.disagreeing_fdes} == {
        ("libgcc_s.so.1", "_Unwind_RaiseException")}
    whats = {d.what for f in result.disagreeing_fdes for d in f.disagreements}
    assert whats and whats <= {"rbx", "rbp", "r12", "r13", "r14", "r15"}
    own = [f for f in result.fdes if f.module.path == str(program) and f.checked]
    assert len(own) >= 2 and all(f.disagreeing == 0 for f in own)
