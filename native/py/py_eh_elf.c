/* eh_elf's Python binding: load a compiled unwind table (a shared object that `fastunwind compile`
 * built, see fastunwind/eh_elf.py) and check it before anything calls into it.
 *
 * EhElf(path, key_kind, key, *, generator_version, frame_sizes=None)
 *   1. checks the file is a complete x86-64 ELF shared object: the header, the program headers,
 *      every PT_LOAD's bytes and the section headers inside the file (a truncated file would
 *      otherwise map and fault with SIGBUS on first use);
 *   2. dlopen(RTLD_NOW | RTLD_LOCAL), dlsym of fu_eh_elf_info, fu_eh_elf_step, fu_eh_elf_find and
 *      fu_eh_elf_bodies;
 *   3. compares fu_eh_elf_info with what the caller expects: FU_UNWIND_ABI_VERSION, the generator's
 *      version, the key (build-id or file hash) and, if given, the number of DWARF rows it was built
 *      from (a separate debug file installed since adds .debug_frame rows).
 *   Any mismatch closes the handle and raises fastunwind.errors.EhElfError naming the path and the
 *   values: the caller rebuilds, nothing is used blindly. The object keeps the handle open while it
 *   lives; its py_core payload (PY_EH_ELF) gives other bindings its entry points.
 *
 * eh_elf_step_batch(eh_elf, space, states, stack, stack_address, bias) -> bytes
 *   For tests: one compiled step per state, in step_batch.h's record format, so that
 *   the differential test compares it with the DWARF interpreter byte for byte.
 */
#include "py_core.h" /* Python.h first */

#include <dlfcn.h>
#include <elf.h>
#include <limits.h>

#include "eh_elf.h"
#include "step_batch.h"
#include "walk.h"

typedef struct EhElfObject {
    py_core_object base; /* payload: &table once loaded and checked */
    void *handle;
    fu_eh_elf_table table;
    fu_eh_elf_info info; /* a copy, checked */
    PyObject *path;
} EhElfObject;

/* ---- the EhElf type --------------------------------------------------------------------------- */

static void eh_elf_dealloc(EhElfObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->handle)
        dlclose(self->handle);
    Py_XDECREF(self->path);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static int eh_elf_init(EhElfObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"path", "key_kind", "key", "generator_version", "frame_sizes", NULL};
    PyObject *path_object, *frame_sizes = Py_None;
    unsigned int key_kind, generator_version = UINT_MAX;
    Py_buffer key;
    if (self->handle) {
        PyErr_SetString(PyExc_RuntimeError, "EhElf is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&Iy*|$IO", kwlist, PyUnicode_FSDecoder, &path_object,
                                     &key_kind, &key, &generator_version, &frame_sizes))
        return -1;
    int status = -1;
    const char *path = PyUnicode_AsUTF8(path_object);
    char why[512];
    if (!path)
        goto done;
    if (generator_version == UINT_MAX) {
        PyErr_SetString(PyExc_TypeError, "EhElf() needs generator_version= (the generator version to accept)");
        goto done;
    }
    if (key.len > FU_EH_ELF_MAX_KEY) {
        PyErr_Format(PyExc_ValueError, "a key of %zd bytes (at most %d)", key.len, FU_EH_ELF_MAX_KEY);
        goto done;
    }
    bool check_sizes = frame_sizes != Py_None;
    unsigned long long sizes[2] = {FU_EH_ELF_NO_SECTION, FU_EH_ELF_NO_SECTION};
    if (check_sizes) {
        PyObject *given[2];
        if (!PyArg_ParseTuple(frame_sizes, "OO;frame_sizes is (eh_frame bytes or None, debug_frame bytes or None)",
                              &given[0], &given[1]))
            goto done;
        for (int i = 0; i < 2; i++)
            if (given[i] != Py_None && (sizes[i] = PyLong_AsUnsignedLongLong(given[i])) == (unsigned long long)-1 &&
                PyErr_Occurred())
                goto done;
    }
    fu_eh_elf_loaded loaded;
    const char *problem = fu_eh_elf_load(path, key_kind, key.buf, (size_t)key.len, generator_version, check_sizes,
                                         sizes[0], sizes[1], &loaded, why, sizeof why);
    if (problem) {
        py_core_raise_format(FU_ERR_EH_ELF, "eh_elf %s: %s", path, problem);
        goto done;
    }
    self->info = loaded.info;
    self->table = (fu_eh_elf_table){loaded.step, loaded.find, loaded.bodies, loaded.info.body_count};
    self->handle = loaded.handle;
    self->base.payload = &self->table;
    self->path = Py_NewRef(path_object);
    status = 0;
done:
    Py_DECREF(path_object);
    PyBuffer_Release(&key);
    return status;
}

static bool check_loaded(EhElfObject *self)
{
    if (!self->handle)
        PyErr_SetString(PyExc_RuntimeError, "EhElf is not initialized");
    return self->handle != NULL;
}

static PyObject *eh_elf_get(EhElfObject *self, void *which)
{
    if (!check_loaded(self))
        return NULL;
    const fu_eh_elf_info *info = &self->info;
    switch ((intptr_t)which) {
    case 0: return Py_NewRef(self->path);
    case 1: return PyLong_FromUnsignedLong(info->abi_version);
    case 2: return PyLong_FromUnsignedLong(info->generator_version);
    case 3: return PyLong_FromUnsignedLong(info->key_kind);
    case 4: return PyBytes_FromStringAndSize((const char *)info->key, info->key_size);
    case 5: return PyLong_FromUnsignedLongLong(info->row_count);
    default: Py_RETURN_NONE;
    }
}

static PyGetSetDef eh_elf_getset[] = {
    {"path", (getter)eh_elf_get, NULL, "the shared object", (void *)0},
    {"abi_version", (getter)eh_elf_get, NULL, "FU_UNWIND_ABI_VERSION it was compiled against", (void *)1},
    {"generator_version", (getter)eh_elf_get, NULL, "version of the generator that wrote its C", (void *)2},
    {"key_kind", (getter)eh_elf_get, NULL, "1: build-id, 2: hash of path, size and mtime", (void *)3},
    {"key", (getter)eh_elf_get, NULL, "the build-id (or file hash) it was built for", (void *)4},
    {"row_count", (getter)eh_elf_get, NULL, "DWARF rows (.eh_frame + .debug_frame) it was built from", (void *)5},
    {NULL},
};

static PyType_Slot eh_elf_slots[] = {
    {Py_tp_dealloc, eh_elf_dealloc},
    {Py_tp_init, eh_elf_init},
    {Py_tp_getset, eh_elf_getset},
    {Py_tp_doc, "A compiled unwind table (eh_elf shared object), loaded and checked; see fastunwind.eh_elf."},
    {0, NULL},
};

static PyType_Spec eh_elf_spec = {
    .name = "fastunwind._core.EhElf",
    .basicsize = sizeof(EhElfObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = eh_elf_slots,
};

/* ---- one compiled step per state, for the differential test ---------------------------------- */

typedef struct compiled_batch {
    const fu_eh_elf_table *table;
    uint64_t bias; /* avma = svma + bias */
} compiled_batch;

/* One compiled step into step_batch's record (step_batch.h). Where the compiled step has no walker
 * outcome (NO_INFO: the walker would try the frame pointer; INTERPRET; a status no generator
 * writes) kind is -1 and outcome FU_STEP_NO_OUTCOME; `status` always holds the fu_eh_elf_status. */
static void compiled_step(void *context, const fu_regs *regs, const fu_step_state *state, const fu_reader *reader,
                          fu_step_record *record)
{
    const compiled_batch *batch = context;
    fu_regs caller = {{0}, 0};
    uint64_t fault = 0;
    uint64_t lookup = fu_lookup_address(state->regs[FU_REG_RA], state->ip_is_return_address != 0);
    int status = batch->table->step(lookup - batch->bias, regs, &caller, reader, &fault);
    record->kind = -1;
    record->status = (uint8_t)status;
    record->outcome = FU_STEP_NO_OUTCOME;
    switch (status) {
    case FU_EH_ELF_CFI:
    case FU_EH_ELF_SIGNAL:
        record->kind = status == FU_EH_ELF_SIGNAL ? FU_FRAME_SIGNAL : FU_FRAME_CFI;
        record->flags = status == FU_EH_ELF_SIGNAL ? FU_FRAME_SIGNAL_TRAMPOLINE : 0;
        record->valid = caller.valid;
        for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
            record->regs[r] = caller.valid >> r & 1 ? caller.value[r] : 0;
        break;
    case FU_EH_ELF_REGISTER_UNKNOWN:
    case FU_EH_ELF_EXPRESSION_ERROR:
    case FU_EH_ELF_UNREADABLE:
    case FU_EH_ELF_PAST_DUMP:
        record->outcome = (uint8_t)fu_eh_elf_failure_outcome(status);
        if (status == FU_EH_ELF_UNREADABLE || status == FU_EH_ELF_PAST_DUMP)
            record->fault_address = fault;
        break;
    default: break;
    }
}

/* eh_elf_step_batch(eh_elf, space, states, stack, stack_address, bias) -> bytes: step_batch's formats
 * (step_batch.h) with the compiled table's step alone, for the compiled-vs-interpreter test. */
static PyObject *eh_elf_step_batch(PyObject *module, PyObject *args)
{
    PyObject *eh_elf_object, *space_object;
    Py_buffer states, stack;
    unsigned long long stack_address, bias;
    if (!PyArg_ParseTuple(args, "OOy*y*KK", &eh_elf_object, &space_object, &states, &stack, &stack_address, &bias))
        return NULL;
    compiled_batch batch = {py_core_payload(module, PY_EH_ELF, eh_elf_object), bias};
    const fu_space_with_cache *space = batch.table ? py_core_payload(module, PY_ADDRESS_SPACE, space_object) : NULL;
    PyObject *out = NULL;
    if (!space)
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
    fu_step_batch(&space->space, states.buf, n, stack.buf, (uint64_t)stack.len, stack_address, compiled_step, &batch,
                  (uint8_t *)PyBytes_AS_STRING(out));
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&states);
    PyBuffer_Release(&stack);
    return out;
}

static PyMethodDef eh_elf_functions[] = {
    {"eh_elf_step_batch", eh_elf_step_batch, METH_VARARGS,
     "eh_elf_step_batch(eh_elf, space, states, stack, stack_address, bias) -> bytes: one compiled step per "
     "state, in step_batch's record format (tests)"},
    {NULL},
};

int py_eh_elf_init(PyObject *module)
{
    if (py_core_add_type(module, PY_EH_ELF, &eh_elf_spec) < 0)
        return -1;
    if (PyModule_AddFunctions(module, eh_elf_functions) < 0)
        return -1;
    if (py_core_add_names(module, "EH_ELF_STATUSES", FU_EH_ELF_STATUS_COUNT, fu_eh_elf_status_name) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "UNWIND_ABI_VERSION", FU_UNWIND_ABI_VERSION) < 0 ||
        PyModule_AddIntConstant(module, "EH_ELF_MAX_KEY", FU_EH_ELF_MAX_KEY) < 0 ||
        PyModule_AddIntConstant(module, "EH_ELF_GENERATOR_VERSION", FU_EH_ELF_GENERATOR_VERSION) < 0)
        return -1;
    return 0;
}
