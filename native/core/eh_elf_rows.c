/* eh_elf_rows: the rows of a module as the eh_elf generator (fastunwind.eh_elf) compiles them (see
 * eh_elf_rows.h; the Python function _core.eh_elf_rows is py/py_eh_elf_rows.c).
 *
 * Exactness. As compact_table.c does, the generator does not re-implement DWARF's row selection:
 * the walker's lookup (fu_cfi_table_find_row on .eh_frame, then .debug_frame) compares a PC only with
 * FDE starts, FDE ends and row addresses, so between two consecutive such values its answer cannot
 * change. The intervals are those values, sorted; each is asked once. Overlapping FDEs, rows past
 * their FDE's end and FDEs that failed to evaluate come out exactly as the walker sees them.
 */
#include "eh_elf_rows.h"

#include <stdlib.h>
#include <string.h>

#include "fu_unwind_abi.h"


/* ra_column values at or above this compare unequal to every column (columns are < FU_MAX_COLUMNS),
 * so the key may clamp them without merging rows the walker distinguishes. */
#define RA_COLUMN_CLAMP 255u

static uint64_t pack_key(unsigned table, const fu_entry *fde, uint32_t state)
{
    uint64_t ra = fde->cie ? fde->cie->ra_column : FU_REG_RA;
    if (ra > RA_COLUMN_CLAMP)
        ra = RA_COLUMN_CLAMP;
    bool signal = fde->cie && fde->cie->signal_frame;
    return (uint64_t)state | ra << 32 | (uint64_t)signal << 40 | (uint64_t)table << 41;
}

static bool packed_equal(const void *packed, uint32_t index, const void *key)
{
    return ((const uint64_t *)packed)[index] == *(const uint64_t *)key;
}

/* The index of `packed`, added if new (indices in order of first sight); UINT32_MAX when out of
 * memory. */
static uint32_t key_intern(fu_eh_elf_rows *s, uint64_t packed)
{
    uint64_t hash = fu_hash_u64(packed);
    uint32_t found = fu_intern_find(&s->key_index, hash, packed_equal, s->packed, &packed);
    if (found != FU_INTERN_NONE)
        return found;
    if (!fu_grow_array((void **)&s->packed, &s->key_cap, (uint64_t)s->key_count + 1, sizeof *s->packed) ||
        !fu_intern_insert(&s->key_index, hash, s->key_count))
        return UINT32_MAX;
    s->packed[s->key_count] = packed;
    return s->key_count++;
}

/* The key in force at `pc`, as the walker resolves rows, or FU_EH_ELF_NO_KEY. */
static uint32_t key_at(fu_eh_elf_rows *s, const fu_cfi_table *const tables[2], uint64_t pc, bool *failed)
{
    int64_t row, fde;
    int which = fu_cfi_tables_find_row(tables, pc, &row, &fde);
    if (which < 0)
        return FU_EH_ELF_NO_KEY;
    uint32_t key = key_intern(s, pack_key((unsigned)which, &tables[which]->entries[fde], tables[which]->row_state[row]));
    *failed = key == UINT32_MAX;
    return key;
}

fu_eh_elf_key fu_eh_elf_key_unpack(uint64_t packed)
{
    return (fu_eh_elf_key){
        .table = (unsigned)(packed >> 41 & 1),
        .signal_frame = packed >> 40 & 1,
        .ra_column = (unsigned)(packed >> 32 & 0xff),
        .state = (uint32_t)packed,
    };
}

fu_status fu_eh_elf_rows_build(const fu_cfi_table *const tables[2], fu_eh_elf_rows *out, fu_error *err)
{
    memset(out, 0, sizeof *out);
    uint64_t *bounds = NULL;
    size_t unique = 0, intervals = 0;
    fu_status status = FU_OK;
    if ((status = fu_cfi_tables_boundaries(tables, &bounds, &unique, err)) != FU_OK)
        goto done;
    if (!(out->starts = malloc((unique ? unique : 1) * sizeof *out->starts)) ||
        !(out->keys = malloc((unique ? unique : 1) * sizeof *out->keys))) {
        status = fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu eh_elf intervals", unique);
        goto done;
    }
    /* one lookup per interval [bounds[i], bounds[i + 1]); equal neighbours merged, the leading gap
     * dropped; the trailing gap's start becomes `end` */
    for (size_t i = 0; i < unique; i++) {
        bool failed = false;
        uint32_t key = key_at(out, tables, bounds[i], &failed);
        if (failed) {
            status = fu_fail(err, FU_ERR_NOMEM, "out of memory for eh_elf row keys");
            goto done;
        }
        if (i + 1 == unique && key != FU_EH_ELF_NO_KEY) {
            status = fu_fail(err, FU_ERR_EH_ELF,
                             "an FDE covers 0x%llx up to the end of the address space: no eh_elf can be built",
                             (unsigned long long)bounds[i]);
            goto done;
        }
        if (!(intervals > 0 && out->keys[intervals - 1] == key) && !(intervals == 0 && key == FU_EH_ELF_NO_KEY)) {
            out->starts[intervals] = bounds[i];
            out->keys[intervals++] = key;
        }
    }
    out->base = intervals ? out->starts[0] : 0;
    out->end = intervals ? out->starts[intervals - 1] : 0;
    out->count = intervals ? intervals - 1 : 0; /* the last interval is the trailing gap */
done:
    free(bounds);
    if (status != FU_OK)
        fu_eh_elf_rows_free(out);
    return status;
}

void fu_eh_elf_rows_free(fu_eh_elf_rows *rows)
{
    free(rows->starts);
    free(rows->keys);
    free(rows->packed);
    fu_intern_free(&rows->key_index);
    memset(rows, 0, sizeof *rows);
}
