/* bpf_layout: the maps the in-kernel unwinder (native/bpf/unwind.bpf.c) reads, one definition for
 * the BPF program and the user-space side that fills them (native/bpf/bpf_session.c), and the
 * pure layout work of that side (bpf_layout.c: a compact table's rows and block index as map slots,
 * the shared rule dictionary, the ring of slots that evicts the oldest modules first).
 *
 * This header is compiled by clang -target bpf as well: it uses only fixed-width types, which the
 * BPF program defines from vmlinux.h's before including it, and no other header there.
 *
 *   rules     ARRAY  rule id -> fu_bpf_rule: the dictionary shared by every module (compact_table.h's
 *                    fu_compact_rule, byte for byte; equal rules of different modules share an id)
 *   slots     ARRAY  slot -> fu_bpf_slot: each loaded module holds index_slots + row_count consecutive
 *                    slots: its block index (the row in force at the start of each
 *                    1 << FU_BPF_INDEX_SHIFT bytes of the covered range, module-relative; two u32
 *                    entries a slot: entry 2k in slot k's start, 2k + 1 in its rule), then its rows
 *                    (slot.start = start offset from base_svma, slot.rule = rule id)
 *   modules   ARRAY  module id -> fu_bpf_module: where a module's slots are, and its generation
 *                    (odd while user space rewrites the slots: a walk that sees it, or sees it change
 *                    while it reads a row, ends as FU_BPF_NO_TABLE rather than trust the row)
 *   processes ARRAY  process slot -> fu_bpf_process: a process's executable mappings, sorted by start
 *   pids      HASH   tgid -> process slot
 *   missing   HASH   tgid -> samples: processes sampled with no process slot (and not a fork child of
 *                    a loaded one), or at a PC outside their mappings (mapped since): user space
 *                    (re)loads them
 *   samples   RINGBUF fu_bpf_sample per sample (its stack cut to its user frames)
 *   kstacks   STACK_TRACE: kernel stacks (bpf_get_stackid), by fu_bpf_stack.kernel_stack
 *   counters  PERCPU_ARRAY FU_BPF_COUNTER_* -> count
 */
#ifndef FASTUNWIND_BPF_LAYOUT_H
#define FASTUNWIND_BPF_LAYOUT_H

#ifndef __bpf__
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

/* User frames kept per stack. */
#define FU_BPF_MAX_FRAMES 60
/* Executable mappings of one process the walker can see; more are left out (counted by user space). */
#define FU_BPF_MAX_MAPPINGS 256
#define FU_BPF_MAPPING_SEARCH_STEPS 9 /* ceil(log2(FU_BPF_MAX_MAPPINGS)) + 1 */
/* The block index's granularity: 256 bytes of code, a few rows (one or two cache lines of slots)
 * between two entries, against the compact table's 4 KiB pages (dozens of rows in libLLVM: a
 * binary search over several lines the profiled program evicts between samples), for 4 bytes of
 * map per 256 bytes of code. */
#define FU_BPF_INDEX_SHIFT 8
/* A block holds at most 257 row starts: 9 halvings find one. */
#define FU_BPF_ROW_SEARCH_STEPS (FU_BPF_INDEX_SHIFT + 2)
#define FU_BPF_MAX_MODULES 4096
#define FU_BPF_MAX_PROCESSES 1024
#define FU_BPF_MAX_RULES 65536
/* Slots (8 bytes each) in the slots map by default: 32 MiB, user space chooses at load time. */
#define FU_BPF_DEFAULT_SLOTS (1u << 22)
#define FU_BPF_KERNEL_STACKS 16384

/* compact_table.h's fu_compact_cfa_kind values (checked in bpf_layout.c). */
#define FU_BPF_CFA_NO_INFO 0
#define FU_BPF_CFA_SLOW 1
#define FU_BPF_CFA_RSP 2
#define FU_BPF_CFA_RBP 3
#define FU_BPF_CFA_REGISTER 4
#define FU_BPF_CFA_PLT 5
#define FU_BPF_CFA_DEREF 6
#define FU_BPF_CFA_SIGNAL_CONTEXT 7
#define FU_BPF_KEEP 0
#define FU_BPF_ORIGIN_DECLARED 0 /* FU_COMPACT_ORIGIN_DECLARED: the module's own CFI */
#define FU_BPF_UNDEFINED (-128)
#define FU_BPF_RBP_SLOT_FIRST 1 /* a save slot n > 0 is at rbp + 8 * (FU_BPF_RBP_SLOT_FIRST - n) */

/* How a walk in the kernel ended. Only FU_BPF_END is a complete stack. */
enum fu_bpf_outcome {
    FU_BPF_END = 0,          /* the outermost frame: its rule has no return address */
    FU_BPF_FRAME_LIMIT,      /* FU_BPF_MAX_FRAMES user frames and more */
    FU_BPF_NO_UNWIND_INFO,   /* no row covers the PC and the frame pointer does not lead on */
    FU_BPF_UNREADABLE,       /* bpf_probe_read_user failed (not paged in, or not mapped) */
    FU_BPF_SLOW_ROW,         /* the row needs the DWARF interpreter (FU_COMPACT_CFA_SLOW) */
    FU_BPF_NO_PROCESS,       /* the process's mappings are not loaded yet (or not since its exec) */
    FU_BPF_NO_TABLE,         /* the module's table is not loaded, evicted, or being rewritten */
    FU_BPF_REGISTER_UNKNOWN, /* the rule needs a register the walk does not know past the first frame */
    FU_BPF_SP_BACKWARDS,     /* the caller's stack pointer is not above the callee's */
    FU_BPF_KERNEL_ONLY,      /* a kernel thread: no user stack */
    FU_BPF_OUTCOME_COUNT
};

enum fu_bpf_counter {
    FU_BPF_COUNTER_SAMPLES = 0,
    FU_BPF_COUNTER_FRAMES,          /* user frames walked */
    FU_BPF_COUNTER_FP_FRAMES,       /* of which by the frame pointer (no row covered the PC) */
    FU_BPF_COUNTER_SAMPLES_DROPPED, /* the samples ring buffer was full */
    FU_BPF_COUNTER_WALK_NS,         /* ns spent in the user-stack walks (bpf_ktime_get_ns around them) */
    FU_BPF_COUNTER_WALKED_SAMPLES,  /* samples whose user stack was walked */
    FU_BPF_COUNTER_STACK_READS,     /* bpf_probe_read_user calls of the walks (window refills) */
    FU_BPF_COUNTER_ROW_LOOKUPS,     /* frames whose rule was not in the per-CPU rule cache */
    FU_BPF_COUNTER_DERIVED_FRAMES,  /* frames stepped through a rule derived from the code (--synth) */
    /* over the walked samples, for the least-squares fit of their cost on their frames (n: the
     * sample's user frames; t: its walk's ns; T: the program's ns from entry to after the ring
     * buffer output): sum n^2, sum n*t, sum T, sum n*T (sum n and sum t are FRAMES and WALK_NS) */
    FU_BPF_COUNTER_FRAMES_SQUARED,
    FU_BPF_COUNTER_WALK_NS_BY_FRAMES,
    FU_BPF_COUNTER_SAMPLE_NS,
    FU_BPF_COUNTER_SAMPLE_NS_BY_FRAMES,
    FU_BPF_COUNTER_OUTCOME,         /* + outcome: samples by outcome */
    FU_BPF_COUNTER_COUNT = FU_BPF_COUNTER_OUTCOME + FU_BPF_OUTCOME_COUNT
};

typedef struct fu_bpf_rule {
    uint8_t cfa_kind;
    uint8_t cfa_register;
    int8_t ra_offset_by_8;
    uint8_t origin; /* where the row came from (compact_table.h): the walk does not look */
    int32_t cfa_offset;
    int8_t saved_offset_by_8[6]; /* rbx, rbp, r12, r13, r14, r15 */
    uint16_t kept_caller_saved;  /* caller-saved registers whose value the caller keeps (bit per register) */
} fu_bpf_rule;

typedef struct fu_bpf_slot {
    uint32_t start;
    uint32_t rule;
} fu_bpf_slot;

typedef struct fu_bpf_module {
    uint64_t base_svma, end_svma;
    uint32_t first_slot;  /* the block index; the rows follow it */
    uint32_t index_slots; /* the block index's slots: ((end_svma - base_svma - 1) >> FU_BPF_INDEX_SHIFT) + 2 entries */
    uint32_t row_count;
    uint32_t generation; /* odd: being written */
} fu_bpf_module;

#define FU_BPF_NO_MODULE 0xffffffffu

typedef struct fu_bpf_mapping {
    uint64_t start, end;
    uint64_t bias;       /* avma - svma */
    uint32_t module;     /* module id, FU_BPF_NO_MODULE: no table (frame pointers only) */
    uint32_t generation; /* the module's generation when the mapping was written */
} fu_bpf_mapping;

typedef struct fu_bpf_process {
    uint32_t count;
    uint32_t reserved;
    fu_bpf_mapping mappings[FU_BPF_MAX_MAPPINGS];
} fu_bpf_process;

typedef struct fu_bpf_stack {
    uint32_t pid;
    int32_t kernel_stack; /* kstacks id, < 0: none */
    uint8_t outcome;      /* fu_bpf_outcome */
    uint8_t user_count;
    uint16_t reserved;
    uint32_t space_pid;   /* the process whose mappings the walk used: pid, or the parent a child forked
                           * from (and has not exec'd since) before its own were loaded */
    uint64_t interrupted; /* bit i: user[i] (i > 0) is the PC a signal interrupted, not a return address */
    uint64_t user[FU_BPF_MAX_FRAMES]; /* the leaf's IP, then return addresses */
} fu_bpf_stack;

/* One sample as the program sends it through the `samples` ring buffer: FU_BPF_SAMPLE_HEADER bytes,
 * then stack.user_count user frames, where the record ends (bpf_log.h keeps them). */
typedef struct fu_bpf_sample {
    uint64_t time; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
    uint32_t tid;
    uint32_t cpu;
    char comm[16]; /* the thread's command name, NUL-padded */
    fu_bpf_stack stack;
} fu_bpf_sample;

#define FU_BPF_SAMPLE_HEADER __builtin_offsetof(fu_bpf_sample, stack.user)
/* The ring buffer's bytes: at most 256 bytes a sample on clang, drained every 20 ms. */
#define FU_BPF_SAMPLE_RING_BYTES (8u << 20)

#ifndef __bpf__
#include "compact_table.h"

/* The rule dictionary being built in user space: ids of rules already in the map. */
typedef struct fu_bpf_rules {
    fu_bpf_rule *rules; /* by id */
    uint32_t count;
} fu_bpf_rules;

/* The id of `rule` in `d` (added if new, at most FU_BPF_MAX_RULES), or FU_ERR_INVALID when full.
 * A linear scan: the dictionary of a whole system holds a few thousand rules, asked once a row
 * of a new module is converted through a per-module memo. */
fu_status fu_bpf_rule_id(fu_bpf_rules *d, const fu_compact_rule *rule, uint32_t *id, fu_error *err);
void fu_bpf_rules_free(fu_bpf_rules *d);

/* The slots of one module: index_slots + row_count of them (0 if the table is empty). */
uint32_t fu_bpf_module_slot_count(const fu_compact_table *t);
/* The row in force at module-relative `offset` (< end_svma - base_svma) of a module laid out in
 * `slots` (its first_slot at slots[0]): the lookup unwind.bpf.c makes, for the fuzz driver to
 * compare with fu_compact_find. */
uint32_t fu_bpf_find_row(const fu_bpf_slot *slots, const fu_bpf_module *module, uint32_t offset);
/* Fills out[0 .. fu_bpf_module_slot_count) and *module (first_slot, generation left to the caller),
 * adding the table's rules to `d`. */
fu_status fu_bpf_layout_module(const fu_compact_table *t, fu_bpf_rules *d, fu_bpf_slot *out, fu_bpf_module *module,
                               fu_error *err);

/* The ring of slots: modules take consecutive slots from `head`, wrapping to 0 when the end is
 * too near; the modules whose slots the new one overlaps (the oldest ones) are evicted. */
typedef struct fu_bpf_ring {
    uint32_t capacity; /* slots */
    uint32_t head;
    uint32_t module_count;       /* ids in use are < module_count (at most FU_BPF_MAX_MODULES) */
    fu_bpf_module *modules;      /* user space's copy, by id; row_count 0: free */
    uint64_t *loaded_at;         /* by id: the order modules were loaded in */
    uint64_t clock;
} fu_bpf_ring;

/* Places `count` slots (FU_ERR_INVALID when count > capacity): *first receives the first slot and
 * evicted[0 .. *evicted_count) the ids of the modules to evict (their entries are cleared here;
 * the caller marks them in the map before writing the slots). *id receives a free module id
 * (an evicted one's if none is free; FU_ERR_INVALID when all FU_BPF_MAX_MODULES are in use). */
fu_status fu_bpf_ring_place(fu_bpf_ring *r, uint32_t count, uint32_t *first, uint32_t *id, uint32_t *evicted,
                            uint32_t *evicted_count, fu_error *err);
void fu_bpf_ring_free(fu_bpf_ring *r);
#endif

#endif
