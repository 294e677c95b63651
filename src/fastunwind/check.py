"""Check an ELF file's CFI against its machine code (the `check` verb).

Every FDE of `.eh_frame` and `.debug_frame` (a separate debug file's included) is interpreted by the C
core (native/core/synth.c: abstract interpretation of the FDE's code; native/core/check.c: declared
rows against derived ones at every instruction, with the GIL released) and judged `agree`,
`mismatch` (each address where a declared rule recovers a wrong value, declared vs derived) or
`undecided` (why). Python only gathers the inputs (segments; the function symbols, noreturn
functions and known entries, read by native/core/check_scope.c) and splits the FDEs into chunks,
which `jobs` threads check in parallel (one job: this thread).

Code without CFI is reported as `uncovered` (check_scope.c too): function symbols in executable
segments, direct call targets, addresses relocations store and the loader's DT_INIT and DT_FINI
that no FDE covers.
"""

from __future__ import annotations

import array
import bisect
import gc
import itertools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fastunwind import _core
from fastunwind.elf import ET_REL, PF_X, CheckedRead, ElfFile, find_debug_file
from fastunwind.elf.dynamic import init_and_fini
from fastunwind.errors import ElfError
from fastunwind.frame_sections import DEBUG_FRAME, EH_FRAME
from fastunwind.image import ModuleImage
from fastunwind.symbols import EM_X86_64, PLT_SECTIONS, symbol_table_for_file
from fastunwind.typecheck import NamedTuple

VERDICT_NAMES = {_core.CHECK_AGREE: "agree", _core.CHECK_MISMATCH: "mismatch", _core.CHECK_UNDECIDED: "undecided"}
#: FDEs per chunk handed to one C call (the unit of parallelism and of progress): at most
#: CHUNK_FDES (each call also fills a position per entry of the whole table), and small enough
#: for CHUNKS_PER_JOB chunks per thread
CHUNK_FDES = 8192
CHUNK_FDES_MIN = 256
CHUNKS_PER_JOB = 4
_Outcome = tuple[bytes, list[tuple[int, str, tuple[tuple[int, int, str, str], ...]]], bytes, bytes, bytes]
#: _core.check_symbols' function symbols of a file (starts, sizes, name offsets, names, noreturn
#: functions, entries: buffers the C core reads again)
Symbols = tuple[bytes, bytes, bytes, bytes, bytes, bytes]
#: the uint32 fields of one FDE's result, in the order of _core.CHECK_RESULT_FIELD_NAMES
FIELDS = len(_core.CHECK_RESULT_FIELD_NAMES)
_FIELD = {name: index for index, name in enumerate(_core.CHECK_RESULT_FIELD_NAMES)}
ENTRY, VERDICT, AGREE, MISMATCH = _FIELD["entry"], _FIELD["verdict"], _FIELD["agree"], _FIELD["mismatch"]
UNKNOWN, UNREACHED, FROM_DECLARED_ENTRY = _FIELD["unknown"], _FIELD["unreached"], _FIELD["from_declared_entry"]
FINDING_TOTAL, SKIPPED = _FIELD["finding_total"], _FIELD["skipped"]


def reason_class(reason: str) -> str:
    """An undecided FDE's reason without its addresses and counts, to count undecided FDEs by cause."""
    return re.sub(r"^\d+ instructions", "N instructions", re.sub(r"0x[0-9a-f]+", "ADDRESS", reason))


def what_name(what: int) -> str:
    """A finding's subject: "cfa", "range", "ra" or a register name ("rbx", "r12")."""
    if what == _core.CHECK_WHAT_CFA:
        return "cfa"
    if what == _core.CHECK_WHAT_RANGE:
        return "range"
    # not cfi.register_name: importing cfi (and its dataclasses) costs a check ~14 ms of start-up
    return "ra" if what == _core.RETURN_ADDRESS_COLUMN else _core.register_name(what) or f"r{what}"


class Finding(NamedTuple):
    address: int
    what: str
    declared: str
    derived: str

    def to_json(self) -> dict[str, object]:
        return {"address": self.address, "what": self.what, "declared": self.declared, "derived": self.derived}


class FdeVerdict(NamedTuple):
    section: str
    pc_begin: int
    pc_end: int
    verdict: str
    reason: str
    findings: tuple[Finding, ...]  #: the first ones (the C core keeps FU_CHECK_MAX_FINDINGS_PER_FDE)
    finding_total: int  #: the findings made, listed or not
    instructions: tuple[int, int, int, int]  #: agree, mismatch, unknown, unreached
    skipped: int  #: reached instructions not compared (the return address undefined)

    @property
    def findings_truncated(self) -> bool:
        return self.finding_total > len(self.findings)

    def to_json(self) -> dict[str, object]:
        return fde_json(self.pc_begin, self.pc_end, self.verdict, self.reason, [f.to_json() for f in self.findings],
                        self.finding_total, self.findings_truncated, self.instructions[3], self.skipped)


def fde_json(pc_begin: int, pc_end: int, verdict: str, reason: str, findings: list[dict[str, object]],
             finding_total: int, findings_truncated: bool, unreached: int, skipped: int) -> dict[str, object]:
    """One FDE's object in `check --json`."""
    return {"pc_begin": pc_begin, "pc_end": pc_end, "verdict": verdict, "reason": reason, "findings": findings,
            "finding_total": finding_total, "findings_truncated": findings_truncated, "unreached": unreached,
            "skipped": skipped}


class Uncovered(NamedTuple):
    start: int
    end: int
    symbol: str

    def to_json(self) -> dict[str, object]:
        return {"start": self.start, "end": self.end, "symbol": self.symbol}


class SectionCheck:
    """One frame section's FDEs: the C results (FIELDS uint32 per FDE) and the details of those not
    agreeing, by position."""

    def __init__(self, name: str, pc_begin: array.array[int], pc_range: array.array[int]) -> None:
        self.name = name
        self.pc_begin = pc_begin
        self.pc_range = pc_range
        self.results = array.array("I")
        self.details: dict[int, tuple[str, tuple[tuple[int, int, str, str], ...]]] = {}

    def verdicts(self) -> Iterator[FdeVerdict]:
        return (self._verdict(position) for position in range(len(self.results) // FIELDS))

    def not_agreeing(self) -> Iterator[FdeVerdict]:
        """The mismatching and undecided FDEs only (those with details), in the order of verdicts()."""
        return (self._verdict(position) for position in sorted(self.details))

    def fdes_json(self) -> Iterator[dict[str, object]]:
        """The verdicts' to_json(), those of FDEs without details (most: they agree) made without an
        FdeVerdict (libLLVM-14's 95k took 0.29 s)."""
        r, begins, ranges, details = self.results, self.pc_begin, self.pc_range, self.details
        for position in range(len(r) // FIELDS):
            if position in details:
                yield self._verdict(position).to_json()
                continue
            base = position * FIELDS
            begin = begins[r[base + ENTRY]]
            total = r[base + FINDING_TOTAL]
            yield fde_json(begin, begin + ranges[r[base + ENTRY]], VERDICT_NAMES[r[base + VERDICT]], "", [], total,
                           total > 0, r[base + UNREACHED], r[base + SKIPPED])

    def _verdict(self, position: int) -> FdeVerdict:
        r = self.results
        base = position * FIELDS
        entry = r[base + ENTRY]
        reason, findings = self.details.get(position, ("", ()))
        return FdeVerdict(self.name, self.pc_begin[entry], self.pc_begin[entry] + self.pc_range[entry],
                          VERDICT_NAMES[r[base + VERDICT]], reason,
                          tuple(Finding(a, what_name(w), d, v) for a, w, d, v in findings), r[base + FINDING_TOTAL],
                          (r[base + AGREE], r[base + MISMATCH], r[base + UNKNOWN], r[base + UNREACHED]),
                          r[base + SKIPPED])


class Counts:
    """FDEs by verdict, and instructions of the decided FDEs (agree + mismatch) by outcome."""

    def __init__(self, uncovered: int = 0) -> None:
        self.fdes = {"agree": 0, "mismatch": 0, "undecided": 0}
        self.instructions_agree = 0
        self.instructions_mismatch = 0
        self.instructions_unknown = 0
        #: instructions of decided FDEs that no path reached (padding aside): left unchecked (in
        #: mismatching FDEs only: an FDE with code no path reaches is otherwise undecided)
        self.instructions_unreached = 0
        #: reached instructions not compared: rows whose return address is undefined (the outermost frame)
        self.instructions_skipped = 0
        self.uncovered = uncovered
        #: FDEs starting inside a function (gcc's .cold parts), checked from their first declared row
        self.from_declared_entry = 0

    @property
    def fde_total(self) -> int:
        return sum(self.fdes.values())

    @property
    def decided_percent(self) -> float:
        total = self.fde_total
        return 100.0 * (self.fdes["agree"] + self.fdes["mismatch"]) / total if total else 100.0

    @property
    def agreement_percent(self) -> float:
        compared = self.instructions_agree + self.instructions_mismatch + self.instructions_unknown
        return 100.0 * self.instructions_agree / compared if compared else 100.0

    def add(self, other: Counts) -> None:
        for verdict, n in other.fdes.items():
            self.fdes[verdict] += n
        self.instructions_agree += other.instructions_agree
        self.instructions_mismatch += other.instructions_mismatch
        self.instructions_unknown += other.instructions_unknown
        self.instructions_unreached += other.instructions_unreached
        self.instructions_skipped += other.instructions_skipped
        self.uncovered += other.uncovered
        self.from_declared_entry += other.from_declared_entry


class CodeInputs(NamedTuple):
    """What the C core reads besides the CFI tables: the executable and all PT_LOAD segments as
    (vaddr, bytes), the sorted uint64 addresses of noreturn functions and of known function entries."""

    code: list[tuple[int, memoryview]]
    segments: list[tuple[int, memoryview]]
    noreturn: bytes
    function_entries: bytes


class FileCheck:
    def __init__(self, path: str, sections: list[SectionCheck], uncovered: list[Uncovered],
                 image: ModuleImage | None = None, inputs: CodeInputs | None = None) -> None:
        self.path = path
        self.sections = sections
        self.uncovered = uncovered
        #: the image checked and the inputs its code was read with (synth builds on them)
        self.image = image
        self.inputs = inputs

    def verdicts(self) -> Iterator[FdeVerdict]:
        for section in self.sections:
            yield from section.verdicts()

    def not_agreeing(self) -> Iterator[FdeVerdict]:
        for section in self.sections:
            yield from section.not_agreeing()

    def counts(self) -> Counts:
        counts = Counts(uncovered=len(self.uncovered))
        for section in self.sections:
            r = section.results
            verdicts = r[VERDICT::FIELDS]
            for code, name in VERDICT_NAMES.items():
                counts.fdes[name] += verdicts.count(code)
            counts.from_declared_entry += sum(r[FROM_DECLARED_ENTRY::FIELDS])
            # every FDE's instructions, less the undecided ones' (undecided FDEs all have details)
            undecided = [position * FIELDS for position in section.details
                         if r[position * FIELDS + VERDICT] == _core.CHECK_UNDECIDED]
            counts.instructions_agree += sum(r[AGREE::FIELDS]) - sum(r[base + AGREE] for base in undecided)
            counts.instructions_mismatch += sum(r[MISMATCH::FIELDS]) - sum(r[base + MISMATCH] for base in undecided)
            counts.instructions_unknown += sum(r[UNKNOWN::FIELDS]) - sum(r[base + UNKNOWN] for base in undecided)
            counts.instructions_unreached += sum(r[UNREACHED::FIELDS]) - sum(r[base + UNREACHED] for base in undecided)
            counts.instructions_skipped += sum(r[SKIPPED::FIELDS]) - sum(r[base + SKIPPED] for base in undecided)
        return counts

    @property
    def exit_status(self) -> int:
        """0 all agree, 1 a mismatch, 2 only undecided ones besides agreeing ones (issue 23's codes).
        Code without CFI is listed, not counted here: the toolchain's own startup code (crti's `_init`
        and `_fini`, crtbegin's `deregister_tm_clones`) has none in nearly every program."""
        return self.exit_status_of(self.counts())

    @staticmethod
    def exit_status_of(counts: Counts) -> int:
        """exit_status from counts() already made."""
        if counts.fdes["mismatch"]:
            return 1
        return 2 if counts.fdes["undecided"] else 0

    def to_json(self) -> dict[str, object]:
        return {"file": self.path, "fdes": [fde for section in self.sections for fde in section.fdes_json()],
                "uncovered": [u.to_json() for u in self.uncovered]}


def _function_symbols(elf: ElfFile) -> Symbols:
    """The function symbols of the file and of its separate debug file, read by the C core
    (core/check_scope.h): one name per address, the noreturn functions, the known entries."""
    debug_path = find_debug_file(elf)
    debug = None
    if debug_path:
        try:
            debug = ElfFile.open(debug_path)
        except (OSError, ElfError):
            debug = None
    try:
        return _core.check_symbols([elf.file_view()] + ([debug.file_view()] if debug else []))
    finally:
        if debug is not None:
            debug.close()


def _plt_noreturn(elf: ElfFile) -> list[int]:
    """Addresses of the PLT stubs of noreturn functions (`abort@plt`), named from the relocations."""
    stubs = [s for s in elf.sections if s.name in PLT_SECTIONS and s.size]
    if not stubs:
        return []
    table = symbol_table_for_file(elf)
    found = []
    for section in stubs:
        step = section.entsize if section.entsize in (8, 16) else 16
        for address in range(section.addr, section.addr + section.size, step):
            named = table.lookup(address)
            if named and named[1] == 0 and named[0].endswith("@plt") and _core.check_noreturn_name(named[0][:-4]):
                found.append(address)
    return found


def check_file(path: str, *, jobs: int = 1, progress: Callable[[int, int], None] | None = None) -> FileCheck:
    """Check every FDE of `path`; `progress(done, total)` is called as chunks of FDEs complete."""
    # what is built here (sets of addresses, results) holds no cycles: the collector would only
    # walk it, again and again as it grows
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _check_file(path, jobs, progress)
    finally:
        if collecting:
            gc.enable()


#: a chunk: its section, the table, the table's overlaps (_core.check_overlaps), the FDEs' entries
_Chunk = tuple[SectionCheck, _core.CfiTable, bytes, bytes]


def _check_file(path: str, jobs: int, progress: Callable[[int, int], None] | None) -> FileCheck:
    image = ModuleImage.load(path)
    with CheckedRead(image.check_unchanged):  # no verdict from the zeros of a file truncated meanwhile
        return _check_image(path, image, jobs, progress)


def _check_image(path: str, image: ModuleImage, jobs: int, progress: Callable[[int, int], None] | None) -> FileCheck:
    elf = image.elf
    if elf.elf_type_number == ET_REL:
        raise ElfError(f"{path}: a relocatable object (ET_REL): its code is not at its final addresses and its "
                       "FDEs are not relocated; check the linked executable or shared object")
    if elf.elf_class != 64 or elf.machine != EM_X86_64:
        raise ElfError(f"{path}: machine {elf.machine} (ELF{elf.elf_class}): check decodes x86-64 code only")
    loads = elf.loaded_segments()
    code = [(s.vaddr, elf.segment_data(s)) for s in loads if s.flags & PF_X]
    segments = [(s.vaddr, elf.segment_data(s)) for s in loads]
    symbols = _function_symbols(elf)
    noreturn_bytes = symbols[4]
    plt_noreturn = _plt_noreturn(elf)
    if plt_noreturn:
        noreturn_bytes = array.array("Q", sorted(set(array.array("Q", noreturn_bytes)) | set(plt_noreturn))).tobytes()
    entries_bytes = symbols[5]

    work: list[_Chunk] = []
    sections: list[SectionCheck] = []
    tables_checked: list[tuple[_core.CfiTable, bytes]] = []  #: with their overlaps
    for kind, table in ((EH_FRAME, image.eh_frame), (DEBUG_FRAME, image.debug_frame)):
        if table is None:
            continue
        _kinds, _first, _count, begin_bytes, range_bytes = table.entry_arrays()
        entries = _core.check_scope_fdes(table)
        section = SectionCheck(".eh_frame" if kind == EH_FRAME else ".debug_frame", array.array("Q", begin_bytes),
                               array.array("Q", range_bytes))
        sections.append(section)
        overlaps = _core.check_overlaps(table)
        tables_checked.append((table, overlaps))
        count = len(entries) // 4
        size = min(CHUNK_FDES, max(CHUNK_FDES_MIN, -(-count // (CHUNKS_PER_JOB * jobs))))
        for start in range(0, count, size):
            work.append((section, table, overlaps, entries[start * 4:(start + size) * 4]))

    total = sum(len(chunk) // 4 for _s, _t, _o, chunk in work)
    done = 0
    uncovered_calls: list[bytes] = []
    called_non_entry: set[int] = set()
    foreign: set[int] = set()

    #: decoded instructions interpreted for this file by every chunk (_core.CHECK_MAX_FILE_INSTRUCTIONS)
    work_done = array.array("Q", [0])

    def run(item: _Chunk, function_entries: bytes, foreign_entries: bytes = b"") -> _Outcome:
        _section, table, overlaps, chunk = item
        return _core.check_fdes(table, chunk, overlaps, code, segments, noreturn_bytes, function_entries,
                                image.eh_frame, image.debug_frame, work_done, foreign_entries)

    with _chunk_mapper(jobs) as map_chunks:
        # with threads, every chunk is submitted here; the C core runs without the GIL
        outcomes = map_chunks(run, work, [entries_bytes] * len(work))
        for (section, _table, _overlaps, chunk), (results, details, uncovered, called, entered) in zip(work, outcomes):
            offset = len(section.results) // FIELDS
            section.results.frombytes(results)
            for position, reason, findings in details:
                section.details[offset + position] = (reason, findings)
            uncovered_calls.append(uncovered)
            called_non_entry.update(array.array("Q", called))
            foreign.update(array.array("Q", entered))
            done += len(chunk) // 4
            # the code a chunk read stays mapped in this process (libLLVM-14: 50 MB of .text over
            # its chunks, 2/3 of the peak RSS); later chunks map again the little they need
            elf.release_resident_pages()
            if progress:
                progress(done, total)
    if called_non_entry:
        called_non_entry.difference_update(array.array("Q", entries_bytes))
    if called_non_entry:
        # FDEs checked from their first row as parts of a function, which a call shows to be entries
        # after all: again, from the ABI's entry state
        entries_bytes = array.array("Q", sorted(set(array.array("Q", entries_bytes)) | called_non_entry)).tobytes()
        for section, checked in zip(sections, tables_checked):
            r = section.results
            _recheck(section, checked, [p for p in _positions_with(r, FROM_DECLARED_ENTRY)
                                      if section.pc_begin[r[p * FIELDS + ENTRY]] in called_non_entry],
                     lambda item: run(item, entries_bytes))
    if foreign:
        # code left unreached inside an FDE that other FDEs jump to (a .cold part entered at several
        # places, a tail call into a function's middle) or name as a landing pad: again, with those
        # entries (the entries this second pass reveals are not followed further)
        entered_sorted = sorted(foreign)
        foreign_bytes = array.array("Q", entered_sorted).tobytes()
        for section, checked in zip(sections, tables_checked):
            r = section.results
            _recheck(section, checked, [p for p in _positions_with(r, UNREACHED) if _enters(
                         entered_sorted, section.pc_begin[r[p * FIELDS + ENTRY]], section.pc_range[r[p * FIELDS + ENTRY]])],
                     lambda item: run(item, entries_bytes, foreign_bytes))
    # code without CFI: function symbols, call targets, relocated addresses, DT_INIT and DT_FINI
    targets = b"".join(uncovered_calls) + array.array("Q", init_and_fini(elf)).tobytes()
    found = _core.check_uncovered(elf.file_view(), image.eh_frame, image.debug_frame, code, symbols, targets)
    return FileCheck(path, sections, [Uncovered(*u) for u in found], image,
                     CodeInputs(code, segments, noreturn_bytes, entries_bytes))


@contextmanager
def _chunk_mapper(jobs: int) -> Iterator[Callable[..., Iterator[_Outcome]]]:
    """map() over the chunks: in this thread for one job, else on a pool of `jobs` threads."""
    if jobs == 1:
        yield map
        return
    # imported for threads only: concurrent.futures (and the logging it imports) costs every
    # one-thread run its import
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        yield pool.map


def _positions_with(results: array.array[int], field: int) -> Iterator[int]:
    """The positions of the FDEs whose result has a non-zero `field` (selected in C: libLLVM-14 has
    95k FDEs, a few thousand with unreached code)."""
    return itertools.compress(range(len(results) // FIELDS), results[field::FIELDS])


def _enters(sorted_addresses: list[int], begin: int, size: int) -> bool:
    """Whether an address of `sorted_addresses` lies inside [begin, begin + size) after its start."""
    i = bisect.bisect_right(sorted_addresses, begin)
    return i < len(sorted_addresses) and sorted_addresses[i] < begin + size


def _recheck(section: SectionCheck, checked: tuple[_core.CfiTable, bytes], positions: list[int],
             run: Callable[[_Chunk], _Outcome]) -> None:
    """Check again the FDEs of `section` (of the table `checked`, with its overlaps) at `positions`
    (of its results), replacing their results."""
    r = section.results
    if not positions:
        return
    chunk = array.array("I", (r[p * FIELDS + ENTRY] for p in positions)).tobytes()
    results, details, _uncovered, _called, _entered = run((section, *checked, chunk))
    fresh = array.array("I", results)
    by_position = {position: (reason, findings) for position, reason, findings in details}
    for k, p in enumerate(positions):
        r[p * FIELDS:(p + 1) * FIELDS] = fresh[k * FIELDS:(k + 1) * FIELDS]
        section.details.pop(p, None)
        if k in by_position:
            section.details[p] = by_position[k]

