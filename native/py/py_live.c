/* The live-process binding: live_capture() stops each listed thread of a process in turn, copies
 * its registers and stack and releases it (core/live.c), with the GIL released; the outcomes'
 * names by code.
 */
#include "py_core.h" /* Python.h first */

#include <limits.h>

#include "live.h"

/* live_capture(pid, tids, stack_ranges, max_stack, mem_fd)
 *   -> [(tid, outcome, errno, registers: tuple of 17 | None, stack_address, stack: bytes, stopped_ns)]
 * stack_ranges: native u64 pairs [start, end), sorted (live.h fu_live_stacks); mem_fd: an open
 * /proc/PID/mem or -1. */
static PyObject *live_capture(PyObject *module, PyObject *args)
{
    int pid, mem_fd;
    PyObject *tid_list;
    Py_buffer ranges;
    Py_ssize_t max_stack;
    if (!PyArg_ParseTuple(args, "iO!y*ni", &pid, &PyList_Type, &tid_list, &ranges, &max_stack, &mem_fd))
        return NULL;
    PyObject *result = NULL;
    int *tids = NULL;
    fu_live_thread *threads = NULL;
    fu_buffer stacks = {0};
    Py_ssize_t count = PyList_GET_SIZE(tid_list);
    if (ranges.len % 16 != 0 || max_stack < 0) {
        PyErr_SetString(PyExc_ValueError, "stack_ranges: u64 pairs; max_stack: not negative");
        goto done;
    }
    tids = PyMem_Malloc(sizeof(int) * (size_t)(count ? count : 1));
    threads = PyMem_Malloc(sizeof(fu_live_thread) * (size_t)(count ? count : 1));
    if (!tids || !threads) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        long tid = PyLong_AsLong(PyList_GET_ITEM(tid_list, i));
        if (tid == -1 && PyErr_Occurred())
            goto done;
        if (tid <= 0 || tid > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "tid %ld: not a thread id", tid);
            goto done;
        }
        tids[i] = (int)tid;
    }
    fu_live_stacks bounds = {ranges.buf, (size_t)ranges.len / 16, (size_t)max_stack};
    bool out_of_memory = false;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) /* every thread is released before the next is stopped */
        if (!fu_live_capture_thread(pid, tids[i], mem_fd, &bounds, &stacks, &threads[i]))
            out_of_memory = true;
    Py_END_ALLOW_THREADS
    if (out_of_memory) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(result = PyList_New(count)))
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        const fu_live_thread *t = &threads[i];
        PyObject *registers = Py_NewRef(Py_None);
        if (t->outcome == FU_LIVE_CAPTURED) {
            Py_DECREF(registers);
            registers = PyTuple_New(FU_WALK_REGISTERS);
            for (unsigned r = 0; registers && r < FU_WALK_REGISTERS; r++) {
                PyObject *value = PyLong_FromUnsignedLongLong(t->regs.value[r]);
                if (!value)
                    Py_CLEAR(registers);
                else
                    PyTuple_SET_ITEM(registers, r, value);
            }
        }
        PyObject *item = registers ? Py_BuildValue("(isiNKy#K)", t->tid, fu_live_outcome_name(t->outcome), t->error,
                                                   registers, (unsigned long long)t->stack_address,
                                                   (const char *)stacks.data + t->stack_offset,
                                                   (Py_ssize_t)t->stack_size, (unsigned long long)t->stopped_ns)
                                   : NULL;
        if (!item) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, item);
    }
done:
    free(stacks.data);
    PyMem_Free(tids);
    PyMem_Free(threads);
    PyBuffer_Release(&ranges);
    return result;
}

static PyMethodDef live_methods[] = {
    {"live_capture", live_capture, METH_VARARGS,
     "live_capture(pid, tids, stack_ranges, max_stack, mem_fd) -> [(tid, outcome, errno, registers, stack_address, "
     "stack, stopped_ns)]: each thread stopped, copied and released in turn"},
    {NULL},
};

static const char *outcome_name(int code) { return fu_live_outcome_name(code); }

int py_live_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, live_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "LIVE_MAX_STACK", FU_LIVE_MAX_STACK) < 0 ||
        PyModule_AddIntConstant(module, "LIVE_STOP_TIMEOUT_MS", FU_LIVE_STOP_TIMEOUT_MS) < 0 ||
        py_core_add_names(module, "LIVE_OUTCOMES", FU_LIVE_OUTCOME_COUNT, outcome_name) < 0)
        return -1;
    return 0;
}
