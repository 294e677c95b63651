/* profile: see profile.h. */
#include "profile.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_walk.h"
#include "render.h"

void fu_profile_init(fu_profile *p)
{
    *p = (fu_profile){0};
    fu_report_init(&p->names, FU_REPORT_SORT_SYM);
}

void fu_profile_free(fu_profile *p)
{
    fu_profile_thread *threads = (fu_profile_thread *)(void *)p->threads.data;
    for (size_t i = 0; i < p->threads.len / sizeof *threads; i++)
        free(threads[i].stacks.data), free(threads[i].times.data);
    fu_report_free(&p->names);
    free(p->stacks.data);
    free(p->threads.data);
    free(p->frame_functions.data);
    free(p->outcome_functions.data);
    fu_intern_free(&p->stack_index);
    fu_intern_free(&p->thread_index);
    *p = (fu_profile){0};
}

typedef struct stack_node {
    uint32_t frame, parent;
} stack_node;

static bool stack_equal(const void *context, uint32_t i, const void *key)
{
    const stack_node *s = &((const stack_node *)(const void *)((const fu_buffer *)context)->data)[i], *k = key;
    return s->frame == k->frame && s->parent == k->parent;
}

/* The id of the stack `frame` called from `parent` (FU_INTERN_NONE: a root). */
static uint32_t stack_id(fu_profile *p, uint32_t frame, uint32_t parent, fu_error *err)
{
    stack_node key = {frame, parent};
    uint64_t hash = fu_hash_u64((uint64_t)frame << 32 | parent);
    uint32_t found = fu_intern_find(&p->stack_index, hash, stack_equal, &p->stacks, &key);
    if (found != FU_INTERN_NONE)
        return found;
    size_t count = p->stacks.len / sizeof key;
    if (count >= FU_PROFILE_MAX_STACKS) {
        fu_fail(err, FU_ERR_INVALID, "the profile holds more than %u distinct stacks", FU_PROFILE_MAX_STACKS);
        return FU_INTERN_NONE;
    }
    if (!fu_buffer_append(&p->stacks, &key, sizeof key) || !fu_intern_insert(&p->stack_index, hash, (uint32_t)count)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for the profile's stacks");
        return FU_INTERN_NONE;
    }
    return (uint32_t)count;
}

static bool thread_equal(const void *context, uint32_t i, const void *key)
{
    const fu_profile_thread *t = &((const fu_profile_thread *)(const void *)((const fu_buffer *)context)->data)[i];
    const int32_t *k = key;
    return t->pid == k[0] && t->tid == k[1];
}

/* The sampling interval of a sample's event in ms: 1000/frequency (perf record -F), or the period of
 * a clock event in ns (cpu-clock, task-clock: -c); 1 for events counted in other units. */
static double sample_interval_ms(const fu_unwound *u, size_t s)
{
    if (!u->attrs || u->samples[s].attr_index >= u->attr_count)
        return 1;
    const fu_perf_attr *attr = &u->attrs[u->samples[s].attr_index];
    if (attr->freq && attr->sample_period)
        return 1000.0 / (double)attr->sample_period;
    bool clock = attr->type == 1 /* PERF_TYPE_SOFTWARE */ && attr->config <= 1 /* cpu-clock, task-clock */;
    return clock && attr->sample_period ? (double)attr->sample_period / 1e6 : 1;
}

/* The function rooting a stack that ended with `outcome` ("[truncated]"), remembered as one. */
static uint32_t outcome_function(fu_profile *p, fu_text outcome, fu_error *err)
{
    char name[72];
    size_t len = outcome.len < sizeof name - 2 ? outcome.len : sizeof name - 2;
    name[0] = '[';
    memcpy(name + 1, outcome.data, len);
    name[len + 1] = ']';
    uint32_t root = fu_report_named_function(&p->names, (fu_text){name, len + 2}, err);
    if (root == FU_INTERN_NONE)
        return root;
    const uint32_t *known = (const uint32_t *)(const void *)p->outcome_functions.data;
    size_t count = p->outcome_functions.len / 4, i = 0;
    while (i < count && known[i] != root) /* at most FU_UNWOUND_OUTCOME_CODES */
        i++;
    if (i == count && !fu_buffer_append(&p->outcome_functions, &root, 4)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for the profile's outcomes");
        return FU_INTERN_NONE;
    }
    return root;
}

/* The thread (pid, tid), added (with `comm`, if not empty) if new; NULL with err set. */
static fu_profile_thread *profile_thread(fu_profile *p, int32_t pid, int32_t tid, fu_text comm, fu_error *err)
{
    int32_t key[2] = {pid, tid};
    uint64_t hash = fu_hash_u64((uint64_t)(uint32_t)key[0] << 32 | (uint32_t)key[1]);
    uint32_t found = fu_intern_find(&p->thread_index, hash, thread_equal, &p->threads, key);
    if (found != FU_INTERN_NONE)
        return &((fu_profile_thread *)(void *)p->threads.data)[found];
    size_t count = p->threads.len / sizeof(fu_profile_thread);
    if (count >= FU_PROFILE_MAX_THREADS) {
        fu_fail(err, FU_ERR_INVALID, "the profile holds more than %u threads", FU_PROFILE_MAX_THREADS);
        return NULL;
    }
    fu_profile_thread t = {.pid = key[0], .tid = key[1], .comm = FU_INTERN_NONE};
    if (comm.len && (t.comm = fu_report_string_id(&p->names, comm, err)) == FU_INTERN_NONE)
        return NULL;
    if (!fu_buffer_append(&p->threads, &t, sizeof t) || !fu_intern_insert(&p->thread_index, hash, (uint32_t)count)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for the profile's threads");
        return NULL;
    }
    return &((fu_profile_thread *)(void *)p->threads.data)[count];
}

/* The thread of a window's sample s. */
static fu_profile_thread *sample_thread(fu_profile *p, const fu_unwound *u, size_t s, fu_error *err)
{
    const char *comm;
    size_t comm_len;
    fu_unwound_comm(u, s, &comm, &comm_len);
    return profile_thread(p, (int32_t)u->samples[s].pid, (int32_t)u->samples[s].tid, (fu_text){comm, comm_len}, err);
}

/* The stack of a sample with no frame resolved: one frame saying so. */
static uint32_t no_frames_stack(fu_profile *p, fu_error *err)
{
    uint32_t none = fu_report_named_function(&p->names, (fu_text){"[no frames]", 11}, err);
    return none == FU_INTERN_NONE ? none : stack_id(p, none, FU_INTERN_NONE, err);
}

/* Appends `count` samples of `stack` at `time` to a thread. */
static fu_status add_samples(fu_profile *p, fu_profile_thread *thread, uint32_t stack, uint64_t time, uint64_t count,
                             fu_error *err)
{
    if (!fu_buffer_reserve(&thread->stacks, 4 * count) || !fu_buffer_reserve(&thread->times, 8 * count))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the samples of thread %d", thread->tid);
    for (uint64_t i = 0; i < count; i++) /* bounded by count <= FU_PROFILE_MAX_STACK_SAMPLES */
        fu_buffer_append(&thread->stacks, &stack, 4), fu_buffer_append(&thread->times, &time, 8);
    p->samples += count;
    return FU_OK;
}

fu_status fu_profile_add_stack(fu_profile *p, const fu_profile_stack *s, fu_error *err)
{
    if (s->count > FU_PROFILE_MAX_STACK_SAMPLES || s->frame_count > FU_PROFILE_MAX_STACK_FRAMES)
        return fu_fail(err, FU_ERR_INVALID, "a stack of %zu frames counted %" PRIu64 " times is past the bounds "
                       "(%u frames, %u samples)", s->frame_count, s->count, FU_PROFILE_MAX_STACK_FRAMES,
                       FU_PROFILE_MAX_STACK_SAMPLES);
    fu_profile_thread *thread = profile_thread(p, s->pid, s->tid, s->comm, err);
    if (!thread)
        return err->status;
    uint32_t stack = FU_INTERN_NONE;
    if (s->outcome.len) {
        uint32_t root = outcome_function(p, s->outcome, err);
        if (root == FU_INTERN_NONE || (stack = stack_id(p, root, FU_INTERN_NONE, err)) == FU_INTERN_NONE)
            return err->status;
    }
    for (size_t i = 0; i < s->frame_count; i++) { /* root first */
        uint32_t function = fu_report_named_function(&p->names, s->frames[i], err);
        if (function == FU_INTERN_NONE || (stack = stack_id(p, function, stack, err)) == FU_INTERN_NONE)
            return err->status;
    }
    if (stack == FU_INTERN_NONE && (stack = no_frames_stack(p, err)) == FU_INTERN_NONE)
        return err->status;
    if (!p->samples && s->count)
        p->interval_ms = s->interval_ms > 0 ? s->interval_ms : 1;
    return add_samples(p, thread, stack, s->time, s->count, err);
}

fu_status fu_profile_add(fu_profile *p, const fu_unwound *u, fu_error *err)
{
    p->frame_functions.len = 0;
    if (!fu_buffer_reserve(&p->frame_functions, 4 * u->frame_count + 4))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for a window of %zu frames", u->frame_count);
    uint32_t *functions = (uint32_t *)(void *)p->frame_functions.data;
    for (size_t i = 0; i < u->frame_count; i++)
        if ((functions[i] = fu_report_frame_function(&p->names, u, &u->frames[i], err)) == FU_INTERN_NONE)
            return err->status;
    /* one sample per iteration, each over its own frames: bounded by the window */
    for (size_t s = 0; s < u->sample_count; s++) {
        fu_profile_thread *thread = sample_thread(p, u, s, err);
        if (!thread)
            return err->status;
        uint32_t first = u->bounds[2 * s], end = u->bounds[2 * s + 2], stack = FU_INTERN_NONE;
        if (end > u->bounds[2 * s + 1] && !fu_sample_outcome_complete(u->outcomes[s])) {
            /* "[truncated]": the root of a stack that did not reach its end */
            uint32_t root = outcome_function(p, u->outcome_names[u->outcomes[s]], err);
            if (root == FU_INTERN_NONE || (stack = stack_id(p, root, FU_INTERN_NONE, err)) == FU_INTERN_NONE)
                return err->status;
        }
        for (uint32_t k = end; k > first; k--) /* frames are leaf first: the stack grows from the root */
            if ((stack = stack_id(p, functions[u->frame_ids[k - 1]], stack, err)) == FU_INTERN_NONE)
                return err->status;
        if (stack == FU_INTERN_NONE && (stack = no_frames_stack(p, err)) == FU_INTERN_NONE) /* nothing resolved */
            return err->status;
        if (!p->samples)
            p->interval_ms = sample_interval_ms(u, s);
        if (add_samples(p, thread, stack, u->samples[s].time, 1, err) != FU_OK)
            return err->status;
    }
    return FU_OK;
}

/* ---- writing ------------------------------------------------------------------------------------- */

typedef struct writer {
    fu_buffer out;
    fu_sink_fn sink;
    void *context;
    bool nomem, failed;
    bool html; /* strings also escape <, > and & (JSON inside an HTML script element) */
} writer;

static void flush(writer *w, bool force)
{
    if (w->nomem || w->failed || !w->out.len || (!force && w->out.len < FU_UNWOUND_CHUNK))
        return;
    w->failed = !w->sink(w->context, w->out.data, w->out.len);
    w->out.len = 0;
}

static void put(writer *w, const char *text, size_t len)
{
    if (w->nomem || w->failed)
        return;
    if (!fu_buffer_reserve(&w->out, len)) {
        w->nomem = true;
        return;
    }
    fu_put(&w->out, text, len);
    flush(w, false);
}

static void put_literal(writer *w, const char *text) { put(w, text, strlen(text)); }

static void put_number(writer *w, uint64_t v)
{
    if (w->nomem || w->failed || !fu_buffer_reserve(&w->out, 24)) {
        w->nomem = !w->failed;
        return;
    }
    fu_put_udec(&w->out, v, 0, ' ');
}

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 if it is not one (RFC 3629). */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
               : (s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((len == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (len == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
        (len == 4 && s[0] == 0xf0 && s[1] < 0x90) || (len == 4 && s[0] == 0xf4 && s[1] >= 0x90))
        return 0; /* overlong, a surrogate, past U+10FFFF */
    return len;
}

/* A JSON string (RFC 8259 §7): quotes, backslashes and control characters escaped, bytes that are
 * not UTF-8 replaced by U+FFFD. */
static void put_string(writer *w, fu_text text)
{
    static const char hex[] = "0123456789abcdef";
    put(w, "\"", 1);
    const unsigned char *s = (const unsigned char *)text.data;
    size_t i = 0;
    while (i < text.len) { /* each step consumes at least one byte */
        size_t run = i;
        while (run < text.len && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\' &&
               !(w->html && (s[run] == '<' || s[run] == '>' || s[run] == '&')))
            run++;
        put(w, text.data + i, run - i);
        if ((i = run) == text.len)
            break;
        size_t len = s[i] >= 0x80 ? utf8_length(s + i, text.len - i) : 0;
        if (len) {
            put(w, text.data + i, len);
            i += len;
        } else if (s[i] >= 0x80) {
            put(w, "\\ufffd", 6);
            i++;
        } else if (s[i] == '"' || s[i] == '\\') { /* (an HTML character falls to \u00XX below) */
            char escaped[2] = {'\\', (char)s[i]};
            put(w, escaped, 2);
            i++;
        } else {
            char escaped[6] = {'\\', 'u', '0', '0', hex[s[i] >> 4], hex[s[i] & 15]};
            put(w, escaped, 6);
            i++;
        }
    }
    put(w, "\"", 1);
}

/* A thread's label, "comm pid/tid", as a JSON string. */
static void put_thread_label(writer *w, const fu_profile *p, const fu_profile_thread *thread)
{
    char label[48];
    int n = snprintf(label, sizeof label, " %d/%d", thread->pid, thread->tid);
    fu_text comm = thread->comm == FU_INTERN_NONE ? (fu_text){"", 0} : fu_report_text(&p->names, thread->comm);
    fu_buffer named = {0};
    if (!fu_buffer_append(&named, comm.data, comm.len) || !fu_buffer_append(&named, label, n > 0 ? (size_t)n : 0))
        w->nomem = true;
    else
        put_string(w, (fu_text){(const char *)named.data, named.len});
    free(named.data);
}

fu_status fu_profile_speedscope(const fu_profile *p, fu_text name, fu_sink_fn sink, void *context, fu_error *err)
{
    writer w = {.sink = sink, .context = context};
    const fu_profile_thread *threads = (const fu_profile_thread *)(const void *)p->threads.data;
    const stack_node *stacks = (const stack_node *)(const void *)p->stacks.data;
    size_t thread_count = p->threads.len / sizeof *threads, deepest = 0;
    /* the deepest stack, for the one buffer a stack is unrolled into */
    uint32_t *depth = calloc(p->stacks.len / sizeof *stacks + 1, 4), *path = NULL;
    for (size_t i = 0; depth && i < p->stacks.len / sizeof *stacks; i++) {
        depth[i] = 1 + (stacks[i].parent == FU_INTERN_NONE ? 0 : depth[stacks[i].parent]); /* parents come first */
        deepest = depth[i] > deepest ? depth[i] : deepest;
    }
    if (!depth || !(path = malloc(4 * (deepest + 1)))) {
        free(depth);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory writing the profile");
    }
    put_literal(&w, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"fastunwind\",\"name\":");
    put_string(&w, name);
    put_literal(&w, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
    size_t functions = p->names.functions.len / sizeof(fu_report_function);
    for (size_t f = 0; f < functions; f++) {
        const fu_report_function *function = fu_report_function_at(&p->names, (uint32_t)f);
        put_literal(&w, f ? ",{\"name\":" : "{\"name\":");
        put_string(&w, fu_report_text(&p->names, function->name));
        fu_text file = fu_report_text(&p->names, function->dso);
        if (file.len) {
            put_literal(&w, ",\"file\":");
            put_string(&w, file);
        }
        put(&w, "}", 1);
    }
    put_literal(&w, "]},\"profiles\":[");
    for (size_t t = 0; t < thread_count; t++) {
        const fu_profile_thread *thread = &threads[t];
        size_t samples = thread->stacks.len / 4;
        const uint32_t *ids = (const uint32_t *)(const void *)thread->stacks.data;
        put_literal(&w, t ? ",{\"type\":\"sampled\",\"name\":" : "{\"type\":\"sampled\",\"name\":");
        put_thread_label(&w, p, thread);
        put_literal(&w, ",\"unit\":\"none\",\"startValue\":0,\"endValue\":");
        put_number(&w, samples);
        put_literal(&w, ",\"samples\":[");
        for (size_t s = 0; s < samples && !w.nomem && !w.failed; s++) {
            size_t len = 0;
            for (uint32_t id = ids[s]; id != FU_INTERN_NONE && len <= deepest; id = stacks[id].parent)
                path[len++] = stacks[id].frame;
            put(&w, s ? ",[" : "[", s ? 2 : 1);
            for (size_t k = len; k > 0; k--) { /* root first */
                put_number(&w, path[k - 1]);
                if (k > 1)
                    put(&w, ",", 1);
            }
            put(&w, "]", 1);
        }
        put_literal(&w, "],\"weights\":[");
        for (size_t s = 0; s < samples; s++)
            put(&w, s ? ",1" : "1", s ? 2 : 1);
        put_literal(&w, "]}");
    }
    put_literal(&w, "]}\n");
    flush(&w, true);
    free(w.out.data);
    free(depth);
    free(path);
    if (w.nomem)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory writing the profile");
    if (w.failed)
        return fu_fail(err, FU_ERR_INVALID, "the output sink failed");
    return FU_OK;
}

/* ---- the Firefox profiler's processed profile ----------------------------------------------------- */

/* Each thread of a processed profile holds its own tables and strings: the ids of the profile's
 * stacks, functions, strings and libraries a thread uses are mapped to the thread's own (local id
 * + 1 in the maps, 0 for unused), in lists cleared after each thread, so that a thread costs what it
 * uses, whatever the profile's size. */
typedef struct thread_tables {
    uint32_t *stack_local, *function_local, *string_local, *lib_local; /* by the profile's ids */
    fu_buffer stacks, functions, strings, libs;                        /* u32: the ids used, in local order */
} thread_tables;

/* Categories of the meta's list (Other, User, Kernel). */
enum { CATEGORY_OTHER, CATEGORY_USER, CATEGORY_KERNEL };

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Maps `id` to the next local id if new (the map's entry is local + 1). */
static bool use(uint32_t *map, fu_buffer *list, uint32_t id)
{
    if (map[id])
        return true;
    map[id] = (uint32_t)(list->len / 4) + 1;
    return fu_buffer_append(list, &id, 4);
}

static void clear_uses(uint32_t *map, fu_buffer *list)
{
    const uint32_t *ids = (const uint32_t *)(const void *)list->data;
    for (size_t i = 0; i < list->len / 4; i++)
        map[ids[i]] = 0;
    list->len = 0;
}

/* The library (index into "libs") of each module string, FU_INTERN_NONE for none. */
static uint32_t *library_of_strings(const fu_profile *p, fu_buffer *libs)
{
    size_t strings = p->names.strings.len / sizeof(fu_report_string), functions = p->names.functions.len /
                                                                                    sizeof(fu_report_function);
    uint32_t *lib = malloc(4 * (strings + 1));
    if (!lib)
        return NULL;
    memset(lib, 0xff, 4 * (strings + 1));
    for (size_t f = 0; f < functions; f++) {
        uint32_t dso = fu_report_function_at(&p->names, (uint32_t)f)->dso;
        if (lib[dso] == FU_INTERN_NONE && fu_report_text(&p->names, dso).len) {
            lib[dso] = (uint32_t)(libs->len / 4);
            if (!fu_buffer_append(libs, &dso, 4)) {
                free(lib);
                return NULL;
            }
        }
    }
    return lib;
}

static int function_category(const fu_profile *p, uint32_t function)
{
    const fu_report_function *f = fu_report_function_at(&p->names, function);
    return f->kernel ? CATEGORY_KERNEL : fu_report_text(&p->names, f->dso).len ? CATEGORY_USER : CATEGORY_OTHER;
}

static bool is_outcome_function(const fu_profile *p, uint32_t function)
{
    const uint32_t *known = (const uint32_t *)(const void *)p->outcome_functions.data;
    for (size_t i = 0; i < p->outcome_functions.len / 4; i++) /* at most FU_UNWOUND_OUTCOME_CODES */
        if (known[i] == function)
            return true;
    return false;
}

/* ns as ms with 6 decimals (exact). */
static void put_milliseconds(writer *w, uint64_t ns)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%" PRIu64 ".%06" PRIu64, ns / 1000000, ns % 1000000);
    put(w, text, n > 0 ? (size_t)n : 0);
}

/* A column of `count` copies of `value` ("null", "0", "false"...). */
static void put_repeated(writer *w, const char *key, const char *value, size_t count)
{
    put_literal(w, key);
    size_t len = strlen(value);
    for (size_t i = 0; i < count && !w->nomem && !w->failed; i++) {
        if (i)
            put(w, ",", 1);
        put(w, value, len);
    }
    put(w, "]", 1);
}

/* Maps what thread `t` uses to its own ids: stacks (in the profile's order, so a prefix precedes its
 * stack), functions (a frame per function), strings and libraries. */
static bool map_thread(const fu_profile *p, const fu_profile_thread *thread, const uint32_t *lib_of, thread_tables *t)
{
    const stack_node *stacks = (const stack_node *)(const void *)p->stacks.data;
    const uint32_t *ids = (const uint32_t *)(const void *)thread->stacks.data;
    for (size_t s = 0; s < thread->stacks.len / 4; s++)
        for (uint32_t id = ids[s]; id != FU_INTERN_NONE && !t->stack_local[id]; id = stacks[id].parent) {
            t->stack_local[id] = 1; /* marked; numbered below (each stack once: bounded by the stacks) */
            if (!fu_buffer_append(&t->stacks, &id, 4))
                return false;
        }
    uint32_t *used = (uint32_t *)(void *)t->stacks.data;
    size_t count = t->stacks.len / 4;
    qsort(used, count, 4, compare_u32);
    for (size_t i = 0; i < count; i++)
        t->stack_local[used[i]] = (uint32_t)i + 1;
    for (size_t i = 0; i < count; i++) {
        const fu_report_function *f = fu_report_function_at(&p->names, stacks[used[i]].frame);
        if (!use(t->function_local, &t->functions, stacks[used[i]].frame) ||
            !use(t->string_local, &t->strings, f->name) ||
            (lib_of[f->dso] != FU_INTERN_NONE && (!use(t->lib_local, &t->libs, lib_of[f->dso]) ||
                                                   !use(t->string_local, &t->strings, f->dso))))
            return false;
    }
    return true;
}

/* What put_thread reads besides the thread: the library of each module string, each library's
 * string, the root of each stack. */
typedef struct gecko_context {
    const uint32_t *lib_of, *libs, *roots;
} gecko_context;

static void put_thread(writer *w, const fu_profile *p, const fu_profile_thread *thread, const gecko_context *g,
                       const thread_tables *t, uint64_t process_start)
{
    const uint32_t *lib_of = g->lib_of, *libs = g->libs, *roots = g->roots;
    const stack_node *stacks = (const stack_node *)(const void *)p->stacks.data;
    const uint32_t *functions = (const uint32_t *)(const void *)t->functions.data;
    const uint32_t *used_stacks = (const uint32_t *)(const void *)t->stacks.data;
    const uint32_t *ids = (const uint32_t *)(const void *)thread->stacks.data;
    const uint64_t *times = (const uint64_t *)(const void *)thread->times.data;
    size_t function_count = t->functions.len / 4, stack_count = t->stacks.len / 4, samples = thread->stacks.len / 4;
    char number[24];
    fu_text comm = thread->comm == FU_INTERN_NONE ? (fu_text){"", 0} : fu_report_text(&p->names, thread->comm);

    put_literal(w, "{\"frameTable\":{\"length\":");
    put_number(w, function_count);
    put_repeated(w, ",\"address\":[", "-1", function_count);
    put_repeated(w, ",\"inlineDepth\":[", "0", function_count);
    put_literal(w, ",\"category\":[");
    for (size_t i = 0; i < function_count; i++)
        put_number(w, (uint64_t)function_category(p, functions[i])), put(w, ",", i + 1 < function_count);
    put_repeated(w, "],\"subcategory\":[", "0", function_count);
    put_literal(w, ",\"func\":[");
    for (size_t i = 0; i < function_count; i++) /* a frame per function */
        put_number(w, i), put(w, ",", i + 1 < function_count);
    put(w, "]", 1);
    put_repeated(w, ",\"nativeSymbol\":[", "null", function_count);
    put_repeated(w, ",\"innerWindowID\":[", "null", function_count);
    put_repeated(w, ",\"line\":[", "null", function_count);
    put_repeated(w, ",\"column\":[", "null", function_count);
    put_literal(w, "},\"funcTable\":{\"length\":");
    put_number(w, function_count);
    put_literal(w, ",\"name\":[");
    for (size_t i = 0; i < function_count; i++)
        put_number(w, t->string_local[fu_report_function_at(&p->names, functions[i])->name] - 1),
            put(w, ",", i + 1 < function_count);
    put_repeated(w, "],\"isJS\":[", "false", function_count);
    put_repeated(w, ",\"relevantForJS\":[", "false", function_count);
    put_literal(w, ",\"resource\":[");
    for (size_t i = 0; i < function_count; i++) {
        uint32_t lib = lib_of[fu_report_function_at(&p->names, functions[i])->dso];
        if (lib == FU_INTERN_NONE)
            put_literal(w, "-1");
        else
            put_number(w, t->lib_local[lib] - 1);
        put(w, ",", i + 1 < function_count);
    }
    put_repeated(w, "],\"fileName\":[", "null", function_count);
    put_repeated(w, ",\"lineNumber\":[", "null", function_count);
    put_repeated(w, ",\"columnNumber\":[", "null", function_count);
    /* markers: a sample whose stack is rooted at an outcome ("[truncated]") */
    size_t markers = 0;
    for (size_t s = 0; s < samples; s++) {
        uint32_t root = roots[ids[s]];
        if (is_outcome_function(p, stacks[root].frame)) {
            if (!markers++)
                put_literal(w, "},\"markers\":{\"data\":[");
            else
                put(w, ",", 1);
            put_literal(w, "{\"type\":\"UnwindOutcome\",\"outcome\":");
            put_string(w, fu_report_text(&p->names, fu_report_function_at(&p->names, stacks[root].frame)->name));
            put_literal(w, ",\"cause\":{\"stack\":");
            put_number(w, t->stack_local[ids[s]] - 1);
            put_literal(w, "}}");
        }
    }
    put_literal(w, markers ? "],\"name\":[" : "},\"markers\":{\"data\":[],\"name\":[");
    for (size_t s = 0, k = 0; s < samples && k < markers; s++) {
        uint32_t root = roots[ids[s]];
        if (is_outcome_function(p, stacks[root].frame)) {
            put_number(w, t->string_local[fu_report_function_at(&p->names, stacks[root].frame)->name] - 1);
            put(w, ",", ++k < markers);
        }
    }
    put_literal(w, "],\"startTime\":[");
    for (size_t s = 0, k = 0; s < samples && k < markers; s++) {
        uint32_t root = roots[ids[s]];
        if (is_outcome_function(p, stacks[root].frame)) {
            put_milliseconds(w, times[s]);
            put(w, ",", ++k < markers);
        }
    }
    put(w, "]", 1);
    put_repeated(w, ",\"endTime\":[", "null", markers);
    put_repeated(w, ",\"phase\":[", "0", markers);
    put_repeated(w, ",\"category\":[", "0", markers);
    put_literal(w, ",\"length\":");
    put_number(w, markers);
    put_literal(w, "},\"name\":");
    put_string(w, comm);
    put_literal(w, ",\"isMainThread\":");
    put_literal(w, thread->pid == thread->tid ? "true" : "false");
    put_literal(w, ",\"nativeSymbols\":{\"length\":0,\"libIndex\":[],\"address\":[],\"name\":[],\"functionSize\":[]}");
    put_literal(w, ",\"pausedRanges\":[],\"pid\":\"");
    int n = snprintf(number, sizeof number, "%d", thread->pid);
    put(w, number, n > 0 ? (size_t)n : 0);
    put_literal(w, "\",\"processName\":");
    put_string(w, comm);
    put_literal(w, ",\"processShutdownTime\":null,\"processStartupTime\":");
    put_milliseconds(w, process_start);
    put_literal(w, ",\"processType\":\"default\",\"registerTime\":");
    put_milliseconds(w, samples ? times[0] : 0);
    put_literal(w, ",\"resourceTable\":{\"length\":");
    size_t lib_count = t->libs.len / 4;
    const uint32_t *used_libs = (const uint32_t *)(const void *)t->libs.data;
    put_number(w, lib_count);
    put_literal(w, ",\"lib\":[");
    for (size_t i = 0; i < lib_count; i++)
        put_number(w, used_libs[i]), put(w, ",", i + 1 < lib_count);
    put_literal(w, "],\"name\":[");
    for (size_t i = 0; i < lib_count; i++)
        put_number(w, t->string_local[libs[used_libs[i]]] - 1), put(w, ",", i + 1 < lib_count);
    put(w, "]", 1);
    put_repeated(w, ",\"host\":[", "null", lib_count);
    put_repeated(w, ",\"type\":[", "1", lib_count); /* a library */
    put_literal(w, "},\"samples\":{\"length\":");
    put_number(w, samples);
    put_literal(w, ",\"stack\":[");
    for (size_t s = 0; s < samples && !w->nomem && !w->failed; s++)
        put_number(w, t->stack_local[ids[s]] - 1), put(w, ",", s + 1 < samples);
    put_literal(w, "],\"time\":[");
    for (size_t s = 0; s < samples && !w->nomem && !w->failed; s++)
        put_milliseconds(w, times[s]), put(w, ",", s + 1 < samples);
    put_literal(w, "],\"weight\":null,\"weightType\":\"samples\"},\"stackTable\":{\"length\":");
    put_number(w, stack_count);
    put_literal(w, ",\"prefix\":[");
    for (size_t i = 0; i < stack_count && !w->nomem && !w->failed; i++) {
        uint32_t parent = stacks[used_stacks[i]].parent;
        if (parent == FU_INTERN_NONE)
            put_literal(w, "null");
        else
            put_number(w, t->stack_local[parent] - 1);
        put(w, ",", i + 1 < stack_count);
    }
    put_literal(w, "],\"frame\":[");
    for (size_t i = 0; i < stack_count && !w->nomem && !w->failed; i++)
        put_number(w, t->function_local[stacks[used_stacks[i]].frame] - 1), put(w, ",", i + 1 < stack_count);
    put_literal(w, "],\"category\":[");
    for (size_t i = 0; i < stack_count && !w->nomem && !w->failed; i++)
        put_number(w, (uint64_t)function_category(p, stacks[used_stacks[i]].frame)), put(w, ",", i + 1 < stack_count);
    put(w, "]", 1);
    put_repeated(w, ",\"subcategory\":[", "0", stack_count);
    put_literal(w, "},\"stringArray\":[");
    const uint32_t *strings = (const uint32_t *)(const void *)t->strings.data;
    for (size_t i = 0; i < t->strings.len / 4 && !w->nomem && !w->failed; i++) {
        if (i)
            put(w, ",", 1);
        put_string(w, fu_report_text(&p->names, strings[i]));
    }
    put_literal(w, "],\"tid\":\"");
    n = snprintf(number, sizeof number, "%d", thread->tid);
    put(w, number, n > 0 ? (size_t)n : 0);
    put_literal(w, "\",\"unregisterTime\":null}");
}

typedef struct thread_pid {
    int32_t pid;
    uint32_t index;
} thread_pid;

static int compare_thread_pids(const void *a, const void *b)
{
    const thread_pid *x = a, *y = b;
    return x->pid != y->pid ? (x->pid < y->pid ? -1 : 1) : (x->index > y->index) - (x->index < y->index);
}

/* Per thread, when its process started: the first sample of any of the process's threads (ns). */
static uint64_t *process_start_times(const fu_profile_thread *threads, size_t count)
{
    uint64_t *starts = malloc(8 * (count + 1));
    thread_pid *order = malloc(sizeof *order * (count + 1));
    if (!starts || !order) {
        free(starts), free(order);
        return NULL;
    }
    for (size_t i = 0; i < count; i++)
        order[i] = (thread_pid){threads[i].pid, (uint32_t)i};
    qsort(order, count, sizeof *order, compare_thread_pids);
    for (size_t first = 0, end; first < count; first = end) { /* each group of one pid */
        uint64_t start = UINT64_MAX;
        for (end = first; end < count && order[end].pid == order[first].pid; end++) {
            const fu_buffer *times = &threads[order[end].index].times;
            if (times->len && *(const uint64_t *)(const void *)times->data < start)
                start = *(const uint64_t *)(const void *)times->data;
        }
        for (size_t i = first; i < end; i++)
            starts[order[i].index] = start == UINT64_MAX ? 0 : start;
    }
    free(order);
    return starts;
}

/* The last path component of a module's path (a library's name). */
static fu_text base_name(fu_text path)
{
    size_t start = path.len;
    while (start > 0 && path.data[start - 1] != '/') /* bounded by the path */
        start--;
    return (fu_text){path.data + start, path.len - start};
}

fu_status fu_profile_gecko(const fu_profile *p, fu_text name, fu_sink_fn sink, void *context, fu_error *err)
{
    writer w = {.sink = sink, .context = context};
    const fu_profile_thread *threads = (const fu_profile_thread *)(const void *)p->threads.data;
    size_t thread_count = p->threads.len / sizeof *threads;
    size_t stacks = p->stacks.len / sizeof(stack_node), functions = p->names.functions.len / sizeof(fu_report_function);
    size_t strings = p->names.strings.len / sizeof(fu_report_string);
    fu_buffer libs = {0};
    thread_tables t = {.stack_local = calloc(stacks + 1, 4), .function_local = calloc(functions + 1, 4),
                       .string_local = calloc(strings + 1, 4), .lib_local = calloc(strings + 1, 4)};
    uint32_t *lib_of = library_of_strings(p, &libs), *roots = malloc(4 * (stacks + 1));
    uint64_t *process_starts = process_start_times(threads, thread_count);
    if (!t.stack_local || !t.function_local || !t.string_local || !t.lib_local || !lib_of || !roots || !process_starts)
        w.nomem = true;
    const stack_node *nodes = (const stack_node *)(const void *)p->stacks.data;
    for (size_t i = 0; roots && i < stacks; i++) /* parents come first */
        roots[i] = nodes[i].parent == FU_INTERN_NONE ? (uint32_t)i : roots[nodes[i].parent];
    put_literal(&w, "{\"meta\":{\"categories\":[{\"name\":\"Other\",\"color\":\"grey\",\"subcategories\":[\"Other\"]},"
                    "{\"name\":\"User\",\"color\":\"yellow\",\"subcategories\":[\"Other\"]},"
                    "{\"name\":\"Kernel\",\"color\":\"orange\",\"subcategories\":[\"Other\"]}],"
                    "\"debug\":false,\"extensions\":{\"length\":0,\"baseURL\":[],\"id\":[],\"name\":[]},\"interval\":");
    char interval[32];
    int n = snprintf(interval, sizeof interval, "%.6f", p->interval_ms > 0 ? p->interval_ms : 1.0);
    put(&w, interval, n > 0 ? (size_t)n : 0);
    put_literal(&w, ",\"preprocessedProfileVersion\":49,\"processType\":0,\"product\":");
    put_string(&w, name);
    put_literal(&w, ",\"sampleUnits\":{\"time\":\"ms\",\"eventDelay\":\"ms\",\"threadCPUDelta\":\"\\u00b5s\"},"
                    "\"startTime\":0,\"symbolicated\":true,\"pausedRanges\":[],\"version\":24,"
                    "\"usesOnlyOneStackType\":true,\"doesNotUseFrameImplementation\":true,"
                    "\"sourceCodeIsNotOnSearchfox\":true,\"markerSchema\":[{\"name\":\"UnwindOutcome\","
                    "\"display\":[\"marker-chart\",\"marker-table\",\"timeline-overview\"],"
                    "\"chartLabel\":\"{marker.data.outcome}\",\"tooltipLabel\":\"stack not complete: {marker.data.outcome}\","
                    "\"tableLabel\":\"{marker.data.outcome}\",\"data\":[{\"key\":\"outcome\",\"label\":\"Outcome\","
                    "\"format\":\"string\",\"searchable\":true}]}]},\"libs\":[");
    const uint32_t *lib_strings = (const uint32_t *)(const void *)libs.data;
    for (size_t i = 0; i < libs.len / 4 && !w.nomem; i++) {
        fu_text path = fu_report_text(&p->names, lib_strings[i]), base = base_name(path);
        put_literal(&w, i ? ",{\"name\":" : "{\"name\":");
        put_string(&w, base);
        put_literal(&w, ",\"path\":");
        put_string(&w, path);
        put_literal(&w, ",\"debugName\":");
        put_string(&w, base);
        put_literal(&w, ",\"debugPath\":");
        put_string(&w, path);
        put_literal(&w, ",\"breakpadId\":\"\",\"codeId\":null,\"arch\":null}");
    }
    put_literal(&w, "],\"threads\":[");
    gecko_context g = {lib_of, lib_strings, roots};
    for (size_t i = 0; i < thread_count && !w.nomem && !w.failed; i++) {
        if (!map_thread(p, &threads[i], lib_of, &t)) {
            w.nomem = true;
            break;
        }
        if (i)
            put(&w, ",", 1);
        put_thread(&w, p, &threads[i], &g, &t, process_starts[i]);
        clear_uses(t.stack_local, &t.stacks);
        clear_uses(t.function_local, &t.functions);
        clear_uses(t.string_local, &t.strings);
        clear_uses(t.lib_local, &t.libs);
    }
    put_literal(&w, "],\"pages\":[],\"profilerOverhead\":[],\"counters\":[]}\n");
    flush(&w, true);
    free(w.out.data), free(libs.data), free(lib_of), free(roots), free(process_starts);
    free(t.stack_local), free(t.function_local), free(t.string_local), free(t.lib_local);
    free(t.stacks.data), free(t.functions.data), free(t.strings.data), free(t.libs.data);
    if (w.nomem)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory writing the profile");
    if (w.failed)
        return fu_fail(err, FU_ERR_INVALID, "the output sink failed");
    return FU_OK;
}

/* ---- the flame graph's data ------------------------------------------------------------------------ */

static int compare_u64_descending(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y;
}

/* Which stacks the flame graph keeps and the node each stack's samples count for (out ids: the kept
 * stacks in order, then the "[merged]" nodes). */
typedef struct flame_nodes {
    uint32_t *target;        /* per stack: its out node */
    uint32_t kept, merged;   /* counts */
    fu_buffer merged_parent; /* u32 per "[merged]" node: its parent's out id, FU_INTERN_NONE for a root */
} flame_nodes;

static bool choose_nodes(const fu_profile *p, uint32_t max_nodes, flame_nodes *out)
{
    const stack_node *stacks = (const stack_node *)(const void *)p->stacks.data;
    const fu_profile_thread *threads = (const fu_profile_thread *)(const void *)p->threads.data;
    size_t count = p->stacks.len / sizeof *stacks;
    uint64_t *total = calloc(count + 1, 8), *sorted = NULL, threshold = 0;
    uint32_t *merged_of = NULL, merged_root = FU_INTERN_NONE;
    out->target = malloc(4 * (count + 1));
    bool ok = total && out->target;
    for (size_t t = 0; ok && t < p->threads.len / sizeof *threads; t++) {
        const uint32_t *ids = (const uint32_t *)(const void *)threads[t].stacks.data;
        for (size_t s = 0; s < threads[t].stacks.len / 4; s++)
            total[ids[s]]++;
    }
    for (size_t i = count; ok && i > 0; i--) /* children follow their parents */
        if (stacks[i - 1].parent != FU_INTERN_NONE)
            total[stacks[i - 1].parent] += total[i - 1];
    if (ok && count > max_nodes) { /* keep the stacks with more samples than the (max_nodes+1)th most */
        if (!(sorted = malloc(8 * count)))
            ok = false;
        else {
            memcpy(sorted, total, 8 * count);
            qsort(sorted, count, 8, compare_u64_descending);
            threshold = sorted[max_nodes];
        }
    }
    if (ok && !(merged_of = malloc(4 * (count + 1))))
        ok = false;
    out->kept = out->merged = 0;
    for (size_t i = 0; ok && i < count; i++) {
        uint32_t parent = stacks[i].parent;
        merged_of[i] = FU_INTERN_NONE;
        if (count <= max_nodes || total[i] > threshold) {
            out->target[i] = out->kept++;
            continue;
        }
        uint32_t *slot = parent == FU_INTERN_NONE ? &merged_root
                         : total[parent] > threshold ? &merged_of[parent] : NULL;
        if (!slot) { /* under a stack not kept: its "[merged]" node */
            out->target[i] = out->target[parent];
            continue;
        }
        if (*slot == FU_INTERN_NONE) {
            *slot = out->merged++;
            uint32_t parent_out = parent == FU_INTERN_NONE ? FU_INTERN_NONE : out->target[parent];
            ok = fu_buffer_append(&out->merged_parent, &parent_out, 4);
        }
        out->target[i] = FU_INTERN_NONE - 1 - *slot; /* a "[merged]" node: numbered once kept is known */
    }
    for (size_t i = 0; ok && i < count; i++)
        if (out->target[i] >= out->kept && out->target[i] >= FU_INTERN_NONE - out->merged)
            out->target[i] = out->kept + (FU_INTERN_NONE - 1 - out->target[i]);
    free(total), free(sorted), free(merged_of);
    return ok;
}

fu_status fu_profile_flame(const fu_profile *p, uint32_t max_nodes, fu_sink_fn sink, void *context, fu_error *err)
{
    writer w = {.sink = sink, .context = context, .html = true};
    const stack_node *stacks = (const stack_node *)(const void *)p->stacks.data;
    const fu_profile_thread *threads = (const fu_profile_thread *)(const void *)p->threads.data;
    size_t count = p->stacks.len / sizeof *stacks, thread_count = p->threads.len / sizeof *threads;
    size_t functions = p->names.functions.len / sizeof(fu_report_function);
    size_t strings = p->names.strings.len / sizeof(fu_report_string);
    flame_nodes nodes = {0};
    fu_buffer used_functions = {0}, modules = {0}, touched = {0};
    uint32_t *function_local = calloc(functions + 1, 4), *module_local = calloc(strings + 1, 4), *counts = NULL;
    uint32_t *node_function = NULL, *node_parent = NULL;
    if (!function_local || !module_local || !choose_nodes(p, max_nodes ? max_nodes : 1, &nodes))
        w.nomem = true;
    size_t out_count = (size_t)nodes.kept + nodes.merged;
    if (!w.nomem && (!(counts = calloc(out_count + 1, 4)) || !(node_function = malloc(4 * (out_count + 1))) ||
                     !(node_parent = malloc(4 * (out_count + 1)))))
        w.nomem = true;
    /* the out nodes' functions (local ids; "[merged]" is the last function) and parents */
    for (size_t i = 0; !w.nomem && i < count; i++)
        if (nodes.target[i] < nodes.kept) { /* a kept stack (the others count for "[merged]" nodes) */
            uint32_t f = stacks[i].frame, out = nodes.target[i];
            const fu_report_function *function = fu_report_function_at(&p->names, f);
            if (!use(function_local, &used_functions, f) ||
                (fu_report_text(&p->names, function->dso).len && !use(module_local, &modules, function->dso)))
                w.nomem = true;
            node_function[out] = function_local[f] - 1;
            node_parent[out] = stacks[i].parent == FU_INTERN_NONE ? FU_INTERN_NONE : nodes.target[stacks[i].parent];
        }
    size_t function_count = used_functions.len / 4;
    const uint32_t *merged_parents = (const uint32_t *)(const void *)nodes.merged_parent.data;
    for (size_t m = 0; !w.nomem && m < nodes.merged; m++) {
        node_function[nodes.kept + m] = (uint32_t)function_count; /* "[merged]" */
        node_parent[nodes.kept + m] = merged_parents[m];
    }
    put_literal(&w, "{\"samples\":");
    put_number(&w, p->samples);
    put_literal(&w, ",\"stacks\":");
    put_number(&w, count);
    put_literal(&w, ",\"names\":[");
    const uint32_t *used = (const uint32_t *)(const void *)used_functions.data;
    for (size_t i = 0; i < function_count && !w.nomem && !w.failed; i++) {
        put_string(&w, fu_report_text(&p->names, fu_report_function_at(&p->names, used[i])->name));
        put(&w, ",", 1);
    }
    put_literal(&w, "\"[merged]\"],\"kinds\":[");
    for (size_t i = 0; i < function_count && !w.nomem && !w.failed; i++)
        put_number(&w, (uint64_t)function_category(p, used[i])), put(&w, ",", 1);
    put_literal(&w, "0],\"module\":[");
    for (size_t i = 0; i < function_count && !w.nomem && !w.failed; i++) {
        uint32_t dso = fu_report_function_at(&p->names, used[i])->dso;
        if (module_local[dso])
            put_number(&w, module_local[dso] - 1);
        else
            put_literal(&w, "-1");
        put(&w, ",", 1);
    }
    put_literal(&w, "-1],\"modules\":[");
    const uint32_t *module_ids = (const uint32_t *)(const void *)modules.data;
    for (size_t i = 0; i < modules.len / 4 && !w.nomem && !w.failed; i++) {
        if (i)
            put(&w, ",", 1);
        put_string(&w, fu_report_text(&p->names, module_ids[i]));
    }
    put_literal(&w, "],\"function\":[");
    for (size_t i = 0; i < out_count && !w.nomem && !w.failed; i++)
        put_number(&w, node_function[i]), put(&w, ",", i + 1 < out_count);
    put_literal(&w, "],\"parent\":[");
    for (size_t i = 0; i < out_count && !w.nomem && !w.failed; i++) {
        if (node_parent[i] == FU_INTERN_NONE)
            put_literal(&w, "-1");
        else
            put_number(&w, node_parent[i]);
        put(&w, ",", i + 1 < out_count);
    }
    put_literal(&w, "],\"threads\":[");
    for (size_t t = 0; t < thread_count && !w.nomem && !w.failed; t++) {
        const uint32_t *ids = (const uint32_t *)(const void *)threads[t].stacks.data;
        size_t samples = threads[t].stacks.len / 4;
        for (size_t s = 0; s < samples && !w.nomem; s++) {
            uint32_t node = nodes.target[ids[s]];
            if (!counts[node]++ && !fu_buffer_append(&touched, &node, 4))
                w.nomem = true;
        }
        put_literal(&w, t ? ",{\"name\":" : "{\"name\":");
        put_thread_label(&w, p, &threads[t]);
        put_literal(&w, ",\"samples\":");
        put_number(&w, samples);
        put_literal(&w, ",\"self\":[");
        const uint32_t *nodes_touched = (const uint32_t *)(const void *)touched.data;
        for (size_t i = 0; i < touched.len / 4; i++) {
            put_number(&w, nodes_touched[i]);
            put(&w, ",", 1);
            put_number(&w, counts[nodes_touched[i]]);
            put(&w, ",", i + 1 < touched.len / 4);
            counts[nodes_touched[i]] = 0;
        }
        touched.len = 0;
        put_literal(&w, "]}");
    }
    put_literal(&w, "]}");
    flush(&w, true);
    free(w.out.data), free(nodes.target), free(nodes.merged_parent.data), free(used_functions.data);
    free(modules.data), free(touched.data), free(function_local), free(module_local), free(counts);
    free(node_function), free(node_parent);
    if (w.nomem)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory writing the flame graph");
    if (w.failed)
        return fu_fail(err, FU_ERR_INVALID, "the output sink failed");
    return FU_OK;
}
