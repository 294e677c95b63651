"""`record --bpf` names every process it sampled by its command name, those gone before user space
loaded them too (by the name their threads had when sampled, not by their pid or their parent's).
Skipped as test_record_bpf.py is."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.bpf.test_outcomes_agree import build
from tests.integration.bpf.test_record_bpf import PROBLEM, record_command

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

#: Forks argv[1] children one after another; each names itself "spinchild", spins argv[2] ms of its
#: own CPU time (a sample or two at 499 Hz) and exits: most are gone before user space, woken by
#: their first sample, has read their mappings.
FORKER = r"""
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv)
{
    int children = atoi(argv[1]);
    double seconds = atof(argv[2]) / 1000;
    for (int i = 0; i < children; i++) {
        pid_t child = fork();
        if (child == 0) {
            prctl(PR_SET_NAME, "spinchild");
            volatile unsigned long spins = 0;
            for (double end = cpu_seconds() + seconds; cpu_seconds() < end;)
                spins++;
            _exit(0);
        }
        if (child < 0 || waitpid(child, NULL, 0) != child)
            return 1;
    }
    return 0;
}
"""


def test_processes_gone_before_loading_are_named_as_sampled(tmp_path: Path) -> None:
    program = build(tmp_path, "forker", FORKER)
    profile = record_command([str(program), "60", "5"])
    by_process = profile.outcomes_by_process()  # the summary's (--json) "comm (pid)"
    named = [re.fullmatch(r"(.*) \((\d+)\)", key) for key in by_process]
    names = [(m.group(1), int(m.group(2))) for m in named if m]
    assert len(names) == len(named), by_process
    children = [pid for name, pid in names if name == "spinchild"]
    assert len(children) >= 10, by_process
    # every process but the command itself (sampled as the launcher's python before its exec, or as
    # forker) named as it named itself
    assert len([name for name, _ in names if name != "spinchild"]) <= 1, by_process
    assert all(profile.comm(s.pid, s.space_pid) == "spinchild" for s in profile.stacks if s.pid in children)


#: Names itself with bytes that are not UTF-8 (a thread may: PR_SET_NAME takes any 15 bytes), maps
#: the file argv[2] (whose name is not UTF-8 either), then spins argv[1] ms of CPU time.
NOT_UTF8 = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
int main(int argc, char **argv)
{
    prctl(PR_SET_NAME, "\xff\xfeodd");
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0 || mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED)
        return 1;
    struct timespec t;
    volatile unsigned long spins = 0;
    double end = atof(argv[1]) / 1000;
    do {
        spins++;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < end);
    return 0;
}
"""


def test_a_command_name_and_a_mapped_path_that_are_not_utf8_are_read(tmp_path: Path) -> None:
    program = build(tmp_path, "not_utf8", NOT_UTF8)
    mapped = tmp_path / os.fsdecode(b"data-\xff")
    mapped.write_bytes(bytes(4096))
    profile = record_command([str(program), "300", str(mapped)])
    odd = r"\xff\xfeodd"  # as /proc/PID/comm is read everywhere (live.py): backslashreplace
    assert sum(n for s, n in profile.stacks.items() if profile.comm(s.pid, s.space_pid) == odd) >= 20, \
        profile.statistics()["outcomes_by_process"]
    assert any(comm == odd for _, _, _, comm, _ in profile.sample_log())


#: Spins argv[1] ms of CPU time (user space loads it meanwhile, reading /proc/PID/comm), names
#: itself "renamed", then spins argv[1] ms more.
RENAMER = r"""
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
static void spin(double seconds)
{
    struct timespec t;
    volatile unsigned long spins = 0;
    do {
        spins++;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < seconds);
}
int main(int argc, char **argv)
{
    double half = atof(argv[1]) / 1000;
    spin(half);
    prctl(PR_SET_NAME, "renamed");
    spin(2 * half);
    return 0;
}
"""


def test_a_process_that_renames_itself_after_it_was_loaded_has_its_new_name(tmp_path: Path) -> None:
    """As perf's COMM events follow a rename: the name its main thread had at its last sample."""
    program = build(tmp_path, "renamer", RENAMER)
    profile = record_command([str(program), "200"])
    assert any(comm == "renamer" for _, _, _, comm, _ in profile.sample_log()), "no sample before the rename"
    assert any(key.startswith("renamed (") for key in profile.outcomes_by_process()), profile.outcomes_by_process()
    assert not any(key.startswith("renamer (") for key in profile.outcomes_by_process()), profile.outcomes_by_process()


def test_a_pid_that_is_no_process_is_an_error() -> None:
    """As `backtrace -p` says it, not an empty profile and status 0 (4194305: above any pid_max)."""
    for pids in ("4194305", f"{os.getpid()},4194305", "0"):
        result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "-p", pids],
                                capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stdout) == (1, ""), (pids, result)
        assert result.stderr == f"fastunwind: error: no process {pids.split(',')[-1]}\n", result.stderr


#: Forks argv[1] children that wait, then waits: more processes than the unwinder has room for.
MANY = r"""
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    for (int i = atoi(argv[1]); i > 0; i--)
        if (fork() == 0)
            break;
    pause();
    return 0;
}
"""


def test_more_processes_than_the_unwinder_has_room_for_are_left_out_not_a_crash(tmp_path: Path) -> None:
    """-p of a process with 1,100 children (FU_BPF_MAX_PROCESSES is 1,024): those without room are
    counted as left out, their samples not_loaded, where the recorder raised ValueError."""
    program = build(tmp_path, "many", MANY)
    parent = subprocess.Popen([str(program), "1100"], start_new_session=True)
    try:
        for _ in range(100):  # bounded: until the children are all there
            with open(f"/proc/{parent.pid}/task/{parent.pid}/children") as f:
                if len(f.read().split()) == 1100:
                    break
            time.sleep(0.05)
        result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "-p", str(parent.pid),
                                 "--duration", "0.5", "--json"], capture_output=True, text=True, timeout=300)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["processes_left_out"] >= 1101 - 1024, result.stderr
