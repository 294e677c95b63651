/* The Python side of core/profile.c (a recording's samples, built window by window, and the files
 * made of them).
 *
 * Profile()
 *   add(samples): adds a window's UnwoundSamples (symbolize_samples' result)
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
