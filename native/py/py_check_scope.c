/* The check stage's inputs and code without CFI (native/core/check_scope.h).
 *
 * check_symbols(files) -> (starts, sizes, name_offsets, names, noreturn, entries)
 *   files: the bytes of an ELF file and of its separate debug file (one or two). Their function
 *   symbols, one per address: starts (sorted uint64), sizes (uint64), name_offsets (uint32 into
 *   names, NUL-terminated names); noreturn and entries: the sorted uint64 addresses of functions that
 *   never return and of known function entries (check.h fu_check_image). Buffers, not objects: the
 *   check hands them to the C core again (check_fdes, check_uncovered).
 * check_scope_fdes(table) -> bytes: the uint32 entry indices of the FDEs of `table` check judges.
 * check_uncovered(elf, eh_frame, debug_frame, code, symbols, targets) -> [(start, end, name)]
 *   elf: the file's bytes; eh_frame, debug_frame: its CfiTables (or None); code: its executable
 *   PT_LOAD segments as (vaddr, bytes); symbols: check_symbols' tuple; targets: uint64 code
 *   addresses the check found no FDE for, and DT_INIT / DT_FINI. name "" where no symbol starts.
 * check_noreturn_name(name) -> bool: whether a function of that name never returns.
 */
#include "py_core.h" /* Python.h first */

#include "check_scope.h"

static PyObject *check_symbols(PyObject *module, PyObject *arg)
{
    PyObject *files = PySequence_Fast(arg, "files must be a sequence of buffers");
    if (!files)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(files);
    if (count < 1 || count > FU_CHECK_MAX_SYMBOL_FILES) {
        Py_DECREF(files);
        return PyErr_Format(PyExc_ValueError, "one or two files, not %zd", count);
    }
    Py_buffer views[FU_CHECK_MAX_SYMBOL_FILES] = {{0}};
    fu_elf elves[FU_CHECK_MAX_SYMBOL_FILES];
    const fu_elf *opened[FU_CHECK_MAX_SYMBOL_FILES];
    PyObject *result = NULL;
    Py_ssize_t acquired = 0;
    fu_error err = {0};
    for (; acquired < count; acquired++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(files, acquired), &views[acquired], PyBUF_SIMPLE) < 0)
            goto done;
        if (fu_elf_open(&elves[acquired], views[acquired].buf, (size_t)views[acquired].len, &err)) {
            acquired++;
            py_core_raise(&err);
            goto done;
        }
        opened[acquired] = &elves[acquired];
    }
    fu_check_symbols symbols;
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_check_symbols_read(opened, (size_t)count, &symbols, &err);
    Py_END_ALLOW_THREADS
    if (status) {
        py_core_raise(&err);
        goto done;
    }
    result = Py_BuildValue("(NNNNNN)", py_core_bytes(symbols.starts, symbols.count * 8),
                           py_core_bytes(symbols.sizes, symbols.count * 8),
                           py_core_bytes(symbols.name_offsets, symbols.count * 4),
                           py_core_bytes(symbols.names, symbols.names_size),
                           py_core_bytes(symbols.noreturn, symbols.noreturn_count * 8),
                           py_core_bytes(symbols.entries, symbols.entry_count * 8));
    fu_check_symbols_free(&symbols);
done:
    for (Py_ssize_t i = 0; i < acquired; i++)
        PyBuffer_Release(&views[i]);
    Py_DECREF(files);
    return result;
}

static PyObject *check_scope_fdes(PyObject *module, PyObject *arg)
{
    const fu_cfi_table *table = py_core_payload(module, PY_CFI_TABLE, arg);
    if (!table)
        return NULL;
    fu_buffer entries = {0};
    fu_error err = {0};
    PyObject *result = fu_check_scope_fdes(table, &entries, &err) ? py_core_raise(&err)
                                                                    : py_core_bytes(entries.data, entries.len);
    free(entries.data);
    return result;
}

/* check_symbols' six buffers, acquired, as a borrowed fu_check_symbols; false with ValueError. */
typedef struct symbol_buffers {
    Py_buffer views[6];
    int acquired;
} symbol_buffers;

static void release_symbols(symbol_buffers *b)
{
    for (int i = 0; i < b->acquired; i++)
        PyBuffer_Release(&b->views[i]);
}

static bool symbols_from(PyObject *tuple, symbol_buffers *b, fu_check_symbols *out)
{
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != 6) {
        PyErr_SetString(PyExc_TypeError, "symbols must be check_symbols' 6-tuple");
        return false;
    }
    for (; b->acquired < 6; b->acquired++)
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(tuple, b->acquired), &b->views[b->acquired], PyBUF_SIMPLE) < 0)
            return false;
    Py_buffer *v = b->views;
    size_t count = (size_t)v[0].len / 8;
    *out = (fu_check_symbols){
        .starts = v[0].buf, .sizes = v[1].buf, .name_offsets = v[2].buf, .count = count,
        .names = v[3].buf, .names_size = (size_t)v[3].len,
        .noreturn = v[4].buf, .noreturn_count = (size_t)v[4].len / 8,
        .entries = v[5].buf, .entry_count = (size_t)v[5].len / 8,
    };
    bool aligned = true;
    for (int i = 0; i < 6; i++)
        aligned = aligned && (i == 3 || (uintptr_t)v[i].buf % (i == 2 ? 4 : 8) == 0);
    if (!aligned || v[0].len % 8 || (size_t)v[1].len != count * 8 || (size_t)v[2].len != count * 4 || v[4].len % 8 ||
        v[5].len % 8 || !fu_check_symbols_valid(out)) {
        PyErr_SetString(PyExc_ValueError, "symbols are not a table check_symbols made");
        return false;
    }
    return true;
}

static PyObject *uncovered_list(const fu_check_symbols *symbols, const fu_buffer *ranges)
{
    const fu_check_uncovered_range *r = (const fu_check_uncovered_range *)ranges->data;
    size_t count = ranges->len / sizeof *r;
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list && i < count; i++) {
        const char *name = r[i].name == UINT32_MAX ? "" : symbols->names + r[i].name;
        PyObject *text = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "backslashreplace");
        PyObject *item = text ? Py_BuildValue("(KKN)", (unsigned long long)r[i].start, (unsigned long long)r[i].end,
                                              text)
                              : NULL;
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyObject *check_uncovered(PyObject *module, PyObject *args)
{
    Py_buffer elf_view = {0}, targets = {0};
    PyObject *eh_frame_object, *debug_frame_object, *code_object, *symbols_object, *result = NULL;
    py_core_segments code = {0};
    symbol_buffers buffers = {0};
    fu_buffer ranges = {0};
    if (!PyArg_ParseTuple(args, "y*OOOOy*", &elf_view, &eh_frame_object, &debug_frame_object, &code_object,
                          &symbols_object, &targets))
        return NULL;
    const fu_cfi_table *tables[2] = {NULL, NULL};
    PyObject *table_objects[2] = {eh_frame_object, debug_frame_object};
    for (int t = 0; t < 2; t++)
        if (table_objects[t] != Py_None && !(tables[t] = py_core_payload(module, PY_CFI_TABLE, table_objects[t])))
            goto done;
    fu_check_symbols symbols;
    if (!py_core_segments_from(code_object, &code) || !symbols_from(symbols_object, &buffers, &symbols))
        goto done;
    if (targets.len % 8 || (uintptr_t)targets.buf % 8) {
        PyErr_SetString(PyExc_ValueError, "targets must hold aligned uint64 values");
        goto done;
    }
    fu_elf elf;
    fu_error err = {0};
    if (fu_elf_open(&elf, elf_view.buf, (size_t)elf_view.len, &err)) {
        py_core_raise(&err);
        goto done;
    }
    fu_check_scope_input input = {
        .elf = &elf, .tables = {tables[0], tables[1]}, .code = code.segments, .code_count = (size_t)code.count,
        .symbols = &symbols, .targets = targets.buf, .target_count = (size_t)targets.len / 8,
    };
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_check_uncovered(&input, &ranges, &err);
    Py_END_ALLOW_THREADS
    result = status ? py_core_raise(&err) : uncovered_list(&symbols, &ranges);
done:
    free(ranges.data);
    release_symbols(&buffers);
    py_core_segments_release(&code);
    PyBuffer_Release(&elf_view);
    PyBuffer_Release(&targets);
    return result;
}

static PyObject *check_noreturn_name(PyObject *module, PyObject *arg)
{
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!name)
        return NULL;
    return PyBool_FromLong(fu_check_noreturn_name(name, (size_t)len));
}

static PyMethodDef check_scope_functions[] = {
    {"check_symbols", check_symbols, METH_O,
     "check_symbols(files) -> (starts, sizes, name_offsets, names, noreturn, entries)"},
    {"check_scope_fdes", check_scope_fdes, METH_O, "check_scope_fdes(table) -> bytes of uint32 entry indices"},
    {"check_uncovered", check_uncovered, METH_VARARGS,
     "check_uncovered(elf, eh_frame, debug_frame, code, symbols, targets) -> [(start, end, name)]"},
    {"check_noreturn_name", check_noreturn_name, METH_O, "check_noreturn_name(name) -> bool"},
    {NULL},
};

int py_check_scope_init(PyObject *module)
{
    return PyModule_AddFunctions(module, check_scope_functions);
}
