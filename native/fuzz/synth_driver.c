/* synth_driver: the x86 decoder summary (synth_decode.c), the abstract interpreter (synth.c) and the
 * CFI checker (check.c) on hostile and mutated machine code, for the sanitizer and fuzzing builds of
 * native/fuzz/Makefile (`make asan-synth`, part of `make asan`; `make fuzz-synth`).
 *
 * One input: byte 0 chooses the function's address and whether jump tables may be read from the
 * input itself; bytes 1..CFI_BYTES are the FDE's call frame instructions (hostile CFI: any opcode);
 * the rest is the function's code. Each input is
 *   - interpreted by fu_synth_run with a visitor that checks the walk's invariants (addresses
 *     strictly increasing and inside the range, slots sorted and within FU_SYNTH_MAX_SLOTS, derived
 *     rows well formed), with and without a noreturn list, and from a seeded entry state; from that
 *     one also with a judge (fu_synth_judge) whose byte is a digest of the whole state, repeated
 *     while no `changed` bit is set: the byte kept for each reached instruction must be the digest
 *     of the state its visit sees (the walks' change tracking and their last walk's state);
 *   - described by a CIE + FDE over the code (.eh_frame, absolute pointers), parsed, evaluated and
 *     checked by fu_check_fdes, whose results must be in range (verdicts, findings inside the
 *     buffer, instruction counts no larger than the code);
 *   - collected into a synthesized table (synth_table.c) with the mismatching FDE corrected and the
 *     code also taken as code without CFI, in both views, encoded as `.debug_frame` and parsed back;
 *   - each of that FDE's rows judged by the tracer's comparison (trace.c fu_trace_judge) against a
 *     frame and registers drawn from the code bytes, memory being the code itself: findings must
 *     stay within FU_TRACE_MAX_FINDINGS_PER_STEP and name a known subject.
 *   - decoded by the fast path and by Zydis, whose summaries must agree wherever the fast path
 *     answers (fu_x86_compare_decoders, from the first DECODE_ALIGNMENTS offsets).
 *
 * Standalone (gcc ASAN+UBSAN): main() runs hand-written hostile functions, then for each ELF file
 * given, --inputs seeded slices of its .text (real functions' bytes, at random starts and lengths)
 * with random CFI, each with --mutations mutants (byte flips, truncation, inserted jumps).
 * A watchdog (alarm) turns a hang into a failure; a failing input is saved under --save-dir and
 * `synth_driver --replay FILE` runs it again.
 *
 * Exit status: 0 clean, 2 usage, 3 timeout; a sanitizer report or an invariant violation aborts.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "synth.h"
#include "synth_table.h"
#include "trace.h"

#define FUZZ_DRIVER "synth_driver"
#define FUZZ_REPLAY "build/synth_driver_asan --replay"
#include "fuzz_common.h"
#include "fuzz_elf.h"
#include "fuzz_files.h"

#define CFI_BYTES 24
#define HEADER_BYTES (1 + CFI_BYTES)
/* Code per seeded slice: long enough for whole functions with loops and jump tables. */
#define SLICE_MAX 8192

typedef struct walk_check {
    uint64_t start, end, last;
    bool any;
    uint32_t visits;
    const fu_synth_scratch *judged; /* the run had state_digest as its judge: compare its bytes */
} walk_check;

/* A byte of everything in `state` a judgment could read. */
static uint8_t state_digest(const fu_synth_state *state)
{
    uint32_t h = 2166136261u; /* FNV-1a over the values, field by field (not the padding) */
#define MIX(v) (h = (h ^ (uint32_t)(v)) * 16777619u, h = (h ^ (uint32_t)((uint64_t)(v) >> 32)) * 16777619u)
    for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++) {
        MIX(state->regs[r].kind);
        MIX(state->regs[r].reg);
        MIX(state->regs[r].offset);
    }
    MIX(state->slot_count);
    MIX(state->slots_lost);
    MIX(state->unknown_stores);
    for (unsigned i = 0; i < state->slot_count; i++) {
        MIX(state->slots[i].space);
        MIX(state->slots[i].offset);
        MIX(state->slots[i].value.kind);
        MIX(state->slots[i].value.reg);
        MIX(state->slots[i].value.offset);
    }
#undef MIX
    return (uint8_t)(h ^ h >> 8 ^ h >> 16 ^ h >> 24);
}

/* A judge that reads the whole state: its byte holds until anything changes. */
static void digest_judge(void *context, uint64_t address, const fu_synth_state *state, uint32_t changed,
                         fu_synth_judgment *judgment)
{
    judgment->from = 0;
    judgment->until = UINT64_MAX;
    judgment->reads = FU_SYNTH_CHANGED_ALL;
    judgment->byte = state_digest(state);
}

static bool check_visit(void *context, uint64_t address, const fu_x86_insn *insn, const fu_synth_state *state,
                        uint32_t changed)
{
    walk_check *w = context;
    CHECK(address >= w->start && address < w->end, "visit at 0x%" PRIx64 " outside [0x%" PRIx64 ", 0x%" PRIx64 ")",
          address, w->start, w->end);
    CHECK(!w->any || address > w->last, "visit at 0x%" PRIx64 " after 0x%" PRIx64, address, w->last);
    CHECK(insn->kind <= FU_X86_INVALID && insn->length <= FU_X86_MAX_INSN_LENGTH, "instruction summary out of range");
    CHECK(state->slot_count <= FU_SYNTH_MAX_SLOTS, "%u slots", state->slot_count);
    for (unsigned i = 1; i < state->slot_count; i++)
        CHECK(state->slots[i - 1].space < state->slots[i].space ||
                  (state->slots[i - 1].space == state->slots[i].space &&
                   state->slots[i - 1].offset < state->slots[i].offset),
              "slots out of order at 0x%" PRIx64, address);
    fu_synth_row row;
    fu_synth_derive_row(state, FU_X86_REG_NONE, &row);
    CHECK(row.cfa.kind == FU_RULE_UNSPECIFIED || (row.cfa.kind == FU_CFA_REG_OFFSET && row.cfa.reg < FU_X86_GPR_COUNT),
          "derived CFA rule %u", row.cfa.kind);
    if (w->judged)
        CHECK(w->judged->judgments[insn - w->judged->insns] == state_digest(state),
              "the judgment kept at 0x%" PRIx64 " is not of the state its visit sees", address);
    CHECK(!(row.kept_caller_saved & (FU_CALLEE_SAVED_MASK | 1u << FU_REG_RSP)), "kept caller-saved 0x%x",
          row.kept_caller_saved);
    w->last = address;
    w->any = true;
    w->visits++;
    return true;
}

static void run_synth(const uint8_t *code, size_t size, uint64_t start, const fu_image_segment *segments,
                      size_t segment_count, const uint64_t *noreturn, size_t noreturn_count,
                      const fu_synth_state *entry, fu_synth_scratch *scratch)
{
    /* with a further entry state: a call site over the first half landing a third of the way in, and
     * that third entered from elsewhere (both anywhere: inside an instruction, past the end) */
    fu_synth_call_site site = {.start = start, .end = start + size / 2, .landing_pad = start + size / 3};
    fu_synth_entry further = {.address = start + size / 3 + 1, .state = entry};
    fu_synth_args_size popped = {.address = start + size / 4, .bytes = 16}; /* pushed arguments from there */
    /* the image's segments are its code too: the callees of direct calls are read (synth.c scan_callee) */
    fu_synth_function function = {.start = start, .end = start + size, .code = code, .noreturn = noreturn,
                                  .noreturn_count = noreturn_count, .segments = segments,
                                  .segment_count = segment_count, .code_segments = segments,
                                  .code_segment_count = segment_count, .entry = entry,
                                  .caller_saved_values = entry == NULL,
                                  .call_sites = entry ? &site : NULL, .call_site_count = entry ? 1 : 0,
                                  .args_sizes = entry ? &popped : NULL, .args_size_count = entry ? 1 : 0,
                                  .entries = entry ? &further : NULL, .entry_count = entry ? 1 : 0};
    /* the visit pass leaves the caller-saved registers' entry values out of its states (synth.c
     * written_caller_saved): the walks' states are compared where they are not given */
    if (!function.caller_saved_values)
        function.judge = (fu_synth_judge_hook){digest_judge, NULL};
    walk_check w = {.start = start, .end = start + size, .judged = function.judge.judge ? scratch : NULL};
    fu_synth_counts counts;
    char reason[FU_SYNTH_REASON_MAX];
    fu_synth_outcome outcome = fu_synth_run(&function, scratch, check_visit, &w, &counts, reason);
    CHECK(outcome == FU_SYNTH_DECIDED || outcome == FU_SYNTH_UNDECIDED, "outcome %d", outcome);
    CHECK(memchr(reason, 0, sizeof reason) != NULL, "reason not terminated");
    if (outcome == FU_SYNTH_UNDECIDED)
        CHECK(reason[0], "undecided without a reason");
    else
        CHECK(counts.reached == w.visits && counts.reached <= counts.instructions && counts.reached > 0,
              "reached %u, visited %u, decoded %u", counts.reached, w.visits, counts.instructions);
}

/* .eh_frame with one CIE (no augmentation: absolute 8-byte pointers; CFA = rsp+8, ra at CFA-8) and
 * one FDE over [start, start + size) whose instructions are `cfi`. Returns the section's length. */
/* `lsda`: the FDE names an LSDA at that address (a CIE with the "zL" augmentation), 0: none. */
static size_t build_eh_frame(uint8_t *out, uint64_t start, uint64_t size, const uint8_t *cfi, size_t cfi_size,
                             uint64_t lsda)
{
    static const uint8_t cie[] = {0x10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1, 0, 0};
    /* "zL": augmentation data of one byte, the LSDA encoding (absptr) */
    static const uint8_t cie_lsda[] = {0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'L', 0, 1, 0x78, 16, 1, 0,
                                       0x0c, 7, 8, 0x90, 1, 0, 0};
    size_t n = lsda ? sizeof cie_lsda : sizeof cie;
    memcpy(out, lsda ? cie_lsda : cie, n);
    size_t augmentation = lsda ? 1 + 8 : 0;
    uint32_t fde_length = (uint32_t)(4 + 16 + augmentation + cfi_size);
    fde_length = (fde_length + 7) & ~7u;
    size_t fde = n;
    memcpy(out + n, &fde_length, 4);
    uint32_t cie_pointer = (uint32_t)(n + 4);
    memcpy(out + n + 4, &cie_pointer, 4);
    memcpy(out + n + 8, &start, 8);
    memcpy(out + n + 16, &size, 8);
    if (lsda) {
        out[n + 24] = 8;
        memcpy(out + n + 25, &lsda, 8);
    }
    memcpy(out + n + 24 + augmentation, cfi, cfi_size);
    memset(out + n + 24 + augmentation + cfi_size, 0, fde_length - 20 - augmentation - cfi_size); /* DW_CFA_nop padding */
    n = fde + 4 + fde_length;
    memset(out + n, 0, 4); /* terminator */
    return n + 4;
}

typedef struct judge_memory {
    const uint8_t *bytes;
    size_t size;
    uint64_t address;
} judge_memory;

static bool judge_read(void *opaque, uint64_t address, unsigned size, uint64_t *out)
{
    const judge_memory *m = opaque;
    if (size == 0 || size > 8 || address < m->address || address - m->address > m->size ||
        size > m->size - (address - m->address))
        return false;
    uint64_t value = 0;
    memcpy(&value, m->bytes + (address - m->address), size);
    *out = value;
    return true;
}

/* Every row of `table` judged as the tracer judges a step, with registers and a true frame taken
 * from the code bytes (near the code's own address half the time, so that rules read it). */
static void run_judge(const fu_cfi_table *table, const uint8_t *code, size_t size, uint64_t start)
{
    judge_memory memory = {code, size, start};
    for (uint32_t row = 0; row < table->row_count; row++) {
        uint64_t regs[17];
        for (unsigned i = 0; i < 17; i++) {
            uint64_t noise = 0;
            if (size)
                memcpy(&noise, code + (row * 17u + i) % size, size - (row * 17u + i) % size < 8 ? 1 : 8);
            regs[i] = (noise & 1) ? start + noise % (size + 16) : noise;
        }
        fu_trace_frame frame = {.cfa = regs[7] + 8, .return_address = regs[16] + 1};
        for (unsigned i = 0; i < FU_TRACE_SAVED_COUNT; i++)
            frame.entry_values[i] = regs[FU_TRACE_SAVED_COLUMNS[i]];
        fu_trace_record findings[FU_TRACE_MAX_FINDINGS_PER_STEP];
        unsigned count = 0;
        fu_trace_judgement judgement = fu_trace_judge(table, fu_cfi_table_state(table, table->row_state[row]), 16, regs,
                                                      &frame, judge_read, &memory, findings,
                                                      FU_TRACE_MAX_FINDINGS_PER_STEP, &count);
        CHECK(judgement <= FU_TRACE_NOT_EVALUABLE, "judgement %d", (int)judgement);
        CHECK(count <= FU_TRACE_MAX_FINDINGS_PER_STEP, "%u findings in one step", count);
        CHECK((judgement == FU_TRACE_DISAGREE) == (count > 0), "judgement %d with %u findings", (int)judgement, count);
        for (unsigned k = 0; k < count; k++)
            CHECK(findings[k].what < FU_TRACE_WHAT_COUNT, "finding about %u", findings[k].what);
    }
}

/* The synthesized table of the checked FDEs (those judged mismatch corrected) and of the code seen
 * as having no CFI (all of it, and its second half), in both views: its ranges sorted, inside what
 * they describe, and its `.debug_frame` encoding parsed back with one FDE per range. */
static void run_synth_table(const fu_check_image *image, const fu_check_batch *batch, uint64_t start, size_t size)
{
    uint32_t mismatch[4];
    size_t mismatch_count = 0;
    for (size_t i = 0; i < batch->count && mismatch_count < 4; i++)
        if (batch->results[i].verdict == FU_CHECK_MISMATCH)
            mismatch[mismatch_count++] = batch->results[i].entry;
    uint64_t uncovered[4] = {start, start + size, start + size / 2, start + size};
    for (int mode = FU_SYNTH_MISSING; mode <= FU_SYNTH_REPAIR; mode++) {
        fu_synth_request request = {.image = image, .mode = (fu_synth_mode)mode, .mismatch = {mismatch, NULL},
                                    .mismatch_count = {mismatch_count, 0}, .uncovered = uncovered,
                                    .uncovered_count = 2};
        fu_synth_table table;
        memset(&table, 0, sizeof table);
        fu_error err = {0};
        fu_status status = fu_synth_table_build(&table, &request, &err);
        CHECK(status == FU_OK, "synth table failed %d: %s", status, err.message);
        size_t count = fu_synth_table_range_count(&table);
        const fu_synth_range *ranges = (const fu_synth_range *)table.ranges.data;
        const fu_synth_table_row *rows = (const fu_synth_table_row *)table.rows.data;
        for (size_t i = 0; i < count; i++) {
            const fu_synth_range *r = &ranges[i];
            CHECK(r->start < r->end && r->origin <= FU_ORIGIN_SYNTHESIZED, "range %zu malformed", i);
            CHECK(i == 0 || ranges[i - 1].start <= r->start, "ranges not sorted");
            CHECK(r->origin != FU_ORIGIN_SYNTHESIZED || i + 1 == count || ranges[i + 1].start >= r->end,
                  "a synthesized range overlaps the next one");
            CHECK((uint64_t)r->first_row + r->row_count <= table.rows.len / sizeof *rows, "rows out of the buffer");
            for (uint32_t k = 0; k < r->row_count; k++) {
                const fu_synth_table_row *row = &rows[r->first_row + k];
                /* declared rows as the CFI states them: past the end too, never back */
                CHECK(row->address >= (k ? rows[r->first_row + k - 1].address : r->start) &&
                          (row->table != FU_SYNTH_ROW_DERIVED || row->address < r->end),
                      "row outside its range");
                CHECK(row->table == FU_SYNTH_ROW_DERIVED ? row->state < table.derived.len / sizeof(fu_synth_row)
                                                         : row->table < 2 && table.tables[row->table] &&
                                                               row->state < table.tables[row->table]->state_count,
                      "row state out of range");
            }
        }
        fu_buffer encoded = {0};
        status = fu_synth_table_encode(&table, &encoded, &err);
        CHECK(status == FU_OK, "encoding failed %d: %s", status, err.message);
        fu_section section = {.kind = FU_SECTION_DEBUG_FRAME, .data = encoded.data, .size = encoded.len,
                              .address_size = 8};
        fu_cfi_table parsed;
        status = fu_cfi_table_parse(&parsed, &section, &err);
        if (status == FU_OK)
            status = fu_cfi_table_evaluate(&parsed, &err);
        CHECK(status == FU_OK, "the encoding does not parse %d: %s", status, err.message);
        size_t fdes = 0;
        for (uint32_t e = 0; e < parsed.entry_count; e++) {
            const fu_entry *entry = &parsed.entries[e];
            CHECK(!entry->has_error, "encoded entry %u: %s", e, entry->error_message);
            if (entry->kind != FU_ENTRY_FDE)
                continue;
            CHECK(fdes < count && entry->pc_begin == ranges[fdes].start &&
                      entry->pc_range == ranges[fdes].end - ranges[fdes].start, "encoded FDE %zu is not its range", fdes);
            fdes++;
        }
        CHECK(fdes == count, "%zu FDEs encoded for %zu ranges", fdes, count);
        fu_cfi_table_free(&parsed);
        free(encoded.data);
        fu_synth_table_free(&table);
    }
}

static void run_check(const uint8_t *code, size_t size, uint64_t start, const uint8_t *cfi, const fu_image_segment *segments,
                      size_t segment_count, const uint64_t *noreturn, size_t noreturn_count, uint64_t lsda)
{
    uint8_t section_bytes[128];
    size_t section_size = build_eh_frame(section_bytes, start, size, cfi, CFI_BYTES, lsda);
    CHECK(section_size <= sizeof section_bytes, "eh_frame builder overflow");
    fu_section section = {.kind = FU_SECTION_EH_FRAME, .data = section_bytes, .size = section_size,
                          .address = 0x100000, .address_size = 8};
    fu_cfi_table table;
    fu_error err = {0};
    fu_status status = fu_cfi_table_parse(&table, &section, &err);
    if (status == FU_OK)
        status = fu_cfi_table_evaluate(&table, &err);
    if (status == FU_OK)
        status = fu_cfi_table_build_index(&table, &err);
    CHECK(status == FU_OK, "table-wide failure %d: %s", status, err.message);
    uint32_t entries[4];
    size_t count = 0;
    for (uint32_t e = 0; e < table.entry_count && count < 4; e++)
        if (table.entries[e].kind == FU_ENTRY_FDE)
            entries[count++] = e;
    fu_image_segment code_segment = {.vaddr = start, .data = code, .size = size};
    /* entered from elsewhere at two places (sorted; anywhere: inside an instruction, past the end) */
    uint64_t foreign[2] = {start + 1, start + size / 3};
    if (foreign[1] < foreign[0])
        foreign[1] = foreign[0];
    fu_check_image image = {.code = &code_segment, .code_count = 1, .segments = segments,
                            .segment_count = segment_count, .noreturn = noreturn, .noreturn_count = noreturn_count,
                            .tables = {&table, NULL}, .foreign_entries = foreign, .foreign_entry_count = 2};
    fu_check_batch batch;
    memset(&batch, 0, sizeof batch);
    uint32_t *overlaps = malloc((table.entry_count ? table.entry_count : 1) * sizeof *overlaps);
    CHECK(overlaps != NULL, "out of memory");
    fu_check_overlaps(&table, overlaps);
    status = fu_check_fdes(&image, &table, overlaps, entries, count, &batch, &err);
    CHECK(status == FU_OK, "check failed %d: %s", status, err.message);
    CHECK(batch.count == count, "%zu results for %zu FDEs", batch.count, count);
    size_t findings = batch.findings.len / sizeof(fu_check_finding);
    for (size_t i = 0; i < batch.count; i++) {
        const fu_check_fde_result *r = &batch.results[i];
        CHECK(r->verdict <= FU_CHECK_UNDECIDED, "verdict %u", r->verdict);
        CHECK((uint64_t)r->first_finding + r->finding_count <= findings, "findings out of the buffer");
        CHECK((uint64_t)r->agree + r->mismatch + r->unknown + r->unreached <= size, "more instructions than bytes");
        CHECK(memchr(r->reason, 0, sizeof r->reason) != NULL, "reason not terminated");
        /* no findings in the batch: no buffer to index */
        const fu_check_finding *f = r->finding_count ? (const fu_check_finding *)batch.findings.data + r->first_finding
                                                     : NULL;
        for (uint32_t k = 0; k < r->finding_count; k++)
            CHECK(memchr(f[k].declared, 0, sizeof f[k].declared) && memchr(f[k].derived, 0, sizeof f[k].derived),
                  "finding text not terminated");
    }
    run_synth_table(&image, &batch, start, size);
    fu_check_batch_free(&batch);
    free(overlaps);
    run_judge(&table, code, size, start);
    fu_cfi_table_free(&table);
}

static fu_synth_scratch scratch; /* shared by every input, as one check batch shares it */

/* The decoder's fast path against Zydis over `code`, decoded linearly from each of the first
 * DECODE_ALIGNMENTS offsets (hostile bytes resynchronize differently from each). */
#define DECODE_ALIGNMENTS 4
static void compare_decoders(const uint8_t *code, size_t size, uint64_t start)
{
    fu_x86_decoder decoder;
    fu_x86_decoder_init(&decoder);
    for (size_t offset = 0; offset < DECODE_ALIGNMENTS && offset < size; offset++) {
        fu_x86_decoder_comparison comparison;
        fu_x86_compare_decoders(&decoder, code + offset, size - offset, start + offset, &comparison);
        CHECK(comparison.mismatches == 0, "fast decoder differs from Zydis at 0x%" PRIx64 ": %s",
              comparison.first_mismatch, comparison.first_difference);
    }
}

static void run_input(const uint8_t *data, size_t size)
{
    if (size < HEADER_BYTES)
        return;
    uint8_t flags = data[0];
    const uint8_t *cfi = data + 1, *code = data + HEADER_BYTES;
    size_t code_size = size - HEADER_BYTES;
    uint64_t start = flags & 1 ? 0x400000 : UINT64_MAX - 0x10000; /* near the top: address arithmetic wraps */
    if (code_size > 0x10000 - 1)
        code_size = 0x10000 - 1;
    /* the input itself as the image, so that jump tables can be read from it */
    fu_image_segment segments[2] = {{.vaddr = start, .data = code, .size = code_size},
                                    {.vaddr = 0x600000, .data = data, .size = size}};
    uint64_t noreturn[3] = {start + (code_size / 2), start + code_size, 0x600000};
    if (noreturn[1] < noreturn[0]) /* keep the list sorted when the addresses wrap */
        noreturn[1] = noreturn[0];
    size_t segment_count = flags & 2 ? 2 : 0;
    run_synth(code, code_size, start, segments, segment_count, NULL, 0, NULL, &scratch);
    run_synth(code, code_size, start, segments, segment_count, noreturn, 2, NULL, &scratch);
    fu_synth_state entry;
    fu_synth_entry_state(&entry, flags & 1);
    entry.regs[FU_REG_RSP].offset = -(int64_t)(flags & 0xf8);
    fu_synth_store(&entry, entry.regs[FU_REG_RSP], (fu_synth_value){.kind = FU_VALUE_ENTRY_REGISTER, .reg = 3});
    run_synth(code, code_size, start, segments, segment_count, noreturn, 2, &entry, &scratch);
    /* the input's own bytes as the LSDA (readable when the input is a segment) */
    run_check(code, code_size, start, cfi, segments, segment_count, noreturn, 2, flags & 4 ? 0x600000 + HEADER_BYTES : 0);
    compare_decoders(code, code_size, start);
}

/* ---- standalone: hostile functions, slices of real code and their mutants --------------------------- */

static void run_one(const char *label, const uint8_t *input, size_t size, unsigned timeout)
{
    fuzz_begin_input(input, size, label);
    if (timeout)
        alarm(timeout);
    run_input(input, size);
    alarm(0);
}

/* A header (flags, CFI) and code, run as one input. */
static void run_code(const char *label, uint8_t flags, const uint8_t *cfi, const uint8_t *code, size_t size,
                     unsigned timeout)
{
    uint8_t *input = malloc(HEADER_BYTES + size + 1);
    input[0] = flags;
    memcpy(input + 1, cfi, CFI_BYTES);
    memcpy(input + HEADER_BYTES, code, size);
    run_one(label, input, HEADER_BYTES + size, timeout);
    free(input);
}

static void mutate(uint8_t *code, size_t size, uint64_t *rng)
{
    if (!size)
        return;
    size_t at = rng_below(rng, size);
    switch (rng_below(rng, 4)) {
    case 0: code[at] ^= (uint8_t)(1u << rng_below(rng, 8)); break;
    case 1: code[at] = (uint8_t)rng_next(rng); break;
    case 2: /* a short jump to anywhere near */
        code[at] = 0xeb;
        if (at + 1 < size)
            code[at + 1] = (uint8_t)rng_next(rng);
        break;
    default: /* push, pop, leave, ret, ud2 and jump-table bytes where the interpreter looks */
        {
            static const uint8_t picks[] = {0x53, 0x5b, 0x55, 0x5d, 0xc9, 0xc3, 0x0f, 0x0b, 0xff, 0xe0, 0x48, 0x63};
            code[at] = picks[rng_below(rng, sizeof picks)];
        }
        break;
    }
}

static void run_hostile(unsigned timeout)
{
    static const uint8_t standard_cfi[CFI_BYTES] = {0x41, 0x0e, 0x10, 0x83, 0x02}; /* advance 1; cfa+16; rbx c-16 */
    uint8_t code[4096];
    /* a push of every callee-saved register, many times: more slots than FU_SYNTH_MAX_SLOTS */
    for (size_t i = 0; i < 2048; i++)
        code[i] = 0x53;
    code[2048] = 0xc3;
    run_code("2048 pushes", 3, standard_cfi, code, 2049, timeout);
    /* a loop that pushes: disagreeing stack pointers at the loop head */
    static const uint8_t push_loop[] = {0x53, 0xeb, 0xfd};
    run_code("push loop", 3, standard_cfi, push_loop, sizeof push_loop, timeout);
    /* jmp to itself; a jump table whose entries point at themselves */
    static const uint8_t self_jump[] = {0xeb, 0xfe};
    run_code("jmp .", 1, standard_cfi, self_jump, sizeof self_jump, timeout);
    static const uint8_t table_jump[] = {0x48, 0x8d, 0x15, 0xf9, 0xff, 0xff, 0xff, 0x48, 0x63, 0x04, 0xba,
                                         0x48, 0x01, 0xd0, 0xff, 0xe0};
    run_code("jump table over its own code", 3, standard_cfi, table_jump, sizeof table_jump, timeout);
    /* every byte value as code; nothing but prefixes; undecodable bytes */
    for (size_t i = 0; i < 256; i++)
        code[i] = (uint8_t)i;
    run_code("bytes 0..255", 3, standard_cfi, code, 256, timeout);
    memset(code, 0x66, 64);
    run_code("prefixes", 1, standard_cfi, code, 64, timeout);
    memset(code, 0xff, 64);
    run_code("0xff", 1, standard_cfi, code, 64, timeout);
    run_code("empty", 1, standard_cfi, code, 0, timeout);
    /* enter with a nesting level, and-realign twice, leave without a frame */
    static const uint8_t frames[] = {0xc8, 0x10, 0x00, 0x05, 0x48, 0x83, 0xe4, 0xf0, 0x48, 0x83, 0xe4, 0xe0,
                                     0xc9, 0xc9, 0x5c, 0xc3};
    run_code("enter, and, leave", 3, standard_cfi, frames, sizeof frames, timeout);
    /* the entry rsp kept in rcx across a call to a helper (synth.c scan_callee): a helper that calls
     * itself and branches back to its start, one that jumps through a register, and one with more
     * branch targets than FU_SYNTH_MAX_CALLEE_PATHS */
    static const uint8_t kept_in_rcx[] = {0x48, 0x89, 0xe1, 0x48, 0x83, 0xe4, 0xe0, 0xe8, 0x04, 0x00, 0x00, 0x00,
                                          0x48, 0x89, 0xcc, 0xc3, 0xe8, 0xfb, 0xff, 0xff, 0xff, 0x74, 0xf9, 0xc3};
    memcpy(code, kept_in_rcx, sizeof kept_in_rcx);
    run_code("rsp kept in rcx, recursive helper", 3, standard_cfi, code, sizeof kept_in_rcx, timeout);
    code[sizeof kept_in_rcx - 1] = 0xff;
    code[sizeof kept_in_rcx] = 0xe0;
    run_code("rsp kept in rcx, helper jumping through a register", 3, standard_cfi, code, sizeof kept_in_rcx + 1,
             timeout);
    size_t branches = 16;
    for (unsigned i = 0; i < FU_SYNTH_MAX_CALLEE_PATHS + 8; i++, branches += 2) {
        code[branches] = 0x74; /* je to the next instruction */
        code[branches + 1] = 0x00;
    }
    code[branches] = 0xc3;
    run_code("rsp kept in rcx, helper with too many paths", 3, standard_cfi, code, branches + 1, timeout);
    /* CFI offsets at the ends of int64: the CFA at rsp + (2^63 - 1), rbx saved at CFA + (2^63 - 8)
     * and its value at CFA - 2^63 (DW_CFA_def_cfa, DW_CFA_offset_extended_sf, DW_CFA_val_offset_sf,
     * the factored offsets times the CIE's -8), then the CFA at rsp - 2^63 (DW_CFA_def_cfa_sf) */
    static const uint8_t extreme_cfi[CFI_BYTES] = {
        0x0c, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        0x41, 0x11, 3, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f};
    static const uint8_t extreme_cfi_low[CFI_BYTES] = {
        0x15, 3, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
        0x41, 0x12, 7, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f};
    static const uint8_t push_pop[] = {0x53, 0x5b, 0xc3};
    run_code("CFI offsets near INT64_MAX", 1, extreme_cfi, push_pop, sizeof push_pop, timeout);
    run_code("CFI offsets near INT64_MIN", 1, extreme_cfi_low, push_pop, sizeof push_pop, timeout);
    /* every opcode pair of both maps, bare and after each prefix the fast path knows, before a
     * ModRM with SIB and displacement, then immediate-sized bytes; whole and cut off in the middle */
    fu_x86_decoder grid_decoder;
    fu_x86_decoder_init(&grid_decoder);
    static const uint8_t prefixes[][2] = {{0}, {0x48}, {0x41}, {0x66}, {0xf3}, {0xf2}, {0x64}, {0x66, 0x2e}, {0x66, 0x4c}};
    static const uint8_t prefix_lengths[] = {0, 1, 1, 1, 1, 1, 1, 2, 2};
    static const uint8_t tail[] = {0x84, 0x24, 0x80, 0x00, 0x00, 0x00, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01};
    for (size_t p = 0; p < sizeof prefix_lengths; p++)
        for (unsigned opcode = 0; opcode < 0x10000; opcode++) {
            size_t n = prefix_lengths[p];
            memcpy(code, prefixes[p], n);
            code[n++] = (uint8_t)(opcode >> 8);
            code[n++] = (uint8_t)opcode;
            memcpy(code + n, tail, sizeof tail);
            n += sizeof tail;
            for (size_t cut = n / 2; cut <= n; cut += n - n / 2) {
                fu_x86_decoder_comparison comparison;
                fu_x86_compare_decoders(&grid_decoder, code, cut, 0x1000, &comparison);
                CHECK(comparison.mismatches == 0, "fast decoder differs from Zydis on %02x %02x %02x %02x: %s", code[0],
                      code[1], code[2], code[3], comparison.first_difference);
            }
        }
}

/* The .text section of an ELF file (its file bytes), or NULL. */
static const uint8_t *text_of(const uint8_t *file, size_t size, size_t *text_size)
{
    fuzz_elf64 elf;
    if (!fuzz_elf64_open(&elf, file, size))
        return NULL;
    for (unsigned i = 0; i < elf.eh.e_shnum; i++) {
        Elf64_Shdr sh;
        const char *name;
        if (fuzz_elf64_section(&elf, i, &sh, &name) && !strcmp(name, ".text") && sh.sh_size) {
            *text_size = sh.sh_size;
            return file + sh.sh_offset;
        }
    }
    return NULL;
}

#ifdef FU_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_input(data, size);
    return 0;
}
#else
int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL);
    int inputs = 2000, mutations = 4;
    unsigned timeout = 20;
    const char *replay = NULL, *save_dir = NULL;
    int first = 1;
    for (; first + 1 < argc && !strncmp(argv[first], "--", 2); first += 2) {
        if (!strcmp(argv[first], "--seed"))
            seed = strtoull(argv[first + 1], NULL, 10);
        else if (!strcmp(argv[first], "--inputs"))
            inputs = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--mutations"))
            mutations = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--timeout"))
            timeout = (unsigned)atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--replay"))
            replay = argv[first + 1];
        else if (!strcmp(argv[first], "--save-dir"))
            save_dir = argv[first + 1];
        else {
            fprintf(stderr, FUZZ_DRIVER ": unknown option %s\n", argv[first]);
            return 2;
        }
    }
    fuzz_install_failure_handlers();
    if (replay) {
        size_t size;
        uint8_t *input = fuzz_read_file(replay, (size_t)1 << 24, &size);
        if (!input) {
            fprintf(stderr, FUZZ_DRIVER ": cannot read %s\n", replay);
            return 2;
        }
        run_one(replay, input, size, timeout);
        printf(FUZZ_DRIVER ": %s clean\n", replay);
        free(input);
        fu_synth_scratch_free(&scratch);
        return 0;
    }
    if (save_dir)
        snprintf(save_path, sizeof save_path, "%s/synth-%llu.bin", save_dir, (unsigned long long)seed);
    printf(FUZZ_DRIVER ": seed %llu, %d slices of each file's .text, %d mutants of each\n",
           (unsigned long long)seed, inputs, mutations);
    fflush(stdout);
    run_hostile(timeout);
    uint64_t rng = seed;
    size_t runs = 0;
    uint8_t *input = malloc(HEADER_BYTES + SLICE_MAX);
    for (int a = first; a < argc; a++) {
        size_t size, text_size = 0;
        uint8_t *file = fuzz_read_file(argv[a], (size_t)256 << 20, &size);
        const uint8_t *text = file ? text_of(file, size, &text_size) : NULL;
        if (!text || text_size < 64) {
            fprintf(stderr, FUZZ_DRIVER ": %s: no .text, skipped\n", argv[a]);
            free(file);
            continue;
        }
        for (int i = 0; i < inputs; i++) {
            size_t at = rng_below(&rng, text_size) & ~(size_t)15; /* functions start 16-aligned */
            size_t length = 1 + rng_below(&rng, SLICE_MAX);
            if (length > text_size - at)
                length = text_size - at;
            input[0] = (uint8_t)rng_next(&rng);
            for (size_t k = 0; k < CFI_BYTES; k++)
                input[1 + k] = (uint8_t)rng_next(&rng);
            memcpy(input + HEADER_BYTES, text + at, length);
            char label[512];
            for (int m = 0; m <= mutations; m++) {
                for (int k = 0; m && k < 1 + (int)rng_below(&rng, 4); k++)
                    mutate(input + HEADER_BYTES, length, &rng);
                snprintf(label, sizeof label, "%s .text+0x%zx length %zu mutant %d", argv[a], at, length, m);
                run_one(label, input, HEADER_BYTES + length, timeout);
                runs++;
            }
        }
        free(file);
    }
    free(input);
    fu_synth_scratch_free(&scratch);
    printf(FUZZ_DRIVER ": %zu inputs clean\n", runs);
    return 0;
}
#endif
