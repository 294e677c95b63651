/* The Python side of core/perf_replay.c (which documents the replay).
 *
 * replay_recording(perf_data) -> (space_ids: bytes u32[samples], comm_ids: bytes u32[samples],
 *     comm_names: [bytes], spaces: [bytes u32[mappings]], mappings: [(start, end, pgoff, file)],
 *     files: [(filename: bytes, build_id: bytes | None)], samples_without_process: int)
 *
 * Replay() keeps the state across the windows of a stream: Replay.feed(window) returns the same
 * tuple for the next window, its lists holding only what is new since the last feed.
 * replay_recording(perf_data) is one feed of a fresh Replay.
 */
#include "py_core.h"

#include "perf_replay.h"

/* ---- results as Python objects ---------------------------------------------------------------- */

static PyObject *string_bytes(fu_perf_string s) { return PyBytes_FromStringAndSize(s.len ? s.data : "", s.len); }

/* Only the mappings some space holds are listed: their indices are renumbered in first-use order,
 * which later feeds continue (the pool only grows). Each list holds what is new since the last feed. */
static PyObject *build_result(fu_replay *r, PyObject *space_ids, PyObject *comm_ids)
{
    fu_error err = {0};
    if (fu_replay_number_mappings(r, &err) != FU_OK)
        return py_core_raise(&err);
    const uint32_t *renumbered = (const uint32_t *)(const void *)r->renumbered.data;
    const uint32_t *numbered = (const uint32_t *)(const void *)r->numbered.data;
    const uint32_t *pool = (const uint32_t *)(const void *)r->space_pool.data;
    PyObject *mappings = PyList_New(r->used_mappings - r->reported_mappings), *result = NULL;
    for (uint32_t n = r->reported_mappings; mappings && n < r->used_mappings; n++) {
        const fu_replay_mapping *m = &FU_REPLAY_RECORDS(r, mappings, fu_replay_mapping)[numbered[n]];
        PyObject *item = Py_BuildValue("(KKKI)", (unsigned long long)m->start, (unsigned long long)m->end,
                                       (unsigned long long)m->pgoff, m->file);
        if (!item)
            Py_CLEAR(mappings);
        else
            PyList_SET_ITEM(mappings, n - r->reported_mappings, item);
    }
    uint32_t comm_count = FU_REPLAY_COUNT(r, comm_names, fu_perf_string), space_count = FU_REPLAY_COUNT(r, spaces, fu_replay_space),
             file_count = FU_REPLAY_COUNT(r, files, fu_replay_file);
    PyObject *comm_names = PyList_New(comm_count - r->reported_comm_names);
    PyObject *spaces = PyList_New(space_count - r->reported_spaces);
    PyObject *files = PyList_New(file_count - r->reported_files);
    if (!mappings || !comm_names || !spaces || !files)
        goto done;
    for (uint32_t i = r->reported_comm_names; i < comm_count; i++) {
        PyObject *name = string_bytes(FU_REPLAY_RECORDS(r, comm_names, fu_perf_string)[i]);
        if (!name)
            goto done;
        PyList_SET_ITEM(comm_names, i - r->reported_comm_names, name);
    }
    for (uint32_t i = r->reported_spaces; i < space_count; i++) {
        const fu_replay_space *sp = &FU_REPLAY_RECORDS(r, spaces, fu_replay_space)[i];
        PyObject *ids = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)sp->count);
        if (!ids)
            goto done;
        uint32_t *out = (uint32_t *)(void *)PyBytes_AS_STRING(ids);
        for (uint32_t k = 0; k < sp->count; k++)
            out[k] = renumbered[pool[sp->offset + k]];
        PyList_SET_ITEM(spaces, i - r->reported_spaces, ids);
    }
    for (uint32_t i = r->reported_files; i < file_count; i++) {
        const fu_replay_file *f = &FU_REPLAY_RECORDS(r, files, fu_replay_file)[i];
        PyObject *build_id = f->has_build_id ? PyBytes_FromStringAndSize((const char *)f->build_id, f->build_id_size)
                                             : Py_NewRef(Py_None);
        PyObject *name = f->perf_map ? PyBytes_FromFormat("/tmp/perf-%u.map", (unsigned)f->perf_map_pid)
                                     : string_bytes(f->name);
        if (!build_id || !name) {
            Py_XDECREF(name);
            Py_XDECREF(build_id);
            goto done;
        }
        PyObject *item = Py_BuildValue("(NN)", name, build_id);
        if (!item)
            goto done;
        PyList_SET_ITEM(files, i - r->reported_files, item);
    }
    result = Py_BuildValue("(OOOOOOK)", space_ids, comm_ids, comm_names, spaces, mappings, files,
                           (unsigned long long)r->samples_without_process);
    if (result)
        fu_replay_reported(r);
done:
    Py_XDECREF(comm_names);
    Py_XDECREF(spaces);
    Py_XDECREF(mappings);
    Py_XDECREF(files);
    return result;
}

static PyObject *replay_feed(PyObject *module, fu_replay *r, PyObject *perf_data)
{
    const fu_perf_data *pd = py_core_payload(module, PY_PERF_DATA, perf_data);
    if (!pd)
        return NULL;
    if (pd->sample_count > FU_REPLAY_NONE)
        return PyErr_Format(PyExc_ValueError, "%zu samples: more than this replay indexes", pd->sample_count);
    PyObject *space_ids = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)pd->sample_count);
    PyObject *comm_ids = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)pd->sample_count);
    if (!space_ids || !comm_ids) {
        Py_XDECREF(space_ids);
        Py_XDECREF(comm_ids);
        return NULL;
    }
    fu_error err = {0};
    PyObject *result = NULL;
    uint32_t *space_out = (uint32_t *)(void *)PyBytes_AS_STRING(space_ids);
    uint32_t *comm_out = (uint32_t *)(void *)PyBytes_AS_STRING(comm_ids);
    if (fu_replay_run(r, pd, space_out, comm_out, &err) != FU_OK)
        py_core_raise(&err);
    else
        result = build_result(r, space_ids, comm_ids);
    Py_DECREF(space_ids);
    Py_DECREF(comm_ids);
    return result;
}

static PyObject *replay_recording(PyObject *module, PyObject *perf_data)
{
    fu_replay r = {0};
    PyObject *result = replay_feed(module, &r, perf_data);
    fu_replay_free(&r);
    return result;
}

/* ---- Replay: the state kept across a stream's windows ------------------------------------------- */

typedef struct ReplayObject {
    PyObject_HEAD
    fu_replay r;
} ReplayObject;

static void replay_object_dealloc(ReplayObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_replay_free(&self->r);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *replay_object_feed(ReplayObject *self, PyObject *perf_data)
{
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    return module ? replay_feed(module, &self->r, perf_data) : NULL;
}

static PyMethodDef replay_object_methods[] = {
    {"feed", (PyCFunction)replay_object_feed, METH_O,
     "feed(window) -> replay_recording's tuple for the window, its lists holding only what is new"},
    {NULL},
};

static PyType_Slot replay_slots[] = {
    {Py_tp_dealloc, replay_object_dealloc},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_methods, replay_object_methods},
    {Py_tp_doc, "Replay(): processes and address spaces replayed across a stream's windows (core/perf_replay.c)."},
    {0, NULL},
};

static PyType_Spec replay_spec = {
    .name = "fastunwind._core.Replay",
    .basicsize = sizeof(ReplayObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = replay_slots,
};

static PyMethodDef replay_methods[] = {
    {"replay_recording", replay_recording, METH_O,
     "replay_recording(perf_data) -> (space_ids, comm_ids, comm_names, spaces, mappings, files, "
     "samples_without_process); see native/py/py_perf_replay.c"},
    {NULL},
};

int py_perf_replay_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, replay_methods) < 0)
        return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &replay_spec, NULL);
    if (!type || PyModule_AddObject(module, "Replay", type) < 0) {
        Py_XDECREF(type);
        return -1;
    }
    /* the space or comm id of a sample without one */
    return PyModule_AddObject(module, "REPLAY_NONE", PyLong_FromUnsignedLong(FU_REPLAY_NONE));
}
