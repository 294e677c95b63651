/* check: the declared rows of every FDE against the rows the machine code implies (synth.h).
 *
 * At every instruction synth reaches, each declared rule is evaluated over the abstract state and
 * compared by value with what it must recover: the CFA must be entry rsp + 8, the return address
 * column must give the return address, rbx, rbp and r12-r15 the caller's values. Comparing values,
 * not rule shapes, makes equivalent forms agree: a CFA declared as rbp+16 where rsp+24 would do
 * (after `push rbp; mov rbp, rsp`), a register declared saved after its `pop` (the slot still holds
 * it, below rsp but inside the red zone, System V AMD64 ABI §3.2.2), "same value" before the save
 * and the save slot after it. A rule whose value is unknown at an instruction (lost precision)
 * makes the instruction unknown, never a mismatch. Rules that do not describe a recoverable value
 * (DW_CFA_undefined: end of stack; val_expression) are not compared.
 *
 * Structural faults are findings too: an FDE with an empty range, one outside the image's
 * executable segments, FDEs that overlap.
 */
#ifndef FASTUNWIND_CHECK_H
#define FASTUNWIND_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "cfi.h"
#include "synth.h"

/* Findings kept per FDE: the first ones name the fault, the rest are usually its consequences at
 * later instructions (finding_total keeps counting past it). */
#define FU_CHECK_MAX_FINDINGS_PER_FDE 32
/* Nops skipped at the start of an FDE (padding before its first reachable instruction). */
#define FU_CHECK_MAX_LEADING_NOPS 16
/* Decoded instructions interpreted per file, over all its batches, before the remaining FDEs are
 * undecided ("work limit"). libLLVM-14 (95k FDEs, the largest library of the six) decodes
 * 12.0M in 5.1 s (one core); ten times that bounds a hostile file (many distinct FDEs over one huge
 * range) to about a minute. */
#define FU_CHECK_MAX_FILE_INSTRUCTIONS (128u << 20)
/* FDEs with the same start compared to find an identical earlier one whose result is shared. */
#define FU_CHECK_MAX_SAME_START_COMPARED 64
/* Call-site records read from one FDE's LSDA. */
#define FU_CHECK_MAX_CALL_SITES (1u << 16)
/* Entries from other FDEs (jumps, landing pads) taken into one FDE; each holds a state. */
#define FU_CHECK_MAX_FOREIGN_ENTRIES_PER_FDE 256
/* Room for a rule as text ("rsp+16", "c-24", "[rbp-8]", "never written"). */
#define FU_CHECK_TEXT_MAX 48

typedef enum fu_check_verdict {
    FU_CHECK_AGREE = 0,
    FU_CHECK_MISMATCH = 1,
    FU_CHECK_UNDECIDED = 2,
} fu_check_verdict;

/* What a finding is about: a register column (3 rbx, 6 rbp, 12-15, 16 the return address), or: */
#define FU_CHECK_WHAT_CFA 128
#define FU_CHECK_WHAT_RANGE 129 /* the FDE's range itself (empty, outside code, overlapping) */

typedef struct fu_check_finding {
    uint64_t address;
    uint32_t what;
    char declared[FU_CHECK_TEXT_MAX];
    char derived[FU_CHECK_TEXT_MAX];
} fu_check_finding;

typedef struct fu_check_fde_result {
    uint32_t entry;        /* index of the FDE in its table */
    uint8_t verdict;       /* fu_check_verdict */
    uint32_t agree;        /* instructions whose every compared rule agrees */
    uint32_t mismatch;     /* instructions with a rule known to be wrong */
    uint32_t unknown;      /* instructions with a rule whose value is unknown, none wrong */
    uint32_t unreached;    /* decoded instructions no path reaches, padding (nop, int3, ud2) aside:
                            * code left unchecked (unresolved jump tables, dead code, code entered
                            * from elsewhere in ways not followed); an FDE with any is undecided */
    uint32_t skipped;      /* reached instructions not compared: the outermost frame's rows (the
                            * return address undefined: _start, a thread's entry) */
    bool from_declared_entry; /* starts inside a function (not at a known function entry) with a
                               * first row that is not an entry row: checked from that row */
    uint32_t first_finding, finding_count; /* the findings kept (FU_CHECK_MAX_FINDINGS_PER_FDE) */
    uint32_t finding_total;                /* the findings made, kept or not */
    char reason[FU_SYNTH_REASON_MAX]; /* undecided: why */
} fu_check_fde_result;

/* The image the FDEs describe. */
typedef struct fu_check_image {
    const fu_image_segment *code;     /* executable PT_LOAD segments (file bytes) */
    size_t code_count;
    const fu_image_segment *segments; /* every PT_LOAD segment's file bytes (jump tables) */
    size_t segment_count;
    const uint64_t *noreturn;         /* sorted addresses of functions that never return */
    size_t noreturn_count;
    /* sorted addresses known to be function entries (function symbols but `*.cold` parts, direct
     * call targets): an FDE starting at one is checked from the ABI's entry state, whatever its
     * first row declares */
    const uint64_t *function_entries;
    size_t function_entry_count;
    const fu_cfi_table *tables[2];    /* .eh_frame, .debug_frame (either NULL): call-target coverage */
    /* sorted addresses that other FDEs enter (direct jumps, landing pads of their LSDAs: collected
     * in fu_check_batch.foreign_entries by an earlier pass): inside an FDE, further entries, with
     * the state its declared row there describes (taken as given, like a `.cold` part's first row) */
    const uint64_t *foreign_entries;
    size_t foreign_entry_count;
    /* decoded instructions interpreted so far for this file, shared by the batches that may run on
     * several threads (updated atomically; FU_CHECK_MAX_FILE_INSTRUCTIONS); NULL: the batch's own */
    uint64_t *work_done;
} fu_check_image;

/* Code addresses the checked code named last, per kind (calls; calls, jumps and lea), direct-mapped
 * by address: a repeat is not collected again (libLLVM-14: 1.2% of check's time went to sorting
 * the repeats away). */
#define FU_CHECK_NAMED_RECENTLY 1024

/* The results of a batch of FDEs, and the code addresses (direct call and jump targets, addresses a
 * RIP-relative lea takes) in executable code that no FDE of either table covers (sorted, without
 * repeats). Zero-initialize; fu_check_batch_free. */
typedef struct fu_check_batch {
    fu_check_fde_result *results;
    size_t count;
    fu_buffer findings;         /* fu_check_finding */
    fu_buffer uncovered_calls;  /* uint64_t: call and jump targets and addresses lea takes (check.c) */
    /* uint64_t: direct call targets that start an FDE whose first row is not an entry row (the
     * caller may check those FDEs again with them among image->function_entries); sorted, without
     * repeats. While the batch is checked, it and uncovered_calls collect every address named. */
    fu_buffer called_non_entry;
    /* uint64_t: direct jump targets outside the FDE holding the jump, and landing pads outside the
     * FDE whose LSDA names them (the caller may check the FDEs holding them again with them among
     * image->foreign_entries) */
    fu_buffer foreign_entries;
    fu_buffer call_sites;     /* scratch: fu_synth_call_site of the FDE being checked */
    fu_buffer args_sizes;     /* scratch: its fu_synth_args_size */
    fu_buffer entry_states;   /* scratch: fu_synth_state of its foreign entries */
    fu_buffer entries;        /* scratch: fu_synth_entry over entry_states */
    /* scratch: per declared row of the FDE being checked, its rules (the CFA's, then those of
     * fu_synth_columns), fetched when a judgment first needs them, and whether they are */
    fu_buffer row_rules;
    fu_buffer row_fetched;
    uint32_t *position_of;      /* per entry of the table: its position in this batch, or UINT32_MAX */
    uint64_t work_done;         /* image->work_done when that is NULL */
    fu_synth_scratch scratch;
    uint64_t calls_named[FU_CHECK_NAMED_RECENTLY]; /* emptied by each fu_check_fdes */
    uint64_t code_named[FU_CHECK_NAMED_RECENTLY];
} fu_check_batch;

void fu_check_batch_free(fu_check_batch *batch);

/* Whether an FDE starting at `start` with `first` its first row starts at a function's entry: that
 * row is the ABI's entry row (CFA = rsp+8, the return address at CFA-8 or undefined, callee-saved
 * registers in place), or `start` is a known function entry (a symbol, a call target). Its code is
 * then judged from the ABI's entry state; any other FDE (a `.cold` part) from the state its first
 * row declares. */
bool fu_check_starts_at_entry(const fu_check_image *image, const fu_cfi_table *table, uint64_t start,
                              const fu_state *first);

/* For every entry of `table`, another non-empty FDE of the table its range meets, or UINT32_MAX, in
 * `partner` (table->entry_count elements): one pass over the FDEs sorted by start with the running
 * maximum end. An FDE meets an earlier-starting one exactly when it starts below the maximum end
 * of those; the FDE holding that maximum is marked with it too, so both sides of every overlap
 * (nested ones included) are found. Once per table, for all its batches (libLLVM-14: 15 MB of
 * entries read per pass). */
void fu_check_overlaps(const fu_cfi_table *table, uint32_t *partner);

/* Check the FDEs `entries[0..count)` of `table` (one of image->tables); `overlap_partner` is
 * fu_check_overlaps's for the table (FU_ERR_INVALID where an entry or its partner is no FDE of the
 * table). Runs without touching anything but its arguments, so batches may run on several threads. */
fu_status fu_check_fdes(const fu_check_image *image, const fu_cfi_table *table, const uint32_t *overlap_partner,
                        const uint32_t *entries, size_t count, fu_check_batch *batch, fu_error *err);

#endif
