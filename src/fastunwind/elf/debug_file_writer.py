"""Write a separate debug file for an ELF file: the layout `objcopy --only-keep-debug` gives one, with
the sections a caller provides (synth: `.debug_frame`).

    ELF header        the input's (type, machine, entry, flags), e_phoff and e_phnum kept
    program headers   the input's, at the same offset; the file bytes of every segment gone
                      (p_filesz 0) but those of the sections kept in place below (the first PT_LOAD
                      keeps the file's start up to them, as it maps the headers)
    notes, .interp    every allocated SHT_NOTE section and the interpreter's name, at their offsets
                      in the input (the build-id among them: gdb, perf and libdw match a debug file
                      to its file by it; readelf wants PT_INTERP's name)
    non-allocated     the input's symbols, strings and DWARF, copied (as objcopy does: perf takes
                      the debug file for its symbols then, and reads its `.debug_frame`); a provided
                      section replaces the input's of the same name (its `.debug_frame`)
    provided sections the others, SHT_PROGBITS, not allocated
    .shstrtab
    section headers   the input's, same indices (symbols name sections by index): allocated ones
                      SHT_NOBITS with their addresses and sizes (tools map addresses to sections by
                      them) but those kept in place, and but `.eh_frame` and `.eh_frame_hdr`: empty
                      SHT_PROGBITS (readelf warns that a NOBITS `.eh_frame` is unreliable, gdb that
                      a debug file lacks a section of its file; the CFI is the provided one);
                      `.gnu_debuglink` and `.gnu_debugaltlink` SHT_NOBITS (a debug file links to
                      nothing); then the provided sections that are new, and `.shstrtab`

Nothing of the input's code or data is copied. A debug file is found by its build-id as
`<debug-file-directory>/.build-id/<first two hex digits>/<the rest>.debug` (gdb's
`set debug-file-directory`, perf's and libdw's /usr/lib/debug): `build_id_path` gives it.
"""

from __future__ import annotations

import os
import struct

from fastunwind import cache
from fastunwind.elf import (_LAYOUT_64, EI_NIDENT, ET_DYN, ET_EXEC, SHF_ALLOC, SHT_NOBITS, SHT_NOTE, SHT_PROGBITS,
                            SHT_STRTAB, PT_LOAD, ElfFile)
from fastunwind.errors import ElfError

#: allocated sections kept empty (SHT_PROGBITS of size 0) rather than SHT_NOBITS: readelf warns that
#: a NOBITS `.eh_frame` is unreliable, and gdb that a debug file lacks a section its file has
EMPTIED = (".eh_frame", ".eh_frame_hdr")
#: non-allocated sections not copied: a debug file links to no other
UNLINKED = (".gnu_debuglink", ".gnu_debugaltlink")
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
        if e_phoff + e_phnum * layout.program_header.size > elf.file_size:
            raise ElfError(f"{elf.path}: program headers at 0x{e_phoff:x} run past the end of the file")
        f.seek(e_phoff)
        program_headers = [list(layout.program_header.unpack(f.read(layout.program_header.size)))
                           for _ in range(e_phnum)]
    out = bytearray(max(EI_NIDENT + layout.header.size, e_phoff + e_phnum * layout.program_header.size))

    names = bytearray(b"\0")

    def name(text: str) -> int:
        offset = len(names)
        names.extend(text.encode() + b"\0")
        return offset

    def place(data: bytes, alignment: int) -> int:
        offset = _align(len(out), max(alignment, 1))
        out.extend(bytes(offset - len(out)) + data)
        return offset

    # notes and .interp at their offsets in the input (where its program headers point), unless far in
    content_offset: dict[int, int] = {}
    in_place_end = len(out)  # the input's layout holds up to here
    for s in elf.sections:
        if not s.flags & SHF_ALLOC or s.type == SHT_NOBITS or (s.type != SHT_NOTE and s.name != ".interp"):
            continue
        data = bytes(elf.section_data(s))
        if len(out) <= s.offset <= MAX_NOTE_OFFSET:
            out.extend(bytes(s.offset + len(data) - len(out)))
            out[s.offset:s.offset + len(data)] = data
            content_offset[s.index] = s.offset
            in_place_end = len(out)
        else:
            content_offset[s.index] = place(data, s.addralign)
    provided = dict(sections)
    shstrtab_index = header[12]
    headers: list[bytes] = []
    with open(elf.path, "rb") as f:
        for s in elf.sections:
            size, kind, offset = s.size, SHT_NOBITS, min(s.offset, len(out))
            if s.index == 0:
                headers.append(layout.section_header.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
                continue
            if s.index == shstrtab_index:
                headers.append(b"")  # below, once every name is in
                continue
            if s.index in content_offset:
                kind, offset = s.type, content_offset[s.index]
            elif s.flags & SHF_ALLOC:
                if s.name in EMPTIED:
                    kind, offset, size = SHT_PROGBITS, len(out), 0
            elif s.name in provided:
                data = provided.pop(s.name)
                kind, offset, size = SHT_PROGBITS, place(data, 8), len(data)
            elif s.name not in UNLINKED and s.type != SHT_NOBITS:
                f.seek(s.offset)
                data = f.read(s.size)
                if len(data) != s.size:
                    raise ElfError(f"{elf.path}: section {s.name} runs past the end of the file")
                kind, offset = s.type, place(data, s.addralign)
            headers.append(layout.section_header.pack(name(s.name), kind, s.flags, s.addr, offset, size, s.link,
                                                      s.info, s.addralign, s.entsize))
    for section_name, data in provided.items():
        headers.append(layout.section_header.pack(name(section_name), SHT_PROGBITS, 0, 0, place(data, 8), len(data),
                                                  0, 0, 8, 0))
    if not 0 < shstrtab_index < len(elf.sections):
        shstrtab_index = len(headers)
        headers.append(b"")
    shstrtab_name = name(".shstrtab")
    headers[shstrtab_index] = layout.section_header.pack(shstrtab_name, SHT_STRTAB, 0, 0, place(bytes(names), 1),
                                                         len(names), 0, 0, 1, 0)

    # segments: no file bytes, but the kept sections they map (at their new offsets)
    kept_by_address = {s.addr: content_offset[s.index] for s in elf.sections if s.index in content_offset}
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
    header[12] = shstrtab_index  # e_shstrndx
    out[:EI_NIDENT] = ident
    layout.header.pack_into(out, EI_NIDENT, *header)

    cache.write_atomically(os.path.abspath(path), bytes(out))
