"""Address spaces: which module is mapped where, with the unwind tables the walker needs.

A `ModuleImage` is one ELF file opened once: its CFI (`.eh_frame`, and `.debug_frame` from the file
or its separate debug file), its read-only PT_LOAD bytes (the walker may read them), its build-id.
An `AddressSpace` is a set of executable mappings of images; `to_core()` hands it to the C walker.

A mapping [start, end) of file offset `pgoff` places the file's svma `s` at avma `s + bias`, where
bias = start - pgoff + p_offset - p_vaddr of the PT_LOAD segment that contains pgoff (gABI
"Program Loading": a segment's file offset and vaddr are congruent modulo the page size).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from fastunwind import _core
from fastunwind.cfi import DEBUG_FRAME, EH_FRAME, UnwindInfo
from fastunwind.elf import ElfFile
from fastunwind.errors import ElfError, FastunwindError

PT_LOAD = 1
PF_X, PF_W = 1, 2
PAGE_SIZE = 4096  #: x86-64 Linux mappings are 4 KiB-granular


class ModuleImage:
    """An ELF file's unwinding data, loaded once and shared by every mapping of it."""

    def __init__(self, path: str, elf: ElfFile, unwind: UnwindInfo) -> None:
        self.path = path
        self.elf = elf
        self.unwind = unwind
        self.build_id = elf.build_id
        tables = {section.kind: section._table for section in reversed(unwind.sections)}
        self.eh_frame = tables.get(EH_FRAME)
        self.debug_frame = tables.get(DEBUG_FRAME)
        #: read-only PT_LOAD bytes by svma: constants an expression may read
        self.segments = [
            (segment.vaddr, elf.segment_data(segment))
            for segment in elf.segments
            if segment.type == PT_LOAD and not segment.flags & PF_W and segment.filesz
        ]

    @classmethod
    def load(cls, path: str) -> ModuleImage:
        elf = ElfFile.open(path)
        try:
            unwind = UnwindInfo.open(path, strict=False)
        except FastunwindError:
            elf.close()
            raise
        return cls(path, elf, unwind)

    def bias_for_mapping(self, start: int, pgoff: int) -> int | None:
        """avma - svma for a mapping at `start` of file offset `pgoff`, or None if no PT_LOAD
        segment holds that offset."""
        for segment in self.elf.segments:
            # mappings start on a page; the segment's first page begins below p_offset
            first_page = segment.offset - segment.offset % PAGE_SIZE
            if segment.type == PT_LOAD and first_page <= pgoff < segment.offset + segment.filesz:
                return start - pgoff + segment.offset - segment.vaddr
        return None


@dataclass(frozen=True, slots=True)
class Mapping:
    """An executable mapping of a module image."""

    start: int
    end: int
    pgoff: int
    path: str
    image: ModuleImage | None  #: None: a file we could not read (anonymous, JIT, deleted)
    bias: int


class ImageCache:
    """Module images by path, opened once. A path whose file cannot be read is remembered as such."""

    def __init__(self) -> None:
        self._images: dict[str, ModuleImage | None] = {}

    def get(self, path: str) -> ModuleImage | None:
        if path not in self._images:
            try:
                self._images[path] = ModuleImage.load(path) if os.path.isfile(path) else None
            except (OSError, ElfError):
                self._images[path] = None
        return self._images[path]


class AddressSpace:
    """Executable mappings, sorted, non-overlapping; `modules` index them for the walker."""

    def __init__(self, mappings: Iterable[Mapping]) -> None:
        self.mappings = sorted(mappings, key=lambda m: m.start)
        self._core: _core.AddressSpace | None = None

    def to_core(self) -> _core.AddressSpace:
        if self._core is None:
            self._core = _core.AddressSpace(
                [
                    (
                        m.start,
                        m.end,
                        m.bias,
                        m.image.eh_frame if m.image else None,
                        m.image.debug_frame if m.image else None,
                        m.image.segments if m.image else [],
                        index,
                    )
                    for index, m in enumerate(self.mappings)
                ]
            )
        return self._core

    def mapping_at(self, avma: int) -> Mapping | None:
        for m in self.mappings:
            if m.start <= avma < m.end:
                return m
        return None


def parse_proc_maps(text: str, images: ImageCache) -> AddressSpace:
    """An AddressSpace from /proc/PID/maps text: its executable file mappings."""
    mappings = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "x" not in fields[1] or not fields[5].startswith("/"):
            continue
        start_text, end_text = fields[0].split("-")
        start, end, pgoff = int(start_text, 16), int(end_text, 16), int(fields[2], 16)
        path = fields[5]
        image = images.get(path)
        bias = image.bias_for_mapping(start, pgoff) if image else None
        mappings.append(Mapping(start, end, pgoff, path, image if bias is not None else None, bias or 0))
    return AddressSpace(mappings)


def current_process(images: ImageCache | None = None) -> AddressSpace:
    with open("/proc/self/maps") as maps:
        return parse_proc_maps(maps.read(), images or ImageCache())
