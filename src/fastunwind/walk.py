"""Unwind one stack: registers, the stack bytes and an address space in, frames and an outcome out.

    >>> from fastunwind.walk import unwind_current_thread
    >>> walk = unwind_current_thread()
    >>> walk.outcome, walk.complete
    ('end', True)
    >>> walk.frames[-1].mapping.path  # the executable of the interpreter (_start)  # doctest: +ELLIPSIS
    '.../python3...'

The walk runs in C without the GIL (native/core/walk.c). Registers use DWARF x86-64 numbering (0 rax ...
7 rsp, 8-15 r8-r15, 16 the IP). Memory is the stack dump [stack_address, +len(stack)) and the
read-only segments of the mapped files; nothing else is read.
"""

from __future__ import annotations

from collections.abc import Mapping as MappingType
from dataclasses import dataclass

from fastunwind import _core
from fastunwind.address_space import AddressSpace, ImageCache, Mapping, current_process, parse_proc_maps

#: how a frame was recovered, by code (walk.h, fu_frame_kind)
FRAME_KINDS: tuple[str, ...] = _core.FRAME_KINDS
#: outcomes of a walk by code (walk.h, fu_walk_outcome); "end" is the only complete one
OUTCOMES: tuple[str, ...] = _core.WALK_OUTCOMES


@dataclass(frozen=True, slots=True)
class WalkedFrame:
    ip: int  #: avma: the first frame's IP, then return addresses (or a signal's interrupted IP)
    mapping: Mapping | None
    kind: str  #: how the frame was recovered, one of FRAME_KINDS
    signal_trampoline: bool  #: this frame's own CFI marks it as a signal frame (__restore_rt)


@dataclass(frozen=True, slots=True)
class Walk:
    outcome: str
    fault_address: int  #: for unreadable / truncated: the address; for no_unwind_info: the IP
    frames: tuple[WalkedFrame, ...]

    @property
    def complete(self) -> bool:
        """The stack was walked to its end (a truncated or failed walk is never complete)."""
        return self.outcome == "end"


def _walk(space: AddressSpace, result: tuple[str, int, list[tuple[int, int | None, int, int]]]) -> Walk:
    outcome, fault, frames = result
    return Walk(outcome, fault, tuple(
        WalkedFrame(ip, space.mappings[module] if module is not None else None, FRAME_KINDS[kind],
                    bool(flags & _core.FRAME_SIGNAL_TRAMPOLINE))
        for ip, module, kind, flags in frames))


def unwind_stack(space: AddressSpace, registers: MappingType[int, int], stack: bytes, stack_address: int,
                 max_frames: int = _core.WALK_MAX_FRAMES, backend: str | None = None) -> Walk:
    """Walk a captured stack: `registers` by DWARF number (16 = IP, 7 = SP required); `backend` as
    AddressSpace.to_core takes it."""
    return _walk(space, _core.unwind(space.to_core(backend), dict(registers), stack, stack_address, max_frames))


#: what unwind_current_thread keeps across calls when not given images: the module images it
#: opened, and the address space of the executable mappings /proc/self/maps last listed (with its
#: tables for the C walker), used again while they stay the same (the heap's and anonymous
#: mappings change under any Python code and do not matter)
_OWN_IMAGES = ImageCache()
_own_space: tuple[str, AddressSpace] | None = None


def _own_address_space() -> AddressSpace:
    global _own_space
    with open("/proc/self/maps", errors="surrogateescape") as maps:
        executable = "".join(line for line in maps if line.split(maxsplit=2)[1][2] == "x")
    kept = _own_space
    if kept is not None and kept[0] == executable:
        return kept[1]
    space = parse_proc_maps(executable, _OWN_IMAGES)
    _own_space = (executable, space)
    return space


def unwind_current_thread(images: ImageCache | None = None, max_frames: int = _core.WALK_SELF_MAX_FRAMES) -> Walk:
    """Walk the calling thread's own stack, from inside the C extension up to the thread's start.
    Memory is read with process_vm_readv: a corrupt stack gives an outcome, never a crash. Without
    `images`, the modules' images and tables are kept across calls (a module-level cache)."""
    space = current_process(images) if images is not None else _own_address_space()
    result, _oracle = _core.unwind_self(space.to_core(), max_frames)
    return _walk(space, result)
