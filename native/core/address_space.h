/* address_space: a process's executable mappings (modules), each with the unwind tables the walker
 * may ask for it, and which of them it asks (the backend).
 *
 * Below the memory readers (memory.h reads modules' file images through fu_address_space_read_image)
 * and the walker (walk.h), which both take an address space.
 */
#ifndef FASTUNWIND_ADDRESS_SPACE_H
#define FASTUNWIND_ADDRESS_SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"
#include "compact_table.h"
#include "fu_unwind_abi.h" /* the eh_elf entry points */

/* A loaded eh_elf's entry points (fu_unwind_abi.h), owned by whoever loaded it. */
typedef struct fu_eh_elf_table {
    fu_eh_elf_step_fn step;          /* find + body in one call */
    fu_eh_elf_find_fn find;          /* pc -> body number, 0: no FDE covers pc */
    const fu_eh_elf_body_fn *bodies; /* [1..body_count] */
    uint32_t body_count;
} fu_eh_elf_table;

/* An executable mapping of a module. */
typedef struct fu_module {
    uint64_t start, end;             /* avma range of the executable mapping */
    uint64_t bias;                   /* avma = svma + bias */
    const fu_eh_elf_table *compiled; /* may be NULL: the module's eh_elf (see fu_backend) */
    const fu_compact_table *compact; /* may be NULL: asked next */
    const fu_cfi_table *eh_frame;        /* may be NULL */
    const fu_cfi_table *debug_frame;     /* may be NULL */
    const fu_image_segment *segments; /* the file's read-only PT_LOAD bytes, by svma (for reads) */
    size_t segment_count;
    uint64_t segments_low, segments_high; /* the svma span of the segments (fu_address_space_init sets it) */
    uint32_t id;                     /* the caller's identifier (for symbolization) */
    /* The process's first code, at the file's ELF entry point, where no CFI covers it (ld.so's
     * _start: RTLD_START is assembly without CFI): [entry_code_start, + entry_code_size) by svma,
     * size 0 if none. fu_module_set_entry sets it; the caller gives the entry point only of a file
     * a process starts in (image.process_entry), not a shared library's. */
    uint64_t entry_code_start, entry_code_size;
} fu_module;

/* Entry code is the bytes from e_entry up to the first FDE above it, and at most this many: the
 * entry code of every runtime we met calls on within it (ld.so's _start calls _dl_start 3 bytes in
 * and jumps to the program 58 bytes in; musl's _start calls _start_c 17 bytes in; glibc's crt1
 * _start has CFI), and a bound keeps a binary without any CFI from having all its code counted. */
#define FU_ENTRY_CODE_MAX_BYTES 64

/* Set `m`'s entry code from the file's e_entry (svma; 0: the file has none), with the module's
 * tables set (its DWARF tables, or only the compact table built from them): nothing where an FDE
 * covers e_entry (its CFI says how the stack ends there, DW_CFA_undefined rip in glibc's crt1). */
void fu_module_set_entry(fu_module *m, uint64_t entry);

/* Which unwind tables the walker uses, per module, before the frame-pointer fallback. Rows a
 * compiled eh_elf or a compact table leaves to the interpreter (FU_EH_ELF_INTERPRET, compact SLOW
 * rows), and modules without either, go to the DWARF tables, except in the *_ONLY backends. */
typedef enum fu_backend {
    /* Per row, the module's compact table where the row is on its fast path (the walk cache and
     * walk shapes serve that path), else its compiled eh_elf where `fastunwind compile` cached one
     * (the compact table's slow rows: DWARF expressions in straight-line code), else the
     * interpreter. The eh_elf issue had set eh_elfs first; since shapes the compact table is faster
     * on most recordings (docs/BENCHMARKS.md), and so eh_elfs serve where it is slow. */
    FU_BACKEND_AUTO = 0,
    FU_BACKEND_DWARF,         /* the DWARF tables only */
    FU_BACKEND_TABLE,         /* compact tables (compiled eh_elfs ignored) */
    FU_BACKEND_COMPILED,      /* compiled eh_elfs (compact tables ignored) */
    /* For tests and benchmarks of the fast paths alone: what the compact table (resp. eh_elf)
     * does not settle counts as no CFI, so a result shows what that path did by itself. */
    FU_BACKEND_TABLE_ONLY,
    FU_BACKEND_COMPILED_ONLY,
    FU_BACKEND_COUNT
} fu_backend;

/* "auto", "dwarf", "table", "compiled", "table-only", "compiled-only" (the names Python uses). */
const char *fu_backend_name(fu_backend backend);
/* The backend an address space has unless its maker chooses: FU_BACKEND_AUTO. */
#define FU_BACKEND_DEFAULT FU_BACKEND_AUTO
/* The backend of that name, or FU_BACKEND_COUNT. */
fu_backend fu_backend_from_name(const char *name);
/* Every backend's name, ", "-separated, into `out` (cut to `size`). */
void fu_backend_names(char *out, size_t size);

/* Whether `backend` asks a module's compact table (fu_module.compact) / its compiled eh_elf
 * (fu_module.compiled): the tables a maker of an address space need not give otherwise. */
static inline bool fu_backend_uses_compact(uint32_t backend)
{
    return backend == FU_BACKEND_AUTO || backend == FU_BACKEND_TABLE || backend == FU_BACKEND_TABLE_ONLY;
}
static inline bool fu_backend_uses_eh_elfs(uint32_t backend)
{
    return backend == FU_BACKEND_AUTO || backend == FU_BACKEND_COMPILED || backend == FU_BACKEND_COMPILED_ONLY;
}
/* Whether `backend` falls back to the DWARF tables for what its fast path leaves (not the *_ONLY). */
static inline bool fu_backend_uses_dwarf(uint32_t backend)
{
    return backend != FU_BACKEND_TABLE_ONLY && backend != FU_BACKEND_COMPILED_ONLY;
}

/* Modules sorted by start, not overlapping. */
typedef struct fu_address_space {
    const fu_module *modules;
    size_t count;
    uint32_t backend; /* fu_backend */
} fu_address_space;

/* Sorts `modules` by start, sets their segments' spans, and makes `space` of them (which keeps the
 * pointer); FU_ERR_INVALID ("modules 3 and 4 overlap at 0x7f0000001000") if two overlap. */
fu_status fu_address_space_init(fu_address_space *space, fu_module *modules, size_t count, uint32_t backend,
                                fu_error *err);

/* The module whose executable mapping contains avma, or -1.
 *
 * Defined here, so that each unit has its own copy, and out of line: the walker (walk.c) asks it on
 * every step its cache does not settle, and its loops were tuned with it a call whose registers the
 * compiler knows. Callgrind, one cold pass of the c and c-fp recordings: inlined (static inline), it
 * grew walk.c's find_step past the inliner's limit and a walk ran 2.0-3.9% more instructions; in its
 * own unit (address_space.c), 0.5-0.7% more, its caller saving registers it does not touch. */
static __attribute__((noinline, unused)) int64_t fu_address_space_find(const fu_address_space *space, uint64_t avma)
{
    size_t lo = 0, hi = space->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (space->modules[mid].start <= avma)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || avma >= space->modules[lo - 1].end)
        return -1;
    return (int64_t)(lo - 1);
}

/* Read from a module's file image: avma -> svma through the module's bias, then its segments. */
bool fu_address_space_read_image(const fu_address_space *space, uint64_t avma, unsigned size, uint64_t *out);

#endif
