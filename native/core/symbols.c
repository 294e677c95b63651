/* symbols: function symbol tables for symbolization, built and searched in C (see symbols.h; the
 * Python type fastunwind._core.SymbolTable is py/py_symbols.c). */
#include "symbols.h"

#include <elf.h> /* STT_*, SHN_*, STB_* */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "elf_file.h"
#include "buffer.h"
#include "perf_map.h"

/* section_flags bit: the section's name contains "text" (perf's elf_sec__filter for labels) */
#define SECTION_TEXT 1
/* perf's end for a last zero-sized symbol: the page after the one it starts in */
#define LAST_SYMBOL_PAGE 4096

bool fu_symbol_find(const fu_symbol_table *table, uint64_t address, size_t *index)
{
    if (!table->usable || table->count == 0 || address < table->starts[0])
        return false;
    size_t lo = 0, hi = table->count; /* the answer is the last start <= address, in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (table->starts[mid] <= address)
            lo = mid;
        else
            hi = mid;
    }
    /* perf's symbols__find: [start, end), and a symbol with end == start holds its start */
    if (table->bounded && address >= table->ends[lo] && address != table->starts[lo])
        return false;
    *index = lo;
    return true;
}

/* Marks a name that demangling left as it is (its display name is the stored one). */
static char not_mangled;

const char *fu_symbol_name(const fu_symbol_table *table, size_t index, size_t *len)
{
    const char *raw = table->names + table->name_offsets[index];
    *len = table->name_lengths[index];
    if (!table->demangle || !fu_maybe_mangled(raw, *len))
        return raw;
    /* the cache is filled on first use: a table is built once and read by one thread (the GIL) */
    fu_symbol_table *t = (fu_symbol_table *)table;
    if (!t->plain && !(t->plain = calloc(t->count, sizeof *t->plain)))
        return raw;
    if (!t->plain_lengths && !(t->plain_lengths = calloc(t->count, sizeof *t->plain_lengths)))
        return raw;
    if (!t->plain[index]) {
        size_t n = 0;
        char *plain = fu_demangle(raw, *len, &n);
        t->plain[index] = plain && n <= UINT32_MAX ? plain : &not_mangled;
        if (t->plain[index] == &not_mangled)
            free(plain);
        else
            t->plain_lengths[index] = (uint32_t)n;
    }
    if (t->plain[index] == &not_mangled)
        return raw;
    *len = t->plain_lengths[index];
    return t->plain[index];
}

void fu_symbol_table_free(fu_symbol_table *t)
{
    for (size_t i = 0; t->plain && i < t->count; i++)
        if (t->plain[i] != &not_mangled)
            free(t->plain[i]);
    free(t->plain);
    free(t->plain_lengths);
    if (t->borrowed) { /* the arrays are a cache file's (symbol_cache.h) */
        memset(t, 0, sizeof *t);
        return;
    }
    free(t->starts);
    free(t->ends);
    free(t->name_offsets);
    free(t->name_lengths);
    free(t->names);
    memset(t, 0, sizeof *t);
}

static bool is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}


/* A candidate symbol: where its name is, and what decides between aliases. */
typedef struct candidate {
    uint64_t value, size, end;
    const char *name;     /* into the caller's string table (or `synthetic_names`), alive during construction */
    uint32_t name_len;
    uint32_t order;       /* position among all candidates: the tie-break, and kallsyms' file order */
    uint8_t bind;
    bool synthetic;       /* a PLT stub: its name is at name_offset in the synthesized names */
    bool plain_known;     /* plain_len and underscores computed (for choose_best) */
    uint32_t name_offset;
    size_t plain_len, underscores;
} candidate;

/* A candidate's sort key: (value, order), then its index in the array being sorted. */
typedef struct sort_key {
    uint64_t value;
    uint64_t order_index; /* order << 32 | index */
} sort_key;

/* The byte of `key` that LSD pass `pass` sorts by: the order's 4 bytes (the minor key), then the
 * value's 8. */
static inline unsigned key_byte(const sort_key *key, unsigned pass)
{
    return pass < 4 ? (unsigned)(key->order_index >> (32 + 8 * pass)) & 0xff
                    : (unsigned)(key->value >> (8 * (pass - 4))) & 0xff;
}

#define SORT_PASSES 12

/* Sort the candidates of `cands` by (value, order): an LSD radix sort of their 16-byte keys (the
 * passes over bytes that every key shares skipped: most of a value's high bytes), then one
 * permutation of the 72-byte candidates. A symbol table of 34k symbols (libLLVM-14's .dynsym)
 * sorts in a tenth of qsort's time, which was half of building the table. */
static bool sort_candidates(fu_buffer *cands, fu_error *err)
{
    size_t n = cands->len / sizeof(candidate);
    if (n < 2)
        return true;
    candidate *c = (candidate *)cands->data;
    sort_key *keys = malloc(2 * n * sizeof *keys);
    candidate *sorted = malloc(n * sizeof *sorted);
    uint32_t(*counts)[256] = calloc(SORT_PASSES, sizeof *counts);
    if (!keys || !sorted || !counts) {
        free(keys);
        free(sorted);
        free(counts);
        fu_fail(err, FU_ERR_NOMEM, "out of memory sorting %zu symbols", n);
        return false;
    }
    sort_key *from = keys, *to = keys + n;
    for (size_t i = 0; i < n; i++) { /* n <= FU_MAX_SYMBOLS < 2^32 */
        from[i] = (sort_key){c[i].value, (uint64_t)c[i].order << 32 | i};
        for (unsigned pass = 0; pass < SORT_PASSES; pass++)
            counts[pass][key_byte(&from[i], pass)]++;
    }
    for (unsigned pass = 0; pass < SORT_PASSES; pass++) {
        if (counts[pass][key_byte(&from[0], pass)] == n)
            continue; /* every key has this byte: the pass would change nothing */
        uint32_t next[256], at = 0;
        for (unsigned b = 0; b < 256; b++) {
            next[b] = at;
            at += counts[pass][b];
        }
        for (size_t i = 0; i < n; i++)
            to[next[key_byte(&from[i], pass)]++] = from[i];
        sort_key *swap = from;
        from = to;
        to = swap;
    }
    for (size_t i = 0; i < n; i++)
        sorted[i] = c[from[i].order_index & UINT32_MAX];
    memcpy(c, sorted, n * sizeof *c);
    free(keys);
    free(sorted);
    free(counts);
    return true;
}

/* ---- names: UTF-8 with invalid bytes replaced ------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at s[0..n) (Unicode 15, table 3-7), or 0 with *bad
 * the length of its maximal ill-formed subpart: the lead byte and the continuation bytes after it
 * that still fit a well-formed sequence (at least 1). */
static size_t utf8_sequence(const uint8_t *s, size_t n, size_t *bad)
{
    uint8_t lead = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (lead < 0x80)
        return 1;
    if (lead >= 0xc2 && lead <= 0xdf) {
        need = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        need = 3;
        lo = lead == 0xe0 ? 0xa0 : 0x80;
        hi = lead == 0xed ? 0x9f : 0xbf;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        need = 4;
        lo = lead == 0xf0 ? 0x90 : 0x80;
        hi = lead == 0xf4 ? 0x8f : 0xbf;
    } else {
        *bad = 1; /* 80..c1 and f5..ff never start a sequence */
        return 0;
    }
    size_t k = 1;
    for (; k < need && k < n; k++) {
        uint8_t b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf))
            break;
    }
    if (k == need)
        return need;
    *bad = k;
    return 0;
}

bool fu_utf8_valid(const char *text, size_t size)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < size) {
        uint64_t word;
        if (size - i >= 8 && (memcpy(&word, s + i, 8), !(word & 0x8080808080808080ull))) {
            i += 8; /* eight ASCII bytes: names are nearly all ASCII */
            continue;
        }
        size_t bad = 0, n = utf8_sequence(s + i, size - i, &bad);
        if (!n)
            return false;
        i += n;
    }
    return true;
}

/* Append `name` to `names` as Python's bytes.decode("utf-8", "replace") leaves it: one U+FFFD
 * (EF BF BD) per maximal ill-formed subpart (the "substitution of maximal subparts" practice of
 * Unicode §3.9 that CPython follows). */
static bool append_utf8(fu_buffer *names, const char *name, size_t len)
{
    const uint8_t *s = (const uint8_t *)name;
    size_t start = 0, i = 0;
    while (i < len) {
        size_t bad = 0, n = utf8_sequence(s + i, len - i, &bad);
        if (n) {
            i += n;
            continue;
        }
        if (!fu_buffer_append(names, s + start, i - start) || !fu_buffer_append(names, "\xef\xbf\xbd", 3))
            return false;
        i += bad;
        start = i;
    }
    return fu_buffer_append(names, s + start, len - start);
}

/* Append a name to the table's name buffer, as UTF-8 with invalid bytes replaced. Offsets and
 * lengths are u32: the names may take 4 GiB at most. */
static bool append_name(fu_buffer *names, const char *name, size_t len, uint32_t *offset, uint32_t *stored,
                        fu_error *err)
{
    size_t before = names->len;
    if (!(is_ascii(name, len) ? fu_buffer_append(names, name, len) : append_utf8(names, name, len))) {
        names->len = before;
        fu_fail(err, FU_ERR_NOMEM, "out of memory for symbol names");
        return false;
    }
    if (names->len > UINT32_MAX) {
        names->len = before;
        fu_fail(err, FU_ERR_INVALID, "symbol names exceed 4 GiB");
        return false;
    }
    *offset = (uint32_t)before;
    *stored = (uint32_t)(names->len - before);
    return true;
}

/* Fill `t` from candidates sorted by address, one kept per address: the first of each address, or
 * the last one (take_last). A bounded table takes each kept candidate's `end`. */
static bool table_from_sorted(fu_symbol_table *t, const candidate *c, size_t n, bool take_last, bool bounded,
                              fu_error *err)
{
    fu_buffer names = {0};
    t->bounded = bounded;
    t->starts = malloc((n ? n : 1) * sizeof *t->starts);
    t->ends = bounded ? malloc((n ? n : 1) * sizeof *t->ends) : NULL;
    t->name_offsets = malloc((n ? n : 1) * sizeof *t->name_offsets);
    t->name_lengths = malloc((n ? n : 1) * sizeof *t->name_lengths);
    if (!t->starts || (bounded && !t->ends) || !t->name_offsets || !t->name_lengths) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu symbols", n);
        return false;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        bool first_of_address = i == 0 || c[i].value != c[i - 1].value;
        bool last_of_address = i + 1 == n || c[i + 1].value != c[i].value;
        if (!(take_last ? last_of_address : first_of_address))
            continue;
        t->starts[count] = c[i].value;
        if (bounded)
            t->ends[count] = c[i].end;
        if (!append_name(&names, c[i].name, c[i].name_len, &t->name_offsets[count], &t->name_lengths[count],
                         err)) {
            free(names.data);
            return false;
        }
        count++;
    }
    t->count = count;
    t->names = (char *)names.data;
    t->usable = true;
    return true;
}

static bool append_candidate(fu_buffer *cands, const candidate *c, fu_error *err)
{
    if (cands->len / sizeof *c >= FU_MAX_SYMBOLS) {
        fu_fail(err, FU_ERR_INVALID, "more than %u symbols", FU_MAX_SYMBOLS);
        return false;
    }
    if (!fu_buffer_append(cands, c, sizeof *c)) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu symbols", cands->len / sizeof *c + 1);
        return false;
    }
    return true;
}

/* The symbols perf keeps of one .symtab/.dynsym section (see the top of the file), appended to
 * `cands`. */
static bool read_elf_symbols(const fu_symbol_source *source, fu_buffer *cands, fu_error *err)
{
    int elf_class = source->elf_class;
    unsigned entsize = FU_ELF_SYMBOL_SIZE(elf_class);
    const uint8_t *base = source->symtab, *flags = source->section_flags;
    const char *strings = source->strtab;
    size_t strings_len = source->strtab_size;
    /* the table's length bounds the loop: one entry of entsize bytes per iteration */
    for (size_t off = 0; off + entsize <= source->symtab_size; off += entsize) {
        fu_elf_symbol symbol = fu_elf_symbol_from((unsigned)elf_class, base + off);
        uint64_t name = symbol.name, value = symbol.value, size = symbol.size;
        uint8_t info = symbol.info;
        uint16_t shndx = symbol.shndx;
        unsigned type = info & 0xf, bind = info >> 4;
        bool function = type == STT_FUNC || type == STT_GNU_IFUNC;
        /* perf's elf_sym__is_label, and elf_sec__filter: a label counts in a "text" section only */
        bool label = type == STT_NOTYPE && shndx != SHN_ABS && shndx < source->section_count &&
                     (flags[shndx] & SECTION_TEXT);
        if ((!function && !label) || shndx == SHN_UNDEF || name == 0 || name >= strings_len)
            continue; /* not a defined function or label, or a name outside the string table */
        size_t limit = strings_len - name < FU_MAX_SYMBOL_NAME ? strings_len - name : FU_MAX_SYMBOL_NAME;
        const char *text = strings + name, *nul = memchr(text, 0, limit);
        if (!nul)
            continue;
        candidate cand = {
            .value = value, .size = size, .name = text, .name_len = (uint32_t)(nul - text), .bind = (uint8_t)bind,
            .order = (uint32_t)(cands->len / sizeof cand),
        };
        if (!append_candidate(cands, &cand, err))
            return false;
    }
    return true;
}

/* perf's symbols__fixup_end over candidates sorted by (address, order): a zero-sized symbol ends at
 * the next one's start (a duplicate's start is its own: it stays zero-sized), the last one at the
 * page after its start's page. */
static void fixup_ends(candidate *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t end = c[i].value + c[i].size;
        c[i].end = end < c[i].value ? UINT64_MAX : end; /* a size past 2^64 reaches the top */
    }
    for (size_t i = 0; i < n; i++) {
        if (c[i].end != c[i].value)
            continue;
        if (i + 1 < n) {
            c[i].end = c[i + 1].value;
        } else {
            uint64_t page_end = (c[i].value + LAST_SYMBOL_PAGE - 1) / LAST_SYMBOL_PAGE * LAST_SYMBOL_PAGE;
            c[i].end = page_end + LAST_SYMBOL_PAGE < c[i].value ? UINT64_MAX : page_end + LAST_SYMBOL_PAGE;
        }
    }
}

/* The demangled name's length and leading underscores, which choose_best compares. */
static void plain_form(candidate *c)
{
    if (c->plain_known)
        return;
    size_t len = c->name_len;
    char *plain = fu_demangle(c->name, c->name_len, &len);
    const char *text = plain ? plain : c->name;
    size_t underscores = 0;
    while (underscores < len && text[underscores] == '_')
        underscores++;
    c->plain_len = len;
    c->underscores = underscores;
    c->plain_known = true;
    free(plain);
}

/* perf's choose_best_symbol: true if `b` is better than `a` (a came first in the table). */
static bool better(candidate *a, candidate *b)
{
    bool a_sized = a->end != a->value, b_sized = b->end != b->value;
    if (a_sized != b_sized)
        return b_sized;
    bool a_weak = a->bind == STB_WEAK, b_weak = b->bind == STB_WEAK;
    if (a_weak != b_weak)
        return a_weak;
    bool a_global = a->bind == STB_GLOBAL, b_global = b->bind == STB_GLOBAL;
    if (a_global != b_global)
        return b_global;
    plain_form(a);
    plain_form(b);
    if (a->underscores != b->underscores)
        return b->underscores < a->underscores;
    return b->plain_len > a->plain_len;
}

/* perf's symbols__fixup_duplicate: of each address's candidates (sorted by order), the best one
 * (a tournament in table order: on a tie the earlier stays) is kept. Returns the count kept. */
static size_t choose_best(candidate *c, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n;) {
        size_t best = i, j = i + 1;
        for (; j < n && c[j].value == c[i].value; j++)
            if (better(&c[best], &c[j]))
                best = j;
        c[kept++] = c[best];
        i = j;
    }
    return kept;
}

/* ---- PLT stubs (plt.c) --------------------------------------------------------------------------- */

typedef struct plt_context {
    fu_buffer *cands, *names;
    fu_error *err;
    bool failed;
} plt_context;

static bool plt_emit(void *context, const fu_plt_stub *stub)
{
    plt_context *ctx = context;
    char abs_name[40];
    const char *name = stub->name;
    size_t len = stub->name_len;
    if (!name) { /* an IRELATIVE slot: objdump's name */
        len = (size_t)snprintf(abs_name, sizeof abs_name, "*ABS*+0x%llx", (unsigned long long)stub->addend);
        name = abs_name;
    }
    if (len > FU_MAX_SYMBOL_NAME)
        return true; /* longer than any name kept */
    candidate cand = {.value = stub->address, .size = stub->size, .end = stub->address + stub->size,
                      .bind = STB_GLOBAL, .synthetic = true, .name_offset = (uint32_t)ctx->names->len,
                      .name_len = (uint32_t)(len + 4), .order = (uint32_t)(ctx->cands->len / sizeof cand)};
    if (ctx->names->len > UINT32_MAX - len - 4 || !fu_buffer_append(ctx->names, name, len) ||
        !fu_buffer_append(ctx->names, "@plt", 4)) {
        ctx->failed = true;
        fu_fail(ctx->err, FU_ERR_NOMEM, "out of memory for PLT stub names");
        return false;
    }
    if (!append_candidate(ctx->cands, &cand, ctx->err)) {
        ctx->failed = true;
        return false;
    }
    return true;
}

/* Drop the PLT stubs at addresses a symbol of the table starts at (mold names its stubs
 * "memcmp$plt" in .symtab; the file's own names win); c is sorted by address. Returns the count kept. */
static size_t drop_covered_stubs(candidate *c, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].synthetic) {
            bool covered = (i > 0 && c[i - 1].value == c[i].value && !c[i - 1].synthetic) ||
                           (i + 1 < n && c[i + 1].value == c[i].value && !c[i + 1].synthetic) ||
                           (kept > 0 && c[kept - 1].value == c[i].value);
            if (covered)
                continue;
        }
        c[kept++] = c[i];
    }
    return kept;
}

typedef struct perf_map_context {
    fu_buffer *cands;
    fu_error *err;
} perf_map_context;

static bool perf_map_emit(void *context, const fu_perf_map_entry *entry)
{
    perf_map_context *ctx = context;
    fu_buffer *cands = ctx->cands;
    if (entry->name_len > FU_MAX_SYMBOL_NAME)
        return true; /* perf_map.c bounds lines; a name this long cannot reach here */
    uint64_t end = entry->start + (entry->size ? entry->size : 1);
    candidate cand = {.value = entry->start, .size = entry->size, .end = end < entry->start ? UINT64_MAX : end,
                      .name = entry->name, .name_len = (uint32_t)entry->name_len,
                      .order = (uint32_t)(cands->len / sizeof cand)};
    return append_candidate(cands, &cand, ctx->err);
}

/* Each hex digit's value + 1; 0 for other bytes. */
static const uint8_t hex_plus_one[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
    ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* One kallsyms line from *p ("ffffffff81000000 T _stext\t[module]"); *p moves past it. True if it
 * names a function (t/T/w/W): then its address and where its name starts. */
static bool kallsyms_line(const uint8_t **p, const uint8_t *end, uint64_t *address, const uint8_t **name)
{
    const uint8_t *line = *p, *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol)
        eol = end;
    *p = eol < end ? eol + 1 : end;
    uint64_t value = 0;
    const uint8_t *q = line;
    int digits = 0;
    while (q < eol && digits < 16 && hex_plus_one[*q]) {
        value = value << 4 | (uint64_t)(hex_plus_one[*q] - 1);
        q++;
        digits++;
    }
    if (digits == 0 || eol - q < 3 || q[0] != ' ' || !(q[1] == 't' || q[1] == 'T' || q[1] == 'w' || q[1] == 'W') ||
        q[2] != ' ')
        return false;
    *address = value;
    *name = q + 3;
    return true;
}

/* The name starting at `name`: up to a blank or the end of its line. */
static uint32_t kallsyms_name_length(const uint8_t *name, const uint8_t *end)
{
    const uint8_t *e = name;
    while (e < end && e - name < FU_MAX_SYMBOL_NAME && *e != ' ' && *e != '\t' && *e != '\n')
        e++;
    return (uint32_t)(e - name);
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* With query addresses: one pass that keeps, for each query, its symbol (the nearest at or below
 * it, the last one of equal addresses), without storing the other ~120k. best[j] is first the best
 * line whose address lands in (queries[j-1], queries[j]], then the running maximum. */
static bool kallsyms_for_queries(const uint8_t *text, size_t size, const uint64_t *queries, size_t n_queries,
                                 fu_buffer *cands, bool *usable, fu_error *err)
{
    candidate *best = calloc(n_queries + 1, sizeof *best);
    if (!best) {
        fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu kallsyms queries", n_queries);
        return false;
    }
    const uint8_t *p = text, *end = text + size;
    uint64_t highest = 0, previous = 0;
    size_t previous_lo = 0;
    uint32_t order = 0;
    bool any = false;
    /* one line per iteration: the text's size bounds the loop */
    while (p < end) {
        uint64_t address;
        const uint8_t *name;
        if (!kallsyms_line(&p, end, &address, &name))
            continue;
        any = true;
        highest = address > highest ? address : highest;
        order++; /* from 1: 0 marks "none" */
        /* the first query >= address: the next one after the previous line's in a sorted file */
        size_t lo = 0, hi = n_queries;
        if (address >= previous) {
            lo = previous_lo;
            while (lo < n_queries && queries[lo] < address)
                lo++;
            hi = lo;
        }
        previous = address;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (queries[mid] < address)
                lo = mid + 1;
            else
                hi = mid;
        }
        previous_lo = lo;
        candidate *b = &best[lo];
        if (lo < n_queries && (b->order == 0 || address > b->value || (address == b->value && order > b->order)))
            *b = (candidate){.value = address, .name = (const char *)name, .order = order};
    }
    *usable = any && highest != 0;
    for (size_t j = 0; j < n_queries; j++) {
        if (j > 0 && best[j - 1].order &&
            (best[j].order == 0 || best[j - 1].value > best[j].value ||
             (best[j - 1].value == best[j].value && best[j - 1].order > best[j].order)))
            best[j] = best[j - 1];
        size_t kept = cands->len / sizeof *best;
        if (best[j].order && (kept == 0 || ((candidate *)cands->data)[kept - 1].order != best[j].order)) {
            best[j].name_len = kallsyms_name_length((const uint8_t *)best[j].name, end);
            if (!append_candidate(cands, &best[j], err)) {
                free(best);
                return false;
            }
        }
    }
    free(best);
    return true;
}


/* ---- entry points --------------------------------------------------------------------------------- */

fu_status fu_symbols_from_elf(const fu_symbol_source *sources, size_t source_count, const fu_plt_input *plt,
                              fu_symbol_table *out, fu_error *err)
{
    memset(out, 0, sizeof *out);
    fu_buffer cands = {0}, synthetic_names = {0};
    bool ok = false;
    if (source_count > FU_MAX_SYMBOL_SOURCES) {
        fu_fail(err, FU_ERR_INVALID, "more than %d symbol table sources", FU_MAX_SYMBOL_SOURCES);
        goto done;
    }
    for (size_t i = 0; i < source_count; i++) {
        if (sources[i].elf_class != 32 && sources[i].elf_class != 64) {
            fu_fail(err, FU_ERR_INVALID, "elf_class must be 32 or 64, not %d", sources[i].elf_class);
            goto done;
        }
        if (!read_elf_symbols(&sources[i], &cands, err))
            goto done;
    }
    if (!sort_candidates(&cands, err))
        goto done;
    size_t count = cands.len / sizeof(candidate);
    fixup_ends((candidate *)cands.data, count);
    count = choose_best((candidate *)cands.data, count);
    cands.len = count * sizeof(candidate);
    if (plt) {
        plt_context ctx = {&cands, &synthetic_names, err, false};
        fu_plt_counts counts;
        fu_plt_status status = fu_plt_synthesize(plt, plt_emit, &ctx, &counts);
        if (ctx.failed)
            goto done;
        if (status == FU_PLT_NO_MEMORY) {
            fu_fail(err, FU_ERR_NOMEM, "out of memory naming PLT stubs");
            goto done;
        }
        count = cands.len / sizeof(candidate);
        candidate *c = (candidate *)cands.data;
        for (size_t i = 0; i < count; i++)
            if (c[i].synthetic)
                c[i].name = (const char *)synthetic_names.data + c[i].name_offset;
        /* each address's chosen symbol stays first of its run */
        if (!sort_candidates(&cands, err))
            goto done;
        count = drop_covered_stubs((candidate *)cands.data, count);
    }
    if (!table_from_sorted(out, (candidate *)cands.data, count, false, true, err))
        goto done;
    out->demangle = true;
    ok = true;
done:
    if (!ok)
        fu_symbol_table_free(out);
    free(cands.data);
    free(synthetic_names.data);
    return ok ? FU_OK : err->status;
}

fu_status fu_symbols_from_perf_map(const uint8_t *text, size_t size, fu_symbol_table *out, fu_error *err)
{
    memset(out, 0, sizeof *out);
    fu_buffer cands = {0};
    fu_perf_map_counts counts;
    perf_map_context ctx = {&cands, err};
    bool ok = fu_perf_map_parse(text, size, perf_map_emit, &ctx, &counts);
    if (ok) {
        ok = sort_candidates(&cands, err) &&
             table_from_sorted(out, (candidate *)cands.data, cands.len / sizeof(candidate), true, true, err);
    }
    free(cands.data);
    if (!ok)
        fu_symbol_table_free(out);
    return ok ? FU_OK : err->status;
}

/* kallsyms whose function symbols come in address order (a kernel without modules loaded): the
 * table filled straight from the text in one pass, the last name of equal addresses kept, without
 * candidates (72 bytes a line, 8.8 MB for 122k lines, whose fresh pages the kernel zeroes: most of
 * the build's time). *in_order false, `t` left empty: a symbol below the one before it (modules
 * follow the kernel, in load order). */
static bool kallsyms_table_in_order(const uint8_t *text, size_t size, fu_symbol_table *t, bool *in_order,
                                    fu_error *err)
{
    size_t lines = 1; /* each line holds at most one symbol */
    for (const uint8_t *q = text, *end = text + size; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        lines++;
    fu_buffer names = {0};
    t->starts = malloc(lines * sizeof *t->starts);
    t->name_offsets = malloc(lines * sizeof *t->name_offsets);
    t->name_lengths = malloc(lines * sizeof *t->name_lengths);
    if (!t->starts || !t->name_offsets || !t->name_lengths || !fu_buffer_reserve(&names, size / 2)) {
        free(names.data);
        fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu kallsyms lines", lines);
        return false;
    }
    *in_order = true;
    size_t count = 0;
    const uint8_t *p = text, *end = text + size;
    while (p < end) { /* one line per iteration: the text's size bounds the loop */
        uint64_t address;
        const uint8_t *name;
        if (!kallsyms_line(&p, end, &address, &name))
            continue;
        if (count && address < t->starts[count - 1]) {
            *in_order = false;
            break;
        }
        if (count && address == t->starts[count - 1])
            names.len = t->name_offsets[--count]; /* the last name of an address is kept */
        t->starts[count] = address;
        if (!append_name(&names, (const char *)name, kallsyms_name_length(name, end), &t->name_offsets[count],
                         &t->name_lengths[count], err)) {
            free(names.data);
            return false;
        }
        count++;
    }
    if (!*in_order) {
        free(names.data);
        fu_symbol_table_free(t);
        memset(t, 0, sizeof *t);
        return true;
    }
    t->count = count;
    t->names = (char *)names.data;
    return true;
}

/* Every function symbol of kallsyms as a candidate, sorted by address (file order among equal
 * addresses, so that table_from_sorted keeps the last). */
static bool kallsyms_candidates(const uint8_t *text, size_t size, fu_buffer *cands, fu_error *err)
{
    const uint8_t *p = text, *end = text + size;
    while (p < end) { /* one line per iteration: the text's size bounds the loop */
        uint64_t address;
        const uint8_t *name;
        if (!kallsyms_line(&p, end, &address, &name))
            continue;
        candidate cand = {.value = address, .name = (const char *)name, .name_len = kallsyms_name_length(name, end),
                          .order = (uint32_t)(cands->len / sizeof(candidate))};
        if (!append_candidate(cands, &cand, err))
            return false;
    }
    return sort_candidates(cands, err);
}

fu_status fu_symbols_from_kallsyms(const uint8_t *text, size_t size, const uint64_t *queries, size_t query_count,
                                   fu_symbol_table *out, fu_error *err)
{
    memset(out, 0, sizeof *out);
    fu_buffer cands = {0};
    uint64_t *sorted_queries = NULL;
    bool in_order = false, usable = false, ok = false;
    if (queries) {
        if (!(sorted_queries = malloc((query_count ? query_count : 1) * 8))) {
            fu_fail(err, FU_ERR_NOMEM, "out of memory for %zu kallsyms queries", query_count);
            goto done;
        }
        if (query_count)
            memcpy(sorted_queries, queries, 8 * query_count);
        qsort(sorted_queries, query_count, 8, by_u64);
        if (!kallsyms_for_queries(text, size, sorted_queries, query_count, &cands, &usable, err))
            goto done;
    } else if (!kallsyms_table_in_order(text, size, out, &in_order, err) ||
               (!in_order && !kallsyms_candidates(text, size, &cands, err))) {
        goto done;
    }
    if (!in_order && !table_from_sorted(out, (candidate *)cands.data, cands.len / sizeof(candidate), true, false, err))
        goto done;
    out->usable = queries ? usable : out->count > 0 && out->starts[out->count - 1] != 0;
    ok = true;
done:
    if (!ok)
        fu_symbol_table_free(out);
    free(cands.data);
    free(sorted_queries);
    return ok ? FU_OK : err->status;
}
