"""`record --bpf` of a process with more executable mappings than the unwinder holds per process
(_core.BPF_MAX_MAPPINGS): a program built here with gcc that dlopens copies of a small shared object
(each copy its own file, so its own mapping) until it maps BPF_MAX_MAPPINGS + 64 of them, then calls
into every copy in turn. The recorder keeps the program's own mapping and the largest ones and says
how many it left out (the summary, --json); a sample whose frame lies in one left out ends
`mappings_left_out`, never `no_process` (which says the loaded mappings are stale, and asks user space
to read them again: a process's maps re-read at every such sample). Skipped as test_record_bpf.py is."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from fastunwind import _core
from fastunwind.bpf import RESCAN_SECONDS, BpfRecorder
from tests.integration.bpf.test_record_bpf import FREQUENCY, PROBLEM
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

COPIES = _core.BPF_MAX_MAPPINGS + 64

SPIN = r"""
long spin(long n)
{
    volatile long x = 0;
    for (long i = 0; i < n; i++)
        x += i;
    return x;
}
"""

#: argv: copies, directory, CPU seconds. Opens DIR/libspinK.so for K < copies, sleeps (the recorder
#: reloads its mappings meanwhile, at its rescan), then calls each copy's spin in turn for the seconds.
MANY = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv)
{
    int copies = atoi(argv[1]);
    long (**spin)(long) = calloc(copies, sizeof *spin);
    char path[4096];
    for (int i = 0; i < copies; i++) {
        snprintf(path, sizeof path, "%s/libspin%d.so", argv[2], i);
        void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!module || !(spin[i] = (long (*)(long))dlsym(module, "spin"))) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
    }
    usleep(1500000);
    double end = now() + atof(argv[3]);
    long sum = 0;
    while (now() < end)
        for (int i = 0; i < copies; i++)
            sum += spin[i](20000);
    return sum == 42;
}
"""


class CountingRecorder(BpfRecorder):
    """Counts the loads of each process that found its mappings as they were (nothing to set)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.idle_loads: Counter[int] = Counter()

    def _load(self, pid: int) -> None:
        before = self._processes.get(pid)
        super()._load(pid)
        if before is not None and self._processes.get(pid) is before:
            self.idle_loads[pid] += 1


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("many-modules"))


def build(tmp_path: Path) -> Path:
    (tmp_path / "spin.c").write_text(SPIN)
    (tmp_path / "many.c").write_text(MANY)
    subprocess.run(["gcc", "-O1", "-fPIC", "-shared", "-o", str(tmp_path / "libspin0.so"), str(tmp_path / "spin.c")],
                   check=True)
    for i in range(1, COPIES):
        shutil.copyfile(tmp_path / "libspin0.so", tmp_path / f"libspin{i}.so")
    program = tmp_path / "many_modules"
    subprocess.run(["gcc", "-O1", "-o", str(program), str(tmp_path / "many.c"), "-ldl"], check=True)
    return program


def test_mappings_past_the_bound_are_left_out_and_said_so(program: Path) -> None:
    recorder = CountingRecorder(frequency=FREQUENCY)
    child = recorder.launch([str(program), str(COPIES), str(program.parent), "1.5"], stdout=subprocess.DEVNULL)
    started = time.monotonic()
    try:
        profile = recorder.run(lambda: child.poll() is not None)
    finally:
        child.wait()
    seconds = time.monotonic() - started
    assert child.returncode == 0
    mine = {s: n for s, n in profile.stacks.items() if s.pid == child.pid and s.outcome != "kernel_only"}
    outcomes: Counter[str] = Counter()
    for stack, n in mine.items():
        outcomes[stack.outcome] += n
    leaves = {s: profile.user_name(s.pid, s.user[0], False) for s in mine}
    # a leaf in a copy left out: named (the recorder keeps every mapping to name frames), not walked, and
    # not said to be in stale mappings (no_process: an exec, or the program's dlopens before the reload)
    assert not [s for s in mine if s.outcome == "no_process" and leaves[s] == "spin"], outcomes
    # no load for nothing at each such sample: the maps re-read only at the rescans
    assert recorder.idle_loads[child.pid] <= 2 * seconds / RESCAN_SECONDS + 5, (recorder.idle_loads, seconds)
    assert any(s.outcome == "mappings_left_out" for s in mine), outcomes
    assert all(leaves[s] == "spin" for s in mine if s.outcome == "mappings_left_out"), outcomes
    assert outcomes["end"] >= 50, outcomes
    stats = profile.statistics()
    assert stats["processes_with_mappings_left_out"] == 1, stats
    assert stats["mappings_left_out"] >= COPIES - _core.BPF_MAX_MAPPINGS, stats


def test_the_summary_and_json_count_the_mappings_left_out(program: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "-F", str(FREQUENCY), "--json",
                             "--", str(program), str(COPIES), str(program.parent), "0.5"],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["processes_with_mappings_left_out"] == 1 and stats["mappings_left_out"] >= 64, stats
    assert (f"1 process with more than {_core.BPF_MAX_MAPPINGS} executable mappings: "
            f"{stats['mappings_left_out']} mappings left out") in result.stderr
