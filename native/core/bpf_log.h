/* bpf_log: the samples of the in-kernel unwinder as user space keeps them. The BPF program sends
 * one record per sample, in batches, through its ring buffer (fu_bpf_sample: time, thread, CPU, the
 * thread's command name and the stack); fu_bpf_log_add_batch checks each record and keeps it as one entry of the
 * sample log (time, tid, CPU, command name id, stack id) over the distinct stacks and command
 * names, each kept once. From the log: perf script's text (fu_bpf_log_perf_script) and the profile
 * files' samples (fu_bpf_log_profile), each sample with its own thread and time.
 *
 * The log holds at most FU_BPF_MAX_LOGGED samples; past it a sample still counts for its stack
 * (fu_bpf_log.counts) and in fu_bpf_log.unlogged, not in the log. */
#ifndef FASTUNWIND_BPF_LOG_H
#define FASTUNWIND_BPF_LOG_H

#include <stdint.h>

#include "bpf_layout.h"
#include "buffer.h"
#include "intern.h"
#include "profile.h"

#define FU_BPF_MAX_LOGGED (1u << 24) /* samples in the log: 384 MiB of entries */

/* One sample of the log. */
typedef struct fu_bpf_logged {
    uint64_t time; /* CLOCK_MONOTONIC ns */
    uint32_t tid;
    uint32_t cpu;
    uint32_t comm;  /* command name id */
    uint32_t stack; /* stack id */
} fu_bpf_logged;

typedef struct fu_bpf_log {
    fu_buffer stacks;  /* fu_bpf_stack by id (user frames past user_count zero) */
    fu_buffer counts;  /* uint64_t samples by stack id */
    fu_buffer comms;   /* char[16] by id */
    fu_buffer samples; /* fu_bpf_logged */
    fu_intern_set stack_index, comm_index;
    uint64_t unlogged;
} fu_bpf_log;

/* Keeps each record of a batch of `size` bytes (a ring-buffer record or what is left in a CPU's
 * batch: fu_bpf_batch.data), records one after another, each FU_BPF_SAMPLE_HEADER bytes and 8 a
 * user frame: FU_ERR_INVALID at the first that is not a whole fu_bpf_sample (shorter than its
 * header, more than FU_BPF_MAX_FRAMES user frames or fewer bytes than they take, an outcome past
 * FU_BPF_OUTCOME_COUNT), the records before it kept; FU_ERR_NOMEM. */
fu_status fu_bpf_log_add_batch(fu_bpf_log *log, const void *batch, size_t size, fu_error *err);
/* Orders the logged samples by time (then CPU). */
void fu_bpf_log_sort(fu_bpf_log *log);
uint32_t fu_bpf_log_stack_count(const fu_bpf_log *log);
const fu_bpf_stack *fu_bpf_log_stack(const fu_bpf_log *log, uint32_t id);
uint64_t fu_bpf_log_stack_samples(const fu_bpf_log *log, uint32_t id);
size_t fu_bpf_log_sample_count(const fu_bpf_log *log);
const fu_bpf_logged *fu_bpf_log_samples(const fu_bpf_log *log);
/* The command name `id` (NUL-free, at most 16 bytes). */
fu_text fu_bpf_log_comm(const fu_bpf_log *log, uint32_t id);
void fu_bpf_log_free(fu_bpf_log *log);

/* perf script's text of every logged sample (perf_script.h's layout): "comm tid sec.usec: event: "
 * then the stack's lines, `blocks[stack id]` (rendered by the caller: "\t%16x sym+0xoff (dso)\n"
 * per frame), then a blank line. FU_ERR_INVALID if a stack id has no block or the sink failed. */
fu_status fu_bpf_log_perf_script(const fu_bpf_log *log, const fu_text *blocks, uint32_t block_count, fu_text event,
                                 fu_sink_fn sink, void *context, fu_error *err);

/* What fu_bpf_log_profile needs of a stack: its frames named, root first, and its outcome ("" for
 * a complete stack). */
typedef struct fu_bpf_named_stack {
    const fu_text *frames;
    size_t frame_count;
    fu_text outcome;
} fu_bpf_named_stack;

/* Adds every logged sample to `p` (fu_profile_add_stack): its process, thread, thread's command
 * name and time, the stack named by `named[stack id]`. FU_ERR_INVALID if a stack id has no name. */
fu_status fu_bpf_log_profile(const fu_bpf_log *log, const fu_bpf_named_stack *named, uint32_t named_count,
                             double interval_ms, fu_profile *p, fu_error *err);

#endif
