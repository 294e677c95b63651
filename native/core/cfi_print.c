/* cfi_print: render a parsed and evaluated table exactly as `readelf --debug-dump=frames-interp`
 * (-wF) and `readelf --debug-dump=frames` (-wf) of binutils 2.40 do, so the two can be diffed.
 *
 * The interpreted view is drawn from the evaluated rows; readelf's display rules that are not
 * DWARF semantics live here only:
 *   - the columns shown for an entry are the registers that its instructions (or its CIE's) name;
 *   - an entry whose instructions are all DW_CFA_nop shows no rows, although it has one;
 *   - a register rule DW_CFA_register shows as "r6 (rbp)", a column with no rule as "u".
 * Addresses are printed as readelf sees them (it applies only the pcrel encoding).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cfi.h"

/* Highest register column readelf accepts (the size of its x86-64 register-name table). */
#define READELF_LAST_COLUMN 126

static unsigned entry_address_size(const fu_cfi_table *t, const fu_entry *e)
{
    return e->cie ? e->cie->address_size : t->section.address_size;
}

/* print_hex: zero-padded to the value's byte size, masked to it, then a space. */
static void print_hex(fu_out *o, uint64_t value, unsigned bytes)
{
    if (bytes < 8)
        value &= ((uint64_t)1 << (bytes * 8)) - 1;
    fu_out_printf(o, "%0*llx ", (int)(bytes * 2), (unsigned long long)value);
}

static void print_hex_ns(fu_out *o, uint64_t value, unsigned bytes)
{
    if (bytes < 8)
        value &= ((uint64_t)1 << (bytes * 8)) - 1;
    fu_out_printf(o, "%0*llx", (int)(bytes * 2), (unsigned long long)value);
}

/* readelf's regname(reg, 0): "r6 (rbp)", or "r200" without a name. */
static int format_register(char *buf, size_t size, uint64_t reg)
{
    const char *name = fu_register_name(reg);
    if (name)
        return snprintf(buf, size, "r%d (%s)", (int)reg, name);
    return snprintf(buf, size, "r%d", (int)reg);
}

/* readelf's regname(reg, 1): the bare name, or "r200". */
static int format_register_name(char *buf, size_t size, uint64_t reg)
{
    const char *name = fu_register_name(reg);
    if (name)
        return snprintf(buf, size, "%s", name);
    return snprintf(buf, size, "r%d", (int)reg);
}

static void print_entry_header(fu_out *o, const fu_cfi_table *t, const fu_entry *e)
{
    unsigned address_size = entry_address_size(t, e);
    fu_out_printf(o, "\n%08llx ", (unsigned long long)e->offset);
    print_hex(o, e->length, address_size);
    print_hex(o, e->id, e->offset_size);
}

static void print_terminator(fu_out *o, const fu_entry *e)
{
    fu_out_printf(o, "\n%08llx ZERO terminator\n\n", (unsigned long long)e->offset);
}

static void print_fde_header(fu_out *o, const fu_cfi_table *t, const fu_entry *e, const char *note)
{
    unsigned address_size = entry_address_size(t, e);
    print_entry_header(o, t, e);
    fu_out_write(o, "FDE ", 4);
    if (e->cie_entry != UINT32_MAX)
        fu_out_printf(o, "cie=%08llx", (unsigned long long)t->entries[e->cie_entry].offset);
    else
        fu_out_printf(o, "cie=invalid ");
    fu_out_write(o, " pc=", 4);
    if (e->cie && e->cie->segment_size)
        fu_out_printf(o, "%04llx:", (unsigned long long)e->segment_selector);
    print_hex_ns(o, e->display_pc_begin, address_size);
    fu_out_write(o, "..", 2);
    print_hex_ns(o, e->display_pc_begin + e->pc_range, address_size);
    if (note)
        fu_out_printf(o, "%s", note);
    fu_out_write(o, "\n", 1);
}

/* ---- -wF ---------------------------------------------------------------------------------- */

/* Row text is built from cells rendered once per interned state (a table of libLLVM-14 has
 * 861k rows but under a thousand states), then copied: formatting each row with printf made
 * printing 1.5x slower than readelf itself. */
#define CELL_WIDTH 24

typedef struct cell_cache {
    char (*cfa)[CELL_WIDTH];   /* per state: "rsp+8    " (padded, with the trailing space) */
    uint8_t *cfa_len;
    char (*rule)[CELL_WIDTH];  /* per rule_pool entry: "c-8   " */
    uint8_t *rule_len;
    bool *ready;               /* per state */
} cell_cache;

static void pad_cell(char *cell, int n, int width, uint8_t *len)
{
    if (n < 0)
        n = 0;
    if (n > CELL_WIDTH - 2)
        n = CELL_WIDTH - 2;
    while (n < width)
        cell[n++] = ' ';
    cell[n++] = ' ';
    *len = (uint8_t)n;
}

static void render_rule(char *cell, uint8_t *len, const fu_rule *rule)
{
    int n;
    switch ((fu_rule_kind)rule->kind) {
    case FU_RULE_SAME_VALUE: n = snprintf(cell, CELL_WIDTH, "s"); break;
    case FU_RULE_OFFSET: n = snprintf(cell, CELL_WIDTH, "c%+lld", (long long)rule->value); break;
    case FU_RULE_VAL_OFFSET: n = snprintf(cell, CELL_WIDTH, "v%+lld", (long long)rule->value); break;
    case FU_RULE_REGISTER: n = format_register(cell, CELL_WIDTH, rule->reg); break;
    case FU_RULE_EXPRESSION: n = snprintf(cell, CELL_WIDTH, "exp"); break;
    case FU_RULE_VAL_EXPRESSION: n = snprintf(cell, CELL_WIDTH, "vexp"); break;
    default: n = snprintf(cell, CELL_WIDTH, "u"); break;
    }
    pad_cell(cell, n, 5, len);
}

static void prepare_state(cell_cache *cache, const fu_cfi_table *t, uint32_t id)
{
    if (cache->ready[id])
        return;
    const fu_state *st = fu_cfi_table_state(t, id);
    char *cell = cache->cfa[id];
    int n;
    if (st->cfa.kind == FU_CFA_EXPRESSION) {
        n = snprintf(cell, CELL_WIDTH, "exp");
    } else {
        n = format_register_name(cell, CELL_WIDTH, st->cfa.reg);
        if (n >= 0 && n < CELL_WIDTH)
            n += snprintf(cell + n, CELL_WIDTH - (size_t)n, "%+d", (int)st->cfa.value);
    }
    pad_cell(cell, n, 8, &cache->cfa_len[id]);
    for (unsigned k = 0; k < st->count; k++)
        render_rule(cache->rule[st->first + k], &cache->rule_len[st->first + k], &t->rule_pool[st->first + k]);
    cache->ready[id] = true;
}

static void put_hex(fu_out *o, uint64_t value, unsigned bytes)
{
    static const char digits[] = "0123456789abcdef";
    char buf[17];
    unsigned n = bytes * 2;
    if (bytes < 8)
        value &= ((uint64_t)1 << (bytes * 8)) - 1;
    for (unsigned i = 0; i < n; i++)
        buf[n - 1 - i] = digits[(value >> (4 * i)) & 0xf];
    buf[n] = ' ';
    fu_out_write(o, buf, n + 1);
}

static void print_rows(fu_out *o, const fu_cfi_table *t, cell_cache *cache, const fu_entry *e,
                       uint64_t display_base, uint64_t semantic_base)
{
    if (e->all_nops || e->row_count == 0)
        return;
    unsigned address_size = entry_address_size(t, e);
    uint64_t ra = e->cie ? e->cie->ra_column : 16;
    char name[64];
    unsigned columns[FU_MAX_COLUMNS], column_count = 0;
    static const char unspecified_cell[] = "u     ";
    fu_out_printf(o, "%-*s CFA      ", (int)(address_size * 2), "   LOC");
    for (unsigned col = 0; col < FU_MAX_COLUMNS; col++) {
        if (!(e->referenced[col / 64] >> (col % 64) & 1))
            continue;
        columns[column_count++] = col;
        if (col == ra) {
            fu_out_write(o, "ra    ", 6);
        } else {
            format_register_name(name, sizeof name, col);
            fu_out_printf(o, "%-5s ", name);
        }
    }
    fu_out_write(o, "\n", 1);
    for (uint32_t r = e->first_row; r < e->first_row + e->row_count; r++) {
        uint32_t id = t->row_state[r];
        const fu_state *st = fu_cfi_table_state(t, id);
        prepare_state(cache, t, id);
        put_hex(o, t->row_address[r] - semantic_base + display_base, address_size);
        fu_out_write(o, cache->cfa[id], cache->cfa_len[id]);
        /* the state's (column, rule) pairs are sorted by column, like `columns` */
        unsigned k = 0;
        for (unsigned i = 0; i < column_count; i++) {
            unsigned col = columns[i];
            while (k < st->count && t->column_pool[st->first + k] < col)
                k++;
            if (k < st->count && t->column_pool[st->first + k] == col)
                fu_out_write(o, cache->rule[st->first + k], cache->rule_len[st->first + k]);
            else
                fu_out_write(o, unspecified_cell, sizeof unspecified_cell - 1);
        }
        fu_out_write(o, "\n", 1);
    }
}

void fu_print_readelf_interp(fu_out *o, const fu_cfi_table *t) { fu_print_readelf_interp_noted(o, t, NULL, 0); }

void fu_print_readelf_interp_noted(fu_out *o, const fu_cfi_table *t, const char *const *notes, size_t note_count)
{
    size_t fde_ordinal = 0;
    cell_cache cache = {0};
    size_t states = t->state_count ? t->state_count : 1, pool = t->pool_count ? t->pool_count : 1;
    cache.cfa = malloc(states * sizeof *cache.cfa);
    cache.cfa_len = malloc(states);
    cache.ready = calloc(states, sizeof *cache.ready);
    cache.rule = malloc(pool * sizeof *cache.rule);
    cache.rule_len = malloc(pool);
    if (!cache.cfa || !cache.cfa_len || !cache.ready || !cache.rule || !cache.rule_len) {
        o->failed = true;
        goto done;
    }
    for (uint32_t i = 0; i < t->entry_count; i++) {
        const fu_entry *e = &t->entries[i];
        switch ((fu_entry_kind)e->kind) {
        case FU_ENTRY_TERMINATOR:
            print_terminator(o, e);
            break;
        case FU_ENTRY_CIE:
            print_entry_header(o, t, e);
            if (e->header_ok)
                fu_out_printf(o, "CIE \"%s\" cf=%d df=%d ra=%d\n", e->cie->augmentation,
                              (int)e->cie->code_align, (int)e->cie->data_align, (int)e->cie->ra_column);
            else
                fu_out_printf(o, "CIE\n");
            if (!e->has_error)
                print_rows(o, t, &cache, e, 0, 0);
            break;
        case FU_ENTRY_FDE:
            print_fde_header(o, t, e, fde_ordinal < note_count ? notes[fde_ordinal] : NULL);
            fde_ordinal++;
            if (!e->has_error)
                print_rows(o, t, &cache, e, e->display_pc_begin, e->pc_begin);
            break;
        }
    }
    fu_out_write(o, "\n", 1);
done:
    free(cache.cfa);
    free(cache.cfa_len);
    free(cache.ready);
    free(cache.rule);
    free(cache.rule_len);
}

/* ---- -wf ---------------------------------------------------------------------------------- */

/* readelf's display_data: bytes on one line if they fit in 80 columns, else 26 to a line. */
static void print_augmentation_data(fu_out *o, const uint8_t *data, uint64_t len)
{
    static const char label[] = "  Augmentation data:    ";
    size_t printed = sizeof label - 1;
    fu_out_write(o, label, printed);
    if (len < (80 - printed) / 3) {
        for (uint64_t i = 0; i < len; i++)
            fu_out_printf(o, " %02x", data[i]);
    } else {
        for (uint64_t i = 0; i < len; i++) {
            if (i % (80 / 3) == 0)
                fu_out_write(o, "\n", 1);
            fu_out_printf(o, " %02x", data[i]);
        }
    }
    fu_out_write(o, "\n", 1);
}

static void print_instructions(fu_out *o, const fu_cfi_table *t, const fu_entry *e, uint64_t pc)
{
    const uint8_t *base = t->section.data;
    fu_cursor c = fu_cursor_make(base, base + e->insns_offset, base + e->end);
    const fu_cie_info *cie = e->cie;
    unsigned address_size = entry_address_size(t, e);
    fu_error err = {0};
    fu_insn insn;
    char reg[64], reg2[64];
    while (fu_cursor_left(&c) > 0) {
        if (!fu_insn_decode(&c, cie, &t->section, &insn, &err)) {
            fu_out_printf(o, "  <%s>\n", err.message);
            return;
        }
        const char *name = fu_cfa_name(insn.opcode);
        /* readelf sizes its columns by its register-name table (126 names on x86-64) and flags
         * a rule for any register beyond it */
        bool names_column = insn.op != FU_INSN_DEF_CFA && insn.op != FU_INSN_DEF_CFA_REGISTER;
        int n = names_column && insn.reg > READELF_LAST_COLUMN ? snprintf(reg, sizeof reg, "bad register: ") : 0;
        format_register(reg + n, sizeof reg - (size_t)n, insn.reg);
        switch ((fu_insn_op)insn.op) {
        case FU_INSN_ADVANCE:
            if (insn.opcode == 0x40)
                fu_out_printf(o, "  %s: %d to ", name, (int)insn.value);
            else
                fu_out_printf(o, "  %s: %lld to ", name, (long long)insn.value);
            print_hex_ns(o, pc + (uint64_t)insn.value, address_size);
            fu_out_write(o, "\n", 1);
            pc += (uint64_t)insn.value;
            break;
        case FU_INSN_SET_LOC:
            fu_out_printf(o, "  %s: ", name);
            print_hex_ns(o, insn.uoperand, address_size);
            fu_out_write(o, "\n", 1);
            pc = insn.uoperand;
            break;
        case FU_INSN_OFFSET:
            fu_out_printf(o, "  %s: %s at cfa%+lld\n", name, reg, (long long)insn.value);
            break;
        case FU_INSN_VAL_OFFSET:
            fu_out_printf(o, "  %s: %s is cfa%+lld\n", name, reg, (long long)insn.value);
            break;
        case FU_INSN_RESTORE:
        case FU_INSN_UNDEFINED:
        case FU_INSN_SAME_VALUE:
        case FU_INSN_DEF_CFA_REGISTER:
            fu_out_printf(o, "  %s: %s\n", name, reg);
            break;
        case FU_INSN_REGISTER:
            format_register(reg2, sizeof reg2, insn.reg2);
            fu_out_printf(o, "  %s: %s in %s\n", name, reg, reg2);
            break;
        case FU_INSN_REMEMBER_STATE:
        case FU_INSN_RESTORE_STATE:
        case FU_INSN_NOP:
        case FU_INSN_WINDOW_SAVE:
            fu_out_printf(o, "  %s\n", name);
            break;
        case FU_INSN_DEF_CFA:
            if (insn.opcode == 0x0c)
                fu_out_printf(o, "  %s: %s ofs %d\n", name, reg, (int)insn.value);
            else
                fu_out_printf(o, "  %s: %s ofs %lld\n", name, reg, (long long)insn.value);
            break;
        case FU_INSN_DEF_CFA_OFFSET:
            if (insn.opcode == 0x0e)
                fu_out_printf(o, "  %s: %d\n", name, (int)insn.value);
            else
                fu_out_printf(o, "  %s: %lld\n", name, (long long)insn.value);
            break;
        case FU_INSN_DEF_CFA_EXPRESSION:
            fu_out_printf(o, "  %s (", name);
            fu_expr_print_readelf(o, base + insn.expr_offset, insn.expr_len, t->section.address_size);
            fu_out_write(o, ")\n", 2);
            break;
        case FU_INSN_EXPRESSION:
        case FU_INSN_VAL_EXPRESSION:
            fu_out_printf(o, "  %s: %s (", name, reg);
            fu_expr_print_readelf(o, base + insn.expr_offset, insn.expr_len, t->section.address_size);
            fu_out_write(o, ")\n", 2);
            break;
        case FU_INSN_ARGS_SIZE:
            fu_out_printf(o, "  %s: %llu\n", name, (unsigned long long)insn.uoperand);
            break;
        }
    }
}

void fu_print_readelf_raw(fu_out *o, const fu_cfi_table *t)
{
    const uint8_t *base = t->section.data;
    for (uint32_t i = 0; i < t->entry_count; i++) {
        const fu_entry *e = &t->entries[i];
        switch ((fu_entry_kind)e->kind) {
        case FU_ENTRY_TERMINATOR:
            print_terminator(o, e);
            break;
        case FU_ENTRY_CIE: {
            const fu_cie_info *cie = e->cie;
            print_entry_header(o, t, e);
            fu_out_write(o, "CIE\n", 4);
            if (!e->header_ok)
                break;
            fu_out_printf(o, "  Version:               %d\n", cie->version);
            fu_out_printf(o, "  Augmentation:          \"%s\"\n", cie->augmentation);
            if (cie->version >= 4) {
                fu_out_printf(o, "  Pointer Size:          %u\n", cie->address_size);
                fu_out_printf(o, "  Segment Size:          %u\n", cie->segment_size);
            }
            fu_out_printf(o, "  Code alignment factor: %u\n", (unsigned)cie->code_align);
            fu_out_printf(o, "  Data alignment factor: %d\n", (int)cie->data_align);
            fu_out_printf(o, "  Return address column: %d\n", (int)cie->ra_column);
            if (e->aug_data_len)
                print_augmentation_data(o, base + e->aug_data_offset, e->aug_data_len);
            else
                fu_out_write(o, "\n", 1);
            print_instructions(o, t, e, 0);
            break;
        }
        case FU_ENTRY_FDE:
            print_fde_header(o, t, e, NULL);
            if (!e->header_ok)
                break;
            if (e->aug_data_len)
                print_augmentation_data(o, base + e->aug_data_offset, e->aug_data_len);
            print_instructions(o, t, e, e->display_pc_begin);
            break;
        }
    }
    fu_out_write(o, "\n", 1);
}
