"""An ELF file's executable segment mapped at a fixed base, for walks over hand-built stacks: the
walker's tables are the file's own, its stack bytes the test's."""
from __future__ import annotations

from pathlib import Path

from fastunwind.address_space import AddressSpace, ImageCache, Mapping
from fastunwind.elf import PF_X, PT_LOAD

BASE = 0x7F0000000000  #: where the file is mapped (avma = svma + BASE)


def map_code(path: Path) -> tuple[AddressSpace, int]:
    """`path` mapped at BASE (its executable segment), and its entry point's avma."""
    image = ImageCache().get(str(path))
    assert image is not None
    code = next(s for s in image.elf.segments if s.type == PT_LOAD and s.flags & PF_X)
    mapping = Mapping(BASE + code.vaddr, BASE + code.vaddr + code.memsz, code.offset, str(path), image, BASE)
    return AddressSpace([mapping]), BASE + image.elf.entry
