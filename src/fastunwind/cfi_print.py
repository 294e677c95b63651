"""What `readelf --debug-dump=frames-interp` (-wF) and `--debug-dump=frames` (-wf) print for a file.

The section bodies come from the C core (native/core/cfi_print.c); the sections are opened as the
walker opens them (frame_sections.section_table). This module reproduces the file-level rules
of binutils 2.40 readelf around them, so that `fastunwind table FILE` and readelf can be diffed:

- frame sections are shown in section header order: `.eh_frame`, and `.debug_frame` /
  `.zdebug_frame`; an empty one prints "Section '...' has no debugging data.", a NOBITS one
  "section '...' has the NOBITS type - its contents are unreliable.";
- readelf follows links by default: after the file it shows the frame sections of the separate
  debug files it finds (elf/debug_files.py); only then do its section headers say
  "(loaded from FILE)".

A file truncated in place while it is printed (native/core/mapped_file.h) reads as zeros past the
cut, and the text from them would look like the file's: the text is held in an anonymous temporary
file (not in memory: libLLVM-14's is 63 MB) until every file printed is checked, and written
only then; a changed file raises FileChangedError with nothing written.
"""

from __future__ import annotations

from fastunwind.elf import CheckedRead, ElfFile
from fastunwind.elf.debug_files import separate_debug_files
from fastunwind.errors import CfiError, ElfError
from fastunwind.frame_sections import SKIP_EMPTY, SKIP_NOBITS, SectionBases, frame_sections, section_table
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import BinaryIO


#: the held text goes to the output in chunks of this size
COPY_CHUNK_BYTES = 1 << 20


def _write(out: BinaryIO, text: str) -> None:
    out.write(text.encode())


def render_file(path: str, out: BinaryIO, *, raw: bool = False, follow_links: bool = True) -> list[CfiError]:
    """Write what readelf -wF (-wf with raw) prints for `path` to `out`; return the CFI errors met
    (their entries are shown without rows, as far as they decode). FileChangedError, and nothing
    written, if a file it reads was truncated in place meanwhile."""
    import tempfile  # here, not at the top: the short commands' imports (docs/DESIGN.md, "Start-up and caches")

    with tempfile.TemporaryFile(buffering=0) as held:
        errors = _render_file(path, held, raw, follow_links)
        _copy(held, out)
    return errors


def _copy(held: BinaryIO, out: BinaryIO) -> None:
    """All of `held` (written through its descriptor) to `out`, a MiB at a time."""
    held.seek(0)
    while chunk := held.read(COPY_CHUNK_BYTES):
        out.write(chunk)


def _render_file(path: str, out: BinaryIO, raw: bool, follow_links: bool) -> list[CfiError]:
    errors: list[CfiError] = []
    with ElfFile.open(path) as elf:
        files = [(path, elf)]
        if follow_links:
            debug_paths, notices = separate_debug_files(elf, path)
            for notice in notices:
                _write(out, notice)
            for debug_path in debug_paths:
                try:
                    files.append((debug_path, ElfFile.open(debug_path)))
                except ElfError as error:
                    errors.append(CfiError(f"{debug_path}: {error}"))
        # readelf names the file in its headers only when it found separate debug files
        show_origin = len(files) > 1
        try:
            for file_path, file_elf in files:
                # a file truncated while printed: FileChangedError, and render_file writes none of the text
                with CheckedRead(file_elf.check_unchanged):
                    errors.extend(_render_sections(file_elf, file_path, out, raw, show_origin))
        finally:
            for _, file_elf in files[1:]:
                file_elf.close()
    return errors


def _render_sections(elf: ElfFile, path: str, out: BinaryIO, raw: bool, show_origin: bool) -> list[CfiError]:
    errors: list[CfiError] = []
    bases = SectionBases(elf)
    for section, kind, skip in frame_sections(elf):
        if skip == SKIP_EMPTY:
            _write(out, f"\nSection '{section.name}' has no debugging data.\n")
            continue
        if skip == SKIP_NOBITS:
            _write(out, f"section '{section.name}' has the NOBITS type - its contents are unreliable.\n")
            continue
        _data, table = section_table(elf, section, kind, bases)
        origin = f" (loaded from {path})" if show_origin else ""
        _write(out, f"Contents of the {section.name} section{origin}:\n\n")
        out.flush()
        fileno = _fileno(out)
        if fileno is not None:
            table.render(raw=raw, fd=fileno)
        else:
            out.write(table.render(raw=raw) or b"")
        errors.extend(CfiError(message) for _, message in table.errors())
    return errors


def _fileno(out: BinaryIO) -> int | None:
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):
        return None
