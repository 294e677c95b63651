/* perf_walk: unwind the user stacks of a recording's samples in one call, without Python per
 * sample: registers and stack bytes come from the decoded samples, modules from the address space
 * each sample was taken in (the Python side: py/py_perf_walk.c, unwind_samples and
 * callchain_samples).
 *
 * fu_perf_walk_samples walks `threads` contiguous shares of the samples, each with walk caches of
 * its own, the results joined in order: an outcome per sample (fu_walk_outcome, or the FU_SAMPLE_*
 * codes below), where each sample's frames start (u32[n + 1]) and four frame columns (u64 ips,
 * u32 modules, u8 kinds, u8 flags).
 *
 * fu_perf_callchain_samples: the same columns for a recording without user stacks (perf record -g,
 * --call-graph fp or lbr, or no call graph): each sample's user frames are the user entries of its
 * kernel callchain (FU_SAMPLE_CALLCHAIN), or, without a callchain, its sampled IP alone
 * (FU_SAMPLE_IP_ONLY); nothing is walked. Frames are of kind FU_FRAME_FIRST: perf prints callchain
 * entries as they are, not at return address - 1.
 */
#ifndef FASTUNWIND_PERF_WALK_H
#define FASTUNWIND_PERF_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "buffer.h"
#include "perf_data.h"
#include "walk.h"

/* The frames perf keeps per stack: kernel.perf_event_max_stack's default. */
#define FU_PERF_MAX_STACK 127

/* Outcome code for a sample without user registers (kernel-only sample, or regs_abi NONE). */
#define FU_SAMPLE_NO_USER_REGISTERS 0xfe
#define FU_SAMPLE_SKIPPED 0xff
/* Outcome codes of callchain_samples: frames from the kernel's callchain; the sampled IP alone. */
#define FU_SAMPLE_CALLCHAIN 0xfd
#define FU_SAMPLE_IP_ONLY 0xfc

/* The name of sample outcome `code` (a walk's outcome, walk.h, or one of FU_SAMPLE_*), NULL for a
 * code that is neither. */
const char *fu_sample_outcome_name(unsigned code);
/* Whether a sample with this outcome has its whole stack: the walk reached the end, or the frames
 * are the kernel's callchain or the IP alone (nothing was walked that could stop early). */
bool fu_sample_outcome_complete(unsigned code);

/* Frames per sample that unwind_samples reserves before its loop (virtual memory: pages are
 * touched only as frames land), so that most recordings never grow a column while walks are timed;
 * the reservation stops at FU_PERF_FRAMES_RESERVED_MAX frames, beyond which columns grow by doubling. */
#define FU_PERF_FRAMES_RESERVED_PER_SAMPLE 32
#define FU_PERF_FRAMES_RESERVED_MAX ((size_t)1 << 24)

/* The frames of a batch: four columns (u64 ips, u32 modules, u8 kinds, u8 flags) that the walks
 * write in place, so their `len` stays 0 until the loop ends. */
typedef struct fu_perf_frame_columns {
    fu_buffer column[4];
    size_t room; /* frames every column has room for */
} fu_perf_frame_columns;

/* What a batch writes: an outcome per sample, where each sample's frames start, the frames. */
typedef struct fu_perf_walk_buffers {
    fu_buffer outcomes, starts;
    fu_perf_frame_columns frames;
} fu_perf_walk_buffers;

void fu_perf_walk_buffers_free(fu_perf_walk_buffers *b);
/* Room for `frames` frames in every column; false if out of memory. */
bool fu_perf_frame_columns_grow(fu_perf_frame_columns *f, size_t frames);
static inline bool fu_perf_reserve_frames(fu_perf_frame_columns *f, size_t frames)
{
    return frames <= f->room || fu_perf_frame_columns_grow(f, frames);
}

/* Threads that walk a batch of `count` samples: FASTUNWIND_THREADS if set (1: the caller's thread
 * alone), else the CPUs this process may run on, at most FU_PERF_WALK_THREADS_MAX; and each thread
 * at least FU_PERF_WALK_SAMPLES_PER_THREAD samples (starting a thread and filling its walk caches
 * cost about as much as walking a hundred samples). Not thread-safe on its first call. */
#define FU_PERF_WALK_THREADS_MAX FU_WALK_KEPT_CACHES
#define FU_PERF_WALK_SAMPLES_PER_THREAD 256
unsigned fu_perf_walk_threads(size_t count);

/* A batch to walk: samples[i] in the space spaces[space_ids[i]] (UINT32_MAX: skipped; the others
 * checked < the space count by the caller), thread t using caches[t * cache_stride + space id]. */
typedef struct fu_perf_walk_request {
    const fu_perf_sample *samples;
    size_t count;
    const uint32_t *space_ids; /* may be unaligned */
    const fu_address_space *const *spaces;
    fu_walk_cache **caches;
    size_t cache_stride;
    unsigned threads;          /* 1..FU_PERF_WALK_THREADS_MAX */
    size_t max_frames;         /* 1..FU_WALK_MAX_FRAMES */
} fu_perf_walk_request;

/* Walks the batch into `out` (emptied first), using extra[1..threads-1] as the other threads'
 * buffers; *walk_ns is the time of the walks and of joining their results. False if out of memory. */
bool fu_perf_walk_samples(const fu_perf_walk_request *request, fu_perf_walk_buffers *out,
                          fu_perf_walk_buffers extra[FU_PERF_WALK_THREADS_MAX], uint64_t *walk_ns);

/* The callchain columns of the batch (request->caches and threads unused) into `out` (emptied
 * first). Fails with FU_ERR_INVALID for a space id out of range ("sample N: space id N is out of
 * range (N spaces)", with space_count) or FU_ERR_NOMEM. */
fu_status fu_perf_callchain_samples(const fu_perf_walk_request *request, size_t space_count, fu_perf_walk_buffers *out,
                                    fu_error *err);

/* Per sample outcome code (u8, by_outcome[256]), the samples of which at least one frame has a flag of
 * `mask` (FU_FRAME_*): what rests on rows derived from the code (FU_FRAME_DERIVED), by how those
 * walks ended. `starts` has count + 1 entries (unwind_samples' columns, may be unaligned), each at
 * most `flag_count`; false if they are not. */
bool fu_perf_flagged_samples(const uint8_t *outcomes, const uint8_t *starts, size_t count, const uint8_t *flags,
                             size_t flag_count, uint8_t mask, uint64_t by_outcome[256]);

#endif
