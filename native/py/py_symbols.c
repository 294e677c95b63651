/* symbols: function symbol tables for symbolization, built and searched in C (a Python loop over
 * libc's ~10k .symtab entries cost 11 ms, over the kernel's ~120k kallsyms lines 50 ms: more than
 * unwinding a whole recording).
 *
 * SymbolTable.from_elf([(symtab, strtab, elf_class, section_flags)], plt=None) -> SymbolTable
 *     the symbols perf 6.1 keeps from one symbol table (dso__load_sym): defined STT_FUNC and
 *     STT_GNU_IFUNC symbols, and STT_NOTYPE labels (not SHN_ABS) in sections whose name contains
 *     "text" (section_flags[shndx] & 1; bytes indexed by section). Then perf's fix-ups, in its
 *     order: symbols__fixup_end (a zero-sized symbol extends to the next one's start, the last to
 *     the page after its start's page), then symbols__fixup_duplicate, whose choose_best_symbol
 *     keeps, of the symbols starting at one address, a sized one over a zero-sized one, non-weak
 *     over weak, global over local, fewer leading underscores, the longer name (all on the
 *     demangled name, as perf demangles before inserting), on a tie the first in the table.
 *     plt: (dynsym, dynstr, [relocation sections], [(address, bytes, sh_entsize, sh_addralign,
 *     is_plt_got)]): x86-64 PLT
 *     stubs named "symbol@plt" (plt.c), at the addresses no symbol of the table starts at.
 * SymbolTable.from_perf_map(text) -> SymbolTable
 *     a JIT's /tmp/perf-PID.map (perf_map.c); of several entries at one address the last one.
 * SymbolTable.from_kallsyms(text, addresses=None) -> SymbolTable
 *     t/T/w/W lines of /proc/kallsyms; an address belongs to the nearest symbol at or below it (of
 *     several at one address, the last in the file). All addresses 0 (kptr_restrict) or no
 *     symbols: `usable` is false and every lookup fails. With `addresses` (bytes of u64), one pass
 *     keeps only the symbols the lookups of those addresses find (a few hundred of ~120k: no
 *     sort, no name copied for the others); lookups of other addresses may then find a farther
 *     symbol.
 * table.lookup(address) -> (name, offset) | None;  len(table)
 *
 * Names of ELF tables are demangled (demangle.c) on their first lookup, and kept; kallsyms and
 * perf-map names are not (perf demangles neither). Input is read through bounded cursors; a
 * truncated or malformed entry ends the scan (ELF) or is skipped (kallsyms and perf-map lines).
 * Names are decoded as UTF-8, invalid bytes replaced by U+FFFD.
 */
#include "py_core.h"

#include "cursor.h"
#include "demangle.h"
#include "growing.h"
#include "perf_map.h"
#include "plt.h"
#include "symbols.h"

#define STT_NOTYPE 0
#define STT_FUNC 2
#define STT_GNU_IFUNC 10
#define SHN_UNDEF 0
#define SHN_ABS 0xfff1
/* section_flags bit: the section's name contains "text" (perf's elf_sec__filter for labels) */
#define SECTION_TEXT 1
/* perf's end for a last zero-sized symbol: the page after the one it starts in */
#define LAST_SYMBOL_PAGE 4096
#define STB_GLOBAL 1
#define STB_WEAK 2
/* Longest symbol name kept; C++ names reach a few KiB, longer ones are data, not names. */
#define FU_MAX_SYMBOL_NAME 65536
/* Sources of one ELF table (file, separate debug file; .symtab and .dynsym each). */
#define FU_MAX_SYMBOL_SOURCES 64
/* Symbols in one table: names and arrays are indexed by u32. */
#define FU_MAX_SYMBOLS (1u << 26)

typedef struct SymbolTableObject {
    py_core_object base; /* payload: &table (filled by the classmethod that made the object) */
    fu_symbol_table table;
} SymbolTableObject;

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

static void table_free(fu_symbol_table *t)
{
    for (size_t i = 0; t->plain && i < t->count; i++)
        if (t->plain[i] != &not_mangled)
            free(t->plain[i]);
    free(t->plain);
    free(t->plain_lengths);
    free(t->starts);
    free(t->ends);
    free(t->name_offsets);
    free(t->name_lengths);
    free(t->names);
    memset(t, 0, sizeof *t);
}

static void symbols_dealloc(SymbolTableObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    table_free(&self->table);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
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

static int by_value_order(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static bool is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

/* Append a name to the table's name buffer, as UTF-8 with invalid bytes replaced. */
static bool append_name(fu_growing *names, const char *name, size_t len, uint32_t *offset, uint32_t *stored)
{
    PyObject *fixed = NULL;
    if (!is_ascii(name, len)) {
        PyObject *text = PyUnicode_DecodeUTF8(name, (Py_ssize_t)len, "replace");
        if (!text)
            return false;
        fixed = PyUnicode_AsUTF8String(text);
        Py_DECREF(text);
        if (!fixed)
            return false;
        name = PyBytes_AS_STRING(fixed);
        len = (size_t)PyBytes_GET_SIZE(fixed);
    }
    if (names->len > UINT32_MAX - len) {
        Py_XDECREF(fixed);
        PyErr_SetString(PyExc_ValueError, "symbol names exceed 4 GiB");
        return false;
    }
    *offset = (uint32_t)names->len;
    *stored = (uint32_t)len;
    bool ok = fu_growing_append(names, name, len);
    Py_XDECREF(fixed);
    if (!ok)
        PyErr_NoMemory();
    return ok;
}

/* Fill `t` from candidates sorted by address, one kept per address: the first of each address, or
 * the last one (take_last). A bounded table takes each kept candidate's `end`. */
static bool table_from_sorted(fu_symbol_table *t, const candidate *c, size_t n, bool take_last, bool bounded)
{
    fu_growing names = {0};
    t->bounded = bounded;
    t->starts = malloc((n ? n : 1) * sizeof *t->starts);
    t->ends = bounded ? malloc((n ? n : 1) * sizeof *t->ends) : NULL;
    t->name_offsets = malloc((n ? n : 1) * sizeof *t->name_offsets);
    t->name_lengths = malloc((n ? n : 1) * sizeof *t->name_lengths);
    if (!t->starts || (bounded && !t->ends) || !t->name_offsets || !t->name_lengths) {
        PyErr_NoMemory();
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
        if (!append_name(&names, c[i].name, c[i].name_len, &t->name_offsets[count], &t->name_lengths[count])) {
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

static PyObject *new_table_object(PyTypeObject *type)
{
    SymbolTableObject *self = (SymbolTableObject *)type->tp_alloc(type, 0);
    if (self) {
        memset(&self->table, 0, sizeof self->table);
        self->base.payload = &self->table;
    }
    return (PyObject *)self;
}

static bool append_candidate(fu_growing *cands, const candidate *c)
{
    if (cands->len / sizeof *c >= FU_MAX_SYMBOLS) {
        PyErr_Format(PyExc_ValueError, "more than %u symbols", FU_MAX_SYMBOLS);
        return false;
    }
    if (!fu_growing_append(cands, c, sizeof *c)) {
        PyErr_NoMemory();
        return false;
    }
    return true;
}

/* The symbols perf keeps of one .symtab/.dynsym section (see the top of the file), appended to
 * `cands`. */
static bool read_elf_symbols(const Py_buffer *symtab, const Py_buffer *strtab, int elf_class,
                             const Py_buffer *section_flags, fu_growing *cands)
{
    unsigned entsize = elf_class == 64 ? 24 : 16;
    const uint8_t *base = symtab->buf, *flags = section_flags->buf;
    const char *strings = strtab->buf;
    size_t strings_len = (size_t)strtab->len;
    /* the table's length bounds the loop: one entry of entsize bytes per iteration */
    for (size_t off = 0; off + entsize <= (size_t)symtab->len; off += entsize) {
        fu_cursor c = fu_cursor_make(base, base + off, base + off + entsize);
        uint64_t name, value, size;
        uint8_t info;
        uint16_t shndx;
        if (elf_class == 64) {
            name = fu_read_uint(&c, 4);
            info = fu_read_u8(&c);
            fu_read_u8(&c); /* st_other */
            shndx = (uint16_t)fu_read_uint(&c, 2);
            value = fu_read_uint(&c, 8);
            size = fu_read_uint(&c, 8);
        } else {
            name = fu_read_uint(&c, 4);
            value = fu_read_uint(&c, 4);
            size = fu_read_uint(&c, 4);
            info = fu_read_u8(&c);
            fu_read_u8(&c);
            shndx = (uint16_t)fu_read_uint(&c, 2);
        }
        unsigned type = info & 0xf, bind = info >> 4;
        bool function = type == STT_FUNC || type == STT_GNU_IFUNC;
        /* perf's elf_sym__is_label, and elf_sec__filter: a label counts in a "text" section only */
        bool label = type == STT_NOTYPE && shndx != SHN_ABS && shndx < (size_t)section_flags->len &&
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
        if (!append_candidate(cands, &cand))
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
    fu_growing *cands, *names;
    uint32_t first_order;
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
    if (ctx->names->len > UINT32_MAX - len - 4 || !fu_growing_append(ctx->names, name, len) ||
        !fu_growing_append(ctx->names, "@plt", 4)) {
        ctx->failed = true;
        PyErr_NoMemory();
        return false;
    }
    if (!append_candidate(ctx->cands, &cand)) {
        ctx->failed = true;
        return false;
    }
    return true;
}

/* plt = (dynsym, dynstr, [relocation sections], [(address, bytes, sh_entsize, sh_addralign, is_plt_got)]);
 * buffers held in
 * `held` (released by the caller). */
static bool read_plt(PyObject *plt, Py_buffer *held, Py_ssize_t *held_count, fu_growing *cands, fu_growing *names)
{
    PyObject *relocations, *sections;
    fu_plt_input in = {0};
    Py_buffer *dynsym = &held[(*held_count)++], *dynstr = &held[(*held_count)++];
    if (!PyArg_ParseTuple(plt, "y*y*O!O!", dynsym, dynstr, &PyList_Type, &relocations, &PyList_Type, &sections)) {
        *held_count -= 2;
        return false;
    }
    if (PyList_GET_SIZE(relocations) > FU_PLT_MAX_RELOCATION_SECTIONS ||
        PyList_GET_SIZE(sections) > FU_PLT_MAX_SECTIONS) {
        PyErr_Format(PyExc_ValueError, "plt: at most %d relocation sections and %d PLT sections",
                     FU_PLT_MAX_RELOCATION_SECTIONS, FU_PLT_MAX_SECTIONS);
        return false;
    }
    in.dynsym = dynsym->buf;
    in.dynsym_size = (size_t)dynsym->len;
    in.dynstr = dynstr->buf;
    in.dynstr_size = (size_t)dynstr->len;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(relocations); i++) {
        Py_buffer *b = &held[*held_count];
        if (PyObject_GetBuffer(PyList_GET_ITEM(relocations, i), b, PyBUF_SIMPLE) < 0)
            return false;
        (*held_count)++;
        in.relocations[in.relocation_count] = b->buf;
        in.relocation_sizes[in.relocation_count++] = (size_t)b->len;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sections); i++) {
        Py_buffer *b = &held[*held_count];
        unsigned long long address, entsize, addralign;
        int is_plt_got;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(sections, i), "Ky*KKp", &address, b, &entsize, &addralign, &is_plt_got))
            return false;
        (*held_count)++;
        in.sections[in.section_count++] = (fu_plt_section){address, b->buf, (size_t)b->len,
                                                           fu_plt_entry_size(entsize, addralign, is_plt_got)};
    }
    plt_context ctx = {cands, names, 0, false};
    fu_plt_counts counts;
    fu_plt_status status = fu_plt_synthesize(&in, plt_emit, &ctx, &counts);
    if (status == FU_PLT_NO_MEMORY) {
        PyErr_NoMemory();
        return false;
    }
    return !ctx.failed;
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

#define MAX_HELD_BUFFERS (3 * FU_MAX_SYMBOL_SOURCES + 2 + FU_PLT_MAX_RELOCATION_SECTIONS + FU_PLT_MAX_SECTIONS)

static PyObject *symbols_from_elf(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"sources", "plt", NULL};
    PyObject *sources, *plt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:from_elf", keywords, &sources, &plt))
        return NULL;
    PyObject *seq = PySequence_Fast(sources, "from_elf expects a list of (symtab, strtab, elf_class, section_flags)");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > FU_MAX_SYMBOL_SOURCES) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "more than %d symbol table sources", FU_MAX_SYMBOL_SOURCES);
    }
    Py_buffer buffers[MAX_HELD_BUFFERS];
    Py_ssize_t held = 0;
    fu_growing cands = {0}, synthetic_names = {0};
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int elf_class;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "y*y*iy*", &buffers[held], &buffers[held + 1],
                              &elf_class, &buffers[held + 2]))
            goto done;
        held += 3;
        if (elf_class != 32 && elf_class != 64) {
            PyErr_Format(PyExc_ValueError, "elf_class must be 32 or 64, not %d", elf_class);
            goto done;
        }
        if (!read_elf_symbols(&buffers[held - 3], &buffers[held - 2], elf_class, &buffers[held - 1], &cands))
            goto done;
    }
    size_t count = cands.len / sizeof(candidate);
    if (count)
        qsort(cands.data, count, sizeof(candidate), by_value_order);
    fixup_ends((candidate *)cands.data, count);
    count = choose_best((candidate *)cands.data, count);
    cands.len = count * sizeof(candidate);
    if (plt != Py_None) {
        if (!PyTuple_Check(plt)) {
            PyErr_SetString(PyExc_TypeError, "plt must be None or (dynsym, dynstr, relocations, sections)");
            goto done;
        }
        if (!read_plt(plt, buffers, &held, &cands, &synthetic_names))
            goto done;
        count = cands.len / sizeof(candidate);
        candidate *c = (candidate *)cands.data;
        for (size_t i = 0; i < count; i++)
            if (c[i].synthetic)
                c[i].name = (const char *)synthetic_names.data + c[i].name_offset;
        /* stable: each address's chosen symbol stays first of its run */
        qsort(c, count, sizeof *c, by_value_order);
        count = drop_covered_stubs(c, count);
    }
    result = new_table_object((PyTypeObject *)cls);
    if (result) {
        fu_symbol_table *t = &((SymbolTableObject *)result)->table;
        if (!table_from_sorted(t, (candidate *)cands.data, count, false, true))
            Py_CLEAR(result);
        else
            t->demangle = true;
    }
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&buffers[i]);
    free(cands.data);
    free(synthetic_names.data);
    Py_DECREF(seq);
    return result;
}

/* ---- perf maps (perf_map.c) ---------------------------------------------------------------------- */

static bool perf_map_emit(void *context, const fu_perf_map_entry *entry)
{
    fu_growing *cands = context;
    if (entry->name_len > FU_MAX_SYMBOL_NAME)
        return true; /* perf_map.c bounds lines; a name this long cannot reach here */
    uint64_t end = entry->start + (entry->size ? entry->size : 1);
    candidate cand = {.value = entry->start, .size = entry->size, .end = end < entry->start ? UINT64_MAX : end,
                      .name = entry->name, .name_len = (uint32_t)entry->name_len,
                      .order = (uint32_t)(cands->len / sizeof cand)};
    return append_candidate(cands, &cand);
}

static PyObject *symbols_from_perf_map(PyObject *cls, PyObject *arg)
{
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0)
        return NULL;
    fu_growing cands = {0};
    fu_perf_map_counts counts;
    PyObject *result = NULL;
    if (fu_perf_map_parse(text.buf, (size_t)text.len, perf_map_emit, &cands, &counts)) {
        size_t count = cands.len / sizeof(candidate);
        if (count)
            qsort(cands.data, count, sizeof(candidate), by_value_order);
        result = new_table_object((PyTypeObject *)cls);
        if (result && !table_from_sorted(&((SymbolTableObject *)result)->table, (candidate *)cands.data, count, true,
                                         true))
            Py_CLEAR(result);
    }
    free(cands.data);
    PyBuffer_Release(&text);
    return result;
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
                                 fu_growing *cands, bool *usable)
{
    candidate *best = calloc(n_queries + 1, sizeof *best);
    if (!best) {
        PyErr_NoMemory();
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
            if (!append_candidate(cands, &best[j])) {
                free(best);
                return false;
            }
        }
    }
    free(best);
    return true;
}

static PyObject *symbols_from_kallsyms(PyObject *cls, PyObject *args)
{
    Py_buffer text, queries = {0};
    if (!PyArg_ParseTuple(args, "y*|y*", &text, &queries))
        return NULL;
    fu_growing cands = {0};
    uint64_t *sorted_queries = NULL;
    PyObject *result = NULL;
    const uint8_t *p = text.buf, *end = p + text.len;
    bool sorted = true, usable = false;
    if (queries.buf) {
        size_t n = (size_t)queries.len / 8;
        if ((size_t)queries.len % 8) {
            PyErr_SetString(PyExc_ValueError, "addresses must be bytes of u64");
            goto done;
        }
        if (!(sorted_queries = malloc((n ? n : 1) * 8))) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(sorted_queries, queries.buf, 8 * n);
        qsort(sorted_queries, n, 8, by_u64);
        if (!kallsyms_for_queries(p, (size_t)text.len, sorted_queries, n, &cands, &usable))
            goto done;
    } else {
        /* one line per iteration: the text's size bounds the loop */
        while (p < end) {
            uint64_t address;
            const uint8_t *name;
            if (!kallsyms_line(&p, end, &address, &name))
                continue;
            size_t count = cands.len / sizeof(candidate);
            if (count && ((candidate *)cands.data)[count - 1].value > address)
                sorted = false;
            candidate cand = {.value = address, .name = (const char *)name,
                              .name_len = kallsyms_name_length(name, end), .order = (uint32_t)count};
            if (!append_candidate(&cands, &cand))
                goto done;
        }
        if (!sorted) /* module symbols follow the kernel's, in load order */
            qsort(cands.data, cands.len / sizeof(candidate), sizeof(candidate), by_value_order);
    }
    size_t count = cands.len / sizeof(candidate);
    result = new_table_object((PyTypeObject *)cls);
    if (result) {
        fu_symbol_table *t = &((SymbolTableObject *)result)->table;
        if (!table_from_sorted(t, (candidate *)cands.data, count, true, false))
            Py_CLEAR(result);
        else
            t->usable = queries.buf ? usable : t->count > 0 && t->starts[t->count - 1] != 0;
    }
done:
    free(cands.data);
    free(sorted_queries);
    PyBuffer_Release(&text);
    if (queries.buf)
        PyBuffer_Release(&queries);
    return result;
}

static PyObject *symbols_lookup(SymbolTableObject *self, PyObject *arg)
{
    int overflow = 0;
    unsigned long long address;
    if (!PyLong_Check(arg))
        return PyErr_Format(PyExc_TypeError, "lookup() expects an int, not %.100s", Py_TYPE(arg)->tp_name);
    PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (overflow < 0 || (overflow == 0 && PyLong_AsLongLong(arg) < 0))
        Py_RETURN_NONE; /* below 0: no symbol */
    address = PyLong_AsUnsignedLongLong(arg);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE; /* past 2^64 */
    }
    size_t i, len;
    if (!fu_symbol_find(&self->table, address, &i))
        Py_RETURN_NONE;
    const char *name = fu_symbol_name(&self->table, i, &len);
    return Py_BuildValue("(s#K)", name, (Py_ssize_t)len, (unsigned long long)(address - self->table.starts[i]));
}

static Py_ssize_t symbols_len(SymbolTableObject *self) { return (Py_ssize_t)self->table.count; }

static PyObject *symbols_usable(SymbolTableObject *self, void *unused)
{
    return PyBool_FromLong(self->table.usable);
}

static PyMethodDef symbols_methods[] = {
    {"from_elf", (PyCFunction)(void (*)(void))symbols_from_elf, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "from_elf([(symtab, strtab, elf_class, section_flags), ...], plt=None) -> SymbolTable of the symbols perf "
     "keeps, with PLT stubs named symbol@plt"},
    {"from_perf_map", symbols_from_perf_map, METH_O | METH_CLASS,
     "from_perf_map(text) -> SymbolTable of a JIT's /tmp/perf-PID.map"},
    {"from_kallsyms", symbols_from_kallsyms, METH_VARARGS | METH_CLASS,
     "from_kallsyms(text, addresses=None) -> SymbolTable of /proc/kallsyms' t/T/w/W symbols (with addresses, "
     "bytes of u64: only those their lookups need)"},
    {"lookup", (PyCFunction)symbols_lookup, METH_O, "lookup(address) -> (name, offset) | None"},
    {NULL},
};

static PyGetSetDef symbols_getset[] = {
    {"usable", (getter)symbols_usable, NULL, "False if every lookup fails (kallsyms without addresses)", NULL},
    {NULL},
};

static PyType_Slot symbols_slots[] = {
    {Py_tp_dealloc, symbols_dealloc},
    {Py_tp_methods, symbols_methods},
    {Py_tp_getset, symbols_getset},
    {Py_sq_length, symbols_len},
    {Py_tp_doc, "Function symbols by address (see native/symbols.c); build with from_elf or from_kallsyms."},
    {0, NULL},
};

static PyType_Spec symbols_spec = {
    .name = "fastunwind._core.SymbolTable",
    .basicsize = sizeof(SymbolTableObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = symbols_slots,
};

int py_symbols_init(PyObject *module)
{
    return py_core_add_type(module, PY_SYMBOL_TABLE, &symbols_spec);
}
