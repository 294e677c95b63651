/* perf_walk: see perf_walk.h. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "perf_walk.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "memory.h"
#include "perf_regs.h"

void fu_perf_walk_buffers_free(fu_perf_walk_buffers *b)
{
    free(b->outcomes.data);
    free(b->starts.data);
    for (unsigned c = 0; c < 4; c++)
        free(b->frames.column[c].data);
    *b = (fu_perf_walk_buffers){0};
}

bool fu_perf_frame_columns_grow(fu_perf_frame_columns *f, size_t frames)
{
    static const size_t width[4] = {8, 4, 1, 1};
    f->room = SIZE_MAX;
    for (unsigned c = 0; c < 4; c++) {
        if (!fu_buffer_reserve(&f->column[c], width[c] * frames))
            return false;
        f->room = f->column[c].cap / width[c] < f->room ? f->column[c].cap / width[c] : f->room;
    }
    return true;
}

/* How far ahead unwind_samples starts loading a sample's lines: the lines of its rip, rsp and rbp
 * REGISTERS_AHEAD samples ahead; STACK_AHEAD samples ahead, with its rip in the cache by then, the
 * stack lines its walk will read (fu_walk_prefetch: exactly the return addresses where the walk
 * cache holds a shape for that rip, the two ends of a signal context's crossing where it holds
 * one, else the dump's first FU_WALK_PREFETCH_BYTES). A cold pass
 * here pays for each line it loads and waits for what it loads late: one sample ahead and always
 * 512 bytes (until 53e32f8), hackbench's cold first pass took 36.8-38.9 ns/frame against
 * 23.6-25.0 now (medians of 12 one-pass processes each, alternated); c, python and c-fp within
 * their noise (+-5%), warm passes 0-3% more (the lookup of each sample's shape). 6 and 3 ahead
 * measured between (27.0 on hackbench), 4 and 2 at 28.2, 16 and 8 no better than 8 and 4. */
#define REGISTERS_AHEAD 8
#define STACK_AHEAD 4

/* One thread's share of a batch: samples [first, last), walked with its own walk caches (one per
 * space, lent by the space) into its own buffers. */
typedef struct walk_job {
    const fu_perf_sample *samples;
    const uint32_t *ids;          /* space id per sample of the whole batch */
    size_t first, last;
    const fu_address_space *const *spaces;
    fu_walk_cache **caches;       /* by space id */
    size_t max_frames;
    fu_perf_walk_buffers *buffers;       /* outcomes and starts indexed from `first` */
    uint32_t frame_count;
    bool nomem;
    pthread_t thread;
} walk_job;

static void walk_samples(walk_job *job)
{
    const fu_perf_sample *samples = job->samples;
    const uint32_t *ids = job->ids;
    size_t first = job->first, count = job->last, max_frames = job->max_frames;
    const fu_address_space *const *spaces = job->spaces;
    fu_walk_cache **caches = job->caches;
    fu_buffer *outcomes = &job->buffers->outcomes, *starts = &job->buffers->starts;
    fu_perf_frame_columns *frames_out = &job->buffers->frames;
    fu_buffer *columns = frames_out->column; /* ips, modules, kinds, flags */
    fu_perf_register_plan plan;
    fu_perf_register_plan_make(0, &plan);
    uint32_t frame_count = 0;
    memcpy(starts->data, &frame_count, 4);
    for (size_t s = first; s < count; s++) {
        const fu_perf_sample *sample = &samples[s];
        /* Start loading later samples' lines while this one walks (at the offsets of this
         * sample's mask: every sample of an event has the same): they are far apart in the
         * recording, and a walk waits for each its first thing. */
        if (s + REGISTERS_AHEAD < count) {
            const fu_perf_sample *later = &samples[s + REGISTERS_AHEAD];
            if (later->regs && plan.count) {
                __builtin_prefetch(later->regs + 8 * plan.head_lowest);
                __builtin_prefetch(later->regs + 8 * plan.head_highest + 7);
            }
        }
        if (s + STACK_AHEAD < count) {
            const fu_perf_sample *later = &samples[s + STACK_AHEAD];
            uint32_t later_id;
            memcpy(&later_id, &ids[s + STACK_AHEAD], sizeof later_id);
            if (later->stack && later->regs && plan.count && later->regs_mask == plan.mask &&
                later_id != UINT32_MAX) {
                uint64_t later_ip; /* head_index[0]: rip's, FU_PERF_HEAD_REGISTER_DWARF */
                memcpy(&later_ip, later->regs + 8 * plan.head_index[0], 8);
                fu_walk_prefetch(caches[later_id], later_ip, later->stack, later->stack_size);
            }
        }
        uint8_t outcome = FU_SAMPLE_SKIPPED;
        uint32_t id; /* in range: checked by the caller */
        memcpy(&id, &ids[s], sizeof id);
        fu_regs regs;
        regs.valid = 0; /* values of invalid registers are never read */
        if (id != UINT32_MAX) {
            fu_perf_sample_head_registers(sample, &plan, &regs);
            outcome = FU_SAMPLE_NO_USER_REGISTERS;
        }
        uint64_t sp;
        if (id != UINT32_MAX && (regs.valid >> FU_REG_RA & 1) && fu_regs_get(&regs, FU_REG_RSP, &sp)) {
            if (!fu_perf_reserve_frames(frames_out, (size_t)frame_count + max_frames)) {
                job->nomem = true;
                break;
            }
            fu_dump_memory memory = {sample->stack, sp, sample->stack_size, spaces[id]};
            fu_reader reader = fu_dump_reader(&memory);
            fu_walk_result r;
            fu_frames frames = {(uint64_t *)(void *)columns[0].data + frame_count,
                                (uint32_t *)(void *)columns[1].data + frame_count, columns[2].data + frame_count,
                                columns[3].data + frame_count};
            /* the other registers only for a walk that does not follow its shape (walk.h) */
            fu_walk_shape *shape_to_write;
            if (!fu_walk_begin(spaces[id], &regs, &reader, caches[id], &frames, max_frames, &r,
                               &shape_to_write)) {
                fu_perf_sample_registers(sample, &plan, &regs);
                fu_walk_finish(spaces[id], &regs, &reader, caches[id], &frames, max_frames, &r,
                               shape_to_write);
            }
            frame_count += (uint32_t)r.frame_count;
            outcome = (uint8_t)r.outcome;
        }
        outcomes->data[s - first] = outcome;
        memcpy(starts->data + 4 * (s - first + 1), &frame_count, 4);
    }
    outcomes->len = count - first;
    starts->len = 4 * (count - first + 1);
    columns[0].len = 8 * (size_t)frame_count;
    columns[1].len = 4 * (size_t)frame_count;
    columns[2].len = columns[3].len = frame_count;
    job->frame_count = frame_count;
}

static void *walk_thread(void *job)
{
    walk_samples(job);
    return NULL;
}

/* Room for a job's outcomes, starts and (reserved) frames. */
static bool reserve_job(fu_perf_walk_buffers *b, size_t count)
{
    size_t reserved = count < FU_PERF_FRAMES_RESERVED_MAX / FU_PERF_FRAMES_RESERVED_PER_SAMPLE
                          ? count * FU_PERF_FRAMES_RESERVED_PER_SAMPLE
                          : FU_PERF_FRAMES_RESERVED_MAX;
    return fu_buffer_reserve(&b->outcomes, count + 1) && fu_buffer_reserve(&b->starts, 4 * (count + 1)) &&
           fu_perf_reserve_frames(&b->frames, reserved);
}

unsigned fu_perf_walk_threads(size_t count)
{
    static unsigned configured; /* 0: not read yet */
    if (!configured) {
        const char *env = getenv("FASTUNWIND_THREADS");
        long n = env && *env ? strtol(env, NULL, 10) : 0;
        if (n <= 0) {
            cpu_set_t set;
            n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        }
        configured = n < 1 ? 1 : n > FU_PERF_WALK_THREADS_MAX ? FU_PERF_WALK_THREADS_MAX : (unsigned)n;
    }
    size_t by_size = count / FU_PERF_WALK_SAMPLES_PER_THREAD;
    return by_size < 1 ? 1 : by_size < configured ? (unsigned)by_size : configured;
}

bool fu_perf_walk_samples(const fu_perf_walk_request *request, fu_perf_walk_buffers *out,
                          fu_perf_walk_buffers extra[FU_PERF_WALK_THREADS_MAX], uint64_t *walk_ns)
{
    unsigned threads = request->threads;
    size_t count = request->count;
    walk_job jobs[FU_PERF_WALK_THREADS_MAX];
    memset(jobs, 0, sizeof jobs);
    fu_buffer *outcomes = &out->outcomes, *starts = &out->starts;
    fu_perf_frame_columns *frames_out = &out->frames;
    fu_buffer *columns = frames_out->column; /* ips, modules, kinds, flags */
    outcomes->len = starts->len = 0;
    for (unsigned c = 0; c < 4; c++)
        columns[c].len = 0;
    /* contiguous shares, so that each thread's frames follow the previous thread's */
    for (unsigned t = 0; t < threads; t++) {
        walk_job *job = &jobs[t];
        job->samples = request->samples;
        job->ids = request->space_ids;
        job->first = count * t / threads;
        job->last = count * (t + 1) / threads;
        job->spaces = request->spaces;
        job->caches = request->caches + (size_t)t * request->cache_stride;
        job->max_frames = request->max_frames;
        job->buffers = t ? &extra[t] : out;
        if (!reserve_job(job->buffers, job->last - job->first))
            return false;
    }
    /* the whole loop is timed: register extraction, walks and collecting the frames */
    uint64_t started = fu_monotonic_ns();
    unsigned running = 1;
    for (unsigned t = 1; t < threads; t++, running++)
        if (pthread_create(&jobs[t].thread, NULL, walk_thread, &jobs[t]) != 0)
            break;
    walk_samples(&jobs[0]);
    for (unsigned t = 1; t < running; t++)
        pthread_join(jobs[t].thread, NULL);
    for (unsigned t = running; t < threads; t++) /* a thread the system refused: walked here */
        walk_samples(&jobs[t]);
    /* the shares' results after the first's, in order */
    uint32_t frame_count = jobs[0].frame_count;
    bool nomem = jobs[0].nomem;
    for (unsigned t = 1; t < threads && !nomem; t++) {
        fu_perf_walk_buffers *b = &extra[t];
        size_t n = jobs[t].last - jobs[t].first;
        if (!fu_buffer_reserve(outcomes, n) || !fu_buffer_reserve(starts, 4 * n) ||
            !fu_perf_reserve_frames(frames_out, (size_t)frame_count + jobs[t].frame_count) || jobs[t].nomem ||
            (uint64_t)frame_count + jobs[t].frame_count > UINT32_MAX) {
            nomem = true;
            break;
        }
        if (n) /* a share may be empty (memcpy with a NULL buffer is undefined, even for 0 bytes) */
            memcpy(outcomes->data + outcomes->len, b->outcomes.data, n);
        outcomes->len += n;
        const uint32_t *share_starts = (const uint32_t *)(const void *)b->starts.data;
        for (size_t k = 1; k <= n; k++) {
            uint32_t at = frame_count + share_starts[k];
            memcpy(starts->data + starts->len, &at, 4);
            starts->len += 4;
        }
        static const size_t width[4] = {8, 4, 1, 1};
        for (unsigned c = 0; c < 4; c++) {
            if (jobs[t].frame_count)
                memcpy(columns[c].data + width[c] * frame_count, b->frames.column[c].data,
                       width[c] * jobs[t].frame_count);
            columns[c].len = width[c] * ((size_t)frame_count + jobs[t].frame_count);
        }
        frame_count += jobs[t].frame_count;
    }
    *walk_ns = fu_monotonic_ns() - started;
    return !nomem;
}

/* Append one frame at `ip` of `space` (FU_FRAME_FIRST, the module that holds it or UINT32_MAX). */
static void callchain_frame(fu_perf_frame_columns *f, uint32_t n, const fu_address_space *space, uint64_t ip)
{
    int64_t m = fu_address_space_find(space, ip);
    uint32_t module = m < 0 ? UINT32_MAX : (uint32_t)m;
    memcpy(f->column[0].data + 8 * (size_t)n, &ip, 8);
    memcpy(f->column[1].data + 4 * (size_t)n, &module, 4);
    f->column[2].data[n] = FU_FRAME_FIRST;
    f->column[3].data[n] = 0;
}

fu_status fu_perf_callchain_samples(const fu_perf_walk_request *request, size_t space_count, fu_perf_walk_buffers *out,
                                    fu_error *err)
{
    size_t count = request->count, max_frames = request->max_frames;
    const fu_perf_sample *samples = request->samples;
    fu_buffer *outcomes = &out->outcomes, *starts = &out->starts;
    fu_perf_frame_columns *frames_out = &out->frames;
    fu_buffer *columns = frames_out->column;
    outcomes->len = starts->len = 0;
    for (unsigned c = 0; c < 4; c++)
        columns[c].len = 0;
    if (!fu_buffer_reserve(outcomes, count) || !fu_buffer_reserve(starts, 4 * (count + 1)))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu samples' outcomes", count);
    const uint32_t *ids = request->space_ids;
    uint32_t frame_count = 0;
    memcpy(starts->data, &frame_count, 4);
    /* one sample per iteration; its frames are bounded by max_frames and its callchain's entries */
    for (size_t s = 0; s < count; s++) {
        const fu_perf_sample *sample = &samples[s];
        uint32_t id;
        memcpy(&id, &ids[s], sizeof id);
        uint8_t outcome = FU_SAMPLE_SKIPPED;
        if (id != UINT32_MAX && id >= space_count)
            return fu_fail(err, FU_ERR_INVALID, "sample %zu: space id %u is out of range (%zu spaces)", s, id,
                           space_count);
        if (id != UINT32_MAX) {
            if (!fu_perf_reserve_frames(frames_out, (size_t)frame_count + max_frames))
                return fu_fail(err, FU_ERR_NOMEM, "out of memory for %u frames", frame_count);
            uint32_t taken = 0;
            if (sample->present & FU_PERF_SAMPLE_CALLCHAIN) {
                /* perf's thread__resolve_callchain_sample: a PERF_CONTEXT_* marker sets the context
                 * of the entries after it; user entries are the user frames (kernel ones are
                 * symbolize_samples' kernel frames), guest and hypervisor entries are not shown */
                bool user = true;
                for (uint64_t c = 0; c < sample->callchain_count && taken < (uint32_t)max_frames; c++) {
                    uint64_t ip = sample->callchain[c];
                    if (ip >= FU_PERF_CONTEXT_MAX)
                        user = ip == FU_PERF_CONTEXT_USER;
                    else if (user && ip < FU_PERF_KERNEL_START)
                        callchain_frame(frames_out, frame_count + taken++, request->spaces[id], ip);
                }
                outcome = FU_SAMPLE_CALLCHAIN;
            } else {
                if (sample->ip < FU_PERF_KERNEL_START)
                    callchain_frame(frames_out, frame_count + taken++, request->spaces[id], sample->ip);
                outcome = FU_SAMPLE_IP_ONLY;
            }
            frame_count += taken;
        }
        outcomes->data[s] = outcome;
        memcpy(starts->data + 4 * (s + 1), &frame_count, 4);
    }
    outcomes->len = count;
    starts->len = 4 * (count + 1);
    columns[0].len = 8 * (size_t)frame_count;
    columns[1].len = 4 * (size_t)frame_count;
    columns[2].len = columns[3].len = frame_count;
    return FU_OK;
}

const char *fu_sample_outcome_name(unsigned code)
{
    switch (code) {
    case FU_SAMPLE_NO_USER_REGISTERS: return "no_user_registers";
    case FU_SAMPLE_SKIPPED: return "skipped";
    case FU_SAMPLE_CALLCHAIN: return "callchain";
    case FU_SAMPLE_IP_ONLY: return "ip_only";
    default: return code < FU_WALK_OUTCOME_COUNT ? fu_walk_outcome_name((fu_walk_outcome)code) : NULL;
    }
}

bool fu_sample_outcome_complete(unsigned code)
{
    return code == FU_WALK_END || code == FU_SAMPLE_CALLCHAIN || code == FU_SAMPLE_IP_ONLY;
}

bool fu_perf_flagged_samples(const uint8_t *outcomes, const uint8_t *starts, size_t count, const uint8_t *flags,
                             size_t flag_count, uint8_t mask, uint64_t by_outcome[256])
{
    memset(by_outcome, 0, 256 * sizeof *by_outcome);
    uint32_t from, to;
    memcpy(&from, starts, 4);
    for (size_t s = 0; s < count; s++, from = to) {
        memcpy(&to, starts + 4 * (s + 1), 4);
        if (to < from || to > flag_count)
            return false;
        for (uint32_t f = from; f < to; f++)
            if (flags[f] & mask) {
                by_outcome[outcomes[s]]++;
                break;
            }
    }
    return true;
}
