"""The separate debug files `readelf --debug-dump=frames` follows after a file, found as binutils
2.40's readelf finds them (dwarf.c, load_separate_debug_info): `.gnu_debugaltlink`,
`.gnu_debuglink` (CRC-checked; then the linked file's own links), `.debug_sup` and the build-id,
searched in readelf's order and listed most recently found first.

`fastunwind.elf.find_debug_file` is the loader's (and perf's) search for one file's `.debug_frame`;
this module reproduces readelf's, which cfi_print needs to print what readelf prints.
"""

from __future__ import annotations

import os

from fastunwind.elf import ElfFile, file_crc32
from fastunwind.errors import ElfError

#: readelf's debuglink search roots (binutils 2.40 dwarf.c, load_separate_debug_info)
_DEBUGDIR = "/lib/debug"
_EXTRA_DEBUG_ROOT1 = "/usr/lib/debug"
_EXTRA_DEBUG_ROOT2 = "/usr/lib/debug/usr"
#: readelf's build-id prefixes (load_build_id_debug_file); the last lacks its slash there too
_BUILD_ID_PREFIXES = ("", ".debug/", "/usr/lib/debug/", "/usr/lib/debug/usr/", "/usr/lib64/debug/", "/usr/lib64/debug/usr")
#: a debuglink chain longer than this is a loop
MAX_LINK_DEPTH = 8


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _debuglink_candidates(main_path: str, name: str) -> list[str]:
    canon_dir = os.path.dirname(os.path.realpath(main_path)) + "/"
    return [
        name,
        f".debug/{name}",
        f"{canon_dir}{name}",
        f"{canon_dir}.debug/{name}",
        f"{_EXTRA_DEBUG_ROOT1}/{name}",
        f"{_EXTRA_DEBUG_ROOT1}/{canon_dir}/{name}",  # readelf's "%s/%s/%s": doubled slashes kept
        f"{_EXTRA_DEBUG_ROOT2}/{name}",
        f"{_DEBUGDIR}/{name}",
    ]


def _follow_debuglink(elf: ElfFile, path: str) -> str | None:
    link = elf.debuglink
    if link is None:
        return None
    name, crc = link
    for candidate in _debuglink_candidates(path, name):
        if _is_elf(candidate) and file_crc32(candidate) == crc:
            if os.path.realpath(candidate) == os.path.realpath(path):
                return None
            return candidate
    return None


def _follow_build_id(elf: ElfFile) -> str | None:
    note = elf.section(".note.gnu.build-id")
    build_id = elf.build_id
    if note is None or note.size < 0x18 or build_id is None or len(build_id) < 8:
        return None
    tail = build_id[1:].hex()
    for prefix in _BUILD_ID_PREFIXES:
        candidate = f"{prefix}.build-id/{build_id[0]:02x}/{tail}.debug"
        if _is_elf(candidate):
            return candidate
    return None


def _follow_debugaltlink(elf: ElfFile, path: str) -> str | None:
    """`.gnu_debugaltlink` (dwz): a NUL-terminated name, then a build-id of at least 20 bytes;
    searched like a debuglink, without a check of the build-id (readelf does not check it)."""
    section = elf.section(".gnu_debugaltlink")
    if section is None:
        return None
    data = bytes(elf.section_data(section))
    name, nul, build_id = data.partition(b"\0")
    if not name or not nul or len(build_id) < 0x14:
        return None
    for candidate in _debuglink_candidates(path, name.decode(errors="replace")):
        if _is_elf(candidate):
            return None if os.path.realpath(candidate) == os.path.realpath(path) else candidate
    return None


def _follow_debug_sup(elf: ElfFile, path: str) -> str | None:
    """`.debug_sup` (DWARF 5 §7.3.6): version (2 bytes), is_supplementary (1), file name; a
    relative name is relative to the directory of `path` as given."""
    section = elf.section(".debug_sup")
    if section is None:
        return None
    data = bytes(elf.section_data(section))
    if len(data) < 5 or data[2] != 0:
        return None
    name, nul, _ = data[3:].partition(b"\0")
    if not nul:
        return None
    filename = name.decode(errors="replace")
    if not filename.startswith("/") and "/" in path:
        filename = f"{path.rsplit('/', 1)[0]}/{filename}"
    return filename if _is_elf(filename) else None


def separate_debug_files(elf: ElfFile, path: str) -> tuple[list[str], list[str]]:
    """The separate debug files readelf -wF shows after `path`, in the order it shows them, and
    the notices it prints while finding them (before anything else)."""
    if not elf.sections:  # readelf: a file without section headers has no links to follow
        return [], []
    found: list[str] = []
    notices: list[str] = []

    def links(current: ElfFile, current_path: str, depth: int) -> None:
        for follow in (_follow_debugaltlink, _follow_debuglink):
            linked = follow(current, current_path)
            if linked is None:
                continue
            found.insert(0, linked)
            if depth < MAX_LINK_DEPTH:
                try:
                    with ElfFile.open(linked) as linked_elf:
                        links(linked_elf, linked, depth + 1)
                except ElfError:
                    pass
        supplementary = _follow_debug_sup(current, current_path)
        if supplementary is not None:
            notices.append(f"{current_path}: Found supplementary debug file: {supplementary}\n\n")
            found.insert(0, supplementary)
        built = _follow_build_id(current)
        if built is not None:
            found.insert(0, built)

    links(elf, path, 0)
    return found, notices
