/* bpf_session: the user-space side of the in-kernel unwinder (unwind.bpf.c): loads the program
 * (libbpf, the skeleton bpftool generates), attaches it to cpu-clock perf events (one per CPU, or
 * one per thread in scope inherited by its children: the events are the scope),
 * fills its maps (bpf_layout.h) with compact tables and process mappings, and drains the stacks it
 * counted. Closing detaches everything; so does the process's exit (every object is an fd). */
#ifndef FASTUNWIND_BPF_SESSION_H
#define FASTUNWIND_BPF_SESSION_H

#include "bpf_layout.h"
#include "bpf_log.h"
#include "error.h"

#define FU_BPF_KERNEL_MAX_FRAMES 127 /* a kstacks entry (PERF_MAX_STACK_DEPTH) */

typedef struct fu_bpf_session fu_bpf_session;

/* Loads the program and its maps (the slots map of `slot_capacity` 64-byte slots, which grows while
 * recording by segments of FU_BPF_SEGMENT_SLOTS up to `slot_limit` slots where a module would
 * otherwise evict another: the bound on the tables' map memory); with `timing` the program times its
 * walks and samples (the *_NS counters, two clock reads more per sample). FU_ERR_BPF_MAP_MEMORY: the
 * kernel refused the slots map's memory (a smaller one may be allowed); FU_ERR_BPF: it refused
 * something else (its errno in the message). */
fu_status fu_bpf_session_open(fu_bpf_session **out, uint32_t slot_capacity, uint32_t slot_limit, bool timing,
                              fu_error *err);
/* Samples every process: a cpu-clock event at `frequency` Hz on every online CPU. */
fu_status fu_bpf_session_attach_cpus(fu_bpf_session *s, uint64_t frequency, fu_error *err);
/* Samples thread `tid` and the threads and processes it starts from now on: a cpu-clock event at
 * `frequency` Hz that follows it on every CPU, inherited by its children. */
fu_status fu_bpf_session_attach_thread(fu_bpf_session *s, uint64_t frequency, uint32_t tid, fu_error *err);
/* Loads a compact table, growing the slots if they are short and the limit allows, else evicting
 * the oldest modules; *id and *generation name it in a mapping. */
fu_status fu_bpf_session_load_module(fu_bpf_session *s, const fu_compact_table *t, uint32_t *id, uint32_t *generation,
                                     fu_error *err);
/* Whether module `id` of `generation` is still loaded (not evicted). */
bool fu_bpf_session_module_loaded(const fu_bpf_session *s, uint32_t id, uint32_t generation);
/* Sets a process's executable mappings (sorted by start, at most FU_BPF_MAX_MAPPINGS; `left_out`: how
 * many more it has, which the walk then does not ask user space for) and the identity of the address
 * space they were read from; *set false (FU_OK) where the unwinder holds as many
 * processes as it has room for (FU_BPF_MAX_PROCESSES, one kept free for a reload): the process is
 * left unloaded until one is forgotten. */
fu_status fu_bpf_session_set_process(fu_bpf_session *s, uint32_t pid, const fu_bpf_space_identity *identity,
                                     const fu_bpf_mapping *mappings, uint32_t count, uint32_t left_out, bool *set,
                                     fu_error *err);
void fu_bpf_session_forget_process(fu_bpf_session *s, uint32_t pid);
/* Takes (and clears) up to `cap` pids sampled without mappings; returns how many. */
size_t fu_bpf_session_take_missing(fu_bpf_session *s, uint32_t *pids, size_t cap);

/* A stack seen for the first time and its kernel frames (the leaf first). */
typedef bool (*fu_bpf_stack_fn)(void *context, const fu_bpf_stack *stack, const uint64_t *kernel,
                                uint32_t kernel_count);
/* Waits up to `timeout_ms` for the program to wake user space (a sample of a process to load),
 * taking the samples sent meanwhile into the log; a signal ends the wait early. */
fu_status fu_bpf_session_wait(fu_bpf_session *s, int timeout_ms, fu_error *err);
/* Takes the samples the program sent into the log, then hands each stack the log had not handed
 * yet to `fn`, in id order (false from fn stops: FU_ERR_INVALID; a record the log refuses:
 * its error). */
fu_status fu_bpf_session_drain(fu_bpf_session *s, fu_bpf_stack_fn fn, void *context, fu_error *err);
/* Ends the sampling: closes the events (no run of the program after it), then takes the samples in
 * the ring buffer and those left in each CPU's batch into the log, every sample once, and orders
 * the log by time (the batches arrive CPU by CPU). Once only: the session attaches no event after
 * it. */
fu_status fu_bpf_session_stop(fu_bpf_session *s, fu_error *err);
/* The samples taken so far (bpf_log.h). */
const fu_bpf_log *fu_bpf_session_log(const fu_bpf_session *s);
/* The counters summed over the CPUs (FU_BPF_COUNTER_COUNT of them). */
fu_status fu_bpf_session_counters(fu_bpf_session *s, uint64_t *out, fu_error *err);
/* The program's run time and runs (kernel.bpf_stats_enabled must be 1 for them to count). */
fu_status fu_bpf_session_run_time(fu_bpf_session *s, uint64_t *run_ns, uint64_t *runs, fu_error *err);
/* Bytes of the maps holding tables (rules, slots, modules). */
uint64_t fu_bpf_session_table_bytes(const fu_bpf_session *s);
uint32_t fu_bpf_session_slots_used(const fu_bpf_session *s);
/* The slots the tables have now: the slots map's and its segments'. */
uint32_t fu_bpf_session_slot_capacity(const fu_bpf_session *s);
/* The most slots the loaded modules held at once since the session opened. */
uint32_t fu_bpf_session_slots_peak(const fu_bpf_session *s);
/* Modules evicted while a loaded process mapped them, or while loaded for one being loaded: the
 * tables in use did not fit the slots map. */
uint32_t fu_bpf_session_evicted_in_use(const fu_bpf_session *s);
/* Detaches and releases the program, its maps and events; the log stays (drain hands nothing new;
 * the samples still in the batches are not taken: fu_bpf_session_stop takes them). */
void fu_bpf_session_detach(fu_bpf_session *s);
void fu_bpf_session_close(fu_bpf_session *s);

#endif
