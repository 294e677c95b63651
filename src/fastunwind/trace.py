"""Dynamic validation of the CFI: a command single-stepped under ptrace (`check --trace -- CMD`).

The C core (native/core/trace.c) steps the command one instruction at a time with the GIL released,
keeps the truth of each frame from its calls and returns (a shadow stack: the CFA is the rsp before
the call, the return address lies just below it, the callee-saved registers hold their entry
values), and at every instruction of a traced module compares the declared row with it. Python only
resolves the command, hands over each module's CFI tables when the command maps it (once per
mapping, never per step) and names what the core found: modules, FDEs, symbols, registers.

Only the main thread is traced; threads and forked processes run untraced. See docs/DESIGN.md,
"check --trace".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

from fastunwind import _core
from fastunwind.address_space import VDSO, ImageCache, ModuleImage, vdso_image
from fastunwind.cfi import register_name
from fastunwind.errors import FastunwindError, TraceError
from fastunwind.symbols import symbol_table_for_file

#: what the core is told of a mapping: (bias, eh_frame, debug_frame, id, checked), or None (no CFI)
ModuleAnswer = tuple[int, _core.CfiTable | None, _core.CfiTable | None, int, bool] | None
SECTIONS = (".eh_frame", ".debug_frame")  #: by the core's table number


@dataclass(frozen=True, slots=True)
class TraceModule:
    """An executable mapping the command made."""

    path: str  #: "" for anonymous code, "[vdso]"
    start: int
    end: int
    bias: int  #: avma - svma
    checked: bool  #: compared (a module with CFI the caller asked about)


@dataclass(frozen=True, slots=True)
class Disagreement:
    """One rule that recovers a wrong value at one instruction."""

    address: int  #: svma of the instruction (avma - bias)
    what: str  #: "cfa", "ra", or a callee-saved register ("rbx", "r12")
    declared: int  #: cfa/ra: the address the rule gives; a register: the value it recovers
    truth: int  #: cfa/ra: the true address; a register: its value at the frame's entry

    def describe(self) -> str:
        if self.what in ("cfa", "ra"):
            return (f"{self.what} declared {self.declared:#x}, true {self.truth:#x} "
                    f"({self.declared - self.truth:+d})")
        return f"{self.what} declared slot holds {self.declared:#x}, entry value {self.truth:#x}"


@dataclass(slots=True)
class TracedFde:
    """An FDE the command ran through, with its steps."""

    module: TraceModule
    section: str
    pc_begin: int  #: svma
    pc_end: int
    checked: int  #: steps compared here
    disagreeing: int  #: of those, steps with a disagreement
    symbol: str = ""
    disagreements: list[Disagreement] = field(default_factory=list)  #: the first ones (per FDE bound)


@dataclass(slots=True)
class TraceResult:
    command: list[str]
    outcome: str  #: _core.TRACE_OUTCOMES: exited, killed, step-limit, timeout, interrupted, depth-limit
    exit_status: int  #: the command's status (exited) or signal (killed)
    seconds: float
    counts: dict[str, int]  #: native/core/trace.h fu_trace_counts
    modules: list[TraceModule]
    fdes: list[TracedFde]  #: every FDE stepped through in a checked module

    @property
    def disagreeing_fdes(self) -> list[TracedFde]:
        return [fde for fde in self.fdes if fde.disagreeing]

    @property
    def steps_per_second(self) -> float:
        return self.counts["steps"] / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, object]:
        """The result as check's JSON spirit has it: addresses as the files state them."""
        return {
            "command": self.command,
            "outcome": self.outcome,
            "exit_status": self.exit_status,
            "seconds": round(self.seconds, 3),
            "counts": self.counts,
            "fdes_checked": len(self.fdes),
            "modules": [{"path": m.path, "start": m.start, "end": m.end, "bias": m.bias, "checked": m.checked}
                        for m in self.modules],
            "fdes": [
                {"module": fde.module.path, "section": fde.section, "pc_begin": fde.pc_begin, "pc_end": fde.pc_end,
                 "symbol": fde.symbol, "checked": fde.checked, "disagreeing": fde.disagreeing,
                 "disagreements": [{"address": d.address, "what": d.what, "declared": d.declared, "truth": d.truth}
                                   for d in fde.disagreements]}
                for fde in self.disagreeing_fdes
            ],
        }


def resolve_command(name: str) -> str:
    """The file `name` runs: a path as given, else the first match on PATH (as execvp would)."""
    path = name if "/" in name else shutil.which(name)
    if path is None:
        raise TraceError(f"{name}: command not found")
    return path


class _Modules:
    """Answers the core's questions about new mappings: the CFI tables of the mapped file."""

    def __init__(self, selected: Sequence[str] | None) -> None:
        self.images = ImageCache()
        self.selected = list(selected) if selected else None
        self.paths: list[str] = []
        self.vdso: ModuleImage | None = None

    def provide(self, start: int, end: int, offset: int, path: str) -> ModuleAnswer:
        """Every mapping gets an id (its path is reported); one whose file's CFI cannot be loaded
        (anonymous code, [vsyscall], a malformed file) has no tables: its code counts as no CFI."""
        self.paths.append(path)
        module_id = len(self.paths) - 1
        try:
            image = self._vdso_image() if path == VDSO else self.images.get(path) if path.startswith("/") else None
        except (OSError, FastunwindError):
            image = None
        bias = image.bias_for_mapping(start, end, offset) if image else None
        if image is None or bias is None:
            return 0, None, None, module_id, False
        checked = self.selected is None or any(name in path for name in self.selected)
        return bias, image.eh_frame, image.debug_frame, module_id, checked

    def _vdso_image(self) -> ModuleImage | None:
        """The vDSO's image: this process's own (the kernel maps the same one into every process),
        copied into a file for the ELF reader."""
        if self.vdso is None:
            self.vdso = _own_vdso()
        return self.vdso


def _own_vdso() -> ModuleImage | None:
    with open("/proc/self/maps", errors="surrogateescape") as maps:
        return vdso_image(maps.read(), "/proc/self/mem")


def trace_command(argv: Sequence[str], *, max_steps: int = 0, timeout: float = 0.0,
                  modules: Sequence[str] | None = None, step_all: bool = False) -> TraceResult:
    """Run `argv` under the tracer. `modules`: compare only in modules whose path contains one of
    these strings (default: every module); the others are run through between breakpoints, not
    stepped, unless `step_all` (native/core/trace.h). Raises TraceError if the command cannot be run."""
    if not argv:
        raise TraceError("no command to trace")
    path = resolve_command(argv[0])
    provider = _Modules(modules)
    env = [f"{key}={value}" for key, value in os.environ.items()]
    outcome, exit_status, elapsed_ns, counts, raw_modules, raw_fdes, records = _core.trace(
        path, list(argv), env, provider.provide, max_steps=max_steps, timeout=timeout,
        skip_unchecked=bool(modules) and not step_all)
    traced_modules = [
        TraceModule(provider.paths[module_id] if module_id < len(provider.paths) else "", start, end, bias, checked)
        for start, end, bias, module_id, checked in raw_modules
    ]
    fdes = [TracedFde(traced_modules[module], SECTIONS[table], pc_begin, pc_end, checked, disagreeing)
            for module, table, _entry, pc_begin, pc_end, checked, disagreeing in raw_fdes]
    for fde_index, address, what, column, declared, truth in records:
        fde = fdes[fde_index]
        name = what if what != "register" else register_name(column) or f"r{column}"
        fde.disagreements.append(Disagreement(address - fde.module.bias, name, declared, truth))
    _name_fdes([fde for fde in fdes if fde.disagreeing], provider.images)
    return TraceResult(list(argv), outcome, exit_status, elapsed_ns / 1e9, counts, traced_modules, fdes)


def _name_fdes(fdes: list[TracedFde], images: ImageCache) -> None:
    """The symbol at each FDE's start, from its module's symbol table (perf's choice of names)."""
    tables: dict[str, _core.SymbolTable | None] = {}
    for fde in fdes:
        path = fde.module.path
        if path not in tables:
            image = images.get(path) if path.startswith("/") else None
            tables[path] = symbol_table_for_file(image.elf) if image else None
        table = tables[path]
        found = table.lookup(fde.pc_begin) if table else None
        if found:
            fde.symbol = found[0] if not found[1] else f"{found[0]}+{found[1]:#x}"
