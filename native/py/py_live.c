/* The live-process binding: live_capture() stops one thread of a process, copies its registers
 * and stack and releases it (core/live.c), with the GIL released; the outcomes' names by code.
 */
#include "py_core.h" /* Python.h first */

#include "live.h"

/* A tuple of `count` unsigned words, or NULL with an exception set. */
static PyObject *u64_tuple(const uint64_t *values, unsigned count)
{
    PyObject *tuple = PyTuple_New(count);
    for (unsigned i = 0; tuple && i < count; i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(values[i]);
        if (!value)
            Py_CLEAR(tuple);
        else
            PyTuple_SET_ITEM(tuple, i, value);
    }
    return tuple;
}

/* live_capture(pid, tid, stack_ranges, max_stack, mem_fd)
 *   -> (outcome, errno, registers: tuple of 17 | None, state: tuple of the FU_STATE_REGISTERS | None,
 *       stack_address, stack: bytes, stopped_ns)
 * One thread, stopped, copied and released with the GIL released. stack_ranges: native u64 pairs
 * [start, end), sorted (live.h fu_live_stacks); mem_fd: an open /proc/PID/mem or -1. One thread a
 * call, so that a snapshot holds one stack copy at a time whatever the number of threads. */
static PyObject *live_capture(PyObject *module, PyObject *args)
{
    int pid, tid, mem_fd;
    Py_buffer ranges;
    Py_ssize_t max_stack;
    if (!PyArg_ParseTuple(args, "iiy*ni", &pid, &tid, &ranges, &max_stack, &mem_fd))
        return NULL;
    PyObject *result = NULL, *registers = NULL, *state = NULL;
    fu_buffer stack = {0};
    if (ranges.len % 16 != 0 || max_stack < 0 || tid <= 0) {
        PyErr_SetString(PyExc_ValueError, "stack_ranges: u64 pairs; max_stack: not negative; tid: positive");
        goto done;
    }
    fu_live_stacks bounds = {ranges.buf, (size_t)ranges.len / 16, (size_t)max_stack};
    fu_live_thread thread;
    bool captured;
    Py_BEGIN_ALLOW_THREADS
    captured = fu_live_capture_thread(pid, tid, mem_fd, &bounds, &stack, &thread);
    Py_END_ALLOW_THREADS
    if (!captured) {
        PyErr_NoMemory();
        goto done;
    }
    if (thread.outcome == FU_LIVE_CAPTURED) {
        if (!(registers = u64_tuple(thread.regs.value, FU_WALK_REGISTERS)) ||
            !(state = u64_tuple(thread.state.value, FU_STATE_REGISTERS)))
            goto done;
    } else {
        registers = Py_NewRef(Py_None);
        state = Py_NewRef(Py_None);
    }
    result = Py_BuildValue("(siOOKy#K)", fu_live_outcome_name(thread.outcome), thread.error, registers, state,
                           (unsigned long long)thread.stack_address, (const char *)stack.data + thread.stack_offset,
                           (Py_ssize_t)thread.stack_size, (unsigned long long)thread.stopped_ns);
done:
    Py_XDECREF(registers);
    Py_XDECREF(state);
    free(stack.data);
    PyBuffer_Release(&ranges);
    return result;
}

static PyMethodDef live_methods[] = {
    {"live_capture", live_capture, METH_VARARGS,
     "live_capture(pid, tid, stack_ranges, max_stack, mem_fd) -> (outcome, errno, registers, state, stack_address, "
     "stack, "
     "stopped_ns): the thread stopped, copied and released"},
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
