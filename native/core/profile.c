/* profile: see profile.h. */
#include "profile.h"

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
        free(threads[i].stacks.data);
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

/* The thread of a sample, added (with its comm) if new; NULL with err set. */
static fu_profile_thread *sample_thread(fu_profile *p, const fu_unwound *u, size_t s, fu_error *err)
{
    int32_t key[2] = {(int32_t)u->samples[s].pid, (int32_t)u->samples[s].tid};
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
    const char *comm;
    size_t comm_len;
    fu_unwound_comm(u, s, &comm, &comm_len);
    if (comm_len && (t.comm = fu_report_string_id(&p->names, (fu_text){comm, comm_len}, err)) == FU_INTERN_NONE)
        return NULL;
    if (!fu_buffer_append(&p->threads, &t, sizeof t) || !fu_intern_insert(&p->thread_index, hash, (uint32_t)count)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for the profile's threads");
        return NULL;
    }
    return &((fu_profile_thread *)(void *)p->threads.data)[count];
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
            fu_text outcome = u->outcome_names[u->outcomes[s]];
            char name[72];
            size_t len = outcome.len < sizeof name - 2 ? outcome.len : sizeof name - 2;
            name[0] = '[';
            memcpy(name + 1, outcome.data, len);
            name[len + 1] = ']';
            uint32_t root = fu_report_named_function(&p->names, (fu_text){name, len + 2}, err);
            if (root == FU_INTERN_NONE || (stack = stack_id(p, root, FU_INTERN_NONE, err)) == FU_INTERN_NONE)
                return err->status;
        }
        for (uint32_t k = end; k > first; k--) /* frames are leaf first: the stack grows from the root */
            if ((stack = stack_id(p, functions[u->frame_ids[k - 1]], stack, err)) == FU_INTERN_NONE)
                return err->status;
        if (stack == FU_INTERN_NONE) { /* nothing resolved: one frame saying so */
            uint32_t none = fu_report_named_function(&p->names, (fu_text){"[no frames]", 11}, err);
            if (none == FU_INTERN_NONE || (stack = stack_id(p, none, FU_INTERN_NONE, err)) == FU_INTERN_NONE)
                return err->status;
        }
        if (!fu_buffer_append(&thread->stacks, &stack, 4))
            return fu_fail(err, FU_ERR_NOMEM, "out of memory for the samples of thread %d", thread->tid);
        p->samples++;
    }
    return FU_OK;
}

/* ---- writing ------------------------------------------------------------------------------------- */

typedef struct writer {
    fu_buffer out;
    fu_sink_fn sink;
    void *context;
    bool nomem, failed;
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
        while (run < text.len && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\')
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
        } else if (s[i] == '"' || s[i] == '\\') {
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
        char label[48];
        int n = snprintf(label, sizeof label, " %d/%d", thread->pid, thread->tid);
        fu_text comm = thread->comm == FU_INTERN_NONE ? (fu_text){"", 0} : fu_report_text(&p->names, thread->comm);
        fu_buffer named = {0};
        if (!fu_buffer_append(&named, comm.data, comm.len) || !fu_buffer_append(&named, label, n > 0 ? (size_t)n : 0))
            w.nomem = true;
        else
            put_string(&w, (fu_text){(const char *)named.data, named.len});
        free(named.data);
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
