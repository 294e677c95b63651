/* lookup: find the FDE and the row that apply at an address, in O(log n).
 *
 * The index holds the FDEs that evaluated cleanly and cover a non-empty range, sorted by start.
 * Where FDEs overlap (a linker bug; seen with hand-written assembly), the one that starts last
 * wins, like a binary search over .eh_frame_hdr would decide.
 */
#include <stdlib.h>

#include "cfi.h"

static const fu_table *sort_table; /* qsort has no context argument in C11 */

static int compare_fde(const void *a, const void *b)
{
    const fu_entry *x = &sort_table->entries[*(const uint32_t *)a];
    const fu_entry *y = &sort_table->entries[*(const uint32_t *)b];
    if (x->pc_begin != y->pc_begin)
        return x->pc_begin < y->pc_begin ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

fu_status fu_table_build_index(fu_table *t, fu_error *err)
{
    free(t->fde_sorted);
    t->fde_sorted = malloc(sizeof(uint32_t) * (t->entry_count ? t->entry_count : 1));
    if (!t->fde_sorted)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the FDE index");
    t->fde_count = 0;
    for (uint32_t i = 0; i < t->entry_count; i++) {
        const fu_entry *e = &t->entries[i];
        if (e->kind == FU_ENTRY_FDE && !e->has_error && !e->discarded && e->pc_range > 0 && e->row_count > 0)
            t->fde_sorted[t->fde_count++] = i;
    }
    sort_table = t;
    qsort(t->fde_sorted, t->fde_count, sizeof(uint32_t), compare_fde);
    sort_table = NULL;
    free(t->fde_starts);
    t->fde_starts = malloc(sizeof(uint64_t) * (t->fde_count ? t->fde_count : 1));
    if (!t->fde_starts)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the FDE index");
    for (uint32_t i = 0; i < t->fde_count; i++)
        t->fde_starts[i] = t->entries[t->fde_sorted[i]].pc_begin;
    return FU_OK;
}

int64_t fu_table_find_fde(const fu_table *t, uint64_t pc)
{
    /* last FDE whose start <= pc */
    uint32_t lo = 0, hi = t->fde_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->fde_starts[mid] <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const fu_entry *e = &t->entries[t->fde_sorted[lo - 1]];
    if (pc - e->pc_begin >= e->pc_range)
        return -1;
    return t->fde_sorted[lo - 1];
}

int64_t fu_table_find_row(const fu_table *t, uint64_t pc, int64_t *fde_index)
{
    int64_t fde = fu_table_find_fde(t, pc);
    if (fde_index)
        *fde_index = fde;
    if (fde < 0)
        return -1;
    const fu_entry *e = &t->entries[fde];
    /* last row whose address <= pc; rows closed by a zero advance share an address, and the
     * later one is the state in force */
    uint32_t lo = e->first_row, hi = e->first_row + e->row_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->row_address[mid] <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == e->first_row)
        return -1;
    return lo - 1;
}
