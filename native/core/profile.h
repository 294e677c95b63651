/* profile: a recording's samples, every one kept, per thread and in time order, and the files made
 * of them. Built window by window from perf-script's symbolized windows (perf_script.h) without
 * Python per sample or per frame; the Python side is py/py_profile.c. Three files:
 *
 *  - speedscope's (https://www.speedscope.app/file-format-schema.json, speedscope's
 *    src/lib/file-format-spec.ts): a table of frames shared by every profile, one "sampled" profile
 *    per thread holding every sample of that thread, each a stack of frame indices from the root to
 *    the leaf, with a weight of 1;
 *  - the Firefox profiler's processed profile (its src/types/profile.js, preprocessedProfileVersion
 *    49 with per-thread tables and stringArray, as samply's fxprof-processed-profile writes it): a
 *    thread per tid with its frameTable, funcTable, stackTable (prefix, frame), samples (stack, time
 *    in ms) and stringArray holding just what that thread uses, and a marker per sample whose stack
 *    did not reach its end (named after its outcome, "[truncated]", the sample's stack as its cause);
 *  - the data of the HTML flame graph (perf/flamegraph.html): the stack tree, the samples of each
 *    thread as counts per node, its smallest nodes merged so that at most a given number are kept.
 *
 * Frames are report.h's functions (a symbol of a DSO, or a DSO-relative address), so a function is
 * one frame whatever the address in it; a stack that did not reach its end is rooted at a frame
 * "[outcome]" ("[truncated]"), as the folded stacks are, so that it is never drawn as a complete
 * one. Stacks are interned as a tree (frame, parent): a sample costs 4 bytes of its thread's list
 * (memory grows with the samples, as the file does).
 */
#ifndef FASTUNWIND_PROFILE_H
#define FASTUNWIND_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "error.h"
#include "intern.h"
#include "perf_script.h"
#include "report.h"

/* Threads and distinct stacks a profile holds at most (ids are u32; a named error beyond). */
#define FU_PROFILE_MAX_THREADS (1u << 20)
#define FU_PROFILE_MAX_STACKS (1u << 28)

typedef struct fu_profile_thread {
    int32_t pid, tid;
    uint32_t comm;      /* the report's string id of its first comm, FU_INTERN_NONE for none */
    fu_buffer stacks;   /* u32 stack id per sample */
    fu_buffer times;    /* u64 ns per sample (perf's clock; 0 in a recording without times) */
} fu_profile_thread;

typedef struct fu_profile {
    fu_report names;    /* its functions and strings only */
    fu_buffer stacks;   /* {frame (function id), parent (stack id or FU_INTERN_NONE)} */
    fu_intern_set stack_index;
    fu_buffer threads;  /* fu_profile_thread */
    fu_intern_set thread_index;
    uint64_t samples;
    double interval_ms; /* the sampling interval of the first sample's event, 1 when unknown */
    fu_buffer outcome_functions; /* u32 function ids that root incomplete stacks ("[truncated]") */
    fu_buffer frame_functions;   /* per window: scratch */
} fu_profile;

void fu_profile_init(fu_profile *p);
/* Adds every sample of a symbolized window. FU_ERR_NOMEM, or FU_ERR_INVALID past a bound. */
fu_status fu_profile_add(fu_profile *p, const fu_unwound *u, fu_error *err);

/* A stack sampled `count` times, named already (a profile counted by stack, as the BPF unwinder's):
 * its frames are function names from the root to the leaf; `outcome` (empty for a complete stack)
 * roots it as "[outcome]"; every sample has the time `time`. */
#define FU_PROFILE_MAX_STACK_FRAMES (1u << 16)
#define FU_PROFILE_MAX_STACK_SAMPLES (1u << 30)
typedef struct fu_profile_stack {
    int32_t pid, tid;
    fu_text comm, outcome;
    const fu_text *frames;
    size_t frame_count;
    uint64_t count, time;
    double interval_ms; /* the sampling interval, taken from the profile's first samples (<= 0: 1 ms) */
} fu_profile_stack;
/* Adds the stack's samples: FU_ERR_NOMEM, or FU_ERR_INVALID past a bound. */
fu_status fu_profile_add_stack(fu_profile *p, const fu_profile_stack *s, fu_error *err);
/* Writes the speedscope file, named `name` (UTF-8), in chunks to `sink`: FU_ERR_NOMEM, or
 * FU_ERR_INVALID when the sink failed. */
fu_status fu_profile_speedscope(const fu_profile *p, fu_text name, fu_sink_fn sink, void *context, fu_error *err);
/* Writes the Firefox profiler's processed profile, its product named `name`, as fu_profile_speedscope. */
fu_status fu_profile_gecko(const fu_profile *p, fu_text name, fu_sink_fn sink, void *context, fu_error *err);

/* The flame graph's data: a JSON object
 *   {"samples": N, "stacks": distinct stacks, "names": [function name], "kinds": [0 other, 1 user,
 *    2 kernel], "module": [index into modules, -1 none], "modules": [path],
 *    "function": [per node], "parent": [per node, -1 for a root],
 *    "threads": [{"name": "comm pid/tid", "samples": n, "self": [node, count, node, count, ...]}]}
 * A node is a stack (a function called from its parent); a node's parent precedes it. The nodes
 * kept are the at most max_nodes with the most samples (with their descendants'; so what is kept is
 * a tree); the samples of a subtree not kept count for a node of a function "[merged]" under its
 * nearest kept ancestor (a root "[merged]" if none). Strings are escaped for embedding in HTML
 * (no "<", ">" or "&"). FU_ERR_NOMEM, or FU_ERR_INVALID when the sink failed. */
#define FU_PROFILE_FLAME_MAX_NODES (1u << 24)
fu_status fu_profile_flame(const fu_profile *p, uint32_t max_nodes, fu_sink_fn sink, void *context, fu_error *err);
void fu_profile_free(fu_profile *p);

#endif
