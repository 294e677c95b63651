"""Which ELF sections carry call frame information, and how the C core is told their kind."""

from __future__ import annotations

from fastunwind.elf import Section

EH_FRAME = 0  #: .eh_frame (LSB 5.0 §10.6): CIE id 0, pointer encodings, relative CIE pointers
DEBUG_FRAME = 1  #: .debug_frame (DWARF 5 §6.4.1): CIE id all ones, section-offset CIE pointers


def frame_section_kind(section: Section) -> int | None:
    """EH_FRAME, DEBUG_FRAME, or None for any other section."""
    if section.name == ".eh_frame":
        return EH_FRAME
    if section.name in (".debug_frame", ".zdebug_frame"):
        return DEBUG_FRAME
    return None
