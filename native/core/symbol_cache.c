/* symbol_cache: symbol tables written as files and used in place (see symbol_cache.h). */
#include "symbol_cache.h"

#include <stdbool.h>
#include <string.h>

static const char magic[8] = {'F', 'U', 'S', 'Y', 'M', 'T', 'A', 'B'};

enum { FLAG_BOUNDED = 1, FLAG_USABLE = 2, FLAG_DEMANGLE = 4, KNOWN_FLAGS = 7 };

static size_t padded(size_t n) { return (n + 7) & ~(size_t)7; }

typedef struct header {
    char magic[8];
    uint32_t version, flags;
    uint64_t count, names_size;
    uint32_t key_size, zero;
} header;

_Static_assert(sizeof(header) == FU_SYMBOL_CACHE_HEADER_SIZE, "the header's layout is the file's");

/* The file's size for a table of `count` symbols: every part's size is bounded (count by
 * FU_MAX_SYMBOLS, names by 4 GiB, the key by FU_SYMBOL_CACHE_MAX_KEY), so nothing overflows. */
static size_t file_size(size_t key_size, size_t count, bool bounded, size_t names_size)
{
    return FU_SYMBOL_CACHE_HEADER_SIZE + padded(key_size) + count * 8 * (bounded ? 2 : 1) + count * 8 +
           padded(names_size);
}

fu_status fu_symbol_cache_write(const fu_symbol_table *t, const uint8_t *key, size_t key_size, fu_buffer *out,
                                fu_error *err)
{
    if (key_size > FU_SYMBOL_CACHE_MAX_KEY)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache key of %zu bytes (at most %d)", key_size,
                       FU_SYMBOL_CACHE_MAX_KEY);
    size_t names_size = 0; /* the names end where the last one in the names ends */
    for (size_t i = 0; i < t->count; i++) {
        size_t end = (size_t)t->name_offsets[i] + t->name_lengths[i];
        names_size = end > names_size ? end : names_size;
    }
    header h = {.version = FU_SYMBOL_CACHE_VERSION, .count = t->count, .names_size = names_size,
                .key_size = (uint32_t)key_size,
                .flags = (t->bounded ? FLAG_BOUNDED : 0) | (t->usable ? FLAG_USABLE : 0) |
                         (t->demangle ? FLAG_DEMANGLE : 0)};
    memcpy(h.magic, magic, sizeof magic);
    static const uint8_t zeros[8];
    size_t n = t->count, before = out->len;
    if (!fu_buffer_reserve(out, file_size(key_size, n, t->bounded, names_size)) ||
        !fu_buffer_append(out, &h, sizeof h) || !fu_buffer_append(out, key, key_size) ||
        !fu_buffer_append(out, zeros, padded(key_size) - key_size) || !fu_buffer_append(out, t->starts, 8 * n) ||
        (t->bounded && !fu_buffer_append(out, t->ends, 8 * n)) || !fu_buffer_append(out, t->name_offsets, 4 * n) ||
        !fu_buffer_append(out, t->name_lengths, 4 * n) || !fu_buffer_append(out, t->names, names_size) ||
        !fu_buffer_append(out, zeros, padded(names_size) - names_size)) {
        out->len = before;
        return fu_fail(err, FU_ERR_NOMEM, "out of memory writing a symbol cache of %zu symbols", n);
    }
    return FU_OK;
}

static bool continuation_byte(uint8_t b) { return (b & 0xc0) == 0x80; }

/* The table's invariants (symbols.h), on arrays read from a file. */
static fu_status check_table(const fu_symbol_table *t, size_t names_size, fu_error *err)
{
    const uint8_t *names = (const uint8_t *)t->names;
    for (size_t i = 0; i < t->count; i++) {
        if (i > 0 && t->starts[i] <= t->starts[i - 1])
            return fu_fail(err, FU_ERR_INVALID, "symbol cache: symbol %zu does not start above the one before", i);
        if (t->bounded && t->ends[i] < t->starts[i])
            return fu_fail(err, FU_ERR_INVALID, "symbol cache: symbol %zu ends below its start", i);
        size_t at = t->name_offsets[i], len = t->name_lengths[i];
        if (len > FU_MAX_SYMBOL_NAME || at > names_size || len > names_size - at)
            return fu_fail(err, FU_ERR_INVALID, "symbol cache: name %zu at 0x%zx+0x%zx outside the 0x%zx bytes of names",
                           i, at, len, names_size);
        /* the names are checked as one text below: a name is valid UTF-8 if, besides, it neither
         * starts nor ends inside a sequence */
        if ((len && continuation_byte(names[at])) || (at + len < names_size && continuation_byte(names[at + len])))
            return fu_fail(err, FU_ERR_INVALID, "symbol cache: name %zu is not UTF-8", i);
    }
    if (!fu_utf8_valid(t->names, names_size))
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: names are not UTF-8");
    return FU_OK;
}

fu_status fu_symbol_cache_load(const uint8_t *data, size_t size, const uint8_t *key, size_t key_size,
                               fu_symbol_table *out, fu_error *err)
{
    memset(out, 0, sizeof *out);
    header h;
    if ((uintptr_t)data % 8)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: data not 8-byte aligned");
    if (size < sizeof h)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: %zu bytes, shorter than its header", size);
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, magic, sizeof magic) != 0)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: not a symbol cache file");
    if (h.version != FU_SYMBOL_CACHE_VERSION || (h.flags & ~(uint32_t)KNOWN_FLAGS) || h.zero)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: version %u, flags 0x%x (this is version %d)", h.version,
                       h.flags, FU_SYMBOL_CACHE_VERSION);
    if (h.key_size != key_size || h.key_size > size - sizeof h || memcmp(data + sizeof h, key, key_size) != 0)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: built for another file");
    if (h.count > FU_MAX_SYMBOLS || h.names_size > UINT32_MAX)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: %llu symbols, 0x%llx bytes of names",
                       (unsigned long long)h.count, (unsigned long long)h.names_size);
    bool bounded = h.flags & FLAG_BOUNDED;
    size_t n = (size_t)h.count;
    if (file_size(key_size, n, bounded, (size_t)h.names_size) != size)
        return fu_fail(err, FU_ERR_INVALID, "symbol cache: %zu bytes, not the %zu its header declares", size,
                       file_size(key_size, n, bounded, (size_t)h.names_size));
    const uint8_t *p = data + sizeof h + padded(key_size);
    fu_symbol_table t = {.count = n, .bounded = bounded, .usable = h.flags & FLAG_USABLE,
                         .demangle = h.flags & FLAG_DEMANGLE, .borrowed = true};
    t.starts = (uint64_t *)p;
    p += 8 * n;
    if (bounded) {
        t.ends = (uint64_t *)p;
        p += 8 * n;
    }
    t.name_offsets = (uint32_t *)p;
    t.name_lengths = (uint32_t *)(p + 4 * n);
    t.names = (char *)(p + 8 * n);
    if (check_table(&t, (size_t)h.names_size, err) != FU_OK)
        return err->status;
    *out = t;
    return FU_OK;
}
