"""Every thread's stack of a live process, by pid (`fastunwind backtrace -p PID`, `fastunwind.backtrace`).

The process's maps are read first (/proc/PID/maps); its mapped files are opened through the
process's own view of the file system (/proc/PID/root: containers) or, for a file deleted or
replaced since it was mapped, through /proc/PID/map_files; its vDSO is read from its memory. Then
the C core (native/core/live.c) stops each thread alone (PTRACE_SEIZE + PTRACE_INTERRUPT), copies
its registers (PTRACE_GETREGSET) and the used part of its stack (process_vm_readv, else
/proc/PID/mem) and releases it; its walk runs on the copy (stacks.py), with no thread stopped,
before the next thread is stopped, so that one stack copy is held at a time. Every thread is
released, whatever fails: a thread that exited meanwhile or could not be stopped is reported with
its outcome (LIVE_OUTCOMES), never walked.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

from fastunwind import _core
from fastunwind.address_space import AddressSpace, ImageCache, parse_proc_maps, vdso_image
from fastunwind.errors import LiveError
from fastunwind.stacks import KnownFrames, ProcessSnapshot, Thread, unwind_thread

#: how a thread's capture ended (live.h fu_live_outcome); "captured" threads are walked
LIVE_OUTCOMES: tuple[str, ...] = _core.LIVE_OUTCOMES
#: the most of a thread's stack a snapshot copies (live.h FU_LIVE_MAX_STACK)
MAX_STACK: int = _core.LIVE_MAX_STACK
YAMA_PTRACE_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"


class FileImages(ImageCache):
    """Module images by the file they were read from, not by path: a path through /proc/PID names
    another file once the pid is reused, and a file replaced at its path (an upgrade) is another
    file; the same file reached through several paths (its own, a container's root, map_files) is
    opened once."""

    def key(self, path: str) -> object:
        """(device, inode, size, modification time) of the file at `path`; the path if it is gone."""
        try:
            status = os.stat(path)
        except OSError:
            return path
        return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


#: module images kept across snapshots (the files of one machine, shared by its processes)
_IMAGES = FileImages()


def _read(path: str) -> str:
    """A /proc file's text, decoded as the file system's names are (os.fsdecode): the paths of
    /proc/PID/maps and the thread name in /proc/PID/stat may be any bytes."""
    with open(path, "rb") as f:
        return os.fsdecode(f.read())


class _Locator:
    """Where process `pid`'s mapped files are opened: the path itself when the process sees the
    same file there (no container), else through its root, else (deleted, replaced, or outside
    the root) its map_files entry."""

    def __init__(self, pid: int) -> None:
        self.root = f"/proc/{pid}/root"
        self.map_files = f"/proc/{pid}/map_files"

    def __call__(self, path: str, start: int, end: int, inode: int) -> str:
        for candidate in (path, self.root + path):
            try:
                if os.stat(candidate).st_ino == inode and os.path.samefile(candidate, self.root + path):
                    return candidate
            except OSError:
                continue
        return f"{self.map_files}/{start:x}-{end:x}"


def _stack_ranges(maps: str) -> bytes:
    """The writable mappings' [start, end) as native u64 pairs, sorted: where a thread's stack copy
    ends (live.h fu_live_stacks)."""
    ranges = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=2)
        if len(fields) >= 2 and fields[1][1] == "w":
            start, end = fields[0].split("-")
            ranges.append((int(start, 16), int(end, 16)))
    ranges.sort()
    return b"".join(struct.pack("=QQ", start, end) for start, end in ranges)


def _thread_name(pid: int, tid: int) -> str:
    """The thread's name (/proc comm: any bytes a program set), bytes that are not UTF-8 shown as
    `\\xNN` escapes; "" for a thread that is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/comm", "rb") as comm:
            return comm.read().decode(errors="backslashreplace").rstrip("\n")
    except OSError:
        return ""


#: /proc's states of a task that has exited: a zombie, dead (X also stands for a task that is gone)
EXITED_STATES = ("Z", "X")


def _state(stat_path: str) -> str:
    """The state letter of /proc/.../stat, "X" if the task is gone."""
    try:
        return _read(stat_path).rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "X"


def _exited(pid: int) -> LiveError | None:
    """The error for a process that has exited (a zombie, or gone), else None."""
    state = _state(f"/proc/{pid}/stat")
    return LiveError(f"process {pid} has exited (state {state}: nothing left to trace)") if state in EXITED_STATES else None


def _not_permitted(pid: int) -> LiveError:
    """Why ptrace refused every thread of `pid`, as the system says it."""
    exited = _exited(pid)
    if exited is not None:
        return exited
    try:
        tracer = next((line.split()[1] for line in _read(f"/proc/{pid}/status").splitlines()
                       if line.startswith("TracerPid:")), "0")
    except OSError:
        tracer = "0"
    if tracer != "0":
        return LiveError(f"cannot trace process {pid}: it is already traced by process {tracer}")
    try:
        scope = _read(YAMA_PTRACE_SCOPE).strip()
    except OSError:
        scope = None
    why = f" (kernel.yama.ptrace_scope = {scope})" if scope not in (None, "0") else ""
    return LiveError(f"cannot trace process {pid}: permission denied{why}")


def _threads(pid: int, tids: Sequence[int] | None) -> list[int]:
    try:
        present = sorted(int(name) for name in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        raise LiveError(f"no process {pid}") from None
    except OSError as error:
        raise LiveError(f"cannot list the threads of process {pid}: {error.strerror}") from None
    if not tids:
        return present
    missing = [tid for tid in tids if tid not in present]
    if missing:
        raise LiveError(f"thread {missing[0]} is not a thread of process {pid}")
    return list(dict.fromkeys(tids))


def address_space(pid: int, images: ImageCache | None = None) -> tuple[AddressSpace, str]:
    """Process `pid`'s address space (its executable mappings and vDSO) and its maps text."""
    try:
        maps = _read(f"/proc/{pid}/maps")
    except FileNotFoundError:
        raise LiveError(f"no process {pid}") from None
    except ProcessLookupError:
        raise LiveError(f"process {pid} exited during the snapshot") from None
    except PermissionError:
        raise _not_permitted(pid) from None
    except OSError as error:
        raise LiveError(f"cannot read the maps of process {pid}: {error.strerror}") from None
    if not maps:  # no mappings: a process that has exited, or a kernel thread
        raise _exited(pid) or LiveError(f"process {pid} is a kernel thread: it has no user stack")
    vdso = vdso_image(maps, f"/proc/{pid}/mem")
    return parse_proc_maps(maps, images or _IMAGES, _Locator(pid), vdso), maps


def backtrace(pid: int, tids: Sequence[int] | None = None, *, with_registers: bool = False,
              max_frames: int = _core.WALK_MAX_FRAMES, max_stack: int = MAX_STACK,
              images: ImageCache | None = None, synth: str = "off") -> ProcessSnapshot:
    """Every thread's stack of process `pid` (or of the threads `tids`), symbolized; each frame's
    registers if `with_registers`; `synth`: the rows derived from the machine code
    (tables.compact.SYNTH_MODES). Raises LiveError when the process does not exist or exits, a tid
    is not one of its threads, or no thread can be traced."""
    if pid == os.getpid():
        raise LiveError(f"process {pid} is this process: a process cannot trace its own threads "
                        "(fastunwind.stacks.unwind_current_thread walks the calling thread)")
    wanted = _threads(pid, tids)
    _core.guard_mapped_files()  # in front of a SIGBUS handler installed since the images were opened
    space, maps = address_space(pid, images)
    try:
        mem_fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError:
        mem_fd = -1
    ranges = _stack_ranges(maps)
    threads = []
    known: KnownFrames = {}  # the threads share most of their frames
    try:
        # one thread at a time: stopped, copied and released in C, then walked here while every
        # thread runs (one stack copy held at a time)
        for tid in wanted:
            outcome, error, registers, state, stack_address, stack, stopped_ns = _core.live_capture(
                pid, tid, ranges, max_stack, mem_fd)
            if registers is None or state is None:
                # ptrace refuses a thread that is exiting as it refuses a forbidden one (EPERM)
                if outcome == "not_permitted" and _state(f"/proc/{pid}/task/{tid}/stat") in EXITED_STATES:
                    outcome = "exited"
                threads.append(Thread(tid, _thread_name(pid, tid), (), outcome, 0, stopped_ns,
                                      os.strerror(error) if error else ""))
                continue
            frames, walk_outcome, fault = unwind_thread(space, dict(enumerate(registers)), stack, stack_address,
                                                        state=state, with_registers=with_registers,
                                                        max_frames=max_frames, known=known, synth=synth)
            threads.append(Thread(tid, _thread_name(pid, tid), frames, walk_outcome, fault, stopped_ns))
    finally:
        if mem_fd >= 0:
            os.close(mem_fd)
    outcomes = {thread.outcome for thread in threads}
    if outcomes == {"not_permitted"}:
        raise _not_permitted(pid)
    if outcomes == {"exited"}:
        raise LiveError(f"process {pid} exited during the snapshot")
    space.check_unchanged()  # no frame from the zeros of a module file truncated during the walks
    return ProcessSnapshot(pid, tuple(threads))
