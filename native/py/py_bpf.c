/* The Python side of the in-kernel unwinder (native/bpf/bpf_session.h).
 *
 * BpfSession(slot_capacity, sample_all)   loads the BPF program and its maps (BpfError if refused)
 *   scope(pid)                            samples the process (and its children)
 *   attach(frequency)                     cpu-clock at `frequency` Hz on every CPU
 *   load_module(table) -> (id, generation) a CompactTable into the maps (the oldest evicted if short)
 *   module_loaded(id, generation) -> bool
 *   set_process(pid, mappings)            [(start, end, bias, module id, generation)], sorted
 *   forget_process(pid)
 *   take_missing() -> [pid]               processes sampled before their mappings were set
 *   drain() -> [(pid, space pid, outcome, samples, user addresses, kernel addresses)], emptying the map
 *   counters() -> tuple                   summed over the CPUs: BPF_COUNTERS' values, then samples by
 *                                         outcome (BPF_OUTCOMES)
 *   run_time() -> (ns, runs)              the program's (kernel.bpf_stats_enabled)
 *   table_bytes, slots_used, close()
 */
#include "py_core.h"

#include "bpf_session.h"

typedef struct BpfSessionObject {
    py_core_object base; /* payload: the session */
    fu_bpf_session *session;
} BpfSessionObject;

static fu_bpf_session *session_of(BpfSessionObject *self)
{
    if (!self->session)
        PyErr_SetString(PyExc_ValueError, "the BPF session is closed");
    return self->session;
}

static int session_init(BpfSessionObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"slot_capacity", "sample_all", NULL};
    unsigned int capacity;
    int all;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Ip", kwlist, &capacity, &all))
        return -1;
    fu_bpf_session_close(self->session);
    self->session = NULL;
    self->base.payload = NULL;
    fu_error err = {0};
    fu_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fu_bpf_session_open(&self->session, capacity, all, &err);
    Py_END_ALLOW_THREADS
    if (st != FU_OK) {
        py_core_raise(&err);
        return -1;
    }
    self->base.payload = self->session;
    return 0;
}

static void session_dealloc(BpfSessionObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_bpf_session_close(self->session);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *done(fu_status st, const fu_error *err)
{
    return st == FU_OK ? Py_NewRef(Py_None) : py_core_raise(err);
}

static PyObject *session_scope(BpfSessionObject *self, PyObject *arg)
{
    fu_bpf_session *s = session_of(self);
    unsigned long pid = s ? PyLong_AsUnsignedLong(arg) : 0;
    if (!s || PyErr_Occurred())
        return NULL;
    fu_error err = {0};
    return done(fu_bpf_session_scope(s, (uint32_t)pid, &err), &err);
}

static PyObject *session_attach(BpfSessionObject *self, PyObject *arg)
{
    fu_bpf_session *s = session_of(self);
    unsigned long long frequency = s ? PyLong_AsUnsignedLongLong(arg) : 0;
    if (!s || PyErr_Occurred())
        return NULL;
    fu_error err = {0};
    return done(fu_bpf_session_attach(s, frequency, &err), &err);
}

static PyObject *session_load_module(BpfSessionObject *self, PyObject *table)
{
    fu_bpf_session *s = session_of(self);
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    const fu_compact_table *t = s && module ? py_core_payload(module, PY_COMPACT_TABLE, table) : NULL;
    if (!t)
        return NULL;
    fu_error err = {0};
    uint32_t id = 0, generation = 0;
    fu_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fu_bpf_session_load_module(s, t, &id, &generation, &err);
    Py_END_ALLOW_THREADS
    return st == FU_OK ? Py_BuildValue("(II)", id, generation) : py_core_raise(&err);
}

static PyObject *session_module_loaded(BpfSessionObject *self, PyObject *args)
{
    fu_bpf_session *s = session_of(self);
    unsigned int id, generation;
    if (!s || !PyArg_ParseTuple(args, "II", &id, &generation))
        return NULL;
    return PyBool_FromLong(fu_bpf_session_module_loaded(s, id, generation));
}

static PyObject *session_set_process(BpfSessionObject *self, PyObject *args)
{
    fu_bpf_session *s = session_of(self);
    unsigned int pid;
    PyObject *list;
    if (!s || !PyArg_ParseTuple(args, "IO!", &pid, &PyList_Type, &list))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > FU_BPF_MAX_MAPPINGS)
        return py_core_raise_format(FU_ERR_INVALID, "%zd mappings: the BPF unwinder holds at most %d per process", n,
                                    FU_BPF_MAX_MAPPINGS);
    fu_bpf_mapping mappings[FU_BPF_MAX_MAPPINGS];
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long start, end, bias;
        unsigned int id, generation;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "KKKII", &start, &end, &bias, &id, &generation))
            return NULL;
        mappings[i] = (fu_bpf_mapping){.start = start, .end = end, .bias = bias, .module = id, .generation = generation};
    }
    fu_error err = {0};
    return done(fu_bpf_session_set_process(s, pid, mappings, (uint32_t)n, &err), &err);
}

static PyObject *session_forget_process(BpfSessionObject *self, PyObject *arg)
{
    fu_bpf_session *s = session_of(self);
    unsigned long pid = s ? PyLong_AsUnsignedLong(arg) : 0;
    if (!s || PyErr_Occurred())
        return NULL;
    fu_bpf_session_forget_process(s, (uint32_t)pid);
    Py_RETURN_NONE;
}

static PyObject *session_take_missing(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    if (!s)
        return NULL;
    uint32_t pids[FU_BPF_MAX_PROCESSES];
    size_t n = fu_bpf_session_take_missing(s, pids, FU_BPF_MAX_PROCESSES);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *pid = PyLong_FromUnsignedLong(pids[i]);
        if (!pid) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, pid);
    }
    return list;
}

static PyObject *addresses(const uint64_t *values, uint32_t count)
{
    PyObject *tuple = PyTuple_New(count);
    for (uint32_t i = 0; tuple && i < count; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(values[i]);
        if (!v) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, i, v);
    }
    return tuple;
}

static bool add_stack(void *context, const fu_bpf_stack *stack, uint64_t samples, const uint64_t *kernel,
                      uint32_t kernel_count)
{
    uint32_t user_count = stack->user_count < FU_BPF_MAX_FRAMES ? stack->user_count : FU_BPF_MAX_FRAMES;
    PyObject *user = addresses(stack->user, user_count), *kernel_tuple = user ? addresses(kernel, kernel_count) : NULL;
    PyObject *item = kernel_tuple ? Py_BuildValue("(IIBKNN)", stack->pid, stack->space_pid, stack->outcome, samples, user,
                                                  kernel_tuple)
                                  : NULL;
    if (!item) {
        Py_XDECREF(user);
        Py_XDECREF(kernel_tuple);
        return false;
    }
    bool ok = PyList_Append(context, item) == 0;
    Py_DECREF(item);
    return ok;
}

static PyObject *session_drain(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    PyObject *list = s ? PyList_New(0) : NULL;
    if (!list)
        return NULL;
    fu_error err = {0};
    if (fu_bpf_session_drain(s, add_stack, list, &err) != FU_OK) {
        Py_DECREF(list);
        return PyErr_Occurred() ? NULL : py_core_raise(&err);
    }
    return list;
}

static PyObject *session_counters(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    if (!s)
        return NULL;
    uint64_t values[FU_BPF_COUNTER_COUNT];
    fu_error err = {0};
    if (fu_bpf_session_counters(s, values, &err) != FU_OK)
        return py_core_raise(&err);
    return addresses(values, FU_BPF_COUNTER_COUNT);
}

static PyObject *session_run_time(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    if (!s)
        return NULL;
    uint64_t ns = 0, runs = 0;
    fu_error err = {0};
    if (fu_bpf_session_run_time(s, &ns, &runs, &err) != FU_OK)
        return py_core_raise(&err);
    return Py_BuildValue("(KK)", ns, runs);
}

static PyObject *session_close(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = self->session;
    self->session = NULL;
    self->base.payload = NULL;
    Py_BEGIN_ALLOW_THREADS
    fu_bpf_session_close(s);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *session_table_bytes(BpfSessionObject *self, void *closure)
{
    fu_bpf_session *s = session_of(self);
    return s ? PyLong_FromUnsignedLongLong(fu_bpf_session_table_bytes(s)) : NULL;
}

static PyObject *session_slots_used(BpfSessionObject *self, void *closure)
{
    fu_bpf_session *s = session_of(self);
    return s ? PyLong_FromUnsignedLong(fu_bpf_session_slots_used(s)) : NULL;
}

static PyMethodDef session_methods[] = {
    {"scope", (PyCFunction)session_scope, METH_O, "scope(pid): sample the process and its children"},
    {"attach", (PyCFunction)session_attach, METH_O, "attach(frequency): cpu-clock on every CPU"},
    {"load_module", (PyCFunction)session_load_module, METH_O, "load_module(table) -> (id, generation)"},
    {"module_loaded", (PyCFunction)session_module_loaded, METH_VARARGS, "module_loaded(id, generation) -> bool"},
    {"set_process", (PyCFunction)session_set_process, METH_VARARGS,
     "set_process(pid, [(start, end, bias, module, generation)])"},
    {"forget_process", (PyCFunction)session_forget_process, METH_O, "forget_process(pid)"},
    {"take_missing", (PyCFunction)session_take_missing, METH_NOARGS, "take_missing() -> [pid]"},
    {"drain", (PyCFunction)session_drain, METH_NOARGS,
     "drain() -> [(pid, space pid, outcome, samples, user addresses, kernel addresses)]"},
    {"counters", (PyCFunction)session_counters, METH_NOARGS, "counters() -> BPF_COUNTERS' values"},
    {"run_time", (PyCFunction)session_run_time, METH_NOARGS, "run_time() -> (ns, runs)"},
    {"close", (PyCFunction)session_close, METH_NOARGS, "close(): detach and free everything"},
    {NULL},
};

static PyGetSetDef session_getset[] = {
    {"table_bytes", (getter)session_table_bytes, NULL, "bytes of the table maps", NULL},
    {"slots_used", (getter)session_slots_used, NULL, "table slots holding loaded modules", NULL},
    {NULL},
};

static PyType_Slot session_slots[] = {
    {Py_tp_init, session_init},
    {Py_tp_dealloc, session_dealloc},
    {Py_tp_methods, session_methods},
    {Py_tp_getset, session_getset},
    {Py_tp_doc, "The in-kernel unwinder: its BPF program, maps and perf events (see native/bpf/bpf_session.h)."},
    {0, NULL},
};

static PyType_Spec session_spec = {
    .name = "fastunwind._core.BpfSession",
    .basicsize = sizeof(BpfSessionObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = session_slots,
};

static const char *outcome_name(int outcome)
{
    static const char *const names[FU_BPF_OUTCOME_COUNT] = {
        [FU_BPF_END] = "end",
        [FU_BPF_FRAME_LIMIT] = "frame_limit",
        [FU_BPF_NO_UNWIND_INFO] = "no_unwind_info",
        [FU_BPF_UNREADABLE] = "unreadable",
        [FU_BPF_SLOW_ROW] = "slow_row",
        [FU_BPF_NO_PROCESS] = "no_process",
        [FU_BPF_NO_TABLE] = "no_table",
        [FU_BPF_REGISTER_UNKNOWN] = "register_unknown",
        [FU_BPF_SP_BACKWARDS] = "sp_backwards",
        [FU_BPF_KERNEL_ONLY] = "kernel_only",
    };
    return names[outcome];
}

static const char *counter_name(int counter)
{
    static const char *const names[FU_BPF_COUNTER_OUTCOME] = {
        [FU_BPF_COUNTER_SAMPLES] = "samples",
        [FU_BPF_COUNTER_FRAMES] = "frames",
        [FU_BPF_COUNTER_FP_FRAMES] = "frame_pointer_frames",
        [FU_BPF_COUNTER_STACKS_DROPPED] = "stacks_dropped",
        [FU_BPF_COUNTER_WALK_NS] = "walk_ns",
        [FU_BPF_COUNTER_WALKED_SAMPLES] = "walked_samples",
        [FU_BPF_COUNTER_STACK_READS] = "stack_reads",
        [FU_BPF_COUNTER_ROW_LOOKUPS] = "row_lookups",
        [FU_BPF_COUNTER_DERIVED_FRAMES] = "derived_frames",
    };
    return names[counter];
}

int py_bpf_init(PyObject *module)
{
    if (py_core_add_type(module, PY_BPF_SESSION, &session_spec) < 0 ||
        py_core_add_names(module, "BPF_OUTCOMES", FU_BPF_OUTCOME_COUNT, outcome_name) < 0 ||
        py_core_add_names(module, "BPF_COUNTERS", FU_BPF_COUNTER_OUTCOME, counter_name) < 0 ||
        PyModule_AddIntConstant(module, "BPF_MAX_FRAMES", FU_BPF_MAX_FRAMES) < 0 ||
        PyModule_AddIntConstant(module, "BPF_MAX_MAPPINGS", FU_BPF_MAX_MAPPINGS) < 0 ||
        PyModule_AddIntConstant(module, "BPF_DEFAULT_SLOTS", FU_BPF_DEFAULT_SLOTS) < 0 ||
        PyModule_AddIntConstant(module, "BPF_SLOT_BYTES", sizeof(fu_bpf_slot)) < 0)
        return -1;
    return 0;
}
