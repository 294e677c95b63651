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

_Static_assert(sizeof(fu_bpf_block) == 64, "a slot is a cache line");
_Static_assert(FU_BPF_BLOCK_ROWS == 12, "fu_bpf_block_row halves twelve rows");
_Static_assert(FU_BPF_BLOCK_CHAIN_STEPS * FU_BPF_BLOCK_ROWS >= (1 << FU_BPF_BLOCK_SHIFT) + 1 - FU_BPF_BLOCK_ROWS,
               "the continuations hold a block's rows");
_Static_assert(FU_BPF_BLOCK_SHIFT <= 9, "a row's start within its block: 8 bits and FU_BPF_ROW_HIGH");
_Static_assert(FU_BPF_MAX_RULES <= FU_BPF_PACKED_ESCAPE, "a dictionary id beside the escape bit");
_Static_assert(FU_BPF_RSP == FU_REG_RSP && FU_BPF_RBP == FU_REG_RBP, "DWARF numbers");
_Static_assert(FU_COMPACT_ORIGIN_COUNT <= 4, "an origin in two bits");

static uint32_t block_count(const fu_compact_table *t)
{
    return (uint32_t)((t->end_svma - t->base_svma - 1) >> FU_BPF_BLOCK_SHIFT) + 1;
}

/* The rows of block b: from the row in force at its start (*first) to *end, exclusive; `row` is
 * where the search starts (the previous block's first, or 0). */
static void block_rows(const fu_compact_table *t, uint32_t b, uint32_t row, uint32_t *first, uint32_t *end)
{
    uint64_t at = (uint64_t)b << FU_BPF_BLOCK_SHIFT, next = at + (1u << FU_BPF_BLOCK_SHIFT);
    while (row + 1 < t->row_count && t->row_start[row + 1] <= at)
        row++;
    *first = row;
    while (row + 1 < t->row_count && t->row_start[row + 1] < next)
        row++;
    *end = row + 1;
}

static uint32_t slots_for(uint32_t rows)
{
    return (rows + FU_BPF_BLOCK_ROWS - 1) / FU_BPF_BLOCK_ROWS;
}

uint64_t fu_bpf_module_slot_count(const fu_compact_table *t)
{
    if (t->row_count == 0)
        return 0;
    uint64_t count = 0;
    uint32_t first = 0, end;
    for (uint32_t b = 0, blocks = block_count(t); b < blocks; b++) {
        block_rows(t, b, first, &first, &end);
        count += slots_for(end - first);
    }
    return count;
}

uint32_t fu_bpf_pack_rule(const fu_compact_rule *rule, uint32_t id)
{
    bool rsp = rule->cfa_kind == FU_COMPACT_CFA_RSP && rule->cfa_register == FU_REG_RSP;
    bool rbp = rule->cfa_kind == FU_COMPACT_CFA_RBP && rule->cfa_register == FU_REG_RBP;
    if (!(rsp || rbp) || rule->ra_offset_by_8 != -1 || rule->kept_caller_saved || rule->cfa_offset < 0 ||
        rule->cfa_offset % 8 || rule->cfa_offset / 8 >= FU_BPF_PACKED_OFFSET_LIMIT)
        return FU_BPF_PACKED_ESCAPE | id;
    uint32_t packed = (uint32_t)rule->cfa_offset / 8 << FU_BPF_PACKED_OFFSET_SHIFT |
                      (uint32_t)rule->origin << FU_BPF_PACKED_ORIGIN_SHIFT | (rbp ? FU_BPF_PACKED_RBP : 0);
    for (int i = 0; i < 6; i++) {
        int8_t slot = rule->saved_offset_by_8[i];
        if (slot == FU_COMPACT_KEEP)
            continue;
        if (slot < -8 || slot > -2)
            return FU_BPF_PACKED_ESCAPE | id;
        packed |= (uint32_t)(-1 - slot) << (3 * i);
    }
    return packed;
}

bool fu_bpf_find_rule(const fu_bpf_block *slots, const fu_bpf_module *module, const fu_bpf_rules *d,
                      uint32_t offset, fu_bpf_rule *rule)
{
    uint32_t within = offset & ((1u << FU_BPF_BLOCK_SHIFT) - 1);
    const fu_bpf_block *block = &slots[offset >> FU_BPF_BLOCK_SHIFT];
    for (int i = 0; i < FU_BPF_BLOCK_CHAIN_STEPS && block->next && within >= block->next >> FU_BPF_NEXT_SLOT_BITS;
         i++) {
        uint32_t next = block->next & FU_BPF_NEXT_SLOT_MASK;
        if (next >= module->slot_count)
            return false;
        block = &slots[next];
    }
    if (block->next && within >= block->next >> FU_BPF_NEXT_SLOT_BITS)
        return false;
    uint32_t row = block->rows[fu_bpf_block_row(block, within)] & FU_BPF_PACKED_RULE;
    if (!(row & FU_BPF_PACKED_ESCAPE)) {
        fu_bpf_unpack_rule(row, rule);
        return true;
    }
    if ((row & ~FU_BPF_PACKED_ESCAPE) >= d->count)
        return false;
    memcpy(rule, &d->rules[row & ~FU_BPF_PACKED_ESCAPE], sizeof *rule);
    return true;
}

/* Fills `slots` slots from `slot` with rows[first .. end) of block b (relative offsets), the
 * continuations from *spare on. */
static void layout_block(const fu_compact_table *t, const uint32_t *packed, uint32_t b, uint32_t first, uint32_t end,
                         fu_bpf_block *out, uint32_t *spare)
{
    uint32_t block_start = b << FU_BPF_BLOCK_SHIFT, slot = b;
    for (uint32_t row = first; row < end;) {
        fu_bpf_block *block = &out[slot];
        uint32_t n = end - row < FU_BPF_BLOCK_ROWS ? end - row : FU_BPF_BLOCK_ROWS;
        for (uint32_t k = 0; k < FU_BPF_BLOCK_ROWS; k++) {
            uint32_t r = row + (k < n ? k : n - 1);
            /* the row in force at the block's start may start before it */
            uint32_t start = t->row_start[r] > block_start ? t->row_start[r] - block_start : 0;
            block->starts[k] = (uint8_t)start;
            block->rows[k] = packed[r] | (start >> 8 ? FU_BPF_ROW_HIGH : 0);
        }
        row += n;
        block->next = 0;
        if (row < end) {
            slot = (*spare)++;
            block->next = slot | (t->row_start[row] - block_start) << FU_BPF_NEXT_SLOT_BITS;
        }
    }
}

fu_status fu_bpf_layout_module(const fu_compact_table *t, fu_bpf_rules *d, fu_bpf_block *out, fu_bpf_module *module,
                               fu_error *err)
{
    if (t->row_count == 0)
        return fu_fail(err, FU_ERR_INVALID, "an empty compact table has nothing to load");
    uint64_t slot_count = fu_bpf_module_slot_count(t);
    if (slot_count > FU_BPF_NEXT_SLOT_MASK)
        return fu_fail(err, FU_ERR_INVALID, "a table of %llu BPF slots is too big for one module",
                       (unsigned long long)slot_count);
    uint32_t rule_count = t->header->rule_count;
    /* the table's rule i -> its packed form (the dictionary asked for those that need it) */
    uint32_t *packed_rules = malloc(sizeof *packed_rules * rule_count);
    uint32_t *packed = malloc(sizeof *packed * t->row_count);
    if (!packed_rules || !packed) {
        free(packed_rules);
        free(packed);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < rule_count; i++) {
        uint32_t id = 0;
        if (fu_bpf_pack_rule(&t->rules[i], 0) & FU_BPF_PACKED_ESCAPE) {
            fu_status s = fu_bpf_rule_id(d, &t->rules[i], &id, err);
            if (s != FU_OK) {
                free(packed_rules);
                free(packed);
                return s;
            }
        }
        packed_rules[i] = fu_bpf_pack_rule(&t->rules[i], id);
    }
    for (uint32_t i = 0; i < t->row_count; i++)
        packed[i] = packed_rules[t->rule_index16 ? t->rule_index16[i] : t->rule_index32[i]];
    uint32_t blocks = block_count(t), spare = blocks, first = 0, end;
    for (uint32_t b = 0; b < blocks; b++) {
        block_rows(t, b, first, &first, &end);
        layout_block(t, packed, b, first, end, out, &spare);
    }
    free(packed_rules);
    free(packed);
    *module = (fu_bpf_module){.base_svma = t->base_svma, .end_svma = t->end_svma, .block_count = blocks,
                              .slot_count = (uint32_t)slot_count, .row_count = t->row_count};
    return FU_OK;
}

/* What placing a module at [start, start + count) evicts: the uses of the modules it overlaps by
 * loaded processes (*in_use: a module every process maps, libc, before a big one a single process
 * does) and the latest load among them (*newest, 0: none). */
static void window_cost(const fu_bpf_ring *r, uint32_t start, uint32_t count, uint64_t *in_use, uint64_t *newest)
{
    *in_use = 0;
    *newest = 0;
    for (uint32_t i = 0; i < r->module_count; i++) {
        const fu_bpf_module *m = &r->modules[i];
        if (!m->slot_count || m->first_slot >= start + count || start >= m->first_slot + m->slot_count)
            continue;
        if (r->users)
            *in_use += r->users[i];
        if (r->loaded_at[i] > *newest)
            *newest = r->loaded_at[i];
    }
}

/* Where `count` slots go: the ring's next window (from head, or from 0 when the end is too near) if
 * it evicts no module in use; else, of the windows starting at 0, right after a module or ending at
 * the map's end, the one evicting the fewest uses, then the older modules. */
static uint32_t window_start(const fu_bpf_ring *r, uint32_t count)
{
    uint32_t best = r->head <= r->capacity - count ? r->head : 0;
    uint64_t best_in_use, best_newest, in_use, newest;
    window_cost(r, best, count, &best_in_use, &best_newest);
    /* candidates: 0, capacity - count, then each module's end (bounded by FU_BPF_MAX_MODULES) */
    for (uint32_t i = 0; best_in_use && i < r->module_count + 2; i++) {
        const fu_bpf_module *m = i >= 2 ? &r->modules[i - 2] : NULL;
        if (m && !m->slot_count)
            continue;
        uint32_t start = i == 0 ? 0 : i == 1 ? r->capacity - count : m->first_slot + m->slot_count;
        if (start > r->capacity - count)
            continue;
        window_cost(r, start, count, &in_use, &newest);
        if (in_use < best_in_use || (in_use == best_in_use && newest < best_newest)) {
            best = start;
            best_in_use = in_use;
            best_newest = newest;
        }
    }
    return best;
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
    uint32_t start = window_start(r, count), end = start + count;
    *evicted_count = 0;
    uint32_t free_id = FU_BPF_NO_MODULE;
    for (uint32_t i = 0; i < r->module_count; i++) {
        fu_bpf_module *m = &r->modules[i];
        uint32_t n = m->slot_count;
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
    if (free_id == FU_BPF_NO_MODULE) { /* every id in use: the oldest module no process uses gives its id */
        uint32_t oldest = 0;
        for (uint32_t i = 1; i < r->module_count; i++) {
            bool used = r->users && r->users[i], oldest_used = r->users && r->users[oldest];
            if (used < oldest_used || (used == oldest_used && r->loaded_at[i] < r->loaded_at[oldest]))
                oldest = i;
        }
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

bool fu_bpf_ring_fits(const fu_bpf_ring *r, uint32_t count)
{
    if (count == 0 || count > r->capacity)
        return false;
    if (!r->modules)
        return true;
    uint64_t in_use, newest;
    window_cost(r, window_start(r, count), count, &in_use, &newest);
    return newest == 0; /* loaded_at starts at 1: a module overlaps */
}

void fu_bpf_ring_grow(fu_bpf_ring *r, uint32_t capacity)
{
    uint32_t old = r->capacity;
    if (capacity <= old)
        return;
    uint64_t in_use = 0, newest = 0;
    if (r->modules)
        window_cost(r, r->head, old - r->head, &in_use, &newest);
    r->capacity = capacity;
    if (newest) /* [head, the former end) holds modules (head wrapped to 0): the new slots come next */
        r->head = old;
}

void fu_bpf_ring_free(fu_bpf_ring *r)
{
    free(r->modules);
    free(r->loaded_at);
    r->modules = NULL;
    r->loaded_at = NULL;
    r->module_count = 0;
}
