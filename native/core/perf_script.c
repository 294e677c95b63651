/* perf_script: see perf_script.h. */
#include "perf_script.h"

#include <stdlib.h>
#include <string.h>

#include "intern.h"
#include "render.h"
#include "perf_walk.h"
#include "walk.h"

/* ---- resolving frames ------------------------------------------------------------------------ */

typedef struct frame_key {
    uint32_t mapping;
    uint64_t address;
} frame_key;

static bool frame_equal(const void *ctx, uint32_t i, const void *key)
{
    const fu_unwound_frame *f = &((const fu_unwound_frame *)ctx)[i];
    const frame_key *k = key;
    return f->mapping == k->mapping && f->key == k->address;
}

static void set_symbol(fu_unwound_frame *f, const fu_symbol_table *table, uint64_t address)
{
    size_t index, len;
    if (table && fu_symbol_find(table, address, &index)) {
        f->has_symbol = true;
        f->name = fu_symbol_name(table, index, &len);
        f->name_len = (uint32_t)len;
        f->offset = address - table->starts[index];
    }
}

/* A direct-mapped memo in front of the frame index: deep stacks repeat the same frames sample after
 * sample (a python recording: ~620k lookups of a 436 MB recording, nearly all found), and a hit here
 * is one compare on a 64 KiB array instead of a probe with a call comparing against the frame array. */
#define FRAME_MEMO_SLOTS 4096

typedef struct frame_memo {
    uint64_t address;
    uint32_t mapping;
    uint32_t id; /* FU_INTERN_NONE: empty */
} frame_memo;

typedef struct resolver {
    fu_unwound *u;
    fu_intern_set index;
    frame_memo *memo; /* FRAME_MEMO_SLOTS */
    fu_unwound_load_fn load;
    void *context;
    bool *failed;
    fu_error *err;
} resolver;

/* The id of the frame for (mapping, address), resolved on first sight; FU_INTERN_NONE with err set. */
static uint32_t frame_id(resolver *r, uint32_t mapping, uint64_t address)
{
    fu_unwound *u = r->u;
    frame_key key = {mapping, address};
    uint64_t hash = fu_hash_u64(address ^ (uint64_t)mapping << 40 ^ (uint64_t)mapping);
    frame_memo *memo = &r->memo[hash & (FRAME_MEMO_SLOTS - 1)];
    if (memo->id != FU_INTERN_NONE && memo->address == address && memo->mapping == mapping)
        return memo->id;
    uint32_t found = fu_intern_find(&r->index, hash, frame_equal, u->frames, &key);
    if (found != FU_INTERN_NONE) {
        *memo = (frame_memo){.address = address, .mapping = mapping, .id = found};
        return found;
    }
    if (u->frame_count == u->frame_cap) {
        size_t cap = u->frame_cap ? 2 * u->frame_cap : 1024;
        fu_unwound_frame *frames = cap < FU_INTERN_NONE ? realloc(u->frames, cap * sizeof *frames) : NULL;
        if (!frames) {
            fu_fail(r->err, FU_ERR_NOMEM, "out of memory for %zu frames", cap);
            return FU_INTERN_NONE;
        }
        u->frames = frames;
        u->frame_cap = cap;
    }
    fu_unwound_frame f = {.key = address, .mapping = mapping};
    if (mapping == FU_UNWOUND_MAPPING_KERNEL || mapping == FU_UNWOUND_MAPPING_NONE) {
        f.address = address;
    } else {
        fu_unwound_map *m = &u->maps[mapping];
        __int128 printed = (__int128)address - (__int128)m->start + (__int128)m->pgoff;
        f.negative = printed < 0;
        f.address = (unsigned __int128)(printed < 0 ? -printed : printed);
        if (m->has_symbols && !m->loaded) {
            m->loaded = true;
            m->symbols = r->load(r->context, mapping, r->failed);
            if (*r->failed) {
                fu_fail(r->err, FU_ERR_INVALID, "the symbols of mapping %u could not be loaded", mapping);
                return FU_INTERN_NONE;
            }
        }
        __int128 svma = (__int128)address - (__int128)m->bias;
        bool in_range = svma >= 0 && svma <= (__int128)UINT64_MAX;
        if (m->symbols && in_range)
            set_symbol(&f, m->symbols, (uint64_t)svma);
        if (u->srcline_fields && m->has_srclines && !m->srclines_loaded) {
            m->srclines_loaded = true;
            m->srclines = u->srcline_load(r->context, mapping, r->failed);
            if (*r->failed) {
                fu_fail(r->err, FU_ERR_INVALID, "the source lines of mapping %u could not be loaded", mapping);
                return FU_INTERN_NONE;
            }
        }
        if (u->srcline_fields && m->srclines && in_range &&
            fu_srcline_lookup(m->srclines, (uint64_t)svma, &f.chain, r->err) != FU_OK)
            return FU_INTERN_NONE;
    }
    uint32_t id = (uint32_t)u->frame_count;
    if (!fu_intern_insert(&r->index, hash, id)) {
        fu_fail(r->err, FU_ERR_NOMEM, "out of memory for the frame index");
        return FU_INTERN_NONE;
    }
    u->frames[u->frame_count++] = f;
    *memo = (frame_memo){.address = address, .mapping = mapping, .id = id};
    return id;
}

static bool append_u32(fu_buffer *g, uint32_t v)
{
    if (g->len / 4 >= FU_INTERN_NONE - 1) /* ids and bounds are u32 */
        return false;
    return fu_buffer_append(g, &v, 4);
}

/* The entries of a sample that may be kernel frames: its callchain's (PERF_CONTEXT_* markers
 * among them), or without a callchain its IP, the one kernel frame it can have (user IPs come from
 * the walk). */
static uint64_t kernel_entries(const fu_perf_sample *sample)
{
    if (!(sample->present & FU_PERF_SAMPLE_CALLCHAIN))
        return 1;
    return sample->callchain ? sample->callchain_count : 0;
}

static uint64_t kernel_entry(const fu_perf_sample *sample, uint64_t c)
{
    return sample->present & FU_PERF_SAMPLE_CALLCHAIN ? sample->callchain[c] : sample->ip;
}

fu_status fu_unwound_build(fu_unwound *u, const uint32_t *comm_ids, const uint32_t *space_ids,
                           const fu_unwound_space *spaces, size_t space_count, const fu_unwound_columns *columns,
                           fu_unwound_load_fn load, void *context, bool *failed, fu_error *err)
{
    size_t n = u->sample_count;
    resolver r = {.u = u, .load = load, .context = context, .failed = failed, .err = err};
    fu_buffer bounds = {0}, ids = {0};
    fu_status status = FU_OK;
    *failed = false;
    u->comm_ids = malloc(4 * (n ? n : 1));
    u->outcomes = malloc(n ? n : 1);
    r.memo = malloc(FRAME_MEMO_SLOTS * sizeof *r.memo);
    if (!u->comm_ids || !u->outcomes || !r.memo) {
        status = fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu samples", n);
        goto done;
    }
    if (n) {
        memcpy(u->comm_ids, comm_ids, 4 * n);
        memcpy(u->outcomes, columns->outcomes, n);
    }
    for (size_t i = 0; i < FRAME_MEMO_SLOTS; i++)
        r.memo[i].id = FU_INTERN_NONE;
    for (size_t i = 0; i < n; i++)
        if (u->comm_ids[i] != FU_INTERN_NONE && u->comm_ids[i] >= u->comm_count) {
            status = fu_fail(err, FU_ERR_INVALID, "a comm id is out of range (or its name is not bytes)");
            goto done;
        }
    for (size_t i = 0; i < space_count; i++)
        for (uint32_t k = 0; k < spaces[i].count; k++) {
            uint32_t map;
            memcpy(&map, &spaces[i].maps[k], 4);
            if (map >= u->map_count) {
                status = fu_fail(err, FU_ERR_INVALID, "a space names a mapping out of range");
                goto done;
            }
        }
    const uint32_t *starts = columns->starts, *modules = columns->modules;
    const uint64_t *ips = columns->ips;
    const uint8_t *kinds = columns->kinds;
    size_t frames = columns->frame_count;
    /* one sample per iteration, each over its own callchain and frames: bounded by the input */
    for (size_t s = 0; s < n; s++) {
        const fu_perf_sample *sample = &u->samples[s];
        if (!append_u32(&bounds, (uint32_t)(ids.len / 4)))
            goto nomem;
        uint64_t entries = kernel_entries(sample);
        for (uint64_t c = 0; c < entries; c++) {
            uint64_t ip = kernel_entry(sample, c);
            if (ip < FU_PERF_KERNEL_START || ip >= FU_PERF_CONTEXT_MAX)
                continue;
            uint32_t id = frame_id(&r, FU_UNWOUND_MAPPING_KERNEL, ip);
            if (id == FU_INTERN_NONE) {
                status = err->status;
                goto done;
            }
            if (!append_u32(&ids, id))
                goto nomem;
        }
        if (!append_u32(&bounds, (uint32_t)(ids.len / 4)))
            goto nomem;
        uint32_t first = starts[s], last = starts[s + 1];
        if (first > last || last > frames) {
            status = fu_fail(err, FU_ERR_INVALID, "unwound's frame starts are out of order");
            goto done;
        }
        uint32_t space_id;
        memcpy(&space_id, &space_ids[s], 4);
        if (last > first && space_id >= space_count) {
            status = fu_fail(err, FU_ERR_INVALID, "a sample with frames has no address space");
            goto done;
        }
        for (uint32_t k = first; k < last; k++) {
            uint64_t avma = ips[k];
            /* callers the walker recovered from a return address at that address - 1 (walk.h); not the
             * frame a signal interrupted, nor callchain entries (callchain_samples: perf prints them as
             * they are) */
            if (k > first)
                avma = fu_lookup_address(avma, fu_frame_ip_is_return_address(kinds[k]));
            uint32_t mapping = FU_UNWOUND_MAPPING_NONE;
            if (modules[k] != FU_UNWOUND_NO_MODULE) {
                const fu_unwound_space *space = &spaces[space_id];
                if (modules[k] >= space->count) {
                    status = fu_fail(err, FU_ERR_INVALID, "a frame's module is out of its address space");
                    goto done;
                }
                memcpy(&mapping, &space->maps[modules[k]], 4);
            }
            uint32_t id = frame_id(&r, mapping, avma);
            if (id == FU_INTERN_NONE) {
                status = err->status;
                goto done;
            }
            if (!append_u32(&ids, id))
                goto nomem;
        }
    }
    if (!append_u32(&bounds, (uint32_t)(ids.len / 4)))
        goto nomem;
    u->bounds = (uint32_t *)(void *)bounds.data;
    u->frame_ids = (uint32_t *)(void *)ids.data;
    bounds.data = ids.data = NULL;
    if (!u->bounds && !(u->bounds = calloc(1, 4)))
        goto nomem;
    goto done;
nomem:
    status = fu_fail(err, FU_ERR_NOMEM, "out of memory for the samples' frame ids");
done:
    fu_intern_free(&r.index);
    free(r.memo);
    free(bounds.data);
    free(ids.data);
    return status;
}

bool fu_perf_sample_kernel_frames(const fu_perf_sample *sample)
{
    uint64_t entries = kernel_entries(sample);
    for (uint64_t c = 0; c < entries; c++) {
        uint64_t ip = kernel_entry(sample, c);
        if (ip >= FU_PERF_KERNEL_START && ip < FU_PERF_CONTEXT_MAX)
            return true;
    }
    return false;
}

size_t fu_unwound_kernel_addresses(const fu_unwound *u, uint64_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < u->frame_count; i++)
        if (u->frames[i].mapping == FU_UNWOUND_MAPPING_KERNEL) {
            if (out)
                out[n] = u->frames[i].key;
            n++;
        }
    return n;
}

void fu_unwound_set_kernel_symbols(fu_unwound *u, const fu_symbol_table *table)
{
    u->kernel_symbols = table;
    for (size_t i = 0; table && i < u->frame_count; i++)
        if (u->frames[i].mapping == FU_UNWOUND_MAPPING_KERNEL)
            set_symbol(&u->frames[i], table, u->frames[i].key);
}

void fu_unwound_free(fu_unwound *u)
{
    free(u->comm_ids);
    free(u->outcomes);
    free(u->bounds);
    free(u->frame_ids);
    free(u->frames);
    free(u->lines.data);
    u->comm_ids = u->bounds = u->frame_ids = NULL;
    u->outcomes = NULL;
    u->frames = NULL;
    u->lines = (fu_buffer){0};
    u->frame_count = u->frame_cap = 0;
}

/* ---- text -------------------------------------------------------------------------------------- */

static const char KERNEL_DSO[] = "[kernel.kallsyms]", UNKNOWN_DSO[] = "[unknown]";

void fu_unwound_frame_dso(const fu_unwound *u, const fu_unwound_frame *f, const char **dso, size_t *len)
{
    if (f->mapping == FU_UNWOUND_MAPPING_KERNEL) {
        *dso = KERNEL_DSO;
        *len = sizeof KERNEL_DSO - 1;
    } else if (f->mapping == FU_UNWOUND_MAPPING_NONE) {
        *dso = UNKNOWN_DSO;
        *len = sizeof UNKNOWN_DSO - 1;
    } else {
        *dso = u->maps[f->mapping].path.data;
        *len = u->maps[f->mapping].path.len;
    }
}

void fu_unwound_comm(const fu_unwound *u, size_t s, const char **comm, size_t *len)
{
    uint32_t id = u->comm_ids[s];
    if (id == FU_INTERN_NONE) {
        *comm = "";
        *len = 0;
        return;
    }
    *comm = u->comm_names[id].data;
    *len = u->comm_names[id].len;
}

/* The most bytes put_symbol_and_dso writes for `f`. */
static size_t symbol_and_dso_bytes(const fu_unwound_frame *f, size_t dso_len)
{
    return 1 + (f->has_symbol ? f->name_len + 3 + 16 : 9) + 2 + dso_len + 2;
}

/* A frame line's tail after its address, as perf prints it: " sym+0xoff (dso)\n", or
 * " [unknown] (dso)\n" without a symbol (the room reserved: symbol_and_dso_bytes). */
static void put_symbol_and_dso(fu_buffer *out, const fu_unwound_frame *f, const char *dso, size_t dso_len)
{
    fu_put(out, " ", 1);
    if (f->has_symbol) {
        fu_put(out, f->name, f->name_len);
        fu_put(out, "+0x", 3);
        fu_put_hex(out, f->offset, false, 0);
    } else {
        fu_put(out, "[unknown]", 9);
    }
    fu_put(out, " (", 2);
    fu_put(out, dso, dso_len);
    fu_put(out, ")\n", 2);
}

/* The most bytes put_srcline writes for `at`. */
static size_t srcline_bytes(const fu_srcline_location *at)
{
    return 2 + (at ? at->file_len : 0) + 4 + 24 + 10 + 1;
}

/* "basename(file):line" ("??:0" when not known: at NULL), into room the caller reserved. */
static void put_file_and_line(fu_buffer *out, const fu_srcline_module *m, const fu_srcline_location *at)
{
    if (at && at->file_len) {
        const char *file = fu_srcline_text(m, at->file);
        size_t base = at->file_len;
        while (base > 0 && file[base - 1] != '/')
            base--;
        fu_put(out, file + base, at->file_len - base);
    } else {
        fu_put(out, "??", 2);
    }
    fu_put(out, ":", 1);
    fu_put_udec(out, at ? at->line : 0, 0, ' ');
}

/* perf's srcline line: "  file:line", " (inlined)" for an inlined function's, and the line's end
 * (the room reserved: srcline_bytes). */
static void put_srcline(fu_buffer *out, const fu_srcline_module *m, const fu_srcline_location *at, bool inlined)
{
    fu_put(out, "  ", 2);
    put_file_and_line(out, m, at);
    if (inlined)
        fu_put(out, " (inlined)", 10);
    fu_put(out, "\n", 1);
}

/* The source lines of a frame: its mapping's module (NULL: none printed, the frame is not in one
 * that has a loader). */
static const fu_srcline_module *frame_srclines(const fu_unwound *u, const fu_unwound_frame *f)
{
    if (f->mapping == FU_UNWOUND_MAPPING_KERNEL || f->mapping == FU_UNWOUND_MAPPING_NONE)
        return NULL;
    return u->maps[f->mapping].srclines;
}

bool fu_unwound_frame_srcline(const fu_unwound *u, const fu_unwound_frame *f, fu_buffer *out)
{
    if (f->mapping == FU_UNWOUND_MAPPING_KERNEL) { /* no source of the kernel's: perf's "sym+offset" */
        if (!fu_buffer_reserve(out, (f->has_symbol ? f->name_len : 0) + 20 + 20 + FU_PUT_HEX_MAX))
            return false;
        if (f->has_symbol) {
            fu_put(out, f->name, f->name_len);
            fu_put(out, "+", 1);
            fu_put_udec(out, f->offset, 0, ' ');
        } else {
            fu_put(out, KERNEL_DSO, sizeof KERNEL_DSO - 1);
            fu_put(out, "[", 1);
            fu_put_hex(out, f->address, false, 0);
            fu_put(out, "]", 1);
        }
        return true;
    }
    const fu_srcline_module *m = frame_srclines(u, f);
    const fu_srcline_location *at = m && f->chain.count ? fu_srcline_location_at(m, f->chain.first) : NULL;
    if (!fu_buffer_reserve(out, srcline_bytes(at)))
        return false;
    put_file_and_line(out, m, at);
    return true;
}

/* A frame's lines as perf_script.h says: the inlined functions' with --inline, then "\t%16x
 * sym+0xoff (dso)\n" (or "[unknown]"), with srcline each followed by its source line. False if
 * out of memory. */
static bool format_frame(const fu_unwound *u, const fu_unwound_frame *f, fu_buffer *out)
{
    const char *dso;
    size_t dso_len;
    fu_unwound_frame_dso(u, f, &dso, &dso_len);
    const fu_srcline_module *m = frame_srclines(u, f);
    bool srcline = u->srcline_fields & FU_UNWOUND_SRCLINE;
    uint32_t count = m ? f->chain.count : 0;
    uint32_t inlined = (u->srcline_fields & FU_UNWOUND_INLINE) && f->has_symbol && count > 1 ? count - 1 : 0;
    for (uint32_t k = 0; k < inlined; k++) {
        const fu_srcline_location *at = fu_srcline_location_at(m, f->chain.first + k);
        size_t name_len = at->name_len ? at->name_len : 9;
        if (!fu_buffer_reserve(out, 1 + FU_PUT_HEX_MAX + 1 + name_len + 3 + 16 + 11 + srcline_bytes(at)))
            return false;
        fu_put(out, "\t", 1);
        fu_put_hex(out, f->address, f->negative, 16);
        fu_put(out, " ", 1);
        fu_put(out, at->name_len ? fu_srcline_text(m, at->name) : "[unknown]", name_len);
        fu_put(out, "+0x", 3);
        fu_put_hex(out, f->offset, false, 0);
        if (srcline) {
            fu_put(out, "\n", 1);
            put_srcline(out, m, at, true);
        } else {
            fu_put(out, " (inlined)\n", 11);
        }
    }
    const fu_srcline_location *own = count ? fu_srcline_location_at(m, f->chain.first + inlined) : NULL;
    if (!fu_buffer_reserve(out, 1 + FU_PUT_HEX_MAX + symbol_and_dso_bytes(f, dso_len) + srcline_bytes(own)))
        return false;
    fu_put(out, "\t", 1);
    fu_put_hex(out, f->address, f->negative, 16);
    put_symbol_and_dso(out, f, dso, dso_len);
    if (!srcline || f->mapping == FU_UNWOUND_MAPPING_NONE)
        return true;
    if (f->mapping == FU_UNWOUND_MAPPING_KERNEL) { /* perf has no source of the kernel's: "dso[address]" */
        if (!fu_buffer_reserve(out, 2 + dso_len + 2 + FU_PUT_HEX_MAX + 1))
            return false;
        fu_put(out, "  ", 2);
        fu_put(out, dso, dso_len);
        fu_put(out, "[", 1);
        fu_put_hex(out, f->address, false, 0);
        fu_put(out, "]\n", 2);
    } else if (own || (u->srcline_fields & FU_UNWOUND_INLINE)) {
        /* perf prints an unknown line ("??:0") only with --inline (map__fprintf_srcline leaves it out) */
        put_srcline(out, m, own, false);
    }
    return true;
}

/* Each frame's lines, formatted once (format_frame). */
static bool format_lines(fu_unwound *u)
{
    if (u->lines_ready)
        return true;
    u->lines.len = 0;
    for (size_t i = 0; i < u->frame_count; i++) {
        fu_unwound_frame *f = &u->frames[i];
        size_t begin = u->lines.len;
        if (!format_frame(u, f, &u->lines) || u->lines.len > UINT32_MAX)
            return false;
        f->line_offset = (uint32_t)begin;
        f->line_len = (uint32_t)(u->lines.len - begin);
    }
    u->lines_ready = true;
    return true;
}

/* The name perf prints for an event: the recording's (HEADER_EVENT_DESC), else perf's name of its
 * type and config for the generic hardware and software events (evsel__name without modifiers), else
 * none (an empty text). */
static fu_text event_name(const fu_unwound *u, const fu_perf_sample *sample)
{
    static const char *const hardware[] = {"cycles", "instructions", "cache-references", "cache-misses",
                                           "branches", "branch-misses", "bus-cycles", "stalled-cycles-frontend",
                                           "stalled-cycles-backend", "ref-cycles"};
    static const char *const software[] = {"cpu-clock", "task-clock", "page-faults", "context-switches",
                                           "cpu-migrations", "minor-faults", "major-faults", "alignment-faults",
                                           "emulation-faults", "dummy", "bpf-output", "cgroup-switches"};
    if (!u->attrs || sample->attr_index >= u->attr_count)
        return (fu_text){"", 0};
    const fu_perf_attr *attr = &u->attrs[sample->attr_index];
    const char *name = attr->name;
    if (!name && attr->type == 0 && attr->config < sizeof hardware / sizeof hardware[0])
        name = hardware[attr->config];
    if (!name && attr->type == 1 && attr->config < sizeof software / sizeof software[0])
        name = software[attr->config];
    return name ? (fu_text){name, strlen(name)} : (fu_text){"", 0};
}

bool fu_sink_flush(fu_buffer *out, fu_sink_fn sink, void *context, bool force)
{
    if (!out->len || (!force && out->len < FU_UNWOUND_CHUNK))
        return true;
    bool ok = sink(context, out->data, out->len);
    out->len = 0;
    return ok;
}

fu_status fu_sink_finish(fu_buffer *out, fu_sink_fn sink, void *context, bool nomem, bool sunk, size_t count,
                         const char *what, fu_error *err)
{
    if (!nomem && sunk)
        sunk = fu_sink_flush(out, sink, context, true);
    free(out->data);
    *out = (fu_buffer){0};
    if (nomem)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory writing %zu %s", count, what);
    if (!sunk)
        return fu_fail(err, FU_ERR_INVALID, "the output sink failed");
    return FU_OK;
}

void fu_perf_script_put_head(fu_buffer *out, const char *comm, size_t comm_len, uint32_t tid, uint64_t time)
{
    fu_put(out, comm, comm_len);
    fu_put(out, " ", 1);
    fu_put_sdec(out, (int32_t)tid, 5);
    fu_put(out, " ", 1);
    fu_put_udec(out, time / 1000000000u, 5, ' ');
    fu_put(out, ".", 1);
    fu_put_udec(out, time % 1000000000u / 1000u, 6, '0');
}

/* The rest of a sample without a callchain: ":  %16x sym+0xoff (dso)\n" for its one frame (the IP
 * as sampled, not DSO-relative), ":\n" if it has none. False if out of memory. */
static bool render_ip_line(const fu_unwound *u, size_t s, fu_buffer *out)
{
    uint32_t k = u->bounds[2 * s];
    if (k == u->bounds[2 * s + 2]) {
        if (!fu_buffer_reserve(out, 2))
            return false;
        fu_put(out, ":\n", 2);
        return true;
    }
    const fu_unwound_frame *f = &u->frames[u->frame_ids[k]];
    const char *dso;
    size_t dso_len;
    fu_unwound_frame_dso(u, f, &dso, &dso_len);
    if (!fu_buffer_reserve(out, 3 + FU_PUT_HEX_MAX + symbol_and_dso_bytes(f, dso_len)))
        return false;
    fu_put(out, ":  ", 3);
    fu_put_hex(out, f->key, false, 16);
    put_symbol_and_dso(out, f, dso, dso_len);
    return true;
}

fu_status fu_unwound_render(fu_unwound *u, fu_sink_fn sink, void *context, fu_error *err)
{
    if (!format_lines(u))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory formatting %zu frames", u->frame_count);
    fu_buffer out = {0};
    bool nomem = false, sunk = true;
    for (size_t s = 0; !nomem && sunk && s < u->sample_count; s++) {
        const fu_perf_sample *sample = &u->samples[s];
        const char *comm;
        size_t comm_len;
        fu_unwound_comm(u, s, &comm, &comm_len);
        fu_text event = event_name(u, sample);
        /* 16 columns of padding, the head, ": " twice */
        if (!fu_buffer_reserve(&out, comm_len + event.len + 16 + FU_PERF_SCRIPT_HEAD_MAX + 4)) {
            nomem = true;
            break;
        }
        /* perf script prints a sample without a callchain on one line: comm right-aligned in 16
         * columns, then " %16x sym+0xoff (dso)" with the IP as sampled (builtin-script.c) */
        bool ip_only = !(sample->present & FU_PERF_SAMPLE_CALLCHAIN);
        for (size_t pad = comm_len; ip_only && pad < 16; pad++)
            fu_put(&out, " ", 1);
        fu_perf_script_put_head(&out, comm, comm_len, sample->tid, sample->time);
        if (event.len) {
            fu_put(&out, ": ", 2);
            fu_put(&out, event.data, event.len);
        }
        if (ip_only) {
            nomem = !render_ip_line(u, s, &out);
            sunk = nomem || fu_sink_flush(&out, sink, context, false);
            continue;
        }
        fu_put(&out, ": \n", 3);
        for (uint32_t k = u->bounds[2 * s]; !nomem && k < u->bounds[2 * s + 2]; k++) {
            const fu_unwound_frame *f = &u->frames[u->frame_ids[k]];
            if (!fu_buffer_reserve(&out, f->line_len))
                nomem = true;
            else
                fu_put(&out, u->lines.data + f->line_offset, f->line_len);
        }
        if (!nomem && !fu_buffer_reserve(&out, 1))
            nomem = true;
        if (!nomem) {
            fu_put(&out, "\n", 1);
            sunk = fu_sink_flush(&out, sink, context, false);
        }
    }
    return fu_sink_finish(&out, sink, context, nomem, sunk, u->sample_count, "samples", err);
}

/* ---- folded stacks ------------------------------------------------------------------------------ */

typedef struct stack_rec {
    size_t offset, len; /* into the pool */
    uint64_t count;
    uint32_t order;
} stack_rec;

typedef struct stack_ctx {
    const fu_buffer *pool;
    const stack_rec *stacks;
} stack_ctx;

static bool stack_equal(const void *ctx, uint32_t i, const void *key)
{
    const stack_ctx *c = ctx;
    const stack_rec *s = &c->stacks[i];
    const fu_buffer *k = key;
    return s->len == k->len && (k->len == 0 || memcmp(c->pool->data + s->offset, k->data, k->len) == 0);
}

static int by_count_then_order(const void *a, const void *b)
{
    const stack_rec *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* A frame's folded name: its symbol, else "[unknown DSO-BASENAME]". */
static bool append_folded_name(const fu_unwound *u, const fu_unwound_frame *f, fu_buffer *out)
{
    if (f->has_symbol && f->name_len)
        return fu_buffer_append(out, f->name, f->name_len);
    const char *dso;
    size_t len;
    fu_unwound_frame_dso(u, f, &dso, &len);
    for (size_t i = len; i > 0; i--)
        if (dso[i - 1] == '/') {
            dso += i;
            len -= i;
            break;
        }
    return fu_buffer_append(out, "[unknown ", 9) && fu_buffer_append(out, dso, len) &&
           fu_buffer_append(out, "]", 1);
}

fu_status fu_folded_add(fu_folded *f, const fu_unwound *u, fu_error *err)
{
    bool ok = true;
    for (size_t s = 0; ok && s < u->sample_count; s++) {
        const char *comm;
        size_t comm_len;
        fu_unwound_comm(u, s, &comm, &comm_len);
        f->line.len = 0;
        ok = fu_buffer_append(&f->line, comm, comm_len);
        uint32_t kernel = u->bounds[2 * s], user = u->bounds[2 * s + 1], end = u->bounds[2 * s + 2];
        if (ok && end > user) {
            fu_text outcome = u->outcome_names[u->outcomes[s]];
            if (!fu_sample_outcome_complete(u->outcomes[s]))
                ok = fu_buffer_append(&f->line, ";[", 2) && fu_buffer_append(&f->line, outcome.data, outcome.len) &&
                     fu_buffer_append(&f->line, "]", 1);
        }
        for (uint32_t k = end; ok && k > kernel; k--)
            ok = fu_buffer_append(&f->line, ";", 1) && append_folded_name(u, &u->frames[u->frame_ids[k - 1]], &f->line);
        if (!ok)
            break;
        stack_ctx ctx = {&f->pool, (const stack_rec *)(const void *)f->stacks.data};
        uint64_t hash = fu_hash_bytes(f->line.data, f->line.len, 6);
        uint32_t found = fu_intern_find(&f->index, hash, stack_equal, &ctx, &f->line);
        if (found != FU_INTERN_NONE) {
            ((stack_rec *)(void *)f->stacks.data)[found].count++;
            continue;
        }
        stack_rec rec = {f->pool.len, f->line.len, 1, (uint32_t)(f->stacks.len / sizeof rec)};
        ok = f->stacks.len / sizeof rec < FU_INTERN_NONE - 1 && fu_buffer_append(&f->pool, f->line.data, f->line.len) &&
             fu_buffer_append(&f->stacks, &rec, sizeof rec) && fu_intern_insert(&f->index, hash, rec.order);
    }
    return ok ? FU_OK : fu_fail(err, FU_ERR_NOMEM, "out of memory folding %zu samples", u->sample_count);
}

fu_status fu_folded_write(fu_folded *f, bool by_count, fu_sink_fn sink, void *context, fu_error *err)
{
    fu_buffer out = {0};
    bool ok = true, sunk = true;
    size_t count = f->stacks.len / sizeof(stack_rec);
    if (count && by_count) {
        qsort(f->stacks.data, count, sizeof(stack_rec), by_count_then_order);
        fu_intern_free(&f->index); /* its indices named the records before the sort */
        f->index = (fu_intern_set){0};
    }
    for (size_t i = 0; ok && sunk && i < count; i++) {
        const stack_rec *rec = &((const stack_rec *)(const void *)f->stacks.data)[i];
        ok = fu_buffer_reserve(&out, rec->len + 24);
        if (ok) {
            fu_put(&out, f->pool.data + rec->offset, rec->len);
            fu_put(&out, " ", 1);
            fu_put_udec(&out, rec->count, 0, ' ');
            fu_put(&out, "\n", 1);
            sunk = fu_sink_flush(&out, sink, context, false);
        }
    }
    return fu_sink_finish(&out, sink, context, !ok, sunk, count, "folded stacks", err);
}

void fu_folded_free(fu_folded *f)
{
    free(f->pool.data);
    free(f->line.data);
    free(f->stacks.data);
    fu_intern_free(&f->index);
    memset(f, 0, sizeof *f);
}

fu_status fu_unwound_folded(const fu_unwound *u, bool by_count, fu_sink_fn sink, void *context, fu_error *err)
{
    fu_folded f = {0};
    fu_status status = fu_folded_add(&f, u, err);
    if (status == FU_OK)
        status = fu_folded_write(&f, by_count, sink, context, err);
    fu_folded_free(&f);
    return status;
}

/* ---- statistics ---------------------------------------------------------------------------------- */

bool fu_unwound_statistics(const fu_unwound *u, uint64_t *unwound, uint64_t *frames,
                           uint64_t by_outcome[FU_UNWOUND_OUTCOME_CODES], uint64_t **by_depth, uint32_t *deepest)
{
    *unwound = *frames = 0;
    *deepest = 0;
    memset(by_outcome, 0, FU_UNWOUND_OUTCOME_CODES * sizeof *by_outcome);
    for (size_t s = 0; s < u->sample_count; s++) {
        uint32_t depth = u->bounds[2 * s + 2] - u->bounds[2 * s + 1];
        *deepest = depth > *deepest ? depth : *deepest;
    }
    uint64_t *depths = calloc((size_t)*deepest + 1, sizeof *depths);
    if (!depths)
        return false;
    for (size_t s = 0; s < u->sample_count; s++) {
        uint32_t depth = u->bounds[2 * s + 2] - u->bounds[2 * s + 1];
        by_outcome[u->outcomes[s]]++;
        depths[depth]++;
        *unwound += depth > 0;
        *frames += depth;
    }
    *by_depth = depths;
    return true;
}
