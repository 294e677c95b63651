/* The Python type fastunwind._core.SymbolTable over core/symbols.c (which documents what each table
 * keeps, after perf 6.1).
 *
 * SymbolTable.from_elf([(symtab, strtab, elf_class, section_flags)], plt=None) -> SymbolTable
 *     plt: (dynsym, dynstr, [relocation sections], [(address, bytes, sh_entsize, sh_addralign,
 *     is_plt_got)]): x86-64 PLT stubs named "symbol@plt" (plt.c).
 * SymbolTable.from_perf_map(text) -> SymbolTable
 * SymbolTable.from_kallsyms(text, addresses=None) -> SymbolTable
 *     addresses: bytes of u64, the lookups to keep symbols for.
 * SymbolTable.from_cache(data, key) -> SymbolTable
 *     a cache file (core/symbol_cache.h) used in place: `data` (a mapped file) stays exported while
 *     the table lives; ValueError if it is not a valid table for `key`.
 * table.cache_file(key) -> bytes: the table as a cache file for `key`.
 * table.lookup(address) -> (name, offset) | None;  len(table); table.usable
 */
#include "py_core.h"

#include "plt.h"
#include "symbol_cache.h"
#include "symbols.h"

typedef struct SymbolTableObject {
    py_core_object base; /* payload: &table (filled by the classmethod that made the object) */
    fu_symbol_table table;
    Py_buffer file; /* from_cache: the cache file the table's arrays point into (file.obj NULL otherwise) */
} SymbolTableObject;

static void symbols_dealloc(SymbolTableObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_symbol_table_free(&self->table);
    if (self->file.obj)
        PyBuffer_Release(&self->file);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *new_table_object(PyTypeObject *type)
{
    SymbolTableObject *self = (SymbolTableObject *)type->tp_alloc(type, 0);
    if (self) {
        memset(&self->table, 0, sizeof self->table);
        memset(&self->file, 0, sizeof self->file);
        self->base.payload = &self->table;
    }
    return (PyObject *)self;
}

/* A SymbolTable object made by a classmethod from `build`'s table, or NULL with the exception. */
static PyObject *table_object(PyObject *cls, fu_status status, fu_symbol_table *table, const fu_error *err)
{
    if (status != FU_OK)
        return py_core_raise(err);
    PyObject *result = new_table_object((PyTypeObject *)cls);
    if (!result) {
        fu_symbol_table_free(table);
        return NULL;
    }
    ((SymbolTableObject *)result)->table = *table;
    return result;
}

/* plt = (dynsym, dynstr, [relocation sections], [(address, bytes, sh_entsize, sh_addralign, is_plt_got)]);
 * buffers held in
 * `held` (released by the caller). */
static bool read_plt(PyObject *plt, Py_buffer *held, Py_ssize_t *held_count, fu_plt_input *in)
{
    PyObject *relocations, *sections;
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
    in->dynsym = dynsym->buf;
    in->dynsym_size = (size_t)dynsym->len;
    in->dynstr = dynstr->buf;
    in->dynstr_size = (size_t)dynstr->len;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(relocations); i++) {
        Py_buffer *b = &held[*held_count];
        if (PyObject_GetBuffer(PyList_GET_ITEM(relocations, i), b, PyBUF_SIMPLE) < 0)
            return false;
        (*held_count)++;
        in->relocations[in->relocation_count] = b->buf;
        in->relocation_sizes[in->relocation_count++] = (size_t)b->len;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sections); i++) {
        Py_buffer *b = &held[*held_count];
        unsigned long long address, entsize, addralign;
        int is_plt_got;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(sections, i), "Ky*KKp", &address, b, &entsize, &addralign, &is_plt_got))
            return false;
        (*held_count)++;
        in->sections[in->section_count++] = (fu_plt_section){address, b->buf, (size_t)b->len,
                                                           fu_plt_entry_size(entsize, addralign, is_plt_got)};
    }
    return true;
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
    fu_symbol_source source[FU_MAX_SYMBOL_SOURCES];
    Py_ssize_t held = 0;
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
        source[i] = (fu_symbol_source){
            .symtab = buffers[held - 3].buf, .symtab_size = (size_t)buffers[held - 3].len,
            .strtab = buffers[held - 2].buf, .strtab_size = (size_t)buffers[held - 2].len,
            .elf_class = elf_class,
            .section_flags = buffers[held - 1].buf, .section_count = (size_t)buffers[held - 1].len,
        };
    }
    fu_plt_input plt_input = {0};
    if (plt != Py_None) {
        if (!PyTuple_Check(plt)) {
            PyErr_SetString(PyExc_TypeError, "plt must be None or (dynsym, dynstr, relocations, sections)");
            goto done;
        }
        if (!read_plt(plt, buffers, &held, &plt_input))
            goto done;
    }
    fu_symbol_table table;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS /* the buffers stay exported: nothing can move or free them */
    status = fu_symbols_from_elf(source, (size_t)n, plt != Py_None ? &plt_input : NULL, &table, &err);
    Py_END_ALLOW_THREADS
    result = table_object(cls, status, &table, &err);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&buffers[i]);
    Py_DECREF(seq);
    return result;
}

static PyObject *symbols_from_perf_map(PyObject *cls, PyObject *arg)
{
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0)
        return NULL;
    fu_symbol_table table;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_symbols_from_perf_map(text.buf, (size_t)text.len, &table, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&text);
    return table_object(cls, status, &table, &err);
}

static PyObject *symbols_from_kallsyms(PyObject *cls, PyObject *args)
{
    Py_buffer text, queries = {0};
    if (!PyArg_ParseTuple(args, "y*|y*", &text, &queries))
        return NULL;
    PyObject *result = NULL;
    if (queries.buf && (size_t)queries.len % 8) {
        PyErr_SetString(PyExc_ValueError, "addresses must be bytes of u64");
        goto done;
    }
    fu_symbol_table table;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_symbols_from_kallsyms(text.buf, (size_t)text.len, queries.buf, (size_t)queries.len / 8, &table, &err);
    Py_END_ALLOW_THREADS
    result = table_object(cls, status, &table, &err);
done:
    PyBuffer_Release(&text);
    if (queries.buf)
        PyBuffer_Release(&queries);
    return result;
}

static PyObject *symbols_from_cache(PyObject *cls, PyObject *args)
{
    Py_buffer file, key;
    if (!PyArg_ParseTuple(args, "y*y*", &file, &key))
        return NULL;
    fu_symbol_table table;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS /* checking reads every page of the file */
    status = fu_symbol_cache_load(file.buf, (size_t)file.len, key.buf, (size_t)key.len, &table, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&key);
    PyObject *result = table_object(cls, status, &table, &err);
    if (result)
        ((SymbolTableObject *)result)->file = file; /* the table's arrays are in it */
    else
        PyBuffer_Release(&file);
    return result;
}

static PyObject *symbols_cache_file(SymbolTableObject *self, PyObject *arg)
{
    Py_buffer key;
    if (PyObject_GetBuffer(arg, &key, PyBUF_SIMPLE) < 0)
        return NULL;
    fu_buffer out = {0};
    fu_error err = {0};
    fu_status status = fu_symbol_cache_write(&self->table, key.buf, (size_t)key.len, &out, &err);
    PyBuffer_Release(&key);
    PyObject *result = status == FU_OK ? PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len)
                                       : py_core_raise(&err);
    free(out.data);
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
    {"from_cache", symbols_from_cache, METH_VARARGS | METH_CLASS,
     "from_cache(data, key) -> SymbolTable of a cache file made by cache_file(key), used in place (ValueError if "
     "it is not one)"},
    {"cache_file", (PyCFunction)symbols_cache_file, METH_O, "cache_file(key) -> bytes: the table as a cache file"},
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
    {Py_tp_doc, "Function symbols by address (see native/core/symbols.c); build with from_elf or from_kallsyms."},
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
    if (py_core_add_type(module, PY_SYMBOL_TABLE, &symbols_spec) < 0)
        return -1;
    return PyModule_AddObject(module, "MAX_SYMBOLS", PyLong_FromUnsignedLong(FU_MAX_SYMBOLS));
}
