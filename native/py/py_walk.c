/* The walker's Python binding: AddressSpace, unwind() over a captured stack, unwind_self().
 *
 * AddressSpace(modules, backend="auto") takes (start, end, bias, eh_frame, debug_frame, segments,
 * id[, compact[, compiled[, entry]]]) tuples: an executable mapping [start, end) of a module, avma =
 * svma + bias, its CfiTable objects (or None), its read-only PT_LOAD bytes as (vaddr, buffer) pairs,
 * the caller's id, its CompactTable (or None), its EhElf (a loaded compiled table, or None) and its
 * file's ELF entry point (svma; 0 for none: fu_module_set_entry).
 * `backend` is one of WALK_BACKENDS (fu_backend_name: which tables walks use, see fu_backend in
 * walk.h). The object keeps every table and buffer alive while walks use them.
 */
#include "py_core.h" /* Python.h first */

#include <execinfo.h>
#include <ucontext.h>

#include "memory.h"
#include "step_batch.h"
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
    const char *backend = "auto";
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
        fu_module_set_entry(m, entry);
        if (compact != Py_None && !(m->compact = py_core_payload(module, PY_COMPACT_TABLE, compact)))
            return -1;
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

/* step_source(pc) -> "rule", "body", "no_info", "entry_code" or "interpreter": what settles a step at pc
 * (fu_walk_step_source), for tests and diagnostics of the backends' order. */
static PyObject *space_step_source(AddressSpaceObject *self, PyObject *arg)
{
    unsigned long long pc = PyLong_AsUnsignedLongLong(arg);
    if (pc == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    switch (fu_walk_step_source(&self->held.space, pc)) {
        case FU_WALK_CACHED_RULE: return PyUnicode_FromString("rule");
        case FU_WALK_CACHED_BODY: return PyUnicode_FromString("body");
        case FU_WALK_CACHED_NO_INFO: return PyUnicode_FromString("no_info");
        case FU_WALK_CACHED_ENTRY_CODE: return PyUnicode_FromString("entry_code");
        default: return PyUnicode_FromString("interpreter");
    }
}

static PyMethodDef space_methods[] = {
    {"step_source", (PyCFunction)space_step_source, METH_O,
     "step_source(pc) -> 'rule' (compact table), 'body' (compiled eh_elf), 'no_info', 'entry_code' (the "
     "process's first code, no CFI) or 'interpreter': "
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

/* Frame columns for `count` frames in one block (freed with PyMem_Free(frames->ip)); false with
 * MemoryError set. */
static bool frames_alloc(size_t count, fu_frames *frames)
{
    uint8_t *block = PyMem_Malloc(count * (8 + 4 + 1 + 1));
    if (!block) {
        PyErr_NoMemory();
        return false;
    }
    *frames = (fu_frames){(uint64_t *)(void *)block, (uint32_t *)(void *)(block + 8 * count), block + 12 * count,
                          block + 13 * count};
    return true;
}

static PyObject *walk_result(const fu_walk_result *r, const fu_frames *frames)
{
    PyObject *list = PyList_New((Py_ssize_t)r->frame_count);
    if (!list)
        return NULL;
    for (size_t i = 0; i < r->frame_count; i++) {
        uint32_t m = frames->module[i];
        PyObject *module = m == UINT32_MAX ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(m);
        PyObject *item = module ? Py_BuildValue("(KNii)", (unsigned long long)frames->ip[i], module, frames->kind[i],
                                                frames->flags[i])
                                : NULL;
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return Py_BuildValue("(sKN)", fu_walk_outcome_name(r->outcome), (unsigned long long)r->fault_address, list);
}

/* unwind(space, registers: dict[int, int], stack: bytes, stack_address, max_frames=FU_WALK_MAX_FRAMES)
 *   -> (outcome, fault_address, [(ip, module_index | None, kind, flags)]) */
static PyObject *unwind(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"space", "registers", "stack", "stack_address", "max_frames", NULL};
    PyObject *space_object, *registers;
    Py_buffer stack;
    unsigned long long stack_address;
    Py_ssize_t max_frames = FU_WALK_MAX_FRAMES;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!y*K|n", kwlist, &space_object, &PyDict_Type, &registers,
                                     &stack, &stack_address, &max_frames))
        return NULL;
    PyObject *result = NULL;
    fu_frames frames = {0};
    const fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, space_object);
    const fu_address_space *space = held ? &held->space : NULL;
    if (!space)
        goto done;
    fu_regs regs = {{0}, 0};
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(registers, &pos, &key, &value)) {
        long reg = PyLong_AsLong(key);
        unsigned long long v = PyLong_AsUnsignedLongLongMask(value);
        if (PyErr_Occurred())
            goto done;
        if (reg < 0 || reg >= FU_WALK_REGISTERS) {
            PyErr_Format(PyExc_ValueError, "register %ld: the walker tracks DWARF registers 0-16", reg);
            goto done;
        }
        fu_regs_set(&regs, (unsigned)reg, v);
    }
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    if (!frames_alloc((size_t)max_frames, &frames))
        goto done;
    fu_dump_memory memory = {stack.buf, stack_address, (uint64_t)stack.len, space};
    fu_reader reader = fu_dump_reader(&memory);
    fu_walk_result r;
    Py_BEGIN_ALLOW_THREADS
    fu_walk(space, &regs, &reader, NULL, &frames, (size_t)max_frames, &r);
    Py_END_ALLOW_THREADS
    result = walk_result(&r, &frames);
done:
    PyMem_Free(frames.ip);
    PyBuffer_Release(&stack);
    return result;
}

/* unwind_self(space, max_frames) -> (outcome, fault_address, frames, backtrace)
 * Walks the calling thread's own stack from this function, and returns glibc's backtrace() taken
 * at the same place as an oracle (libgcc's unwinder, in process). */
static PyObject *unwind_self(PyObject *module, PyObject *args)
{
    PyObject *space_object;
    Py_ssize_t max_frames = 256;
    if (!PyArg_ParseTuple(args, "O|n", &space_object, &max_frames))
        return NULL;
    const fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, space_object);
    const fu_address_space *space = held ? &held->space : NULL;
    if (!space)
        return NULL;
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = 256;
    fu_frames frames;
    if (!frames_alloc((size_t)max_frames, &frames))
        return NULL;
    void **oracle = PyMem_Malloc(sizeof(void *) * (size_t)max_frames);
    if (!oracle) {
        PyMem_Free(frames.ip);
        return PyErr_NoMemory();
    }
    ucontext_t context;
    getcontext(&context);
    int oracle_count = backtrace(oracle, (int)max_frames);
    fu_regs regs;
    fu_regs_from_gregs(context.uc_mcontext.gregs, &regs);
    fu_reader reader = fu_self_reader();
    fu_walk_result r;
    fu_walk(space, &regs, &reader, NULL, &frames, (size_t)max_frames, &r);
    PyObject *walked = walk_result(&r, &frames);
    PyObject *bt = walked ? PyList_New(oracle_count) : NULL;
    for (int i = 0; bt && i < oracle_count; i++) {
        PyObject *ip = PyLong_FromUnsignedLongLong((uintptr_t)oracle[i]);
        if (!ip) {
            Py_CLEAR(bt);
            break;
        }
        PyList_SET_ITEM(bt, i, ip);
    }
    PyMem_Free(frames.ip);
    PyMem_Free(oracle);
    if (!bt) {
        Py_XDECREF(walked);
        return NULL;
    }
    PyObject *out = Py_BuildValue("(NN)", walked, bt);
    return out;
}

/* step_batch(space, states, stack, stack_address) -> bytes: fu_step_record per fu_step_state (step_batch.h);
 * memory is the stack dump plus the modules' read-only segments. */
static PyObject *step_batch(PyObject *module, PyObject *args)
{
    PyObject *space_object;
    Py_buffer states, stack;
    unsigned long long stack_address;
    if (!PyArg_ParseTuple(args, "Oy*y*K", &space_object, &states, &stack, &stack_address))
        return NULL;
    const fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, space_object);
    PyObject *out = NULL;
    if (!held)
        goto done;
    if (states.len % (Py_ssize_t)sizeof(fu_step_state) != 0) {
        PyErr_Format(PyExc_ValueError, "states: %zd bytes is not a whole number of %zu-byte records", states.len,
                     sizeof(fu_step_state));
        goto done;
    }
    size_t n = (size_t)states.len / sizeof(fu_step_state);
    if (!(out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(fu_step_record)))))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    fu_step_batch(&held->space, states.buf, n, stack.buf, (uint64_t)stack.len, stack_address, fu_step_walker,
                  (void *)&held->space, (uint8_t *)PyBytes_AS_STRING(out));
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&states);
    PyBuffer_Release(&stack);
    return out;
}

static PyMethodDef walk_methods[] = {
    {"step_batch", step_batch, METH_VARARGS,
     "step_batch(space, states, stack, stack_address) -> bytes: one unwind step per state (tests)"},
    {"unwind", (PyCFunction)(void (*)(void))unwind, METH_VARARGS | METH_KEYWORDS,
     "unwind(space, registers, stack, stack_address, max_frames) -> (outcome, fault_address, frames)"},
    {"unwind_self", unwind_self, METH_VARARGS,
     "unwind_self(space, max_frames=256) -> ((outcome, fault_address, frames), glibc backtrace())"},
    {NULL},
};

static const char *outcome_name(int code) { return fu_walk_outcome_name((fu_walk_outcome)code); }
static const char *backend_name(int code) { return fu_backend_name((fu_backend)code); }
static const char *frame_kind_name(int code) { return fu_frame_kind_name(code); }

int py_walk_init(PyObject *module)
{
    if (py_core_add_type(module, PY_ADDRESS_SPACE, &space_spec) < 0)
        return -1;
    if (PyModule_AddFunctions(module, walk_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "WALK_MAX_FRAMES", FU_WALK_MAX_FRAMES) < 0 ||
        PyModule_AddIntConstant(module, "STEP_NO_OUTCOME", FU_STEP_NO_OUTCOME) < 0)
        return -1;
    /* outcome and backend names by code, so that Python never mirrors the enums */
    if (py_core_add_names(module, "WALK_OUTCOMES", FU_WALK_OUTCOME_COUNT, outcome_name) < 0 ||
        py_core_add_names(module, "WALK_BACKENDS", FU_BACKEND_COUNT, backend_name) < 0 ||
        py_core_add_names(module, "FRAME_KINDS", FU_FRAME_KIND_COUNT, frame_kind_name) < 0 ||
        PyModule_AddIntConstant(module, "FRAME_SIGNAL_TRAMPOLINE", FU_FRAME_SIGNAL_TRAMPOLINE) < 0)
        return -1;
    return 0;
}
