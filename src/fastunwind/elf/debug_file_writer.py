"""Write a separate debug file for an ELF file: the layout `objcopy --only-keep-debug` gives one, with
the sections a caller provides (synth: `.debug_frame`).

    ELF header        the input's (type, machine, entry, flags), e_phoff and e_phnum kept
    program headers   the input's, at the same offset; the file bytes of every segment gone
                      (p_filesz 0) but those of the sections kept below (the first PT_LOAD keeps
                      the file's start up to them, as it maps the headers)
    notes, .interp    every allocated SHT_NOTE section and the interpreter's name, at their offsets
                      in the input (the build-id among them: gdb, perf and libdw match a debug file
                      to its file by it; readelf wants PT_INTERP's name)
    provided sections `.debug_frame`, ...: SHT_PROGBITS, not allocated
    .shstrtab
    section headers   [0] null; every allocated section of the input, in order, SHT_NOBITS (its
                      address and size kept: tools map addresses to sections by them) but those
                      kept, and but `.eh_frame` and `.eh_frame_hdr`: empty SHT_PROGBITS (readelf
                      warns that a NOBITS `.eh_frame` is unreliable, gdb that a debug file lacks
                      a section of its file; the CFI is the provided `.debug_frame`);
                      the provided sections; .shstrtab

Nothing of the input is needed at run time: only the notes' bytes are copied. A debug file is
found by its build-id as `<debug-file-directory>/.build-id/<first two hex digits>/<the rest>.debug`
(gdb's `set debug-file-directory`, perf's and libdw's /usr/lib/debug): `build_id_path` gives it.
"""

from __future__ import annotations

import os
import struct

from fastunwind import cache
from fastunwind.elf import (_LAYOUT_64, EI_NIDENT, ET_DYN, ET_EXEC, SHF_ALLOC, SHT_NOBITS, SHT_NOTE, SHT_PROGBITS,
                            SHT_STRTAB, PT_LOAD, ElfFile)
from fastunwind.errors import ElfError

#: sh_flags: sh_info holds a section index (remapped like sh_link)
SHF_INFO_LINK = 0x40
#: allocated sections kept empty (SHT_PROGBITS of size 0) rather than SHT_NOBITS: readelf warns that
#: a NOBITS `.eh_frame` is unreliable, and gdb that a debug file lacks a section its file has
EMPTIED = (".eh_frame", ".eh_frame_hdr")
#: notes further into the input than this would leave a long run of zeros before them: moved
#: instead (p_offset follows them)
MAX_NOTE_OFFSET = 1 << 20


def build_id_path(directory: str, build_id: bytes) -> str:
    """Where debuggers look for the debug file of `build_id` under a debug-file-directory."""
    digits = build_id.hex()
    return os.path.join(directory, ".build-id", digits[:2], digits[2:] + ".debug")


def _align(value: int, alignment: int) -> int:
    return value if alignment <= 1 else (value + alignment - 1) // alignment * alignment


def write_debug_file(elf: ElfFile, sections: dict[str, bytes], path: str) -> None:
    """Write the debug file of `elf` holding `sections` (name -> bytes) to `path`, atomically."""
    if elf.elf_class != 64 or elf.elf_type_number not in (ET_DYN, ET_EXEC):
        raise ElfError(f"{elf.path}: a debug file is written for an ELF64 executable or shared object only")
    layout = _LAYOUT_64
    with open(elf.path, "rb") as f:
        ident = f.read(EI_NIDENT)
        header = list(layout.header.unpack(f.read(layout.header.size)))
        e_phoff, e_phnum = header[4], header[9]
        f.seek(e_phoff)
        program_headers = [list(layout.program_header.unpack(f.read(layout.program_header.size)))
                           for _ in range(e_phnum)]
    out = bytearray(max(EI_NIDENT + layout.header.size, e_phoff + e_phnum * layout.program_header.size))

    kept = [s for s in elf.sections if s.flags & SHF_ALLOC]
    new_index = {s.index: k + 1 for k, s in enumerate(kept)}
    names = bytearray(b"\0")

    def name(text: str) -> int:
        offset = len(names)
        names.extend(text.encode() + b"\0")
        return offset

    # notes and .interp at their offsets in the input (where its program headers point), unless far in
    content_offset: dict[int, int] = {}
    in_place_end = len(out)  # the input's layout holds up to here
    for s in kept:
        if s.type != SHT_NOTE and s.name != ".interp" or s.type == SHT_NOBITS:
            continue
        data = bytes(elf.section_data(s))
        in_place = len(out) <= s.offset <= MAX_NOTE_OFFSET
        at = s.offset if in_place else _align(len(out), max(s.addralign, 1))
        out.extend(bytes(max(0, at + len(data) - len(out))))
        out[at:at + len(data)] = data
        content_offset[s.index] = at
        if in_place:
            in_place_end = len(out)
    headers = [layout.section_header.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for s in kept:
        info = new_index.get(s.info, 0) if s.flags & SHF_INFO_LINK else s.info
        size = s.size
        if s.index in content_offset:
            kind, offset = s.type, content_offset[s.index]
        elif s.name in EMPTIED:
            kind, offset, size = SHT_PROGBITS, len(out), 0
        else:
            kind, offset = SHT_NOBITS, min(s.offset, len(out))
        headers.append(layout.section_header.pack(name(s.name), kind, s.flags, s.addr, offset, size,
                                                  new_index.get(s.link, 0), info, s.addralign, s.entsize))
    for section_name, data in sections.items():
        offset = _align(len(out), 8)
        out.extend(bytes(offset - len(out)) + data)
        headers.append(layout.section_header.pack(name(section_name), SHT_PROGBITS, 0, 0, offset, len(data), 0, 0,
                                                  8, 0))
    shstrtab_name = name(".shstrtab")
    shstrtab_offset = len(out)
    out.extend(names)
    headers.append(layout.section_header.pack(shstrtab_name, SHT_STRTAB, 0, 0, shstrtab_offset, len(names), 0, 0,
                                              1, 0))

    # segments: no file bytes, but the kept sections they map (at their new offsets)
    kept_by_address = {s.addr: content_offset[s.index] for s in kept if s.index in content_offset}
    for p in program_headers:
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = p[:6]
        if p_offset == e_phoff and p_filesz == e_phnum * layout.program_header.size:
            continue  # PT_PHDR: the program headers are where they were
        if p_type == PT_LOAD and p_offset == 0:
            p[5] = min(p_filesz, in_place_end)  # the file's start: headers, notes, .interp in place
        elif p_vaddr in kept_by_address:
            p[2] = kept_by_address[p_vaddr]
        else:
            p[5] = 0
            p[2] = min(p_offset, len(out))
    for k, p in enumerate(program_headers):
        struct.pack_into(layout.program_header.format, out, e_phoff + k * layout.program_header.size, *p)

    shoff = _align(len(out), 8)
    out.extend(bytes(shoff - len(out)))
    for record in headers:
        out.extend(record)
    header[5] = shoff  # e_shoff
    header[10] = layout.section_header.size  # e_shentsize
    header[11] = len(headers)  # e_shnum
    header[12] = len(headers) - 1  # e_shstrndx
    out[:EI_NIDENT] = ident
    layout.header.pack_into(out, EI_NIDENT, *header)

    cache.write_atomically(os.path.abspath(path), bytes(out))
