/* compact_table: build a compact unwind table from a module's DWARF tables, serialize it, and
 * validate a serialized one before use (the format is defined in compact_table.h).
 *
 * Exactness. The builder does not re-implement DWARF's row selection: it asks the same lookup the
 * walker uses (fu_cfi_table_find_row on .eh_frame, then on .debug_frame). That lookup compares the PC
 * only with FDE starts, FDE ends and row addresses, so between two consecutive such values its
 * answer cannot change; the builder collects all of them, asks once per interval, and merges
 * neighbouring intervals whose compact rules are equal. Overlapping FDEs, rows advanced past their
 * FDE's end, FDEs that failed to evaluate (not indexed, hence gaps) come out exactly as the walker
 * would see them.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (clock.h) */
#include "compact_table.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "intern.h"

static const uint8_t plt_expression[FU_COMPACT_PLT_EXPRESSION_SIZE] = FU_COMPACT_PLT_EXPRESSION;

static int saved_slot(unsigned column)
{
    for (int i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++)
        if (fu_compact_saved_register[i] == column)
            return i;
    return -1;
}

/* An offset from the CFA in 8-byte units that fits an int8 other than the two reserved values. */
static bool offset_by_8(int64_t offset, int8_t *out)
{
    if (offset % 8 != 0 || offset / 8 < -127 || offset / 8 > 127 || offset == 0)
        return false;
    *out = (int8_t)(offset / 8);
    return true;
}

/* The expression of `rule` (CFA or register rule), or NULL if it lies outside the section. */
static const uint8_t *rule_expression(const fu_cfi_table *t, const fu_rule *rule)
{
    if (rule->value < 0 || (uint64_t)rule->value > t->section.size || rule->expr_len > t->section.size - (uint64_t)rule->value)
        return NULL;
    return t->section.data + rule->value;
}

/* A callee-saved register's save slot (compact_table.h, saved_offset_by_8): DW_CFA_offset below the
 * CFA, or `DW_CFA_expression: DW_OP_breg6 (rbp): k` at rbp + 0 down to rbp - 1008. */
static bool saved_slot_by_8(const fu_cfi_table *t, const fu_rule *rule, int8_t *out)
{
    if (rule->kind == FU_RULE_OFFSET)
        return rule->value < 0 && offset_by_8(rule->value, out);
    unsigned reg;
    int32_t offset;
    bool deref;
    const uint8_t *expr = rule->kind == FU_RULE_EXPRESSION ? rule_expression(t, rule) : NULL;
    if (!expr || !fu_expr_match_breg(expr, rule->expr_len, &reg, &offset, &deref) || reg != FU_REG_RBP || deref ||
        offset > 0 || offset % 8 != 0 || FU_COMPACT_RBP_SLOT_FIRST - offset / 8 > INT8_MAX)
        return false;
    *out = (int8_t)(FU_COMPACT_RBP_SLOT_FIRST - offset / 8);
    return true;
}

/* Put `column`'s `rule` (one a row of `t` lists) into `r`: false when the compact format cannot
 * state it exactly. */
static bool column_rule(const fu_cfi_table *t, unsigned column, const fu_rule *rule, fu_compact_rule *r)
{
    int slot = saved_slot(column);
    if (column == FU_REG_RA) {
        if (rule->kind == FU_RULE_UNDEFINED)
            r->ra_offset_by_8 = FU_COMPACT_UNDEFINED;
        else if (rule->kind != FU_RULE_OFFSET || !offset_by_8(rule->value, &r->ra_offset_by_8))
            return false; /* same_value, val_offset, register, expressions, far offsets */
    } else if (slot >= 0) {
        if (rule->kind == FU_RULE_UNDEFINED)
            r->saved_offset_by_8[slot] = FU_COMPACT_UNDEFINED;
        else if (rule->kind == FU_RULE_SAME_VALUE)
            r->saved_offset_by_8[slot] = FU_COMPACT_KEEP;
        else if (!saved_slot_by_8(t, rule, &r->saved_offset_by_8[slot]))
            return false; /* val_offset, register, other expressions, saves above the CFA, far offsets */
    } else if (column < 16 && (FU_COMPACT_CALLER_SAVED_MASK >> column & 1) && rule->kind == FU_RULE_SAME_VALUE) {
        r->kept_caller_saved |= (uint16_t)(1u << column);
    } else if (column < FU_WALK_REGISTERS && (column == FU_REG_RSP || rule->kind != FU_RULE_UNDEFINED)) {
        /* A rule for rsp, or one that gives a caller-saved register another value the next frame's
         * CFI might use. DW_CFA_undefined on a caller-saved register changes nothing: the walker
         * carries only those a rule keeps. Vector registers and the like: ignored. */
        return false;
    }
    return true;
}

/* The CFA expression `DW_OP_bregN k; DW_OP_deref` (GCC's DRAP epilogue-safe CFA), N < 17. */
static bool drap_expression(const uint8_t *expr, uint64_t len, uint8_t *reg, int32_t *offset)
{
    unsigned n;
    bool deref;
    if (!fu_expr_match_breg(expr, len, &n, offset, &deref) || !deref || n >= FU_WALK_REGISTERS)
        return false;
    *reg = (uint8_t)n;
    return true;
}

/* Whether a signal frame's row is exactly FU_COMPACT_CFA_SIGNAL_CONTEXT's (compact_table.h). */
static bool is_signal_context(const fu_cfi_table *t, const fu_state *state)
{
    unsigned reg;
    int32_t offset;
    bool deref;
    const uint8_t *expr = state->cfa.kind == FU_CFA_EXPRESSION ? rule_expression(t, &state->cfa) : NULL;
    if (!expr || !fu_expr_match_breg(expr, state->cfa.expr_len, &reg, &offset, &deref) || reg != FU_REG_RSP ||
        offset != FU_COMPACT_SIGNAL_CONTEXT_CFA || !deref)
        return false;
    unsigned next = 0; /* the walker's registers in column order, then only untracked columns */
    for (uint16_t k = 0; k < state->count; k++) {
        unsigned column = t->column_pool[state->first + k];
        const fu_rule *rule = &t->rule_pool[state->first + k];
        if (column >= FU_WALK_REGISTERS && next == FU_WALK_REGISTERS)
            continue; /* vector registers and the like: the walker ignores them */
        expr = rule->kind == FU_RULE_EXPRESSION ? rule_expression(t, rule) : NULL;
        if (column != next || !expr || !fu_expr_match_breg(expr, rule->expr_len, &reg, &offset, &deref) ||
            reg != FU_REG_RSP || deref || offset != fu_compact_signal_context[column])
            return false;
        next++;
    }
    return next == FU_WALK_REGISTERS;
}

fu_compact_rule fu_compact_rule_of_state(const fu_cfi_table *t, const fu_entry *entry, const fu_state *state)
{
    fu_compact_rule slow = {.cfa_kind = FU_COMPACT_CFA_SLOW};
    fu_compact_rule r = {0};
    const fu_cie_info *cie = entry->cie;
    if (t->section.address_size != 8 || (cie && cie->ra_column != FU_REG_RA))
        return slow;
    /* Signal frames restore every register from the signal context, and their IP is not a return
     * address: glibc's exact layout has a rule of its own, any other goes to the DWARF path. */
    if (cie && cie->signal_frame) {
        if (!is_signal_context(t, state))
            return slow;
        r.cfa_kind = FU_COMPACT_CFA_SIGNAL_CONTEXT;
        r.cfa_register = FU_REG_RSP;
        r.cfa_offset = FU_COMPACT_SIGNAL_CONTEXT_CFA;
        return r;
    }
    const fu_rule *cfa = &state->cfa;
    if (cfa->kind == FU_CFA_REG_OFFSET) {
        if (cfa->reg >= FU_WALK_REGISTERS || cfa->value < INT32_MIN || cfa->value > INT32_MAX)
            return slow;
        r.cfa_kind = cfa->reg == FU_REG_RSP   ? FU_COMPACT_CFA_RSP
                     : cfa->reg == FU_REG_RBP ? FU_COMPACT_CFA_RBP
                                              : FU_COMPACT_CFA_REGISTER;
        r.cfa_register = (uint8_t)cfa->reg;
        r.cfa_offset = (int32_t)cfa->value;
    } else if (cfa->kind == FU_CFA_EXPRESSION) {
        const uint8_t *expr = rule_expression(t, cfa);
        if (!expr)
            return slow;
        if (cfa->expr_len == FU_COMPACT_PLT_EXPRESSION_SIZE && memcmp(expr, plt_expression, sizeof plt_expression) == 0) {
            r.cfa_kind = FU_COMPACT_CFA_PLT;
        } else if (drap_expression(expr, cfa->expr_len, &r.cfa_register, &r.cfa_offset)) {
            r.cfa_kind = FU_COMPACT_CFA_DEREF;
        } else {
            return slow;
        }
    } else {
        return slow; /* no CFA rule: the DWARF path reports it */
    }
    for (uint16_t k = 0; k < state->count; k++)
        if (!column_rule(t, t->column_pool[state->first + k], &t->rule_pool[state->first + k], &r))
            return slow;
    return r;
}

/* ---- building ------------------------------------------------------------------------------- */

/* Rule dictionary: the distinct 16-byte rules, in order of first sight, with their index. */
typedef struct rule_set {
    fu_compact_rule *rules;
    uint32_t count, cap;
    fu_intern_set index;
} rule_set;

static uint64_t rule_hash(const fu_compact_rule *r)
{
    uint64_t a, b;
    memcpy(&a, r, 8);
    memcpy(&b, (const uint8_t *)r + 8, 8);
    uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15u)) * 0xff51afd7ed558ccdu;
    return h ^ (h >> 32);
}

static bool rule_equal(const void *rules, uint32_t index, const void *key)
{
    return memcmp(&((const fu_compact_rule *)rules)[index], key, sizeof(fu_compact_rule)) == 0;
}

/* Index of `r` in the dictionary, added if new; UINT32_MAX when out of memory. */
static uint32_t rule_set_intern(rule_set *s, const fu_compact_rule *r)
{
    uint64_t hash = rule_hash(r);
    uint32_t found = fu_intern_find(&s->index, hash, rule_equal, s->rules, r);
    if (found != FU_INTERN_NONE)
        return found;
    if (s->count == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 64;
        fu_compact_rule *rules = realloc(s->rules, cap * sizeof *rules);
        if (!rules)
            return UINT32_MAX;
        s->rules = rules;
        s->cap = cap;
    }
    if (!fu_intern_insert(&s->index, hash, s->count))
        return UINT32_MAX;
    s->rules[s->count] = *r;
    return s->count++;
}

/* The compact rule at `pc`, resolved as the walker resolves rows. */
static fu_compact_rule rule_at(const fu_cfi_table *const tables[2], uint64_t pc)
{
    int64_t row, fde;
    int which = fu_cfi_tables_find_row(tables, pc, &row, &fde);
    if (which >= 0) {
        const fu_cfi_table *t = tables[which];
        return fu_compact_rule_of_state(t, &t->entries[fde], fu_cfi_table_state(t, t->row_state[row]));
    }
    fu_compact_rule none = {.cfa_kind = FU_COMPACT_CFA_NO_INFO};
    return none;
}

void fu_compact_build_free(fu_compact_build *b)
{
    free(b->row_start);
    free(b->row_rule);
    free(b->rules);
    memset(b, 0, sizeof *b);
}

/* Whether `overlay` is as fu_compact_overlay states (sorted, disjoint, non-empty rows of CFA kind
 * RSP, RBP or REGISTER, each with a return address, of an origin the mode admits). */
static fu_status check_overlay(const fu_compact_overlay *overlay, fu_error *err)
{
    unsigned mode = overlay->synth & 0xff;
    if (mode != FU_COMPACT_SYNTH_MISSING && mode != FU_COMPACT_SYNTH_REPAIR)
        return fu_fail(err, FU_ERR_INVALID, "compact overlay: synth mode %u (expected %d or %d)", mode,
                       FU_COMPACT_SYNTH_MISSING, FU_COMPACT_SYNTH_REPAIR);
    for (size_t i = 0; i < overlay->count; i++) {
        const fu_compact_overlay_row *row = &overlay->rows[i];
        const fu_compact_rule *r = &row->rule;
        const char *problem = NULL;
        if (row->start >= row->end)
            problem = "empty";
        else if (i > 0 && row->start < overlay->rows[i - 1].end)
            problem = "not sorted, or overlapping the row before";
        else if (r->origin != FU_COMPACT_ORIGIN_SYNTHESIZED &&
                 (r->origin != FU_COMPACT_ORIGIN_CORRECTED || mode != FU_COMPACT_SYNTH_REPAIR))
            problem = "of an origin this mode does not lay over the declared rows";
        else if (!((r->cfa_kind == FU_COMPACT_CFA_RSP && r->cfa_register == FU_REG_RSP) ||
                   (r->cfa_kind == FU_COMPACT_CFA_RBP && r->cfa_register == FU_REG_RBP) ||
                   (r->cfa_kind == FU_COMPACT_CFA_REGISTER && r->cfa_register < FU_WALK_REGISTERS)))
            problem = "not a register + offset CFA";
        else if (r->ra_offset_by_8 == FU_COMPACT_KEEP || r->ra_offset_by_8 == FU_COMPACT_UNDEFINED)
            problem = "without a return address (only declared CFI may end a stack)";
        else if (r->kept_caller_saved & ~FU_COMPACT_CALLER_SAVED_MASK)
            problem = "keeping a register that is not caller-saved";
        if (problem)
            return fu_fail(err, FU_ERR_INVALID, "compact overlay: row %zu (0x%llx..0x%llx) is %s", i,
                           (unsigned long long)row->start, (unsigned long long)row->end, problem);
    }
    return FU_OK;
}

static int compare_overlay_rows(const void *a, const void *b)
{
    const fu_compact_overlay_row *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : (x->end > y->end) - (x->end < y->end);
}

fu_status fu_compact_overlay_of_table(const fu_cfi_table *view, const uint8_t *origins, size_t origin_count,
                                      fu_compact_overlay_row **out, size_t *count, fu_error *err)
{
    *out = NULL;
    *count = 0;
    size_t n = 0, cap = 0, fde = 0;
    fu_compact_overlay_row *rows = NULL;
    for (uint32_t e = 0; e < view->entry_count; e++) { /* bounded by the entries, each by its rows */
        const fu_entry *entry = &view->entries[e];
        if (entry->kind != FU_ENTRY_FDE)
            continue;
        if (fde >= origin_count) {
            free(rows);
            return fu_fail(err, FU_ERR_INVALID, "compact overlay: FDE %zu of the view has no origin (%zu given)", fde,
                           origin_count);
        }
        uint8_t origin = origins[fde++];
        if (origin >= FU_COMPACT_ORIGIN_COUNT) {
            free(rows);
            return fu_fail(err, FU_ERR_INVALID, "compact overlay: FDE %zu has origin %u", fde - 1, origin);
        }
        if (origin == FU_COMPACT_ORIGIN_DECLARED || entry->has_error || entry->discarded)
            continue;
        uint64_t fde_end = entry->pc_begin + entry->pc_range;
        for (uint32_t r = entry->first_row; r < entry->first_row + entry->row_count; r++) {
            uint64_t start = view->row_address[r];
            uint64_t end = r + 1 < entry->first_row + entry->row_count ? view->row_address[r + 1] : fde_end;
            end = end < fde_end ? end : fde_end;
            fu_compact_rule rule = fu_compact_rule_of_state(view, entry, fu_cfi_table_state(view, view->row_state[r]));
            rule.origin = origin;
            /* what the overlay admits (check_overlay); another row stays as the module has it */
            if (start >= end ||
                (rule.cfa_kind != FU_COMPACT_CFA_RSP && rule.cfa_kind != FU_COMPACT_CFA_RBP &&
                 rule.cfa_kind != FU_COMPACT_CFA_REGISTER) ||
                rule.ra_offset_by_8 == FU_COMPACT_KEEP || rule.ra_offset_by_8 == FU_COMPACT_UNDEFINED)
                continue;
            if (n == cap) {
                size_t grown = cap ? 2 * cap : 256;
                fu_compact_overlay_row *bigger = realloc(rows, grown * sizeof *rows);
                if (!bigger) {
                    free(rows);
                    return fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu overlay rows", grown);
                }
                rows = bigger;
                cap = grown;
            }
            rows[n++] = (fu_compact_overlay_row){start, end, rule};
        }
    }
    /* in address order (a view's FDEs need not be), a row overlapping the one before dropped
     * (overlapping FDEs: the first by address wins), equal neighbours merged */
    if (n > 1)
        qsort(rows, n, sizeof *rows, compare_overlay_rows);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept > 0 && rows[i].start < rows[kept - 1].end)
            continue;
        if (kept > 0 && rows[kept - 1].end == rows[i].start &&
            memcmp(&rows[kept - 1].rule, &rows[i].rule, sizeof rows[i].rule) == 0) {
            rows[kept - 1].end = rows[i].end;
            continue;
        }
        rows[kept++] = rows[i];
    }
    *out = rows;
    *count = kept;
    return FU_OK;
}

/* The sorted, unique union of `a` (n sorted unique values, freed) and the overlay's row bounds,
 * malloc'd into *out. */
static fu_status merge_overlay_bounds(uint64_t *a, size_t n, const fu_compact_overlay *overlay, uint64_t **out,
                                      size_t *count, fu_error *err)
{
    size_t m = 2 * overlay->count;
    uint64_t *merged = malloc((n + m ? n + m : 1) * sizeof *merged);
    if (!merged) {
        free(a);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu compact bounds", n + m);
    }
    size_t i = 0, j = 0, k = 0; /* bounded: each iteration takes one value of a or of the overlay */
    while (i < n || j < m) {
        const fu_compact_overlay_row *row = j < m ? &overlay->rows[j / 2] : NULL;
        uint64_t b = row ? (j % 2 ? row->end : row->start) : 0;
        uint64_t v;
        if (j >= m || (i < n && a[i] <= b)) {
            v = a[i++];
        } else {
            v = b;
            j++;
        }
        if (k == 0 || merged[k - 1] != v)
            merged[k++] = v;
    }
    free(a);
    *out = merged;
    *count = k;
    return FU_OK;
}

fu_status fu_compact_build_tables(fu_compact_build *b, const fu_cfi_table *eh_frame, const fu_cfi_table *debug_frame,
                                  const fu_compact_overlay *overlay, fu_error *err)
{
    memset(b, 0, sizeof *b);
    b->eh_frame_size = eh_frame ? eh_frame->section.size : FU_COMPACT_NO_SECTION;
    b->debug_frame_size = debug_frame ? debug_frame->section.size : FU_COMPACT_NO_SECTION;
    const fu_cfi_table *const tables[2] = {eh_frame, debug_frame};
    fu_status status = FU_OK;
    rule_set set = {0};
    uint64_t *bounds = NULL;
    uint64_t *starts = NULL;
    uint32_t *rule_of_row = NULL;

    /* every value the lookup compares a PC with: FDE starts and ends, row addresses */
    size_t n;
    if (overlay && (status = check_overlay(overlay, err)) != FU_OK)
        goto cleanup;
    if ((status = fu_cfi_tables_boundaries(tables, &bounds, &n, err)) != FU_OK)
        goto cleanup;
    if (overlay && (status = merge_overlay_bounds(bounds, n, overlay, &bounds, &n, err)) != FU_OK) {
        bounds = NULL; /* freed by the merge */
        goto cleanup;
    }

    /* one lookup per interval [bounds[i], bounds[i + 1]); equal neighbours merged */
    starts = malloc((n ? n : 1) * sizeof *starts);
    rule_of_row = malloc((n ? n : 1) * sizeof *rule_of_row);
    if (!starts || !rule_of_row) {
        status = fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu compact rows", n);
        goto cleanup;
    }
    fu_compact_rule none = {.cfa_kind = FU_COMPACT_CFA_NO_INFO};
    uint32_t none_index = rule_set_intern(&set, &none);
    if (none_index == UINT32_MAX) {
        status = fu_fail(err, FU_ERR_NOMEM, "out of memory for the compact rule dictionary");
        goto cleanup;
    }
    size_t rows = 0, next_overlay = 0;
    for (size_t i = 0; i < n; i++) {
        fu_compact_rule rule = rule_at(tables, bounds[i]);
        /* the overlay row covering bounds[i], if any, where its origin says it applies */
        while (overlay && next_overlay < overlay->count && overlay->rows[next_overlay].end <= bounds[i])
            next_overlay++;
        if (overlay && next_overlay < overlay->count && overlay->rows[next_overlay].start <= bounds[i]) {
            const fu_compact_rule *laid = &overlay->rows[next_overlay].rule;
            bool declared = rule.cfa_kind != FU_COMPACT_CFA_NO_INFO;
            if (declared == (laid->origin == FU_COMPACT_ORIGIN_CORRECTED))
                rule = *laid;
        }
        if (i + 1 == n && rule.cfa_kind != FU_COMPACT_CFA_NO_INFO) {
            status = fu_fail(err, FU_ERR_COMPACT,
                             "compact table: an FDE covers 0x%llx up to the end of the address space",
                             (unsigned long long)bounds[i]);
            goto cleanup;
        }
        uint32_t index = rule_set_intern(&set, &rule);
        if (index == UINT32_MAX) {
            status = fu_fail(err, FU_ERR_NOMEM, "out of memory for the compact rule dictionary");
            goto cleanup;
        }
        if (rows > 0 && rule_of_row[rows - 1] == index)
            continue;
        if (rows == 0 && index == none_index)
            continue; /* leading gap: below base_svma is no information anyway */
        starts[rows] = bounds[i];
        rule_of_row[rows++] = index;
    }
    /* the last row is the trailing gap (checked above): it becomes end_svma */
    if (rows > 0) {
        b->base_svma = starts[0];
        b->end_svma = starts[rows - 1];
        rows--;
    }
    if (b->end_svma - b->base_svma > UINT32_MAX) {
        status = fu_fail(err, FU_ERR_COMPACT,
                         "compact table: the CFI spans 0x%llx..0x%llx, more than the 4 GiB that u32 row "
                         "starts address",
                         (unsigned long long)b->base_svma, (unsigned long long)b->end_svma);
        goto cleanup;
    }
    if (rows > UINT32_MAX - 1) {
        status = fu_fail(err, FU_ERR_COMPACT, "compact table: %zu rows", rows);
        goto cleanup;
    }
    b->row_start = malloc((rows ? rows : 1) * sizeof *b->row_start);
    if (!b->row_start) {
        status = fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu compact rows", rows);
        goto cleanup;
    }
    for (size_t i = 0; i < rows; i++) {
        b->row_start[i] = (uint32_t)(starts[i] - b->base_svma);
        uint64_t size = (i + 1 < rows ? starts[i + 1] : b->end_svma) - starts[i];
        uint8_t kind = set.rules[rule_of_row[i]].cfa_kind;
        b->slow_row_count += kind == FU_COMPACT_CFA_SLOW;
        b->slow_bytes += kind == FU_COMPACT_CFA_SLOW ? size : 0;
        b->no_info_row_count += kind == FU_COMPACT_CFA_NO_INFO;
        b->covered_bytes += kind == FU_COMPACT_CFA_NO_INFO ? 0 : size;
        uint8_t origin = set.rules[rule_of_row[i]].origin;
        b->origin_row_count[origin]++;
        b->origin_bytes[origin] += kind == FU_COMPACT_CFA_NO_INFO ? 0 : size;
    }
    b->row_rule = rule_of_row;
    rule_of_row = NULL;
    b->row_count = (uint32_t)rows;
    b->rules = set.rules;
    b->rule_count = set.count;
    set.rules = NULL;
cleanup:
    free(bounds);
    free(starts);
    free(rule_of_row);
    free(set.rules);
    fu_intern_free(&set.index);
    if (status != FU_OK)
        fu_compact_build_free(b);
    return status;
}

/* ---- serialization -------------------------------------------------------------------------- */

static uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

fu_status fu_compact_serialize(const fu_compact_build *b, uint32_t key_kind, const uint8_t *key, size_t key_size,
                               uint32_t synth, uint8_t **out, size_t *size, fu_error *err)
{
    if (key_size > FU_COMPACT_MAX_KEY)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: a key of %zu bytes (at most %d)", key_size,
                       FU_COMPACT_MAX_KEY);
    uint32_t index_size = b->rule_count <= FU_COMPACT_MAX_NARROW_RULES ? 2 : 4;
    fu_compact_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, FU_COMPACT_MAGIC, FU_COMPACT_MAGIC_SIZE);
    h.version = FU_COMPACT_VERSION;
    h.header_size = sizeof h;
    h.base_svma = b->base_svma;
    h.end_svma = b->end_svma;
    h.row_count = b->row_count;
    h.rule_count = b->rule_count;
    h.rule_index_size = index_size;
    h.key_kind = key_kind;
    h.key_size = (uint32_t)key_size;
    if (key_size)
        memcpy(h.key, key, key_size);
    h.row_start_offset = align_up(sizeof h, 4);
    h.rule_index_offset = align_up(h.row_start_offset + 4 * (uint64_t)b->row_count, index_size);
    h.rules_offset = align_up(h.rule_index_offset + index_size * (uint64_t)b->row_count, 8);
    h.page_shift = FU_COMPACT_PAGE_SHIFT;
    h.page_count = b->row_count ? (uint32_t)(((b->end_svma - b->base_svma - 1) >> FU_COMPACT_PAGE_SHIFT) + 2) : 0;
    h.page_index_offset = h.rules_offset + sizeof(fu_compact_rule) * (uint64_t)b->rule_count;
    h.file_size = h.page_index_offset + 4 * (uint64_t)h.page_count;
    h.eh_frame_size = b->eh_frame_size;
    h.debug_frame_size = b->debug_frame_size;
    h.slow_row_count = b->slow_row_count;
    h.no_info_row_count = b->no_info_row_count;
    h.slow_bytes = b->slow_bytes;
    h.covered_bytes = b->covered_bytes;
    h.synth = synth;
    memcpy(h.origin_row_count, b->origin_row_count, sizeof h.origin_row_count);
    memcpy(h.origin_bytes, b->origin_bytes, sizeof h.origin_bytes);
    uint8_t *buf = calloc(1, (size_t)h.file_size);
    if (!buf)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for a compact table of %llu bytes",
                       (unsigned long long)h.file_size);
    memcpy(buf, &h, sizeof h);
    memcpy(buf + h.row_start_offset, b->row_start, 4 * (size_t)b->row_count);
    for (uint32_t i = 0; i < b->row_count; i++) {
        if (index_size == 2) {
            uint16_t v = (uint16_t)b->row_rule[i];
            memcpy(buf + h.rule_index_offset + 2 * (size_t)i, &v, 2);
        } else {
            memcpy(buf + h.rule_index_offset + 4 * (size_t)i, &b->row_rule[i], 4);
        }
    }
    memcpy(buf + h.rules_offset, b->rules, sizeof(fu_compact_rule) * (size_t)b->rule_count);
    /* page_first_row[p]: the row in force at the page's first byte (the last page entry: at the
     * table's last byte) */
    uint32_t row = 0;
    uint64_t span = b->end_svma - b->base_svma;
    for (uint32_t p = 0; p < h.page_count; p++) {
        uint64_t at = (uint64_t)p << FU_COMPACT_PAGE_SHIFT;
        if (at > span - 1)
            at = span - 1;
        while (row + 1 < b->row_count && b->row_start[row + 1] <= at)
            row++;
        memcpy(buf + h.page_index_offset + 4 * (size_t)p, &row, 4);
    }
    *out = buf;
    *size = (size_t)h.file_size;
    return FU_OK;
}

/* ---- validation ----------------------------------------------------------------------------- */

/* An array of `count` elements of `element` bytes at `offset`, inside `size` and aligned. */
static bool array_fits(uint64_t offset, uint64_t count, uint64_t element, uint64_t size)
{
    return offset % element == 0 && offset <= size && count <= (size - offset) / element;
}

static uint32_t row_rule(const fu_compact_header *h, const uint8_t *rule_index, uint32_t i)
{
    return h->rule_index_size == 2 ? ((const uint16_t *)rule_index)[i] : ((const uint32_t *)rule_index)[i];
}

/* Whether every row starts above the one before (row 0 at 0), inside the span, and names a rule
 * of the dictionary: loops without early exits, which the compiler vectorizes (a cached libLLVM-14
 * table's 950k rows were ~25M instructions of checks one row at a time, most of a clang
 * recording's table opening). */
static bool rows_valid(const fu_compact_header *h, const uint32_t *starts, const uint8_t *rule_index, uint64_t span)
{
    uint32_t n = h->row_count;
    if (n == 0)
        return true;
    bool sorted = starts[0] == 0 && starts[n - 1] < span; /* sorted: the last is the largest */
    for (uint32_t i = 1; i < n; i++)
        sorted &= starts[i] > starts[i - 1];
    uint32_t highest = 0;
    if (h->rule_index_size == 2) {
        const uint16_t *rules = (const uint16_t *)rule_index;
        for (uint32_t i = 0; i < n; i++)
            highest = rules[i] > highest ? rules[i] : highest;
    } else {
        const uint32_t *rules = (const uint32_t *)rule_index;
        for (uint32_t i = 0; i < n; i++)
            highest = rules[i] > highest ? rules[i] : highest;
    }
    return sorted && highest < h->rule_count;
}

fu_status fu_compact_open(fu_compact_table *t, const uint8_t *data, size_t size, fu_error *err)
{
    memset(t, 0, sizeof *t);
    const fu_compact_header *h = (const fu_compact_header *)data;
    if ((uintptr_t)data % 8 != 0)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: buffer at %p is not 8-byte aligned", (const void *)data);
    if (size < sizeof *h)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: truncated: %zu bytes, the header alone is %zu", size,
                       sizeof *h);
    if (memcmp(h->magic, FU_COMPACT_MAGIC, FU_COMPACT_MAGIC_SIZE) != 0)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: bad magic (not a fastunwind compact table)");
    if (h->version != FU_COMPACT_VERSION)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: version %u, expected %u", h->version, FU_COMPACT_VERSION);
    if (h->header_size != sizeof *h)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: header of %u bytes, expected %zu", h->header_size, sizeof *h);
    if (h->file_size != size)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: truncated or padded: header says 0x%llx bytes, have 0x%zx",
                       (unsigned long long)h->file_size, size);
    if (h->key_size > FU_COMPACT_MAX_KEY ||
        (h->key_kind != FU_COMPACT_KEY_BUILD_ID && h->key_kind != FU_COMPACT_KEY_FILE_HASH))
        return fu_fail(err, FU_ERR_COMPACT, "compact table: bad key (kind %u, %u bytes)", h->key_kind, h->key_size);
    if (h->rule_index_size != 2 && h->rule_index_size != 4)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: rule index elements of %u bytes", h->rule_index_size);
    if (h->rule_index_size == 2 && h->rule_count > FU_COMPACT_MAX_NARROW_RULES)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: %u rules with a 16-bit rule index", h->rule_count);
    if (!array_fits(h->row_start_offset, h->row_count, 4, size) || h->row_start_offset < sizeof *h)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: row starts at 0x%llx (%u rows) outside the 0x%zx bytes",
                       (unsigned long long)h->row_start_offset, h->row_count, size);
    if (!array_fits(h->rule_index_offset, h->row_count, h->rule_index_size, size) || h->rule_index_offset < sizeof *h)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: rule index at 0x%llx (%u rows) outside the 0x%zx bytes",
                       (unsigned long long)h->rule_index_offset, h->row_count, size);
    if (!array_fits(h->rules_offset, h->rule_count, 4, size) || h->rules_offset < sizeof *h ||
        h->rule_count > (size - h->rules_offset) / sizeof(fu_compact_rule))
        return fu_fail(err, FU_ERR_COMPACT, "compact table: %u rules at 0x%llx outside the 0x%zx bytes", h->rule_count,
                       (unsigned long long)h->rules_offset, size);
    if (h->end_svma < h->base_svma || h->end_svma - h->base_svma > UINT32_MAX ||
        (h->row_count == 0) != (h->end_svma == h->base_svma))
        return fu_fail(err, FU_ERR_COMPACT, "compact table: bad range 0x%llx..0x%llx for %u rows",
                       (unsigned long long)h->base_svma, (unsigned long long)h->end_svma, h->row_count);
    uint64_t by_origin = 0;
    for (unsigned o = 0; o < FU_COMPACT_ORIGIN_COUNT; o++)
        by_origin += h->origin_row_count[o];
    if (by_origin != h->row_count || h->reserved != 0 ||
        (h->synth == FU_COMPACT_SYNTH_OFF && by_origin != h->origin_row_count[FU_COMPACT_ORIGIN_DECLARED]))
        return fu_fail(err, FU_ERR_COMPACT, "compact table: rows by origin %u + %u + %u for %u rows (synth 0x%x)",
                       h->origin_row_count[0], h->origin_row_count[1], h->origin_row_count[2], h->row_count, h->synth);
    if ((uint64_t)h->slow_row_count + h->no_info_row_count > h->row_count)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: %u slow and %u no-info rows of %u", h->slow_row_count,
                       h->no_info_row_count, h->row_count);
    const fu_compact_rule *rules = (const fu_compact_rule *)(data + h->rules_offset);
    for (uint32_t i = 0; i < h->rule_count; i++) {
        const fu_compact_rule *r = &rules[i];
        bool ok = r->cfa_kind < FU_COMPACT_CFA_KIND_COUNT && r->origin < FU_COMPACT_ORIGIN_COUNT &&
                  !(r->kept_caller_saved & ~FU_COMPACT_CALLER_SAVED_MASK) && r->cfa_register < FU_WALK_REGISTERS;
        if (ok && r->cfa_kind == FU_COMPACT_CFA_RSP)
            ok = r->cfa_register == FU_REG_RSP;
        if (ok && r->cfa_kind == FU_COMPACT_CFA_RBP)
            ok = r->cfa_register == FU_REG_RBP;
        if (ok && r->cfa_kind == FU_COMPACT_CFA_SIGNAL_CONTEXT) {
            static const fu_compact_rule signal_context = {.cfa_kind = FU_COMPACT_CFA_SIGNAL_CONTEXT,
                                                          .cfa_register = FU_REG_RSP,
                                                          .cfa_offset = FU_COMPACT_SIGNAL_CONTEXT_CFA};
            ok = memcmp(r, &signal_context, sizeof *r) == 0;
        }
        if (!ok)
            return fu_fail(err, FU_ERR_COMPACT, "compact table: rule %u is invalid (CFA kind %u, register %u)", i,
                           r->cfa_kind, r->cfa_register);
    }
    const uint32_t *starts = (const uint32_t *)(data + h->row_start_offset);
    uint64_t span = h->end_svma - h->base_svma;
    uint64_t pages = h->row_count ? ((span - 1) >> FU_COMPACT_PAGE_SHIFT) + 2 : 0;
    if (h->page_shift != FU_COMPACT_PAGE_SHIFT || h->page_count != pages ||
        !array_fits(h->page_index_offset, h->page_count, 4, size) || h->page_index_offset < sizeof *h)
        return fu_fail(err, FU_ERR_COMPACT, "compact table: page index of %u pages of 1<<%u bytes at 0x%llx: expected %llu "
                       "pages of 1<<%d inside the 0x%zx bytes", h->page_count, h->page_shift,
                       (unsigned long long)h->page_index_offset, (unsigned long long)pages, FU_COMPACT_PAGE_SHIFT, size);
    if (!rows_valid(h, starts, data + h->rule_index_offset, span)) {
        for (uint32_t i = 0; i < h->row_count; i++) { /* the first bad row, for the message */
            if ((i == 0 && starts[0] != 0) || (i > 0 && starts[i] <= starts[i - 1]) || starts[i] >= span)
                return fu_fail(err, FU_ERR_COMPACT,
                               "compact table: row %u starts at +0x%x: not sorted, or outside 0..0x%llx", i, starts[i],
                               (unsigned long long)span);
            uint32_t rule = row_rule(h, data + h->rule_index_offset, i);
            if (rule >= h->rule_count)
                return fu_fail(err, FU_ERR_COMPACT, "compact table: row %u names rule %u of %u", i, rule, h->rule_count);
        }
    }
    /* every page entry must name the row in force at the page's first byte (its last byte for the
     * final entry): the lookup's binary search relies on it, so a wrong entry would pick a wrong
     * row, not only a slow one */
    const uint32_t *page_first = (const uint32_t *)(data + h->page_index_offset);
    for (uint32_t p = 0; p < h->page_count; p++) {
        uint64_t at = (uint64_t)p << FU_COMPACT_PAGE_SHIFT;
        if (at > span - 1)
            at = span - 1;
        uint32_t r = page_first[p];
        if (r >= h->row_count || starts[r] > at || (r + 1 < h->row_count && starts[r + 1] <= at))
            return fu_fail(err, FU_ERR_COMPACT, "compact table: page %u names row %u, not the row in force at +0x%llx", p,
                           r, (unsigned long long)at);
    }
    t->header = h;
    t->page_first_row = page_first;
    t->row_start = starts;
    if (h->rule_index_size == 2)
        t->rule_index16 = (const uint16_t *)(data + h->rule_index_offset);
    else
        t->rule_index32 = (const uint32_t *)(data + h->rule_index_offset);
    t->rules = rules;
    t->base_svma = h->base_svma;
    t->end_svma = h->end_svma;
    t->row_count = h->row_count;
    return FU_OK;
}

/* ---- names and the lookup benchmark ----------------------------------------------------------- */

size_t fu_compact_slow_ranges(const fu_compact_table *t, uint64_t *ranges, size_t max)
{
    size_t n = 0;
    for (uint32_t i = 0; i < t->row_count; i++) { /* bounded by the validated row count */
        uint32_t rule = t->rule_index16 ? t->rule_index16[i] : t->rule_index32[i];
        if (t->rules[rule].cfa_kind != FU_COMPACT_CFA_SLOW)
            continue;
        uint64_t start = t->base_svma + t->row_start[i];
        uint64_t end = i + 1 < t->row_count ? t->base_svma + t->row_start[i + 1] : t->end_svma;
        if (n > 0 && n <= max && ranges[2 * n - 1] == start) {
            ranges[2 * n - 1] = end; /* continues the range before */
            continue;
        }
        if (n < max) {
            ranges[2 * n] = start;
            ranges[2 * n + 1] = end;
        }
        n++;
    }
    return n;
}

const char *fu_compact_cfa_kind_name(unsigned kind)
{
    static const char *const names[FU_COMPACT_CFA_KIND_COUNT] = {"no_info", "slow", "rsp", "rbp", "register",
                                                                  "plt", "deref", "signal_context"};
    return kind < FU_COMPACT_CFA_KIND_COUNT ? names[kind] : "?";
}

const char *fu_compact_synth_mode_name(unsigned mode)
{
    static const char *const names[FU_COMPACT_SYNTH_MODES] = {"off", "missing", "repair"};
    return mode < FU_COMPACT_SYNTH_MODES ? names[mode] : "?";
}

uint64_t fu_compact_benchmark_lookups(const fu_compact_table *t, const uint64_t *pcs, size_t n, size_t passes,
                                      bool two_level, uint64_t *checksum_out)
{
    uint64_t checksum = 0, started = fu_monotonic_ns();
    for (size_t pass = 0; pass < passes; pass++) {
        for (size_t i = 0; i < n; i++) {
            uint64_t pc = pcs[i];
            uint32_t row = UINT32_MAX;
            if (two_level) {
                fu_compact_find(t, pc, &row);
            } else if (pc >= t->base_svma && pc < t->end_svma) {
                uint32_t offset = (uint32_t)(pc - t->base_svma), lo = 0, n_rows = t->row_count;
                while (n_rows > 1) {
                    uint32_t half = n_rows / 2;
                    if (t->row_start[lo + half] <= offset)
                        lo += half;
                    n_rows -= half;
                }
                row = lo;
            }
            checksum += row;
        }
    }
    *checksum_out = checksum;
    return fu_monotonic_ns() - started;
}
