/* synth: abstract interpretation of one function's machine code (see synth.h). */
#include "synth.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint8_t fu_synth_columns[FU_SYNTH_COLUMN_COUNT] = {FU_REG_RBX, FU_REG_RBP, FU_REG_R12, FU_REG_R13,
                                                           FU_REG_R14, FU_REG_R15, FU_RETURN_ADDRESS_COLUMN};

/* rax, rdx, rcx, rsi, rdi, r8-r11: a callee may change them (System V AMD64 ABI §3.2.1). */
#define CALLER_SAVED_MASK (((1u << FU_X86_GPR_COUNT) - 1) & ~FU_CALLEE_SAVED_MASK & ~(1u << FU_REG_RSP))

/* block_flags bits */
#define BLOCK_HAS_STATE 1u
#define BLOCK_QUEUED 2u
#define BLOCK_ONLY_CALL_FALLTHROUGH 4u /* every edge into it so far is the fall-through of a call */
#define BLOCK_JUDGED 8u /* block_judgments holds its first instruction's judgment */

static const fu_synth_value unknown_value = {.kind = FU_VALUE_UNKNOWN};

/* `step` runs ~17M times on libLLVM-14's check (every instruction of every walk): it and its small
 * helpers are inlined (into the walk and the visit) whatever the compiler's size estimate says. */
#define STEP_INLINE static inline __attribute__((always_inline))

/* Copy only the slots in use: a state is mostly its slot array. */
static void state_copy(fu_synth_state *dst, const fu_synth_state *src)
{
    memcpy(dst, src, offsetof(fu_synth_state, slots) + src->slot_count * sizeof src->slots[0]);
}

void fu_synth_scratch_free(fu_synth_scratch *scratch)
{
    free(scratch->insns);
    free(scratch->insn_offsets);
    free(scratch->block_of);
    free(scratch->branch_block);
    free(scratch->walked);
    free(scratch->judgments);
    free(scratch->direct_branches);
    free(scratch->naming);
    free(scratch->insn_at_offset);
    free(scratch->block_states);
    free(scratch->block_entry_sp);
    free(scratch->block_flags);
    free(scratch->block_insn);
    free(scratch->block_changed);
    free(scratch->block_judgments);
    free(scratch->worklist);
    memset(scratch, 0, sizeof *scratch);
}

/* Grow arrays that are indexed together to hold `need` elements each (fu_grow_array's doubling
 * from the same capacity gives every array the same new capacity); without `keep`, what they held
 * is not copied (new arrays: their pages are touched only as they are used). */
static bool grow_together(void **arrays[], const size_t item_sizes[], unsigned count, uint32_t *cap, uint64_t need,
                          bool keep)
{
    if (need <= *cap)
        return true;
    uint32_t grown = *cap;
    for (unsigned i = 0; i < count; i++) {
        if (!keep) {
            free(*arrays[i]);
            *arrays[i] = NULL;
        }
        grown = *cap;
        if (!fu_grow_array(arrays[i], &grown, need, item_sizes[i])) {
            if (!keep)
                *cap = 0; /* some arrays are gone: none holds anything */
            return false;
        }
    }
    *cap = grown;
    return true;
}

static bool reserve_insns(fu_synth_scratch *s, uint64_t need)
{
    void **arrays[] = {(void **)&s->insns, (void **)&s->insn_offsets, (void **)&s->block_of, (void **)&s->branch_block,
                       (void **)&s->walked, (void **)&s->judgments, (void **)&s->direct_branches, (void **)&s->naming};
    const size_t sizes[] = {sizeof *s->insns, sizeof *s->insn_offsets, sizeof *s->block_of, sizeof *s->branch_block,
                            sizeof *s->walked, sizeof *s->judgments, sizeof *s->direct_branches, sizeof *s->naming};
    return grow_together(arrays, sizes, 8, &s->insn_cap, need, true);
}

/* The offset map for a function of `size` bytes, its new part zeroed. */
static bool reserve_offsets(fu_synth_scratch *s, uint64_t size)
{
    uint32_t old_cap = s->offset_cap;
    if (!fu_grow_array((void **)&s->insn_at_offset, &s->offset_cap, size, sizeof *s->insn_at_offset))
        return false;
    memset(s->insn_at_offset + old_cap, 0, (size_t)(s->offset_cap - old_cap) * sizeof *s->insn_at_offset);
    return true;
}

static bool reserve_blocks(fu_synth_scratch *s, uint64_t need, bool keep)
{
    void **arrays[] = {(void **)&s->block_states, (void **)&s->block_entry_sp, (void **)&s->block_flags,
                       (void **)&s->block_insn, (void **)&s->worklist, (void **)&s->block_changed,
                       (void **)&s->block_judgments};
    const size_t sizes[] = {sizeof *s->block_states, sizeof *s->block_entry_sp, sizeof *s->block_flags,
                            sizeof *s->block_insn, sizeof *s->worklist, sizeof *s->block_changed,
                            sizeof *s->block_judgments};
    return grow_together(arrays, sizes, 7, &s->block_cap, need, keep);
}

/* ---- values and slots ------------------------------------------------------------------------- */

static fu_synth_value make_value(uint8_t kind, uint8_t reg, int64_t offset)
{
    fu_synth_value v = {.offset = offset, .kind = kind, .reg = reg};
    return v;
}

fu_synth_value fu_synth_value_add(fu_synth_value value, int64_t delta)
{
    switch (value.kind) {
    case FU_VALUE_ENTRY_STACK:
    case FU_VALUE_ALIGNED_STACK:
    case FU_VALUE_CONSTANT:
        value.offset = (int64_t)((uint64_t)value.offset + (uint64_t)delta);
        return value;
    default:
        return unknown_value;
    }
}

/* Stack addresses as slot keys; false for anything else. Offsets beyond ±2 GiB are not slots. */
static bool slot_key(fu_synth_value address, uint8_t *space, int32_t *offset)
{
    if (address.kind != FU_VALUE_ENTRY_STACK && address.kind != FU_VALUE_ALIGNED_STACK)
        return false;
    if (address.offset < INT32_MIN || address.offset > INT32_MAX)
        return false;
    *space = address.kind == FU_VALUE_ENTRY_STACK ? FU_SLOT_ENTRY_STACK : FU_SLOT_ALIGNED_STACK;
    *offset = (int32_t)address.offset;
    return true;
}

static int slot_compare(unsigned space_a, int32_t offset_a, unsigned space_b, int32_t offset_b)
{
    if (space_a != space_b)
        return space_a < space_b ? -1 : 1;
    return offset_a < offset_b ? -1 : offset_a > offset_b;
}

/* slot_compare's order as one number: the space above the offset's 32 bits. */
static inline int64_t slot_order(unsigned space, int32_t offset)
{
    return (int64_t)space * ((int64_t)1 << 32) + offset;
}

/* Index of the slot (space, offset), or -(insertion point) - 1. */
STEP_INLINE int slot_find(const fu_synth_state *s, uint8_t space, int32_t offset)
{
    const int64_t wanted = slot_order(space, offset);
    int lo = 0, hi = s->slot_count;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        int64_t order = slot_order(s->slots[mid].space, s->slots[mid].offset);
        if (order == wanted)
            return mid;
        if (order < wanted)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

fu_synth_value fu_synth_slot_value(const fu_synth_state *state, uint8_t space, int64_t offset, bool *recorded)
{
    if (offset >= INT32_MIN && offset <= INT32_MAX) {
        int i = slot_find(state, space, (int32_t)offset);
        if (recorded)
            *recorded = i >= 0;
        if (i >= 0)
            return state->slots[i].value;
    } else if (recorded) {
        *recorded = false;
    }
    /* the caller's frame (at and above the CFA) is not ours to know */
    if (state->slots_lost || state->unknown_stores || (space == FU_SLOT_ENTRY_STACK && offset >= 8))
        return unknown_value;
    return make_value(FU_VALUE_NEVER_WRITTEN, 0, 0);
}

STEP_INLINE fu_synth_value slot_load(const fu_synth_state *s, fu_synth_value address, unsigned width)
{
    uint8_t space;
    int32_t offset;
    if (width != 8 || !slot_key(address, &space, &offset))
        return unknown_value;
    int i = slot_find(s, space, offset);
    return i >= 0 ? s->slots[i].value : unknown_value;
}

/* Whether a value is worth a slot of its own: what an unwinder must find again (saved registers,
 * the return address, frame addresses). */
static bool value_is_tracked(fu_synth_value v)
{
    return v.kind == FU_VALUE_ENTRY_STACK || v.kind == FU_VALUE_ALIGNED_STACK || v.kind == FU_VALUE_RETURN_ADDRESS ||
           (v.kind == FU_VALUE_ENTRY_REGISTER && !(CALLER_SAVED_MASK & (1u << v.reg)));
}

/* Set a slot's value; whether that changed it. */
static bool slot_set(fu_synth_slot *slot, fu_synth_value value)
{
    bool changed = !fu_synth_value_equal(slot->value, value);
    slot->value = value;
    return changed;
}

/* Store `width` bytes of `value` at `address`. Overlapped slots become unknown (or take the value
 * when the store is exactly theirs); a new slot is recorded for a tracked value, or when `record`
 * (an 8-byte store of a callee-saved register whose value is lost: the CFI may name the slot).
 * Whether the slots (or slots_lost) changed. */
static bool slot_store(fu_synth_state *s, fu_synth_value address, unsigned width, fu_synth_value value, bool record)
{
    uint8_t space;
    int32_t offset;
    if (!slot_key(address, &space, &offset))
        return false;
    bool exact = false, changed = false;
    /* the slots are sorted: those wholly below the store come first, then those it meets */
    unsigned i = 0;
    while (i < s->slot_count && (s->slots[i].space < space ||
                                 (s->slots[i].space == space && (int64_t)s->slots[i].offset + 8 <= offset)))
        i++;
    for (; i < s->slot_count && s->slots[i].space == space && s->slots[i].offset < (int64_t)offset + width; i++) {
        fu_synth_slot *slot = &s->slots[i];
        exact |= slot->offset == offset && width == 8;
        changed |= slot_set(slot, slot->offset == offset && width == 8 ? value : unknown_value);
    }
    if (exact || width != 8 || (!value_is_tracked(value) && !record))
        return changed;
    if (s->slot_count >= FU_SYNTH_MAX_SLOTS) {
        changed |= !s->slots_lost;
        s->slots_lost = true;
        return changed;
    }
    int at = -slot_find(s, space, offset) - 1;
    memmove(&s->slots[at + 1], &s->slots[at], (size_t)(s->slot_count - at) * sizeof s->slots[0]);
    s->slots[at].space = space;
    s->slots[at].offset = offset;
    s->slots[at].value = value;
    s->slot_count++;
    return true;
}

void fu_synth_store(fu_synth_state *state, fu_synth_value address, fu_synth_value value)
{
    slot_store(state, address, 8, value, true);
}

/* Bytes a `rep` store with a known count is followed for; more is an unknown extent. */
#define REPEATED_STORE_MAX_BYTES (1 << 20)
/* The least an xsave-family area takes (the legacy region and the header, Intel SDM vol. 1 §13.4);
 * its size beyond depends on the features the machine enables. */
#define MACHINE_SIZED_AREA_MIN_BYTES 576

/* The slots of `space` that meet [low, high) become unknown; whether one changed. */
static bool slot_clobber_range(fu_synth_state *s, uint8_t space, int64_t low, int64_t high)
{
    bool changed = false;
    for (unsigned i = 0; i < s->slot_count; i++) {
        fu_synth_slot *slot = &s->slots[i];
        if (slot->space > space || (slot->space == space && slot->offset >= high))
            break; /* sorted: the rest lie above */
        if (slot->space == space && (int64_t)slot->offset + 8 > low)
            changed |= slot_set(slot, unknown_value);
    }
    return changed;
}

/* A store of `value`, `width` bytes at `address` (0: an xsave area, of a size the machine decides;
 * `repeats`: rcx times). Memory the store may reach without the state knowing where (an unknown
 * address, an unknown count, the machine's part of an area) is memory the program addresses: it may
 * be any unrecorded slot of this frame (fu_synth_state.unknown_stores). Whether the slots or what
 * is known of the others changed. */
static bool store_to(fu_synth_state *s, fu_synth_value address, unsigned width, bool repeats, fu_synth_value value,
                     bool record)
{
    uint8_t space;
    int32_t offset;
    if (!slot_key(address, &space, &offset)) {
        if (address.kind != FU_VALUE_UNKNOWN || s->unknown_stores)
            return false;
        s->unknown_stores = true;
        return true;
    }
    if (!repeats && width)
        return slot_store(s, address, width, value, record);
    fu_synth_value count = s->regs[FU_REG_RCX];
    if (repeats && count.kind == FU_VALUE_CONSTANT && count.offset >= 0 &&
        count.offset <= REPEATED_STORE_MAX_BYTES / (int64_t)width) {
        /* the direction flag is not tracked: the count's bytes either way from the first element */
        int64_t bytes = count.offset * (int64_t)width;
        return slot_clobber_range(s, space, offset - bytes + (int64_t)width, offset + bytes);
    }
    bool changed = slot_clobber_range(s, space, offset, (int64_t)offset + (repeats ? width : MACHINE_SIZED_AREA_MIN_BYTES));
    changed |= !s->unknown_stores;
    s->unknown_stores = true;
    return changed;
}

/* A call: the callee may write anything below the stack pointer (its return address first), and the
 * caller-saved registers but those of `kept_registers` (shown untouched by the callee's code).
 * Whether slots were dropped. */
static bool clobber_for_call(fu_synth_state *s, uint16_t kept_registers)
{
    fu_synth_value sp = s->regs[FU_REG_RSP];
    bool changed = false;
    if (sp.kind == FU_VALUE_ENTRY_STACK || sp.kind == FU_VALUE_ALIGNED_STACK) {
        /* sorted: the slots of rsp's space below it are a run at the start of that space's */
        uint8_t space = sp.kind == FU_VALUE_ENTRY_STACK ? FU_SLOT_ENTRY_STACK : FU_SLOT_ALIGNED_STACK;
        unsigned first = 0;
        while (first < s->slot_count && s->slots[first].space < space)
            first++;
        unsigned end = first;
        while (end < s->slot_count && s->slots[end].space == space && s->slots[end].offset < sp.offset)
            end++;
        if (end > first) {
            memmove(&s->slots[first], &s->slots[end], (s->slot_count - end) * sizeof s->slots[0]);
            s->slot_count = (uint8_t)(s->slot_count - (end - first));
            changed = true;
        }
    }
    if (!kept_registers) { /* most calls: the same registers each time, stored without a loop */
#pragma GCC unroll 16
        for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++) {
            if (CALLER_SAVED_MASK >> r & 1)
                s->regs[r] = unknown_value;
        }
    } else {
        for (unsigned m = CALLER_SAVED_MASK & ~(unsigned)kept_registers; m; m &= m - 1)
            s->regs[__builtin_ctz(m)] = unknown_value;
    }
    return changed;
}

void fu_synth_entry_state(fu_synth_state *s, bool caller_saved_values)
{
    memset(s, 0, offsetof(fu_synth_state, slots) + sizeof s->slots[0]); /* the slots in use */
    /* The caller-saved ones only on request: a caller may keep its CFA in one across a call to code
     * that leaves it alone (fu_synth_row.kept_caller_saved). */
    for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++)
        if (caller_saved_values || !(CALLER_SAVED_MASK & (1u << r)))
            s->regs[r] = make_value(FU_VALUE_ENTRY_REGISTER, (uint8_t)r, 0);
    s->regs[FU_REG_RSP] = make_value(FU_VALUE_ENTRY_STACK, 0, 0);
    s->slot_count = 1;
    s->slots[0].space = FU_SLOT_ENTRY_STACK;
    s->slots[0].offset = 0;
    s->slots[0].value = make_value(FU_VALUE_RETURN_ADDRESS, 0, 0);
}

/* ---- one instruction -------------------------------------------------------------------------- */

typedef struct synth_jump_table {
    uint32_t insn;        /* the indirect jump */
    unsigned entry_size;  /* 4: offsets from base; 8: addresses */
    uint64_t table, base;
    uint64_t bound;       /* entries, from the `cmp; ja` before the jump; 0 if unknown */
} synth_jump_table;

/* The function-wide facts the walk needs. */
typedef struct synth_run {
    const fu_synth_function *function;
    fu_synth_scratch *scratch;
    uint32_t insn_count;
    /* the realignment: the entry-relative rsp and the mask of the `and` that defines the aligned
     * space; a second, different realignment is not tracked */
    bool has_alignment;
    int64_t alignment_from;
    int64_t alignment_mask;
    char *reason;
    fu_synth_counts *counts;
    bool restart;
    bool out_of_memory;
    /* the registers direct calls' callees may write (callee_writes), by callee */
    uint32_t callee_count;
    struct {
        uint64_t target;
        uint16_t writes;
    } callees[FU_SYNTH_MAX_CALLEES];
    bool has_indirect_jump; /* jump tables are looked for (and their bounds tracked) only then */
    uint32_t direct_branch_count; /* scratch->direct_branches */
    uint32_t jump_table_count;
    uint32_t table_base_count;
    /* last: left uninitialized past their counts */
    synth_jump_table jump_tables[FU_SYNTH_MAX_JUMP_TABLES];
    int32_t table_bases[FU_SYNTH_MAX_TABLE_BASES]; /* FU_VALUE_TABLE_TARGET's distances, by number */
} synth_run;

STEP_INLINE fu_synth_value address_of(const fu_synth_state *s, const fu_x86_operand *m, uint64_t next_address)
{
    if (m->kind != FU_X86_OPERAND_MEMORY || m->segment || m->index != FU_X86_REG_NONE || m->untracked_address)
        return unknown_value;
    if (m->reg == FU_X86_REG_RIP)
        return make_value(FU_VALUE_CONSTANT, 0, (int64_t)(next_address + (uint64_t)m->value));
    if (m->reg >= FU_X86_GPR_COUNT)
        return m->reg == FU_X86_REG_NONE ? make_value(FU_VALUE_CONSTANT, 0, m->value) : unknown_value;
    return fu_synth_value_add(s->regs[m->reg], m->value);
}

/* The value of a source operand of `width` bytes. */
STEP_INLINE fu_synth_value source_value(const fu_synth_state *s, const fu_x86_operand *o, unsigned width,
                                        uint64_t next_address)
{
    switch (o->kind) {
    case FU_X86_OPERAND_REGISTER:
        return width == 8 && o->width == 8 ? s->regs[o->reg] : unknown_value;
    case FU_X86_OPERAND_IMMEDIATE:
        return make_value(FU_VALUE_CONSTANT, 0, o->value);
    case FU_X86_OPERAND_MEMORY:
        if (o->sign_extends && o->width == 4 && !o->segment && o->index != FU_X86_REG_NONE && o->scale == 4 &&
            o->value == 0 && o->reg < FU_X86_GPR_COUNT && s->regs[o->reg].kind == FU_VALUE_CONSTANT)
            return make_value(FU_VALUE_TABLE_ENTRY, 0, s->regs[o->reg].offset); /* movslq (T,idx,4) */
        return slot_load(s, address_of(s, o, next_address), o->width);
    default:
        return unknown_value;
    }
}

/* A table entry plus the base it counts from (`add` or `lea (%T,%entry)`): the jump-table target,
 * the base's distance from the table numbered among the function's (so that a value fits 10 bytes);
 * unknown for other operands. */
static fu_synth_value table_target(synth_run *run, fu_synth_value a, fu_synth_value b)
{
    if (a.kind == FU_VALUE_CONSTANT && b.kind == FU_VALUE_TABLE_ENTRY) {
        fu_synth_value t = a;
        a = b;
        b = t;
    }
    int64_t delta = (int64_t)((uint64_t)b.offset - (uint64_t)a.offset);
    if (a.kind != FU_VALUE_TABLE_ENTRY || b.kind != FU_VALUE_CONSTANT || delta < INT32_MIN || delta > INT32_MAX)
        return unknown_value;
    uint32_t k = 0;
    while (k < run->table_base_count && run->table_bases[k] != delta)
        k++;
    if (k == run->table_base_count) {
        if (k == FU_SYNTH_MAX_TABLE_BASES)
            return unknown_value;
        run->table_bases[run->table_base_count++] = (int32_t)delta;
    }
    return make_value(FU_VALUE_TABLE_TARGET, (uint8_t)k, a.offset);
}

static bool clobber(fu_synth_state *s, const fu_x86_insn *insn, uint64_t next_address)
{
    /* the address and count from the registers before the instruction writes them (`stos`: rdi, rcx) */
    bool changed = insn->stores &&
                   store_to(s, address_of(s, &insn->dest, next_address), insn->dest.width, insn->repeats, unknown_value, false);
    for (unsigned m = insn->writes; m; m &= m - 1)
        s->regs[__builtin_ctz(m)] = unknown_value;
    return changed;
}

static bool is_noreturn(const fu_synth_function *f, uint64_t target);

/* Where the code from `address` on is to be read: the executable segment holding it, or NULL. */
static const uint8_t *code_at(const fu_synth_function *f, uint64_t address, uint64_t *available)
{
    const fu_image_segment *seg = fu_image_segment_holding(f->code_segments, f->code_segment_count, address, 1);
    if (!seg)
        return NULL;
    *available = seg->vaddr + seg->size - address;
    return seg->data + (address - seg->vaddr);
}

/* The registers the code a direct call reaches may write before it returns: every instruction
 * from `target` on, following both ways of each branch and the targets of its own direct calls,
 * up to each path's ret, trap or call to a known noreturn function. Every general-purpose register
 * (as the psABI allows a callee) when the code is not all there to read: an indirect branch, bytes
 * that do not decode, code outside the executable segments, or more than the limits. */
static uint16_t scan_callee(synth_run *run, uint64_t target)
{
    const fu_synth_function *f = run->function;
    const uint16_t every = (uint16_t)((1u << FU_X86_GPR_COUNT) - 1);
    uint64_t starts[FU_SYNTH_MAX_CALLEE_PATHS];
    unsigned start_count = 0;
    uint32_t decoded = 0;
    uint16_t writes = 0;
    starts[start_count++] = target;
    for (unsigned next = 0; next < start_count; next++) {
        for (uint64_t address = starts[next];;) {
            uint64_t available;
            const uint8_t *code = code_at(f, address, &available);
            if (!code || ++decoded > FU_SYNTH_MAX_CALLEE_INSTRUCTIONS)
                return every;
            fu_x86_insn insn;
            fu_x86_decode(&run->scratch->decoder, code, (size_t)available, address, &insn);
            if (insn.kind == FU_X86_INVALID)
                return every;
            writes |= insn.writes;
            bool path_ends = insn.kind == FU_X86_RET || insn.kind == FU_X86_TRAP || insn.kind == FU_X86_JMP;
            if ((insn.kind == FU_X86_JMP || insn.kind == FU_X86_JCC || insn.kind == FU_X86_CALL) &&
                !fu_x86_is_get_pc(&insn, address)) {
                if (!insn.has_target)
                    return every;
                if (insn.kind == FU_X86_CALL && is_noreturn(f, insn.target))
                    path_ends = true;
                bool known = false;
                for (unsigned k = 0; k < start_count && !known; k++)
                    known = starts[k] == insn.target;
                if (!known) {
                    if (start_count == FU_SYNTH_MAX_CALLEE_PATHS)
                        return every;
                    starts[start_count++] = insn.target;
                }
            }
            if (path_ends)
                break;
            address += insn.length;
        }
    }
    return writes;
}

/* scan_callee's answer for `target`, remembered for the function's other calls to it and the
 * fixpoint's later walks. */
static uint16_t callee_writes(synth_run *run, uint64_t target)
{
    for (uint32_t k = 0; k < run->callee_count; k++)
        if (run->callees[k].target == target)
            return run->callees[k].writes;
    uint16_t writes = scan_callee(run, target);
    if (run->callee_count < FU_SYNTH_MAX_CALLEES) {
        run->callees[run->callee_count].target = target;
        run->callees[run->callee_count++].writes = writes;
    }
    return writes;
}

/* The caller-saved registers a call leaves as they are: those holding the frame's address where
 * nothing else the call keeps does (rsp realigned, no callee-saved register holding an entry-stack
 * address: x264's functions that realign the stack keep the entry rsp in rcx or rax across calls to
 * their helpers), if the callee's code never writes them. Other values are dropped as the psABI
 * allows: only the CFA is worth the scan, and compilers' code (a local's address passed in rdi,
 * frames kept in rbp) never asks for it. */
static uint16_t kept_across_call(synth_run *run, const fu_synth_state *s, const fu_x86_insn *insn)
{
    if (s->regs[FU_REG_RSP].kind == FU_VALUE_ENTRY_STACK)
        return 0; /* most calls: rsp gives the CFA after the call */
    uint16_t addresses = 0;
    for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++) {
        if (s->regs[r].kind != FU_VALUE_ENTRY_STACK)
            continue;
        if (!(CALLER_SAVED_MASK & (1u << r)))
            return 0; /* rsp or a callee-saved register gives the CFA after the call */
        addresses |= (uint16_t)(1u << r);
    }
    if (!addresses || !insn->has_target)
        return 0;
    return addresses & (uint16_t)~callee_writes(run, insn->target);
}

static bool is_callee_saved(unsigned reg)
{
    return reg < FU_X86_GPR_COUNT && reg != FU_REG_RSP && !(CALLER_SAVED_MASK & (1u << reg));
}

/* Apply `insn` to `s` (control flow is the caller's business; a call's effect on registers is here).
 * Whether the slots or what is known of the others changed. */
STEP_INLINE bool step(synth_run *run, fu_synth_state *s, const fu_x86_insn *insn, uint64_t address)
{
    uint64_t next = address + insn->length;
    fu_synth_value *rsp = &s->regs[FU_REG_RSP];
    const fu_x86_operand *dest = &insn->dest, *source = &insn->source;
    bool dest_is_reg64 = dest->kind == FU_X86_OPERAND_REGISTER && dest->width == 8;
    switch (insn->kind) {
    case FU_X86_PUSH: {
        unsigned width = source->width ? source->width : 8;
        fu_synth_value v = source_value(s, source, width, next);
        *rsp = fu_synth_value_add(*rsp, -(int64_t)width);
        return slot_store(s, *rsp, width, v, source->kind == FU_X86_OPERAND_REGISTER && is_callee_saved(source->reg));
    }
    case FU_X86_POP: {
        unsigned width = dest->width ? dest->width : 8;
        fu_synth_value v = slot_load(s, *rsp, width);
        *rsp = fu_synth_value_add(*rsp, width);
        if (dest->kind == FU_X86_OPERAND_REGISTER)
            s->regs[dest->reg] = width == 8 ? v : unknown_value;
        else if (dest->kind == FU_X86_OPERAND_MEMORY) /* its address computed with rsp already raised (SDM) */
            return store_to(s, address_of(s, dest, next), width, false, v, false);
        return false;
    }
    case FU_X86_LEAVE:
        *rsp = s->regs[FU_REG_RBP];
        s->regs[FU_REG_RBP] = slot_load(s, *rsp, 8);
        *rsp = fu_synth_value_add(*rsp, 8);
        return false;
    case FU_X86_ENTER: {
        if (dest->value != 0) { /* nesting levels copy frame pointers: not emitted by compilers */
            s->regs[FU_REG_RBP] = *rsp = unknown_value;
            return false;
        }
        *rsp = fu_synth_value_add(*rsp, -8);
        bool changed = slot_store(s, *rsp, 8, s->regs[FU_REG_RBP], true);
        s->regs[FU_REG_RBP] = *rsp;
        *rsp = fu_synth_value_add(*rsp, -(int64_t)(uint16_t)source->value);
        return changed;
    }
    case FU_X86_MOV:
        if (dest_is_reg64) {
            s->regs[dest->reg] = source_value(s, source, 8, next);
            return false;
        }
        if (dest->kind == FU_X86_OPERAND_MEMORY) {
            unsigned width = dest->width ? dest->width : 8;
            fu_synth_value v = source_value(s, source, width, next);
            bool record = width == 8 && source->kind == FU_X86_OPERAND_REGISTER && is_callee_saved(source->reg);
            return store_to(s, address_of(s, dest, next), width, false, v, record);
        }
        /* a 32-bit immediate zero-extends: a count for `rep` stores (`mov $N,%ecx; rep stos`) */
        if (dest->kind == FU_X86_OPERAND_REGISTER && dest->width == 4 && source->kind == FU_X86_OPERAND_IMMEDIATE) {
            s->regs[dest->reg] = make_value(FU_VALUE_CONSTANT, 0, (int64_t)(uint32_t)source->value);
            return false;
        }
        break;
    case FU_X86_LEA:
        if (dest_is_reg64) {
            /* `lea (%T,%entry), %r`: a jump-table target computed as clang and glibc's assembly do */
            if (source->kind == FU_X86_OPERAND_MEMORY && !source->segment && source->scale == 1 && source->value == 0 &&
                source->reg < FU_X86_GPR_COUNT && source->index < FU_X86_GPR_COUNT) {
                s->regs[dest->reg] = table_target(run, s->regs[source->reg], s->regs[source->index]);
                return false;
            }
            s->regs[dest->reg] = address_of(s, source, next);
            return false;
        }
        break;
    case FU_X86_ADD:
    case FU_X86_SUB:
        if (dest_is_reg64) {
            fu_synth_value *d = &s->regs[dest->reg];
            if (source->kind == FU_X86_OPERAND_IMMEDIATE) {
                *d = fu_synth_value_add(*d, insn->kind == FU_X86_ADD ? source->value : -source->value);
                return false;
            }
            if (insn->kind == FU_X86_ADD && source->kind == FU_X86_OPERAND_REGISTER && source->width == 8) {
                *d = table_target(run, *d, s->regs[source->reg]);
                return false;
            }
            *d = unknown_value;
            return false;
        }
        break;
    case FU_X86_AND:
        if (dest_is_reg64 && dest->reg == FU_REG_RSP && source->kind == FU_X86_OPERAND_IMMEDIATE &&
            rsp->kind == FU_VALUE_ENTRY_STACK) {
            /* the realigned stack: a space of its own, anchored where this `and` leaves rsp */
            if (!run->has_alignment) {
                run->has_alignment = true;
                run->alignment_from = rsp->offset;
                run->alignment_mask = source->value;
            }
            if (run->alignment_from == rsp->offset && run->alignment_mask == source->value)
                *rsp = make_value(FU_VALUE_ALIGNED_STACK, 0, 0);
            else
                *rsp = unknown_value;
            return false;
        }
        break;
    case FU_X86_XCHG:
        if (dest_is_reg64 && source->kind == FU_X86_OPERAND_REGISTER && source->width == 8) {
            fu_synth_value t = s->regs[dest->reg];
            s->regs[dest->reg] = s->regs[source->reg];
            s->regs[source->reg] = t;
            return false;
        }
        break;
    case FU_X86_CALL:
        if (fu_x86_is_get_pc(insn, address)) {
            *rsp = fu_synth_value_add(*rsp, -8);
            return slot_store(s, *rsp, 8, make_value(FU_VALUE_CONSTANT, 0, (int64_t)next), false);
        }
        return clobber_for_call(s, kept_across_call(run, s, insn));
    case FU_X86_CMP: /* only the flags */
        return false;
    case FU_X86_JMP: case FU_X86_JCC: case FU_X86_RET: case FU_X86_TRAP: case FU_X86_INVALID:
        return false;
    default:
        break;
    }
    return clobber(s, insn, next);
}

/* ---- the control-flow graph ------------------------------------------------------------------- */

/* 1 + the index of the decoded instruction that starts at `offset`, 0 if none does. The offset map
 * is not cleared between runs: an entry counts only where the instruction it names starts there. */
static uint32_t insn_starting_at(const synth_run *run, uint32_t offset)
{
    uint32_t k = run->scratch->insn_at_offset[offset];
    return k && k <= run->insn_count && run->scratch->insn_offsets[k - 1] == offset ? k : 0;
}

static int64_t insn_index_inside(const synth_run *run, uint64_t address, uint32_t offset);

/* The index of the instruction at `address`: -1 outside the function, -2 inside an instruction.
 * Inline (2.4M branch targets and call sites on libLLVM-14's check): the rest is insn_index_inside. */
static inline int64_t insn_index_at(const synth_run *run, uint64_t address)
{
    const fu_synth_function *f = run->function;
    if (address < f->start || address >= f->end)
        return -1;
    uint32_t offset = (uint32_t)(address - f->start);
    uint32_t starting = insn_starting_at(run, offset);
    return starting ? starting - 1 : insn_index_inside(run, address, offset);
}

/* insn_index_at where no instruction starts at `address` (`offset` into the function). */
static __attribute__((noinline)) int64_t insn_index_inside(const synth_run *run, uint64_t address, uint32_t offset)
{
    const fu_synth_function *f = run->function;
    /* A jump over `lock` prefixes (glibc's `je 0f; lock; 0: cmpxchg`) lands inside the instruction
     * with them: the same instruction without them, which is the same to the interpreter. Any other
     * prefix skipped (REX.W, 0x66, 0x67) changes what the instruction does. */
    uint32_t before = 1;
    while (before < FU_X86_MAX_INSN_LENGTH && before <= offset && !insn_starting_at(run, offset - before))
        before++;
    if (before < FU_X86_MAX_INSN_LENGTH && before <= offset) {
        uint32_t containing = insn_starting_at(run, offset - before) - 1;
        uint32_t end = offset - before + run->scratch->insns[containing].length;
        if (end <= offset)
            return -2;
        for (uint32_t k = offset - before; k < offset; k++)
            if (f->code[k] != 0xf0)
                return -2;
        fu_x86_insn alone;
        fu_x86_decode(&run->scratch->decoder, f->code + offset, end - offset, address, &alone);
        if (alone.kind != FU_X86_INVALID && offset + alone.length == end &&
            alone.kind == run->scratch->insns[containing].kind)
            return containing;
    }
    return -2;
}

static uint64_t insn_address(const synth_run *run, uint32_t index)
{
    return run->function->start + run->scratch->insn_offsets[index];
}

static bool is_noreturn(const fu_synth_function *f, uint64_t target)
{
    size_t lo = 0, hi = f->noreturn_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->noreturn[mid] < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < f->noreturn_count && f->noreturn[lo] == target;
}

/* The block starting at instruction `index`, created if needed; -1 past FU_SYNTH_MAX_BLOCKS. */
static int64_t new_block(synth_run *run, uint32_t index);

/* The block starting at instruction `index`, made if there is none yet (-1: too many blocks, or out
 * of memory). Inline: most of its calls find one. */
static inline int64_t block_at(synth_run *run, uint32_t index)
{
    int32_t b = run->scratch->block_of[index];
    return b >= 0 ? b : new_block(run, index);
}

static __attribute__((noinline)) int64_t new_block(synth_run *run, uint32_t index)
{
    fu_synth_scratch *sc = run->scratch;
    if (run->counts->blocks >= FU_SYNTH_MAX_BLOCKS) {
        snprintf(run->reason, FU_SYNTH_REASON_MAX, "more than %u basic blocks (FU_SYNTH_MAX_BLOCKS)",
                 FU_SYNTH_MAX_BLOCKS);
        return -1;
    }
    if (run->counts->blocks >= sc->block_cap && !reserve_blocks(sc, (uint64_t)run->counts->blocks + 1, true)) {
        run->out_of_memory = true;
        return -1;
    }
    uint32_t b = run->counts->blocks++;
    sc->block_of[index] = (int32_t)b;
    sc->block_flags[b] = 0;
    sc->block_entry_sp[b] = unknown_value;
    sc->block_insn[b] = index;
    sc->block_changed[b] = 0;
    if (sc->walked[index])
        run->restart = true;
    return b;
}

typedef enum edge_kind { EDGE_BRANCH, EDGE_CALL_FALLTHROUGH } edge_kind;

/* A walk's judgment in hand (fu_synth_judge), and what changed since it was made. */
typedef struct walk_judgment {
    fu_synth_judgment judgment;
    uint32_t changed;
} walk_judgment;

static void describe_sp(char *out, size_t size, fu_synth_value v)
{
    long long from_cfa;
    if (v.kind == FU_VALUE_ENTRY_STACK && !__builtin_sub_overflow(v.offset, 8, &from_cfa))
        snprintf(out, size, "CFA%+lld", from_cfa);
    else if (v.kind == FU_VALUE_ALIGNED_STACK)
        snprintf(out, size, "aligned%+lld", (long long)v.offset);
    else
        snprintf(out, size, "unknown");
}

/* The `changed` bit of a slot (fu_synth_visit). */
static uint32_t slot_changed(const fu_synth_slot *slot)
{
    return slot->space == FU_SLOT_ENTRY_STACK ? fu_synth_changed_slot(slot->offset) : FU_SYNTH_CHANGED_ALIGNED_SLOTS;
}

/* Join the slots of `in` into those of `s` (both sorted): kept where both paths hold the same value,
 * unknown where they differ or only one path wrote them. A slot only `in` holds is recorded as
 * unknown if there is room beside the slots of `s` (which must stay: the saves and the return
 * address), else `*lost` is set. Returns the `changed` bits of the slots that changed. */
static uint32_t join_slots(fu_synth_state *s, const fu_synth_state *in, bool *lost)
{
    uint32_t changed = 0;
    unsigned i = 0, j = 0;
    /* in place while `in` holds no slot that `s` lacks (most joins) */
    for (; i < s->slot_count; i++) {
        fu_synth_slot *slot = &s->slots[i];
        int c = j < in->slot_count ? slot_compare(slot->space, slot->offset, in->slots[j].space, in->slots[j].offset) : -1;
        if (c > 0)
            break;
        if (slot->value.kind != FU_VALUE_UNKNOWN && (c < 0 || !fu_synth_value_equal(slot->value, in->slots[j].value))) {
            slot->value = unknown_value;
            changed |= slot_changed(slot);
        }
        j += c == 0;
    }
    if (j == in->slot_count)
        return changed;
    /* from the first slot only `in` holds: the rest merged into a new array */
    const unsigned kept = i;
    fu_synth_slot joined[FU_SYNTH_MAX_SLOTS];
    unsigned n = 0;
    while (i < s->slot_count || j < in->slot_count) {
        int c = i < s->slot_count && j < in->slot_count
                    ? slot_compare(s->slots[i].space, s->slots[i].offset, in->slots[j].space, in->slots[j].offset)
                    : (i < s->slot_count ? -1 : 1);
        fu_synth_slot slot;
        if (c <= 0) {
            slot = s->slots[i];
            if (slot.value.kind != FU_VALUE_UNKNOWN && (c < 0 || !fu_synth_value_equal(slot.value, in->slots[j].value))) {
                slot.value = unknown_value;
                changed |= slot_changed(&slot);
            }
            i++;
            j += c == 0;
        } else {
            slot = in->slots[j++];
            slot.value = unknown_value;
            if (kept + n + (s->slot_count - i) >= FU_SYNTH_MAX_SLOTS) {
                *lost = true;
                continue;
            }
            changed |= slot_changed(&slot);
        }
        joined[n++] = slot;
    }
    memcpy(s->slots + kept, joined, n * sizeof joined[0]);
    s->slot_count = (uint8_t)(kept + n);
    return changed;
}

/* Join `in` into block b's state (queued when it changes); false when the stack pointers disagree.
 * `judged` (NULL: none), the judgment of the walk that brings `in`: a first state inherits it. */
static bool merge(synth_run *run, uint32_t b, const fu_synth_state *in, const walk_judgment *judged, edge_kind edge,
                  uint32_t *queue_len)
{
    fu_synth_scratch *sc = run->scratch;
    fu_synth_state *s = &sc->block_states[b];
    uint8_t *flags = &sc->block_flags[b];
    uint32_t changed = 0; /* fu_synth_visit's bits: what the join changed */
    fu_synth_value known_sp = sc->block_entry_sp[b];
    if (edge == EDGE_CALL_FALLTHROUGH && known_sp.kind != FU_VALUE_UNKNOWN &&
        in->regs[FU_REG_RSP].kind != FU_VALUE_UNKNOWN && !fu_synth_value_equal(in->regs[FU_REG_RSP], known_sp)) {
        run->counts->assumed_noreturn++; /* found on an earlier run: the call does not return */
        return true;
    }
    if (!(*flags & BLOCK_HAS_STATE)) {
        state_copy(s, in);
        *flags |= BLOCK_HAS_STATE | (edge == EDGE_CALL_FALLTHROUGH ? BLOCK_ONLY_CALL_FALLTHROUGH : 0);
        if (judged && judged->judgment.until) {
            sc->block_judgments[b] = judged->judgment;
            sc->block_changed[b] = judged->changed;
            *flags |= BLOCK_JUDGED;
        }
        if (!(*flags & BLOCK_QUEUED)) {
            *flags |= BLOCK_QUEUED;
            sc->worklist[(*queue_len)++] = b;
        }
        return true;
    } else {
        fu_synth_value old_sp = s->regs[FU_REG_RSP], new_sp = in->regs[FU_REG_RSP];
        if (!fu_synth_value_equal(old_sp, new_sp) && old_sp.kind != FU_VALUE_UNKNOWN &&
            new_sp.kind != FU_VALUE_UNKNOWN) {
            /* A call the list of noreturn functions missed falls into code laid out after it for
             * another path: the path that is not a call's fall-through wins. When the fall-through
             * came first, what it joined into the blocks after this one is wrong: the fixpoint runs
             * again, dropping those edges from the start (so the result does not depend on the
             * order of the walk). */
            if (edge == EDGE_CALL_FALLTHROUGH) {
                run->counts->assumed_noreturn++;
                return true;
            }
            if (*flags & BLOCK_ONLY_CALL_FALLTHROUGH) {
                run->counts->assumed_noreturn++;
                sc->block_entry_sp[b] = new_sp;
                run->restart = true;
                state_copy(s, in);
                *flags &= (uint8_t)~BLOCK_ONLY_CALL_FALLTHROUGH;
                changed |= FU_SYNTH_CHANGED_ALL;
                goto queue;
            }
            /* with the same frame pointer on both paths the CFA stays known through it */
            fu_synth_value fp_old = s->regs[FU_REG_RBP], fp_new = in->regs[FU_REG_RBP];
            if (!(fu_synth_value_equal(fp_old, fp_new) &&
                  (fp_old.kind == FU_VALUE_ENTRY_STACK || fp_old.kind == FU_VALUE_ALIGNED_STACK))) {
                char a[24], c[24];
                describe_sp(a, sizeof a, old_sp);
                describe_sp(c, sizeof c, new_sp);
                snprintf(run->reason, FU_SYNTH_REASON_MAX,
                         "paths meet at 0x%llx with different stack pointers (rsp = %s and %s)",
                         (unsigned long long)insn_address(run, sc->block_insn[b]), a, c);
                return false;
            }
        }
        if (edge != EDGE_CALL_FALLTHROUGH && (*flags & BLOCK_ONLY_CALL_FALLTHROUGH))
            *flags &= (uint8_t)~BLOCK_ONLY_CALL_FALLTHROUGH;
        /* equal bytes are equal values: most joins */
        if (memcmp(s->regs, in->regs, sizeof s->regs) != 0)
#pragma GCC unroll 16
            for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++)
                if (s->regs[r].kind != FU_VALUE_UNKNOWN && !fu_synth_value_equal(s->regs[r], in->regs[r])) {
                    s->regs[r] = unknown_value;
                    changed |= 1u << r;
                }
        if (in->unknown_stores && !s->unknown_stores) {
            s->unknown_stores = true;
            changed |= FU_SYNTH_CHANGED_SLOT_FLAGS;
        }
        bool lost = s->slots_lost || in->slots_lost;
        if (s->slot_count != in->slot_count || memcmp(s->slots, in->slots, s->slot_count * sizeof s->slots[0]) != 0)
            changed |= join_slots(s, in, &lost);
        if (lost != s->slots_lost) {
            s->slots_lost = lost;
            changed |= FU_SYNTH_CHANGED_SLOT_FLAGS;
        }
    }
queue:
    sc->block_changed[b] |= changed;
    if (changed && !(*flags & BLOCK_QUEUED)) {
        *flags |= BLOCK_QUEUED;
        sc->worklist[(*queue_len)++] = b;
    }
    return true;
}

/* Read `size` bytes at svma `address` from the image; false if no segment holds them. */
static bool read_image(const fu_synth_function *f, uint64_t address, unsigned size, uint64_t *out)
{
    const fu_image_segment *seg = fu_image_segment_holding(f->segments, f->segment_count, address, size);
    if (!seg)
        return false;
    uint64_t v = 0;
    memcpy(&v, seg->data + (address - seg->vaddr), size);
    *out = v;
    return true;
}

/* The targets of an indirect jump through a jump table, merged with `s`: gcc's and clang's PIC form
 * (`lea T(%rip),%r1; movslq (%r1,%idx,4),%r2; add %r1,%r2; jmp *%r2`: 4-byte offsets from T) and the
 * non-PIC one (`jmp *T(,%idx,8)`: 8-byte addresses). With the bound of a `cmp idx, imm; ja` seen
 * before the jump, that many entries are read, and those on code outside the function are cases
 * moved to a `.cold` part (they leave the function); without it, entries are read while they land on
 * an instruction of the function. 0 when the jump is not one of these. */
static int64_t jump_table(synth_run *run, uint32_t index, const fu_x86_insn *insn, const fu_synth_state *s,
                          const walk_judgment *judged, uint64_t bound, uint32_t *queue_len)
{
    const fu_synth_function *f = run->function;
    const fu_x86_operand *o = &insn->source;
    uint64_t table, base = 0;
    unsigned entry_size;
    /* A jump resolved on an earlier walk keeps its table when a later path (a loop through one of its
     * cases) has lost track of the register: the same code reads the same table. */
    const synth_jump_table *known = NULL;
    for (uint32_t k = 0; k < run->jump_table_count; k++)
        if (run->jump_tables[k].insn == index)
            known = &run->jump_tables[k];
    if (known) {
        table = known->table;
        base = known->base;
        entry_size = known->entry_size;
        bound = known->bound;
    } else if (o->kind == FU_X86_OPERAND_REGISTER && o->width == 8 && s->regs[o->reg].kind == FU_VALUE_TABLE_TARGET) {
        table = (uint64_t)s->regs[o->reg].offset;
        base = table + (uint64_t)(int64_t)run->table_bases[s->regs[o->reg].reg];
        entry_size = 4;
    } else if (o->kind == FU_X86_OPERAND_MEMORY && !o->segment && o->index != FU_X86_REG_NONE && o->scale == 8 &&
               o->width == 8 && o->reg == FU_X86_REG_NONE) {
        table = (uint64_t)o->value;
        entry_size = 8;
    } else {
        return 0;
    }
    int64_t found = 0;
    uint64_t entries = bound && bound < FU_SYNTH_MAX_JUMP_TABLE_ENTRIES ? bound : FU_SYNTH_MAX_JUMP_TABLE_ENTRIES;
    for (unsigned i = 0; i < entries; i++) {
        uint64_t raw;
        if (!read_image(f, table + (uint64_t)i * entry_size, entry_size, &raw))
            break;
        uint64_t target = entry_size == 4 ? base + (uint64_t)(int64_t)(int32_t)(uint32_t)raw : raw;
        int64_t index = insn_index_at(run, target);
        if (index == -1 && bound && fu_image_segment_holding(f->code_segments, f->code_segment_count, target, 1)) { /* a case in another FDE (gcc's .cold part): an exit */
            found++;
            continue;
        }
        if (index == -2 && bound) {
            snprintf(run->reason, FU_SYNTH_REASON_MAX,
                     "entry %u of the jump table at 0x%llx goes into the middle of an instruction (0x%llx)", i,
                     (unsigned long long)table, (unsigned long long)target);
            return -1;
        }
        if (index < 0)
            break;
        int64_t b = block_at(run, (uint32_t)index);
        if (b < 0 || !merge(run, (uint32_t)b, s, judged, EDGE_BRANCH, queue_len))
            return -1;
        found++;
    }
    if (found && !known && run->jump_table_count < FU_SYNTH_MAX_JUMP_TABLES) {
        synth_jump_table *added = &run->jump_tables[run->jump_table_count++];
        added->insn = index;
        added->table = table;
        added->base = base;
        added->entry_size = entry_size;
        added->bound = bound;
        run->counts->jump_tables++;
    }
    return found;
}

/* The landing pad inside the function of the call site holding `address`, or -1. */
static int64_t landing_pad_insn(const synth_run *run, uint64_t address)
{
    const fu_synth_function *f = run->function;
    size_t lo = 0, hi = f->call_site_count;
    while (lo < hi) { /* the first call site starting after `address` */
        size_t mid = lo + (hi - lo) / 2;
        if (f->call_sites[mid].start <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || address >= f->call_sites[lo - 1].end || !f->call_sites[lo - 1].landing_pad)
        return -1;
    return insn_index_at(run, f->call_sites[lo - 1].landing_pad);
}

/* The outgoing arguments (DW_CFA_GNU_args_size) in effect at the call ending at `call_end`: the row
 * of its last byte, as the unwinder finds it from the return address. */
static uint64_t args_size_at(const fu_synth_function *f, uint64_t call_end)
{
    size_t lo = 0, hi = f->args_size_count;
    while (lo < hi) { /* the first change at or after call_end */
        size_t mid = lo + (hi - lo) / 2;
        if (f->args_sizes[mid].address < call_end)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? f->args_sizes[lo - 1].bytes : 0;
}

/* A call that throws goes on at its call site's landing pad: the state after the call joins there,
 * with the call's outgoing arguments popped. */
static bool merge_landing_pad(synth_run *run, uint64_t address, uint64_t call_end, const fu_synth_state *after_call,
                              const walk_judgment *judged, uint32_t *queue_len)
{
    int64_t pad = landing_pad_insn(run, address);
    if (pad < 0)
        return true;
    int64_t b = block_at(run, (uint32_t)pad);
    if (b < 0)
        return false;
    uint64_t popped = args_size_at(run->function, call_end);
    if (!popped)
        return merge(run, (uint32_t)b, after_call, judged, EDGE_BRANCH, queue_len);
    fu_synth_state at_pad;
    state_copy(&at_pad, after_call);
    at_pad.regs[FU_REG_RSP] = fu_synth_value_add(at_pad.regs[FU_REG_RSP], (int64_t)popped);
    walk_judgment judged_at_pad = *judged;
    judged_at_pad.changed |= 1u << FU_REG_RSP;
    return merge(run, (uint32_t)b, &at_pad, &judged_at_pad, EDGE_BRANCH, queue_len);
}

/* What bounds a jump table's index on one walk: `cmp X, imm` then `ja`/`jae` to the default case bound
 * X (a register, or a memory operand until its base or index register or memory is written); copies
 * (`mov`, `movzx`) of a bounded register or of that memory into a register are bounded; a table entry
 * loaded with a bounded index (`movslq (T,%idx,4)`) has `entry_bound`. */
typedef struct index_bound {
    fu_x86_operand compared; /* the cmp's operand, until the jcc (kind none: no cmp pending) */
    uint64_t compared_value;
    uint64_t bound;          /* entries, for the registers of `registers` and `memory` */
    uint16_t registers;
    fu_x86_operand memory;   /* kind none: no bounded memory */
    uint64_t entry_bound;    /* 0: unknown */
} index_bound;

static bool same_memory(const fu_x86_operand *a, const fu_x86_operand *b)
{
    return a->kind == FU_X86_OPERAND_MEMORY && b->kind == FU_X86_OPERAND_MEMORY && a->reg == b->reg &&
           a->index == b->index && a->scale == b->scale && a->value == b->value && a->segment == b->segment &&
           a->untracked_address == b->untracked_address && a->reg != FU_X86_REG_RIP;
}

static bool operand_reads_register(const fu_x86_operand *o, uint16_t registers)
{
    return (o->reg < FU_X86_GPR_COUNT && (registers >> o->reg & 1)) ||
           (o->index < FU_X86_GPR_COUNT && (registers >> o->index & 1));
}

static void track_bound(const fu_x86_insn *insn, index_bound *b)
{
    const fu_x86_operand *dest = &insn->dest, *source = &insn->source;
    bool copies_bounded = insn->kind == FU_X86_MOV && dest->kind == FU_X86_OPERAND_REGISTER && dest->width >= 4 &&
                          ((source->kind == FU_X86_OPERAND_REGISTER && (b->registers >> source->reg & 1)) ||
                           same_memory(source, &b->memory));
    /* what the instruction writes ends what was known of it */
    if (b->compared.kind && (operand_reads_register(&b->compared, insn->writes) || insn->stores))
        b->compared.kind = FU_X86_OPERAND_NONE;
    if (b->memory.kind && (operand_reads_register(&b->memory, insn->writes) || insn->stores ||
                           insn->kind == FU_X86_CALL || (insn->kind == FU_X86_MOV && dest->kind == FU_X86_OPERAND_MEMORY)))
        b->memory.kind = FU_X86_OPERAND_NONE;
    switch (insn->kind) {
    case FU_X86_CMP:
        b->compared.kind = FU_X86_OPERAND_NONE;
        if ((dest->kind == FU_X86_OPERAND_REGISTER || dest->kind == FU_X86_OPERAND_MEMORY) &&
            source->kind == FU_X86_OPERAND_IMMEDIATE && source->value >= 0) {
            b->compared = *dest;
            b->compared_value = (uint64_t)source->value;
        }
        return;
    case FU_X86_JCC:
        if (b->compared.kind && insn->condition) {
            b->bound = insn->condition == FU_X86_JUMP_IF_ABOVE ? b->compared_value + 1 : b->compared_value;
            b->registers = b->compared.kind == FU_X86_OPERAND_REGISTER ? (uint16_t)(1u << b->compared.reg) : 0;
            b->memory = b->compared;
            if (b->compared.kind != FU_X86_OPERAND_MEMORY)
                b->memory.kind = FU_X86_OPERAND_NONE;
            b->compared.kind = FU_X86_OPERAND_NONE;
        }
        return;
    case FU_X86_MOV:
        if (dest->kind != FU_X86_OPERAND_REGISTER)
            break;
        if (source->kind == FU_X86_OPERAND_MEMORY && source->sign_extends && source->index < FU_X86_GPR_COUNT)
            b->entry_bound = b->registers >> source->index & 1 ? b->bound : 0;
        if (copies_bounded) {
            b->registers |= (uint16_t)(1u << dest->reg);
            return;
        }
        break;
    default:
        break;
    }
    b->registers &= (uint16_t)~insn->writes;
}

/* Count a walk of a block; false (reason set) past FU_SYNTH_MAX_WALKS_PER_BLOCK walks per block. */
static bool count_walk(synth_run *run, uint64_t *walks)
{
    if (++*walks > (uint64_t)FU_SYNTH_MAX_WALKS_PER_BLOCK * run->counts->blocks) {
        snprintf(run->reason, FU_SYNTH_REASON_MAX,
                 "no fixpoint after %llu block walks (FU_SYNTH_MAX_WALKS_PER_BLOCK)", (unsigned long long)*walks);
        return false;
    }
    return true;
}

/* Walk block b from its state until the path ends or reaches another block; false (reason set)
 * when the function is undecided. A block the walk runs into that had no state takes the walk's
 * and is next on the worklist: it is walked on at once, as the next walk would (without copying
 * the state it was given back out of it). */
static bool walk_block(synth_run *run, uint32_t b, uint32_t *queue_len, uint64_t *walks)
{
    fu_synth_scratch *sc = run->scratch;
    const fu_synth_function *f = run->function;
    fu_synth_state s;
    state_copy(&s, &sc->block_states[b]);
    uint32_t i = sc->block_insn[b];
    uint64_t address = insn_address(run, i);
    /* the per-instruction arrays stay in place while blocks are walked (only the block arrays grow) */
    const fu_x86_insn *insns = sc->insns;
    const int32_t *block_of = sc->block_of;
    uint8_t *walked = sc->walked;
    /* a call's fall-through, through the nops that pad it to the next block */
    edge_kind fallthrough_edge = EDGE_BRANCH;
    /* a jump table's entry count, from the `cmp; ja` of this walk that bounds its index */
    index_bound bound = {.compared = {.kind = FU_X86_OPERAND_NONE}, .memory = {.kind = FU_X86_OPERAND_NONE}};
    /* the judgment in hand (fu_synth_judge): the first instruction's on the block's previous walk,
     * or the one its first state came with, and what the joins changed since */
    const fu_synth_judge_hook judge = f->judge;
    uint8_t *judgments = sc->judgments;
    uint32_t first = i;
    walk_judgment judged;
    judged.judgment.until = 0;
    judged.changed = FU_SYNTH_CHANGED_ALL;
    if (judge.judge && (sc->block_flags[b] & BLOCK_JUDGED)) {
        judged.judgment = sc->block_judgments[b];
        judged.changed = sc->block_changed[b];
    }
    sc->block_changed[b] = 0;
    for (;;) {
        const fu_x86_insn *insn = &insns[i];
        walked[i] = 1;
        if (insn->kind == FU_X86_INVALID) {
            snprintf(run->reason, FU_SYNTH_REASON_MAX, "bytes at 0x%llx do not decode as an instruction",
                     (unsigned long long)address);
            return false;
        }
        /* rsp before the instruction, where it may change it (writes names rsp for push, pop, call
         * and the like) */
        const bool writes_sp = insn->writes >> FU_REG_RSP & 1;
        const fu_synth_value sp = s.regs[FU_REG_RSP];
        if (judge.judge) {
            if (address >= judged.judgment.until || address < judged.judgment.from ||
                (judged.changed & judged.judgment.reads)) {
                judge.judge(judge.context, address, &s, judged.changed, &judged.judgment);
                judged.changed = 0;
                if (i == first) {
                    sc->block_flags[b] |= BLOCK_JUDGED;
                    sc->block_judgments[b] = judged.judgment;
                }
            }
            judgments[i] = judged.judgment.byte;
            /* what the instruction may change: the registers it writes (a call: the caller-saved
             * ones; rsp, which most CFA rules read, only where its value changes), the slots where
             * `step` says so */
            judged.changed |= (insn->writes & ~(1u << FU_REG_RSP)) | (insn->kind == FU_X86_CALL ? CALLER_SAVED_MASK : 0);
        }
        if (step(run, &s, insn, address))
            judged.changed |= FU_SYNTH_CHANGED_SLOTS;
        if (writes_sp && !fu_synth_value_equal(sp, s.regs[FU_REG_RSP]))
            judged.changed |= 1u << FU_REG_RSP;
        if (run->has_indirect_jump)
            track_bound(insn, &bound);
        bool falls_through = true;
        if (!insn->is_nop)
            fallthrough_edge = EDGE_BRANCH;
        switch (insn->kind) {
        case FU_X86_JCC:
        case FU_X86_JMP:
            if (insn->has_target) {
                int32_t tb = sc->branch_block[i];
                if (tb == -2) {
                    snprintf(run->reason, FU_SYNTH_REASON_MAX,
                             "the branch at 0x%llx goes into the middle of the instruction at 0x%llx",
                             (unsigned long long)address, (unsigned long long)insn->target);
                    return false;
                }
                if (tb >= 0 && !merge(run, (uint32_t)tb, &s, &judged, EDGE_BRANCH, queue_len))
                    return false;
                /* else a (conditional) tail call */
            } else {
                const fu_x86_operand *o = &insn->source;
                uint64_t table_bound = o->kind == FU_X86_OPERAND_MEMORY
                                           ? (o->index < FU_X86_GPR_COUNT && (bound.registers >> o->index & 1) ? bound.bound : 0)
                                           : bound.entry_bound;
                int64_t found = jump_table(run, i, insn, &s, &judged, table_bound, queue_len);
                if (found < 0)
                    return false;
                fu_synth_value sp = s.regs[FU_REG_RSP];
                bool tail_call = sp.kind == FU_VALUE_ENTRY_STACK && sp.offset == 0;
                if (found == 0 && !tail_call) {
                    snprintf(run->reason, FU_SYNTH_REASON_MAX,
                             "indirect jump at 0x%llx with a frame on the stack: no jump table recognised",
                             (unsigned long long)address);
                    return false;
                }
            }
            falls_through = insn->kind == FU_X86_JCC;
            break;
        case FU_X86_CALL:
            if (fu_x86_is_get_pc(insn, address))
                break;
            if (!merge_landing_pad(run, address, address + insn->length, &s, &judged, queue_len))
                return false;
            if (insn->has_target && is_noreturn(f, insn->target))
                falls_through = false;
            fallthrough_edge = EDGE_CALL_FALLTHROUGH;
            break;
        case FU_X86_RET:
        case FU_X86_TRAP:
            falls_through = false;
            break;
        default:
            break;
        }
        if (!falls_through)
            return true;
        if (i + 1 >= run->insn_count) {
            if (insn->kind == FU_X86_CALL) /* a call that ends the function cannot return */
                return true;
            /* with nothing on the stack, running into the next function is a tail call without a
             * jump (glibc's __memcpy_chk: a check, then memcpy's code right after) */
            fu_synth_value sp = s.regs[FU_REG_RSP];
            if (sp.kind == FU_VALUE_ENTRY_STACK && sp.offset == 0)
                return true;
            snprintf(run->reason, FU_SYNTH_REASON_MAX, "execution runs past the end of the range at 0x%llx",
                     (unsigned long long)f->end);
            return false;
        }
        i++;
        address += insn->length;
        if (block_of[i] >= 0) {
            uint32_t next = (uint32_t)block_of[i];
            bool had_state = sc->block_flags[next] & BLOCK_HAS_STATE;
            if (!merge(run, next, &s, &judged, fallthrough_edge, queue_len))
                return false;
            if (had_state || !(sc->block_flags[next] & BLOCK_HAS_STATE) || sc->worklist[*queue_len - 1] != next)
                return true;
            /* the next walk: block `next`, from the state in hand and the judgment it was given */
            sc->block_flags[next] &= (uint8_t)~BLOCK_QUEUED;
            (*queue_len)--;
            if (!count_walk(run, walks))
                return false;
            b = next;
            first = i;
            sc->block_changed[b] = 0;
            if (!judged.judgment.until)
                judged.changed = FU_SYNTH_CHANGED_ALL;
            fallthrough_edge = EDGE_BRANCH;
            bound = (index_bound){.compared = {.kind = FU_X86_OPERAND_NONE}, .memory = {.kind = FU_X86_OPERAND_NONE}};
        }
    }
}

/* The kinds of instruction that may name code besides jumps and branches (fu_synth_scratch.naming:
 * indirect calls included, which check's tally passes over). */
#define NAMING_KINDS ((1u << FU_X86_CALL) | (1u << FU_X86_LEA))

static bool decode_all(synth_run *run)
{
    const fu_synth_function *f = run->function;
    fu_synth_scratch *sc = run->scratch;
    uint64_t size = f->end - f->start;
    uint32_t n = 0;
    sc->naming_count = 0;
    if (!reserve_offsets(sc, size)) {
        run->out_of_memory = true;
        return false;
    }
    for (uint64_t offset = 0; offset < size;) {
        if (n >= sc->insn_cap && !reserve_insns(sc, (uint64_t)n + 1)) {
            run->insn_count = n;
            run->out_of_memory = true;
            return false;
        }
        fu_x86_insn *insn = &sc->insns[n];
        fu_x86_decode(&sc->decoder, f->code + offset, (size_t)(size - offset), f->start + offset, insn);
        sc->insn_offsets[n] = (uint32_t)offset;
        sc->insn_at_offset[offset] = n + 1;
        n++;
        /* without a branch: one in ten instructions is one of these, in no pattern to predict */
        sc->naming[sc->naming_count] = n - 1;
        uint32_t names = (NAMING_KINDS >> insn->kind) & 1;
        if (insn->kind == FU_X86_JCC || insn->kind == FU_X86_JMP) {
            if (insn->has_target) {
                sc->direct_branches[run->direct_branch_count++] = n - 1;
                names = insn->target - f->start >= size; /* the most stay inside: they name nothing new */
            } else {
                run->has_indirect_jump = true;
            }
        }
        sc->naming_count += names;
        offset += insn->kind == FU_X86_INVALID ? 1 : insn->length; /* resynchronize byte by byte */
    }
    memset(sc->block_of, 0xff, n * sizeof *sc->block_of); /* -1: no block starts there */
    memset(sc->walked, 0, n * sizeof *sc->walked);
    run->insn_count = n;
    run->counts->instructions = n;
    return true;
}

/* One fixpoint over the blocks known so far (the first call also finds the direct branch targets). */
static bool fixpoint(synth_run *run, bool first)
{
    fu_synth_scratch *sc = run->scratch;
    run->has_alignment = false;
    run->restart = false;
    run->counts->assumed_noreturn = 0;
    if (!first) /* decode_all cleared them */
        for (uint32_t i = 0; i < run->insn_count; i++)
            sc->walked[i] = 0;
    for (uint32_t b = 0; b < run->counts->blocks; b++)
        sc->block_flags[b] = 0;
    if (first) {
        /* before the first block, room for those the direct branches, landing pads and entries may
         * start, without copying what the arrays held for the previous function */
        uint64_t most = (uint64_t)run->direct_branch_count + run->function->call_site_count +
                        run->function->entry_count + 1;
        if (!reserve_blocks(sc, most < FU_SYNTH_MAX_BLOCKS ? most : FU_SYNTH_MAX_BLOCKS, false)) {
            run->out_of_memory = true;
            return false;
        }
        /* every direct branch target inside the range starts a block */
        for (uint32_t k = 0; k < run->direct_branch_count; k++) {
            uint32_t i = sc->direct_branches[k];
            int64_t t = insn_index_at(run, sc->insns[i].target);
            int64_t b = t >= 0 ? block_at(run, (uint32_t)t) : t;
            if (t >= 0 && b < 0)
                return false;
            sc->branch_block[i] = (int32_t)b;
        }
    }
    const fu_synth_function *f = run->function;
    if (first) {
        /* landing pads start blocks too */
        for (size_t k = 0; k < f->call_site_count; k++) {
            int64_t t = f->call_sites[k].landing_pad ? insn_index_at(run, f->call_sites[k].landing_pad) : -1;
            if (t >= 0 && block_at(run, (uint32_t)t) < 0)
                return false;
        }
    }
    int64_t entry = block_at(run, 0);
    if (entry < 0)
        return false;
    fu_synth_state start;
    if (f->entry)
        state_copy(&start, f->entry);
    else
        fu_synth_entry_state(&start, f->caller_saved_values);
    uint32_t queue_len = 0;
    if (!merge(run, (uint32_t)entry, &start, NULL, EDGE_BRANCH, &queue_len))
        return false;
    for (size_t k = 0; k < f->entry_count; k++) {
        int64_t t = insn_index_at(run, f->entries[k].address);
        if (t == -2) {
            snprintf(run->reason, FU_SYNTH_REASON_MAX, "the entry at 0x%llx is in the middle of an instruction",
                     (unsigned long long)f->entries[k].address);
            return false;
        }
        int64_t b = t >= 0 ? block_at(run, (uint32_t)t) : 0;
        if (b < 0 || (t >= 0 && !merge(run, (uint32_t)b, f->entries[k].state, NULL, EDGE_BRANCH, &queue_len)))
            return false;
    }
    uint64_t walks = 0;
    while (queue_len) {
        uint32_t b = sc->worklist[--queue_len];
        sc->block_flags[b] &= (uint8_t)~BLOCK_QUEUED;
        if (!count_walk(run, &walks) || !walk_block(run, b, &queue_len, &walks))
            return false;
    }
    return true;
}

/* The caller-saved registers some reached instruction may write: those that keep the caller's value
 * at every instruction are the others (a function-wide set, so that rows do not change at each first
 * write of one). A call may write all of them (kept_across_call keeps only those the function
 * wrote its frame's address to). */
static uint16_t written_caller_saved(const synth_run *run)
{
    const fu_synth_scratch *sc = run->scratch;
    uint16_t written = 0;
    for (uint32_t i = 0; i < run->insn_count; i++) {
        const fu_x86_insn *insn = &sc->insns[i];
        if (sc->walked[i])
            written |= insn->kind == FU_X86_CALL && !fu_x86_is_get_pc(insn, insn_address(run, i)) ? CALLER_SAVED_MASK
                                                                                                  : insn->writes;
    }
    return written & CALLER_SAVED_MASK;
}

/* Make `s` the state `to` (a block's), returning what differs as fu_synth_visit's `changed` bits:
 * a path that runs on into a block mostly reaches it with the block's own registers and slots,
 * and the visitor need not judge again what stayed. */
static uint32_t state_replace(fu_synth_state *s, const fu_synth_state *to)
{
    uint32_t changed = 0;
    /* equal bytes are equal values: most block starts */
    if (memcmp(s->regs, to->regs, sizeof s->regs) != 0)
        for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++)
            if (!fu_synth_value_equal(s->regs[r], to->regs[r])) {
                s->regs[r] = to->regs[r];
                changed |= 1u << r;
            }
    if (s->slot_count != to->slot_count || s->slots_lost != to->slots_lost || s->unknown_stores != to->unknown_stores ||
        memcmp(s->slots, to->slots, to->slot_count * sizeof to->slots[0]) != 0) {
        state_copy(s, to);
        changed |= FU_SYNTH_CHANGED_SLOTS;
    }
    return changed;
}

/* The instructions walked of the first `count` (each walked byte 0 or 1), eight at a time. */
static uint32_t count_walked(const uint8_t *walked, uint32_t count)
{
    uint32_t n = 0, i = 0;
    for (; i + 8 <= count; i += 8) {
        uint64_t eight;
        memcpy(&eight, walked + i, sizeof eight);
        n += (uint32_t)((eight * 0x0101010101010101ull) >> 56); /* the sum of its bytes, at most 8 */
    }
    for (; i < count; i++)
        n += walked[i];
    return n;
}

/* The fixpoint, then the visit: instructions in address order, each with the state before it. */
static fu_synth_outcome interpret(synth_run *run, fu_synth_visit visit, void *context)
{
    const fu_synth_function *function = run->function;
    fu_synth_scratch *scratch = run->scratch;
    fu_synth_counts *counts = run->counts;
    char *reason = run->reason;
    /* a jump table met late adds blocks inside walked code: walk again with them known */
    for (unsigned attempt = 0;; attempt++) {
        if (attempt > FU_SYNTH_MAX_RESTARTS) {
            snprintf(reason, FU_SYNTH_REASON_MAX,
                     "jump tables or calls that do not return still change the blocks after %u restarts",
                     FU_SYNTH_MAX_RESTARTS);
            return FU_SYNTH_UNDECIDED;
        }
        if (!fixpoint(run, attempt == 0))
            return run->out_of_memory ? FU_SYNTH_NO_MEMORY : FU_SYNTH_UNDECIDED;
        if (!run->restart)
            break;
    }
    counts->reached = count_walked(scratch->walked, run->insn_count);
    if (!visit)
        return FU_SYNTH_DECIDED;
    /* the visit */
    uint16_t written_in_function = function->caller_saved_values ? written_caller_saved(run) : 0;
    fu_synth_state s;
    bool visited = false; /* s holds the state after the last visited instruction */
    bool live = false;
    uint32_t changed = FU_SYNTH_CHANGED_ALL;
    /* in locals: the visitor, called in between, could write anything as far as the compiler knows */
    const fu_x86_insn *insns = scratch->insns;
    const int32_t *block_of = scratch->block_of;
    const uint8_t *block_flags = scratch->block_flags;
    const fu_synth_state *block_states = scratch->block_states;
    const uint32_t *insn_offsets = scratch->insn_offsets;
    const uint64_t start = function->start;
    const uint32_t insn_count = run->insn_count;
    for (uint32_t i = 0; i < insn_count; i++) {
        const fu_x86_insn *insn = &insns[i];
        int32_t b = block_of[i];
        if (b >= 0 && (block_flags[b] & BLOCK_HAS_STATE)) {
            if (visited) {
                changed |= state_replace(&s, &block_states[b]);
            } else {
                state_copy(&s, &block_states[b]);
                changed = FU_SYNTH_CHANGED_ALL;
                visited = true;
            }
            live = true;
        } else if (b >= 0) {
            live = false;
        }
        if (!live)
            continue;
        uint64_t address = start + insn_offsets[i];
        /* a register written somewhere keeps the caller's value in no row (the set is function-wide);
         * that value serves nothing else: nothing is derived from a caller-saved register's */
        for (uint16_t m = written_in_function; m; m &= (uint16_t)(m - 1)) {
            unsigned r = (unsigned)__builtin_ctz(m);
            if (fu_synth_value_equal(s.regs[r], make_value(FU_VALUE_ENTRY_REGISTER, (uint8_t)r, 0))) {
                s.regs[r] = unknown_value;
                changed |= 1u << r;
            }
        }
        if (!visit(context, address, insn, &s, changed))
            return FU_SYNTH_STOPPED;
        /* what the next visit sees changed: an instruction changes only the registers it writes
         * (hidden operands included: rsp for push, pop and call, rbp for leave and enter) and a call
         * its caller-saved ones, and the slots only when it may store */
        fu_synth_value before[FU_X86_GPR_COUNT];
        uint16_t written = insn->writes;
        for (uint16_t m = written; m; m &= (uint16_t)(m - 1))
            before[__builtin_ctz(m)] = s.regs[__builtin_ctz(m)];
        changed = 0;
        if (insn->kind == FU_X86_CALL)
            changed |= CALLER_SAVED_MASK;
        if (step(run, &s, insn, address))
            changed |= FU_SYNTH_CHANGED_SLOTS;
        for (uint16_t m = written; m; m &= (uint16_t)(m - 1))
            if (!fu_synth_value_equal(before[__builtin_ctz(m)], s.regs[__builtin_ctz(m)]))
                changed |= 1u << __builtin_ctz(m);
        switch (insn->kind) {
        case FU_X86_JMP: case FU_X86_RET: case FU_X86_TRAP:
            live = false;
            break;
        case FU_X86_CALL:
            if (insn->has_target && is_noreturn(function, insn->target))
                live = false;
            break;
        default:
            break;
        }
    }
    return FU_SYNTH_DECIDED;
}

fu_synth_outcome fu_synth_run(const fu_synth_function *function, fu_synth_scratch *scratch, fu_synth_visit visit,
                              void *context, fu_synth_counts *counts, char reason[FU_SYNTH_REASON_MAX])
{
    memset(counts, 0, sizeof *counts);
    reason[0] = '\0';
    if (!scratch->decoder_ready) {
        fu_x86_decoder_init(&scratch->decoder);
        scratch->decoder_ready = true;
    }
    if (function->end <= function->start) {
        snprintf(reason, FU_SYNTH_REASON_MAX, "empty range");
        return FU_SYNTH_UNDECIDED;
    }
    if (function->end - function->start > FU_SYNTH_MAX_FUNCTION_BYTES) {
        snprintf(reason, FU_SYNTH_REASON_MAX, "%llu bytes of code, more than FU_SYNTH_MAX_FUNCTION_BYTES",
                 (unsigned long long)(function->end - function->start));
        return FU_SYNTH_UNDECIDED;
    }
    /* zeroed up to its jump-table array, which is filled up to jump_table_count */
    synth_run run;
    memset(&run, 0, offsetof(synth_run, jump_tables));
    run.function = function;
    run.scratch = scratch;
    run.reason = reason;
    run.counts = counts;
    return decode_all(&run) ? interpret(&run, visit, context) : FU_SYNTH_NO_MEMORY;
}


/* ---- derived rows ----------------------------------------------------------------------------- */

void fu_synth_derive_row(const fu_synth_state *state, unsigned preferred_cfa_register, fu_synth_row *row)
{
    memset(row, 0, sizeof *row);
    unsigned order[FU_X86_GPR_COUNT + 3];
    unsigned n = 0;
    if (preferred_cfa_register < FU_X86_GPR_COUNT)
        order[n++] = preferred_cfa_register;
    order[n++] = FU_REG_RSP;
    order[n++] = FU_REG_RBP;
    for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++)
        order[n++] = r;
    for (unsigned k = 0; k < n; k++) {
        fu_synth_value v = state->regs[order[k]];
        int64_t cfa_offset;
        if (v.kind == FU_VALUE_ENTRY_STACK && !__builtin_sub_overflow((int64_t)8, v.offset, &cfa_offset)) {
            row->cfa.kind = FU_CFA_REG_OFFSET;
            row->cfa.reg = (uint16_t)order[k];
            row->cfa.value = cfa_offset;
            break;
        }
    }
    for (unsigned r = 0; r < FU_X86_GPR_COUNT; r++)
        if ((CALLER_SAVED_MASK & (1u << r)) &&
            fu_synth_value_equal(state->regs[r], make_value(FU_VALUE_ENTRY_REGISTER, (uint8_t)r, 0)))
            row->kept_caller_saved |= (uint16_t)(1u << r);
    for (unsigned c = 0; c < FU_SYNTH_COLUMN_COUNT; c++) {
        unsigned column = fu_synth_columns[c];
        fu_synth_value wanted = fu_synth_column_value(column);
        fu_rule *rule = &row->columns[c];
        if (column < FU_X86_GPR_COUNT && fu_synth_value_equal(state->regs[column], wanted)) {
            rule->kind = FU_RULE_SAME_VALUE;
            continue;
        }
        for (unsigned i = 0; i < state->slot_count && rule->kind == FU_RULE_UNSPECIFIED; i++)
            if (state->slots[i].space == FU_SLOT_ENTRY_STACK && fu_synth_value_equal(state->slots[i].value, wanted)) {
                rule->kind = FU_RULE_OFFSET;
                rule->value = state->slots[i].offset - 8;
            }
        for (unsigned r = 0; r < FU_X86_GPR_COUNT && rule->kind == FU_RULE_UNSPECIFIED; r++)
            if (fu_synth_value_equal(state->regs[r], wanted)) {
                rule->kind = FU_RULE_REGISTER;
                rule->reg = (uint16_t)r;
            }
    }
}
