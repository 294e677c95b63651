/* dwarf_expr: decode, print and evaluate DWARF expressions as CFI uses them (DWARF 5 §2.5,
 * §6.4.2: DW_CFA_def_cfa_expression, DW_CFA_expression, DW_CFA_val_expression).
 *
 * One decoder (expr_next) serves the two printers and the evaluator. The evaluator works on
 * 64-bit generic values with a stack of FU_EXPR_STACK entries and at most FU_EXPR_MAX_STEPS
 * operations, reads registers from a snapshot and memory only through the caller's callback.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cfi.h"

/* ---- output sink ---------------------------------------------------------------------------- */

#include <errno.h>
#include <unistd.h>

void fu_out_flush(fu_out *o)
{
    if (o->fd < 0 || o->failed)
        return;
    size_t done = 0;
    while (done < o->len) {
        ssize_t n = write(o->fd, o->buf + done, o->len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            o->failed = true;
            break;
        }
        done += (size_t)n;
    }
    o->len = 0;
}

/* Flush to the descriptor beyond this many buffered bytes: large enough that write(2) costs
 * nothing per row, small enough to stay in cache. */
#define FU_OUT_FLUSH_AT (1u << 20)

static bool out_reserve(fu_out *o, size_t n)
{
    if (o->len + n <= o->cap)
        return true;
    if (o->fd >= 0 && o->len > 0) {
        fu_out_flush(o); /* a failed write keeps len: the text is not written, nor buffered past cap */
        if (o->failed)
            return false;
        if (n <= o->cap)
            return true;
    }
    size_t cap = o->cap ? o->cap : 64 * 1024;
    while (cap < o->len + n)
        cap *= 2;
    char *b = realloc(o->buf, cap);
    if (!b) {
        o->failed = true;
        return false;
    }
    o->buf = b;
    o->cap = cap;
    return true;
}

void fu_out_write(fu_out *o, const char *s, size_t n)
{
    if (!out_reserve(o, n))
        return;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    if (o->fd >= 0 && o->len >= FU_OUT_FLUSH_AT)
        fu_out_flush(o);
}

void fu_out_printf(fu_out *o, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        fu_out_write(o, small, (size_t)n);
        return;
    }
    if (!out_reserve(o, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf(o->buf + o->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->len += (size_t)n;
}

/* ---- decoding ---------------------------------------------------------------------------------- */

enum {
    DW_OP_addr = 0x03, DW_OP_deref = 0x06, DW_OP_const1u = 0x08, DW_OP_const1s = 0x09,
    DW_OP_const2u = 0x0a, DW_OP_const2s = 0x0b, DW_OP_const4u = 0x0c, DW_OP_const4s = 0x0d,
    DW_OP_const8u = 0x0e, DW_OP_const8s = 0x0f, DW_OP_constu = 0x10, DW_OP_consts = 0x11,
    DW_OP_dup = 0x12, DW_OP_drop = 0x13, DW_OP_over = 0x14, DW_OP_pick = 0x15, DW_OP_swap = 0x16,
    DW_OP_rot = 0x17, DW_OP_xderef = 0x18, DW_OP_abs = 0x19, DW_OP_and = 0x1a, DW_OP_div = 0x1b,
    DW_OP_minus = 0x1c, DW_OP_mod = 0x1d, DW_OP_mul = 0x1e, DW_OP_neg = 0x1f, DW_OP_not = 0x20,
    DW_OP_or = 0x21, DW_OP_plus = 0x22, DW_OP_plus_uconst = 0x23, DW_OP_shl = 0x24,
    DW_OP_shr = 0x25, DW_OP_shra = 0x26, DW_OP_xor = 0x27, DW_OP_bra = 0x28, DW_OP_eq = 0x29,
    DW_OP_ge = 0x2a, DW_OP_gt = 0x2b, DW_OP_le = 0x2c, DW_OP_lt = 0x2d, DW_OP_ne = 0x2e,
    DW_OP_skip = 0x2f, DW_OP_lit0 = 0x30, DW_OP_lit31 = 0x4f, DW_OP_reg0 = 0x50,
    DW_OP_reg31 = 0x6f, DW_OP_breg0 = 0x70, DW_OP_breg31 = 0x8f, DW_OP_regx = 0x90,
    DW_OP_fbreg = 0x91, DW_OP_bregx = 0x92, DW_OP_piece = 0x93, DW_OP_deref_size = 0x94,
    DW_OP_xderef_size = 0x95, DW_OP_nop = 0x96, DW_OP_push_object_address = 0x97,
    DW_OP_call2 = 0x98, DW_OP_call4 = 0x99, DW_OP_call_ref = 0x9a, DW_OP_form_tls_address = 0x9b,
    DW_OP_call_frame_cfa = 0x9c, DW_OP_bit_piece = 0x9d, DW_OP_implicit_value = 0x9e,
    DW_OP_stack_value = 0x9f, DW_OP_addrx = 0xa1, DW_OP_entry_value = 0xa3,
    DW_OP_GNU_addr_index = 0xfb, DW_OP_GNU_const_index = 0xfc,
    DW_OP_const_type = 0xa4, DW_OP_regval_type = 0xa5, DW_OP_deref_type = 0xa6,
    DW_OP_convert = 0xa8, DW_OP_reinterpret = 0xa9, DW_OP_GNU_const_type = 0xf4,
    DW_OP_GNU_regval_type = 0xf5, DW_OP_GNU_deref_type = 0xf6, DW_OP_GNU_convert = 0xf7,
    DW_OP_GNU_reinterpret = 0xf9, DW_OP_GNU_parameter_ref = 0xfa, DW_OP_GNU_encoded_addr = 0xf1, DW_OP_lo_user = 0xe0,
    DW_OP_GNU_push_tls_address = 0xe0, DW_OP_GNU_uninit = 0xf0, DW_OP_GNU_entry_value = 0xf3,
    DW_OP_hi_user = 0xff
};

typedef enum operand_form {
    OPERANDS_NONE, OPERANDS_U8, OPERANDS_S8, OPERANDS_U16, OPERANDS_S16, OPERANDS_U32,
    OPERANDS_S32, OPERANDS_U64, OPERANDS_S64, OPERANDS_ADDR, OPERANDS_ULEB, OPERANDS_SLEB,
    OPERANDS_ULEB_SLEB, OPERANDS_ULEB_ULEB, OPERANDS_BLOCK, OPERANDS_U8_ULEB,
    OPERANDS_ULEB_BLOCK8, /* ULEB type offset, then a block with a 1-byte length (const_type) */
    OPERANDS_ENCODED,     /* a DW_EH_PE encoding byte, then a value of that encoding's size */
    OPERANDS_UNKNOWN
} operand_form;

typedef struct expr_op {
    uint8_t opcode;
    const char *name;
    operand_form form;
    uint64_t u;        /* first operand (unsigned view) */
    int64_t s;         /* first operand (signed view), or the second operand of bregx */
    uint64_t u2;       /* second operand of bit_piece */
    uint64_t block_offset, block_len; /* BLOCK: offset within the expression */
} expr_op;

static const char *op_name(uint8_t op, operand_form *form)
{
    *form = OPERANDS_NONE;
    switch (op) {
    case DW_OP_addr: *form = OPERANDS_ADDR; return "DW_OP_addr";
    case DW_OP_deref: return "DW_OP_deref";
    case DW_OP_const1u: *form = OPERANDS_U8; return "DW_OP_const1u";
    case DW_OP_const1s: *form = OPERANDS_S8; return "DW_OP_const1s";
    case DW_OP_const2u: *form = OPERANDS_U16; return "DW_OP_const2u";
    case DW_OP_const2s: *form = OPERANDS_S16; return "DW_OP_const2s";
    case DW_OP_const4u: *form = OPERANDS_U32; return "DW_OP_const4u";
    case DW_OP_const4s: *form = OPERANDS_S32; return "DW_OP_const4s";
    case DW_OP_const8u: *form = OPERANDS_U64; return "DW_OP_const8u";
    case DW_OP_const8s: *form = OPERANDS_S64; return "DW_OP_const8s";
    case DW_OP_constu: *form = OPERANDS_ULEB; return "DW_OP_constu";
    case DW_OP_consts: *form = OPERANDS_SLEB; return "DW_OP_consts";
    case DW_OP_dup: return "DW_OP_dup";
    case DW_OP_drop: return "DW_OP_drop";
    case DW_OP_over: return "DW_OP_over";
    case DW_OP_pick: *form = OPERANDS_U8; return "DW_OP_pick";
    case DW_OP_swap: return "DW_OP_swap";
    case DW_OP_rot: return "DW_OP_rot";
    case DW_OP_xderef: return "DW_OP_xderef";
    case DW_OP_abs: return "DW_OP_abs";
    case DW_OP_and: return "DW_OP_and";
    case DW_OP_div: return "DW_OP_div";
    case DW_OP_minus: return "DW_OP_minus";
    case DW_OP_mod: return "DW_OP_mod";
    case DW_OP_mul: return "DW_OP_mul";
    case DW_OP_neg: return "DW_OP_neg";
    case DW_OP_not: return "DW_OP_not";
    case DW_OP_or: return "DW_OP_or";
    case DW_OP_plus: return "DW_OP_plus";
    case DW_OP_plus_uconst: *form = OPERANDS_ULEB; return "DW_OP_plus_uconst";
    case DW_OP_shl: return "DW_OP_shl";
    case DW_OP_shr: return "DW_OP_shr";
    case DW_OP_shra: return "DW_OP_shra";
    case DW_OP_xor: return "DW_OP_xor";
    case DW_OP_bra: *form = OPERANDS_S16; return "DW_OP_bra";
    case DW_OP_eq: return "DW_OP_eq";
    case DW_OP_ge: return "DW_OP_ge";
    case DW_OP_gt: return "DW_OP_gt";
    case DW_OP_le: return "DW_OP_le";
    case DW_OP_lt: return "DW_OP_lt";
    case DW_OP_ne: return "DW_OP_ne";
    case DW_OP_skip: *form = OPERANDS_S16; return "DW_OP_skip";
    case DW_OP_regx: *form = OPERANDS_ULEB; return "DW_OP_regx";
    case DW_OP_fbreg: *form = OPERANDS_SLEB; return "DW_OP_fbreg";
    case DW_OP_bregx: *form = OPERANDS_ULEB_SLEB; return "DW_OP_bregx";
    case DW_OP_piece: *form = OPERANDS_ULEB; return "DW_OP_piece";
    case DW_OP_deref_size: *form = OPERANDS_U8; return "DW_OP_deref_size";
    case DW_OP_xderef_size: *form = OPERANDS_U8; return "DW_OP_xderef_size";
    case DW_OP_nop: return "DW_OP_nop";
    case DW_OP_push_object_address: return "DW_OP_push_object_address";
    case DW_OP_call2: *form = OPERANDS_S16; return "DW_OP_call2";
    case DW_OP_call4: *form = OPERANDS_S32; return "DW_OP_call4";
    case DW_OP_form_tls_address: return "DW_OP_form_tls_address";
    case DW_OP_call_frame_cfa: return "DW_OP_call_frame_cfa";
    case DW_OP_bit_piece: *form = OPERANDS_ULEB_ULEB; return "DW_OP_bit_piece";
    case DW_OP_implicit_value: *form = OPERANDS_BLOCK; return "DW_OP_implicit_value";
    case DW_OP_stack_value: return "DW_OP_stack_value";
    case DW_OP_entry_value: *form = OPERANDS_BLOCK; return "DW_OP_entry_value";
    case DW_OP_addrx: *form = OPERANDS_ULEB; return "DW_OP_addrx";
    case DW_OP_const_type: *form = OPERANDS_ULEB_BLOCK8; return "DW_OP_const_type";
    case DW_OP_GNU_const_type: *form = OPERANDS_ULEB_BLOCK8; return "DW_OP_GNU_const_type";
    case DW_OP_regval_type: *form = OPERANDS_ULEB_ULEB; return "DW_OP_regval_type";
    case DW_OP_GNU_regval_type: *form = OPERANDS_ULEB_ULEB; return "DW_OP_GNU_regval_type";
    case DW_OP_deref_type: *form = OPERANDS_U8_ULEB; return "DW_OP_deref_type";
    case DW_OP_GNU_deref_type: *form = OPERANDS_U8_ULEB; return "DW_OP_GNU_deref_type";
    case DW_OP_convert: *form = OPERANDS_ULEB; return "DW_OP_convert";
    case DW_OP_GNU_convert: *form = OPERANDS_ULEB; return "DW_OP_GNU_convert";
    case DW_OP_reinterpret: *form = OPERANDS_ULEB; return "DW_OP_reinterpret";
    case DW_OP_GNU_reinterpret: *form = OPERANDS_ULEB; return "DW_OP_GNU_reinterpret";
    case DW_OP_GNU_parameter_ref: *form = OPERANDS_U32; return "DW_OP_GNU_parameter_ref";
    case DW_OP_GNU_encoded_addr: *form = OPERANDS_ENCODED; return "DW_OP_GNU_encoded_addr";
    case DW_OP_GNU_addr_index: *form = OPERANDS_ULEB; return "DW_OP_GNU_addr_index";
    case DW_OP_GNU_const_index: *form = OPERANDS_ULEB; return "DW_OP_GNU_const_index";
    case DW_OP_GNU_push_tls_address: return "DW_OP_GNU_push_tls_address";
    case DW_OP_GNU_uninit: return "DW_OP_GNU_uninit";
    case DW_OP_GNU_entry_value: *form = OPERANDS_BLOCK; return "DW_OP_GNU_entry_value";
    default: break;
    }
    if (op >= DW_OP_lit0 && op <= DW_OP_lit31)
        return "DW_OP_lit";
    if (op >= DW_OP_reg0 && op <= DW_OP_reg31)
        return "DW_OP_reg";
    if (op >= DW_OP_breg0 && op <= DW_OP_breg31) {
        *form = OPERANDS_SLEB;
        return "DW_OP_breg";
    }
    *form = OPERANDS_UNKNOWN;
    return NULL;
}

/* Decode the operation at the cursor. False if truncated or unknown (op->form says which). */
static bool expr_next(fu_cursor *c, unsigned address_size, expr_op *op)
{
    memset(op, 0, sizeof *op);
    op->opcode = fu_read_u8(c);
    op->name = op_name(op->opcode, &op->form);
    switch (op->form) {
    case OPERANDS_NONE: break;
    case OPERANDS_U8: op->u = fu_read_uint(c, 1); break;
    case OPERANDS_S8: op->s = fu_read_sint(c, 1); op->u = (uint64_t)op->s; break;
    case OPERANDS_U16: op->u = fu_read_uint(c, 2); break;
    case OPERANDS_S16: op->s = fu_read_sint(c, 2); op->u = (uint64_t)op->s; break;
    case OPERANDS_U32: op->u = fu_read_uint(c, 4); break;
    case OPERANDS_S32: op->s = fu_read_sint(c, 4); op->u = (uint64_t)op->s; break;
    case OPERANDS_U64: op->u = fu_read_uint(c, 8); break;
    case OPERANDS_S64: op->s = fu_read_sint(c, 8); op->u = (uint64_t)op->s; break;
    case OPERANDS_ADDR: op->u = fu_read_uint(c, address_size); break;
    case OPERANDS_ULEB: op->u = fu_read_uleb(c); break;
    case OPERANDS_SLEB: op->s = fu_read_sleb(c); op->u = (uint64_t)op->s; break;
    case OPERANDS_ULEB_SLEB: op->u = fu_read_uleb(c); op->s = fu_read_sleb(c); break;
    case OPERANDS_ULEB_ULEB: op->u = fu_read_uleb(c); op->u2 = fu_read_uleb(c); break;
    case OPERANDS_U8_ULEB: op->u = fu_read_uint(c, 1); op->u2 = fu_read_uleb(c); break;
    case OPERANDS_ENCODED: {
        op->u2 = fu_read_uint(c, 1);
        unsigned size = fu_encoded_size((uint8_t)op->u2, address_size);
        op->u = fu_read_uint(c, size ? size : address_size); /* as readelf sizes LEB encodings */
        break;
    }
    case OPERANDS_ULEB_BLOCK8:
        op->u = fu_read_uleb(c);
        op->block_len = fu_read_uint(c, 1);
        op->block_offset = fu_cursor_offset(c);
        if (!c->failed && op->block_len > fu_cursor_left(c))
            c->failed = true;
        else
            fu_cursor_skip(c, op->block_len);
        break;
    case OPERANDS_BLOCK:
        op->block_len = fu_read_uleb(c);
        op->block_offset = fu_cursor_offset(c);
        if (!c->failed && op->block_len > fu_cursor_left(c))
            c->failed = true;
        else
            fu_cursor_skip(c, op->block_len);
        break;
    case OPERANDS_UNKNOWN: return false;
    }
    return !c->failed;
}

/* ---- printing ------------------------------------------------------------------------------------ */

/* Operations whose operand size depends on a compilation unit's DWARF version and offset size,
 * which call frame information does not have. */
static const char *in_frame_info_name(uint8_t op)
{
    switch (op) {
    case 0x9a: return "DW_OP_call_ref";
    case 0xa0: return "DW_OP_implicit_pointer";
    case 0xf2: return "DW_OP_GNU_implicit_pointer";
    case 0xfd: return "DW_OP_GNU_variable_value";
    default: return NULL;
    }
}

static void readelf_regname(fu_out *o, uint64_t reg)
{
    const char *name = fu_register_name(reg);
    if (name)
        fu_out_printf(o, "%s", name);
    else
        fu_out_printf(o, "r%d", (int)reg);
}

/* DW_OP_entry_value blocks nest expressions; deeper than this is not real CFI, and each level
 * costs a C stack frame. */
#define FU_EXPR_MAX_NESTING 8

static void print_readelf(fu_out *o, const uint8_t *expr, uint64_t len, unsigned address_size, unsigned depth);

void fu_expr_print_readelf(fu_out *o, const uint8_t *expr, uint64_t len, unsigned address_size)
{
    print_readelf(o, expr, len, address_size, 0);
}

static void print_readelf(fu_out *o, const uint8_t *expr, uint64_t len, unsigned address_size, unsigned depth)
{
    fu_cursor c = fu_cursor_make(expr, expr, expr + len);
    expr_op op;
    while (fu_cursor_left(&c) > 0) {
        bool ok = expr_next(&c, address_size, &op);
        const char *without_meaning = op.form == OPERANDS_UNKNOWN ? in_frame_info_name(op.opcode) : NULL;
        if (without_meaning) {
            /* operands sized by a compilation unit that CFI does not have: readelf stops here */
            fu_out_printf(o, "(%s in frame info)", without_meaning);
            return;
        }
        if (op.form == OPERANDS_UNKNOWN) {
            if (op.opcode >= DW_OP_lo_user)
                fu_out_printf(o, "(User defined location op %#x)", op.opcode);
            else
                fu_out_printf(o, "(Unknown location op %#x)", op.opcode);
            return; /* readelf cannot find the next operation either */
        }
        uint8_t code = op.opcode;
        if (code >= DW_OP_lit0 && code <= DW_OP_lit31) {
            fu_out_printf(o, "DW_OP_lit%d", code - DW_OP_lit0);
        } else if (code >= DW_OP_reg0 && code <= DW_OP_reg31) {
            fu_out_printf(o, "DW_OP_reg%d (", code - DW_OP_reg0);
            readelf_regname(o, code - DW_OP_reg0);
            fu_out_write(o, ")", 1);
        } else if (code >= DW_OP_breg0 && code <= DW_OP_breg31) {
            fu_out_printf(o, "DW_OP_breg%d (", code - DW_OP_breg0);
            readelf_regname(o, code - DW_OP_breg0);
            fu_out_printf(o, "): %lld", (long long)op.s);
        } else if (code == DW_OP_regx) {
            fu_out_printf(o, "DW_OP_regx: %llu (", (unsigned long long)op.u);
            readelf_regname(o, op.u);
            fu_out_write(o, ")", 1);
        } else if (code == DW_OP_bregx) {
            fu_out_printf(o, "DW_OP_bregx: %llu (", (unsigned long long)op.u);
            readelf_regname(o, op.u);
            fu_out_printf(o, ") %lld", (long long)op.s);
        } else if (code == DW_OP_addr) {
            fu_out_printf(o, "DW_OP_addr: %llx", (unsigned long long)op.u);
        } else if (op.form == OPERANDS_ULEB_BLOCK8) {
            fu_out_printf(o, "%s: <%#llx>  %llu byte block: ", op.name, (unsigned long long)op.u,
                          (unsigned long long)op.block_len);
            for (uint64_t i = 0; i < op.block_len && ok; i++)
                fu_out_printf(o, "%x ", expr[op.block_offset + i]);
        } else if (op.form == OPERANDS_ENCODED) {
            /* readelf applies pcrel from the section's address here; a CFI expression has none */
            fu_out_printf(o, "%s: fmt:%02x addr:%0*llx", op.name, (unsigned)op.u2, (int)(address_size * 2),
                          (unsigned long long)op.u);
        } else if (code == DW_OP_regval_type || code == DW_OP_GNU_regval_type) {
            fu_out_printf(o, "%s: %llu (", op.name, (unsigned long long)op.u);
            readelf_regname(o, op.u);
            fu_out_printf(o, ") <%#llx>", (unsigned long long)op.u2);
        } else if (op.form == OPERANDS_U8_ULEB) {
            fu_out_printf(o, "%s: %lld <%#llx>", op.name, (long long)op.u, (unsigned long long)op.u2);
        } else if (code == DW_OP_convert || code == DW_OP_GNU_convert || code == DW_OP_reinterpret ||
                   code == DW_OP_GNU_reinterpret) {
            fu_out_printf(o, "%s <%#llx>", op.name, (unsigned long long)op.u);
        } else if (code == DW_OP_GNU_parameter_ref) {
            fu_out_printf(o, "%s: <%#llx>", op.name, (unsigned long long)op.u);
        } else if (code == DW_OP_addrx || code == DW_OP_GNU_addr_index || code == DW_OP_GNU_const_index) {
            fu_out_printf(o, "%s <%#llx>", op.name, (unsigned long long)op.u);
        } else if (code == DW_OP_call2 || code == DW_OP_call4) {
            fu_out_printf(o, "%s: <%#llx>", op.name, (unsigned long long)op.s);
        } else if (code == DW_OP_bit_piece) {
            fu_out_printf(o, "DW_OP_bit_piece: size: %llu offset: %llu ", (unsigned long long)op.u,
                          (unsigned long long)op.u2);
        } else if (code == DW_OP_implicit_value) {
            fu_out_printf(o, "DW_OP_implicit_value %llu byte block: ", (unsigned long long)op.block_len);
            for (uint64_t i = 0; i < op.block_len && ok; i++)
                fu_out_printf(o, "%x ", expr[op.block_offset + i]);
        } else if (code == DW_OP_entry_value || code == DW_OP_GNU_entry_value) {
            fu_out_printf(o, "%s: (", op.name);
            if (ok && depth < FU_EXPR_MAX_NESTING)
                print_readelf(o, expr + op.block_offset, op.block_len, address_size, depth + 1);
            else if (ok)
                fu_out_printf(o, "<nested deeper than %d>", FU_EXPR_MAX_NESTING);
            fu_out_write(o, ")", 1);
        } else if (code == DW_OP_GNU_push_tls_address) {
            fu_out_printf(o, "DW_OP_GNU_push_tls_address or DW_OP_HP_unknown");
        } else {
            switch (op.form) {
            case OPERANDS_NONE: fu_out_printf(o, "%s", op.name); break;
            case OPERANDS_S8: case OPERANDS_S16: case OPERANDS_S32: case OPERANDS_S64: case OPERANDS_SLEB:
                fu_out_printf(o, "%s: %lld", op.name, (long long)op.s);
                break;
            default: fu_out_printf(o, "%s: %llu", op.name, (unsigned long long)op.u); break;
            }
        }
        if (!ok)
            return;
        if (fu_cursor_left(&c) > 0)
            fu_out_write(o, "; ", 2);
    }
}

void fu_expr_print_llvm(fu_out *o, const uint8_t *expr, uint64_t len, unsigned address_size)
{
    fu_cursor c = fu_cursor_make(expr, expr, expr + len);
    expr_op op;
    bool first = true;
    while (fu_cursor_left(&c) > 0) {
        if (!first)
            fu_out_write(o, ", ", 2);
        first = false;
        bool ok = expr_next(&c, address_size, &op);
        uint8_t code = op.opcode;
        if (op.form == OPERANDS_UNKNOWN) {
            fu_out_printf(o, "<decoding error> %02x", code);
            return;
        }
        if (code >= DW_OP_lit0 && code <= DW_OP_lit31) {
            fu_out_printf(o, "DW_OP_lit%d", code - DW_OP_lit0);
        } else if (code >= DW_OP_reg0 && code <= DW_OP_reg31 && fu_llvm_register_name(code - DW_OP_reg0)) {
            fu_out_printf(o, "DW_OP_reg%d %s", code - DW_OP_reg0, fu_llvm_register_name(code - DW_OP_reg0));
        } else if (code >= DW_OP_breg0 && code <= DW_OP_breg31 && fu_llvm_register_name(code - DW_OP_breg0)) {
            fu_out_printf(o, "DW_OP_breg%d %s%+lld", code - DW_OP_breg0, fu_llvm_register_name(code - DW_OP_breg0),
                          (long long)op.s);
        } else if (code == DW_OP_regx && fu_llvm_register_name(op.u)) {
            fu_out_printf(o, "DW_OP_regx %s", fu_llvm_register_name(op.u));
        } else if (code == DW_OP_bregx && fu_llvm_register_name(op.u)) {
            fu_out_printf(o, "DW_OP_bregx %s%+lld", fu_llvm_register_name(op.u), (long long)op.s);
        } else if (code == DW_OP_bregx) { /* LLVM prints the operands of an unnamed register */
            fu_out_printf(o, "DW_OP_bregx 0x%llx %+lld", (unsigned long long)op.u, (long long)op.s);
        } else {
            fu_out_printf(o, "%s", op.name);
            switch (op.form) {
            case OPERANDS_NONE: break;
            case OPERANDS_S8: case OPERANDS_S16: case OPERANDS_S32: case OPERANDS_S64: case OPERANDS_SLEB:
                fu_out_printf(o, " %+lld", (long long)op.s);
                break;
            case OPERANDS_ULEB_ULEB:
            case OPERANDS_U8_ULEB:
            case OPERANDS_ENCODED:
                fu_out_printf(o, " 0x%llx 0x%llx", (unsigned long long)op.u, (unsigned long long)op.u2);
                break;
            case OPERANDS_ULEB_BLOCK8:
                fu_out_printf(o, " 0x%llx 0x%llx", (unsigned long long)op.u, (unsigned long long)op.block_len);
                for (uint64_t i = 0; i < op.block_len && ok; i++)
                    fu_out_printf(o, " 0x%02x", expr[op.block_offset + i]);
                break;
            case OPERANDS_BLOCK:
                fu_out_printf(o, " 0x%llx", (unsigned long long)op.block_len);
                for (uint64_t i = 0; i < op.block_len && ok; i++)
                    fu_out_printf(o, " 0x%02x", expr[op.block_offset + i]);
                break;
            default: fu_out_printf(o, " 0x%llx", (unsigned long long)op.u); break;
            }
        }
        if (!ok)
            return;
    }
}

/* ---- evaluation -------------------------------------------------------------------------------- */

static bool reg_value(const fu_expr_context *ctx, uint64_t reg, uint64_t *out)
{
    if (reg >= FU_MAX_COLUMNS || !(ctx->valid[reg / 64] >> (reg % 64) & 1))
        return false;
    *out = ctx->regs[reg];
    return true;
}

fu_status fu_expr_evaluate(const uint8_t *expr, uint64_t len, const fu_expr_context *ctx,
                           bool has_initial, uint64_t initial, uint64_t *result, fu_error *err)
{
    uint64_t stack[FU_EXPR_STACK];
    unsigned depth = 0;
    if (has_initial)
        stack[depth++] = initial;
    fu_cursor c = fu_cursor_make(expr, expr, expr + len);
    expr_op op;
    unsigned address_size = ctx->address_size ? ctx->address_size : 8;
    for (unsigned steps = 0; fu_cursor_left(&c) > 0; steps++) {
        if (steps == FU_EXPR_MAX_STEPS)
            return fu_fail(err, FU_ERR_EXPR, "expression executed more than %d operations",
                           FU_EXPR_MAX_STEPS);
        uint64_t at = fu_cursor_offset(&c);
        if (!expr_next(&c, address_size, &op)) {
            if (op.form == OPERANDS_UNKNOWN)
                return fu_fail(err, FU_ERR_EXPR, "unknown operation 0x%02x at expression offset 0x%llx",
                               op.opcode, (unsigned long long)at);
            return fu_fail(err, FU_ERR_EXPR, "%s at expression offset 0x%llx: truncated operand",
                           op.name, (unsigned long long)at);
        }
        uint8_t code = op.opcode;
        /* operands popped, values pushed */
        unsigned need = 0;
        switch (code) {
        case DW_OP_drop: case DW_OP_dup: case DW_OP_abs: case DW_OP_neg: case DW_OP_not:
        case DW_OP_plus_uconst: case DW_OP_deref: case DW_OP_deref_size: case DW_OP_bra:
            need = 1; break;
        case DW_OP_over: case DW_OP_swap: case DW_OP_and: case DW_OP_div: case DW_OP_minus:
        case DW_OP_mod: case DW_OP_mul: case DW_OP_or: case DW_OP_plus: case DW_OP_shl:
        case DW_OP_shr: case DW_OP_shra: case DW_OP_xor: case DW_OP_eq: case DW_OP_ge:
        case DW_OP_gt: case DW_OP_le: case DW_OP_lt: case DW_OP_ne:
            need = 2; break;
        case DW_OP_rot: need = 3; break;
        case DW_OP_pick: need = (unsigned)(op.u + 1 > 255 ? 256 : op.u + 1); break;
        default: break;
        }
        if (depth < need)
            return fu_fail(err, FU_ERR_EXPR, "%s at expression offset 0x%llx: stack underflow",
                           op.name, (unsigned long long)at);
        uint64_t push = 0;
        bool pushes = true;
        uint64_t a = depth >= 1 ? stack[depth - 1] : 0, b = depth >= 2 ? stack[depth - 2] : 0;
        switch (code) {
        case DW_OP_addr: case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u:
        case DW_OP_const2s: case DW_OP_const4u: case DW_OP_const4s: case DW_OP_const8u:
        case DW_OP_const8s: case DW_OP_constu: case DW_OP_consts:
            push = op.u; break;
        case DW_OP_dup: push = a; break;
        case DW_OP_drop: depth--; pushes = false; break;
        case DW_OP_over: push = b; break;
        case DW_OP_pick: push = stack[depth - 1 - op.u]; break;
        case DW_OP_swap: stack[depth - 1] = b; stack[depth - 2] = a; pushes = false; break;
        case DW_OP_rot: /* top three: a b c (top) -> c a b */
            stack[depth - 1] = b;
            stack[depth - 2] = stack[depth - 3];
            stack[depth - 3] = a;
            pushes = false;
            break;
        case DW_OP_abs: depth--; push = (int64_t)a < 0 ? (uint64_t)0 - a : a; break;
        case DW_OP_neg: depth--; push = (uint64_t)0 - a; break;
        case DW_OP_not: depth--; push = ~a; break;
        case DW_OP_plus_uconst: depth--; push = a + op.u; break;
        case DW_OP_and: depth -= 2; push = b & a; break;
        case DW_OP_or: depth -= 2; push = b | a; break;
        case DW_OP_xor: depth -= 2; push = b ^ a; break;
        case DW_OP_plus: depth -= 2; push = b + a; break;
        case DW_OP_minus: depth -= 2; push = b - a; break;
        case DW_OP_mul: depth -= 2; push = b * a; break;
        case DW_OP_div:
            if (a == 0)
                return fu_fail(err, FU_ERR_EXPR, "DW_OP_div by zero at expression offset 0x%llx",
                               (unsigned long long)at);
            depth -= 2;
            /* signed division (DWARF 5 §2.5.1.4), INT64_MIN / -1 wraps */
            push = ((int64_t)b == INT64_MIN && (int64_t)a == -1) ? b : (uint64_t)((int64_t)b / (int64_t)a);
            break;
        case DW_OP_mod:
            if (a == 0)
                return fu_fail(err, FU_ERR_EXPR, "DW_OP_mod by zero at expression offset 0x%llx",
                               (unsigned long long)at);
            depth -= 2; push = b % a; break;
        case DW_OP_shl: depth -= 2; push = a >= 64 ? 0 : b << a; break;
        case DW_OP_shr: depth -= 2; push = a >= 64 ? 0 : b >> a; break;
        case DW_OP_shra:
            depth -= 2;
            push = a >= 64 ? ((int64_t)b < 0 ? UINT64_MAX : 0) : (uint64_t)((int64_t)b >> a);
            break;
        case DW_OP_eq: depth -= 2; push = (int64_t)b == (int64_t)a; break;
        case DW_OP_ge: depth -= 2; push = (int64_t)b >= (int64_t)a; break;
        case DW_OP_gt: depth -= 2; push = (int64_t)b > (int64_t)a; break;
        case DW_OP_le: depth -= 2; push = (int64_t)b <= (int64_t)a; break;
        case DW_OP_lt: depth -= 2; push = (int64_t)b < (int64_t)a; break;
        case DW_OP_ne: depth -= 2; push = (int64_t)b != (int64_t)a; break;
        case DW_OP_skip:
        case DW_OP_bra: {
            pushes = false;
            bool jump = true;
            if (code == DW_OP_bra) {
                depth--;
                jump = a != 0;
            }
            if (jump) {
                int64_t target = (int64_t)fu_cursor_offset(&c) + op.s;
                if (target < 0 || (uint64_t)target > len)
                    return fu_fail(err, FU_ERR_EXPR,
                                   "%s at expression offset 0x%llx jumps outside the expression (to %lld)",
                                   op.name, (unsigned long long)at, (long long)target);
                c.pos = expr + target;
            }
            break;
        }
        case DW_OP_deref:
        case DW_OP_deref_size: {
            unsigned size = code == DW_OP_deref ? address_size : (unsigned)op.u;
            if (size < 1 || size > 8)
                return fu_fail(err, FU_ERR_EXPR, "DW_OP_deref_size of %u bytes", size);
            if (!ctx->read_memory || !ctx->read_memory(ctx->opaque, a, size, &push))
                return fu_fail(err, FU_ERR_EXPR, "%s: memory at 0x%llx is unreadable", op.name,
                               (unsigned long long)a);
            depth--;
            break;
        }
        case DW_OP_nop: pushes = false; break;
        case DW_OP_regx:
        case DW_OP_bregx: {
            uint64_t v;
            if (!reg_value(ctx, op.u, &v))
                return fu_fail(err, FU_ERR_EXPR, "%s: value of register %llu is unknown", op.name,
                               (unsigned long long)op.u);
            push = code == DW_OP_bregx ? v + (uint64_t)op.s : v;
            break;
        }
        default:
            if (code >= DW_OP_lit0 && code <= DW_OP_lit31) {
                push = code - DW_OP_lit0;
            } else if ((code >= DW_OP_reg0 && code <= DW_OP_reg31) ||
                       (code >= DW_OP_breg0 && code <= DW_OP_breg31)) {
                /* DW_OP_regN in CFI pushes the register's value, as libgcc does. */
                unsigned reg = code >= DW_OP_breg0 ? code - DW_OP_breg0 : code - DW_OP_reg0;
                uint64_t v;
                if (!reg_value(ctx, reg, &v))
                    return fu_fail(err, FU_ERR_EXPR, "%s%u: value of register %u is unknown", op.name,
                                   reg, reg);
                push = code >= DW_OP_breg0 ? v + (uint64_t)op.s : v;
            } else {
                return fu_fail(err, FU_ERR_EXPR,
                               "%s at expression offset 0x%llx is not allowed in call frame information",
                               op.name, (unsigned long long)at);
            }
        }
        if (pushes) {
            if (depth == FU_EXPR_STACK)
                return fu_fail(err, FU_ERR_EXPR, "expression stack deeper than %d values", FU_EXPR_STACK);
            stack[depth++] = push;
        }
    }
    if (depth == 0)
        return fu_fail(err, FU_ERR_EXPR, "expression left an empty stack");
    *result = stack[depth - 1];
    return FU_OK;
}

bool fu_expr_match_breg(const uint8_t *expr, uint64_t len, unsigned *reg, int32_t *offset, bool *deref)
{
    fu_cursor c = fu_cursor_make(expr, expr, expr + len);
    uint8_t op = fu_read_u8(&c);
    if (c.failed || op < DW_OP_breg0 || op > DW_OP_breg31)
        return false;
    int64_t k = fu_read_sleb(&c);
    if (c.failed || k < INT32_MIN || k > INT32_MAX)
        return false;
    *deref = false;
    if (fu_cursor_left(&c) == 1) {
        if (fu_read_u8(&c) != DW_OP_deref)
            return false;
        *deref = true;
    }
    if (fu_cursor_left(&c) != 0)
        return false;
    *reg = (unsigned)(op - DW_OP_breg0);
    *offset = (int32_t)k;
    return true;
}
