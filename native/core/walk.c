/* walk: the stack walker (see walk.h for its contract). */
#include "walk.h"

#include <stdlib.h>
#include <string.h>

/* The frame-pointer fallback follows rbp only if it points into the stack above the current SP
 * and no further than this: a larger gap means rbp holds data, not a frame pointer. 8 MiB is the
 * default main-thread stack limit on Linux (ulimit -s). */
#define FU_FP_MAX_FRAME_SIZE (8u << 20)

const char *fu_walk_outcome_name(fu_walk_outcome outcome)
{
    switch (outcome) {
    case FU_WALK_END: return "end";
    case FU_WALK_TRUNCATED: return "truncated";
    case FU_WALK_NO_UNWIND_INFO: return "no_unwind_info";
    case FU_WALK_UNREADABLE: return "unreadable";
    case FU_WALK_NO_PROGRESS: return "no_progress";
    case FU_WALK_SP_BACKWARDS: return "sp_backwards";
    case FU_WALK_EXPRESSION_ERROR: return "expression_error";
    case FU_WALK_REGISTER_UNKNOWN: return "register_unknown";
    case FU_WALK_FRAME_LIMIT: return "frame_limit";
    default: return "?";
    }
}

const char *fu_backend_name(fu_backend backend)
{
    switch (backend) {
    case FU_BACKEND_AUTO: return "auto";
    case FU_BACKEND_DWARF: return "dwarf";
    case FU_BACKEND_TABLE: return "table";
    case FU_BACKEND_COMPILED: return "compiled";
    case FU_BACKEND_TABLE_ONLY: return "table-only";
    case FU_BACKEND_COMPILED_ONLY: return "compiled-only";
    default: return "?";
    }
}

int64_t fu_address_space_find(const fu_address_space *space, uint64_t avma)
{
    size_t lo = 0, hi = space->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (space->modules[mid].start <= avma)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || avma >= space->modules[lo - 1].end)
        return -1;
    return (int64_t)(lo - 1);
}

bool fu_address_space_read_image(const fu_address_space *space, uint64_t avma, unsigned size, uint64_t *out)
{
    /* Any module's read-only segments may hold the address (.rodata is not in the executable
     * mapping); modules are few, reads from images rare. */
    for (size_t m = 0; m < space->count; m++) {
        const fu_module *mod = &space->modules[m];
        uint64_t svma = avma - mod->bias;
        for (size_t s = 0; s < mod->segment_count; s++) {
            const fu_image_segment *seg = &mod->segments[s];
            if (svma >= seg->vaddr && svma - seg->vaddr < seg->size && size <= seg->size - (svma - seg->vaddr)) {
                fu_cursor c = fu_cursor_make(seg->data, seg->data + (svma - seg->vaddr), seg->data + seg->size);
                *out = fu_read_uint(&c, size);
                return !c.failed;
            }
        }
    }
    return false;
}

typedef struct walker {
    const fu_address_space *space;
    const fu_reader *reader;
    fu_walk_result *result;
    fu_walk_cache *cache; /* NULL, or bound to space */
} walker;

/* The slot of `key` in a direct-mapped table of 2^bits slots (Fibonacci hashing): a walk cache's
 * entries by lookup address, its shapes by first IP. */
static inline size_t slot_of(uint64_t key, unsigned bits)
{
    return (size_t)((key * 0x9e3779b97f4a7c15u) >> (64 - bits));
}

/* The slot of `lookup` in `cache` (NULL without a cache); it holds lookup's entry if cached_at says so. */
static inline fu_walk_cache_entry *cache_entry(fu_walk_cache *cache, uint64_t lookup)
{
    return cache ? &cache->entries[slot_of(lookup, FU_WALK_CACHE_BITS)] : NULL;
}

/* The entry of the caller at return address `ra` if the cache holds one of `kind` for it, else NULL
 * (how the lean loops below find their next step). */
static inline const fu_walk_cache_entry *cached_caller(const fu_walk_cache *cache, uint64_t ra, uint8_t kind)
{
    const fu_walk_cache_entry *e = &cache->entries[slot_of(ra - 1, FU_WALK_CACHE_BITS)];
    return e->kind == kind && e->lookup == ra - 1 ? e : NULL;
}

/* Whether slot `e` (may be NULL) holds the entry of `lookup`. */
static inline bool cached_at(const fu_walk_cache_entry *e, uint64_t lookup)
{
    return e && e->kind != FU_WALK_CACHED_NONE && e->lookup == lookup;
}

/* Whether avma lies in a module's executable mapping (the cache answers for PCs walked before):
 * *entry is avma's cache entry when the cache holds it, else NULL. */
static inline bool in_module(walker *w, uint64_t avma, const fu_walk_cache_entry **entry)
{
    const fu_walk_cache_entry *e = cache_entry(w->cache, avma);
    if (cached_at(e, avma)) {
        *entry = e;
        return e->module != UINT32_MAX;
    }
    *entry = NULL;
    return fu_address_space_find(w->space, avma) >= 0;
}

/* The reader's window bytes of [address, address + size) (size > 0), or NULL if the window does not
 * hold them all: one check for several loads. */
static inline const uint8_t *window_span(const fu_reader *reader, uint64_t address, uint64_t size)
{
    uint64_t offset = address - reader->window_address; /* wraps below the window */
    return offset <= reader->window_size && size <= reader->window_size - offset ? reader->window + offset : NULL;
}

/* Read memory; on failure record the outcome (truncated or unreadable) and the address. */
static inline bool read_word(walker *w, uint64_t address, unsigned size, uint64_t *out)
{
    fu_read_status status = fu_reader_read(w->reader, address, size, out);
    if (status == FU_READ_OK)
        return true;
    w->result->outcome = status == FU_READ_PAST_DUMP ? FU_WALK_TRUNCATED : FU_WALK_UNREADABLE;
    w->result->fault_address = address;
    return false;
}

/* Read memory whose failure is not the walk's: an unreadable save slot makes a register unknown
 * (see apply_row), a frame-pointer chain that leads nowhere is just not followed. */
static inline bool read_soft(walker *w, uint64_t address, uint64_t *out)
{
    return fu_reader_read(w->reader, address, 8, out) == FU_READ_OK;
}

typedef struct expr_reader {
    walker *w;
    fu_read_status status;
    uint64_t address;
} expr_reader;

static bool read_for_expression(void *opaque, uint64_t address, unsigned size, uint64_t *out)
{
    expr_reader *r = opaque;
    r->status = fu_reader_read(r->w->reader, address, size, out);
    r->address = address;
    return r->status == FU_READ_OK;
}

/* The evaluator's view of one frame's registers and memory, made once per row that needs it. */
typedef struct expression_frame {
    fu_expr_context ctx;
    expr_reader reader;
    bool ready;
} expression_frame;

/* Evaluate a DWARF expression of the table over the current registers. */
static bool evaluate(walker *w, expression_frame *f, const fu_table *t, const fu_rule *rule, const fu_regs *regs,
                     bool push_cfa, uint64_t cfa, uint64_t *value)
{
    unsigned reg;
    int32_t offset;
    bool deref;
    /* `DW_OP_bregN k [; DW_OP_deref]`: the evaluator's result without the evaluator (with push_cfa
     * the CFA lies beneath on the stack, unused). An unknown register is the evaluator's error. */
    if (t->section.address_size == 8 &&
        fu_expr_match_breg(t->section.data + rule->value, rule->expr_len, &reg, &offset, &deref)) {
        uint64_t base;
        if (!fu_regs_get(regs, reg, &base)) {
            w->result->outcome = FU_WALK_EXPRESSION_ERROR;
            return false;
        }
        *value = base + (uint64_t)(int64_t)offset;
        return !deref || read_word(w, *value, 8, value);
    }
    if (!f->ready) {
        memset(f->ctx.valid, 0, sizeof f->ctx.valid);
        for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
            if (regs->valid >> r & 1) {
                f->ctx.regs[r] = regs->value[r];
                f->ctx.valid[0] |= (uint64_t)1 << r;
            }
        f->reader = (expr_reader){w, FU_READ_OK, 0};
        f->ctx.read_memory = read_for_expression;
        f->ctx.opaque = &f->reader;
        f->ctx.address_size = t->section.address_size;
        f->ready = true;
    }
    f->reader.status = FU_READ_OK;
    fu_error err = {0};
    if (fu_expr_evaluate(t->section.data + rule->value, rule->expr_len, &f->ctx, push_cfa, cfa, value, &err) == FU_OK)
        return true;
    if (f->reader.status != FU_READ_OK) {
        w->result->outcome = f->reader.status == FU_READ_PAST_DUMP ? FU_WALK_TRUNCATED : FU_WALK_UNREADABLE;
        w->result->fault_address = f->reader.address;
    } else {
        w->result->outcome = FU_WALK_EXPRESSION_ERROR;
    }
    return false;
}

/* The x86-64 psABI's callee-saved registers (§3.2.1: rbx, rbp, r12-r15) as a valid mask. */
#define FU_CALLEE_SAVED_MASK ((1u << 3) | (1u << FU_REG_RBP) | (0xfu << 12))

/* The caller's registers before its rules apply: callee-saved registers keep their value, the
 * CFA is the caller's SP, everything else is unknown. Values of invalid registers are never read,
 * so only the mask needs clearing. */
static inline void keep_callee_saved(const fu_regs *regs, fu_regs *out)
{
    out->value[3] = regs->value[3];
    out->value[FU_REG_RBP] = regs->value[FU_REG_RBP];
    memcpy(&out->value[12], &regs->value[12], 4 * sizeof(uint64_t));
    out->valid = regs->valid & FU_CALLEE_SAVED_MASK;
}

static inline void start_caller(const fu_regs *regs, uint64_t cfa, fu_regs *out)
{
    keep_callee_saved(regs, out);
    fu_regs_set(out, FU_REG_RSP, cfa);
}

/* Restore a register saved at `address`. Only the return address must be readable: another
 * register saved where we cannot read (e.g. below the SP in an epilogue, already popped) just
 * becomes unknown, and the walk fails later only if something needs it (libunwind reaches the
 * same result with lazy register locations). */
static inline __attribute__((always_inline)) bool restore_saved(walker *w, unsigned slot, uint64_t address, fu_regs *out)
{
    uint64_t v;
    if (slot == FU_REG_RA) {
        if (!read_word(w, address, 8, &v))
            return false;
    } else if (!read_soft(w, address, &v)) {
        out->valid &= ~(1u << slot);
        return true;
    }
    fu_regs_set(out, slot, v);
    return true;
}

/* Apply `row` of table `t` to `regs`, giving the caller's registers in `out`. */
static bool apply_row(walker *w, const fu_table *t, const fu_state *state, uint64_t ra_column, const fu_regs *regs,
                      fu_regs *out)
{
    uint64_t cfa;
    expression_frame expressions;
    expressions.ready = false;
    if (state->cfa.kind == FU_CFA_REG_OFFSET) {
        uint64_t base;
        if (!fu_regs_get(regs, state->cfa.reg, &base)) {
            w->result->outcome = FU_WALK_REGISTER_UNKNOWN;
            return false;
        }
        cfa = base + (uint64_t)state->cfa.value;
    } else if (state->cfa.kind == FU_CFA_EXPRESSION) {
        if (!evaluate(w, &expressions, t, &state->cfa, regs, false, 0, &cfa))
            return false;
    } else {
        w->result->outcome = FU_WALK_NO_UNWIND_INFO;
        return false;
    }
    start_caller(regs, cfa, out);
    for (unsigned k = 0; k < state->count; k++) {
        unsigned column = t->column_pool[state->first + k];
        const fu_rule *rule = &t->rule_pool[state->first + k];
        /* the return address column lands in slot FU_REG_RA whatever its number */
        unsigned slot = column == ra_column ? FU_REG_RA : column;
        if (slot >= FU_WALK_REGISTERS)
            continue; /* vector registers and the like: not needed to walk */
        uint64_t v;
        switch ((fu_rule_kind)rule->kind) {
        case FU_RULE_UNDEFINED:
            out->valid &= ~(1u << slot);
            continue;
        case FU_RULE_SAME_VALUE:
            if (!fu_regs_get(regs, column, &v)) {
                out->valid &= ~(1u << slot);
                continue;
            }
            break;
        case FU_RULE_OFFSET:
            if (!restore_saved(w, slot, cfa + (uint64_t)rule->value, out))
                return false;
            continue;
        case FU_RULE_VAL_OFFSET: v = cfa + (uint64_t)rule->value; break;
        case FU_RULE_REGISTER:
            if (!fu_regs_get(regs, rule->reg, &v)) {
                out->valid &= ~(1u << slot);
                continue;
            }
            break;
        case FU_RULE_EXPRESSION: {
            uint64_t address;
            if (!evaluate(w, &expressions, t, rule, regs, true, cfa, &address) || !read_word(w, address, 8, &v))
                return false;
            break;
        }
        case FU_RULE_VAL_EXPRESSION:
            if (!evaluate(w, &expressions, t, rule, regs, true, cfa, &v))
                return false;
            break;
        default:
            continue;
        }
        fu_regs_set(out, slot, v);
    }
    return true; /* without a rule the return address stays invalid: the stack ends there */
}

/* Follow rbp (frame-pointer convention: [rbp] = caller's rbp, [rbp+8] = return address) from a
 * frame whose rbp and rsp are known, when no CFI covers its PC: the caller's rbp and return
 * address (its rsp is rbp + 16), or false if the chain is not plausible. *caller_entry: the walk
 * cache's entry of the caller's lookup address (ra - 1) when the cache holds it, else NULL. */
static inline __attribute__((always_inline)) bool follow_rbp(walker *w, uint64_t rbp, uint64_t rsp,
                                                            uint64_t *caller_rbp, uint64_t *ra,
                                                            const fu_walk_cache_entry **caller_entry)
{
    if (rbp % 8 != 0 || rbp < rsp || rbp - rsp > FU_FP_MAX_FRAME_SIZE)
        return false;
    const uint8_t *slots = window_span(w->reader, rbp, 16);
    if (slots) {
        memcpy(caller_rbp, slots, 8);
        memcpy(ra, slots + 8, 8);
    } else if (!read_soft(w, rbp, caller_rbp) || !read_soft(w, rbp + 8, ra)) {
        return false;
    }
    /* The return address must land in mapped code. The saved rbp is only the caller's register
     * value: a caller built without frame pointers keeps any data there. */
    return in_module(w, *ra - 1, caller_entry);
}

/* What a frame-pointer step knows of the caller: rbp, rsp and the return address. */
#define FU_FP_CALLER_VALID ((1u << FU_REG_RBP) | (1u << FU_REG_RSP) | (1u << FU_REG_RA))

static inline __attribute__((always_inline)) bool frame_pointer_step(walker *w, const fu_regs *regs, fu_regs *out)
{
    uint64_t rbp, rsp, caller_rbp, ra;
    const fu_walk_cache_entry *caller_entry;
    if (!fu_regs_get(regs, FU_REG_RBP, &rbp) || !fu_regs_get(regs, FU_REG_RSP, &rsp) ||
        !follow_rbp(w, rbp, rsp, &caller_rbp, &ra, &caller_entry))
        return false;
    out->value[FU_REG_RBP] = caller_rbp;
    out->value[FU_REG_RSP] = rbp + 16;
    out->value[FU_REG_RA] = ra;
    out->valid = FU_FP_CALLER_VALID;
    return true;
}

/* No CFI covers the frame at `regs`: the frame pointer, if its chain is plausible. */
static inline __attribute__((always_inline)) int frame_pointer_or_fail(walker *w, const fu_regs *regs,
                                                                      fu_regs *caller)
{
    if (frame_pointer_step(w, regs, caller))
        return FU_FRAME_FP;
    w->result->outcome = FU_WALK_NO_UNWIND_INFO;
    w->result->fault_address = regs->value[FU_REG_RA];
    return -1;
}

static bool find_row(const fu_module *mod, uint64_t svma, const fu_table **table, int64_t *row, int64_t *fde)
{
    const fu_table *const tables[2] = {mod->eh_frame, mod->debug_frame};
    int which = fu_tables_find_row(tables, svma, row, fde);
    if (which < 0)
        return false;
    *table = tables[which];
    return true;
}

void fu_module_set_entry(fu_module *m, uint64_t entry)
{
    m->entry_code_start = entry;
    m->entry_code_size = 0;
    const fu_table *const tables[2] = {m->eh_frame, m->debug_frame};
    int64_t row, fde;
    if (entry == 0 || fu_tables_find_row(tables, entry, &row, &fde) >= 0)
        return;
    uint64_t next = fu_tables_next_fde_start(tables, entry);
    m->entry_code_size = next - entry < FU_ENTRY_CODE_MAX_BYTES ? next - entry : FU_ENTRY_CODE_MAX_BYTES;
}

static inline bool in_entry_code(const fu_module *mod, uint64_t svma)
{
    return svma - mod->entry_code_start < mod->entry_code_size;
}

/* The psABI's mark of the outermost frame: rbp known and 0 (fu_walk_cached). */
static inline bool marked_outermost(const fu_regs *regs)
{
    uint64_t rbp;
    return fu_regs_get(regs, FU_REG_RBP, &rbp) && rbp == 0;
}

_Static_assert(FU_COMPACT_CFA_KIND_COUNT <= 8 && FU_WALK_REGISTERS <= 32, "fu_compact_plan.cfa packs both");
_Static_assert(sizeof(fu_walk_cache_entry) == 32, "two walk cache entries a cache line");

/* A compact fast-path rule as fu_compact_plan states it (walk.h). */
static fu_compact_plan compact_plan(const fu_compact_rule *rule)
{
    fu_compact_plan plan = {rule->cfa_offset, (uint8_t)(rule->cfa_kind | rule->cfa_register << 3), 0, 0, 0, 1, {0}};
    int8_t by_8[FU_COMPACT_SAVED_REGISTERS + 1];
    memcpy(by_8, rule->saved_offset_by_8, FU_COMPACT_SAVED_REGISTERS);
    by_8[FU_COMPACT_SAVED_REGISTERS] = rule->ra_offset_by_8;
    int8_t highest_by_8 = 0;
    for (unsigned i = 0; i <= FU_COMPACT_SAVED_REGISTERS; i++) {
        if (by_8[i] == FU_COMPACT_KEEP) {
            plan.kept |= (uint8_t)(i < FU_COMPACT_SAVED_REGISTERS) << i; /* no return address rule: none */
        } else if (by_8[i] != FU_COMPACT_UNDEFINED) {
            plan.lowest_by_8 = !plan.restored || by_8[i] < plan.lowest_by_8 ? by_8[i] : plan.lowest_by_8;
            highest_by_8 = !plan.restored || by_8[i] > highest_by_8 ? by_8[i] : highest_by_8;
            plan.restored |= (uint8_t)(1u << i);
        }
    }
    plan.count_by_8 = (uint8_t)(highest_by_8 - plan.lowest_by_8 + 1); /* offsets are int8: at most 255 */
    for (unsigned i = 0; i <= FU_COMPACT_SAVED_REGISTERS; i++)
        if (plan.restored >> i & 1)
            plan.slot_by_8[i] = (uint8_t)(by_8[i] - plan.lowest_by_8);
    return plan;
}

/* The valid bits of the registers of each set of plan slots: slots 0, 1 are rbx (3), rbp (6),
 * slots 2..6 are r12..r15 and the return address (12..16). A table: one load instead of a dozen
 * instructions a frame in follow_rules. */
#define SLOT_REGISTERS(s) ((uint32_t)((s) & 1u) << 3 | (uint32_t)((s) & 2u) << 5 | (uint32_t)((s) & 0x7cu) << 10)
#define SLOT_REGISTERS_4(s) SLOT_REGISTERS(s), SLOT_REGISTERS(s + 1), SLOT_REGISTERS(s + 2), SLOT_REGISTERS(s + 3)
#define SLOT_REGISTERS_16(s) SLOT_REGISTERS_4(s), SLOT_REGISTERS_4(s + 4), SLOT_REGISTERS_4(s + 8), SLOT_REGISTERS_4(s + 12)
static const uint32_t slot_registers[1u << (FU_COMPACT_SAVED_REGISTERS + 1)] = {
    SLOT_REGISTERS_16(0),  SLOT_REGISTERS_16(16), SLOT_REGISTERS_16(32), SLOT_REGISTERS_16(48),
    SLOT_REGISTERS_16(64), SLOT_REGISTERS_16(80), SLOT_REGISTERS_16(96), SLOT_REGISTERS_16(112),
};

static inline uint32_t plan_slot_registers(uint32_t slots)
{
    return slot_registers[slots & ((1u << (FU_COMPACT_SAVED_REGISTERS + 1)) - 1)];
}

/* A compact rule's save slots, some outside the reader's window: each read checked, as apply_row
 * does (only the return address must be readable), after start_caller. */
static bool restore_compact_slots(walker *w, const fu_compact_plan *plan, uint64_t cfa, fu_regs *out)
{
    uint64_t lowest = cfa + (uint64_t)(int64_t)plan->lowest_by_8 * 8;
    for (unsigned i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++) {
        unsigned reg = fu_compact_saved_register[i];
        if (plan->restored >> i & 1)
            restore_saved(w, reg, lowest + 8u * plan->slot_by_8[i], out);
        else if (!(plan->kept >> i & 1))
            out->valid &= ~(1u << reg); /* undefined */
    }
    if (!(plan->restored >> FU_COMPACT_SAVED_REGISTERS & 1))
        return true; /* without a return address the stack ends here */
    return restore_saved(w, FU_REG_RA, lowest + 8u * plan->slot_by_8[FU_COMPACT_SAVED_REGISTERS], out);
}

/* FU_COMPACT_CFA_SIGNAL_CONTEXT (compact_table.h): the interrupted frame's registers from the
 * signal context at rsp, read as apply_row evaluates the row (the CFA first, then the registers in
 * column order, every read required), in one window check when the window holds the context. */
static bool apply_signal_context(walker *w, const fu_regs *regs, fu_regs *out)
{
    uint64_t rsp, cfa;
    if (!fu_regs_get(regs, FU_REG_RSP, &rsp)) {
        w->result->outcome = FU_WALK_EXPRESSION_ERROR;
        return false;
    }
    if (!read_word(w, rsp + FU_COMPACT_SIGNAL_CONTEXT_CFA, 8, &cfa))
        return false;
    start_caller(regs, cfa, out);
    const uint8_t *context = window_span(w->reader, rsp + FU_COMPACT_SIGNAL_CONTEXT_LOW, FU_COMPACT_SIGNAL_CONTEXT_SIZE);
    if (context) { /* rsp + FU_COMPACT_SIGNAL_CONTEXT_LOW */
        for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
            memcpy(&out->value[r], context + (fu_compact_signal_context[r] - FU_COMPACT_SIGNAL_CONTEXT_LOW), 8);
        out->valid = (1u << FU_WALK_REGISTERS) - 1;
        return true;
    }
    for (unsigned r = 0; r < FU_WALK_REGISTERS; r++) {
        uint64_t v;
        if (!read_word(w, rsp + fu_compact_signal_context[r], 8, &v))
            return false;
        fu_regs_set(out, r, v);
    }
    return true;
}

/* Apply a compact rule: the same results as apply_row on the DWARF row it was built from
 * (compact_table.c admits only rows whose every rule it restates exactly). Returns the caller's
 * frame kind (FU_FRAME_CFI, or FU_FRAME_SIGNAL with *signal_frame set and the frame flagged a
 * signal trampoline), or -1 with the outcome set. `plan` is the rule's compact_plan: when the
 * reader's window holds every slot it reads, each callee-saved register is one load, from its
 * slot or from the callee's value (no branch per slot), after one check for them all. */
static inline __attribute__((always_inline)) int apply_compact(walker *w, const fu_compact_plan *plan,
                                                               const fu_regs *regs, fu_regs *out, uint8_t *frame_flags,
                                                               bool *signal_frame)
{
    uint64_t cfa, base, rip;
    unsigned cfa_register = plan->cfa >> 3;
    switch ((fu_compact_cfa_kind)(plan->cfa & 7)) {
    case FU_COMPACT_CFA_RSP:
    case FU_COMPACT_CFA_RBP:
    case FU_COMPACT_CFA_REGISTER:
        if (!fu_regs_get(regs, cfa_register, &base)) {
            w->result->outcome = FU_WALK_REGISTER_UNKNOWN;
            return -1;
        }
        cfa = base + (uint64_t)(int64_t)plan->cfa_offset;
        break;
    case FU_COMPACT_CFA_PLT:
        /* a register the expression names is unknown: the evaluator's error */
        if (!fu_regs_get(regs, FU_REG_RSP, &base) || !fu_regs_get(regs, FU_REG_RA, &rip)) {
            w->result->outcome = FU_WALK_EXPRESSION_ERROR;
            return -1;
        }
        cfa = base + 8 + ((rip & 15) >= 11 ? 8 : 0);
        break;
    case FU_COMPACT_CFA_DEREF:
        if (!fu_regs_get(regs, cfa_register, &base)) {
            w->result->outcome = FU_WALK_EXPRESSION_ERROR;
            return -1;
        }
        if (!read_word(w, base + (uint64_t)(int64_t)plan->cfa_offset, 8, &cfa))
            return -1;
        break;
    case FU_COMPACT_CFA_SIGNAL_CONTEXT:
        *signal_frame = true;
        *frame_flags |= FU_FRAME_SIGNAL_TRAMPOLINE;
        return apply_signal_context(w, regs, out) ? FU_FRAME_SIGNAL : -1;
    default: /* NO_INFO and SLOW never get here */
        w->result->outcome = FU_WALK_NO_UNWIND_INFO;
        return -1;
    }
    const uint8_t *lowest = window_span(w->reader, cfa + (uint64_t)(int64_t)plan->lowest_by_8 * 8,
                                        (uint64_t)plan->count_by_8 * 8); /* CFA + 8 * plan->lowest_by_8 */
    if (!lowest) {
        start_caller(regs, cfa, out);
        return restore_compact_slots(w, plan, cfa, out) ? FU_FRAME_CFI : -1;
    }
    /* every slot read lies in the window: a restored slot is a load from it, any other callee-saved
     * register a load of the callee's value (the value of an undefined one is never read) */
    uint32_t restored = plan->restored;
#pragma GCC unroll 6
    for (unsigned i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++) {
        unsigned reg = fu_compact_saved_register[i];
        const void *from = restored >> i & 1 ? (const void *)(lowest + 8 * plan->slot_by_8[i]) : &regs->value[reg];
        memcpy(&out->value[reg], from, 8);
    }
    /* the return address: its slot, or (no rule) any slot in the window, not valid */
    memcpy(&out->value[FU_REG_RA], lowest + 8 * plan->slot_by_8[FU_COMPACT_SAVED_REGISTERS], 8);
    out->value[FU_REG_RSP] = cfa;
    out->valid = (regs->valid & plan_slot_registers(plan->kept)) | plan_slot_registers(restored) | 1u << FU_REG_RSP;
    return FU_FRAME_CFI; /* without a return address the stack ends here */
}

fu_walk_outcome fu_eh_elf_failure_outcome(int status)
{
    switch (status) {
    case FU_EH_ELF_REGISTER_UNKNOWN: return FU_WALK_REGISTER_UNKNOWN;
    case FU_EH_ELF_EXPRESSION_ERROR: return FU_WALK_EXPRESSION_ERROR;
    case FU_EH_ELF_PAST_DUMP: return FU_WALK_TRUNCATED;
    default: return FU_WALK_UNREADABLE;
    }
}

/* The outcome of a compiled step that failed. */
static void compiled_failure(walker *w, int status, uint64_t fault_address)
{
    w->result->outcome = fu_eh_elf_failure_outcome(status);
    if (w->result->outcome == FU_WALK_TRUNCATED || w->result->outcome == FU_WALK_UNREADABLE)
        w->result->fault_address = fault_address;
}

/* apply_body's answer when the body leaves the row to the interpreter. */
#define INTERPRET (-2)

/* Run a compiled body: the caller's frame kind, -1 with the outcome set, or INTERPRET. */
static inline int apply_body(walker *w, fu_eh_elf_body_fn body, const fu_regs *regs, fu_regs *caller,
                             uint8_t *frame_flags, bool *signal_frame)
{
    uint64_t fault = 0;
    keep_callee_saved(regs, caller); /* what a body expects in `caller` (fu_unwind_abi.h) */
    int status = body(regs, caller, w->reader, &fault);
    if (status == FU_EH_ELF_CFI)
        return FU_FRAME_CFI;
    if (status == FU_EH_ELF_SIGNAL) {
        *signal_frame = true;
        *frame_flags |= FU_FRAME_SIGNAL_TRAMPOLINE;
        return FU_FRAME_SIGNAL;
    }
    if (status == FU_EH_ELF_INTERPRET)
        return INTERPRET;
    compiled_failure(w, status, fault);
    return -1;
}

/* Which tables the space's backend asks for a module (see fu_backend). */
static inline bool uses_compiled(const fu_address_space *space, const fu_module *mod)
{
    uint32_t b = space->backend;
    return mod->compiled && (b == FU_BACKEND_AUTO || b == FU_BACKEND_COMPILED || b == FU_BACKEND_COMPILED_ONLY);
}

static inline bool uses_compact(const fu_address_space *space, const fu_module *mod)
{
    uint32_t b = space->backend;
    return mod->compact && (b == FU_BACKEND_AUTO || b == FU_BACKEND_TABLE || b == FU_BACKEND_TABLE_ONLY);
}

static inline bool uses_dwarf(const fu_address_space *space)
{
    return space->backend != FU_BACKEND_TABLE_ONLY && space->backend != FU_BACKEND_COMPILED_ONLY;
}

/* What settles the step at `svma` of `mod` before the DWARF tables (fu_backend): the compact
 * table's rule where the backend uses the table and the row is on its fast path; else the compiled
 * eh_elf's body where the backend uses eh_elfs (auto: for the compact table's slow rows, or a
 * module without one); else kind NONE, the interpreter. NO_INFO where the first table asked says
 * that no CFI covers svma (both are built from both DWARF tables). */
typedef struct fast_step {
    uint8_t kind;                 /* fu_walk_cached; NONE: the DWARF tables decide */
    const fu_compact_rule *rule;  /* RULE */
    fu_eh_elf_body_fn body;       /* BODY */
} fast_step;

static inline fast_step fast_step_at(const fu_address_space *space, const fu_module *mod, uint64_t svma)
{
    fast_step f = {FU_WALK_CACHED_NONE, NULL, NULL};
    if (uses_compact(space, mod)) {
        const fu_compact_rule *rule = fu_compact_find(mod->compact, svma, NULL);
        if (!rule || rule->cfa_kind == FU_COMPACT_CFA_NO_INFO) {
            f.kind = FU_WALK_CACHED_NO_INFO;
            return f;
        }
        if (rule->cfa_kind != FU_COMPACT_CFA_SLOW) {
            f.kind = FU_WALK_CACHED_RULE;
            f.rule = rule;
            return f;
        }
    }
    if (uses_compiled(space, mod)) {
        unsigned body = mod->compiled->find(svma);
        if (body == 0) {
            f.kind = FU_WALK_CACHED_NO_INFO;
        } else if (body <= mod->compiled->body_count) {
            f.kind = FU_WALK_CACHED_BODY;
            f.body = mod->compiled->bodies[body];
        } /* else a body number out of range: not trusted, the interpreter decides */
    }
    return f;
}

/* The caller of the frame at `regs` (looked up at `lookup`, in module `m` or -1): its frame kind,
 * or -1 with the outcome set. Tables in order: compact table or compiled eh_elf (fast_step_at),
 * DWARF tables, frame pointer (fu_backend says which apply). */
static int step(walker *w, int64_t m, uint64_t lookup, const fu_regs *regs, fu_regs *caller, uint8_t *frame_flags,
                bool *signal_frame)
{
    const fu_address_space *space = w->space;
    *signal_frame = false;
    if (m >= 0) {
        const fu_module *mod = &space->modules[m];
        uint64_t svma = lookup - mod->bias;
        if (in_entry_code(mod, svma) && marked_outermost(regs)) {
            w->result->outcome = FU_WALK_END;
            return -1;
        }
        fast_step f = fast_step_at(space, mod, svma);
        if (f.kind == FU_WALK_CACHED_RULE) {
            fu_compact_plan plan = compact_plan(f.rule);
            return apply_compact(w, &plan, regs, caller, frame_flags, signal_frame);
        }
        if (f.kind == FU_WALK_CACHED_BODY) {
            int kind = apply_body(w, f.body, regs, caller, frame_flags, signal_frame);
            if (kind != INTERPRET)
                return kind;
        }
        const fu_table *table = NULL;
        int64_t row = -1, fde = -1;
        if (f.kind != FU_WALK_CACHED_NO_INFO && uses_dwarf(space) && find_row(mod, svma, &table, &row, &fde)) {
            const fu_entry *entry = &table->entries[fde];
            *signal_frame = entry->cie && entry->cie->signal_frame;
            if (*signal_frame)
                *frame_flags |= FU_FRAME_SIGNAL_TRAMPOLINE;
            uint64_t ra_column = entry->cie ? entry->cie->ra_column : FU_REG_RA;
            if (!apply_row(w, table, fu_table_state(table, table->row_state[row]), ra_column, regs, caller))
                return -1;
            return *signal_frame ? FU_FRAME_SIGNAL : FU_FRAME_CFI;
        }
    }
    return frame_pointer_or_fail(w, regs, caller);
}

/* What the walk cache keeps for `lookup` in module `m` (or -1): what settles the step without the
 * DWARF tables (a compact fast-path rule, a compiled body, or "no CFI here"), else kind NONE
 * (step() decides, every time). */
static inline void settle(const fu_address_space *space, int64_t m, uint64_t lookup, fu_walk_cache_entry *e)
{
    *e = (fu_walk_cache_entry){.lookup = lookup, .module = m < 0 ? UINT32_MAX : (uint32_t)m};
    if (m < 0) {
        e->kind = FU_WALK_CACHED_NO_INFO;
        return;
    }
    const fu_module *mod = &space->modules[m];
    if (in_entry_code(mod, lookup - mod->bias)) {
        e->kind = FU_WALK_CACHED_ENTRY_CODE;
        return;
    }
    fast_step f = fast_step_at(space, mod, lookup - mod->bias);
    e->kind = f.kind;
    if (f.kind == FU_WALK_CACHED_RULE)
        e->what.plan = compact_plan(f.rule);
    else if (f.kind == FU_WALK_CACHED_BODY)
        e->what.body = f.body;
}

uint8_t fu_walk_step_source(const fu_address_space *space, uint64_t lookup)
{
    fu_walk_cache_entry e;
    settle(space, fu_address_space_find(space, lookup), lookup, &e);
    return e.kind;
}

int fu_walk_step(const fu_address_space *space, const fu_reader *reader, const fu_regs *regs,
                 bool ip_is_return_address, fu_regs *caller, uint8_t *frame_flags, fu_walk_result *result)
{
    walker w = {space, reader, result, NULL};
    uint64_t ip;
    bool signal_frame;
    *frame_flags = 0;
    if (!fu_regs_get(regs, FU_REG_RA, &ip)) {
        result->outcome = FU_WALK_REGISTER_UNKNOWN;
        return -1;
    }
    uint64_t lookup = fu_lookup_address(ip, ip_is_return_address);
    return step(&w, fu_address_space_find(space, lookup), lookup, regs, caller, frame_flags, &signal_frame);
}

void fu_walk_cache_bind(fu_walk_cache *cache, const fu_address_space *space)
{
    memset(cache->entries, 0, sizeof cache->entries);
    memset(cache->shapes, 0, sizeof cache->shapes);
    memset(cache->interrupted, 0, sizeof cache->interrupted);
    cache->space = space;
}

fu_walk_cache *fu_walk_cache_borrow(fu_walk_cache_slot *slot, const fu_address_space *space)
{
    for (unsigned i = 0; i < FU_WALK_KEPT_CACHES; i++)
        if (slot->caches[i] && !slot->lent[i]) {
            slot->lent[i] = true;
            return slot->caches[i];
        }
    fu_walk_cache *cache = malloc(sizeof *cache);
    if (!cache)
        return NULL;
    fu_walk_cache_bind(cache, space);
    for (unsigned i = 0; i < FU_WALK_KEPT_CACHES; i++)
        if (!slot->caches[i]) {
            slot->caches[i] = cache;
            slot->lent[i] = true;
            break;
        }
    return cache;
}

void fu_walk_cache_return(fu_walk_cache_slot *slot, fu_walk_cache *cache)
{
    for (unsigned i = 0; i < FU_WALK_KEPT_CACHES; i++)
        if (cache == slot->caches[i]) {
            slot->lent[i] = false;
            return;
        }
    free(cache);
}

void fu_walk_cache_slot_free(fu_walk_cache_slot *slot)
{
    for (unsigned i = 0; i < FU_WALK_KEPT_CACHES; i++) {
        free(slot->caches[i]);
        slot->caches[i] = NULL;
    }
}

/* fu_walk's checks on a step from the frame at (ip, sp) to its caller at (next_ip, next_sp), `sp`
 * NULL where the frame's rsp is unknown: true to go on, else false with the outcome set. */
static inline __attribute__((always_inline)) bool caller_goes_on(fu_walk_result *result, uint64_t ip,
                                                                const uint64_t *sp, uint64_t next_ip,
                                                                uint64_t next_sp, bool signal_frame)
{
    if (next_ip == 0) {
        result->outcome = FU_WALK_END; /* DW_CFA_undefined return address (e.g. _start, clone) */
        return false;
    }
    if (sp) {
        if (next_sp == *sp && next_ip == ip) {
            result->outcome = FU_WALK_NO_PROGRESS;
            return false;
        }
        /* a signal may run on an alternate stack: only ordinary frames must move up */
        if (!signal_frame && next_sp < *sp) {
            result->outcome = FU_WALK_SP_BACKWARDS;
            result->fault_address = next_sp;
            return false;
        }
    }
    return true;
}

/* fu_walk's checks on the caller's registers a step gave (`caller`), from the frame at (ip, sp):
 * true to go on from (*next_ip, *next_sp), else false with the outcome set. A return address
 * without a rule ends the stack (DW_CFA_undefined: _start, clone); an unknown CFA fails it. */
static inline __attribute__((always_inline)) bool caller_registers_go_on(fu_walk_result *result, const fu_regs *caller,
                                                                        uint64_t ip, const uint64_t *sp,
                                                                        bool signal_frame, uint64_t *next_ip,
                                                                        uint64_t *next_sp)
{
    if (!fu_regs_get(caller, FU_REG_RA, next_ip)) {
        result->outcome = FU_WALK_END;
        return false;
    }
    if (!fu_regs_get(caller, FU_REG_RSP, next_sp)) {
        result->outcome = *next_ip == 0 ? FU_WALK_END : FU_WALK_REGISTER_UNKNOWN;
        return false;
    }
    return caller_goes_on(result, ip, sp, *next_ip, *next_sp, signal_frame);
}

static inline void record_frame(const fu_frames *frames, size_t n, uint64_t ip, uint32_t module, uint8_t kind)
{
    frames->ip[n] = ip;
    frames->module[n] = module;
    frames->kind[n] = kind;
    frames->flags[n] = 0;
}

/* From the frame at *ip (recorded, no CFI covers it): follow the frame pointer through it and
 * every caller that the walk cache knows has no CFI either (a program built with frame pointers
 * and no CFI), with rbp, rsp and the IP kept in registers instead of the fu_regs buffers, which
 * would cost a store and a reload a frame. Each step is frame_pointer_step with fu_walk's checks.
 * True when the walk goes on in fu_walk from *ip with `regs` (a frame-pointer caller), false when
 * it ended (the outcome set). */
static inline __attribute__((always_inline)) bool follow_frame_pointers(walker *w, fu_regs *regs, uint64_t *ip,
                                                                       const fu_frames *frames, size_t *n,
                                                                       size_t max_frames)
{
    fu_walk_result *result = w->result;
    uint64_t at = *ip, rbp, sp;
    if (!fu_regs_get(regs, FU_REG_RBP, &rbp) || !fu_regs_get(regs, FU_REG_RSP, &sp)) {
        result->outcome = FU_WALK_NO_UNWIND_INFO;
        result->fault_address = at;
        return false;
    }
    /* bounded by max_frames: each iteration but the last records a frame */
    for (;;) {
        uint64_t caller_rbp, ra;
        const fu_walk_cache_entry *e; /* the caller's, at ra - 1 */
        if (!follow_rbp(w, rbp, sp, &caller_rbp, &ra, &e)) {
            result->outcome = FU_WALK_NO_UNWIND_INFO;
            result->fault_address = at;
            return false;
        }
        uint64_t caller_sp = rbp + 16;
        if (!caller_goes_on(result, at, &sp, ra, caller_sp, false))
            return false;
        at = ra;
        sp = caller_sp;
        rbp = caller_rbp;
        if (!e || e->kind != FU_WALK_CACHED_NO_INFO)
            break; /* CFI, or not known yet: fu_walk decides */
        record_frame(frames, (*n)++, at, e->module, FU_FRAME_FP);
        if (*n == max_frames) {
            result->outcome = FU_WALK_FRAME_LIMIT;
            return false;
        }
    }
    regs->value[FU_REG_RBP] = rbp;
    regs->value[FU_REG_RSP] = sp;
    regs->value[FU_REG_RA] = at;
    regs->valid = FU_FP_CALLER_VALID;
    *ip = at;
    return true;
}

/* A walk whose frames are this far into the dump is a deep one (the callers of perf samples
 * prefetch the dump's first bytes, fu_walk_prefetch): each frame of follow_rules then prefetches
 * the stack PREFETCH_AHEAD_BYTES above its save slots, where the frames 2-4 steps up keep theirs.
 * On c's 18-frame stacks this took a cold first pass from 27.7 to 23.9 ns/frame (warm passes
 * unchanged); starting from the first frame cost hackbench's 4-frame walks 11% (lines they never
 * read), and in follow_bodies it cost the compiled backend's warm passes 3-6%. */
#define DEEP_WALK_BYTES 256
#define PREFETCH_AHEAD_BYTES 512

/* The prefetch above, for a frame whose stack is `offset` bytes into a window of `window_size`
 * bytes at `window`. (Given the window's fields as values: GCC 12 drops a __builtin_prefetch whose
 * address it would load through the reader here.) */
static inline __attribute__((always_inline)) void prefetch_deep_stack(const uint8_t *window, uint64_t window_size,
                                                                     uint64_t offset)
{
    if (offset >= DEEP_WALK_BYTES && offset < window_size && window_size - offset > PREFETCH_AHEAD_BYTES)
        __builtin_prefetch(window + offset + PREFETCH_AHEAD_BYTES);
}

/* What follow_rules and follow_bodies did with a run of frames */
#define RUN_ENDED 0     /* the walk ended (the outcome set) */
#define RUN_UNMOVED 1   /* nothing done: the first frame is not one the loop takes */
#define RUN_PAUSED 2    /* frames recorded; the one at *ip is not yet: fu_walk's general step takes it */

/* The plan slots of the six callee-saved registers (slot 6 is the return address's), and rbp's
 * (fu_compact_saved_register[1]). */
#define PLAN_CALLEE_SAVED_SLOTS ((1u << FU_COMPACT_SAVED_REGISTERS) - 1)
#define PLAN_RBP_SLOT 1

/* The step at `lookup`: its walk cache entry, or when the cache does not hold it (or there is no
 * cache) what settles it, put in the cache if it settles anything (else in *settled). */
static inline const fu_walk_cache_entry *find_step(walker *w, uint64_t lookup, fu_walk_cache_entry *settled)
{
    fu_walk_cache_entry *entry = cache_entry(w->cache, lookup);
    if (cached_at(entry, lookup))
        return entry;
    settle(w->space, fu_address_space_find(w->space, lookup), lookup, settled);
    if (entry && settled->kind != FU_WALK_CACHED_NONE) {
        *entry = *settled;
        return entry;
    }
    return settled;
}

/* From the frame at *ip (not recorded yet; `regs` its registers, rsp among them; `first` its walk
 * cache entry, a compact rule): walk every frame whose step is a cached compact rule with CFA =
 * rsp + k or rbp + k and save slots inside the reader's window, the steps of nearly every frame,
 * in a loop of its own. It does what apply_compact and fu_walk's checks do, with the IP and SP in
 * registers (not stored and reloaded through the register buffers on each step's critical path),
 * the registers updated in place (kept ones untouched, restored ones loaded from their slots, no
 * swap of buffers): about half the instructions of a general step. Any other
 * frame, or one whose slots lie outside the window, pauses the loop for fu_walk's general step,
 * which takes it as before. Bounded by max_frames: every iteration records a frame or stops.
 *
 * With `shape` (a walk's first frame, the window starting at its rsp), the run is written down in
 * it (walk.h) if it ends the walk (FU_WALK_END) within FU_WALK_SHAPE_FRAMES frames; the loop then
 * settles the steps the cache does not hold yet rather than pausing at them (which would change
 * nothing of the walk: fu_walk's general step would settle them and come back). Else the shape
 * says that this IP had none. */
static inline __attribute__((always_inline)) int follow_rules(walker *w, fu_regs *regs, uint64_t *ip_io,
                                                             bool *ip_is_return_address, uint8_t *kind_io,
                                                             const fu_frames *frames, size_t *n_io,
                                                             size_t max_frames, const fu_walk_cache_entry *first,
                                                             fu_walk_shape *shape)
{
    const fu_walk_cache *cache = w->cache;
    const uint8_t *window = w->reader->window;
    const uint64_t window_address = w->reader->window_address, window_size = w->reader->window_size;
    const size_t n_first = *n_io;
    uint64_t ip = *ip_io, sp = regs->value[FU_REG_RSP];
    uint32_t valid = regs->valid;
    size_t n = n_first;
    uint8_t kind = *kind_io; /* of the frame at ip: the caller's, then FU_FRAME_CFI */
    const fu_walk_cache_entry *e = first;
    fu_walk_outcome ended;
    /* writing the shape down: the window bytes read so far, the rbp values checked, where rbp's
     * value came from and whether a check on it is written down */
    bool tracing = shape != NULL;
    uint64_t extent = 0;
    size_t ra_read = 0; /* frames whose return address was read */
    unsigned rbp_checks = 0;
    uint16_t rbp_source = FU_WALK_SHAPE_INITIAL;
    bool rbp_checked = false;
    if (shape) {
        shape->frames = 0; /* no shape, until the walk ends */
        shape->valid = valid;
    }
    for (;;) {
        const fu_compact_plan *plan = &e->what.plan;
        uint64_t base;
        if ((plan->cfa & 7) == FU_COMPACT_CFA_RSP)
            base = sp;
        else if ((plan->cfa & 7) == FU_COMPACT_CFA_RBP && (valid >> FU_REG_RBP & 1))
            base = regs->value[FU_REG_RBP];
        else
            break;
        uint64_t cfa = base + (uint64_t)(int64_t)plan->cfa_offset;
        uint64_t offset = cfa + (uint64_t)(int64_t)plan->lowest_by_8 * 8 - window_address;
        uint64_t span = (uint64_t)plan->count_by_8 * 8; /* the slots' bytes */
        if (offset > window_size || span > window_size - offset)
            break; /* a slot outside the window: the general step reads them one by one */
        const uint8_t *lowest = window + offset;
        prefetch_deep_stack(window, window_size, offset);
        if (tracing) {
            uint64_t end = offset + span;
            bool rbp_base = (plan->cfa & 7) == FU_COMPACT_CFA_RBP;
            if (n == FU_WALK_SHAPE_FRAMES || end > UINT16_MAX ||
                (rbp_base && !rbp_checked && rbp_checks == FU_WALK_SHAPE_RBP_CHECKS)) {
                tracing = false; /* more than a shape states */
            } else {
                if (rbp_base && !rbp_checked) {
                    shape->rbp_check[rbp_checks].delta = base - window_address;
                    shape->rbp_check[rbp_checks++].slot = rbp_source;
                    rbp_checked = true;
                }
                extent = end > extent ? end : extent;
            }
        }
        record_frame(frames, n++, ip, e->module, kind);
        if (n == max_frames) {
            ended = FU_WALK_FRAME_LIMIT;
            goto ended;
        }
        uint32_t restored = plan->restored;
        if (!(restored >> FU_COMPACT_SAVED_REGISTERS & 1)) {
            ended = FU_WALK_END; /* no return address: the stack ends here */
            goto ended;
        }
        uint64_t ra;
        memcpy(&ra, lowest + 8 * plan->slot_by_8[FU_COMPACT_SAVED_REGISTERS], 8);
        if (tracing) {
            shape->ra_slot[n - 1] = (uint16_t)(offset + 8u * plan->slot_by_8[FU_COMPACT_SAVED_REGISTERS]);
            ra_read = n;
        }
        if (!caller_goes_on(w->result, ip, &sp, ra, cfa, false))
            goto checked;
        /* the restored callee-saved registers: all six (big functions: CPython's evaluation
         * loop, much of libc) as straight loads, others a branch each (unrolled: a frame's pattern
         * of them repeats, so they predict well). Against a loop over the set bits: python 16.2 ->
         * 14.8, c 13.5 -> 12.7 ns/frame; the branches alone lose python's cold passes 9%. */
        if ((restored & PLAN_CALLEE_SAVED_SLOTS) == PLAN_CALLEE_SAVED_SLOTS) {
#pragma GCC unroll 6
            for (unsigned i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++)
                memcpy(&regs->value[fu_compact_saved_register[i]], lowest + 8 * plan->slot_by_8[i], 8);
        } else {
#pragma GCC unroll 6
            for (unsigned i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++)
                if (restored >> i & 1)
                    memcpy(&regs->value[fu_compact_saved_register[i]], lowest + 8 * plan->slot_by_8[i], 8);
        }
        if (tracing && (restored >> PLAN_RBP_SLOT & 1)) {
            rbp_source = (uint16_t)(offset + 8u * plan->slot_by_8[PLAN_RBP_SLOT]);
            rbp_checked = false;
        }
        valid = (valid & plan_slot_registers(plan->kept)) | plan_slot_registers(restored) | 1u << FU_REG_RSP;
        sp = cfa;
        ip = ra;
        kind = FU_FRAME_CFI;
        if (tracing) {
            fu_walk_cache_entry settled; /* a RULE is put in the cache: e never points here */
            if ((e = find_step(w, ra - 1, &settled))->kind != FU_WALK_CACHED_RULE)
                break;
        } else if (!(e = cached_caller(cache, ra, FU_WALK_CACHED_RULE)))
            break;
    }
    *n_io = n;
    if (n == n_first)
        return RUN_UNMOVED;
    regs->value[FU_REG_RSP] = sp;
    regs->value[FU_REG_RA] = ip;
    regs->valid = valid;
    *ip_io = ip;
    *ip_is_return_address = true;
    *kind_io = kind;
    return RUN_PAUSED;
ended:
    w->result->outcome = ended;
checked: /* caller_goes_on set the outcome, or the code above */
    *n_io = n;
    if (tracing && w->result->outcome == FU_WALK_END) {
        /* the stack ended at a frame without a return address, or at a zero one (ra_read counts
         * it: checked like the others); the frames as recorded */
        for (size_t i = 0; i < n; i++) {
            shape->ip[i] = frames->ip[i];
            shape->module[i] = frames->module[i];
        }
        shape->ip[n] = 0;
        shape->ra_count = (uint16_t)ra_read;
        shape->extent = (uint16_t)extent;
        shape->rbp_checks = (uint8_t)rbp_checks;
        shape->frames = (uint16_t)n;
    }
    return RUN_ENDED;
}

/* A walk from its first frame (at ip, `regs` its registers, the reader's window starting at its rsp)
 * by the shape `s` of an earlier one from the same IP: if everything that walk's course depended
 * on is the same here (walk.h), its frames are written and true (the walk ended, FU_WALK_END);
 * else false, nothing written. Independent loads and one branch for the comparisons. */
static inline bool follow_shape(const fu_walk_shape *s, const fu_reader *reader, const fu_regs *regs,
                                size_t max_frames, const fu_frames *frames)
{
    if (s->valid != regs->valid || s->frames >= max_frames || s->extent > reader->window_size)
        return false;
    const uint8_t *window = reader->window;
    const uint64_t sp = regs->value[FU_REG_RSP];
    uint64_t differ = 0;
    for (unsigned i = 0; i < s->ra_count && i < FU_WALK_SHAPE_FRAMES; i++) {
        uint64_t ra;
        memcpy(&ra, window + s->ra_slot[i], 8);
        differ |= ra ^ s->ip[i + 1];
    }
    for (unsigned i = 0; i < s->rbp_checks && i < FU_WALK_SHAPE_RBP_CHECKS; i++) {
        uint64_t rbp = regs->value[FU_REG_RBP];
        if (s->rbp_check[i].slot != FU_WALK_SHAPE_INITIAL)
            memcpy(&rbp, window + s->rbp_check[i].slot, 8);
        differ |= (rbp - sp) ^ s->rbp_check[i].delta;
    }
    if (differ)
        return false;
    for (unsigned i = 0; i < s->frames && i < FU_WALK_SHAPE_FRAMES; i++) {
        frames->ip[i] = s->ip[i];
        frames->module[i] = s->module[i];
        frames->kind[i] = i ? FU_FRAME_CFI : FU_FRAME_FIRST;
        frames->flags[i] = 0;
    }
    return true;
}

/* follow_rules for compiled eh_elf bodies: from the frame at *ip (not recorded yet; `*regs_io` its
 * registers, rsp among them; `first` its walk cache entry, a body), walk every frame whose cached
 * step is a body that returns an ordinary frame (FU_EH_ELF_CFI), in a loop of its own: the body
 * called as apply_body does, then fu_walk's checks with the IP and SP in registers. A body that
 * returns anything else (a signal frame, the interpreter, a failure) wrote only into the caller's
 * buffer: the loop pauses before recording that frame, and fu_walk's general step calls the body
 * again and takes its answer. Bounded by max_frames: every iteration records a frame or stops. */
static inline __attribute__((always_inline)) int follow_bodies(walker *w, fu_regs **regs_io, fu_regs **caller_io,
                                                              uint64_t *ip_io, bool *ip_is_return_address,
                                                              uint8_t *kind_io, const fu_frames *frames,
                                                              size_t *n_io, size_t max_frames,
                                                              const fu_walk_cache_entry *first)
{
    const fu_walk_cache *cache = w->cache;
    const fu_reader *reader = w->reader;
    const size_t n_first = *n_io;
    fu_regs *regs = *regs_io, *caller = *caller_io;
    uint64_t ip = *ip_io, sp = regs->value[FU_REG_RSP];
    size_t n = n_first;
    uint8_t kind = *kind_io;
    const fu_walk_cache_entry *e = first;
    fu_walk_outcome ended;
    for (;;) {
        uint64_t fault = 0;
        keep_callee_saved(regs, caller); /* what a body expects in `caller` (fu_unwind_abi.h) */
        if (e->what.body(regs, caller, reader, &fault) != FU_EH_ELF_CFI)
            break;
        record_frame(frames, n++, ip, e->module, kind);
        if (n == max_frames) {
            ended = FU_WALK_FRAME_LIMIT;
            goto ended;
        }
        uint64_t ra, next_sp;
        if (!caller_registers_go_on(w->result, caller, ip, &sp, false, &ra, &next_sp))
            goto checked;
        fu_regs *swap = regs;
        regs = caller;
        caller = swap;
        sp = next_sp;
        ip = ra;
        kind = FU_FRAME_CFI;
        if (!(e = cached_caller(cache, ra, FU_WALK_CACHED_BODY)))
            break;
    }
    *n_io = n;
    if (n == n_first)
        return RUN_UNMOVED;
    *regs_io = regs;
    *caller_io = caller;
    *ip_io = ip;
    *ip_is_return_address = true;
    *kind_io = kind;
    return RUN_PAUSED;
ended:
    w->result->outcome = ended;
checked: /* caller_goes_on set the outcome */
    *n_io = n;
    return RUN_ENDED;
}

/* Whether shape slot `s` holds the shape of a walk from `ip` (slots are shared: direct-mapped). */
static inline bool holds_shape_of(const fu_walk_shape *s, uint64_t ip)
{
    return s->frames && s->ip[0] == ip;
}

/* Prefetch the lines of the window's [from, to) that lie in the window. */
static inline __attribute__((always_inline)) void prefetch_lines(const uint8_t *window, uint64_t window_size,
                                                                 uint64_t from, uint64_t to)
{
    for (uint64_t offset = from & ~(uint64_t)63; offset < to && offset < window_size; offset += 64)
        __builtin_prefetch(window + offset);
}

/* Out of line: inlined into unwind_samples' loop, GCC 12 -O2 drops every prefetch below (the cold
 * passes then took 30-40% longer than with the 512 bytes one sample ahead). */
void fu_walk_prefetch(const fu_walk_cache *cache, uint64_t ip, const uint8_t *window, uint64_t window_size)
{
    const fu_walk_shape *shape = &cache->shapes[slot_of(ip, FU_WALK_SHAPE_BITS)];
    if (holds_shape_of(shape, ip) && shape->extent <= window_size) {
        for (unsigned i = 0; i < shape->ra_count && i < FU_WALK_SHAPE_FRAMES; i++)
            __builtin_prefetch(window + shape->ra_slot[i]);
        return;
    }
    uint64_t end = FU_WALK_PREFETCH_BYTES;
    const fu_walk_interrupted *interrupted = &cache->interrupted[slot_of(ip, FU_WALK_INTERRUPTED_BITS)];
    if (interrupted->ip == ip) {
        prefetch_lines(window, window_size, interrupted->offset,
                       (uint64_t)interrupted->offset + FU_WALK_INTERRUPTED_PREFETCH_BYTES);
        if (interrupted->context_end < end) /* a handler's big frames: no more than without */
            end = interrupted->context_end;
    }
    prefetch_lines(window, window_size, 0, end);
}

bool fu_walk_begin(const fu_address_space *space, const fu_regs *regs, const fu_reader *reader, fu_walk_cache *cache,
                   const fu_frames *frames, size_t max_frames, fu_walk_result *result,
                   fu_walk_shape **shape_to_write)
{
    *result = (fu_walk_result){FU_WALK_END, 0, 0};
    *shape_to_write = NULL;
    if (max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    if (max_frames == 0 || !(regs->valid >> FU_REG_RA & 1)) {
        result->outcome = max_frames == 0 ? FU_WALK_FRAME_LIMIT : FU_WALK_REGISTER_UNKNOWN;
        return true;
    }
    /* The slot of this walk's shape (the window starting at the first frame's rsp): the walk
     * follows the shape there if it holds (walk.h says when the walk writes its own down). */
    uint64_t ip = regs->value[FU_REG_RA];
    if (cache && cache->space == space && reader->window && (regs->valid >> FU_REG_RSP & 1) &&
        reader->window_address == regs->value[FU_REG_RSP]) {
        fu_walk_shape *shape = &cache->shapes[slot_of(ip, FU_WALK_SHAPE_BITS)];
        if (holds_shape_of(shape, ip) && follow_shape(shape, reader, regs, max_frames, frames)) {
            shape->misses = 1;
            result->frame_count = shape->frames; /* FU_WALK_END */
            return true;
        }
        if (shape->misses++ % FU_WALK_SHAPE_RETRY == 0)
            *shape_to_write = shape;
    }
    return false;
}

void fu_walk_finish(const fu_address_space *space, fu_regs *registers, const fu_reader *reader, fu_walk_cache *cache,
                    const fu_frames *frames_out, size_t max_frames, fu_walk_result *result,
                    fu_walk_shape *shape_to_write)
{
    const fu_frames frames = *frames_out; /* the column pointers in registers, not reloaded per frame */
    if (cache && cache->space != space)
        cache = NULL; /* bound to another space: its entries say nothing about this one */
    walker w = {space, reader, result, cache};
    if (max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    /* the current frame's registers and its caller's, swapped after each step */
    fu_regs other;
    fu_regs *regs = registers, *caller = &other;
    uint64_t ip = regs->value[FU_REG_RA];
    bool ip_is_return_address = false;
    uint8_t kind = FU_FRAME_FIRST;
    size_t n = 0; /* frames written */
    fu_walk_interrupted interrupted_at = {0, 0, 0}; /* the last signal context crossed in the window */
    /* Each iteration records one frame and steps to its caller (or a run of frames, through frame
     * pointers, follow_rules or follow_bodies); bounded by max_frames. */
    for (;;) {
        uint64_t lookup = fu_lookup_address(ip, ip_is_return_address);
        fu_walk_cache_entry settled;
        const fu_walk_cache_entry *found = find_step(&w, lookup, &settled);
        /* runs of the commonest steps in loops of their own (which find their next steps in the
         * cache, so only with one: then a RULE or BODY entry is in it); a first frame's run of
         * rules written down as the shape of the walk */
        if (cache && (regs->valid >> FU_REG_RSP & 1) &&
            (found->kind == FU_WALK_CACHED_RULE || found->kind == FU_WALK_CACHED_BODY)) {
            int ran;
            if (found->kind == FU_WALK_CACHED_BODY)
                ran = follow_bodies(&w, &regs, &caller, &ip, &ip_is_return_address, &kind, &frames, &n, max_frames,
                                    found);
            else if (n == 0 && shape_to_write) /* apart, so that the other call's loop has no tracing in it */
                ran = follow_rules(&w, regs, &ip, &ip_is_return_address, &kind, &frames, &n, max_frames, found,
                                   shape_to_write);
            else
                ran = follow_rules(&w, regs, &ip, &ip_is_return_address, &kind, &frames, &n, max_frames, found,
                                   NULL);
            if (ran == RUN_ENDED)
                break;
            if (ran == RUN_PAUSED)
                continue; /* at a frame of another kind: looked up afresh */
        }
        int64_t m = found->module == UINT32_MAX ? -1 : (int64_t)found->module;
        uint8_t *frame_flags = &frames.flags[n];
        record_frame(&frames, n++, ip, found->module, kind);
        if (n == max_frames) {
            result->outcome = FU_WALK_FRAME_LIMIT;
            break;
        }
        bool signal_frame = false;
        int caller_kind;
        switch ((fu_walk_cached)found->kind) {
        case FU_WALK_CACHED_RULE:
            caller_kind = apply_compact(&w, &found->what.plan, regs, caller, frame_flags, &signal_frame);
            break;
        case FU_WALK_CACHED_BODY:
            caller_kind = apply_body(&w, found->what.body, regs, caller, frame_flags, &signal_frame);
            if (caller_kind == INTERPRET)
                caller_kind = step(&w, m, lookup, regs, caller, frame_flags, &signal_frame);
            break;
        case FU_WALK_CACHED_ENTRY_CODE:
            if (marked_outermost(regs)) {
                result->outcome = FU_WALK_END;
                goto done;
            }
            __attribute__((fallthrough)); /* entry code has no CFI */
        case FU_WALK_CACHED_NO_INFO:
            if (!follow_frame_pointers(&w, regs, &ip, &frames, &n, max_frames))
                goto done;
            /* regs hold the caller of the last frame recorded, at ip */
            kind = FU_FRAME_FP;
            ip_is_return_address = true;
            continue;
        default:
            caller_kind = step(&w, m, lookup, regs, caller, frame_flags, &signal_frame);
            break;
        }
        if (caller_kind < 0)
            break; /* the step set the outcome */
        kind = (uint8_t)caller_kind;
        uint64_t next_ip, sp, next_sp;
        bool sp_known = fu_regs_get(regs, FU_REG_RSP, &sp);
        if (!caller_registers_go_on(result, caller, ip, sp_known ? &sp : NULL, signal_frame, &next_ip, &next_sp))
            break;
        if (signal_frame && sp_known && sp - reader->window_address < reader->window_size &&
            next_sp - reader->window_address < reader->window_size) {
            interrupted_at.ip = frames.ip[0];
            interrupted_at.context_end = (uint32_t)(sp - reader->window_address) + FU_COMPACT_SIGNAL_CONTEXT_LOW +
                                         FU_COMPACT_SIGNAL_CONTEXT_SIZE;
            interrupted_at.offset = (uint32_t)(next_sp - reader->window_address);
        }
        fu_regs *swap = regs;
        regs = caller;
        caller = swap;
        ip = next_ip;
        ip_is_return_address = !signal_frame;
    }
done:
    result->frame_count = n;
    if (cache && n > 0) { /* what fu_walk_prefetch is to know of the next walk from this IP */
        fu_walk_interrupted *interrupted = &cache->interrupted[slot_of(frames.ip[0], FU_WALK_INTERRUPTED_BITS)];
        if (interrupted_at.ip)
            *interrupted = interrupted_at;
        else if (interrupted->ip == frames.ip[0])
            interrupted->ip = 0;
    }
}

void fu_walk(const fu_address_space *space, fu_regs *registers, const fu_reader *reader, fu_walk_cache *cache,
             const fu_frames *frames, size_t max_frames, fu_walk_result *result)
{
    fu_walk_shape *shape_to_write;
    if (!fu_walk_begin(space, registers, reader, cache, frames, max_frames, result, &shape_to_write))
        fu_walk_finish(space, registers, reader, cache, frames, max_frames, result, shape_to_write);
}
