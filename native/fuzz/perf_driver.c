/* perf_driver: core/perf_data.c under AddressSanitizer + UndefinedBehaviorSanitizer, over real
 * perf.data recordings and seeded mutations of them; after each parse (of a whole recording, and of
 * each window of a stream) the replay (core/perf_replay.c) and the batch walks and callchain reads of
 * core/perf_walk.c run on it, in address spaces of the replayed mappings, then perf-script's
 * symbolization, rendering, folding and statistics (core/perf_script.c). The Makefile's asan-perf
 * builds it (PERF_SOURCES, libzstd).
 *
 * Build: make -C native/fuzz build/perf_driver_asan (the sources are the Makefile's PERF_SOURCES).
 *
 * Recordings to start from (perf must be allowed to record; see /proc/sys/kernel/perf_event_paranoid):
 *   perf record -e cpu-clock -c 100000 --call-graph dwarf -o /tmp/a.data -- ls /
 *   perf record -e cpu-clock -c 100000 --call-graph dwarf -z -o /tmp/z.data -- ls /
 *   perf record -e cpu-clock -c 100000 --call-graph dwarf -o - -- ls / > /tmp/pipe.data
 *
 * Run:
 *   ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
 *   native/fuzz/build/perf_driver_asan [--seed N] [--mutations M] [--timeout S] [--save-dir DIR] FILE...
 *
 * Each file is parsed as is, then M mutants (bit flips, record size/type fields, hostile u64s,
 * truncations, insertions/deletions). A parse must either succeed, with every pointer it hands out
 * inside the input or the reader's own buffers and every invariant below holding, or fail with
 * FU_ERR_PERF_DATA and a message naming an offset ("perf.data+0x..."). Sanitizer reports abort; a
 * parse exceeding --timeout seconds aborts (SIGALRM). The seed is printed first; the failing mutant is
 * saved in --save-dir. Exit status 0 when every input passed.
 *
 * libFuzzer (clang): build with -DFU_PERF_LIBFUZZER -fsanitize=fuzzer,address,undefined and without
 * main's options: clang-14 -g -O1 -DFU_PERF_LIBFUZZER -fsanitize=fuzzer,address,undefined
 *   -Inative/core -Isrc/fastunwind/include native/fuzz/perf_driver.c <PERF_SOURCES> -lzstd
 */
#define _GNU_SOURCE /* memfd_create; implies _POSIX_C_SOURCE 200809L */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bpf_log.h"
#include "perf_data.h"
#include "perf_replay.h"
#include "perf_script.h"
#include "perf_walk.h"
#include "profile.h"
#include "report.h"
#include "sample_filter.h"

#include <sys/mman.h>
#include "fuzz_files.h"

/* Mutants decompress to at most this much: enough for real -z recordings of a few MB, small enough
 * that a crafted zstd bomb costs well under a second. */
#define DRIVER_MAX_DECOMPRESSED ((uint64_t)64 << 20)

static const char *current_input = "?";

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "perf_driver: timeout (a parse did not finish)\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    abort();
}

static bool inside(const void *p, uint64_t n, const uint8_t *base, uint64_t size)
{
    const uint8_t *q = p;
    return base && q >= base && (uint64_t)(q - base) <= size && n <= size - (uint64_t)(q - base);
}

/* Whether [p, p+n) lies in the input, the decompressed stream or an aligned-copy block. */
static bool owned(const fu_perf_data *pd, const void *p, uint64_t n)
{
    if (!p)
        return n == 0;
    if (inside(p, n, pd->data, pd->size) || inside(p, n, pd->decompressed, pd->decompressed_size))
        return true;
    for (const struct fu_perf_block *b = pd->aligned; b; b = b->next)
        if (inside(p, n, (const uint8_t *)b->words, b->used * 8))
            return true;
    for (const struct fu_perf_block *b = pd->kept_records; b; b = b->next) /* a pipe stream's copies */
        if (inside(p, n, (const uint8_t *)b->words, b->used * 8))
            return true;
    return false;
}

static volatile uint64_t sink;

/* Invariants of a successful parse; touches every byte handed out so ASAN sees any overrun. */
static const char *check(const fu_perf_data *pd)
{
    for (size_t i = 0; i < pd->sample_count; i++) {
        const fu_perf_sample *s = &pd->samples[i];
        if (s->index != i || s->attr_index >= pd->attr_count)
            return "sample index or attr_index out of range";
        if (s->callchain && (((uintptr_t)s->callchain & 7) || !owned(pd, s->callchain, s->callchain_count * 8)))
            return "callchain misaligned or outside the buffers";
        for (uint64_t k = 0; s->callchain && k < s->callchain_count; k++)
            sink += s->callchain[k];
        if (!owned(pd, s->stack, s->stack ? s->stack_dump_size : 0) || s->stack_size > s->stack_dump_size)
            return "stack outside the buffers or dyn_size above the dump";
        for (uint64_t k = 0; s->stack && k < s->stack_dump_size; k++)
            sink += s->stack[k];
        uint64_t nregs = s->regs ? (uint64_t)__builtin_popcountll(s->regs_mask) : 0;
        if (!owned(pd, s->regs, nregs * 8))
            return "regs outside the buffers";
        for (unsigned r = 0; r < 64; r++) {
            uint64_t v;
            if (fu_perf_sample_reg(s, r, &v))
                sink += v;
            if (fu_perf_sample_intr_reg(s, r, &v))
                sink += v;
        }
        if (!owned(pd, s->read, s->read_size) || !owned(pd, s->raw, s->raw ? s->raw_size : 0) ||
            !owned(pd, s->branches, s->branches ? s->branch_count * 24 : 0) ||
            !owned(pd, s->aux, s->aux ? s->aux_size : 0))
            return "read/raw/branches/aux outside the buffers";
        if (i && (pd->samples[i - 1].present & s->present & FU_PERF_SAMPLE_TIME) &&
            pd->samples[i - 1].time > s->time && pd->attr_count == 1)
            return "samples not in time order";
    }
    /* a recording cut short: what is read ends inside the file, before the dropped record */
    if (pd->data_offset > pd->size || pd->data_size > pd->size - pd->data_offset)
        return "data section outside the input";
    if (pd->cut.dropped_present && (pd->cut.dropped_offset != pd->data_offset + pd->data_size ||
                                    pd->cut.dropped_present > pd->size - pd->cut.dropped_offset))
        return "the dropped record is not where the data ends";
    if (pd->cut.note[0] && !memchr(pd->cut.note, 0, sizeof pd->cut.note))
        return "cut note not terminated";
    /* what callchain_samples takes: user entries after PERF_CONTEXT_USER markers */
    for (size_t i = 0; i < pd->sample_count; i++) {
        const fu_perf_sample *s = &pd->samples[i];
        bool user = true;
        for (uint64_t k = 0; s->callchain && k < s->callchain_count; k++) {
            uint64_t ip = s->callchain[k];
            if (ip >= (uint64_t)-4095)
                user = ip == (uint64_t)-512;
            else if (user && ip < 1ull << 63)
                sink += ip;
        }
    }
    size_t counts[5] = {pd->sample_count, pd->mmap_count, pd->comm_count, pd->task_count, pd->task_count};
    for (size_t i = 0; i < pd->event_count; i++) {
        const fu_perf_event *e = &pd->events[i];
        if (e->kind > FU_PERF_EVENT_EXIT || e->index >= counts[e->kind])
            return "event index out of range";
        if (i && pd->events[i - 1].time > e->time)
            return "events not sorted by time";
    }
    for (size_t i = 0; i < pd->mmap_count; i++)
        if (!owned(pd, pd->mmaps[i].filename, pd->mmaps[i].filename_len))
            return "mmap filename outside the buffers";
    for (size_t i = 0; i < pd->comm_count; i++)
        if (!owned(pd, pd->comms[i].comm, pd->comms[i].comm_len))
            return "comm outside the buffers";
    for (size_t i = 0; i < pd->build_id_count; i++)
        if (!owned(pd, pd->build_ids[i].filename, pd->build_ids[i].filename_len) || pd->build_ids[i].size > 20)
            return "build-id outside the buffers";
    for (uint32_t i = 0; i < pd->cmdline_count; i++)
        if (!owned(pd, pd->cmdline[i].data, pd->cmdline[i].len))
            return "cmdline outside the buffers";
    return NULL;
}

static size_t pd_samples_seen; /* unused: run_stream's out-parameter placeholder */

/* ---- after a parse: replay, walk, callchains (core/perf_replay.c, core/perf_walk.c) ---------------- */

static size_t replayed_samples, walked_frames, callchain_frames, rendered_bytes, folded_bytes;

/* fu_sink_fn: counts the bytes; a chunk is never more than FU_UNWOUND_CHUNK plus one line. */
static bool count_chunk(void *total, const uint8_t *data, size_t len)
{
    volatile uint8_t touch = len ? data[0] ^ data[len - 1] : 0; /* reads both ends: ASAN checks them */
    (void)touch;
    *(size_t *)total += len;
    return len > 0;
}

/* fu_unwound_load_fn: no module has symbols here. */
static const fu_symbol_table *no_symbols(void *context, uint32_t mapping, bool *failed)
{
    (void)context;
    (void)mapping;
    *failed = false;
    return NULL;
}

/* The perf-script stage over a walk's columns: symbolize (kernel frames too, without symbols),
 * render, fold both ways, count. */
static const char *script_problem(const fu_perf_data *pd, const fu_perf_walk_buffers *walked, const uint32_t *space_ids,
                                  const uint32_t *comm_ids, const fu_replay *r)
{
    uint32_t space_count = FU_REPLAY_COUNT(r, spaces, fu_replay_space), map_count = r->used_mappings;
    uint32_t comm_count = FU_REPLAY_COUNT(r, comm_names, fu_perf_string);
    const char *problem = NULL;
    fu_unwound_map *maps = calloc((size_t)map_count + 1, sizeof *maps);
    fu_unwound_space *spaces = calloc((size_t)space_count + 1, sizeof *spaces);
    uint32_t *pool = malloc(r->space_pool.len + 4);
    fu_text *comms = calloc((size_t)comm_count + 1, sizeof *comms);
    static fu_text outcomes[FU_UNWOUND_OUTCOME_CODES];
    fu_unwound u = {0};
    if (!maps || !spaces || !pool || !comms)
        goto done;
    const uint32_t *numbered = (const uint32_t *)(const void *)r->numbered.data;
    const uint32_t *renumbered = (const uint32_t *)(const void *)r->renumbered.data;
    for (uint32_t i = 0; i < map_count; i++) {
        const fu_replay_mapping *m = &FU_REPLAY_RECORDS(r, mappings, fu_replay_mapping)[numbered[i]];
        const fu_replay_file *f = &FU_REPLAY_RECORDS(r, files, fu_replay_file)[m->file];
        maps[i] = (fu_unwound_map){.start = m->start, .pgoff = m->pgoff, .bias = (int64_t)(i % 3) - 1,
                                   .path = {f->name.data, f->name.len}, .has_symbols = i % 2};
    }
    const uint32_t *ids = (const uint32_t *)(const void *)r->space_pool.data;
    for (size_t k = 0; k < r->space_pool.len / 4; k++)
        pool[k] = renumbered[ids[k]];
    for (uint32_t i = 0; i < space_count; i++) {
        const fu_replay_space *sp = &FU_REPLAY_RECORDS(r, spaces, fu_replay_space)[i];
        spaces[i] = (fu_unwound_space){pool + sp->offset, sp->count};
    }
    for (uint32_t i = 0; i < comm_count; i++) {
        fu_perf_string c = FU_REPLAY_RECORDS(r, comm_names, fu_perf_string)[i];
        comms[i] = (fu_text){c.data, c.len};
    }
    for (unsigned code = 0; code < FU_UNWOUND_OUTCOME_CODES; code++)
        outcomes[code] = (fu_text){code == 0 ? "end" : code % 2 ? "truncated" : "callchain", code == 0 ? 3 : code % 2 ? 9 : 9};
    u.samples = pd->samples;
    u.sample_count = pd->sample_count;
    u.comm_names = comms;
    u.comm_count = comm_count;
    u.outcome_names = outcomes;
    u.maps = maps;
    u.map_count = map_count;
    fu_unwound_columns columns = {walked->outcomes.data, (const uint32_t *)(const void *)walked->starts.data,
                                  (const uint64_t *)(const void *)walked->frames.column[0].data,
                                  (const uint32_t *)(const void *)walked->frames.column[1].data,
                                  walked->frames.column[2].data, walked->frames.column[2].len};
    fu_error err = {0};
    bool failed;
    fu_status status = fu_unwound_build(&u, comm_ids, space_ids, spaces, space_count, &columns, no_symbols, NULL,
                                        &failed, &err);
    if (status != FU_OK) {
        if (status != FU_ERR_NOMEM)
            problem = "script: symbolizing the walker's own columns failed";
        goto done;
    }
    for (size_t s = 0; s < u.sample_count && !problem; s++)
        if (u.bounds[2 * s] > u.bounds[2 * s + 1] || u.bounds[2 * s + 1] > u.bounds[2 * s + 2])
            problem = "script: sample bounds out of order";
    for (size_t k = 0; !problem && k < u.bounds[2 * u.sample_count]; k++)
        if (u.frame_ids[k] >= u.frame_count)
            problem = "script: a frame id past the frames";
    size_t kernel_count = fu_unwound_kernel_addresses(&u, NULL);
    uint64_t *kernel = malloc(8 * (kernel_count + 1));
    if (!problem && kernel && fu_unwound_kernel_addresses(&u, kernel) != kernel_count)
        problem = "script: kernel addresses counted twice differently";
    free(kernel);
    fu_unwound_set_kernel_symbols(&u, NULL);
    size_t before = rendered_bytes;
    if (!problem && fu_unwound_render(&u, count_chunk, &rendered_bytes, &err) != FU_OK && err.status != FU_ERR_NOMEM)
        problem = "script: render failed";
    if (!problem && u.sample_count && rendered_bytes == before)
        problem = "script: nothing rendered for samples";
    for (int by_count = 0; by_count < 2 && !problem; by_count++)
        if (fu_unwound_folded(&u, by_count, count_chunk, &folded_bytes, &err) != FU_OK && err.status != FU_ERR_NOMEM)
            problem = "script: folded failed";
    uint64_t unwound, frames, by_outcome[FU_UNWOUND_OUTCOME_CODES], *by_depth = NULL;
    uint32_t deepest;
    if (!problem && fu_unwound_statistics(&u, &unwound, &frames, by_outcome, &by_depth, &deepest)) {
        uint64_t total = 0;
        for (unsigned code = 0; code < FU_UNWOUND_OUTCOME_CODES; code++)
            total += by_outcome[code];
        if (total != u.sample_count || unwound > u.sample_count)
            problem = "script: statistics do not add up to the samples";
        free(by_depth);
    }
    /* the profile twice over, written out: every sample in it */
    fu_profile profile;
    fu_profile_init(&profile);
    for (int pass = 0; pass < 2 && !problem; pass++)
        if (fu_profile_add(&profile, &u, &err) != FU_OK && err.status != FU_ERR_NOMEM)
            problem = "profile: adding a window failed";
    /* and stacks named already, as the BPF unwinder's: the input's comms as frames, counted 0-2 times */
    uint64_t named_samples = 0;
    for (size_t s = 0; s < u.sample_count && !problem; s++) {
        fu_text frames[3];
        fu_unwound_comm(&u, s, &frames[0].data, &frames[0].len);
        frames[1] = frames[2] = frames[0];
        fu_profile_stack stack = {.pid = (int32_t)u.samples[s].pid, .tid = (int32_t)u.samples[s].tid,
                                  .comm = frames[0], .outcome = u.outcome_names[u.outcomes[s]], .frames = frames,
                                  .frame_count = s % 4, .count = s % 3, .time = u.samples[s].time, .interval_ms = 1};
        if (fu_profile_add_stack(&profile, &stack, &err) == FU_OK)
            named_samples += stack.count;
        else if (err.status != FU_ERR_NOMEM)
            problem = "profile: adding a named stack failed";
    }
    size_t profile_bytes = 0;
    if (!problem && fu_profile_speedscope(&profile, (fu_text){"x\"\x01\xff", 4}, count_chunk, &profile_bytes, &err) != FU_OK &&
        err.status != FU_ERR_NOMEM)
        problem = "profile: writing failed";
    if (!problem && fu_profile_gecko(&profile, (fu_text){"x<", 2}, count_chunk, &profile_bytes, &err) != FU_OK &&
        err.status != FU_ERR_NOMEM)
        problem = "profile: writing the processed profile failed";
    for (uint32_t max_nodes = 1; !problem && max_nodes <= 1u << 16; max_nodes <<= 8) /* merged nodes, then all */
        if (fu_profile_flame(&profile, max_nodes, count_chunk, &profile_bytes, &err) != FU_OK && err.status != FU_ERR_NOMEM)
            problem = "profile: writing the flame graph failed";
    if (!problem && profile.samples && profile.samples != 2 * u.sample_count + named_samples)
        problem = "profile: samples lost";
    fu_profile_free(&profile);
    /* the report under every sort, counted twice: self adds up to the samples, self <= total */
    for (unsigned sort = 1; !problem && sort <= FU_REPORT_SORT_ALL; sort++) {
        fu_report report;
        fu_report_init(&report, sort);
        for (int pass = 0; pass < 2 && !problem; pass++)
            if (fu_report_add(&report, &u, &err) != FU_OK && err.status != FU_ERR_NOMEM)
                problem = "report: counting a window failed";
        size_t entries = fu_report_entry_count(&report);
        uint32_t *order = malloc(4 * (entries + 1));
        size_t ordered = order ? fu_report_order(&report, sort & 1, order) : SIZE_MAX;
        uint64_t self = 0;
        for (size_t i = 0; !problem && ordered != SIZE_MAX && i < ordered; i++) {
            const fu_report_entry *e = fu_report_entry_at(&report, order[i]);
            self += e->self;
            if (e->self > e->total || e->total > report.samples)
                problem = "report: an entry's self exceeds its total, or its total the samples";
        }
        if (!problem && ordered != SIZE_MAX && report.samples == 2 * u.sample_count && self != report.samples)
            problem = "report: self samples do not add up to the samples";
        /* its text: the keys of the sort in flag order (srcline first when there), cut to a few widths,
         * and a table per thread when the sort has the tid */
        fu_report_layout layout = {.by_total = sort & 1, .limit = (int64_t)(sort % 3) - 1, .width = (long)sort % 7 - 1};
        for (unsigned flag = FU_REPORT_SORT_SRCLINE; flag; flag >>= 1)
            if (sort & flag)
                layout.keys[layout.key_count++] = flag;
        fu_buffer text = {0};
        fu_status written = report.samples ? fu_report_write_table(&report, &layout, (fu_text){"in\xff", 3}, &text, &err)
                                           : FU_OK;
        if (!problem && written != FU_OK && err.status != FU_ERR_NOMEM)
            problem = "report: writing the table failed";
        if (!problem && (sort & FU_REPORT_SORT_TID) && fu_report_write_threads(&report, &layout, &text, &err) != FU_OK &&
            err.status != FU_ERR_NOMEM)
            problem = "report: writing the thread tables failed";
        free(text.data);
        free(order);
        fu_report_free(&report);
    }
done:
    fu_unwound_free(&u);
    free(maps);
    free(spaces);
    free(pool);
    free(comms);
    return problem;
}

/* The columns' shape: an outcome per sample, frame starts from 0 never decreasing up to the frame
 * count, modules inside their space. */
static const char *check_columns(const fu_perf_walk_buffers *b, size_t count, const uint32_t *ids,
                                 const fu_address_space *spaces, uint32_t space_count)
{
    if (b->outcomes.len != count || b->starts.len != 4 * (count + 1))
        return "walk: outcome or start count differs from the sample count";
    size_t frames = b->frames.column[2].len;
    if (b->frames.column[0].len != 8 * frames || b->frames.column[1].len != 4 * frames ||
        b->frames.column[3].len != frames)
        return "walk: frame columns of different lengths";
    const uint32_t *starts = (const uint32_t *)(const void *)b->starts.data;
    if (starts[0] != 0 || starts[count] != frames)
        return "walk: frame starts do not span the frames";
    for (size_t i = 0; i < count; i++) {
        if (starts[i + 1] < starts[i])
            return "walk: frame starts decrease";
        for (uint32_t k = starts[i]; k < starts[i + 1]; k++) {
            uint32_t module;
            memcpy(&module, b->frames.column[1].data + 4 * (size_t)k, 4);
            if (ids[i] == FU_REPLAY_NONE || ids[i] >= space_count)
                return "walk: frames for a sample without a space";
            if (module != UINT32_MAX && module >= spaces[ids[i]].count)
                return "walk: a frame's module is outside its space";
        }
    }
    /* samples with a frame of each flag: at most the samples with frames; none for a flag no
     * frame has (these spaces have no unwind tables: no derived rows, hence no such marks) */
    uint64_t by_outcome[256], flagged = 0, with_frames = 0;
    if (!fu_perf_flagged_samples(b->outcomes.data, b->starts.data, count, b->frames.column[3].data, frames, 0xff,
                                 by_outcome))
        return "walk: fu_perf_flagged_samples refused the walk's own columns";
    for (unsigned code = 0; code < 256; code++)
        flagged += by_outcome[code];
    for (size_t i = 0; i < count; i++)
        with_frames += starts[i + 1] > starts[i];
    if (flagged > with_frames)
        return "walk: more flagged samples than samples with frames";
    if (!fu_perf_flagged_samples(b->outcomes.data, b->starts.data, count, b->frames.column[3].data, frames,
                                 FU_FRAME_DERIVED, by_outcome))
        return "walk: fu_perf_flagged_samples refused the walk's own columns";
    for (unsigned code = 0; code < 256; code++)
        if (by_outcome[code])
            return "walk: a frame marked as derived in a space without tables";
    return NULL;
}

/* Replay pd into r (kept across a stream's windows), then walk and read the callchains of every
 * sample in address spaces of the replayed mappings (no unwind tables: frame pointers and the stack
 * dump's reads), with 1 and 2 threads. */
static const char *replay_and_walk(const fu_perf_data *pd, fu_replay *r)
{
    static char message[160];
    const char *problem = NULL;
    size_t n = pd->sample_count;
    uint32_t *space_ids = malloc(4 * (n ? n : 1)), *comm_ids = malloc(4 * (n ? n : 1));
    fu_module *modules = NULL;
    fu_address_space *spaces = NULL;
    fu_walk_cache **caches = NULL;
    fu_walk_cache_slot *slots = NULL;
    fu_perf_walk_buffers out = {0}, extra[FU_PERF_WALK_THREADS_MAX];
    memset(extra, 0, sizeof extra);
    fu_error err = {0};
    if (!space_ids || !comm_ids)
        goto done;
    fu_status status = fu_replay_run(r, pd, space_ids, comm_ids, &err);
    if (status != FU_OK) {
        if (status != FU_ERR_INVALID && status != FU_ERR_NOMEM)
            problem = "replay: an unexpected status";
        goto done;
    }
    if (fu_replay_number_mappings(r, &err) != FU_OK)
        goto done;
    fu_replay_reported(r);
    replayed_samples += n;
    uint32_t space_count = FU_REPLAY_COUNT(r, spaces, fu_replay_space);
    uint32_t comm_count = FU_REPLAY_COUNT(r, comm_names, fu_perf_string);
    size_t pool = r->space_pool.len / 4;
    const fu_replay_mapping *mappings = FU_REPLAY_RECORDS(r, mappings, fu_replay_mapping);
    const uint32_t *ids = (const uint32_t *)(const void *)r->space_pool.data;
    modules = calloc(pool + 1, sizeof *modules);
    spaces = calloc((size_t)space_count + 1, sizeof *spaces);
    slots = calloc((size_t)space_count + 1, sizeof *slots);
    caches = calloc(2 * ((size_t)space_count + 1), sizeof *caches);
    if (!modules || !spaces || !slots || !caches)
        goto done;
    for (uint32_t i = 0; i < space_count; i++) {
        const fu_replay_space *sp = &FU_REPLAY_RECORDS(r, spaces, fu_replay_space)[i];
        if (sp->offset > pool || sp->count > pool - sp->offset) {
            problem = "replay: a space outside the pool";
            goto done;
        }
        for (uint32_t k = 0; k < sp->count; k++) {
            const fu_replay_mapping *m = &mappings[ids[sp->offset + k]];
            if (m->end <= m->start || (k && m->start < modules[sp->offset + k - 1].end)) {
                snprintf(message, sizeof message, "replay: space %u's mapping %u is empty, unsorted or overlaps", i, k);
                problem = message;
                goto done;
            }
            modules[sp->offset + k] = (fu_module){.start = m->start, .end = m->end, .id = k};
        }
        spaces[i] = (fu_address_space){modules + sp->offset, sp->count, FU_BACKEND_AUTO};
    }
    for (size_t i = 0; i < n; i++)
        if ((space_ids[i] != FU_REPLAY_NONE && space_ids[i] >= space_count) ||
            (comm_ids[i] != FU_REPLAY_NONE && comm_ids[i] >= comm_count) ||
            ((space_ids[i] == FU_REPLAY_NONE) != (comm_ids[i] == FU_REPLAY_NONE))) {
            problem = "replay: a sample's space or comm id out of range";
            goto done;
        }
    const fu_address_space *space_ptrs[1];
    const fu_address_space **by_id = space_count ? malloc(space_count * sizeof *by_id) : space_ptrs;
    if (!by_id)
        goto done;
    for (uint32_t i = 0; i < space_count; i++)
        by_id[i] = &spaces[i];
    for (unsigned threads = 1; threads <= 2 && !problem; threads++) {
        for (uint32_t i = 0; i < space_count; i++)
            for (unsigned t = 0; t < threads; t++)
                if (!(caches[t * ((size_t)space_count + 1) + i] = fu_walk_cache_borrow(&slots[i], &spaces[i])))
                    goto release;
        fu_perf_walk_request request = {pd->samples, n, space_ids, by_id, caches, (size_t)space_count + 1,
                                        threads, threads == 1 ? FU_PERF_MAX_STACK : 8};
        uint64_t ns;
        if (fu_perf_walk_samples(&request, &out, extra, &ns)) {
            problem = check_columns(&out, n, space_ids, spaces, space_count);
            walked_frames += out.frames.column[2].len;
            if (!problem)
                problem = script_problem(pd, &out, space_ids, comm_ids, r);
        }
    release:
        for (uint32_t i = 0; i < space_count; i++)
            for (unsigned t = 0; t < threads; t++)
                if (caches[t * ((size_t)space_count + 1) + i]) {
                    fu_walk_cache_return(&slots[i], caches[t * ((size_t)space_count + 1) + i]);
                    caches[t * ((size_t)space_count + 1) + i] = NULL;
                }
    }
    fu_perf_walk_request chains = {pd->samples, n, space_ids, by_id, NULL, 0, 1, FU_PERF_MAX_STACK};
    if (!problem && fu_perf_callchain_samples(&chains, space_count, &out, &err) == FU_OK) {
        problem = check_columns(&out, n, space_ids, spaces, space_count);
        callchain_frames += out.frames.column[2].len;
    } else if (!problem && err.status != FU_ERR_NOMEM) {
        problem = "callchains: failed with ids the replay gave";
    }
    if (by_id != space_ptrs)
        free(by_id);
done:
    for (uint32_t i = 0; slots && i < FU_REPLAY_COUNT(r, spaces, fu_replay_space); i++)
        fu_walk_cache_slot_free(&slots[i]);
    fu_perf_walk_buffers_free(&out);
    for (unsigned t = 0; t < FU_PERF_WALK_THREADS_MAX; t++)
        fu_perf_walk_buffers_free(&extra[t]);
    free(slots);
    free(caches);
    free(spaces);
    free(modules);
    free(space_ids);
    free(comm_ids);
    return problem;
}

/* The same bytes as a stream (perf_data.h "Streaming"): from a memfd (mapped, as a regular file) in
 * windows of one round, the next cut ahead on a thread, then from a pipe when the input fits the
 * pipe's buffer (leaving out data MMAP2 records, as perf-script does). Every window's records must
 * lie in the buffers; errors must name an offset. */
static int run_stream_from(int fd, unsigned timeout, const char *how, bool executable_mmaps_only)
{
    fu_perf_data header, window;
    fu_perf_stream *stream = NULL;
    fu_error err = {0};
    fu_perf_options options = {.max_decompressed = DRIVER_MAX_DECOMPRESSED};
    int bad = 0;
    if (timeout)
        alarm(timeout);
    fu_status status = fu_perf_stream_open(&stream, &header, fd, 1, &options, &err);
    if (status == FU_OK && stream) {
        fu_perf_stream_decode_ahead(stream, true);
        fu_perf_stream_executable_mmaps_only(stream, executable_mmaps_only);
    }
    bool done = false;
    fu_replay replay = {0}; /* one replay across the windows, as perf-script keeps it */
    /* one window per iteration; the stream ends or fails after at most one per record */
    while (status == FU_OK && !done) {
        status = fu_perf_stream_next(stream, &window, &done, &err);
        if (status == FU_OK && !done) {
            const char *problem = check(&window);
            if (!problem)
                problem = replay_and_walk(&window, &replay);
            if (problem) {
                fprintf(stderr, "%s (%s stream): invariant violated: %s\n", current_input, how, problem);
                bad = 1;
            }
        }
        fu_perf_data_free(&window);
    }
    if (timeout)
        alarm(0);
    if (status == FU_ERR_PERF_DATA && strncmp(err.message, "perf.data+0x", 12) != 0 &&
        strncmp(err.message, "reading the recording", 21) != 0 && strncmp(err.message, "a recording streamed", 20) != 0) {
        fprintf(stderr, "%s (%s stream): error without an offset: %s\n", current_input, how, err.message);
        bad = 1;
    } else if (status != FU_OK && status != FU_ERR_PERF_DATA && status != FU_ERR_NOMEM) {
        fprintf(stderr, "%s (%s stream): unexpected status %d: %s\n", current_input, how, (int)status, err.message);
        bad = 1;
    }
    fu_replay_free(&replay);
    fu_perf_stream_wait(stream);
    fu_perf_data_free(&header);
    fu_perf_stream_free(stream);
    return bad;
}

static int run_stream(const uint8_t *data, size_t size, unsigned timeout, size_t *unused)
{
    (void)unused;
    int bad = 0;
    int fd = memfd_create("perf-driver", 0);
    if (fd >= 0) {
        if (write(fd, data, size) == (ssize_t)size)
            bad |= run_stream_from(fd, timeout, "memfd", false);
        close(fd);
    }
    int ends[2];
    if (!bad && size <= 65536 && pipe(ends) == 0) {
        bool written = write(ends[1], data, size) == (ssize_t)size;
        close(ends[1]);
        if (written)
            bad |= run_stream_from(ends[0], timeout, "pipe", true);
        close(ends[0]);
    }
    return bad;
}

/* 0: ok or a proper error; 1: invariant violated (message printed). */
/* The samples filtered as --pid and --time would (the first sample's pid, from the middle sample's
 * time on), in place: the kept ones in order, renumbered, each listed once by the events. */
static const char *filter_problem(fu_perf_data *pd)
{
    if (!pd->sample_count)
        return NULL;
    uint32_t pid = pd->samples[0].pid;
    uint64_t ranges[2] = {pd->samples[pd->sample_count / 2].time, 0};
    fu_sample_filter f = {.pids = &pid, .pid_count = 1, .ranges = ranges, .range_count = 1};
    bool *keep = malloc(pd->sample_count);
    if (!keep)
        return NULL;
    size_t expected = 0;
    for (size_t i = 0; i < pd->sample_count; i++)
        expected += keep[i] = fu_sample_filter_keep(&f, &pd->samples[i]);
    size_t kept = fu_perf_keep_samples(pd, keep);
    free(keep);
    if (kept == SIZE_MAX)
        return NULL;
    if (kept != expected || pd->sample_count != kept)
        return "filter: the samples kept are not the samples that pass";
    size_t listed = 0;
    for (size_t i = 0; i < pd->sample_count; i++)
        if (pd->samples[i].index != i || pd->samples[i].pid != pid || (ranges[0] && pd->samples[i].time < ranges[0]))
            return "filter: a kept sample is misnumbered or does not pass";
    for (size_t e = 0; e < pd->event_count; e++)
        if (pd->events[e].kind == FU_PERF_EVENT_SAMPLE && pd->events[e].index != listed++)
            return "filter: the events do not list the kept samples once each, in order";
    return listed == kept ? NULL : "filter: the events do not list every kept sample";
}

/* The input cut into BPF ring-buffer records, batches of samples (bpf_log.c): each record's size is
 * the next byte times 8; a sample kept must come back as a stack with at most FU_BPF_MAX_FRAMES
 * frames and a command name of at most 16 bytes, and the log's perf text and profile take every
 * sample. */
static const char *bpf_log_problem(const uint8_t *data, size_t size)
{
    fu_bpf_log log = {0};
    fu_error err = {0};
    const char *problem = NULL;
    for (size_t at = 0; !problem && at < size;) {
        size_t len = (size_t)data[at++] * 8;
        if (len > size - at)
            len = size - at;
        uint8_t *record = malloc(len ? len : 1); /* sized exactly: ASAN sees a read past it */
        if (!record)
            break;
        memcpy(record, data + at, len);
        fu_status st = fu_bpf_log_add_batch(&log, record, len, &err);
        free(record);
        at += len;
        if (st == FU_OK && fu_bpf_log_stack_count(&log) &&
            fu_bpf_log_stack(&log, fu_bpf_log_stack_count(&log) - 1)->user_count > FU_BPF_MAX_FRAMES)
            problem = "bpf log: a stack kept with too many frames";
        else if (st != FU_OK && st != FU_ERR_INVALID && st != FU_ERR_NOMEM)
            problem = "bpf log: an unexpected status";
    }
    const fu_bpf_logged *logged = fu_bpf_log_samples(&log);
    for (size_t i = 0; !problem && i < fu_bpf_log_sample_count(&log); i++)
        if (fu_bpf_log_comm(&log, logged[i].comm).len > 16)
            problem = "bpf log: a sample's command name longer than a thread's";
    uint32_t stacks = fu_bpf_log_stack_count(&log);
    fu_text *blocks = calloc(stacks + 1, sizeof *blocks);
    fu_bpf_named_stack *named = calloc(stacks + 1, sizeof *named);
    size_t bytes = 0;
    fu_text frame = {"f", 1};
    for (uint32_t i = 0; blocks && named && i < stacks; i++) {
        blocks[i] = (fu_text){"\t1 f+0x0 (x)\n", sizeof "\t1 f+0x0 (x)\n" - 1};
        named[i] = (fu_bpf_named_stack){.frames = &frame, .frame_count = 1, .outcome = {"", 0}};
    }
    fu_profile profile;
    fu_profile_init(&profile);
    if (!problem && blocks && named) {
        if (fu_bpf_log_perf_script(&log, blocks, stacks, (fu_text){"cpu-clock", 9}, count_chunk, &bytes, &err) != FU_OK &&
            err.status != FU_ERR_NOMEM)
            problem = "bpf log: perf text failed";
        else if (stacks && fu_bpf_log_perf_script(&log, blocks, stacks - 1, (fu_text){"", 0}, count_chunk, &bytes, &err) ==
                     FU_OK && fu_bpf_log_sample_count(&log) && fu_bpf_log_samples(&log)[0].stack == stacks - 1)
            problem = "bpf log: a sample without its stack's lines was rendered";
        else if (fu_bpf_log_profile(&log, named, stacks, 1.0, &profile, &err) != FU_OK && err.status != FU_ERR_NOMEM)
            problem = "bpf log: the profile refused its samples";
        else if (profile.samples != fu_bpf_log_sample_count(&log) && err.status != FU_ERR_NOMEM)
            problem = "bpf log: the profile lost samples";
    }
    fu_profile_free(&profile);
    free(blocks);
    free(named);
    fu_bpf_log_free(&log);
    return problem;
}

static int run_one(const uint8_t *data, size_t size, unsigned timeout, fu_status *status_out)
{
    /* A private copy sized exactly, so ASAN catches a read one past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    fu_perf_data pd;
    fu_error err = {0};
    fu_perf_options options = {.max_decompressed = DRIVER_MAX_DECOMPRESSED};
    if (timeout)
        alarm(timeout);
    fu_status status = fu_perf_data_parse(&pd, copy, size, &options, &err);
    if (timeout)
        alarm(0);
    int bad = 0;
    if (status == FU_OK) {
        const char *problem = check(&pd);
        fu_replay replay = {0};
        if (!problem) {
            if (timeout)
                alarm(timeout);
            problem = replay_and_walk(&pd, &replay);
            if (timeout)
                alarm(0);
        }
        if (!problem)
            problem = filter_problem(&pd);
        fu_replay_free(&replay);
        if (problem) {
            fprintf(stderr, "%s: invariant violated: %s\n", current_input, problem);
            bad = 1;
        }
    } else if (status == FU_ERR_PERF_DATA) {
        if (strncmp(err.message, "perf.data+0x", 12) != 0) {
            fprintf(stderr, "%s: error without an offset: %s\n", current_input, err.message);
            bad = 1;
        }
    } else if (status != FU_ERR_NOMEM) {
        fprintf(stderr, "%s: unexpected status %d: %s\n", current_input, (int)status, err.message);
        bad = 1;
    }
    fu_perf_data_free(&pd);
    free(copy);
    const char *bpf_problem = bad ? NULL : bpf_log_problem(data, size);
    if (bpf_problem) {
        fprintf(stderr, "%s: invariant violated: %s\n", current_input, bpf_problem);
        bad = 1;
    }
    if (!bad)
        bad = run_stream(data, size, timeout, status == FU_OK ? &pd_samples_seen : NULL);
    if (status_out)
        *status_out = status;
    return bad;
}

#ifdef FU_PERF_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (run_one(data, size, 0, NULL))
        abort();
    return 0;
}
#else

/* xorshift64*: deterministic from the seed on every platform. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Offsets of the records of the data section (best effort), for field-aware mutations. */
static size_t find_records(const uint8_t *d, size_t n, size_t *out, size_t cap)
{
    if (n < 16)
        return 0;
    size_t pos, end;
    if (get(d + 8, 8) == 16) {
        pos = 16;
        end = n;
    } else if (n >= 104) {
        uint64_t off = get(d + 40, 8), len = get(d + 48, 8);
        if (off > n)
            return 0;
        pos = (size_t)off;
        end = len > n - off ? n : (size_t)(off + len);
    } else {
        return 0;
    }
    size_t count = 0;
    while (count < cap && end - pos >= 8) {
        uint32_t type = (uint32_t)get(d + pos, 4);
        uint64_t size = get(d + pos + 6, 2);
        if (size < 8)
            break;
        out[count++] = pos;
        if (type == 66 && end - pos >= 12)
            size += (get(d + pos + 8, 4) + 7) & ~7ull;
        else if (type == 71 && end - pos >= 16)
            size += get(d + pos + 8, 8);
        if (size > end - pos)
            break;
        pos += (size_t)size;
    }
    return count;
}

static size_t mutate(uint8_t *buf, size_t size, size_t cap, const size_t *records, size_t nrec)
{
    static const uint64_t hostile[] = {0, 1, 7, 8, 16, 0xff, 0xffff, 0x10000, 0x7fffffff, 0xffffffff,
                                       0x100000000ull, 1ull << 61, 1ull << 63, ~0ull};
    switch (below(8)) {
    case 0:
        for (uint64_t k = 1 + below(8); k--;)
            buf[below(size)] ^= (uint8_t)(1u << below(8));
        break;
    case 1:
        if (nrec) {
            size_t at = records[below(nrec)];
            if (at + 8 <= size)
                put16(buf + at + 6, (uint16_t)(below(2) ? hostile[below(7)] : below(65536)));
        }
        break;
    case 2:
        if (nrec) {
            static const uint32_t types[] = {1, 3, 4, 7, 9, 10, 64, 66, 67, 68, 71, 78, 80, 81, 200};
            size_t at = records[below(nrec)];
            if (at + 4 <= size)
                put32(buf + at, types[below(sizeof types / sizeof types[0])]);
        }
        break;
    case 3:
        if (nrec) {
            size_t at = records[below(nrec)];
            if (at + 8 <= size) {
                uint64_t rsize = get(buf + at + 6, 2);
                if (rsize >= 16) {
                    size_t where = at + 8 + 8 * (size_t)below((rsize - 8) / 8);
                    if (where + 8 <= size)
                        put64(buf + where, below(2) ? hostile[below(sizeof hostile / sizeof hostile[0])] : rnd());
                }
            }
        }
        break;
    case 4:
        size = (size_t)below(size);
        break;
    case 7: /* perf record killed: the header's data size still 0, and perhaps cut anywhere */
        if (size >= 104) {
            put64(buf + 48, 0);
            if (below(2))
                size = 104 + (size_t)below(size - 104);
        }
        break;
    case 5:
        if (size >= 104) {
            size_t at = 8 * (size_t)below(13);
            put64(buf + at, below(2) ? hostile[below(sizeof hostile / sizeof hostile[0])] : below(size));
        }
        break;
    default: {
        size_t at = (size_t)below(size);
        size_t n = 1 + (size_t)below(16);
        if (below(2)) {
            if (n > size - at)
                n = size - at;
            memmove(buf + at, buf + at + n, size - at - n);
            size -= n;
        } else if (size + n <= cap) {
            memmove(buf + at + n, buf + at, size - at);
            for (size_t i = 0; i < n; i++)
                buf[at + i] = (uint8_t)rnd();
            size += n;
        }
    }
    }
    return size;
}

static void save(const char *dir, const char *input, unsigned long n, const uint8_t *data, size_t size)
{
    if (!dir)
        return;
    const char *base = strrchr(input, '/');
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.mutant%lu", dir, base ? base + 1 : input, n);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, size, f);
        fclose(f);
        fprintf(stderr, "saved %s\n", path);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL);
    unsigned long mutations = 200;
    unsigned timeout = 20;
    const char *save_dir = NULL;
    int first = 1;
    for (; first < argc && strncmp(argv[first], "--", 2) == 0; first++) {
        if (first + 1 >= argc)
            break;
        if (!strcmp(argv[first], "--seed"))
            seed = strtoull(argv[++first], NULL, 0);
        else if (!strcmp(argv[first], "--mutations"))
            mutations = strtoul(argv[++first], NULL, 0);
        else if (!strcmp(argv[first], "--timeout"))
            timeout = (unsigned)strtoul(argv[++first], NULL, 0);
        else if (!strcmp(argv[first], "--save-dir"))
            save_dir = argv[++first];
        else
            break;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: %s [--seed N] [--mutations M] [--timeout S] [--save-dir DIR] FILE...\n", argv[0]);
        return 2;
    }
    signal(SIGALRM, on_alarm);
    printf("perf_driver: seed %llu, %lu mutations per file\n", (unsigned long long)seed, mutations);
    fflush(stdout);
    int failures = 0;
    for (int i = first; i < argc; i++) {
        size_t size;
        uint8_t *data = fuzz_read_file(argv[i], SIZE_MAX, &size);
        if (!data) {
            fprintf(stderr, "cannot read %s\n", argv[i]);
            return 2;
        }
        current_input = argv[i];
        failures += run_one(data, size, timeout, NULL);
        size_t cap = size + 64;
        uint8_t *buf = malloc(cap);
        size_t *records = malloc(sizeof *records * 65536);
        size_t nrec = records ? find_records(data, size, records, 65536) : 0;
        unsigned long errors = 0;
        rng_state = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(i + 1));
        if (!rng_state)
            rng_state = 1;
        for (unsigned long n = 0; buf && n < mutations && size; n++) {
            memcpy(buf, data, size);
            size_t msize = mutate(buf, size, cap, records, nrec);
            fu_status s = FU_OK;
            int bad = run_one(buf, msize, timeout, &s);
            errors += s != FU_OK;
            if (bad) {
                save(save_dir, argv[i], n, buf, msize);
                failures++;
            }
        }
        printf("%s: %zu bytes, %zu records, %lu mutants (%lu rejected with an error)\n", argv[i], size, nrec,
               mutations, errors);
        free(records);
        free(buf);
        free(data);
    }
    printf("perf_driver: %zu samples replayed; %zu frames walked, %zu read from callchains; %zu bytes rendered, "
           "%zu folded\n", replayed_samples, walked_frames, callchain_frames, rendered_bytes, folded_bytes);
    printf("perf_driver: %s (seed %llu)\n", failures ? "FAILURES" : "ok", (unsigned long long)seed);
    return failures ? 1 : 0;
}
#endif
