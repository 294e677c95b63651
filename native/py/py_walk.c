/* The walker's Python binding: unwind() over a captured stack, unwind_core() over a core file's memory
 * (a CoreFile, py_coredump.c), unwind_self(), step_batch(), over an
 * AddressSpace (py_address_space.c) and the walk's names by code (outcomes, frame kinds).
 */
#include "py_core.h" /* Python.h first */

#include <execinfo.h>
#include <ucontext.h>

#include "memory.h"
#include "step_batch.h"
#include "walk.h"

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

/* Each frame's registers (fu_walk_frame_registers) as tuples of FU_WALK_REGISTERS values, None where
 * unknown. */
static PyObject *frame_registers_list(const fu_regs *regs, size_t count)
{
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list && i < count; i++) {
        PyObject *values = PyTuple_New(FU_WALK_REGISTERS);
        for (unsigned r = 0; values && r < FU_WALK_REGISTERS; r++) {
            PyObject *value = regs[i].valid >> r & 1 ? PyLong_FromUnsignedLongLong(regs[i].value[r]) : Py_NewRef(Py_None);
            if (!value)
                Py_CLEAR(values);
            else
                PyTuple_SET_ITEM(values, r, value);
        }
        if (!values)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, values);
    }
    return list;
}

/* The walker's registers from a dict {DWARF register: value}; false with an exception set. */
static bool registers_from_dict(PyObject *registers, fu_regs *regs)
{
    *regs = (fu_regs){{0}, 0};
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(registers, &pos, &key, &value)) {
        long reg = PyLong_AsLong(key);
        unsigned long long v = PyLong_AsUnsignedLongLongMask(value);
        if (PyErr_Occurred())
            return false;
        if (reg < 0 || reg >= FU_WALK_REGISTERS) {
            PyErr_Format(PyExc_ValueError, "register %ld: the walker tracks DWARF registers 0-16", reg);
            return false;
        }
        fu_regs_set(regs, (unsigned)reg, v);
    }
    return true;
}

/* Walk from `regs` through `reader` without the GIL -> (outcome, fault_address, frames[, each frame's
 * registers]); `cached`: with a walk cache the space keeps (the threads of one core meet the same
 * PCs). */
static PyObject *walk_through(fu_space_with_cache *held, fu_regs regs, const fu_reader *reader, Py_ssize_t max_frames,
                              bool with_registers, bool cached)
{
    PyObject *result = NULL;
    fu_frames frames = {0};
    fu_regs *per_frame = NULL;
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    if (!frames_alloc((size_t)max_frames, &frames))
        goto done;
    if (with_registers && !(per_frame = PyMem_Malloc(sizeof(fu_regs) * (size_t)max_frames))) {
        PyErr_NoMemory();
        goto done;
    }
    fu_walk_result r;
    const fu_regs first = regs; /* fu_walk works in regs */
    fu_walk_cache *cache = cached ? fu_walk_cache_borrow(&held->slot, &held->space) : NULL;
    Py_BEGIN_ALLOW_THREADS
    fu_walk(&held->space, &regs, reader, cache, &frames, (size_t)max_frames, &r);
    if (per_frame)
        fu_walk_frame_registers(&held->space, &first, reader, &frames, r.frame_count, per_frame);
    Py_END_ALLOW_THREADS
    if (cache)
        fu_walk_cache_return(&held->slot, cache);
    result = walk_result(&r, &frames);
    if (result && per_frame) {
        PyObject *walked = result;
        PyObject *by_frame = frame_registers_list(per_frame, r.frame_count);
        result = by_frame ? Py_BuildValue("(OOON)", PyTuple_GET_ITEM(walked, 0), PyTuple_GET_ITEM(walked, 1),
                                          PyTuple_GET_ITEM(walked, 2), by_frame)
                          : NULL;
        Py_DECREF(walked);
    }
done:
    PyMem_Free(per_frame);
    PyMem_Free(frames.ip);
    return result;
}

/* unwind(space, registers: dict[int, int], stack: bytes, stack_address, max_frames=FU_WALK_MAX_FRAMES,
 *        frame_registers=False)
 *   -> (outcome, fault_address, [(ip, module_index | None, kind, flags)])
 *   with frame_registers: (outcome, fault_address, frames, [each frame's registers by DWARF number]) */
static PyObject *unwind(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"space", "registers", "stack", "stack_address", "max_frames", "frame_registers", NULL};
    PyObject *space_object, *registers;
    Py_buffer stack;
    unsigned long long stack_address;
    Py_ssize_t max_frames = FU_WALK_MAX_FRAMES;
    int with_registers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!y*K|np", kwlist, &space_object, &PyDict_Type, &registers,
                                     &stack, &stack_address, &max_frames, &with_registers))
        return NULL;
    PyObject *result = NULL;
    fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, space_object);
    fu_regs regs;
    if (held && registers_from_dict(registers, &regs)) {
        fu_dump_memory memory = {stack.buf, stack_address, (uint64_t)stack.len, &held->space};
        fu_reader reader = fu_dump_reader(&memory);
        result = walk_through(held, regs, &reader, max_frames, with_registers, false);
    }
    PyBuffer_Release(&stack);
    return result;
}

/* unwind_core(space, core: CoreFile, registers: dict[int, int], max_frames=FU_WALK_MAX_FRAMES,
 *             frame_registers=False) -> as unwind(), the memory a core file's (memory.h fu_read_core:
 *             its dump, then the files it mapped), the stack's segment read inline */
static PyObject *unwind_core(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"space", "core", "registers", "max_frames", "frame_registers", NULL};
    PyObject *space_object, *core_object, *registers;
    Py_ssize_t max_frames = FU_WALK_MAX_FRAMES;
    int with_registers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO!|np", kwlist, &space_object, &core_object, &PyDict_Type,
                                     &registers, &max_frames, &with_registers))
        return NULL;
    fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, space_object);
    const fu_core_memory *memory = held ? py_core_payload(module, PY_CORE_FILE, core_object) : NULL;
    fu_regs regs;
    if (!memory || !registers_from_dict(registers, &regs))
        return NULL;
    uint64_t sp = 0;
    fu_regs_get(&regs, FU_REG_RSP, &sp);
    fu_reader reader = fu_core_reader(memory, sp);
    return walk_through(held, regs, &reader, max_frames, with_registers, true);
}

/* unwind_self(space, max_frames) -> (outcome, fault_address, frames, backtrace)
 * Walks the calling thread's own stack from this function, and returns glibc's backtrace() taken
 * at the same place as an oracle (libgcc's unwinder, in process). */
static PyObject *unwind_self(PyObject *module, PyObject *args)
{
    PyObject *space_object;
    Py_ssize_t max_frames = FU_WALK_SELF_MAX_FRAMES;
    if (!PyArg_ParseTuple(args, "O|n", &space_object, &max_frames))
        return NULL;
    const fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, space_object);
    const fu_address_space *space = held ? &held->space : NULL;
    if (!space)
        return NULL;
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_SELF_MAX_FRAMES;
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

static PyObject *frame_name_address(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned long long ip;
    unsigned char kind, flags;
    if (!PyArg_ParseTuple(args, "Kbb:frame_name_address", &ip, &kind, &flags))
        return NULL;
    return PyLong_FromUnsignedLongLong(fu_frame_name_address(ip, kind, flags));
}

static PyMethodDef walk_methods[] = {
    {"step_batch", step_batch, METH_VARARGS,
     "step_batch(space, states, stack, stack_address) -> bytes: one unwind step per state (tests)"},
    {"unwind", (PyCFunction)(void (*)(void))unwind, METH_VARARGS | METH_KEYWORDS,
     "unwind(space, registers, stack, stack_address, max_frames, frame_registers=False) -> (outcome, fault_address, "
     "frames[, frame registers])"},
    {"unwind_core", (PyCFunction)(void (*)(void))unwind_core, METH_VARARGS | METH_KEYWORDS,
     "unwind_core(space, core, registers, max_frames, frame_registers=False) -> as unwind(), over a CoreFile's memory"},
    {"frame_name_address", frame_name_address, METH_VARARGS,
     "frame_name_address(ip, kind, flags) -> int: the address a walked frame is named at (walk.h)"},
    {"unwind_self", unwind_self, METH_VARARGS,
     "unwind_self(space, max_frames=" Py_STRINGIFY(FU_WALK_SELF_MAX_FRAMES)
     ") -> ((outcome, fault_address, frames), glibc backtrace())"},
    {NULL},
};

static const char *outcome_name(int code) { return fu_walk_outcome_name((fu_walk_outcome)code); }
static const char *frame_kind_name(int code) { return fu_frame_kind_name(code); }

int py_walk_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, walk_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "WALK_MAX_FRAMES", FU_WALK_MAX_FRAMES) < 0 ||
        PyModule_AddIntConstant(module, "WALK_SELF_MAX_FRAMES", FU_WALK_SELF_MAX_FRAMES) < 0 ||
        PyModule_AddIntConstant(module, "STEP_NO_OUTCOME", FU_STEP_NO_OUTCOME) < 0)
        return -1;
    /* outcome and frame kind names by code, so that Python never mirrors the enums */
    if (py_core_add_names(module, "WALK_OUTCOMES", FU_WALK_OUTCOME_COUNT, outcome_name) < 0 ||
        py_core_add_names(module, "FRAME_KINDS", FU_FRAME_KIND_COUNT, frame_kind_name) < 0 ||
        PyModule_AddIntConstant(module, "FRAME_SIGNAL_TRAMPOLINE", FU_FRAME_SIGNAL_TRAMPOLINE) < 0 ||
        PyModule_AddIntConstant(module, "FRAME_CORRECTED", FU_FRAME_CORRECTED) < 0 ||
        PyModule_AddIntConstant(module, "FRAME_SYNTHESIZED", FU_FRAME_SYNTHESIZED) < 0)
        return -1;
    return 0;
}
