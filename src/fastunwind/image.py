"""A module image: one ELF file opened once for unwinding, shared by every mapping of it.

It holds what the file says (its CFI sections, parsed and evaluated by the C core on first use, their
sizes, its read-only PT_LOAD bytes, its build-id) and where a mapping of it places its addresses
(`bias_for_mapping`). Opening one reads headers only: a module whose cached compact table holds
every row (tables/compact.py) is unwound without its DWARF tables ever being parsed.
The tables built from it (tables/compact.py, tables/eh_elf.py) are not made here: those modules
keep them in the image's `memo`, so the image never depends on them (address_space.ModuleImage
gives them back as properties).

A mapping [start, end) of file offset `pgoff` places the file's svma `s` at avma `s + bias`, where
bias = start - pgoff + p_offset - p_vaddr of the PT_LOAD segment the mapping maps (gABI "Program
Loading"); the rule is the C core's (core/elf_file.h fu_elf_mapping_bias), which the launcher uses
too (`bias_for_mapping`).
"""

from __future__ import annotations

import os
import _thread  # its lock alone: threading's import costs a CLI run ~4M instructions

from fastunwind import _core
from fastunwind.elf import CheckedRead, ElfFile
from fastunwind.errors import FastunwindError
from fastunwind.frame_sections import DEBUG_FRAME, EH_FRAME, SectionBases, frame_sources, section_table
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Self

#: the memo key of slow_row_tables
_SLOW_ROW_TABLES = "cfi.slow_rows"


class ModuleImage:
    """An ELF file's unwinding data, loaded once and shared by every mapping of it."""

    def __init__(self, path: str, elf: ElfFile) -> None:
        self.path = path
        self.elf = elf
        #: the bytes of a copy from a process's memory or a core (the vDSO), which `path` does not
        #: reopen (tables/synthesized.py hands them to synth.py as a file); None for a file
        self.memory_copy: bytes | None = None
        #: what the tables modules derived from this image (by their own keys: "compact", ...)
        self.memo: dict[str, Any] = {}
        with CheckedRead(elf.check_unchanged):
            self.build_id = elf.build_id
            #: the first .eh_frame and the first .debug_frame (of the file, else of its debug file)
            self._sources = {kind: (file, section) for file, section, kind in reversed(frame_sources(elf))}
        self.check_unchanged()
        self._tables: dict[int, _core.CfiTable] | None = None
        self._tables_lock = _thread.allocate_lock()
        #: read-only PT_LOAD bytes by svma: constants an expression may read
        self.segments = [(segment.vaddr, elf.segment_data(segment)) for segment in elf.loaded_segments(read_only=True)]

    def check_unchanged(self) -> None:
        """FileChangedError if the file, its debug file or a cache file a table derived from it is
        read from (a `_core.MappedFile` in `memo`) was truncated under its mapping (ElfFile
        .check_unchanged): for the end of each operation that read them."""
        self.elf.check_unchanged()
        for file, _section in self._sources.values():
            file.check_unchanged()
        for value in self.memo.values():
            if isinstance(value, _core.MappedFile):
                value.check()

    @classmethod
    def load(cls, path: str) -> Self:
        elf = ElfFile.open(path)
        try:
            return cls(path, elf)
        except FastunwindError:
            elf.close()
            raise

    def _cfi_tables(self) -> dict[int, _core.CfiTable]:
        """The C core's tables by kind, parsed and evaluated on first use (by one thread; the
        parse runs without the GIL)."""
        with self._tables_lock:
            if self._tables is None:
                self._tables = self._parse_tables(None)
            return self._tables

    def _parse_tables(self, ranges: bytes | None) -> dict[int, _core.CfiTable]:
        bases: dict[ElfFile, SectionBases] = {}
        tables = {}
        with CheckedRead(self.check_unchanged):
            for kind, (file, section) in self._sources.items():
                file_bases = bases.get(file) or bases.setdefault(file, SectionBases(file))
                tables[kind] = section_table(file, section, kind, file_bases, ranges)[1]
        return tables

    def slow_row_tables(self, ranges: bytes) -> tuple[_core.CfiTable | None, _core.CfiTable | None]:
        """(.eh_frame, .debug_frame) tables with only the FDEs the walker can ask in `ranges`, the
        slow rows of the image's compact table (CompactTable.slow_ranges): what the walker needs
        beside the compact table, for a fraction of the evaluation (libc: 7 slow rows in 28,491).
        The whole tables when they are parsed already. Made once (memo)."""
        if self._tables is not None:
            return self.eh_frame, self.debug_frame
        with self._tables_lock:
            tables = self.memo.get(_SLOW_ROW_TABLES)
            if tables is None:
                tables = self.memo[_SLOW_ROW_TABLES] = self._parse_tables(ranges)
        return tables.get(EH_FRAME), tables.get(DEBUG_FRAME)

    @property
    def process_entry(self) -> int:
        """Where a process starts running this file (ElfFile.process_entry; 0: nowhere): the
        walker's entry-code rule applies there only."""
        return self.elf.process_entry

    @property
    def cfi_parsed(self) -> bool:
        """Whether the DWARF tables were parsed (eh_frame, debug_frame, dwarf_row_count ask them)."""
        return self._tables is not None

    @property
    def eh_frame(self) -> _core.CfiTable | None:
        return self._cfi_tables().get(EH_FRAME)

    @property
    def debug_frame(self) -> _core.CfiTable | None:
        return self._cfi_tables().get(DEBUG_FRAME)

    def frame_sizes(self) -> tuple[int | None, int | None]:
        """Bytes of the .eh_frame and .debug_frame the tables are parsed from (None: no such
        section), from the section headers alone: stamped into the tables built from them, so that
        one built before a debug file was installed (or removed) is rebuilt."""
        sizes = {kind: file.section_data_size(section) for kind, (file, section) in self._sources.items()}
        return sizes.get(EH_FRAME), sizes.get(DEBUG_FRAME)

    def cache_key(self) -> tuple[int, bytes]:
        """(key kind, key) the tables built from this image are cached under: the build-id, or for a
        file without one a SHA-256 of its real path, size and mtime."""
        if self.build_id:
            return _core.COMPACT_KEY_BUILD_ID, bytes(self.build_id)
        st = os.stat(self.path)
        identity = f"{os.path.realpath(self.path)}\0{st.st_size}\0{st.st_mtime_ns}".encode()
        import hashlib  # only for files without a build-id: loading OpenSSL costs ~2.5 ms of start-up

        return _core.COMPACT_KEY_FILE_HASH, hashlib.sha256(identity).digest()

    compact_key = cache_key  #: its name before the eh_elf cache used it too

    def cache_name(self) -> str:
        """The file name (without suffix) of this image's entries in the caches (cache.py)."""
        kind, key = self.cache_key()
        return key.hex() if kind == _core.COMPACT_KEY_BUILD_ID else f"nobuildid-{key.hex()}"

    def dwarf_row_count(self) -> int:
        """Rows of .eh_frame + .debug_frame (parsing them): stamped into the eh_elfs built from them,
        so that one built before a debug file was installed (or removed) is rebuilt."""
        return sum(t.row_count for t in (self.eh_frame, self.debug_frame) if t is not None)

    def bias_for_mapping(self, start: int, end: int, pgoff: int) -> int | None:
        """avma - svma for an executable mapping [start, end) of file offset `pgoff`, or None if no
        PT_LOAD segment holds that offset: the C core's rule (core/elf_file.h fu_elf_mapping_bias,
        the launcher's too). Several segments may hold the mapping's first page (lld and mold start
        the executable segment in the file page where the read-only one ends): the bias is the one
        of the segment the mapping really maps."""
        return self.elf.mapping_bias(start, end, pgoff)
