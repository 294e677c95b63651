/* coredump: an ELF core file of an x86-64 Linux process, as the kernel writes it (fs/binfmt_elf.c,
 * elf_core_dump) and as gdb's `gcore` does: its threads (registers, ids, signal), the files it had
 * mapped, its auxiliary vector and the memory the dump holds.
 *
 *   ELF header (ET_CORE, EM_X86_64, ELFCLASS64, little-endian)
 *   program headers:  PT_NOTE   one or more note segments
 *                     PT_LOAD   one per mapping: p_vaddr, p_memsz, and the p_filesz bytes at
 *                               p_offset the dump kept (0 where the kernel's coredump_filter left the
 *                               mapping out: file-backed text, typically, which comes from the file)
 *   notes ("CORE"):   NT_PRSTATUS  one per thread, the thread that took the signal first
 *                     NT_PRPSINFO  the process's name and pid
 *                     NT_AUXV      AT_SYSINFO_EHDR (the vDSO), AT_ENTRY, AT_PHDR
 *                     NT_FILE      every file mapping: start, end, file offset, path
 *
 * Every byte is read through a cursor bounded by the file; every count the file states is checked
 * against the bytes that hold it and against a named limit, so a truncated or hostile core is an
 * FU_ERR_CORE with what, where and which value, never a read out of bounds. The core does not own
 * the file's bytes (the caller maps them) and keeps pointers into them.
 */
#ifndef FASTUNWIND_COREDUMP_H
#define FASTUNWIND_COREDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"   /* fu_image_segment */
#include "error.h"
#include "x86_64.h" /* FU_USER_REGISTER_COUNT */

/* Limits on what a core may state (each a count the file gives): program headers (the kernel writes
 * one per mapping plus the note segment, and a process has at most vm.max_map_count = 65530
 * mappings), threads (the kernel's default threads-max is in the hundreds of thousands, but a
 * dump of more than 65536 threads would be a 22 MiB note of registers alone), NT_FILE entries (one
 * per mapping), notes (a few per thread). */
#define FU_CORE_MAX_SEGMENTS 65536
#define FU_CORE_MAX_THREADS 65536
#define FU_CORE_MAX_FILES 65536
#define FU_CORE_MAX_NOTES (4 * FU_CORE_MAX_THREADS + 64)
/* NT_AUXV entries: the kernel writes AT_VECTOR_SIZE_BASE + arch entries (about 25). */
#define FU_CORE_MAX_AUXV 1024

typedef struct fu_core_thread {
    int32_t tid;                                 /* pr_pid */
    int32_t signal;                              /* pr_cursig: the signal it was stopped by, or 0 */
    uint64_t user_regs[FU_USER_REGISTER_COUNT];  /* struct user_regs_struct, in its order (x86_64.h) */
} fu_core_thread;

typedef struct fu_core_file {
    uint64_t start, end; /* avma range of the mapping */
    uint64_t offset;     /* byte offset in the file of `start` (NT_FILE's page offset x its page size) */
    const char *path;    /* into the core's bytes, NUL-terminated there */
} fu_core_file;

/* A PT_LOAD: [vaddr, vaddr + memsz) of the process, of which the first `present` bytes are in the
 * core at `data` (filesz, cut where the file ends: a truncated core). */
typedef struct fu_core_segment {
    uint64_t vaddr, memsz, filesz;
    uint64_t present;
    const uint8_t *data;
    uint32_t flags; /* PF_X 1, PF_W 2, PF_R 4 */
} fu_core_segment;

/* Auxiliary vector entries the unwinder uses (getauxval(3)); 0 where absent. */
typedef struct fu_core_auxv {
    uint64_t sysinfo_ehdr; /* AT_SYSINFO_EHDR: the vDSO's ELF header */
    uint64_t entry;        /* AT_ENTRY: the program's entry point */
    uint64_t phdr;         /* AT_PHDR: the program's program headers */
} fu_core_auxv;

typedef struct fu_core {
    fu_core_segment *segments; /* PT_LOADs, sorted by vaddr, not overlapping */
    size_t segment_count;
    fu_image_segment *memory;  /* the present part of each segment with one (for memory.h's core reader) */
    size_t memory_count;
    fu_core_thread *threads;   /* in the notes' order */
    size_t thread_count;
    fu_core_file *files;       /* in NT_FILE's order: by address, disjoint */
    size_t file_count;
    fu_core_auxv auxv;
    bool has_prpsinfo, has_auxv, has_files;
    int32_t pid;               /* NT_PRPSINFO's pr_pid, else the first thread's */
    char name[17];             /* pr_fname (the kernel's comm), NUL-terminated */
    char arguments[81];        /* pr_psargs, NUL-terminated */
    uint64_t truncated_bytes;  /* PT_LOAD bytes the headers state beyond the end of the file */
} fu_core;

/* Parses the core in [data, data + size), which must outlive `core`. FU_ERR_CORE ("not an ELF
 * file", "NT_FILE at offset 0x3a8: 70000 entries, more than FU_CORE_MAX_FILES", ...) or
 * FU_ERR_NOMEM; on failure `core` holds nothing to free. */
fu_status fu_core_parse(fu_core *core, const uint8_t *data, size_t size, fu_error *err);
void fu_core_free(fu_core *core);

/* The segment holding avma `address`, or NULL. */
const fu_core_segment *fu_core_segment_at(const fu_core *core, uint64_t address);

#endif
