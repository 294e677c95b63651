/* The address space's Python binding: AddressSpace, and the backends' names.
 *
 * AddressSpace(modules, backend=WALK_DEFAULT_BACKEND) takes (start, end, bias, eh_frame, debug_frame,
 * segments, id[, compact[, compiled[, entry]]]) tuples: an executable mapping [start, end) of a
 * module, avma = svma + bias, its CfiTable objects (or None), its read-only PT_LOAD bytes as (vaddr,
 * buffer) pairs, the caller's id, its CompactTable (or None), its EhElf (a loaded compiled table, or
 * None) and its file's ELF entry point where a process starts there (svma; 0 for none, as for a
 * shared library: fu_module_set_entry).
 * `backend` is one of WALK_BACKENDS (fu_backend_name: which tables walks use, see fu_backend in
 * address_space.h); WALK_BACKENDS_WITH_COMPACT and WALK_BACKENDS_WITH_EH_ELF name those that use a
 * module's compact table, its eh_elf. The object keeps every table and buffer alive while walks use
 * them; its payload is the space with the walk caches it keeps (walk.h, fu_space_with_cache).
 */
#include "py_core.h" /* Python.h first */

#include "address_space.h"
#include "walk.h"

typedef struct AddressSpaceObject {
    py_core_object base; /* payload: &held once initialized */
    fu_space_with_cache held; /* the space and the walk caches it keeps across calls (walk.h) */
    fu_module *modules;
    PyObject *keep;               /* the modules argument: tables and buffers stay alive */
    Py_buffer *buffers;
    fu_image_segment *segments;
    Py_ssize_t buffer_count;
} AddressSpaceObject;

static void space_dealloc(AddressSpaceObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_walk_cache_slot_free(&self->held.slot); /* never lent now: a borrower holds a reference to the space */
    for (Py_ssize_t i = 0; i < self->buffer_count; i++)
        PyBuffer_Release(&self->buffers[i]);
    PyMem_Free(self->buffers);
    PyMem_Free(self->segments);
    PyMem_Free(self->modules);
    Py_XDECREF(self->keep);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static int space_init(AddressSpaceObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"modules", "backend", NULL};
    PyObject *modules;
    const char *backend = fu_backend_name(FU_BACKEND_DEFAULT);
    if (self->modules) {
        PyErr_SetString(PyExc_RuntimeError, "AddressSpace is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$s", kwlist, &modules, &backend))
        return -1;
    fu_backend chosen = fu_backend_from_name(backend);
    if (chosen == FU_BACKEND_COUNT) {
        char names[128];
        fu_backend_names(names, sizeof names);
        PyErr_Format(PyExc_ValueError, "backend must be one of %s; not \"%s\"", names, backend);
        return -1;
    }
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    PyObject *seq = PySequence_Fast(modules, "modules must be a sequence");
    if (!module || !seq)
        return -1;
    self->keep = seq; /* owns the reference */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total_segments = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || (PyTuple_GET_SIZE(item) < 7 || PyTuple_GET_SIZE(item) > 10)) {
            PyErr_SetString(PyExc_TypeError, "each module is (start, end, bias, eh_frame, debug_frame, segments, id"
                                             "[, compact[, compiled[, entry]]])");
            return -1;
        }
        Py_ssize_t count = PySequence_Size(PyTuple_GET_ITEM(item, 5));
        if (count < 0)
            return -1;
        total_segments += count;
    }
    self->modules = PyMem_Calloc((size_t)n + 1, sizeof(fu_module));
    self->segments = PyMem_Calloc((size_t)total_segments + 1, sizeof(fu_image_segment));
    self->buffers = PyMem_Calloc((size_t)total_segments + 1, sizeof(Py_buffer));
    if (!self->modules || !self->segments || !self->buffers) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        fu_module *m = &self->modules[i];
        PyObject *eh, *debug, *segments, *compact = Py_None, *compiled = Py_None;
        unsigned long long start, end, bias, entry = 0;
        unsigned int id;
        if (!PyArg_ParseTuple(item, "KKKOOOI|OOK", &start, &end, &bias, &eh, &debug, &segments, &id, &compact,
                              &compiled, &entry))
            return -1;
        if (end <= start) { /* formatted here: PyErr_Format has no %llx before Python 3.12 */
            char range[48];
            snprintf(range, sizeof range, "0x%llx..0x%llx", start, end);
            PyErr_Format(PyExc_ValueError, "module %u: empty range %s", id, range);
            return -1;
        }
        m->start = start;
        m->end = end;
        m->bias = bias;
        m->id = id;
        if (eh != Py_None && !(m->eh_frame = py_core_payload(module, PY_CFI_TABLE, eh)))
            return -1;
        if (debug != Py_None && !(m->debug_frame = py_core_payload(module, PY_CFI_TABLE, debug)))
            return -1;
        if (compact != Py_None && !(m->compact = py_core_payload(module, PY_COMPACT_TABLE, compact)))
            return -1;
        fu_module_set_entry(m, entry);
        /* the EhElf stays alive (and its shared object loaded) through self->keep */
        if (compiled != Py_None && !(m->compiled = py_core_payload(module, PY_EH_ELF, compiled)))
            return -1;
        PyObject *segs = PySequence_Fast(segments, "segments must be a sequence of (vaddr, buffer)");
        if (!segs)
            return -1;
        m->segments = &self->segments[self->buffer_count];
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(segs); k++) {
            unsigned long long vaddr;
            Py_buffer *buffer = &self->buffers[self->buffer_count];
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(segs, k), "Ky*", &vaddr, buffer)) {
                Py_DECREF(segs);
                return -1;
            }
            fu_image_segment *seg = &self->segments[self->buffer_count++];
            seg->vaddr = vaddr;
            seg->data = buffer->buf;
            seg->size = (uint64_t)buffer->len;
            m->segment_count++;
        }
        Py_DECREF(segs);
    }
    fu_error err = {0};
    if (fu_address_space_init(&self->held.space, self->modules, (size_t)n, chosen, &err) != FU_OK) {
        py_core_raise(&err);
        return -1;
    }
    self->base.payload = &self->held;
    return 0;
}

static PyObject *space_backend(AddressSpaceObject *self, void *unused)
{
    return PyUnicode_FromString(fu_backend_name((fu_backend)self->held.space.backend));
}

/* step_source(pc) -> "rule", "body", "no_info", "entry_code", "derived_rule", "rbp_slots_rule" or
 * "interpreter": what settles a step at pc (fu_walk_step_source), for tests and diagnostics of the
 * backends' order. */
static PyObject *space_step_source(AddressSpaceObject *self, PyObject *arg)
{
    unsigned long long pc = PyLong_AsUnsignedLongLong(arg);
    if (pc == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(fu_walk_step_source_name(fu_walk_step_source(&self->held.space, pc)));
}

static PyMethodDef space_methods[] = {
    {"step_source", (PyCFunction)space_step_source, METH_O,
     "step_source(pc) -> 'rule' (compact table), 'body' (compiled eh_elf), 'no_info', 'entry_code' (the "
     "process's first code, no CFI), 'derived_rule' (a compact rule derived from the code), 'rbp_slots_rule' "
     "(a compact rule with save slots relative to rbp: DRAP frames) or 'interpreter': "
     "what settles a step at pc before the DWARF tables, by the space's backend"},
    {NULL},
};

static PyGetSetDef space_getset[] = {
    {"backend", (getter)space_backend, NULL, "which unwind tables walks use, one of WALK_BACKENDS", NULL},
    {NULL},
};

static PyType_Slot space_slots[] = {
    {Py_tp_dealloc, space_dealloc},
    {Py_tp_init, space_init},
    {Py_tp_getset, space_getset},
    {Py_tp_methods, space_methods},
    {Py_tp_doc, "Executable mappings of a process with their CFI tables (see fastunwind.address_space)."},
    {0, NULL},
};

static PyType_Spec space_spec = {
    .name = "fastunwind._core.AddressSpace",
    .basicsize = sizeof(AddressSpaceObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = space_slots,
};

static const char *backend_name(int code) { return fu_backend_name((fu_backend)code); }

/* `attribute`: the names of the backends for which `uses` holds. */
static int add_backends_where(PyObject *module, const char *attribute, bool (*uses)(uint32_t backend))
{
    PyObject *names = PyList_New(0);
    if (!names)
        return -1;
    for (unsigned b = 0; b < FU_BACKEND_COUNT; b++) {
        if (!uses(b))
            continue;
        PyObject *name = PyUnicode_FromString(fu_backend_name((fu_backend)b));
        if (!name || PyList_Append(names, name) < 0) {
            Py_XDECREF(name);
            Py_DECREF(names);
            return -1;
        }
        Py_DECREF(name);
    }
    PyObject *tuple = PyList_AsTuple(names);
    Py_DECREF(names);
    if (!tuple || PyModule_AddObject(module, attribute, tuple) < 0) {
        Py_XDECREF(tuple);
        return -1;
    }
    return 0;
}

int py_address_space_init(PyObject *module)
{
    if (py_core_add_type(module, PY_ADDRESS_SPACE, &space_spec) < 0)
        return -1;
    if (py_core_add_names(module, "WALK_BACKENDS", FU_BACKEND_COUNT, backend_name) < 0 ||
        PyModule_AddStringConstant(module, "WALK_DEFAULT_BACKEND", fu_backend_name(FU_BACKEND_DEFAULT)) < 0 ||
        add_backends_where(module, "WALK_BACKENDS_WITH_COMPACT", fu_backend_uses_compact) < 0 ||
        add_backends_where(module, "WALK_BACKENDS_WITH_EH_ELF", fu_backend_uses_eh_elfs) < 0)
        return -1;
    return 0;
}
