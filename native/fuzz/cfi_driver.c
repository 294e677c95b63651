/* cfi_driver: run every stage of the C core over one untrusted blob, for the sanitizer and fuzzing
 * builds of native/fuzz/Makefile (`make asan`, `make fuzz`).
 *
 * One blob is taken, in turn, as:
 *   - .eh_frame and .debug_frame, at a few section addresses and both address sizes: parse,
 *     evaluate, render with both readelf printers (into an fu_out with fd = -1, then discarded),
 *     look up edge and random PCs, and evaluate every expression rule the rows hold; evaluated
 *     again for the compact table's slow rows and for random ranges only, whose lookups must find
 *     what the whole table finds;
 *   - .eh_frame_hdr (fu_hdr_parse, then searches);
 *   - a DWARF expression (fu_expr_evaluate with a bounded fake memory, and both printers).
 * After each parse the table's invariants are checked (entries contiguous, every error names its
 * CIE/FDE and offset, rows and states in bounds, lookups return a covering FDE): a violation is a
 * bug even when no sanitizer fires.
 *
 * Two builds share fuzz_one():
 *   - libFuzzer (-DFU_LIBFUZZER): LLVMFuzzerTestOneInput is the entry point;
 *   - standalone (gcc, ASAN + UBSAN): main() runs each file given, and with --mutations N also N
 *     seeded structure-aware mutations of each (byte flips, truncation, length and CIE pointer
 *     corruption, remember_state runs, huge register numbers, unknown opcodes, bad pointer
 *     encodings). A watchdog (alarm) turns a hang into a failure; a sanitizer report or a timeout
 *     saves the input under --save-dir so that `cfi_driver FILE` replays it.
 *
 * Exit status: 0 clean, 2 usage, 3 timeout; the first sanitizer report (-fno-sanitize-recover=all)
 * or invariant violation aborts (SIGABRT, status 134), after the input is named and saved.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cfi.h" /* native/core/cfi.h, through -I */
#include "compact_table.h"
#include "eh_elf_rows.h"

#define FUZZ_DRIVER "cfi_driver"
#define FUZZ_REPLAY "cfi_driver"
#include "fuzz_common.h"
#include "fuzz_files.h"

/* ---- limits of the driver's own work -------------------------------------------------------- */

/* Lookups per table: edge PCs of this many FDEs, plus this many random PCs. A libc .eh_frame has
 * 3713 FDEs; sampling keeps the lookups a small part of one ASAN pass over it (0.2 s). */
#define FUZZ_LOOKUP_FDES 64
#define FUZZ_LOOKUP_RANDOM 64
/* Interned states whose expression rules are evaluated per table. */
#define FUZZ_EXPR_STATES 256
/* Fake target memory for DW_OP_deref: one readable page at FUZZ_MEMORY_BASE. */
#define FUZZ_MEMORY_BASE 0x7ffff000ull
#define FUZZ_MEMORY_SIZE 4096ull
/* Entries the mutator locates by walking length fields (libstdc++'s .eh_frame has ~4900). */
#define FUZZ_MAX_WALK_ENTRIES 65536
/* Default per-input watchdog, seconds: an unmutated libstdc++ .eh_frame takes ~0.3 s under ASAN. */
#define FUZZ_DEFAULT_TIMEOUT 10

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- the fake target for expressions --------------------------------------------------------- */

static bool fake_read_memory(void *opaque, uint64_t address, unsigned size, uint64_t *out)
{
    unsigned *reads = opaque;
    (*reads)++;
    if (size < 1 || size > 8 || address < FUZZ_MEMORY_BASE ||
        address - FUZZ_MEMORY_BASE > FUZZ_MEMORY_SIZE - size)
        return false;
    uint64_t v = 0;
    for (unsigned i = 0; i < size; i++) /* byte i of the page holds (address + i) * 7 */
        v |= (uint64_t)(uint8_t)((address + i) * 7) << (8 * i);
    *out = v;
    return true;
}

static void fake_context(fu_expr_context *ctx, unsigned *reads)
{
    memset(ctx, 0, sizeof *ctx);
    for (unsigned r = 0; r < 17; r++) { /* rax..r15 and the return address known */
        ctx->regs[r] = FUZZ_MEMORY_BASE + 0x100 + r * 8;
        ctx->valid[r / 64] |= (uint64_t)1 << (r % 64);
    }
    ctx->regs[7] = FUZZ_MEMORY_BASE + 0x800; /* rsp in the middle of the readable page */
    ctx->read_memory = fake_read_memory;
    ctx->opaque = reads;
    ctx->address_size = 8;
}

static void exercise_expression(const uint8_t *expr, uint64_t len)
{
    fu_expr_context ctx;
    unsigned reads = 0;
    fake_context(&ctx, &reads);
    uint64_t result;
    fu_error err = {0};
    fu_status status = fu_expr_evaluate(expr, len, &ctx, false, 0, &result, &err);
    CHECK(status == FU_OK || status == FU_ERR_EXPR, "fu_expr_evaluate returned status %d", status);
    CHECK(status == FU_OK || err.message[0], "fu_expr_evaluate failed without a message");
    /* every operation reads memory at most once: the step bound bounds the reads */
    CHECK(reads <= FU_EXPR_MAX_STEPS, "%u memory reads for one expression", reads);
    status = fu_expr_evaluate(expr, len, &ctx, true, FUZZ_MEMORY_BASE + 0x10, &result, &err);
    CHECK(status == FU_OK || status == FU_ERR_EXPR, "fu_expr_evaluate returned status %d", status);
}

static void exercise_expression_printers(const uint8_t *expr, uint64_t len)
{
    fu_out out = {.fd = -1};
    fu_expr_print_readelf(&out, expr, len, 8);
    fu_expr_print_llvm(&out, expr, len, 8);
    fu_expr_print_readelf(&out, expr, len, 4);
    free(out.buf);
}

/* ---- error statistics (--stats): which problems the inputs reached ---------------------------- */

#define FUZZ_MAX_PROBLEM_KINDS 96
static bool collect_stats;
static struct {
    char text[48];
    unsigned long count;
} problem_kinds[FUZZ_MAX_PROBLEM_KINDS];
static unsigned problem_kind_count;

/* Count an error by its wording, without the numbers: "FDE at .eh_frame+0x1a: DW_CFA_def_cfa:
 * register 1000 exceeds" counts as "DW_CFA_def_cfa: register ". */
static void count_problem(const char *message)
{
    const char *problem = strstr(message, ": ");
    problem = problem ? problem + 2 : message;
    char text[48];
    size_t n = 0;
    while (problem[n] && n < sizeof text - 1 && !(problem[n] >= '0' && problem[n] <= '9') &&
           problem[n] != '"' && problem[n] != '(')
        n++;
    memcpy(text, problem, n);
    text[n] = 0;
    for (unsigned i = 0; i < problem_kind_count; i++)
        if (strcmp(problem_kinds[i].text, text) == 0) {
            problem_kinds[i].count++;
            return;
        }
    if (problem_kind_count < FUZZ_MAX_PROBLEM_KINDS) {
        memcpy(problem_kinds[problem_kind_count].text, text, n + 1);
        problem_kinds[problem_kind_count++].count = 1;
    }
}

/* ---- tables ---------------------------------------------------------------------------------- */

static bool rule_kind_valid(uint8_t kind, bool cfa)
{
    if (cfa)
        return kind == FU_RULE_UNSPECIFIED || kind == FU_CFA_REG_OFFSET || kind == FU_CFA_EXPRESSION;
    return kind >= FU_RULE_UNDEFINED && kind <= FU_RULE_VAL_EXPRESSION;
}

static void check_rule(const fu_cfi_table *t, const fu_rule *r, bool cfa)
{
    CHECK(rule_kind_valid(r->kind, cfa), "rule kind %u (cfa=%d)", r->kind, cfa);
    if (r->kind == FU_RULE_EXPRESSION || r->kind == FU_RULE_VAL_EXPRESSION || r->kind == FU_CFA_EXPRESSION) {
        CHECK(r->value >= 0 && (uint64_t)r->value <= t->section.size &&
                  r->expr_len <= t->section.size - (uint64_t)r->value,
              "expression rule [0x%llx, +0x%x) outside the 0x%llx-byte section",
              (unsigned long long)r->value, r->expr_len, (unsigned long long)t->section.size);
    }
    /* a register rule names a column; the CFA register is any 16-bit number (not a column) */
    if (r->kind == FU_RULE_REGISTER)
        CHECK(r->reg < FU_MAX_COLUMNS, "rule names register %u", r->reg);
}

/* The error message of an entry must say what and where: "FDE at .eh_frame+0x1a30: ...". */
static void check_error_message(const fu_cfi_table *t, const fu_entry *e)
{
    CHECK(e->error_message != NULL, "entry at 0x%llx has an error but no message",
          (unsigned long long)e->offset);
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s at %s+0x%llx: ", e->kind == FU_ENTRY_CIE ? "CIE" : "FDE",
             t->section.kind == FU_SECTION_EH_FRAME ? ".eh_frame" : ".debug_frame",
             (unsigned long long)e->offset);
    CHECK(strncmp(e->error_message, prefix, strlen(prefix)) == 0 &&
              strlen(e->error_message) > strlen(prefix),
          "error message \"%s\" does not start with \"%s\" and a problem", e->error_message, prefix);
}

static void check_table(const fu_cfi_table *t)
{
    uint64_t expected_offset = 0;
    uint32_t errors = 0;
    for (uint32_t i = 0; i < t->entry_count; i++) {
        const fu_entry *e = &t->entries[i];
        CHECK(e->kind <= FU_ENTRY_TERMINATOR, "entry %u kind %u", i, e->kind);
        CHECK(e->offset == expected_offset, "entry %u at 0x%llx, expected 0x%llx (entries not contiguous)",
              i, (unsigned long long)e->offset, (unsigned long long)expected_offset);
        CHECK(e->offset < e->end && e->end <= t->section.size, "entry %u spans [0x%llx, 0x%llx) of 0x%llx",
              i, (unsigned long long)e->offset, (unsigned long long)e->end,
              (unsigned long long)t->section.size);
        expected_offset = e->end;
        if (e->has_error) {
            errors++;
            check_error_message(t, e);
            if (collect_stats)
                count_problem(e->error_message);
        }
        if (e->header_ok)
            CHECK(e->insns_offset >= e->offset + 4 && e->insns_offset <= e->end,
                  "entry at 0x%llx: instructions at 0x%llx outside [0x%llx, 0x%llx]",
                  (unsigned long long)e->offset, (unsigned long long)e->insns_offset,
                  (unsigned long long)e->offset, (unsigned long long)e->end);
        if (e->kind == FU_ENTRY_FDE && !e->has_error) {
            CHECK(e->header_ok && e->cie != NULL && e->cie_entry < t->entry_count &&
                      t->entries[e->cie_entry].kind == FU_ENTRY_CIE,
                  "clean FDE at 0x%llx without a CIE", (unsigned long long)e->offset);
        }
        if (!e->has_error && e->kind != FU_ENTRY_TERMINATOR) {
            CHECK(e->row_count > 0, "clean entry at 0x%llx has no rows", (unsigned long long)e->offset);
            CHECK((uint64_t)e->first_row + e->row_count <= t->row_count,
                  "entry at 0x%llx: rows [%u, +%u) of %u", (unsigned long long)e->offset, e->first_row,
                  e->row_count, t->row_count);
        }
    }
    CHECK(expected_offset == t->section.size || t->entry_count == 0 || t->entries[t->entry_count - 1].has_error,
          "entries end at 0x%llx of 0x%llx without an error", (unsigned long long)expected_offset,
          (unsigned long long)t->section.size);
    CHECK(errors == t->error_count, "error_count %u, %u entries with errors", t->error_count, errors);
    for (uint32_t r = 0; r < t->row_count; r++)
        CHECK(t->row_state[r] < t->state_count, "row %u state %u of %u", r, t->row_state[r], t->state_count);
    for (uint32_t s = 0; s < t->state_count; s++) {
        const fu_state *st = fu_cfi_table_state(t, s);
        CHECK((uint64_t)st->first + st->count <= t->pool_count, "state %u pool [%u, +%u) of %u", s,
              st->first, st->count, t->pool_count);
        check_rule(t, &st->cfa, true);
        for (unsigned k = 0; k < st->count; k++) {
            unsigned column = t->column_pool[st->first + k];
            CHECK(column < FU_MAX_COLUMNS, "state %u column %u", s, column);
            CHECK(k == 0 || column > t->column_pool[st->first + k - 1], "state %u columns not sorted", s);
            check_rule(t, &t->rule_pool[st->first + k], false);
        }
    }
    for (uint32_t k = 0; k < t->fde_count; k++) {
        const fu_entry *e = &t->entries[t->fde_sorted[k]];
        CHECK(e->kind == FU_ENTRY_FDE && !e->has_error, "FDE index holds entry %u", t->fde_sorted[k]);
        CHECK(k == 0 || t->entries[t->fde_sorted[k - 1]].pc_begin <= e->pc_begin, "FDE index not sorted");
    }
}

static void check_lookup(const fu_cfi_table *t, uint64_t pc)
{
    int64_t fde_index = -2;
    int64_t row = fu_cfi_table_find_row(t, pc, &fde_index);
    int64_t fde = fu_cfi_table_find_fde(t, pc);
    CHECK(fde == fde_index, "find_fde(0x%llx) = %lld but find_row reports FDE %lld", (unsigned long long)pc,
          (long long)fde, (long long)fde_index);
    if (fde < 0) {
        CHECK(row < 0, "a row without an FDE at 0x%llx", (unsigned long long)pc);
        return;
    }
    const fu_entry *e = &t->entries[fde];
    CHECK(e->kind == FU_ENTRY_FDE && pc - e->pc_begin < e->pc_range,
          "FDE at 0x%llx [0x%llx, +0x%llx) returned for pc 0x%llx", (unsigned long long)e->offset,
          (unsigned long long)e->pc_begin, (unsigned long long)e->pc_range, (unsigned long long)pc);
    if (row >= 0) {
        CHECK((uint64_t)row >= e->first_row && (uint64_t)row < (uint64_t)e->first_row + e->row_count,
              "row %lld outside its FDE's rows", (long long)row);
        const fu_state *st = fu_cfi_table_state(t, t->row_state[row]);
        fu_rule ra = fu_state_rule(t, st, (unsigned)(e->cie ? e->cie->ra_column : 16));
        (void)ra;
    }
}

/* Evaluate the expression rules of the first FUZZ_EXPR_STATES states, as an unwinder would. */
static void exercise_state_expressions(const fu_cfi_table *t)
{
    const uint8_t *base = t->section.data;
    uint32_t n = t->state_count < FUZZ_EXPR_STATES ? t->state_count : FUZZ_EXPR_STATES;
    for (uint32_t s = 0; s < n; s++) {
        const fu_state *st = fu_cfi_table_state(t, s);
        if (st->cfa.kind == FU_CFA_EXPRESSION)
            exercise_expression(base + st->cfa.value, st->cfa.expr_len);
        for (unsigned k = 0; k < st->count; k++) {
            const fu_rule *r = &t->rule_pool[st->first + k];
            if (r->kind == FU_RULE_EXPRESSION || r->kind == FU_RULE_VAL_EXPRESSION)
                exercise_expression(base + r->value, r->expr_len);
        }
    }
}

/* Mutants of one serialized compact table checked by fu_compact_open: each must be rejected with
 * a message or validate, and a validated one must answer lookups within its bounds. */
#define FUZZ_COMPACT_MUTANTS 8

/* The compact table built from a fuzzed table: it must serialize and validate, answer lookups,
 * and every mutant of its bytes must be rejected cleanly or still be a valid table. */
/* What a lookup at pc finds, comparable across tables: the FDE, the row's address and the compact
 * rule of its state (state ids differ between tables). */
typedef struct found_row {
    int64_t fde;
    uint64_t address;
    fu_compact_rule rule;
} found_row;

static found_row find(const fu_cfi_table *t, uint64_t pc)
{
    found_row f;
    memset(&f, 0, sizeof f);
    int64_t row = fu_cfi_table_find_row(t, pc, &f.fde);
    if (row < 0) {
        f.fde = -1;
        return f;
    }
    f.address = t->row_address[row];
    f.rule = fu_compact_rule_of_state(t, &t->entries[f.fde], fu_cfi_table_state(t, t->row_state[row]));
    return f;
}

/* The table evaluated again for `ranges` only (fu_cfi_table_evaluate_ranges): in the ranges, every
 * lookup finds what the whole table finds. */
static void exercise_selected(const fu_cfi_table *whole, const uint64_t *ranges, size_t n, uint64_t *rng)
{
    fu_cfi_table table;
    fu_error err = {0};
    fu_status status = fu_cfi_table_parse(&table, &whole->section, &err);
    if (status == FU_OK)
        status = fu_cfi_table_evaluate_ranges(&table, ranges, n, &err);
    CHECK(status == FU_OK, "evaluating selected ranges failed %d: %s", status, err.message);
    CHECK(table.fde_count <= whole->fde_count, "selected ranges index %u FDEs of %u", table.fde_count,
          whole->fde_count);
    for (size_t r = 0; r < n; r++) {
        uint64_t start = ranges[2 * r], end = ranges[2 * r + 1];
        for (unsigned i = 0; i < 16 && end > start; i++) {
            uint64_t pc = i == 0 ? start : i == 1 ? end - 1 : start + rng_below(rng, end - start);
            found_row a = find(whole, pc), b = find(&table, pc);
            CHECK(memcmp(&a, &b, sizeof a) == 0, "selected ranges: lookup at 0x%llx differs", (unsigned long long)pc);
        }
    }
    fu_cfi_table_free(&table);
}

static void exercise_compact(const fu_cfi_table *table, uint64_t low, uint64_t high, uint64_t *rng)
{
    fu_compact_build build;
    fu_error err = {0};
    if (fu_compact_build_tables(&build, table, NULL, NULL, &err) != FU_OK) {
        CHECK(err.status == FU_ERR_NOMEM || err.status == FU_ERR_COMPACT, "compact build failed: %s", err.message);
        return;
    }
    uint8_t *bytes = NULL;
    size_t size = 0;
    static const uint8_t key[20] = {1, 2, 3};
    if (fu_compact_serialize(&build, 1, key, sizeof key, FU_COMPACT_SYNTH_OFF, &bytes, &size, &err) == FU_OK) {
        fu_compact_table compact;
        CHECK(fu_compact_open(&compact, bytes, size, &err) == FU_OK, "a fresh compact table does not validate: %s",
              err.message);
        for (uint32_t i = 0; i < FUZZ_LOOKUP_RANDOM; i++) {
            uint32_t row;
            (void)fu_compact_find(&compact, low <= high ? low + rng_below(rng, high - low + 1) : rng_next(rng), &row);
        }
        /* the walker's use: the slow rows' ranges; then ranges anywhere in the covered code */
        uint64_t ranges[2 * 8];
        size_t n = fu_compact_slow_ranges(&compact, ranges, 8);
        if (n <= 8)
            exercise_selected(table, ranges, n, rng);
        for (size_t r = 0; r < 4 && low < high; r++) {
            ranges[2 * r] = low + rng_below(rng, high - low);
            ranges[2 * r + 1] = ranges[2 * r] + 1 + rng_below(rng, 64);
        }
        if (low < high)
            exercise_selected(table, ranges, 4, rng);
        uint8_t *mutant = malloc(size ? size : 1);
        for (unsigned m = 0; mutant && m < FUZZ_COMPACT_MUTANTS && size > 0; m++) {
            memcpy(mutant, bytes, size);
            size_t cut = m % 2 ? size : rng_below(rng, size + 1); /* truncate or flip */
            for (unsigned flips = 0; flips < 4; flips++)
                mutant[rng_below(rng, size)] ^= (uint8_t)(1u << rng_below(rng, 8));
            fu_error merr = {0};
            fu_compact_table damaged;
            if (fu_compact_open(&damaged, mutant, cut & ~(size_t)7, &merr) == FU_OK) {
                uint32_t row;
                (void)fu_compact_find(&damaged, rng_next(rng), &row);
            } else {
                CHECK(merr.message[0] != 0, "a rejected compact table has no message");
            }
        }
        free(mutant);
        free(bytes);
    }
    fu_compact_build_free(&build);
}

/* The fuzzed table as a synthesized view of a module without CFI (each FDE of a random origin) and
 * as one of a module whose CFI it is (CORRECTED FDEs replace their own rows): the overlay is made
 * or refused cleanly, and a table built with it validates, counts its rows by origin, and finds at
 * each overlay row's start a rule of that row's origin. */
static void exercise_overlay(const fu_cfi_table *table, uint64_t *rng)
{
    size_t fdes = table->entry_count;
    uint8_t *origins = malloc(fdes ? fdes : 1);
    if (!origins)
        return;
    for (size_t i = 0; i < fdes; i++)
        origins[i] = (uint8_t)rng_below(rng, FU_COMPACT_ORIGIN_COUNT);
    fu_compact_overlay_row *rows = NULL;
    fu_compact_overlay overlay = {NULL, 0, FU_COMPACT_SYNTH_REPAIR | FU_COMPACT_SYNTH_VERSION << 8};
    fu_error err = {0};
    if (fu_compact_overlay_of_table(table, origins, fdes, &rows, &overlay.count, &err) != FU_OK) {
        CHECK(err.status == FU_ERR_NOMEM || err.status == FU_ERR_INVALID, "overlay failed: %s", err.message);
        free(origins);
        return;
    }
    overlay.rows = rows;
    for (unsigned declared = 0; declared < 2; declared++) {
        fu_compact_build build;
        if (fu_compact_build_tables(&build, declared ? table : NULL, NULL, &overlay, &err) != FU_OK) {
            CHECK(err.status == FU_ERR_NOMEM || err.status == FU_ERR_COMPACT || err.status == FU_ERR_INVALID,
                  "compact build with an overlay failed: %s", err.message);
            continue;
        }
        uint8_t *bytes = NULL;
        size_t size = 0;
        static const uint8_t key[20] = {4, 5, 6};
        if (fu_compact_serialize(&build, 1, key, sizeof key, overlay.synth, &bytes, &size, &err) == FU_OK) {
            fu_compact_table compact;
            CHECK(fu_compact_open(&compact, bytes, size, &err) == FU_OK,
                  "a fresh compact table with an overlay does not validate: %s", err.message);
            for (size_t i = 0; i < overlay.count && !declared; i++) {
                /* no declared rows: a synthesized row is laid, a corrected one has nothing to replace */
                const fu_compact_rule *found = fu_compact_find(&compact, rows[i].start, NULL);
                bool synthesized = rows[i].rule.origin == FU_COMPACT_ORIGIN_SYNTHESIZED;
                CHECK(synthesized ? found && memcmp(found, &rows[i].rule, sizeof *found) == 0
                                  : !found || found->cfa_kind == FU_COMPACT_CFA_NO_INFO,
                      "overlay row %zu (origin %u) at 0x%llx: found rule of kind %d", i, rows[i].rule.origin,
                      (unsigned long long)rows[i].start, found ? found->cfa_kind : -1);
            }
            free(bytes);
        }
        fu_compact_build_free(&build);
    }
    free(rows);
    free(origins);
}

/* The eh_elf generator's intervals over the table (as .eh_frame or as .debug_frame, by its kind):
 * strictly increasing starts inside [base, end], keys that index the distinct keys or mark a gap,
 * each key's state inside its table; or a clean FU_ERR_EH_ELF / FU_ERR_NOMEM. */
static void exercise_eh_elf_rows(const fu_cfi_table *table, fu_section_kind kind)
{
    const fu_cfi_table *tables[2] = {kind == FU_SECTION_EH_FRAME ? table : NULL,
                                 kind == FU_SECTION_EH_FRAME ? NULL : table};
    fu_eh_elf_rows rows;
    fu_error err = {0};
    if (fu_eh_elf_rows_build(tables, &rows, &err) != FU_OK) {
        CHECK(err.status == FU_ERR_NOMEM || (err.status == FU_ERR_EH_ELF && err.message[0]),
              "eh_elf_rows failed with %d: %s", err.status, err.message);
        return;
    }
    for (size_t i = 0; i < rows.count; i++) {
        CHECK(rows.starts[i] >= rows.base && rows.starts[i] < rows.end, "eh_elf interval %zu outside [base, end)", i);
        CHECK(i == 0 || rows.starts[i] > rows.starts[i - 1], "eh_elf intervals not increasing at %zu", i);
        CHECK(rows.keys[i] == FU_EH_ELF_NO_KEY || rows.keys[i] < rows.key_count, "eh_elf key %u of %u", rows.keys[i],
              rows.key_count);
        CHECK(i == 0 || rows.keys[i] != rows.keys[i - 1], "eh_elf intervals %zu and %zu not merged", i - 1, i);
    }
    for (uint32_t k = 0; k < rows.key_count; k++) {
        fu_eh_elf_key key = fu_eh_elf_key_unpack(rows.packed[k]);
        CHECK(tables[key.table] && key.state < tables[key.table]->state_count, "eh_elf key %u names state %u", k,
              key.state);
    }
    fu_eh_elf_rows_free(&rows);
}

static void exercise_table(const uint8_t *data, size_t size, fu_section_kind kind, uint64_t address,
                           uint8_t address_size, uint64_t *rng)
{
    /* The blob is also the file image for DW_EH_PE_indirect pointers. */
    fu_image_segment segment = {.vaddr = address, .data = data, .size = size};
    fu_section section = {
        .kind = kind, .data = data, .size = size, .address = address,
        .text_base = address & ~0xfffull, .data_base = address + 0x200000,
        .address_size = address_size, .segments = &segment, .segment_count = 1,
    };
    fu_cfi_table table;
    fu_error err = {0};
    fu_status status = fu_cfi_table_parse(&table, &section, &err);
    if (status == FU_OK)
        status = fu_cfi_table_evaluate(&table, &err);
    /* Bad entries are reported per entry; a table-wide failure is only out-of-memory. */
    CHECK(status == FU_OK, "table-wide failure %d: %s", status, err.message);
    check_table(&table);

    fu_out out = {.fd = -1};
    fu_print_readelf_interp(&out, &table);
    fu_print_readelf_raw(&out, &table);
    CHECK(!out.failed, "printer output failed");
    free(out.buf);

    check_lookup(&table, 0);
    check_lookup(&table, UINT64_MAX);
    check_lookup(&table, address);
    uint64_t low = UINT64_MAX, high = 0;
    for (uint32_t k = 0; k < table.fde_count; k++) {
        const fu_entry *e = &table.entries[table.fde_sorted[k]];
        if (e->pc_begin < low)
            low = e->pc_begin;
        if (e->pc_begin + e->pc_range > high)
            high = e->pc_begin + e->pc_range;
    }
    for (uint32_t i = 0; i < FUZZ_LOOKUP_FDES && table.fde_count > 0; i++) {
        const fu_entry *e = &table.entries[table.fde_sorted[rng_below(rng, table.fde_count)]];
        check_lookup(&table, e->pc_begin);
        check_lookup(&table, e->pc_begin - 1);
        check_lookup(&table, e->pc_begin + e->pc_range - 1);
        check_lookup(&table, e->pc_begin + e->pc_range);
        check_lookup(&table, e->pc_begin + rng_below(rng, e->pc_range + 1));
    }
    for (uint32_t i = 0; i < FUZZ_LOOKUP_RANDOM; i++)
        check_lookup(&table, low <= high ? low + rng_below(rng, high - low + 1) : rng_next(rng));
    exercise_state_expressions(&table);
    exercise_compact(&table, low, high, rng);
    exercise_overlay(&table, rng);
    exercise_eh_elf_rows(&table, kind);
    fu_cfi_table_free(&table);
}

static void exercise_hdr(const uint8_t *data, size_t size, uint64_t address, uint64_t eh_frame_address,
                         uint64_t eh_frame_size, uint64_t *rng)
{
    fu_hdr hdr;
    fu_error err = {0};
    if (fu_hdr_parse(&hdr, data, size, address, eh_frame_address, eh_frame_size, &err) != FU_OK) {
        CHECK(err.status == FU_ERR_CFI && strncmp(err.message, ".eh_frame_hdr: ", 15) == 0,
              "fu_hdr_parse failed with \"%s\"", err.message);
        return;
    }
    CHECK(hdr.table_offset <= size && hdr.count <= (size - hdr.table_offset) / 8,
          "hdr table of %llu entries at 0x%llx overruns 0x%zx bytes", (unsigned long long)hdr.count,
          (unsigned long long)hdr.table_offset, size);
    for (unsigned i = 0; i < 64; i++) {
        uint64_t pc = rng_next(rng);
        if (hdr.count > 0 && (i & 1)) {
            uint64_t location, fde;
            fu_hdr_entry(&hdr, rng_below(rng, hdr.count), &location, &fde);
            pc = location + (i & 2);
        }
        int64_t found = fu_hdr_find(&hdr, pc);
        CHECK(found < (int64_t)hdr.count, "fu_hdr_find returned %lld of %llu", (long long)found,
              (unsigned long long)hdr.count);
    }
}

/* All stages over one blob. `data` must be exactly `size` bytes of heap so that ASAN sees any
 * read past the end. */
static void fuzz_one(const uint8_t *data, size_t size)
{
    uint64_t rng = hash_bytes(data, size);
    /* (kind, section address, address size): the pcrel base at zero, mid-address, and near the
     * top of the address space (pointer arithmetic wraps); ELF64 and ELF32 sizes. */
    static const struct {
        fu_section_kind kind;
        uint64_t address;
        uint8_t address_size;
    } configs[] = {
        {FU_SECTION_EH_FRAME, 0x1a8f40, 8},
        {FU_SECTION_EH_FRAME, 0xfffffffffffff000ull, 4},
        {FU_SECTION_DEBUG_FRAME, 0, 8},
        {FU_SECTION_DEBUG_FRAME, 0x400000, 4},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        exercise_table(data, size, configs[i].kind, configs[i].address, configs[i].address_size, &rng);
    exercise_hdr(data, size, 0x1a1b2c, 0, 0, &rng);
    exercise_hdr(data, size, 0x1a1b2c, 0x1a8f40, 0x256d0, &rng);
    exercise_expression(data, size);
    exercise_expression_printers(data, size);
}

#ifdef FU_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_begin_input(data, size, "a libFuzzer input");
    fuzz_one(data, size);
    return 0;
}

#else /* standalone driver */

/* ---- structure-aware mutations of a real section --------------------------------------------- */

typedef struct blob {
    uint8_t *data;
    size_t size, cap;
} blob;

static void blob_reserve(blob *b, size_t need)
{
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) {
        fprintf(stderr, "cfi_driver: out of memory\n");
        exit(2);
    }
    b->data = p;
    b->cap = cap;
}

static void blob_insert(blob *b, size_t at, const uint8_t *bytes, size_t n)
{
    blob_reserve(b, b->size + n);
    memmove(b->data + at + n, b->data + at, b->size - at);
    memcpy(b->data + at, bytes, n);
    b->size += n;
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* One entry found by walking the length fields (no decoding beyond the CIE id / pointer). */
typedef struct walked_entry {
    size_t offset, end;
    unsigned offset_size; /* 4 or 8; 0 for a zero terminator */
    bool is_cie;
    size_t cie_target;    /* FDE: the offset its pointer leads to (may be anything) */
} walked_entry;

typedef struct walk {
    walked_entry *entries;
    size_t count;
} walk;

static void walk_entries(const blob *b, bool is_eh, walk *w)
{
    w->count = 0;
    size_t pos = 0;
    while (w->count < FUZZ_MAX_WALK_ENTRIES && b->size - pos >= 4) {
        walked_entry *e = &w->entries[w->count];
        e->offset = pos;
        uint64_t length = get_le(b->data + pos, 4);
        size_t header = 4;
        e->offset_size = 4;
        if (length == 0) {
            e->offset_size = 0;
            e->end = pos + 4;
            e->is_cie = false;
            w->count++;
            pos += 4;
            continue;
        }
        if (length == 0xffffffff) {
            if (b->size - pos < 12)
                break;
            length = get_le(b->data + pos + 4, 8);
            header = 12;
            e->offset_size = 8;
        }
        if (length > b->size - pos - header || length < e->offset_size)
            break;
        e->end = pos + header + length;
        uint64_t id = get_le(b->data + pos + header, e->offset_size);
        uint64_t cie_id = is_eh ? 0 : (e->offset_size == 4 ? 0xffffffffu : UINT64_MAX);
        e->is_cie = id == cie_id;
        e->cie_target = is_eh ? (size_t)(pos + header - id) : (size_t)id;
        w->count++;
        pos = e->end;
    }
}

/* Insert `n` bytes at `at`, inside entry `inside` (at its end at most), and keep the rest of the
 * section well-formed: the entry's length grows, and every FDE's CIE pointer still leads to the
 * CIE it led to (pcrel in .eh_frame, an offset in .debug_frame). */
static void insert_in_entry(blob *b, const walk *w, size_t inside, size_t at, const uint8_t *bytes,
                            size_t n, bool is_eh)
{
    const walked_entry *e = &w->entries[inside];
    if (e->offset_size == 0)
        return; /* a terminator has no body */
    blob_insert(b, at, bytes, n);
    uint8_t *length_field = b->data + e->offset + (e->offset_size == 8 ? 4 : 0);
    put_le(length_field, get_le(length_field, e->offset_size) + n, e->offset_size);
    for (size_t i = 0; i < w->count; i++) {
        const walked_entry *f = &w->entries[i];
        if (f->is_cie || f->offset_size == 0)
            continue;
        size_t old_field = f->offset + (f->offset_size == 8 ? 12 : 4);
        size_t new_field = old_field + (old_field >= at ? n : 0);
        size_t new_target = f->cie_target + (f->cie_target >= at ? n : 0);
        uint64_t id = is_eh ? (uint64_t)(new_field - new_target) : (uint64_t)new_target;
        put_le(b->data + new_field, id, f->offset_size);
    }
}

static size_t uleb_encode(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        out[n++] = byte | (v ? 0x80 : 0);
    } while (v);
    return n;
}

/* A call frame instruction naming a register far beyond FU_MAX_COLUMNS, or an over-long ULEB. */
static size_t make_huge_register_insn(uint8_t *out, uint64_t *rng)
{
    static const uint64_t registers[] = {128, 129, 1000, 0xffff, 0x10000, 0x7fffffff, 0xffffffffull,
                                         0x100000000ull, UINT64_MAX};
    static const uint8_t opcodes[] = {0x05, 0x06, 0x07, 0x08, 0x09, 0x0c, 0x0d, 0x10, 0x11, 0x14,
                                      0x15, 0x16, 0x2f};
    uint8_t opcode = opcodes[rng_below(rng, sizeof opcodes)];
    uint64_t reg = registers[rng_below(rng, sizeof registers / sizeof registers[0])];
    size_t n = 0;
    out[n++] = opcode;
    if (rng_below(rng, 8) == 0) { /* ULEB of 11 bytes: more than 64 bits */
        for (int i = 0; i < 10; i++)
            out[n++] = 0xff;
        out[n++] = 0x7f;
    } else {
        n += uleb_encode(out + n, reg);
    }
    if (opcode == 0x09) /* DW_CFA_register: a second register */
        n += uleb_encode(out + n, rng_below(rng, 2) ? 7 : reg);
    else if (opcode == 0x10 || opcode == 0x16) { /* expression: length then DW_OP_breg7 0 */
        out[n++] = 2;
        out[n++] = 0x77;
        out[n++] = 0;
    } else if (opcode != 0x06 && opcode != 0x07 && opcode != 0x08 && opcode != 0x0d)
        n += uleb_encode(out + n, rng_next(rng) & (rng_below(rng, 2) ? 0x7f : UINT64_MAX));
    return n;
}

static const uint8_t bad_encodings[] = {0x05, 0x06, 0x07, 0x0d, 0x0e, 0x0f, 0x60, 0x70, 0x65, 0x7b,
                                        0x50, 0x80, 0x9b, 0xfe, 0x1d, 0x51};

/* Find the augmentation data of a CIE, if it has 'z' (version, string, factors, RA column). */
static bool cie_augmentation_data(const blob *b, const walked_entry *e, size_t *start, size_t *len)
{
    size_t pos = e->offset + (e->offset_size == 8 ? 12 : 4) + e->offset_size;
    if (pos >= e->end)
        return false;
    uint8_t version = b->data[pos++];
    if (pos >= e->end || b->data[pos] != 'z')
        return false;
    while (pos < e->end && b->data[pos])
        pos++;
    pos++;
    if (version >= 4)
        pos += 2;
    for (int field = 0; field < (version == 1 ? 2 : 3); field++) { /* code, data, (RA) LEBs */
        while (pos < e->end && (b->data[pos] & 0x80))
            pos++;
        pos++;
    }
    if (version == 1)
        pos++;
    if (pos >= e->end)
        return false;
    uint64_t n = 0;
    unsigned shift = 0;
    while (pos < e->end && shift < 63) {
        uint8_t byte = b->data[pos++];
        n |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
        if (!(byte & 0x80))
            break;
    }
    if (n == 0 || n > e->end - pos)
        return false;
    *start = pos;
    *len = (size_t)n;
    return true;
}

enum mutation {
    MUTATE_FLIP, MUTATE_TRUNCATE, MUTATE_LENGTH, MUTATE_CIE_POINTER, MUTATE_REMEMBER_RUN,
    MUTATE_RESTORE_RUN, MUTATE_HUGE_REGISTER, MUTATE_UNKNOWN_OPCODE, MUTATE_BAD_ENCODING,
    MUTATE_SPLICE, MUTATE_COUNT
};

static void mutate_once(blob *b, walk *w, bool is_eh, uint64_t *rng)
{
    walk_entries(b, is_eh, w);
    size_t pick = w->count ? (size_t)rng_below(rng, w->count) : 0;
    const walked_entry *e = w->count ? &w->entries[pick] : NULL;
    enum mutation kind = (enum mutation)rng_below(rng, MUTATE_COUNT);
    switch (kind) {
    case MUTATE_FLIP: {
        if (b->size == 0)
            return;
        unsigned flips = 1 + (unsigned)rng_below(rng, 8);
        for (unsigned i = 0; i < flips; i++) {
            size_t at = e && rng_below(rng, 2) ? e->offset + rng_below(rng, e->end - e->offset)
                                               : (size_t)rng_below(rng, b->size);
            if (rng_below(rng, 2))
                b->data[at] ^= (uint8_t)(1u << rng_below(rng, 8));
            else
                b->data[at] = (uint8_t)rng_next(rng);
        }
        return;
    }
    case MUTATE_TRUNCATE:
        if (b->size)
            b->size = e && rng_below(rng, 2) ? e->offset + rng_below(rng, e->end - e->offset + 1)
                                             : (size_t)rng_below(rng, b->size);
        return;
    case MUTATE_LENGTH: {
        if (!e || e->offset_size == 0)
            return;
        uint64_t old = e->end - e->offset - (e->offset_size == 8 ? 12 : 4);
        const uint64_t choices[] = {0, 1, 3, 4, 7, old - 1, old + 1, old + 4, old * 2, 0xfffffff0,
                                    0xffffffff, UINT64_MAX, rng_next(rng) & 0xffffffff};
        uint64_t length = choices[rng_below(rng, sizeof choices / sizeof choices[0])];
        if (e->offset_size == 8) {
            put_le(b->data + e->offset + 4, length, 8);
        } else if (length == 0xffffffff) {
            /* turn the entry into 64-bit DWARF: the escape, then a random 8-byte length */
            uint8_t length64[8];
            put_le(b->data + e->offset, 0xffffffff, 4);
            put_le(length64, rng_next(rng), 8);
            blob_insert(b, e->offset + 4, length64, 8);
        } else {
            put_le(b->data + e->offset, length, 4);
        }
        return;
    }
    case MUTATE_CIE_POINTER: {
        if (!e || e->offset_size == 0)
            return;
        /* point at: nothing, itself, another entry (often an FDE), a CIE id, beyond the end */
        size_t field = e->offset + (e->offset_size == 8 ? 12 : 4);
        const walked_entry *other = &w->entries[rng_below(rng, w->count)];
        uint64_t target_offset = other->offset + (rng_below(rng, 4) == 0 ? 1 : 0);
        uint64_t value;
        switch (rng_below(rng, 6)) {
        case 0: value = 0; break;                          /* .eh_frame: becomes a CIE */
        case 1: value = is_eh ? 4 : e->offset; break;      /* itself */
        case 2: value = is_eh ? field - target_offset : target_offset; break;
        case 3: value = is_eh ? (uint64_t)0 - (b->size - field + 16) : b->size + 16; break;
        case 4: value = 0xffffffff; break;                 /* .debug_frame: becomes a CIE */
        default: value = rng_next(rng); break;
        }
        put_le(b->data + field, value, e->offset_size);
        return;
    }
    case MUTATE_REMEMBER_RUN:
    case MUTATE_RESTORE_RUN:
    case MUTATE_UNKNOWN_OPCODE:
    case MUTATE_HUGE_REGISTER: {
        if (!e || e->offset_size == 0)
            return;
        uint8_t insns[512];
        size_t n = 0;
        if (kind == MUTATE_REMEMBER_RUN) {
            /* up to 4x FU_MAX_STATE_STACK remember_states, sometimes closed by a restore */
            n = 1 + (size_t)rng_below(rng, 4 * FU_MAX_STATE_STACK);
            memset(insns, 0x0a, n);
            if (rng_below(rng, 2))
                insns[n++] = 0x0b;
        } else if (kind == MUTATE_RESTORE_RUN) { /* more restores than remembers */
            n = 1 + (size_t)rng_below(rng, 8);
            memset(insns, 0x0b, n);
        } else if (kind == MUTATE_UNKNOWN_OPCODE) { /* 0x17-0x1c, 0x30-0x3f and other holes */
            static const uint8_t unknown[] = {0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x30, 0x31, 0x35,
                                              0x3a, 0x3e, 0x3f, 0x1e, 0x1f, 0x2c};
            insns[n++] = unknown[rng_below(rng, sizeof unknown)];
        } else {
            n = make_huge_register_insn(insns, rng);
        }
        size_t body = e->offset + (e->offset_size == 8 ? 12 : 4) + e->offset_size;
        if (rng_below(rng, 3) == 0 && e->end > body) {
            /* overwrite in place: the section keeps its layout */
            size_t at = body + (size_t)rng_below(rng, e->end - body);
            size_t room = e->end - at < n ? e->end - at : n;
            memcpy(b->data + at, insns, room);
        } else {
            /* insert, mostly at the end of the instructions (past any header) */
            size_t at = rng_below(rng, 4) ? e->end : body + (size_t)rng_below(rng, e->end - body + 1);
            insert_in_entry(b, w, pick, at, insns, n, is_eh);
        }
        return;
    }
    case MUTATE_BAD_ENCODING: {
        /* a CIE's augmentation data (the 'P', 'L', 'R' encodings) gets an undefined encoding;
         * CIEs are few (libc has 3 among 3713 FDEs), so pick among them */
        size_t cies = 0;
        for (size_t k = 0; k < w->count; k++)
            cies += w->entries[k].is_cie;
        if (cies == 0)
            return;
        size_t nth = (size_t)rng_below(rng, cies);
        for (size_t k = 0; k < w->count; k++) {
            const walked_entry *c = &w->entries[k];
            size_t start, len;
            if (c->is_cie && nth-- == 0) {
                if (cie_augmentation_data(b, c, &start, &len))
                    b->data[start + rng_below(rng, len)] = bad_encodings[rng_below(rng, sizeof bad_encodings)];
                return;
            }
        }
        return;
    }
    case MUTATE_SPLICE: {
        /* copy bytes from one place over another (instructions of one FDE into another) */
        if (b->size < 2)
            return;
        size_t n = 1 + (size_t)rng_below(rng, 64);
        size_t from = (size_t)rng_below(rng, b->size), to = (size_t)rng_below(rng, b->size);
        if (n > b->size - from)
            n = b->size - from;
        if (n > b->size - to)
            n = b->size - to;
        memmove(b->data + to, b->data + from, n);
        return;
    }
    case MUTATE_COUNT:
        return;
    }
}

/* ---- the standalone driver ------------------------------------------------------------------- */

static const char *save_dir;
static unsigned timeout_seconds = FUZZ_DEFAULT_TIMEOUT;

static void run_input(const uint8_t *data, size_t size, const char *label, const char *save_name)
{
    /* an exact-size heap copy: ASAN reports a read of even one byte past the end */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) {
        fprintf(stderr, "cfi_driver: out of memory\n");
        exit(2);
    }
    memcpy(copy, data, size);
    fuzz_begin_input(copy, size, label);
    if (save_dir)
        snprintf(save_path, sizeof save_path, "%s/%s", save_dir, save_name);
    alarm(timeout_seconds);
    fuzz_one(copy, size);
    alarm(0);
    current_data = NULL;
    free(copy);
}

static bool read_file(const char *path, blob *b)
{
    size_t n;
    uint8_t *data = fuzz_read_file(path, SIZE_MAX, &n);
    if (!data)
        return false;
    blob_reserve(b, n);
    memcpy(b->data, data, n);
    b->size = n;
    free(data);
    return true;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: cfi_driver [--timeout SECONDS] [--mutations N] [--seed SEED] [--only I]\n"
            "                  [--save-dir DIR] [--stats 1] FILE...\n"
            "Run the CFI core over each FILE (and N seeded mutations of it); a sanitizer report,\n"
            "an invariant violation or a timeout fails, and the input is saved in DIR.\n"
            "--stats 1 counts the CIE/FDE errors the inputs produced, by kind.\n"
            "example: cfi_driver --mutations 200 --seed 1 --save-dir /tmp build/real/libc.eh_frame\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned long mutations = 0;
    unsigned long long seed = 0;
    bool have_seed = false;
    long only = -1;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        const char *option = argv[i];
        if (strcmp(option, "--") == 0) {
            i++;
            break;
        }
        if (i + 1 >= argc)
            return usage();
        const char *value = argv[++i];
        if (strcmp(option, "--timeout") == 0)
            timeout_seconds = (unsigned)strtoul(value, NULL, 0);
        else if (strcmp(option, "--mutations") == 0)
            mutations = strtoul(value, NULL, 0);
        else if (strcmp(option, "--seed") == 0) {
            seed = strtoull(value, NULL, 0);
            have_seed = true;
        } else if (strcmp(option, "--only") == 0)
            only = strtol(value, NULL, 0);
        else if (strcmp(option, "--save-dir") == 0)
            save_dir = value;
        else if (strcmp(option, "--stats") == 0)
            collect_stats = strcmp(value, "0") != 0;
        else
            return usage();
    }
    if (i >= argc)
        return usage();
    if (!have_seed)
        seed = (unsigned long long)time(NULL);
    fuzz_install_failure_handlers();
    if (save_dir)
        mkdir(save_dir, 0755);
    if (mutations)
        printf("cfi_driver: seed %llu, %lu mutations per file (reproduce with --seed %llu)\n", seed,
               mutations, seed);

    blob original = {0}, mutated = {0};
    walk w = {.entries = calloc(FUZZ_MAX_WALK_ENTRIES, sizeof(walked_entry))};
    if (!w.entries)
        return 2;
    unsigned long inputs = 0;
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    for (; i < argc; i++) {
        const char *path = argv[i];
        if (!read_file(path, &original)) {
            fprintf(stderr, "cfi_driver: cannot read %s: %s\n", path, strerror(errno));
            return 2;
        }
        char label[600], save_name[300];
        /* .debug_frame inputs are mutated with .debug_frame's CIE pointers */
        bool is_eh = strstr(base_name(path), "debug_frame") == NULL;
        if (only < 0) {
            snprintf(label, sizeof label, "%s", path);
            snprintf(save_name, sizeof save_name, "failing-%s", base_name(path));
            run_input(original.data, original.size, label, save_name);
            inputs++;
        }
        for (unsigned long m = 0; m < mutations; m++) {
            if (only >= 0 && m != (unsigned long)only)
                continue;
            /* each mutation has its own stream: --only M replays mutation M alone */
            uint64_t rng = seed ^ hash_bytes((const uint8_t *)base_name(path), strlen(base_name(path)));
            rng ^= (m + 1) * 0x9e3779b97f4a7c15ull;
            rng_next(&rng);
            mutated.size = 0;
            blob_reserve(&mutated, original.size);
            memcpy(mutated.data, original.data, original.size);
            mutated.size = original.size;
            unsigned rounds = 1 + (unsigned)rng_below(&rng, 3);
            for (unsigned r = 0; r < rounds; r++)
                mutate_once(&mutated, &w, is_eh, &rng);
            snprintf(label, sizeof label, "%s mutation %lu (--seed %llu --mutations %lu --only %lu)", path, m,
                     seed, mutations, m);
            snprintf(save_name, sizeof save_name, "failing-%s-seed%llu-m%lu", base_name(path), seed, m);
            run_input(mutated.data, mutated.size, label, save_name);
            inputs++;
        }
    }
    struct timespec finished;
    clock_gettime(CLOCK_MONOTONIC, &finished);
    double seconds = (double)(finished.tv_sec - started.tv_sec) + (double)(finished.tv_nsec - started.tv_nsec) / 1e9;
    printf("cfi_driver: %lu inputs clean in %.1f s\n", inputs, seconds);
    for (unsigned k = 0; k < problem_kind_count; k++)
        printf("  %8lu  %s\n", problem_kinds[k].count, problem_kinds[k].text);
    free(w.entries);
    free(original.data);
    free(mutated.data);
    return 0;
}

#endif
