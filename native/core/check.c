/* check: declared rows against derived ones, FDE by FDE (see check.h). */
#include "check.h"

#include "radix_sort.h"

#include <stdio.h>
#include <string.h>

#define RETURN_ADDRESS_INDEX (FU_SYNTH_COLUMN_COUNT - 1) /* fu_synth_columns ends with the return address */

/* A judgment (check.c judge) is made 1.6M times on libLLVM-14's check: the functions it calls are
 * inlined into it whatever the compiler's size estimate says. */
#define JUDGE_INLINE static inline __attribute__((always_inline))

typedef enum comparison { COMPARE_SKIP = 0, COMPARE_AGREE, COMPARE_UNKNOWN, COMPARE_MISMATCH } comparison;

void fu_check_batch_free(fu_check_batch *batch)
{
    free(batch->results);
    free(batch->findings.data);
    free(batch->uncovered_calls.data);
    free(batch->called_non_entry.data);
    free(batch->foreign_entries.data);
    free(batch->call_sites.data);
    free(batch->args_sizes.data);
    free(batch->entry_states.data);
    free(batch->entries.data);
    free(batch->row_rules.data);
    free(batch->row_fetched.data);
    free(batch->position_of);
    fu_synth_scratch_free(&batch->scratch);
    memset(batch, 0, sizeof *batch);
}

/* ---- rules as text ---------------------------------------------------------------------------- */

static void register_text(char *out, size_t size, unsigned reg)
{
    const char *name = fu_register_name(reg);
    if (name)
        snprintf(out, size, "%s", name);
    else
        snprintf(out, size, "r%u", reg);
}

static void declared_text(const fu_cfi_table *table, fu_rule rule, char out[FU_CHECK_TEXT_MAX])
{
    char reg[12];
    unsigned breg;
    int32_t offset;
    bool deref;
    switch (rule.kind) {
    case FU_CFA_REG_OFFSET:
        register_text(reg, sizeof reg, rule.reg);
        snprintf(out, FU_CHECK_TEXT_MAX, "%s%+lld", reg, (long long)rule.value);
        return;
    case FU_CFA_EXPRESSION:
    case FU_RULE_EXPRESSION:
    case FU_RULE_VAL_EXPRESSION:
        if (fu_expr_match_breg(table->section.data + rule.value, rule.expr_len, &breg, &offset, &deref)) {
            register_text(reg, sizeof reg, breg);
            bool brackets = rule.kind == FU_CFA_EXPRESSION ? deref : rule.kind == FU_RULE_EXPRESSION;
            snprintf(out, FU_CHECK_TEXT_MAX, brackets ? "[%s%+d]%s" : "%s%+d%s", reg, offset,
                     rule.kind != FU_CFA_EXPRESSION && deref ? " deref" : "");
        } else {
            snprintf(out, FU_CHECK_TEXT_MAX, "expression");
        }
        return;
    case FU_RULE_UNSPECIFIED: snprintf(out, FU_CHECK_TEXT_MAX, "no rule (same value)"); return;
    case FU_RULE_SAME_VALUE: snprintf(out, FU_CHECK_TEXT_MAX, "same value"); return;
    case FU_RULE_UNDEFINED: snprintf(out, FU_CHECK_TEXT_MAX, "undefined"); return;
    case FU_RULE_OFFSET: snprintf(out, FU_CHECK_TEXT_MAX, "c%+lld", (long long)rule.value); return;
    case FU_RULE_VAL_OFFSET: snprintf(out, FU_CHECK_TEXT_MAX, "value c%+lld", (long long)rule.value); return;
    case FU_RULE_REGISTER:
        register_text(reg, sizeof reg, rule.reg);
        snprintf(out, FU_CHECK_TEXT_MAX, "in %s", reg);
        return;
    default:
        snprintf(out, FU_CHECK_TEXT_MAX, "?");
        return;
    }
}

static void derived_text(const fu_synth_state *state, unsigned what, unsigned preferred_cfa_register,
                         char out[FU_CHECK_TEXT_MAX])
{
    fu_synth_row row;
    char reg[12];
    fu_synth_derive_row(state, preferred_cfa_register, &row);
    if (what == FU_CHECK_WHAT_CFA) {
        if (row.cfa.kind == FU_CFA_REG_OFFSET) {
            register_text(reg, sizeof reg, row.cfa.reg);
            snprintf(out, FU_CHECK_TEXT_MAX, "%s%+lld", reg, (long long)row.cfa.value);
        } else {
            snprintf(out, FU_CHECK_TEXT_MAX, "unknown");
        }
        return;
    }
    for (unsigned c = 0; c < FU_SYNTH_COLUMN_COUNT; c++) {
        if (fu_synth_columns[c] != what)
            continue;
        fu_rule rule = row.columns[c];
        if (rule.kind == FU_RULE_SAME_VALUE)
            snprintf(out, FU_CHECK_TEXT_MAX, "same value");
        else if (rule.kind == FU_RULE_OFFSET)
            snprintf(out, FU_CHECK_TEXT_MAX, "c%+lld", (long long)rule.value);
        else if (rule.kind == FU_RULE_REGISTER) {
            register_text(reg, sizeof reg, rule.reg);
            snprintf(out, FU_CHECK_TEXT_MAX, "in %s", reg);
        } else
            snprintf(out, FU_CHECK_TEXT_MAX, "not found");
        return;
    }
    snprintf(out, FU_CHECK_TEXT_MAX, "?");
}

/* ---- evaluating a declared rule over the abstract state ---------------------------------------- */

/* The value a register+offset or breg expression rule gives; false when the rule is of another shape. */
static bool breg_value(const fu_cfi_table *table, fu_rule rule, const fu_synth_state *s, fu_synth_value *address,
                       bool *deref)
{
    unsigned reg;
    int32_t offset;
    if (!fu_expr_match_breg(table->section.data + rule.value, rule.expr_len, &reg, &offset, deref))
        return false;
    if (reg >= FU_X86_GPR_COUNT) {
        *address = (fu_synth_value){.kind = FU_VALUE_UNKNOWN};
        return true;
    }
    fu_synth_value base = s->regs[reg];
    /* a caller's register plus an offset still points outside this frame (memory_value) */
    *address = base.kind == FU_VALUE_ENTRY_REGISTER || base.kind == FU_VALUE_RETURN_ADDRESS
                   ? base : fu_synth_value_add(base, offset);
    return true;
}

/* What a rule reads at `address`. An address computed from a caller's register or the return
 * address is outside this frame (gcc's DRAP epilogues keep rules like rbx = [rbp-48] after the
 * `pop rbp` that gave rbp back to the caller): not what was saved here. */
static fu_synth_value memory_value(const fu_synth_state *s, fu_synth_value address)
{
    switch (address.kind) {
    case FU_VALUE_ENTRY_STACK:
        return fu_synth_slot_value(s, FU_SLOT_ENTRY_STACK, address.offset, NULL);
    case FU_VALUE_ALIGNED_STACK:
        return fu_synth_slot_value(s, FU_SLOT_ALIGNED_STACK, address.offset, NULL);
    case FU_VALUE_ENTRY_REGISTER:
    case FU_VALUE_RETURN_ADDRESS:
        return (fu_synth_value){.kind = FU_VALUE_NEVER_WRITTEN};
    default:
        return (fu_synth_value){.kind = FU_VALUE_UNKNOWN};
    }
}

/* CFA + `cfa_offset` as an offset from the entry rsp (the CFA is entry rsp + 8); false where that
 * does not fit an int64 (hostile CFI: no slot of any stack). */
static bool entry_stack_offset(int64_t cfa_offset, int64_t *out)
{
    return !__builtin_add_overflow((int64_t)8, cfa_offset, out);
}

static comparison compare(fu_synth_value got, fu_synth_value wanted)
{
    if (fu_synth_value_equal(got, wanted))
        return COMPARE_AGREE;
    if (got.kind == FU_VALUE_UNKNOWN || got.kind == FU_VALUE_ALIGNED_STACK)
        return COMPARE_UNKNOWN;
    return COMPARE_MISMATCH;
}

static comparison compare_cfa(const fu_cfi_table *table, fu_rule rule, const fu_synth_state *s)
{
    fu_synth_value wanted = {.kind = FU_VALUE_ENTRY_STACK, .offset = 8};
    if (rule.kind == FU_CFA_REG_OFFSET) {
        if (rule.reg >= FU_X86_GPR_COUNT)
            return COMPARE_UNKNOWN;
        return compare(fu_synth_value_add(s->regs[rule.reg], rule.value), wanted);
    }
    if (rule.kind == FU_CFA_EXPRESSION) {
        fu_synth_value address;
        bool deref;
        if (!breg_value(table, rule, s, &address, &deref))
            return COMPARE_UNKNOWN;
        return compare(deref ? memory_value(s, address) : address, wanted);
    }
    return COMPARE_UNKNOWN;
}

/* The rule of `column` judged against the true CFA (entry rsp + 8), so that each column is judged
 * on its own even where the declared CFA is wrong; what that read of the state is added to `reads`
 * (fu_synth_visit's `changed` bits). */
JUDGE_INLINE comparison compare_column(const fu_cfi_table *table, fu_rule rule, unsigned column, const fu_synth_state *s,
                                       uint32_t *reads)
{
    fu_synth_value wanted = fu_synth_column_value(column);
    fu_synth_value address;
    bool deref;
    int64_t slot;
    switch (rule.kind) {
    case FU_RULE_UNSPECIFIED:
    case FU_RULE_SAME_VALUE:
        if (column >= FU_X86_GPR_COUNT)
            return COMPARE_SKIP;
        *reads |= 1u << column;
        return compare(s->regs[column], wanted);
    case FU_RULE_OFFSET: {
        if (!entry_stack_offset(rule.value, &slot))
            return COMPARE_UNKNOWN;
        bool recorded;
        fu_synth_value saved = fu_synth_slot_value(s, FU_SLOT_ENTRY_STACK, slot, &recorded);
        /* its slot; where none is recorded, what is known of the others too */
        *reads |= fu_synth_changed_slot(slot) | (recorded ? 0 : FU_SYNTH_CHANGED_SLOT_FLAGS);
        return compare(saved, wanted);
    }
    case FU_RULE_VAL_OFFSET:
        if (!entry_stack_offset(rule.value, &slot))
            return COMPARE_UNKNOWN;
        return compare((fu_synth_value){.offset = slot, .kind = FU_VALUE_ENTRY_STACK}, wanted);
    case FU_RULE_REGISTER:
        if (rule.reg >= FU_X86_GPR_COUNT)
            return COMPARE_UNKNOWN;
        *reads |= 1u << rule.reg;
        return compare(s->regs[rule.reg], wanted);
    case FU_RULE_EXPRESSION:
        *reads = FU_SYNTH_CHANGED_ALL;
        if (!breg_value(table, rule, s, &address, &deref) || deref)
            return COMPARE_UNKNOWN;
        return compare(memory_value(s, address), wanted);
    default: /* undefined: the CFI gives up on it (end of stack); val_expression */
        return COMPARE_SKIP;
    }
}

/* ---- one FDE ---------------------------------------------------------------------------------- */

typedef struct fde_check {
    const fu_check_image *image;
    const fu_cfi_table *table;
    const fu_entry *fde;
    fu_check_batch *batch;
    fu_check_fde_result *result;
    uint32_t first_row, row_end; /* the FDE's rows */
    uint32_t row;                /* the declared row in force at the address last sought */
    uint64_t next_row_address;   /* where the row after it starts; UINT64_MAX after the last */
    /* the rules of the row in force (batch->row_rules): the CFA's, then those of fu_synth_columns */
    uint32_t rules_row;
    const fu_rule *rules;
    bool out_of_memory;
    uint64_t last_uncovered_check; /* call targets repeat: the last one checked */
    uint64_t start;                /* where the code starts (after leading nops) */
    uint64_t first_unreached;
} fde_check;

static bool add_finding(fde_check *c, uint64_t address, unsigned what, const char *declared, const char *derived)
{
    fu_check_fde_result *r = c->result;
    r->finding_total++;
    if (r->finding_count >= FU_CHECK_MAX_FINDINGS_PER_FDE)
        return true;
    fu_check_finding f;
    memset(&f, 0, sizeof f);
    f.address = address;
    f.what = what;
    snprintf(f.declared, sizeof f.declared, "%s", declared);
    snprintf(f.derived, sizeof f.derived, "%s", derived);
    if (!fu_buffer_append(&c->batch->findings, &f, sizeof f)) {
        c->out_of_memory = true;
        return false;
    }
    r->finding_count++;
    return true;
}

static bool is_entry_row(const fu_cfi_table *table, const fu_state *row);

static bool contains_address(const uint64_t *sorted, size_t count, uint64_t address)
{
    bool found;
    fu_sorted_find(sorted, count, address, &found);
    return found;
}

/* Whether FDE `index` of `t` (-1: none) starts at `address` with a first row that is not an entry
 * row: a function's entry after all, when a call names it (its caller re-checks it from the ABI's
 * entry state). */
static bool starts_without_entry_row(const fu_cfi_table *t, int64_t index, uint64_t address)
{
    if (index < 0)
        return false;
    const fu_entry *e = &t->entries[index];
    return e->pc_begin == address && e->row_count && !is_entry_row(t, fu_cfi_table_state(t, t->row_state[e->first_row]));
}

/* Where the searches of the FDE index stand: the addresses are looked up in increasing order, each
 * search going on from the last one's answer (fu_cfi_table_fdes_starting_by_from). */
typedef struct index_search {
    const fu_check_image *image;
    const fu_cfi_table *table; /* the table checked */
    uint32_t from[2];          /* in image->tables[k] */
    uint32_t from_checked;     /* in table */
} index_search;

/* Whether the call target starts an FDE of the checked table without an entry row. */
static bool starts_non_entry(index_search *search, uint64_t address)
{
    const fu_cfi_table *t = search->table;
    search->from_checked = fu_cfi_table_fdes_starting_by_from(t, search->from_checked, address);
    return starts_without_entry_row(t, fu_cfi_table_fde_covering(t, search->from_checked, address), address);
}

/* Whether no FDE of either table covers the address. */
static bool uncovered(index_search *search, uint64_t address)
{
    for (unsigned k = 0; k < 2; k++) {
        const fu_cfi_table *t = search->image->tables[k];
        if (!t)
            continue;
        /* (a search skipped leaves from[k] where it was: below the answers of higher addresses) */
        search->from[k] = fu_cfi_table_fdes_starting_by_from(t, search->from[k], address);
        if (fu_cfi_table_fde_covering(t, search->from[k], address) >= 0)
            return false;
    }
    return true;
}

/* `list` (uint64_t) sorted, without repeats, and holding only the addresses `keep` is true of (asked
 * in increasing order). */
static bool keep_sorted(fu_buffer *list, bool (*keep)(index_search *, uint64_t), const fu_check_image *image,
                        const fu_cfi_table *table)
{
    bool ok;
    index_search search = {.image = image, .table = table};
    uint64_t *addresses = (uint64_t *)list->data;
    size_t count = fu_sort_unique(addresses, list->len / sizeof *addresses, &ok), kept = 0;
    for (size_t i = 0; i < count; i++)
        if (keep(&search, addresses[i]))
            addresses[kept++] = addresses[i];
    list->len = kept * sizeof *addresses;
    return ok;
}

/* The code addresses the batch's code named (note_code_address), each looked up once and in address
 * order, which keeps the searches of the FDE index and the entries and first rows they find in
 * cache (looked up as the code named them, the misses after each search were 5.6% of check's
 * time on libLLVM-14): of the call targets, those that start an FDE of the checked table without
 * an entry row stay in called_non_entry; of the addresses in code, those no FDE of either table
 * covers stay in uncovered_calls. */
static bool resolve_named_addresses(const fu_check_image *image, const fu_cfi_table *table, fu_check_batch *batch)
{
    return keep_sorted(&batch->called_non_entry, starts_non_entry, image, table) &&
           keep_sorted(&batch->uncovered_calls, uncovered, image, table);
}

/* Whether `address` is in `recent` (FU_CHECK_NAMED_RECENTLY, direct-mapped), and remember it there:
 * the same callees recur across a batch's FDEs, and a repeat need not be collected again (0, the
 * empty slot, always is). */
static bool named_again(uint64_t recent[FU_CHECK_NAMED_RECENTLY], uint64_t address)
{
    /* the low bits above the usual 16-byte function alignment */
    uint64_t *slot = &recent[(address >> 4) % FU_CHECK_NAMED_RECENTLY];
    if (*slot == address && address)
        return true;
    *slot = address;
    return false;
}

/* A code address the FDE's code names: a direct call's or jump's target, or an address a
 * RIP-relative lea takes (a function pointer: assembly without CFI, as x264's and FFmpeg's, is often
 * reached only through tables of them, which C code fills with lea); `kind` says which (FU_X86_CALL,
 * _JMP, _JCC or _LEA). A jump's target in another FDE is an entry of that FDE; a call's, a jump's
 * or a lea's outside every FDE is code without CFI. */
static void note_code_address(fde_check *c, uint64_t target, fu_x86_kind kind)
{
    if (target == c->last_uncovered_check)
        return;
    if (target >= c->fde->pc_begin && target - c->fde->pc_begin < c->fde->pc_range)
        return;
    c->last_uncovered_check = target;
    if (kind == FU_X86_CALL) { /* not jumps: the hot part's jump to its .cold part */
        if (!named_again(c->batch->calls_named, target) &&
            !fu_buffer_append(&c->batch->called_non_entry, &target, sizeof target))
            c->out_of_memory = true;
    } else if (kind != FU_X86_LEA && !fu_buffer_append(&c->batch->foreign_entries, &target, sizeof target)) {
        c->out_of_memory = true; /* a jump into another FDE enters it there */
    }
    if (kind == FU_X86_JCC) /* code without CFI is looked for at calls, jumps and lea */
        return;
    if (fu_image_segment_holding(c->image->code, c->image->code_count, target, 1) &&
        !named_again(c->batch->code_named, target) &&
        !fu_buffer_append(&c->batch->uncovered_calls, &target, sizeof target))
        c->out_of_memory = true;
}

/* Padding no path needs to reach: nops (alignment) and traps (int3 runs, the ud2 after a call that
 * does not return). */
static bool is_padding(const fu_x86_insn *insn)
{
    return insn->is_nop || insn->kind == FU_X86_TRAP;
}

/* Move the row cursor to the declared row in force at `address` (either way: walks come in the
 * fixpoint's order of blocks). */
static void search_row(fde_check *c, uint64_t address);

JUDGE_INLINE void seek_row(fde_check *c, uint64_t address)
{
    const fu_cfi_table *t = c->table;
    /* most often the next row: a walk runs on into it */
    if (c->row + 1 < c->row_end && address >= c->next_row_address &&
        (c->row + 2 >= c->row_end || address < t->row_address[c->row + 2])) {
        c->row++;
        c->next_row_address = c->row + 1 < c->row_end ? t->row_address[c->row + 1] : UINT64_MAX;
    } else {
        search_row(c, address);
    }
}

/* seek_row by a search of the FDE's rows. */
static __attribute__((noinline)) void search_row(fde_check *c, uint64_t address)
{
    const fu_cfi_table *t = c->table;
    uint32_t after = fu_cfi_table_rows_starting_by(t, c->fde, address);
    c->row = after > c->first_row ? after - 1 : c->first_row;
    c->next_row_address = c->row + 1 < c->row_end ? t->row_address[c->row + 1] : UINT64_MAX;
}

/* What judging the declared CFA (compare_cfa) reads of the state, as fu_synth_visit's `changed` bits. */
static uint32_t cfa_reads(fu_rule rule)
{
    switch (rule.kind) {
    case FU_CFA_REG_OFFSET:
        return rule.reg < FU_X86_GPR_COUNT ? 1u << rule.reg : 0;
    case FU_CFA_EXPRESSION:
        return FU_SYNTH_CHANGED_ALL;
    default:
        return 0;
    }
}

/* The rules of a row of the FDE (batch->row_rules), the CFA's first. */
static fu_rule *row_rules(const fde_check *c, uint32_t row)
{
    return (fu_rule *)c->batch->row_rules.data + (size_t)(row - c->first_row) * (1 + FU_SYNTH_COLUMN_COUNT);
}

/* 1 + the index in fu_synth_columns of each column up to the return address's; 0: not one of them. */
static const uint8_t column_index[FU_RETURN_ADDRESS_COLUMN + 1] = {
    [FU_REG_RBX] = 1, [FU_REG_RBP] = 2, [FU_REG_R12] = 3, [FU_REG_R13] = 4,
    [FU_REG_R14] = 5, [FU_REG_R15] = 6, [FU_RETURN_ADDRESS_COLUMN] = 7};
_Static_assert(FU_SYNTH_COLUMN_COUNT == 7, "column_index names every column of fu_synth_columns");

/* The rules of the declared row in force at `address` into c->rules. */
JUDGE_INLINE void fetch_rules(fde_check *c, uint64_t address)
{
    const fu_cfi_table *t = c->table;
    if (address < t->row_address[c->row] || address >= c->next_row_address)
        seek_row(c, address);
    if (c->rules_row == c->row)
        return;
    c->rules_row = c->row;
    fu_rule *rules = row_rules(c, c->row);
    uint8_t *fetched = (uint8_t *)c->batch->row_fetched.data + (c->row - c->first_row);
    c->rules = rules;
    if (*fetched)
        return;
    const fu_state *declared = fu_cfi_table_state(t, t->row_state[c->row]);
    rules[0] = declared->cfa;
    /* one pass over the row's columns (sorted, each once) instead of a search per column */
    for (unsigned j = 0; j < FU_SYNTH_COLUMN_COUNT; j++)
        rules[1 + j] = (fu_rule){0};
    for (unsigned k = 0; k < declared->count; k++) {
        unsigned column = t->column_pool[declared->first + k];
        if (column < sizeof column_index && column_index[column])
            rules[column_index[column]] = t->rule_pool[declared->first + k];
    }
    *fetched = 1;
}

static bool same_rule(fu_rule a, fu_rule b)
{
    return a.kind == b.kind && a.reg == b.reg && a.expr_len == b.expr_len && a.value == b.value;
}

/* How the rules of a declared row compared with a state (fu_synth_judgment.memo): per rule (the
 * CFA's first, then column k's of fu_synth_columns) its outcome and what it read of the state
 * (fu_synth_visit's `changed` bits); row UINT32_MAX: no comparison. */
typedef struct row_comparison {
    uint32_t row;
    uint32_t reads[1 + FU_SYNTH_COLUMN_COUNT];
    uint8_t outcomes[1 + FU_SYNTH_COLUMN_COUNT]; /* comparison */
} row_comparison;
_Static_assert(sizeof(row_comparison) <= FU_SYNTH_JUDGMENT_MEMO, "a row comparison is a judgment's memo");
_Static_assert(sizeof(((row_comparison *)0)->outcomes) == 8, "judge reads the outcomes as one word");

/* The rules of the declared row in force at `address` compared with `state` into `m`, which holds an
 * earlier comparison and `changed` what changed in the state since (FU_SYNTH_CHANGED_ALL: no earlier
 * one): a rule that is the same as then and read nothing of that keeps its outcome. False when the
 * row is not compared: the outermost frame (the return address undefined: _start, a thread's
 * entry) has no caller whose registers the CFA would recover (glibc's _start pops under CFA =
 * rsp+8). */
JUDGE_INLINE bool compare_row(fde_check *c, uint64_t address, const fu_synth_state *state, uint32_t changed,
                              row_comparison *m)
{
    const fu_cfi_table *t = c->table;
    fetch_rules(c, address);
    bool earlier = changed != FU_SYNTH_CHANGED_ALL && m->row != UINT32_MAX;
    const fu_rule *before = earlier ? row_rules(c, m->row) : NULL;
    bool same_rules = earlier && t->row_state[m->row] == t->row_state[c->row]; /* the same row state */
    m->row = UINT32_MAX;
    if (c->rules[1 + RETURN_ADDRESS_INDEX].kind == FU_RULE_UNDEFINED)
        return false;
#pragma GCC unroll 8
    for (unsigned k = 0; k < 1 + FU_SYNTH_COLUMN_COUNT; k++) {
        if (earlier && !(changed & m->reads[k]) && (same_rules || same_rule(before[k], c->rules[k])))
            continue;
        if (k == 0) {
            m->reads[0] = cfa_reads(c->rules[0]);
            m->outcomes[0] = (uint8_t)compare_cfa(t, c->rules[0], state);
        } else {
            m->reads[k] = 0;
            m->outcomes[k] = (uint8_t)compare_column(t, c->rules[k], fu_synth_columns[k - 1], state, &m->reads[k]);
        }
    }
    m->row = c->row;
    return true;
}

/* The judgment of one instruction, the byte synth keeps for it (fu_synth_judge): the outcome, and
 * which rule's value was unknown first (the reason an undecided FDE gives). */
#define JUDGED_AGREE 0u    /* every compared rule agrees (or none is compared) */
#define JUDGED_UNKNOWN 1u  /* a rule's value is unknown, none is wrong */
#define JUDGED_MISMATCH 2u /* a rule is wrong */
#define JUDGED_SKIPPED 3u  /* not compared (compare_row) */
#define JUDGED_OUTCOME 3u
#define JUDGED_FIRST_UNKNOWN_SHIFT 2 /* above it: 1 + the index in compare_row's outcomes, 0 none */

/* The high bit of each byte of `word` equal to `value`: exact up to the first such byte (the bytes
 * above it may be marked wrongly), so the word is non-zero exactly when one is, and its lowest set
 * bit is the first one's. */
static uint64_t bytes_equal(uint64_t word, uint8_t value)
{
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t zero_where_equal = word ^ (ones * value);
    return (zero_where_equal - ones) & ~zero_where_equal & (ones << 7);
}

static void judge(void *context, uint64_t address, const fu_synth_state *state, uint32_t changed,
                  fu_synth_judgment *judgment)
{
    fde_check *c = context;
    row_comparison *m = (row_comparison *)judgment->memo;
    bool compared = compare_row(c, address, state, changed, m);
    /* the same judgment inside the row while nothing it read changes */
    judgment->from = c->table->row_address[c->row];
    judgment->until = c->next_row_address;
    judgment->reads = 0;
    if (!compared) {
        judgment->byte = JUDGED_SKIPPED;
        return;
    }
    uint32_t reads = 0;
    for (unsigned k = 0; k < 1 + FU_SYNTH_COLUMN_COUNT; k++)
        reads |= m->reads[k];
    judgment->reads = reads;
    /* the eight outcomes as the bytes of one word */
    uint64_t outcomes;
    memcpy(&outcomes, m->outcomes, sizeof outcomes);
    uint64_t unknown = bytes_equal(outcomes, COMPARE_UNKNOWN);
    unsigned outcome = bytes_equal(outcomes, COMPARE_MISMATCH) ? JUDGED_MISMATCH : unknown ? JUDGED_UNKNOWN : JUDGED_AGREE;
    unsigned first_unknown = unknown ? 1 + (unsigned)__builtin_ctzll(unknown) / 8 : 0;
    judgment->byte = (uint8_t)(outcome | first_unknown << JUDGED_FIRST_UNKNOWN_SHIFT);
}

/* "at ADDRESS the code does not tell whether RULE": the reason of an FDE whose rule `which`
 * (compare_row's index) at `address` has an unknown value. */
static void unknown_reason(fde_check *c, uint64_t address, unsigned which)
{
    const fu_cfi_table *t = c->table;
    fetch_rules(c, address);
    char a[FU_CHECK_TEXT_MAX], reg[12];
    if (which == 0) {
        declared_text(t, c->rules[0], a);
        snprintf(reg, sizeof reg, "CFA");
    } else {
        unsigned column = fu_synth_columns[which - 1];
        declared_text(t, c->rules[which], a);
        if (column == FU_RETURN_ADDRESS_COLUMN)
            snprintf(reg, sizeof reg, "ra");
        else
            register_text(reg, sizeof reg, column);
    }
    snprintf(c->result->reason, sizeof c->result->reason, "at 0x%llx the code does not tell whether %s = %s",
             (unsigned long long)address, reg, a);
}

/* Whether the eight instructions from `walked`, `judgments` on were all reached and all agree. */
static bool eight_agree(const uint8_t *walked, const uint8_t *judgments)
{
    uint64_t w, j;
    memcpy(&w, walked, sizeof w);
    memcpy(&j, judgments, sizeof j);
    return w == 0x0101010101010101ull && j == JUDGED_AGREE * 0x0101010101010101ull;
}

/* The judgments of a decided run, in address order: the instructions by outcome, those no path
 * reaches (padding aside), the first unknown rule's reason, and the code addresses reached
 * instructions name. */
static void tally(fde_check *c, uint32_t insn_count)
{
    const fu_synth_scratch *sc = &c->batch->scratch;
    const fu_x86_insn *insns = sc->insns;
    const uint8_t *walked = sc->walked, *judgments = sc->judgments;
    const uint64_t begin = c->fde->pc_begin, range = c->fde->pc_range;
    fu_check_fde_result *r = c->result;
    uint32_t by_outcome[JUDGED_OUTCOME + 1] = {0};
    bool reason_found = false;
    for (uint32_t i = 0; i < insn_count; i++) {
        /* eight reached instructions that all agree (most of them) counted at once */
        while (i + 8 <= insn_count && eight_agree(walked + i, judgments + i)) {
            by_outcome[JUDGED_AGREE] += 8;
            i += 8;
        }
        if (i >= insn_count)
            break;
        if (!walked[i]) {
            if (!is_padding(&insns[i]) && r->unreached++ == 0)
                c->first_unreached = c->start + sc->insn_offsets[i];
            continue;
        }
        uint8_t judged = judgments[i];
        by_outcome[judged & JUDGED_OUTCOME]++;
        if (judged >> JUDGED_FIRST_UNKNOWN_SHIFT && !reason_found) {
            unknown_reason(c, c->start + sc->insn_offsets[i], (judged >> JUDGED_FIRST_UNKNOWN_SHIFT) - 1u);
            reason_found = true;
        }
    }
    /* the code addresses reached instructions name: only these records are read again (a record
     * read for every instruction after the walks missed the cache at most of them) */
    for (uint32_t k = 0; k < sc->naming_count; k++) {
        uint32_t i = sc->naming[k];
        if (i >= insn_count || !walked[i])
            continue;
        const fu_x86_insn *insn = &insns[i];
        if (insn->kind != FU_X86_LEA) {
            /* targets inside the FDE name nothing new (the most, its own branches) */
            if (insn->has_target && insn->target - begin >= range)
                note_code_address(c, insn->target, insn->kind);
        } else if (insn->source.kind == FU_X86_OPERAND_MEMORY && insn->source.reg == FU_X86_REG_RIP &&
                   insn->source.index == FU_X86_REG_NONE && !insn->source.segment) {
            note_code_address(c, c->start + sc->insn_offsets[i] + insn->length + (uint64_t)insn->source.value,
                              FU_X86_LEA);
        }
    }
    r->agree += by_outcome[JUDGED_AGREE];
    r->unknown += by_outcome[JUDGED_UNKNOWN];
    r->mismatch += by_outcome[JUDGED_MISMATCH];
    r->skipped += by_outcome[JUDGED_SKIPPED];
}

/* A mismatching FDE's second run: every reached instruction in address order, each wrong rule a
 * finding with the derived rule beside the declared one. */
static bool visit_findings(void *context, uint64_t address, const fu_x86_insn *insn, const fu_synth_state *state,
                           uint32_t changed)
{
    fde_check *c = context;
    row_comparison m;
    if (!compare_row(c, address, state, FU_SYNTH_CHANGED_ALL, &m))
        return true;
    for (unsigned k = 0; k < 1 + FU_SYNTH_COLUMN_COUNT; k++) {
        if (m.outcomes[k] != COMPARE_MISMATCH)
            continue;
        char a[FU_CHECK_TEXT_MAX], b[FU_CHECK_TEXT_MAX];
        if (k == 0) {
            fu_rule cfa = c->rules[0];
            declared_text(c->table, cfa, a);
            derived_text(state, FU_CHECK_WHAT_CFA, cfa.kind == FU_CFA_REG_OFFSET ? cfa.reg : FU_X86_REG_NONE, b);
            if (!add_finding(c, address, FU_CHECK_WHAT_CFA, a, b))
                return false;
        } else {
            declared_text(c->table, c->rules[k], a);
            derived_text(state, fu_synth_columns[k - 1], FU_X86_REG_NONE, b);
            if (!add_finding(c, address, fu_synth_columns[k - 1], a, b))
                return false;
        }
    }
    return true;
}


void fu_check_overlaps(const fu_cfi_table *table, uint32_t *partner)
{
    for (uint32_t e = 0; e < table->entry_count; e++)
        partner[e] = UINT32_MAX;
    uint64_t max_end = 0;
    uint32_t holder = UINT32_MAX;
    for (uint32_t k = 0; k < table->fde_count; k++) {
        uint32_t entry = table->fde_sorted[k];
        const fu_entry *e = &table->entries[entry];
        if (e->pc_range == 0)
            continue;
        uint64_t end = e->pc_begin + e->pc_range;
        if (holder != UINT32_MAX && e->pc_begin < max_end) {
            partner[entry] = holder;
            if (partner[holder] == UINT32_MAX)
                partner[holder] = entry;
        }
        if (holder == UINT32_MAX || end > max_end) {
            max_end = end;
            holder = entry;
        }
    }
}

/* Whether the declared row is a function's entry row: CFA = rsp+8, the return address at CFA-8 (or
 * undefined), the callee-saved registers unsaved. */
bool fu_check_starts_at_entry(const fu_check_image *image, const fu_cfi_table *table, uint64_t start,
                              const fu_state *first)
{
    return is_entry_row(table, first) || contains_address(image->function_entries, image->function_entry_count, start);
}

static bool is_entry_row(const fu_cfi_table *table, const fu_state *row)
{
    if (row->cfa.kind != FU_CFA_REG_OFFSET || row->cfa.reg != FU_REG_RSP || row->cfa.value != 8)
        return false;
    for (unsigned k = 0; k < FU_SYNTH_COLUMN_COUNT; k++) {
        fu_rule rule = fu_state_rule(table, row, fu_synth_columns[k]);
        /* the return address at CFA-8, or undefined: the outermost frame (_start, a thread's entry) */
        if (fu_synth_columns[k] == FU_RETURN_ADDRESS_COLUMN ? !((rule.kind == FU_RULE_OFFSET && rule.value == -8) ||
                                                             rule.kind == FU_RULE_UNDEFINED)
                                                         : rule.kind != FU_RULE_UNSPECIFIED && rule.kind != FU_RULE_SAME_VALUE)
            return false;
    }
    return true;
}

/* The state an FDE's first declared row describes, for an FDE that starts inside a function: the CFA
 * register holds CFA - offset, saved registers are in their slots (and their registers unknown).
 * False when the row has a shape this cannot express (a CFA expression). */
static bool declared_entry_state(const fu_cfi_table *table, const fu_state *row, fu_synth_state *out)
{
    fu_synth_entry_state(out, false);
    if (row->cfa.kind != FU_CFA_REG_OFFSET || row->cfa.reg >= FU_X86_GPR_COUNT)
        return false;
    unsigned cfa_register = row->cfa.reg;
    int64_t cfa_register_offset; /* the CFA register's value, from the entry rsp: CFA - offset */
    if (__builtin_sub_overflow((int64_t)8, row->cfa.value, &cfa_register_offset))
        return false;
    out->regs[FU_REG_RSP] = (fu_synth_value){.kind = FU_VALUE_UNKNOWN};
    out->regs[cfa_register] = (fu_synth_value){.offset = cfa_register_offset, .kind = FU_VALUE_ENTRY_STACK};
    for (unsigned k = 0; k < FU_SYNTH_COLUMN_COUNT; k++) {
        unsigned column = fu_synth_columns[k];
        fu_rule rule = fu_state_rule(table, row, column);
        fu_synth_value saved = fu_synth_column_value(column);
        int64_t slot;
        if (rule.kind == FU_RULE_OFFSET) {
            if (!entry_stack_offset(rule.value, &slot))
                return false;
            fu_synth_store(out, (fu_synth_value){.offset = slot, .kind = FU_VALUE_ENTRY_STACK}, saved);
            if (column < FU_X86_GPR_COUNT && column != cfa_register)
                out->regs[column] = (fu_synth_value){.kind = FU_VALUE_UNKNOWN};
        } else if (rule.kind == FU_RULE_REGISTER && rule.reg < FU_X86_GPR_COUNT && rule.reg != cfa_register) {
            out->regs[rule.reg] = saved;
            if (column < FU_X86_GPR_COUNT && column != cfa_register)
                out->regs[column] = (fu_synth_value){.kind = FU_VALUE_UNKNOWN};
        } else if (rule.kind != FU_RULE_UNSPECIFIED && rule.kind != FU_RULE_SAME_VALUE) {
            return false;
        }
    }
    return true;
}

static int compare_call_sites(const void *a, const void *b)
{
    uint64_t x = ((const fu_synth_call_site *)a)->start, y = ((const fu_synth_call_site *)b)->start;
    return x < y ? -1 : x > y;
}

/* The call-site records with a landing pad of the FDE's LSDA (`.gcc_except_table`, Itanium C++ ABI
 * §7.5 as gcc and clang lay it out: LPStart, the type table's offset, the call-site encoding and
 * table), sorted by start, into batch->call_sites; landing pads outside the FDE into
 * batch->foreign_entries. An LSDA that does not read gives none. False when out of memory. */
static bool read_call_sites(const fu_check_image *image, const fu_entry *fde, fu_check_batch *batch)
{
    batch->call_sites.len = 0;
    const fu_image_segment *seg =
        fde->has_lsda ? fu_image_segment_holding(image->segments, image->segment_count, fde->lsda, 1) : NULL;
    if (!seg)
        return true;
    fu_section section = {.data = seg->data, .size = seg->size, .address = seg->vaddr, .address_size = 8,
                          .segments = image->segments, .segment_count = image->segment_count};
    fu_cursor c = fu_cursor_make(seg->data, seg->data + (fde->lsda - seg->vaddr), seg->data + seg->size);
    uint64_t region = fde->pc_begin, lp_start = region;
    bool unresolved;
    uint8_t encoding = fu_read_u8(&c);
    if (encoding != FU_PE_omit && !fu_read_encoded(&c, encoding, &section, region, &lp_start, &unresolved))
        return true;
    if (fu_read_u8(&c) != FU_PE_omit) /* the type table: the personality's, not the unwinder's */
        fu_read_uleb(&c);
    uint8_t call_site_encoding = fu_read_u8(&c) & 0x0f; /* offsets: the value format alone */
    fu_cursor table = fu_cursor_sub(&c, fu_read_uleb(&c));
    if (c.failed)
        return true;
    uint64_t end = fde->pc_begin + fde->pc_range;
    for (unsigned k = 0; k < FU_CHECK_MAX_CALL_SITES && fu_cursor_left(&table); k++) {
        uint64_t start, length, pad;
        if (!fu_read_encoded(&table, call_site_encoding, &section, 0, &start, &unresolved) ||
            !fu_read_encoded(&table, call_site_encoding, &section, 0, &length, &unresolved) ||
            !fu_read_encoded(&table, call_site_encoding, &section, 0, &pad, &unresolved))
            break;
        fu_read_uleb(&table); /* the action */
        if (table.failed)
            break;
        if (!pad)
            continue;
        fu_synth_call_site site = {.start = region + start, .end = region + start + length, .landing_pad = lp_start + pad};
        if (site.landing_pad < fde->pc_begin || site.landing_pad >= end) {
            if (!fu_buffer_append(&batch->foreign_entries, &site.landing_pad, sizeof site.landing_pad))
                return false;
        } else if (!fu_buffer_append(&batch->call_sites, &site, sizeof site)) {
            return false;
        }
    }
    /* compilers emit the table in address order already: sorted only when it is not */
    const fu_synth_call_site *sites = (const fu_synth_call_site *)batch->call_sites.data;
    size_t count = batch->call_sites.len / sizeof(fu_synth_call_site);
    for (size_t k = 1; k < count; k++)
        if (compare_call_sites(&sites[k - 1], &sites[k]) > 0) {
            qsort(batch->call_sites.data, count, sizeof(fu_synth_call_site), compare_call_sites);
            break;
        }
    return true;
}

/* The DW_CFA_GNU_args_size changes of the FDE's instructions into batch->args_sizes (those of the
 * CIE's initial instructions aside: compilers emit none there); instructions that do not decode end
 * them. The loop is bounded by the FDE's length (each instruction takes a byte at least). False when
 * out of memory. */
static bool read_args_sizes(const fu_cfi_table *table, const fu_entry *fde, fu_check_batch *batch)
{
    batch->args_sizes.len = 0;
    const uint8_t *base = table->section.data;
    fu_cursor c = fu_cursor_make(base, base + fde->insns_offset, base + fde->end);
    uint64_t loc = fde->pc_begin;
    fu_error err = {0};
    fu_insn insn;
    while (fu_cursor_left(&c) > 0 && fu_insn_decode(&c, fde->cie, &table->section, &insn, &err)) {
        if (insn.op == FU_INSN_ADVANCE) {
            loc += (uint64_t)insn.value;
        } else if (insn.op == FU_INSN_SET_LOC) {
            loc = insn.uoperand;
        } else if (insn.op == FU_INSN_ARGS_SIZE) {
            fu_synth_args_size change = {.address = loc, .bytes = insn.uoperand};
            if (!fu_buffer_append(&batch->args_sizes, &change, sizeof change))
                return false;
        }
    }
    return true;
}

/* The image's foreign entries inside (start, end), each with the state the declared row at it
 * describes, into batch->entries; entries whose row cannot be a state are left out. False when out
 * of memory. */
static bool foreign_entries_in(const fu_check_image *image, const fu_cfi_table *table, const fu_entry *fde,
                               uint64_t start, uint64_t end, fu_check_batch *batch)
{
    batch->entries.len = batch->entry_states.len = 0;
    size_t lo = 0, hi = image->foreign_entry_count;
    while (lo < hi) { /* the first entry after start */
        size_t mid = lo + (hi - lo) / 2;
        if (image->foreign_entries[mid] <= start)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t row = fde->first_row, row_end = fde->first_row + fde->row_count;
    for (unsigned n = 0; lo < image->foreign_entry_count && image->foreign_entries[lo] < end &&
                         n < FU_CHECK_MAX_FOREIGN_ENTRIES_PER_FDE; lo++, n++) {
        uint64_t address = image->foreign_entries[lo];
        while (row + 1 < row_end && table->row_address[row + 1] <= address)
            row++;
        fu_synth_state state;
        if (!declared_entry_state(table, fu_cfi_table_state(table, table->row_state[row]), &state))
            continue;
        fu_synth_entry e = {.address = address, .state = NULL};
        if (!fu_buffer_append(&batch->entry_states, &state, sizeof state) ||
            !fu_buffer_append(&batch->entries, &e, sizeof e))
            return false;
    }
    fu_synth_entry *entries = (fu_synth_entry *)batch->entries.data;
    for (size_t k = 0; k < batch->entries.len / sizeof *entries; k++)
        entries[k].state = (const fu_synth_state *)batch->entry_states.data + k;
    return true;
}

static bool check_fde(const fu_check_image *image, const fu_cfi_table *table, uint32_t entry, uint32_t other,
                      fu_check_batch *batch, fu_check_fde_result *result)
{
    const fu_entry *fde = &table->entries[entry];
    memset(result, 0, sizeof *result);
    result->entry = entry;
    result->first_finding = (uint32_t)(batch->findings.len / sizeof(fu_check_finding));
    fde_check c = {.image = image, .table = table, .fde = fde, .batch = batch, .result = result,
                   .first_row = fde->first_row, .row = fde->first_row, .row_end = fde->first_row + fde->row_count,
                   .next_row_address = UINT64_MAX,
                   .last_uncovered_check = 0, .rules_row = UINT32_MAX};
    char range[FU_CHECK_TEXT_MAX]; /* for range findings */
    const fu_image_segment *seg = fu_image_segment_holding(image->code, image->code_count, fde->pc_begin, fde->pc_range);
    if (fde->pc_range == 0 || other != UINT32_MAX || !seg)
        snprintf(range, sizeof range, "%llx..%llx", (unsigned long long)fde->pc_begin,
                 (unsigned long long)(fde->pc_begin + fde->pc_range));
    if (fde->pc_range == 0) {
        result->verdict = FU_CHECK_MISMATCH;
        return add_finding(&c, fde->pc_begin, FU_CHECK_WHAT_RANGE, range, "empty range");
    }
    if (other != UINT32_MAX) {
        char with[FU_CHECK_TEXT_MAX];
        const fu_entry *o = &table->entries[other];
        snprintf(with, sizeof with, "overlaps %llx..%llx", (unsigned long long)o->pc_begin,
                 (unsigned long long)(o->pc_begin + o->pc_range));
        if (!add_finding(&c, fde->pc_begin, FU_CHECK_WHAT_RANGE, range, with))
            return false;
    }
    if (!seg) {
        result->verdict = FU_CHECK_MISMATCH;
        return add_finding(&c, fde->pc_begin, FU_CHECK_WHAT_RANGE, range, "outside executable code");
    }
    if (fde->row_count == 0 || fde->has_error) {
        result->verdict = FU_CHECK_UNDECIDED;
        snprintf(result->reason, sizeof result->reason, "the FDE's CFI does not evaluate");
        return true;
    }
    for (uint32_t r = fde->first_row; r < fde->first_row + fde->row_count; r++) {
        fu_rule cfa = fu_cfi_table_state(table, table->row_state[r])->cfa;
        unsigned reg;
        int32_t offset;
        bool deref;
        if (cfa.kind == FU_CFA_EXPRESSION &&
            !fu_expr_match_breg(table->section.data + cfa.value, cfa.expr_len, &reg, &offset, &deref)) {
            result->verdict = FU_CHECK_UNDECIDED;
            snprintf(result->reason, sizeof result->reason,
                     "the CFA is a DWARF expression beyond register+offset (a PLT's) at 0x%llx",
                     (unsigned long long)table->row_address[r]);
            return true;
        }
    }
    if (fde->cie && fde->cie->signal_frame) {
        result->verdict = FU_CHECK_UNDECIDED;
        snprintf(result->reason, sizeof result->reason, "a signal frame: its CFI describes the interrupted context");
        return true;
    }
    /* Leading nops are padding that no path enters (gcc starts a `.cold` landing pad's FDE with one,
     * under the CIE's initial row): the code starts after them. */
    const uint8_t *code = seg->data + (fde->pc_begin - seg->vaddr);
    uint64_t start = fde->pc_begin, end = fde->pc_begin + fde->pc_range;
    if (!batch->scratch.decoder_ready) {
        fu_x86_decoder_init(&batch->scratch.decoder);
        batch->scratch.decoder_ready = true;
    }
    for (unsigned k = 0; k < FU_CHECK_MAX_LEADING_NOPS && start < end; k++) {
        fu_x86_insn insn;
        fu_x86_decode(&batch->scratch.decoder, code + (start - fde->pc_begin), (size_t)(end - start), start, &insn);
        if (!insn.is_nop)
            break;
        start += insn.length;
    }
    if (start == end)
        start = fde->pc_begin;
    seek_row(&c, start);
    /* An FDE that does not start at a function's entry (a `.cold` part: no function symbol but its
     * `.cold` one, no call) is checked from the state its first row declares: that row is taken as
     * given, the rest is checked. At a known entry, a first row that is not an entry row is a
     * finding like any other. */
    fu_synth_state declared_entry;
    const fu_state *first = fu_cfi_table_state(table, table->row_state[c.row]);
    if (!fu_check_starts_at_entry(image, table, fde->pc_begin, first)) {
        if (!declared_entry_state(table, first, &declared_entry)) {
            result->verdict = FU_CHECK_UNDECIDED;
            snprintf(result->reason, sizeof result->reason,
                     "starts inside a function, and its first row (a CFA or register expression, an "
                     "undefined register) cannot be a starting state");
            return true;
        }
        result->from_declared_entry = true;
    }
    fu_synth_function function = {
        .start = start, .end = end, .code = code + (start - fde->pc_begin),
        .noreturn = image->noreturn, .noreturn_count = image->noreturn_count,
        .segments = image->segments, .segment_count = image->segment_count,
        .code_segments = image->code, .code_segment_count = image->code_count,
        .entry = result->from_declared_entry ? &declared_entry : NULL};
    if (!read_call_sites(image, fde, batch) || !foreign_entries_in(image, table, fde, start, end, batch) ||
        (batch->call_sites.len && !read_args_sizes(table, fde, batch)))
        return false;
    function.call_sites = (const fu_synth_call_site *)batch->call_sites.data;
    function.call_site_count = batch->call_sites.len / sizeof(fu_synth_call_site);
    if (function.call_site_count) {
        function.args_sizes = (const fu_synth_args_size *)batch->args_sizes.data;
        function.args_size_count = batch->args_sizes.len / sizeof(fu_synth_args_size);
    }
    function.entries = (const fu_synth_entry *)batch->entries.data;
    function.entry_count = batch->entries.len / sizeof(fu_synth_entry);
    function.judge = (fu_synth_judge_hook){judge, &c};
    batch->row_rules.len = batch->row_fetched.len = 0;
    if (!fu_buffer_reserve(&batch->row_rules, (size_t)fde->row_count * (1 + FU_SYNTH_COLUMN_COUNT) * sizeof(fu_rule)) ||
        !fu_buffer_reserve(&batch->row_fetched, fde->row_count))
        return false;
    memset(batch->row_fetched.data, 0, fde->row_count);
    fu_synth_counts counts;
    char reason[FU_SYNTH_REASON_MAX];
    c.start = start;
    uint64_t *work_done = image->work_done ? image->work_done : &batch->work_done;
    if (__atomic_load_n(work_done, __ATOMIC_RELAXED) >= FU_CHECK_MAX_FILE_INSTRUCTIONS) {
        result->verdict = FU_CHECK_UNDECIDED;
        snprintf(result->reason, sizeof result->reason,
                 "work limit: %u decoded instructions interpreted in this file (FU_CHECK_MAX_FILE_INSTRUCTIONS)",
                 FU_CHECK_MAX_FILE_INSTRUCTIONS);
        return true;
    }
    /* the rows judged during the fixpoint's walks; the findings of a mismatch from a second run */
    fu_synth_outcome outcome = fu_synth_run(&function, &batch->scratch, NULL, NULL, &counts, reason);
    __atomic_fetch_add(work_done, counts.instructions, __ATOMIC_RELAXED);
    if (outcome == FU_SYNTH_NO_MEMORY)
        return false;
    if (outcome == FU_SYNTH_UNDECIDED) {
        result->verdict = FU_CHECK_UNDECIDED;
        memcpy(result->reason, reason, sizeof result->reason);
        return true;
    }
    tally(&c, counts.instructions);
    if (c.out_of_memory)
        return false;
    if (result->mismatch) {
        function.judge.judge = NULL;
        if (fu_synth_run(&function, &batch->scratch, visit_findings, &c, &counts, reason) == FU_SYNTH_NO_MEMORY ||
            c.out_of_memory)
            return false;
    }
    if (result->mismatch) {
        result->verdict = FU_CHECK_MISMATCH;
        result->reason[0] = '\0';
    } else if (result->unknown) {
        result->verdict = FU_CHECK_UNDECIDED;
    } else if (result->unreached) {
        result->verdict = FU_CHECK_UNDECIDED;
        snprintf(result->reason, sizeof result->reason,
                 "%u instructions no path reaches were not checked (the first at 0x%llx)", result->unreached,
                 (unsigned long long)c.first_unreached);
    } else {
        result->verdict = FU_CHECK_AGREE;
    }
    return true;
}

/* Whether FDEs `a` and `b` describe the same range with the same rows (their results are equal). */
static bool same_fde(const fu_cfi_table *table, const fu_entry *a, const fu_entry *b)
{
    if (a->pc_begin != b->pc_begin || a->pc_range != b->pc_range || a->row_count != b->row_count ||
        a->has_error != b->has_error || a->cie != b->cie)
        return false;
    for (uint32_t r = 0; r < a->row_count; r++)
        if (table->row_address[a->first_row + r] != table->row_address[b->first_row + r] ||
            table->row_state[a->first_row + r] != table->row_state[b->first_row + r])
            return false;
    return true;
}

/* The position in this batch of an FDE checked before `entry` that is identical to it, or UINT32_MAX:
 * its result is shared, so that many copies of one FDE over a huge function cost one interpretation. */
static uint32_t identical_checked(const fu_cfi_table *table, const fu_check_batch *batch, uint32_t entry)
{
    const fu_entry *e = &table->entries[entry];
    /* from the first FDE with this start: copies are checked in table order, the first ones first */
    uint32_t k = e->pc_begin ? fu_cfi_table_fdes_starting_by(table, e->pc_begin - 1) : 0;
    for (unsigned compared = 0; k < table->fde_count && compared < FU_CHECK_MAX_SAME_START_COMPARED;
         k++, compared++) {
        uint32_t other = table->fde_sorted[k];
        if (table->entries[other].pc_begin != e->pc_begin)
            break;
        if (other != entry && batch->position_of[other] != UINT32_MAX && same_fde(table, e, &table->entries[other]))
            return batch->position_of[other];
    }
    return UINT32_MAX;
}

/* `result` as a copy of the result at `position` (its findings appended again: each FDE's are its own). */
static bool share_result(fu_check_batch *batch, uint32_t position, uint32_t entry, fu_check_fde_result *result)
{
    const fu_check_fde_result *shared = &batch->results[position];
    *result = *shared;
    result->entry = entry;
    result->first_finding = (uint32_t)(batch->findings.len / sizeof(fu_check_finding));
    for (uint32_t k = 0; k < shared->finding_count; k++) {
        fu_check_finding f = ((const fu_check_finding *)batch->findings.data)[shared->first_finding + k];
        if (!fu_buffer_append(&batch->findings, &f, sizeof f))
            return false;
    }
    return true;
}

fu_status fu_check_fdes(const fu_check_image *image, const fu_cfi_table *table, const uint32_t *overlap_partner,
                        const uint32_t *entries, size_t count, fu_check_batch *batch, fu_error *err)
{
    memset(batch->calls_named, 0, sizeof batch->calls_named);
    memset(batch->code_named, 0, sizeof batch->code_named);
    free(batch->results);
    batch->results = calloc(count ? count : 1, sizeof *batch->results);
    batch->count = 0;
    uint32_t *position_of = realloc(batch->position_of, (table->entry_count ? table->entry_count : 1) * sizeof *position_of);
    if (position_of)
        batch->position_of = position_of;
    if (!batch->results || !position_of)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    for (uint32_t e = 0; e < table->entry_count; e++)
        position_of[e] = UINT32_MAX;
    for (size_t i = 0; i < count; i++) {
        if (entries[i] >= table->entry_count || table->entries[entries[i]].kind != FU_ENTRY_FDE)
            return fu_fail(err, FU_ERR_INVALID, "entry %u is not an FDE of the table", entries[i]);
        uint32_t other = overlap_partner[entries[i]];
        if (other != UINT32_MAX && (other >= table->entry_count || table->entries[other].kind != FU_ENTRY_FDE))
            return fu_fail(err, FU_ERR_INVALID, "the overlap partner %u of entry %u is not an FDE of the table", other,
                           entries[i]);
        fu_check_fde_result *result = &batch->results[i];
        /* an identical copy overlaps it (its range is not empty: an empty one is judged at once) */
        uint32_t shared = other != UINT32_MAX ? identical_checked(table, batch, entries[i]) : UINT32_MAX;
        if (shared != UINT32_MAX ? !share_result(batch, shared, entries[i], result)
                                 : !check_fde(image, table, entries[i], other, batch, result))
            return fu_fail(err, FU_ERR_NOMEM, "out of memory");
        position_of[entries[i]] = (uint32_t)i;
        /* a range finding (an overlap) makes the FDE a mismatch whatever its code says */
        if (other != UINT32_MAX) {
            result->verdict = FU_CHECK_MISMATCH;
            result->reason[0] = '\0';
        }
        batch->count = i + 1;
    }
    if (!resolve_named_addresses(image, table, batch))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    return FU_OK;
}
