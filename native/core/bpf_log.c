/* bpf_log: the in-kernel unwinder's samples kept in user space (bpf_log.h). */
#include "bpf_log.h"

#include <stdlib.h>
#include <string.h>

#include "render.h"

_Static_assert(FU_BPF_SAMPLE_HEADER == 56, "the record's header: time, tid, cpu, comm, the stack's fields");
_Static_assert(sizeof(fu_bpf_stack) == 24 + 8 * FU_BPF_MAX_FRAMES, "a stack's fields, then its frames");

#define COMM_BYTES 16

typedef struct log_key {
    const void *data;
    size_t len;
} log_key;

static bool stack_equal(const void *context, uint32_t index, const void *key)
{
    const fu_bpf_log *log = context;
    const log_key *k = key;
    return memcmp((const fu_bpf_stack *)(const void *)log->stacks.data + index, k->data, k->len) == 0;
}

static bool comm_equal(const void *context, uint32_t index, const void *key)
{
    const fu_bpf_log *log = context;
    return memcmp(log->comms.data + (size_t)index * COMM_BYTES, key, COMM_BYTES) == 0;
}

/* The id of the record at `data` (len bytes, `equal` compares them with `key`) among `items`
 * (records of `size` bytes, zero past len), added if new; FU_INTERN_NONE when out of memory. */
static uint32_t intern(fu_bpf_log *log, fu_buffer *items, fu_intern_set *index, size_t size, fu_intern_equal equal,
                       const void *key, const void *data, size_t len)
{
    uint64_t hash = fu_hash_bytes(data, len, size);
    uint32_t found = fu_intern_find(index, hash, equal, log, key);
    if (found != FU_INTERN_NONE)
        return found;
    size_t id = items->len / size;
    if (id >= FU_INTERN_NONE - 1 || !fu_buffer_reserve(items, size))
        return FU_INTERN_NONE;
    memset(items->data + items->len, 0, size);
    memcpy(items->data + items->len, data, len);
    items->len += size;
    if (!fu_intern_insert(index, hash, (uint32_t)id)) {
        items->len -= size;
        return FU_INTERN_NONE;
    }
    return (uint32_t)id;
}

/* Keeps the record at the start of `record` (`size` bytes left in its batch); *taken: its bytes. */
static fu_status add_record(fu_bpf_log *log, const unsigned char *record, size_t size, size_t *taken, fu_error *err)
{
    if (size < FU_BPF_SAMPLE_HEADER)
        return fu_fail(err, FU_ERR_INVALID, "a BPF sample of %zu bytes (its header takes %zu)", size,
                       (size_t)FU_BPF_SAMPLE_HEADER);
    fu_bpf_sample sample;
    memset(&sample, 0, sizeof sample);
    memcpy(&sample, record, FU_BPF_SAMPLE_HEADER);
    uint32_t frames = sample.stack.user_count;
    if (frames > FU_BPF_MAX_FRAMES || size < FU_BPF_SAMPLE_HEADER + 8 * (size_t)frames ||
        sample.stack.outcome >= FU_BPF_OUTCOME_COUNT || sample.stack.reserved)
        return fu_fail(err, FU_ERR_INVALID, "a BPF sample of %zu bytes with %u user frames and outcome %u", size,
                       frames, sample.stack.outcome);
    *taken = FU_BPF_SAMPLE_HEADER + 8 * (size_t)frames;
    memcpy(sample.stack.user, (const unsigned char *)record + FU_BPF_SAMPLE_HEADER, 8 * (size_t)frames);
    size_t stack_bytes = FU_BPF_SAMPLE_HEADER - offsetof(fu_bpf_sample, stack) + 8 * (size_t)frames;
    log_key key = {&sample.stack, stack_bytes};
    uint32_t comm = intern(log, &log->comms, &log->comm_index, COMM_BYTES, comm_equal, sample.comm, sample.comm,
                           COMM_BYTES);
    uint32_t stack = comm == FU_INTERN_NONE ? FU_INTERN_NONE
                                            : intern(log, &log->stacks, &log->stack_index, sizeof(fu_bpf_stack),
                                                     stack_equal, &key, &sample.stack, stack_bytes);
    if (stack == FU_INTERN_NONE)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory keeping BPF stacks");
    if (log->counts.len / sizeof(uint64_t) <= stack) {
        uint64_t zero = 0;
        if (!fu_buffer_reserve(&log->counts, sizeof zero))
            return fu_fail(err, FU_ERR_NOMEM, "out of memory keeping BPF stacks");
        fu_put(&log->counts, &zero, sizeof zero);
    }
    ((uint64_t *)(void *)log->counts.data)[stack]++;
    if (log->samples.len / sizeof(fu_bpf_logged) >= FU_BPF_MAX_LOGGED) {
        log->unlogged++;
        return FU_OK;
    }
    fu_bpf_logged entry = {.time = sample.time, .tid = sample.tid, .cpu = sample.cpu, .comm = comm, .stack = stack};
    if (!fu_buffer_append(&log->samples, &entry, sizeof entry))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory keeping BPF samples");
    return FU_OK;
}

fu_status fu_bpf_log_add_batch(fu_bpf_log *log, const void *batch, size_t size, fu_error *err)
{
    const unsigned char *at = batch;
    /* each record takes at least its header: the bound on the records of a batch */
    size_t left = size, records = size / FU_BPF_SAMPLE_HEADER;
    for (size_t i = 0; left && i < records; i++) {
        size_t taken = 0;
        fu_status st = add_record(log, at, left, &taken, err);
        if (st != FU_OK)
            return st;
        at += taken;
        left -= taken;
    }
    return left ? fu_fail(err, FU_ERR_INVALID, "a BPF sample batch ends with %zu bytes of no whole sample", left)
                : FU_OK;
}

/* The samples' order: by time, then CPU (a CPU's own samples have distinct times). */
static int logged_order(const void *a, const void *b)
{
    const fu_bpf_logged *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->cpu < y->cpu ? -1 : x->cpu > y->cpu;
}

void fu_bpf_log_sort(fu_bpf_log *log)
{
    size_t n = fu_bpf_log_sample_count(log);
    if (n > 1)
        qsort(log->samples.data, n, sizeof(fu_bpf_logged), logged_order);
}

uint32_t fu_bpf_log_stack_count(const fu_bpf_log *log)
{
    return (uint32_t)(log->stacks.len / sizeof(fu_bpf_stack));
}

const fu_bpf_stack *fu_bpf_log_stack(const fu_bpf_log *log, uint32_t id)
{
    return (const fu_bpf_stack *)(const void *)log->stacks.data + id;
}

uint64_t fu_bpf_log_stack_samples(const fu_bpf_log *log, uint32_t id)
{
    return ((const uint64_t *)(const void *)log->counts.data)[id];
}

size_t fu_bpf_log_sample_count(const fu_bpf_log *log)
{
    return log->samples.len / sizeof(fu_bpf_logged);
}

const fu_bpf_logged *fu_bpf_log_samples(const fu_bpf_log *log)
{
    return (const fu_bpf_logged *)(const void *)log->samples.data;
}

fu_text fu_bpf_log_comm(const fu_bpf_log *log, uint32_t id)
{
    const char *name = (const char *)log->comms.data + (size_t)id * COMM_BYTES;
    const char *end = memchr(name, 0, COMM_BYTES);
    return (fu_text){name, end ? (size_t)(end - name) : COMM_BYTES};
}

void fu_bpf_log_free(fu_bpf_log *log)
{
    free(log->stacks.data);
    free(log->counts.data);
    free(log->comms.data);
    free(log->samples.data);
    fu_intern_free(&log->stack_index);
    fu_intern_free(&log->comm_index);
    memset(log, 0, sizeof *log);
}

fu_status fu_bpf_log_perf_script(const fu_bpf_log *log, const fu_text *blocks, uint32_t block_count, fu_text event,
                                 fu_sink_fn sink, void *context, fu_error *err)
{
    fu_buffer out = {0};
    bool nomem = false, sunk = true;
    const fu_bpf_logged *samples = fu_bpf_log_samples(log);
    size_t n = fu_bpf_log_sample_count(log);
    for (size_t i = 0; !nomem && sunk && i < n; i++) {
        const fu_bpf_logged *s = &samples[i];
        if (s->stack >= block_count) {
            free(out.data);
            return fu_fail(err, FU_ERR_INVALID, "sample %zu's stack %u has no lines (%u stacks)", i, s->stack,
                           block_count);
        }
        fu_text comm = fu_bpf_log_comm(log, s->comm), block = blocks[s->stack];
        /* the head, ": " event ": \n" (perf_script.c fu_unwound_render), the lines, a blank line */
        if (!fu_buffer_reserve(&out, comm.len + FU_PERF_SCRIPT_HEAD_MAX + event.len + 5 + block.len + 1)) {
            nomem = true;
            break;
        }
        fu_perf_script_put_head(&out, comm.data, comm.len, s->tid, s->time);
        fu_put(&out, ": ", 2);
        fu_put(&out, event.data, event.len);
        fu_put(&out, ": \n", 3);
        fu_put(&out, block.data, block.len);
        fu_put(&out, "\n", 1);
        sunk = fu_sink_flush(&out, sink, context, false);
    }
    return fu_sink_finish(&out, sink, context, nomem, sunk, n, "BPF samples", err);
}

fu_status fu_bpf_log_profile(const fu_bpf_log *log, const fu_bpf_named_stack *named, uint32_t named_count,
                             double interval_ms, fu_profile *p, fu_error *err)
{
    const fu_bpf_logged *samples = fu_bpf_log_samples(log);
    size_t n = fu_bpf_log_sample_count(log);
    for (size_t i = 0; i < n; i++) {
        const fu_bpf_logged *s = &samples[i];
        if (s->stack >= named_count)
            return fu_fail(err, FU_ERR_INVALID, "sample %zu's stack %u has no names (%u stacks)", i, s->stack,
                           named_count);
        const fu_bpf_named_stack *stack = &named[s->stack];
        fu_profile_stack one = {.pid = (int32_t)fu_bpf_log_stack(log, s->stack)->pid, .tid = (int32_t)s->tid,
                                .comm = fu_bpf_log_comm(log, s->comm), .outcome = stack->outcome,
                                .frames = stack->frames, .frame_count = stack->frame_count, .count = 1,
                                .time = s->time, .interval_ms = interval_ms};
        fu_status st = fu_profile_add_stack(p, &one, err);
        if (st != FU_OK)
            return st;
    }
    return FU_OK;
}
