"""The one way to open an ELF file's call frame information sections: which sections carry CFI
(`frame_sections`), which of them unwinding uses, with a separate debug file's `.debug_frame`
(`frame_sources`), and the C core's table of one of them (`section_table`), with the bases
(`.text`, `.got`) and read-only segments its pointer encodings may need. `cfi` (the API),
`image` (the walker's modules) and `cfi_print` (readelf's text) all open sections here.

A module of its own, below cfi.py: `fastunwind table`'s readelf path imports it without cfi.py's
dataclass API (a few ms of every CLI start).
"""

from __future__ import annotations

from collections.abc import Iterator

from fastunwind import _core
from fastunwind.elf import SHT_NOBITS, ElfFile, Section, find_debug_file

EH_FRAME = 0  #: .eh_frame (LSB 5.0 §10.6): CIE id 0, pointer encodings, relative CIE pointers
DEBUG_FRAME = 1  #: .debug_frame (DWARF 5 §6.4.1): CIE id all ones, section-offset CIE pointers

#: why a frame section is not opened (frame_sections' third field), as readelf words it
SKIP_EMPTY = "empty"
SKIP_NOBITS = "nobits"


def frame_section_kind(section: Section) -> int | None:
    """EH_FRAME, DEBUG_FRAME, or None for any other section."""
    if section.name == ".eh_frame":
        return EH_FRAME
    if section.name in (".debug_frame", ".zdebug_frame"):
        return DEBUG_FRAME
    return None


def frame_sections(elf: ElfFile) -> Iterator[tuple[Section, int, str | None]]:
    """(section, kind, skip reason) of every CFI section, in section header order. The reason is
    None for a section to open, SKIP_EMPTY for one of size 0, SKIP_NOBITS for one without contents
    in the file (a separate debug file's NOBITS .eh_frame)."""
    for section in elf.sections:
        kind = frame_section_kind(section)
        if kind is None:
            continue
        reason = SKIP_EMPTY if section.size == 0 else SKIP_NOBITS if section.type == SHT_NOBITS else None
        yield section, kind, reason


def frame_sources(elf: ElfFile, *, separate_debug: bool = True) -> list[tuple[ElfFile, Section, int]]:
    """(file, section, kind) of the CFI sections unwinding reads, in section header order: the
    file's own, and where it has no `.debug_frame` with contents, the `.debug_frame` of its
    separate debug file (find_debug_file), which is opened here and stays open for its section;
    the caller closes it."""
    sources = [(elf, section, kind) for section, kind, skip in frame_sections(elf) if skip is None]
    if separate_debug and not any(kind == DEBUG_FRAME for _, _, kind in sources):
        debug_path = find_debug_file(elf)
        if debug_path:
            debug_elf = ElfFile.open(debug_path)
            debug = [(debug_elf, section, kind) for section, kind, skip in frame_sections(debug_elf)
                     if skip is None and kind == DEBUG_FRAME]
            if not debug:
                debug_elf.close()
            sources.extend(debug)
    return sources


class SectionBases:
    """What the pointer encodings of an ELF file's CFI sections are relative to (LSB 5.0 §10.5):
    `.text` (DW_EH_PE_textrel), `.got` (DW_EH_PE_datarel), and the PT_LOAD bytes an indirect
    pointer (DW_EH_PE_indirect) is read from. Computed once per file."""

    def __init__(self, elf: ElfFile) -> None:
        self.address_size = 8 if elf.elf_class == 64 else 4
        self.text_base, self.data_base = elf.pointer_bases()
        self.segments = [(s.vaddr, elf.segment_data(s)) for s in elf.loaded_segments()]


def section_table(elf: ElfFile, section: Section, kind: int, bases: SectionBases | None = None,
                  ranges: bytes | None = None) -> tuple[bytes | memoryview, _core.CfiTable]:
    """(the section's relocated bytes, the C core's parsed and evaluated table of them); with
    `ranges` ((start, end) u64 svma pairs), only the FDEs lookups in them can return are evaluated
    (cfi.h, fu_cfi_table_evaluate_ranges)."""
    bases = bases or SectionBases(elf)
    data = elf.relocated_section_data(section)
    return data, _core.CfiTable(data, kind, section.addr, bases.address_size, bases.text_base, bases.data_base,
                                bases.segments, ranges)
