/* compact_table: the one definition of the compact unwind table, for the builder
 * (compact_table.c: fu_compact_build / fu_compact_serialize), the validator and lookup
 * (fu_compact_open / fu_compact_find) and the walker's fast path (walk.c: apply_compact).
 *
 * A compact table is the DWARF rows of one module (.eh_frame and .debug_frame merged, exactly as
 * the walker's DWARF lookup resolves them) reduced to what the walker needs, in the spirit of the
 * Linux ORC tables and framehop's compact rules:
 *
 *   file:  fu_compact_header | u32 row_start[row_count] | u16 or u32 rule_index[row_count] | pad
 *          | fu_compact_rule rules[rule_count] | u32 page_first_row[page_count]
 *
 *   row i covers svma [base_svma + row_start[i], base_svma + row_start[i + 1]) (the last row ends at
 *   end_svma); its rule is rules[rule_index[i]]. Addresses outside [base_svma, end_svma) have no
 *   unwind information. Gaps between FDEs are rows of their own (FU_COMPACT_CFA_NO_INFO), so a
 *   lookup never returns a neighbour's rule.
 *
 * Every row costs 6 bytes (4 + 2) while the dictionary holds at most 65536 rules; the dictionary is
 * tiny (libc 2.36: 374 rules for 28,491 rows; libLLVM-14: 987 for 949,983), and the page index
 * adds 4 bytes per 4 KiB of code, so a table averages 6.0-6.2 bytes per row (7.0 per DWARF row
 * for libc, whose gaps between FDEs are rows too).
 *
 * Lookup is two-level, like ORC's lookup table (`orc_lookup`, one entry per LOOKUP_BLOCK_SIZE of
 * text): page_first_row[] gives the row in force at the start of each 4 KiB page of the covered
 * range, then a binary search runs over that page's rows only. Measured on 1M random covered
 * addresses (benchmarks/bench_compact.py, three runs): libLLVM-14 (950k rows) 69-105 ns -> 19-21 ns
 * per lookup, libc 18-20 -> 13-16 ns, python3.11 21 -> 13 ns, for 36 KB more on libLLVM's 5.7 MB.
 *
 * A row the format cannot state exactly is never approximated: its rule is FU_COMPACT_CFA_SLOW and
 * the walker asks the DWARF tables (fu_cfi_table) for that PC.
 *
 * The file is host-endian (x86-64, little-endian) and meant to be mmap'd: every array is aligned to
 * its element size, and fu_compact_open checks a buffer completely before anything uses it.
 */
#ifndef FASTUNWIND_COMPACT_TABLE_H
#define FASTUNWIND_COMPACT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

#define FU_COMPACT_MAGIC "FUCOMPCT" /* 8 bytes, no terminator in the file */
#define FU_COMPACT_MAGIC_SIZE 8
/* Bump whenever the layout or the builder's semantics change: a cached file of another version is
 * rebuilt, never used. */
#define FU_COMPACT_VERSION 7

/* The key a table was built for: a GNU build-id (20 bytes for SHA-1, the linker's default; 16 for
 * md5/uuid) or, for a file without one, a SHA-256 of its path, size and mtime. 64 bytes hold
 * any --build-id=0xHEX a linker accepts in practice. */
#define FU_COMPACT_MAX_KEY 64
#define FU_COMPACT_KEY_BUILD_ID 1
#define FU_COMPACT_KEY_FILE_HASH 2

/* fu_compact_header's eh_frame_size / debug_frame_size of a module without that section. */
#define FU_COMPACT_NO_SECTION UINT64_MAX

/* One page_first_row entry per 1 << FU_COMPACT_PAGE_SHIFT bytes of the covered range (see above). */
#define FU_COMPACT_PAGE_SHIFT 12

/* rule_index elements are u16 while the dictionary has at most this many rules, else u32.
 * The largest dictionary seen (libLLVM-14: ~1,600 rules for ~400k merged rows) is far below. */
#define FU_COMPACT_MAX_NARROW_RULES 65536u

/* Callee-saved registers of the x86-64 psABI (FU_CALLEE_SAVED_MASK) that a compact rule restores,
 * in this order. */
#define FU_COMPACT_SAVED_REGISTERS 6
static const uint8_t fu_compact_saved_register[FU_COMPACT_SAVED_REGISTERS] = {FU_REG_RBX, FU_REG_RBP, FU_REG_R12,
                                                                              FU_REG_R13, FU_REG_R14, FU_REG_R15};

/* The registers below 16 that are neither callee-saved nor rsp: rax, rdx, rcx, rsi, rdi, r8-r11. */
#define FU_COMPACT_CALLER_SAVED_MASK ((uint16_t)(0xffffu & ~FU_CALLEE_SAVED_MASK & ~(1u << FU_REG_RSP)))

/* saved_offset_by_8[] and ra_offset_by_8 values that are not offsets: CFA + 0 is never a save slot
 * (the CFA is the caller's SP: the bytes there are the caller's), so 0 can mean "no rule". */
#define FU_COMPACT_KEEP 0              /* unspecified or DW_CFA_same_value: the caller's value is ours */
#define FU_COMPACT_UNDEFINED INT8_MIN  /* DW_CFA_undefined: the caller's value is unknown */

/* Where saved_offset_by_8[i] = n puts a callee-saved register (ra_offset_by_8 is always CFA-relative):
 *   n < 0 (not FU_COMPACT_UNDEFINED): at CFA + 8 * n (DW_CFA_offset; callee-saved registers are
 *       saved below the CFA: the bytes above it are the caller's frame);
 *   n > 0: at rbp + 8 * (FU_COMPACT_RBP_SLOT_FIRST - n), i.e. rbp + 0, rbp - 8, ... down to
 *       rbp - 1008: `DW_CFA_expression: DW_OP_breg6 (rbp): k` with k = 0, -8, ..., the saves of GCC's
 *       DRAP frames (functions that realign the stack: the gap between the CFA and the realigned
 *       frame is known only at run time, so their saves are stated from rbp, their CFA as
 *       `DW_OP_breg6 -8; DW_OP_deref`; the DRAP register itself, when callee-saved (r13, where r10
 *       is taken: a nested function's static chain), is pushed before the realignment and stays
 *       CFA-relative, so one rule mixes both). rbp is the callee's (the frame's own, before any
 *       register of the rule is restored), and such a slot is applied as the expression is: rbp
 *       must be known (else FU_WALK_EXPRESSION_ERROR) and the slot readable (else the step fails),
 *       in column order. A save above the CFA, which no compiler emits (libc's setcontext family
 *       has some, in rows that are slow for their other rules), is not representable: slow.
 * Counted over this machine's 1,971 ELF files with CFI (scripts/drap_census.py): 12,558
 * DWARF rows in 1,483 FDEs of 27 files have rbp-relative saves, all of them slow rows before this
 * form; 3,583 of them mix in a CFA-relative save. */
#define FU_COMPACT_RBP_SLOT_FIRST 1
static inline bool fu_compact_slot_at_rbp(int8_t by_8) { return by_8 > 0; }
static inline int64_t fu_compact_rbp_slot_offset(int8_t by_8) { return 8 * (int64_t)(FU_COMPACT_RBP_SLOT_FIRST - by_8); }

typedef enum fu_compact_cfa_kind {
    FU_COMPACT_CFA_NO_INFO = 0, /* no FDE covers these PCs: frame-pointer fallback */
    FU_COMPACT_CFA_SLOW,        /* not representable: use the DWARF tables (fu_cfi_table) */
    FU_COMPACT_CFA_RSP,         /* CFA = rsp + cfa_offset */
    FU_COMPACT_CFA_RBP,         /* CFA = rbp + cfa_offset */
    FU_COMPACT_CFA_REGISTER,    /* CFA = cfa_register + cfa_offset (DRAP prologues: r10 + 0) */
    /* The PLT expression of GNU ld's lazy .plt (16-byte entries):
     *   DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11;
     *   DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
     * i.e. CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0), recognised by its exact bytes
     * FU_COMPACT_PLT_EXPRESSION. */
    FU_COMPACT_CFA_PLT,
    /* Dynamic realignment (DRAP): DW_OP_bregN (cfa_register): cfa_offset; DW_OP_deref, i.e.
     * CFA = *(cfa_register + cfa_offset). */
    FU_COMPACT_CFA_DEREF,
    /* A signal trampoline (the CIE has 'S') whose row is exactly the Linux x86-64 signal frame as
     * glibc's __restore_rt describes it: at the trampoline rsp points to the ucontext_t, the CFA
     * is the interrupted rsp saved in it, DW_OP_breg7 (rsp): 160; DW_OP_deref, and each register r
     * of 0..16 is saved at rsp + fu_compact_signal_context[r] (DW_CFA_expression DW_OP_breg7 k,
     * in column order). The caller is a FU_FRAME_SIGNAL frame. cfa_register RSP, cfa_offset 160,
     * every save slot KEEP. */
    FU_COMPACT_CFA_SIGNAL_CONTEXT,
    FU_COMPACT_CFA_KIND_COUNT /* at most 8: the walker packs a kind in 3 bits (fu_compact_plan) */
} fu_compact_cfa_kind;

/* Where the signal context keeps each register (DWARF 0..16, 16 the interrupted rip), from the
 * ucontext_t at rsp: uc_mcontext.gregs at 40, in the kernel's order r8-r15, rdi, rsi, rbp, rbx,
 * rdx, rax, rcx, rsp, rip (struct sigcontext_64). */
#define FU_COMPACT_SIGNAL_CONTEXT_CFA 160 /* the saved rsp */
static const uint8_t fu_compact_signal_context[17] = {144, 136, 152, 128, 112, 104, 120, 160, 40,
                                                      48,  56,  64,  72,  80,  88,  96,  168};
#define FU_COMPACT_SIGNAL_CONTEXT_LOW 40   /* the lowest slot above */
#define FU_COMPACT_SIGNAL_CONTEXT_SIZE 136 /* from the lowest slot to the end of the highest */

#define FU_COMPACT_PLT_EXPRESSION {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}
#define FU_COMPACT_PLT_EXPRESSION_SIZE 11

/* Where a rule came from. A table built with synthesized rows (fu_compact_build_tables' overlay,
 * `--synth missing|repair`) holds rows derived from the machine code (native/core/synth.h): where
 * no CFI covers the code (SYNTHESIZED), or in place of declared rows the check proved wrong
 * (CORRECTED). The walker marks every frame whose step used such a rule (walk.h,
 * FU_FRAME_SYNTHESIZED, FU_FRAME_CORRECTED), so that what rests on them is counted and shown. */
typedef enum fu_compact_origin {
    FU_COMPACT_ORIGIN_DECLARED = 0, /* the module's own CFI */
    FU_COMPACT_ORIGIN_CORRECTED,    /* derived from the code, replacing a declared row proven wrong */
    FU_COMPACT_ORIGIN_SYNTHESIZED,  /* derived from the code where no CFI covers it */
    FU_COMPACT_ORIGIN_COUNT
} fu_compact_origin;

/* fu_compact_header.synth: which synthesized rows a table holds, FU_COMPACT_SYNTH_OFF for none, else
 * the mode | FU_COMPACT_SYNTH_VERSION << 8, so that a table cached by another version of the
 * synthesis is rebuilt. Bump the version whenever the rows a file gets could change (synth.c's
 * interpretation, the collector's choice of functions, the conversion below). */
#define FU_COMPACT_SYNTH_OFF 0
#define FU_COMPACT_SYNTH_MISSING 1 /* synthesized rows where no CFI covers the code */
#define FU_COMPACT_SYNTH_REPAIR 2  /* those, and corrected rows in place of declared ones proven wrong */
#define FU_COMPACT_SYNTH_VERSION 5
#define FU_COMPACT_SYNTH_MODES 3
/* "off", "missing", "repair" (the --synth names) for FU_COMPACT_SYNTH_*; "?" past them. */
const char *fu_compact_synth_mode_name(unsigned mode);

/* One dictionary entry: 16 bytes. Offsets carry their unit in their name. */
typedef struct fu_compact_rule {
    uint8_t cfa_kind;       /* fu_compact_cfa_kind */
    uint8_t cfa_register;   /* DWARF register of CFA_REGISTER and CFA_DEREF (< 17); RSP 7, RBP 6 */
    /* The return address is at CFA + 8 * ra_offset_by_8; FU_COMPACT_KEEP (0) or
     * FU_COMPACT_UNDEFINED: no return address, the stack ends here (_start, clone, thread start). */
    int8_t ra_offset_by_8;
    uint8_t origin;         /* fu_compact_origin: where the row came from */
    int32_t cfa_offset;     /* bytes */
    /* per fu_compact_saved_register[i]: saved at CFA + 8 * n (n < 0) or at rbp + 8 * (1 - n) (n > 0,
     * fu_compact_slot_at_rbp), or FU_COMPACT_KEEP / _UNDEFINED */
    int8_t saved_offset_by_8[FU_COMPACT_SAVED_REGISTERS];
    /* caller-saved registers (bit per DWARF number, FU_COMPACT_CALLER_SAVED_MASK) whose rule is
     * DW_CFA_same_value: the caller's value is the callee's (the walker carries them, as apply_row
     * does); synthesized rows state them where the code has not written them (synth.h) */
    uint16_t kept_caller_saved;
} fu_compact_rule;

/* Whether a rule saves a register relative to rbp (fu_compact_slot_at_rbp): the walker applies it
 * apart from the others (walk_step.inc apply_rbp_slots_rule). */
static inline bool fu_compact_rule_has_rbp_slots(const fu_compact_rule *r)
{
    bool any = false;
    for (unsigned i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++)
        any |= fu_compact_slot_at_rbp(r->saved_offset_by_8[i]);
    return any;
}

typedef struct fu_compact_header {
    char magic[FU_COMPACT_MAGIC_SIZE]; /* FU_COMPACT_MAGIC */
    uint32_t version;                  /* FU_COMPACT_VERSION */
    uint32_t header_size;              /* sizeof(fu_compact_header) */
    uint64_t file_size;                /* the whole table, in bytes */
    uint64_t base_svma;                /* row starts are relative to it: the lowest covered svma */
    uint64_t end_svma;                 /* end of the last row; end_svma - base_svma < 2^32 */
    uint32_t row_count;
    uint32_t rule_count;
    uint32_t rule_index_size;          /* 2 (u16) or 4 (u32) */
    uint32_t key_kind;                 /* FU_COMPACT_KEY_* */
    uint32_t key_size;                 /* bytes of key[] in use */
    uint32_t synth;                    /* FU_COMPACT_SYNTH_OFF, or a mode | FU_COMPACT_SYNTH_VERSION << 8 */
    uint8_t key[FU_COMPACT_MAX_KEY];   /* the build-id (or file hash) the table was built for */
    uint64_t row_start_offset;         /* u32[row_count], 4-aligned */
    uint64_t rule_index_offset;        /* u16 or u32 [row_count], aligned to its size */
    uint64_t rules_offset;             /* fu_compact_rule[rule_count], 8-aligned */
    uint64_t page_index_offset;        /* u32 page_first_row[page_count], 4-aligned */
    uint32_t page_count;               /* (end_svma - base_svma - 1) >> FU_COMPACT_PAGE_SHIFT, + 2; 0 if no rows */
    uint32_t page_shift;               /* FU_COMPACT_PAGE_SHIFT */
    /* what the table was built from: the bytes of the .eh_frame and .debug_frame it was built from
     * (decompressed), FU_COMPACT_NO_SECTION if none. A module whose sections differ (a debug file
     * installed or removed since) rebuilds it; the sizes are known from the section headers, so
     * a cached table is checked without parsing the sections. Then what it holds, for statistics. */
    uint64_t eh_frame_size;
    uint64_t debug_frame_size;
    uint32_t slow_row_count;           /* rows whose rule is FU_COMPACT_CFA_SLOW */
    uint32_t no_info_row_count;        /* rows whose rule is FU_COMPACT_CFA_NO_INFO */
    uint64_t slow_bytes;               /* bytes of code covered by slow rows */
    uint64_t covered_bytes;            /* bytes of code covered by rows that are not no-info */
    uint32_t origin_row_count[FU_COMPACT_ORIGIN_COUNT]; /* rows by their rule's origin (no-info rows: declared) */
    uint32_t reserved;                 /* 0 */
    uint64_t origin_bytes[FU_COMPACT_ORIGIN_COUNT];     /* bytes of code covered, by origin (no-info rows left out) */
} fu_compact_header;

/* A validated table: pointers into the (mapped) buffer, which the caller keeps alive. */
typedef struct fu_compact_table {
    const fu_compact_header *header;
    const uint32_t *row_start;
    const uint16_t *rule_index16; /* one of the two, by header->rule_index_size */
    const uint32_t *rule_index32;
    const fu_compact_rule *rules;
    const uint32_t *page_first_row;
    uint64_t base_svma, end_svma;
    uint32_t row_count;
} fu_compact_table;

/* The rule in force at svma `pc`, or NULL where no row covers it (no unwind information).
 * The page index bounds the binary search over the u32 starts to one page's rows. */
static inline const fu_compact_rule *fu_compact_find(const fu_compact_table *t, uint64_t pc, uint32_t *row)
{
    if (pc < t->base_svma || pc >= t->end_svma || t->row_count == 0)
        return NULL;
    uint32_t offset = (uint32_t)(pc - t->base_svma); /* < 2^32: checked by fu_compact_open */
    uint32_t page = offset >> FU_COMPACT_PAGE_SHIFT;
    /* the last row whose start <= offset lies in [row at the page's start, row at the next's]
     * (fu_compact_open checked every entry) */
    uint32_t lo = t->page_first_row[page], n = t->page_first_row[page + 1] - lo + 1;
    while (n > 1) {
        uint32_t half = n / 2;
        if (t->row_start[lo + half] <= offset)
            lo += half;
        n -= half;
    }
    if (row)
        *row = lo;
    uint32_t rule = t->rule_index16 ? t->rule_index16[lo] : t->rule_index32[lo];
    return &t->rules[rule];
}

/* Whether a row of the module's own CFI (a declared rule, not no-info) covers `pc`; if not, *next is
 * the start of the first such row above `pc` if it lies within `limit` bytes of it, else pc + limit. Synthesized rows do not count: they describe
 * code without CFI (the process's entry code among it, address_space.h). */
static inline bool fu_compact_covers(const fu_compact_table *t, uint64_t pc, uint64_t limit, uint64_t *next)
{
    *next = UINT64_MAX;
    if (t->row_count == 0 || pc >= t->end_svma)
        return false;
    if (pc < t->base_svma) { /* row 0 starts at base_svma and is never a gap */
        *next = t->base_svma;
        return false;
    }
    uint32_t row;
    const fu_compact_rule *rule = fu_compact_find(t, pc, &row);
    if (rule->cfa_kind != FU_COMPACT_CFA_NO_INFO && rule->origin == FU_COMPACT_ORIGIN_DECLARED)
        return true;
    /* bounded by `limit`: each row starts above the last */
    for (row++; row < t->row_count && t->base_svma + t->row_start[row] - pc < limit; row++) {
        uint32_t index = t->rule_index16 ? t->rule_index16[row] : t->rule_index32[row];
        const fu_compact_rule *r = &t->rules[index];
        if (r->cfa_kind != FU_COMPACT_CFA_NO_INFO && r->origin == FU_COMPACT_ORIGIN_DECLARED) {
            *next = t->base_svma + t->row_start[row];
            return false;
        }
    }
    *next = limit < UINT64_MAX - pc ? pc + limit : UINT64_MAX;
    return false;
}

/* A table being built, before serialization. */
typedef struct fu_compact_build {
    uint64_t base_svma, end_svma;
    uint32_t *row_start;
    uint32_t *row_rule;
    uint32_t row_count;
    fu_compact_rule *rules;
    uint32_t rule_count;
    uint32_t slow_row_count, no_info_row_count;
    uint64_t slow_bytes, covered_bytes;
    uint64_t eh_frame_size, debug_frame_size;
    uint32_t origin_row_count[FU_COMPACT_ORIGIN_COUNT];
    uint64_t origin_bytes[FU_COMPACT_ORIGIN_COUNT];
} fu_compact_build;

/* A row derived from the machine code, for fu_compact_build_tables' overlay: [start, end) by svma
 * and its rule, whose origin says where it applies (SYNTHESIZED: only where no declared row covers
 * the code; CORRECTED: only where one does, replacing it). */
typedef struct fu_compact_overlay_row {
    uint64_t start, end;
    fu_compact_rule rule;
} fu_compact_overlay_row;

/* Synthesized rows to lay over a module's declared ones: sorted by start, not overlapping, each
 * non-empty, their rules fast-path rules of kind RSP, RBP or REGISTER with origin SYNTHESIZED or
 * CORRECTED (fu_compact_build_tables rejects anything else with FU_ERR_INVALID). `synth` is the
 * header's value (FU_COMPACT_SYNTH_MISSING or _REPAIR | version << 8); a MISSING overlay may hold
 * no CORRECTED row. */
typedef struct fu_compact_overlay {
    const fu_compact_overlay_row *rows;
    size_t count;
    uint32_t synth;
} fu_compact_overlay;

/* The overlay rows of a view of the module's CFI (a table whose FDE k has origin origins[k], as the
 * synthesized table gives them, native/core/synth_table.h): the rows of its CORRECTED and
 * SYNTHESIZED FDEs that the overlay admits (a register + offset CFA and a return address; any other
 * row stays as the module's own tables have it), sorted (of overlapping rows the first by address),
 * equal neighbours merged, malloc'd into *out.
 * FU_ERR_INVALID when an FDE has no origin or an unknown one. */
fu_status fu_compact_overlay_of_table(const fu_cfi_table *view, const uint8_t *origins, size_t origin_count,
                                      fu_compact_overlay_row **out, size_t *count, fu_error *err);

/* Build from a module's evaluated tables (either may be NULL). Rows are resolved exactly as the
 * walker's DWARF lookup does: .eh_frame first, then .debug_frame; then, with an `overlay` (NULL:
 * none), its SYNTHESIZED rows fill what no declared row covers and its CORRECTED rows replace the
 * declared ones they cover. */
fu_status fu_compact_build_tables(fu_compact_build *b, const fu_cfi_table *eh_frame, const fu_cfi_table *debug_frame,
                                  const fu_compact_overlay *overlay, fu_error *err);
void fu_compact_build_free(fu_compact_build *b);
/* Serialize to a malloc'd buffer (8-aligned) of *size bytes; `synth` goes to the header (the
 * overlay's, FU_COMPACT_SYNTH_OFF without one). */
fu_status fu_compact_serialize(const fu_compact_build *b, uint32_t key_kind, const uint8_t *key, size_t key_size,
                               uint32_t synth, uint8_t **out, size_t *size, fu_error *err);
/* Validate `size` bytes at `data` (8-aligned: mmap'd or malloc'd) and fill `table`. A corrupt or
 * truncated buffer is rejected with FU_ERR_CFI and a message naming the first problem. */
fu_status fu_compact_open(fu_compact_table *table, const uint8_t *data, size_t size, fu_error *err);

/* Convert one DWARF row state to a compact rule (FU_COMPACT_CFA_SLOW when it does not fit).
 * Exposed for tests and statistics. */
fu_compact_rule fu_compact_rule_of_state(const fu_cfi_table *t, const fu_entry *entry, const fu_state *state);

/* The svma ranges [start, end) of the table's slow rows, neighbours merged, in address order: the
 * code for which the walker asks the DWARF tables (fu_cfi_table_evaluate_ranges need evaluate no
 * other). Fills at most `max` pairs of `ranges` (2 * max u64s); returns how many there are (more
 * than `max`: not all of them counted). */
size_t fu_compact_slow_ranges(const fu_compact_table *t, uint64_t *ranges, size_t max);

/* The name of a CFA kind ("no_info", "slow", "rsp", ...; "?" past them), as CompactTable.rule() gives it. */
const char *fu_compact_cfa_kind_name(unsigned kind);

/* Times `passes` lookups of each of pcs[0..n) (fu_compact_find if two_level, else a plain binary
 * search over all the row starts: the format's first design), in ns; *checksum is the sum of the
 * rows found (so that the loop is not optimized out). The measurement behind the page index. */
uint64_t fu_compact_benchmark_lookups(const fu_compact_table *t, const uint64_t *pcs, size_t n, size_t passes,
                                      bool two_level, uint64_t *checksum);

#endif
