/* walk: unwind a stack with the evaluated CFI tables, one frame at a time.
 *
 * The walker reads memory only through a reader (fu_reader: a bounds-checked window read inline,
 * then a callback that checks its own bounds), never allocates and never holds the GIL. A walk
 * cache (fu_walk_cache) kept by the caller across walks remembers, per PC, the module and what
 * settles the step there (a compact rule, a compiled eh_elf body, or "no CFI"), so that stacks
 * seen before cost no lookup. Each walk ends with an outcome: the end of the stack (a normal
 * result), a truncated stack (the dump ran out), or a failure with its reason and address.
 *
 * Addresses: an avma is an address in the running process, an svma one stated in the ELF file;
 * a module's `bias` converts them (avma = svma + bias). A return address points after the call;
 * the row that describes the caller is the one of `return address - 1` (the call instruction),
 * except in the frame a signal interrupted, where the saved IP is the faulting instruction itself:
 * see fu_lookup_address, the one place this rule lives.
 */
#ifndef FASTUNWIND_WALK_H
#define FASTUNWIND_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "address_space.h"
#include "cfi.h"
#include "compact_table.h"
#include "fu_unwind_abi.h" /* fu_regs, fu_reader, the eh_elf entry point */

/* Frames in one walk; deeper stacks end as FU_WALK_FRAME_LIMIT. perf's default is FU_PERF_MAX_STACK
 * (kernel.perf_event_max_stack); 1024 covers deep recursion without unbounded work. */
#define FU_WALK_MAX_FRAMES 1024
/* Frames of a walk of the calling thread (unwind_self) unless its caller asks otherwise: glibc's
 * backtrace() beside it is given as many. */
#define FU_WALK_SELF_MAX_FRAMES 256

typedef enum fu_walk_outcome {
    FU_WALK_END = 0,            /* end of the stack: return address undefined, or 0, or the
                                 * process's entry code (FU_WALK_CACHED_ENTRY_CODE) */
    FU_WALK_TRUNCATED,          /* the stack dump ended before the stack did */
    FU_WALK_NO_UNWIND_INFO,     /* no CFI covers the PC and no plausible frame pointer */
    FU_WALK_UNREADABLE,         /* memory at fault_address could not be read */
    FU_WALK_NO_PROGRESS,        /* neither the IP nor the SP changed: would loop */
    FU_WALK_SP_BACKWARDS,       /* the caller's SP is below the callee's */
    FU_WALK_EXPRESSION_ERROR,   /* a DWARF expression failed */
    FU_WALK_REGISTER_UNKNOWN,   /* a rule needs a register whose value is not known */
    FU_WALK_FRAME_LIMIT,        /* FU_WALK_MAX_FRAMES (or the caller's limit) reached */
    FU_WALK_OUTCOME_COUNT
} fu_walk_outcome;

const char *fu_walk_outcome_name(fu_walk_outcome outcome);

typedef enum fu_frame_kind {
    FU_FRAME_FIRST = 0,   /* the sampled IP */
    FU_FRAME_CFI,         /* recovered through CFI */
    FU_FRAME_SIGNAL,      /* recovered through a signal frame's CFI (the IP is not a return address) */
    FU_FRAME_FP,          /* recovered by following the frame pointer */
    FU_FRAME_KIND_COUNT
} fu_frame_kind;

/* "first", "cfi", "signal", "frame_pointer" (fastunwind.walk.WalkedFrame.kind); "?" else. */
const char *fu_frame_kind_name(int kind);

/* fu_frames.flags bits */
#define FU_FRAME_SIGNAL_TRAMPOLINE 1u /* this frame's own CFI is a signal frame ('S'): __restore_rt */
/* This frame's step (to its caller) used a row derived from the machine code: one that replaced a
 * declared row proven wrong (CORRECTED), or one where the module has no CFI (SYNTHESIZED); see
 * compact_table.h, fu_compact_origin. A rule of origin o marks its frame with 1 << o. */
#define FU_FRAME_CORRECTED 2u
#define FU_FRAME_SYNTHESIZED 4u
#define FU_FRAME_DERIVED (FU_FRAME_CORRECTED | FU_FRAME_SYNTHESIZED)
/* "corrected" or "synthesized" (the origin's name, _core.SYNTH_ORIGIN_NAMES) of a frame whose step
 * used a derived row (`flags` FU_FRAME_*); NULL: one that used declared CFI or none. */
const char *fu_frame_derived_name(uint8_t flags);

/* Where a walk writes its frames: four columns, each with room for max_frames, frame i being
 * (ip[i], module[i], kind[i], flags[i]). Columns, not an array of frame records, because that is
 * what the callers hand on (unwind_samples returns them as they are). */
typedef struct fu_frames {
    uint64_t *ip;          /* avma: the sampled IP, or a return address */
    uint32_t *module;      /* index in the address space, or UINT32_MAX */
    uint8_t *kind;         /* fu_frame_kind: how the frame was recovered */
    uint8_t *flags;        /* FU_FRAME_* */
} fu_frames;

typedef struct fu_walk_result {
    fu_walk_outcome outcome;
    size_t frame_count;
    uint64_t fault_address; /* UNREADABLE, TRUNCATED: the address; NO_UNWIND_INFO: the IP */
} fu_walk_result;

/* The address whose row applies to frame `ip`: ip itself for the first frame and for a frame
 * interrupted by a signal, else ip - 1 (a return address may be the first byte after a
 * function that ends in a call, e.g. to a noreturn function). */
static inline uint64_t fu_lookup_address(uint64_t ip, bool ip_is_return_address)
{
    return ip_is_return_address ? ip - 1 : ip;
}

/* The lookup address of a caller found at return address `ra`. */
static inline uint64_t fu_caller_lookup_address(uint64_t ra) { return fu_lookup_address(ra, true); }

/* Whether a frame of `kind` (fu_frame_kind) was recovered from a return address, so that its IP is
 * looked up, symbolized and printed at ip - 1: a CFI or frame-pointer caller. Not the first frame
 * (nor callchain entries, FU_FRAME_FIRST too), nor a frame a signal interrupted (FU_FRAME_SIGNAL). */
static inline bool fu_frame_ip_is_return_address(uint8_t kind) { return kind == FU_FRAME_CFI || kind == FU_FRAME_FP; }

/* The address frame (ip, kind, flags) is named (symbolized) at: its lookup address, except a signal
 * trampoline's (FU_FRAME_SIGNAL_TRAMPOLINE), whose IP, though a return address (the handler returns
 * to it), is the trampoline's first instruction: ip - 1 lies before it (eu-stack and gdb name it at ip). */
static inline uint64_t fu_frame_name_address(uint64_t ip, uint8_t kind, uint8_t flags)
{
    return flags & FU_FRAME_SIGNAL_TRAMPOLINE ? ip : fu_lookup_address(ip, fu_frame_ip_is_return_address(kind));
}

/* One step from the frame whose registers are `regs` (its IP in regs->value[FU_REG_RA]) to its
 * caller: `caller` gets the caller's registers as the unwind rules give them, before fu_walk's
 * checks (end of stack, progress, SP direction). Returns the caller's frame kind (FU_FRAME_CFI,
 * FU_FRAME_SIGNAL or FU_FRAME_FP), or -1 with result->outcome (and fault_address) set.
 * `frame_flags` receives FU_FRAME_* flags of the frame at `regs`. For tests: fu_walk inlines it. */
int fu_walk_step(const fu_address_space *space, const fu_reader *reader, const fu_regs *regs,
                 bool ip_is_return_address, fu_regs *caller, uint8_t *frame_flags, fu_walk_result *result);

/* Remembers, per lookup address, the module and what settles the step there, so that a PC seen
 * before (hot loops, recursion, the same stacks sample after sample) skips the module and row
 * lookups. Direct-mapped; bound to one address space with fu_walk_cache_bind (fu_walk ignores a
 * cache bound to another). The caller owns it: one per thread, reused across walks; it is never
 * allocated per walk. */
#define FU_WALK_CACHE_BITS 10
typedef enum fu_walk_cached {
    FU_WALK_CACHED_NONE = 0,  /* an empty entry */
    FU_WALK_CACHED_RULE,      /* a compact table's fast-path rule */
    FU_WALK_CACHED_BODY,      /* a compiled eh_elf's body */
    FU_WALK_CACHED_NO_INFO,   /* no CFI covers the PC: the frame pointer */
    /* the module's entry code (fu_module): the stack ends here where rbp is 0, the psABI's mark of
     * the outermost frame (System V AMD64 ABI 3.4.1: "the user code should mark the deepest
     * stack frame by setting the frame pointer to zero"; the kernel starts a process with rbp 0);
     * else as NO_INFO */
    FU_WALK_CACHED_ENTRY_CODE,
    /* a compact fast-path rule derived from the machine code (compact_table.h, fu_compact_origin),
     * or one that keeps caller-saved registers (kept_caller_saved: synthesized rows state them,
     * declared CFI hardly ever): taken by the general step, which marks the frame (frame_flags) and
     * carries those registers; the lean loop and walk shapes stay those of the module's own CFI,
     * which pay nothing for either (callgrind: marking in follow_rules cost 1.3-2.1% more
     * instructions on the c and hackbench recordings) */
    FU_WALK_CACHED_DERIVED_RULE,
    /* a compact rule with save slots relative to rbp (compact_table.h fu_compact_slot_at_rbp: GCC's
     * DRAP frames): applied from the table's rule by the general step (frame_flags its origin's) */
    FU_WALK_CACHED_RBP_SLOTS_RULE,
} fu_walk_cached;
/* A compact fast-path rule prepared for the walker (walk.c compact_plan): what the cache keeps of
 * it, so that a cached step reads no rule, and its save slots laid out for a restore without a
 * branch per slot. Slot i is fu_compact_saved_register[i] for i < 6, the return address for 6. */
typedef struct fu_compact_plan {
    int32_t cfa_offset;      /* the rule's */
    uint8_t cfa;             /* the rule's cfa_kind (low 3 bits) and cfa_register << 3 */
    uint8_t restored;        /* slots read from the stack */
    uint8_t kept;            /* slots that keep the callee's value (FU_COMPACT_KEEP; never the RA) */
    int8_t lowest_by_8;      /* the lowest slot read is at CFA + 8 * lowest_by_8 (0 if none) */
    uint8_t count_by_8;      /* the slots read lie in [lowest, lowest + 8 * count_by_8) (1 if none) */
    uint8_t slot_by_8[7];    /* a restored slot i is at lowest + 8 * slot_by_8[i]; others 0 */
} fu_compact_plan;

typedef struct fu_walk_cache_entry {
    uint64_t lookup;                 /* the lookup address (ip or ip - 1) */
    union {
        fu_compact_plan plan;        /* RULE, DERIVED_RULE (compact SLOW rows are not cached) */
        const fu_compact_rule *rule; /* RBP_SLOTS_RULE: in the module's table, which the space keeps */
        fu_eh_elf_body_fn body;      /* BODY */
    } what;
    uint32_t module;                 /* UINT32_MAX: outside every module */
    uint8_t kind;                    /* fu_walk_cached */
    uint8_t frame_flags;             /* DERIVED_RULE, RBP_SLOTS_RULE: FU_FRAME_CORRECTED or FU_FRAME_SYNTHESIZED */
    uint16_t kept_caller_saved;      /* DERIVED_RULE: the rule's (compact_table.h) */
} fu_walk_cache_entry;

/* A walk's shape: what a whole walk through cached compact rules (walk.c follow_rules) read and
 * found, as offsets into the reader's window (which starts at the first frame's rsp), so that a
 * later walk from the same IP whose stack holds the same return addresses at the same offsets gets
 * the same frames from a few independent loads and compares, instead of a lookup and a chain of
 * dependent loads per frame. Profiles sample the same stacks over and over (hackbench: 34 distinct
 * stacks in 1,985 samples). Exact: every value the walk's course depended on is compared (each
 * return address; rbp - rsp wherever rbp gave a CFA; the registers valid at the first frame; the
 * dump's size; max_frames), and the rest of the walk (rules, modules, the checks on each step) is
 * a function of those for a given address space. Only walks that end (FU_WALK_END) within
 * FU_WALK_SHAPE_FRAMES frames have a shape. Writing one down costs a walk a few ns a frame, so of
 * the walks that do not follow its slot's shape only every FU_WALK_SHAPE_RETRY-th writes its own
 * down there (the first in an empty slot): deep or ever-different stacks (CPython's) rarely pay for
 * shapes that would not be followed, and a shape that is followed stays. */
#define FU_WALK_SHAPE_FRAMES 16
#define FU_WALK_SHAPE_RBP_CHECKS 4
#define FU_WALK_SHAPE_BITS 6
#define FU_WALK_SHAPE_RETRY 16
#define FU_WALK_SHAPE_INITIAL UINT16_MAX /* rbp from the first frame's registers, not the stack */
typedef struct fu_walk_shape {
    uint64_t ip[FU_WALK_SHAPE_FRAMES + 1]; /* the frames' IPs, then 0 (a zero return address ends a
                                              walk as one that is undefined does) */
    uint32_t module[FU_WALK_SHAPE_FRAMES];
    uint16_t ra_slot[FU_WALK_SHAPE_FRAMES]; /* window offset of ip[i + 1], for i < ra_count */
    struct {
        uint64_t delta;                    /* rbp - rsp of the first frame */
        uint16_t slot;                     /* window offset of that rbp, or FU_WALK_SHAPE_INITIAL */
    } rbp_check[FU_WALK_SHAPE_RBP_CHECKS];
    uint32_t valid;                        /* registers valid at the first frame */
    uint16_t frames;                       /* 0: no shape */
    uint16_t ra_count;
    uint16_t extent;                       /* the walk read the window's [0, extent) */
    uint8_t rbp_checks;
    uint8_t misses;                        /* walks here that did not follow the shape, since it was
                                              last followed (1) or written down; counts round */
} fu_walk_shape;

/* Where the last walk from an IP crossed a signal context, for fu_walk_prefetch: a walk from a
 * signal handler reads its own frames and the context (the window's first few hundred bytes),
 * then the interrupted frames above the signal's FPU state, over 3 KiB higher on an AVX-512
 * machine. Without this, the prefetch of the window's first FU_WALK_PREFETCH_BYTES missed the
 * interrupted frames (a dependent miss each, about 330 ns per cold walk from the bundled
 * workload's handler) and loaded lines the walk never read. The kernel aligns the context to 64
 * bytes, so for one handler IP the offsets move by less than a line (the bundled workload: two
 * offsets, 8 bytes apart, per IP over 1,051 samples). A walk from the IP that crosses no context
 * clears the slot. */
#define FU_WALK_INTERRUPTED_BITS 6
typedef struct fu_walk_interrupted {
    uint64_t ip;           /* the first frame's IP; 0: empty */
    uint32_t context_end;  /* window offset of the signal context's end: the walk read below it */
    uint32_t offset;       /* window offset of the interrupted frame's rsp */
} fu_walk_interrupted;

typedef struct fu_walk_cache {
    const fu_address_space *space;
    fu_walk_cache_entry entries[1u << FU_WALK_CACHE_BITS];
    fu_walk_shape shapes[1u << FU_WALK_SHAPE_BITS]; /* by the first frame's IP, direct-mapped */
    fu_walk_interrupted interrupted[1u << FU_WALK_INTERRUPTED_BITS]; /* by the first frame's IP */
} fu_walk_cache;

/* How much of a stack fu_walk_prefetch prefetches when no shape says what a walk reads: the save
 * slots of a deep walk's first frames (the walk prefetches further up as it goes, walk.c
 * prefetch_deep_stack). Against 512 bytes, cold first passes: c 26.7-27.1 -> 25.2-26.2 ns/frame,
 * python 32.9-33.1 -> 30.3-31.0, hackbench and c-fp unchanged; c-fp's warm passes 3-4% more
 * (medians of 8 one-pass processes each, two copies of each build, alternated). */
#define FU_WALK_PREFETCH_BYTES 1024
/* Where the last walk from the IP crossed a signal context (fu_walk_interrupted), fu_walk_prefetch
 * prefetches the window up to the context's end (at most FU_WALK_PREFETCH_BYTES) and this much
 * from the interrupted frame's rsp.
 * Cold first passes against the 1 KiB above alone: c 27.1 -> 21.8 ns/frame, c-fp 28.5 -> 21.1
 * (medians of 16 rounds in one process, the variants alternated, each a fresh address space after
 * 256 MiB written); 640 and 768 bytes no better, the first 1 KiB plus 512 or 1,024 bytes from the
 * interrupted rsp 24.4-25.2 on both (the bundled workload's walks read 5 lines below the context's
 * end, none of the rest of the first KiB, and 10 lines in the 704 bytes from the interrupted rsp). */
#define FU_WALK_INTERRUPTED_PREFETCH_BYTES 512

/* Start loading the stack bytes a walk from `ip` will read, its window (starting at its rsp) at
 * `window`, for a caller that knows a walk's first IP ahead of the walk (unwind_samples: a few
 * samples ahead). Where `cache` holds a shape for ip, the lines of the return addresses it
 * compares, exactly (a cold pass pays for each line it loads, needed or not: docs/BENCHMARKS.md);
 * where the last walk from ip crossed a signal context, the lines below the context's end (within
 * the first FU_WALK_PREFETCH_BYTES) and FU_WALK_INTERRUPTED_PREFETCH_BYTES from the interrupted
 * frame's rsp; else the window's first FU_WALK_PREFETCH_BYTES. Reads only the cache's slots: no
 * walk, no check. */
void fu_walk_prefetch(const fu_walk_cache *cache, uint64_t ip, const uint8_t *window, uint64_t window_size);

/* Bind `cache` to `space` and empty it: before first use, and whenever the space it was bound to
 * is freed (fu_walk ignores a cache bound to another space). */
void fu_walk_cache_bind(fu_walk_cache *cache, const fu_address_space *space);

/* Walk from the first frame's registers (the sampled IP in value[FU_REG_RA]), writing at most
 * max_frames frames into `frames` and the outcome to *result. The walk works in `registers` (no
 * copy per walk: the caller has just written them), so they are clobbered. `cache` may be NULL. */
void fu_walk(const fu_address_space *space, fu_regs *registers, const fu_reader *reader, fu_walk_cache *cache,
             const fu_frames *frames, size_t max_frames, fu_walk_result *result);

/* The registers of each of a walk's `count` frames (fu_walk's frame_count), recovered again step by
 * step from the first frame's (`first`, as fu_walk was given them): out[0] = *first, out[i + 1] =
 * the caller of frame i as the unwind rules give it, unknown registers not valid. fu_walk keeps no
 * registers (its fast loops never form them); a caller that shows them (backtrace --registers)
 * asks for them here, after the walk chose the frames. A step that fails where the walk's did not
 * (it cannot: the same rules over the same memory) leaves only the frame's IP valid. */
void fu_walk_frame_registers(const fu_address_space *space, const fu_regs *first, const fu_reader *reader,
                             const fu_frames *frames, size_t count, fu_regs *out);

/* fu_walk in two halves, for a caller that can give the first frame's rip, rsp and rbp before its
 * other registers. A walk that follows its slot's shape (most of a profile's) reads nothing else of
 * them, and in a perf sample the other registers fill one or two more cache lines of the recording,
 * which a cold pass would wait for (unwind_samples). fu_walk_begin reads `registers`' valid mask
 * (of all the registers the caller will give) and the values of rip, rsp and rbp only. It returns
 * true when the walk is done: it followed the shape, or could not start (an outcome as fu_walk's);
 * the frames and *result are then written. Else the caller fills in the other registers and calls
 * fu_walk_finish with the same arguments and *shape_to_write, which walks as fu_walk does. */
bool fu_walk_begin(const fu_address_space *space, const fu_regs *registers, const fu_reader *reader,
                   fu_walk_cache *cache, const fu_frames *frames, size_t max_frames, fu_walk_result *result,
                   fu_walk_shape **shape_to_write);
void fu_walk_finish(const fu_address_space *space, fu_regs *registers, const fu_reader *reader, fu_walk_cache *cache,
                    const fu_frames *frames, size_t max_frames, fu_walk_result *result,
                    fu_walk_shape *shape_to_write);

/* What settles a step at `lookup` (an avma) in `space` before the DWARF tables, by its backend
 * (fu_walk_cached): a compact RULE (DERIVED_RULE: one derived from the machine code; RBP_SLOTS_RULE: one with
 * save slots relative to rbp), a compiled BODY, NO_INFO (no CFI covers it, or no module
 * maps it: the frame pointer), NONE (the DWARF tables decide). For tests and diagnostics. */
uint8_t fu_walk_step_source(const fu_address_space *space, uint64_t lookup);
/* "rule", "body", "no_info", "entry_code", "derived_rule", "rbp_slots_rule", or "interpreter" (NONE) for a
 * fu_walk_step_source result. */
const char *fu_walk_step_source_name(uint8_t source);

/* The walker's outcome for a compiled step's failure status (REGISTER_UNKNOWN, EXPRESSION_ERROR,
 * UNREADABLE, PAST_DUMP; a status no generator writes counts as unreadable). */
fu_walk_outcome fu_eh_elf_failure_outcome(int status);

/* ---- walk caches kept with an address space ---------------------------------------------------- */

/* Walk caches a space keeps across calls: one per thread of unwind_samples (py_perf_walk.c); a
 * borrower beyond them gets a cache of its own, freed when returned. */
#define FU_WALK_KEPT_CACHES 8
/* The caches of one space, NULL until a walk needs one (fu_walk_cache_borrow). The space keeps them
 * across calls (52 KiB each with its shapes), so a walk finds settled every PC an earlier walk of the
 * space met, as libunwind's and libdw's caches persist across their unwinds. Callers serialize
 * borrow and return (the binding holds the GIL). */
typedef struct fu_walk_cache_slot {
    fu_walk_cache *caches[FU_WALK_KEPT_CACHES];
    bool lent[FU_WALK_KEPT_CACHES];
} fu_walk_cache_slot;
/* An address space with its kept caches: the payload of _core.AddressSpace. */
typedef struct fu_space_with_cache {
    fu_address_space space;
    fu_walk_cache_slot slot;
} fu_space_with_cache;
/* A cache bound to `space`, lent until fu_walk_cache_return: a kept one not lent now, else a new one
 * (kept if a slot is free); NULL if out of memory. */
fu_walk_cache *fu_walk_cache_borrow(fu_walk_cache_slot *slot, const fu_address_space *space);
void fu_walk_cache_return(fu_walk_cache_slot *slot, fu_walk_cache *cache);
/* Frees the kept caches (none may be lent). */
void fu_walk_cache_slot_free(fu_walk_cache_slot *slot);

#endif
