/* lookup: find the FDE and the row that apply at an address, in O(log n).
 *
 * The index holds the FDEs that evaluated cleanly and cover a non-empty range, sorted by start.
 * Where FDEs overlap (a linker bug; seen with hand-written assembly), the one that starts last
 * wins, like a binary search over .eh_frame_hdr would decide.
 */
#include <stdlib.h>

#include "cfi.h"
#include "radix_sort.h"

/* An indexed FDE while the index is sorted: its start (the key), its entry. */
typedef struct indexed_fde {
    uint64_t start;
    uint32_t entry;
} indexed_fde;

fu_status fu_cfi_table_build_index(fu_cfi_table *t, fu_error *err)
{
    free(t->fde_sorted);
    free(t->fde_starts);
    t->fde_starts = NULL;
    t->fde_sorted = malloc(sizeof(uint32_t) * (t->entry_count ? t->entry_count : 1));
    indexed_fde *fdes = malloc(sizeof *fdes * (t->entry_count ? t->entry_count : 1));
    if (!t->fde_sorted || !fdes) {
        free(fdes);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the FDE index");
    }
    t->fde_count = 0;
    for (uint32_t i = 0; i < t->entry_count; i++) {
        const fu_entry *e = &t->entries[i];
        if (e->kind == FU_ENTRY_FDE && !e->has_error && !e->discarded && e->pc_range > 0 && e->row_count > 0)
            fdes[t->fde_count++] = (indexed_fde){e->pc_begin, i};
    }
    /* by start; of FDEs with one start, in section order (entries are) */
    t->fde_starts = malloc(sizeof(uint64_t) * (t->fde_count ? t->fde_count : 1));
    if (!t->fde_starts || !fu_radix_sort(fdes, t->fde_count, sizeof *fdes)) {
        free(fdes);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the FDE index");
    }
    for (uint32_t i = 0; i < t->fde_count; i++) {
        t->fde_sorted[i] = fdes[i].entry;
        t->fde_starts[i] = fdes[i].start;
    }
    free(fdes);
    return FU_OK;
}

/* The index of the first indexed FDE in [lo, hi) that starts above pc, hi if none does (those
 * before lo start at or below it). */
static uint32_t first_starting_above(const fu_cfi_table *t, uint32_t lo, uint32_t hi, uint64_t pc)
{
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->fde_starts[mid] <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint32_t fu_cfi_table_fdes_starting_by(const fu_cfi_table *t, uint64_t pc)
{
    return first_starting_above(t, 0, t->fde_count, pc);
}

uint32_t fu_cfi_table_fdes_starting_by_from(const fu_cfi_table *t, uint32_t from, uint64_t pc)
{
    /* galloping: past `from` by 1, 2, 4, ... FDEs while they start at or below pc, then a binary
     * search of the last stride */
    uint32_t lo = from < t->fde_count ? from : t->fde_count, hi = lo, stride = 1;
    while (hi < t->fde_count && t->fde_starts[hi] <= pc) {
        lo = hi + 1;
        hi = t->fde_count - hi > stride ? hi + stride : t->fde_count;
        stride *= 2;
    }
    return first_starting_above(t, lo, hi, pc);
}

int64_t fu_cfi_table_fde_covering(const fu_cfi_table *t, uint32_t starting_by, uint64_t pc)
{
    uint32_t lo = starting_by; /* the last FDE whose start <= pc is lo - 1 */
    if (lo == 0)
        return -1;
    const fu_entry *e = &t->entries[t->fde_sorted[lo - 1]];
    if (pc - e->pc_begin >= e->pc_range)
        return -1;
    return t->fde_sorted[lo - 1];
}

int64_t fu_cfi_table_find_fde(const fu_cfi_table *t, uint64_t pc)
{
    return fu_cfi_table_fde_covering(t, fu_cfi_table_fdes_starting_by(t, pc), pc);
}

int64_t fu_cfi_table_find_row(const fu_cfi_table *t, uint64_t pc, int64_t *fde_index)
{
    int64_t fde = fu_cfi_table_find_fde(t, pc);
    if (fde_index)
        *fde_index = fde;
    if (fde < 0)
        return -1;
    const fu_entry *e = &t->entries[fde];
    uint32_t after = fu_cfi_table_rows_starting_by(t, e, pc);
    if (after == e->first_row)
        return -1;
    return after - 1;
}

uint32_t fu_cfi_table_rows_starting_by(const fu_cfi_table *t, const fu_entry *e, uint64_t pc)
{
    /* rows closed by a zero advance share an address, and the later one is the state in force */
    uint32_t lo = e->first_row, hi = e->first_row + e->row_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->row_address[mid] <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int fu_cfi_tables_find_row(const fu_cfi_table *const tables[2], uint64_t pc, int64_t *row, int64_t *fde_index)
{
    for (int i = 0; i < 2; i++) {
        if (!tables[i])
            continue;
        *row = fu_cfi_table_find_row(tables[i], pc, fde_index);
        if (*row >= 0)
            return i;
    }
    return -1;
}

uint64_t fu_cfi_tables_next_fde_start(const fu_cfi_table *const tables[2], uint64_t pc)
{
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < 2; i++) {
        const fu_cfi_table *t = tables[i];
        if (!t)
            continue;
        uint32_t lo = fu_cfi_table_fdes_starting_by(t, pc); /* the first FDE whose start > pc */
        if (lo < t->fde_count && t->fde_starts[lo] < next)
            next = t->fde_starts[lo];
    }
    return next;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

fu_status fu_cfi_tables_boundaries(const fu_cfi_table *const tables[2], uint64_t **out, size_t *count, fu_error *err)
{
    size_t cap = 1;
    for (unsigned i = 0; i < 2; i++)
        for (uint32_t f = 0; tables[i] && f < tables[i]->fde_count; f++)
            cap += 2 + tables[i]->entries[tables[i]->fde_sorted[f]].row_count;
    uint64_t *bounds = malloc(cap * sizeof *bounds);
    if (!bounds)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu row boundaries", cap);
    size_t n = 0;
    for (unsigned i = 0; i < 2; i++) {
        const fu_cfi_table *t = tables[i];
        for (uint32_t f = 0; t && f < t->fde_count; f++) {
            const fu_entry *e = &t->entries[t->fde_sorted[f]];
            bounds[n++] = e->pc_begin;
            /* an FDE whose range wraps covers the rest of the address space */
            bounds[n++] = e->pc_range > UINT64_MAX - e->pc_begin ? UINT64_MAX : e->pc_begin + e->pc_range;
            for (uint32_t r = 0; r < e->row_count; r++)
                bounds[n++] = t->row_address[e->first_row + r];
        }
    }
    qsort(bounds, n, sizeof *bounds, compare_u64);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++)
        if (unique == 0 || bounds[i] != bounds[unique - 1])
            bounds[unique++] = bounds[i];
    *out = bounds;
    *count = unique;
    return FU_OK;
}
