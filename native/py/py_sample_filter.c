/* The Python side of core/sample_filter.c: a window's samples filtered in place before the replay
 * and the walk.
 *
 * filter_samples(perf_data, pids, tids, cpus, ranges) -> samples kept
 *   pids, tids, cpus: sorted u32 (bytes; empty: any); ranges: u64 (start, end) pairs in ns (0: open)
 * keep_comms(perf_data, space_ids, comm_ids, wanted) -> (space_ids, comm_ids)
 *   keeps the samples whose comm id (replay_recording's) is in `wanted` (sorted u32), and returns
 *   their space and comm ids
 */
#include "py_core.h"

#include "sample_filter.h"

/* A u32 list from a buffer, at most FU_FILTER_MAX_VALUES and sorted. False with an exception set. */
static bool u32_list(const Py_buffer *b, const char *what, size_t *count)
{
    *count = (size_t)b->len / 4;
    if (b->len % 4 || *count > FU_FILTER_MAX_VALUES) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d u32 values", what, FU_FILTER_MAX_VALUES);
        return false;
    }
    const uint32_t *v = b->buf;
    for (size_t i = 1; i < *count; i++)
        if (v[i - 1] > v[i]) {
            PyErr_Format(PyExc_ValueError, "%s must be sorted", what);
            return false;
        }
    return true;
}

static PyObject *filter_samples(PyObject *module, PyObject *args)
{
    PyObject *perf_data;
    Py_buffer lists[4] = {{0}};
    if (!PyArg_ParseTuple(args, "Oy*y*y*y*", &perf_data, &lists[0], &lists[1], &lists[2], &lists[3]))
        return NULL;
    PyObject *result = NULL;
    bool *keep = NULL;
    fu_perf_data *pd = py_core_payload(module, PY_PERF_DATA, perf_data);
    fu_sample_filter f = {0};
    if (!pd || !u32_list(&lists[0], "pids", &f.pid_count) || !u32_list(&lists[1], "tids", &f.tid_count) ||
        !u32_list(&lists[2], "cpus", &f.cpu_count))
        goto done;
    f.range_count = (size_t)lists[3].len / 16;
    if (lists[3].len % 16 || f.range_count > FU_FILTER_MAX_RANGES) {
        PyErr_Format(PyExc_ValueError, "ranges: at most %d pairs of u64", FU_FILTER_MAX_RANGES);
        goto done;
    }
    f.pids = lists[0].buf;
    f.tids = lists[1].buf;
    f.cpus = lists[2].buf;
    f.ranges = lists[3].buf;
    if (!(keep = malloc(pd->sample_count + 1))) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < pd->sample_count; i++)
        keep[i] = fu_sample_filter_keep(&f, &pd->samples[i]);
    size_t kept = fu_perf_keep_samples(pd, keep);
    result = kept == SIZE_MAX ? PyErr_NoMemory() : PyLong_FromSize_t(kept);
done:
    free(keep);
    for (int i = 0; i < 4; i++)
        PyBuffer_Release(&lists[i]);
    return result;
}

static PyObject *keep_comms(PyObject *module, PyObject *args)
{
    PyObject *perf_data;
    Py_buffer space_ids, comm_ids, wanted;
    if (!PyArg_ParseTuple(args, "Oy*y*y*", &perf_data, &space_ids, &comm_ids, &wanted))
        return NULL;
    PyObject *result = NULL, *spaces = NULL, *comms = NULL;
    bool *keep = NULL;
    size_t wanted_count;
    fu_perf_data *pd = py_core_payload(module, PY_PERF_DATA, perf_data);
    if (!pd || !u32_list(&wanted, "wanted", &wanted_count))
        goto done;
    size_t n = pd->sample_count;
    if ((size_t)space_ids.len != 4 * n || (size_t)comm_ids.len != 4 * n) {
        PyErr_Format(PyExc_ValueError, "space_ids and comm_ids need 4 bytes for each of %zu samples", n);
        goto done;
    }
    spaces = PyBytes_FromStringAndSize(NULL, space_ids.len);
    comms = PyBytes_FromStringAndSize(NULL, comm_ids.len);
    if (!spaces || !comms || !(keep = malloc(n + 1))) {
        if (spaces && comms)
            PyErr_NoMemory();
        goto done;
    }
    uint32_t *space_out = (uint32_t *)(void *)PyBytes_AS_STRING(spaces), *comm_out = (uint32_t *)(void *)PyBytes_AS_STRING(comms);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t comm, space;
        memcpy(&comm, (const char *)comm_ids.buf + 4 * i, 4);
        memcpy(&space, (const char *)space_ids.buf + 4 * i, 4);
        /* an empty list would hold every value: no comm wanted here keeps nothing */
        keep[i] = wanted_count && fu_sample_filter_listed(wanted.buf, wanted_count, comm);
        if (keep[i]) {
            space_out[kept] = space;
            comm_out[kept] = comm;
            kept++;
        }
    }
    if (fu_perf_keep_samples(pd, keep) == SIZE_MAX) {
        PyErr_NoMemory();
        goto done;
    }
    if (_PyBytes_Resize(&spaces, (Py_ssize_t)(4 * kept)) < 0 || _PyBytes_Resize(&comms, (Py_ssize_t)(4 * kept)) < 0)
        goto done;
    result = Py_BuildValue("(OO)", spaces, comms);
done:
    Py_XDECREF(spaces);
    Py_XDECREF(comms);
    free(keep);
    PyBuffer_Release(&space_ids);
    PyBuffer_Release(&comm_ids);
    PyBuffer_Release(&wanted);
    return result;
}

static PyMethodDef sample_filter_methods[] = {
    {"filter_samples", filter_samples, METH_VARARGS,
     "filter_samples(perf_data, pids, tids, cpus, ranges) -> samples kept; see native/py/py_sample_filter.c"},
    {"keep_comms", keep_comms, METH_VARARGS,
     "keep_comms(perf_data, space_ids, comm_ids, wanted) -> (space_ids, comm_ids); see native/py/py_sample_filter.c"},
    {NULL},
};

int py_sample_filter_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, sample_filter_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "FILTER_MAX_VALUES", FU_FILTER_MAX_VALUES) < 0 ||
        PyModule_AddIntConstant(module, "FILTER_MAX_RANGES", FU_FILTER_MAX_RANGES) < 0)
        return -1;
    return 0;
}
