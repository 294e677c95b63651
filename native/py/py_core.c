/* The shared base of the binding (py_core.h). */
#include "py_core.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static py_core_state *state_of(PyObject *module) { return (py_core_state *)PyModule_GetState(module); }

/* "CfiTable" for fastunwind._core.CfiTable */
static const char *short_name(const PyTypeObject *type)
{
    const char *dot = strrchr(type->tp_name, '.');
    return dot ? dot + 1 : type->tp_name;
}

int py_core_add_type(PyObject *module, py_type_id id, PyType_Spec *spec)
{
    PyObject *type = PyType_FromModuleAndSpec(module, spec, NULL);
    if (!type)
        return -1;
    py_core_state *state = state_of(module);
    Py_XSETREF(state->types[id], (PyTypeObject *)Py_NewRef(type));
    if (PyModule_AddObject(module, short_name((PyTypeObject *)type), type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyTypeObject *py_core_type(PyObject *module, py_type_id id) { return state_of(module)->types[id]; }

void *py_core_payload(PyObject *module, py_type_id id, PyObject *object)
{
    PyTypeObject *type = state_of(module)->types[id];
    if (!type || !PyObject_TypeCheck(object, type)) {
        const char *name = type ? short_name(type) : "fastunwind._core type";
        bool vowel = strchr("AEIOU", name[0]) != NULL;
        PyErr_Format(PyExc_TypeError, "expected %s %s, not %.100s", vowel ? "an" : "a", name,
                     Py_TYPE(object)->tp_name);
        return NULL;
    }
    void *payload = ((py_core_object *)object)->payload;
    if (!payload)
        PyErr_Format(PyExc_RuntimeError, "%s is not initialized", short_name(type));
    return payload;
}

/* The class named `name` in fastunwind.errors, else in builtins; a new reference, or NULL. */
static PyObject *exception_named(const char *name)
{
    PyObject *errors = PyImport_ImportModule("fastunwind.errors");
    PyObject *cls = errors ? PyObject_GetAttrString(errors, name) : NULL;
    Py_XDECREF(errors);
    if (!cls) {
        PyErr_Clear();
        PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
        cls = builtins ? Py_XNewRef(PyDict_GetItemString(builtins, name)) : NULL;
    }
    return cls;
}

static PyObject *raise_message(fu_status status, const char *message)
{
    if (status == FU_ERR_NOMEM)
        return PyErr_NoMemory();
    PyObject *cls = exception_named(fu_status_exception(status));
    PyErr_SetString(cls ? cls : PyExc_ValueError, message);
    Py_XDECREF(cls);
    return NULL;
}

PyObject *py_core_raise(const fu_error *err) { return raise_message(err->status, err->message); }

PyObject *py_core_raise_format(fu_status status, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    PyObject *message = PyUnicode_FromFormatV(format, ap);
    va_end(ap);
    if (!message)
        return NULL;
    const char *text = PyUnicode_AsUTF8(message);
    if (text)
        raise_message(status, text);
    Py_DECREF(message);
    return NULL;
}

bool py_core_index_arg(PyObject *arg, size_t count, size_t *index)
{
    Py_ssize_t i = PyNumber_AsSsize_t(arg, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return false;
    if (i < 0 || (size_t)i >= count) {
        PyErr_Format(PyExc_IndexError, "index %zd out of range (0..%zu)", i, count);
        return false;
    }
    *index = (size_t)i;
    return true;
}

PyObject *py_core_bytes(const void *data, size_t size)
{
    return PyBytes_FromStringAndSize(size ? (const char *)data : "", (Py_ssize_t)size);
}

PyObject *py_core_count_dict(const uint64_t *counts, size_t n)
{
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        if (!counts[i])
            continue;
        PyObject *key = PyLong_FromSize_t(i), *value = PyLong_FromUnsignedLongLong(counts[i]);
        if (!key || !value || PyDict_SetItem(dict, key, value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return dict;
}

/* What a constant tuple's items are made of: a name or a number by index. */
typedef struct tuple_items {
    const char *(*name)(int);
    int (*number)(int);
} tuple_items;

/* module.<attribute> = the tuple of `count` items, each a str of items->name or else an int of
 * items->number; -1 with an exception. */
static int add_tuple(PyObject *module, const char *attribute, int count, const tuple_items *items)
{
    PyObject *tuple = PyTuple_New(count);
    if (!tuple)
        return -1;
    for (int i = 0; i < count; i++) {
        PyObject *item = items->name ? PyUnicode_FromString(items->name(i)) : PyLong_FromLong(items->number(i));
        if (!item) {
            Py_DECREF(tuple);
            return -1;
        }
        PyTuple_SET_ITEM(tuple, i, item);
    }
    if (PyModule_AddObject(module, attribute, tuple) < 0) {
        Py_DECREF(tuple);
        return -1;
    }
    return 0;
}

int py_core_add_names(PyObject *module, const char *attribute, int count, const char *(*name)(int))
{
    return add_tuple(module, attribute, count, &(tuple_items){name, NULL});
}

int py_core_add_numbers(PyObject *module, const char *attribute, int count, int (*number)(int))
{
    return add_tuple(module, attribute, count, &(tuple_items){NULL, number});
}

int py_core_state_traverse(PyObject *module, visitproc visit, void *arg)
{
    py_core_state *state = state_of(module);
    for (int i = 0; i < PY_TYPE_COUNT; i++)
        Py_VISIT(state->types[i]);
    return 0;
}

int py_core_state_clear(PyObject *module)
{
    py_core_state *state = state_of(module);
    for (int i = 0; i < PY_TYPE_COUNT; i++)
        Py_CLEAR(state->types[i]);
    return 0;
}

bool py_core_segments_from(PyObject *sequence, py_core_segments *out)
{
    PyObject *seq = PySequence_Fast(sequence, "segments must be a sequence of (vaddr, bytes)");
    if (!seq)
        return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    out->buffers = PyMem_Calloc((size_t)n + 1, sizeof(Py_buffer));
    out->segments = PyMem_Calloc((size_t)n + 1, sizeof(fu_image_segment));
    if (!out->buffers || !out->segments) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return false;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long vaddr;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "Ky*", &vaddr, &out->buffers[i])) {
            Py_DECREF(seq);
            return false;
        }
        out->count = i + 1;
        out->segments[i].vaddr = vaddr;
        out->segments[i].data = out->buffers[i].buf;
        out->segments[i].size = (uint64_t)out->buffers[i].len;
    }
    Py_DECREF(seq);
    return true;
}

void py_core_segments_release(py_core_segments *segments)
{
    for (Py_ssize_t i = 0; i < segments->count; i++)
        PyBuffer_Release(&segments->buffers[i]);
    PyMem_Free(segments->buffers);
    PyMem_Free(segments->segments);
    memset(segments, 0, sizeof *segments);
}

bool py_core_write_chunk(void *write, const uint8_t *data, size_t len)
{
    PyObject *chunk = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
    PyObject *result = chunk ? PyObject_CallOneArg(write, chunk) : NULL;
    Py_XDECREF(chunk);
    Py_XDECREF(result);
    return result != NULL;
}

bool py_core_write_fd(void *fd, const uint8_t *data, size_t len)
{
    while (len > 0) { /* each pass writes at least one byte or fails */
        ssize_t written;
        Py_BEGIN_ALLOW_THREADS
        written = write(*(const int *)fd, data, len);
        Py_END_ALLOW_THREADS
        if (written < 0 && errno == EINTR) {
            if (PyErr_CheckSignals() < 0)
                return false;
            continue;
        }
        if (written <= 0) {
            if (written == 0)
                errno = EIO;
            PyErr_SetFromErrno(PyExc_OSError);
            return false;
        }
        data += written;
        len -= (size_t)written;
    }
    return true;
}

PyObject *py_core_add_window(PyObject *consumer, py_type_id id, PyObject *samples,
                             fu_status (*add)(void *payload, const void *unwound, fu_error *err))
{
    PyObject *module = PyType_GetModule(Py_TYPE(consumer));
    void *payload = module ? py_core_payload(module, id, consumer) : NULL;
    const void *unwound = payload ? py_core_payload(module, PY_UNWOUND_SAMPLES, samples) : NULL;
    if (!unwound)
        return NULL;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = add(payload, unwound, &err);
    Py_END_ALLOW_THREADS
    if (status != FU_OK)
        return py_core_raise(&err);
    Py_RETURN_NONE;
}
