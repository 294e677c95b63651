/* perf_data: read a `perf record` recording (file mode and pipe mode) into arrays the walker uses.
 *
 * Sources: tools/perf/Documentation/perf.data-file-format.txt, include/uapi/linux/perf_event.h
 * (record layouts), tools/perf/util/evsel.c (evsel__parse_sample: the order of the sample fields,
 * perf_evsel__parse_id_sample: the sample_id trailer, __evsel__calc_id_pos/_is_pos: where the id
 * sits), tools/perf/util/session.c (framing of the user records, PERF_RECORD_COMPRESSED).
 *
 * Every byte goes through a fu_cursor cut to the record (or section) being decoded, or is loaded
 * plainly where the span of fixed-size fields was checked against the record first (the sample_id
 * trailer), so a bad length cannot read into the next record. Loops are bounded by the bytes they
 * consume: a record is at least 8 bytes, a count is checked against the bytes left before anything
 * is read.
 *
 * Passes:
 *   1. framing: walk the data section record by record, checking every size; feed the payload of each
 *      PERF_RECORD_COMPRESSED to one zstd stream (perf record -z compresses with ZSTD_compressStream
 *      + ZSTD_flushStream into consecutive records and never ends the frame, and perf's reader keeps
 *      the unconsumed tail of one record's output for the next: session.c, decomp_last_rem), so the
 *      decompressed records form one stream and a record may straddle two COMPRESSED records.
 *   2. decoding: walk again; at the k-th COMPRESSED record decode the complete records of the stream
 *      that its output completed. The decompressed buffer no longer moves, so samples point into it.
 *   3. ordering: a stable merge sort of the event index by time (see perf_data.h), then the samples
 *      array is permuted into that order.
 */
#define _GNU_SOURCE /* mremap */
#include "perf_data.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "mapped_file.h"

#define PERF_MAGIC2 0x32454c4946524550ull      /* "PERFILE2" read little-endian */
#define PERF_MAGIC2_SWAPPED 0x50455246494c4532ull /* a big-endian recording */
#define PERF_MAGIC1 0x454c494646524550ull      /* "PERFFILE": the version-1 format */
#define PIPE_HEADER_SIZE 16
#define FILE_HEADER_SIZE 104                   /* struct perf_file_header with adds_features */
#define FILE_HEADER_SIZE_OLD 72                /* without the feature bitmap (perf still reads it) */
#define ATTR_SIZE_VER0 64
#define ATTR_KNOWN_SIZE 136                    /* through config3 (PERF_ATTR_SIZE_VER8) */
#define FILE_SECTION_SIZE 16                   /* struct perf_file_section */
#define BUILD_ID_RECORD_MIN 36                 /* header, pid, build_id[24]: the filename follows */
#define EVENT_UPDATE_NAME 2                    /* PERF_EVENT_UPDATE__NAME */
/* Smallest block of the arena for realigned callchains: one block serves a few hundred samples. */
#define ALIGNED_BLOCK_WORDS 8192

struct fu_perf_id_entry {
    uint64_t id;
    uint32_t attr;  /* attr index + 1; 0 marks an empty slot */
};

/* Where a record came from, for messages and for fu_perf_sample.file_offset. */
typedef struct origin {
    uint64_t file_offset;   /* of the record, or of the COMPRESSED record that completed it */
    bool compressed;
    uint64_t stream_offset; /* in the decompressed stream */
} origin;

typedef struct parser {
    fu_perf_data *pd;
    fu_error *err;
    uint64_t max_decompressed;
    uint64_t last_time;     /* sort key carried to records without a time */
    bool cut_file;          /* file mode, cut short: pd->cut.unterminated or .truncated */
    uint64_t position;      /* of the record being decoded (fu_perf_event.position) */
    bool copy_header_records; /* a stream over a pipe: header records are kept as copies */
    bool executable_mmaps_only; /* a stream for unwinding: MMAP2 of data is not kept (see below) */
    /* pass 1 output: decompressed stream end after each COMPRESSED record */
    uint64_t *compressed_ends;
    size_t compressed_count, compressed_cap;
} parser;

/* ---- errors ---------------------------------------------------------------------------------- */

static fu_status perf_fail(parser *p, const origin *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static fu_status perf_fail(parser *p, const origin *at, const char *fmt, ...)
{
    fu_error *err = p->err;
    int n = 0;
    if (at && at->compressed)
        n = snprintf(err->message, sizeof err->message,
                     "perf.data+0x%llx (COMPRESSED stream+0x%llx): ", (unsigned long long)at->file_offset,
                     (unsigned long long)at->stream_offset);
    else if (at)
        n = snprintf(err->message, sizeof err->message, "perf.data+0x%llx: ",
                     (unsigned long long)at->file_offset);
    if (n < 0 || (size_t)n >= sizeof err->message)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + n, sizeof err->message - (size_t)n, fmt, ap);
    va_end(ap);
    err->status = FU_ERR_PERF_DATA;
    return FU_ERR_PERF_DATA;
}

static fu_status perf_nomem(parser *p)
{
    snprintf(p->err->message, sizeof p->err->message, "out of memory reading perf.data");
    p->err->status = FU_ERR_NOMEM;
    return FU_ERR_NOMEM;
}

static origin at_file(uint64_t offset)
{
    origin o = {offset, false, 0};
    return o;
}

/* ---- small helpers ---------------------------------------------------------------------------- */

static bool grow(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return false;
        n *= 2;
    }
    void *q = realloc(*array, n * elem);
    if (!q)
        return false;
    *array = q;
    *cap = n;
    return true;
}

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static unsigned popcount64(uint64_t v) { return (unsigned)__builtin_popcountll(v); }

/* Length of a NUL-padded string of at most `max` bytes (bounded scan). */
static uint32_t bounded_strlen(const uint8_t *s, uint64_t max)
{
    if (max > FU_PERF_MAX_STRING)
        max = FU_PERF_MAX_STRING;
    const uint8_t *z = memchr(s, 0, (size_t)max);
    return (uint32_t)(z ? (uint64_t)(z - s) : max);
}

/* A section [offset, offset + size) must lie inside the file. */
static bool section_ok(const fu_perf_data *pd, uint64_t offset, uint64_t size)
{
    return offset <= pd->size && size <= pd->size - offset;
}

const char *fu_perf_record_name(uint32_t type)
{
    static const char *const kernel[] = {
        NULL, "MMAP", "LOST", "COMM", "EXIT", "THROTTLE", "UNTHROTTLE", "FORK", "READ", "SAMPLE",
        "MMAP2", "AUX", "ITRACE_START", "LOST_SAMPLES", "SWITCH", "SWITCH_CPU_WIDE", "NAMESPACES",
        "KSYMBOL", "BPF_EVENT", "CGROUP", "TEXT_POKE", "AUX_OUTPUT_HW_ID"};
    static const char *const user[] = {
        "HEADER_ATTR", "HEADER_EVENT_TYPE", "HEADER_TRACING_DATA", "HEADER_BUILD_ID", "FINISHED_ROUND",
        "ID_INDEX", "AUXTRACE_INFO", "AUXTRACE", "AUXTRACE_ERROR", "THREAD_MAP", "CPU_MAP",
        "STAT_CONFIG", "STAT", "STAT_ROUND", "EVENT_UPDATE", "TIME_CONV", "HEADER_FEATURE", "COMPRESSED",
        "FINISHED_INIT"};
    if (type < sizeof kernel / sizeof kernel[0] && kernel[type])
        return kernel[type];
    if (type >= 64 && type - 64 < sizeof user / sizeof user[0])
        return user[type - 64];
    return "unknown";
}

/* ---- attrs ------------------------------------------------------------------------------------- */

/* Decode a perf_event_attr at the cursor (which must hold at least its stated size). */
static fu_status read_attr(parser *p, fu_cursor *c, const origin *at, fu_perf_attr *out)
{
    memset(out, 0, sizeof *out);
    if (fu_cursor_left(c) < 8)
        return perf_fail(p, at, "perf_event_attr truncated: 0x%zx bytes, at least 0x8 needed",
                         fu_cursor_left(c));
    uint32_t size = (uint32_t)(c->pos[4] | c->pos[5] << 8 | c->pos[6] << 16 | (uint32_t)c->pos[7] << 24);
    if (size == 0)
        size = ATTR_SIZE_VER0; /* perf: "sz == 0" means the first published layout */
    if (size < ATTR_SIZE_VER0)
        return perf_fail(p, at, "perf_event_attr size 0x%x is below PERF_ATTR_SIZE_VER0 (0x40)", size);
    if (size > FU_PERF_MAX_ATTR_SIZE)
        return perf_fail(p, at, "perf_event_attr size 0x%x exceeds the limit 0x%x", size,
                         FU_PERF_MAX_ATTR_SIZE);
    if (size > fu_cursor_left(c))
        return perf_fail(p, at, "perf_event_attr size 0x%x overruns its space (0x%zx bytes)", size,
                         fu_cursor_left(c));
    uint8_t raw[ATTR_KNOWN_SIZE];
    memset(raw, 0, sizeof raw);
    memcpy(raw, c->pos, size < sizeof raw ? size : sizeof raw);
    fu_cursor_skip(c, size);
    fu_cursor r = fu_cursor_make(raw, raw, raw + sizeof raw);
    out->type = (uint32_t)fu_read_uint(&r, 4);
    out->size = (uint32_t)fu_read_uint(&r, 4);
    out->size = size;
    out->config = fu_read_uint(&r, 8);
    out->sample_period = fu_read_uint(&r, 8);
    out->sample_type = fu_read_uint(&r, 8);
    out->read_format = fu_read_uint(&r, 8);
    out->flags = fu_read_uint(&r, 8);
    out->wakeup_events = (uint32_t)fu_read_uint(&r, 4);
    out->bp_type = (uint32_t)fu_read_uint(&r, 4);
    out->config1 = fu_read_uint(&r, 8);
    out->config2 = fu_read_uint(&r, 8);
    out->branch_sample_type = fu_read_uint(&r, 8);
    out->sample_regs_user = fu_read_uint(&r, 8);
    out->sample_stack_user = (uint32_t)fu_read_uint(&r, 4);
    out->clockid = (int32_t)fu_read_uint(&r, 4);
    out->sample_regs_intr = fu_read_uint(&r, 8);
    out->aux_watermark = (uint32_t)fu_read_uint(&r, 4);
    out->sample_max_stack = (uint16_t)fu_read_uint(&r, 2);
    fu_read_uint(&r, 2);
    out->aux_sample_size = (uint32_t)fu_read_uint(&r, 4);
    fu_read_uint(&r, 4);
    out->sig_data = fu_read_uint(&r, 8);
    out->config3 = fu_read_uint(&r, 8);
    out->freq = (out->flags >> 10) & 1;          /* perf_event_attr bit-field order */
    out->sample_id_all = (out->flags >> 18) & 1;
    out->file_offset = at->file_offset;
    return FU_OK;
}

static fu_status index_attr_ids(parser *p, uint32_t attr_index);

static fu_status add_attr(parser *p, const fu_perf_attr *attr)
{
    fu_perf_data *pd = p->pd;
    if (pd->attr_count >= FU_PERF_MAX_ATTRS) {
        origin at = at_file(attr->file_offset);
        return perf_fail(p, &at, "more than %d attrs (events)", FU_PERF_MAX_ATTRS);
    }
    size_t cap = pd->attr_cap;
    if (!grow((void **)&pd->attrs, &cap, (size_t)pd->attr_count + 1, sizeof *pd->attrs))
        return perf_nomem(p);
    pd->attr_cap = (uint32_t)cap;
    pd->attrs[pd->attr_count++] = *attr;
    fu_status s = index_attr_ids(p, pd->attr_count - 1);
    if (s != FU_OK)
        pd->attr_count--; /* the caller still owns attr->ids */
    return s;
}

/* Copy `count` ids (u64, possibly unaligned) from the cursor into attr->ids. */
static fu_status set_attr_ids(parser *p, fu_perf_attr *attr, fu_cursor *c, uint64_t count)
{
    free(attr->ids);
    attr->ids = NULL;
    attr->id_count = 0;
    if (count == 0)
        return FU_OK;
    if (count > fu_cursor_left(c) / 8)
        return FU_ERR_PERF_DATA; /* callers check the room first */
    attr->ids = malloc((size_t)count * 8);
    if (!attr->ids)
        return perf_nomem(p);
    for (uint64_t i = 0; i < count; i++)
        attr->ids[i] = fu_read_uint(c, 8);
    attr->id_count = count;
    return FU_OK;
}

static size_t id_slot(uint64_t id, size_t cap)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* Insert without overwriting: the first attr listing an id keeps it. */
static void id_insert(struct fu_perf_id_entry *table, size_t cap, uint64_t id, uint32_t attr, size_t *count)
{
    for (size_t i = id_slot(id, cap);; i = (i + 1) & (cap - 1)) {
        if (table[i].attr == 0) {
            table[i].id = id;
            table[i].attr = attr + 1;
            (*count)++;
            return;
        }
        if (table[i].id == id)
            return;
    }
}

/* Add an attr's ids to the lookup table, growing it to keep the load at most 1/2. Total work is
 * linear in the number of ids, however attrs and samples interleave in a pipe-mode stream. */
static fu_status index_attr_ids(parser *p, uint32_t attr_index)
{
    fu_perf_data *pd = p->pd;
    const fu_perf_attr *attr = &pd->attrs[attr_index];
    if (attr->id_count > FU_PERF_MAX_IDS - pd->id_map_count) {
        origin at = at_file(attr->file_offset);
        return perf_fail(p, &at, "more than %u event ids in all attrs", FU_PERF_MAX_IDS);
    }
    size_t need = (pd->id_map_count + (size_t)attr->id_count) * 2;
    if (need > pd->id_map_cap) {
        size_t cap = pd->id_map_cap ? pd->id_map_cap : 64;
        while (cap < need)
            cap *= 2;
        struct fu_perf_id_entry *table = calloc(cap, sizeof *table);
        if (!table)
            return perf_nomem(p);
        size_t count = 0;
        for (size_t i = 0; i < pd->id_map_cap; i++)
            if (pd->id_map[i].attr)
                id_insert(table, cap, pd->id_map[i].id, pd->id_map[i].attr - 1, &count);
        free(pd->id_map);
        pd->id_map = table;
        pd->id_map_cap = cap;
        pd->id_map_count = count;
    }
    for (uint64_t j = 0; j < attr->id_count; j++)
        id_insert(pd->id_map, pd->id_map_cap, attr->ids[j], attr_index, &pd->id_map_count);
    return FU_OK;
}

static bool lookup_id(const fu_perf_data *pd, uint64_t id, uint32_t *attr)
{
    if (!pd->id_map_cap)
        return false;
    for (size_t i = id_slot(id, pd->id_map_cap);; i = (i + 1) & (pd->id_map_cap - 1)) {
        if (pd->id_map[i].attr == 0)
            return false;
        if (pd->id_map[i].id == id) {
            *attr = pd->id_map[i].attr - 1;
            return true;
        }
    }
}

/* Which attr a record belongs to (perf's evlist__event2evsel): the only one; the first for side-band
 * records when the first attr has no sample_id_all; otherwise the id at PERF_SAMPLE_IDENTIFIER's or
 * PERF_SAMPLE_ID's position (computed from the first attr, as perf's evlist->id_pos / is_pos), where
 * an id of 0 (synthesized records) also means the first attr. `body`/`body_size` exclude the header. */
static fu_status record_attr(parser *p, const origin *at, uint32_t type, const uint8_t *body,
                             uint64_t body_size, uint32_t *attr_index)
{
    fu_perf_data *pd = p->pd;
    if (pd->attr_count == 0)
        return perf_fail(p, at, "%s record before any attr", fu_perf_record_name(type));
    *attr_index = 0;
    if (pd->attr_count == 1)
        return FU_OK;
    const fu_perf_attr *first = &pd->attrs[0];
    uint64_t st = first->sample_type;
    uint64_t words = body_size / 8;
    uint64_t word;
    if (type == FU_PERF_RECORD_SAMPLE) {
        uint64_t pos;
        if (st & FU_PERF_SAMPLE_IDENTIFIER)
            pos = 0;
        else if (st & FU_PERF_SAMPLE_ID)
            pos = !!(st & FU_PERF_SAMPLE_IP) + !!(st & FU_PERF_SAMPLE_TID) + !!(st & FU_PERF_SAMPLE_TIME) +
                  !!(st & FU_PERF_SAMPLE_ADDR);
        else
            return perf_fail(p, at, "%u attrs but samples carry no id (sample_type 0x%llx has neither "
                             "PERF_SAMPLE_IDENTIFIER nor PERF_SAMPLE_ID)", pd->attr_count,
                             (unsigned long long)st);
        if (pos >= words)
            return perf_fail(p, at, "SAMPLE record of 0x%llx bytes is too short to hold its id",
                             (unsigned long long)body_size + 8);
        word = pos;
    } else {
        if (!first->sample_id_all)
            return FU_OK;
        uint64_t pos;
        if (st & FU_PERF_SAMPLE_IDENTIFIER)
            pos = 1;
        else if (st & FU_PERF_SAMPLE_ID)
            pos = 1 + !!(st & FU_PERF_SAMPLE_CPU) + !!(st & FU_PERF_SAMPLE_STREAM_ID);
        else
            return perf_fail(p, at, "%u attrs but records carry no id (sample_type 0x%llx has neither "
                             "PERF_SAMPLE_IDENTIFIER nor PERF_SAMPLE_ID)", pd->attr_count,
                             (unsigned long long)st);
        if (pos > words)
            return perf_fail(p, at, "%s record of 0x%llx bytes is too short to hold its sample id",
                             fu_perf_record_name(type), (unsigned long long)body_size + 8);
        word = words - pos;
    }
    uint64_t id = load_u64(body + word * 8);
    if (id == 0)
        return FU_OK;
    if (!lookup_id(pd, id, attr_index))
        return perf_fail(p, at, "%s record's event id 0x%llx matches no attr", fu_perf_record_name(type),
                         (unsigned long long)id);
    return FU_OK;
}

/* ---- features ---------------------------------------------------------------------------------- */

/* struct perf_header_string: u32 len; char str[len] (NUL-padded). */
static bool read_header_string(fu_cursor *c, fu_perf_string *out)
{
    uint64_t len = fu_read_uint(c, 4);
    if (c->failed || len > fu_cursor_left(c)) {
        c->failed = true;
        return false;
    }
    out->data = (const char *)c->pos;
    out->len = bounded_strlen(c->pos, len);
    fu_cursor_skip(c, len);
    return true;
}

static fu_status parse_cmdline(parser *p, fu_cursor *c, const origin *at)
{
    fu_perf_data *pd = p->pd;
    uint64_t nr = fu_read_uint(c, 4);
    if (c->failed || nr > fu_cursor_left(c) / 4)
        return perf_fail(p, at, "HEADER_CMDLINE: 0x%llx strings do not fit in 0x%zx bytes",
                         (unsigned long long)nr, fu_cursor_left(c));
    free(pd->cmdline);
    pd->cmdline = NULL;
    pd->cmdline_count = 0;
    if (nr == 0)
        return FU_OK;
    pd->cmdline = calloc((size_t)nr, sizeof *pd->cmdline);
    if (!pd->cmdline)
        return perf_nomem(p);
    for (uint64_t i = 0; i < nr; i++) {
        if (!read_header_string(c, &pd->cmdline[i]))
            return perf_fail(p, at, "HEADER_CMDLINE: string %llu of %llu overruns the section",
                             (unsigned long long)i, (unsigned long long)nr);
        pd->cmdline_count = (uint32_t)(i + 1);
    }
    return FU_OK;
}

static fu_status set_attr_name(parser *p, fu_perf_attr *attr, const char *name, uint32_t len)
{
    char *copy = malloc((size_t)len + 1);
    if (!copy)
        return perf_nomem(p);
    memcpy(copy, name, len);
    copy[len] = 0;
    free(attr->name);
    attr->name = copy;
    return FU_OK;
}

/* HEADER_EVENT_DESC: u32 nr, u32 attr_size, nr x {attr, u32 nr_ids, perf_header_string name,
 * u64 ids[nr_ids]}. The i-th description names the i-th attr (perf: evsel->core.idx == event->idx). */
static fu_status parse_event_desc(parser *p, fu_cursor *c, const origin *at)
{
    fu_perf_data *pd = p->pd;
    uint64_t nr = fu_read_uint(c, 4);
    uint64_t attr_size = fu_read_uint(c, 4);
    if (c->failed)
        return perf_fail(p, at, "HEADER_EVENT_DESC truncated");
    if (nr > FU_PERF_MAX_ATTRS)
        return perf_fail(p, at, "HEADER_EVENT_DESC: 0x%llx events exceed the limit %d", (unsigned long long)nr,
                         FU_PERF_MAX_ATTRS);
    if (attr_size < ATTR_SIZE_VER0 || attr_size > FU_PERF_MAX_ATTR_SIZE)
        return perf_fail(p, at, "HEADER_EVENT_DESC: attr size 0x%llx out of range", (unsigned long long)attr_size);
    for (uint64_t i = 0; i < nr; i++) {
        if (attr_size > fu_cursor_left(c))
            return perf_fail(p, at, "HEADER_EVENT_DESC: event %llu overruns the section", (unsigned long long)i);
        fu_cursor_skip(c, attr_size);
        uint64_t nr_ids = fu_read_uint(c, 4);
        fu_perf_string name;
        if (c->failed || !read_header_string(c, &name) || nr_ids > fu_cursor_left(c) / 8)
            return perf_fail(p, at, "HEADER_EVENT_DESC: event %llu overruns the section", (unsigned long long)i);
        fu_cursor_skip(c, nr_ids * 8);
        if (i < pd->attr_count) {
            fu_status s = set_attr_name(p, &pd->attrs[i], name.data, name.len);
            if (s != FU_OK)
                return s;
        }
    }
    return FU_OK;
}

/* One build-id record (struct perf_record_header_build_id): header, s32 pid, u8 build_id[24] of
 * which the first 20 bytes are the id and byte 20 its size when misc has
 * PERF_RECORD_MISC_BUILD_ID_SIZE, then the NUL-padded file name. */
static fu_status add_build_id(parser *p, const uint8_t *rec, uint64_t size, uint16_t misc, const origin *at)
{
    fu_perf_data *pd = p->pd;
    if (size < BUILD_ID_RECORD_MIN)
        return perf_fail(p, at, "build-id record of 0x%llx bytes is shorter than 0x%x",
                         (unsigned long long)size, BUILD_ID_RECORD_MIN);
    if (!grow((void **)&pd->build_ids, &pd->build_id_cap, pd->build_id_count + 1, sizeof *pd->build_ids))
        return perf_nomem(p);
    fu_perf_build_id *b = &pd->build_ids[pd->build_id_count];
    memset(b, 0, sizeof *b);
    b->file_offset = at->file_offset;
    b->misc = misc;
    uint32_t pid;
    memcpy(&pid, rec + 8, 4);
    b->pid = (int32_t)pid;
    memcpy(b->build_id, rec + 12, 20);
    b->size = 20;
    if (misc & FU_PERF_RECORD_MISC_BUILD_ID_SIZE) {
        b->size = rec[32];
        if (b->size > 20)
            return perf_fail(p, at, "build-id size %u exceeds 20", b->size);
    }
    b->filename = (const char *)rec + BUILD_ID_RECORD_MIN;
    b->filename_len = bounded_strlen(rec + BUILD_ID_RECORD_MIN, size - BUILD_ID_RECORD_MIN);
    pd->build_id_count++;
    return FU_OK;
}

static fu_status parse_build_ids(parser *p, fu_cursor *c, uint64_t section_offset)
{
    while (fu_cursor_left(c) > 0) {
        origin at = at_file(section_offset + fu_cursor_offset(c));
        if (fu_cursor_left(c) < 8)
            return perf_fail(p, &at, "HEADER_BUILD_ID: 0x%zx stray bytes at the end of the section",
                             fu_cursor_left(c));
        uint16_t misc = (uint16_t)(c->pos[4] | c->pos[5] << 8);
        uint16_t size = (uint16_t)(c->pos[6] | c->pos[7] << 8);
        if (size < BUILD_ID_RECORD_MIN || size > fu_cursor_left(c))
            return perf_fail(p, &at, "HEADER_BUILD_ID: record size 0x%x is below 0x%x or overruns the "
                             "section (0x%zx bytes left)", size, BUILD_ID_RECORD_MIN, fu_cursor_left(c));
        fu_status s = add_build_id(p, c->pos, size, misc, &at);
        if (s != FU_OK)
            return s;
        fu_cursor_skip(c, size);
    }
    return FU_OK;
}

static fu_status parse_compressed_feature(parser *p, fu_cursor *c, const origin *at)
{
    fu_read_uint(c, 4); /* version */
    p->pd->compression_type = (uint32_t)fu_read_uint(c, 4);
    p->pd->compression_level = (uint32_t)fu_read_uint(c, 4);
    fu_read_uint(c, 4); /* ratio */
    p->pd->compression_mmap_len = (uint32_t)fu_read_uint(c, 4);
    if (c->failed)
        return perf_fail(p, at, "HEADER_COMPRESSED truncated");
    return FU_OK;
}

/* The times of the first and last samples, as perf record saw them (perf's --time percentages are
 * of the span between them). */
static fu_status parse_sample_time(parser *p, fu_cursor *c, const origin *at)
{
    uint64_t first = fu_read_uint(c, 8), last = fu_read_uint(c, 8);
    if (c->failed)
        return perf_fail(p, at, "HEADER_SAMPLE_TIME truncated");
    p->pd->first_sample_time = first;
    p->pd->last_sample_time = last;
    return FU_OK;
}

/* One feature section (file mode) or HEADER_FEATURE payload (pipe mode); others are skipped. */
static fu_status parse_feature(parser *p, unsigned feature, fu_cursor *c, uint64_t section_offset)
{
    origin at = at_file(section_offset);
    switch (feature) {
    case FU_PERF_HEADER_BUILD_ID: return parse_build_ids(p, c, section_offset);
    case FU_PERF_HEADER_CMDLINE: return parse_cmdline(p, c, &at);
    case FU_PERF_HEADER_EVENT_DESC: return parse_event_desc(p, c, &at);
    case FU_PERF_HEADER_COMPRESSED: return parse_compressed_feature(p, c, &at);
    case FU_PERF_HEADER_SAMPLE_TIME: return parse_sample_time(p, c, &at);
    default: return FU_OK;
    }
}

/* ---- side-band records ---------------------------------------------------------------------------- */

static uint64_t sample_id_size(const fu_perf_attr *attr)
{
    if (!attr->sample_id_all)
        return 0;
    uint64_t st = attr->sample_type;
    return 8 * (uint64_t)(!!(st & FU_PERF_SAMPLE_TID) + !!(st & FU_PERF_SAMPLE_TIME) + !!(st & FU_PERF_SAMPLE_ID) +
                          !!(st & FU_PERF_SAMPLE_STREAM_ID) + !!(st & FU_PERF_SAMPLE_CPU) +
                          !!(st & FU_PERF_SAMPLE_IDENTIFIER));
}

/* Find the record's attr and check that its `fixed` bytes of fields and its sample_id trailer (struct
 * sample_id, at the end of the record's u64 words as perf_evsel__parse_id_sample reads it) fit in
 * its `size`: the body ends at *body_end, where the trailer starts. */
static fu_status sample_id_span(parser *p, const origin *at, uint32_t type, const uint8_t *rec, uint64_t size,
                                uint64_t fixed, uint32_t *attr_index, uint64_t *body_end)
{
    *attr_index = 0;
    fu_status s = record_attr(p, at, type, rec + 8, size - 8, attr_index);
    if (s != FU_OK)
        return s;
    uint64_t words_end = 8 + ((size - 8) / 8) * 8;
    uint64_t trailer = sample_id_size(&p->pd->attrs[*attr_index]);
    if (fixed > size || trailer > words_end || words_end - trailer < fixed)
        return perf_fail(p, at, "%s record of 0x%llx bytes is too short for its 0x%llx bytes of fields "
                         "and 0x%llx bytes of sample_id", fu_perf_record_name(type), (unsigned long long)size,
                         (unsigned long long)fixed - 8, (unsigned long long)trailer);
    *body_end = words_end - trailer;
    return FU_OK;
}

/* Decode the sample_id trailer at `w`, whose span sample_id_span checked: plain loads (perf.data is
 * little-endian as the host; big-endian files are refused), one u64 per flag sample_id_size counts. */
static void read_sample_id(const fu_perf_attr *attr, uint32_t attr_index, const uint8_t *w, fu_perf_sample_id *sid)
{
    *sid = (fu_perf_sample_id){.pid = UINT32_MAX, .tid = UINT32_MAX, .cpu = UINT32_MAX, .attr_index = attr_index};
    if (!attr->sample_id_all)
        return;
    uint64_t st = attr->sample_type;
    sid->present = st & (FU_PERF_SAMPLE_TID | FU_PERF_SAMPLE_TIME | FU_PERF_SAMPLE_ID | FU_PERF_SAMPLE_STREAM_ID |
                         FU_PERF_SAMPLE_CPU | FU_PERF_SAMPLE_IDENTIFIER);
    if (st & FU_PERF_SAMPLE_TID) {
        uint64_t pid_tid = load_u64(w);
        sid->pid = (uint32_t)pid_tid;
        sid->tid = (uint32_t)(pid_tid >> 32);
        w += 8;
    }
    if (st & FU_PERF_SAMPLE_TIME) {
        sid->time = load_u64(w);
        w += 8;
    }
    if (st & FU_PERF_SAMPLE_ID) {
        sid->id = load_u64(w);
        w += 8;
    }
    if (st & FU_PERF_SAMPLE_STREAM_ID) {
        sid->stream_id = load_u64(w);
        w += 8;
    }
    if (st & FU_PERF_SAMPLE_CPU) {
        sid->cpu = (uint32_t)load_u64(w); /* cpu, then a u32 of padding */
        w += 8;
    }
    if (st & FU_PERF_SAMPLE_IDENTIFIER)
        sid->id = load_u64(w);
}

/* Find the record's attr, decode its sample_id trailer and return the size of the body before it. */
static fu_status side_band(parser *p, const origin *at, uint32_t type, const uint8_t *rec, uint64_t size,
                           uint64_t fixed, fu_perf_sample_id *sid, uint64_t *body_end)
{
    uint32_t attr_index;
    fu_status s = sample_id_span(p, at, type, rec, size, fixed, &attr_index, body_end);
    if (s != FU_OK)
        return s;
    read_sample_id(&p->pd->attrs[attr_index], attr_index, rec + *body_end, sid);
    return FU_OK;
}

static fu_status add_event(parser *p, uint8_t kind, uint32_t index, bool has_time, uint64_t time)
{
    fu_perf_data *pd = p->pd;
    if (!grow((void **)&pd->events, &pd->event_cap, pd->event_count + 1, sizeof *pd->events))
        return perf_nomem(p);
    if (has_time)
        p->last_time = time;
    fu_perf_event *e = &pd->events[pd->event_count++];
    e->time = p->last_time;
    e->position = p->position;
    e->index = index;
    e->kind = kind;
    return FU_OK;
}

static fu_status parse_mmap(parser *p, const origin *at, uint32_t type, uint16_t misc, const uint8_t *rec,
                            uint64_t size)
{
    fu_perf_data *pd = p->pd;
    bool is_mmap2 = type == FU_PERF_RECORD_MMAP2;
    uint64_t fixed = is_mmap2 ? 72 : 40;
    uint32_t attr_index;
    uint64_t body_end;
    fu_status s = sample_id_span(p, at, type, rec, size, fixed, &attr_index, &body_end);
    if (s != FU_OK)
        return s;
    const fu_perf_attr *attr = &pd->attrs[attr_index];
    if (p->executable_mmaps_only && is_mmap2) {
        /* prot at +64 (after pid, tid, start, len, pgoff and the 24 bytes of maj/min/ino or
         * build-id): a mapping without PROT_EXEC is nothing the replay keeps, and a python
         * recording has ~400k of them (its allocator's arenas); its time still orders what follows,
         * so only that is read of its sample_id */
        uint32_t prot;
        memcpy(&prot, rec + 64, 4);
        if (!(prot & 4 /* PROT_EXEC */)) {
            if (attr->sample_id_all && (attr->sample_type & FU_PERF_SAMPLE_TIME))
                p->last_time = load_u64(rec + body_end + 8 * !!(attr->sample_type & FU_PERF_SAMPLE_TID));
            pd->stats.skipped_records++;
            return FU_OK;
        }
    }
    fu_perf_sample_id sid;
    read_sample_id(attr, attr_index, rec + body_end, &sid);
    if (pd->mmap_count >= UINT32_MAX)
        return perf_fail(p, at, "more than 2^32 MMAP records");
    if (!grow((void **)&pd->mmaps, &pd->mmap_cap, pd->mmap_count + 1, sizeof *pd->mmaps))
        return perf_nomem(p);
    fu_perf_mmap *m = &pd->mmaps[pd->mmap_count];
    memset(m, 0, sizeof *m);
    fu_cursor c = fu_cursor_make(rec, rec + 8, rec + body_end);
    m->file_offset = at->file_offset;
    m->misc = misc;
    m->is_mmap2 = is_mmap2;
    m->pid = (uint32_t)fu_read_uint(&c, 4);
    m->tid = (uint32_t)fu_read_uint(&c, 4);
    m->start = fu_read_uint(&c, 8);
    m->length = fu_read_uint(&c, 8);
    m->pgoff = fu_read_uint(&c, 8);
    if (is_mmap2) {
        if (misc & FU_PERF_RECORD_MISC_MMAP_BUILD_ID) {
            m->has_build_id = true;
            m->build_id_size = (uint8_t)fu_read_uint(&c, 1);
            fu_read_uint(&c, 1);
            fu_read_uint(&c, 2);
            memcpy(m->build_id, c.pos, 20);
            fu_cursor_skip(&c, 20);
            if (m->build_id_size > 20)
                return perf_fail(p, at, "MMAP2 build-id size %u exceeds 20", m->build_id_size);
        } else {
            m->maj = (uint32_t)fu_read_uint(&c, 4);
            m->min = (uint32_t)fu_read_uint(&c, 4);
            m->ino = fu_read_uint(&c, 8);
            m->ino_generation = fu_read_uint(&c, 8);
        }
        m->prot = (uint32_t)fu_read_uint(&c, 4);
        m->flags = (uint32_t)fu_read_uint(&c, 4);
    }
    m->filename = (const char *)c.pos;
    m->filename_len = bounded_strlen(c.pos, fu_cursor_left(&c));
    m->sample_id = sid;
    pd->mmap_count++;
    return add_event(p, FU_PERF_EVENT_MMAP, (uint32_t)(pd->mmap_count - 1),
                     (sid.present & FU_PERF_SAMPLE_TIME) != 0, sid.time);
}

static fu_status parse_comm(parser *p, const origin *at, uint16_t misc, const uint8_t *rec, uint64_t size)
{
    fu_perf_data *pd = p->pd;
    fu_perf_sample_id sid;
    uint64_t body_end;
    fu_status s = side_band(p, at, FU_PERF_RECORD_COMM, rec, size, 16, &sid, &body_end);
    if (s != FU_OK)
        return s;
    if (pd->comm_count >= UINT32_MAX)
        return perf_fail(p, at, "more than 2^32 COMM records");
    if (!grow((void **)&pd->comms, &pd->comm_cap, pd->comm_count + 1, sizeof *pd->comms))
        return perf_nomem(p);
    fu_perf_comm *m = &pd->comms[pd->comm_count];
    memset(m, 0, sizeof *m);
    fu_cursor c = fu_cursor_make(rec, rec + 8, rec + body_end);
    m->file_offset = at->file_offset;
    m->misc = misc;
    m->exec = (misc & FU_PERF_RECORD_MISC_COMM_EXEC) != 0;
    m->pid = (uint32_t)fu_read_uint(&c, 4);
    m->tid = (uint32_t)fu_read_uint(&c, 4);
    m->comm = (const char *)c.pos;
    m->comm_len = bounded_strlen(c.pos, fu_cursor_left(&c));
    m->sample_id = sid;
    pd->comm_count++;
    return add_event(p, FU_PERF_EVENT_COMM, (uint32_t)(pd->comm_count - 1),
                     (sid.present & FU_PERF_SAMPLE_TIME) != 0, sid.time);
}

static fu_status parse_task(parser *p, const origin *at, uint32_t type, uint16_t misc, const uint8_t *rec,
                            uint64_t size)
{
    fu_perf_data *pd = p->pd;
    fu_perf_sample_id sid;
    uint64_t body_end;
    fu_status s = side_band(p, at, type, rec, size, 32, &sid, &body_end);
    if (s != FU_OK)
        return s;
    if (pd->task_count >= UINT32_MAX)
        return perf_fail(p, at, "more than 2^32 FORK/EXIT records");
    if (!grow((void **)&pd->tasks, &pd->task_cap, pd->task_count + 1, sizeof *pd->tasks))
        return perf_nomem(p);
    fu_perf_task *t = &pd->tasks[pd->task_count];
    memset(t, 0, sizeof *t);
    fu_cursor c = fu_cursor_make(rec, rec + 8, rec + body_end);
    t->file_offset = at->file_offset;
    t->misc = misc;
    t->is_exit = type == FU_PERF_RECORD_EXIT;
    t->pid = (uint32_t)fu_read_uint(&c, 4);
    t->ppid = (uint32_t)fu_read_uint(&c, 4);
    t->tid = (uint32_t)fu_read_uint(&c, 4);
    t->ptid = (uint32_t)fu_read_uint(&c, 4);
    t->time = fu_read_uint(&c, 8);
    t->sample_id = sid;
    pd->task_count++;
    /* Without a sample_id time the record's own time field (same clock) orders it. */
    bool has = (sid.present & FU_PERF_SAMPLE_TIME) != 0;
    return add_event(p, t->is_exit ? FU_PERF_EVENT_EXIT : FU_PERF_EVENT_FORK, (uint32_t)(pd->task_count - 1),
                     true, has ? sid.time : t->time);
}

/* ---- samples -------------------------------------------------------------------------------------- */

static struct fu_perf_block *arena_block(fu_perf_data *pd, size_t words)
{
    struct fu_perf_block *b = pd->aligned;
    if (b && b->cap - b->used >= words)
        return b;
    size_t cap = words > ALIGNED_BLOCK_WORDS ? words : ALIGNED_BLOCK_WORDS;
    b = malloc(sizeof *b + cap * 8);
    if (!b)
        return NULL;
    b->next = pd->aligned;
    b->used = 0;
    b->cap = cap;
    pd->aligned = b;
    return b;
}

/* A u64 array that may sit at an unaligned address (pipe-mode HEADER_TRACING_DATA leaves later records
 * 4-byte aligned; a hostile size can leave them anywhere): point into the bytes when aligned, else
 * into an aligned copy, so the walker may index `const uint64_t *` without undefined behaviour. */
static const uint64_t *aligned_words(parser *p, const uint8_t *src, uint64_t count)
{
    if (count == 0)
        return NULL;
    if (((uintptr_t)src & 7) == 0)
        return (const uint64_t *)(const void *)src;
    struct fu_perf_block *b = arena_block(p->pd, (size_t)count);
    if (!b)
        return NULL;
    uint64_t *dst = b->words + b->used;
    memcpy(dst, src, (size_t)count * 8);
    b->used += (size_t)count;
    return dst;
}

/* Bytes left in the sample must cover `need`; the message names the field. */
#define SAMPLE_NEED(need, what)                                                                          \
    do {                                                                                                 \
        if ((uint64_t)(need) > fu_cursor_left(&c))                                                       \
            return perf_fail(p, at, "SAMPLE record of 0x%llx bytes (sample_type 0x%llx) ends inside %s: " \
                             "0x%llx bytes needed, 0x%zx left", (unsigned long long)size,              \
                             (unsigned long long)st, what, (unsigned long long)(need), fu_cursor_left(&c)); \
    } while (0)

/* A count whose entries of `unit` bytes must fit in what is left. */
#define SAMPLE_COUNT(count, unit, what)                                                                  \
    do {                                                                                                 \
        if ((uint64_t)(count) > fu_cursor_left(&c) / (unit))                                             \
            return perf_fail(p, at, "SAMPLE record: %s of 0x%llx entries overruns the record (0x%zx bytes " \
                             "left)", what, (unsigned long long)(count), fu_cursor_left(&c));          \
    } while (0)

/* Decode a PERF_RECORD_SAMPLE in the kernel's order (perf_output_sample; evsel__parse_sample). */
static fu_status parse_sample(parser *p, const origin *at, uint16_t misc, const uint8_t *rec, uint64_t size)
{
    fu_perf_data *pd = p->pd;
    uint32_t attr_index;
    fu_status s = record_attr(p, at, FU_PERF_RECORD_SAMPLE, rec + 8, size - 8, &attr_index);
    if (s != FU_OK)
        return s;
    const fu_perf_attr *attr = &pd->attrs[attr_index];
    uint64_t st = attr->sample_type;
    if (pd->sample_count >= UINT32_MAX)
        return perf_fail(p, at, "more than 2^32 samples");
    if (!grow((void **)&pd->samples, &pd->sample_cap, pd->sample_count + 1, sizeof *pd->samples))
        return perf_nomem(p);
    fu_perf_sample *x = &pd->samples[pd->sample_count];
    memset(x, 0, sizeof *x);
    x->present = st;
    x->attr_index = attr_index;
    x->misc = misc;
    x->file_offset = at->file_offset;
    x->compressed = at->compressed;
    x->pid = x->tid = x->cpu = UINT32_MAX;
    x->period = attr->sample_period;
    x->branch_hw_index = UINT64_MAX;
    x->regs_mask = attr->sample_regs_user;
    x->intr_regs_mask = attr->sample_regs_intr;
    x->read_format = attr->read_format;
    fu_cursor c = fu_cursor_make(rec, rec + 8, rec + size);

    if (st & FU_PERF_SAMPLE_IDENTIFIER) {
        SAMPLE_NEED(8, "IDENTIFIER");
        x->id = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_IP) {
        SAMPLE_NEED(8, "IP");
        x->ip = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_TID) {
        SAMPLE_NEED(8, "TID");
        x->pid = (uint32_t)fu_read_uint(&c, 4);
        x->tid = (uint32_t)fu_read_uint(&c, 4);
    }
    if (st & FU_PERF_SAMPLE_TIME) {
        SAMPLE_NEED(8, "TIME");
        x->time = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_ADDR) {
        SAMPLE_NEED(8, "ADDR");
        x->addr = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_ID) {
        SAMPLE_NEED(8, "ID");
        x->id = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_STREAM_ID) {
        SAMPLE_NEED(8, "STREAM_ID");
        x->stream_id = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_CPU) {
        SAMPLE_NEED(8, "CPU");
        x->cpu = (uint32_t)fu_read_uint(&c, 4);
        fu_read_uint(&c, 4);
    }
    if (st & FU_PERF_SAMPLE_PERIOD) {
        SAMPLE_NEED(8, "PERIOD");
        x->period = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_READ) {
        /* struct read_format (perf_event.h): GROUP: nr, [time_enabled], [time_running],
         * nr x {value, [id], [lost]}; otherwise value, [time_enabled], [time_running], [id], [lost]. */
        uint64_t rf = attr->read_format;
        uint64_t per_value = 8 * (1 + !!(rf & FU_PERF_FORMAT_ID) + !!(rf & FU_PERF_FORMAT_LOST));
        x->read = c.pos;
        SAMPLE_NEED(8, "READ");
        uint64_t first = fu_read_uint(&c, 8);
        if (rf & FU_PERF_FORMAT_TOTAL_TIME_ENABLED) {
            SAMPLE_NEED(8, "READ time_enabled");
            x->time_enabled = fu_read_uint(&c, 8);
        }
        if (rf & FU_PERF_FORMAT_TOTAL_TIME_RUNNING) {
            SAMPLE_NEED(8, "READ time_running");
            x->time_running = fu_read_uint(&c, 8);
        }
        if (rf & FU_PERF_FORMAT_GROUP) {
            SAMPLE_COUNT(first, per_value, "READ group");
            x->read_value_count = first;
            fu_cursor_skip(&c, first * per_value);
        } else {
            SAMPLE_NEED(per_value - 8, "READ id/lost");
            x->read_value_count = 1;
            fu_cursor_skip(&c, per_value - 8);
        }
        x->read_size = (uint64_t)(c.pos - x->read);
    }
    if (st & FU_PERF_SAMPLE_CALLCHAIN) {
        SAMPLE_NEED(8, "CALLCHAIN nr");
        uint64_t nr = fu_read_uint(&c, 8);
        SAMPLE_COUNT(nr, 8, "callchain");
        x->callchain_count = nr;
        x->callchain = aligned_words(p, c.pos, nr);
        if (nr && !x->callchain)
            return perf_nomem(p);
        fu_cursor_skip(&c, nr * 8);
    }
    if (st & FU_PERF_SAMPLE_RAW) {
        /* u32 size, data[size]; the kernel pads data so the block ends on a u64 boundary. */
        SAMPLE_NEED(4, "RAW size");
        x->raw_size = (uint32_t)fu_read_uint(&c, 4);
        SAMPLE_NEED(x->raw_size, "RAW data");
        x->raw = c.pos;
        fu_cursor_skip(&c, x->raw_size);
    }
    if (st & FU_PERF_SAMPLE_BRANCH_STACK) {
        SAMPLE_NEED(8, "BRANCH_STACK nr");
        uint64_t nr = fu_read_uint(&c, 8);
        if (attr->branch_sample_type & FU_PERF_SAMPLE_BRANCH_HW_INDEX) {
            SAMPLE_NEED(8, "BRANCH_STACK hw_idx");
            x->branch_hw_index = fu_read_uint(&c, 8);
        }
        SAMPLE_COUNT(nr, 24, "branch stack");
        x->branch_count = nr;
        x->branches = c.pos;
        fu_cursor_skip(&c, nr * 24);
        if (attr->branch_sample_type & FU_PERF_SAMPLE_BRANCH_COUNTERS) {
            SAMPLE_COUNT(nr, 8, "branch counters");
            x->branch_counters = c.pos;
            fu_cursor_skip(&c, nr * 8);
        }
    }
    if (st & FU_PERF_SAMPLE_REGS_USER) {
        SAMPLE_NEED(8, "REGS_USER abi");
        x->regs_abi = fu_read_uint(&c, 8);
        if (x->regs_abi) {
            uint64_t n = popcount64(attr->sample_regs_user);
            SAMPLE_NEED(n * 8, "REGS_USER registers");
            x->regs = c.pos;
            fu_cursor_skip(&c, n * 8);
        }
    }
    if (st & FU_PERF_SAMPLE_STACK_USER) {
        /* u64 size, data[size], and u64 dyn_size only when size != 0 (perf_output_sample_ustack). */
        SAMPLE_NEED(8, "STACK_USER size");
        uint64_t dump = fu_read_uint(&c, 8);
        if (dump) {
            SAMPLE_NEED(dump, "STACK_USER data");
            x->stack = c.pos;
            fu_cursor_skip(&c, dump);
            SAMPLE_NEED(8, "STACK_USER dyn_size");
            uint64_t dyn = fu_read_uint(&c, 8);
            if (dyn > dump)
                return perf_fail(p, at, "SAMPLE record: STACK_USER dyn_size 0x%llx exceeds the dumped size "
                                 "0x%llx", (unsigned long long)dyn, (unsigned long long)dump);
            x->stack_dump_size = dump;
            x->stack_size = dyn;
        }
    }
    if (st & (FU_PERF_SAMPLE_WEIGHT | FU_PERF_SAMPLE_WEIGHT_STRUCT)) {
        SAMPLE_NEED(8, "WEIGHT");
        x->weight = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_DATA_SRC) {
        SAMPLE_NEED(8, "DATA_SRC");
        x->data_src = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_TRANSACTION) {
        SAMPLE_NEED(8, "TRANSACTION");
        x->transaction = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_REGS_INTR) {
        SAMPLE_NEED(8, "REGS_INTR abi");
        x->intr_regs_abi = fu_read_uint(&c, 8);
        if (x->intr_regs_abi) {
            uint64_t n = popcount64(attr->sample_regs_intr);
            SAMPLE_NEED(n * 8, "REGS_INTR registers");
            x->intr_regs = c.pos;
            fu_cursor_skip(&c, n * 8);
        }
    }
    /* The uapi comment lists AUX before the page sizes; the kernel writes (and perf reads) PHYS_ADDR,
     * CGROUP, DATA_PAGE_SIZE, CODE_PAGE_SIZE, then AUX. */
    if (st & FU_PERF_SAMPLE_PHYS_ADDR) {
        SAMPLE_NEED(8, "PHYS_ADDR");
        x->phys_addr = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_CGROUP) {
        SAMPLE_NEED(8, "CGROUP");
        x->cgroup = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_DATA_PAGE_SIZE) {
        SAMPLE_NEED(8, "DATA_PAGE_SIZE");
        x->data_page_size = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_CODE_PAGE_SIZE) {
        SAMPLE_NEED(8, "CODE_PAGE_SIZE");
        x->code_page_size = fu_read_uint(&c, 8);
    }
    if (st & FU_PERF_SAMPLE_AUX) {
        SAMPLE_NEED(8, "AUX size");
        x->aux_size = fu_read_uint(&c, 8);
        SAMPLE_NEED(x->aux_size, "AUX data");
        x->aux = c.pos;
        fu_cursor_skip(&c, x->aux_size);
    }
    pd->sample_count++;
    return add_event(p, FU_PERF_EVENT_SAMPLE, (uint32_t)(pd->sample_count - 1), (st & FU_PERF_SAMPLE_TIME) != 0,
                     x->time);
}

bool fu_perf_sample_reg(const fu_perf_sample *sample, unsigned reg, uint64_t *value)
{
    if (!sample->regs || sample->regs_abi == 0 || reg >= 64 || !(sample->regs_mask & (1ull << reg)))
        return false;
    /* Registers are stored in ascending bit order of the mask (perf_output_sample_regs). */
    unsigned slot = popcount64(sample->regs_mask & ((1ull << reg) - 1));
    memcpy(value, sample->regs + 8 * (size_t)slot, 8);
    return true;
}

bool fu_perf_sample_intr_reg(const fu_perf_sample *sample, unsigned reg, uint64_t *value)
{
    if (!sample->intr_regs || sample->intr_regs_abi == 0 || reg >= 64 ||
        !(sample->intr_regs_mask & (1ull << reg)))
        return false;
    unsigned slot = popcount64(sample->intr_regs_mask & ((1ull << reg) - 1));
    memcpy(value, sample->intr_regs + 8 * (size_t)slot, 8);
    return true;
}

/* ---- records ------------------------------------------------------------------------------------- */

/* Framing of one record at `pos` of [base, base + end): its header and the payload that some user
 * records carry after header.size (HEADER_TRACING_DATA: u32 size at +8, padded to 8 as perf reads it;
 * AUXTRACE: u64 size at +8). */
typedef struct frame {
    uint32_t type;
    uint16_t misc, size;
    uint64_t total;  /* size + trailing payload */
} frame;

static fu_status read_frame(parser *p, const uint8_t *base, uint64_t pos, uint64_t end, const origin *at,
                            frame *f)
{
    if (end - pos < 8)
        return perf_fail(p, at, "record header truncated: 0x%llx bytes left, 8 needed",
                         (unsigned long long)(end - pos));
    const uint8_t *r = base + pos;
    f->type = (uint32_t)r[0] | (uint32_t)r[1] << 8 | (uint32_t)r[2] << 16 | (uint32_t)r[3] << 24;
    f->misc = (uint16_t)(r[4] | r[5] << 8);
    f->size = (uint16_t)(r[6] | r[7] << 8);
    if (f->size < 8)
        return perf_fail(p, at, "%s record (type %u) has size 0x%x, below the 8-byte header",
                         fu_perf_record_name(f->type), f->type, f->size);
    if (f->size > end - pos)
        return perf_fail(p, at, "%s record (type %u) of size 0x%x runs 0x%llx bytes past the end of the data",
                         fu_perf_record_name(f->type), f->type, f->size,
                         (unsigned long long)(f->size - (end - pos)));
    uint64_t payload = 0;
    if (f->type == FU_PERF_RECORD_HEADER_TRACING_DATA) {
        if (f->size < 12)
            return perf_fail(p, at, "HEADER_TRACING_DATA record of size 0x%x has no size field", f->size);
        uint32_t n;
        memcpy(&n, r + 8, 4);
        payload = ((uint64_t)n + 7) & ~(uint64_t)7;
    } else if (f->type == FU_PERF_RECORD_AUXTRACE) {
        if (f->size < 16)
            return perf_fail(p, at, "AUXTRACE record of size 0x%x has no size field", f->size);
        payload = load_u64(r + 8);
    }
    if (payload > end - pos - f->size)
        return perf_fail(p, at, "%s payload of 0x%llx bytes runs past the end of the data (0x%llx left)",
                         fu_perf_record_name(f->type), (unsigned long long)payload,
                         (unsigned long long)(end - pos - f->size));
    f->total = f->size + payload;
    return FU_OK;
}

static fu_status parse_header_attr(parser *p, const origin *at, const uint8_t *rec, uint64_t size)
{
    fu_cursor c = fu_cursor_make(rec, rec + 8, rec + size);
    fu_perf_attr attr;
    fu_status s = read_attr(p, &c, at, &attr);
    if (s != FU_OK)
        return s;
    /* perf_event__process_attr: the ids fill the rest of the record. */
    s = set_attr_ids(p, &attr, &c, fu_cursor_left(&c) / 8);
    if (s != FU_OK)
        return s;
    s = add_attr(p, &attr);
    if (s != FU_OK)
        free(attr.ids);
    return s;
}

static fu_status parse_event_update(parser *p, const origin *at, const uint8_t *rec, uint64_t size)
{
    if (size < 24)
        return perf_fail(p, at, "EVENT_UPDATE record of size 0x%llx is shorter than 0x18", (unsigned long long)size);
    uint64_t type = load_u64(rec + 8), id = load_u64(rec + 16);
    if (type != EVENT_UPDATE_NAME)
        return FU_OK;
    fu_perf_data *pd = p->pd;
    uint32_t attr;
    if (!lookup_id(pd, id, &attr) || pd->attrs[attr].name)
        return FU_OK; /* HEADER_EVENT_DESC names win; an unknown id names nothing */
    return set_attr_name(p, &pd->attrs[attr], (const char *)rec + 24, bounded_strlen(rec + 24, size - 24));
}

/* A copy of a record that the reader keeps pointers into (build-id file names, cmdline words), for a
 * stream over a pipe, whose bytes are freed behind the decoder. */
static const uint8_t *kept_copy(parser *p, const uint8_t *rec, uint64_t size)
{
    struct fu_perf_block *b = malloc(sizeof *b + (size_t)(size + 7) / 8 * 8);
    if (!b)
        return NULL;
    b->next = p->pd->kept_records;
    b->used = b->cap = (size_t)(size + 7) / 8;
    p->pd->kept_records = b;
    memcpy(b->words, rec, (size_t)size);
    return (const uint8_t *)b->words;
}

static fu_status parse_record(parser *p, const origin *at, const frame *f, const uint8_t *rec)
{
    fu_perf_data *pd = p->pd;
    pd->stats.records++;
    if (at->compressed)
        pd->stats.compressed_records++;
    switch (f->type) {
    case FU_PERF_RECORD_SAMPLE: return parse_sample(p, at, f->misc, rec, f->size);
    case FU_PERF_RECORD_MMAP:
    case FU_PERF_RECORD_MMAP2: return parse_mmap(p, at, f->type, f->misc, rec, f->size);
    case FU_PERF_RECORD_COMM: return parse_comm(p, at, f->misc, rec, f->size);
    case FU_PERF_RECORD_FORK:
    case FU_PERF_RECORD_EXIT: return parse_task(p, at, f->type, f->misc, rec, f->size);
    case FU_PERF_RECORD_LOST:
        if (f->size >= 24)
            pd->stats.lost += load_u64(rec + 16);
        pd->stats.skipped_records++;
        return FU_OK;
    case FU_PERF_RECORD_FINISHED_ROUND: pd->stats.finished_rounds++; return FU_OK;
    case FU_PERF_RECORD_HEADER_ATTR: return parse_header_attr(p, at, rec, f->size);
    case FU_PERF_RECORD_HEADER_BUILD_ID:
        if (p->copy_header_records && !(rec = kept_copy(p, rec, f->size)))
            return perf_nomem(p);
        return add_build_id(p, rec, f->size, f->misc, at);
    case FU_PERF_RECORD_EVENT_UPDATE: return parse_event_update(p, at, rec, f->size);
    case FU_PERF_RECORD_HEADER_FEATURE: {
        if (f->size < 16)
            return perf_fail(p, at, "HEADER_FEATURE record of size 0x%x has no feature id", f->size);
        uint64_t feature = load_u64(rec + 8);
        if (p->copy_header_records && !(rec = kept_copy(p, rec, f->size)))
            return perf_nomem(p);
        fu_cursor c = fu_cursor_make(rec, rec + 16, rec + f->size);
        if (feature >= FU_PERF_HEADER_FEAT_BITS)
            return FU_OK; /* HEADER_LAST_FEATURE marks the end of the features; later ones are unknown */
        return parse_feature(p, (unsigned)feature, &c, at->file_offset + 16);
    }
    case FU_PERF_RECORD_COMPRESSED:
        return perf_fail(p, at, "COMPRESSED record inside a compressed stream");
    default:
        /* Everything else (THROTTLE, KSYMBOL, TRACING_DATA, AUXTRACE, STAT, ...) is skipped by its
         * size; read_frame has accounted for trailing payloads. */
        pd->stats.skipped_records++;
        return FU_OK;
    }
}

/* ---- compression ---------------------------------------------------------------------------------- */

/* The decompressed records live in an anonymous mapping advised for 2 MiB pages, as
 * fastunwind.perf_data reads a plain recording: each sample's registers and stack dump sit several
 * KiB past the previous one's, so in 4 KiB pages walks take a TLB miss or two per sample
 * (docs/DESIGN.md, "Recordings in huge pages"). It grows by doubling from this size (mremap: the
 * pages move, nothing is copied) and shrinks to what was written once every record is in. */
#define DECOMPRESSED_INITIAL_BYTES ((uint64_t)2 << 20)

/* Under AddressSanitizer the mapping's bytes past the data are poisoned, as a malloc'd buffer's
 * redzone would be, so that the fuzzers see a read past the decompressed stream. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON_PAST_DATA(pd)                                                                                  \
    ASAN_POISON_MEMORY_REGION((pd)->decompressed + (pd)->decompressed_size,                                   \
                              (size_t)((pd)->decompressed_mapped - (pd)->decompressed_size))
#define UNPOISON_ALL(pd) ASAN_UNPOISON_MEMORY_REGION((pd)->decompressed, (size_t)(pd)->decompressed_mapped)
#else
#define POISON_PAST_DATA(pd) ((void)0)
#define UNPOISON_ALL(pd) ((void)0)
#endif

static uint64_t page_rounded(uint64_t bytes)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

/* Map (or remap) pd->decompressed to hold `bytes` (> 0); false, the buffer unchanged, if the
 * system refuses. */
static bool map_decompressed(fu_perf_data *pd, uint64_t bytes)
{
    uint64_t mapped = page_rounded(bytes);
    if (mapped > SIZE_MAX)
        return false;
    void *q = pd->decompressed ? mremap(pd->decompressed, (size_t)pd->decompressed_mapped, (size_t)mapped, MREMAP_MAYMOVE)
                               : mmap(NULL, (size_t)mapped, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (q == MAP_FAILED)
        return false;
#ifdef MADV_HUGEPAGE
    (void)madvise(q, (size_t)mapped, MADV_HUGEPAGE); /* advice: without THP the pages stay 4 KiB */
#endif
    pd->decompressed = q;
    pd->decompressed_mapped = mapped;
    return true;
}

/* Bytes pd->decompressed has room for: its mapping, up to the bound. */
static uint64_t decompressed_room(const parser *p)
{
    return p->pd->decompressed_mapped < p->max_decompressed ? p->pd->decompressed_mapped : p->max_decompressed;
}

/* Feed one COMPRESSED payload to the stream, appending to pd->decompressed. Every iteration consumes
 * input or produces output, or grows the buffer (up to the bound), so the loop ends. */
static fu_status decompress_record(parser *p, ZSTD_DStream **stream, const uint8_t *src, uint64_t n,
                                   const origin *at)
{
    fu_perf_data *pd = p->pd;
    if (!*stream) {
        *stream = ZSTD_createDStream();
        if (!*stream)
            return perf_nomem(p);
        size_t r = ZSTD_initDStream(*stream);
        if (ZSTD_isError(r))
            return perf_fail(p, at, "zstd: %s", ZSTD_getErrorName(r));
    }
    ZSTD_inBuffer in = {src, (size_t)n, 0};
    for (;;) {
        uint64_t room = decompressed_room(p);
        if (pd->decompressed_size == room) {
            if (room >= p->max_decompressed)
                return perf_fail(p, at, "COMPRESSED: decompressed data exceed the bound of 0x%llx bytes",
                                 (unsigned long long)p->max_decompressed);
            uint64_t grown = room ? room * 2 : DECOMPRESSED_INITIAL_BYTES;
            if (!map_decompressed(pd, grown < p->max_decompressed ? grown : p->max_decompressed))
                return perf_nomem(p);
            room = decompressed_room(p);
        }
        ZSTD_outBuffer out = {pd->decompressed, (size_t)room, (size_t)pd->decompressed_size};
        size_t in_before = in.pos, out_before = out.pos;
        size_t r = ZSTD_decompressStream(*stream, &out, &in);
        if (ZSTD_isError(r))
            return perf_fail(p, at, "COMPRESSED: zstd: %s", ZSTD_getErrorName(r));
        pd->decompressed_size = out.pos;
        /* All input taken and room left over: zstd has flushed everything it can. */
        if (in.pos == in.size && out.pos < out.size)
            break;
        if (in.pos == in_before && out.pos == out_before && out.pos < out.size)
            return perf_fail(p, at, "COMPRESSED: zstd made no progress");
    }
    pd->stats.decompressed_bytes = pd->decompressed_size;
    return FU_OK;
}

/* ---- the passes ---------------------------------------------------------------------------------- */

static bool record_complete(const uint8_t *base, uint64_t pos, uint64_t limit);

/* Whether the readable data of a recording that may have been cut short (a file cut short, or any
 * pipe stream) ends at the record at `pos`: the record runs past `end`, or, in a file known to be
 * cut, claims less than its own 8-byte header (the bytes after a cut are not trusted). That record
 * is dropped, never read past: pd->data_size ends before it and pd->cut says where. */
static bool cut_before(parser *p, uint64_t pos, uint64_t end)
{
    fu_perf_data *pd = p->pd;
    if (!p->cut_file && !pd->pipe_mode)
        return false;
    const uint8_t *r = pd->data + pos;
    uint64_t left = end - pos;
    uint16_t size = left >= 8 ? (uint16_t)(r[6] | r[7] << 8) : 0;
    if (record_complete(pd->data, pos, end) && !(p->cut_file && size < 8))
        return false;
    pd->cut.dropped_offset = pos;
    pd->cut.dropped_present = left;
    pd->cut.dropped_size = size;
    pd->data_size = pos - pd->data_offset;
    return true;
}

/* Pass 1: check the framing of the data section and decompress every COMPRESSED record. */
static fu_status pass_framing(parser *p)
{
    fu_perf_data *pd = p->pd;
    const uint8_t *base = pd->data;
    uint64_t pos = pd->data_offset, end = pd->data_offset + pd->data_size;
    ZSTD_DStream *stream = NULL;
    fu_status s = FU_OK;
    /* one record per iteration, each at least 8 bytes: bounded by the data section */
    while (pos < end && !cut_before(p, pos, end)) {
        origin at = at_file(pos);
        frame f;
        s = read_frame(p, base, pos, end, &at, &f);
        if (s != FU_OK)
            break;
        if (f.type == FU_PERF_RECORD_COMPRESSED) {
            s = decompress_record(p, &stream, base + pos + 8, f.size - 8u, &at);
            if (s != FU_OK)
                break;
            if (!grow((void **)&p->compressed_ends, &p->compressed_cap, p->compressed_count + 1, 8)) {
                s = perf_nomem(p);
                break;
            }
            p->compressed_ends[p->compressed_count++] = pd->decompressed_size;
        }
        pos += f.total;
    }
    if (stream)
        ZSTD_freeDStream(stream);
    /* Give back the slack of the last doubling; nothing points into the buffer yet. */
    if (s == FU_OK && pd->decompressed_size && page_rounded(pd->decompressed_size) < pd->decompressed_mapped)
        (void)map_decompressed(pd, pd->decompressed_size); /* a refusal leaves it as it was */
    if (pd->decompressed)
        POISON_PAST_DATA(pd);
    return s;
}

/* Whether the record at `pos` (and its trailing payload) is wholly inside [pos, limit). A record
 * whose header claims less than 8 bytes counts as complete, so read_frame reports it. */
static bool record_complete(const uint8_t *base, uint64_t pos, uint64_t limit)
{
    const uint8_t *r = base + pos;
    uint64_t left = limit - pos;
    if (left < 8)
        return false;
    uint32_t type = (uint32_t)r[0] | (uint32_t)r[1] << 8 | (uint32_t)r[2] << 16 | (uint32_t)r[3] << 24;
    uint16_t size = (uint16_t)(r[6] | r[7] << 8);
    if (size < 8)
        return true;
    if (size > left)
        return false;
    uint64_t payload = 0;
    if (type == FU_PERF_RECORD_HEADER_TRACING_DATA && size >= 12) {
        uint32_t n;
        memcpy(&n, r + 8, 4);
        payload = ((uint64_t)n + 7) & ~(uint64_t)7;
    } else if (type == FU_PERF_RECORD_AUXTRACE && size >= 16) {
        payload = load_u64(r + 8);
    }
    return payload <= left - size;
}

/* Decode the complete records of the decompressed stream in [*stream_pos, limit); an incomplete
 * last record waits for the output of the next COMPRESSED record (perf's decomp_last_rem). */
static fu_status decode_stream(parser *p, uint64_t *stream_pos, uint64_t limit, uint64_t compressed_offset)
{
    const uint8_t *base = p->pd->decompressed;
    while (record_complete(base, *stream_pos, limit)) {
        origin at = {compressed_offset, true, *stream_pos};
        frame f;
        p->position = FU_PERF_POSITION_DECOMPRESSED | *stream_pos;
        fu_status s = read_frame(p, base, *stream_pos, limit, &at, &f);
        if (s == FU_OK)
            s = parse_record(p, &at, &f, base + *stream_pos);
        if (s != FU_OK)
            return s;
        *stream_pos += f.total;
    }
    return FU_OK;
}

/* Pass 2: decode every record in file order. */
static fu_status pass_decode(parser *p)
{
    fu_perf_data *pd = p->pd;
    const uint8_t *base = pd->data;
    uint64_t pos = pd->data_offset, end = pd->data_offset + pd->data_size;
    uint64_t stream_pos = 0;
    size_t compressed_index = 0;
    uint64_t last_compressed = 0;
    while (pos < end) {
        origin at = at_file(pos);
        frame f;
        fu_status s = read_frame(p, base, pos, end, &at, &f);
        if (s != FU_OK)
            return s;
        if (f.type == FU_PERF_RECORD_COMPRESSED) {
            pd->stats.records++;
            if (compressed_index >= p->compressed_count)
                return perf_fail(p, &at, "COMPRESSED record not seen by the framing pass");
            s = decode_stream(p, &stream_pos, p->compressed_ends[compressed_index++], pos);
            last_compressed = pos;
        } else {
            p->position = pos;
            s = parse_record(p, &at, &f, base + pos);
        }
        if (s != FU_OK)
            return s;
        pos += f.total;
    }
    if (stream_pos != pd->decompressed_size && (p->cut_file || pd->cut.dropped_present)) {
        /* cut short: the COMPRESSED record that held the rest of this one is gone */
        pd->cut.dropped_stream_bytes = pd->decompressed_size - stream_pos;
    } else if (stream_pos != pd->decompressed_size) {
        origin at = {last_compressed, true, stream_pos};
        return perf_fail(p, &at, "the compressed stream ends inside a record (0x%llx bytes left over)",
                         (unsigned long long)(pd->decompressed_size - stream_pos));
    }
    return FU_OK;
}

/* Whether a table of `count` feature sections at `table` fits in the file with every section
 * inside it and after the table: what a finished recording holds after its data (perf record
 * writes the sections right after the table, perf_header__adds_write). */
static bool feature_table_ok(const fu_perf_data *pd, uint64_t table, unsigned count)
{
    uint64_t table_size = (uint64_t)count * FILE_SECTION_SIZE;
    if (!section_ok(pd, table, table_size))
        return false;
    for (unsigned k = 0; k < count; k++) { /* count <= FU_PERF_HEADER_FEAT_BITS */
        uint64_t where = table + (uint64_t)k * FILE_SECTION_SIZE;
        uint64_t offset = load_u64(pd->data + where), size = load_u64(pd->data + where + 8);
        if (offset < table + table_size || !section_ok(pd, offset, size))
            return false;
    }
    return true;
}

/* The file header, the attrs with their ids, and the feature sections. */
static fu_status read_file_header(parser *p)
{
    fu_perf_data *pd = p->pd;
    fu_cursor c = fu_cursor_make(pd->data, pd->data, pd->data + pd->size);
    origin at0 = at_file(0);
    uint64_t magic = fu_read_uint(&c, 8);
    uint64_t header_size = fu_read_uint(&c, 8);
    if (c.failed)
        return perf_fail(p, &at0, "file of 0x%llx bytes is too short for a perf.data header",
                         (unsigned long long)pd->size);
    if (magic == PERF_MAGIC2_SWAPPED)
        return perf_fail(p, &at0, "big-endian perf.data is not supported");
    if (magic == PERF_MAGIC1)
        return perf_fail(p, &at0, "perf.data version 1 (magic PERFFILE) is not supported");
    if (magic != PERF_MAGIC2)
        return perf_fail(p, &at0, "bad magic 0x%016llx (expected \"PERFILE2\")", (unsigned long long)magic);
    if (header_size == PIPE_HEADER_SIZE) {
        pd->pipe_mode = true;
        pd->data_offset = PIPE_HEADER_SIZE;
        pd->data_size = pd->size - PIPE_HEADER_SIZE;
        return FU_OK;
    }
    if (header_size != FILE_HEADER_SIZE && header_size != FILE_HEADER_SIZE_OLD)
        return perf_fail(p, &at0, "header size 0x%llx is neither 0x10 (pipe), 0x48 nor 0x68 (file)",
                         (unsigned long long)header_size);
    if (header_size > pd->size)
        return perf_fail(p, &at0, "header of 0x%llx bytes overruns the file (0x%llx bytes)",
                         (unsigned long long)header_size, (unsigned long long)pd->size);
    uint64_t attr_size = fu_read_uint(&c, 8);
    uint64_t attrs_offset = fu_read_uint(&c, 8), attrs_size = fu_read_uint(&c, 8);
    uint64_t data_offset = fu_read_uint(&c, 8), data_size = fu_read_uint(&c, 8);
    fu_read_uint(&c, 8); /* event_types section: unused since perf 3.x */
    fu_read_uint(&c, 8);
    if (header_size == FILE_HEADER_SIZE)
        for (int i = 0; i < FU_PERF_HEADER_FEAT_BITS / 64; i++)
            pd->feature_bits[i] = fu_read_uint(&c, 8);
    if (!section_ok(pd, attrs_offset, attrs_size))
        return perf_fail(p, &at0, "attrs section [0x%llx, +0x%llx) lies outside the file (0x%llx bytes)",
                         (unsigned long long)attrs_offset, (unsigned long long)attrs_size,
                         (unsigned long long)pd->size);
    if (data_offset < header_size || data_offset > pd->size)
        return perf_fail(p, &at0, "data section [0x%llx, +0x%llx) lies outside the file (0x%llx bytes)",
                         (unsigned long long)data_offset, (unsigned long long)data_size,
                         (unsigned long long)pd->size);
    unsigned feature_count = 0;
    for (int i = 0; i < FU_PERF_HEADER_FEAT_BITS / 64; i++)
        feature_count += popcount64(pd->feature_bits[i]);
    /* A recording cut short (perf_data.h, fu_perf_cut): its records run to the file's end, where
     * an incomplete last record is dropped, and its feature sections, never written or cut off,
     * are absent. perf record writes the header with data size 0 first and rewrites it when it
     * finishes; a finished recording without records has its feature table at the data offset. */
    if (data_size == 0 && data_offset < pd->size && !feature_table_ok(pd, data_offset, feature_count)) {
        pd->cut.unterminated = true;
        data_size = pd->size - data_offset;
    } else if (!section_ok(pd, data_offset, data_size)) {
        pd->cut.truncated = true;
        pd->cut.declared_data_end = data_offset + data_size; /* no overflow: size - offset < data_size */
        data_size = pd->size - data_offset;
    }
    p->cut_file = pd->cut.unterminated || pd->cut.truncated;
    pd->data_offset = data_offset;
    pd->data_size = data_size;

    /* attrs: entries of attr_size bytes = perf_event_attr (its own size) + perf_file_section ids. */
    if (attrs_size) {
        if (attr_size < ATTR_SIZE_VER0 + FILE_SECTION_SIZE || attr_size > FU_PERF_MAX_ATTR_SIZE + FILE_SECTION_SIZE)
            return perf_fail(p, &at0, "attr entry size 0x%llx out of range [0x%x, 0x%x]", (unsigned long long)attr_size,
                             ATTR_SIZE_VER0 + FILE_SECTION_SIZE, FU_PERF_MAX_ATTR_SIZE + FILE_SECTION_SIZE);
        uint64_t nr = attrs_size / attr_size;
        if (nr > FU_PERF_MAX_ATTRS)
            return perf_fail(p, &at0, "0x%llx attrs exceed the limit %d", (unsigned long long)nr, FU_PERF_MAX_ATTRS);
        for (uint64_t i = 0; i < nr; i++) {
            uint64_t entry = attrs_offset + i * attr_size;
            origin at = at_file(entry);
            fu_cursor e = fu_cursor_make(pd->data, pd->data + entry, pd->data + entry + attr_size);
            fu_perf_attr attr;
            fu_status s = read_attr(p, &e, &at, &attr);
            if (s != FU_OK)
                return s;
            /* perf reads the ids section right after the attr's own size */
            if (fu_cursor_left(&e) < FILE_SECTION_SIZE)
                return perf_fail(p, &at, "attr size 0x%x leaves no room for its ids section in a 0x%llx-byte entry",
                                 attr.size, (unsigned long long)attr_size);
            uint64_t ids_offset = fu_read_uint(&e, 8), ids_size = fu_read_uint(&e, 8);
            if (!section_ok(pd, ids_offset, ids_size))
                return perf_fail(p, &at, "ids section [0x%llx, +0x%llx) lies outside the file",
                                 (unsigned long long)ids_offset, (unsigned long long)ids_size);
            fu_cursor ic = fu_cursor_make(pd->data, pd->data + ids_offset, pd->data + ids_offset + ids_size);
            s = set_attr_ids(p, &attr, &ic, ids_size / 8);
            if (s == FU_OK)
                s = add_attr(p, &attr);
            if (s != FU_OK) {
                free(attr.ids);
                return s;
            }
        }
    }

    /* Feature sections: a table of perf_file_section, one per set bit, right after the data. In a
     * recording cut short, or where the table itself runs past the file's end, every announced
     * feature is absent (perf 6.1: "Failed to lseek to ... offset for feature N, continuing..."). */
    uint64_t table = data_offset + data_size;
    if (feature_count && (p->cut_file || !section_ok(pd, table, (uint64_t)feature_count * FILE_SECTION_SIZE))) {
        memcpy(pd->cut.missing_features, pd->feature_bits, sizeof pd->cut.missing_features);
    } else if (feature_count) {
        unsigned k = 0;
        for (unsigned bit = 0; bit < FU_PERF_HEADER_FEAT_BITS; bit++) {
            if (!(pd->feature_bits[bit / 64] >> (bit % 64) & 1))
                continue;
            uint64_t where = table + (uint64_t)k++ * FILE_SECTION_SIZE;
            uint64_t off = load_u64(pd->data + where), size = load_u64(pd->data + where + 8);
            if (!section_ok(pd, off, size)) { /* cut off by a truncation: absent, as in perf */
                pd->cut.missing_features[bit / 64] |= 1ull << (bit % 64);
                continue;
            }
            if (bit != FU_PERF_HEADER_BUILD_ID && bit != FU_PERF_HEADER_CMDLINE && bit != FU_PERF_HEADER_EVENT_DESC &&
                bit != FU_PERF_HEADER_COMPRESSED && bit != FU_PERF_HEADER_SAMPLE_TIME)
                continue;
            fu_cursor fc = fu_cursor_make(pd->data, pd->data + off, pd->data + off + size);
            fu_status s = parse_feature(p, bit, &fc, off);
            if (s != FU_OK)
                return s;
        }
    }
    return FU_OK;
}

/* ---- ordering ------------------------------------------------------------------------------------- */

static void merge_sort(fu_perf_event *a, fu_perf_event *tmp, size_t n)
{
    /* bottom-up, stable: equal times keep file order */
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            if (mid >= hi || a[mid - 1].time <= a[mid].time) {
                memcpy(tmp + lo, a + lo, (hi - lo) * sizeof *a);
                continue;
            }
            while (i < mid && j < hi)
                tmp[k++] = a[j].time < a[i].time ? a[j++] : a[i++];
            while (i < mid)
                tmp[k++] = a[i++];
            while (j < hi)
                tmp[k++] = a[j++];
        }
        memcpy(a, tmp, n * sizeof *a);
    }
}

static fu_status order_events(parser *p)
{
    fu_perf_data *pd = p->pd;
    size_t n = pd->event_count;
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = pd->events[i - 1].time <= pd->events[i].time;
    if (!sorted) {
        fu_perf_event *tmp = malloc(n * sizeof *tmp);
        if (!tmp)
            return perf_nomem(p);
        merge_sort(pd->events, tmp, n);
        free(tmp);
    }
    /* Put the samples in delivery order so sample i is the i-th delivered. */
    if (pd->sample_count) {
        fu_perf_sample *ordered = malloc(pd->sample_count * sizeof *ordered);
        if (!ordered)
            return perf_nomem(p);
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            if (pd->events[i].kind != FU_PERF_EVENT_SAMPLE)
                continue;
            ordered[j] = pd->samples[pd->events[i].index];
            ordered[j].index = (uint32_t)j;
            pd->events[i].index = (uint32_t)j;
            j++;
        }
        free(pd->samples);
        pd->samples = ordered;
        pd->sample_cap = pd->sample_count;
    }
    return FU_OK;
}

/* ---- recordings cut short -------------------------------------------------------------------------- */

/* A recording cut short before its first complete sample: nothing to show, an error (the same
 * one-line form as every other). */
static fu_status nothing_usable(parser *p)
{
    fu_perf_data *pd = p->pd;
    origin at0 = at_file(0);
    if (pd->pipe_mode) {
        origin at = at_file(pd->cut.dropped_offset);
        return perf_fail(p, &at, "the stream ends inside a record (0x%llx bytes present) before any complete sample",
                         (unsigned long long)pd->cut.dropped_present);
    }
    if (pd->cut.unterminated)
        return perf_fail(p, &at0, "data size is 0 (the recording was not properly terminated) and no complete "
                         "sample lies between the data offset 0x%llx and the file's end at 0x%llx",
                         (unsigned long long)pd->data_offset, (unsigned long long)pd->size);
    return perf_fail(p, &at0, "data section [0x%llx, +0x%llx) lies outside the file (0x%llx bytes: truncated) "
                     "and no complete sample lies before its end", (unsigned long long)pd->data_offset,
                     (unsigned long long)(pd->cut.declared_data_end - pd->data_offset), (unsigned long long)pd->size);
}

/* pd->cut.note: one line saying what was cut and where, as perf's warnings do; "" if nothing was. */
static void write_cut_note(fu_perf_data *pd)
{
    fu_perf_cut *cut = &pd->cut;
    char *out = cut->note;
    size_t room = sizeof cut->note, n = 0;
    unsigned missing = 0;
    for (int i = 0; i < FU_PERF_HEADER_FEAT_BITS / 64; i++)
        missing += popcount64(cut->missing_features[i]);
#define NOTE(...)                                                                                        \
    do {                                                                                                 \
        int w = n < room ? snprintf(out + n, room - n, __VA_ARGS__) : 0;                                 \
        n += w > 0 ? (size_t)w : 0;                                                                      \
    } while (0)
    if (cut->unterminated)
        NOTE("perf.data+0x30: data size is 0: the recording was not properly terminated (perf record killed?); "
             "records read from 0x%llx to the file's end at 0x%llx", (unsigned long long)pd->data_offset,
             (unsigned long long)pd->size);
    else if (cut->truncated)
        NOTE("the file is truncated: it ends at 0x%llx, inside its data section [0x%llx, 0x%llx)",
             (unsigned long long)pd->size, (unsigned long long)pd->data_offset,
             (unsigned long long)cut->declared_data_end);
    else if (missing)
        NOTE("the file is truncated: it ends at 0x%llx, before some of its feature sections",
             (unsigned long long)pd->size);
    else if (cut->dropped_present)
        NOTE("the stream ends inside a record");
    if (cut->dropped_present && cut->dropped_size)
        NOTE("; the incomplete record at 0x%llx (0x%llx of its 0x%llx bytes) was dropped",
             (unsigned long long)cut->dropped_offset, (unsigned long long)cut->dropped_present,
             (unsigned long long)cut->dropped_size);
    else if (cut->dropped_present)
        NOTE("; the incomplete record at 0x%llx (0x%llx bytes of its header) was dropped",
             (unsigned long long)cut->dropped_offset, (unsigned long long)cut->dropped_present);
    if (cut->dropped_stream_bytes)
        NOTE("; 0x%llx bytes of an incomplete compressed record were dropped",
             (unsigned long long)cut->dropped_stream_bytes);
    if (missing)
        NOTE("; %u feature section%s absent", missing, missing == 1 ? "" : "s");
#undef NOTE
}

/* ---- entry points --------------------------------------------------------------------------------- */

fu_status fu_perf_data_parse(fu_perf_data *pd, const uint8_t *data, uint64_t size,
                             const fu_perf_options *options, fu_error *err)
{
    memset(pd, 0, sizeof *pd);
    pd->data = data;
    pd->size = size;
    err->status = FU_OK;
    err->message[0] = 0;
    parser p = {0};
    p.pd = pd;
    p.err = err;
    p.max_decompressed = options && options->max_decompressed ? options->max_decompressed
                                                               : FU_PERF_DEFAULT_MAX_DECOMPRESSED;
    fu_status s = read_file_header(&p);
    if (s == FU_OK)
        s = pass_framing(&p);
    if (s == FU_OK)
        s = pass_decode(&p);
    if (s == FU_OK)
        s = order_events(&p);
    if (s == FU_OK && (p.cut_file || pd->cut.dropped_present) && pd->sample_count == 0)
        s = nothing_usable(&p);
    if (s == FU_OK)
        write_cut_note(pd);
    free(p.compressed_ends);
    return s;
}

static void free_blocks(struct fu_perf_block *b)
{
    while (b) {
        struct fu_perf_block *next = b->next;
        free(b);
        b = next;
    }
}

void fu_perf_data_free(fu_perf_data *pd)
{
    if (!pd->borrowed_header) {
        for (uint32_t i = 0; i < pd->attr_count; i++) {
            free(pd->attrs[i].ids);
            free(pd->attrs[i].name);
        }
        free(pd->attrs);
        free(pd->build_ids);
        free(pd->cmdline);
        if (pd->decompressed) {
            UNPOISON_ALL(pd);
            munmap(pd->decompressed, (size_t)pd->decompressed_mapped);
        }
        free(pd->id_map);
        free_blocks(pd->kept_records);
    }
    free(pd->samples);
    free(pd->mmaps);
    free(pd->comms);
    free(pd->tasks);
    free(pd->events);
    free_blocks(pd->aligned);
    memset(pd, 0, sizeof *pd);
}

/* ---- streaming (perf_data.h, "Streaming") ------------------------------------------------------- */

struct fu_perf_stream {
    fu_perf_data *pd;          /* the header, and the queue of records decoded but not delivered */
    int fd;
    bool mapped_file;          /* a regular file, mapped whole (file); otherwise read into the reservation */
    fu_mapped_file file;
    uint8_t *region;           /* the recording's bytes at their offsets */
    uint64_t region_size;      /* mapped or reserved bytes */
    uint64_t filled;           /* bytes of the recording in the region */
    bool eof;
    uint64_t pos, end;         /* the next record; the end of the data section (UINT64_MAX: a pipe's) */
    uint64_t released, decompressed_released; /* bytes below these have been given back */
    uint64_t release_to, decompressed_release_to; /* and below these they may be (stream_release) */
    ZSTD_DStream *zstream;
    uint64_t stream_pos;       /* the next record of the decompressed stream */
    uint64_t last_compressed;  /* offset of the last COMPRESSED record (for messages) */
    uint64_t last_time;        /* parser.last_time across calls */
    uint64_t max_time;         /* the largest sort key queued so far */
    uint64_t round_max;        /* max_time at the last FINISHED_ROUND */
    bool round_seen;
    uint64_t delivered_max;    /* the largest time delivered */
    bool delivered_any;
    size_t seen_events;        /* queued events already compared with max_time */
    uint64_t queued_from;      /* pos when the last window was cut: the queue's bytes are pos - this */
    uint64_t window_bytes, max_decompressed, out_of_order;
    size_t samples_delivered; /* in the windows cut so far (a cut recording needs one) */
    bool finished;
    /* The next window, cut by a thread while the caller works on the last one (decode_ahead):
     * its result waits here until fu_perf_stream_next takes it. */
    bool decode_ahead, ahead_running, ahead_ready, ahead_done;
    bool executable_mmaps_only;
    pthread_t ahead_thread;
    pthread_mutex_t ahead_lock; /* held by whoever joins ahead_thread (fu_perf_stream_wait) */
    fu_perf_data ahead;
    fu_status ahead_status;
    fu_error ahead_error;
};

static parser stream_parser(fu_perf_stream *st, fu_error *err)
{
    parser p = {0};
    p.pd = st->pd;
    p.err = err;
    p.max_decompressed = st->max_decompressed;
    p.last_time = st->last_time;
    p.copy_header_records = !st->mapped_file;
    p.executable_mmaps_only = st->executable_mmaps_only;
    p.cut_file = st->pd->cut.unterminated || st->pd->cut.truncated; /* read_file_header found it */
    return p;
}

/* Read from a pipe until the region holds `want` bytes or the input ends. */
static fu_status stream_fill(fu_perf_stream *st, parser *p, uint64_t want)
{
    while (!st->eof && st->filled < want) {
        uint64_t room = st->region_size - st->filled;
        if (room == 0)
            return perf_fail(p, NULL, "a recording streamed in is longer than 0x%llx bytes: write it to a file "
                             "and read that", (unsigned long long)st->region_size);
        uint64_t n = want - st->filled < FU_PERF_STREAM_READ_BYTES ? FU_PERF_STREAM_READ_BYTES : want - st->filled;
        if (n > room)
            n = room;
        ssize_t r = read(st->fd, st->region + st->filled, (size_t)n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return perf_fail(p, NULL, "reading the recording at byte 0x%llx: %s", (unsigned long long)st->filled,
                             strerror(errno));
        }
        if (r == 0)
            st->eof = true;
        st->filled += (uint64_t)r;
    }
    st->pd->size = st->filled;
    return FU_OK;
}

static fu_status stream_record_bytes(fu_perf_stream *st, parser *p, uint64_t *limit);

fu_status fu_perf_stream_open(fu_perf_stream **stream, fu_perf_data *pd, int fd, uint64_t window_bytes,
                              const fu_perf_options *options, fu_error *err)
{
    memset(pd, 0, sizeof *pd);
    err->status = FU_OK;
    err->message[0] = 0;
    *stream = NULL;
    fu_perf_stream *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err->message, sizeof err->message, "out of memory reading perf.data");
        return err->status = FU_ERR_NOMEM;
    }
    st->pd = pd;
    st->fd = fd;
    pthread_mutex_init(&st->ahead_lock, NULL);
    st->window_bytes = window_bytes ? window_bytes : FU_PERF_DEFAULT_WINDOW_BYTES;
    st->max_decompressed = options && options->max_decompressed ? options->max_decompressed
                                                                 : FU_PERF_DEFAULT_MAX_DECOMPRESSED;
    *stream = st;
    parser p = stream_parser(st, err);
    struct stat info;
    if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0) {
        fu_error map_err = {0};
        fu_status s = fu_mapped_file_open(&st->file, fd, (size_t)info.st_size, false, &map_err);
        if (s == FU_ERR_NOMEM)
            return perf_nomem(&p);
        if (s != FU_OK)
            return perf_fail(&p, NULL, "cannot map the recording (%s)", map_err.message);
        /* read-ahead, pages dropped behind */
        (void)madvise((void *)st->file.data, st->file.size, MADV_SEQUENTIAL);
        st->mapped_file = true;
        st->region = (uint8_t *)st->file.data;
        st->region_size = st->filled = (uint64_t)info.st_size;
        st->eof = true;
        p.copy_header_records = false;
    } else {
        void *map = mmap(NULL, (size_t)FU_PERF_STREAM_MAX_BYTES, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map == MAP_FAILED)
            return perf_nomem(&p);
#ifdef MADV_HUGEPAGE
        (void)madvise(map, (size_t)FU_PERF_STREAM_MAX_BYTES, MADV_HUGEPAGE);
#endif
        st->region = map;
        st->region_size = FU_PERF_STREAM_MAX_BYTES;
        fu_status s = stream_fill(st, &p, PIPE_HEADER_SIZE);
        if (s != FU_OK)
            return s;
        /* a file-mode recording through a pipe: its features follow the data, so it is read whole */
        if (st->filled >= PIPE_HEADER_SIZE && load_u64(st->region + 8) != PIPE_HEADER_SIZE &&
            (s = stream_fill(st, &p, UINT64_MAX)) != FU_OK)
            return s;
    }
    pd->data = st->region;
    pd->size = st->filled;
    fu_status s = read_file_header(&p);
    if (s != FU_OK)
        return s;
    st->end = pd->pipe_mode ? UINT64_MAX : pd->data_offset + pd->data_size;
    st->pos = st->queued_from = pd->data_offset;
    /* A pipe's attrs and features are records at the start of its data: decode them now, so that the
     * header is known before the first window (up to the first kernel record or FINISHED_ROUND). */
    while (pd->pipe_mode) {
        uint64_t limit;
        if ((s = stream_record_bytes(st, &p, &limit)) != FU_OK)
            return s;
        if (limit - st->pos < 8)
            break;
        uint32_t type;
        memcpy(&type, st->region + st->pos, 4);
        if (type < FU_PERF_RECORD_HEADER_ATTR || type == FU_PERF_RECORD_FINISHED_ROUND ||
            type == FU_PERF_RECORD_COMPRESSED)
            break;
        origin at = at_file(st->pos);
        frame f;
        if ((s = read_frame(&p, st->region, st->pos, limit, &at, &f)) != FU_OK)
            return s;
        p.position = st->pos;
        if ((s = parse_record(&p, &at, &f, st->region + st->pos)) != FU_OK)
            return s;
        st->pos += f.total;
    }
    st->last_time = p.last_time;
    return FU_OK;
}

/* Make the whole record at st->pos readable (a pipe: read it in); the bytes available end at *limit. */
static fu_status stream_record_bytes(fu_perf_stream *st, parser *p, uint64_t *limit)
{
    fu_status s;
    if (!st->eof) {
        if ((s = stream_fill(st, p, st->pos + 16)) != FU_OK)
            return s;
        if (st->filled - st->pos >= 8) {
            const uint8_t *r = st->region + st->pos;
            uint32_t type = (uint32_t)r[0] | (uint32_t)r[1] << 8 | (uint32_t)r[2] << 16 | (uint32_t)r[3] << 24;
            uint64_t size = (uint64_t)(r[6] | r[7] << 8), payload = 0;
            if (type == FU_PERF_RECORD_HEADER_TRACING_DATA && st->filled - st->pos >= 12) {
                uint32_t n;
                memcpy(&n, r + 8, 4);
                payload = ((uint64_t)n + 7) & ~(uint64_t)7;
            } else if (type == FU_PERF_RECORD_AUXTRACE && st->filled - st->pos >= 16) {
                payload = load_u64(r + 8);
            }
            if (payload > FU_PERF_STREAM_MAX_BYTES)
                payload = FU_PERF_STREAM_MAX_BYTES; /* read_frame reports it */
            if ((s = stream_fill(st, p, st->pos + size + payload)) != FU_OK)
                return s;
        }
    }
    *limit = st->end < st->filled ? st->end : st->filled;
    return FU_OK;
}

/* Note the times of the events queued since the last call: the largest, and those older than a
 * delivered window's. */
static void stream_note_times(fu_perf_stream *st)
{
    const fu_perf_data *pd = st->pd;
    for (size_t i = st->seen_events; i < pd->event_count; i++) {
        uint64_t t = pd->events[i].time;
        if (t > st->max_time)
            st->max_time = t;
        if (st->delivered_any && t < st->delivered_max)
            st->out_of_order++;
    }
    st->seen_events = pd->event_count;
}

/* Decode records in file order until a window may be cut (*bound: the times it takes) or the data
 * end (*at_end). One record per iteration: bounded by the input. */
static fu_status stream_decode(fu_perf_stream *st, parser *p, bool *ready, uint64_t *bound, bool *at_end)
{
    fu_perf_data *pd = st->pd;
    for (;;) {
        uint64_t limit;
        fu_status s = stream_record_bytes(st, p, &limit);
        if (s != FU_OK)
            return s;
        /* the input's end (all its bytes read): a last record it cuts is dropped, as in a whole file */
        if (st->pos >= limit || (st->eof && cut_before(p, st->pos, limit))) {
            *at_end = true;
            return FU_OK;
        }
        origin at = at_file(st->pos);
        frame f;
        if ((s = read_frame(p, st->region, st->pos, limit, &at, &f)) != FU_OK)
            return s;
        if (f.type == FU_PERF_RECORD_COMPRESSED) {
            pd->stats.records++;
            /* the stream's decompressed bytes must not move: reserve the bound once (address space) */
            if (!pd->decompressed && !map_decompressed(pd, p->max_decompressed))
                return perf_nomem(p);
            s = decompress_record(p, &st->zstream, st->region + st->pos + 8, f.size - 8u, &at);
            if (s == FU_OK)
                s = decode_stream(p, &st->stream_pos, pd->decompressed_size, st->pos);
            st->last_compressed = st->pos;
        } else {
            p->position = st->pos;
            s = parse_record(p, &at, &f, st->region + st->pos);
        }
        if (s != FU_OK)
            return s;
        st->pos += f.total;
        stream_note_times(st);
        if (f.type == FU_PERF_RECORD_FINISHED_ROUND) {
            /* perf's OE_FLUSH__ROUND: what is older than the previous round's newest may go */
            bool had_round = st->round_seen;
            *bound = st->round_max;
            st->round_max = st->max_time;
            st->round_seen = true;
            if (had_round && st->pos - st->queued_from >= st->window_bytes) {
                *ready = true;
                return FU_OK;
            }
        }
    }
}

/* Whether `p` points into the recording's or the decompressed bytes (not into a copy). */
static bool in_stream_bytes(const fu_perf_stream *st, const void *p)
{
    const uint8_t *b = p;
    const fu_perf_data *pd = st->pd;
    return (b >= st->region && b < st->region + st->region_size) ||
           (pd->decompressed && b >= pd->decompressed && b < pd->decompressed + pd->decompressed_mapped);
}

/* Move the queued records with a time up to `bound` (all of them: `all`) into `w`, in time order;
 * the others stay queued. */
static fu_status stream_deliver(fu_perf_stream *st, parser *p, bool all, uint64_t bound, fu_perf_data *w)
{
    fu_perf_data *pd = st->pd;
    size_t n = pd->event_count;
    bool sorted = true;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = pd->events[i - 1].time <= pd->events[i].time;
    if (!sorted) {
        fu_perf_event *tmp = malloc(n * sizeof *tmp);
        if (!tmp)
            return perf_nomem(p);
        merge_sort(pd->events, tmp, n);
        free(tmp);
    }
    size_t k = n;
    if (!all)
        for (k = 0; k < n && pd->events[k].time <= bound;)
            k++;
    /* records of each kind on each side */
    size_t counts[2][5] = {{0}};
    for (size_t i = 0; i < n; i++)
        counts[i >= k][pd->events[i].kind < 5 ? pd->events[i].kind : 4]++;
    fu_perf_data rest = {0};
    fu_perf_data *side[2] = {w, &rest};
    for (int s = 0; s < 2; s++) {
        fu_perf_data *d = side[s];
        d->samples = malloc((counts[s][FU_PERF_EVENT_SAMPLE] + 1) * sizeof *d->samples);
        d->mmaps = malloc((counts[s][FU_PERF_EVENT_MMAP] + 1) * sizeof *d->mmaps);
        d->comms = malloc((counts[s][FU_PERF_EVENT_COMM] + 1) * sizeof *d->comms);
        d->tasks = malloc((counts[s][FU_PERF_EVENT_FORK] + counts[s][FU_PERF_EVENT_EXIT] + 1) * sizeof *d->tasks);
        d->events = malloc(((s ? n - k : k) + 1) * sizeof *d->events);
        if (!d->samples || !d->mmaps || !d->comms || !d->tasks || !d->events) {
            fu_perf_data_free(&rest);
            return perf_nomem(p);
        }
    }
    for (size_t i = 0; i < n; i++) {
        fu_perf_data *d = side[i >= k];
        fu_perf_event e = pd->events[i];
        switch (e.kind) {
        case FU_PERF_EVENT_SAMPLE:
            d->samples[d->sample_count] = pd->samples[e.index];
            d->samples[d->sample_count].index = (uint32_t)d->sample_count;
            e.index = (uint32_t)d->sample_count++;
            break;
        case FU_PERF_EVENT_MMAP:
            d->mmaps[d->mmap_count] = pd->mmaps[e.index];
            e.index = (uint32_t)d->mmap_count++;
            break;
        case FU_PERF_EVENT_COMM:
            d->comms[d->comm_count] = pd->comms[e.index];
            e.index = (uint32_t)d->comm_count++;
            break;
        default:
            d->tasks[d->task_count] = pd->tasks[e.index];
            e.index = (uint32_t)d->task_count++;
            break;
        }
        d->events[d->event_count++] = e;
    }
    /* realigned callchains: the window takes the arena; the queued ones are copied anew */
    w->aligned = pd->aligned;
    pd->aligned = NULL;
    for (size_t i = 0; i < rest.sample_count; i++) {
        fu_perf_sample *x = &rest.samples[i];
        if (!x->callchain_count || !x->callchain || in_stream_bytes(st, x->callchain))
            continue;
        struct fu_perf_block *b = arena_block(pd, (size_t)x->callchain_count);
        if (!b) {
            fu_perf_data_free(&rest);
            return perf_nomem(p);
        }
        memcpy(b->words + b->used, x->callchain, (size_t)x->callchain_count * 8);
        x->callchain = b->words + b->used;
        b->used += (size_t)x->callchain_count;
    }
    free(pd->samples);
    free(pd->mmaps);
    free(pd->comms);
    free(pd->tasks);
    free(pd->events);
    pd->samples = rest.samples;
    pd->sample_count = pd->sample_cap = rest.sample_count;
    pd->mmaps = rest.mmaps;
    pd->mmap_count = pd->mmap_cap = rest.mmap_count;
    pd->comms = rest.comms;
    pd->comm_count = pd->comm_cap = rest.comm_count;
    pd->tasks = rest.tasks;
    pd->task_count = pd->task_cap = rest.task_count;
    pd->events = rest.events;
    pd->event_count = pd->event_cap = rest.event_count;
    st->seen_events = pd->event_count;
    w->sample_cap = w->sample_count;
    w->mmap_cap = w->mmap_count;
    w->comm_cap = w->comm_count;
    w->task_cap = w->task_count;
    w->event_cap = w->event_count;
    if (k) {
        uint64_t last = w->events[k - 1].time;
        if (!st->delivered_any || last > st->delivered_max)
            st->delivered_max = last;
        st->delivered_any = true;
    }
    st->queued_from = st->pos;
    /* the stream's header, lent */
    w->borrowed_header = true;
    w->data = pd->data;
    w->size = pd->size;
    w->pipe_mode = pd->pipe_mode;
    w->data_offset = pd->data_offset;
    w->data_size = pd->data_size;
    memcpy(w->feature_bits, pd->feature_bits, sizeof w->feature_bits);
    w->attrs = pd->attrs;
    w->attr_count = w->attr_cap = pd->attr_count;
    w->build_ids = pd->build_ids;
    w->kept_records = pd->kept_records;
    w->build_id_count = w->build_id_cap = pd->build_id_count;
    w->cmdline = pd->cmdline;
    w->cmdline_count = pd->cmdline_count;
    w->decompressed = pd->decompressed;
    w->decompressed_size = pd->decompressed_size;
    w->decompressed_mapped = pd->decompressed_mapped;
    w->compression_type = pd->compression_type;
    w->compression_level = pd->compression_level;
    w->compression_mmap_len = pd->compression_mmap_len;
    return FU_OK;
}

/* Mark the pages below every queued record, the window about to be handed out and the decoder
 * (the window before is done with) to be given back (stream_give_back). */
static void stream_release(fu_perf_stream *st, const fu_perf_data *window)
{
    const fu_perf_data *pd = st->pd;
    uint64_t low = st->pos, decompressed_low = st->stream_pos;
    for (size_t i = 0; i < pd->event_count + window->event_count; i++) {
        uint64_t at = i < pd->event_count ? pd->events[i].position : window->events[i - pd->event_count].position;
        if (at & FU_PERF_POSITION_DECOMPRESSED) {
            at &= ~FU_PERF_POSITION_DECOMPRESSED;
            decompressed_low = at < decompressed_low ? at : decompressed_low;
        } else {
            low = at < low ? at : low;
        }
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    low = low / page * page;
    if (low > st->filled)
        low = st->filled / page * page;
    st->release_to = low > st->release_to ? low : st->release_to;
    decompressed_low = decompressed_low / page * page;
    st->decompressed_release_to = decompressed_low > st->decompressed_release_to ? decompressed_low
                                                                                  : st->decompressed_release_to;
}

/* Give back what stream_release marked. Zapping the page tables of a mapped file costs ~4 ms per
 * 100 MB (hackbench-processes.data, perf record of a run): the decode-ahead thread does it before
 * it decodes (and may move pd->decompressed), not the caller walking the window. */
static void stream_give_back(fu_perf_stream *st)
{
    const fu_perf_data *pd = st->pd;
    if (st->release_to > st->released) {
        (void)madvise(st->region + st->released, (size_t)(st->release_to - st->released), MADV_DONTNEED);
        st->released = st->release_to;
    }
    if (pd->decompressed && st->decompressed_release_to > st->decompressed_released) {
        (void)madvise(pd->decompressed + st->decompressed_released,
                      (size_t)(st->decompressed_release_to - st->decompressed_released), MADV_DONTNEED);
        st->decompressed_released = st->decompressed_release_to;
    }
}

/* Cut the next window (decode, sort, deliver); no bytes are given back here. */
static fu_status stream_cut(fu_perf_stream *st, fu_perf_data *window, bool *done, fu_error *err)
{
    *done = false;
    err->status = FU_OK;
    err->message[0] = 0;
    memset(window, 0, sizeof *window);
    parser p = stream_parser(st, err);
    /* one window cut (or the end) per iteration; each decodes at least one record or ends */
    for (;;) {
        if (st->finished) {
            *done = true;
            return FU_OK;
        }
        bool ready = false, at_end = false;
        uint64_t bound = 0;
        fu_status s = stream_decode(st, &p, &ready, &bound, &at_end);
        st->last_time = p.last_time;
        if (s != FU_OK)
            return s;
        if (at_end) {
            fu_perf_data *pd = st->pd;
            bool cut = p.cut_file || pd->cut.dropped_present;
            if (st->stream_pos != pd->decompressed_size) {
                if (!cut) {
                    origin at = {st->last_compressed, true, st->stream_pos};
                    return perf_fail(&p, &at, "the compressed stream ends inside a record (0x%llx bytes left over)",
                                     (unsigned long long)(pd->decompressed_size - st->stream_pos));
                }
                pd->cut.dropped_stream_bytes = pd->decompressed_size - st->stream_pos;
            }
            st->finished = true;
            write_cut_note(pd);
            s = pd->event_count ? stream_deliver(st, &p, true, 0, window) : FU_OK;
            *done = s == FU_OK && window->event_count == 0;
            st->samples_delivered += window->sample_count;
            if (s == FU_OK && cut && st->samples_delivered == 0)
                s = nothing_usable(&p);
            return s;
        }
        if ((s = stream_deliver(st, &p, false, bound, window)) != FU_OK)
            return s;
        st->samples_delivered += window->sample_count;
        if (window->event_count)
            return FU_OK;
        fu_perf_data_free(window);
    }
}

static void *stream_cut_thread(void *stream)
{
    fu_perf_stream *st = stream;
    stream_give_back(st);
    st->ahead_status = stream_cut(st, &st->ahead, &st->ahead_done, &st->ahead_error);
    return NULL;
}

void fu_perf_stream_wait(fu_perf_stream *st)
{
    if (!st)
        return;
    pthread_mutex_lock(&st->ahead_lock);
    if (st->ahead_running) {
        pthread_join(st->ahead_thread, NULL);
        st->ahead_running = false;
        st->ahead_ready = true;
    }
    pthread_mutex_unlock(&st->ahead_lock);
}

void fu_perf_stream_decode_ahead(fu_perf_stream *st, bool on) { st->decode_ahead = on; }

void fu_perf_stream_executable_mmaps_only(fu_perf_stream *st, bool on) { st->executable_mmaps_only = on; }

fu_status fu_perf_stream_check(const fu_perf_stream *st, fu_error *err)
{
    return st->mapped_file ? fu_mapped_file_check(&st->file, "perf.data", err) : FU_OK;
}

fu_status fu_perf_stream_next(fu_perf_stream *st, fu_perf_data *window, bool *done, fu_error *err)
{
    fu_perf_stream_wait(st);
    if (!st->ahead_ready) {
        st->ahead_status = stream_cut(st, &st->ahead, &st->ahead_done, &st->ahead_error);
        st->ahead_ready = true;
    }
    fu_status status = st->ahead_status;
    if (fu_perf_stream_check(st, &st->ahead_error) != FU_OK)
        status = FU_ERR_FILE_CHANGED; /* any other failure came from its zeros */
    *window = st->ahead;
    *done = st->ahead_done;
    *err = st->ahead_error;
    memset(&st->ahead, 0, sizeof st->ahead);
    st->ahead_ready = false;
    if (status != FU_OK)
        return status;
    stream_release(st, window);
    /* the next window is cut while the caller works on this one (a pipe's reading included) */
    if (!*done && st->decode_ahead && !st->finished &&
        pthread_create(&st->ahead_thread, NULL, stream_cut_thread, st) == 0)
        st->ahead_running = true;
    else
        stream_give_back(st);
    return FU_OK;
}

uint64_t fu_perf_stream_out_of_order(const fu_perf_stream *st) { return st->out_of_order; }

void fu_perf_stream_free(fu_perf_stream *st)
{
    if (!st)
        return;
    fu_perf_stream_wait(st);
    fu_perf_data_free(&st->ahead);
    if (st->zstream)
        ZSTD_freeDStream(st->zstream);
    if (st->mapped_file)
        fu_mapped_file_close(&st->file);
    else if (st->region)
        munmap(st->region, (size_t)st->region_size);
    pthread_mutex_destroy(&st->ahead_lock);
    free(st);
}
