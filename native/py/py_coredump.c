/* The core file's Python binding: CoreFile over a core's bytes (native/core/coredump.h), its
 * memory (native/core/memory.h, fu_read_core) and the walk of one of its threads.
 *
 * CoreFile(data) parses the core (CoreFileError on a malformed one) and keeps the buffer. pid, name,
 * arguments, auxv (sysinfo_ehdr, entry, phdr), truncated_bytes; threads() -> [(tid, signal,
 * user_regs)], files() -> [(start, end, offset, path: bytes)], segments() -> [(vaddr, memsz, filesz,
 * present, flags)]; set_mapped_files([(avma, buffer)]) gives the bytes of the mapped files for what
 * the dump left out; read(address, size) -> bytes | None; unwind(space, thread, max_frames,
 * registers) walks thread `thread` (an index into threads()) without the GIL.
 */
#include "py_core.h" /* Python.h first */

#include "coredump.h"
#include "memory.h"
#include "walk.h"
#include "x86_64.h" /* fu_regs_from_user_regs */

typedef struct CoreFileObject {
    py_core_object base; /* payload: &core once initialized */
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
    self->base.payload = &self->core;
    return 0;
}

/* The object's core, or NULL with RuntimeError if __init__ has not succeeded. */
static fu_core *core_of(CoreFileObject *self)
{
    if (!self->base.payload)
        PyErr_SetString(PyExc_RuntimeError, "CoreFile is not initialized");
    return self->base.payload;
}

static PyObject *core_threads(CoreFileObject *self, PyObject *unused)
{
    (void)unused;
    fu_core *core = core_of(self);
    PyObject *list = core ? PyList_New((Py_ssize_t)core->thread_count) : NULL;
    for (size_t i = 0; list && i < core->thread_count; i++) {
        const fu_core_thread *t = &core->threads[i];
        PyObject *regs = PyTuple_New(FU_CORE_USER_REGISTERS);
        for (int r = 0; regs && r < FU_CORE_USER_REGISTERS; r++) {
            PyObject *v = PyLong_FromUnsignedLongLong(t->user_regs[r]);
            if (!v)
                Py_CLEAR(regs);
            else
                PyTuple_SET_ITEM(regs, r, v);
        }
        PyObject *item = regs ? Py_BuildValue("(iiN)", t->tid, t->signal, regs) : NULL;
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
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out && !fu_read_core_bytes(&self->memory, address, PyBytes_AS_STRING(out), (size_t)size)) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyObject *registers_dict(const fu_regs *regs)
{
    PyObject *dict = PyDict_New();
    for (unsigned r = 0; dict && r < FU_WALK_REGISTERS; r++) {
        if (!(regs->valid >> r & 1))
            continue;
        PyObject *key = PyLong_FromUnsignedLong(r), *value = PyLong_FromUnsignedLongLong(regs->value[r]);
        if (!key || !value || PyDict_SetItem(dict, key, value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return dict;
}

/* unwind(space, thread, max_frames=WALK_MAX_FRAMES, registers=False) -> (outcome, fault_address,
 * [(ip, module_index | None, kind, flags)], [{dwarf register: value}] per frame | None) */
static PyObject *core_unwind(CoreFileObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"space", "thread", "max_frames", "registers", NULL};
    PyObject *space_object;
    Py_ssize_t thread, max_frames = FU_WALK_MAX_FRAMES;
    int want_registers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "On|np", kwlist, &space_object, &thread, &max_frames,
                                     &want_registers))
        return NULL;
    fu_core *core = core_of(self);
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    fu_space_with_cache *held = core && module ? py_core_payload(module, PY_ADDRESS_SPACE, space_object) : NULL;
    if (!held)
        return NULL;
    if (thread < 0 || (size_t)thread >= core->thread_count)
        return PyErr_Format(PyExc_IndexError, "thread %zd of a core with %zu threads", thread, core->thread_count);
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    size_t n = (size_t)max_frames;
    /* one block: the frame columns, then the first frame's and each frame's registers */
    uint8_t *block = PyMem_Malloc(n * (8 + 4 + 1 + 1) + sizeof(fu_regs) * (want_registers ? n + 1 : 1) + 16);
    if (!block)
        return PyErr_NoMemory();
    fu_frames frames = {(uint64_t *)(void *)block, (uint32_t *)(void *)(block + 8 * n), block + 12 * n, block + 13 * n};
    fu_regs *first = (fu_regs *)(void *)(block + ((14 * n + 15) & ~(size_t)15));
    fu_regs *per_frame = first + 1;
    fu_regs regs;
    fu_regs_from_user_regs(core->threads[thread].user_regs, &regs);
    *first = regs; /* fu_walk works in regs */
    fu_reader reader = fu_core_reader(&self->memory, regs.value[FU_REG_RSP]);
    fu_walk_cache *cache = fu_walk_cache_borrow(&held->slot, &held->space);
    fu_walk_result r;
    Py_BEGIN_ALLOW_THREADS
    fu_walk(&held->space, &regs, &reader, cache, &frames, n, &r);
    if (want_registers)
        fu_walk_frame_registers(&held->space, first, &reader, &frames, r.frame_count, per_frame);
    Py_END_ALLOW_THREADS
    if (cache)
        fu_walk_cache_return(&held->slot, cache);
    PyObject *list = PyList_New((Py_ssize_t)r.frame_count), *registers = NULL, *out = NULL;
    for (size_t i = 0; list && i < r.frame_count; i++) {
        uint32_t m = frames.module[i];
        PyObject *index = m == UINT32_MAX ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(m);
        PyObject *item = index ? Py_BuildValue("(KNii)", (unsigned long long)frames.ip[i], index, frames.kind[i],
                                               frames.flags[i])
                               : NULL;
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    if (list && want_registers) {
        registers = PyList_New((Py_ssize_t)known);
        for (size_t i = 0; registers && i < known; i++) {
            PyObject *dict = registers_dict(&per_frame[i]);
            if (!dict)
                Py_CLEAR(registers);
            else
                PyList_SET_ITEM(registers, (Py_ssize_t)i, dict);
        }
    } else if (list) {
        registers = Py_NewRef(Py_None);
    }
    if (list && registers)
        out = Py_BuildValue("(sKNN)", fu_walk_outcome_name(r.outcome), (unsigned long long)r.fault_address, list,
                            registers);
    else {
        Py_XDECREF(list);
        Py_XDECREF(registers);
    }
    PyMem_Free(block);
    return out;
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
    {"threads", (PyCFunction)core_threads, METH_NOARGS, "threads() -> [(tid, signal, user_regs)]"},
    {"files", (PyCFunction)core_files, METH_NOARGS, "files() -> [(start, end, offset, path)] (NT_FILE)"},
    {"segments", (PyCFunction)core_segments, METH_NOARGS,
     "segments() -> [(vaddr, memsz, filesz, present, flags)] (PT_LOAD, sorted)"},
    {"set_mapped_files", (PyCFunction)core_set_mapped_files, METH_O,
     "set_mapped_files([(avma, buffer)]): the mapped files' bytes, sorted, for what the dump left out"},
    {"read", (PyCFunction)core_read, METH_VARARGS, "read(address, size) -> bytes | None"},
    {"unwind", (PyCFunction)(void (*)(void))core_unwind, METH_VARARGS | METH_KEYWORDS,
     "unwind(space, thread, max_frames, registers=False) -> (outcome, fault_address, frames, registers)"},
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

int py_coredump_init(PyObject *module) { return py_core_add_type(module, PY_CORE_FILE, &core_spec); }
