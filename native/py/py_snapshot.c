/* The snapshot rendering's binding: render_snapshot() gives the text or JSON of a
 * stacks.ProcessSnapshot's threads as core/snapshot.c writes it for the launcher too, so that the
 * two paths print one rendering.
 *
 * render_snapshot(pid, threads, json) -> bytes
 *   threads: stacks.Thread tuples (tid, name, frames, outcome, fault_address, stopped_ns, reason),
 *   frames: stacks.Frame tuples (address, symbol, offset, module, recovered_by, registers), the
 *   registers a mapping of every walker register's name, then every state register's (in
 *   stacks.REGISTER_NAMES' and STATE_REGISTER_NAMES' order), to its value or None, or empty.
 *   Strings are encoded as the file system's names are (surrogateescape: a path's undecodable
 *   bytes are its own again).
 */
#include "py_core.h" /* Python.h first */

#include "snapshot.h"

/* `object` (str or None) as bytes kept in `keep` (a list), or (NULL, 0) for None; false with an
 * exception set. */
static bool text_of(PyObject *object, PyObject *keep, fu_snapshot_text *out)
{
    *out = (fu_snapshot_text){NULL, 0};
    if (object == Py_None)
        return true;
    PyObject *bytes = PyUnicode_Check(object) ? PyUnicode_EncodeFSDefault(object) : NULL;
    if (!bytes) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "a str or None, not %.100s", Py_TYPE(object)->tp_name);
        return false;
    }
    int appended = PyList_Append(keep, bytes);
    *out = (fu_snapshot_text){PyBytes_AS_STRING(bytes), (size_t)PyBytes_GET_SIZE(bytes)};
    Py_DECREF(bytes);
    return appended == 0;
}

/* A frame's registers mapping (the walker's, then the state registers: x86_64.h) into *regs and
 * *state; *has false for an empty one. */
static bool registers_of(PyObject *mapping, fu_regs *regs, fu_state_regs *state, bool *has)
{
    *regs = (fu_regs){{0}, 0};
    *state = (fu_state_regs){{0}, 0};
    Py_ssize_t size = PyObject_Length(mapping);
    if (size < 0)
        return false;
    *has = size > 0;
    if (!size)
        return true;
    if (size != FU_WALK_REGISTERS + FU_STATE_REGISTERS) {
        PyErr_Format(PyExc_ValueError, "a frame's registers: %d of them or none, not %zd",
                     FU_WALK_REGISTERS + FU_STATE_REGISTERS, size);
        return false;
    }
    PyObject *values = PyMapping_Values(mapping);
    if (!values)
        return false;
    for (unsigned r = 0; r < FU_WALK_REGISTERS + FU_STATE_REGISTERS; r++) {
        PyObject *value = PyList_GET_ITEM(values, r);
        if (value == Py_None)
            continue;
        unsigned long long v = PyLong_AsUnsignedLongLong(value);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(values);
            return false;
        }
        if (r < FU_WALK_REGISTERS) {
            fu_regs_set(regs, r, v);
        } else {
            state->value[r - FU_WALK_REGISTERS] = v;
            state->valid |= 1u << (r - FU_WALK_REGISTERS);
        }
    }
    Py_DECREF(values);
    return true;
}

static bool render_thread(PyObject *thread, bool json, fu_buffer *out)
{
    PyObject *keep = PyList_New(0), *frames_seq = NULL;
    fu_snapshot_frame *frames = NULL;
    fu_regs *regs = NULL;
    fu_state_regs *states = NULL;
    bool ok = false;
    PyObject *tid, *name, *frames_object, *outcome, *fault, *stopped, *reason;
    if (!keep || !PyArg_ParseTuple(thread, "OOOOOOO;a stacks.Thread", &tid, &name, &frames_object, &outcome, &fault,
                                   &stopped, &reason))
        goto done;
    fu_snapshot_thread t = {.tid = PyLong_AsLongLong(tid), .fault_address = PyLong_AsUnsignedLongLong(fault),
                            .outcome = PyUnicode_Check(outcome) ? PyUnicode_AsUTF8(outcome) : NULL};
    if (!PyErr_Occurred() && !PyUnicode_Check(outcome))
        PyErr_SetString(PyExc_TypeError, "a thread's outcome: a str");
    if (PyErr_Occurred() || !t.outcome || !text_of(name, keep, &t.name) || !text_of(reason, keep, &t.reason) ||
        !(frames_seq = PySequence_Fast(frames_object, "a thread's frames: a sequence")))
        goto done;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(frames_seq);
    frames = PyMem_Calloc((size_t)count + 1, sizeof *frames);
    regs = PyMem_Calloc((size_t)count + 1, sizeof *regs);
    states = PyMem_Calloc((size_t)count + 1, sizeof *states);
    if (!frames || !regs || !states) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *address, *symbol, *offset, *module, *kind, *registers, *derived;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(frames_seq, i), "OOOOOOO;a stacks.Frame", &address, &symbol,
                              &offset, &module, &kind, &registers, &derived))
            goto done;
        fu_snapshot_frame *f = &frames[i];
        f->address = PyLong_AsUnsignedLongLong(address);
        f->offset = PyLong_AsUnsignedLongLong(offset);
        bool has;
        if (PyErr_Occurred() || !text_of(symbol, keep, &f->symbol) || !text_of(module, keep, &f->module) ||
            !registers_of(registers, &regs[i], &states[i], &has))
            goto done;
        f->registers = has ? &regs[i] : NULL;
        f->state = &states[i];
        if (derived != Py_None && !(f->derived = PyUnicode_Check(derived) ? PyUnicode_AsUTF8(derived) : NULL)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a frame's derived rows: a str or None");
            goto done;
        }
    }
    t.frames = frames;
    t.frame_count = (size_t)count;
    ok = json ? fu_snapshot_thread_json(&t, out) : fu_snapshot_thread_text(&t, out);
    if (!ok)
        PyErr_NoMemory();
done:
    PyMem_Free(frames);
    PyMem_Free(regs);
    PyMem_Free(states);
    Py_XDECREF(frames_seq);
    Py_XDECREF(keep);
    return ok;
}

static PyObject *render_snapshot(PyObject *module, PyObject *args)
{
    long long pid;
    PyObject *threads;
    int json;
    if (!PyArg_ParseTuple(args, "LOp", &pid, &threads, &json))
        return NULL;
    PyObject *sequence = PySequence_Fast(threads, "threads: a sequence of stacks.Thread");
    if (!sequence)
        return NULL;
    fu_buffer out = {0};
    PyObject *result = NULL;
    bool ok = fu_snapshot_head(pid, json, &out);
    for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(sequence); i++)
        ok = (!json || i == 0 || fu_snapshot_json_separator(&out)) &&
             render_thread(PySequence_Fast_GET_ITEM(sequence, i), json, &out);
    if (ok && fu_snapshot_tail(json, &out))
        result = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    else if (!PyErr_Occurred())
        PyErr_NoMemory();
    free(out.data);
    Py_DECREF(sequence);
    return result;
}

static PyMethodDef snapshot_methods[] = {
    {"render_snapshot", render_snapshot, METH_VARARGS,
     "render_snapshot(pid, threads, json) -> bytes: the text or JSON of a snapshot (core/snapshot.c)"},
    {NULL},
};

int py_snapshot_init(PyObject *module)
{
    return PyModule_AddFunctions(module, snapshot_methods);
}
