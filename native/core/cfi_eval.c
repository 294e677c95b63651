/* cfi_eval: execute call frame instructions (DWARF 5 §6.4.2) into rows.
 *
 * For each CIE, its initial instructions run from an empty state; the final state is the CIE's
 * initial rule set, which every FDE of that CIE starts from and which DW_CFA_restore returns to.
 * Every advance (DW_CFA_advance_loc*, DW_CFA_set_loc) closes a row at the current location; the
 * state after the last instruction is the last row. Row states are interned: equal states share
 * one id, so most rows cost 12 bytes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cfi.h"

/* DW_CFA_* opcodes (DWARF 5 table 7.29; GNU extensions from GCC's dwarf2.def). */
enum {
    DW_CFA_advance_loc = 0x40, DW_CFA_offset = 0x80, DW_CFA_restore = 0xc0,
    DW_CFA_nop = 0x00, DW_CFA_set_loc = 0x01, DW_CFA_advance_loc1 = 0x02,
    DW_CFA_advance_loc2 = 0x03, DW_CFA_advance_loc4 = 0x04, DW_CFA_offset_extended = 0x05,
    DW_CFA_restore_extended = 0x06, DW_CFA_undefined = 0x07, DW_CFA_same_value = 0x08,
    DW_CFA_register = 0x09, DW_CFA_remember_state = 0x0a, DW_CFA_restore_state = 0x0b,
    DW_CFA_def_cfa = 0x0c, DW_CFA_def_cfa_register = 0x0d, DW_CFA_def_cfa_offset = 0x0e,
    DW_CFA_def_cfa_expression = 0x0f, DW_CFA_expression = 0x10,
    DW_CFA_offset_extended_sf = 0x11, DW_CFA_def_cfa_sf = 0x12, DW_CFA_def_cfa_offset_sf = 0x13,
    DW_CFA_val_offset = 0x14, DW_CFA_val_offset_sf = 0x15, DW_CFA_val_expression = 0x16,
    DW_CFA_MIPS_advance_loc8 = 0x1d, DW_CFA_GNU_window_save = 0x2d, DW_CFA_GNU_args_size = 0x2e,
    DW_CFA_GNU_negative_offset_extended = 0x2f
};

const char *fu_rule_kind_name(int kind)
{
    static const char *const names[FU_RULE_KIND_COUNT] = {
        [FU_RULE_UNSPECIFIED] = "UNSPECIFIED", [FU_RULE_UNDEFINED] = "UNDEFINED",
        [FU_RULE_SAME_VALUE] = "SAME_VALUE",   [FU_RULE_OFFSET] = "OFFSET",
        [FU_RULE_VAL_OFFSET] = "VAL_OFFSET",   [FU_RULE_REGISTER] = "REGISTER",
        [FU_RULE_EXPRESSION] = "EXPRESSION",   [FU_RULE_VAL_EXPRESSION] = "VAL_EXPRESSION",
        [FU_CFA_REG_OFFSET] = "CFA_REG_OFFSET", [FU_CFA_EXPRESSION] = "CFA_EXPRESSION",
    };
    return kind >= 0 && kind < FU_RULE_KIND_COUNT ? names[kind] : "?";
}

const char *fu_cfa_name(uint8_t opcode)
{
    switch (opcode) {
    case DW_CFA_advance_loc: return "DW_CFA_advance_loc";
    case DW_CFA_offset: return "DW_CFA_offset";
    case DW_CFA_restore: return "DW_CFA_restore";
    case DW_CFA_nop: return "DW_CFA_nop";
    case DW_CFA_set_loc: return "DW_CFA_set_loc";
    case DW_CFA_advance_loc1: return "DW_CFA_advance_loc1";
    case DW_CFA_advance_loc2: return "DW_CFA_advance_loc2";
    case DW_CFA_advance_loc4: return "DW_CFA_advance_loc4";
    case DW_CFA_offset_extended: return "DW_CFA_offset_extended";
    case DW_CFA_restore_extended: return "DW_CFA_restore_extended";
    case DW_CFA_undefined: return "DW_CFA_undefined";
    case DW_CFA_same_value: return "DW_CFA_same_value";
    case DW_CFA_register: return "DW_CFA_register";
    case DW_CFA_remember_state: return "DW_CFA_remember_state";
    case DW_CFA_restore_state: return "DW_CFA_restore_state";
    case DW_CFA_def_cfa: return "DW_CFA_def_cfa";
    case DW_CFA_def_cfa_register: return "DW_CFA_def_cfa_register";
    case DW_CFA_def_cfa_offset: return "DW_CFA_def_cfa_offset";
    case DW_CFA_def_cfa_expression: return "DW_CFA_def_cfa_expression";
    case DW_CFA_expression: return "DW_CFA_expression";
    case DW_CFA_offset_extended_sf: return "DW_CFA_offset_extended_sf";
    case DW_CFA_def_cfa_sf: return "DW_CFA_def_cfa_sf";
    case DW_CFA_def_cfa_offset_sf: return "DW_CFA_def_cfa_offset_sf";
    case DW_CFA_val_offset: return "DW_CFA_val_offset";
    case DW_CFA_val_offset_sf: return "DW_CFA_val_offset_sf";
    case DW_CFA_val_expression: return "DW_CFA_val_expression";
    case DW_CFA_MIPS_advance_loc8: return "DW_CFA_MIPS_advance_loc8";
    case DW_CFA_GNU_window_save: return "DW_CFA_GNU_window_save";
    case DW_CFA_GNU_args_size: return "DW_CFA_GNU_args_size";
    case DW_CFA_GNU_negative_offset_extended: return "DW_CFA_GNU_negative_offset_extended";
    default: return NULL;
    }
}

static bool read_expression(fu_cursor *c, fu_insn *insn, fu_error *err)
{
    insn->expr_len = fu_read_uleb(c);
    insn->expr_offset = fu_cursor_offset(c);
    if (c->failed || insn->expr_len > fu_cursor_left(c)) {
        fu_fail(err, FU_ERR_CFI, "%s: expression length 0x%llx overruns the entry",
                fu_cfa_name(insn->opcode), (unsigned long long)insn->expr_len);
        return false;
    }
    fu_cursor_skip(c, insn->expr_len);
    return true;
}

/* Factored offsets are multiplied as unsigned 64-bit values: hostile factors wrap instead of
 * overflowing a signed integer. */
static int64_t factor(uint64_t operand, int64_t data_align)
{
    return (int64_t)(operand * (uint64_t)data_align);
}

bool fu_insn_decode(fu_cursor *c, const fu_cie_info *cie, const fu_section *section, fu_insn *insn,
                    fu_error *err)
{
    memset(insn, 0, sizeof *insn);
    uint8_t byte = fu_read_u8(c);
    uint8_t low = byte & 0x3f;
    insn->opcode = (byte & 0xc0) ? (byte & 0xc0) : byte;
    switch (insn->opcode) {
    case DW_CFA_advance_loc:
        insn->op = FU_INSN_ADVANCE;
        insn->uoperand = low;
        insn->value = (int64_t)(low * cie->code_align);
        break;
    case DW_CFA_offset:
        insn->op = FU_INSN_OFFSET;
        insn->reg = low;
        insn->uoperand = fu_read_uleb(c);
        insn->value = factor(insn->uoperand, cie->data_align);
        break;
    case DW_CFA_restore:
        insn->op = FU_INSN_RESTORE;
        insn->reg = low;
        break;
    case DW_CFA_nop: insn->op = FU_INSN_NOP; break;
    case DW_CFA_set_loc: {
        insn->op = FU_INSN_SET_LOC;
        fu_section view = *section;
        view.address_size = cie->address_size;
        bool unresolved;
        uint64_t v = 0;
        if (!fu_read_encoded(c, cie->fde_encoding, &view, 0, &v, &unresolved))
            c->failed = true;
        insn->uoperand = v;
        break;
    }
    case DW_CFA_advance_loc1:
    case DW_CFA_advance_loc2:
    case DW_CFA_advance_loc4:
    case DW_CFA_MIPS_advance_loc8: {
        unsigned size = insn->opcode == DW_CFA_advance_loc1   ? 1
                        : insn->opcode == DW_CFA_advance_loc2 ? 2
                        : insn->opcode == DW_CFA_advance_loc4 ? 4 : 8;
        insn->op = FU_INSN_ADVANCE;
        insn->uoperand = fu_read_uint(c, size);
        insn->value = (int64_t)(insn->uoperand * cie->code_align);
        break;
    }
    case DW_CFA_offset_extended:
    case DW_CFA_val_offset:
        insn->op = insn->opcode == DW_CFA_val_offset ? FU_INSN_VAL_OFFSET : FU_INSN_OFFSET;
        insn->reg = fu_read_uleb(c);
        insn->uoperand = fu_read_uleb(c);
        insn->value = factor(insn->uoperand, cie->data_align);
        break;
    case DW_CFA_offset_extended_sf:
    case DW_CFA_val_offset_sf:
        insn->op = insn->opcode == DW_CFA_val_offset_sf ? FU_INSN_VAL_OFFSET : FU_INSN_OFFSET;
        insn->reg = fu_read_uleb(c);
        insn->soperand = fu_read_sleb(c);
        insn->value = factor((uint64_t)insn->soperand, cie->data_align);
        break;
    case DW_CFA_GNU_negative_offset_extended:
        insn->op = FU_INSN_OFFSET;
        insn->reg = fu_read_uleb(c);
        insn->uoperand = fu_read_uleb(c);
        /* negated as unsigned: a factored INT64_MIN must wrap, not overflow */
        insn->value = (int64_t)(0 - (uint64_t)factor(insn->uoperand, cie->data_align));
        break;
    case DW_CFA_restore_extended: insn->op = FU_INSN_RESTORE; insn->reg = fu_read_uleb(c); break;
    case DW_CFA_undefined: insn->op = FU_INSN_UNDEFINED; insn->reg = fu_read_uleb(c); break;
    case DW_CFA_same_value: insn->op = FU_INSN_SAME_VALUE; insn->reg = fu_read_uleb(c); break;
    case DW_CFA_register:
        insn->op = FU_INSN_REGISTER;
        insn->reg = fu_read_uleb(c);
        insn->reg2 = fu_read_uleb(c);
        break;
    case DW_CFA_remember_state: insn->op = FU_INSN_REMEMBER_STATE; break;
    case DW_CFA_restore_state: insn->op = FU_INSN_RESTORE_STATE; break;
    case DW_CFA_def_cfa:
        insn->op = FU_INSN_DEF_CFA;
        insn->reg = fu_read_uleb(c);
        insn->uoperand = fu_read_uleb(c);
        insn->value = (int64_t)insn->uoperand;
        break;
    case DW_CFA_def_cfa_sf:
        insn->op = FU_INSN_DEF_CFA;
        insn->reg = fu_read_uleb(c);
        insn->soperand = fu_read_sleb(c);
        insn->value = factor((uint64_t)insn->soperand, cie->data_align);
        break;
    case DW_CFA_def_cfa_register: insn->op = FU_INSN_DEF_CFA_REGISTER; insn->reg = fu_read_uleb(c); break;
    case DW_CFA_def_cfa_offset:
        insn->op = FU_INSN_DEF_CFA_OFFSET;
        insn->uoperand = fu_read_uleb(c);
        insn->value = (int64_t)insn->uoperand;
        break;
    case DW_CFA_def_cfa_offset_sf:
        insn->op = FU_INSN_DEF_CFA_OFFSET;
        insn->soperand = fu_read_sleb(c);
        insn->value = factor((uint64_t)insn->soperand, cie->data_align);
        break;
    case DW_CFA_def_cfa_expression:
        insn->op = FU_INSN_DEF_CFA_EXPRESSION;
        if (!read_expression(c, insn, err))
            return false;
        break;
    case DW_CFA_expression:
    case DW_CFA_val_expression:
        insn->op = insn->opcode == DW_CFA_expression ? FU_INSN_EXPRESSION : FU_INSN_VAL_EXPRESSION;
        insn->reg = fu_read_uleb(c);
        if (!c->failed && !read_expression(c, insn, err))
            return false;
        break;
    case DW_CFA_GNU_args_size: insn->op = FU_INSN_ARGS_SIZE; insn->uoperand = fu_read_uleb(c); break;
    case DW_CFA_GNU_window_save: insn->op = FU_INSN_WINDOW_SAVE; break;
    default:
        fu_fail(err, FU_ERR_CFI, "unknown call frame instruction 0x%02x", byte);
        return false;
    }
    if (c->failed) {
        const char *name = fu_cfa_name(insn->opcode);
        fu_fail(err, FU_ERR_CFI, "%s: operands truncated or too large", name ? name : "?");
        return false;
    }
    return true;
}

/* ---- evaluation state ------------------------------------------------------------------------ */

typedef struct dense_state {
    fu_rule cfa;
    /* The register and offset last set by DW_CFA_def_cfa*, kept while the CFA is an expression:
     * a later DW_CFA_def_cfa_register returns to register+offset with this offset (libgcc's
     * execute_cfa_program and gdb do so; readelf shows it). Not part of the interned state. */
    uint16_t cfa_register;
    int64_t cfa_offset;
    uint64_t set[FU_MAX_COLUMNS / 64]; /* columns whose rule is not unspecified */
    unsigned count;                    /* of them */
    /* the exclusive or of column_hash over them, kept as rules are set: a state is hashed for
     * interning at every row, without going over its columns */
    uint64_t columns_hash;
    /* the rules of the columns in `set`; the others' hold stale rules, never read: a state is
     * never cleared or copied whole per FDE (2 KB, 6% of libLLVM-14's evaluation) */
    fu_rule rules[FU_MAX_COLUMNS];
} dense_state;

typedef struct evaluator {
    fu_cfi_table *t;
    dense_state current;
    dense_state initial;       /* the CIE's rules (for DW_CFA_restore) */
    dense_state *stack;        /* FU_MAX_STATE_STACK entries */
    unsigned depth;
    uint32_t last_state;       /* id of the state last interned */
    bool dirty;                /* `current` changed since last_state was interned */
} evaluator;

static uint64_t hash_rule(uint64_t h, const fu_rule *r)
{
    uint64_t a = (uint64_t)r->kind | (uint64_t)r->reg << 8 | (uint64_t)r->expr_len << 32;
    h ^= a;
    h *= 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)r->value;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

static bool rule_equal(const fu_rule *a, const fu_rule *b)
{
    return a->kind == b->kind && a->reg == b->reg && a->expr_len == b->expr_len && a->value == b->value;
}

/* A set column's part of dense_state.columns_hash. */
static uint64_t column_hash(unsigned col, const fu_rule *r)
{
    return hash_rule(0x12345 + col, r);
}

static uint64_t hash_dense(const dense_state *s)
{
    return hash_rule(s->columns_hash, &s->cfa);
}

static bool state_matches(const fu_cfi_table *t, const fu_state *st, const dense_state *s)
{
    if (!rule_equal(&st->cfa, &s->cfa) || s->count != st->count)
        return false;
    for (unsigned i = 0; i < st->count; i++) {
        unsigned col = t->column_pool[st->first + i];
        if (!(s->set[col / 64] >> (col % 64) & 1) || !rule_equal(&t->rule_pool[st->first + i], &s->rules[col]))
            return false;
    }
    return true;
}

/* fu_intern_equal: does state `id` hold the rules of the dense state `key`? */
static bool state_id_matches(const void *table, uint32_t id, const void *key)
{
    const fu_cfi_table *t = table;
    return state_matches(t, &t->states[id], key);
}

/* The id of state `s`, adding it if new. UINT32_MAX on allocation failure. */
static uint32_t intern(fu_cfi_table *t, const dense_state *s)
{
    uint64_t h = hash_dense(s);
    uint32_t found = fu_intern_find(&t->state_index, h, state_id_matches, t, s);
    if (found != FU_INTERN_NONE)
        return found;
    unsigned n = s->count;
    if (!fu_grow_array((void **)&t->states, &t->state_cap, (uint64_t)t->state_count + 1, sizeof(fu_state)))
        return UINT32_MAX;
    uint32_t pool_cap = t->pool_cap;
    if (!fu_grow_array((void **)&t->rule_pool, &pool_cap, (uint64_t)t->pool_count + n, sizeof(fu_rule)))
        return UINT32_MAX;
    if (!fu_grow_array((void **)&t->column_pool, &t->pool_cap, (uint64_t)t->pool_count + n, sizeof(uint8_t)))
        return UINT32_MAX;
    if (!fu_intern_insert(&t->state_index, h, t->state_count))
        return UINT32_MAX;
    fu_state *st = &t->states[t->state_count];
    memset(st, 0, sizeof *st);
    st->cfa = s->cfa;
    st->first = t->pool_count;
    st->count = (uint16_t)n;
    for (unsigned w = 0; w < FU_MAX_COLUMNS / 64; w++)
        for (uint64_t bits = s->set[w]; bits; bits &= bits - 1) {
            unsigned col = w * 64 + (unsigned)__builtin_ctzll(bits);
            t->column_pool[t->pool_count] = (uint8_t)col;
            t->rule_pool[t->pool_count] = s->rules[col];
            t->pool_count++;
        }
    st->low_columns = (uint16_t)s->set[0];
    return t->state_count++;
}

/* `out` set to state `id`; its CFA register and offset are the caller's to set. */
static void expand_state(const fu_cfi_table *t, uint32_t id, dense_state *out)
{
    const fu_state *st = &t->states[id];
    out->cfa = st->cfa;
    memset(out->set, 0, sizeof out->set);
    out->count = st->count;
    out->columns_hash = 0;
    for (unsigned k = 0; k < st->count; k++) {
        unsigned col = t->column_pool[st->first + k];
        out->set[col / 64] |= (uint64_t)1 << (col % 64);
        out->rules[col] = t->rule_pool[st->first + k];
        out->columns_hash ^= column_hash(col, &out->rules[col]);
    }
}

static bool emit_row(evaluator *ev, uint64_t address)
{
    fu_cfi_table *t = ev->t;
    if (ev->dirty) {
        uint32_t id = intern(t, &ev->current);
        if (id == UINT32_MAX)
            return false;
        ev->last_state = id;
        ev->dirty = false;
    }
    if (t->row_count == t->row_cap) {
        /* the two row arrays grow in step */
        uint32_t address_cap = t->row_cap, state_cap = t->row_cap;
        if (!fu_grow_array((void **)&t->row_address, &address_cap, (uint64_t)t->row_count + 1, sizeof(uint64_t)) ||
            !fu_grow_array((void **)&t->row_state, &state_cap, (uint64_t)t->row_count + 1, sizeof(uint32_t)))
            return false;
        t->row_cap = address_cap;
    }
    t->row_address[t->row_count] = address;
    t->row_state[t->row_count] = ev->last_state;
    t->row_count++;
    return true;
}

static void set_cfa_register_offset(evaluator *ev)
{
    ev->current.cfa.kind = FU_CFA_REG_OFFSET;
    ev->current.cfa.reg = ev->current.cfa_register;
    ev->current.cfa.value = ev->current.cfa_offset;
    ev->current.cfa.expr_len = 0;
    ev->dirty = true;
}

static void set_rule(evaluator *ev, unsigned col, fu_rule rule)
{
    dense_state *s = &ev->current;
    uint64_t bit = (uint64_t)1 << (col % 64);
    bool was_set = s->set[col / 64] & bit;
    if (was_set)
        s->columns_hash ^= column_hash(col, &s->rules[col]);
    s->rules[col] = rule;
    if (rule.kind != FU_RULE_UNSPECIFIED)
        s->columns_hash ^= column_hash(col, &rule);
    if (rule.kind == FU_RULE_UNSPECIFIED) {
        s->set[col / 64] &= ~bit;
        s->count -= was_set;
    } else {
        s->set[col / 64] |= bit;
        s->count += !was_set;
    }
    ev->dirty = true;
}

/* The CIE's rule of `col` (DW_CFA_restore). */
static fu_rule initial_rule(const evaluator *ev, unsigned col)
{
    fu_rule none = {0};
    return ev->initial.set[col / 64] >> (col % 64) & 1 ? ev->initial.rules[col] : none;
}

/* `to` = `from`, the rules of the set columns only. */
static void copy_state(dense_state *to, const dense_state *from)
{
    to->cfa = from->cfa;
    to->cfa_register = from->cfa_register;
    to->cfa_offset = from->cfa_offset;
    memcpy(to->set, from->set, sizeof to->set);
    to->count = from->count;
    to->columns_hash = from->columns_hash;
    for (unsigned w = 0; w < FU_MAX_COLUMNS / 64; w++)
        for (uint64_t bits = from->set[w]; bits; bits &= bits - 1) {
            unsigned col = w * 64 + (unsigned)__builtin_ctzll(bits);
            to->rules[col] = from->rules[col];
        }
}

/* Run the instructions of entry `e` over ev->current, emitting rows from `loc`. Returns false with
 * `message` set on error. */
static bool run(evaluator *ev, fu_entry *e, uint64_t loc, char *message, size_t message_size)
{
    fu_cfi_table *t = ev->t;
    const uint8_t *base = t->section.data;
    fu_cursor c = fu_cursor_make(base, base + e->insns_offset, base + e->end);
    fu_error err = {0};
    fu_insn insn;
    bool all_nops = true;
    /* Each instruction consumes at least one byte: the loop is bounded by the entry's length. */
    while (fu_cursor_left(&c) > 0) {
        uint64_t at = fu_cursor_offset(&c);
        if (!fu_insn_decode(&c, e->cie, &t->section, &insn, &err)) {
            snprintf(message, message_size, "%s (instruction at offset 0x%llx)", err.message,
                     (unsigned long long)at);
            return false;
        }
        if (insn.op != FU_INSN_NOP)
            all_nops = false;
        bool names_column = insn.op == FU_INSN_OFFSET || insn.op == FU_INSN_VAL_OFFSET ||
                            insn.op == FU_INSN_RESTORE || insn.op == FU_INSN_UNDEFINED ||
                            insn.op == FU_INSN_SAME_VALUE || insn.op == FU_INSN_REGISTER ||
                            insn.op == FU_INSN_EXPRESSION || insn.op == FU_INSN_VAL_EXPRESSION;
        bool names_cfa_register = insn.op == FU_INSN_DEF_CFA || insn.op == FU_INSN_DEF_CFA_REGISTER;
        if (names_cfa_register && insn.reg > UINT16_MAX) {
            snprintf(message, message_size, "%s: CFA register %llu is not a register number (instruction at offset 0x%llx)",
                     fu_cfa_name(insn.opcode), (unsigned long long)insn.reg, (unsigned long long)at);
            return false;
        }
        if (names_column && insn.reg >= FU_MAX_COLUMNS) {
            snprintf(message, message_size,
                     "%s: register %llu exceeds the limit of %d columns (instruction at offset 0x%llx)",
                     fu_cfa_name(insn.opcode), (unsigned long long)insn.reg, FU_MAX_COLUMNS,
                     (unsigned long long)at);
            return false;
        }
        if (insn.op == FU_INSN_REGISTER && insn.reg2 >= FU_MAX_COLUMNS) {
            snprintf(message, message_size,
                     "DW_CFA_register: register %llu exceeds the limit of %d columns (instruction at offset 0x%llx)",
                     (unsigned long long)insn.reg2, FU_MAX_COLUMNS, (unsigned long long)at);
            return false;
        }
        unsigned col = (unsigned)insn.reg;
        if (names_column)
            e->referenced[col / 64] |= (uint64_t)1 << (col % 64);
        fu_rule r = {0};
        switch ((fu_insn_op)insn.op) {
        case FU_INSN_ADVANCE:
            if (!emit_row(ev, loc))
                goto nomem;
            loc += (uint64_t)insn.value;
            break;
        case FU_INSN_SET_LOC:
            /* DWARF 5 §6.4.2.1: "The new location value is always greater than the current one" */
            if (insn.uoperand < loc) {
                snprintf(message, message_size,
                         "DW_CFA_set_loc moves backwards from 0x%llx to 0x%llx (instruction at offset 0x%llx)",
                         (unsigned long long)loc, (unsigned long long)insn.uoperand, (unsigned long long)at);
                return false;
            }
            if (!emit_row(ev, loc))
                goto nomem;
            loc = insn.uoperand;
            break;
        case FU_INSN_OFFSET: r.kind = FU_RULE_OFFSET; r.value = insn.value; set_rule(ev, col, r); break;
        case FU_INSN_VAL_OFFSET: r.kind = FU_RULE_VAL_OFFSET; r.value = insn.value; set_rule(ev, col, r); break;
        case FU_INSN_RESTORE: set_rule(ev, col, initial_rule(ev, col)); break;
        case FU_INSN_UNDEFINED: r.kind = FU_RULE_UNDEFINED; set_rule(ev, col, r); break;
        case FU_INSN_SAME_VALUE: r.kind = FU_RULE_SAME_VALUE; set_rule(ev, col, r); break;
        case FU_INSN_REGISTER: r.kind = FU_RULE_REGISTER; r.reg = (uint16_t)insn.reg2; set_rule(ev, col, r); break;
        case FU_INSN_EXPRESSION:
        case FU_INSN_VAL_EXPRESSION:
            if (insn.expr_len > UINT32_MAX) {
                snprintf(message, message_size, "expression longer than 4 GiB");
                return false;
            }
            r.kind = insn.op == FU_INSN_EXPRESSION ? FU_RULE_EXPRESSION : FU_RULE_VAL_EXPRESSION;
            r.value = (int64_t)insn.expr_offset;
            r.expr_len = (uint32_t)insn.expr_len;
            set_rule(ev, col, r);
            break;
        case FU_INSN_REMEMBER_STATE:
            if (ev->depth == FU_MAX_STATE_STACK) {
                snprintf(message, message_size,
                         "DW_CFA_remember_state nested deeper than %d (instruction at offset 0x%llx)",
                         FU_MAX_STATE_STACK, (unsigned long long)at);
                return false;
            }
            ev->stack[ev->depth++] = ev->current;
            break;
        case FU_INSN_RESTORE_STATE:
            if (ev->depth == 0) {
                snprintf(message, message_size,
                         "DW_CFA_restore_state with an empty state stack (instruction at offset 0x%llx)",
                         (unsigned long long)at);
                return false;
            }
            ev->current = ev->stack[--ev->depth];
            ev->dirty = true;
            break;
        case FU_INSN_DEF_CFA:
            ev->current.cfa_register = (uint16_t)insn.reg;
            ev->current.cfa_offset = insn.value;
            set_cfa_register_offset(ev);
            break;
        case FU_INSN_DEF_CFA_REGISTER:
            /* DWARF 5 §6.4.2.2: the offset stays (the one before any CFA expression) */
            ev->current.cfa_register = (uint16_t)insn.reg;
            set_cfa_register_offset(ev);
            break;
        case FU_INSN_DEF_CFA_OFFSET:
            /* while the CFA is an expression only the remembered offset changes (libgcc) */
            ev->current.cfa_offset = insn.value;
            if (ev->current.cfa.kind != FU_CFA_EXPRESSION)
                set_cfa_register_offset(ev);
            break;
        case FU_INSN_DEF_CFA_EXPRESSION:
            if (insn.expr_len > UINT32_MAX) {
                snprintf(message, message_size, "expression longer than 4 GiB");
                return false;
            }
            ev->current.cfa.kind = FU_CFA_EXPRESSION;
            ev->current.cfa.reg = 0;
            ev->current.cfa.value = (int64_t)insn.expr_offset;
            ev->current.cfa.expr_len = (uint32_t)insn.expr_len;
            ev->dirty = true;
            break;
        case FU_INSN_NOP:
        case FU_INSN_ARGS_SIZE:
        case FU_INSN_WINDOW_SAVE:
            break;
        }
    }
    e->all_nops = all_nops;
    if (!emit_row(ev, loc))
        goto nomem;
    return true;
nomem:
    snprintf(message, message_size, "out of memory for rows");
    return false;
}

static void record_error(fu_cfi_table *t, fu_entry *e, const char *detail)
{
    char message[400];
    snprintf(message, sizeof message, "%s at %s+0x%llx: %s", e->kind == FU_ENTRY_CIE ? "CIE" : "FDE",
             t->section.kind == FU_SECTION_EH_FRAME ? ".eh_frame" : ".debug_frame",
             (unsigned long long)e->offset, detail);
    if (!e->has_error)
        t->error_count++;
    fu_entry_set_error(e, message);
}

/* Evaluation is over: give back the growth slack of the arrays and drop the interning hash. */
static void shrink_to_fit(fu_cfi_table *t)
{
    if (t->row_count && t->row_count < t->row_cap) {
        uint64_t *a = realloc(t->row_address, (size_t)t->row_count * sizeof *a);
        uint32_t *s = realloc(t->row_state, (size_t)t->row_count * sizeof *s);
        if (a)
            t->row_address = a;
        if (s)
            t->row_state = s;
        if (a && s)
            t->row_cap = t->row_count;
    }
    if (t->pool_count && t->pool_count < t->pool_cap) {
        fu_rule *r = realloc(t->rule_pool, (size_t)t->pool_count * sizeof *r);
        uint8_t *c = realloc(t->column_pool, t->pool_count);
        if (r)
            t->rule_pool = r;
        if (c)
            t->column_pool = c;
        if (r && c)
            t->pool_cap = t->pool_count;
    }
    if (t->entry_count && t->entry_count < t->entry_cap) {
        fu_entry *e = realloc(t->entries, (size_t)t->entry_count * sizeof *e);
        if (e) {
            t->entries = e;
            t->entry_cap = t->entry_count;
        }
    }
    fu_intern_free(&t->state_index);
}

/* Whether FDE `e` covers part of [start, end). */
static bool fde_overlaps(const fu_entry *e, uint64_t start, uint64_t end)
{
    return e->pc_range > 0 && e->pc_begin < end && (e->pc_begin >= start || start - e->pc_begin < e->pc_range);
}

/* Mark in `selected` the FDEs a lookup in the ranges can return: for each range, every FDE starting
 * from the lowest start of those overlapping it up to its end. The lookup (lookup.c) takes the
 * last FDE starting at or below the address: an FDE that starts between the one covering the
 * address and the address would shadow it, so those are kept too, and the answer in the ranges
 * is the whole table's. */
static void select_fdes(const fu_cfi_table *t, const uint64_t *ranges, size_t range_count, bool *selected)
{
    for (size_t r = 0; r < range_count; r++) {
        uint64_t start = ranges[2 * r], end = ranges[2 * r + 1], lowest = end;
        for (uint32_t i = 0; i < t->entry_count; i++) {
            const fu_entry *e = &t->entries[i];
            if (e->kind == FU_ENTRY_FDE && fde_overlaps(e, start, end) && e->pc_begin < lowest)
                lowest = e->pc_begin;
        }
        for (uint32_t i = 0; i < t->entry_count; i++) {
            const fu_entry *e = &t->entries[i];
            if (e->kind == FU_ENTRY_FDE && e->pc_begin >= lowest && e->pc_begin < end)
                selected[i] = true;
        }
    }
}

fu_status fu_cfi_table_evaluate(fu_cfi_table *t, fu_error *err) { return fu_cfi_table_evaluate_ranges(t, NULL, 0, err); }

fu_status fu_cfi_table_evaluate_ranges(fu_cfi_table *t, const uint64_t *ranges, size_t range_count, fu_error *err)
{
    if (ranges && range_count > FU_CFI_MAX_SELECTED_RANGES)
        return fu_fail(err, FU_ERR_INVALID, "%zu address ranges to evaluate (at most %d)", range_count,
                       FU_CFI_MAX_SELECTED_RANGES);
    bool *selected = NULL;
    if (ranges) {
        if (!(selected = calloc(t->entry_count ? t->entry_count : 1, sizeof *selected)))
            return fu_fail(err, FU_ERR_NOMEM, "out of memory evaluating CFI");
        select_fdes(t, ranges, range_count, selected);
    }
    evaluator ev;
    memset(&ev, 0, sizeof ev);
    ev.t = t;
    ev.stack = malloc(sizeof(dense_state) * FU_MAX_STATE_STACK);
    /* Initial rule set of each CIE, as an interned state id (UINT32_MAX: not evaluated). */
    uint32_t *cie_initial = malloc(sizeof(uint32_t) * (t->cie_count ? t->cie_count : 1));
    /* ... and the CFA register/offset behind it (see dense_state) */
    uint16_t *cie_cfa_register = malloc(sizeof(uint16_t) * (t->cie_count ? t->cie_count : 1));
    int64_t *cie_cfa_offset = malloc(sizeof(int64_t) * (t->cie_count ? t->cie_count : 1));
    if (!ev.stack || !cie_initial || !cie_cfa_register || !cie_cfa_offset) {
        free(ev.stack);
        free(cie_initial);
        free(cie_cfa_register);
        free(cie_cfa_offset);
        free(selected);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory evaluating CFI");
    }
    char message[300];
    /* CIEs first: their final state is every FDE's starting point. */
    for (uint32_t i = 0; i < t->entry_count; i++) {
        fu_entry *e = &t->entries[i];
        if (e->kind != FU_ENTRY_CIE || e->cie_slot == UINT32_MAX)
            continue;
        cie_initial[e->cie_slot] = UINT32_MAX;
        if (e->has_error)
            continue;
        memset(&ev.current, 0, sizeof ev.current);
        memset(&ev.initial, 0, sizeof ev.initial);
        ev.depth = 0;
        ev.dirty = true;
        e->first_row = t->row_count;
        if (!run(&ev, e, 0, message, sizeof message)) {
            record_error(t, e, message);
            t->row_count = e->first_row;
            continue;
        }
        e->row_count = t->row_count - e->first_row;
        cie_initial[e->cie_slot] = t->row_state[t->row_count - 1];
        cie_cfa_register[e->cie_slot] = ev.current.cfa_register;
        cie_cfa_offset[e->cie_slot] = ev.current.cfa_offset;
    }
    for (uint32_t i = 0; i < t->entry_count; i++) {
        fu_entry *e = &t->entries[i];
        if (e->kind != FU_ENTRY_FDE || e->has_error || (selected && !selected[i]))
            continue; /* an FDE left out has no rows: the index leaves it out */
        const fu_entry *ce = &t->entries[e->cie_entry];
        uint32_t initial = cie_initial[ce->cie_slot];
        if (initial == UINT32_MAX) {
            record_error(t, e, "its CIE's initial instructions are malformed");
            continue;
        }
        expand_state(t, initial, &ev.current);
        ev.current.cfa_register = cie_cfa_register[ce->cie_slot];
        ev.current.cfa_offset = cie_cfa_offset[ce->cie_slot];
        copy_state(&ev.initial, &ev.current);
        ev.last_state = initial;
        ev.dirty = false;
        ev.depth = 0;
        memcpy(e->referenced, ce->referenced, sizeof e->referenced);
        e->first_row = t->row_count;
        if (!run(&ev, e, e->pc_begin, message, sizeof message)) {
            record_error(t, e, message);
            t->row_count = e->first_row;
            continue;
        }
        e->row_count = t->row_count - e->first_row;
    }
    free(ev.stack);
    free(cie_initial);
    free(cie_cfa_register);
    free(cie_cfa_offset);
    free(selected);
    shrink_to_fit(t);
    return fu_cfi_table_build_index(t, err);
}
