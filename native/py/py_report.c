/* The Python side of core/report.c (perf report's table, accumulated window by window).
 *
 * Report(sort) with sort a combination of REPORT_SORT_SYM, _DSO, _COMM, _TID, _SRCLINE
 *   add(samples): counts a window's UnwoundSamples (symbolize_samples' result)
 *   rows(by_total, limit=-1) -> [(name | None, module | None, comm | None, pid, tid, self, total,
 *       srcline | None)], most samples first; name, module, comm and srcline are None where the sort
 *       has no such key
 *   table(keys, by_total, limit, width, source) -> bytes: the table's text (fu_report_write_table;
 *       keys: REPORT_SORT_* flags in the sort's order; width -1: names in full; source: the title's
 *       recording)
 *   thread_tables(keys, by_total, limit, width) -> bytes: --per-thread's tables (fu_report_write_threads)
 *   threads(by_total, limit=-1) -> [(comm | None, pid, tid, samples, rows)]: the threads of a report
 *       sorted by tid, most samples first (fu_report_threads), each with its first `limit` rows
 *   samples: the samples counted
 * REPORT_SORT_KEYS: {name: flag} of the sort keys, in perf's spelling (fu_report_keys)
 */
#include "py_core.h"

#include "report.h"

typedef struct ReportObject {
    py_core_object base; /* payload: &report */
    fu_report report;
} ReportObject;

static int report_init(ReportObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"sort", NULL};
    unsigned sort;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "I", kwlist, &sort))
        return -1;
    if (!sort || sort & ~FU_REPORT_SORT_ALL) {
        PyErr_Format(PyExc_ValueError, "sort must combine REPORT_SORT_* flags, not %u", sort);
        return -1;
    }
    fu_report_free(&self->report);
    fu_report_init(&self->report, sort);
    self->base.payload = &self->report;
    return 0;
}

static void report_dealloc(ReportObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_report_free(&self->report);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static fu_status add_window(void *report, const void *unwound, fu_error *err)
{
    return fu_report_add(report, unwound, err);
}

static PyObject *report_add(ReportObject *self, PyObject *samples)
{
    return py_core_add_window((PyObject *)self, PY_REPORT, samples, add_window);
}

/* A string of the report as str (names: UTF-8; paths and comms: the file system's encoding), or None. */
static PyObject *text_or_none(const fu_report *r, uint32_t id, bool utf8)
{
    if (id == FU_INTERN_NONE)
        Py_RETURN_NONE;
    fu_text t = fu_report_text(r, id);
    return utf8 ? PyUnicode_DecodeUTF8(t.data, (Py_ssize_t)t.len, "replace")
                : PyUnicode_DecodeFSDefaultAndSize(t.data, (Py_ssize_t)t.len);
}

/* The entries `order[0, n)` as row tuples. */
static PyObject *row_list(const fu_report *r, const uint32_t *order, size_t n)
{
    PyObject *rows = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; rows && i < n; i++) {
        const fu_report_entry *e = fu_report_entry_at(r, order[i]);
        uint32_t name = e->function == FU_INTERN_NONE ? FU_INTERN_NONE : fu_report_function_at(r, e->function)->name;
        PyObject *row = Py_BuildValue("(NNNiiKKN)", text_or_none(r, name, true), text_or_none(r, e->dso, false),
                                      text_or_none(r, e->comm, false), (int)e->pid, (int)e->tid,
                                      (unsigned long long)e->self, (unsigned long long)e->total,
                                      text_or_none(r, e->srcline, false));
        if (!row)
            Py_CLEAR(rows);
        else
            PyList_SET_ITEM(rows, (Py_ssize_t)i, row);
    }
    return rows;
}

static PyObject *report_rows(ReportObject *self, PyObject *args)
{
    int by_total;
    Py_ssize_t limit = -1;
    if (!PyArg_ParseTuple(args, "p|n", &by_total, &limit))
        return NULL;
    const fu_report *r = &self->report;
    size_t count = fu_report_entry_count(r);
    uint32_t *order = malloc((count ? count : 1) * sizeof *order);
    size_t n = order ? fu_report_order(r, by_total, order) : SIZE_MAX;
    if (n == SIZE_MAX) {
        free(order);
        return PyErr_NoMemory();
    }
    if (limit >= 0 && (size_t)limit < n)
        n = (size_t)limit;
    PyObject *rows = row_list(r, order, n);
    free(order);
    return rows;
}

/* A layout from (keys, by_total, limit, width); false with an exception. */
static bool parse_layout(PyObject *keys, int by_total, long long limit, long width, fu_report_layout *layout)
{
    *layout = (fu_report_layout){.by_total = by_total, .limit = limit < 0 ? -1 : limit, .width = width < 0 ? -1 : width};
    PyObject *sequence = PySequence_Fast(keys, "keys must be a sequence of REPORT_SORT_* flags");
    if (!sequence)
        return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
    bool ok = n <= FU_REPORT_KEY_COUNT;
    if (!ok)
        PyErr_Format(PyExc_ValueError, "at most %d sort keys, not %zd", FU_REPORT_KEY_COUNT, n);
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        unsigned long flag = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(sequence, i));
        ok = !PyErr_Occurred();
        layout->keys[layout->key_count++] = (unsigned)flag;
    }
    Py_DECREF(sequence);
    return ok;
}

/* The text appended to `text` by a writer as bytes, or NULL with its error raised. */
static PyObject *text_or_raise(fu_buffer *text, fu_status status, fu_error *err)
{
    PyObject *result = status == FU_OK ? py_core_bytes(text->data, text->len) : py_core_raise(err);
    free(text->data);
    return result;
}

static PyObject *report_table(ReportObject *self, PyObject *args)
{
    PyObject *keys;
    int by_total;
    long long limit;
    long width;
    const char *source;
    Py_ssize_t source_len;
    fu_report_layout layout;
    if (!PyArg_ParseTuple(args, "OpLly#", &keys, &by_total, &limit, &width, &source, &source_len) ||
        !parse_layout(keys, by_total, limit, width, &layout))
        return NULL;
    fu_buffer text = {0};
    fu_error err = {0};
    fu_status status = fu_report_write_table(&self->report, &layout, (fu_text){source, (size_t)source_len}, &text, &err);
    return text_or_raise(&text, status, &err);
}

static PyObject *report_thread_tables(ReportObject *self, PyObject *args)
{
    PyObject *keys;
    int by_total;
    long long limit;
    long width;
    fu_report_layout layout;
    if (!PyArg_ParseTuple(args, "OpLl", &keys, &by_total, &limit, &width) ||
        !parse_layout(keys, by_total, limit, width, &layout))
        return NULL;
    fu_buffer text = {0};
    fu_error err = {0};
    fu_status status = fu_report_write_threads(&self->report, &layout, &text, &err);
    return text_or_raise(&text, status, &err);
}

static PyObject *report_threads(ReportObject *self, PyObject *args)
{
    int by_total;
    Py_ssize_t limit = -1;
    if (!PyArg_ParseTuple(args, "p|n", &by_total, &limit))
        return NULL;
    const fu_report *r = &self->report;
    uint32_t *rows;
    fu_report_thread *threads;
    size_t count;
    fu_error err = {0};
    if (fu_report_threads(r, by_total, &rows, &threads, &count, &err) != FU_OK)
        return py_core_raise(&err);
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list && i < count; i++) {
        const fu_report_thread *t = &threads[i];
        size_t n = limit >= 0 && (size_t)limit < t->count ? (size_t)limit : t->count;
        PyObject *section = Py_BuildValue("(NiiKN)", text_or_none(r, t->comm, false), (int)t->pid, (int)t->tid,
                                          (unsigned long long)t->samples, row_list(r, rows + t->first, n));
        if (!section)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, section);
    }
    free(rows);
    free(threads);
    return list;
}

static PyObject *report_samples(ReportObject *self, void *unused)
{
    return PyLong_FromUnsignedLongLong(self->report.samples);
}

static PyMethodDef report_methods[] = {
    {"add", (PyCFunction)report_add, METH_O, "add(samples): count a window's UnwoundSamples"},
    {"rows", (PyCFunction)report_rows, METH_VARARGS,
     "rows(by_total, limit=-1) -> [(name, module, comm, pid, tid, self, total, srcline)], most samples first"},
    {"table", (PyCFunction)report_table, METH_VARARGS,
     "table(keys, by_total, limit, width, source) -> bytes: the table's text (width -1: names in full)"},
    {"thread_tables", (PyCFunction)report_thread_tables, METH_VARARGS,
     "thread_tables(keys, by_total, limit, width) -> bytes: a table per thread (--per-thread)"},
    {"threads", (PyCFunction)report_threads, METH_VARARGS,
     "threads(by_total, limit=-1) -> [(comm, pid, tid, samples, rows)], most samples first"},
    {NULL},
};

static PyGetSetDef report_getset[] = {
    {"samples", (getter)report_samples, NULL, "samples counted", NULL},
    {NULL},
};

static PyType_Slot report_slots[] = {
    {Py_tp_init, report_init},
    {Py_tp_dealloc, report_dealloc},
    {Py_tp_methods, report_methods},
    {Py_tp_getset, report_getset},
    {Py_tp_doc, "perf report's table of functions by self and total samples (see native/core/report.h)."},
    {0, NULL},
};

static PyType_Spec report_spec = {
    .name = "fastunwind._core.Report",
    .basicsize = sizeof(ReportObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = report_slots,
};

int py_report_init(PyObject *module)
{
    if (py_core_add_type(module, PY_REPORT, &report_spec) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "REPORT_SORT_SYM", FU_REPORT_SORT_SYM) < 0 ||
        PyModule_AddIntConstant(module, "REPORT_SORT_DSO", FU_REPORT_SORT_DSO) < 0 ||
        PyModule_AddIntConstant(module, "REPORT_SORT_COMM", FU_REPORT_SORT_COMM) < 0 ||
        PyModule_AddIntConstant(module, "REPORT_SORT_TID", FU_REPORT_SORT_TID) < 0 ||
        PyModule_AddIntConstant(module, "REPORT_SORT_SRCLINE", FU_REPORT_SORT_SRCLINE) < 0)
        return -1;
    PyObject *keys = PyDict_New();
    for (size_t k = 0; keys && k < FU_REPORT_KEY_COUNT; k++) {
        PyObject *flag = PyLong_FromUnsignedLong(fu_report_keys[k].flag);
        if (!flag || PyDict_SetItemString(keys, fu_report_keys[k].name, flag) < 0)
            Py_CLEAR(keys);
        Py_XDECREF(flag);
    }
    if (!keys || PyModule_AddObject(module, "REPORT_SORT_KEYS", keys) < 0) {
        Py_XDECREF(keys);
        return -1;
    }
    return 0;
}
