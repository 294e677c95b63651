/* synth: what the machine code of one function says about its frame, by abstract interpretation
 * (the approach of Bastian, Kell and Zappa Nardelli, OOPSLA 2019, §5, with an x86 decoder instead of
 * BAP).
 *
 * From the entry state (rsp = entry_rsp, so CFA = rsp+8; the return address at CFA-8; rbx, rbp,
 * r12-r15 holding the caller's values, and the others too for synthesized tables), the instructions of [start, end) are followed over the
 * control-flow graph: direct jumps, conditional branches, fall-through, calls that return, calls
 * to known noreturn functions and traps that end a path, jump tables read from the image where
 * their pattern is recognised. Every general-purpose register and the 8-byte stack slots the
 * function writes hold an abstract value: an address relative to the entry stack pointer, one
 * relative to the stack after an `and rsp, -N` realignment, the caller's value of a register, the
 * return address, a constant, or unknown. Instructions not understood make what they write unknown:
 * precision is lost, soundness is not. At a block reached by several paths the states are joined;
 * stack pointers that differ there make the function undecided (with the reason), other values that
 * differ become unknown.
 *
 * The result is not a table but a walk: `visit` sees the state before every reached instruction, in
 * address order, after the fixpoint (synthesized tables: fu_synth_derive_row turns a state into rows
 * in cfi.h's representation); or a `judge` sees each instruction the fixpoint's walks pass, with the
 * state before it, and the byte it returns for an instruction's last walk is kept (check.c compares
 * the declared rows there without walking the function a second time).
 *
 * A call is taken to return with the stack as it was and the caller-saved registers changed, but
 * for those holding the only entry-stack address (rsp realigned, no callee-saved register holding
 * one) that the code the call reaches never writes (x264 keeps its realigned functions' entry rsp
 * in rcx across calls to its own helpers): that code is read, within FU_SYNTH_MAX_CALLEE_* bounds,
 * for the registers it writes.
 *
 * Everything input-driven is bounded by the FU_SYNTH_MAX_* limits below; hitting one makes the
 * function undecided with a reason naming it.
 */
#ifndef FASTUNWIND_SYNTH_H
#define FASTUNWIND_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cfi.h"
#include "synth_decode.h"

/* A function longer than this is undecided: it bounds the scratch memory (about 60 bytes per
 * instruction, and 4 per byte of code for the offset-to-instruction map). */
#define FU_SYNTH_MAX_FUNCTION_BYTES (4u << 20)
/* Basic blocks (branch targets) of one function: each holds a state (fu_synth_state, ~0.8 KB) while
 * the fixpoint runs. */
#define FU_SYNTH_MAX_BLOCKS (1u << 16)
/* Times one block may be walked before the fixpoint is declared divergent. Values at a block's entry
 * only move towards unknown, with one exception: a state that came only from a call's fall-through is
 * replaced, once, by the first other path's whose stack pointer differs (the call was to a function
 * that does not return; synth.c merge). So a block is re-walked at most once per value that changes
 * at its entry, plus once. */
#define FU_SYNTH_MAX_WALKS_PER_BLOCK 64
/* Stack slots tracked per state (saves, spills of saved registers, the return address). */
#define FU_SYNTH_MAX_SLOTS 40
/* Entries read from one jump table. */
#define FU_SYNTH_MAX_JUMP_TABLE_ENTRIES 4096
/* Jump tables remembered per function (a jump resolved once keeps its table on later walks). */
#define FU_SYNTH_MAX_JUMP_TABLES 256
/* Distinct distances from a jump table to the base its entries count from, per function (a
 * FU_VALUE_TABLE_TARGET names its distance by number: synth.c table_target); a target with one
 * more is unknown. */
#define FU_SYNTH_MAX_TABLE_BASES 256
/* Restarts of the fixpoint after a jump table revealed a target inside an already walked block, or
 * a call was found not to return after its fall-through had been joined. */
#define FU_SYNTH_MAX_RESTARTS 16
/* Callees of one function whose register writes are remembered (synth.c callee_writes); the
 * others are scanned again at each call. */
#define FU_SYNTH_MAX_CALLEES 16
/* Instructions, and paths (branch and call targets), of the code one direct call reaches that are
 * read to find the registers it writes; beyond, it may write any. */
#define FU_SYNTH_MAX_CALLEE_INSTRUCTIONS 4096
#define FU_SYNTH_MAX_CALLEE_PATHS 256
/* The reason an undecided function gives. */
#define FU_SYNTH_REASON_MAX 160

typedef enum fu_synth_value_kind {
    FU_VALUE_UNKNOWN = 0,
    FU_VALUE_ENTRY_STACK,    /* entry rsp + offset (the CFA is entry rsp + 8) */
    FU_VALUE_ALIGNED_STACK,  /* the stack after the function's realignment (`and rsp, -N`) + offset */
    FU_VALUE_ENTRY_REGISTER, /* the caller's value of register `reg` */
    FU_VALUE_RETURN_ADDRESS,
    FU_VALUE_CONSTANT,       /* offset: an address or an immediate */
    FU_VALUE_TABLE_ENTRY,    /* a sign-extended 4-byte entry of the table at `offset` */
    FU_VALUE_TABLE_TARGET,   /* one entry of the table at `offset`, plus `offset` + the function's
                              * table base distance number `reg`: a jump-table target */
    FU_VALUE_NEVER_WRITTEN   /* (slot reads) a slot of this frame the function never wrote */
} fu_synth_value_kind;

/* Without padding, so that equal values are equal bytes (joins compare states as bytes), and in 10
 * bytes (2-byte aligned): a state is mostly values, and the fixpoint copies and compares states. */
typedef struct __attribute__((packed, aligned(2))) fu_synth_value {
    int64_t offset;
    uint8_t kind; /* fu_synth_value_kind */
    uint8_t reg;  /* FU_VALUE_ENTRY_REGISTER: the register; FU_VALUE_TABLE_TARGET: the base distance */
} fu_synth_value;
_Static_assert(sizeof(fu_synth_value) == 10, "a value has no padding");

/* Slots are keyed by space (entry stack or realigned stack) and offset in it. */
enum { FU_SLOT_ENTRY_STACK = 0, FU_SLOT_ALIGNED_STACK = 1 };

typedef struct fu_synth_slot {
    int32_t offset;
    uint16_t space;
    fu_synth_value value;
} fu_synth_slot;
_Static_assert(sizeof(fu_synth_slot) == 16, "a slot has no padding");

typedef struct fu_synth_state {
    fu_synth_value regs[FU_X86_GPR_COUNT];
    uint8_t slot_count;
    bool slots_lost; /* a slot was not recorded (FU_SYNTH_MAX_SLOTS): absent ones are unknown */
    /* memory was written through an address the state does not know (a pointer from an argument, a
     * load or untracked arithmetic): it may be any slot of this frame the program can address, so
     * slots never written by a tracked store read as unknown, not as never written. The slots
     * recorded (the saves of callee-saved registers and of stack addresses, the return address)
     * are written only through rsp or the frame pointer and taken as out of such a pointer's
     * reach: no object of the program lies there. */
    bool unknown_stores;
    fu_synth_slot slots[FU_SYNTH_MAX_SLOTS]; /* sorted by (space, offset) */
} fu_synth_state;

/* A call-site record of the function's LSDA (`.gcc_except_table`, Itanium C++ ABI §7.5): a call
 * in [start, end) that throws continues at `landing_pad` with the registers the unwinder restores,
 * the state right after the call. */
typedef struct fu_synth_call_site {
    uint64_t start, end, landing_pad;
} fu_synth_call_site;

/* DW_CFA_GNU_args_size in the function's CFI: from `address` on, a call has `bytes` of outgoing
 * arguments on the stack, which the unwinder pops before it lands at a landing pad (libgcc's
 * uw_install_context). */
typedef struct fu_synth_args_size {
    uint64_t address;
    uint64_t bytes;
} fu_synth_args_size;

/* A further entry into the range (code another FDE jumps to, a landing pad another FDE's LSDA
 * names), with the state there. */
typedef struct fu_synth_entry {
    uint64_t address;
    const fu_synth_state *state;
} fu_synth_entry;

/* A judgment (fu_synth_judge) and where it holds: at an instruction in [from, until) whose state
 * differs from the judged one in none of `reads` (fu_synth_visit's `changed` bits), the judge would
 * give the same byte. `memo`: the judge's own record of how it came to it, handed back at the next
 * judgment made from this one (check.c: each rule's outcome and what it read). */
#define FU_SYNTH_JUDGMENT_MEMO 48
typedef struct fu_synth_judgment {
    uint64_t from, until; /* until 0: no judgment */
    uint32_t reads;
    uint8_t byte;
    uint8_t memo[FU_SYNTH_JUDGMENT_MEMO] __attribute__((aligned(8)));
} fu_synth_judgment;

/* Called by the fixpoint's walks for the instructions they pass, with the state before the one at
 * `address`: the judgment of it. The byte is kept in scratch->judgments (per instruction), each walk
 * writing over the previous one's. A block is walked again whenever its entry state changes, and
 * walked after its last change: once the run is FU_SYNTH_DECIDED, the byte of every reached
 * instruction is the judge's for the state a visit would see there. The walk calls the judge only
 * where the judgment in hand does not hold (the `changed` bits it counts are fu_synth_visit's, but a
 * register other than rsp counts as changed whenever an instruction writes it). In hand: on a walk,
 * the last judgment made or kept; at a block's start, its first instruction's on its previous walk,
 * or else the one of the walk its first state came from (a branch's, the fall-through's), with
 * what the joins changed since. `judgment` holds the judgment in hand, the one the new judgment is
 * made from, and `changed` what changed since it (FU_SYNTH_CHANGED_ALL: none in hand); the judge
 * overwrites it. */
typedef void (*fu_synth_judge)(void *context, uint64_t address, const fu_synth_state *state, uint32_t changed,
                               fu_synth_judgment *judgment);
typedef struct fu_synth_judge_hook {
    fu_synth_judge judge;
    void *context;
} fu_synth_judge_hook;

/* One function to interpret. */
typedef struct fu_synth_function {
    uint64_t start, end;              /* svma range, as the FDE or symbol states it */
    const uint8_t *code;              /* the bytes of [start, end) */
    const uint64_t *noreturn;         /* sorted addresses whose callees never return (abort@plt, ...) */
    size_t noreturn_count;
    const fu_image_segment *segments; /* the image's PT_LOAD bytes, to read jump tables */
    size_t segment_count;
    const fu_image_segment *code_segments; /* its executable ones: where jump-table targets may lie */
    size_t code_segment_count;
    /* The state at `start`: NULL for a function's entry (fu_synth_entry_state). An FDE that starts
     * inside a function (gcc's `.cold` parts, reached by a jump from the hot part) gives the state
     * its first declared row describes (check.c). */
    const fu_synth_state *entry;
    /* The entry state gives the caller-saved registers the caller's values, so that derived rows
     * say which still hold them (fu_synth_row.kept_caller_saved: synthesized tables); check.c
     * compares only the callee-saved ones and leaves them unknown. */
    bool caller_saved_values;
    /* sorted by start, not overlapping (NULL, 0: none); pads outside [start, end) are ignored */
    const fu_synth_call_site *call_sites;
    size_t call_site_count;
    const fu_synth_args_size *args_sizes; /* sorted by address (NULL, 0: none, all 0) */
    size_t args_size_count;
    const fu_synth_entry *entries; /* further entries (NULL, 0: none); outside the range ignored */
    size_t entry_count;
    fu_synth_judge_hook judge; /* .judge NULL: none */
} fu_synth_function;

/* Reused between functions; zero-initialize, release with fu_synth_scratch_free. */
typedef struct fu_synth_scratch {
    fu_x86_decoder decoder;
    bool decoder_ready;
    fu_x86_insn *insns;
    uint32_t *insn_offsets;   /* offset of each instruction from start */
    int32_t *block_of;        /* per instruction: its block index if it starts one, else -1 */
    /* per direct jump or conditional branch: its target's block, -1 outside the range (a tail
     * call), -2 inside an instruction (found once, before the first walk) */
    int32_t *branch_block;
    /* per instruction: passed by a walk (jump tables need a restart); after a decided run, whether a
     * path reaches it */
    uint8_t *walked;
    uint8_t *judgments;       /* per instruction: the judge's byte of its last walk (fu_synth_judge) */
    uint32_t *direct_branches; /* the direct jumps and conditional branches, by index, in address order */
    /* the instructions that may name code (calls, lea, direct jumps and branches to targets
     * outside the function), by index, in address order, `naming_count` of them after a run: what
     * of the instruction records check reads after the walks (check.c tally) */
    uint32_t *naming;
    uint32_t naming_count;
    uint32_t insn_cap;
    /* per byte of the function: 1 + the index of the instruction starting there (branch targets to
     * instructions without a search); not cleared between runs: an entry counts only where the
     * instruction it names starts (insn_offsets), so a run sets only its instructions' entries */
    uint32_t *insn_at_offset;
    uint32_t offset_cap;
    fu_synth_state *block_states;
    /* per block: the stack pointer of the path that showed the calls falling into it with another
     * one not to return (their fall-through edges are dropped from the restart on); unknown: none */
    fu_synth_value *block_entry_sp;
    uint8_t *block_flags;
    uint32_t *block_insn;
    /* per block: fu_synth_visit's bits of what joins changed in its state since its last walk or
     * its first state, and the judgment of its first instruction then (fu_synth_judge) */
    uint32_t *block_changed;
    fu_synth_judgment *block_judgments;
    uint32_t *worklist;
    uint32_t block_cap;
} fu_synth_scratch;

void fu_synth_scratch_free(fu_synth_scratch *scratch);

/* What differs between the state of a visit and the previous visit's (which the visitor may have
 * judged already): a bit per general-purpose register (1 << DWARF number) whose value differs (every
 * caller-saved one after a call), and bits of FU_SYNTH_CHANGED_SLOTS when the slots or what is known
 * of the others (slots_lost, unknown_stores) differ: FU_SYNTH_CHANGED_SLOT_FLAGS for those two,
 * FU_SYNTH_CHANGED_ALIGNED_SLOTS for slots of the realigned stack, fu_synth_changed_slot(offset) for
 * one of the entry stack's (a bit per bucket of offsets: the slots whose bit is clear are the same).
 * 0: the same state; FU_SYNTH_CHANGED_ALL: the first visit. At a block's first instruction, what
 * differs from the previous visit's state, whether or not the path of the previous visit runs into
 * the block. */
#define FU_SYNTH_CHANGED_SLOT_FLAGS (1u << FU_X86_GPR_COUNT)
#define FU_SYNTH_CHANGED_ALIGNED_SLOTS (1u << (FU_X86_GPR_COUNT + 1))
#define FU_SYNTH_CHANGED_SLOT_BUCKETS (32 - FU_X86_GPR_COUNT - 2)
#define FU_SYNTH_CHANGED_SLOTS (~0u << FU_X86_GPR_COUNT)
#define FU_SYNTH_CHANGED_ALL (~0u)
/* The bit of the entry stack's slot at entry rsp + `offset`: consecutive slots (the saves) have
 * bits of their own. */
static inline uint32_t fu_synth_changed_slot(int64_t offset)
{
    return 1u << (FU_X86_GPR_COUNT + 2 + (unsigned)(((uint64_t)offset >> 3) % FU_SYNTH_CHANGED_SLOT_BUCKETS));
}

/* Called before each reached instruction (`insn`: its element of scratch->insns), in address order,
 * with the state before it and what `changed` since the previous visit. Returning false stops the
 * walk (fu_synth_run then returns FU_SYNTH_STOPPED). */
typedef bool (*fu_synth_visit)(void *context, uint64_t address, const fu_x86_insn *insn,
                               const fu_synth_state *state, uint32_t changed);

typedef enum fu_synth_outcome {
    FU_SYNTH_DECIDED = 0,  /* every reached instruction was visited (and judged) */
    FU_SYNTH_UNDECIDED,    /* `reason` says why; nothing was visited */
    FU_SYNTH_STOPPED,      /* the visitor stopped */
    FU_SYNTH_NO_MEMORY
} fu_synth_outcome;

typedef struct fu_synth_counts {
    uint32_t instructions; /* decoded in the range */
    uint32_t reached;
    uint32_t blocks;
    uint32_t jump_tables;
    uint32_t assumed_noreturn; /* calls whose fall-through contradicted the code it falls into */
} fu_synth_counts;

/* The fixpoint (with function->judge's judgments), then, unless `visit` is NULL, the visit. */
fu_synth_outcome fu_synth_run(const fu_synth_function *function, fu_synth_scratch *scratch, fu_synth_visit visit,
                              void *context, fu_synth_counts *counts, char reason[FU_SYNTH_REASON_MAX]);

/* The state at a function's entry: rsp = entry rsp, the return address at [rsp], the callee-saved
 * registers holding the caller's values, and the others too with `caller_saved_values`, else
 * unknown. */
void fu_synth_entry_state(fu_synth_state *state, bool caller_saved_values);
/* Record `value` in the 8-byte slot at `address` (a stack address of `state`). */
void fu_synth_store(fu_synth_state *state, fu_synth_value address, fu_synth_value value);

/* The value of a stack slot in `state`: its recorded value, FU_VALUE_NEVER_WRITTEN for a slot of
 * this frame never written (below the entry rsp, or the return address slot overwritten), or
 * unknown (the caller's frame, a lost slot). `recorded` (NULL: not asked): whether the value is a
 * recorded slot's. */
fu_synth_value fu_synth_slot_value(const fu_synth_state *state, uint8_t space, int64_t offset, bool *recorded);

/* `value` + `delta` where that is an address or a constant; unknown otherwise. */
fu_synth_value fu_synth_value_add(fu_synth_value value, int64_t delta);
static inline bool fu_synth_value_equal(fu_synth_value a, fu_synth_value b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The columns a derived row has: the CFA, the callee-saved registers and the return address. */
#define FU_SYNTH_COLUMN_COUNT 7
extern const uint8_t fu_synth_columns[FU_SYNTH_COLUMN_COUNT]; /* 3 rbx, 6 rbp, 12-15, 16 ra */

/* The value `column` (a register column of fu_synth_columns, or the return address column) must
 * recover for the caller: the caller's value of the register, or the return address. */
static inline fu_synth_value fu_synth_column_value(unsigned column)
{
    fu_synth_value v = {.kind = column == FU_RETURN_ADDRESS_COLUMN ? FU_VALUE_RETURN_ADDRESS : FU_VALUE_ENTRY_REGISTER,
                        .reg = column == FU_RETURN_ADDRESS_COLUMN ? 0 : (uint8_t)column};
    return v;
}

/* A derived row in cfi.h's representation: the CFA as register + offset (FU_CFA_REG_OFFSET) or
 * FU_RULE_UNSPECIFIED when no register holds a known offset from it; per column of
 * fu_synth_columns, FU_RULE_SAME_VALUE, FU_RULE_OFFSET (saved at CFA + value) or FU_RULE_REGISTER,
 * FU_RULE_UNSPECIFIED where the caller's value was not found. */
typedef struct fu_synth_row {
    fu_rule cfa;
    fu_rule columns[FU_SYNTH_COLUMN_COUNT];
    /* caller-saved registers (bit per DWARF number) holding the caller's values (with
     * caller_saved_values: those the function never writes, nor a call it makes): a caller that
     * keeps its CFA in one across the call finds it there (DW_CFA_same_value) */
    uint16_t kept_caller_saved;
} fu_synth_row;

/* `preferred_cfa_register` (or FU_X86_REG_NONE): the register to express the CFA with when it
 * holds a known stack address (check.c passes the declared one, so that equal CFAs print alike);
 * else rsp, rbp, then any register that does. */
void fu_synth_derive_row(const fu_synth_state *state, unsigned preferred_cfa_register, fu_synth_row *row);

#endif
