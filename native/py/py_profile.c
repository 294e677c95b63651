/* The Python side of core/profile.c (a recording's samples, built window by window, and the files
 * made of them).
 *
 * Profile()
 *   add(samples): adds a window's UnwoundSamples (symbolize_samples' result)
 *   add_stack(pid, tid, comm, outcome, frames, count, time, interval_ms): adds a stack named already
 *     (frames: function names, root first; outcome "" when complete) sampled `count` times
 *   speedscope(write, name): calls write(bytes) with speedscope's file in chunks
 *   gecko(write, name): the same with the Firefox profiler's processed profile
 *   flame(write, max_nodes): the same with the HTML flame graph's data (JSON)
 *   samples: the samples added
 */
#include "py_core.h"

#include "profile.h"

typedef struct ProfileObject {
    py_core_object base; /* payload: &profile */
    fu_profile profile;
} ProfileObject;

static int profile_init(ProfileObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "", kwlist))
        return -1;
    fu_profile_free(&self->profile);
    fu_profile_init(&self->profile);
    self->base.payload = &self->profile;
    return 0;
}

static void profile_dealloc(ProfileObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_profile_free(&self->profile);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static fu_status add_window(void *profile, const void *unwound, fu_error *err)
{
    return fu_profile_add(profile, unwound, err);
}

static PyObject *profile_add(ProfileObject *self, PyObject *samples)
{
    return py_core_add_window((PyObject *)self, PY_PROFILE, samples, add_window);
}

static PyObject *profile_add_stack(ProfileObject *self, PyObject *args)
{
    int pid, tid;
    const char *comm, *outcome;
    Py_ssize_t comm_len, outcome_len;
    PyObject *frames;
    unsigned long long count, time;
    double interval_ms;
    if (!PyArg_ParseTuple(args, "iis#s#OKKd", &pid, &tid, &comm, &comm_len, &outcome, &outcome_len, &frames, &count,
                          &time, &interval_ms))
        return NULL;
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    fu_profile *profile = module ? py_core_payload(module, PY_PROFILE, (PyObject *)self) : NULL;
    PyObject *sequence = profile ? PySequence_Fast(frames, "frames must be a sequence of str") : NULL;
    if (!sequence)
        return NULL;
    Py_ssize_t frame_count = PySequence_Fast_GET_SIZE(sequence);
    if (frame_count > FU_PROFILE_MAX_STACK_FRAMES) {
        Py_DECREF(sequence);
        return PyErr_Format(PyExc_ValueError, "a stack of more than %u frames", FU_PROFILE_MAX_STACK_FRAMES);
    }
    fu_text *texts = PyMem_Calloc((size_t)frame_count + 1, sizeof *texts);
    if (!texts) {
        Py_DECREF(sequence);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < frame_count; i++) { /* bounded by FU_PROFILE_MAX_STACK_FRAMES */
        Py_ssize_t len;
        const char *name = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(sequence, i), &len);
        if (!name) {
            PyMem_Free(texts);
            Py_DECREF(sequence);
            return NULL;
        }
        texts[i] = (fu_text){name, (size_t)len};
    }
    fu_profile_stack stack = {.pid = pid, .tid = tid, .comm = {comm, (size_t)comm_len},
                              .outcome = {outcome, (size_t)outcome_len}, .frames = texts,
                              .frame_count = (size_t)frame_count, .count = count, .time = time,
                              .interval_ms = interval_ms};
    fu_error err = {0};
    fu_status status = fu_profile_add_stack(profile, &stack, &err);
    PyMem_Free(texts);
    Py_DECREF(sequence);
    if (status != FU_OK)
        return py_core_raise(&err);
    Py_RETURN_NONE;
}

typedef fu_status (*profile_writer)(const fu_profile *p, fu_text name, fu_sink_fn sink, void *context, fu_error *err);

/* write(profile, name): one of the named files, in chunks to the callable `write`. */
static PyObject *write_named(ProfileObject *self, PyObject *args, profile_writer file)
{
    PyObject *write;
    const char *name;
    Py_ssize_t name_len;
    if (!PyArg_ParseTuple(args, "Os#", &write, &name, &name_len))
        return NULL;
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    const fu_profile *profile = module ? py_core_payload(module, PY_PROFILE, (PyObject *)self) : NULL;
    if (!profile)
        return NULL;
    fu_error err = {0};
    if (file(profile, (fu_text){name, (size_t)name_len}, py_core_write_chunk, write, &err) != FU_OK)
        return PyErr_Occurred() ? NULL : py_core_raise(&err);
    Py_RETURN_NONE;
}

static PyObject *profile_speedscope(ProfileObject *self, PyObject *args)
{
    return write_named(self, args, fu_profile_speedscope);
}

static PyObject *profile_gecko(ProfileObject *self, PyObject *args)
{
    return write_named(self, args, fu_profile_gecko);
}

static PyObject *profile_flame(ProfileObject *self, PyObject *args)
{
    PyObject *write;
    unsigned int max_nodes;
    if (!PyArg_ParseTuple(args, "OI", &write, &max_nodes))
        return NULL;
    if (max_nodes == 0 || max_nodes > FU_PROFILE_FLAME_MAX_NODES)
        return PyErr_Format(PyExc_ValueError, "max_nodes must be 1 to %u", FU_PROFILE_FLAME_MAX_NODES);
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    const fu_profile *profile = module ? py_core_payload(module, PY_PROFILE, (PyObject *)self) : NULL;
    if (!profile)
        return NULL;
    fu_error err = {0};
    if (fu_profile_flame(profile, max_nodes, py_core_write_chunk, write, &err) != FU_OK)
        return PyErr_Occurred() ? NULL : py_core_raise(&err);
    Py_RETURN_NONE;
}

static PyObject *profile_samples(ProfileObject *self, void *unused)
{
    return PyLong_FromUnsignedLongLong(self->profile.samples);
}

static PyMethodDef profile_methods[] = {
    {"add", (PyCFunction)profile_add, METH_O, "add(samples): add a window's UnwoundSamples"},
    {"add_stack", (PyCFunction)profile_add_stack, METH_VARARGS,
     "add_stack(pid, tid, comm, outcome, frames, count, time, interval_ms): add a stack named already, "
     "sampled count times"},
    {"speedscope", (PyCFunction)profile_speedscope, METH_VARARGS,
     "speedscope(write, name): speedscope's file, in bytes chunks"},
    {"gecko", (PyCFunction)profile_gecko, METH_VARARGS,
     "gecko(write, name): the Firefox profiler's processed profile, in bytes chunks"},
    {"flame", (PyCFunction)profile_flame, METH_VARARGS,
     "flame(write, max_nodes): the HTML flame graph's data (JSON), in bytes chunks"},
    {NULL},
};

static PyGetSetDef profile_getset[] = {
    {"samples", (getter)profile_samples, NULL, "samples added", NULL},
    {NULL},
};

static PyType_Slot profile_slots[] = {
    {Py_tp_init, profile_init},
    {Py_tp_dealloc, profile_dealloc},
    {Py_tp_methods, profile_methods},
    {Py_tp_getset, profile_getset},
    {Py_tp_doc, "A recording's samples and the files made of them (see native/core/profile.h)."},
    {0, NULL},
};

static PyType_Spec profile_spec = {
    .name = "fastunwind._core.Profile",
    .basicsize = sizeof(ProfileObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = profile_slots,
};

int py_profile_init(PyObject *module)
{
    return py_core_add_type(module, PY_PROFILE, &profile_spec);
}
