/* perf_walk: unwind the user stacks of a recording's samples in one call, without Python per
 * sample: registers and stack bytes come from the decoded samples, modules from the address
 * space each sample was taken in.
 *
 * unwind_samples(perf_data, space_ids, spaces, max_frames=127, threads=0)
 *   space_ids: bytes of uint32, one per sample (UINT32_MAX: skip the sample)
 *   threads: walking threads (0: FASTUNWIND_THREADS, else the CPUs; see walk_threads); each walks a
 *       contiguous share of the samples with walk caches of its own, the results joined in order
 *   -> (outcomes: bytes u8[n], frame_starts: bytes u32[n + 1], ips: bytes u64[frames],
 *       modules: bytes u32[frames], kinds: bytes u8[frames], flags: bytes u8[frames],
 *       walk_ns: int)
 *
 * callchain_samples(perf_data, space_ids, spaces, max_frames=127): the same columns for a recording
 *   without user stacks (perf record -g, --call-graph fp or lbr, or no call graph): each sample's
 *   user frames are the user entries of its kernel callchain (outcome FU_SAMPLE_CALLCHAIN), or,
 *   without a callchain, its sampled IP alone (FU_SAMPLE_IP_ONLY); nothing is walked. Frames are of
 *   kind FU_FRAME_FIRST: perf prints callchain entries as they are, not at return address - 1.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "py_core.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "growing.h"
#include "memory.h"
#include "perf_data.h"
#include "walk.h"

/* The DWARF register (0..16: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip) of each of perf's x86-64
 * user registers (arch/x86/include/uapi/asm/perf_regs.h), -1 for those the walker does not use. */
static const int8_t dwarf_of_perf_reg[24] = {
    [FU_PERF_REG_AX] = 0, [FU_PERF_REG_BX] = 3, [FU_PERF_REG_CX] = 2, [FU_PERF_REG_DX] = 1,
    [FU_PERF_REG_SI] = 4, [FU_PERF_REG_DI] = 5, [FU_PERF_REG_BP] = 6, [FU_PERF_REG_SP] = 7,
    [FU_PERF_REG_IP] = 16, [FU_PERF_REG_FLAGS] = -1, [FU_PERF_REG_CS] = -1, [FU_PERF_REG_SS] = -1,
    [FU_PERF_REG_DS] = -1, [FU_PERF_REG_ES] = -1, [FU_PERF_REG_FS] = -1, [FU_PERF_REG_GS] = -1,
    [FU_PERF_REG_R8] = 8, [FU_PERF_REG_R9] = 9, [FU_PERF_REG_R10] = 10, [FU_PERF_REG_R11] = 11,
    [FU_PERF_REG_R12] = 12, [FU_PERF_REG_R13] = 13, [FU_PERF_REG_R14] = 14, [FU_PERF_REG_R15] = 15,
};

/* How to read one regs_mask's values: the sample stores the registers of the mask's set bits in
 * bit order; the walker's registers are the `count` values at index[k], going to DWARF register
 * dwarf[k]. Every sample of an event has the same mask, so a plan is made once and reused. */
typedef struct register_plan {
    uint64_t mask;
    unsigned count;
    uint8_t index[FU_WALK_REGISTERS], dwarf[FU_WALK_REGISTERS];
    uint32_t valid; /* the DWARF registers the plan fills */
    /* Where the sample stores rip, rsp and rbp (the walk's head registers, HEAD_REGISTER_DWARF);
     * one the mask lacks reads the plan's first register instead, a value in the block that
     * `valid` says nothing of (copies without a branch; with count 0 nothing is read). And the
     * least and most of these indices, for the prefetch of their bytes. */
    uint8_t head_index[3];
    uint8_t head_lowest, head_highest;
} register_plan;

/* The registers fu_walk_begin reads: all a walk that follows a shape needs of a sample's. */
static const uint8_t HEAD_REGISTER_DWARF[3] = {FU_REG_RA, FU_REG_RSP, FU_REG_RBP};

static void make_register_plan(uint64_t mask, register_plan *plan)
{
    plan->mask = mask;
    plan->count = 0;
    plan->valid = 0;
    unsigned k = 0;
    for (uint64_t bits = mask; bits; bits &= bits - 1, k++) {
        unsigned perf_reg = (unsigned)__builtin_ctzll(bits);
        int8_t reg = perf_reg < 24 ? dwarf_of_perf_reg[perf_reg] : -1;
        if (reg < 0 || plan->valid >> reg & 1)
            continue;
        plan->index[plan->count] = (uint8_t)k;
        plan->dwarf[plan->count++] = (uint8_t)reg;
        plan->valid |= 1u << reg;
    }
    plan->head_lowest = UINT8_MAX;
    plan->head_highest = 0;
    for (unsigned h = 0; h < sizeof HEAD_REGISTER_DWARF; h++) {
        plan->head_index[h] = plan->count ? plan->index[0] : 0;
        for (unsigned k = 0; k < plan->count; k++)
            if (plan->dwarf[k] == HEAD_REGISTER_DWARF[h])
                plan->head_index[h] = plan->index[k];
        plan->head_lowest = plan->head_index[h] < plan->head_lowest ? plan->head_index[h] : plan->head_lowest;
        plan->head_highest = plan->head_index[h] > plan->head_highest ? plan->head_index[h] : plan->head_highest;
    }
}

/* The user registers `perf record --call-graph dwarf` samples on x86-64 (PERF_REGS_MASK in perf's
 * arch/x86/include/perf_regs.h): every general register, rip, flags, cs and ss; not ds, es, fs, gs. */
#define PERF_DEFAULT_REGS_MASK 0xff0fffull

/* The sample's rip, rsp and rbp in DWARF numbering, where its mask has them, and regs->valid for
 * all its user registers (sample_registers reads the others); makes `plan` the sample's. */
static inline void sample_head_registers(const fu_perf_sample *sample, register_plan *plan, fu_regs *regs)
{
    regs->valid = 0;
    if (!sample->regs || sample->regs_abi == 0)
        return;
    if (sample->regs_mask != plan->mask)
        make_register_plan(sample->regs_mask, plan);
    if (plan->count == 0)
        return;
    for (unsigned h = 0; h < sizeof HEAD_REGISTER_DWARF; h++)
        memcpy(&regs->value[HEAD_REGISTER_DWARF[h]], sample->regs + 8 * plan->head_index[h], 8);
    regs->valid = plan->valid;
}

/* The sample's user registers in DWARF numbering, after sample_head_registers (`plan` the
 * sample's). */
static inline void sample_registers(const fu_perf_sample *sample, const register_plan *plan, fu_regs *regs)
{
    if (!regs->valid)
        return;
    const uint8_t *in = sample->regs;
    if (plan->mask == PERF_DEFAULT_REGS_MASK) {
        /* The plan of this mask as straight-line copies (a third of the loop's instructions): in
         * the sample ax bx cx dx si di bp sp ip flags cs ss r8..r15, in DWARF order rax rdx rcx
         * rbx, then rsi rdi rbp rsp and r8..r15 in runs, then rip. */
        memcpy(&regs->value[0], in + 8 * FU_PERF_REG_AX, 8);
        memcpy(&regs->value[1], in + 8 * FU_PERF_REG_DX, 8);
        memcpy(&regs->value[2], in + 8 * FU_PERF_REG_CX, 8);
        memcpy(&regs->value[3], in + 8 * FU_PERF_REG_BX, 8);
        memcpy(&regs->value[4], in + 8 * FU_PERF_REG_SI, 4 * 8);
        memcpy(&regs->value[8], in + 8 * (FU_PERF_REG_R8 - 4), 8 * 8); /* ds es fs gs not sampled */
        memcpy(&regs->value[16], in + 8 * FU_PERF_REG_IP, 8);
    } else {
        for (unsigned k = 0; k < plan->count; k++)
            memcpy(&regs->value[plan->dwarf[k]], in + 8 * plan->index[k], 8);
    }
}

/* Outcome code for a sample without user registers (kernel-only sample, or regs_abi NONE). */
#define FU_SAMPLE_NO_USER_REGISTERS 0xfe
#define FU_SAMPLE_SKIPPED 0xff
/* Outcome codes of callchain_samples: frames from the kernel's callchain; the sampled IP alone. */
#define FU_SAMPLE_CALLCHAIN 0xfd
#define FU_SAMPLE_IP_ONLY 0xfc

/* perf_event.h, enum perf_callchain_context: markers in a callchain, the context of what follows. */
#define PERF_CONTEXT_USER ((uint64_t)-512)
#define PERF_CONTEXT_MAX ((uint64_t)-4095)
#define KERNEL_START ((uint64_t)1 << 63)

/* y# with a NULL pointer builds None, not b"": an empty column must still be bytes */
/* The space of an AddressSpace argument already checked with py_core_payload. */
static fu_space_with_cache *checked_space(PyObject *object) { return ((py_core_object *)object)->payload; }

/* The parsed reader of a PerfData argument, or NULL with an exception. */
static const fu_perf_data *perf_data_of(PyObject *module, PyObject *object)
{
    return py_core_payload(module, PY_PERF_DATA, object);
}

static const char *bytes_of(const fu_growing *g) { return g->data ? (const char *)g->data : ""; }

/* Frames per sample that unwind_samples reserves before its loop (virtual memory: pages are
 * touched only as frames land), so that most recordings never grow a column while walks are timed;
 * the reservation stops at FRAMES_RESERVED_MAX frames, beyond which columns grow by doubling. */
#define FRAMES_RESERVED_PER_SAMPLE 32
#define FRAMES_RESERVED_MAX ((size_t)1 << 24)

/* The frames of a batch: four columns (u64 ips, u32 modules, u8 kinds, u8 flags) that the walks
 * write in place, so their `len` stays 0 until the loop ends. */
typedef struct frame_columns {
    fu_growing column[4];
    size_t room; /* frames every column has room for */
} frame_columns;

/* What a batch writes: an outcome per sample, where each sample's frames start, the frames. */
typedef struct batch_buffers {
    fu_growing outcomes, starts;
    frame_columns frames;
} batch_buffers;

/* The last batch's buffers, kept for the next batch (taken and put back with the GIL held), so
 * that its walks write into pages already mapped: with fresh buffers the first batch after
 * another faulted in a page per 4 KiB of frames as it walked (c's 53,870 frames: 100 page faults
 * inside the timed loop, in a process whose earlier batch had freed the same sizes; the peers'
 * harnesses map their frame arrays before timing). Buffers of more than SPARE_BUFFERS_MAX_BYTES
 * in all are freed instead of kept. */
#define SPARE_BUFFERS_MAX_BYTES ((size_t)64 << 20)
static batch_buffers spare_buffers;

static void free_batch_buffers(batch_buffers *b)
{
    free(b->outcomes.data);
    free(b->starts.data);
    for (unsigned c = 0; c < 4; c++)
        free(b->frames.column[c].data);
    *b = (batch_buffers){0};
}

/* The spare buffers, emptied (or none: all zero). */
static batch_buffers take_spare_buffers(void)
{
    batch_buffers b = spare_buffers;
    spare_buffers = (batch_buffers){0};
    b.outcomes.len = b.starts.len = 0;
    for (unsigned c = 0; c < 4; c++)
        b.frames.column[c].len = 0;
    return b;
}

/* Keep `b` as the spare buffers (in place of any kept since), or free it if it is too big. */
static void keep_spare_buffers(batch_buffers *b)
{
    size_t bytes = b->outcomes.cap + b->starts.cap;
    for (unsigned c = 0; c < 4; c++)
        bytes += b->frames.column[c].cap;
    if (bytes > SPARE_BUFFERS_MAX_BYTES) {
        free_batch_buffers(b);
        return;
    }
    free_batch_buffers(&spare_buffers);
    spare_buffers = *b;
    *b = (batch_buffers){0};
}

static bool grow_frame_columns(frame_columns *f, size_t frames)
{
    static const size_t width[4] = {8, 4, 1, 1};
    f->room = SIZE_MAX;
    for (unsigned c = 0; c < 4; c++) {
        if (!fu_growing_reserve(&f->column[c], width[c] * frames))
            return false;
        f->room = f->column[c].cap / width[c] < f->room ? f->column[c].cap / width[c] : f->room;
    }
    return true;
}

/* Room for `frames` frames in every column; false if out of memory. */
static inline bool reserve_frames(frame_columns *f, size_t frames)
{
    return frames <= f->room || grow_frame_columns(f, frames);
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

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One thread's share of a batch: samples [first, last), walked with its own walk caches (one per
 * space, lent by the space) into its own buffers. */
typedef struct walk_job {
    const fu_perf_sample *samples;
    const uint32_t *ids;          /* space id per sample of the whole batch */
    size_t first, last;
    const fu_address_space **spaces;
    fu_walk_cache **caches;       /* by space id */
    size_t max_frames;
    batch_buffers *buffers;       /* outcomes and starts indexed from `first` */
    uint32_t frame_count;
    bool nomem;
    pthread_t thread;
} walk_job;

static void walk_samples(walk_job *job)
{
    const fu_perf_sample *samples = job->samples;
    const uint32_t *ids = job->ids;
    size_t first = job->first, count = job->last, max_frames = job->max_frames;
    const fu_address_space **spaces = job->spaces;
    fu_walk_cache **caches = job->caches;
    fu_growing *outcomes = &job->buffers->outcomes, *starts = &job->buffers->starts;
    frame_columns *frames_out = &job->buffers->frames;
    fu_growing *columns = frames_out->column; /* ips, modules, kinds, flags */
    register_plan plan;
    make_register_plan(0, &plan);
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
                uint64_t later_ip; /* head_index[0]: rip's, HEAD_REGISTER_DWARF */
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
            sample_head_registers(sample, &plan, &regs);
            outcome = FU_SAMPLE_NO_USER_REGISTERS;
        }
        uint64_t sp;
        if (id != UINT32_MAX && (regs.valid >> FU_REG_RA & 1) && fu_regs_get(&regs, FU_REG_RSP, &sp)) {
            if (!reserve_frames(frames_out, (size_t)frame_count + max_frames)) {
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
                sample_registers(sample, &plan, &regs);
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
static bool reserve_job(batch_buffers *b, size_t count)
{
    size_t reserved = count < FRAMES_RESERVED_MAX / FRAMES_RESERVED_PER_SAMPLE ? count * FRAMES_RESERVED_PER_SAMPLE
                                                                               : FRAMES_RESERVED_MAX;
    return fu_growing_reserve(&b->outcomes, count + 1) && fu_growing_reserve(&b->starts, 4 * (count + 1)) &&
           reserve_frames(&b->frames, reserved);
}

/* Threads that walk a batch: FASTUNWIND_THREADS if set (1: the caller's thread alone), else the
 * CPUs this process may run on, at most WALK_THREADS_MAX; and each thread at least
 * WALK_SAMPLES_PER_THREAD samples (starting a thread and filling its walk caches cost about as much
 * as walking a hundred samples). */
#define WALK_THREADS_MAX FU_WALK_KEPT_CACHES
#define WALK_SAMPLES_PER_THREAD 256

static unsigned walk_threads(size_t count)
{
    static unsigned configured; /* 0: not read yet */
    if (!configured) {
        const char *env = getenv("FASTUNWIND_THREADS");
        long n = env && *env ? strtol(env, NULL, 10) : 0;
        if (n <= 0) {
            cpu_set_t set;
            n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        }
        configured = n < 1 ? 1 : n > WALK_THREADS_MAX ? WALK_THREADS_MAX : (unsigned)n;
    }
    size_t by_size = count / WALK_SAMPLES_PER_THREAD;
    return by_size < 1 ? 1 : by_size < configured ? (unsigned)by_size : configured;
}

static PyObject *unwind_samples(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"perf_data", "space_ids", "spaces", "max_frames", "threads", NULL};
    PyObject *perf_data, *spaces_list;
    Py_buffer space_ids;
    Py_ssize_t max_frames = 127, threads_arg = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*O|nn", kwlist, &perf_data, &space_ids, &spaces_list,
                                     &max_frames, &threads_arg))
        return NULL;
    PyObject *result = NULL;
    const fu_address_space **spaces = NULL;
    fu_walk_cache **caches = NULL; /* per thread, the lent walk cache of each space a sample names */
    batch_buffers buffers = take_spare_buffers();
    batch_buffers extra[WALK_THREADS_MAX];
    walk_job jobs[WALK_THREADS_MAX];
    memset(extra, 0, sizeof extra);
    memset(jobs, 0, sizeof jobs);
    unsigned threads = 1;
    fu_growing *outcomes = &buffers.outcomes, *starts = &buffers.starts;
    frame_columns *frames_out = &buffers.frames;
    fu_growing *columns = frames_out->column; /* ips, modules, kinds, flags */
    PyObject *seq = PySequence_Fast(spaces_list, "spaces must be a sequence of AddressSpace");
    const fu_perf_data *pd = seq ? perf_data_of(module, perf_data) : NULL;
    if (!pd)
        goto done;
    size_t count = pd->sample_count;
    const fu_perf_sample *samples = pd->samples;
    if ((size_t)space_ids.len != count * sizeof(uint32_t)) {
        PyErr_Format(PyExc_ValueError, "space_ids has %zd bytes for %zu samples", space_ids.len, count);
        goto done;
    }
    threads = threads_arg > 0 ? (threads_arg < WALK_THREADS_MAX ? (unsigned)threads_arg : WALK_THREADS_MAX)
                              : walk_threads(count);
    if (threads > 1 && count < threads)
        threads = 1;
    Py_ssize_t space_count = PySequence_Fast_GET_SIZE(seq);
    spaces = PyMem_Calloc((size_t)space_count + 1, sizeof *spaces);
    caches = PyMem_Calloc(((size_t)space_count + 1) * threads, sizeof *caches);
    if (!spaces || !caches) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < space_count; i++) {
        const fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, PySequence_Fast_GET_ITEM(seq, i));
        if (!held)
            goto done;
        spaces[i] = &held->space;
    }
    /* the walk caches of the spaces that samples name, lent by the spaces for the batch: one per
     * thread, so that no two threads write one */
    const uint32_t *ids = space_ids.buf;
    for (size_t s = 0; s < count; s++) {
        uint32_t id;
        memcpy(&id, &ids[s], sizeof id);
        if (id == UINT32_MAX || (id < (uint32_t)space_count && caches[id]))
            continue;
        if (id >= (uint32_t)space_count) {
            PyErr_Format(PyExc_ValueError, "sample %zu: space id %u is out of range (%zd spaces)", s, id, space_count);
            goto done;
        }
        fu_space_with_cache *held = checked_space(PySequence_Fast_GET_ITEM(seq, id));
        for (unsigned t = 0; t < threads; t++)
            if (!(caches[(size_t)t * ((size_t)space_count + 1) + id] = fu_walk_cache_borrow(&held->slot, &held->space))) {
                PyErr_NoMemory();
                goto done;
            }
    }
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    /* contiguous shares, so that each thread's frames follow the previous thread's */
    for (unsigned t = 0; t < threads; t++) {
        walk_job *job = &jobs[t];
        job->samples = samples;
        job->ids = ids;
        job->first = count * t / threads;
        job->last = count * (t + 1) / threads;
        job->spaces = spaces;
        job->caches = caches + (size_t)t * ((size_t)space_count + 1);
        job->max_frames = (size_t)max_frames;
        job->buffers = t ? &extra[t] : &buffers;
        if (!reserve_job(job->buffers, job->last - job->first)) {
            PyErr_NoMemory();
            goto done;
        }
    }
    uint64_t walk_ns = 0;
    bool nomem = false, started_all = true;
    Py_BEGIN_ALLOW_THREADS
    /* the whole loop is timed: register extraction, walks and collecting the frames */
    uint64_t started = now_ns();
    unsigned running = 1;
    for (unsigned t = 1; t < threads; t++, running++)
        if (pthread_create(&jobs[t].thread, NULL, walk_thread, &jobs[t]) != 0)
            break;
    walk_samples(&jobs[0]);
    for (unsigned t = 1; t < running; t++)
        pthread_join(jobs[t].thread, NULL);
    for (unsigned t = running; t < threads; t++) /* a thread the system refused: walked here */
        walk_samples(&jobs[t]);
    started_all = running == threads;
    /* the shares' results after the first's, in order */
    uint32_t frame_count = jobs[0].frame_count;
    nomem = jobs[0].nomem;
    for (unsigned t = 1; t < threads && !nomem; t++) {
        batch_buffers *b = &extra[t];
        size_t n = jobs[t].last - jobs[t].first;
        if (!fu_growing_reserve(outcomes, n) || !fu_growing_reserve(starts, 4 * n) ||
            !reserve_frames(frames_out, (size_t)frame_count + jobs[t].frame_count) || jobs[t].nomem ||
            (uint64_t)frame_count + jobs[t].frame_count > UINT32_MAX) {
            nomem = true;
            break;
        }
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
            memcpy(columns[c].data + width[c] * frame_count, b->frames.column[c].data,
                   width[c] * jobs[t].frame_count);
            columns[c].len = width[c] * ((size_t)frame_count + jobs[t].frame_count);
        }
        frame_count += jobs[t].frame_count;
    }
    walk_ns = now_ns() - started;
    Py_END_ALLOW_THREADS
    (void)started_all;
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(y#y#y#y#y#y#K)", bytes_of(outcomes), (Py_ssize_t)outcomes->len,
                           bytes_of(starts), (Py_ssize_t)starts->len, bytes_of(&columns[0]),
                           (Py_ssize_t)columns[0].len, bytes_of(&columns[1]), (Py_ssize_t)columns[1].len,
                           bytes_of(&columns[2]), (Py_ssize_t)columns[2].len, bytes_of(&columns[3]),
                           (Py_ssize_t)columns[3].len, (unsigned long long)walk_ns);
done:
    keep_spare_buffers(&buffers);
    for (unsigned t = 1; t < WALK_THREADS_MAX; t++)
        free_batch_buffers(&extra[t]);
    for (unsigned t = 0; caches && spaces && t < threads; t++)
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            fu_walk_cache *cache = caches[(size_t)t * ((size_t)PySequence_Fast_GET_SIZE(seq) + 1) + i];
            if (cache)
                fu_walk_cache_return(&checked_space(PySequence_Fast_GET_ITEM(seq, i))->slot, cache);
        }
    PyMem_Free(caches);
    PyMem_Free(spaces);
    Py_XDECREF(seq);
    PyBuffer_Release(&space_ids);
    return result;
}

/* Append one frame at `ip` of `space` (FU_FRAME_FIRST, the module that holds it or UINT32_MAX). */
static void callchain_frame(frame_columns *f, uint32_t n, const fu_address_space *space, uint64_t ip)
{
    int64_t m = fu_address_space_find(space, ip);
    uint32_t module = m < 0 ? UINT32_MAX : (uint32_t)m;
    memcpy(f->column[0].data + 8 * (size_t)n, &ip, 8);
    memcpy(f->column[1].data + 4 * (size_t)n, &module, 4);
    f->column[2].data[n] = FU_FRAME_FIRST;
    f->column[3].data[n] = 0;
}

static PyObject *callchain_samples(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"perf_data", "space_ids", "spaces", "max_frames", NULL};
    PyObject *perf_data, *spaces_list;
    Py_buffer space_ids;
    Py_ssize_t max_frames = 127;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*O|n", kwlist, &perf_data, &space_ids, &spaces_list, &max_frames))
        return NULL;
    PyObject *result = NULL;
    const fu_address_space **spaces = NULL;
    batch_buffers buffers = take_spare_buffers();
    fu_growing *outcomes = &buffers.outcomes, *starts = &buffers.starts;
    frame_columns *frames_out = &buffers.frames;
    fu_growing *columns = frames_out->column;
    PyObject *seq = PySequence_Fast(spaces_list, "spaces must be a sequence of AddressSpace");
    const fu_perf_data *pd = seq ? perf_data_of(module, perf_data) : NULL;
    if (!pd)
        goto done;
    size_t count = pd->sample_count;
    const fu_perf_sample *samples = pd->samples;
    if ((size_t)space_ids.len != count * sizeof(uint32_t)) {
        PyErr_Format(PyExc_ValueError, "space_ids has %zd bytes for %zu samples", space_ids.len, count);
        goto done;
    }
    Py_ssize_t space_count = PySequence_Fast_GET_SIZE(seq);
    spaces = PyMem_Calloc((size_t)space_count + 1, sizeof *spaces);
    if (!spaces) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < space_count; i++) {
        const fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, PySequence_Fast_GET_ITEM(seq, i));
        if (!held)
            goto done;
        spaces[i] = &held->space;
    }
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    if (!fu_growing_reserve(outcomes, count) || !fu_growing_reserve(starts, 4 * (count + 1))) {
        PyErr_NoMemory();
        goto done;
    }
    const uint32_t *ids = space_ids.buf;
    uint32_t frame_count = 0;
    memcpy(starts->data, &frame_count, 4);
    /* one sample per iteration; its frames are bounded by max_frames and its callchain's entries */
    for (size_t s = 0; s < count; s++) {
        const fu_perf_sample *sample = &samples[s];
        uint32_t id;
        memcpy(&id, &ids[s], sizeof id);
        uint8_t outcome = FU_SAMPLE_SKIPPED;
        if (id != UINT32_MAX && id >= (uint32_t)space_count) {
            PyErr_Format(PyExc_ValueError, "sample %zu: space id %u is out of range (%zd spaces)", s, id, space_count);
            goto done;
        }
        if (id != UINT32_MAX) {
            if (!reserve_frames(frames_out, (size_t)frame_count + (size_t)max_frames)) {
                PyErr_NoMemory();
                goto done;
            }
            uint32_t taken = 0;
            if (sample->present & FU_PERF_SAMPLE_CALLCHAIN) {
                /* perf's thread__resolve_callchain_sample: a PERF_CONTEXT_* marker sets the context
                 * of the entries after it; user entries are the user frames (kernel ones are
                 * symbolize_samples' kernel frames), guest and hypervisor entries are not shown */
                bool user = true;
                for (uint64_t c = 0; c < sample->callchain_count && taken < (uint32_t)max_frames; c++) {
                    uint64_t ip = sample->callchain[c];
                    if (ip >= PERF_CONTEXT_MAX)
                        user = ip == PERF_CONTEXT_USER;
                    else if (user && ip < KERNEL_START)
                        callchain_frame(frames_out, frame_count + taken++, spaces[id], ip);
                }
                outcome = FU_SAMPLE_CALLCHAIN;
            } else {
                if (sample->ip < KERNEL_START)
                    callchain_frame(frames_out, frame_count + taken++, spaces[id], sample->ip);
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
    result = Py_BuildValue("(y#y#y#y#y#y#K)", bytes_of(outcomes), (Py_ssize_t)outcomes->len,
                           bytes_of(starts), (Py_ssize_t)starts->len, bytes_of(&columns[0]),
                           (Py_ssize_t)columns[0].len, bytes_of(&columns[1]), (Py_ssize_t)columns[1].len,
                           bytes_of(&columns[2]), (Py_ssize_t)columns[2].len, bytes_of(&columns[3]),
                           (Py_ssize_t)columns[3].len, 0ull);
done:
    keep_spare_buffers(&buffers);
    PyMem_Free(spaces);
    Py_XDECREF(seq);
    PyBuffer_Release(&space_ids);
    return result;
}

/* sample_walk_registers(perf_data, index) -> 17-tuple of int or None: the registers a walk of
 * sample `index` starts from, in DWARF numbering (for tests of the extraction). */
static PyObject *sample_walk_registers(PyObject *module, PyObject *args)
{
    PyObject *perf_data, *index_object;
    if (!PyArg_ParseTuple(args, "OO", &perf_data, &index_object))
        return NULL;
    size_t index;
    const fu_perf_data *pd = perf_data_of(module, perf_data);
    if (!pd || !py_core_index_arg(index_object, pd->sample_count, &index))
        return NULL;
    const fu_perf_sample *samples = pd->samples;
    register_plan plan;
    make_register_plan(0, &plan);
    fu_regs regs;
    sample_head_registers(&samples[index], &plan, &regs);
    sample_registers(&samples[index], &plan, &regs);
    PyObject *values = PyTuple_New(FU_WALK_REGISTERS);
    for (unsigned r = 0; values && r < FU_WALK_REGISTERS; r++) {
        PyObject *v = regs.valid >> r & 1 ? PyLong_FromUnsignedLongLong(regs.value[r]) : Py_NewRef(Py_None);
        if (!v)
            Py_CLEAR(values);
        else
            PyTuple_SET_ITEM(values, r, v);
    }
    return values;
}

static PyMethodDef perf_walk_methods[] = {
    {"sample_walk_registers", sample_walk_registers, METH_VARARGS,
     "sample_walk_registers(perf_data, index) -> the DWARF registers 0..16 a walk of the sample starts from"},
    {"unwind_samples", (PyCFunction)(void (*)(void))unwind_samples, METH_VARARGS | METH_KEYWORDS,
     "unwind_samples(perf_data, space_ids, spaces, max_frames=127) -> outcome and frame arrays, walk_ns"},
    {"callchain_samples", (PyCFunction)(void (*)(void))callchain_samples, METH_VARARGS | METH_KEYWORDS,
     "callchain_samples(perf_data, space_ids, spaces, max_frames=127) -> unwind_samples' columns from the "
     "samples' kernel callchains (or IPs), for recordings without user stacks"},
    {NULL},
};

int py_perf_walk_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, perf_walk_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "SAMPLE_NO_USER_REGISTERS", FU_SAMPLE_NO_USER_REGISTERS) < 0 ||
        PyModule_AddIntConstant(module, "SAMPLE_SKIPPED", FU_SAMPLE_SKIPPED) < 0 ||
        PyModule_AddIntConstant(module, "SAMPLE_CALLCHAIN", FU_SAMPLE_CALLCHAIN) < 0 ||
        PyModule_AddIntConstant(module, "SAMPLE_IP_ONLY", FU_SAMPLE_IP_ONLY) < 0)
        return -1;
    return 0;
}
