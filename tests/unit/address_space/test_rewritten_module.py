"""parse_proc_maps on a mapping whose file no longer reads as the ELF file it was opened as (a build
rewriting a library in place while a process maps it: `record --bpf -a` once stopped on another
job's extension module, its section headers past the file's new end): the mapping has no image,
as one whose file does not load, and the other mappings keep theirs."""

from __future__ import annotations

import pytest

from fastunwind.address_space import ImageCache, ModuleImage, parse_proc_maps
from fastunwind.errors import ElfError

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBM = "/lib/x86_64-linux-gnu/libm.so.6"
PAGE = 0x1000


def maps_line(image: ModuleImage, base: int) -> str:
    """/proc/PID/maps's line of the image's executable segment, loaded at `base`."""
    segment = next(s for s in image.elf.segments if s.type == 1 and s.flags & 1)  # PT_LOAD, PF_X
    start, offset = base + segment.vaddr & ~(PAGE - 1), segment.offset & ~(PAGE - 1)
    end = base + segment.vaddr + segment.memsz + PAGE - 1 & ~(PAGE - 1)
    return f"{start:x}-{end:x} r-xp {offset:08x} 00:00 0 {image.path}\n"


def test_a_module_that_no_longer_reads_as_elf_is_a_mapping_without_image(monkeypatch: pytest.MonkeyPatch) -> None:
    images = ImageCache()
    libc_image, rewritten = images.get(LIBC), images.get(LIBM)
    assert libc_image is not None and rewritten is not None
    maps = maps_line(libc_image, 0x7F00_0000_0000) + maps_line(rewritten, 0x7F10_0000_0000)
    assert all(m.image is not None for m in parse_proc_maps(maps, images).mappings)
    original = ModuleImage.bias_for_mapping

    def bias(image: ModuleImage, start: int, end: int, pgoff: int) -> int | None:
        if image is rewritten:
            raise ElfError(f"{LIBM}: section header 0 (e_shoff) at offset 0x1000 extends beyond the end of the file")
        return original(image, start, end, pgoff)

    monkeypatch.setattr(ModuleImage, "bias_for_mapping", bias)
    libc, libm = parse_proc_maps(maps, images).mappings
    assert libm.path == LIBM and libm.image is None and libm.bias == 0
    assert libc.image is libc_image and libc.bias == 0x7F00_0000_0000
