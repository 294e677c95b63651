/* report: see report.h. */
#include "report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fu_report_init(fu_report *r, unsigned sort)
{
    *r = (fu_report){.sort = sort & FU_REPORT_SORT_ALL};
}

void fu_report_free(fu_report *r)
{
    fu_buffer *buffers[] = {&r->pool, &r->strings, &r->functions, &r->entries,
                            &r->frame_functions, &r->frame_entries, &r->comm_strings, &r->frame_srclines, &r->text};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]->data);
    fu_intern_free(&r->string_index);
    fu_intern_free(&r->function_index);
    fu_intern_free(&r->entry_index);
    *r = (fu_report){.sort = r->sort};
}

/* ---- interning: an id for each distinct string, function and entry ------------------------------- */

static bool string_equal(const void *context, uint32_t i, const void *key)
{
    const fu_report *r = context;
    const fu_text *k = key;
    fu_text s = fu_report_text(r, i);
    return s.len == k->len && (k->len == 0 || memcmp(s.data, k->data, k->len) == 0);
}

uint32_t fu_report_string_id(fu_report *r, fu_text text, fu_error *err)
{
    uint64_t hash = fu_hash_bytes(text.data, text.len, 1);
    uint32_t found = fu_intern_find(&r->string_index, hash, string_equal, r, &text);
    if (found != FU_INTERN_NONE)
        return found;
    size_t count = r->strings.len / sizeof(fu_report_string);
    if (count >= FU_REPORT_MAX_ENTRIES || text.len > UINT32_MAX || r->pool.len > UINT32_MAX - text.len) {
        fu_fail(err, FU_ERR_INVALID, "the report holds more than %u names (or %u bytes of them)",
                FU_REPORT_MAX_ENTRIES, UINT32_MAX);
        return FU_INTERN_NONE;
    }
    fu_report_string s = {(uint32_t)r->pool.len, (uint32_t)text.len};
    if (!fu_buffer_append(&r->pool, text.data, text.len) || !fu_buffer_append(&r->strings, &s, sizeof s) ||
        !fu_intern_insert(&r->string_index, hash, (uint32_t)count)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for the report's names");
        return FU_INTERN_NONE;
    }
    return (uint32_t)count;
}

static bool function_equal(const void *context, uint32_t i, const void *key)
{
    const fu_report_function *f = fu_report_function_at(context, i), *k = key;
    return f->dso == k->dso && f->address == k->address && f->has_symbol == k->has_symbol;
}

/* The id of the function of `key` (dso, address, has_symbol; the name is set when it is new). */
static uint32_t function_id(fu_report *r, fu_report_function *key, fu_text name, fu_error *err)
{
    uint64_t hash = fu_hash_u64(key->address ^ fu_hash_u64((uint64_t)key->dso << 1 | key->has_symbol));
    uint32_t found = fu_intern_find(&r->function_index, hash, function_equal, r, key);
    if (found != FU_INTERN_NONE)
        return found;
    size_t count = r->functions.len / sizeof *key;
    if (count >= FU_REPORT_MAX_ENTRIES) {
        fu_fail(err, FU_ERR_INVALID, "the report holds more than %u functions", FU_REPORT_MAX_ENTRIES);
        return FU_INTERN_NONE;
    }
    if ((key->name = fu_report_string_id(r, name, err)) == FU_INTERN_NONE)
        return FU_INTERN_NONE;
    if (!fu_buffer_append(&r->functions, key, sizeof *key) || !fu_intern_insert(&r->function_index, hash, (uint32_t)count)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for the report's functions");
        return FU_INTERN_NONE;
    }
    return (uint32_t)count;
}

static bool entry_equal(const void *context, uint32_t i, const void *key)
{
    const fu_report_entry *e = fu_report_entry_at(context, i), *k = key;
    return e->function == k->function && e->dso == k->dso && e->comm == k->comm && e->pid == k->pid &&
           e->tid == k->tid && e->srcline == k->srcline;
}

static uint32_t entry_id(fu_report *r, const fu_report_entry *key, fu_error *err)
{
    uint64_t hash = fu_hash_u64(((uint64_t)key->function << 32 | key->dso) ^
                                fu_hash_u64((uint64_t)key->comm << 32 ^ (uint32_t)key->tid ^ (uint64_t)(uint32_t)key->pid << 20 ^
                                            (uint64_t)key->srcline << 7));
    uint32_t found = fu_intern_find(&r->entry_index, hash, entry_equal, r, key);
    if (found != FU_INTERN_NONE)
        return found;
    size_t count = fu_report_entry_count(r);
    if (count >= FU_REPORT_MAX_ENTRIES) {
        fu_fail(err, FU_ERR_INVALID, "the report holds more than %u entries", FU_REPORT_MAX_ENTRIES);
        return FU_INTERN_NONE;
    }
    if (!fu_buffer_append(&r->entries, key, sizeof *key) || !fu_intern_insert(&r->entry_index, hash, (uint32_t)count)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for the report's entries");
        return FU_INTERN_NONE;
    }
    return (uint32_t)count;
}

uint32_t fu_report_named_function(fu_report *r, fu_text name, fu_error *err)
{
    fu_report_function key = {0};
    uint32_t empty = fu_report_string_id(r, (fu_text){"", 0}, err), id = fu_report_string_id(r, name, err);
    if (empty == FU_INTERN_NONE || id == FU_INTERN_NONE)
        return FU_INTERN_NONE;
    key.dso = empty;
    key.address = id;
    return function_id(r, &key, name, err);
}

/* ---- a window's frames and samples ---------------------------------------------------------------- */

/* perf report's name of an address without a symbol: "%-#.*llx" with 16 digits (sort.c). */
static fu_text address_name(char *buf, size_t size, uint64_t address)
{
    int n = snprintf(buf, size, "0x%016" PRIx64, address);
    return (fu_text){buf, n > 0 ? (size_t)n : 0};
}

uint32_t fu_report_frame_function(fu_report *r, const fu_unwound *u, const fu_unwound_frame *f, fu_error *err)
{
    const char *dso;
    size_t dso_len;
    fu_unwound_frame_dso(u, f, &dso, &dso_len);
    fu_report_function key = {.kernel = f->mapping == FU_UNWOUND_MAPPING_KERNEL, .has_symbol = f->has_symbol};
    if ((key.dso = fu_report_string_id(r, (fu_text){dso, dso_len}, err)) == FU_INTERN_NONE)
        return FU_INTERN_NONE;
    char buf[24];
    fu_text name;
    if (f->has_symbol) {
        /* the symbol's start, in the terms its table was looked up in (perf_script.c's set_symbol) */
        uint64_t looked_up = f->key;
        if (f->mapping != FU_UNWOUND_MAPPING_KERNEL && f->mapping != FU_UNWOUND_MAPPING_NONE)
            looked_up = f->key - (uint64_t)u->maps[f->mapping].bias;
        key.address = looked_up - f->offset;
        name = (fu_text){f->name, f->name_len};
    } else {
        key.address = (uint64_t)f->address; /* the DSO-relative address perf prints (a magnitude) */
        name = address_name(buf, sizeof buf, key.address);
    }
    return function_id(r, &key, name, err);
}

/* Grow a scratch array of u32 to `count` entries, all FU_INTERN_NONE. */
static bool scratch(fu_buffer *b, size_t count)
{
    b->len = 0;
    if (count > SIZE_MAX / 4 || !fu_buffer_reserve(b, 4 * count))
        return false;
    if (count)
        memset(b->data, 0xff, 4 * count); /* data is NULL before the first allocation */
    b->len = 4 * count;
    return true;
}

/* The entry of `function` (at source line `srcline`, a string id) in a sample's context (comm string,
 * pid, tid). */
static uint32_t sample_entry(fu_report *r, uint32_t function, uint32_t srcline, uint32_t comm, const fu_perf_sample *s,
                             fu_error *err)
{
    fu_report_entry key = {.function = FU_INTERN_NONE, .dso = FU_INTERN_NONE, .comm = FU_INTERN_NONE,
                           .srcline = FU_INTERN_NONE};
    if (r->sort & FU_REPORT_SORT_SRCLINE)
        key.srcline = srcline;
    if (r->sort & FU_REPORT_SORT_SYM)
        key.function = function;
    if (r->sort & (FU_REPORT_SORT_DSO | FU_REPORT_SORT_SYM))
        key.dso = fu_report_function_at(r, function)->dso;
    if (r->sort & FU_REPORT_SORT_COMM)
        key.comm = comm;
    if (r->sort & FU_REPORT_SORT_TID) {
        key.pid = (int32_t)s->pid;
        key.tid = (int32_t)s->tid;
    }
    return entry_id(r, &key, err);
}

fu_status fu_report_add(fu_report *r, const fu_unwound *u, fu_error *err)
{
    if (!scratch(&r->frame_functions, u->frame_count) || !scratch(&r->frame_entries, u->frame_count) ||
        !scratch(&r->comm_strings, u->comm_count) || !scratch(&r->frame_srclines, u->frame_count))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for a window of %zu frames", u->frame_count);
    uint32_t *functions = (uint32_t *)(void *)r->frame_functions.data;
    uint32_t *frame_entries = (uint32_t *)(void *)r->frame_entries.data;
    uint32_t *comms = (uint32_t *)(void *)r->comm_strings.data;
    uint32_t *srclines = (uint32_t *)(void *)r->frame_srclines.data;
    /* without comm and tid keys an entry is a function of the frame alone: found once per window */
    bool per_frame = !(r->sort & (FU_REPORT_SORT_COMM | FU_REPORT_SORT_TID));
    for (size_t i = 0; i < u->frame_count; i++) {
        if ((functions[i] = fu_report_frame_function(r, u, &u->frames[i], err)) == FU_INTERN_NONE)
            return err->status;
        if (!(r->sort & FU_REPORT_SORT_SRCLINE))
            continue;
        r->text.len = 0;
        if (!fu_unwound_frame_srcline(u, &u->frames[i], &r->text))
            return fu_fail(err, FU_ERR_NOMEM, "out of memory for a source line");
        if ((srclines[i] = fu_report_string_id(r, (fu_text){(const char *)r->text.data, r->text.len}, err)) ==
            FU_INTERN_NONE)
            return err->status;
    }
    /* one sample per iteration, each over its own frames: bounded by the window */
    for (size_t s = 0; s < u->sample_count; s++) {
        const fu_perf_sample *sample = &u->samples[s];
        uint32_t comm = FU_INTERN_NONE, window_comm = u->comm_ids[s];
        if ((r->sort & FU_REPORT_SORT_COMM) && window_comm != FU_INTERN_NONE) {
            if (comms[window_comm] == FU_INTERN_NONE &&
                (comms[window_comm] = fu_report_string_id(r, (fu_text){u->comm_names[window_comm].data,
                                                              u->comm_names[window_comm].len}, err)) == FU_INTERN_NONE)
                return err->status;
            comm = comms[window_comm];
        }
        uint64_t serial = r->samples + 1;
        uint32_t first = u->bounds[2 * s], end = u->bounds[2 * s + 2];
        if (first == end) {
            /* nothing resolved (a sample skipped by the walk): its IP, in no DSO, as perf shows it */
            char buf[24];
            fu_report_function key = {.address = sample->ip};
            uint32_t function, unknown_line = FU_INTERN_NONE;
            if ((key.dso = fu_report_string_id(r, (fu_text){"[unknown]", 9}, err)) == FU_INTERN_NONE ||
                (function = function_id(r, &key, address_name(buf, sizeof buf, sample->ip), err)) == FU_INTERN_NONE ||
                ((r->sort & FU_REPORT_SORT_SRCLINE) &&
                 (unknown_line = fu_report_string_id(r, (fu_text){"??:0", 4}, err)) == FU_INTERN_NONE))
                return err->status;
            uint32_t id = sample_entry(r, function, unknown_line, comm, sample, err);
            if (id == FU_INTERN_NONE)
                return err->status;
            fu_report_entry *e = &((fu_report_entry *)(void *)r->entries.data)[id];
            e->self++;
            e->total++;
            e->last_sample = serial;
            r->samples++;
            continue;
        }
        for (uint32_t k = first; k < end; k++) {
            uint32_t frame = u->frame_ids[k];
            uint32_t id = per_frame ? frame_entries[frame] : FU_INTERN_NONE;
            if (id == FU_INTERN_NONE) {
                if ((id = sample_entry(r, functions[frame], srclines[frame], comm, sample, err)) == FU_INTERN_NONE)
                    return err->status;
                if (per_frame)
                    frame_entries[frame] = id;
            }
            fu_report_entry *e = &((fu_report_entry *)(void *)r->entries.data)[id];
            if (k == first)
                e->self++;
            if (e->last_sample != serial) {
                e->total++;
                e->last_sample = serial;
            }
        }
        r->samples++;
    }
    return FU_OK;
}

/* ---- the order of the table ------------------------------------------------------------------------ */

typedef struct order_key {
    uint64_t first, second;
    uint32_t index;
} order_key;

static int by_counts(const void *a, const void *b)
{
    const order_key *x = a, *y = b;
    if (x->first != y->first)
        return x->first > y->first ? -1 : 1;
    if (x->second != y->second)
        return x->second > y->second ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

size_t fu_report_order(const fu_report *r, bool by_total, uint32_t *order)
{
    size_t count = fu_report_entry_count(r);
    order_key *keys = malloc((count ? count : 1) * sizeof *keys);
    if (!keys)
        return SIZE_MAX;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const fu_report_entry *e = fu_report_entry_at(r, i);
        if (e->total)
            keys[n++] = (order_key){by_total ? e->total : e->self, by_total ? e->self : e->total, (uint32_t)i};
    }
    qsort(keys, n, sizeof *keys, by_counts);
    for (size_t i = 0; i < n; i++)
        order[i] = keys[i].index;
    free(keys);
    return n;
}
