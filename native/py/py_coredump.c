/* The core file's Python binding: CoreFile over a core's bytes (native/core/coredump.h) and its
 * memory (native/core/memory.h, fu_read_core).
 *
 * CoreFile(data) parses the core (CoreFileError on a malformed one) and keeps the buffer. pid, name,
 * arguments, auxv (sysinfo_ehdr, entry, phdr), truncated_bytes; threads() -> [(tid, signal,
 * user_regs, walker registers)], files() -> [(start, end, offset, path: bytes)], segments() -> [(vaddr, memsz, filesz,
 * present, flags)]; set_mapped_files([(avma, buffer)]) gives the bytes of the mapped files for what
 * the dump left out; read(address, size) -> bytes | None; build_id_at(start) -> bytes | None (the
 * build-id of the ELF file whose first page the memory holds there: core/elf_file.h
 * fu_elf_build_id_in_memory, the launcher's too). Its payload is the core's memory
 * (fu_core_memory), which the walker's binding walks over (py_walk.c, unwind_core).
 */
#include "py_core.h" /* Python.h first */

#include "coredump.h"
#include "elf_file.h"
#include "memory.h"
#include <sys/user.h> /* struct user_regs_struct */

#include "x86_64.h" /* fu_regs_from_user_regs */

typedef struct CoreFileObject {
    py_core_object base; /* payload: &memory once initialized (what the walker's unwind_core reads) */
    fu_core core;
    Py_buffer data;
    py_core_segments mapped;  /* set_mapped_files */
    fu_core_memory memory;
} CoreFileObject;

static void core_dealloc(CoreFileObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_core_free(&self->core);
    py_core_segments_release(&self->mapped);
    if (self->data.obj)
        PyBuffer_Release(&self->data);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static int core_init(CoreFileObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", NULL};
    if (self->base.payload) {
        PyErr_SetString(PyExc_RuntimeError, "CoreFile is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*", kwlist, &self->data))
        return -1;
    fu_error err;
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_core_parse(&self->core, self->data.buf, (size_t)self->data.len, &err);
    Py_END_ALLOW_THREADS
    if (status) {
        PyBuffer_Release(&self->data);
        py_core_raise(&err);
        return -1;
    }
    self->memory = (fu_core_memory){self->core.memory, self->core.memory_count, NULL, 0};
    self->base.payload = &self->memory;
    return 0;
}

/* The object's core, or NULL with RuntimeError if __init__ has not succeeded. */
static fu_core *core_of(CoreFileObject *self)
{
    if (!self->base.payload)
        PyErr_SetString(PyExc_RuntimeError, "CoreFile is not initialized");
    return self->base.payload ? &self->core : NULL;
}

/* {DWARF register: value} of the registers the walker tracks. */
static PyObject *walker_registers(const uint64_t *user_regs)
{
    struct user_regs_struct user; /* the same 27 words (x86_64.c asserts it) */
    memcpy(&user, user_regs, sizeof user);
    fu_regs regs;
    fu_regs_from_user_regs(&user, &regs);
    PyObject *dict = PyDict_New();
    for (unsigned r = 0; dict && r < FU_WALK_REGISTERS; r++) {
        if (!(regs.valid >> r & 1))
            continue;
        PyObject *key = PyLong_FromUnsignedLong(r), *value = PyLong_FromUnsignedLongLong(regs.value[r]);
        if (!key || !value || PyDict_SetItem(dict, key, value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return dict;
}

/* threads() -> [(tid, signal, user_regs: tuple of USER_REGISTER_NAMES' values, {DWARF register: value})] */
static PyObject *core_threads(CoreFileObject *self, PyObject *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    PyObject *list = core ? PyList_New((Py_ssize_t)core->thread_count) : NULL;
    for (size_t i = 0; list && i < core->thread_count; i++) {
        const fu_core_thread *t = &core->threads[i];
        PyObject *user = PyTuple_New(FU_USER_REGISTER_COUNT);
        for (int r = 0; user && r < FU_USER_REGISTER_COUNT; r++) {
            PyObject *v = PyLong_FromUnsignedLongLong(t->user_regs[r]);
            if (!v)
                Py_CLEAR(user);
            else
                PyTuple_SET_ITEM(user, r, v);
        }
        PyObject *dwarf = user ? walker_registers(t->user_regs) : NULL;
        if (!dwarf)
            Py_XDECREF(user);
        PyObject *item = dwarf ? Py_BuildValue("(iiNN)", t->tid, t->signal, user, dwarf) : NULL;
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyObject *core_files(CoreFileObject *self, PyObject *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    PyObject *list = core ? PyList_New((Py_ssize_t)core->file_count) : NULL;
    for (size_t i = 0; list && i < core->file_count; i++) {
        const fu_core_file *f = &core->files[i];
        PyObject *item = Py_BuildValue("(KKKy)", (unsigned long long)f->start, (unsigned long long)f->end,
                                       (unsigned long long)f->offset, f->path);
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyObject *core_segments(CoreFileObject *self, PyObject *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    PyObject *list = core ? PyList_New((Py_ssize_t)core->segment_count) : NULL;
    for (size_t i = 0; list && i < core->segment_count; i++) {
        const fu_core_segment *s = &core->segments[i];
        PyObject *item = Py_BuildValue("(KKKKI)", (unsigned long long)s->vaddr, (unsigned long long)s->memsz,
                                       (unsigned long long)s->filesz, (unsigned long long)s->present, s->flags);
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* set_mapped_files([(avma, buffer)]): sorted by avma, not overlapping; replaces an earlier set. */
static PyObject *core_set_mapped_files(CoreFileObject *self, PyObject *sequence)
{
    if (!core_of(self))
        return NULL;
    py_core_segments mapped = {0};
    if (!py_core_segments_from(sequence, &mapped)) {
        py_core_segments_release(&mapped);
        return NULL;
    }
    for (Py_ssize_t i = 1; i < mapped.count; i++) {
        const fu_image_segment *a = &mapped.segments[i - 1], *b = &mapped.segments[i];
        if (b->vaddr < a->vaddr || b->vaddr - a->vaddr < a->size) {
            py_core_segments_release(&mapped);
            return PyErr_Format(PyExc_ValueError, "mapped files %zd and %zd are not sorted or overlap", i - 1, i);
        }
    }
    py_core_segments_release(&self->mapped);
    self->mapped = mapped;
    self->memory.files = mapped.segments;
    self->memory.file_count = (size_t)mapped.count;
    Py_RETURN_NONE;
}

/* read(address, size) -> bytes | None: from the dump, else the mapped files; None if neither holds
 * all of it. */
static PyObject *core_read(CoreFileObject *self, PyObject *args)
{
    unsigned long long address;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "Kn", &address, &size) || !core_of(self))
        return NULL;
    if (size < 0)
        return PyErr_Format(PyExc_ValueError, "size %zd is negative", size);
    const uint8_t *at = fu_core_memory_at(&self->memory, address, (size_t)size);
    if (!at)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)at, size);
}

/* fu_core_memory_at as elf_file.h's reader of a memory. */
static const uint8_t *core_memory_at(const void *memory, uint64_t address, size_t size)
{
    return fu_core_memory_at(memory, address, size);
}

static PyObject *core_build_id_at(CoreFileObject *self, PyObject *args)
{
    unsigned long long start;
    if (!PyArg_ParseTuple(args, "K", &start) || !core_of(self))
        return NULL;
    uint8_t build_id[FU_ELF_MAX_BUILD_ID];
    size_t size;
    fu_elf_build_id_in_memory(core_memory_at, &self->memory, start, build_id, &size);
    if (!size)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)build_id, (Py_ssize_t)size);
}

static PyObject *core_pid(CoreFileObject *self, void *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    return core ? PyLong_FromLong(core->pid) : NULL;
}

static PyObject *core_name(CoreFileObject *self, void *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    return core ? PyUnicode_DecodeFSDefault(core->name) : NULL;
}

static PyObject *core_arguments(CoreFileObject *self, void *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    return core ? PyUnicode_DecodeFSDefault(core->arguments) : NULL;
}

static PyObject *core_auxv(CoreFileObject *self, void *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    return core ? Py_BuildValue("(KKK)", (unsigned long long)core->auxv.sysinfo_ehdr,
                                (unsigned long long)core->auxv.entry, (unsigned long long)core->auxv.phdr)
                : NULL;
}

static PyObject *core_truncated_bytes(CoreFileObject *self, void *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    return core ? PyLong_FromUnsignedLongLong(core->truncated_bytes) : NULL;
}

static PyGetSetDef core_getset[] = {
    {"pid", (getter)core_pid, NULL, "NT_PRPSINFO's pid, else the first thread's", NULL},
    {"name", (getter)core_name, NULL, "the process's name (NT_PRPSINFO pr_fname)", NULL},
    {"arguments", (getter)core_arguments, NULL, "its command line, cut to 80 bytes (pr_psargs)", NULL},
    {"auxv", (getter)core_auxv, NULL, "(AT_SYSINFO_EHDR, AT_ENTRY, AT_PHDR), 0 where absent", NULL},
    {"truncated_bytes", (getter)core_truncated_bytes, NULL, "PT_LOAD bytes beyond the end of the file", NULL},
    {NULL},
};

static PyMethodDef core_methods[] = {
    {"threads", (PyCFunction)core_threads, METH_NOARGS, "threads() -> [(tid, signal, user_regs, {DWARF register: value})]"},
    {"files", (PyCFunction)core_files, METH_NOARGS, "files() -> [(start, end, offset, path)] (NT_FILE)"},
    {"segments", (PyCFunction)core_segments, METH_NOARGS,
     "segments() -> [(vaddr, memsz, filesz, present, flags)] (PT_LOAD, sorted)"},
    {"set_mapped_files", (PyCFunction)core_set_mapped_files, METH_O,
     "set_mapped_files([(avma, buffer)]): the mapped files' bytes, sorted, for what the dump left out"},
    {"read", (PyCFunction)core_read, METH_VARARGS, "read(address, size) -> bytes | None"},
    {"build_id_at", (PyCFunction)core_build_id_at, METH_VARARGS,
     "build_id_at(start) -> the build-id of the ELF file whose first page the memory holds at start, or None"},
    {NULL},
};

static PyType_Slot core_slots[] = {
    {Py_tp_dealloc, core_dealloc},
    {Py_tp_init, core_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_methods, core_methods},
    {Py_tp_getset, core_getset},
    {Py_tp_doc, "CoreFile(data): an ELF core file's threads, mapped files and memory"},
    {0, NULL},
};

static PyType_Spec core_spec = {
    .name = "fastunwind._core.CoreFile",
    .basicsize = sizeof(CoreFileObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = core_slots,
};

int py_coredump_init(PyObject *module)
{
    return py_core_add_type(module, PY_CORE_FILE, &core_spec);
}
