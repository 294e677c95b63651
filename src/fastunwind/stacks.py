"""Symbolized stacks of a process's threads, whatever gave their registers and memory: the model a
live process (live.py) and a core file fill, the one unwind-and-name step they share, and the two
renderings of `fastunwind backtrace` (gdb/eu-stack-like text and JSON).

A thread is unwound by the C walker (native/core/walk.c, GIL released) from its registers over its
copied stack and its address space's modules, each frame's registers recovered in C when asked
(`fu_walk_frame_registers`), and named by its module's symbol table (symbols.py, searched in C).
Python builds one immutable object per distinct frame (the threads of a snapshot share them, and
the text rendering shares each one's line): typed NamedTuples, not dataclasses (a third of the
cost per object, and the CLI's start-up without dataclasses' and inspect's ~6 ms of imports:
tests/unit/layout/test_startup_imports.py).

    >>> from fastunwind.stacks import unwind_current_thread
    >>> thread = unwind_current_thread()
    >>> thread.complete, thread.frames[0].symbol
    (True, 'unwind_self')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

from fastunwind import _core
from fastunwind.address_space import AddressSpace, ModuleImage
from fastunwind.address_space import Mapping as AddressMapping
from fastunwind.symbols import symbol_table_for_file
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from typing import Any, TextIO

#: the walker's registers by DWARF number (x86_64.h: 0 rax ... 15 r15, 16 the return address)
REGISTER_NAMES: tuple[str, ...] = tuple(_core.register_name(column) or f"r{column}"
                                        for column in range(_core.WALK_REGISTERS))
#: the registers gdb shows beside the walker's (x86_64.h): eflags, the segment selectors, fs_base,
#: gs_base; a caller's are its callee's where a call keeps them (STATE_KEPT_BY_CALLS), else unknown
STATE_REGISTER_NAMES: tuple[str, ...] = _core.STATE_REGISTER_NAMES
#: how a frame was recovered, by code (walk.h, fu_frame_kind)
FRAME_KINDS: tuple[str, ...] = _core.FRAME_KINDS
#: the walk outcome of a stack walked to its outermost frame; every other outcome is incomplete
COMPLETE = "end"


class Frame(NamedTuple):
    """One frame: frame 0's address is the interrupted PC, a caller's its return address (the
    instruction after the call; a frame a signal interrupted: that frame's PC), as eu-stack and
    gdb print them."""

    address: int
    #: the function at the address the walker names the frame at (walk.h fu_frame_name_address: a
    #: caller's return address - 1, a signal trampoline's and an interrupted frame's own address)
    symbol: str | None
    offset: int  #: address - the symbol's start (0 without a symbol)
    module: str | None  #: the mapped file's path as the process names it
    recovered_by: str  #: how the walker's step reached the frame, one of FRAME_KINDS
    #: the frame's registers by name (REGISTER_NAMES, then STATE_REGISTER_NAMES), None where the
    #: unwind rules do not recover one; empty where the caller did not ask for them
    registers: Mapping[str, int | None]
    #: "synthesized" or "corrected" where the step from this frame to its caller used rows derived
    #: from the machine code (--synth; walk.h FU_FRAME_DERIVED), None where it used declared CFI
    derived: str | None = None


class Thread(NamedTuple):
    """One thread's stack. `outcome` is the walk's (walk.h fu_walk_outcome: "end", "truncated",
    "no_unwind_info", ...) or why the thread could not be walked (the source's: a live thread
    that exited, one that could not be stopped); only "end" is a complete stack."""

    tid: int
    name: str
    frames: tuple[Frame, ...]
    outcome: str
    fault_address: int = 0  #: where the walk failed (walk.h fu_walk_result), else 0
    #: how long the thread was stopped to copy its registers and stack (live processes), else 0
    stopped_ns: int = 0
    #: why a thread that could not be walked was not (the system's message), else ""
    reason: str = ""

    @property
    def complete(self) -> bool:
        return self.outcome == COMPLETE


class ProcessSnapshot(NamedTuple):
    """Every thread of one process, as one source saw them."""

    pid: int
    threads: tuple[Thread, ...]

    @property
    def complete(self) -> bool:
        return all(thread.complete for thread in self.threads)


def symbol_table(image: ModuleImage) -> _core.SymbolTable:
    """The module's symbol table (symbols.py), built once per image and kept in it."""
    table: _core.SymbolTable | None = image.memo.get("symbols")
    if table is None:
        table = image.memo["symbols"] = symbol_table_for_file(image.elf)
    return table


def unwind_thread(space: AddressSpace, registers: Mapping[int, int], stack: bytes, stack_address: int, *,
                  state: Sequence[int] = (), with_registers: bool = False, max_frames: int = _core.WALK_MAX_FRAMES,
                  backend: str | None = None, known: KnownFrames | None = None, synth: str = "off"
                  ) -> tuple[tuple[Frame, ...], str, int]:
    """(frames, outcome, fault address) of one thread: `registers` by DWARF number (16 the PC,
    7 the SP required), its stack bytes from `stack_address` up; `with_registers`: each frame's
    registers recovered (else empty), with the thread's `state` registers (STATE_REGISTER_NAMES'
    values) where given. `known`: the frames named already in `space` (the threads of one snapshot
    share one: they share most of their frames); `synth`: the rows derived from the machine code
    (tables.compact.SYNTH_MODES)."""
    core = space.to_core(backend, synth)
    if with_registers:
        outcome, fault, raw, by_frame = _core.unwind(core, dict(registers), stack, stack_address, max_frames,
                                                     frame_registers=True)
    else:
        outcome, fault, raw = _core.unwind(core, dict(registers), stack, stack_address, max_frames)
        by_frame = []
    mappings = space.mappings
    return (symbolize(raw, lambda module: mappings[module] if module is not None else None, by_frame, known,
                      state), outcome, fault)


#: the frames a source named already, by the walker's (address, module, frame kind, flags) as the
#: source gives them: within one address space, those name a frame
KnownFrames = dict[tuple[int, object, int, int], Frame]
#: the registers of a frame whose registers were not asked for
NO_REGISTERS: Mapping[str, int | None] = MappingProxyType({})


def symbolize(raw: Iterable[tuple[int, Any, int, int]], mapping_of: Callable[[Any], AddressMapping | None],
              by_frame: Sequence[Sequence[int | None]] = (), known: KnownFrames | None = None,
              state: Sequence[int] = ()) -> tuple[Frame, ...]:
    """Frames from the walker's (address, module, frame kind code, FRAME_* flags), its modules'
    mappings by `mapping_of` (asked once per frame not `known`), and, optionally, each frame's
    registers by DWARF number, with the thread's `state` registers (unknown without them)."""
    known = {} if known is None else known
    frames = []
    top = state or (None,) * len(STATE_REGISTER_NAMES)
    callers = tuple(value if _core.STATE_KEPT_BY_CALLS >> i & 1 else None for i, value in enumerate(top))
    for index, key in enumerate(raw):
        frame = known.get(key)
        if frame is None:
            address, module, kind, flags = key
            frame = known[key] = _frame(address, mapping_of(module), kind, flags)
        if index < len(by_frame):
            registers = dict(zip(REGISTER_NAMES, by_frame[index]))
            registers.update(zip(STATE_REGISTER_NAMES, callers if index else top))
            frame = frame._replace(registers=registers)
        frames.append(frame)
    return tuple(frames)


def state_of_user_registers(user_registers: Sequence[int]) -> tuple[int, ...]:
    """The state registers' values (STATE_REGISTER_NAMES) from struct user_regs_struct's words."""
    return tuple(user_registers[_core.USER_REGISTER_NAMES.index(name)] for name in STATE_REGISTER_NAMES)


def _frame(address: int, mapping: AddressMapping | None, kind: int, flags: int) -> Frame:
    """The walker's frame (`kind` its code, `flags` FRAME_*) at `address` in `mapping` (None:
    outside any module), without its registers."""
    symbol, offset = None, 0
    if mapping is not None and mapping.image is not None:
        symbol, offset = _name(address, _core.frame_name_address(address, kind, flags), mapping.image, mapping.bias)
    return Frame(address, symbol, offset, mapping.path if mapping else None, FRAME_KINDS[kind], NO_REGISTERS,
                 _derived(flags))


def _derived(flags: int) -> str | None:
    """The origin of the derived row a frame's step used (walk.h fu_frame_derived_name), else None."""
    if flags & _core.FRAME_CORRECTED:
        return _core.SYNTH_ORIGIN_NAMES[_core.COMPACT_ORIGIN_CORRECTED]
    if flags & _core.FRAME_SYNTHESIZED:
        return _core.SYNTH_ORIGIN_NAMES[_core.COMPACT_ORIGIN_SYNTHESIZED]
    return None


def _name(address: int, lookup: int, image: ModuleImage, bias: int) -> tuple[str | None, int]:
    """(symbol at `lookup`, offset of `address` into it) of a frame in `image` mapped at `bias`;
    (None, 0) without one."""
    found = symbol_table(image).lookup(lookup - bias)
    return (found[0], found[1] + address - lookup) if found is not None else (None, 0)


def unwind_current_thread(max_frames: int = _core.WALK_SELF_MAX_FRAMES) -> Thread:
    """The calling thread's own stack, symbolized, from inside the C extension up to the thread's
    start (walk.unwind_current_thread, whose images are kept across calls)."""
    import threading

    from fastunwind import walk  # here: the backtrace path stays without dataclasses (walk's)

    walked = walk.unwind_current_thread(max_frames=max_frames)
    return Thread(threading.get_native_id(), threading.current_thread().name,
                  symbolize(((frame.ip, frame.mapping, FRAME_KINDS.index(frame.kind),
                              _core.FRAME_SIGNAL_TRAMPOLINE if frame.signal_trampoline else 0)
                             for frame in walked.frames), lambda mapping: mapping),
                  walked.outcome, walked.fault_address)


# ---- renderings ----------------------------------------------------------------------------------
# One rendering for both paths: core/snapshot.c writes the text and the JSON, for the launcher
# (native/cli) and, through _core.render_snapshot, for this one.


def render(snapshot: ProcessSnapshot, out: TextIO, *, json: bool = False) -> None:
    """gdb/eu-stack-like text (a `PID n` line, then per thread its `TID n (name):` header, a line a
    frame `#0  0x00007f12a4c2e1b9 in qsort_r+0x1b9 (/usr/lib/x86_64-linux-gnu/libc.so.6)`, each
    frame's registers four a line where asked, and `(stack incomplete: OUTCOME[ at ADDRESS][:
    reason])` after a stack that did not reach its outermost frame); with `json`, one document
    {"pid", "threads": [{"tid", "name", "outcome", "frames": [{"address", "symbol", "offset",
    "module", "registers": {name: value or null}}]}]} as json.dump writes it; a frame whose step
    used rows derived from the machine code (Frame.derived) is marked ` [synthesized]` (or
    ` [corrected]`) after its module, and has a "derived" key after "module"."""
    data = _core.render_snapshot(snapshot.pid, snapshot.threads, json)
    out.write(data.decode("utf-8", "surrogateescape"))  # paths' undecodable bytes: their own again


def render_text(snapshot: ProcessSnapshot, out: TextIO) -> None:
    render(snapshot, out)


def render_json(snapshot: ProcessSnapshot, out: TextIO) -> None:
    render(snapshot, out, json=True)
