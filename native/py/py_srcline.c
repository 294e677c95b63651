/* The Python type fastunwind._core.SourceLines over core/srcline.c (which documents what a chain is).
 *
 * SourceLines.open(path) -> SourceLines      a module's DWARF (its separate debug file, or itself)
 * lines.lookup(svma) -> [(function | None, file | None, line)]   innermost first; [] outside every unit
 * lines.dwarf_error: None if the file's DWARF is read, else why not; len(lines): the addresses resolved
 */
#include "py_core.h"

#include "srcline.h"

typedef struct SourceLinesObject {
    py_core_object base; /* payload: the fu_srcline_module */
} SourceLinesObject;

static void source_lines_dealloc(SourceLinesObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_srcline_close(self->base.payload);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *source_lines_open(PyObject *cls, PyObject *arg)
{
    PyObject *path;
    if (!PyUnicode_FSConverter(arg, &path))
        return NULL;
    fu_srcline_module *m;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_srcline_open(PyBytes_AS_STRING(path), &m, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (status != FU_OK)
        return py_core_raise(&err);
    SourceLinesObject *self = (SourceLinesObject *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    if (!self) {
        fu_srcline_close(m);
        return NULL;
    }
    self->base.payload = m;
    return (PyObject *)self;
}

/* A text of the module, or None when not known. */
static PyObject *text_or_none(const fu_srcline_module *m, uint32_t offset, uint32_t len)
{
    if (!len)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefaultAndSize(fu_srcline_text(m, offset), len);
}

static PyObject *source_lines_lookup(SourceLinesObject *self, PyObject *arg)
{
    unsigned long long svma = PyLong_AsUnsignedLongLong(arg);
    if (svma == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    fu_srcline_module *m = self->base.payload;
    fu_srcline_chain chain;
    fu_error err = {0};
    if (fu_srcline_lookup(m, svma, &chain, &err) != FU_OK)
        return py_core_raise(&err);
    PyObject *result = PyList_New(chain.count);
    for (uint32_t i = 0; result && i < chain.count; i++) {
        const fu_srcline_location *at = fu_srcline_location_at(m, chain.first + i);
        PyObject *name = text_or_none(m, at->name, at->name_len), *file = text_or_none(m, at->file, at->file_len);
        PyObject *item = name && file ? Py_BuildValue("(OOI)", name, file, at->line) : NULL;
        Py_XDECREF(name);
        Py_XDECREF(file);
        if (!item)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, item);
    }
    return result;
}

static Py_ssize_t source_lines_len(SourceLinesObject *self)
{
    return (Py_ssize_t)fu_srcline_address_count(self->base.payload);
}

static PyObject *source_lines_dwarf_error(SourceLinesObject *self, void *unused)
{
    const char *error = fu_srcline_dwarf_error(self->base.payload);
    if (!error)
        Py_RETURN_NONE;
    return PyUnicode_FromString(error);
}

static PyMethodDef source_lines_methods[] = {
    {"open", source_lines_open, METH_O | METH_CLASS,
     "open(path) -> SourceLines over the DWARF of the ELF file at path (none: every chain is empty)"},
    {"lookup", (PyCFunction)source_lines_lookup, METH_O,
     "lookup(svma) -> [(function, file, line)], innermost first: the line, then each inlined call site"},
    {NULL},
};

static PyGetSetDef source_lines_getset[] = {
    {"dwarf_error", (getter)source_lines_dwarf_error, NULL, "None if the file's DWARF is read, else why not", NULL},
    {NULL},
};

static PyType_Slot source_lines_slots[] = {
    {Py_tp_dealloc, source_lines_dealloc},
    {Py_tp_methods, source_lines_methods},
    {Py_tp_getset, source_lines_getset},
    {Py_sq_length, source_lines_len},
    {Py_tp_doc, "Source lines and inline chains of a module (see native/core/srcline.h); make with open()."},
    {0, NULL},
};

static PyType_Spec source_lines_spec = {
    .name = "fastunwind._core.SourceLines",
    .basicsize = sizeof(SourceLinesObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = source_lines_slots,
};

int py_srcline_init(PyObject *module)
{
    if (py_core_add_type(module, PY_SOURCE_LINES, &source_lines_spec) < 0)
        return -1;
    return PyModule_AddObject(module, "SRCLINE_MAX_DEPTH", PyLong_FromUnsignedLong(FU_SRCLINE_MAX_DEPTH));
}
