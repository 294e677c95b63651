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

/* ---- the table's text (commands/report.py) ---------------------------------------------------------- */

const fu_report_key fu_report_keys[FU_REPORT_KEY_COUNT] = {
    {"sym", "Symbol", FU_REPORT_SORT_SYM},
    {"dso", "Shared Object", FU_REPORT_SORT_DSO},
    {"comm", "Command", FU_REPORT_SORT_COMM},
    {"tid", "Pid/Tid", FU_REPORT_SORT_TID},
    {"srcline", "Source:Line", FU_REPORT_SORT_SRCLINE},
};

static const fu_report_key *key_of(unsigned flag)
{
    for (size_t k = 0; k < FU_REPORT_KEY_COUNT; k++)
        if (fu_report_keys[k].flag == flag)
            return &fu_report_keys[k];
    return NULL;
}

/* The bytes of the UTF-8 sequence at `p` (at most `left`), 0 if it is not a valid one: a character
 * of the text, where each byte of an invalid sequence is one (a name decoded as os.fsdecode decodes
 * it: a surrogate per byte). */
static size_t utf8_length(const unsigned char *p, size_t left, uint32_t *code)
{
    if (p[0] < 0x80) {
        *code = p[0];
        return 1;
    }
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    if (!n || n > left)
        return 0;
    uint32_t c = p[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *code = c;
    return n;
}

/* The bytes of the next character of `t` at `at` (an invalid byte: 1, with *code past Unicode). */
static size_t next_character(fu_text t, size_t at, uint32_t *code)
{
    size_t n = utf8_length((const unsigned char *)t.data + at, t.len - at, code);
    if (n)
        return n;
    *code = UINT32_MAX;
    return 1;
}

/* Python's len of the decoded text: its characters. */
static size_t characters(fu_text t)
{
    size_t count = 0;
    uint32_t code;
    for (size_t at = 0; at < t.len; count++) /* each step takes at least one byte */
        at += next_character(t, at, &code);
    return count;
}

/* Python's str.isspace of one character (its Unicode white space): what str.rstrip takes off. */
static bool python_space(uint32_t c)
{
    return (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* A line of the table: the numbers right-aligned, the keys but the last left-aligned (by
 * characters, as str.rjust and ljust), joined by two spaces; cut to `width` characters with "…"
 * when longer (width < 0: never), then stripped on the right as str.rstrip. */
static bool append_line(fu_buffer *text, const fu_text *cells, const size_t *widths, size_t columns, long width)
{
    size_t start = text->len;
    bool ok = true;
    for (size_t i = 0; ok && i < columns; i++) {
        bool last = i + 1 == columns, right = i < FU_REPORT_NUMERIC;
        size_t len = characters(cells[i]), pad = !last && len < widths[i] ? widths[i] - len : 0;
        for (size_t p = 0; ok && right && p < pad; p++)
            ok = fu_buffer_append(text, " ", 1);
        ok = ok && fu_buffer_append(text, cells[i].data, cells[i].len);
        for (size_t p = 0; ok && !right && p < pad; p++)
            ok = fu_buffer_append(text, " ", 1);
        ok = ok && (last || fu_buffer_append(text, "  ", 2));
    }
    if (!ok)
        return false;
    fu_text line = {(const char *)text->data + start, text->len - start};
    uint32_t code;
    if (width >= 0 && characters(line) > (size_t)width) {
        size_t at = 0;
        for (long kept = 0; kept + 1 < width; kept++)
            at += next_character(line, at, &code);
        text->len = start + at;
        if (!fu_buffer_append(text, "\xe2\x80\xa6", 3)) /* U+2026 */
            return false;
        line = (fu_text){(const char *)text->data + start, text->len - start};
    }
    /* the last character that is not white space ends the line */
    size_t end = 0;
    for (size_t at = 0, n; at < line.len; at += n) {
        n = next_character(line, at, &code);
        if (!python_space(code))
            end = at + n;
    }
    text->len = start + end;
    return fu_buffer_append(text, "\n", 1);
}

/* A row's cell of key `flag` (the DSO by its base name, as perf's short name; a pid/tid in `scratch`). */
static fu_text key_cell(const fu_report *r, const fu_report_entry *e, unsigned flag, char scratch[32])
{
    fu_text none = {"", 0};
    switch (flag) {
    case FU_REPORT_SORT_SYM:
        return e->function == FU_INTERN_NONE ? none : fu_report_text(r, fu_report_function_at(r, e->function)->name);
    case FU_REPORT_SORT_DSO: {
        if (e->dso == FU_INTERN_NONE)
            return none;
        fu_text module = fu_report_text(r, e->dso); /* os.path.basename, or the whole when that is "" */
        size_t slash = module.len;
        while (slash > 0 && module.data[slash - 1] != '/')
            slash--;
        return slash > 0 && slash < module.len ? (fu_text){module.data + slash, module.len - slash} : module;
    }
    case FU_REPORT_SORT_COMM: return e->comm == FU_INTERN_NONE ? none : fu_report_text(r, e->comm);
    case FU_REPORT_SORT_SRCLINE: return e->srcline == FU_INTERN_NONE ? none : fu_report_text(r, e->srcline);
    default: snprintf(scratch, 32, "%d/%d", (int)e->pid, (int)e->tid); return (fu_text){scratch, strlen(scratch)};
    }
}

/* A row's cells: Self and Total as percentages of `samples` (Python's f"{100 * n / samples:.2f}%",
 * which for counts below 2^53 is this double's rounding), the counts, the keys' cells. */
static void row_cells(const fu_report *r, const fu_report_entry *e, uint64_t samples, const unsigned *keys,
                      size_t key_count, char numbers[FU_REPORT_NUMERIC][32], char scratch[32], fu_text *cells)
{
    snprintf(numbers[0], 32, "%.2f%%", (double)(100 * e->self) / (double)samples);
    snprintf(numbers[1], 32, "%.2f%%", (double)(100 * e->total) / (double)samples);
    snprintf(numbers[2], 32, "%" PRIu64, e->self);
    snprintf(numbers[3], 32, "%" PRIu64, e->total);
    for (int i = 0; i < FU_REPORT_NUMERIC; i++)
        cells[i] = (fu_text){numbers[i], strlen(numbers[i])};
    for (size_t k = 0; k < key_count; k++)
        cells[FU_REPORT_NUMERIC + k] = key_cell(r, e, keys[k], scratch);
}

/* One table: "# TITLE, sorted by self|total samples (--sort KEYS)", "#", the heading, the rows
 * (entries `rows[0..n)`, percentages of `samples`). */
static bool write_one_table(const fu_report *r, const uint32_t *rows, size_t n, uint64_t samples, const unsigned *keys,
                            size_t key_count, bool by_total, long width, fu_text title, fu_buffer *out)
{
    static const char *const numeric[FU_REPORT_NUMERIC] = {"Self", "Total", "Self n", "Total n"};
    size_t columns = FU_REPORT_NUMERIC + key_count;
    fu_text cells[FU_REPORT_NUMERIC + FU_REPORT_KEY_COUNT];
    size_t widths[FU_REPORT_NUMERIC + FU_REPORT_KEY_COUNT];
    char numbers[FU_REPORT_NUMERIC][32], scratch[32], first[40];
    for (size_t i = 0; i < columns; i++) {
        const char *heading = i < FU_REPORT_NUMERIC ? numeric[i] : key_of(keys[i - FU_REPORT_NUMERIC])->heading;
        cells[i] = (fu_text){heading, strlen(heading)};
        widths[i] = cells[i].len;
    }
    for (size_t row = 0; row < n; row++) {
        fu_text line[FU_REPORT_NUMERIC + FU_REPORT_KEY_COUNT];
        row_cells(r, fu_report_entry_at(r, rows[row]), samples, keys, key_count, numbers, scratch, line);
        for (size_t i = 0; i < columns; i++) {
            size_t len = characters(line[i]);
            if (len > widths[i])
                widths[i] = len;
        }
    }
    bool ok = fu_buffer_append(out, "# ", 2) && fu_buffer_append(out, title.data, title.len);
    const char *sorted = by_total ? ", sorted by total samples (--sort " : ", sorted by self samples (--sort ";
    ok = ok && fu_buffer_append(out, sorted, strlen(sorted));
    for (size_t k = 0; ok && k < key_count; k++) {
        const char *name = key_of(keys[k])->name;
        ok = (k == 0 || fu_buffer_append(out, ",", 1)) && fu_buffer_append(out, name, strlen(name));
    }
    ok = ok && fu_buffer_append(out, ")\n#\n", 4);
    /* the heading: "#" then "Self" right-aligned to the column's width less one */
    snprintf(first, sizeof first, "#%*s", (int)(widths[0] > 1 ? widths[0] - 1 : 0), numeric[0]);
    cells[0] = (fu_text){first, strlen(first)};
    ok = ok && append_line(out, cells, widths, columns, width);
    for (size_t row = 0; ok && row < n; row++) {
        row_cells(r, fu_report_entry_at(r, rows[row]), samples, keys, key_count, numbers, scratch, cells);
        ok = append_line(out, cells, widths, columns, width);
    }
    return ok;
}

/* The layout's keys each known and once, at least one. */
static fu_status check_layout(const fu_report_layout *layout, fu_error *err)
{
    unsigned seen = 0;
    if (layout->key_count == 0 || layout->key_count > FU_REPORT_KEY_COUNT)
        return fu_fail(err, FU_ERR_INVALID, "a report's table has 1 to %d sort keys, not %zu", FU_REPORT_KEY_COUNT,
                       layout->key_count);
    for (size_t k = 0; k < layout->key_count; k++) {
        if (!key_of(layout->keys[k]) || (seen & layout->keys[k]))
            return fu_fail(err, FU_ERR_INVALID, "sort key 0x%x unknown or repeated", layout->keys[k]);
        seen |= layout->keys[k];
    }
    return FU_OK;
}

/* The entries in the table's order (fu_report_order) in a new array of `*n`; NULL if out of memory. */
static uint32_t *ordered(const fu_report *r, bool by_total, size_t *n)
{
    uint32_t *order = malloc((fu_report_entry_count(r) + 1) * sizeof *order);
    *n = order ? fu_report_order(r, by_total, order) : SIZE_MAX;
    if (*n == SIZE_MAX) {
        free(order);
        return NULL;
    }
    return order;
}

fu_status fu_report_write_table(const fu_report *r, const fu_report_layout *layout, fu_text source, fu_buffer *out,
                                fu_error *err)
{
    if (check_layout(layout, err) != FU_OK)
        return err->status;
    if (r->samples == 0)
        return fu_fail(err, FU_ERR_INVALID, "a report without samples has no table");
    size_t n;
    uint32_t *order = ordered(r, layout->by_total, &n);
    if (!order)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the report's order");
    if (layout->limit >= 0 && (uint64_t)layout->limit < n)
        n = (size_t)layout->limit;
    fu_buffer title = {0};
    char count[32];
    snprintf(count, sizeof count, "%" PRIu64 " samples of ", r->samples);
    bool ok = fu_buffer_append(&title, count, strlen(count)) && fu_buffer_append(&title, source.data, source.len) &&
              write_one_table(r, order, n, r->samples, layout->keys, layout->key_count, layout->by_total, layout->width,
                              (fu_text){(const char *)title.data, title.len}, out);
    free(title.data);
    free(order);
    return ok ? FU_OK : fu_fail(err, FU_ERR_NOMEM, "out of memory for the report's table");
}

/* Threads by (pid, tid), then by position: each thread's rows together, in the table's order. */
typedef struct thread_row {
    int32_t pid, tid;
    size_t position;
} thread_row;

static int by_thread_then_position(const void *a, const void *b)
{
    const thread_row *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->position < y->position ? -1 : x->position > y->position;
}

/* Most samples first, then in order of the thread's first row (a stable sort by samples). */
static int by_samples_then_first_row(const void *a, const void *b)
{
    const fu_report_thread *x = a, *y = b;
    if (x->samples != y->samples)
        return x->samples > y->samples ? -1 : 1;
    return x->first_position < y->first_position ? -1 : x->first_position > y->first_position;
}

fu_status fu_report_threads(const fu_report *r, bool by_total, uint32_t **rows, fu_report_thread **threads,
                            size_t *thread_count, fu_error *err)
{
    *rows = NULL;
    *threads = NULL;
    *thread_count = 0;
    size_t n;
    uint32_t *order = ordered(r, by_total, &n);
    thread_row *by_thread = malloc((n + 1) * sizeof *by_thread);
    fu_report_thread *found = malloc((n + 1) * sizeof *found);
    uint32_t *grouped = malloc((n + 1) * sizeof *grouped);
    if (!order || !by_thread || !found || !grouped) {
        free(order);
        free(by_thread);
        free(found);
        free(grouped);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the report's threads");
    }
    for (size_t i = 0; i < n; i++) {
        const fu_report_entry *e = fu_report_entry_at(r, order[i]);
        by_thread[i] = (thread_row){e->pid, e->tid, i};
    }
    qsort(by_thread, n, sizeof *by_thread, by_thread_then_position);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        const fu_report_entry *e = fu_report_entry_at(r, order[by_thread[i].position]);
        grouped[i] = order[by_thread[i].position];
        if (i == 0 || by_thread[i].pid != by_thread[i - 1].pid || by_thread[i].tid != by_thread[i - 1].tid)
            found[count++] = (fu_report_thread){.pid = e->pid, .tid = e->tid, .comm = e->comm,
                                                .first_position = by_thread[i].position, .first = i};
        found[count - 1].samples += e->self;
        found[count - 1].count++;
    }
    qsort(found, count, sizeof *found, by_samples_then_first_row);
    free(order);
    free(by_thread);
    *rows = grouped;
    *threads = found;
    *thread_count = count;
    return FU_OK;
}

fu_status fu_report_write_threads(const fu_report *threads, const fu_report_layout *layout, fu_buffer *out,
                                  fu_error *err)
{
    if (check_layout(layout, err) != FU_OK)
        return err->status;
    /* a section's keys: the layout's but comm and tid (the section's title names the thread), or sym */
    unsigned keys[FU_REPORT_KEY_COUNT];
    size_t key_count = 0;
    for (size_t k = 0; k < layout->key_count; k++)
        if (!(layout->keys[k] & (FU_REPORT_SORT_COMM | FU_REPORT_SORT_TID)))
            keys[key_count++] = layout->keys[k];
    if (!key_count)
        keys[key_count++] = FU_REPORT_SORT_SYM;
    uint32_t *rows;
    fu_report_thread *sections;
    size_t count;
    if (fu_report_threads(threads, layout->by_total, &rows, &sections, &count, err) != FU_OK)
        return err->status;
    fu_buffer title = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < count; i++) {
        const fu_report_thread *t = &sections[i];
        fu_text comm = t->comm == FU_INTERN_NONE ? (fu_text){"", 0} : fu_report_text(threads, t->comm);
        char numbers[128];
        size_t n = layout->limit >= 0 && (uint64_t)layout->limit < t->count ? (size_t)layout->limit : t->count;
        snprintf(numbers, sizeof numbers, " %d/%d: %" PRIu64 " samples (%.2f%% of %" PRIu64 ")", (int)t->pid,
                 (int)t->tid, t->samples, (double)(100 * t->samples) / (double)threads->samples, threads->samples);
        title.len = 0;
        ok = fu_buffer_append(out, "\n", 1) && fu_buffer_append(&title, "thread ", 7) &&
             fu_buffer_append(&title, comm.data, comm.len) && fu_buffer_append(&title, numbers, strlen(numbers)) &&
             write_one_table(threads, rows + t->first, n, t->samples, keys, key_count, layout->by_total,
                             layout->width, (fu_text){(const char *)title.data, title.len}, out);
    }
    free(title.data);
    free(rows);
    free(sections);
    return ok ? FU_OK : fu_fail(err, FU_ERR_NOMEM, "out of memory for the report's thread tables");
}
