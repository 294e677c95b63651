"""avma - svma of an executable mapping, for every linker and layout: the bias comes from the
segment the mapping really maps. lld and mold start the executable PT_LOAD in the file page where
the read-only one ends, so the page at the mapping's offset holds two segments; picking the first
put every frame of every Rust program (rust-lld) one page off.

Checked on the running program: the bytes at `main`'s avma, read from /proc/PID/mem, are the file's
bytes of `main`."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from fastunwind.address_space import ImageCache, parse_proc_maps
from fastunwind.elf import ElfFile

from tests.support.linkers import LAYOUTS, build_linked


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bias_maps_main_to_its_bytes_in_the_running_program(layout: str, tmp_path: Path) -> None:
    program = build_linked(layout, tmp_path)
    with ElfFile.open(program) as elf:
        main = next(s for s in elf.symbols() if s.name == "main")
        offset = next(seg.offset + main.value - seg.vaddr for seg in elf.segments
                      if seg.type == 1 and seg.vaddr <= main.value < seg.vaddr + seg.filesz)
    expected = program.read_bytes()[offset:offset + 32]
    process = subprocess.Popen([str(program), "5"], stdout=subprocess.DEVNULL)
    try:
        maps = Path(f"/proc/{process.pid}/maps")
        deadline = time.monotonic() + 5
        while str(program) not in maps.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)  # the program's own mappings come after exec
        space = parse_proc_maps(maps.read_text(), ImageCache())
        mapping = next(m for m in space.mappings if m.path == str(program))
        avma = main.value + mapping.bias
        assert mapping.start <= avma < mapping.end, f"{layout}: main at {avma:#x} outside {mapping}"
        with open(f"/proc/{process.pid}/mem", "rb") as memory:
            memory.seek(avma)
            assert memory.read(32) == expected, f"{layout}: bias {mapping.bias:#x} puts main elsewhere"
    finally:
        process.kill()
        process.wait()
