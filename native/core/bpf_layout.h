/* bpf_layout: the maps the in-kernel unwinder (native/bpf/unwind.bpf.c) reads, one definition for
 * the BPF program and the user-space side that fills them (native/bpf/bpf_session.c), and the
 * pure layout work of that side (bpf_layout.c: a compact table's rows as map slots of one block each, rules packed,
 * the shared rule dictionary, the ring of slots that evicts the oldest modules first).
 *
 * This header is compiled by clang -target bpf as well: it uses only fixed-width types, which the
 * BPF program defines from vmlinux.h's before including it, and no other header there.
 *
 *   rules     ARRAY  rule id -> fu_bpf_rule: the dictionary shared by every module (compact_table.h's
 *                    fu_compact_rule, byte for byte; equal rules of different modules share an id) of
 *                    the rules a packed rule cannot state (FU_BPF_PACKED_ESCAPE)
 *   slots     ARRAY  slot -> fu_bpf_block: each loaded module holds slot_count consecutive slots:
 *                    one per 1 << FU_BPF_BLOCK_SHIFT bytes of its covered range (module-relative),
 *                    holding that block's rows (their starts within the block and packed rules),
 *                    then the continuations of the blocks whose rows do not fit one slot
 *   modules   ARRAY  module id -> fu_bpf_module: where a module's slots are, and its generation
 *                    (odd while user space rewrites the slots: a walk that sees it differ from its
 *                    mapping's, the module evicted, or change while it reads a row, ends as
 *                    FU_BPF_TABLE_EVICTED rather than trust the row)
 *   processes ARRAY  process slot -> fu_bpf_process: a process's executable mappings, sorted by start,
 *                    and the identity of the address space they were read from
 *   pids      HASH   tgid -> process slot
 *   missing   HASH   tgid -> samples: processes sampled with no process slot (and not a fork child of
 *                    a loaded one), with mappings of another address space (an exec since), or at
 *                    a PC outside their mappings (mapped since): user space (re)loads them
 *   samples   RINGBUF batches of samples (fu_bpf_batch.data): fu_bpf_sample records, each cut to
 *                    its user frames, one after another
 *   kstacks   STACK_TRACE: kernel stacks (bpf_get_stackid), by fu_bpf_stack.kernel_stack
 *   scratch   PERCPU_ARRAY 0 -> the CPU's state: the counters (fu_bpf_cpu_counters) first, then the
 *                    header of the sample being sent, then the walk's (unwind.bpf.c's struct walk)
 *   rule_caches ARRAY_OF_MAPS CPU * FU_BPF_RULE_CACHE_PARTS + part -> an ARRAY of
 *                    FU_BPF_DIRECT_MAP_BYTES (kmalloc'd), by a hash: the rule last found for (module,
 *                    generation, svma): one line per frame whose rule the CPU found recently, where a
 *                    per-CPU array costs two (its pointer array, then the entry)
 *   batches   ARRAY_OF_MAPS CPU -> an ARRAY of one fu_bpf_batch (kmalloc'd, as a rule cache part):
 *                    the CPU's samples not sent yet, sent whole through `samples`
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
/* Executable mappings of one process the walker can see: a process with more (hundreds of dlopen'ed
 * modules) keeps those bpf_session.c chooses, and the others are left out (fu_bpf_process.left_out):
 * a frame in one ends the walk as FU_BPF_MAPPINGS_LEFT_OUT. */
#define FU_BPF_MAX_MAPPINGS 256
#define FU_BPF_MAPPING_SEARCH_STEPS 9 /* ceil(log2(FU_BPF_MAX_MAPPINGS)) + 1 */
/* A block: 512 bytes of code, whose rows (the one in force at its start and those starting in it)
 * are one 64-byte slot (a cache line) when they are at most FU_BPF_BLOCK_ROWS, their rules packed
 * in them: a frame's row costs one line of the slots map and no dictionary. A block with more rows
 * chains continuations: on libLLVM-14 (14.6 rows a block on average) 29% of the code is past a
 * block's first slot, on libc 17%; 256-byte blocks would halve that for 45-50% more map memory. */
#define FU_BPF_BLOCK_SHIFT 9
#define FU_BPF_BLOCK_ROWS 12
/* A block holds at most 2^FU_BPF_BLOCK_SHIFT + 1 rows (a start at each byte and the row in force at
 * its start): the continuations to follow past its first slot. */
#define FU_BPF_BLOCK_CHAIN_STEPS (((1 << FU_BPF_BLOCK_SHIFT) + FU_BPF_BLOCK_ROWS) / FU_BPF_BLOCK_ROWS - 1)
#define FU_BPF_MAX_MODULES 4096
#define FU_BPF_MAX_PROCESSES 1024
#define FU_BPF_MAX_RULES 65536
/* Slots (64 bytes each) in the slots map by default: 32 MiB, user space chooses at load time. */
#define FU_BPF_DEFAULT_SLOTS (1u << 19)
/* The most the map can have: slots are numbered in 32 bits (fu_bpf_module.first_slot). */
#define FU_BPF_MAX_SLOTS 0xffffffffu
/* The table map grows while recording by segments of this many slots (4 MiB), maps of their own in
 * the outer map `slot_segments`: slot i past the `slots` map's n is slot (i - n) % FU_BPF_SEGMENT_SLOTS
 * of segment (i - n) / FU_BPF_SEGMENT_SLOTS (unwind.bpf.c slot_at). */
#define FU_BPF_SEGMENT_SHIFT 16
#define FU_BPF_SEGMENT_SLOTS (1u << FU_BPF_SEGMENT_SHIFT)
#define FU_BPF_KERNEL_STACKS 16384
/* The most bytes of values an array map holds in memory the kernel kmallocs (bpf_map_area_alloc:
 * up to PAGE_SIZE << PAGE_ALLOC_COSTLY_ORDER, 32 KiB, with the map's 312-byte header on 6.18: an
 * array of 1014 values of 32 bytes is not in /proc/vmallocinfo, one of 1015 is), in the kernel's
 * direct map (large pages); a larger one is vmalloc'd, in 4 KiB pages. */
#define FU_BPF_DIRECT_MAP_BYTES (32768 - 312)
/* Maps of FU_BPF_DIRECT_MAP_BYTES each holding a CPU's rule cache (rule_caches: CPU i's at
 * [i * FU_BPF_RULE_CACHE_PARTS, (i + 1) * FU_BPF_RULE_CACHE_PARTS)): 2028 rules a CPU. */
#define FU_BPF_RULE_CACHE_PARTS 2

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
    FU_BPF_NO_PROCESS,       /* the process's loaded mappings are stale: its address space is not the one
                              * they were read from (an exec since), or they do not hold the sampled PC */
    FU_BPF_NO_TABLE,         /* the module's table is being written, or its slots do not hold the PC's row */
    FU_BPF_REGISTER_UNKNOWN, /* the rule needs a register the walk does not know past the first frame */
    FU_BPF_SP_BACKWARDS,     /* the caller's stack pointer is not above the callee's */
    FU_BPF_KERNEL_ONLY,      /* a kernel thread: no user stack */
    FU_BPF_NOT_LOADED,       /* sampled before user space loaded the process (not walked: out of the
                              * share of walked stacks that are complete) */
    FU_BPF_EXPRESSION_ERROR, /* the rule's expression (a CFA read through a register, a save slot
                              * relative to rbp) names a register the walk does not know, as the C
                              * walker's FU_WALK_EXPRESSION_ERROR */
    FU_BPF_MAPPINGS_LEFT_OUT, /* the PC is in none of the process's loaded mappings, and the process has
                               * more executable mappings than FU_BPF_MAX_MAPPINGS: some were left out */
    FU_BPF_TABLE_EVICTED,     /* the module's table was evicted since the process's mappings were written
                               * (the tables in use did not fit the slots map): until user space reloads it */
    FU_BPF_OUTCOME_COUNT
};

/* The counters, summed per CPU at the start of the CPU's state (fu_bpf_cpu_counters). Those a
 * walked sample updates come last, next to FU_BPF_COUNTER_OUTCOME + FU_BPF_END and + FRAME_LIMIT,
 * so that a sample writes one or two lines of them (docs/DESIGN.md, "What a sample costs outside
 * the walk"). */
enum fu_bpf_counter {
    FU_BPF_COUNTER_FP_FRAMES = 0,   /* frames walked by the frame pointer (no row covered the PC) */
    FU_BPF_COUNTER_SAMPLES_DROPPED, /* samples of batches the ring buffer had no room for */
    FU_BPF_COUNTER_EXTRA_LOOKUPS,   /* map lookups of the frames' rows past the block's slot: its
                                     * continuations and the rule dictionary */
    FU_BPF_COUNTER_MAPPING_SEARCHES, /* frames whose mapping was not among the walk's recent ones */
    FU_BPF_COUNTER_DERIVED_FRAMES,  /* frames stepped through a rule derived from the code (--synth) */
    FU_BPF_COUNTER_SPACE_CHANGED,   /* samples (no_process) of an address space other than the one whose
                                     * mappings are loaded for the process: an exec since they were read */
    /* timed samples only (the program loaded with `timing`): ns spent in the user-stack walks
     * (bpf_ktime_get_ns around them), and over the walked samples, for the least-squares fit of their
     * cost on their frames (n: the sample's user frames; t: its walk's ns; T: the program's ns from
     * entry to after its record in the CPU's batch (and the batch's send, if it sent it); m: its frames whose rule came from the CPU's previous
     * walk, unwind.bpf.c's memo): sum n*t, sum T, sum n*T, sum m^2, sum n*m, sum m*t (sum n, sum
     * n^2 and sum m are FRAMES, FRAMES_SQUARED and MEMO_FRAMES) */
    FU_BPF_COUNTER_WALK_NS,
    FU_BPF_COUNTER_WALK_NS_BY_FRAMES,
    FU_BPF_COUNTER_SAMPLE_NS,
    FU_BPF_COUNTER_SAMPLE_NS_BY_FRAMES,
    FU_BPF_COUNTER_MEMO_FRAMES_SQUARED,
    FU_BPF_COUNTER_MEMO_BY_FRAMES,
    FU_BPF_COUNTER_WALK_NS_BY_MEMO,
    /* updated by every walked sample */
    FU_BPF_COUNTER_SLOT_LOOKUPS,    /* frames whose rule was not in the rule cache: their block's slot read */
    FU_BPF_COUNTER_STACK_READS,     /* bpf_probe_read_user calls of the walks (window refills) */
    FU_BPF_COUNTER_SAMPLES,
    FU_BPF_COUNTER_WALKED_SAMPLES,  /* samples whose user stack was walked */
    FU_BPF_COUNTER_FRAMES,          /* user frames walked */
    FU_BPF_COUNTER_FRAMES_SQUARED,
    FU_BPF_COUNTER_MEMO_FRAMES,     /* frames whose rule came from the CPU's previous walk */
    FU_BPF_COUNTER_OUTCOME,         /* + outcome: samples by outcome */
    FU_BPF_COUNTER_COUNT = FU_BPF_COUNTER_OUTCOME + FU_BPF_OUTCOME_COUNT
};

/* The per-CPU state's first bytes (unwind.bpf.c's struct walk): user space reads the counters
 * there, summed over the CPUs (bpf_session.c). */
typedef struct fu_bpf_cpu_counters {
    uint64_t count[FU_BPF_COUNTER_COUNT];
} fu_bpf_cpu_counters;

typedef struct fu_bpf_rule {
    uint8_t cfa_kind;
    uint8_t cfa_register;
    int8_t ra_offset_by_8;
    uint8_t origin; /* where the row came from (compact_table.h): the walk does not look */
    int32_t cfa_offset;
    int8_t saved_offset_by_8[6]; /* rbx, rbp, r12, r13, r14, r15 */
    uint16_t kept_caller_saved;  /* caller-saved registers whose value the caller keeps (bit per register) */
} fu_bpf_rule;

/* A row in 32 bits: the ninth bit of its start within the block, and its rule packed for the
 * common shapes: the CFA at rsp or rbp plus a multiple of 8 below 4 KiB, the return address at
 * CFA - 8, each callee-saved register kept or saved at CFA - 16 to CFA - 64, no caller-saved
 * register kept. Other rules (no-info and slow rows, the PLT, DRAP, signal frames, the outermost
 * frame's) are FU_BPF_PACKED_ESCAPE | their dictionary id.
 *   bits 0-17   saved_offset_by_8[i] in bits 3i..3i+2: 0 FU_BPF_KEEP, v: -(v + 1)
 *   bits 18-26  cfa_offset / 8
 *   bit 27      the CFA is at rbp (else rsp)
 *   bits 28-29  origin
 *   bit 30      FU_BPF_PACKED_ESCAPE
 *   bit 31      the row's start within the block, bit 8 (FU_BPF_ROW_HIGH) */
#define FU_BPF_PACKED_OFFSET_SHIFT 18
#define FU_BPF_PACKED_OFFSET_LIMIT (1 << 9) /* cfa_offset / 8 below this */
#define FU_BPF_PACKED_RBP (1u << 27)
#define FU_BPF_PACKED_ORIGIN_SHIFT 28
#define FU_BPF_PACKED_ESCAPE (1u << 30)
#define FU_BPF_PACKED_RULE (FU_BPF_ROW_HIGH - 1) /* the rule's bits */
#define FU_BPF_ROW_HIGH 0x80000000u
#define FU_BPF_RSP 7 /* DWARF numbers: a CFA_RSP rule's cfa_register, a CFA_RBP one's */
#define FU_BPF_RBP 6
/* fu_bpf_block.next: the continuation's slot, relative to the module's first, and its first row's
 * start within the block above it; 0: none */
#define FU_BPF_NEXT_SLOT_BITS (32 - FU_BPF_BLOCK_SHIFT)
#define FU_BPF_NEXT_SLOT_MASK ((1u << FU_BPF_NEXT_SLOT_BITS) - 1)

/* One slot of the slots map: up to FU_BPF_BLOCK_ROWS rows of a block, by start; the unused tail
 * repeats the last row. The first slot of a block starts with the row in force at its start
 * (start 0); a continuation starts with the row after its predecessor's last. */
typedef struct fu_bpf_block {
    uint32_t rows[FU_BPF_BLOCK_ROWS];   /* the start's bit 8 and the packed rule (above) */
    uint8_t starts[FU_BPF_BLOCK_ROWS];  /* the rows' starts within the block, bits 0-7 */
    uint32_t next;                      /* the continuation (FU_BPF_NEXT_SLOT_*) */
} fu_bpf_block;

#ifdef __bpf__
#define FU_BPF_INLINE static __always_inline
#else
#define FU_BPF_INLINE static inline
#endif

/* Row k's start within its block. */
FU_BPF_INLINE uint32_t fu_bpf_row_start(const fu_bpf_block *block, uint32_t k)
{
    return block->starts[k] | (block->rows[k] >> 31) << 8;
}

/* The row of `block` in force at `offset` within its block (its first row's start <= offset):
 * the last whose start is at or before it, in four halvings over the twelve. */
FU_BPF_INLINE uint32_t fu_bpf_block_row(const fu_bpf_block *block, uint32_t offset)
{
    uint32_t i = fu_bpf_row_start(block, 8) <= offset ? 8 : 0;
    if (i == 0 && fu_bpf_row_start(block, 4) <= offset)
        i = 4;
    if (fu_bpf_row_start(block, i + 2) <= offset)
        i += 2;
    if (fu_bpf_row_start(block, i + 1) <= offset)
        i += 1;
    return i;
}

/* The rule a row without FU_BPF_PACKED_ESCAPE states. */
FU_BPF_INLINE void fu_bpf_unpack_rule(uint32_t packed, fu_bpf_rule *rule)
{
    bool rbp = packed & FU_BPF_PACKED_RBP;
    rule->cfa_kind = rbp ? FU_BPF_CFA_RBP : FU_BPF_CFA_RSP;
    rule->cfa_register = rbp ? FU_BPF_RBP : FU_BPF_RSP;
    rule->ra_offset_by_8 = -1;
    rule->origin = (uint8_t)((packed >> FU_BPF_PACKED_ORIGIN_SHIFT) & 3);
    rule->cfa_offset = (int32_t)(8 * ((packed >> FU_BPF_PACKED_OFFSET_SHIFT) & (FU_BPF_PACKED_OFFSET_LIMIT - 1)));
    for (int i = 0; i < 6; i++) {
        uint32_t v = (packed >> (3 * i)) & 7;
        rule->saved_offset_by_8[i] = v ? (int8_t)(-1 - (int32_t)v) : FU_BPF_KEEP;
    }
    rule->kept_caller_saved = 0;
}

typedef struct fu_bpf_module {
    uint64_t base_svma, end_svma;
    uint32_t first_slot;  /* the blocks' slots; their continuations follow */
    uint32_t block_count; /* ((end_svma - base_svma - 1) >> FU_BPF_BLOCK_SHIFT) + 1 */
    uint32_t slot_count;  /* block_count and the continuations */
    uint32_t row_count;
    uint32_t generation; /* odd: being written */
    uint32_t reserved;
} fu_bpf_module;

#define FU_BPF_NO_MODULE 0xffffffffu

typedef struct fu_bpf_mapping {
    uint64_t start, end;
    uint64_t bias;       /* avma - svma */
    uint32_t module;     /* module id, FU_BPF_NO_MODULE: no table (frame pointers only) */
    uint32_t generation; /* the module's generation when the mapping was written */
} fu_bpf_mapping;

/* Which address space a process's mappings were read from: mm_struct's fields that an exec sets anew
 * (the stack's top is randomized at each exec; the code's and the heap's bounds are the program's),
 * as /proc/PID/stat shows them (startcode, endcode, startstack, start_brk). The walk compares them
 * with the sampled task's mm: a process that exec'd since its mappings were read is not walked with
 * them (no_process), even where the new image's code lies at the old one's addresses. All zero:
 * unknown (not checked). */
typedef struct fu_bpf_space_identity {
    uint64_t start_code, end_code, start_stack, start_brk;
} fu_bpf_space_identity;

typedef struct fu_bpf_process {
    uint32_t count;
    uint32_t left_out; /* executable mappings of the process not among `mappings` (past FU_BPF_MAX_MAPPINGS) */
    fu_bpf_space_identity identity;
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

/* One sample's record, in its CPU's batch (fu_bpf_batch) as the program sends it through the
 * `samples` ring buffer: FU_BPF_SAMPLE_HEADER bytes, then stack.user_count user frames, where the
 * record ends (bpf_log.h keeps them). */
typedef struct fu_bpf_sample {
    uint64_t time; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
    uint32_t tid;
    uint32_t cpu;
    char comm[16]; /* the thread's command name, NUL-padded */
    fu_bpf_stack stack;
} fu_bpf_sample;

#define FU_BPF_SAMPLE_HEADER __builtin_offsetof(fu_bpf_sample, stack.user)
/* The most bytes one record takes (every user frame). */
#define FU_BPF_SAMPLE_MAX_BYTES (FU_BPF_SAMPLE_HEADER + 8 * FU_BPF_MAX_FRAMES)
/* The ring buffer's bytes: 56 bytes and 8 a user frame a sample (clang: ~340), in batches of up to
 * FU_BPF_BATCH_BYTES, drained every 100 ms at most (bpf.py POLL_SECONDS): room for ~24,000 such
 * samples between two drains. */
#define FU_BPF_SAMPLE_RING_BYTES (8u << 20)

/* A CPU's samples not sent yet: records (fu_bpf_sample, each FU_BPF_SAMPLE_HEADER bytes and 8 a
 * user frame) one after another in data[0, bytes). The walk writes each frame into its sample's
 * record there, then the header; the program sends the batch as one ring buffer record when the
 * next sample might not fit (less than FU_BPF_SAMPLE_MAX_BYTES left) and when a sample must wake
 * user space, so that the ring's reservation (its lock and positions: cold lines at each sample)
 * is paid once a batch; user space takes what is left in each CPU's batch once the events are
 * closed (bpf_session.c fu_bpf_session_stop). The whole value fits FU_BPF_DIRECT_MAP_BYTES:
 * kmalloc'd, in the direct map's large pages. */
#define FU_BPF_BATCH_BYTES (FU_BPF_DIRECT_MAP_BYTES - 8)
typedef struct fu_bpf_batch {
    uint32_t bytes;   /* of records in data, at most FU_BPF_BATCH_BYTES */
    uint32_t records; /* in data */
    uint8_t data[FU_BPF_BATCH_BYTES];
} fu_bpf_batch;

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

/* The slots of one module (0 if the table is empty): its blocks and their continuations. */
uint64_t fu_bpf_module_slot_count(const fu_compact_table *t);
/* The packed rule (fu_bpf_block.rows without FU_BPF_ROW_HIGH) of `rule`, whose dictionary id is
 * `id` if it cannot be packed. */
uint32_t fu_bpf_pack_rule(const fu_compact_rule *rule, uint32_t id);
/* The rule in force at module-relative `offset` (< end_svma - base_svma) of a module laid out in
 * `slots` (its first_slot at slots[0]), its packed rules' escapes from `d`: the lookup
 * unwind.bpf.c makes, for the fuzz driver to compare with fu_compact_find. False if the chain of
 * continuations is broken. */
bool fu_bpf_find_rule(const fu_bpf_block *slots, const fu_bpf_module *module, const fu_bpf_rules *d,
                      uint32_t offset, fu_bpf_rule *rule);
/* Fills out[0 .. fu_bpf_module_slot_count) and *module (first_slot, generation left to the caller),
 * adding the table's rules that cannot be packed to `d`; FU_ERR_INVALID for a module of 2^23
 * slots or more (a continuation's slot is FU_BPF_NEXT_SLOT_BITS). */
fu_status fu_bpf_layout_module(const fu_compact_table *t, fu_bpf_rules *d, fu_bpf_block *out, fu_bpf_module *module,
                               fu_error *err);

/* The ring of slots: modules take consecutive slots from `head`, wrapping to 0 when the end is
 * too near; the modules whose slots the new one overlaps (the oldest ones) are evicted. Where that
 * would evict a module a loaded process uses (`users`), the module goes where it evicts the fewest
 * uses, then the oldest modules: tables of processes gone and of modules no longer mapped go
 * first. */
typedef struct fu_bpf_ring {
    uint32_t capacity; /* slots */
    uint32_t head;
    uint32_t module_count;       /* ids in use are < module_count (at most FU_BPF_MAX_MODULES) */
    fu_bpf_module *modules;      /* user space's copy, by id; row_count 0: free */
    uint64_t *loaded_at;         /* by id: the order modules were loaded in */
    uint64_t clock;
    const uint32_t *users;       /* by id: the loaded processes' mappings of the module; NULL: none known */
} fu_bpf_ring;

/* Places `count` slots (FU_ERR_INVALID when count > capacity): *first receives the first slot and
 * evicted[0 .. *evicted_count) the ids of the modules to evict (their entries are cleared here;
 * the caller marks them in the map before writing the slots). *id receives a free module id
 * (an evicted one's if none is free; FU_ERR_INVALID when all FU_BPF_MAX_MODULES are in use). */
fu_status fu_bpf_ring_place(fu_bpf_ring *r, uint32_t count, uint32_t *first, uint32_t *id, uint32_t *evicted,
                            uint32_t *evicted_count, fu_error *err);
/* Whether fu_bpf_ring_place would place `count` slots evicting no module. */
bool fu_bpf_ring_fits(const fu_bpf_ring *r, uint32_t count);
/* The ring's end moved to `capacity` (above the present one): the next module goes at the former
 * end unless the window from head evicts none. */
void fu_bpf_ring_grow(fu_bpf_ring *r, uint32_t capacity);
void fu_bpf_ring_free(fu_bpf_ring *r);
#endif

#endif
