/* synth_table: a file's unwind table with the machine code's word where the CFI has none or is
 * proven wrong, collected over synth.h's walks, and that table encoded as a `.debug_frame` section.
 *
 * A view of the file is a list of ranges (one FDE each), sorted by start, every row marked by where
 * it comes from:
 *   - declared: an FDE of `.eh_frame` (or of `.debug_frame` where `.eh_frame` has none at its
 *     start, the walker's precedence), its rows copied as they are (equal neighbours kept: readelf
 *     prints them, and these rows must print as readelf prints the file's own);
 *   - corrected (view FU_SYNTH_REPAIR only): an FDE the check proved wrong (`mismatch`), its rows
 *     derived from the code (fu_synth_derive_row) at every instruction the interpreter reaches with
 *     a known CFA and return address, its declared rows elsewhere (landing pads, lost precision);
 *   - synthesized: code without CFI (function symbols and call targets no FDE covers), derived
 *     rows only; an instruction whose CFA or return address is unknown, or that no path reaches,
 *     ends the range (an unwinder then does what it does without CFI, rather than trusting a guess).
 * View FU_SYNTH_MISSING has the declared and synthesized ranges; FU_SYNTH_REPAIR the corrected ones
 * instead of the declared ones they replace. Undecided FDEs stay declared in both.
 *
 * Derived rows are merged with equal neighbours, and a callee-saved register that holds the
 * caller's value has no rule (the ABI's meaning of an unspecified callee-saved column, as compilers
 * write it) rather than DW_CFA_same_value.
 */
#ifndef FASTUNWIND_SYNTH_TABLE_H
#define FASTUNWIND_SYNTH_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "cfi.h"
#include "check.h"
#include "synth.h"

/* Ranges (FDEs) of one view: twice the FDEs of libLLVM-14 (95k) many times over; a hostile file
 * with more is refused (FU_ERR_INVALID, naming the limit). */
#define FU_SYNTH_TABLE_MAX_RANGES (1u << 22)
/* Rows of one view: libLLVM-14 has 861k declared rows. */
#define FU_SYNTH_TABLE_MAX_ROWS (1u << 26)
/* Code without CFI interpreted per file (ranges from symbols and call targets), so that a file
 * listing millions of tiny "functions" over one huge range stays bounded: the same budget check
 * gives a file (FU_CHECK_MAX_FILE_INSTRUCTIONS) counts the instructions synth decodes here. */
#define FU_SYNTH_TABLE_MAX_UNCOVERED (1u << 20)

typedef enum fu_synth_mode { FU_SYNTH_MISSING = 0, FU_SYNTH_REPAIR = 1 } fu_synth_mode;

typedef enum fu_synth_origin {
    FU_ORIGIN_DECLARED = 0,
    FU_ORIGIN_CORRECTED = 1,
    FU_ORIGIN_SYNTHESIZED = 2,
} fu_synth_origin;

/* A row's rules: a state of a declared table (`table` 0 .eh_frame, 1 .debug_frame) or a derived
 * row of fu_synth_table.derived. */
#define FU_SYNTH_ROW_DERIVED 2

typedef struct fu_synth_table_row {
    uint64_t address;
    uint32_t state;   /* a state index of tables[table], or an index into derived */
    uint8_t table;    /* 0, 1, or FU_SYNTH_ROW_DERIVED */
    uint8_t reserved[3];
} fu_synth_table_row;

/* One FDE of the view. */
typedef struct fu_synth_range {
    uint64_t start, end;
    uint8_t origin;        /* fu_synth_origin */
    uint8_t table;         /* the declared FDE's table, or FU_SYNTH_ROW_DERIVED (synthesized) */
    uint32_t entry;        /* the declared FDE's entry, or UINT32_MAX */
    uint32_t first_row, row_count;
    uint32_t derived_rows; /* of its rows, those derived from the code */
} fu_synth_range;

/* What became of one range of code without CFI. */
typedef struct fu_synth_uncovered_result {
    uint64_t start, end;
    uint8_t outcome;       /* fu_synth_outcome: FU_SYNTH_DECIDED, or FU_SYNTH_UNDECIDED with `reason` */
    uint32_t ranges;       /* synthesized ranges made from it (pieces between unknown rows), before
                            * those overlapping the next range are cut */
    char reason[FU_SYNTH_REASON_MAX];
} fu_synth_uncovered_result;

typedef struct fu_synth_request {
    const fu_check_image *image; /* the code, segments, noreturn functions, function entries, tables */
    fu_synth_mode mode;
    /* FU_SYNTH_REPAIR: per table, the sorted entries the check judged `mismatch` */
    const uint32_t *mismatch[2];
    size_t mismatch_count[2];
    /* code without CFI: (start, end) pairs */
    const uint64_t *uncovered;
    size_t uncovered_count;
} fu_synth_request;

/* Zero-initialize; fu_synth_table_free. */
typedef struct fu_synth_table {
    const fu_cfi_table *tables[2];
    fu_buffer ranges;    /* fu_synth_range, sorted by start */
    fu_buffer rows;      /* fu_synth_table_row */
    fu_buffer derived;   /* fu_synth_row (columns as fu_synth_columns) */
    fu_buffer uncovered; /* fu_synth_uncovered_result, per request->uncovered pair */
    uint32_t corrected_kept_declared; /* mismatching FDEs left declared: the code could not be
                                       * interpreted, or the FDE starts inside a function */
    uint64_t work_done;  /* decoded instructions interpreted */
    fu_synth_scratch scratch;
} fu_synth_table;

fu_status fu_synth_table_build(fu_synth_table *table, const fu_synth_request *request, fu_error *err);
void fu_synth_table_free(fu_synth_table *table);

static inline size_t fu_synth_table_range_count(const fu_synth_table *table)
{
    return table->ranges.len / sizeof(fu_synth_range);
}

/* The view as a `.debug_frame` section (DWARF 5 §6.4.1, CIE version 1, code alignment 1, return
 * address column 16, absolute 8-byte addresses, every entry padded with DW_CFA_nop to 8 bytes): the
 * CIEs an FDE may use (the ABI's entry row or no rule at all as initial rules; data alignment -8, or
 * 1 for FDEs with offsets -8 does not factor; see synth_table.c), then one FDE per range in order,
 * each row the instructions that turn the previous row into it. A declared range also names every
 * column its FDE named (readelf shows those columns), with DW_CFA_restore where no row gives it a
 * rule. Into `out`, empty (its offsets are the section's). */
fu_status fu_synth_table_encode(const fu_synth_table *table, fu_buffer *out, fu_error *err);

#endif
