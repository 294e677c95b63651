/* elf_file: an ELF file's headers read from its bytes, every read bounds-checked, and the facts the
 * launcher and the Python path both take from them: the sections, the segments, the build-id note,
 * the .gnu_debuglink, the entry where a process starts, the bias of a mapping and the separate
 * debug files to try, in order. One home for each: elf/__init__.py (ElfFile) and image.py
 * (ModuleImage) call these through _core, native/cli/modules.c directly.
 *
 * Little-endian ELF32 and ELF64 (gABI "ELF Header", with extended section numbering). Nothing is
 * allocated: a fu_elf points into the caller's bytes, which must outlive it. Every failure is
 * FU_ERR_ELF (ElfError) with the message the Python reader words, without the file's name (the
 * caller prefixes it).
 */
#ifndef FASTUNWIND_ELF_FILE_H
#define FASTUNWIND_ELF_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "error.h"

/* Section headers of one file. Extended numbering (e_shnum 0) exists because objects built with
 * -ffunction-sections from large C++ units pass 65280 sections; 2**24 headers are 1 GiB of
 * headers, far beyond any file seen. */
#define FU_ELF_MAX_SECTIONS (1u << 24)
/* Program headers of one file: linkers emit about a dozen, core files one per mapping. */
#define FU_ELF_MAX_SEGMENTS (1u << 16)
/* Notes in one note section or PT_NOTE segment (glibc binaries carry 3 or 4). */
#define FU_ELF_MAX_NOTES (1u << 12)
/* Length of one name in a string table (the longest mangled C++ names are a few 10 KB). */
#define FU_ELF_MAX_NAME_LENGTH (1u << 20)
/* Build-id bytes: 20 (sha1, the default), 16 (md5/uuid), 8 (xxhash); ld --build-id=0xHEX any. */
#define FU_ELF_MAX_BUILD_ID 64
/* x86-64 Linux mappings are 4 KiB-granular. */
#define FU_ELF_PAGE_SIZE 4096u
/* The separate debug files' root where the caller names none (GDB manual, "Separate Debug Files"). */
#define FU_ELF_DEBUG_ROOT "/usr/lib/debug"
/* Roots one debug-file search takes. */
#define FU_ELF_MAX_DEBUG_ROOTS 16

/* One section header, of either class. */
typedef struct fu_elf_section {
    uint32_t index, name, type, link, info;
    uint64_t flags, addr, offset, size, addralign, entsize;
} fu_elf_section;

/* One program header, of either class. */
typedef struct fu_elf_segment {
    uint32_t type, flags;
    uint64_t offset, vaddr, paddr, filesz, memsz, align;
} fu_elf_segment;

/* One symbol table entry (Elf32_Sym or Elf64_Sym), of either class; its record is
 * FU_ELF_SYMBOL_SIZE(elf_class) bytes. */
typedef struct fu_elf_symbol {
    uint32_t name;
    uint8_t info;
    uint16_t shndx;
    uint64_t value, size;
} fu_elf_symbol;
#define FU_ELF_SYMBOL_SIZE(elf_class) ((elf_class) == 64 ? 24u : 16u)

typedef struct fu_elf {
    const uint8_t *data;
    size_t size;
    unsigned elf_class; /* 32 or 64 */
    uint16_t type, machine;
    uint64_t entry;
    const uint8_t *section_headers, *program_headers; /* within data */
    size_t section_count, segment_count;
    const uint8_t *section_names; /* the names' bytes, NULL without a name table */
    size_t section_names_size;
} fu_elf;

/* Read the headers of `data` (every section name checked). */
fu_status fu_elf_open(fu_elf *elf, const uint8_t *data, size_t size, fu_error *err);

/* Section `index` (< section_count), segment `index` (< segment_count). */
fu_elf_section fu_elf_section_at(const fu_elf *elf, size_t index);
fu_elf_segment fu_elf_segment_at(const fu_elf *elf, size_t index);
/* The symbol whose record starts at `record` (FU_ELF_SYMBOL_SIZE(elf_class) readable bytes). */
fu_elf_symbol fu_elf_symbol_from(unsigned elf_class, const uint8_t *record);
/* A section's name (NUL-terminated within the names: checked by fu_elf_open), "" without names. */
const char *fu_elf_section_name(const fu_elf *elf, const fu_elf_section *section);
/* The first section called `name` into *out; false without one. */
bool fu_elf_section_named(const fu_elf *elf, const char *name, fu_elf_section *out);
/* Whether [offset, offset + size) lies within the file. */
bool fu_elf_within(const fu_elf *elf, uint64_t offset, uint64_t size);
/* A section's bytes as the file holds them (none for SHT_NOBITS); FU_ERR_ELF where they overrun it. */
fu_status fu_elf_section_bytes(const fu_elf *elf, const fu_elf_section *section, const uint8_t **data,
                               size_t *size, fu_error *err);
/* A segment's p_filesz bytes at p_offset; FU_ERR_ELF where they overrun the file. */
fu_status fu_elf_segment_bytes(const fu_elf *elf, const fu_elf_segment *segment, const uint8_t **data,
                               size_t *size, fu_error *err);

/* The file's build-id: its SHT_NOTE sections first, then its PT_NOTE segments (a stripped file may
 * have no section headers); *size 0 when none. */
fu_status fu_elf_build_id(const fu_elf *elf, uint8_t build_id[FU_ELF_MAX_BUILD_ID], size_t *build_id_size,
                          fu_error *err);

/* Program headers read from a file's first page in memory, at most (a file's are a dozen). */
#define FU_ELF_MAX_MEMORY_PROGRAM_HEADERS 64
/* A note segment read from a file's copy in memory, at most (the build-id's note is 36 bytes). */
#define FU_ELF_MAX_MEMORY_NOTE_BYTES (1u << 16)
/* The `size` bytes at `address` of a memory that holds them all, else NULL. */
typedef const uint8_t *(*fu_elf_memory_at)(const void *memory, uint64_t address, size_t size);
/* The build-id of the ELF64 file whose first page `memory` holds at `start` (a mapped file in a
 * core: the kernel dumps the first page of each ELF mapping), from its PT_NOTE segments read with
 * 4-byte padding; *build_id_size 0 when none (not ELF64, headers past the end of the address space
 * or not held, no note that parses: an 8-aligned .note.gnu.property region holds none). */
void fu_elf_build_id_in_memory(fu_elf_memory_at at, const void *memory, uint64_t start,
                               uint8_t build_id[FU_ELF_MAX_BUILD_ID], size_t *build_id_size);

/* .gnu_debuglink: a NUL-terminated file name, zero padding to a multiple of 4, the CRC-32 of the
 * debug file. *name NULL without the section; else the name (NUL-terminated within the file). */
fu_status fu_elf_debuglink(const fu_elf *elf, const char **name, uint32_t *crc, fu_error *err);

/* Where a process starts running this file, else 0: e_entry for an executable (ET_EXEC, or a file
 * with PT_INTERP: a PIE, libc.so.6) or a file that needs no library (DT_NEEDED: the dynamic
 * loader, a static PIE). A shared library's e_entry is no process's first code: linkers often
 * leave it at the start of .text (crtstuff's deregister_tm_clones, without CFI). */
fu_status fu_elf_process_entry(const fu_elf *elf, uint64_t *entry, fu_error *err);

/* avma - svma of an executable mapping [start, end) of file offset `pgoff`: a mapping places svma
 * s at s + bias, bias = start - pgoff + p_offset - p_vaddr of the PT_LOAD segment it maps (gABI
 * "Program Loading"). Several segments may hold its first page (lld and mold start the executable
 * segment in the file page where the read-only one ends): the executable one (PF_X) among those
 * whose pages hold pgoff, else one whose addresses overlap the mapping under that bias, else the
 * first (a file mapped executable without PF_X segments). False if no PT_LOAD holds pgoff. */
bool fu_elf_mapping_bias(const fu_elf *elf, uint64_t start, uint64_t end, uint64_t pgoff, uint64_t *bias);

/* Whether the walker reads segment `p` as the file's bytes at its svma: a PT_LOAD with bytes in the
 * file; with `read_only`, one not writable (the constants a DWARF expression may read); without,
 * any (what a CFI section's indirect pointers, DW_EH_PE_indirect, are read from). */
bool fu_elf_segment_loaded(const fu_elf_segment *p, bool read_only);
/* What a CFI section's pointer encodings are relative to (LSB 5.0 section 10.5): sh_addr of the
 * first .text (DW_EH_PE_textrel) and of the first .got (DW_EH_PE_datarel), 0 without one. */
void fu_elf_pointer_bases(const fu_elf *elf, uint64_t *text_base, uint64_t *data_base);

/* Whether a PT_LOAD segment whose pages hold file offset `pgoff` is executable (PF_X): whether a
 * mapping of the file at that offset maps code. */
bool fu_elf_offset_executable(const fu_elf *elf, uint64_t pgoff);

/* Which rule a debug-file candidate comes from, so which check accepts it. */
typedef enum fu_elf_debug_rule {
    FU_ELF_DEBUG_BY_BUILD_ID = 0, /* <root>/.build-id/xx/rest.debug: if its own build-id is the same */
    FU_ELF_DEBUG_BY_LINK = 1,     /* the .gnu_debuglink name: if its CRC-32 is the link's */
} fu_elf_debug_rule;

/* The separate debug files to try for a file, in order (GDB manual, "Separate Debug Files"): by a
 * build-id of more than one byte, <root>/.build-id/<2 hex digits>/<rest>.debug for each root; by
 * the .gnu_debuglink `link_name` (NULL: none), <dir>/<name>, <dir>/.debug/<name> for each <dir> of
 * `path` and `resolved_path` (absolute: the file's path as given and with symlinks resolved; the
 * second only if another directory), then <root>/<dir>/<name> for each root and dir. A link name
 * that is not a plain file name (empty, ".", "..", with a '/') gives none and sets *link_ignored.
 * The paths are appended to `paths` NUL-terminated, their rules to rules[*count]. */
#define FU_ELF_MAX_DEBUG_CANDIDATES (3 * FU_ELF_MAX_DEBUG_ROOTS + 4)
fu_status fu_elf_debug_candidates(const uint8_t *build_id, size_t build_id_size, const char *link_name,
                                  const char *path, const char *resolved_path, const char *const *roots,
                                  size_t root_count, fu_buffer *paths,
                                  fu_elf_debug_rule rules[FU_ELF_MAX_DEBUG_CANDIDATES], size_t *count,
                                  bool *link_ignored, fu_error *err);

#endif
