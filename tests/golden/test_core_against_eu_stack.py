"""`fastunwind.core` against eu-stack --core and gdb on cores made here.

The cores: gdb's gcore of workloads/live/blocked_threads.c (gcc -O2, no frame pointers: threads in a
deep recursion, a signal handler, qsort's comparator, a busy leaf and a stack-realigning
function), the kernel's cores of the same program crashing by SIGSEGV and by abort(), and gcores
of Debian's own `sleep` and `python3`. For every thread: every stack complete; its PCs identical to
eu-stack's, or longer where eu-stack stops early, and then gdb (`thread apply all bt`'s frames, read
through gdb's Python) has ours; each frame's registers identical to gdb's wherever both know them
(the walker recovers rip, rsp and the callee-saved registers; gdb prints `<not saved>` for others;
eflags, the segment selectors and fs_base/gs_base come from NT_PRSTATUS, and a caller keeps all but
eflags).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from fastunwind import core as core_files
from fastunwind.elf import ElfFile
from fastunwind.stacks import STATE_REGISTER_NAMES, Thread
from tests.support import cores
from tests.support.cores import CoreUnavailable

KINDS = ("gcore", *cores.KERNEL_CORE_MODES)
#: Debian's own programs, gcore'd while they block (sleep in nanosleep, python3 in select)
REAL_PROGRAMS = {
    "sleep": ["/usr/bin/sleep", "60"],
    "python3": ["/usr/bin/python3", "-c", "import time; time.sleep(60)"],
}


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return cores.blocked_threads(tmp_path_factory.mktemp("blocked"))
    except CoreUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def made_cores(program: Path) -> dict[str, Path | str]:
    """Each kind's core, or why it could not be made."""
    made: dict[str, Path | str] = {}
    out = program.parent
    try:
        with cores.running([str(program), "wait"], out, prints_ready=True) as pid:
            made["gcore"] = cores.gcore_of(pid, out / "gcore")
    except CoreUnavailable as error:
        made["gcore"] = str(error)
    return made | cores.kernel_cores(program, out)


def core_of(made: dict[str, Path | str], kind: str) -> Path:
    found = made[kind]
    if isinstance(found, str):
        pytest.skip(f"no {kind} core: {found}")
    return found


def assert_agrees(threads: tuple[Thread, ...], core: Path, exe: Path | None) -> int:
    """Asserts the threads are eu-stack's (their PCs, and the signal frames' names) and their
    registers gdb's; returns how many registers were compared with gdb's."""
    try:
        named = cores.eu_stack_frames(cores.eu_stack_core_arguments(core, exe))
        gdb = cores.gdb_frames(core, exe)
    except CoreUnavailable as error:
        pytest.skip(str(error))
    oracle = {tid: [pc for pc, _symbol in frames] for tid, frames in named.items()}
    ours = {thread.tid: thread for thread in threads}
    assert sorted(ours) == sorted(oracle)
    # signal trampolines and the frames they interrupted, named as eu-stack does
    for tid, frames in named.items():
        cores.assert_signal_frames_named_as(ours[tid].frames, frames)
    compared = 0  # registers compared with gdb's
    compared_names: set[str] = set()
    for tid, thread in ours.items():
        assert thread.complete, f"thread {tid}: {thread.outcome} at {thread.fault_address:#x}"
        pcs = [frame.address for frame in thread.frames]
        theirs = oracle[tid]
        if pcs != theirs:
            # only where eu-stack stopped early, and gdb then has our frames
            assert pcs[:len(theirs)] == theirs and len(pcs) > len(theirs), (tid, [hex(p) for p in pcs],
                                                                            [hex(p) for p in theirs])
            assert [frame["pc"] for frame in gdb[tid]][:len(pcs)] == pcs, tid
        gdb_thread = gdb[tid]
        for number, frame in enumerate(thread.frames[:len(gdb_thread)]):
            if gdb_thread[number]["pc"] != frame.address:
                break  # gdb's frames differ from here on: nothing to compare
            theirs_registers = gdb_thread[number]["registers"]
            assert isinstance(theirs_registers, dict)
            for name, value in frame.registers.items():
                if value is not None and name in theirs_registers:
                    assert value == theirs_registers[name], (tid, number, name, hex(value),
                                                             hex(theirs_registers[name]))
                    compared += 1
                    compared_names.add(name)
    # gdb's `info registers` of frame 0 (eflags, segments, bases) among them, from the core's NT_PRSTATUS
    assert set(STATE_REGISTER_NAMES) <= compared_names
    return compared


@pytest.mark.parametrize("kind", KINDS)
def test_every_thread_as_eu_stack_and_gdb_see_it(kind: str, program: Path, made_cores: dict[str, Path | str]
                                                 ) -> None:
    core = core_of(made_cores, kind)
    with core_files.open(core) as opened:
        assert opened.problems == []
        threads = opened.threads(with_registers=True)
        modules = {module.path: module for module in opened.modules}
    # the vDSO's image is the core's own copy, its build-id read from it
    assert modules[core_files.VDSO].file == core_files.VDSO and modules[core_files.VDSO].build_id
    assert modules[str(program)].build_id == ElfFile.open(program).build_id_hex
    assert len(threads) == 6
    assert assert_agrees(threads, core, program) > 500
    names = {frame.symbol for thread in threads for frame in thread.frames}
    # every kind of frame the program stops in was walked through
    assert {"recurse", "on_usr1", "__restore_rt", "compare", "spin_leaf", "realign_thread", "start_thread"} <= names, names
    crashed = threads[0].frames[0].symbol
    assert crashed == {"gcore": "__libc_pause", "segv": "crash_by_null_pointer", "abort": "__pthread_kill_implementation"}[kind]


def test_the_signalled_thread_comes_first_with_its_registers(program: Path, made_cores: dict[str, Path | str]
                                                             ) -> None:
    core = core_of(made_cores, "segv")
    with core_files.open(core) as opened:
        first = opened.threads(with_registers=True)[0]
    top = first.frames[0]
    assert top.registers["rip"] == top.address and all(v is not None for v in top.registers.values())
    # a caller's callee-saved registers are recovered or kept; the scratch ones are unknown
    caller = first.frames[1].registers
    assert caller["rax"] is None and caller["rsp"] is not None
    # a call keeps the segment selectors and bases, not the flags
    assert caller["eflags"] is None and top.registers["eflags"] is not None
    assert all(caller[name] == top.registers[name] for name in STATE_REGISTER_NAMES if name != "eflags")
    assert top.registers["cs"] == 0x33 and top.registers["fs_base"]  # user code's selector; glibc's TLS


@pytest.mark.parametrize("name", sorted(REAL_PROGRAMS))
def test_a_debian_programs_gcore(name: str, tmp_path: Path) -> None:
    command = REAL_PROGRAMS[name]
    if not os.path.exists(command[0]):
        pytest.skip(f"{command[0]} is not installed")
    try:
        with cores.running(command, tmp_path, prints_ready=False) as pid:
            core = cores.gcore_of(pid, tmp_path / name)
    except CoreUnavailable as error:
        pytest.skip(str(error))
    with core_files.open(core) as opened:
        assert opened.problems == []
        threads = opened.threads(with_registers=True)
    assert assert_agrees(threads, core, None) > 10
    # the outermost frame is the program's own entry code (stripped: no symbol to name it)
    program_file = os.path.realpath(command[0])
    assert threads[0].frames[-1].module == program_file


def test_memory_the_dump_left_out_comes_from_the_mapped_file(program: Path, made_cores: dict[str, Path | str]
                                                            ) -> None:
    """The kernel does not dump file-backed text (coredump_filter): the reader serves it from the
    file NT_FILE names, at the mapping's file offset, as eu-stack does."""
    core = core_of(made_cores, "segv")
    with core_files.open(core) as opened:
        libc = next(m for m in opened.space.mappings if m.path.endswith("/libc.so.6"))
        segments = {vaddr: filesz for vaddr, _memsz, filesz, _present, _flags in opened._core.segments()}
        assert segments.get(libc.start, 0) == 0  # its text is not in the dump
        with open(libc.path, "rb") as file:
            file.seek(libc.pgoff + 0x100)
            expected = file.read(64)
        assert opened.read(libc.start + 0x100, 64) == expected
        assert opened.read(libc.end - 8, 16) is None  # runs past the mapping
