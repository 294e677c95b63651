"""ELF reader: the first stage of fastunwind (file -> sections, segments, symbols, notes).

What this stage gives the later ones (cfi_parse, table, lookup):

* the bytes of `.eh_frame`, `.eh_frame_hdr` and `.debug_frame`, zero-copy where the file stores them
  as they are, decompressed where the file compresses them (gABI `SHF_COMPRESSED`, GNU `.zdebug_*`),
  relocated for relocatable objects (`ET_REL`) exactly as `readelf --relocated-dump` shows them;
* the addresses a loader's bias is relative to (`first_load_vaddr`), the build-id and `.gnu_debuglink`
  needed to find a separate debug file (`find_debug_file`).

Design:

* The file is mapped read-only with `mmap`; nothing is read until asked for, so opening a 100 MB
  library costs one ELF header, one program header table and one section header table.
* Every offset and size taken from the file goes through `ElfFile._unpack` / `ElfFile._file_slice`,
  which compare lengths (`size <= file_size - offset`) so no check can overflow, and raise `ElfError`
  naming the structure, the file, the offset in hex and the bad value.
* Every loop driven by the file has a named bound (the `MAX_*` constants below).

References: System V ABI gABI, chapter 4 "Object Files" (ELF header, sections, extended section
numbering, compression header, notes, symbols); chapter 5 "Program Loading" (program headers);
System V AMD64 ABI §4.4 (x86-64 relocation types); GDB manual §18.3 "Debugging Information in Separate
Files" (build-id and debuglink lookup); binutils 2.40 `readelf.c` `apply_relocations` (relocations).
"""

import collections
import functools
import mmap
import os
import stat
import struct
import zlib
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, NamedTuple, Union

if TYPE_CHECKING:
    import logging

from fastunwind import _core
from fastunwind.errors import ElfError



def _logger() -> "logging.Logger":  # logging is imported on first use: it costs 5 ms of every CLI start
    import logging

    return logging.getLogger(__name__)

#: What `section_data` returns: a zero-copy view into the mapped file, or bytes it had to build.
SectionBytes = Union[memoryview, bytes]

# --- ELF constants (gABI chapter 4) ------------------------------------------------------------------

ELF_MAGIC = b"\x7fELF"
EI_CLASS = 4
EI_DATA = 5
EI_VERSION = 6
EI_NIDENT = 16
ELFCLASS32 = 1
ELFCLASS64 = 2
ELFDATA2LSB = 1
ELFDATA2MSB = 2
EV_CURRENT = 1

ET_NONE = 0
ET_REL = 1
ET_EXEC = 2
ET_DYN = 3
ET_CORE = 4
_ELF_TYPE_NAMES = {ET_REL: "REL", ET_EXEC: "EXEC", ET_DYN: "DYN", ET_CORE: "CORE"}

EM_386 = 3
EM_IAMCU = 6
EM_X86_64 = 62
EM_L1OM = 180
EM_K1OM = 181

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF
PN_XNUM = 0xFFFF

SHT_NULL = 0
SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_RELA = 4
SHT_HASH = 5
SHT_DYNAMIC = 6
SHT_NOTE = 7
SHT_NOBITS = 8
SHT_REL = 9
SHT_DYNSYM = 11
SHT_SYMTAB_SHNDX = 18

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_COMPRESSED = 0x800

PT_NULL = 0
PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3
PT_NOTE = 4
PT_PHDR = 6
PT_TLS = 7
PT_GNU_EH_FRAME = 0x6474E550

PF_X = 0x1
PF_W = 0x2
PF_R = 0x4

STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_SECTION = 3
STT_FILE = 4
STT_COMMON = 5
STT_TLS = 6
STB_LOCAL = 0
STB_GLOBAL = 1
STB_WEAK = 2

ELFCOMPRESS_ZLIB = 1
ELFCOMPRESS_ZSTD = 2

NT_GNU_BUILD_ID = 3
GNU_NOTE_OWNER = b"GNU"

#: Legacy GNU compressed debug sections (`.zdebug_*`, `objcopy --compress-debug-sections=zlib-gnu`):
#: b"ZLIB", the uncompressed size as 8 bytes big-endian, then one zlib stream.
ZDEBUG_PREFIX = ".zdebug"
ZDEBUG_MAGIC = b"ZLIB"
ZDEBUG_HEADER = struct.Struct(">4sQ")

# x86-64 (System V AMD64 ABI §4.4.1, table 4.10) and i386 relocation types used by readelf.
R_X86_64_NONE = 0
R_X86_64_64 = 1
R_X86_64_PC32 = 2
R_X86_64_32 = 10
R_X86_64_32S = 11
R_X86_64_PC64 = 24
R_386_NONE = 0
R_386_32 = 1
R_386_PC32 = 2

# --- Bounds on input-driven work ----------------------------------------------------------------------

#: Section headers in one file. Extended numbering (e_shnum == 0) exists because objects built with
#: -ffunction-sections from large C++ units pass 65280 sections; 2**24 headers are 1 GiB of headers,
#: far beyond any file seen, and keep a hostile count from turning into a long Python loop.
MAX_SECTION_COUNT = 1 << 24
#: Program headers in one file. Linkers emit about a dozen; core files one per mapping (thousands).
MAX_SEGMENT_COUNT = 1 << 16
#: Symbols in one symbol table, as the C symbolizer bounds them (native/core/symbols.h). libLLVM-14.so.1
#: (105 MB) has 44983 in .dynsym; big debug builds reach a few million in .symtab.
MAX_SYMBOL_COUNT: int = _core.MAX_SYMBOLS
#: Relocations against one section (a .o's .rela.debug_info reaches about a million).
MAX_RELOCATION_COUNT = 1 << 26
#: Notes in one note section or PT_NOTE segment (glibc binaries carry 3 or 4).
MAX_NOTE_COUNT = 1 << 12
#: Length of one name in a string table (the longest mangled C++ names are a few 10 KB).
MAX_NAME_LENGTH = 1 << 20
#: Build-ids: 20 bytes (sha1, the default), 16 (md5/uuid), 8 (xxhash); ld --build-id=0xHEX allows any.
MAX_BUILD_ID_SIZE = 64
#: Size of one decompressed section. A debug section of 4 GiB cannot be addressed by 32-bit DWARF
#: offsets anyway, and the cap keeps a forged ch_size from asking for terabytes.
MAX_DECOMPRESSED_SIZE = 4 << 30
#: Concatenated zlib streams in one compressed section: readelf and BFD accept several; every tool
#: we know writes one.
MAX_ZLIB_STREAMS = 1 << 10
#: Output chunk when reading a zstd stream: a forged frame content size must not become one
#: allocation of that size.
ZSTD_READ_CHUNK = 1 << 20

# --- Struct layouts (little-endian only) ------------------------------------------------------------


class _Layout(NamedTuple):
    """The on-disk record formats of one ELF class."""

    header: struct.Struct  # after e_ident
    section_header: struct.Struct
    program_header: struct.Struct
    symbol: struct.Struct
    rela: struct.Struct
    rel: struct.Struct
    compression_header: struct.Struct
    relocation_symbol_shift: int
    relocation_type_mask: int


_LAYOUT_64 = _Layout(
    # e_type e_machine e_version e_entry e_phoff e_shoff e_flags e_ehsize e_phentsize e_phnum
    # e_shentsize e_shnum e_shstrndx
    header=struct.Struct("<HHIQQQIHHHHHH"),
    # sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link sh_info sh_addralign sh_entsize
    section_header=struct.Struct("<IIQQQQIIQQ"),
    # p_type p_flags p_offset p_vaddr p_paddr p_filesz p_memsz p_align
    program_header=struct.Struct("<IIQQQQQQ"),
    # st_name st_info st_other st_shndx st_value st_size
    symbol=struct.Struct("<IBBHQQ"),
    rela=struct.Struct("<QQq"),
    rel=struct.Struct("<QQ"),
    # ch_type ch_reserved ch_size ch_addralign
    compression_header=struct.Struct("<IIQQ"),
    relocation_symbol_shift=32,
    relocation_type_mask=0xFFFFFFFF,
)

_LAYOUT_32 = _Layout(
    header=struct.Struct("<HHIIIIIHHHHHH"),
    section_header=struct.Struct("<IIIIIIIIII"),
    # p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags p_align (flags moved in ELF64)
    program_header=struct.Struct("<IIIIIIII"),
    # st_name st_value st_size st_info st_other st_shndx
    symbol=struct.Struct("<IIIBBH"),
    rela=struct.Struct("<IIi"),
    rel=struct.Struct("<II"),
    # ch_type ch_size ch_addralign
    compression_header=struct.Struct("<III"),
    relocation_symbol_shift=8,
    relocation_type_mask=0xFF,
)

_NOTE_HEADER = struct.Struct("<III")  # n_namesz n_descsz n_type, 4 bytes each in ELF32 and ELF64
_U32 = struct.Struct("<I")

# --- Public records --------------------------------------------------------------------------------


class Section(NamedTuple):
    """One section header (gABI "Section Header"), with its name resolved."""

    index: int  # type: ignore[assignment]  # a public field: shadows tuple.index, as it always has
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int

    @property
    def is_compressed(self) -> bool:
        """True if the data start with a gABI compression header (SHF_COMPRESSED)."""
        return bool(self.flags & SHF_COMPRESSED)


class Segment(NamedTuple):
    """One program header (gABI "Program Header"); flags are PF_R | PF_W | PF_X."""

    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int


class Symbol(NamedTuple):
    """One symbol table entry. type is STT_*, bind is STB_*; section_index is st_shndx, or the
    SHT_SYMTAB_SHNDX entry when st_shndx is SHN_XINDEX; special indexes (SHN_ABS, SHN_COMMON) as is."""

    name: str
    value: int
    size: int
    type: int
    bind: int
    section_index: int


# --- The reader -------------------------------------------------------------------------------------


class ElfFile:
    """A little-endian ELF32 or ELF64 file, mapped read-only.

    Use `ElfFile.open(path)` (preferably as a context manager) or `ElfFile.from_bytes(data)`.
    Views returned by `section_data` point into the mapping: drop them before `close()`, or the
    mapping lives on until they are garbage-collected (close() never fails because of them).
    """

    path: str
    elf_class: int
    elf_type: str | int
    elf_type_number: int
    machine: int
    entry: int
    file_size: int
    sections: list[Section]
    segments: list[Segment]

    def __init__(self, data: memoryview, path: str, mapping: mmap.mmap | None = None) -> None:
        """Parse the headers of `data`; prefer `open` / `from_bytes`, which build `data`."""
        self.path = path
        self._view: memoryview | None = data
        self._mapping = mapping
        #: parsed from bytes in memory (from_bytes: a vDSO copy), not from a file at `path`
        self.in_memory = mapping is None
        self.file_size = len(data)
        self._parse_file_header()
        self.sections = self._parse_section_headers()
        self.segments = self._parse_program_headers()
        self._symbols: tuple[Symbol, ...] | None = None
        self._section_by_name: dict[str, Section] = {}
        for section in self.sections:
            self._section_by_name.setdefault(section.name, section)

    # --- construction and lifetime ---

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> "ElfFile":
        """Map the file at `path` read-only and parse its ELF, program and section headers.

        Raises OSError if the file cannot be opened, ElfError if it is not a supported ELF file."""
        path_text = os.fspath(path)
        # O_NONBLOCK: opening a FIFO must not hang; we refuse non-regular files right after.
        descriptor = os.open(path_text, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            file_status = os.fstat(descriptor)
            if not stat.S_ISREG(file_status.st_mode):
                raise ElfError(f"{path_text}: not a regular file (mode 0o{file_status.st_mode:o})")
            if file_status.st_size == 0:
                raise ElfError(f"{path_text}: empty file, too short for an ELF header (size 0x0)")
            try:
                mapping = mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as error:
                raise ElfError(f"{path_text}: cannot map the file: {error}") from error
        finally:
            os.close(descriptor)
        view = memoryview(mapping)
        try:
            return cls(view, path_text, mapping)
        except BaseException:
            view.release()
            try:
                mapping.close()
            except BufferError:
                # Slices made while parsing are still referenced by the traceback; the mapping
                # goes away with them.
                pass
            raise

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, path: str = "<memory>") -> "ElfFile":
        """Parse an ELF image held in memory (`path` only names it in error messages)."""
        view = memoryview(data).cast("B")
        return cls(view, path)

    def close(self) -> None:
        """Release the mapping. Idempotent."""
        if self._view is not None:
            try:
                self._view.release()
            except BufferError:
                pass
            self._view = None
        if self._mapping is not None:
            try:
                self._mapping.close()
            except BufferError:
                # A caller still holds a section view: the mapping is unmapped when the last view
                # is garbage-collected.
                pass
            self._mapping = None

    def release_resident_pages(self) -> None:
        """Let the kernel take back the pages of the file read so far (a symbol table's sections,
        once the table is built); any touched again are mapped again from the page cache."""
        if self._mapping is not None:
            release_resident_pages(self._mapping)

    def __enter__(self) -> "ElfFile":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ElfFile({self.path!r}, ELF{self.elf_class} {self.elf_type} machine {self.machine}, "
            f"{len(self.sections)} sections, {len(self.segments)} segments)"
        )

    # --- bounded access to the file bytes ---

    def _data(self) -> memoryview:
        if self._view is None:
            raise ValueError(f"{self.path}: ElfFile is closed")
        return self._view

    def _unpack(self, record: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        """Unpack one record at `offset`, or raise ElfError if it does not fit in the file."""
        if offset < 0 or offset > self.file_size or record.size > self.file_size - offset:
            raise ElfError(
                f"{self.path}: {what} at offset 0x{offset:x} (0x{record.size:x} bytes) extends beyond "
                f"the end of the file (size 0x{self.file_size:x})"
            )
        return record.unpack_from(self._data(), offset)

    def _file_slice(self, offset: int, size: int, what: str) -> memoryview:
        """The bytes [offset, offset + size) of the file, or ElfError if they are not all there."""
        if offset < 0 or size < 0 or offset > self.file_size or size > self.file_size - offset:
            raise ElfError(
                f"{self.path}: {what} at offset 0x{offset:x} with size 0x{size:x} extends beyond the "
                f"end of the file (size 0x{self.file_size:x})"
            )
        return self._data()[offset : offset + size]

    # --- headers ---

    def _parse_file_header(self) -> None:
        if self.file_size < EI_NIDENT:
            raise ElfError(
                f"{self.path}: file too short for e_ident "
                f"(size 0x{self.file_size:x}, need 0x{EI_NIDENT:x})"
            )
        ident = bytes(self._data()[:EI_NIDENT])
        if ident[:4] != ELF_MAGIC:
            raise ElfError(f"{self.path}: not an ELF file: magic at offset 0x0 is {ident[:4].hex()}")
        elf_class = ident[EI_CLASS]
        if elf_class == ELFCLASS64:
            self.elf_class, self._layout = 64, _LAYOUT_64
        elif elf_class == ELFCLASS32:
            self.elf_class, self._layout = 32, _LAYOUT_32
        else:
            raise ElfError(f"{self.path}: bad EI_CLASS at offset 0x{EI_CLASS:x}: 0x{elf_class:x}")
        data_encoding = ident[EI_DATA]
        if data_encoding == ELFDATA2MSB:
            raise ElfError(
                f"{self.path}: big-endian ELF (EI_DATA at offset 0x{EI_DATA:x} is 0x{data_encoding:x}) "
                "is not supported"
            )
        if data_encoding != ELFDATA2LSB:
            raise ElfError(f"{self.path}: bad EI_DATA at offset 0x{EI_DATA:x}: 0x{data_encoding:x}")
        if ident[EI_VERSION] != EV_CURRENT:
            raise ElfError(
                f"{self.path}: bad EI_VERSION at offset 0x{EI_VERSION:x}: 0x{ident[EI_VERSION]:x}"
            )
        (
            elf_type,
            self.machine,
            _version,
            self.entry,
            self._phoff,
            self._shoff,
            _flags,
            _ehsize,
            self._phentsize,
            self._phnum,
            self._shentsize,
            self._shnum,
            self._shstrndx,
        ) = self._unpack(self._layout.header, EI_NIDENT, "ELF header")
        self.elf_type_number = elf_type
        self.elf_type = _ELF_TYPE_NAMES.get(elf_type, elf_type)

    def _parse_section_headers(self) -> list[Section]:
        record = self._layout.section_header
        if self._shoff == 0:
            if self._shnum != 0:
                raise ElfError(
                    f"{self.path}: ELF header says 0x{self._shnum:x} sections (e_shnum) but has no "
                    "section header table (e_shoff 0x0)"
                )
            if self._shstrndx not in (SHN_UNDEF, SHN_XINDEX):
                raise ElfError(
                    f"{self.path}: e_shstrndx 0x{self._shstrndx:x} without a section header table"
                )
            self._section_zero = None
            return []
        if self._shentsize != record.size:
            raise ElfError(
                f"{self.path}: bad e_shentsize 0x{self._shentsize:x} for ELF{self.elf_class} "
                f"(expected 0x{record.size:x})"
            )
        # gABI "Extended Section Numbering": section 0 holds the real count (sh_size), string table
        # index (sh_link) and program header count (sh_info) when they do not fit in the header.
        self._section_zero = self._unpack(record, self._shoff, "section header 0 (e_shoff)")
        count = self._shnum
        if count == 0:
            count = self._section_zero[5]
        if count > MAX_SECTION_COUNT:
            raise ElfError(
                f"{self.path}: section count 0x{count:x} exceeds the limit 0x{MAX_SECTION_COUNT:x}"
            )
        table = self._file_slice(
            self._shoff, count * record.size, f"section header table (0x{count:x} entries, e_shoff)"
        )
        headers = list(record.iter_unpack(table))
        string_table_index = self._shstrndx
        if string_table_index == SHN_XINDEX:
            string_table_index = self._section_zero[6]
        names = None
        if string_table_index != SHN_UNDEF:
            if string_table_index >= count:
                raise ElfError(
                    f"{self.path}: section name string table index (e_shstrndx) "
                    f"0x{string_table_index:x} "
                    f"is not below the section count 0x{count:x}"
                )
            header = headers[string_table_index]
            if header[1] == SHT_NOBITS:
                raise ElfError(
                    f"{self.path}: section name string table [{string_table_index}] is SHT_NOBITS"
                )
            names = bytes(
                self._file_slice(
                    header[4], header[5], f"section name string table [{string_table_index}]"
                )
            )
        sections = []
        for index, header in enumerate(headers):
            name = ""
            if names is not None:
                name = _string_at(
                    names, header[0], f"{self.path}: name of section [{index}] in the section name table"
                )
            sections.append(Section(index, name, *header[1:]))
        return sections

    def _parse_program_headers(self) -> list[Segment]:
        record = self._layout.program_header
        count = self._phnum
        if count == PN_XNUM and self._section_zero is not None:
            count = self._section_zero[7]
        if count == 0:
            return []
        if self._phoff == 0:
            raise ElfError(
                f"{self.path}: ELF header says 0x{count:x} program headers but e_phoff is 0x0"
            )
        if self._phentsize != record.size:
            raise ElfError(
                f"{self.path}: bad e_phentsize 0x{self._phentsize:x} for ELF{self.elf_class} "
                f"(expected 0x{record.size:x})"
            )
        if count > MAX_SEGMENT_COUNT:
            raise ElfError(
                f"{self.path}: program header count 0x{count:x} exceeds the limit "
                f"0x{MAX_SEGMENT_COUNT:x}"
            )
        table = self._file_slice(
            self._phoff, count * record.size, f"program header table (0x{count:x} entries, e_phoff)"
        )
        segments = []
        for fields in record.iter_unpack(table):
            if self.elf_class == 64:
                type_, flags, offset, vaddr, paddr, filesz, memsz, align = fields
            else:
                type_, offset, vaddr, paddr, filesz, memsz, flags, align = fields
            segments.append(Segment(type_, flags, offset, vaddr, paddr, filesz, memsz, align))
        return segments

    # --- sections ---

    def segment_data(self, segment: Segment) -> memoryview:
        """The file bytes of a segment (its p_filesz bytes at p_offset), zero copy."""
        return self._file_slice(segment.offset, segment.filesz, f"segment at file offset 0x{segment.offset:x}")

    def section(self, name: str) -> Section | None:
        """The first section called `name`; for `.debug_*` names, the legacy `.zdebug_*` section
        if there is no `.debug_*` one (its data are decompressed by `section_data` all the same)."""
        found = self._section_by_name.get(name)
        if found is None and name.startswith(".debug"):
            found = self._section_by_name.get(ZDEBUG_PREFIX + name[len(".debug") :])
        return found

    def _where(self, section: Section) -> str:
        return f"{self.path}: section [{section.index}] {section.name!r}"

    def _raw_section_data(self, section: Section) -> memoryview:
        if section.type == SHT_NOBITS:
            return memoryview(b"")
        return self._file_slice(
            section.offset, section.size, f"section [{section.index}] {section.name!r}"
        )

    def section_data(self, section: Section) -> SectionBytes:
        """The contents of `section`: a view into the file, or decompressed bytes.

        SHT_NOBITS sections are empty. SHF_COMPRESSED sections are decompressed (ELFCOMPRESS_ZLIB
        with zlib, ELFCOMPRESS_ZSTD with the optional `zstandard` module); so are legacy GNU
        `.zdebug_*` sections. The result has exactly the size the compression header declares."""
        raw = self._raw_section_data(section)
        compression = self._compression(section, raw)
        if compression is None:
            return raw
        compression_type, uncompressed_size, header_size = compression
        where = f"{self._where(section)}, compressed data at offset 0x{section.offset + header_size:x}"
        payload = raw[header_size:]
        if compression_type == ELFCOMPRESS_ZLIB:
            return _decompress_zlib(payload, uncompressed_size, where)
        if compression_type == ELFCOMPRESS_ZSTD:
            return _decompress_zstd(payload, uncompressed_size, where)
        raise ElfError(
            f"{self._where(section)}: unknown compression type (ch_type) 0x{compression_type:x} "
            f"at offset 0x{section.offset:x}"
        )

    def section_data_size(self, section: Section) -> int:
        """The size of `section_data(section)`, from the headers alone (a compressed section is not
        decompressed)."""
        raw = self._raw_section_data(section)
        compression = self._compression(section, raw)
        return len(raw) if compression is None else compression[1]

    def _compression(self, section: Section, raw: memoryview) -> tuple[int, int, int] | None:
        """(compression type, uncompressed size, header size) of a compressed section: gABI
        "Compression Header" (Elf{32,64}_Chdr, SHF_COMPRESSED) or a GNU `.zdebug_*` 'ZLIB' header;
        None for a section stored as it is."""
        where = self._where(section)
        if section.is_compressed:
            record = self._layout.compression_header
            if len(raw) < record.size:
                raise ElfError(
                    f"{where}: SHF_COMPRESSED section of 0x{len(raw):x} bytes at offset "
                    f"0x{section.offset:x} is too small for a compression header (0x{record.size:x} bytes)"
                )
            fields = record.unpack_from(raw, 0)
            if self.elf_class == 64:
                compression_type, _reserved, uncompressed_size, _alignment = fields
            else:
                compression_type, uncompressed_size, _alignment = fields
            return compression_type, uncompressed_size, record.size
        if section.name.startswith(ZDEBUG_PREFIX) and raw[: len(ZDEBUG_MAGIC)] == ZDEBUG_MAGIC:
            if len(raw) < ZDEBUG_HEADER.size:
                raise ElfError(
                    f"{where}: .zdebug section of 0x{len(raw):x} bytes at offset "
                    f"0x{section.offset:x} is too small for its 'ZLIB' header "
                    f"(0x{ZDEBUG_HEADER.size:x} bytes)"
                )
            _magic, uncompressed_size = ZDEBUG_HEADER.unpack_from(raw, 0)
            return ELFCOMPRESS_ZLIB, uncompressed_size, ZDEBUG_HEADER.size
        return None

    # --- relocations (ET_REL only) ---

    def relocated_section_data(self, section: Section, *, strict: bool = False) -> SectionBytes:
        """`section_data(section)` with the relocations that target it applied, the way binutils
        2.40 `readelf --relocated-dump` (`apply_relocations` in readelf.c) applies them.

        Only ET_REL files are relocated; for others the data are returned unchanged. As in readelf:

        * only the first SHT_RELA/SHT_REL section whose sh_info is this section (and whose size is
          not 0 and sh_link is a valid index) is applied;
        * each section is taken to be at address 0: symbol values are used as stored, and a
          PC-relative relocation writes S + A - r_offset (r_offset, not sh_addr + r_offset);
        * the addend is r_addend for SHT_RELA, the bytes in place for SHT_REL;
        * relocation types readelf does not know for the machine (for x86-64 all but NONE, 64,
          PC32, 32, PC64: 32S is not among them), offsets outside the section, symbol indexes
          outside the table, and symbols of a type above STT_SECTION other than STT_COMMON are
          skipped with a warning (logged here), or raise ElfError when `strict` is true.

        Raises ElfError for a machine other than x86-64/i386, or a malformed relocation or symbol
        table."""
        data = self.section_data(section)
        if self.elf_type_number != ET_REL:
            return data
        relocation_section = self._relocation_section_for(section)
        if relocation_section is None:
            return data
        kinds = _READELF_RELOCATION_KINDS.get(self.machine)
        if kinds is None:
            raise ElfError(
                f"{self._where(section)}: applying relocations of machine (e_machine) "
                f"0x{self.machine:x} is not supported (only x86-64 and i386)"
            )
        symbol_section = self.sections[relocation_section.link]
        if symbol_section.type not in (SHT_SYMTAB, SHT_DYNSYM):
            raise ElfError(
                f"{self._where(relocation_section)}: sh_link 0x{relocation_section.link:x} names "
                f"section {symbol_section.name!r} of type 0x{symbol_section.type:x}, not a symbol table"
            )
        symbol_values_and_infos = [
            (fields[1], fields[3]) if self.elf_class == 32 else (fields[4], fields[1])
            for fields in self._symbol_records(symbol_section)
        ]
        is_rela = relocation_section.type == SHT_RELA
        layout = self._layout
        record = layout.rela if is_rela else layout.rel
        count = relocation_section.size // record.size
        if count > MAX_RELOCATION_COUNT:
            raise ElfError(
                f"{self._where(relocation_section)}: 0x{count:x} relocations exceed the limit "
                f"0x{MAX_RELOCATION_COUNT:x}"
            )
        table = self._file_slice(
            relocation_section.offset,
            count * record.size,
            f"relocation section [{relocation_section.index}] {relocation_section.name!r}",
        )
        output = bytearray(data)
        section_size = len(output)
        symbol_count = len(symbol_values_and_infos)
        skipped: collections.Counter[str] = collections.Counter()
        first_skip: dict[str, str] = {}

        def skip(reason: str, detail: str) -> None:
            if strict:
                raise ElfError(f"{self._where(relocation_section)}: {detail}")
            skipped[reason] += 1
            first_skip.setdefault(reason, detail)

        for number, fields in enumerate(record.iter_unpack(table)):
            offset, info = fields[0], fields[1]
            relocation_type = info & layout.relocation_type_mask
            symbol_index = info >> layout.relocation_symbol_shift
            if relocation_type not in kinds:
                skip(
                    "unsupported type",
                    f"relocation #{number} at offset 0x{offset:x}: relocation type {relocation_type} is "
                    f"not applied by readelf for machine {self.machine} (section {section.name!r})",
                )
                continue
            kind = kinds[relocation_type]
            if kind is None:  # R_*_NONE
                continue
            size, is_pc_relative = kind
            if offset > section_size - size:
                skip(
                    "offset outside the section",
                    f"relocation #{number}: offset 0x{offset:x} + 0x{size:x} bytes is outside section "
                    f"{section.name!r} (size 0x{section_size:x})",
                )
                continue
            if symbol_index >= symbol_count:
                skip(
                    "bad symbol index",
                    f"relocation #{number} at offset 0x{offset:x}: symbol index "
                    f"0x{symbol_index:x} is not below the symbol count 0x{symbol_count:x}",
                )
                continue
            symbol_value, symbol_info = symbol_values_and_infos[symbol_index]
            symbol_type = symbol_info & 0xF
            if symbol_index != 0 and symbol_type > STT_SECTION and symbol_type != STT_COMMON:
                skip(
                    "unexpected symbol type",
                    f"relocation #{number} at offset 0x{offset:x}: symbol 0x{symbol_index:x} has type "
                    f"{symbol_type}, above STT_SECTION",
                )
                continue
            mask = (1 << (8 * size)) - 1
            if is_rela:
                addend = fields[2]
            else:
                addend = int.from_bytes(output[offset : offset + size], "little")
            value = addend + symbol_value
            if is_pc_relative:
                value -= offset
            output[offset : offset + size] = (value & mask).to_bytes(size, "little")
        for reason, count_skipped in skipped.items():
            _logger().warning(
                "%s: skipped %d relocation(s) (%s) like readelf does; first: %s",
                self._where(relocation_section),
                count_skipped,
                reason,
                first_skip[reason],
            )
        return bytes(output)

    def _relocation_section_for(self, section: Section) -> Section | None:
        """readelf's choice: the first SHT_RELA/SHT_REL section targeting `section`."""
        return self._relocation_sections_by_target.get(section.index)

    @functools.cached_property
    def _relocation_sections_by_target(self) -> dict[int, Section]:
        # One pass instead of one per section: -ffunction-sections objects have 100k sections.
        count = len(self.sections)
        by_target: dict[int, Section] = {}
        for candidate in self.sections:
            if (
                candidate.type in (SHT_RELA, SHT_REL)
                and candidate.info < count
                and candidate.size != 0
                and candidate.link < count
            ):
                by_target.setdefault(candidate.info, candidate)
        return by_target

    # --- symbols ---

    def _symbol_records(self, symbol_section: Section) -> Iterator[tuple[int, ...]]:
        record = self._layout.symbol
        where = self._where(symbol_section)
        if symbol_section.size == 0 or symbol_section.type == SHT_NOBITS:
            return iter(())
        if symbol_section.entsize != record.size:
            raise ElfError(
                f"{where}: bad sh_entsize 0x{symbol_section.entsize:x} for a symbol table "
                f"(expected 0x{record.size:x})"
            )
        if symbol_section.size % record.size != 0:
            raise ElfError(
                f"{where}: size 0x{symbol_section.size:x} is not a multiple of the symbol size "
                f"0x{record.size:x}"
            )
        count = symbol_section.size // record.size
        if count > MAX_SYMBOL_COUNT:
            raise ElfError(f"{where}: 0x{count:x} symbols exceed the limit 0x{MAX_SYMBOL_COUNT:x}")
        table = self._file_slice(
            symbol_section.offset, symbol_section.size, f"symbol table [{symbol_section.index}]"
        )
        return record.iter_unpack(table)

    def symbols(self) -> list[Symbol]:
        """Every entry of every SHT_SYMTAB (.symtab) and SHT_DYNSYM (.dynsym) section, in section
        order, including each table's null entry 0 (so list positions match readelf -s numbers)."""
        if self._symbols is None:
            result: list[Symbol] = []
            for symbol_section in self.sections:
                if symbol_section.type in (SHT_SYMTAB, SHT_DYNSYM):
                    result.extend(self._symbols_of(symbol_section))
            self._symbols = tuple(result)
        return list(self._symbols)

    def _symbols_of(self, symbol_section: Section) -> list[Symbol]:
        where = self._where(symbol_section)
        records = list(self._symbol_records(symbol_section))
        if not records:
            return []
        if symbol_section.link >= len(self.sections):
            raise ElfError(
                f"{where}: string table index (sh_link) 0x{symbol_section.link:x} is not below the "
                f"section count 0x{len(self.sections):x}"
            )
        string_section = self.sections[symbol_section.link]
        strings = bytes(self._raw_section_data(string_section))
        extended_indexes = self._extended_section_indexes(symbol_section, len(records))
        symbols = []
        is_64 = self.elf_class == 64
        for number, fields in enumerate(records):
            if is_64:
                name_offset, info, _other, section_index, value, size = fields
            else:
                name_offset, value, size, info, _other, section_index = fields
            if section_index == SHN_XINDEX and extended_indexes is not None:
                section_index = extended_indexes[number]
            # _string_at inline for the names that end inside the table (libLLVM-14: 45k symbols);
            # the others go through it, for its error
            end = strings.find(b"\0", name_offset, name_offset + MAX_NAME_LENGTH + 1) if name_offset < len(strings) else -1
            name = (strings[name_offset:end].decode("utf-8", "backslashreplace") if end >= 0
                    else _string_at(strings, name_offset, f"{where}: name of symbol {number}"))
            symbols.append(Symbol(name, value, size, info & 0xF, info >> 4, section_index))
        return symbols

    def _extended_section_indexes(self, symbol_section: Section, count: int) -> tuple[int, ...] | None:
        """gABI SHT_SYMTAB_SHNDX: the real st_shndx of symbols whose st_shndx is SHN_XINDEX."""
        for candidate in self.sections:
            if candidate.type == SHT_SYMTAB_SHNDX and candidate.link == symbol_section.index:
                if candidate.size < count * _U32.size:
                    raise ElfError(
                        f"{self._where(candidate)}: SHT_SYMTAB_SHNDX size 0x{candidate.size:x} is too "
                        f"small for 0x{count:x} symbols"
                    )
                data = self._file_slice(
                    candidate.offset, count * _U32.size, f"section [{candidate.index}]"
                )
                return struct.unpack_from(f"<{count}I", data)
        return None

    # --- notes, build-id, debuglink ---

    @functools.cached_property
    def build_id(self) -> bytes | None:
        """The NT_GNU_BUILD_ID note (owner "GNU"): from SHT_NOTE sections first, then PT_NOTE
        segments (a stripped file may have no section headers)."""
        for section in self.sections:
            if section.type == SHT_NOTE:
                found = self._find_build_id(
                    self.section_data(section), section.addralign, section.offset, self._where(section)
                )
                if found is not None:
                    return found
        for index, segment in enumerate(self.segments):
            if segment.type == PT_NOTE:
                region = self._file_slice(segment.offset, segment.filesz, f"PT_NOTE segment {index}")
                found = self._find_build_id(
                    region, segment.align, segment.offset, f"{self.path}: PT_NOTE segment {index}"
                )
                if found is not None:
                    return found
        return None

    @property
    def build_id_hex(self) -> str | None:
        """The build-id in lowercase hex, as `readelf -n` and debuginfod print it."""
        build_id = self.build_id
        return None if build_id is None else build_id.hex()

    def _find_build_id(
        self, region: SectionBytes, alignment: int, file_offset: int, where: str
    ) -> bytes | None:
        return build_id_in_notes(region, alignment, file_offset, where)

    @functools.cached_property
    def debuglink(self) -> tuple[str, int] | None:
        """(file name, CRC-32) from `.gnu_debuglink`: a NUL-terminated name, zero padding to a
        multiple of 4, then the CRC-32 (zlib.crc32) of the whole debug file, in file byte order."""
        section = self.section(".gnu_debuglink")
        if section is None:
            return None
        data = bytes(self.section_data(section))
        where = self._where(section)
        end = data.find(b"\0")
        if end <= 0:
            raise ElfError(
                f"{where}: at offset 0x{section.offset:x}: "
                + ("file name is empty" if end == 0 else "file name is not NUL-terminated")
            )
        crc_offset = (end + 1 + 3) & ~3
        if crc_offset > len(data) - _U32.size:
            raise ElfError(
                f"{where}: section size 0x{len(data):x} leaves no room for the CRC at +0x{crc_offset:x}"
            )
        (crc,) = _U32.unpack_from(data, crc_offset)
        return os.fsdecode(data[:end]), crc

    # --- addresses ---

    @property
    def text_section_addr(self) -> int | None:
        """sh_addr of `.text`, or None if there is none."""
        text = self.section(".text")
        return None if text is None else text.addr

    @property
    def first_load_vaddr(self) -> int | None:
        """p_vaddr - p_offset of the PT_LOAD with the lowest p_vaddr: the address the file's offset 0
        is linked at, which a loader's bias (avma - svma) is relative to. None without PT_LOAD."""
        loads = [segment for segment in self.segments if segment.type == PT_LOAD]
        if not loads:
            return None
        lowest = min(loads, key=lambda segment: segment.vaddr)
        return lowest.vaddr - lowest.offset


# readelf's relocation knowledge (is_none_reloc, is_32bit_abs_reloc, is_32bit_pcrel_reloc,
# is_64bit_abs_reloc, is_64bit_pcrel_reloc): type -> (size in bytes, PC-relative), None = NONE.
_X86_64_RELOCATION_KINDS: dict[int, tuple[int, bool] | None] = {
    R_X86_64_NONE: None,
    R_X86_64_64: (8, False),
    R_X86_64_PC32: (4, True),
    R_X86_64_32: (4, False),
    R_X86_64_PC64: (8, True),
}
_I386_RELOCATION_KINDS: dict[int, tuple[int, bool] | None] = {
    R_386_NONE: None,
    R_386_32: (4, False),
    R_386_PC32: (4, True),
}
_READELF_RELOCATION_KINDS = {
    EM_X86_64: _X86_64_RELOCATION_KINDS,
    EM_L1OM: _X86_64_RELOCATION_KINDS,
    EM_K1OM: _X86_64_RELOCATION_KINDS,
    EM_386: _I386_RELOCATION_KINDS,
    EM_IAMCU: _I386_RELOCATION_KINDS,
}


# --- helpers -----------------------------------------------------------------------------------------


def release_resident_pages(mapping: mmap.mmap) -> None:
    """Drop a read-only file mapping's pages from the process's memory (MADV_DONTNEED: they stay in
    the page cache, and a later access maps them again): for files read through once (validated,
    or turned into a table) of which little is used afterwards."""
    if hasattr(mmap, "MADV_DONTNEED"):
        mapping.madvise(mmap.MADV_DONTNEED)


def _string_at(table: bytes, offset: int, where: str) -> str:
    """The NUL-terminated string at `offset` of a string table (gABI "String Table")."""
    if offset == 0 and not table:
        return ""  # index 0 is the empty name, even in an empty table
    if offset >= len(table):
        raise ElfError(
            f"{where}: string offset 0x{offset:x} is outside the string table (size 0x{len(table):x})"
        )
    end = table.find(b"\0", offset, offset + MAX_NAME_LENGTH + 1)
    if end < 0:
        raise ElfError(
            f"{where}: string at offset 0x{offset:x} is not NUL-terminated within the table "
            f"(or longer than 0x{MAX_NAME_LENGTH:x} bytes)"
        )
    return table[offset:end].decode("utf-8", "backslashreplace")


def build_id_in_notes(region: SectionBytes, alignment: int, file_offset: int, where: str) -> bytes | None:
    """The NT_GNU_BUILD_ID of a region of notes (a section, a PT_NOTE segment, or the notes of a
    mapped file read from a core's memory), or None. ElfError if the region is malformed."""
    for name, note_type, descriptor in _iter_notes(region, alignment, file_offset, where):
        if note_type == NT_GNU_BUILD_ID and name == GNU_NOTE_OWNER:
            if not 1 <= len(descriptor) <= MAX_BUILD_ID_SIZE:
                raise ElfError(
                    f"{where}: NT_GNU_BUILD_ID note has a build-id of 0x{len(descriptor):x} bytes "
                    f"(expected 1 to 0x{MAX_BUILD_ID_SIZE:x})"
                )
            return bytes(descriptor)
    return None


def _iter_notes(
    region: SectionBytes, alignment: int, file_offset: int, where: str
) -> Iterator[tuple[bytes, int, memoryview]]:
    """Yield (owner name without NUL, n_type, descriptor) for each note (gABI "Note Section").

    Name and descriptor are padded to 4 bytes, or to 8 in a section/segment aligned to 8 (as
    .note.gnu.property is in x86-64 files, following binutils and glibc)."""
    view = memoryview(region)
    padding = 8 if alignment == 8 else 4
    position = 0
    end = len(view)
    for _ in range(MAX_NOTE_COUNT):
        if position >= end:
            return
        if end - position < _NOTE_HEADER.size:
            raise ElfError(
                f"{where}: note header at offset 0x{file_offset + position:x} is truncated "
                f"(0x{end - position:x} bytes left)"
            )
        name_size, descriptor_size, note_type = _NOTE_HEADER.unpack_from(view, position)
        name_start = position + _NOTE_HEADER.size
        if name_size > end - name_start:
            raise ElfError(
                f"{where}: note at offset 0x{file_offset + position:x}: n_namesz 0x{name_size:x} "
                "overruns the notes"
            )
        # The descriptor starts at the next multiple of `padding` after the name, counted from
        # the note's start (header + name), which matters for 8-byte padding.
        descriptor_start = position + _align_up(_NOTE_HEADER.size + name_size, padding)
        if descriptor_start > end or descriptor_size > end - descriptor_start:
            raise ElfError(
                f"{where}: note at offset 0x{file_offset + position:x}: n_descsz 0x{descriptor_size:x} "
                "overruns the notes"
            )
        name = bytes(view[name_start : name_start + name_size]).split(b"\0", 1)[0]
        descriptor = view[descriptor_start : descriptor_start + descriptor_size]
        yield name, note_type, descriptor
        position = descriptor_start + _align_up(descriptor_size, padding)
    raise ElfError(f"{where}: more than {MAX_NOTE_COUNT} notes")


def _align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


def _check_uncompressed_size(uncompressed_size: int, where: str) -> None:
    if uncompressed_size > MAX_DECOMPRESSED_SIZE:
        raise ElfError(
            f"{where}: declared uncompressed size 0x{uncompressed_size:x} exceeds the limit "
            f"0x{MAX_DECOMPRESSED_SIZE:x}"
        )


def _size_mismatch(where: str, declared: int, actual: str) -> ElfError:
    return ElfError(
        f"{where}: decompressed size does not match the declared size 0x{declared:x}: got {actual}"
    )


def _decompress_zlib(payload: memoryview, uncompressed_size: int, where: str) -> bytes:
    """Inflate one or more concatenated zlib streams into exactly `uncompressed_size` bytes."""
    _check_uncompressed_size(uncompressed_size, where)
    pieces: list[bytes] = []
    produced = 0
    remaining: bytes | memoryview = payload
    for _ in range(MAX_ZLIB_STREAMS):
        decompressor = zlib.decompressobj()
        try:
            # max_length = room + 1 so that one byte too many is seen; it is never 0 (0 = no limit).
            piece = decompressor.decompress(remaining, uncompressed_size - produced + 1)
        except zlib.error as error:
            raise ElfError(f"{where}: corrupt zlib data: {error}") from error
        pieces.append(piece)
        produced += len(piece)
        if produced > uncompressed_size:
            raise _size_mismatch(where, uncompressed_size, f"more than 0x{uncompressed_size:x} bytes")
        if not decompressor.eof:
            raise _size_mismatch(
                where, uncompressed_size, f"0x{produced:x} bytes, zlib stream truncated"
            )
        remaining = decompressor.unused_data
        if not remaining:
            break
    else:
        raise ElfError(f"{where}: more than {MAX_ZLIB_STREAMS} concatenated zlib streams")
    if produced != uncompressed_size:
        raise _size_mismatch(where, uncompressed_size, f"0x{produced:x} bytes")
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _decompress_zstd(payload: memoryview, uncompressed_size: int, where: str) -> bytes:
    """Decompress zstd frames (possibly several, as ZSTD_decompress accepts) into exactly
    `uncompressed_size` bytes."""
    _check_uncompressed_size(uncompressed_size, where)
    try:
        import zstandard
    except ImportError as error:
        raise ElfError(
            f"{where}: section is compressed with zstd (ELFCOMPRESS_ZSTD); install fastunwind[zstd] "
            "(the zstandard module) to read it"
        ) from error
    pieces: list[bytes] = []
    produced = 0
    # Each read returns at least one byte or ends the stream, so this bound is never reached by a
    # stream that stays within the declared size.
    read_limit = uncompressed_size // ZSTD_READ_CHUNK + 2
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(bytes(payload), read_across_frames=True)
        for _ in range(read_limit):
            piece = reader.read(min(ZSTD_READ_CHUNK, uncompressed_size - produced + 1))
            if not piece:
                break
            pieces.append(piece)
            produced += len(piece)
            if produced > uncompressed_size:
                raise _size_mismatch(
                    where, uncompressed_size, f"more than 0x{uncompressed_size:x} bytes"
                )
        else:
            raise ElfError(f"{where}: zstd stream did not end within {read_limit} reads")
    except zstandard.ZstdError as error:
        raise ElfError(f"{where}: corrupt zstd data: {error}") from error
    if produced != uncompressed_size:
        raise _size_mismatch(where, uncompressed_size, f"0x{produced:x} bytes")
    return b"".join(pieces)


# --- separate debug files ------------------------------------------------------------------------------

DEFAULT_DEBUG_ROOTS = ("/usr/lib/debug",)


def find_debug_file(
    elf: ElfFile, roots: tuple[str, ...] | list[str] = DEFAULT_DEBUG_ROOTS
) -> str | None:
    """The path of the separate debug file of `elf`, or None (GDB manual §18.3).

    1. By build-id: `<root>/.build-id/<first 2 hex digits>/<rest>.debug`, accepted only if that
       file's own build-id is the same.
    2. By `.gnu_debuglink`: `<dir>/<name>`, `<dir>/.debug/<name>`, `<root>/<dir>/<name>` where
       <dir> is the directory of `elf` (as given, then with symlinks resolved), accepted only if the
       CRC-32 of the candidate file matches the one in `.gnu_debuglink`.

    Candidates that are missing, unreadable or not ELF are skipped."""
    build_id = elf.build_id_hex
    if build_id is not None and len(build_id) > 2:
        for root in roots:
            candidate = os.path.join(root, ".build-id", build_id[:2], build_id[2:] + ".debug")
            if os.path.isfile(candidate) and _has_build_id(candidate, elf.build_id):
                return candidate
    link = elf.debuglink
    if link is None:
        return None
    name, crc = link
    if os.sep in name or name in ("", ".", ".."):
        # The name is a file name, never a path (binutils stores the basename).
        _logger().warning("%s: .gnu_debuglink name %r is not a plain file name; ignored", elf.path, name)
        return None
    directories = []
    for path in (os.path.abspath(elf.path), os.path.realpath(elf.path)):
        directory = os.path.dirname(path)
        if directory not in directories:
            directories.append(directory)
    candidates = []
    for directory in directories:
        candidates.append(os.path.join(directory, name))
        candidates.append(os.path.join(directory, ".debug", name))
    for root in roots:
        for directory in directories:
            candidates.append(os.path.join(root, directory.lstrip(os.sep), name))
    for candidate in candidates:
        if not os.path.isfile(candidate) or _is_same_file(candidate, elf.path):
            continue
        if file_crc32(candidate) == crc:
            return candidate
    return None


def _has_build_id(path: str, build_id: bytes | None) -> bool:
    try:
        with ElfFile.open(path) as candidate:
            return candidate.build_id == build_id
    except (OSError, ElfError) as error:
        _logger().debug("%s: not a usable debug file: %s", path, error)
        return False


def _is_same_file(first: str, second: str) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def file_crc32(path: str) -> int | None:
    """zlib.crc32 of the whole file, computed over a read-only mapping (no Python loop)."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return zlib.crc32(b"")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapping:
                return zlib.crc32(mapping)
    except (OSError, ValueError) as error:
        _logger().debug("%s: cannot compute CRC-32: %s", path, error)
        return None


__all__ = [
    "DEFAULT_DEBUG_ROOTS",
    "ElfFile",
    "Section",
    "SectionBytes",
    "Segment",
    "Symbol",
    "find_debug_file",
]
