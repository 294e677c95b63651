"""Call frame information of an ELF file: parsed and evaluated by the C core, read from Python.

    >>> from fastunwind.cfi import UnwindInfo
    >>> info = UnwindInfo.open("/lib/x86_64-linux-gnu/libc.so.6")
    >>> section, fde, row = info.lookup(0x27290)
    >>> section.name, fde.pc_begin <= 0x27290 < fde.pc_end
    ('.eh_frame', True)
    >>> row.registers[16].describe()  # the return address, saved just below the CFA
    '[CFA-8]'

The CFA rule depends on the libc build (Debian 12's: "rsp+56"):

    >>> row.cfa.describe()  # doctest: +SKIP
    'rsp+56'

Rows are DWARF rows (DWARF 5 §6.4.1): a PC range, the CFA rule and a rule for every register column
that has one. Bulk work uses `CfiSection.row_arrays()` (typed arrays, no per-row objects); the
per-row dataclasses are for inspection.
"""

from __future__ import annotations

import array
import bisect
import enum
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from fastunwind import _core
from fastunwind.elf import CheckedRead, ElfFile, Section
from fastunwind.errors import CfiError, NoUnwindInfo
from fastunwind.frame_sections import (DEBUG_FRAME, EH_FRAME, SectionBases, frame_section_kind, frame_sections,
                                       frame_sources, section_table)
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

__all__ = ["DEBUG_FRAME", "EH_FRAME", "Cie", "CfiSection", "EhFrameHdr", "Fde", "Row", "Rule", "RuleKind",
           "UnwindInfo", "cfi_sections", "frame_section_kind", "register_name"]

#: DWARF x86-64 register numbers (native/core/x86_64.h).
RETURN_ADDRESS_COLUMN = _core.RETURN_ADDRESS_COLUMN
REGISTER_NAMES = {column: _core.register_name(column) for column in range(_core.MAX_COLUMNS)}


class RuleKind(enum.IntEnum):
    """How a register (or the CFA) is recovered: the C core's fu_rule_kind (native/core/cfi.h), whose
    names and codes are _core.RULE_KINDS."""

    UNSPECIFIED = _core.RULE_UNSPECIFIED  #: no rule in the CFI (readelf prints "u")
    UNDEFINED = _core.RULE_UNDEFINED  #: DW_CFA_undefined: not recoverable
    SAME_VALUE = _core.RULE_SAME_VALUE
    OFFSET = _core.RULE_OFFSET  #: saved at CFA + offset
    VAL_OFFSET = _core.RULE_VAL_OFFSET  #: value is CFA + offset
    REGISTER = _core.RULE_REGISTER  #: saved in another register
    EXPRESSION = _core.RULE_EXPRESSION  #: saved at the address an expression computes
    VAL_EXPRESSION = _core.RULE_VAL_EXPRESSION  #: value is what an expression computes
    CFA_REG_OFFSET = _core.RULE_CFA_REG_OFFSET  #: CFA = register + offset
    CFA_EXPRESSION = _core.RULE_CFA_EXPRESSION  #: CFA = expression


_EXPRESSION_KINDS = (RuleKind.EXPRESSION, RuleKind.VAL_EXPRESSION, RuleKind.CFA_EXPRESSION)


@dataclass(frozen=True, slots=True)
class Rule:
    """One recovery rule. `register` is the base register of CFA_REG_OFFSET or the source of
    REGISTER; `offset` belongs to OFFSET, VAL_OFFSET and CFA_REG_OFFSET; `expression` holds the
    DWARF expression bytes of the expression kinds."""

    kind: RuleKind
    register: int = 0
    offset: int = 0
    expression: bytes = b""

    def __repr__(self) -> str:
        parts = [self.kind.name]
        if self.kind in (RuleKind.REGISTER, RuleKind.CFA_REG_OFFSET):
            parts.append(f"register={self.register}")
        if self.kind in (RuleKind.OFFSET, RuleKind.VAL_OFFSET, RuleKind.CFA_REG_OFFSET):
            parts.append(f"offset={self.offset}")
        if self.kind in _EXPRESSION_KINDS:
            parts.append(f"expression={self.expression.hex()}")
        return f"Rule({', '.join(parts)})"

    def describe(self) -> str:
        """Short human form: "rsp+8", "[CFA-16]", "CFA+8", "rbx", "[DW_OP_breg7 RSP+8, ...]"."""
        k = self.kind
        if k == RuleKind.CFA_REG_OFFSET:
            return f"{register_name(self.register)}{self.offset:+d}"
        if k == RuleKind.OFFSET:
            return f"[CFA{self.offset:+d}]"
        if k == RuleKind.VAL_OFFSET:
            return f"CFA{self.offset:+d}"
        if k == RuleKind.REGISTER:
            return register_name(self.register)
        if k == RuleKind.SAME_VALUE:
            return "same"
        if k == RuleKind.UNDEFINED:
            return "undefined"
        if k == RuleKind.UNSPECIFIED:
            return "unspecified"
        text = _core.format_expression(self.expression, "llvm")
        return f"[{text}]" if k == RuleKind.EXPRESSION else text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.name.lower()}
        if self.kind in (RuleKind.REGISTER, RuleKind.CFA_REG_OFFSET):
            out["register"] = self.register
        if self.kind in (RuleKind.OFFSET, RuleKind.VAL_OFFSET, RuleKind.CFA_REG_OFFSET):
            out["offset"] = self.offset
        if self.kind in _EXPRESSION_KINDS:
            out["expression"] = self.expression.hex()
            out["text"] = _core.format_expression(self.expression, "llvm")
        return out


def register_name(column: int) -> str:
    """readelf's name for a DWARF x86-64 register column ("rsp", "xmm3"), else "r<N>"."""
    name = REGISTER_NAMES.get(column)
    return name if name else f"r{column}"


@dataclass(frozen=True, slots=True)
class Row:
    """The rules in force for PCs in [start, end)."""

    start: int
    end: int
    cfa: Rule
    registers: Mapping[int, Rule]

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "cfa": self.cfa.to_json(),
            "registers": {str(column): rule.to_json() for column, rule in self.registers.items()},
        }


@dataclass(frozen=True, slots=True)
class Cie:
    offset: int
    version: int
    augmentation: str
    code_alignment: int
    data_alignment: int
    return_address_column: int
    fde_encoding: int
    lsda_encoding: int
    personality_encoding: int
    personality: int | None
    signal_frame: bool
    address_size: int


@dataclass(frozen=True, slots=True)
class Fde:
    index: int  #: entry index in its section
    offset: int  #: offset of the FDE in its section
    cie: Cie
    pc_begin: int
    pc_end: int
    lsda: int | None
    first_row: int = field(repr=False)
    row_count: int = field(repr=False)

    @property
    def signal_frame(self) -> bool:
        return self.cie.signal_frame


#: entry kinds of CfiTable.entry_arrays() (native/core/cfi.h fu_entry_kind)
ENTRY_CIE, ENTRY_FDE, ENTRY_TERMINATOR, ENTRY_BAD = 0, 1, 2, 0xFF


class CfiSection:
    """One parsed and evaluated `.eh_frame` or `.debug_frame` section.

    `strict=True` raises CfiError for the first malformed entry; with `strict=False` the good
    entries stay usable and `errors` lists the bad ones."""

    def __init__(
        self,
        data: bytes | memoryview,
        kind: int,
        address: int,
        *,
        name: str | None = None,
        path: str | None = None,
        address_size: int = 8,
        text_base: int = 0,
        data_base: int = 0,
        segments: Sequence[tuple[int, bytes | memoryview]] | None = None,
        strict: bool = True,
        table: _core.CfiTable | None = None,
    ) -> None:
        self.kind = kind
        self.name = name or (".eh_frame" if kind == EH_FRAME else ".debug_frame")
        self.path = path
        self.address = address
        self._data = data
        #: `table`: already parsed from `data` (frame_sections.section_table)
        self._table = table if table is not None else _core.CfiTable(
            data, kind, address, address_size, text_base, data_base, segments or ()
        )
        self.errors = [CfiError(message) for _, message in self._table.errors()]
        if strict and self.errors:
            raise self.errors[0]
        self._cies: dict[int, Cie] = {}
        self._row_arrays: tuple[array.array[int], array.array[int]] | None = None

    @property
    def core(self) -> _core.CfiTable:
        """The C table, for C code of the extension (the walker, compact-table builder)."""
        return self._table

    # ---- counts -------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return self._table.row_count

    @property
    def state_count(self) -> int:
        return self._table.state_count

    @property
    def entry_count(self) -> int:
        return self._table.entry_count

    def memory(self) -> dict[str, int]:
        """Bytes held by the evaluated table, by part (rows, states, entries)."""
        return dict(self._table.memory())

    # ---- entries ------------------------------------------------------------------------------
    def _cie(self, index: int) -> Cie:
        cie = self._cies.get(index)
        if cie is None:
            entry = self._table.entry(index)
            info = entry["cie"]
            cie = Cie(
                offset=entry["offset"],
                version=info["version"],
                augmentation=info["augmentation"],
                code_alignment=info["code_align"],
                data_alignment=info["data_align"],
                return_address_column=info["ra_column"],
                fde_encoding=info["fde_encoding"],
                lsda_encoding=info["lsda_encoding"],
                personality_encoding=info["personality_encoding"],
                # None too when an indirect pointer's slot is outside the file's segments
                personality=(
                    info["personality"]
                    if "P" in info["augmentation"] and not info["personality_unresolved"] and info["personality"]
                    else None
                ),
                signal_frame=info["signal_frame"],
                address_size=info["address_size"],
            )
            self._cies[index] = cie
        return cie

    def _fde(self, index: int) -> Fde:
        entry = self._table.entry(index)
        return Fde(
            index=index,
            offset=entry["offset"],
            cie=self._cie(entry["cie_entry"]),
            pc_begin=entry["pc_begin"],
            pc_end=entry["pc_begin"] + entry["pc_range"],
            lsda=entry["lsda"] if entry["has_lsda"] else None,
            first_row=entry["first_row"],
            row_count=entry["row_count"],
        )

    def fdes(self) -> Iterator[Fde]:
        """The well-formed FDEs, in section order."""
        kinds = self._table.entry_arrays()[0]
        for index, kind in enumerate(kinds):
            if kind == ENTRY_FDE:
                yield self._fde(index)

    def cies(self) -> Iterator[Cie]:
        kinds = self._table.entry_arrays()[0]
        for index, kind in enumerate(kinds):
            if kind == ENTRY_CIE:
                yield self._cie(index)

    # ---- rows ---------------------------------------------------------------------------------
    def row_arrays(self) -> tuple[array.array[int], array.array[int]]:
        """(row start addresses as array('Q'), row state ids as array('I')): every row of every
        entry, entries in section order. `state(i)` decodes a state id."""
        if self._row_arrays is None:
            addresses, states = self._table.rows()
            starts = array.array("Q")
            starts.frombytes(addresses)
            ids = array.array("I")
            ids.frombytes(states)
            self._row_arrays = (starts, ids)
        return self._row_arrays

    def _rule(self, raw: tuple[int, int, int, int]) -> Rule:
        kind, register, value, expr_len = raw
        rule_kind = RuleKind(kind)
        if rule_kind in _EXPRESSION_KINDS:
            return Rule(rule_kind, expression=bytes(self._data[value : value + expr_len]))
        if rule_kind == RuleKind.REGISTER:
            return Rule(rule_kind, register=register)
        if rule_kind == RuleKind.CFA_REG_OFFSET:
            return Rule(rule_kind, register=register, offset=value)
        if rule_kind in (RuleKind.OFFSET, RuleKind.VAL_OFFSET):
            return Rule(rule_kind, offset=value)
        return Rule(rule_kind)

    def state(self, state_id: int) -> tuple[Rule, dict[int, Rule]]:
        """(CFA rule, {column: rule}) of an interned row state."""
        cfa, columns = self._table.state(state_id)
        return self._rule(cfa), {column: self._rule(rule) for column, rule in columns}

    def rows(self, fde: Fde) -> list[Row]:
        starts, ids = self.row_arrays()
        out = []
        last = fde.first_row + fde.row_count
        for i in range(fde.first_row, last):
            if starts[i] >= fde.pc_end and fde.pc_end > fde.pc_begin:
                break  # advanced past the FDE: never in force (readelf still prints these rows)
            cfa, registers = self.state(ids[i])
            out.append(Row(starts[i], self._row_end(fde, i), cfa, registers))
        return out

    def _row_end(self, fde: Fde, row_index: int) -> int:
        """A row ends where the next begins, and never past its FDE: an advance beyond pc_end
        leaves rows that are never in force (DWARF 5 §6.4.1 rows cover [pc_begin, pc_end))."""
        starts, _ = self.row_arrays()
        next_start = starts[row_index + 1] if row_index + 1 < fde.first_row + fde.row_count else fde.pc_end
        return max(starts[row_index], min(next_start, fde.pc_end))

    def lookup(self, address: int) -> tuple[Fde, Row]:
        """The FDE and row in force at svma `address`; NoUnwindInfo if no FDE covers it."""
        found = self._table.lookup(address)
        if found is None:
            raise NoUnwindInfo(f"no FDE in {self.name} covers 0x{address:x}")
        entry_index, row_index = found
        return self._row_at(self._fde(entry_index), row_index)

    def _row_at(self, fde: Fde, row_index: int) -> tuple[Fde, Row]:
        starts, ids = self.row_arrays()
        cfa, registers = self.state(ids[row_index])
        return fde, Row(starts[row_index], self._row_end(fde, row_index), cfa, registers)

    def fde_at_offset(self, offset: int) -> Fde | None:
        index = self._table.entry_at(offset)
        if index is None or self._table.entry_arrays()[0][index] != ENTRY_FDE:
            return None
        return self._fde(index)

    # ---- output -------------------------------------------------------------------------------
    def render(self, *, raw: bool = False, fd: int | None = None) -> bytes | None:
        """readelf -wF text of the section body (-wf with raw); written to `fd` if given."""
        return self._table.render(raw=raw, fd=-1 if fd is None else fd)


@dataclass(frozen=True, slots=True)
class EhFrameHdr:
    """`.eh_frame_hdr`: its header and sorted (initial location, FDE address) search table."""

    address: int
    eh_frame_ptr: int
    table_encoding: int
    locations: array.array[int]
    fde_addresses: array.array[int]

    @classmethod
    def parse(cls, data: bytes | memoryview, address: int, eh_frame_address: int = 0, eh_frame_size: int = 0) -> EhFrameHdr:
        _version, _ptr_enc, _count_enc, table_enc, eh_frame_ptr, entries = _core.parse_eh_frame_hdr(
            data, address, eh_frame_address, eh_frame_size
        )
        pairs = array.array("Q")
        pairs.frombytes(entries)
        return cls(address, eh_frame_ptr, table_enc, pairs[0::2], pairs[1::2])

    def find(self, address: int) -> int | None:
        """svma of the FDE whose initial location is the last one <= address (binary search)."""
        i = bisect.bisect_right(self.locations, address)
        return self.fde_addresses[i - 1] if i else None


class UnwindInfo:
    """All call frame information of one ELF file: `.eh_frame` (with `.eh_frame_hdr`), and
    `.debug_frame` from the file or from its separate debug file. Lookups try `.eh_frame` first
    (what the runtime uses), then `.debug_frame`."""

    def __init__(self, path: str, sections: list[CfiSection], hdr: EhFrameHdr | None, hdr_error: str | None) -> None:
        self.path = path
        self.sections = sections
        self.eh_frame_hdr = hdr
        #: why `.eh_frame_hdr` is not used (absent or invalid); lookups then use the linear index
        self.eh_frame_hdr_error = hdr_error

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, separate_debug: bool = True, strict: bool = True) -> UnwindInfo:
        with ElfFile.open(os.fspath(path)) as elf:
            return cls.from_elf(elf, separate_debug=separate_debug, strict=strict)

    @classmethod
    def from_elf(cls, elf: ElfFile, *, separate_debug: bool = True, strict: bool = True) -> UnwindInfo:
        """The CFI of an ELF file already open (the sections keep its bytes alive)."""
        sources = frame_sources(elf, separate_debug=separate_debug)
        files = {file for file, _section, _kind in sources} | {elf}
        with CheckedRead(*(file.check_unchanged for file in files)):  # no table from a truncated file's zeros
            sections = list(_open_sections(sources, strict))
        for file in {file for file, _section, _kind in sources} - {elf}:
            file.close()  # the sections keep the bytes they use
        hdr: EhFrameHdr | None = None
        hdr_error: str | None = "no .eh_frame_hdr section"
        eh_frame = next((s for s in sections if s.kind == EH_FRAME), None)
        hdr_section = elf.section(".eh_frame_hdr")
        if hdr_section is not None and eh_frame is not None:
            try:
                size = len(eh_frame._data)
                hdr = EhFrameHdr.parse(bytes(elf.section_data(hdr_section)), hdr_section.addr, eh_frame.address, size)
                hdr_error = None
            except CfiError as error:
                hdr_error = str(error)
        return cls(elf.path, sections, hdr, hdr_error)

    def lookup(self, address: int) -> tuple[CfiSection, Fde, Row]:
        """Section, FDE and row in force at svma `address`."""
        for section in self.sections:
            if section.kind == EH_FRAME and self.eh_frame_hdr is not None:
                fde_address = self.eh_frame_hdr.find(address)
                fde = section.fde_at_offset(fde_address - section.address) if fde_address is not None else None
                if fde is not None and fde.pc_begin <= address < fde.pc_end:
                    found = section._table.lookup(address)
                    if found is not None and found[0] == fde.index:
                        return (section, *section._row_at(fde, found[1]))
                continue
            try:
                return (section, *section.lookup(address))
            except NoUnwindInfo:
                continue
        raise NoUnwindInfo(f"{self.path}: no FDE covers 0x{address:x}")


def cfi_sections(elf: ElfFile, *, strict: bool = True) -> Iterator[CfiSection]:
    """The CFI sections of an ELF file, in section header order, parsed and evaluated (opened by
    frame_sections.section_table; empty and NOBITS sections are left out)."""
    return _open_sections([(elf, section, kind) for section, kind, skip in frame_sections(elf) if skip is None], strict)


def _open_sections(sources: Sequence[tuple[ElfFile, Section, int]], strict: bool) -> Iterator[CfiSection]:
    """CfiSections of frame sources (frame_sections.frame_sources), in their order."""
    bases: dict[ElfFile, SectionBases] = {}
    for file, section, kind in sources:
        file_bases = bases.get(file) or bases.setdefault(file, SectionBases(file))
        data, table = section_table(file, section, kind, file_bases)
        yield CfiSection(data, kind, section.addr, name=section.name, path=file.path,
                         address_size=file_bases.address_size, strict=strict, table=table)
