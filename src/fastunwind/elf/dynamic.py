"""An ELF file's dynamic section: the libraries it needs, found as the dynamic loader finds them
(ld.so(8)), for `fastunwind compile --deps` (like ldd); the code the loader runs at load and exit.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from fastunwind.elf import PT_INTERP, ElfFile
from fastunwind.errors import FastunwindError

#: d_tag values (gABI "Dynamic Section")
DT_NULL, DT_NEEDED, DT_INIT, DT_FINI, DT_RPATH, DT_RUNPATH = 0, 1, 12, 13, 15, 29
#: the x86-64 multiarch directories the dynamic loader searches last (ld.so(8), Debian's multiarch)
DEFAULT_LIBRARY_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib",
                        "/usr/lib")
#: files one dependency closure may reach (libLLVM's has ~20; a bound against cycles of symlinks
#: and pathological graphs)
MAX_DEPENDENCIES = 4096


def _dynamic(path: str) -> tuple[list[str], list[str], str | None]:
    """(DT_NEEDED names, search directories of DT_RPATH/DT_RUNPATH with $ORIGIN expanded, PT_INTERP)."""
    with ElfFile.open(path) as elf:
        return _dynamic_of(elf, path)


def _entries(elf: ElfFile) -> Iterator[tuple[int, int]]:
    """(d_tag, d_val) of each entry of the .dynamic section, up to DT_NULL."""
    dynamic = elf.section(".dynamic")
    if dynamic is None:
        return
    data = bytes(elf.section_data(dynamic))
    entry = 16 if elf.elf_class == 64 else 8
    half = entry // 2
    for at in range(0, len(data) - entry + 1, entry):  # bounded by the section's size
        tag = int.from_bytes(data[at:at + half], "little")
        if tag == DT_NULL:
            return
        yield tag, int.from_bytes(data[at + half:at + entry], "little")


def init_and_fini(elf: ElfFile) -> list[int]:
    """The addresses of DT_INIT and DT_FINI (`_init`, `_fini`: code crti.o brings, without CFI, that
    the dynamic loader calls through no symbol a stripped file keeps)."""
    return [value for tag, value in _entries(elf) if tag in (DT_INIT, DT_FINI)]


def _dynamic_of(elf: ElfFile, path: str) -> tuple[list[str], list[str], str | None]:
    """_dynamic of the open file `elf` (at `path`, which $ORIGIN names)."""
    interpreter = None
    for segment in elf.segments:
        if segment.type == PT_INTERP:
            interpreter = bytes(elf.segment_data(segment)).split(b"\0")[0].decode(errors="replace")
    dynamic = elf.section(".dynamic")
    if dynamic is None or not 0 < dynamic.link < len(elf.sections):
        return [], [], interpreter
    strings = bytes(elf.section_data(elf.sections[dynamic.link]))

    def text(offset: int) -> str:
        end = strings.find(b"\0", offset)
        return strings[offset:end if end >= 0 else len(strings)].decode(errors="replace")

    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    for tag, value in _entries(elf):
        if value >= len(strings):
            continue
        if tag == DT_NEEDED:
            needed.append(text(value))
        elif tag in (DT_RPATH, DT_RUNPATH):
            origin = os.path.dirname(os.path.realpath(path))
            dirs = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in text(value).split(":") if d]
            (rpath if tag == DT_RPATH else runpath).extend(dirs)
    # ld.so(8): DT_RPATH only when there is no DT_RUNPATH; LD_LIBRARY_PATH between the two
    environment = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    return needed, ([] if runpath else rpath) + environment + runpath, interpreter


def _find_library(name: str, directories: Iterable[str]) -> str | None:
    if "/" in name:
        return name if os.path.isfile(name) else None
    for directory in [*directories, *DEFAULT_LIBRARY_DIRS]:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def with_dependencies(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """`paths` and every shared library they load, as ldd resolves them (DT_NEEDED through DT_RPATH,
    LD_LIBRARY_PATH, DT_RUNPATH, then the system directories; the program interpreter), each file
    once (by real path), in discovery order; and the names not found ("libfoo.so.1 (needed by X)")."""
    seen: dict[str, str] = {}
    missing: list[str] = []
    queue = list(paths)
    while queue and len(seen) < MAX_DEPENDENCIES:
        path = queue.pop(0)
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen[real] = path
        try:
            needed, directories, interpreter = _dynamic(path)
        except (FastunwindError, OSError):
            continue  # not an ELF file we can read: whoever opens it next (compile_images) reports it
        for name in ([interpreter] if interpreter else []) + needed:
            found = _find_library(name, directories)
            if found is None:
                missing.append(f"{name} (needed by {path})")
            else:
                queue.append(found)
    return list(seen.values()), missing
