/* The Python side of core/report.c (perf report's table, accumulated window by window).
 *
 * Report(sort) with sort a combination of REPORT_SORT_SYM, _DSO, _COMM, _TID, _SRCLINE
 *   add(samples): counts a window's UnwoundSamples (symbolize_samples' result)
 *   rows(by_total, limit=-1) -> [(name | None, module | None, comm | None, pid, tid, self, total,
 *       srcline | None)], most samples first; name, module, comm and srcline are None where the sort
 *       has no such key
 *   samples: the samples counted
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
    free(order);
    return rows;
}

static PyObject *report_samples(ReportObject *self, void *unused)
{
    return PyLong_FromUnsignedLongLong(self->report.samples);
}

static PyMethodDef report_methods[] = {
    {"add", (PyCFunction)report_add, METH_O, "add(samples): count a window's UnwoundSamples"},
    {"rows", (PyCFunction)report_rows, METH_VARARGS,
     "rows(by_total, limit=-1) -> [(name, module, comm, pid, tid, self, total, srcline)], most samples first"},
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
    return 0;
}
