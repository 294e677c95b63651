/* walk: the stack walker (see walk.h for its contract).
 *
 * One translation unit in parts, so that the step's helpers inline into the loops (the parts are
 * not compiled on their own: *.inc is not in setup.py's glob nor the fuzz Makefile's sources):
 *
 *   walk.c          outcome and frame kind names (here)
 *   walk_read.inc   the walker state, walk cache slots, reads from the stack window and the image
 *   walk_step.inc   one step: expressions, rows, frame pointer, entry code, compact plans, signal
 *                   contexts, compiled bodies, the backend's choice, settling a cache entry
 *   walk.c          fu_walk_step, fu_walk_step_source, walk caches (bind, borrow, return)
 *   walk_loops.inc  the checks on each caller, recording frames, the lean loops, prefetch
 *   walk.c          fu_walk_begin, fu_walk_finish (the general loop), fu_walk
 *
 * The address space it walks (modules, backends, the module search) is address_space.[ch].
 */
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

const char *fu_frame_derived_name(uint8_t flags)
{
    return flags & FU_FRAME_CORRECTED ? "corrected" : flags & FU_FRAME_SYNTHESIZED ? "synthesized" : NULL;
}

const char *fu_frame_kind_name(int kind)
{
    switch (kind) {
    case FU_FRAME_FIRST: return "first";
    case FU_FRAME_CFI: return "cfi";
    case FU_FRAME_SIGNAL: return "signal";
    case FU_FRAME_FP: return "frame_pointer";
    default: return "?";
    }
}

/* ---- the walker state and its reads (walk_read.inc) ------------------------------------------ */
#include "walk_read.inc"

/* ---- one step (walk_step.inc) ---------------------------------------------------------------- */
#include "walk_step.inc"

/* ---- the step's entry points and the walk caches --------------------------------------------- */

uint8_t fu_walk_step_source(const fu_address_space *space, uint64_t lookup)
{
    fu_walk_cache_entry e;
    settle(space, fu_address_space_find(space, lookup), lookup, &e);
    return e.kind;
}

const char *fu_walk_step_source_name(uint8_t source)
{
    switch (source) {
    case FU_WALK_CACHED_RULE: return "rule";
    case FU_WALK_CACHED_BODY: return "body";
    case FU_WALK_CACHED_NO_INFO: return "no_info";
    case FU_WALK_CACHED_ENTRY_CODE: return "entry_code";
    case FU_WALK_CACHED_DERIVED_RULE: return "derived_rule";
    case FU_WALK_CACHED_RBP_SLOTS_RULE: return "rbp_slots_rule";
    default: return "interpreter";
    }
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

/* ---- the loops (walk_loops.inc) -------------------------------------------------------------- */
#include "walk_loops.inc"

/* ---- the walk -------------------------------------------------------------------------------- */

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
        case FU_WALK_CACHED_DERIVED_RULE:
            *frame_flags = found->frame_flags;
            caller_kind = apply_compact(&w, &found->what.plan, found->kept_caller_saved, regs, caller, frame_flags,
                                        &signal_frame);
            break;
        case FU_WALK_CACHED_RULE:
            caller_kind = apply_compact(&w, &found->what.plan, 0, regs, caller, frame_flags, &signal_frame);
            break;
        case FU_WALK_CACHED_RBP_SLOTS_RULE:
            *frame_flags = found->frame_flags;
            caller_kind = apply_rbp_slots_rule(&w, found->what.rule, regs, caller);
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

void fu_walk_frame_registers(const fu_address_space *space, const fu_regs *first, const fu_reader *reader,
                             const fu_frames *frames, size_t count, fu_regs *out)
{
    if (count == 0)
        return;
    out[0] = *first;
    for (size_t i = 1; i < count; i++) { /* bounded by the walk's frame count */
        uint8_t flags;
        fu_walk_result step_result = {FU_WALK_END, 0, 0};
        if (fu_walk_step(space, reader, &out[i - 1], fu_frame_ip_is_return_address(frames->kind[i - 1]), &out[i],
                         &flags, &step_result) < 0)
            out[i].valid = 0;
        /* the walk's IP for the frame, whatever the step said (a frame-pointer run's) */
        fu_regs_set(&out[i], FU_REG_RA, frames->ip[i]);
    }
}

void fu_walk(const fu_address_space *space, fu_regs *registers, const fu_reader *reader, fu_walk_cache *cache,
             const fu_frames *frames, size_t max_frames, fu_walk_result *result)
{
    fu_walk_shape *shape_to_write;
    if (!fu_walk_begin(space, registers, reader, cache, frames, max_frames, result, &shape_to_write))
        fu_walk_finish(space, registers, reader, cache, frames, max_frames, result, shape_to_write);
}
