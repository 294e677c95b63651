/* The Python side of the in-kernel unwinder (native/bpf/bpf_session.h).
 *
 * bpf_slot_count(table) -> int           the slots a CompactTable takes in the table map
 * BpfSession(slot_capacity, timing=False, slot_limit=None) loads the BPF program and its maps
 *                                       (BpfMapMemoryError if the kernel refused the table map's
 *                                       memory, BpfError if it refused another part; ValueError past
 *                                       BPF_MAX_SLOTS); timing: the walks and samples timed (the *_ns
 *                                       counters); slot_limit: the slots the table map may grow to
 *                                       (by BPF_SEGMENT_SLOTS) instead of evicting (None: no growth)
 *   attach_cpus(frequency)                cpu-clock at `frequency` Hz on every CPU: every process
 *   attach_thread(frequency, tid)         cpu-clock at `frequency` Hz following the thread, inherited by
 *                                         the threads and processes it starts
 *   load_module(table) -> (id, generation) a CompactTable into the maps (the oldest evicted if short)
 *   module_loaded(id, generation) -> bool
 *   set_process(pid, identity, mappings, left_out=0) -> bool  identity (start_code, end_code, start_stack,
 *                                         start_brk), mappings [(start, end, bias, module id, generation)],
 *                                         sorted, at most BPF_MAX_MAPPINGS; left_out: the process's
 *                                         executable mappings not among them
 *   forget_process(pid)
 *   take_missing() -> [pid]               processes sampled before their mappings were set
 *   wait(timeout_ms)                      until the program asks for a process to load (or timeout_ms),
 *                                         taking the samples sent meanwhile into the log
 *   drain() -> [(pid, space pid, outcome, user addresses, kernel addresses, interrupted)]: the samples sent since
 *                                         into the log; the stacks seen for the first time, in id order
 *   stack_samples() -> tuple              samples by stack id
 *   logged, unlogged                      samples in the log, and past its bound (counted by stack only)
 *   perf_script(write, blocks, event)     perf script's text of the logged samples, blocks[stack id]
 *                                         their stack's frame lines (bytes), in bytes chunks
 *   add_to_profile(profile, stacks, interval_ms)  each logged sample into a Profile, stacks[stack id]
 *                                         = (frames root first, outcome or "")
 *   samples() -> [(time, tid, cpu, comm, stack id)]  the log
 *   stop()                                ends the sampling (the events closed) and takes every sample
 *                                         sent or left in the CPUs' batches into the log, ordered by time
 *   detach()                              releases the program, maps and events; the log stays
 *   counters() -> tuple                   summed over the CPUs: BPF_COUNTERS' values, then samples by
 *                                         outcome (BPF_OUTCOMES)
 *   run_time() -> (ns, runs)              the program's (kernel.bpf_stats_enabled)
 *   table_bytes, slots_used, slots_peak, slot_capacity, evicted_in_use, close()
 */
#include "py_core.h"

#include "bpf_session.h"

typedef struct BpfSessionObject {
    py_core_object base; /* payload: the session */
    fu_bpf_session *session;
    bool detached; /* the kernel objects released: only the log is left */
} BpfSessionObject;

static fu_bpf_session *session_of(BpfSessionObject *self)
{
    if (!self->session)
        PyErr_SetString(PyExc_ValueError, "the BPF session is closed");
    return self->session;
}

/* A session still holding its kernel objects (not detached). */
static fu_bpf_session *attached_session(BpfSessionObject *self)
{
    fu_bpf_session *s = session_of(self);
    if (s && self->detached) {
        PyErr_SetString(PyExc_ValueError, "the BPF session is detached");
        return NULL;
    }
    return s;
}

/* A Python int as a value of C's unsigned range up to `max`, or -1 with OverflowError or ValueError
 * (PyArg's "I" and "K" would cut it to its low bits silently). */
static int unsigned_arg(PyObject *value, unsigned long long max, const char *what, unsigned long long *out)
{
    *out = PyLong_AsUnsignedLongLong(value);
    if (*out == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (*out > max) {
        py_core_raise_format(FU_ERR_INVALID, "%s %llu: at most %llu", what, *out, max);
        return -1;
    }
    return 0;
}

static int session_init(BpfSessionObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"slot_capacity", "timing", "slot_limit", NULL};
    PyObject *capacity_arg, *limit_arg = Py_None;
    unsigned long long capacity, limit = 0;
    int timing = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pO", kwlist, &capacity_arg, &timing, &limit_arg) ||
        unsigned_arg(capacity_arg, FU_BPF_MAX_SLOTS, "the BPF table map's slots", &capacity) < 0 ||
        (limit_arg != Py_None && unsigned_arg(limit_arg, FU_BPF_MAX_SLOTS, "the BPF table map's limit", &limit) < 0))
        return -1;
    fu_bpf_session_close(self->session);
    self->session = NULL;
    self->base.payload = NULL;
    self->detached = false;
    fu_error err = {0};
    fu_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fu_bpf_session_open(&self->session, (uint32_t)capacity, (uint32_t)limit, timing, &err);
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

static PyObject *session_attach_cpus(BpfSessionObject *self, PyObject *arg)
{
    fu_bpf_session *s = attached_session(self);
    unsigned long long frequency;
    if (!s || unsigned_arg(arg, UINT64_MAX, "a frequency of", &frequency) < 0)
        return NULL;
    fu_error err = {0};
    return done(fu_bpf_session_attach_cpus(s, frequency, &err), &err);
}

static PyObject *session_attach_thread(BpfSessionObject *self, PyObject *args)
{
    fu_bpf_session *s = attached_session(self);
    PyObject *frequency_arg, *tid_arg;
    unsigned long long frequency, tid;
    if (!s || !PyArg_ParseTuple(args, "OO", &frequency_arg, &tid_arg) ||
        unsigned_arg(frequency_arg, UINT64_MAX, "a frequency of", &frequency) < 0 ||
        unsigned_arg(tid_arg, UINT32_MAX, "a thread id", &tid) < 0)
        return NULL;
    fu_error err = {0};
    return done(fu_bpf_session_attach_thread(s, frequency, (uint32_t)tid, &err), &err);
}

static PyObject *session_load_module(BpfSessionObject *self, PyObject *table)
{
    fu_bpf_session *s = attached_session(self);
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
    fu_bpf_session *s = attached_session(self);
    unsigned int id, generation;
    if (!s || !PyArg_ParseTuple(args, "II", &id, &generation))
        return NULL;
    return PyBool_FromLong(fu_bpf_session_module_loaded(s, id, generation));
}

static PyObject *session_set_process(BpfSessionObject *self, PyObject *args)
{
    fu_bpf_session *s = attached_session(self);
    unsigned int pid;
    PyObject *list;
    unsigned long long code, code_end, stack, brk;
    unsigned int left_out = 0;
    if (!s || !PyArg_ParseTuple(args, "I(KKKK)O!|I", &pid, &code, &code_end, &stack, &brk, &PyList_Type, &list,
                                &left_out))
        return NULL;
    fu_bpf_space_identity identity = {.start_code = code, .end_code = code_end, .start_stack = stack, .start_brk = brk};
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
    bool set = false;
    if (fu_bpf_session_set_process(s, pid, &identity, mappings, (uint32_t)n, left_out, &set, &err) != FU_OK)
        return py_core_raise(&err);
    return PyBool_FromLong(set);
}

static PyObject *session_forget_process(BpfSessionObject *self, PyObject *arg)
{
    fu_bpf_session *s = attached_session(self);
    unsigned long pid = s ? PyLong_AsUnsignedLong(arg) : 0;
    if (!s || PyErr_Occurred())
        return NULL;
    fu_bpf_session_forget_process(s, (uint32_t)pid);
    Py_RETURN_NONE;
}

static PyObject *session_take_missing(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = attached_session(self);
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

/* A thread's command name as Python's /proc/PID/comm readers decode it (live.py): any bytes a
 * thread named itself with (prctl PR_SET_NAME) are text. */
static PyObject *command_name(fu_text comm)
{
    return PyUnicode_DecodeUTF8(comm.data, (Py_ssize_t)comm.len, "backslashreplace");
}

static bool add_stack(void *context, const fu_bpf_stack *stack, const uint64_t *kernel, uint32_t kernel_count)
{
    uint32_t user_count = stack->user_count < FU_BPF_MAX_FRAMES ? stack->user_count : FU_BPF_MAX_FRAMES;
    PyObject *user = addresses(stack->user, user_count), *kernel_tuple = user ? addresses(kernel, kernel_count) : NULL;
    PyObject *item = kernel_tuple ? Py_BuildValue("(IIBNNK)", stack->pid, stack->space_pid, stack->outcome, user,
                                                  kernel_tuple, stack->interrupted)
                                  : NULL;
    if (!item) {
        if (!kernel_tuple)
            Py_XDECREF(user);
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

static PyObject *session_wait(BpfSessionObject *self, PyObject *arg)
{
    fu_bpf_session *s = attached_session(self);
    long timeout_ms = s ? PyLong_AsLong(arg) : 0;
    if (!s || PyErr_Occurred())
        return NULL;
    if (timeout_ms < 0 || timeout_ms > INT_MAX)
        return py_core_raise_format(FU_ERR_INVALID, "wait(%ld): the timeout is 0 to %d ms", timeout_ms, INT_MAX);
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_bpf_session_wait(s, (int)timeout_ms, &err);
    Py_END_ALLOW_THREADS
    if (status != FU_OK)
        return py_core_raise(&err);
    if (PyErr_CheckSignals() < 0) /* Ctrl-C during the wait */
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *session_counters(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = attached_session(self);
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
    fu_bpf_session *s = attached_session(self);
    if (!s)
        return NULL;
    uint64_t ns = 0, runs = 0;
    fu_error err = {0};
    if (fu_bpf_session_run_time(s, &ns, &runs, &err) != FU_OK)
        return py_core_raise(&err);
    return Py_BuildValue("(KK)", ns, runs);
}

static PyObject *session_stack_samples(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    if (!s)
        return NULL;
    const fu_bpf_log *log = fu_bpf_session_log(s);
    uint32_t n = fu_bpf_log_stack_count(log);
    PyObject *tuple = PyTuple_New(n);
    for (uint32_t i = 0; tuple && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(fu_bpf_log_stack_samples(log, i));
        if (!v) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, i, v);
    }
    return tuple;
}

/* One fu_text per stack id from a sequence of bytes (blocks) or of str; NULL with an exception. The
 * texts point into the sequence's items: keep `*held` (a new reference) while they are used. */
static fu_text *texts_of(PyObject *items, uint32_t expected, const char *what, PyObject **held)
{
    PyObject *seq = PySequence_Fast(items, what);
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((uint64_t)n != expected) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: %zd items for %u stacks", what, n, expected);
        return NULL;
    }
    fu_text *texts = PyMem_Calloc((size_t)n + 1, sizeof *texts);
    for (Py_ssize_t i = 0; texts && i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t len;
        const char *data = PyBytes_Check(item) ? PyBytes_AS_STRING(item) : PyUnicode_AsUTF8AndSize(item, &len);
        if (PyBytes_Check(item))
            len = PyBytes_GET_SIZE(item);
        if (!data) {
            PyMem_Free(texts);
            Py_DECREF(seq);
            return NULL;
        }
        texts[i] = (fu_text){data, (size_t)len};
    }
    if (!texts) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    *held = seq;
    return texts;
}

static PyObject *session_perf_script(BpfSessionObject *self, PyObject *args)
{
    PyObject *write, *blocks_arg, *held = NULL;
    const char *event;
    Py_ssize_t event_len;
    fu_bpf_session *s = session_of(self);
    if (!s || !PyArg_ParseTuple(args, "OOs#", &write, &blocks_arg, &event, &event_len))
        return NULL;
    const fu_bpf_log *log = fu_bpf_session_log(s);
    uint32_t stacks = fu_bpf_log_stack_count(log);
    fu_text *blocks = texts_of(blocks_arg, stacks, "blocks must be a sequence of bytes, one per stack", &held);
    if (!blocks)
        return NULL;
    fu_error err = {0};
    fu_status st = fu_bpf_log_perf_script(log, blocks, stacks, (fu_text){event, (size_t)event_len},
                                          py_core_write_chunk, write, &err);
    PyMem_Free(blocks);
    Py_DECREF(held);
    if (st != FU_OK)
        return PyErr_Occurred() ? NULL : py_core_raise(&err);
    Py_RETURN_NONE;
}

static PyObject *session_add_to_profile(BpfSessionObject *self, PyObject *args)
{
    PyObject *profile_arg, *stacks_arg;
    double interval_ms;
    fu_bpf_session *s = session_of(self);
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    if (!s || !module || !PyArg_ParseTuple(args, "OOd", &profile_arg, &stacks_arg, &interval_ms))
        return NULL;
    fu_profile *profile = py_core_payload(module, PY_PROFILE, profile_arg);
    PyObject *seq = profile ? PySequence_Fast(stacks_arg, "stacks must be a sequence of (frames, outcome)") : NULL;
    if (!seq)
        return NULL;
    const fu_bpf_log *log = fu_bpf_session_log(s);
    uint32_t count = fu_bpf_log_stack_count(log);
    if ((uint64_t)PySequence_Fast_GET_SIZE(seq) != count) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "%zd named stacks for %u stacks", PySequence_Fast_GET_SIZE(seq), count);
    }
    fu_bpf_named_stack *named = PyMem_Calloc((size_t)count + 1, sizeof *named);
    PyObject **held = PyMem_Calloc((size_t)count + 1, sizeof *held);
    bool ok = named && held;
    if (!ok)
        PyErr_NoMemory();
    for (uint32_t i = 0; ok && i < count; i++) {
        PyObject *frames, *outcome;
        Py_ssize_t outcome_len;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "OU", &frames, &outcome);
        const char *outcome_text = ok ? PyUnicode_AsUTF8AndSize(outcome, &outcome_len) : NULL;
        ok = outcome_text != NULL;
        if (ok) {
            Py_ssize_t n = PySequence_Size(frames);
            fu_text *texts = n >= 0 ? texts_of(frames, (uint32_t)n, "frames must be a sequence of str", &held[i]) : NULL;
            ok = texts != NULL;
            if (ok)
                named[i] = (fu_bpf_named_stack){texts, (size_t)n, {outcome_text, (size_t)outcome_len}};
        }
    }
    fu_error err = {0};
    fu_status st = ok ? fu_bpf_log_profile(log, named, count, interval_ms, profile, &err) : FU_OK;
    for (uint32_t i = 0; named && held && i < count; i++) {
        PyMem_Free((void *)named[i].frames);
        Py_XDECREF(held[i]);
    }
    PyMem_Free(named);
    PyMem_Free(held);
    Py_DECREF(seq);
    if (!ok)
        return NULL;
    return st == FU_OK ? Py_NewRef(Py_None) : py_core_raise(&err);
}

static PyObject *session_samples(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    if (!s)
        return NULL;
    const fu_bpf_log *log = fu_bpf_session_log(s);
    size_t n = fu_bpf_log_sample_count(log);
    const fu_bpf_logged *samples = fu_bpf_log_samples(log);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *name = command_name(fu_bpf_log_comm(log, samples[i].comm));
        PyObject *item = name ? Py_BuildValue("(KIINI)", samples[i].time, samples[i].tid, samples[i].cpu, name,
                                              samples[i].stack)
                              : NULL;
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

/* {pid: (command name, whether its main thread's)}: the name its main thread (tid == pid) had at its
 * last logged sample, else the name of the thread of its last sample. A process may name itself
 * (prctl PR_SET_NAME) after user space read its /proc/PID/comm, as perf's COMM events follow; one
 * gone before user space loaded it has only these. One pass over the log from its end. */
static PyObject *session_sampled_comms(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    if (!s)
        return NULL;
    const fu_bpf_log *log = fu_bpf_session_log(s);
    const fu_bpf_logged *samples = fu_bpf_log_samples(log);
    PyObject *names = PyDict_New();
    for (size_t i = fu_bpf_log_sample_count(log); names && i-- > 0;) {
        uint32_t pid = fu_bpf_log_stack(log, samples[i].stack)->pid;
        bool is_main = samples[i].tid == pid;
        PyObject *key = PyLong_FromUnsignedLong(pid);
        PyObject *known = key ? PyDict_GetItemWithError(names, key) : NULL; /* borrowed */
        bool keep = key && (known ? is_main && PyTuple_GET_ITEM(known, 1) == Py_False : !PyErr_Occurred());
        PyObject *name = keep ? command_name(fu_bpf_log_comm(log, samples[i].comm)) : NULL;
        PyObject *entry = name ? Py_BuildValue("(NO)", name, is_main ? Py_True : Py_False) : NULL;
        if (!key || PyErr_Occurred() || (keep && (!entry || PyDict_SetItem(names, key, entry) < 0)))
            Py_CLEAR(names);
        Py_XDECREF(entry);
        Py_XDECREF(key);
    }
    return names;
}

static PyObject *session_stop(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = attached_session(self);
    if (!s)
        return NULL;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_bpf_session_stop(s, &err);
    Py_END_ALLOW_THREADS
    if (status != FU_OK)
        return py_core_raise(&err);
    Py_RETURN_NONE;
}

static PyObject *session_detach(BpfSessionObject *self, PyObject *unused)
{
    fu_bpf_session *s = session_of(self);
    if (!s)
        return NULL;
    self->detached = true;
    Py_BEGIN_ALLOW_THREADS
    fu_bpf_session_detach(s);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *session_logged(BpfSessionObject *self, void *closure)
{
    fu_bpf_session *s = session_of(self);
    return s ? PyLong_FromSize_t(fu_bpf_log_sample_count(fu_bpf_session_log(s))) : NULL;
}

static PyObject *session_unlogged(BpfSessionObject *self, void *closure)
{
    fu_bpf_session *s = session_of(self);
    return s ? PyLong_FromUnsignedLongLong(fu_bpf_session_log(s)->unlogged) : NULL;
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

static PyObject *session_slot_capacity(BpfSessionObject *self, void *closure)
{
    fu_bpf_session *s = session_of(self);
    return s ? PyLong_FromUnsignedLong(fu_bpf_session_slot_capacity(s)) : NULL;
}

static PyObject *session_slots_peak(BpfSessionObject *self, void *closure)
{
    fu_bpf_session *s = session_of(self);
    return s ? PyLong_FromUnsignedLong(fu_bpf_session_slots_peak(s)) : NULL;
}

static PyObject *session_evicted_in_use(BpfSessionObject *self, void *closure)
{
    fu_bpf_session *s = session_of(self);
    return s ? PyLong_FromUnsignedLong(fu_bpf_session_evicted_in_use(s)) : NULL;
}

static PyMethodDef session_methods[] = {
    {"attach_cpus", (PyCFunction)session_attach_cpus, METH_O, "attach_cpus(frequency): cpu-clock on every CPU"},
    {"attach_thread", (PyCFunction)session_attach_thread, METH_VARARGS,
     "attach_thread(frequency, tid): cpu-clock following the thread, inherited by its children"},
    {"load_module", (PyCFunction)session_load_module, METH_O, "load_module(table) -> (id, generation)"},
    {"module_loaded", (PyCFunction)session_module_loaded, METH_VARARGS, "module_loaded(id, generation) -> bool"},
    {"set_process", (PyCFunction)session_set_process, METH_VARARGS,
     "set_process(pid, (start_code, end_code, start_stack, start_brk), [(start, end, bias, module, generation)], "
     "left_out=0) -> False where the unwinder has no room for another process"},
    {"forget_process", (PyCFunction)session_forget_process, METH_O, "forget_process(pid)"},
    {"take_missing", (PyCFunction)session_take_missing, METH_NOARGS, "take_missing() -> [pid]"},
    {"drain", (PyCFunction)session_drain, METH_NOARGS,
     "drain() -> [(pid, space pid, outcome, user addresses, kernel addresses, interrupted)] of the stacks first "
     "seen"},
    {"stack_samples", (PyCFunction)session_stack_samples, METH_NOARGS, "stack_samples() -> samples by stack id"},
    {"perf_script", (PyCFunction)session_perf_script, METH_VARARGS,
     "perf_script(write, blocks, event): perf script's text of the logged samples"},
    {"add_to_profile", (PyCFunction)session_add_to_profile, METH_VARARGS,
     "add_to_profile(profile, stacks, interval_ms): every logged sample into the Profile"},
    {"samples", (PyCFunction)session_samples, METH_NOARGS,
     "samples() -> [(time ns, tid, cpu, command name, stack id)] of the log"},
    {"sampled_comms", (PyCFunction)session_sampled_comms, METH_NOARGS,
     "sampled_comms() -> {pid: (its main thread's command name at its last logged sample, True), or its last "
     "sample's thread's (name, False)}"},
    {"stop", (PyCFunction)session_stop, METH_NOARGS,
     "stop(): end the sampling, every sample sent or batched into the log"},
    {"detach", (PyCFunction)session_detach, METH_NOARGS, "detach(): release the kernel objects, keep the log"},
    {"wait", (PyCFunction)session_wait, METH_O,
     "wait(timeout_ms): until the program asks for a process to load, at most timeout_ms"},
    {"counters", (PyCFunction)session_counters, METH_NOARGS, "counters() -> BPF_COUNTERS' values"},
    {"run_time", (PyCFunction)session_run_time, METH_NOARGS, "run_time() -> (ns, runs)"},
    {"close", (PyCFunction)session_close, METH_NOARGS, "close(): detach and free everything"},
    {NULL},
};

static PyGetSetDef session_getset[] = {
    {"table_bytes", (getter)session_table_bytes, NULL, "bytes of the table maps", NULL},
    {"slots_used", (getter)session_slots_used, NULL, "table slots holding loaded modules", NULL},
    {"slots_peak", (getter)session_slots_peak, NULL, "the most table slots loaded modules held at once", NULL},
    {"slot_capacity", (getter)session_slot_capacity, NULL, "the table slots now (the map's and its segments')",
     NULL},
    {"evicted_in_use", (getter)session_evicted_in_use, NULL,
     "modules evicted while a loaded process mapped them (their frames end table_evicted until it is reloaded)", NULL},
    {"logged", (getter)session_logged, NULL, "samples in the log", NULL},
    {"unlogged", (getter)session_unlogged, NULL, "samples past the log's bound (counted by stack only)", NULL},
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
        [FU_BPF_NOT_LOADED] = "not_loaded",
        [FU_BPF_EXPRESSION_ERROR] = "expression_error",
        [FU_BPF_MAPPINGS_LEFT_OUT] = "mappings_left_out",
        [FU_BPF_TABLE_EVICTED] = "table_evicted",
    };
    return names[outcome];
}

static const char *counter_name(int counter)
{
    static const char *const names[FU_BPF_COUNTER_OUTCOME] = {
        [FU_BPF_COUNTER_SAMPLES] = "samples",
        [FU_BPF_COUNTER_FRAMES] = "frames",
        [FU_BPF_COUNTER_FP_FRAMES] = "frame_pointer_frames",
        [FU_BPF_COUNTER_SAMPLES_DROPPED] = "samples_dropped",
        [FU_BPF_COUNTER_WALK_NS] = "walk_ns",
        [FU_BPF_COUNTER_WALKED_SAMPLES] = "walked_samples",
        [FU_BPF_COUNTER_STACK_READS] = "stack_reads",
        [FU_BPF_COUNTER_SLOT_LOOKUPS] = "slot_lookups",
        [FU_BPF_COUNTER_EXTRA_LOOKUPS] = "extra_lookups",
        [FU_BPF_COUNTER_MAPPING_SEARCHES] = "mapping_searches",
        [FU_BPF_COUNTER_DERIVED_FRAMES] = "derived_frames",
        [FU_BPF_COUNTER_FRAMES_SQUARED] = "frames_squared",
        [FU_BPF_COUNTER_WALK_NS_BY_FRAMES] = "walk_ns_by_frames",
        [FU_BPF_COUNTER_SAMPLE_NS] = "sample_ns",
        [FU_BPF_COUNTER_SAMPLE_NS_BY_FRAMES] = "sample_ns_by_frames",
        [FU_BPF_COUNTER_SPACE_CHANGED] = "space_changed",
        [FU_BPF_COUNTER_MEMO_FRAMES] = "memo_frames",
        [FU_BPF_COUNTER_MEMO_FRAMES_SQUARED] = "memo_frames_squared",
        [FU_BPF_COUNTER_MEMO_BY_FRAMES] = "memo_by_frames",
        [FU_BPF_COUNTER_WALK_NS_BY_MEMO] = "walk_ns_by_memo",
    };
    return names[counter];
}

static PyObject *bpf_slot_count(PyObject *module, PyObject *table)
{
    const fu_compact_table *t = py_core_payload(module, PY_COMPACT_TABLE, table);
    return t ? PyLong_FromUnsignedLongLong(fu_bpf_module_slot_count(t)) : NULL;
}

static PyMethodDef bpf_functions[] = {
    {"bpf_slot_count", (PyCFunction)bpf_slot_count, METH_O,
     "bpf_slot_count(table) -> the slots the CompactTable takes in the BPF table map"},
    {NULL},
};

int py_bpf_init(PyObject *module)
{
    if (py_core_add_type(module, PY_BPF_SESSION, &session_spec) < 0 ||
        PyModule_AddFunctions(module, bpf_functions) < 0 ||
        py_core_add_names(module, "BPF_OUTCOMES", FU_BPF_OUTCOME_COUNT, outcome_name) < 0 ||
        py_core_add_names(module, "BPF_COUNTERS", FU_BPF_COUNTER_OUTCOME, counter_name) < 0 ||
        PyModule_AddIntConstant(module, "BPF_MAX_FRAMES", FU_BPF_MAX_FRAMES) < 0 ||
        PyModule_AddIntConstant(module, "BPF_MAX_MAPPINGS", FU_BPF_MAX_MAPPINGS) < 0 ||
        PyModule_AddIntConstant(module, "BPF_DEFAULT_SLOTS", FU_BPF_DEFAULT_SLOTS) < 0 ||
        PyModule_AddIntConstant(module, "BPF_MAX_SLOTS", FU_BPF_MAX_SLOTS) < 0 ||
        PyModule_AddIntConstant(module, "BPF_SLOT_BYTES", sizeof(fu_bpf_block)) < 0 ||
        PyModule_AddIntConstant(module, "BPF_SEGMENT_SLOTS", FU_BPF_SEGMENT_SLOTS) < 0)
        return -1;
    return 0;
}
