/* The trace stage's binding: trace (native/core/trace.h), stepping with the GIL released.
 *
 * trace(path, argv, env, provide_module, max_steps=0, timeout=0.0, skip_unchecked=False)
 *   runs `path` (already resolved: no PATH search here) with argv and env (sequences of str) under
 *   ptrace. provide_module(start, end, offset, path) is called once per executable mapping the
 *   command maps (never per step) and returns None (no CFI there) or (bias, eh_frame, debug_frame,
 *   id, checked) with CfiTables or None. max_steps 0: TRACE_DEFAULT_MAX_STEPS; timeout in seconds,
 *   0: none. skip_unchecked: run through the modules not checked between breakpoints instead of
 *   stepping them (trace.h). Ctrl-C (a pending KeyboardInterrupt) kills the command and is raised.
 *   -> (outcome, exit_status, elapsed_ns, counts, modules, fdes, records):
 *      outcome: a name of TRACE_OUTCOMES; counts: {name: int} (trace.h fu_trace_counts);
 *      modules: [(start, end, bias, id, checked)];
 *      fdes: [(module, table, entry, pc_begin, pc_end, checked, disagreeing)] (table 0 .eh_frame,
 *      1 .debug_frame); records: [(fde, address, what, column, declared, truth)], what a name of
 *      TRACE_WHATS.
 * Raises TraceError when the command cannot be started or traced.
 */
#include "py_core.h"

#include "trace.h"

typedef struct trace_context {
    PyObject *module;
    PyObject *provider;
    PyObject *kept;       /* the provider's answers: their tables live as long as the trace */
    bool failed;          /* the provider raised: its exception is pending */
} trace_context;

static bool provide_module(void *opaque, const fu_trace_mapping *mapping, fu_trace_module *out)
{
    trace_context *context = opaque;
    PyGILState_STATE gil = PyGILState_Ensure();
    bool provided = false;
    if (context->failed)
        goto done;
    PyObject *answer = PyObject_CallFunction(context->provider, "KKKs", (unsigned long long)mapping->start,
                                             (unsigned long long)mapping->end, (unsigned long long)mapping->offset,
                                             mapping->path);
    if (!answer) {
        context->failed = true;
        goto done;
    }
    if (answer != Py_None) {
        unsigned long long bias;
        unsigned int id;
        int checked;
        PyObject *eh_frame, *debug_frame;
        if (!PyArg_ParseTuple(answer, "KOOIp", &bias, &eh_frame, &debug_frame, &id, &checked) ||
            PyList_Append(context->kept, answer) < 0) {
            context->failed = true;
        } else {
            out->bias = bias;
            out->eh_frame = eh_frame == Py_None ? NULL : py_core_payload(context->module, PY_CFI_TABLE, eh_frame);
            out->debug_frame =
                debug_frame == Py_None ? NULL : py_core_payload(context->module, PY_CFI_TABLE, debug_frame);
            context->failed = PyErr_Occurred() != NULL;
            out->id = id;
            out->checked = checked;
            provided = !context->failed;
        }
    }
    Py_DECREF(answer);
done:
    PyGILState_Release(gil);
    return provided;
}

/* Ctrl-C, or a provider that raised: stop. */
static bool should_stop(void *opaque)
{
    trace_context *context = opaque;
    PyGILState_STATE gil = PyGILState_Ensure();
    if (!context->failed && PyErr_CheckSignals() < 0)
        context->failed = true;
    bool stop = context->failed;
    PyGILState_Release(gil);
    return stop;
}

/* A NULL-terminated array of UTF-8 strings from a sequence of str; the bytes objects holding them
 * go into `holders`. */
static char **string_array(PyObject *sequence, PyObject *holders, const char *what)
{
    PyObject *seq = PySequence_Fast(sequence, what);
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    char **array = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    if (!array) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *encoded = PyUnicode_EncodeFSDefault(PySequence_Fast_GET_ITEM(seq, i));
        if (!encoded || PyList_Append(holders, encoded) < 0) {
            Py_XDECREF(encoded);
            Py_DECREF(seq);
            PyMem_Free(array);
            return NULL;
        }
        array[i] = PyBytes_AS_STRING(encoded);
        Py_DECREF(encoded);
    }
    Py_DECREF(seq);
    return array;
}

static PyObject *counts_of(const fu_trace_counts *c)
{
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsK}", "steps", (unsigned long long)c->steps, "checked",
        (unsigned long long)c->checked, "agreeing", (unsigned long long)c->agreeing, "disagreeing",
        (unsigned long long)c->disagreeing, "no_cfi", (unsigned long long)c->no_cfi, "unknown_truth",
        (unsigned long long)c->unknown_truth, "in_signal_handler", (unsigned long long)c->in_signal_handler,
        "signal_frames", (unsigned long long)c->signal_frames, "not_evaluable", (unsigned long long)c->not_evaluable,
        "unchecked_module", (unsigned long long)c->unchecked_module, "calls", (unsigned long long)c->calls,
        "returns", (unsigned long long)c->returns, "signals", (unsigned long long)c->signals, "handlers",
        (unsigned long long)c->handlers, "execs", (unsigned long long)c->execs, "max_depth",
        (unsigned long long)c->max_depth, "fdes_dropped_steps", (unsigned long long)c->fdes_dropped_steps,
        "records_dropped", (unsigned long long)c->records_dropped, "modules_dropped",
        (unsigned long long)c->modules_dropped, "runs", (unsigned long long)c->runs, "breakpoints",
        (unsigned long long)c->breakpoints, "threads_seen", (unsigned long long)c->threads_seen);
}

static const char *const WHAT_NAMES[FU_TRACE_WHAT_COUNT] = {"cfa", "ra", "register"};

static PyObject *result_of(const fu_trace_result *r)
{
    PyObject *modules = PyList_New(r->module_count), *fdes = PyList_New(r->fde_count),
             *records = PyList_New(r->record_count), *counts = counts_of(&r->counts);
    if (!modules || !fdes || !records || !counts)
        goto fail;
    for (uint32_t i = 0; i < r->module_count; i++) {
        const fu_trace_module *m = &r->modules[i];
        PyObject *item = Py_BuildValue("(KKKIO)", (unsigned long long)m->start, (unsigned long long)m->end,
                                       (unsigned long long)m->bias, m->id, m->checked ? Py_True : Py_False);
        if (!item)
            goto fail;
        PyList_SET_ITEM(modules, i, item);
    }
    for (uint32_t i = 0; i < r->fde_count; i++) {
        const fu_trace_fde *f = &r->fdes[i];
        PyObject *item = Py_BuildValue("(IIIKKKK)", f->module, f->table, f->entry, (unsigned long long)f->pc_begin,
                                       (unsigned long long)f->pc_end, (unsigned long long)f->checked,
                                       (unsigned long long)f->disagreeing);
        if (!item)
            goto fail;
        PyList_SET_ITEM(fdes, i, item);
    }
    for (uint32_t i = 0; i < r->record_count; i++) {
        const fu_trace_record *e = &r->records[i];
        PyObject *item = Py_BuildValue("(IKsIKK)", e->fde, (unsigned long long)e->address,
                                       e->what < FU_TRACE_WHAT_COUNT ? WHAT_NAMES[e->what] : "?", (unsigned)e->column,
                                       (unsigned long long)e->declared, (unsigned long long)e->truth);
        if (!item)
            goto fail;
        PyList_SET_ITEM(records, i, item);
    }
    return Py_BuildValue("(siKNNNN)", fu_trace_outcome_name(r->outcome), r->exit_status,
                         (unsigned long long)r->elapsed_ns, counts, modules, fdes, records);
fail:
    Py_XDECREF(modules);
    Py_XDECREF(fdes);
    Py_XDECREF(records);
    Py_XDECREF(counts);
    return NULL;
}

static PyObject *trace(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"path", "argv", "env", "provide_module", "max_steps", "timeout", "skip_unchecked", NULL};
    PyObject *path_object, *argv_object, *env_object, *provider, *result = NULL;
    unsigned long long max_steps = 0;
    double timeout = 0;
    int skip_unchecked = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&OOO|Kdp", kwlist, PyUnicode_FSConverter, &path_object,
                                     &argv_object, &env_object, &provider, &max_steps, &timeout, &skip_unchecked))
        return NULL;
    trace_context context = {module, provider, PyList_New(0), false};
    PyObject *holders = PyList_New(0);
    char **argv = NULL, **envp = NULL;
    if (!context.kept || !holders)
        goto cleanup;
    if (!PyCallable_Check(provider)) {
        PyErr_SetString(PyExc_TypeError, "provide_module must be callable");
        goto cleanup;
    }
    if (timeout < 0 || timeout > 1e9) {
        PyErr_Format(PyExc_ValueError, "timeout %g s out of range", timeout);
        goto cleanup;
    }
    argv = string_array(argv_object, holders, "argv must be a sequence of str");
    envp = argv ? string_array(env_object, holders, "env must be a sequence of str") : NULL;
    if (!envp)
        goto cleanup;
    if (!argv[0]) {
        PyErr_SetString(PyExc_ValueError, "argv must not be empty");
        goto cleanup;
    }
    fu_trace_options options = {max_steps, (uint64_t)(timeout * 1e9), skip_unchecked != 0};
    fu_trace_callbacks callbacks = {provide_module, should_stop, &context};
    fu_trace_result trace_result;
    fu_error err;
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_trace_run(PyBytes_AS_STRING(path_object), argv, envp, &options, &callbacks, &trace_result, &err);
    Py_END_ALLOW_THREADS
    if (status) {
        if (!context.failed)
            py_core_raise(&err);
        goto cleanup;
    }
    if (!context.failed)
        result = result_of(&trace_result);
    fu_trace_result_free(&trace_result);
cleanup:
    PyMem_Free(argv);
    PyMem_Free(envp);
    Py_XDECREF(holders);
    Py_XDECREF(context.kept);
    Py_DECREF(path_object);
    return result;
}

static PyMethodDef trace_functions[] = {
    {"trace", (PyCFunction)(void (*)(void))trace, METH_VARARGS | METH_KEYWORDS,
     "trace(path, argv, env, provide_module, max_steps=0, timeout=0.0, skip_unchecked=False) -> "
     "(outcome, exit_status, elapsed_ns, counts, modules, fdes, records)"},
    {NULL},
};

static const char *outcome_name(int outcome) { return fu_trace_outcome_name(outcome); }
static const char *what_name(int what) { return WHAT_NAMES[what]; }

int py_trace_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, trace_functions) < 0 ||
        PyModule_AddIntConstant(module, "TRACE_DEFAULT_MAX_STEPS", FU_TRACE_DEFAULT_MAX_STEPS) < 0 ||
        PyModule_AddIntConstant(module, "TRACE_MAX_DEPTH", FU_TRACE_MAX_DEPTH) < 0 ||
        PyModule_AddIntConstant(module, "TRACE_RECORDS_PER_FDE", FU_TRACE_RECORDS_PER_FDE) < 0 ||
        py_core_add_names(module, "TRACE_OUTCOMES", FU_TRACE_OUTCOME_COUNT, outcome_name) < 0 ||
        py_core_add_names(module, "TRACE_WHATS", FU_TRACE_WHAT_COUNT, what_name) < 0)
        return -1;
    return 0;
}
