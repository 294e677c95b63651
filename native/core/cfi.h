/* fastunwind CFI core: the data model shared by cfi_parse.c, cfi_eval.c, dwarf_expr.c,
 * cfi_print.c, lookup.c and the Python binding (py/py_cfi.c).
 *
 * Pipeline: section bytes --cfi_parse--> entries (CIE/FDE headers, instruction ranges)
 *           --cfi_eval--> rows (address, interned row state) --lookup--> the row at a PC.
 *
 * Rows are DWARF's rows (DWARF 5 §6.4.1): each advance instruction closes the current row, and the
 * final state after the last instruction is the last row. A row state holds the CFA rule and a rule
 * for every register column that has one; equal states are interned once, so a row costs 12 bytes
 * (8-byte address + 4-byte state id) however many registers it restores.
 *
 * Registers use the DWARF x86-64 numbering (x86_64.h).
 */
#ifndef FASTUNWIND_CFI_H
#define FASTUNWIND_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cursor.h"
#include "error.h"
#include "intern.h"
#include "x86_64.h"

/* ---- bounds on input-driven work (each has a named error) ---------------------------------- */

/* Register columns a rule may name. The x86-64 DWARF register map ends at 130 (k7 is 125);
 * readelf refuses columns above 126. */
#define FU_MAX_COLUMNS 128
/* Depth of DW_CFA_remember_state. GCC and LLVM never nest more than 2; 64 leaves room for
 * hand-written assembly while bounding memory. */
#define FU_MAX_STATE_STACK 64
/* Length of an augmentation string; the longest in use is "zPLRSB" style (under 8 chars). */
#define FU_MAX_AUGMENTATION 32
/* DWARF expression evaluation: value stack depth and number of operations executed
 * (a DW_OP_skip loop must terminate). */
#define FU_EXPR_STACK 64
#define FU_EXPR_MAX_STEPS 4096

/* ---- errors --------------------------------------------------------------------------------- */

/* fu_status, fu_error, fu_fail and the status -> exception table: error.h */

/* ---- sections and pointer encodings ----------------------------------------------------------- */

typedef enum fu_section_kind { FU_SECTION_EH_FRAME = 0, FU_SECTION_DEBUG_FRAME = 1 } fu_section_kind;

/* DW_EH_PE_* (LSB 5.0 §10.5, "DWARF Exception Header Encoding"). */
enum {
    FU_PE_absptr = 0x00, FU_PE_uleb128 = 0x01, FU_PE_udata2 = 0x02, FU_PE_udata4 = 0x03,
    FU_PE_udata8 = 0x04, FU_PE_sleb128 = 0x09, FU_PE_sdata2 = 0x0a, FU_PE_sdata4 = 0x0b,
    FU_PE_sdata8 = 0x0c, FU_PE_signed = 0x08,
    FU_PE_pcrel = 0x10, FU_PE_textrel = 0x20, FU_PE_datarel = 0x30, FU_PE_funcrel = 0x40,
    FU_PE_aligned = 0x50, FU_PE_indirect = 0x80, FU_PE_omit = 0xff
};

/* A PT_LOAD segment's file bytes, to resolve DW_EH_PE_indirect pointers stated in the file. */
typedef struct fu_image_segment {
    uint64_t vaddr;
    const uint8_t *data;
    uint64_t size;
} fu_image_segment;

/* The segment of `segments` whose bytes hold [address, address + size), or NULL (never overflows). */
const fu_image_segment *fu_image_segment_holding(const fu_image_segment *segments, size_t count, uint64_t address,
                                                 uint64_t size);

/* Where a section lives and the bases that relative pointer encodings need. */
typedef struct fu_section {
    fu_section_kind kind;
    const uint8_t *data;
    uint64_t size;
    uint64_t address;      /* sh_addr (svma of byte 0); the pcrel base */
    uint64_t text_base;    /* DW_EH_PE_textrel base (.text sh_addr), 0 if unknown */
    uint64_t data_base;    /* DW_EH_PE_datarel base (.got sh_addr on x86-64), 0 if unknown */
    uint8_t address_size;  /* 8 for ELF64 */
    const fu_image_segment *segments; /* for DW_EH_PE_indirect; may be NULL */
    size_t segment_count;
} fu_section;

/* ---- rules, states, rows ---------------------------------------------------------------------- */

typedef enum fu_rule_kind {
    FU_RULE_UNSPECIFIED = 0, /* no rule given by the CFI (readelf prints "u") */
    FU_RULE_UNDEFINED,       /* DW_CFA_undefined: not recoverable (end of stack for the RA) */
    FU_RULE_SAME_VALUE,
    FU_RULE_OFFSET,          /* saved at CFA + value */
    FU_RULE_VAL_OFFSET,      /* value is CFA + value */
    FU_RULE_REGISTER,        /* saved in register `reg` */
    FU_RULE_EXPRESSION,      /* saved at the address the expression computes */
    FU_RULE_VAL_EXPRESSION,  /* value is what the expression computes */
    /* CFA rules */
    FU_CFA_REG_OFFSET,       /* CFA = reg + value */
    FU_CFA_EXPRESSION,       /* CFA = expression */
    FU_RULE_KIND_COUNT
} fu_rule_kind;

/* "UNSPECIFIED", "UNDEFINED", ..., "CFA_EXPRESSION": a fu_rule_kind's name without its prefix (the
 * members of fastunwind.cfi.RuleKind); "?" else. */
const char *fu_rule_kind_name(int kind);

/* One rule. Expressions are referenced by their offset in the section (they stay in the section's
 * bytes, which the table keeps alive). */
typedef struct fu_rule {
    uint8_t kind;       /* fu_rule_kind */
    uint8_t reserved;
    uint16_t reg;       /* FU_RULE_REGISTER target, FU_CFA_REG_OFFSET base register */
    uint32_t expr_len;  /* expression kinds: length in bytes */
    int64_t value;      /* offset, or expression kinds: offset of the expression in the section */
} fu_rule;

/* An interned row state: the CFA rule and `count` (column, rule) pairs in rule_pool, sorted by
 * column, listing every column whose rule is not FU_RULE_UNSPECIFIED. */
typedef struct fu_state {
    fu_rule cfa;
    uint32_t first;  /* index into fu_cfi_table.rule_pool / column_pool */
    uint16_t count;
    uint16_t low_columns; /* bit c: column c (< 16, the general-purpose registers) is listed */
} fu_state;

/* ---- entries ---------------------------------------------------------------------------------- */

typedef enum fu_entry_kind { FU_ENTRY_CIE = 0, FU_ENTRY_FDE = 1, FU_ENTRY_TERMINATOR = 2 } fu_entry_kind;

typedef struct fu_cie_info {
    uint8_t version;
    uint8_t address_size;
    uint8_t segment_size;
    uint8_t fde_encoding;       /* 'R', default absptr */
    uint8_t lsda_encoding;      /* 'L', FU_PE_omit if absent */
    uint8_t personality_encoding; /* 'P', FU_PE_omit if absent */
    bool signal_frame;          /* 'S' */
    bool has_b;                 /* 'B' (AArch64 BTI; parsed, no effect on x86-64) */
    bool has_z;
    uint8_t augmentation_len;
    char augmentation[FU_MAX_AUGMENTATION + 1];
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_column;
    uint64_t personality;       /* resolved svma of the personality routine (after indirect) */
    bool personality_indirect_unresolved;
} fu_cie_info;

typedef struct fu_entry {
    uint8_t kind;               /* fu_entry_kind */
    uint8_t offset_size;        /* 4, or 8 for 64-bit DWARF */
    bool all_nops;              /* the instructions are only DW_CFA_nop (readelf prints no rows) */
    bool has_error;             /* parsing or evaluating failed: message in error_message */
    bool header_ok;             /* the header decoded: insns_offset and the fields are valid */
    uint32_t cie_entry;         /* entry index of the CIE (a CIE's own index); UINT32_MAX if none */
    uint32_t cie_slot;          /* CIE entries: index into fu_cfi_table.cies */
    uint64_t offset;            /* of the length field, in the section */
    uint64_t length;            /* the declared length (excluding the length field) */
    uint64_t id;                /* CIE id, or the FDE's CIE pointer as stored */
    uint64_t end;               /* offset just past the entry (clamped to the section) */
    uint64_t aug_data_offset;   /* augmentation data (offset, length) */
    uint64_t aug_data_len;
    uint64_t insns_offset;      /* instructions [insns_offset, end) */
    /* FDE */
    uint64_t pc_begin;          /* svma, resolved by the encoding's rules */
    uint64_t pc_range;
    uint64_t display_pc_begin;  /* what readelf shows (it applies only pcrel) */
    uint64_t lsda;
    bool has_lsda;
    bool discarded;             /* null initial location (see parse_fde): never looked up */
    uint64_t segment_selector;
    /* rows [first_row, first_row + row_count) of the table */
    uint32_t first_row;
    uint32_t row_count;
    /* register columns any instruction of the entry (or its CIE) names, bit per column */
    uint64_t referenced[FU_MAX_COLUMNS / 64];
    const fu_cie_info *cie;     /* the CIE's decoded fields (for CIEs and FDEs); NULL if none */
    char *error_message;        /* malloc'd, when has_error */
} fu_entry;

/* ---- the evaluated table ---------------------------------------------------------------------- */

typedef struct fu_cfi_table {
    fu_section section;
    fu_entry *entries;
    uint32_t entry_count, entry_cap;
    fu_cie_info *cies;          /* owned; entries point into it via index (stable after parse) */
    uint32_t cie_count, cie_cap;
    /* rows, struct-of-arrays */
    uint64_t *row_address;
    uint32_t *row_state;
    uint32_t row_count, row_cap;
    /* interned states */
    fu_state *states;
    uint32_t state_count, state_cap;
    uint8_t *column_pool;       /* column of each (column, rule) pair */
    fu_rule *rule_pool;
    uint32_t pool_count, pool_cap;
    fu_intern_set state_index;  /* state ids by their rules, while evaluating (freed after) */
    /* FDE index sorted by pc_begin, for lookup: entry indices, and their pc_begin values in a
     * dense array of their own (the binary search touches 8 bytes per step, not an entry) */
    uint32_t *fde_sorted;
    uint64_t *fde_starts;
    uint32_t fde_count;
    uint32_t error_count;
} fu_cfi_table;

/* cfi_parse.c */
fu_status fu_cfi_table_parse(fu_cfi_table *table, const fu_section *section, fu_error *err);
void fu_cfi_table_free(fu_cfi_table *table);
unsigned fu_encoded_size(uint8_t encoding, unsigned address_size);
/* Read a DW_EH_PE-encoded pointer. `func_base` is the FDE's pc_begin for funcrel (0 otherwise).
 * A stored 0 with a relative encoding is a null pointer and reads as 0. Returns false (cursor
 * failed) on truncation or an unknown encoding. */
bool fu_read_encoded(fu_cursor *c, uint8_t encoding, const fu_section *section, uint64_t func_base,
                     uint64_t *value, bool *unresolved);
void fu_entry_set_error(fu_entry *entry, const char *message);
/* Grow `*array` (of `item`-byte elements, capacity `*cap`) to hold `need` by doubling; false if
 * out of memory or past UINT32_MAX elements (the tables index with uint32_t). */
bool fu_grow_array(void **array, uint32_t *cap, uint64_t need, size_t item);

/* cfi_eval.c */
typedef enum fu_insn_op {
    FU_INSN_ADVANCE, FU_INSN_SET_LOC, FU_INSN_OFFSET, FU_INSN_VAL_OFFSET, FU_INSN_RESTORE,
    FU_INSN_UNDEFINED, FU_INSN_SAME_VALUE, FU_INSN_REGISTER, FU_INSN_REMEMBER_STATE,
    FU_INSN_RESTORE_STATE, FU_INSN_DEF_CFA, FU_INSN_DEF_CFA_REGISTER, FU_INSN_DEF_CFA_OFFSET,
    FU_INSN_DEF_CFA_EXPRESSION, FU_INSN_EXPRESSION, FU_INSN_VAL_EXPRESSION, FU_INSN_NOP,
    FU_INSN_ARGS_SIZE, FU_INSN_WINDOW_SAVE
} fu_insn_op;

/* One decoded call frame instruction (DWARF 5 §6.4.2). `opcode` is the raw opcode (the high two
 * bits alone for the primary opcodes); factored operands are kept raw and also applied. */
typedef struct fu_insn {
    uint8_t opcode;
    uint8_t op;            /* fu_insn_op */
    uint64_t reg;          /* register operand (or the second register of DW_CFA_register) */
    uint64_t reg2;
    uint64_t uoperand;     /* raw unsigned operand (advance delta before factoring, ULEB offset) */
    int64_t soperand;      /* raw signed operand (SLEB) */
    int64_t value;         /* factored: offset in bytes, advance in bytes, CFA offset */
    uint64_t expr_offset;  /* expression (section offset, length) */
    uint64_t expr_len;
} fu_insn;

bool fu_insn_decode(fu_cursor *c, const fu_cie_info *cie, const fu_section *section, fu_insn *insn,
                    fu_error *err);
const char *fu_cfa_name(uint8_t opcode);
fu_status fu_cfi_table_evaluate(fu_cfi_table *table, fu_error *err);
/* Ranges given to fu_cfi_table_evaluate_ranges: a module's slow rows, merged (libc 2.36: 7). */
#define FU_CFI_MAX_SELECTED_RANGES 256
/* Evaluate only the FDEs a lookup in the svma ranges [ranges[2i], ranges[2i + 1]) can return
 * (range_count <= FU_CFI_MAX_SELECTED_RANGES; ranges NULL: all of them): lookups in the ranges
 * answer as the whole table's, others may find nothing. For the walker's slow rows, where the
 * compact table sends it to the DWARF tables (libc: 26M instructions -> a few). */
fu_status fu_cfi_table_evaluate_ranges(fu_cfi_table *table, const uint64_t *ranges, size_t range_count,
                                       fu_error *err);
/* The state of a row (row_state[row]); inline: check reads one per row judged, three times. */
static inline const fu_state *fu_cfi_table_state(const fu_cfi_table *table, uint32_t state_index)
{
    return &table->states[state_index];
}
/* The set bits of a 16-bit value, without a library call (the build targets x86-64 without popcnt). */
static inline unsigned fu_bits_set16(unsigned v)
{
    v = v - ((v >> 1) & 0x5555);
    v = (v & 0x3333) + ((v >> 2) & 0x3333);
    v = (v + (v >> 4)) & 0x0f0f;
    return (v + (v >> 8)) & 0x1f;
}

/* The rule of `column` in `state` (FU_RULE_UNSPECIFIED if none); inline: check asks it for every
 * row of every FDE. */
static inline fu_rule fu_state_rule(const fu_cfi_table *t, const fu_state *st, unsigned column)
{
    fu_rule none = {0};
    /* the listed columns below 16 come first, one per bit of low_columns: a column below 16 is
     * found by its rank, and the others are searched from the first column of 16 or more */
    if (column < 16) {
        if (!(st->low_columns >> column & 1))
            return none;
        return t->rule_pool[st->first + fu_bits_set16(st->low_columns & ((1u << column) - 1))];
    }
    for (unsigned k = fu_bits_set16(st->low_columns); k < st->count; k++)
        if (t->column_pool[st->first + k] == column)
            return t->rule_pool[st->first + k];
    return none;
}

/* lookup.c */
/* How many indexed FDEs start at or below pc: the sorted index of the first one that starts above it. */
uint32_t fu_cfi_table_fdes_starting_by(const fu_cfi_table *table, uint64_t pc);
/* fu_cfi_table_fdes_starting_by for a pc at or above one whose answer was `from` (addresses asked in
 * increasing order): a search forward from there, which reads only the index entries near it. */
uint32_t fu_cfi_table_fdes_starting_by_from(const fu_cfi_table *table, uint32_t from, uint64_t pc);
/* Index of the FDE entry covering svma `pc`, or -1, from `starting_by`, the answer of
 * fu_cfi_table_fdes_starting_by(table, pc). */
int64_t fu_cfi_table_fde_covering(const fu_cfi_table *table, uint32_t starting_by, uint64_t pc);
/* Index of the FDE entry covering svma `pc`, or -1. */
int64_t fu_cfi_table_find_fde(const fu_cfi_table *table, uint64_t pc);
/* Index of the row covering `pc` (an FDE's last row ends at pc_begin + pc_range), or -1. */
int64_t fu_cfi_table_find_row(const fu_cfi_table *table, uint64_t pc, int64_t *fde_index);
/* The index after the last row of `fde` whose address is at or below pc (fde->first_row: none). */
uint32_t fu_cfi_table_rows_starting_by(const fu_cfi_table *table, const fu_entry *fde, uint64_t pc);
/* The row in force at `pc` as the walker resolves it: .eh_frame's (tables[0]) if it has one, else
 * .debug_frame's (tables[1]); either may be NULL. Returns which table (0 or 1) with *row and
 * *fde_index set, or -1. The one place this precedence lives (walker, compact builder, eh_elf). */
int fu_cfi_tables_find_row(const fu_cfi_table *const tables[2], uint64_t pc, int64_t *row, int64_t *fde_index);
/* The lowest FDE start above pc in either table (NULL tables skipped), UINT64_MAX if none. */
uint64_t fu_cfi_tables_next_fde_start(const fu_cfi_table *const tables[2], uint64_t pc);
/* Every value fu_cfi_tables_find_row compares a PC with (FDE starts and ends, row addresses), sorted
 * and unique, malloc'd into *out: between two consecutive ones its answer cannot change. */
fu_status fu_cfi_tables_boundaries(const fu_cfi_table *const tables[2], uint64_t **out, size_t *count, fu_error *err);
fu_status fu_cfi_table_build_index(fu_cfi_table *table, fu_error *err);

/* eh_frame_hdr.c */
typedef struct fu_hdr {
    uint8_t version, eh_frame_ptr_encoding, fde_count_encoding, table_encoding;
    uint64_t eh_frame_ptr;   /* svma .eh_frame_hdr says .eh_frame is at */
    uint64_t count;          /* search table entries */
    uint64_t address;        /* svma of .eh_frame_hdr */
    uint64_t table_offset;
    const uint8_t *table;    /* count x (sdata4 initial location, sdata4 FDE address), datarel */
} fu_hdr;

/* Parse and validate; eh_frame_address/size (0 if unknown) check where the entries point. */
fu_status fu_hdr_parse(fu_hdr *hdr, const uint8_t *data, uint64_t size, uint64_t address,
                       uint64_t eh_frame_address, uint64_t eh_frame_size, fu_error *err);
void fu_hdr_entry(const fu_hdr *hdr, uint64_t i, uint64_t *initial_location, uint64_t *fde_address);
/* Index of the last entry whose initial location <= pc, or -1. */
int64_t fu_hdr_find(const fu_hdr *hdr, uint64_t pc);

/* dwarf_expr.c */
typedef struct fu_expr_context {
    /* Register values available to the expression; a clear bit in `valid` is an unknown value. */
    uint64_t regs[FU_MAX_COLUMNS];
    uint64_t valid[FU_MAX_COLUMNS / 64];
    /* Reads `size` bytes at `address` into `out` (little-endian value); false if unreadable. */
    bool (*read_memory)(void *opaque, uint64_t address, unsigned size, uint64_t *out);
    void *opaque;
    uint8_t address_size;
} fu_expr_context;

/* The two expression shapes that most CFI uses, recognised by their exact bytes so that callers
 * can apply them without the evaluator: `DW_OP_bregN k` (an address or value: register N + k;
 * glibc's signal frames) and `DW_OP_bregN k; DW_OP_deref` (*(register N + k): GCC's DRAP CFA and
 * the signal frame's CFA). True when `expr` is exactly one of them, with N < FU_MAX_COLUMNS and k
 * within int32; *deref tells which. */
bool fu_expr_match_breg(const uint8_t *expr, uint64_t len, unsigned *reg, int32_t *offset, bool *deref);

/* Evaluate the expression; `initial` is pushed first when has_initial (the CFA for
 * DW_CFA_expression / DW_CFA_val_expression, DWARF 5 §6.4.2.3). */
fu_status fu_expr_evaluate(const uint8_t *expr, uint64_t len, const fu_expr_context *ctx,
                           bool has_initial, uint64_t initial, uint64_t *result, fu_error *err);

/* Output sink for the printers: a growable buffer flushed to a file descriptor. */
typedef struct fu_out {
    char *buf;
    size_t len, cap;
    int fd;          /* -1: accumulate only */
    bool failed;
} fu_out;
void fu_out_write(fu_out *o, const char *s, size_t n);
void fu_out_printf(fu_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fu_out_flush(fu_out *o);

/* Print an expression as readelf's decode_location_expression does ("DW_OP_breg7 (rsp): 8; ..."). */
void fu_expr_print_readelf(fu_out *o, const uint8_t *expr, uint64_t len, unsigned address_size);
/* Print an expression as llvm-dwarfdump-14 does ("DW_OP_breg7 RSP+8, DW_OP_deref"). */
void fu_expr_print_llvm(fu_out *o, const uint8_t *expr, uint64_t len, unsigned address_size);

/* cfi_print.c */
void fu_print_readelf_interp(fu_out *o, const fu_cfi_table *table);
/* The same, the i-th FDE's header line followed by notes[i] (for i < note_count; NULL: nothing). */
void fu_print_readelf_interp_noted(fu_out *o, const fu_cfi_table *table, const char *const *notes, size_t note_count);
void fu_print_readelf_raw(fu_out *o, const fu_cfi_table *table);

#endif
