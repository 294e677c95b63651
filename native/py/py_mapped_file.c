/* Guarded file mappings' Python binding (core/mapped_file.h).
 *
 * MappedFile(fd, name, populate=False)
 *   the regular file `fd` (size above 0) mapped read-only and guarded against truncation under the
 *   mapping: a read-only buffer (memoryview(f), bytes slices), len(f), f.changed (a page read as
 *   zeros because the file was truncated), f.check() (FileChangedError naming `name` if so),
 *   f.release_pages() (MADV_DONTNEED), f.close() (BufferError while a view exports it), and a
 *   context manager. ValueError for an empty or non-regular file and for mmap's or read's failure
 *   (its reason in the message).
 * guard_mapped_files() -> bool
 *   fu_mapped_file_guard_refresh: the guard back in front of a SIGBUS handler installed over it since.
 * The module's import installs the SIGBUS guard (fu_mapped_file_guard_install).
 */
#include "py_core.h"

#include <sys/stat.h>

#include "mapped_file.h"

typedef struct MappedFileObject {
    py_core_object base; /* payload: &file while open */
    fu_mapped_file file;
    PyObject *name; /* str */
    Py_ssize_t exports;
} MappedFileObject;

static int mapped_file_init(MappedFileObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"fd", "name", "populate", NULL};
    int fd, populate = 0;
    PyObject *name;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iU|p", kwlist, &fd, &name, &populate))
        return -1;
    if (self->base.payload) {
        PyErr_SetString(PyExc_RuntimeError, "MappedFile is initialized already");
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        py_core_raise_format(FU_ERR_INVALID, "%U: not a regular file", name);
        return -1;
    }
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_mapped_file_open(&self->file, fd, (size_t)st.st_size, populate != 0, &err);
    Py_END_ALLOW_THREADS
    if (status != FU_OK) {
        py_core_raise_format(status, "%U: %s", name, err.message);
        return -1;
    }
    Py_INCREF(name);
    self->name = name;
    self->base.payload = &self->file;
    return 0;
}

static void mapped_file_dealloc(MappedFileObject *self)
{
    fu_mapped_file_close(&self->file);
    Py_XDECREF(self->name);
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static bool is_open(MappedFileObject *self)
{
    if (self->base.payload)
        return true;
    PyErr_SetString(PyExc_ValueError, "MappedFile is closed");
    return false;
}

static int mapped_file_getbuffer(MappedFileObject *self, Py_buffer *view, int flags)
{
    if (!is_open(self))
        return -1;
    if (PyBuffer_FillInfo(view, (PyObject *)self, (void *)self->file.data, (Py_ssize_t)self->file.size, 1, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void mapped_file_releasebuffer(MappedFileObject *self, Py_buffer *view)
{
    (void)view;
    self->exports--;
}

static Py_ssize_t mapped_file_len(MappedFileObject *self)
{
    return is_open(self) ? (Py_ssize_t)self->file.size : -1;
}

static PyObject *mapped_file_close(MappedFileObject *self, PyObject *unused)
{
    (void)unused;
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "cannot close a MappedFile while a view of it exists");
        return NULL;
    }
    fu_mapped_file_close(&self->file);
    self->base.payload = NULL;
    Py_RETURN_NONE;
}

static PyObject *mapped_file_check(MappedFileObject *self, PyObject *unused)
{
    (void)unused;
    fu_error err = {0};
    PyObject *name = PyUnicode_AsEncodedString(self->name, "utf-8", "surrogateescape");
    if (!name)
        return NULL;
    fu_status status = fu_mapped_file_check(&self->file, PyBytes_AS_STRING(name), &err);
    Py_DECREF(name);
    if (status != FU_OK)
        return py_core_raise(&err);
    Py_RETURN_NONE;
}

static PyObject *mapped_file_release_pages(MappedFileObject *self, PyObject *unused)
{
    (void)unused;
    if (!is_open(self))
        return NULL;
    fu_mapped_file_release_pages(&self->file);
    Py_RETURN_NONE;
}

static PyObject *mapped_file_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *mapped_file_exit(MappedFileObject *self, PyObject *args)
{
    (void)args;
    return mapped_file_close(self, NULL);
}

static PyObject *mapped_file_changed(MappedFileObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(fu_mapped_file_changed(&self->file));
}

static PyObject *mapped_file_name(MappedFileObject *self, void *closure)
{
    (void)closure;
    Py_INCREF(self->name);
    return self->name;
}

static PyMethodDef mapped_file_methods[] = {
    {"close", (PyCFunction)mapped_file_close, METH_NOARGS, "close(): unmap (BufferError while a view exists)"},
    {"check", (PyCFunction)mapped_file_check, METH_NOARGS,
     "check(): FileChangedError if a page was read as zeros (the file was truncated under the mapping)"},
    {"release_pages", (PyCFunction)mapped_file_release_pages, METH_NOARGS,
     "release_pages(): drop the pages read so far from memory (they stay in the page cache)"},
    {"__enter__", mapped_file_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)mapped_file_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef mapped_file_getset[] = {
    {"changed", (getter)mapped_file_changed, NULL, "whether a page was read as zeros (truncated under us)", NULL},
    {"name", (getter)mapped_file_name, NULL, "the name errors give the file", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot mapped_file_slots[] = {
    {Py_tp_init, mapped_file_init},
    {Py_tp_dealloc, mapped_file_dealloc},
    {Py_tp_methods, mapped_file_methods},
    {Py_tp_getset, mapped_file_getset},
    {Py_bf_getbuffer, mapped_file_getbuffer},
    {Py_bf_releasebuffer, mapped_file_releasebuffer},
    {Py_sq_length, mapped_file_len},
    {Py_tp_doc, "MappedFile(fd, name, populate=False): a file mapped read-only, guarded against truncation "
                "(see native/core/mapped_file.h)"},
    {0, NULL},
};

static PyType_Spec mapped_file_spec = {
    .name = "fastunwind._core.MappedFile",
    .basicsize = sizeof(MappedFileObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = mapped_file_slots,
};

static PyObject *guard_mapped_files(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(fu_mapped_file_guard_refresh());
}

static PyMethodDef mapped_file_functions[] = {
    {"guard_mapped_files", guard_mapped_files, METH_NOARGS,
     "guard_mapped_files() -> bool: put the SIGBUS guard back in front of a handler installed over it since "
     "(faulthandler.enable() after the import), chained to it; one sigaction query when none was. Whether it "
     "was put back (for the start of an operation over mapped files)"},
    {NULL},
};

int py_mapped_file_init(PyObject *module)
{
    fu_error err = {0};
    if (fu_mapped_file_guard_install(&err) != FU_OK) {
        py_core_raise(&err);
        return -1;
    }
    if (py_core_add_type(module, PY_MAPPED_FILE, &mapped_file_spec) < 0)
        return -1;
    if (PyModule_AddFunctions(module, mapped_file_functions) < 0)
        return -1;
    return PyModule_AddObject(module, "MAPPED_FILE_MAX_GUARDED", PyLong_FromLong(FU_MAPPED_FILE_MAX_GUARDED));
}
