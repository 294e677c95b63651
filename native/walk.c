/* walk: the stack walker (see walk.h for its contract). */
#include "walk.h"

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
    fu_read_fn read;
    void *read_context;
    fu_walk_result *result;
} walker;

/* Read memory; on failure record the outcome (truncated or unreadable) and the address. */
static bool read_word(walker *w, uint64_t address, unsigned size, uint64_t *out)
{
    fu_read_status status = w->read(w->read_context, address, size, out);
    if (status == FU_READ_OK)
        return true;
    w->result->outcome = status == FU_READ_PAST_DUMP ? FU_WALK_TRUNCATED : FU_WALK_UNREADABLE;
    w->result->fault_address = address;
    return false;
}

/* Read memory whose failure is not the walk's: an unreadable save slot makes a register unknown
 * (see apply_row), a frame-pointer chain that leads nowhere is just not followed. */
static bool read_soft(walker *w, uint64_t address, uint64_t *out)
{
    return w->read(w->read_context, address, 8, out) == FU_READ_OK;
}

typedef struct expr_reader {
    walker *w;
    fu_read_status status;
    uint64_t address;
} expr_reader;

static bool read_for_expression(void *opaque, uint64_t address, unsigned size, uint64_t *out)
{
    expr_reader *r = opaque;
    r->status = r->w->read(r->w->read_context, address, size, out);
    r->address = address;
    return r->status == FU_READ_OK;
}

/* Evaluate a DWARF expression of the table over the current registers. */
static bool evaluate(walker *w, const fu_table *t, const fu_rule *rule, const fu_regs *regs, bool push_cfa,
                     uint64_t cfa, uint64_t *value)
{
    fu_expr_context ctx;
    memset(ctx.valid, 0, sizeof ctx.valid);
    for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
        if (regs->valid >> r & 1) {
            ctx.regs[r] = regs->value[r];
            ctx.valid[0] |= (uint64_t)1 << r;
        }
    expr_reader reader = {w, FU_READ_OK, 0};
    ctx.read_memory = read_for_expression;
    ctx.opaque = &reader;
    ctx.address_size = t->section.address_size;
    fu_error err = {0};
    if (fu_expr_evaluate(t->section.data + rule->value, rule->expr_len, &ctx, push_cfa, cfa, value, &err) == FU_OK)
        return true;
    if (reader.status != FU_READ_OK) {
        w->result->outcome = reader.status == FU_READ_PAST_DUMP ? FU_WALK_TRUNCATED : FU_WALK_UNREADABLE;
        w->result->fault_address = reader.address;
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
static void start_caller(const fu_regs *regs, uint64_t cfa, fu_regs *out)
{
    *out = *regs;
    out->valid &= FU_CALLEE_SAVED_MASK;
    fu_regs_set(out, FU_REG_RSP, cfa);
}

/* Restore a register saved at `address`. Only the return address must be readable: another
 * register saved where we cannot read (e.g. below the SP in an epilogue, already popped) just
 * becomes unknown, and the walk fails later only if something needs it (libunwind reaches the
 * same result with lazy register locations). */
static bool restore_saved(walker *w, unsigned slot, uint64_t address, fu_regs *out)
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
    if (state->cfa.kind == FU_CFA_REG_OFFSET) {
        uint64_t base;
        if (!fu_regs_get(regs, state->cfa.reg, &base)) {
            w->result->outcome = FU_WALK_REGISTER_UNKNOWN;
            return false;
        }
        cfa = base + (uint64_t)state->cfa.value;
    } else if (state->cfa.kind == FU_CFA_EXPRESSION) {
        if (!evaluate(w, t, &state->cfa, regs, false, 0, &cfa))
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
            if (!evaluate(w, t, rule, regs, true, cfa, &address) || !read_word(w, address, 8, &v))
                return false;
            break;
        }
        case FU_RULE_VAL_EXPRESSION:
            if (!evaluate(w, t, rule, regs, true, cfa, &v))
                return false;
            break;
        default:
            continue;
        }
        fu_regs_set(out, slot, v);
    }
    return true; /* without a rule the return address stays invalid: the stack ends there */
}

/* Follow rbp (frame-pointer convention: [rbp] = caller's rbp, [rbp+8] = return address) when no
 * CFI covers the PC and the chain is plausible. */
static bool frame_pointer_step(walker *w, const fu_regs *regs, fu_regs *out)
{
    uint64_t rbp, rsp, caller_rbp, ra;
    if (!fu_regs_get(regs, FU_REG_RBP, &rbp) || !fu_regs_get(regs, FU_REG_RSP, &rsp))
        return false;
    if (rbp % 8 != 0 || rbp < rsp || rbp - rsp > FU_FP_MAX_FRAME_SIZE)
        return false;
    if (!read_soft(w, rbp, &caller_rbp) || !read_soft(w, rbp + 8, &ra))
        return false;
    /* The return address must land in mapped code. The saved rbp is only the caller's register
     * value: a caller built without frame pointers keeps any data there. */
    if (fu_address_space_find(w->space, ra - 1) < 0)
        return false;
    out->valid = 0;
    fu_regs_set(out, FU_REG_RBP, caller_rbp);
    fu_regs_set(out, FU_REG_RSP, rbp + 16);
    fu_regs_set(out, FU_REG_RA, ra);
    return true;
}

static bool find_row(const fu_module *mod, uint64_t svma, const fu_table **table, int64_t *row, int64_t *fde)
{
    const fu_table *candidates[2] = {mod->eh_frame, mod->debug_frame};
    for (unsigned i = 0; i < 2; i++) {
        if (!candidates[i])
            continue;
        *row = fu_table_find_row(candidates[i], svma, fde);
        if (*row >= 0) {
            *table = candidates[i];
            return true;
        }
    }
    return false;
}

/* Apply a compact rule: the same results as apply_row on the DWARF row it was built from
 * (compact_table.c admits only rows whose every rule it restates exactly). */
static bool apply_compact(walker *w, const fu_compact_rule *rule, const fu_regs *regs, fu_regs *out)
{
    uint64_t cfa, base, rip;
    switch ((fu_compact_cfa_kind)rule->cfa_kind) {
    case FU_COMPACT_CFA_RSP:
    case FU_COMPACT_CFA_RBP:
    case FU_COMPACT_CFA_REGISTER:
        if (!fu_regs_get(regs, rule->cfa_register, &base)) {
            w->result->outcome = FU_WALK_REGISTER_UNKNOWN;
            return false;
        }
        cfa = base + (uint64_t)(int64_t)rule->cfa_offset;
        break;
    case FU_COMPACT_CFA_PLT:
        /* a register the expression names is unknown: the evaluator's error */
        if (!fu_regs_get(regs, FU_REG_RSP, &base) || !fu_regs_get(regs, FU_REG_RA, &rip)) {
            w->result->outcome = FU_WALK_EXPRESSION_ERROR;
            return false;
        }
        cfa = base + 8 + ((rip & 15) >= 11 ? 8 : 0);
        break;
    case FU_COMPACT_CFA_DEREF:
        if (!fu_regs_get(regs, rule->cfa_register, &base)) {
            w->result->outcome = FU_WALK_EXPRESSION_ERROR;
            return false;
        }
        if (!read_word(w, base + (uint64_t)(int64_t)rule->cfa_offset, 8, &cfa))
            return false;
        break;
    default: /* NO_INFO and SLOW never get here */
        w->result->outcome = FU_WALK_NO_UNWIND_INFO;
        return false;
    }
    start_caller(regs, cfa, out);
    for (unsigned i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++) {
        int8_t by_8 = rule->saved_offset_by_8[i];
        unsigned reg = fu_compact_saved_register[i];
        if (by_8 == FU_COMPACT_UNDEFINED)
            out->valid &= ~(1u << reg);
        else if (by_8 != FU_COMPACT_KEEP)
            restore_saved(w, reg, cfa + (uint64_t)(int64_t)by_8 * 8, out);
    }
    int8_t ra_by_8 = rule->ra_offset_by_8;
    if (ra_by_8 != FU_COMPACT_KEEP && ra_by_8 != FU_COMPACT_UNDEFINED &&
        !restore_saved(w, FU_REG_RA, cfa + (uint64_t)(int64_t)ra_by_8 * 8, out))
        return false;
    return true; /* without a return address the stack ends here */
}

/* The caller of the frame at `regs` (looked up at `lookup`, in module `m` or -1): its frame kind,
 * or -1 with the outcome set. Backends in order: compact table, DWARF tables, frame pointer. */
static int step(walker *w, int64_t m, uint64_t lookup, const fu_regs *regs, fu_regs *caller, uint8_t *frame_flags,
                bool *signal_frame)
{
    const fu_address_space *space = w->space;
    *signal_frame = false;
    if (m >= 0) {
        const fu_module *mod = &space->modules[m];
        uint64_t svma = lookup - mod->bias;
        bool dwarf = space->backend != FU_BACKEND_COMPACT;
        if (mod->compact && space->backend != FU_BACKEND_DWARF) {
            const fu_compact_rule *rule = fu_compact_find(mod->compact, svma, NULL);
            if (!rule || rule->cfa_kind == FU_COMPACT_CFA_NO_INFO)
                dwarf = false; /* built from both DWARF tables: neither covers svma */
            else if (rule->cfa_kind != FU_COMPACT_CFA_SLOW)
                return apply_compact(w, rule, regs, caller) ? FU_FRAME_CFI : -1;
        }
        const fu_table *table = NULL;
        int64_t row = -1, fde = -1;
        if (dwarf && find_row(mod, svma, &table, &row, &fde)) {
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
    if (frame_pointer_step(w, regs, caller))
        return FU_FRAME_FP;
    w->result->outcome = FU_WALK_NO_UNWIND_INFO;
    w->result->fault_address = regs->value[FU_REG_RA];
    return -1;
}

int fu_walk_step(const fu_address_space *space, fu_read_fn read, void *read_context, const fu_regs *regs,
                 bool ip_is_return_address, fu_regs *caller, uint8_t *frame_flags, fu_walk_result *result)
{
    walker w = {space, read, read_context, result};
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

fu_walk_result fu_walk(const fu_address_space *space, const fu_regs *initial, fu_read_fn read,
                       void *read_context, fu_frame *frames, size_t max_frames)
{
    fu_walk_result result = {FU_WALK_END, 0, 0};
    walker w = {space, read, read_context, &result};
    if (max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    fu_regs regs = *initial;
    uint64_t ip;
    if (max_frames == 0 || !fu_regs_get(&regs, FU_REG_RA, &ip)) {
        result.outcome = max_frames == 0 ? FU_WALK_FRAME_LIMIT : FU_WALK_REGISTER_UNKNOWN;
        return result;
    }
    bool ip_is_return_address = false;
    uint8_t kind = FU_FRAME_FIRST;
    /* Each iteration records one frame and steps to its caller; bounded by max_frames. */
    for (;;) {
        uint64_t lookup = fu_lookup_address(ip, ip_is_return_address);
        int64_t m = fu_address_space_find(space, lookup);
        frames[result.frame_count].ip = ip;
        frames[result.frame_count].module = m < 0 ? UINT32_MAX : (uint32_t)m;
        frames[result.frame_count].kind = kind;
        frames[result.frame_count].flags = 0;
        result.frame_count++;
        if (result.frame_count == max_frames) {
            result.outcome = FU_WALK_FRAME_LIMIT;
            return result;
        }
        fu_regs caller;
        bool signal_frame;
        int caller_kind = step(&w, m, lookup, &regs, &caller, &frames[result.frame_count - 1].flags, &signal_frame);
        if (caller_kind < 0)
            return result;
        kind = (uint8_t)caller_kind;
        uint64_t next_ip, sp, next_sp;
        if (!fu_regs_get(&caller, FU_REG_RA, &next_ip) || next_ip == 0) {
            result.outcome = FU_WALK_END; /* DW_CFA_undefined return address (e.g. _start, clone) */
            return result;
        }
        if (!fu_regs_get(&caller, FU_REG_RSP, &next_sp)) {
            result.outcome = FU_WALK_REGISTER_UNKNOWN;
            return result;
        }
        if (fu_regs_get(&regs, FU_REG_RSP, &sp)) {
            if (next_sp == sp && next_ip == ip) {
                result.outcome = FU_WALK_NO_PROGRESS;
                return result;
            }
            /* a signal may run on an alternate stack: only ordinary frames must move up */
            if (!signal_frame && next_sp < sp) {
                result.outcome = FU_WALK_SP_BACKWARDS;
                result.fault_address = next_sp;
                return result;
            }
        }
        regs = caller;
        ip = next_ip;
        ip_is_return_address = !signal_frame;
    }
}
