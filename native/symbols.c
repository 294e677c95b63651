/* symbols: function symbol tables for symbolization, built and searched in C (a Python loop over
 * libc's ~10k .symtab entries cost 11 ms, over the kernel's ~120k kallsyms lines 50 ms: more than
 * unwinding a whole recording).
 *
 * SymbolTable.from_elf([(symtab, strtab, elf_class), ...]) -> SymbolTable
 *     defined STT_FUNC / STT_GNU_IFUNC symbols of .symtab / .dynsym sections, sources in order of
 *     preference. Where several symbols start at one address (aliases), the choice follows perf's
 *     preferences: a sized one over a zero-sized one, non-weak over weak, global over local, fewer
 *     leading underscores; on a tie the first one met. A symbol without a size extends to the next
 *     symbol (the last one to its start + 1), as perf fixes them up.
 * SymbolTable.from_kallsyms(text, addresses=None) -> SymbolTable
 *     t/T/w/W lines of /proc/kallsyms; an address belongs to the nearest symbol at or below it (of
 *     several at one address, the last in the file). All addresses 0 (kptr_restrict) or no
 *     symbols: `usable` is false and every lookup fails. With `addresses` (bytes of u64), one pass
 *     keeps only the symbols the lookups of those addresses find (a few hundred of ~120k: no
 *     sort, no name copied for the others); lookups of other addresses may then find a farther
 *     symbol.
 * table.lookup(address) -> (name, offset) | None;  len(table)
 *
 * Input is read through bounded cursors; a truncated or malformed entry ends the scan (ELF) or is
 * skipped (kallsyms lines). Names are decoded as UTF-8, invalid bytes replaced by U+FFFD.
 */
#include "binding.h"

#include "cursor.h"
#include "growing.h"
#include "symbols.h"

#define STT_FUNC 2
#define STT_GNU_IFUNC 10
#define SHN_UNDEF 0
#define STB_GLOBAL 1
#define STB_WEAK 2
/* Longest symbol name kept; C++ names reach a few KiB, longer ones are data, not names. */
#define FU_MAX_SYMBOL_NAME 65536
/* Sources of one ELF table (file, separate debug file; .symtab and .dynsym each). */
#define FU_MAX_SYMBOL_SOURCES 64
/* Symbols in one table: names and arrays are indexed by u32. */
#define FU_MAX_SYMBOLS (1u << 26)

typedef struct SymbolTableObject {
    PyObject_HEAD
    fu_symbol_table table;
} SymbolTableObject;

static void symbols_dealloc(SymbolTableObject *self);

const fu_symbol_table *fu_symbol_table_of(PyObject *object)
{
    if (!object || Py_TYPE(object)->tp_dealloc != (destructor)symbols_dealloc) {
        PyErr_SetString(PyExc_TypeError, "expected a fastunwind._core.SymbolTable");
        return NULL;
    }
    return &((SymbolTableObject *)object)->table;
}

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
    if (table->bounded && address >= table->ends[lo])
        return false;
    *index = lo;
    return true;
}

static void table_free(fu_symbol_table *t)
{
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
    uint64_t value, size;
    uint64_t rank;    /* perf's alias preference, smaller is better (see the top of the file) */
    const char *name; /* into the caller's string table, alive during construction */
    uint32_t name_len;
    uint32_t order;   /* position among all candidates: the tie-break, and kallsyms' file order */
} candidate;

static int by_value_rank_order(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

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

/* Fill `t` from candidates sorted so that the chosen one of each address comes first (take_last:
 * the last one instead). */
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
            t->ends[count] = c[i].size; /* the size for now; ends below */
        if (!append_name(&names, c[i].name, c[i].name_len, &t->name_offsets[count], &t->name_lengths[count])) {
            free(names.data);
            return false;
        }
        count++;
    }
    if (bounded)
        for (size_t i = 0; i < count; i++) {
            uint64_t size = t->ends[i], start = t->starts[i];
            uint64_t following = i + 1 < count ? t->starts[i + 1] : start + 1;
            uint64_t end = size ? start + size : following;
            t->ends[i] = end < start ? UINT64_MAX : end; /* a size past 2^64 reaches the top */
        }
    t->count = count;
    t->names = (char *)names.data;
    t->usable = true;
    return true;
}

static PyObject *new_table_object(PyTypeObject *type)
{
    SymbolTableObject *self = (SymbolTableObject *)type->tp_alloc(type, 0);
    if (self)
        memset(&self->table, 0, sizeof self->table);
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

/* The function symbols of one .symtab/.dynsym section, appended to `cands`. */
static bool read_elf_symbols(const Py_buffer *symtab, const Py_buffer *strtab, int elf_class, fu_growing *cands)
{
    unsigned entsize = elf_class == 64 ? 24 : 16;
    const uint8_t *base = symtab->buf;
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
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || shndx == SHN_UNDEF || name == 0 || name >= strings_len)
            continue; /* not a defined function, or a name outside the string table */
        size_t limit = strings_len - name < FU_MAX_SYMBOL_NAME ? strings_len - name : FU_MAX_SYMBOL_NAME;
        const char *text = strings + name, *nul = memchr(text, 0, limit);
        if (!nul)
            continue;
        uint32_t len = (uint32_t)(nul - text), underscores = 0;
        while (underscores < len && text[underscores] == '_')
            underscores++;
        candidate cand = {
            .value = value, .size = size, .name = text, .name_len = len,
            .rank = (uint64_t)(size == 0) << 34 | (uint64_t)(bind == STB_WEAK) << 33 |
                    (uint64_t)(bind != STB_GLOBAL) << 32 | underscores,
            .order = (uint32_t)(cands->len / sizeof cand),
        };
        if (!append_candidate(cands, &cand))
            return false;
    }
    return true;
}

static PyObject *symbols_from_elf(PyObject *cls, PyObject *sources)
{
    PyObject *seq = PySequence_Fast(sources, "from_elf expects a list of (symtab, strtab, elf_class)");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > FU_MAX_SYMBOL_SOURCES) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "more than %d symbol table sources", FU_MAX_SYMBOL_SOURCES);
    }
    Py_buffer buffers[2 * FU_MAX_SYMBOL_SOURCES];
    Py_ssize_t held = 0;
    fu_growing cands = {0};
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int elf_class;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "y*y*i", &buffers[held], &buffers[held + 1],
                              &elf_class))
            goto done;
        held += 2;
        if (elf_class != 32 && elf_class != 64) {
            PyErr_Format(PyExc_ValueError, "elf_class must be 32 or 64, not %d", elf_class);
            goto done;
        }
        if (!read_elf_symbols(&buffers[held - 2], &buffers[held - 1], elf_class, &cands))
            goto done;
    }
    size_t count = cands.len / sizeof(candidate);
    if (count)
        qsort(cands.data, count, sizeof(candidate), by_value_rank_order);
    result = new_table_object((PyTypeObject *)cls);
    if (result && !table_from_sorted(&((SymbolTableObject *)result)->table, (candidate *)cands.data, count, false,
                                     true))
        Py_CLEAR(result);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&buffers[i]);
    free(cands.data);
    Py_DECREF(seq);
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
    {"from_elf", symbols_from_elf, METH_O | METH_CLASS,
     "from_elf([(symtab, strtab, elf_class), ...]) -> SymbolTable of the function symbols, sources by preference"},
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

int fu_symbols_binding_init(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &symbols_spec, NULL);
    if (!type)
        return -1;
    if (PyModule_AddObject(module, "SymbolTable", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}
