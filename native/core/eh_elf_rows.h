/* eh_elf_rows: the rows of a module as the eh_elf generator (fastunwind.eh_elf) compiles them.
 *
 * The covered range [base, end) cut into `count` intervals: interval i is [starts[i], starts[i + 1])
 * (the last one ends at `end`), with keys[i] FU_EH_ELF_NO_KEY for a gap (no FDE covers the
 * interval), else the index of a distinct (table, row state, CIE signal flag, CIE return address
 * column), packed as fu_eh_elf_key_unpack reads it. Neighbouring intervals with the same key are
 * merged.
 */
#ifndef FASTUNWIND_EH_ELF_ROWS_H
#define FASTUNWIND_EH_ELF_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"
#include "error.h"
#include "intern.h"

#define FU_EH_ELF_NO_KEY UINT32_MAX

typedef struct fu_eh_elf_rows {
    uint64_t base, end;
    size_t count;      /* intervals in [base, end) */
    uint64_t *starts;  /* count + 1 entries (none when count is 0): the last is `end` */
    uint32_t *keys;    /* the key of each start; the last one a gap (FU_EH_ELF_NO_KEY) */
    uint64_t *packed;  /* by key index: the distinct keys */
    uint32_t key_count, key_cap;
    fu_intern_set key_index; /* packed key -> its index */
} fu_eh_elf_rows;

/* A key: which table (0 .eh_frame, 1 .debug_frame), its CIE's signal flag and return address column
 * (clamped at 255, which no column reaches), and the row state in that table. */
typedef struct fu_eh_elf_key {
    unsigned table;
    bool signal_frame;
    unsigned ra_column;
    uint32_t state;
} fu_eh_elf_key;

/* The intervals of the two tables (either may be NULL). Fails with FU_ERR_EH_ELF ("an FDE covers
 * 0x... up to the end of the address space") or FU_ERR_NOMEM, leaving `out` empty. */
fu_status fu_eh_elf_rows_build(const fu_cfi_table *const tables[2], fu_eh_elf_rows *out, fu_error *err);
fu_eh_elf_key fu_eh_elf_key_unpack(uint64_t packed);
void fu_eh_elf_rows_free(fu_eh_elf_rows *rows);

#endif
