"""Replay a perf.data recording: processes and their address spaces over time, and the samples to
unwind in each.

Events are taken in time order (as `perf script` does): MMAP/MMAP2 add executable mappings (a new
mapping replaces what it overlaps, as mmap(2) does), COMM with the exec flag starts a new address
space, FORK copies the parent's (threads of one process share it). Every sample is tied to the
address space of its pid at that moment; equal snapshots are shared, so a recording with a few
hundred mmaps needs only a few hundred address spaces, whatever its sample count.

A module is used only if the file on disk is the one that was recorded: when the recording has a
build-id for the mapping (MMAP2 build-id, or the HEADER_BUILD_ID feature) and the file's differs,
the mapping is reported as replaced and gets no unwind tables.
"""

from __future__ import annotations

import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastunwind.address_space import AddressSpace, ImageCache, Mapping

if TYPE_CHECKING:
    from fastunwind.perf_data import PerfData, Sample

PROT_EXEC = 4
PERF_RECORD_MISC_MMAP_DATA = 1 << 13


@dataclass
class Process:
    pid: int
    comm: str = ""
    mappings: list[Mapping] = field(default_factory=list)
    space: AddressSpace | None = None  #: the current snapshot, built on first use
    space_index: int = -1


@dataclass
class SessionStatistics:
    replaced_modules: set[str] = field(default_factory=set)  #: build-id differs from the recording's
    missing_modules: set[str] = field(default_factory=set)  #: file not readable here
    samples_without_process: int = 0


class PerfSession:
    """Address spaces of a recording, and for each sample the index of its address space."""

    def __init__(self, recorded_build_ids: dict[str, bytes] | None = None, images: ImageCache | None = None) -> None:
        self.images = images or ImageCache()
        self.recorded_build_ids = recorded_build_ids or {}
        self.processes: dict[int, Process] = {}
        self.comms: dict[int, str] = {}  #: tid -> comm
        self.spaces: list[AddressSpace] = []
        self.statistics = SessionStatistics()
        self._spaces_by_key: dict[tuple[tuple[int, int, int, str], ...], int] = {}

    # ---- events --------------------------------------------------------------------------------
    def process(self, pid: int) -> Process:
        proc = self.processes.get(pid)
        if proc is None:
            proc = self.processes[pid] = Process(pid)
        return proc

    def mmap(self, pid: int, start: int, length: int, pgoff: int, filename: str, build_id: bytes | None,
             executable: bool) -> None:
        if not executable or length <= 0:
            return
        proc = self.process(pid)
        end = start + length
        kept = [m for m in proc.mappings if m.end <= start or m.start >= end]
        image = None
        bias = 0
        if filename.startswith("/"):
            expected = build_id or self.recorded_build_ids.get(filename)
            image = self.images.get(filename)
            if image is None:
                self.statistics.missing_modules.add(filename)
            elif expected and image.build_id and expected[: len(image.build_id)] != image.build_id:
                self.statistics.replaced_modules.add(filename)
                image = None
            if image is not None:
                found = image.bias_for_mapping(start, pgoff)
                if found is None:
                    image = None
                else:
                    bias = found
        kept.append(Mapping(start, end, pgoff, filename, image, bias))
        proc.mappings = sorted(kept, key=lambda m: m.start)
        proc.space = None

    def comm(self, pid: int, tid: int, comm: str, exec_: bool) -> None:
        self.comms[tid] = comm
        proc = self.process(pid)
        if pid == tid:
            proc.comm = comm
        if exec_:
            proc.mappings = []
            proc.space = None

    def fork(self, pid: int, ppid: int, tid: int) -> None:
        if pid == ppid:
            return  # a new thread shares its process's address space
        parent = self.processes.get(ppid)
        child = self.process(pid)
        if parent is not None:
            child.mappings = list(parent.mappings)
            child.comm = parent.comm
            child.space = None
        if ppid in self.comms and tid not in self.comms:
            self.comms[tid] = self.comms.get(ppid, "")

    # ---- samples -------------------------------------------------------------------------------
    def space_index_for(self, pid: int) -> int:
        """Index in `spaces` of the current address space of `pid` (built once per snapshot)."""
        proc = self.processes.get(pid)
        if proc is None:
            self.statistics.samples_without_process += 1
            proc = self.process(pid)
        if proc.space is None:
            key = tuple((m.start, m.end, m.pgoff, m.path) for m in proc.mappings)
            index = self._spaces_by_key.get(key)
            if index is None:
                index = len(self.spaces)
                self.spaces.append(AddressSpace(proc.mappings))
                self._spaces_by_key[key] = index
            proc.space = self.spaces[index]
            proc.space_index = index
        return proc.space_index


NO_SPACE = 0xFFFFFFFF  #: a sample without an address space (unwind_samples skips it)


@dataclass
class Replay:
    """A recording replayed: its session, and per sample (in the reader's time order) the Sample,
    the index of its address space in `session.spaces` and its thread's name at that moment."""

    session: PerfSession
    space_ids: array.array[int]
    samples: list[Sample]
    comms: list[str]


def replay(perf: PerfData, images: ImageCache | None = None) -> Replay:
    """Replay the recording's events in time order (MMAP/MMAP2 executable mappings, COMM, FORK)
    and tie every sample to its process's address space at that moment. Kernel-mode samples get
    one too: they carry the user registers and stack of the syscall entry."""
    from fastunwind.perf_data import Comm, Fork, Mmap, Sample

    session = PerfSession({b.filename: bytes.fromhex(b.build_id) for b in perf.build_ids}, images)
    space_ids = array.array("I", [NO_SPACE]) * perf.sample_count
    samples: list[Sample] = [None] * perf.sample_count  # type: ignore[list-item]
    comms = [""] * perf.sample_count
    for event in perf.events():
        if isinstance(event, Sample):
            samples[event.index] = event
            space_ids[event.index] = session.space_index_for(event.pid)
            comms[event.index] = session.comms.get(event.tid) or session.process(event.pid).comm
        elif isinstance(event, Mmap):
            # perf records plain MMAP (v1) events for executable mappings only
            executable = bool(event.prot & PROT_EXEC) if event.is_mmap2 else True
            session.mmap(event.pid, event.start, event.length, event.pgoff, event.filename,
                         bytes.fromhex(event.build_id) if event.build_id else None, executable)
        elif isinstance(event, Comm):
            session.comm(event.pid, event.tid, event.comm, event.exec)
        elif isinstance(event, Fork):
            session.fork(event.pid, event.ppid, event.tid)
    return Replay(session, space_ids, samples, comms)
