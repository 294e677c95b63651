/* synth_table: the collector of a file's declared, corrected and synthesized rows, and their
 * `.debug_frame` encoding (see synth_table.h). */
#include "synth_table.h"

#include <stdio.h>
#include <string.h>

#define RETURN_ADDRESS_INDEX (FU_SYNTH_COLUMN_COUNT - 1) /* fu_synth_columns ends with the return address */

void fu_synth_table_free(fu_synth_table *table)
{
    free(table->ranges.data);
    free(table->rows.data);
    free(table->derived.data);
    free(table->uncovered.data);
    fu_synth_scratch_free(&table->scratch);
    memset(table, 0, sizeof *table);
}

static fu_synth_range *range_at(const fu_synth_table *t, size_t i)
{
    return &((fu_synth_range *)t->ranges.data)[i];
}

static const fu_synth_table_row *row_at(const fu_synth_table *t, size_t i)
{
    return &((const fu_synth_table_row *)t->rows.data)[i];
}

static size_t row_count(const fu_synth_table *t)
{
    return t->rows.len / sizeof(fu_synth_table_row);
}

static bool add_row(fu_synth_table *t, uint64_t address, uint8_t table, uint32_t state)
{
    if (row_count(t) >= FU_SYNTH_TABLE_MAX_ROWS)
        return false;
    fu_synth_table_row row = {.address = address, .state = state, .table = table};
    return fu_buffer_append(&t->rows, &row, sizeof row);
}

/* ---- declared FDEs ---------------------------------------------------------------------------- */

static int compare_entries(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The FDEs of the view: indexed FDEs with rows and a non-empty range; `.debug_frame`'s only where
 * `.eh_frame` has no FDE at their start (fu_cfi_tables_find_row's precedence). */
static bool fde_in_view(const fu_cfi_table *const tables[2], unsigned which, const fu_entry *e)
{
    if (e->has_error || e->row_count == 0 || e->pc_range == 0 || e->discarded || e->pc_begin == 0)
        return false;
    return which == 0 || !tables[0] || fu_cfi_table_find_fde(tables[0], e->pc_begin) < 0;
}

/* The declared rows of `fde` that are in force over [from, to): the one at `from` (unless the row
 * before it, the range's since `range_first_row`, is that one already), then those starting inside. */
static bool add_declared_rows(fu_synth_table *t, unsigned which, const fu_entry *fde, uint32_t range_first_row,
                              uint64_t from, uint64_t to)
{
    const fu_cfi_table *table = t->tables[which];
    uint32_t first = fde->first_row, end = fde->first_row + fde->row_count;
    uint32_t r = first;
    while (r + 1 < end && table->row_address[r + 1] <= from)
        r++;
    size_t rows = row_count(t);
    const fu_synth_table_row *previous = rows > range_first_row ? row_at(t, rows - 1) : NULL;
    if (!(previous && previous->table == which && previous->state == table->row_state[r]) &&
        !add_row(t, from, (uint8_t)which, table->row_state[r]))
        return false;
    uint64_t last = from;
    for (r++; r < end && table->row_address[r] < to; r++) {
        if (table->row_address[r] <= last) /* DW_CFA_set_loc back: hostile CFI */
            continue;
        last = table->row_address[r];
        if (!add_row(t, last, (uint8_t)which, table->row_state[r]))
            return false;
    }
    return true;
}

/* A declared FDE's rows as the file states them (equal neighbours too: readelf prints them), but
 * those that go back (DW_CFA_set_loc) or further than an advance reaches: hostile CFI only. */
static bool add_declared_copy(fu_synth_table *t, unsigned which, const fu_entry *e, fu_synth_range *range)
{
    const fu_cfi_table *table = t->tables[which];
    uint64_t last = e->pc_begin;
    for (uint32_t r = e->first_row; r < e->first_row + e->row_count; r++) {
        uint64_t address = table->row_address[r];
        if (address < last || address - e->pc_begin > UINT32_MAX)
            continue;
        if (!add_row(t, address, (uint8_t)which, table->row_state[r]))
            return false;
        last = address;
        range->row_count++;
    }
    return true;
}

static bool add_range(fu_synth_table *t, const fu_synth_range *range)
{
    if (fu_synth_table_range_count(t) >= FU_SYNTH_TABLE_MAX_RANGES)
        return false;
    return fu_buffer_append(&t->ranges, range, sizeof *range);
}

/* ---- derived rows ----------------------------------------------------------------------------- */

/* One interpretation's rows going into the table: a corrected FDE (declared rows fill what the
 * code does not tell) or code without CFI (pieces between the instructions with usable rows). */
typedef struct collector {
    fu_synth_table *t;
    const fu_entry *fde; /* corrected: the declared FDE; NULL: synthesized */
    unsigned which;      /* the declared FDE's table */
    fu_synth_range range;   /* the range being filled */
    bool open;              /* range has rows */
    uint64_t next;          /* just past the last visited instruction */
    bool last_derived;      /* the last row is derived; its rules are `last` */
    fu_synth_row last;
    unsigned cfa_register;  /* the last derived row's CFA register: kept while it serves */
    uint32_t pieces;
    bool failed;            /* out of memory or a limit */
    /* synthesized: [start, end) interpreted, and where the code it leaves for code without CFI is
     * noted (uint64 addresses; NULL: not noted) */
    uint64_t start, end;
    fu_buffer *targets;
} collector;

/* A derived row the way the table keeps it: callee-saved registers holding the caller's values
 * without a rule. False if it cannot unwind (the CFA or the return address unknown). */
static bool usable_row(const fu_synth_state *state, unsigned cfa_register, fu_synth_row *row)
{
    fu_synth_derive_row(state, cfa_register, row);
    if (row->cfa.kind != FU_CFA_REG_OFFSET)
        return false;
    fu_rule ra = row->columns[RETURN_ADDRESS_INDEX];
    if (ra.kind != FU_RULE_OFFSET && ra.kind != FU_RULE_REGISTER)
        return false;
    for (unsigned c = 0; c < RETURN_ADDRESS_INDEX; c++)
        if (row->columns[c].kind == FU_RULE_SAME_VALUE)
            row->columns[c].kind = FU_RULE_UNSPECIFIED;
        else if (row->columns[c].kind == FU_RULE_UNSPECIFIED)
            row->columns[c].kind = FU_RULE_UNDEFINED; /* not found: do not let an unwinder assume it kept */
    return true;
}

static void close_piece(collector *c, uint64_t end)
{
    if (!c->open)
        return;
    c->range.end = end;
    c->range.row_count = (uint32_t)(row_count(c->t) - c->range.first_row);
    if (!add_range(c->t, &c->range))
        c->failed = true;
    c->pieces++;
    c->open = false;
    c->last_derived = false;
}

static void open_piece(collector *c, uint64_t start)
{
    if (c->open)
        return;
    c->range.start = start;
    c->range.first_row = (uint32_t)row_count(c->t);
    c->range.derived_rows = 0;
    c->open = true;
}

/* [from, to) has no usable derived row: the declared rows (corrected), or the end of a piece. */
static void without_derived(collector *c, uint64_t from, uint64_t to)
{
    if (from >= to)
        return;
    if (!c->fde) {
        close_piece(c, from);
        return;
    }
    if (!add_declared_rows(c->t, c->which, c->fde, c->range.first_row, from, to))
        c->failed = true;
    c->last_derived = false;
}

/* Whether `state` is a function's entry state as its row shows it: CFA = rsp+8, the return address
 * at CFA-8, every callee-saved register holding the caller's value. */
static bool entry_row(const fu_synth_state *state)
{
    fu_synth_row row;
    fu_synth_derive_row(state, FU_X86_REG_NONE, &row);
    if (row.cfa.kind != FU_CFA_REG_OFFSET || row.cfa.reg != FU_REG_RSP || row.cfa.value != 8 ||
        row.columns[RETURN_ADDRESS_INDEX].kind != FU_RULE_OFFSET || row.columns[RETURN_ADDRESS_INDEX].value != -8)
        return false;
    for (unsigned k = 0; k < RETURN_ADDRESS_INDEX; k++)
        if (row.columns[k].kind != FU_RULE_SAME_VALUE)
            return false;
    return true;
}

/* Code without CFI that synthesized code leads to: a direct call's target (inside the range too: the
 * interpretation takes a call as returning without walking the callee, so x264's helpers that follow
 * the function calling them stay unreached), and, outside the range, an address a RIP-relative lea
 * takes, or a jump's target where the jump leaves with the entry state (a tail call: x264's stubs
 * jump into a shared loop no symbol, call or lea names). The caller interprets the targets not yet
 * covered as functions of their own (fu_synth_table_build). */
static void note_target(collector *c, uint64_t address, const fu_x86_insn *insn, const fu_synth_state *state)
{
    uint64_t target;
    if (insn->kind == FU_X86_CALL && insn->has_target)
        target = insn->target;
    else if ((insn->kind == FU_X86_JMP || insn->kind == FU_X86_JCC) && insn->has_target && entry_row(state))
        target = insn->target;
    else if (insn->kind == FU_X86_LEA && insn->source.kind == FU_X86_OPERAND_MEMORY &&
             insn->source.reg == FU_X86_REG_RIP && insn->source.index == FU_X86_REG_NONE && !insn->source.segment)
        target = address + insn->length + (uint64_t)insn->source.value;
    else
        return;
    bool outside = target < c->start || target >= c->end;
    if ((outside || insn->kind == FU_X86_CALL) && !fu_buffer_append(c->targets, &target, sizeof target))
        c->failed = true;
}

static bool collect_visit(void *context, uint64_t address, const fu_x86_insn *insn, const fu_synth_state *state,
                          uint32_t changed)
{
    collector *c = context;
    if (c->targets)
        note_target(c, address, insn, state);
    if (address > c->next)
        without_derived(c, c->next, address); /* no path reaches [next, address) */
    c->next = address + insn->length;
    if (!changed && c->last_derived)
        return true;
    fu_synth_row row;
    if (!usable_row(state, c->cfa_register, &row)) {
        without_derived(c, address, c->next);
        return !c->failed;
    }
    c->cfa_register = row.cfa.reg;
    if (c->last_derived && memcmp(&row, &c->last, sizeof row) == 0)
        return true;
    open_piece(c, address);
    uint32_t index = (uint32_t)(c->t->derived.len / sizeof(fu_synth_row));
    if (!fu_buffer_append(&c->t->derived, &row, sizeof row) || !add_row(c->t, address, FU_SYNTH_ROW_DERIVED, index)) {
        c->failed = true;
        return false;
    }
    c->range.derived_rows++;
    c->last = row;
    c->last_derived = true;
    return true;
}

/* Interpret [start, end) from its entry state into the collector; the outcome of fu_synth_run, or
 * FU_SYNTH_UNDECIDED with `reason` when the file's work budget is spent. */
static fu_synth_outcome interpret(fu_synth_table *t, const fu_check_image *image, uint64_t start, uint64_t end,
                                  const uint8_t *code, collector *c, char reason[FU_SYNTH_REASON_MAX])
{
    if (t->work_done >= FU_CHECK_MAX_FILE_INSTRUCTIONS) {
        snprintf(reason, FU_SYNTH_REASON_MAX,
                 "work limit: %u decoded instructions interpreted in this file (FU_CHECK_MAX_FILE_INSTRUCTIONS)",
                 FU_CHECK_MAX_FILE_INSTRUCTIONS);
        return FU_SYNTH_UNDECIDED;
    }
    fu_synth_function function = {
        .start = start, .end = end, .code = code,
        .noreturn = image->noreturn, .noreturn_count = image->noreturn_count,
        .segments = image->segments, .segment_count = image->segment_count,
        .code_segments = image->code, .code_segment_count = image->code_count, .entry = NULL,
        .caller_saved_values = true};
    fu_synth_counts counts;
    c->next = start;
    c->cfa_register = FU_X86_REG_NONE;
    fu_synth_outcome outcome = fu_synth_run(&function, &t->scratch, collect_visit, c, &counts, reason);
    t->work_done += counts.instructions;
    return outcome;
}

static int compare_addresses(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A mismatching FDE's corrected range; false with *kept when it stays declared. */
static bool add_corrected(fu_synth_table *t, const fu_check_image *image, unsigned which, uint32_t entry, bool *kept)
{
    const fu_cfi_table *table = t->tables[which];
    const fu_entry *fde = &table->entries[entry];
    *kept = true;
    const fu_image_segment *seg = fu_image_segment_holding(image->code, image->code_count, fde->pc_begin, fde->pc_range);
    if (!seg || !fu_check_starts_at_entry(image, table, fde->pc_begin,
                                            fu_cfi_table_state(table, table->row_state[fde->first_row])))
        return true;
    size_t rows_before = t->rows.len, derived_before = t->derived.len;
    collector c = {.t = t, .fde = fde, .which = which};
    c.range = (fu_synth_range){.origin = FU_ORIGIN_CORRECTED, .table = (uint8_t)which, .entry = entry};
    open_piece(&c, fde->pc_begin);
    char reason[FU_SYNTH_REASON_MAX];
    uint64_t end = fde->pc_begin + fde->pc_range;
    fu_synth_outcome outcome = interpret(t, image, fde->pc_begin, end, seg->data + (fde->pc_begin - seg->vaddr), &c, reason);
    if (outcome == FU_SYNTH_NO_MEMORY || c.failed)
        return false;
    if (outcome != FU_SYNTH_DECIDED) {
        t->rows.len = rows_before;
        t->derived.len = derived_before;
        return true;
    }
    without_derived(&c, c.next, end);
    if (c.failed)
        return false;
    close_piece(&c, end);
    *kept = false;
    return !c.failed;
}

static bool add_synthesized(fu_synth_table *t, const fu_check_image *image, uint64_t start, uint64_t end,
                            fu_buffer *targets, fu_synth_uncovered_result *result)
{
    memset(result, 0, sizeof *result);
    result->start = start;
    result->end = end;
    /* up to the next FDE: code without CFI ends where CFI starts */
    uint64_t next_fde = fu_cfi_tables_next_fde_start(t->tables, start);
    if (next_fde < end)
        end = next_fde;
    const fu_image_segment *seg = end > start ? fu_image_segment_holding(image->code, image->code_count, start, end - start)
                                              : NULL;
    if (!seg) {
        result->outcome = FU_SYNTH_UNDECIDED;
        snprintf(result->reason, sizeof result->reason, "0x%llx..0x%llx is not inside executable code",
                 (unsigned long long)start, (unsigned long long)end);
        return true;
    }
    size_t rows_before = t->rows.len, derived_before = t->derived.len, ranges_before = t->ranges.len;
    collector c = {.t = t, .fde = NULL, .which = FU_SYNTH_ROW_DERIVED, .start = start, .end = end, .targets = targets};
    c.range = (fu_synth_range){.origin = FU_ORIGIN_SYNTHESIZED, .table = FU_SYNTH_ROW_DERIVED, .entry = UINT32_MAX};
    size_t targets_before = targets->len;
    fu_synth_outcome outcome = interpret(t, image, start, end, seg->data + (start - seg->vaddr), &c, result->reason);
    if (outcome == FU_SYNTH_NO_MEMORY || c.failed)
        return false;
    if (outcome != FU_SYNTH_DECIDED) {
        t->rows.len = rows_before;
        t->derived.len = derived_before;
        t->ranges.len = ranges_before;
        targets->len = targets_before;
        result->outcome = FU_SYNTH_UNDECIDED;
        return true;
    }
    close_piece(&c, c.next);
    result->outcome = FU_SYNTH_DECIDED;
    result->ranges = c.pieces;
    return !c.failed;
}

/* ---- the view --------------------------------------------------------------------------------- */

static int compare_ranges(const void *a, const void *b)
{
    const fu_synth_range *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->table != y->table ? (x->table < y->table ? -1 : 1) : (x->entry < y->entry ? -1 : x->entry > y->entry);
}

/* Sorts and dedupes the uint64 addresses of `b`. */
static void sort_unique(fu_buffer *b)
{
    uint64_t *a = (uint64_t *)b->data;
    size_t n = b->len / sizeof *a, k = 0;
    if (n > 1)
        qsort(a, n, sizeof *a, compare_addresses);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || a[k - 1] != a[i])
            a[k++] = a[i];
    b->len = k * sizeof *a;
}

/* How many of the request's uncovered ranges (sorted by start) start at or below `address`. */
static size_t requested_below(const fu_synth_request *request, uint64_t address)
{
    size_t lo = 0, hi = request->uncovered_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (request->uncovered[2 * mid] <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The synthesized ranges' (start, end) pairs, sorted by start, into `out` (emptied first). */
static bool synthesized_pieces(const fu_synth_table *t, fu_buffer *out)
{
    out->len = 0;
    const fu_synth_range *r = (const fu_synth_range *)t->ranges.data;
    for (size_t i = 0; i < fu_synth_table_range_count(t); i++)
        if (r[i].origin == FU_ORIGIN_SYNTHESIZED &&
            (!fu_buffer_append(out, &r[i].start, sizeof r[i].start) || !fu_buffer_append(out, &r[i].end, sizeof r[i].end)))
            return false;
    if (out->len > 2 * sizeof(uint64_t))
        qsort(out->data, out->len / (2 * sizeof(uint64_t)), 2 * sizeof(uint64_t), compare_addresses);
    return true;
}

/* Whether `address` lies in one of the sorted (start, end) pairs of `pieces` (disjoint). */
static bool in_pieces(const fu_buffer *pieces, uint64_t address)
{
    const uint64_t *p = (const uint64_t *)pieces->data;
    size_t lo = 0, hi = pieces->len / (2 * sizeof *p);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p[2 * mid] <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && address < p[2 * (lo - 1) + 1];
}

/* The targets synthesized code led to (note_target), in rounds: each one in executable code that
 * no FDE and no synthesized range covers (one inside an uncovered range that its interpretation
 * did not reach included: x264's shared loops follow the stub whose range holds them) is a
 * function of its own, up to the next such start, requested start, FDE or the end of its segment,
 * and what it leads to is the next round's. Bounded: FU_SYNTH_TABLE_MAX_UNCOVERED starts in all,
 * and the file's work budget. */
static bool synthesize_targets(fu_synth_table *t, const fu_check_image *image, const fu_synth_request *request,
                               fu_buffer *targets)
{
    fu_buffer pieces = {0}, round = {0}, tried = {0};
    size_t count = request->uncovered_count;
    bool ok = true;
    while (ok && targets->len && count < FU_SYNTH_TABLE_MAX_UNCOVERED) {
        sort_unique(targets);
        round.len = 0;
        ok = synthesized_pieces(t, &pieces);
        const uint64_t *a = (const uint64_t *)targets->data;
        for (size_t i = 0; ok && i < targets->len / sizeof *a; i++) {
            uint64_t target = a[i];
            int64_t row, fde;
            if (!fu_image_segment_holding(image->code, image->code_count, target, 1) || in_pieces(&pieces, target) ||
                fu_cfi_tables_find_row(t->tables, target, &row, &fde) >= 0 ||
                (tried.len && bsearch(&target, tried.data, tried.len / sizeof target, sizeof target, compare_addresses)))
                continue; /* not code, reached already, declared CFI's, or undecided before */
            ok = fu_buffer_append(&round, &target, sizeof target);
        }
        targets->len = 0;
        if (!ok || !round.len)
            break;
        size_t n = round.len / sizeof(uint64_t);
        if (n > FU_SYNTH_TABLE_MAX_UNCOVERED - count)
            n = FU_SYNTH_TABLE_MAX_UNCOVERED - count;
        const uint64_t *starts = (const uint64_t *)round.data;
        for (size_t i = 0; ok && i < n; i++) {
            const fu_image_segment *seg = fu_image_segment_holding(image->code, image->code_count, starts[i], 1);
            uint64_t end = seg->vaddr + seg->size;
            if (i + 1 < n && starts[i + 1] < end)
                end = starts[i + 1];
            size_t next = requested_below(request, starts[i]); /* the next requested start */
            if (next < request->uncovered_count && request->uncovered[2 * next] < end)
                end = request->uncovered[2 * next];
            fu_synth_uncovered_result result;
            ok = add_synthesized(t, image, starts[i], end, targets, &result) &&
                 fu_buffer_append(&t->uncovered, &result, sizeof result) &&
                 fu_buffer_append(&tried, &starts[i], sizeof starts[i]);
        }
        count += n;
        sort_unique(&tried);
    }
    free(pieces.data);
    free(round.data);
    free(tried.data);
    return ok;
}

/* A synthesized range ends where the next range starts: code without CFI found from two starts (a
 * function symbol and a call target inside it) must not give overlapping FDEs. Its rows past the
 * new end go with it. */
static void clip_synthesized(fu_synth_table *t)
{
    size_t count = fu_synth_table_range_count(t);
    for (size_t i = 0; i + 1 < count; i++) {
        fu_synth_range *r = range_at(t, i);
        uint64_t next = range_at(t, i + 1)->start;
        if (r->origin != FU_ORIGIN_SYNTHESIZED || next >= r->end)
            continue;
        r->end = next;
        while (r->row_count && row_at(t, r->first_row + r->row_count - 1)->address >= next) {
            r->row_count--;
            r->derived_rows--; /* a synthesized range's rows are all derived */
        }
    }
    /* a range left without rows (the next one starts at its start) is no FDE */
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (range_at(t, i)->row_count || range_at(t, i)->origin != FU_ORIGIN_SYNTHESIZED)
            *range_at(t, kept++) = *range_at(t, i);
    t->ranges.len = kept * sizeof(fu_synth_range);
}

fu_status fu_synth_table_build(fu_synth_table *t, const fu_synth_request *request, fu_error *err)
{
    const fu_check_image *image = request->image;
    fu_buffer targets = {0}; /* code without CFI synthesized code leads to (note_target) */
    t->tables[0] = image->tables[0];
    t->tables[1] = image->tables[1];
    if (request->uncovered_count > FU_SYNTH_TABLE_MAX_UNCOVERED)
        return fu_fail(err, FU_ERR_INVALID, "%zu ranges of code without CFI: more than FU_SYNTH_TABLE_MAX_UNCOVERED (%u)",
                       request->uncovered_count, FU_SYNTH_TABLE_MAX_UNCOVERED);
    for (unsigned which = 0; which < 2; which++) {
        const fu_cfi_table *table = t->tables[which];
        if (!table)
            continue;
        for (uint32_t k = 0; k < table->fde_count; k++) {
            uint32_t entry = table->fde_sorted[k];
            const fu_entry *e = &table->entries[entry];
            if (!fde_in_view(t->tables, which, e))
                continue;
            if (request->mode == FU_SYNTH_REPAIR && request->mismatch_count[which] &&
                bsearch(&entry, request->mismatch[which], request->mismatch_count[which], sizeof entry,
                        compare_entries)) {
                bool kept;
                if (!add_corrected(t, image, which, entry, &kept))
                    goto failed;
                if (!kept)
                    continue;
                t->corrected_kept_declared++;
            }
            fu_synth_range range = {.start = e->pc_begin, .end = e->pc_begin + e->pc_range,
                                    .origin = FU_ORIGIN_DECLARED, .table = (uint8_t)which, .entry = entry,
                                    .first_row = (uint32_t)row_count(t)};
            if (!add_declared_copy(t, which, e, &range) || !add_range(t, &range))
                goto failed;
        }
    }
    if (!fu_buffer_reserve(&t->uncovered, request->uncovered_count * sizeof(fu_synth_uncovered_result)))
        goto failed;
    for (size_t i = 0; i < request->uncovered_count; i++) {
        fu_synth_uncovered_result result;
        if (!add_synthesized(t, image, request->uncovered[2 * i], request->uncovered[2 * i + 1], &targets, &result) ||
            !fu_buffer_append(&t->uncovered, &result, sizeof result))
            goto failed;
    }
    if (!synthesize_targets(t, image, request, &targets))
        goto failed;
    free(targets.data);
    targets.data = NULL;
    if (fu_synth_table_range_count(t) > 1)
        qsort(t->ranges.data, fu_synth_table_range_count(t), sizeof(fu_synth_range), compare_ranges);
    clip_synthesized(t);
    return FU_OK;
failed:
    free(targets.data);
    if (fu_synth_table_range_count(t) >= FU_SYNTH_TABLE_MAX_RANGES || row_count(t) >= FU_SYNTH_TABLE_MAX_ROWS)
        return fu_fail(err, FU_ERR_INVALID, "the synthesized table passes FU_SYNTH_TABLE_MAX_RANGES (%u) ranges or "
                       "FU_SYNTH_TABLE_MAX_ROWS (%u) rows", FU_SYNTH_TABLE_MAX_RANGES, FU_SYNTH_TABLE_MAX_ROWS);
    return fu_fail(err, FU_ERR_NOMEM, "out of memory");
}

/* ---- encoding --------------------------------------------------------------------------------- */

/* DWARF 5 §7.24, call frame instruction encodings. */
enum {
    CFA_advance_loc = 0x40, CFA_offset = 0x80, CFA_restore = 0xc0, CFA_nop = 0x00,
    CFA_advance_loc1 = 0x02, CFA_advance_loc2 = 0x03, CFA_advance_loc4 = 0x04,
    CFA_restore_extended = 0x06, CFA_undefined = 0x07, CFA_same_value = 0x08, CFA_register = 0x09,
    CFA_def_cfa = 0x0c, CFA_def_cfa_register = 0x0d, CFA_def_cfa_offset = 0x0e, CFA_def_cfa_expression = 0x0f,
    CFA_expression = 0x10, CFA_offset_extended_sf = 0x11, CFA_def_cfa_sf = 0x12, CFA_val_offset_sf = 0x15,
    CFA_val_expression = 0x16,
};
/* The CIEs' data alignment factors: -8, as compilers write for x86-64 (every save slot is 8 bytes:
 * DW_CFA_offset's operand is one byte), and 1 for an FDE with an offset that -8 does not factor
 * (hand-written or hostile CFI), so that every offset is encoded exactly, never rewritten as an
 * expression. */
#define DATA_ALIGNMENT (-8)
#define EXACT_ALIGNMENT 1
#define CIE_SIZE 16 /* length field included, padded */

typedef struct encoder {
    fu_buffer *out;
    int64_t data_alignment; /* of the CIE of the entry being encoded */
    bool failed;
} encoder;

static void put(encoder *e, const void *bytes, size_t n)
{
    if (!fu_buffer_append(e->out, bytes, n))
        e->failed = true;
}

static void put_u8(encoder *e, uint8_t v) { put(e, &v, 1); }

static void put_uleb(encoder *e, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        put_u8(e, (uint8_t)(byte | (v ? 0x80 : 0)));
    } while (v);
}

/* The SLEB128 bytes of `v` (at most 10) into `out`; their count. */
static size_t sleb_bytes(uint8_t out[10], int64_t v)
{
    size_t n = 0;
    for (;;) {
        uint8_t byte = v & 0x7f;
        v >>= 7; /* arithmetic: gcc and clang shift signed values that way */
        bool done = (v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40));
        out[n++] = (uint8_t)(byte | (done ? 0 : 0x80));
        if (done)
            return n;
    }
}

static void put_sleb(encoder *e, int64_t v)
{
    uint8_t bytes[10];
    put(e, bytes, sleb_bytes(bytes, v));
}

static void put_le(encoder *e, uint64_t v, unsigned size)
{
    uint8_t bytes[8];
    for (unsigned i = 0; i < size; i++)
        bytes[i] = (uint8_t)(v >> (8 * i));
    put(e, bytes, size);
}

static void patch_u32(fu_buffer *out, size_t at, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        out->data[at + i] = (uint8_t)(v >> (8 * i));
}

/* A row's rules, whatever their source, with every column that has one. */
typedef struct rules {
    fu_rule cfa;
    const uint8_t *section; /* the bytes expressions point into */
    uint64_t has[FU_MAX_COLUMNS / 64];
    fu_rule column[FU_MAX_COLUMNS];
} rules;

static void clear_rules(rules *r)
{
    for (unsigned w = 0; w < FU_MAX_COLUMNS / 64; w++)
        for (uint64_t bits = r->has[w]; bits; bits &= bits - 1)
            r->column[w * 64 + (unsigned)__builtin_ctzll(bits)] = (fu_rule){0};
    memset(r->has, 0, sizeof r->has);
    r->cfa = (fu_rule){0};
    r->section = NULL;
}

static void set_rule(rules *r, unsigned column, fu_rule rule)
{
    if (column >= FU_MAX_COLUMNS || rule.kind == FU_RULE_UNSPECIFIED)
        return;
    r->has[column / 64] |= 1ull << (column % 64);
    r->column[column] = rule;
}

static void load_rules(const fu_synth_table *t, const fu_synth_table_row *row, rules *r)
{
    clear_rules(r);
    if (row->table == FU_SYNTH_ROW_DERIVED) {
        const fu_synth_row *d = &((const fu_synth_row *)t->derived.data)[row->state];
        r->cfa = d->cfa;
        for (unsigned c = 0; c < FU_SYNTH_COLUMN_COUNT; c++)
            set_rule(r, fu_synth_columns[c], d->columns[c]);
        for (uint16_t kept = d->kept_caller_saved; kept; kept &= (uint16_t)(kept - 1))
            set_rule(r, (unsigned)__builtin_ctz(kept), (fu_rule){.kind = FU_RULE_SAME_VALUE});
        return;
    }
    const fu_cfi_table *table = t->tables[row->table];
    const fu_state *state = fu_cfi_table_state(table, row->state);
    r->cfa = state->cfa;
    r->section = table->section.data;
    for (unsigned k = 0; k < state->count; k++)
        set_rule(r, table->column_pool[state->first + k], table->rule_pool[state->first + k]);
}

static bool same_rule(const rules *a, fu_rule x, const rules *b, fu_rule y)
{
    if (x.kind != y.kind || x.reg != y.reg || x.expr_len != y.expr_len)
        return false;
    if (x.kind == FU_CFA_EXPRESSION || x.kind == FU_RULE_EXPRESSION || x.kind == FU_RULE_VAL_EXPRESSION)
        return a->section && b->section && memcmp(a->section + x.value, b->section + y.value, x.expr_len) == 0;
    return x.value == y.value;
}

static void put_expression(encoder *e, const rules *r, fu_rule rule)
{
    put_uleb(e, rule.expr_len);
    put(e, r->section + rule.value, rule.expr_len);
}

static void put_cfa(encoder *e, const rules *prev, const rules *cur)
{
    fu_rule p = prev->cfa, c = cur->cfa;
    if (same_rule(prev, p, cur, c) || c.kind == FU_RULE_UNSPECIFIED)
        return;
    if (c.kind == FU_CFA_EXPRESSION) {
        put_u8(e, CFA_def_cfa_expression);
        put_expression(e, cur, c);
        return;
    }
    if (c.value >= 0) {
        if (p.kind == FU_CFA_REG_OFFSET && p.reg == c.reg) {
            put_u8(e, CFA_def_cfa_offset);
            put_uleb(e, (uint64_t)c.value);
        } else if (p.kind == FU_CFA_REG_OFFSET && p.value == c.value) {
            put_u8(e, CFA_def_cfa_register);
            put_uleb(e, c.reg);
        } else {
            put_u8(e, CFA_def_cfa);
            put_uleb(e, c.reg);
            put_uleb(e, (uint64_t)c.value);
        }
    } else {
        put_u8(e, CFA_def_cfa_sf);
        put_uleb(e, c.reg);
        put_sleb(e, c.value / e->data_alignment);
    }
}

static void put_column(encoder *e, unsigned column, const rules *cur, fu_rule rule)
{
    switch ((fu_rule_kind)rule.kind) {
    case FU_RULE_UNSPECIFIED: /* the CIE gives no column a rule: restoring one leaves it without */
        if (column < 64) {
            put_u8(e, (uint8_t)(CFA_restore | column));
        } else {
            put_u8(e, CFA_restore_extended);
            put_uleb(e, column);
        }
        return;
    case FU_RULE_UNDEFINED:
    case FU_RULE_SAME_VALUE:
        put_u8(e, rule.kind == FU_RULE_UNDEFINED ? CFA_undefined : CFA_same_value);
        put_uleb(e, column);
        return;
    case FU_RULE_OFFSET:
    case FU_RULE_VAL_OFFSET:
        if (rule.kind == FU_RULE_OFFSET && column < 64 && rule.value / e->data_alignment >= 0) {
            put_u8(e, (uint8_t)(CFA_offset | column));
            put_uleb(e, (uint64_t)(rule.value / e->data_alignment));
        } else {
            put_u8(e, rule.kind == FU_RULE_OFFSET ? CFA_offset_extended_sf : CFA_val_offset_sf);
            put_uleb(e, column);
            put_sleb(e, rule.value / e->data_alignment);
        }
        return;
    case FU_RULE_REGISTER:
        put_u8(e, CFA_register);
        put_uleb(e, column);
        put_uleb(e, rule.reg);
        return;
    case FU_RULE_EXPRESSION:
    case FU_RULE_VAL_EXPRESSION:
        put_u8(e, rule.kind == FU_RULE_EXPRESSION ? CFA_expression : CFA_val_expression);
        put_uleb(e, column);
        put_expression(e, cur, rule);
        return;
    default:
        return;
    }
}

static bool same_rules(const rules *a, const rules *b)
{
    if (!same_rule(a, a->cfa, b, b->cfa) || memcmp(a->has, b->has, sizeof a->has) != 0)
        return false;
    for (unsigned w = 0; w < FU_MAX_COLUMNS / 64; w++)
        for (uint64_t bits = a->has[w]; bits; bits &= bits - 1) {
            unsigned column = w * 64 + (unsigned)__builtin_ctzll(bits);
            if (!same_rule(a, a->column[column], b, b->column[column]))
                return false;
        }
    return true;
}

/* The instructions that turn the rules `prev` into `cur`. */
static void put_changes(encoder *e, const rules *prev, const rules *cur)
{
    put_cfa(e, prev, cur);
    for (unsigned w = 0; w < FU_MAX_COLUMNS / 64; w++)
        for (uint64_t bits = prev->has[w] | cur->has[w]; bits; bits &= bits - 1) {
            unsigned column = w * 64 + (unsigned)__builtin_ctzll(bits);
            bool in_prev = prev->has[w] >> (column % 64) & 1, in_cur = cur->has[w] >> (column % 64) & 1;
            if (in_prev && in_cur && same_rule(prev, prev->column[column], cur, cur->column[column]))
                continue;
            put_column(e, column, cur, in_cur ? cur->column[column] : (fu_rule){0});
        }
}

static void put_advance(encoder *e, uint64_t delta)
{
    if (delta < 64) {
        put_u8(e, (uint8_t)(CFA_advance_loc | delta));
    } else if (delta <= UINT8_MAX) {
        put_u8(e, CFA_advance_loc1);
        put_le(e, delta, 1);
    } else if (delta <= UINT16_MAX) {
        put_u8(e, CFA_advance_loc2);
        put_le(e, delta, 2);
    } else {
        put_u8(e, CFA_advance_loc4);
        put_le(e, delta, 4);
    }
}

static void pad_entry(encoder *e, size_t entry_start)
{
    while ((e->out->len - entry_start) % 8)
        put_u8(e, CFA_nop);
    patch_u32(e->out, entry_start, (uint32_t)(e->out->len - entry_start - 4));
}

/* The columns a declared FDE named without a rule in its first row: named again (DW_CFA_restore,
 * no effect on the rules) so that readelf shows the FDE's columns. */
static void put_named_columns(encoder *e, const fu_synth_table *t, const fu_synth_range *range, rules *first)
{
    const fu_entry *fde = &t->tables[range->table]->entries[range->entry];
    for (unsigned w = 0; w < FU_MAX_COLUMNS / 64; w++)
        for (uint64_t bits = fde->referenced[w] & ~first->has[w]; bits; bits &= bits - 1)
            put_column(e, w * 64 + (unsigned)__builtin_ctzll(bits), first, (fu_rule){0});
}

/* The two CIEs every FDE may use: the ABI's entry row (CFA = rsp+8, the return address at CFA-8, as
 * compilers write their CIEs), so that an FDE whose rows begin there starts without instructions, as
 * theirs do; and one without initial instructions, for FDEs with a row that leaves the CFA or the
 * return address without a rule (which no instruction can undo under the first CIE). A declared FDE
 * of DW_CFA_nop only whose row is neither gets a CIE of its own with that row (readelf prints no
 * rows for it, and must not for ours: crt1's `_start`, whose CIE makes the return address undefined). */
enum { CIE_ENTRY_ROW = 0, CIE_EMPTY = 1 };

static void entry_row_rules(rules *r)
{
    clear_rules(r);
    r->cfa = (fu_rule){.kind = FU_CFA_REG_OFFSET, .reg = FU_REG_RSP, .value = 8};
    set_rule(r, FU_RETURN_ADDRESS_COLUMN, (fu_rule){.kind = FU_RULE_OFFSET, .value = -8});
}

/* A CIE whose initial instructions give `initial`'s rules. */
static size_t put_cie(encoder *e, const rules *initial)
{
    size_t at = e->out->len;
    put_le(e, 0, 4);            /* length, patched */
    put_le(e, 0xffffffffu, 4);  /* CIE id (.debug_frame, 32-bit DWARF) */
    put_u8(e, 1);               /* version */
    put_u8(e, 0);               /* augmentation "" */
    put_uleb(e, 1);             /* code alignment */
    put_sleb(e, e->data_alignment);
    put_u8(e, FU_RETURN_ADDRESS_COLUMN);
    rules *none = calloc(1, sizeof *none);
    if (!none) {
        e->failed = true;
        return at;
    }
    put_changes(e, none, initial);
    free(none);
    pad_entry(e, at);
    return at;
}

static bool factors(int64_t value) { return value % DATA_ALIGNMENT == 0; }

/* What a range's CIE must be: *empty, for a row without a CFA or return-address rule (CIE_EMPTY);
 * *exact, for an offset that DATA_ALIGNMENT does not factor (EXACT_ALIGNMENT). */
static void range_needs(const fu_synth_table *t, const fu_synth_range *range, rules *scratch, bool *empty, bool *exact)
{
    *empty = *exact = false;
    for (uint32_t r = 0; r < range->row_count; r++) {
        load_rules(t, row_at(t, range->first_row + r), scratch);
        if (scratch->cfa.kind == FU_RULE_UNSPECIFIED ||
            !(scratch->has[FU_RETURN_ADDRESS_COLUMN / 64] >> (FU_RETURN_ADDRESS_COLUMN % 64) & 1))
            *empty = true;
        if (scratch->cfa.kind == FU_CFA_REG_OFFSET && scratch->cfa.value < 0 && !factors(scratch->cfa.value))
            *exact = true;
        for (unsigned w = 0; w < FU_MAX_COLUMNS / 64; w++)
            for (uint64_t bits = scratch->has[w]; bits; bits &= bits - 1) {
                fu_rule rule = scratch->column[w * 64 + (unsigned)__builtin_ctzll(bits)];
                if ((rule.kind == FU_RULE_OFFSET || rule.kind == FU_RULE_VAL_OFFSET) && !factors(rule.value))
                    *exact = true;
            }
    }
}

fu_status fu_synth_table_encode(const fu_synth_table *t, fu_buffer *out, fu_error *err)
{
    encoder e = {out, DATA_ALIGNMENT, false};
    /* the CIE's rules, the previous row's, this row's, scratch */
    rules *work = calloc(4, sizeof *work);
    if (!work)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    rules *prev = &work[0], *cur = &work[1], *cie = &work[2];
    /* per alignment (DATA_ALIGNMENT, EXACT_ALIGNMENT) and kind: the CIE's offset, SIZE_MAX until an
     * FDE needs it; the usual two first */
    size_t cies[2][2] = {{0, 0}, {SIZE_MAX, SIZE_MAX}};
    entry_row_rules(cie);
    cies[0][CIE_ENTRY_ROW] = put_cie(&e, cie);
    clear_rules(cie);
    cies[0][CIE_EMPTY] = put_cie(&e, cie);
    for (size_t i = 0; i < fu_synth_table_range_count(t) && !e.failed; i++) {
        const fu_synth_range *range = range_at(t, i);
        if (range->end - range->start > UINT32_MAX) {
            free(work);
            return fu_fail(err, FU_ERR_INVALID, "range 0x%llx..0x%llx is longer than an advance can express",
                           (unsigned long long)range->start, (unsigned long long)range->end);
        }
        const fu_entry *declared = range->origin == FU_ORIGIN_DECLARED ? &t->tables[range->table]->entries[range->entry]
                                                                       : NULL;
        bool empty_cie, exact;
        range_needs(t, range, &work[3], &empty_cie, &exact);
        e.data_alignment = exact ? EXACT_ALIGNMENT : DATA_ALIGNMENT;
        if (empty_cie)
            clear_rules(cie);
        else
            entry_row_rules(cie);
        size_t *shared_cie = &cies[exact][empty_cie ? CIE_EMPTY : CIE_ENTRY_ROW];
        if (*shared_cie == SIZE_MAX)
            *shared_cie = put_cie(&e, cie);
        size_t cie_offset = *shared_cie;
        if (declared && declared->all_nops && range->row_count) {
            load_rules(t, row_at(t, range->first_row), cur);
            if (!same_rules(cie, cur)) {
                *cie = *cur;
                cie_offset = put_cie(&e, cie);
            }
        }
        size_t fde = out->len;
        put_le(&e, 0, 4);
        put_le(&e, cie_offset, 4); /* CIE pointer: its offset in the section */
        put_le(&e, range->start, 8);
        put_le(&e, range->end - range->start, 8);
        size_t instructions = out->len;
        uint64_t address = range->start;
        for (uint32_t r = 0; r < range->row_count; r++) {
            const fu_synth_table_row *row = row_at(t, range->first_row + r);
            load_rules(t, row, cur);
            if (r == 0) {
                *prev = *cie;
                if (declared && !declared->all_nops)
                    put_named_columns(&e, t, range, cur);
            }
            if (row->address != address || r > 0)
                put_advance(&e, row->address - address);
            address = row->address;
            put_changes(&e, prev, cur);
            rules *swap = prev;
            prev = cur;
            cur = swap;
        }
        /* readelf prints no rows for an FDE of DW_CFA_nop only: the CFA said again where the file's
         * FDE said anything, so that both print alike */
        if (out->len == instructions && range->row_count && !(declared && declared->all_nops)) {
            rules none;
            memset(&none, 0, sizeof none);
            put_cfa(&e, &none, prev);
        }
        pad_entry(&e, fde);
    }
    free(work);
    if (e.failed)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    return FU_OK;
}
