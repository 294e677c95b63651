"""The rows a module's compact table takes from its machine code (`--synth missing|repair`): the
synthesized view of the file (synth.py: the file checked, then native/core/synth_table.c collects
its rows with the code's word where the CFI is missing or proven wrong, every FDE marked declared,
corrected or synthesized), handed to the compact-table builder as a CFI table and an origin per FDE.
The builder lays the corrected and synthesized FDEs' rows over the module's own tables
(compact_table.h, fu_compact_overlay_of_table); declared rows stay as the module's tables have
them, so that everything the CFI states rightly unwinds exactly as without synthesized rows.
"""

from __future__ import annotations

import os

from fastunwind import _core
from fastunwind.image import ModuleImage
from fastunwind.synth import synthesize

#: synth.py's origin names -> compact_table.h's fu_compact_origin
ORIGIN_CODES = {"declared": _core.COMPACT_ORIGIN_DECLARED, "corrected": _core.COMPACT_ORIGIN_CORRECTED,
                "synthesized": _core.COMPACT_ORIGIN_SYNTHESIZED}


def view(image: ModuleImage, synth: str) -> tuple[_core.CfiTable, bytes]:
    """The synthesized view `synth` ("missing" or "repair") of the image's file, and the origin
    code of each of its FDEs (u8, in order)."""
    if image.memory_copy is None:
        synthesis = synthesize(image.path, synth)
    else:  # synth.py's check reads a file: the copy's bytes as one, in memory
        copy = os.memfd_create("fastunwind-copy")
        try:
            os.write(copy, image.memory_copy)
            synthesis = synthesize(f"/proc/self/fd/{copy}", synth)
        finally:
            os.close(copy)
    return synthesis.table, bytes(ORIGIN_CODES[r.origin] for r in synthesis.ranges)
