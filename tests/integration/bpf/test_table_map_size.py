"""The BPF table map's size (`record --bpf`, bpf.table_map_size): without --table-mib, from the tables
the processes in scope map at the start, with headroom; an explicit --table-mib wins; the named limit
holds; a map the kernel refuses gives way to a smaller one, saying so.

The program: Debian's python3 holding big real libraries dlopen'ed (libLLVM-14, libclang-cpp,
libz3, ffmpeg's and GTK's, ... whichever are installed: the Makefile's llvm-14, clang-14, ffmpeg and
chromium bring them), whose tables take more than the default 32 MiB map, then parsing a generated C
file again and again with libclang-14 (clang_parseTranslationUnit: stacks through python3, libffi,
libclang, libclang-cpp and libLLVM-14). With the default map most of those modules are evicted while
in use as each is loaded, and the stacks end `table_evicted`; with the map sized from the scope none
is, and the stacks are complete as the project's workloads' are (95% of those walked).

Skipped as test_record_bpf.py is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fastunwind import _core, bpf
from fastunwind.address_space import ImageCache
from fastunwind.bpf import BpfRecorder, TableMap, images_in_scope, open_table_map, table_map_limit, table_slots
from fastunwind.errors import BpfMapMemoryError
from tests.integration.bpf.test_record_bpf import FREQUENCY, PROBLEM
from tests.support.paths import SRC

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

PYTHON = "/usr/bin/python3"
LIBCLANG = "/usr/lib/x86_64-linux-gnu/libclang-14.so.1"
LIBRARIES = [f"/usr/lib/x86_64-linux-gnu/{name}" for name in (
    "libLLVM-14.so.1", "libz3.so.4", "libavcodec.so.59", "libavfilter.so.8", "libx265.so.199", "libgtk-3.so.0",
    "librsvg-2.so.2", "libLLVM-15.so.1")] + ["/usr/lib/llvm-14/lib/libclang-cpp.so.14"]
#: holds the libraries of argv[3:] it can load, says how many, waits for a line, then parses argv[2]
#: with libclang (argv[1]) for 2 s
PARSER = """import ctypes, sys, time
held = [ctypes.CDLL(path) for path in sys.argv[3:]]
clang = ctypes.CDLL(sys.argv[1])
clang.clang_createIndex.restype = ctypes.c_void_p
clang.clang_parseTranslationUnit.restype = ctypes.c_void_p
clang.clang_parseTranslationUnit.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int,
                                             ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
clang.clang_disposeTranslationUnit.argtypes = [ctypes.c_void_p]
print(len(held), flush=True)
sys.stdin.readline()
index = clang.clang_createIndex(0, 0)
end = time.monotonic() + 2
while time.monotonic() < end:
    unit = clang.clang_parseTranslationUnit(index, sys.argv[2].encode(), None, 0, None, 0, 0)
    assert unit, "libclang could not parse " + sys.argv[2]
    clang.clang_disposeTranslationUnit(unit)
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [path for path in (PYTHON, LIBCLANG) if not os.path.exists(path)]
    if missing:
        pytest.skip(f"{missing} missing: the Makefile's SYSTEM_PACKAGES (clang-14) install them")
    path = tmp_path_factory.mktemp("table-map") / "parsed.c"
    path.write_text("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n" + "".join(
        f"static int f{i}(int *a, int n) {{ int s = 0; for (int i = 0; i < n; i++) s += a[i] * {i} + (s >> 3); "
        f"return s ^ {i}; }}\n" for i in range(300)))
    return path


@contextmanager
def parser(source: Path) -> Iterator[subprocess.Popen[str]]:
    """The program, its libraries loaded, waiting for a line on its standard input to parse."""
    libraries = [path for path in LIBRARIES if os.path.exists(path)]
    child = subprocess.Popen([PYTHON, "-c", PARSER, LIBCLANG, str(source), *libraries], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == str(len(libraries))
        yield child
    finally:
        child.kill()
        child.wait()


def start(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.write("\n")
    child.stdin.close()


def in_scope_slots(pid: int) -> int:
    """What the recorder finds in scope: the slots of the tables of the modules the process maps."""
    slots = table_slots(images_in_scope(ImageCache(), [pid]), "off")
    if slots <= _core.BPF_DEFAULT_SLOTS:
        pytest.skip(f"the libraries installed here take {slots} slots, within the default map: {LIBRARIES}")
    return slots


def wait_for_events(pid: int) -> None:
    """Until process `pid` holds a perf event (the recorder attached), at most a minute."""
    for _ in range(600):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]" for fd in fds):
                return
        except FileNotFoundError:  # an fd closed while listed
            pass
        time.sleep(0.1)
    raise AssertionError(f"process {pid} opened no perf event in a minute")


def test_the_tables_in_scope_at_the_start_size_the_map(source: Path) -> None:
    with parser(source) as child:
        in_scope = in_scope_slots(child.pid)
        recorder = BpfRecorder(frequency=FREQUENCY, pids=[child.pid])
        start(child)
        profile = recorder.run(lambda: child.poll() is not None)
    size = recorder.table_map
    assert size.chosen_by == "tables in scope" and size.in_scope_slots == in_scope and not size.refused, size
    assert in_scope * 1.5 <= size.slots <= in_scope * 1.5 + (1 << 20) // _core.BPF_SLOT_BYTES
    stats = profile.statistics()
    assert stats["table_map_slot_bytes"] == size.slots * _core.BPF_SLOT_BYTES
    assert stats["table_in_scope_bytes"] == in_scope * _core.BPF_SLOT_BYTES
    assert in_scope <= profile.table_use.slots_peak <= size.slots
    # big enough: nothing evicted while in use, the stacks as complete as the workloads'
    assert stats["modules_evicted_in_use"] == 0 and "table_evicted" not in profile.outcomes, stats["outcomes"]
    mine = {s: n for s, n in profile.stacks.items() if s.pid == child.pid and s.user}
    walked = sum(n for s, n in mine.items() if s.outcome != "not_loaded")
    assert walked >= 100 and sum(n for s, n in mine.items() if s.outcome == "end") >= 0.95 * walked, stats["outcomes"]


def test_an_explicit_table_mib_wins(source: Path) -> None:
    with parser(source) as child:
        in_scope = in_scope_slots(child.pid)
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        recording = subprocess.Popen([sys.executable, "-m", "fastunwind", "record", "--bpf", "--json", "--table-mib",
                                      "32", "-F", str(FREQUENCY), "-p", str(child.pid)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        wait_for_events(recording.pid)  # its tables are evicted as they are loaded, samples or not
        start(child)
        out, err = recording.communicate(timeout=120)
    assert recording.returncode == 0, err
    stats = json.loads(out)
    assert stats["table_map_chosen_by"] == "--table-mib" and stats["table_map_slot_bytes"] == 32 << 20
    assert stats["table_slots_peak_bytes"] <= 32 << 20 and stats["table_in_scope_bytes"] == 0
    # too small: modules in use were evicted, and the summary says what would have held them
    assert stats["modules_evicted_in_use"] > 0, stats
    every = stats["table_mib_for_every_table"]
    assert every * (1 << 20) >= in_scope * _core.BPF_SLOT_BYTES > 32 << 20
    assert f"--table-mib {every} holds every table this recording loaded" in err
    assert "table map 32.0 MiB (--table-mib)" in err


def test_the_named_limit_holds(source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bpf, "TABLE_MAP_LIMIT_MIB", 40)
    with parser(source) as child:
        in_scope = in_scope_slots(child.pid)
        assert in_scope * 1.5 > 40 << 20 // _core.BPF_SLOT_BYTES
        recorder = BpfRecorder(frequency=FREQUENCY, pids=[child.pid])
        profile = recorder.run(lambda: True)
    slots = (40 << 20) // _core.BPF_SLOT_BYTES
    assert recorder.table_map == TableMap(slots, "limit", in_scope)
    assert profile.statistics()["table_map_slot_bytes"] == 40 << 20 and profile.table_use.slots_peak <= slots


def test_a_map_the_kernel_refuses_gives_way_to_a_smaller_one_saying_so() -> None:
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    # more than the machine's memory: the kernel refuses it at once, allocating nothing
    refused = 2 * ram // _core.BPF_SLOT_BYTES
    if refused > _core.BPF_MAX_SLOTS:
        pytest.skip(f"{ram >> 30} GiB of memory: no map of twice that can be asked for")
    session, size = open_table_map(TableMap(refused, "tables in scope", 1), timing=False)
    session.close()
    assert size.slots == min(refused // 2, table_map_limit()) and size.in_scope_slots == 1
    assert len(size.refused) == 1 and re.fullmatch(
        rf"the kernel refused a BPF table map of {refused} slots \(\d+ MiB\): Cannot allocate memory", size.refused[0])
    # asked for: no other size
    with pytest.raises(BpfMapMemoryError, match="the kernel refused a BPF table map"):
        open_table_map(TableMap(refused, "--table-mib", 0), timing=False)
    mib = refused * _core.BPF_SLOT_BYTES >> 20
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "--table-mib", str(mib), "--",
                             "true"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert result.returncode == 1 and result.stderr.startswith(
        f"fastunwind: error: the kernel refused a BPF table map of {mib * (1 << 20) // 64} slots"), result.stderr


def test_a_command_s_program_and_libraries_are_the_scope(source: Path) -> None:
    # clang-14's tables (libLLVM-14, libclang-cpp: ~23 MiB) and half again: more than the default map
    clang = "/usr/lib/llvm-14/bin/clang"
    if not os.path.exists(clang):
        pytest.skip(f"{clang} missing: the Makefile's SYSTEM_PACKAGES (clang-14) install it")
    in_scope = table_slots(images_in_scope(ImageCache(), programs=[clang]), "missing")
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "--json", "-F", str(FREQUENCY),
                             "--", clang, "-O2", "-c", str(source), "-o", os.devnull], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=300)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["table_in_scope_bytes"] == in_scope * _core.BPF_SLOT_BYTES > 16 << 20
    assert stats["table_map_chosen_by"] == "tables in scope" and stats["table_map_slot_bytes"] > 32 << 20
    assert stats["modules_evicted_in_use"] == 0 and "table_evicted" not in stats["outcomes"], stats["outcomes"]
    assert "(the tables in scope at the start take " in result.stderr


def test_a_script_command_s_scope_is_its_interpreter_s(tmp_path: Path) -> None:
    # a script clang-14 runs (through env and the PATH): the map is sized from clang's tables, not
    # the default a script's own file gives
    clang = "/usr/lib/llvm-14/bin/clang"
    if not os.path.exists(clang) or not os.path.exists("/usr/bin/env"):
        pytest.skip(f"{clang} or /usr/bin/env missing")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "clang-for-scripts").symlink_to(clang)
    script = tmp_path / "script"
    script.write_text("#!/usr/bin/env clang-for-scripts\n")
    script.chmod(0o755)
    in_scope = table_slots(images_in_scope(ImageCache(), programs=[clang]), "missing")
    env = {**os.environ, "PYTHONPATH": str(SRC), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    # clang refuses the script as input at once: the recording ends with it
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "--json", "-F", str(FREQUENCY),
                             "--", str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["table_in_scope_bytes"] == in_scope * _core.BPF_SLOT_BYTES > 16 << 20
    assert stats["table_map_chosen_by"] == "tables in scope"
    # an interpreter that is missing: an error before anything runs
    script.write_text("#!/nonexistent/interpreter\n")
    result = subprocess.run([sys.executable, "-m", "fastunwind", "record", "--bpf", "--", str(script)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 1 and "the interpreter /nonexistent/interpreter: No such file or directory" in \
        result.stderr, result.stderr
