"""A file's unwind table with the machine code's word where its CFI is missing or proven wrong (the
`synth` verb).

The file is checked first (check.py: every FDE against the code, and the code no FDE covers); the
C core (native/core/synth_table.c) then collects one view of the file's rows, every FDE marked by
where its rows come from:

- `declared`: the file's own FDE, rows as the file states them;
- `corrected` (mode `repair`): an FDE the check judged `mismatch`, its rows derived from the code
  wherever the interpreter reaches an instruction with a known CFA and return address, declared
  elsewhere;
- `synthesized`: code without CFI (function symbols and call targets no FDE covers), rows derived
  from the code only.

Mode `missing` has the declared FDEs and the synthesized ones; `repair` also the corrected ones in
place of the FDEs they correct. The view is encoded as a `.debug_frame` section: `table` is that
section parsed, which the compact-table builder (`_core.build_compact_table(table, None, ...)`),
the printers and the walker take like any other CFI table.
"""

from __future__ import annotations

import array
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from fastunwind import _core
from fastunwind.cfi import DEBUG_FRAME, ENTRY_FDE, RETURN_ADDRESS_COLUMN, RuleKind, register_name
from fastunwind.check import ENTRY, FIELDS, VERDICT, FileCheck, check_file
from fastunwind.elf.debug_file_writer import build_id_path
from fastunwind.elf.debug_file_writer import write_debug_file as write_debug_file_of
from fastunwind.errors import ElfError
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import BinaryIO

MODES = {"missing": _core.SYNTH_MISSING, "repair": _core.SYNTH_REPAIR}
ORIGINS = _core.SYNTH_ORIGIN_NAMES
SECTION_NAMES = (".eh_frame", ".debug_frame")
RANGE_FIELDS = len(_core.SYNTH_RANGE_FIELD_NAMES)
_FIELD = {name: index for index, name in enumerate(_core.SYNTH_RANGE_FIELD_NAMES)}


@dataclass(frozen=True)
class SynthRange:
    """One FDE of the view."""

    start: int
    end: int
    origin: str  #: "declared", "corrected" or "synthesized"
    section: str | None  #: the section of the declared FDE it comes from (None: synthesized)
    entry: int | None  #: that FDE's entry index in its section
    rows: int
    derived_rows: int  #: of its rows, those derived from the code


@dataclass(frozen=True)
class UncoveredSynth:
    """What became of one range of code without CFI."""

    start: int
    end: int
    symbol: str
    decided: bool
    ranges: int  #: synthesized FDEs made from it
    reason: str  #: why not, when undecided


@dataclass
class Synthesis:
    path: str
    mode: str
    debug_frame: bytes  #: the view as a `.debug_frame` section
    table: _core.CfiTable  #: that section parsed: FDE i is ranges[i]
    ranges: list[SynthRange]
    uncovered: list[UncoveredSynth]
    checked: FileCheck
    #: mismatching FDEs left declared (code not interpretable, or an FDE starting inside a function)
    corrected_kept_declared: int

    def counts(self) -> dict[str, int]:
        counts = {origin: 0 for origin in ORIGINS}
        for r in self.ranges:
            counts[r.origin] += 1
        return counts


def _mismatching(checked: FileCheck, section_name: str) -> bytes:
    """The sorted entries of `section_name` the check judged mismatch, as uint32 bytes."""
    for section in checked.sections:
        if section.name == section_name:
            r = section.results
            entries = sorted(r[p * FIELDS + ENTRY] for p in section.details
                             if r[p * FIELDS + VERDICT] == _core.CHECK_MISMATCH)
            return array.array("I", entries).tobytes()
    return b""


def synthesize(path: str, mode: str = "missing", *, jobs: int = 1,
               progress: Callable[[int, int], None] | None = None) -> Synthesis:
    """The view `mode` ("missing" or "repair") of `path`; `progress` as check_file's."""
    checked = check_file(path, jobs=jobs, progress=progress)
    image, inputs = checked.image, checked.inputs
    assert image is not None and inputs is not None  # check_file always sets them
    uncovered = array.array("Q")
    for u in checked.uncovered:
        uncovered.extend((u.start, u.end))
    section, ranges_bytes, results, counts = _core.synth_table(
        image.eh_frame, image.debug_frame, inputs.code, inputs.segments, inputs.noreturn, inputs.function_entries,
        _mismatching(checked, SECTION_NAMES[0]), _mismatching(checked, SECTION_NAMES[1]), uncovered.tobytes(),
        MODES[mode])
    fields = array.array("Q", ranges_bytes)
    ranges = []
    for base in range(0, len(fields), RANGE_FIELDS):
        f = fields[base:base + RANGE_FIELDS]
        declared = f[_FIELD["table"]] != _core.SYNTH_ROW_DERIVED
        ranges.append(SynthRange(f[_FIELD["start"]], f[_FIELD["end"]], ORIGINS[f[_FIELD["origin"]]],
                                 SECTION_NAMES[f[_FIELD["table"]]] if declared else None,
                                 f[_FIELD["entry"]] if declared else None, f[_FIELD["rows"]],
                                 f[_FIELD["derived_rows"]]))
    names = {u.start: u.symbol for u in checked.uncovered}
    return Synthesis(path, mode, section, _core.CfiTable(section, DEBUG_FRAME, 0), ranges,
                     [UncoveredSynth(start, end, names.get(start, ""), decided, pieces, reason)
                      for start, end, decided, pieces, reason in results],
                     checked, int(counts["corrected_kept_declared"]))


def origin_note(r: SynthRange, symbol: str = "") -> str:
    """What an FDE header of the printed table says about where its rows come from."""
    if r.origin == "synthesized":
        return f"synthesized: no CFI{' (' + symbol + ')' if symbol else ''}"
    return f"{r.origin}: {r.section} entry {r.entry}"


def render(synthesis: Synthesis, fd: int = -1) -> bytes:
    """The view in `readelf --debug-dump=frames-interp` layout: readelf's text for the `.debug_frame`
    section it is written as, each FDE header followed by `  # ` and the origin of its rows
    ("declared: ...", "corrected: ...", "synthesized: no CFI ..."). Rows are readelf's own: a declared
    FDE's print exactly as readelf prints them from the file. Written to `fd` (printed in C, a chunk at
    a time) if given, else returned."""
    names = {u.start: u.symbol for u in synthesis.uncovered}
    notes = ["  # " + origin_note(r, names.get(r.start, "")) for r in synthesis.ranges]
    text = synthesis.table.render(fd=fd, notes=notes)
    return text if text is not None else b""


def write_json(synthesis: Synthesis, out: BinaryIO) -> None:
    """Write {"file", "mode", "fdes": [{"pc_begin", "pc_end", "origin", "section", "entry", "derived_rows",
    "rows": [{"address", "cfa", registers...}]}], "uncovered": [...], "corrected_kept_declared"} to `out`,
    one FDE at a time (libLLVM-14 has 861k rows): rules as text ("rsp+8", "c-8", "same value",
    "in rdi", "undefined", "exp DW_OP_..."), a register without a rule left out."""
    table = synthesis.table
    row_bytes, state_bytes = table.rows()
    row_address = array.array("Q", row_bytes)
    row_state = array.array("I", state_bytes)
    kinds, first_rows, row_counts, _begin, _range = table.entry_arrays()
    first = array.array("I", first_rows)
    count = array.array("I", row_counts)
    #: per state, its rules as the JSON members after "address"
    members: dict[int, str] = {}
    out.write(b'{"file": ' + json.dumps(synthesis.path).encode() + b', "mode": "' + synthesis.mode.encode()
              + b'", "fdes": [')
    fde_entries = [i for i, kind in enumerate(kinds) if kind == ENTRY_FDE]
    for n, (r, entry) in enumerate(zip(synthesis.ranges, fde_entries)):
        rows = []
        for k in range(first[entry], first[entry] + count[entry]):
            state = row_state[k]
            if state not in members:
                members[state] = json.dumps(_state_json(table, state))[1:-1]
            rows.append(f'{{"address": {row_address[k]}, {members[state]}}}')
        head = json.dumps({"pc_begin": r.start, "pc_end": r.end, "origin": r.origin, "section": r.section,
                           "entry": r.entry, "derived_rows": r.derived_rows})[:-1]
        out.write(f'{", " if n else ""}{head}, "rows": [{", ".join(rows)}]}}'.encode())
    uncovered = [{"start": u.start, "end": u.end, "symbol": u.symbol, "decided": u.decided, "fdes": u.ranges,
                  "reason": u.reason} for u in synthesis.uncovered]
    out.write(b'], "uncovered": ' + json.dumps(uncovered).encode() + b', "corrected_kept_declared": '
              + str(synthesis.corrected_kept_declared).encode() + b"}\n")


def _state_json(table: _core.CfiTable, state: int) -> dict[str, str]:
    cfa, columns = table.state(state)
    out = {"cfa": _rule_text(table, cfa)}
    for column, rule in columns:
        out["ra" if column == RETURN_ADDRESS_COLUMN else register_name(column)] = _rule_text(table, rule)
    return out


def _rule_text(table: _core.CfiTable, rule: tuple[int, int, int, int]) -> str:
    kind, reg, value, length = rule
    name = RuleKind(kind).name
    if name == "CFA_REG_OFFSET":
        return f"{register_name(reg)}{value:+d}"
    if name in ("CFA_EXPRESSION", "EXPRESSION", "VAL_EXPRESSION"):
        prefix = "value " if name == "VAL_EXPRESSION" else ""
        return prefix + "exp " + table.format_expression(value, length, "llvm")
    if name == "OFFSET":
        return f"c{value:+d}"
    if name == "VAL_OFFSET":
        return f"value c{value:+d}"
    if name == "REGISTER":
        return f"in {register_name(reg)}"
    return name.lower().replace("_", " ")


def write_debug_file(synthesis: Synthesis, path: str) -> str:
    """Write the debug file of the synthesized file holding the view's `.debug_frame` to `path`, or,
    when `path` is a directory, to its build-id path there (`path/.build-id/xx/yyyy.debug`, where gdb's
    debug-file-directory, perf and libdw look). Returns the path written."""
    elf = synthesis.checked.image.elf if synthesis.checked.image else None
    assert elf is not None  # check_file always sets the image
    if os.path.isdir(path):
        if not elf.build_id:
            raise ElfError(f"{synthesis.path}: no build-id, so no build-id path under {path}: name the debug file")
        path = build_id_path(path, elf.build_id)
    write_debug_file_of(elf, {".debug_frame": synthesis.debug_frame}, path)
    return path
