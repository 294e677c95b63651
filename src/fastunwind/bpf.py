"""Profiles unwound in the kernel: the BPF unwinder (native/bpf) walks each sample's user stack from
the compact tables loaded into its maps and sends each sample through a ring buffer; this module keeps
those maps in step with the processes sampled and names the frames.

A process is loaded (its executable mappings, and the compact table of each module not loaded yet,
by cache key) when it enters the scope, when the kernel reports it sampled without mappings (or with
those of the address space it had before an exec: the identity read around /proc/PID/maps), and
again whenever its /proc/PID/maps changes (exec, dlopen), checked every RESCAN_SECONDS; an exited
process is forgotten. The tables share one map of slots, allocated whole at the start: of the size
asked for, else of the tables of the modules the processes in scope map at the start
(table_map_size: every process with `sample_all`), with headroom for what starts later, between the
default map and a named limit, smaller if the kernel refuses that much (open_table_map); a size not
asked for grows by segments up to that limit where a module would evict another. When it is
short, the oldest modules no loaded process maps are evicted first, then those in use (counted: their
frames end `table_evicted` until their processes are reloaded at the next rescan). While sampling, a table
not cached yet is built on a thread of its own and its processes are loaded once it is: the others
are loaded meanwhile. With `synth` other than
"off" the tables are those with rows derived from the machine code (tables/compact.py), as the
offline walk's: the kernel walks code without CFI through them and counts the frames it did.

Each sample arrives through the program's ring buffer (its time, thread, CPU, thread's command name
and stack) in a batch of its CPU's samples, taken into the C session's log each time the recording
wakes, and what is left in the batches when the recording ends (the log keeps each
distinct stack once); the stacks reach Python once, after the recording: the Python work here is
per distinct stack and per distinct address, never per sample, and none of it runs per stack while
the profiled program does (perf script's text and the profile files are written from the log in C,
bpf_log.h).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Callable, Iterable, Sequence

from fastunwind import _core
from fastunwind.address_space import VDSO, ImageCache, Mapping, ModuleImage, parse_proc_maps, vdso_image
from fastunwind._core import SymbolTable
from fastunwind.elf.dynamic import with_dependencies
from fastunwind.errors import BpfError, BpfMapMemoryError, ScriptError
from fastunwind.script import executed_program
from fastunwind.symbols import kernel_symbol_table, symbol_table_for_file
from fastunwind.tables import compact
from fastunwind.typecheck import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from typing import IO, Any

RESCAN_SECONDS = 0.5
#: the longest the recording sleeps between its rounds (samples into the log, `until` checked):
#: the program wakes it at once at the first report of a process without (current) mappings, so
#: this bounds only the later reports, a table build's end and the recording's end; each round is
#: CPU taken from a profiled program on a busy machine (at 0.02 s, 1% of a CPU)
POLL_SECONDS = 0.1
NO_MODULE = 0xFFFFFFFF
#: the bound on listings of a process's threads when following them (each listing after the first
#: finds only threads started while the previous ones were being attached)
THREAD_LISTINGS = 16
#: launch's gate: waits for a byte on the pipe of argv[1], then becomes the command of argv[2:]
GATE = "import os, sys\nos.read(int(sys.argv[1]), 1)\nos.close(int(sys.argv[1]))\nos.execvp(sys.argv[2], sys.argv[2:])\n"
END = _core.BPF_OUTCOMES.index("end")
#: the bound on reads of a process's mappings while it exec's between the reads of its identity
MAPS_READS = 4
#: the table map's size when none is asked for: the tables of the modules in scope at the start and
#: this share of them again, for the programs started later (at least BPF_DEFAULT_SLOTS, at most
#: table_map_limit())
TABLE_MAP_HEADROOM = 0.5
#: the most a table map sized from the scope takes: this many MiB, and at most 1/TABLE_MAP_RAM_SHARE of
#: the machine's memory (the map is kernel memory, allocated whole at the start)
TABLE_MAP_LIMIT_MIB = 512
TABLE_MAP_RAM_SHARE = 16
#: the smallest table map tried once the kernel refused larger ones (1 MiB)
TABLE_MAP_FLOOR_SLOTS = (1 << 20) // _core.BPF_SLOT_BYTES
#: the bound on the processes counted in the scope of `-p PID` (the pids and their descendants)
SCOPE_PROCESSES = 4096


def address_space_identity(pid: int) -> tuple[int, int, int, int]:
    """The identity of the process's address space (bpf_layout.h fu_bpf_space_identity): mm's
    start_code, end_code, start_stack and start_brk, /proc/PID/stat's fields 26, 27, 28 and 47; all
    zero for a process without an address space. Where the kernel does not show them to us (no ptrace
    access) it gives (1, 1, 0, 0) (fs/proc/array.c do_task_stat), which no address space matches: such
    a process is never walked, and its /proc/PID/maps is not ours to read either. OSError if the
    process is gone."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        text = f.read()
    # the command name before ")" is any bytes the process chose; the fields after it are numbers
    fields = text[text.rindex(b")") + 2:].split()  # fields[0] is field 3 (the state)
    return int(fields[23]), int(fields[24]), int(fields[25]), int(fields[44])


def kept_mappings(mappings: list[Mapping], start_code: int) -> list[Mapping]:
    """The executable mappings of a process the unwinder holds, sorted by start: every one, or past its
    bound (_core.BPF_MAX_MAPPINGS: a process with hundreds of dlopen'ed modules), the one holding the
    program's code (`start_code`, address_space_identity's first field), then the largest (where a
    sample is the likelier), then the lowest; a walk reaching one of the others ends
    `mappings_left_out`."""
    if len(mappings) > _core.BPF_MAX_MAPPINGS:
        ranked = sorted(mappings, key=lambda m: (not m.start <= start_code < m.end, m.start - m.end, m.start))
        mappings = ranked[:_core.BPF_MAX_MAPPINGS]
    return sorted(mappings, key=lambda m: m.start)


def _mib(slots: int) -> int:
    """The MiB `slots` slots take, rounded up."""
    return -(-slots * _core.BPF_SLOT_BYTES // (1 << 20))


class TableMap(NamedTuple):
    """How the table map (its slots) was sized."""

    slots: int
    chosen_by: str  #: "--table-mib" (asked for), "default", "tables in scope" or "limit" (table_map_size)
    in_scope_slots: int  #: of the tables of the modules in scope at the start (0 when asked for)
    refused: tuple[str, ...] = ()  #: the kernel's refusals of larger maps (open_table_map)


class TableUse(NamedTuple):
    """The table map of a recording and what its tables took."""

    table_map: TableMap
    slots_peak: int  #: the most slots the loaded modules held at once
    slots_end: int  #: the map's slots at the end: more than table_map.slots where it grew
    #: the slots of every table the recording loaded, each once: a map of this many evicts none
    every_table_slots: int


def table_map_limit() -> int:
    """The most slots a table map sized from the scope takes: TABLE_MAP_LIMIT_MIB, and
    1/TABLE_MAP_RAM_SHARE of the machine's memory (at least the default map)."""
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit = min(TABLE_MAP_LIMIT_MIB << 20, ram // TABLE_MAP_RAM_SHARE) // _core.BPF_SLOT_BYTES
    return max(_core.BPF_DEFAULT_SLOTS, limit)


def table_map_size(in_scope_slots: int, limit: int | None = None) -> TableMap:
    """The table map for tables in scope of `in_scope_slots` slots: those and TABLE_MAP_HEADROOM of
    them again, rounded up to a MiB, at least the default map and at most `limit` (table_map_limit())."""
    limit = table_map_limit() if limit is None else limit
    wanted = _mib(in_scope_slots + int(in_scope_slots * TABLE_MAP_HEADROOM)) * (1 << 20) // _core.BPF_SLOT_BYTES
    if wanted <= _core.BPF_DEFAULT_SLOTS:
        return TableMap(_core.BPF_DEFAULT_SLOTS, "default", in_scope_slots)
    if wanted > limit:
        return TableMap(limit, "limit", in_scope_slots)
    return TableMap(wanted, "tables in scope", in_scope_slots)


def processes_in_scope(pids: Iterable[int]) -> list[int]:
    """`pids` and their running descendants (by /proc/PID/task/TID/children), at most
    SCOPE_PROCESSES."""
    found: dict[int, None] = {}  # in the order found
    pending = list(pids)
    while pending and len(found) < SCOPE_PROCESSES:
        pid = pending.pop()
        if pid in found:
            continue
        found[pid] = None
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    pending += [int(c) for c in f.read().split()]
        except OSError:  # exited meanwhile
            pass
    return list(found)


def images_in_scope(images: ImageCache, pids: Iterable[int] = (), sample_all: bool = False,
                    programs: Sequence[str] = ()) -> list[ModuleImage]:
    """The modules in scope now: those the processes `pids` and their descendants map (with
    `sample_all`, every process but this one, as add_running loads them), and the programs to be
    started with the libraries they need (as ldd finds them; a script's, its interpreter's:
    script.executed_program, and none where that is not found); each once."""
    scope = ([int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != os.getpid()] if sample_all
             else processes_in_scope(pids))
    out: dict[str, ModuleImage] = {}
    for pid in scope:
        try:
            with open(f"/proc/{pid}/maps", errors="surrogateescape") as f:
                text = f.read()
        except OSError:  # exited, or a kernel thread's
            continue
        for mapping in parse_proc_maps(text, images).mappings:
            if mapping.image is not None:
                out.setdefault(mapping.image.cache_name(), mapping.image)
    found = []
    for program in programs:
        path = shutil.which(program)
        try:
            found += [executed_program(path)] if path is not None else []
        except ScriptError:
            pass  # its exec fails (launch says why): nothing of it is mapped
    for path in with_dependencies(found)[0]:
        image = images.get(path)
        if image is not None:
            out.setdefault(image.cache_name(), image)
    return list(out.values())


def table_slots(images: Iterable[ModuleImage], synth: str) -> int:
    """The slots the modules' compact tables take in the table map (the tables from the cache, or
    built and kept in the images' memo for their loading)."""
    total = 0
    for image in images:
        table = compact.for_image(image, synth)
        total += _core.bpf_slot_count(table) if table is not None and table.row_count else 0
    return total


def open_table_map(size: TableMap, timing: bool) -> tuple[_core.BpfSession, TableMap]:
    """The unwinder loaded with a table map of `size`, which grows while recording (by segments of
    BPF_SEGMENT_SLOTS, where a module would otherwise evict another) up to table_map_limit() unless
    the size was asked for; where the kernel refuses its memory and the size was not asked for, with
    half as much (at most table_map_limit()) and no growth, down to TABLE_MAP_FLOOR_SLOTS, each
    refusal kept in the TableMap returned. BpfMapMemoryError where even that is refused or the size
    was asked for."""
    refused: list[str] = []
    slots = size.slots
    while True:
        grows = size.chosen_by != "--table-mib" and not refused
        try:
            return (_core.BpfSession(slots, timing, slot_limit=max(slots, table_map_limit()) if grows else None),
                    size._replace(slots=slots, refused=tuple(refused)))
        except BpfMapMemoryError as error:
            if size.chosen_by == "--table-mib" or slots <= TABLE_MAP_FLOOR_SLOTS:
                raise
            refused.append(str(error))
            # smaller at each refusal down to the floor: at most log2(limit / floor) + 2 tries
            slots = max(TABLE_MAP_FLOOR_SLOTS, min(slots // 2, table_map_limit()))


class BpfStack(NamedTuple):
    pid: int
    space_pid: int  #: the process whose mappings the walk used (a fork child's parent until it is loaded)
    outcome: str
    user: tuple[int, ...]  #: the leaf's IP, then return addresses
    kernel: tuple[int, ...]  #: the leaf first
    interrupted: int = 0  #: bit i: user[i] (i > 0) is the PC a signal interrupted, not a return address

    def is_return(self, i: int) -> bool:
        """Whether user[i] is a return address (a caller's frame, looked up at the address - 1)."""
        return i > 0 and not self.interrupted >> i & 1


class _Process:
    def __init__(self, pid: int, maps_text: str, identity: tuple[int, int, int, int], mappings: list[Mapping],
                 comm: str) -> None:
        self.pid = pid
        self.maps_text = maps_text
        self.identity = identity  #: of the address space the mappings were read from (address_space_identity)
        self.mappings = mappings
        self.earlier: list[list[Mapping]] = []  #: mappings replaced since (an exec, a dlclose), newest first
        self.comm = comm
        self.module_keys: list[tuple[int, int]] = []
        self.mappings_left_out = 0  #: executable mappings past the unwinder's bound (kept_mappings)


def walk_fit_by_source(counters: dict[str, int]) -> tuple[float, float, float] | None:
    """The least-squares plane through the walked samples' (frames whose rule was looked up, frames
    whose rule came from the previous walk's memo, walk ns), from the sums the program keeps
    (BpfProfile.counters): (ns per walk whatever its frames, ns per frame looked up, ns per frame
    from the memo), or None where the samples cannot tell the three apart (fewer than three, or
    every frame of one kind, or the two kinds in a fixed proportion)."""
    c = counters
    count, n, m = c.get("walked_samples", 0), c.get("frames", 0), c.get("memo_frames", 0)
    nn, mm, nm = c.get("frames_squared", 0), c.get("memo_frames_squared", 0), c.get("memo_by_frames", 0)
    t, nt, mt = c.get("walk_ns", 0), c.get("walk_ns_by_frames", 0), c.get("walk_ns_by_memo", 0)
    # the normal equations of t = a + b x + c y, x = n - m frames looked up, y = m from the memo
    x, xx, xy, xt = n - m, nn - 2 * nm + mm, nm - mm, nt - mt
    matrix = [[count, x, m], [x, xx, xy], [m, xy, mm]]
    right = [t, xt, mt]
    whole = _determinant(matrix)
    if count < 3 or whole == 0:
        return None
    # Cramer's rule: exact in integers up to the three divisions
    fixed, looked_up, memo = (_determinant([[right[i] if j == k else matrix[i][j] for j in range(3)] for i in range(3)])
                              / whole for k in range(3))
    return fixed, looked_up, memo


def _determinant(a: list[list[int]]) -> int:
    return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))


class BpfProfile:
    """What a recording took: its samples (the detached session's log), their distinct stacks, the
    kernel's counters and the processes' mappings."""

    def __init__(self, session: _core.BpfSession, stacks: list[BpfStack], counters: dict[str, int],
                 outcomes: dict[str, int], processes: dict[int, _Process], run_ns: int, runs: int, table_bytes: int,
                 slots_used: int, rows_loaded: int, modules_loaded: int, modules_without_table: int, frequency: int,
                 synth: str = "off", timing: bool = False, left_out: int = 0, evicted_in_use: int = 0, *,
                 table_use: TableUse) -> None:
        self._session = session  #: detached: its log of the samples
        self._stack_list = stacks  #: by the log's stack id
        self.stacks: Counter[BpfStack] = Counter()
        for stack, samples in zip(stacks, session.stack_samples()):
            self.stacks[stack] += samples
        self.frequency = frequency
        self.synth = synth  #: the rows derived from the code the tables held (tables/compact.py SYNTH_MODES)
        self.timing = timing  #: whether the program timed its walks and samples (the *_ns counters)
        self.counters = counters
        self.outcomes = outcomes
        self._processes = processes
        #: each process's command name as its samples had it (BpfSession.sampled_comms), at the first comm()
        self._sampled_comms: dict[int, tuple[str, bool]] | None = None
        self.left_out = left_out  #: processes never loaded: the unwinder's process map was full
        self.evicted_in_use = evicted_in_use  #: modules evicted while a loaded process mapped them
        self.table_use = table_use
        self.run_ns = run_ns
        self.runs = runs
        self.table_bytes = table_bytes
        self.slots_used = slots_used
        self.rows_loaded = rows_loaded
        self.modules_loaded = modules_loaded
        self.modules_without_table = modules_without_table
        self._symbols: dict[str, SymbolTable | None] = {}
        self._kernel: SymbolTable | None = None
        self._names: dict[tuple[int, int, bool], str] = {}

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def user_samples(self) -> tuple[int, int]:
        """(samples with a user stack, of which complete)."""
        user = sum(n for s, n in self.stacks.items() if s.outcome != "kernel_only")
        return user, sum(n for s, n in self.stacks.items() if s.outcome == "end")

    def not_loaded(self) -> tuple[int, int, int]:
        """(samples taken before their process was loaded, of how many processes, how many of which
        were never walked: gone before they were loaded, or sampled only before)."""
        pids: Counter[int] = Counter()
        walked: set[int] = set()
        for stack, samples in self.stacks.items():
            if stack.outcome == "not_loaded":
                pids[stack.pid] += samples
            elif stack.outcome != "kernel_only":
                walked.add(stack.pid)
        return sum(pids.values()), len(pids), len(pids.keys() - walked)

    def outcomes_by_process(self) -> dict[str, dict[str, int]]:
        """Samples by outcome of each process sampled ("comm (pid)")."""
        out: dict[str, Counter[str]] = {}
        for stack, samples in self.stacks.items():
            out.setdefault(f"{self.comm(stack.pid, stack.space_pid)} ({stack.pid})", Counter())[stack.outcome] += samples
        return {name: dict(outcomes) for name, outcomes in out.items()}

    def comm(self, pid: int, space_pid: int | None = None) -> str:
        """The process's command name: its main thread's at its last sample (a process may rename
        itself after it was loaded), else as it was loaded; a process never loaded (gone before its
        tables were) the one its samples' threads had, else its parent's (`space_pid`), as it forked."""
        if self._sampled_comms is None:
            self._sampled_comms = self._session.sampled_comms()
        sampled, by_main_thread = self._sampled_comms.get(pid, (None, False))
        process = self._processes.get(pid)
        if sampled is not None and (by_main_thread or process is None):
            return sampled
        process = process or self._processes.get(space_pid if space_pid is not None else pid)
        return process.comm if process else str(pid)

    def _symbol_table(self, image: ModuleImage) -> SymbolTable | None:
        if image.path not in self._symbols:
            self._symbols[image.path] = symbol_table_for_file(image.elf)
        return self._symbols[image.path]

    def user_name(self, pid: int, address: int, is_return: bool) -> str:
        """The function at `address` of process `pid` (a return address is looked up at address - 1),
        or "[unknown MODULE]"."""
        key = (pid, address, is_return)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self._name_user(pid, address - 1 if is_return else address)
        return name

    def _mapping(self, pid: int, address: int) -> Mapping | None:
        process = self._processes.get(pid)
        spaces = [process.mappings, *process.earlier] if process else []
        return next((m for space in spaces for m in space if m.start <= address < m.end), None)

    def _symbol(self, mapping: Mapping, address: int) -> tuple[str, int] | None:
        table = self._symbol_table(mapping.image) if mapping.image else None
        return table.lookup(address - mapping.bias) if table else None

    def _name_user(self, pid: int, address: int) -> str:
        mapping = self._mapping(pid, address)
        if mapping is None:
            return "[unknown]"
        found = self._symbol(mapping, address)
        return found[0] if found else f"[unknown {os.path.basename(mapping.path)}]"

    def _user_line(self, pid: int, address: int) -> str:
        """perf script's line of a user frame at `address` (a caller's return address - 1): its
        DSO-relative address, symbol+offset, DSO (perf_script.h)."""
        mapping = self._mapping(pid, address)
        if mapping is None:
            return f"\t{address:16x} [unknown] ([unknown])\n"
        found = self._symbol(mapping, address)
        symbol = f"{found[0]}+0x{found[1]:x}" if found else "[unknown]"
        return f"\t{address - mapping.start + mapping.pgoff:16x} {symbol} ({mapping.path})\n"

    def _kernel_line(self, address: int) -> str:
        found = self._kernel_symbols().lookup(address) if self._kernel_symbols().usable else None
        symbol = f"{found[0]}+0x{found[1]:x}" if found else "[unknown]"
        return f"\t{address:16x} {symbol} ([kernel.kallsyms])\n"

    def _kernel_symbols(self) -> SymbolTable:
        if self._kernel is None:
            self._kernel = kernel_symbol_table()
        return self._kernel

    def perf_block(self, stack: BpfStack) -> str:
        """The stack's lines in perf script's text, the leaf first: kernel frames, then user frames
        (callers at their return address - 1, a frame a signal interrupted at its PC)."""
        user = [self._user_line(stack.space_pid, a - 1 if stack.is_return(i) else a) for i, a in enumerate(stack.user)]
        return "".join([*(self._kernel_line(a) for a in stack.kernel), *user])

    def sample_log(self) -> list[tuple[int, int, int, str, BpfStack]]:
        """Every logged sample: (time ns, tid, CPU, the thread's command name, stack)."""
        return [(t, tid, cpu, comm, self._stack_list[i]) for t, tid, cpu, comm, i in self._session.samples()]

    def write_perf_script(self, out: IO[str]) -> None:
        """perf script's text (`perf script -F comm,tid,time,event,ip,sym,symoff,dso`), a sample per
        record in time order, with its thread, command name and time."""
        blocks = [self.perf_block(stack).encode() for stack in self._stack_list]
        self._session.perf_script(lambda chunk: out.write(chunk.decode("utf-8", "surrogateescape")), blocks,
                                  "cpu-clock")

    def kernel_name(self, address: int) -> str:
        key = (0, address, False)
        name = self._names.get(key)
        if name is None:
            found = self._kernel_symbols().lookup(address) if self._kernel_symbols().usable else None
            name = self._names[key] = found[0] if found else "[unknown [kernel.kallsyms]]"
        return name

    @staticmethod
    def incomplete(stack: BpfStack) -> str:
        """The outcome of a user stack that did not reach the outermost frame, "" otherwise."""
        return stack.outcome if stack.user and stack.outcome != "end" else ""

    def _functions(self, stack: BpfStack) -> list[str]:
        """The stack's function names from the outermost frame to the leaf, kernel frames last."""
        names = [self.user_name(stack.space_pid, a, stack.is_return(i)) for i, a in enumerate(stack.user)][::-1]
        return names + [self.kernel_name(a) for a in reversed(stack.kernel)]

    def frames(self, stack: BpfStack) -> list[str]:
        """The stack's names from the outermost frame to the leaf, kernel frames last; an incomplete
        user stack starts with "[OUTCOME]"."""
        outcome = self.incomplete(stack)
        return [f"[{outcome}]", *self._functions(stack)] if outcome else self._functions(stack)

    def folded(self) -> Counter[str]:
        """Folded stacks ("comm;outer;...;leaf" -> samples), as `perf-script --format folded` writes them."""
        out: Counter[str] = Counter()
        for stack, samples in self.stacks.items():
            out[";".join([self.comm(stack.pid, stack.space_pid), *self.frames(stack)])] += samples
        return out

    def write_folded(self, out: IO[str]) -> None:
        for line, samples in sorted(self.folded().items(), key=lambda item: (-item[1], item[0])):
            out.write(f"{line} {samples}\n")

    def core_profile(self) -> _core.Profile:
        """The samples as a profile for the writers of native/core/profile.h (speedscope, gecko, the
        flame graph): each sample in its thread (named as the kernel saw it) at its own time."""
        profile = _core.Profile()
        self._session.add_to_profile(profile, [(self._functions(s), self.incomplete(s)) for s in self._stack_list],
                                     1000 / self.frequency)
        return profile

    def cost_fit(self, total: str, total_by_frames: str) -> tuple[float, float] | None:
        """The least-squares line through the walked samples' (user frames, ns) of the counter
        `total` (whose products with the frames are `total_by_frames`): (ns per sample whatever its
        depth, ns per frame), or None with fewer than two depths to tell apart or without timing."""
        c = self.counters
        n, x, xx = c.get("walked_samples", 0), c.get("frames", 0), c.get("frames_squared", 0)
        y, xy = c.get(total, 0), c.get(total_by_frames, 0)
        spread = n * xx - x * x
        if not self.timing or n < 2 or spread <= 0:
            return None
        per_frame = (n * xy - x * y) / spread
        return (y - per_frame * x) / n, per_frame

    def statistics(self) -> dict[str, object]:
        user, complete = self.user_samples()
        not_loaded, not_loaded_processes, never_walked = self.not_loaded()
        frames = self.counters.get("frames", 0)
        sample_fit = self.cost_fit("sample_ns", "sample_ns_by_frames")
        walk_fit = self.cost_fit("walk_ns", "walk_ns_by_frames")
        source_fit = walk_fit_by_source(self.counters)
        return {
            "samples": self.counters.get("samples", 0),
            "user_samples": user,
            "complete_user_samples": complete,
            # the share over the processes in scope: the user stacks walked with their process's mappings
            "walked_user_samples": user - not_loaded,
            "not_loaded_samples": not_loaded,
            "not_loaded_processes": not_loaded_processes,
            "processes_never_walked": never_walked,
            "processes_left_out": self.left_out,
            # processes with more executable mappings than the unwinder holds, and how many it left out
            "processes_with_mappings_left_out": sum(1 for p in self._processes.values() if p.mappings_left_out),
            "mappings_left_out": sum(p.mappings_left_out for p in self._processes.values()),
            "outcomes_by_process": self.outcomes_by_process(),
            "space_changed_samples": self.counters.get("space_changed", 0),
            "outcomes": self.outcomes,
            "frames": frames,
            "frame_pointer_frames": self.counters.get("frame_pointer_frames", 0),
            "samples_dropped": self.counters.get("samples_dropped", 0),
            "samples_unlogged": self._session.unlogged,
            "walked_samples": self.counters.get("walked_samples", 0),
            "walk_ns": self.counters.get("walk_ns", 0) if self.timing else None,
            "sample_ns": self.counters.get("sample_ns", 0) if self.timing else None,
            "fit_sample_fixed_ns": sample_fit[0] if sample_fit else None,
            "fit_sample_ns_per_frame": sample_fit[1] if sample_fit else None,
            "fit_walk_fixed_ns": walk_fit[0] if walk_fit else None,
            "fit_walk_ns_per_frame": walk_fit[1] if walk_fit else None,
            "stack_reads": self.counters.get("stack_reads", 0),
            "slot_lookups": self.counters.get("slot_lookups", 0),
            "extra_lookups": self.counters.get("extra_lookups", 0),
            "mapping_searches": self.counters.get("mapping_searches", 0),
            "memo_frames": self.counters.get("memo_frames", 0),
            "fit_walk_by_source_fixed_ns": source_fit[0] if source_fit else None,
            "fit_walk_ns_per_looked_up_frame": source_fit[1] if source_fit else None,
            "fit_walk_ns_per_memo_frame": source_fit[2] if source_fit else None,
            "synth": self.synth,
            "derived_frames": self.counters.get("derived_frames", 0),
            "distinct_stacks": len(self.stacks),
            "bpf_run_ns": self.run_ns,
            "bpf_runs": self.runs,
            "table_map_bytes": self.table_bytes,
            "table_slots_used": self.slots_used,
            "table_slot_bytes": self.slots_used * _core.BPF_SLOT_BYTES,
            "table_rows_loaded": self.rows_loaded,
            "modules_loaded": self.modules_loaded,
            "modules_without_table": self.modules_without_table,
            # the tables in use did not fit the map: their frames ended table_evicted
            "modules_evicted_in_use": self.evicted_in_use,
            **self._table_map_statistics(),
        }

    def _table_map_statistics(self) -> dict[str, Any]:
        """The table map's size, how it was chosen (TableMap.chosen_by), the kernel's refusals of
        larger ones, the slots of the tables in scope at the start, the peak of the slots used, and
        the --table-mib that holds every table the recording loaded (the map evicts none), and what the
        map grew to."""
        use, slot = self.table_use, _core.BPF_SLOT_BYTES
        return {
            "table_map_slot_bytes": use.table_map.slots * slot,
            "table_map_chosen_by": use.table_map.chosen_by,
            "table_map_refused": list(use.table_map.refused),
            "table_in_scope_bytes": use.table_map.in_scope_slots * slot,
            "table_slots_peak_bytes": use.slots_peak * slot,
            "table_map_end_slot_bytes": use.slots_end * slot,
            "table_mib_for_every_table": _mib(use.every_table_slots),
        }


class BpfRecorder:
    """One recording: the loaded BPF unwinder, the processes and modules in its maps."""

    def __init__(self, *, frequency: int, pids: Iterable[int] = (), sample_all: bool = False,
                 slot_capacity: int | None = None, programs: Sequence[str] = (), images: ImageCache | None = None,
                 synth: str = "off", timing: bool = False) -> None:
        """Loads the unwinder with a table map of `slot_capacity` slots, or where None, sized from the
        tables in scope now (table_map_size): the processes `pids` (sampled from now on) and their
        descendants, every process with `sample_all`, and `programs` (to be started by launch) with
        the libraries they need; smaller where the kernel refuses that much (open_table_map)."""
        self._images = images or ImageCache()
        pids = list(pids)
        if slot_capacity is None:
            in_scope = images_in_scope(self._images, pids, sample_all, programs)
            size = table_map_size(table_slots(in_scope, synth))
        else:
            size = TableMap(slot_capacity, "--table-mib", 0)
        self._session, self.table_map = open_table_map(size, timing)
        self._timing = timing  #: the program times its walks and samples (two clock reads more per sample)
        self._frequency = frequency
        self._sample_all = sample_all
        self._threads: set[int] = set()  #: the threads followed by an event of their own (not sample_all)
        self._synth = synth
        self._processes: dict[int, _Process] = {}
        self._gone: dict[int, _Process] = {}
        self._modules: dict[str, tuple[int, int]] = {}  # cache key -> (id, generation)
        self._without_table: set[str] = set()
        #: while sampling, tables not cached yet are built on a thread of their own (seconds for
        #: libLLVM-14), so that the processes sampled meanwhile are loaded meanwhile
        self._builder: ThreadPoolExecutor | None = None
        self._building: dict[str, Future[_core.CompactTable | None]] = {}  #: by cache key
        self._waiting: set[int] = set()  #: processes to load once the tables being built are
        #: processes the unwinder had no room for (not read again until one is forgotten), and every
        #: process ever left out so
        self._without_room: set[int] = set()
        self._left_out: set[int] = set()
        self._stacks: list[BpfStack] = []  #: by the log's stack id
        self._vdso: ModuleImage | None = None  #: the kernel's vDSO (every process sampled runs on this kernel)
        self._rows_loaded = 0  # table rows loaded into the maps (evicted ones included)
        self._table_slots: dict[str, int] = {}  #: by cache key: the slots of each table loaded
        for pid in pids:
            self.add(pid)

    def add(self, pid: int) -> None:
        """Samples `pid` and its running descendants (their threads, and the threads and processes
        they start) from now on: a perf event per thread, inherited by its children (with
        sample_all, the events of every CPU sample them already)."""
        pending = [pid]
        while pending:
            process = pending.pop()
            if not self._sample_all:
                pending += self._follow_threads(process)
            self._load(process)

    def _follow_threads(self, pid: int) -> list[int]:
        """An event on each thread of `pid`, listed again until a listing shows no thread started
        meanwhile (by a thread not yet followed) or THREAD_LISTINGS were made; returns the
        children its threads had started before (which no event of theirs reaches)."""
        children: list[int] = []
        for _ in range(THREAD_LISTINGS):
            try:
                tids = {int(t) for t in os.listdir(f"/proc/{pid}/task")} - self._threads
            except FileNotFoundError:  # exited
                break
            if not tids:
                break
            for tid in sorted(tids):
                try:
                    self._session.attach_thread(self._frequency, tid)
                except BpfError:
                    if os.path.exists(f"/proc/{pid}/task/{tid}"):
                        raise
                    continue  # the thread exited since the listing
                self._threads.add(tid)
                try:
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        children += [int(c) for c in f.read().split()]
                except FileNotFoundError:
                    pass
        return children

    def launch(self, command: list[str], **popen: Any) -> subprocess.Popen[bytes]:
        """Starts `command` (subprocess.Popen's keyword arguments) and samples it from its first
        instruction: it waits at a gate (a Python that reads a pipe, then execs the command) until
        its event is open, so the threads and processes it starts inherit it. The tables of the
        command's program are loaded first (`preload`: that of a program it starts, too, if asked; a
        script's interpreter's). ScriptError where the program is a script whose interpreter is not
        found (script.executed_program)."""
        program = shutil.which(command[0])
        if program is None:
            raise FileNotFoundError(f"{command[0]}: no such program")
        executed_program(program)
        self.preload(program)
        read_end, write_end = os.pipe()
        try:
            try:
                child = subprocess.Popen([sys.executable, "-I", "-S", "-c", GATE, str(read_end), *command],
                                         pass_fds=(read_end,), **popen)
            finally:
                os.close(read_end)
            try:
                self.add(child.pid)
            except BaseException:  # the gate stays shut: the command never runs unsampled
                child.kill()
                child.wait()
                raise
            os.write(write_end, b"\n")
        finally:
            os.close(write_end)
        return child

    def preload(self, program: str) -> None:
        """Loads the tables of `program` (a script's interpreter's) and of the libraries it needs (as
        ldd finds them) before it runs: after its exec only its mappings are left to load, not tables
        (libLLVM-14's 950k rows take tens of milliseconds to put in the maps, during which its
        samples end `no_process`)."""
        for image in images_in_scope(self._images, programs=[program]):
            self._module(image)

    def add_running(self) -> None:
        """Loads every running process (for sample_all: their first samples then find their mappings)."""
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                self._load(int(name))

    def _module(self, image: ModuleImage) -> tuple[int, int] | None:
        """The module's (id, generation) in the maps, loaded now if need be; None while its table
        is being built (on the builder thread, while sampling)."""
        key = image.cache_name()
        loaded = self._modules.get(key)
        if loaded is not None and self._session.module_loaded(*loaded):
            return loaded
        if key in self._without_table:
            return NO_MODULE, 0
        if key in self._building:
            return None
        if (self._builder is not None and compact.source(image, self._synth) is None
                and not os.path.exists(compact.cache_path(image, synth=self._synth))):
            self._building[key] = self._builder.submit(compact.for_image, image, self._synth)
            return None
        table = compact.for_image(image, self._synth)  # the vDSO's copy too (ModuleImage.memory_copy)
        if table is None or table.row_count == 0:
            self._without_table.add(key)
            return NO_MODULE, 0
        try:
            self._modules[key] = self._session.load_module(table)
        except ValueError:  # larger than the whole table map (--table-mib): as a module without CFI
            self._without_table.add(key)
            return NO_MODULE, 0
        self._rows_loaded += table.row_count
        self._table_slots[key] = _core.bpf_slot_count(table)
        return self._modules[key]

    def _load(self, pid: int) -> None:
        self._waiting.discard(pid)
        try:
            # the identity read before and after the mappings: equal, no exec came between
            for _ in range(MAPS_READS):
                identity = address_space_identity(pid)
                with open(f"/proc/{pid}/maps", errors="surrogateescape") as f:  # as every reader of a maps file
                    text = f.read()
                if address_space_identity(pid) == identity:
                    break
            else:
                return  # exec'ing again and again: its next sample asks for it again
            with open(f"/proc/{pid}/comm", errors="backslashreplace") as f:  # any bytes (PR_SET_NAME), as live.py
                comm = f.read().rstrip("\n")
        except OSError:
            text = ""
        if not text:  # exited (a zombie's maps are empty): its last mappings name its frames
            self._forget(pid)
            return
        process = self._processes.get(pid)
        if process is not None and process.maps_text == text and process.identity == identity and all(
                key == (NO_MODULE, 0) or self._session.module_loaded(*key) for key in process.module_keys):
            return
        if self._vdso is None and VDSO in text:
            self._vdso = vdso_image(text, f"/proc/{pid}/mem")
        every = parse_proc_maps(text, self._images, vdso=self._vdso).mappings
        mappings = kept_mappings(every, identity[0])
        found = [self._module(m.image) if m.image else (NO_MODULE, 0) for m in mappings]
        # a module loaded late may have evicted one loaded earlier for this same process
        found = [self._module(m.image) if m.image and k and k != (NO_MODULE, 0) and not self._session.module_loaded(*k)
                 else k for m, k in zip(mappings, found)]
        keys = [k for k in found if k is not None]
        if len(keys) < len(found):  # loaded once its tables are built
            self._waiting.add(pid)
            return
        left_out = len(every) - len(mappings)
        if not self._session.set_process(pid, identity, [(m.start, m.end, m.bias & 0xFFFFFFFFFFFFFFFF, *k)
                                                         for m, k in zip(mappings, keys)], left_out):
            self._without_room.add(pid)  # the unwinder's processes are full: its samples end not_loaded
            self._left_out.add(pid)
            return
        earlier = [process.mappings, *process.earlier] if process is not None else []
        process = _Process(pid, text, identity, sorted(every, key=lambda m: m.start), comm)
        process.module_keys = keys
        process.mappings_left_out = left_out
        process.earlier = earlier
        self._processes[pid] = process

    def _forget(self, pid: int) -> None:
        process = self._processes.pop(pid, None)
        if process is not None:
            self._without_room.clear()  # room for one: those left out are loaded at their next sample
            self._gone[pid] = process
            self._session.forget_process(pid)

    def _built(self) -> None:
        """Loads the processes that waited for tables whose building has ended."""
        done = [key for key, future in self._building.items() if future.done()]
        for key in done:
            self._building.pop(key).result()  # the table is in the image's memo (a build's error raises here)
        if done:
            for pid in list(self._waiting):
                self._load(pid)

    def refresh(self) -> None:
        """Loads the processes sampled without mappings and reloads those whose mappings changed."""
        for pid in self._session.take_missing():
            if pid not in self._without_room:
                self._load(pid)
        for pid in list(self._processes):
            self._load(pid)

    def any_alive(self) -> bool:
        """Whether a process of the recording is still loaded (alive at the last rescan)."""
        return bool(self._processes)

    def drain(self) -> None:
        """Takes the samples sent since into the session's log, and the stacks seen first as
        BpfStacks, named by their first sample's thread. Called once, after the recording: while it
        runs, waiting takes the samples into the log (C), and no Python runs per stack on a CPU the
        profiled program may need."""
        for pid, space_pid, outcome, user, kernel, interrupted in self._session.drain():
            self._stacks.append(BpfStack(pid, space_pid, _core.BPF_OUTCOMES[outcome], user, kernel, interrupted))

    def run(self, until: Callable[[], bool]) -> BpfProfile:
        """Samples until `until()` is true (checked every POLL_SECONDS at most) or Ctrl-C, then detaches
        (also on an exception) and returns the profile."""
        try:
            if self._sample_all:
                self._session.attach_cpus(self._frequency)
            self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastunwind-tables")
            last_scan = time.monotonic()
            try:
                while not until():
                    self._session.wait(int(POLL_SECONDS * 1000))
                    for pid in self._session.take_missing():
                        if pid not in self._waiting and pid not in self._without_room:
                            self._load(pid)
                    self._built()
                    now = time.monotonic()
                    if now - last_scan >= RESCAN_SECONDS:
                        self.refresh()
                        last_scan = time.monotonic()
            except KeyboardInterrupt:
                pass  # Ctrl-C ends the recording; the profile is still written
            self._session.stop()  # the samples still in the CPUs' batches into the log
            self.drain()
            return self._profile()
        finally:
            self.close()

    def _profile(self) -> BpfProfile:
        values = self._session.counters()
        names = _core.BPF_COUNTERS
        counters = dict(zip(names, values))
        outcomes = {name: n for name, n in zip(_core.BPF_OUTCOMES, values[len(names):]) if n}
        run_ns, runs = self._session.run_time()
        return BpfProfile(self._session, self._stacks, counters, outcomes, {**self._gone, **self._processes}, run_ns, runs,
                          self._session.table_bytes, self._session.slots_used, self._rows_loaded,
                          len(self._modules), len(self._without_table), self._frequency, self._synth, self._timing,
                          len(self._left_out), self._session.evicted_in_use,
                          table_use=TableUse(self.table_map, self._session.slots_peak, self._session.slot_capacity,
                                             sum(self._table_slots.values())))

    def close(self) -> None:
        """Detaches the program and releases its maps and events (the samples' log stays, for the
        profile); then lets the table being built finish (into the cache: the next recording
        finds it) and builds no other."""
        self._session.detach()
        if self._builder is not None:
            self._builder.shutdown(wait=True, cancel_futures=True)
            self._builder = None
