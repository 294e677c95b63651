/* bpf_layout: compact tables as the in-kernel unwinder's map slots (bpf_layout.h). */
#include "bpf_layout.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(fu_bpf_rule) == sizeof(fu_compact_rule), "a BPF rule is a compact rule");
_Static_assert(offsetof(fu_bpf_rule, cfa_offset) == offsetof(fu_compact_rule, cfa_offset), "rule layout");
_Static_assert(offsetof(fu_bpf_rule, saved_offset_by_8) == offsetof(fu_compact_rule, saved_offset_by_8), "rule layout");
_Static_assert(offsetof(fu_bpf_rule, kept_caller_saved) == offsetof(fu_compact_rule, kept_caller_saved), "rule layout");
_Static_assert(FU_BPF_CFA_NO_INFO == FU_COMPACT_CFA_NO_INFO && FU_BPF_CFA_SLOW == FU_COMPACT_CFA_SLOW &&
                   FU_BPF_CFA_RSP == FU_COMPACT_CFA_RSP && FU_BPF_CFA_RBP == FU_COMPACT_CFA_RBP &&
                   FU_BPF_CFA_REGISTER == FU_COMPACT_CFA_REGISTER && FU_BPF_CFA_PLT == FU_COMPACT_CFA_PLT &&
                   FU_BPF_CFA_DEREF == FU_COMPACT_CFA_DEREF &&
                   FU_BPF_CFA_SIGNAL_CONTEXT == FU_COMPACT_CFA_SIGNAL_CONTEXT,
               "the CFA kinds of compact_table.h");
_Static_assert(FU_BPF_ORIGIN_DECLARED == FU_COMPACT_ORIGIN_DECLARED, "rule origins");
_Static_assert(FU_BPF_KEEP == FU_COMPACT_KEEP && FU_BPF_UNDEFINED == FU_COMPACT_UNDEFINED &&
                   FU_BPF_RBP_SLOT_FIRST == FU_COMPACT_RBP_SLOT_FIRST,
               "save slot markers");
_Static_assert(sizeof(fu_bpf_stack) <= 512, "a hash map key is at most 512 bytes");

fu_status fu_bpf_rule_id(fu_bpf_rules *d, const fu_compact_rule *rule, uint32_t *id, fu_error *err)
{
    for (uint32_t i = 0; i < d->count; i++)
        if (memcmp(&d->rules[i], rule, sizeof *rule) == 0) {
            *id = i;
            return FU_OK;
        }
    if (d->count >= FU_BPF_MAX_RULES)
        return fu_fail(err, FU_ERR_INVALID, "the BPF rule dictionary is full (%u rules)", FU_BPF_MAX_RULES);
    if ((d->count & (d->count - 1)) == 0) { /* 0, 1, 2, 4, ...: grow at powers of two */
        fu_bpf_rule *grown = realloc(d->rules, sizeof *grown * (d->count ? 2 * (size_t)d->count : 16));
        if (!grown)
            return fu_fail(err, FU_ERR_NOMEM, "out of memory");
        d->rules = grown;
    }
    memcpy(&d->rules[d->count], rule, sizeof *rule);
    *id = d->count++;
    return FU_OK;
}

void fu_bpf_rules_free(fu_bpf_rules *d)
{
    free(d->rules);
    d->rules = NULL;
    d->count = 0;
}

static uint32_t index_entries(const fu_compact_table *t)
{
    return (uint32_t)((t->end_svma - t->base_svma - 1) >> FU_BPF_INDEX_SHIFT) + 2;
}

uint32_t fu_bpf_module_slot_count(const fu_compact_table *t)
{
    return t->row_count ? (index_entries(t) + 1) / 2 + t->row_count : 0;
}

static uint32_t index_entry(const fu_bpf_slot *index, uint32_t e)
{
    return e & 1 ? index[e / 2].rule : index[e / 2].start;
}

uint32_t fu_bpf_find_row(const fu_bpf_slot *slots, const fu_bpf_module *module, uint32_t offset)
{
    uint32_t block = offset >> FU_BPF_INDEX_SHIFT, lo = index_entry(slots, block);
    uint32_t n = index_entry(slots, block + 1) - lo + 1;
    const fu_bpf_slot *rows = slots + module->index_slots;
    for (int i = 0; i < FU_BPF_ROW_SEARCH_STEPS && n > 1; i++) {
        uint32_t half = n / 2;
        if (rows[lo + half].start <= offset)
            lo += half;
        n -= half;
    }
    return lo;
}

fu_status fu_bpf_layout_module(const fu_compact_table *t, fu_bpf_rules *d, fu_bpf_slot *out, fu_bpf_module *module,
                               fu_error *err)
{
    if (t->row_count == 0)
        return fu_fail(err, FU_ERR_INVALID, "an empty compact table has nothing to load");
    uint32_t entries = index_entries(t), index_slots = (entries + 1) / 2, rule_count = t->header->rule_count;
    /* the table's rule i -> dictionary id, asked once per rule */
    uint32_t *ids = malloc(sizeof *ids * rule_count);
    if (!ids)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < rule_count; i++) {
        fu_status s = fu_bpf_rule_id(d, &t->rules[i], &ids[i], err);
        if (s != FU_OK) {
            free(ids);
            return s;
        }
    }
    out[index_slots - 1].rule = 0; /* the entry past the last when their count is odd */
    /* entry e: the last row starting at or before e << FU_BPF_INDEX_SHIFT (rows are sorted by start,
     * the first starts at 0) */
    uint32_t row = 0;
    for (uint32_t e = 0; e < entries; e++) {
        uint64_t at = (uint64_t)e << FU_BPF_INDEX_SHIFT;
        while (row + 1 < t->row_count && t->row_start[row + 1] <= at)
            row++;
        if (e & 1)
            out[e / 2].rule = row;
        else
            out[e / 2].start = row;
    }
    for (uint32_t i = 0; i < t->row_count; i++) {
        uint32_t rule = t->rule_index16 ? t->rule_index16[i] : t->rule_index32[i];
        out[index_slots + i] = (fu_bpf_slot){.start = t->row_start[i], .rule = ids[rule]};
    }
    free(ids);
    *module = (fu_bpf_module){.base_svma = t->base_svma, .end_svma = t->end_svma, .index_slots = index_slots,
                              .row_count = t->row_count};
    return FU_OK;
}

static uint32_t module_slots(const fu_bpf_module *m)
{
    return m->index_slots + m->row_count;
}

fu_status fu_bpf_ring_place(fu_bpf_ring *r, uint32_t count, uint32_t *first, uint32_t *id, uint32_t *evicted,
                            uint32_t *evicted_count, fu_error *err)
{
    if (count == 0 || count > r->capacity)
        return fu_fail(err, FU_ERR_INVALID, "a table of %u slots does not fit the %u of the BPF map", count,
                            r->capacity);
    if (!r->modules) {
        r->modules = calloc(FU_BPF_MAX_MODULES, sizeof *r->modules);
        r->loaded_at = calloc(FU_BPF_MAX_MODULES, sizeof *r->loaded_at);
        if (!r->modules || !r->loaded_at) {
            fu_bpf_ring_free(r);
            return fu_fail(err, FU_ERR_NOMEM, "out of memory");
        }
    }
    uint32_t start = r->head <= r->capacity - count ? r->head : 0, end = start + count;
    *evicted_count = 0;
    uint32_t free_id = FU_BPF_NO_MODULE;
    for (uint32_t i = 0; i < r->module_count; i++) {
        fu_bpf_module *m = &r->modules[i];
        uint32_t n = module_slots(m);
        if (n && m->first_slot < end && start < m->first_slot + n) {
            evicted[(*evicted_count)++] = i;
            *m = (fu_bpf_module){0};
            n = 0;
        }
        if (!n && free_id == FU_BPF_NO_MODULE)
            free_id = i;
    }
    if (free_id == FU_BPF_NO_MODULE && r->module_count < FU_BPF_MAX_MODULES)
        free_id = r->module_count++;
    if (free_id == FU_BPF_NO_MODULE) { /* every id in use: the oldest module gives its id */
        uint32_t oldest = 0;
        for (uint32_t i = 1; i < r->module_count; i++)
            if (r->loaded_at[i] < r->loaded_at[oldest])
                oldest = i;
        evicted[(*evicted_count)++] = oldest;
        r->modules[oldest] = (fu_bpf_module){0};
        free_id = oldest;
    }
    r->head = end == r->capacity ? 0 : end;
    r->loaded_at[free_id] = ++r->clock;
    r->modules[free_id].first_slot = start;
    *first = start;
    *id = free_id;
    return FU_OK;
}

void fu_bpf_ring_free(fu_bpf_ring *r)
{
    free(r->modules);
    free(r->loaded_at);
    r->modules = NULL;
    r->loaded_at = NULL;
    r->module_count = 0;
}
