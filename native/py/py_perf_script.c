/* The Python side of core/perf_script.c (which documents perf script's rules that it follows).
 *
 * symbolize_samples(perf_data, space_ids, comm_ids, comm_names, unwound, spaces, mappings,
 *                   kernel_symbols, outcome_names, srcline_fields=0) -> UnwoundSamples
 *   space_ids, comm_ids: bytes u32 per sample (replay_recording's); comm_names: [bytes]
 *   unwound: unwind_samples' result (outcomes, frame_starts, ips, modules, kinds, flags, walk_ns)
 *   spaces: [bytes u32]: per address space, the index in `mappings` of each of its mappings, in the
 *       order the walker's address space numbers them
 *   mappings: [(start, pgoff, bias, path: str, symbols[, srclines])]: symbols is None (no readable
 *       module) or a callable returning the module's SymbolTable or None, called once, when a frame
 *       needs it; srclines (with srcline_fields) the same for its SourceLines
 *   kernel_symbols: callable taking the distinct kernel addresses (bytes of u64) and returning the
 *       kernel's SymbolTable (for those addresses) or None; called once, if there are kernel frames
 *   outcome_names: 256 names (str) by outcome code
 *   srcline_fields: FU_UNWOUND_INLINE | FU_UNWOUND_SRCLINE (_core.UNWOUND_INLINE, UNWOUND_SRCLINE)
 *
 * UnwoundSamples methods: render(write) and folded(write) call write(bytes) with chunks of the
 * text (render also takes a file descriptor, written with write(2)); statistics(); sample(i) and frame(j) for the Python API.
 */
#include "py_core.h"

#include <limits.h>
#include <stdlib.h>

#include "intern.h"
#include "perf_data.h"
#include "perf_script.h"
#include "symbols.h"

/* A recording's samples, symbolized (core/perf_script.c), and the Python objects its names and
 * symbol tables live in. */
typedef struct UnwoundObject {
    py_core_object base; /* payload: &u once symbolize_samples made it whole */
    fu_unwound u;
    PyObject *perf_data, *comm_names, *outcome_names;
    fu_text *comm_texts;       /* into comm_names' bytes */
    fu_text outcome_texts[FU_UNWOUND_OUTCOME_CODES]; /* into outcome_names' str (UTF-8) */
    fu_unwound_map *maps;
    PyObject **map_paths;      /* bytes, fs-encoded: maps[i].path points into them */
    PyObject **map_loaders;    /* callable or NULL (no module: no symbols) */
    PyObject **map_symbols;    /* the loaded SymbolTable, or NULL */
    PyObject **map_srcline_loaders; /* callable or NULL */
    PyObject **map_srclines;   /* the loaded SourceLines, or NULL */
    size_t map_count;
    PyObject *kernel_symbols;
} UnwoundObject;

static void unwound_dealloc(UnwoundObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    for (size_t i = 0; i < self->map_count; i++) {
        Py_XDECREF(self->map_paths[i]);
        Py_XDECREF(self->map_loaders[i]);
        Py_XDECREF(self->map_symbols[i]);
        Py_XDECREF(self->map_srcline_loaders[i]);
        Py_XDECREF(self->map_srclines[i]);
    }
    fu_unwound_free(&self->u);
    free(self->maps);
    free(self->map_paths);
    free(self->map_loaders);
    free(self->map_symbols);
    free(self->map_srcline_loaders);
    free(self->map_srclines);
    free(self->comm_texts);
    Py_XDECREF(self->kernel_symbols);
    Py_XDECREF(self->perf_data);
    Py_XDECREF(self->comm_names);
    Py_XDECREF(self->outcome_names);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* Call a loader once (with one argument, or none: NULL); its table (or None) is kept, checked to be
 * a SymbolTable. NULL for none; with *failed set if an exception is raised. */
static const fu_symbol_table *load_symbols(UnwoundObject *self, PyObject *loader, PyObject *argument,
                                           PyObject **symbols, bool *failed)
{
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    PyObject *table = !module ? NULL : argument ? PyObject_CallOneArg(loader, argument) : PyObject_CallNoArgs(loader);
    *failed = table == NULL;
    if (!table || table == Py_None) {
        Py_XDECREF(table);
        return NULL;
    }
    const fu_symbol_table *payload = py_core_payload(module, PY_SYMBOL_TABLE, table);
    if (!payload) {
        Py_DECREF(table);
        *failed = true;
        return NULL;
    }
    *symbols = table;
    return payload;
}

/* fu_unwound_load_fn: a mapping's symbols, from its loader. */
static const fu_symbol_table *load_mapping(void *context, uint32_t mapping, bool *failed)
{
    UnwoundObject *self = context;
    return load_symbols(self, self->map_loaders[mapping], NULL, &self->map_symbols[mapping], failed);
}

/* fu_unwound_srcline_fn: a mapping's source lines, from its srcline loader (NULL: none). */
static fu_srcline_module *load_mapping_srclines(void *context, uint32_t mapping, bool *failed)
{
    UnwoundObject *self = context;
    PyObject *loader = self->map_srcline_loaders[mapping];
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    PyObject *lines = !module || !loader ? NULL : PyObject_CallNoArgs(loader);
    *failed = module == NULL || (loader && lines == NULL);
    if (!lines || lines == Py_None) {
        Py_XDECREF(lines);
        return NULL;
    }
    fu_srcline_module *payload = py_core_payload(module, PY_SOURCE_LINES, lines);
    if (!payload) {
        Py_DECREF(lines);
        *failed = true;
        return NULL;
    }
    self->map_srclines[mapping] = lines;
    return payload;
}

/* The kernel frames' symbols: the loader gets their addresses (bytes of u64) and is called only if
 * there are any. False with an exception set. */
static bool kernel_symbols(UnwoundObject *self, PyObject *loader)
{
    size_t n = fu_unwound_kernel_addresses(&self->u, NULL);
    if (!n)
        return true; /* not paid without kernel frames */
    PyObject *addresses = PyBytes_FromStringAndSize(NULL, 8 * (Py_ssize_t)n);
    if (!addresses)
        return false;
    fu_unwound_kernel_addresses(&self->u, (uint64_t *)(void *)PyBytes_AS_STRING(addresses));
    bool failed;
    const fu_symbol_table *table = load_symbols(self, loader, addresses, &self->kernel_symbols, &failed);
    Py_DECREF(addresses);
    if (!failed)
        fu_unwound_set_kernel_symbols(&self->u, table);
    return !failed;
}

static bool read_maps(UnwoundObject *self, PyObject *mappings)
{
    PyObject *seq = PySequence_Fast(mappings, "mappings must be a list of (start, pgoff, bias, path, symbols)");
    if (!seq)
        return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    bool ok = n < (Py_ssize_t)FU_UNWOUND_MAPPING_KERNEL && (self->maps = calloc((size_t)n + 1, sizeof *self->maps)) &&
              (self->map_paths = calloc((size_t)n + 1, sizeof *self->map_paths)) &&
              (self->map_loaders = calloc((size_t)n + 1, sizeof *self->map_loaders)) &&
              (self->map_symbols = calloc((size_t)n + 1, sizeof *self->map_symbols)) &&
              (self->map_srcline_loaders = calloc((size_t)n + 1, sizeof *self->map_srcline_loaders)) &&
              (self->map_srclines = calloc((size_t)n + 1, sizeof *self->map_srclines));
    if (!ok)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        fu_unwound_map *m = &self->maps[i];
        unsigned long long start, pgoff;
        long long bias;
        PyObject *path, *loader, *srcline_loader = Py_None;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KKLOO|O", &start, &pgoff, &bias, &path, &loader,
                              &srcline_loader) &&
             (self->map_paths[i] = PyUnicode_EncodeFSDefault(path)) != NULL;
        if (ok)
            self->map_count = (size_t)i + 1; /* dealloc releases what it holds */
        if (ok && ((loader != Py_None && !PyCallable_Check(loader)) ||
                   (srcline_loader != Py_None && !PyCallable_Check(srcline_loader)))) {
            PyErr_SetString(PyExc_TypeError, "a mapping's symbols and source lines must be None or a callable");
            ok = false;
        }
        if (ok) {
            m->start = start;
            m->pgoff = pgoff;
            m->bias = bias;
            m->path = (fu_text){PyBytes_AS_STRING(self->map_paths[i]), (size_t)PyBytes_GET_SIZE(self->map_paths[i])};
            m->has_symbols = loader != Py_None;
            self->map_loaders[i] = loader == Py_None ? NULL : Py_NewRef(loader);
            m->has_srclines = srcline_loader != Py_None;
            self->map_srcline_loaders[i] = srcline_loader == Py_None ? NULL : Py_NewRef(srcline_loader);
        }
    }
    Py_DECREF(seq);
    return ok;
}

/* The spaces' mapping lists (the list owner keeps the bytes alive), checked against the mappings. */
static fu_unwound_space *read_spaces(PyObject *spaces, size_t map_count, Py_ssize_t *count)
{
    PyObject *seq = PySequence_Fast(spaces, "spaces must be a list of bytes");
    if (!seq)
        return NULL;
    *count = PySequence_Fast_GET_SIZE(seq);
    fu_unwound_space *views = calloc((size_t)*count + 1, sizeof *views);
    if (!views) {
        PyErr_NoMemory();
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *count; i++) {
        PyObject *ids = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(ids) || PyBytes_GET_SIZE(ids) % 4) {
            PyErr_SetString(PyExc_TypeError, "a space must be bytes of u32 mapping indices");
            goto fail;
        }
        views[i].maps = (const uint32_t *)(const void *)PyBytes_AS_STRING(ids);
        views[i].count = (uint32_t)(PyBytes_GET_SIZE(ids) / 4);
        for (uint32_t k = 0; k < views[i].count; k++)
            if (views[i].maps[k] >= map_count) {
                PyErr_SetString(PyExc_ValueError, "a space names a mapping out of range");
                goto fail;
            }
    }
    Py_DECREF(seq);
    return views;
fail:
    free(views);
    Py_DECREF(seq);
    return NULL;
}

/* A core failure: the exception a callback raised, else the error's. */
static PyObject *raise_unless_set(const fu_error *err)
{
    return PyErr_Occurred() ? NULL : py_core_raise(err);
}

static PyObject *symbolize_samples(PyObject *module, PyObject *args)
{
    PyObject *perf_data, *comm_names, *unwound, *spaces, *mappings, *kernel_loader, *outcome_names;
    Py_buffer space_ids, comm_ids;
    unsigned int srcline_fields = 0;
    if (!PyArg_ParseTuple(args, "Oy*y*O!O!O!O!OO!|I", &perf_data, &space_ids, &comm_ids, &PyList_Type, &comm_names,
                          &PyTuple_Type, &unwound, &PyList_Type, &spaces, &PyList_Type, &mappings, &kernel_loader,
                          &PyTuple_Type, &outcome_names, &srcline_fields))
        return NULL;
    PyTypeObject *type = py_core_type(module, PY_UNWOUND_SAMPLES);
    UnwoundObject *self = (UnwoundObject *)type->tp_alloc(type, 0);
    fu_unwound_space *views = NULL;
    Py_ssize_t space_count = 0;
    Py_buffer columns[5] = {{0}};
    int held = 0;
    if (!self)
        goto fail;
    self->perf_data = Py_NewRef(perf_data);
    self->comm_names = PyList_AsTuple(comm_names); /* a tuple: its names cannot change under us */
    if (!self->comm_names)
        goto fail;
    self->outcome_names = Py_NewRef(outcome_names);
    const fu_perf_data *pd = py_core_payload(module, PY_PERF_DATA, perf_data);
    if (!pd)
        goto fail;
    self->u.samples = pd->samples;
    self->u.sample_count = pd->sample_count;
    self->u.attrs = pd->attrs;
    self->u.attr_count = pd->attr_count;
    self->u.srcline_fields = srcline_fields & (FU_UNWOUND_INLINE | FU_UNWOUND_SRCLINE);
    self->u.srcline_load = load_mapping_srclines;
    size_t n = self->u.sample_count;
    if (!PyCallable_Check(kernel_loader) || PyTuple_GET_SIZE(outcome_names) != FU_UNWOUND_OUTCOME_CODES) {
        PyErr_SetString(PyExc_TypeError, "kernel_symbols must be callable and outcome_names 256 names");
        goto fail;
    }
    if ((size_t)space_ids.len != 4 * n || (size_t)comm_ids.len != 4 * n) {
        PyErr_Format(PyExc_ValueError, "space_ids and comm_ids need 4 bytes for each of %zu samples", n);
        goto fail;
    }
    if (PyTuple_GET_SIZE(unwound) < 5) {
        PyErr_SetString(PyExc_ValueError, "unwound must be unwind_samples' result");
        goto fail;
    }
    for (held = 0; held < 5; held++)
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(unwound, held), &columns[held], PyBUF_SIMPLE) < 0)
            goto fail;
    size_t frames = (size_t)columns[2].len / 8;
    if ((size_t)columns[0].len != n || (size_t)columns[1].len != 4 * (n + 1) || (size_t)columns[3].len != 4 * frames ||
        (size_t)columns[4].len != frames) {
        PyErr_SetString(PyExc_ValueError, "unwound's columns do not match the samples");
        goto fail;
    }
    if (!read_maps(self, mappings) || !(views = read_spaces(spaces, self->map_count, &space_count)))
        goto fail;
    self->u.maps = self->maps;
    self->u.map_count = self->map_count;
    Py_ssize_t comm_count = PyTuple_GET_SIZE(self->comm_names);
    if (!(self->comm_texts = calloc((size_t)comm_count + 1, sizeof *self->comm_texts))) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < comm_count; i++) {
        PyObject *name = PyTuple_GET_ITEM(self->comm_names, i);
        /* a name that is not bytes is only an error where a sample names it */
        if (PyBytes_Check(name))
            self->comm_texts[i] = (fu_text){PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name)};
    }
    const uint32_t *sample_comms = comm_ids.buf;
    for (size_t i = 0; i < n; i++) {
        uint32_t id;
        memcpy(&id, &sample_comms[i], 4);
        if (id != FU_INTERN_NONE &&
            (id >= (uint64_t)comm_count || !PyBytes_Check(PyTuple_GET_ITEM(self->comm_names, id)))) {
            PyErr_SetString(PyExc_ValueError, "a comm id is out of range (or its name is not bytes)");
            goto fail;
        }
    }
    for (int code = 0; code < FU_UNWOUND_OUTCOME_CODES; code++) {
        Py_ssize_t len;
        const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(outcome_names, code), &len);
        if (!name)
            goto fail;
        self->outcome_texts[code] = (fu_text){name, (size_t)len};
    }
    self->u.comm_names = self->comm_texts;
    self->u.comm_count = (size_t)comm_count;
    self->u.outcome_names = self->outcome_texts;
    fu_unwound_columns cols = {columns[0].buf, columns[1].buf, columns[2].buf, columns[3].buf, columns[4].buf, frames};
    fu_error err = {0};
    bool failed;
    if (fu_unwound_build(&self->u, comm_ids.buf, space_ids.buf, views, (size_t)space_count, &cols, load_mapping, self,
                         &failed, &err) != FU_OK) {
        raise_unless_set(&err);
        goto fail;
    }
    if (!kernel_symbols(self, kernel_loader))
        goto fail;
    self->base.payload = &self->u;
    goto done;
fail:
    Py_CLEAR(self);
done:
    for (int i = 0; i < held; i++)
        PyBuffer_Release(&columns[i]);
    PyBuffer_Release(&space_ids);
    PyBuffer_Release(&comm_ids);
    free(views);
    return (PyObject *)self;
}

/* ---- output through write() ------------------------------------------------------------------------ */

/* render(write): perf script's text of every sample, in chunks of about 1 MiB */
/* render(write): write a callable taking bytes, or a file descriptor (an int) written directly */
static PyObject *unwound_render(UnwoundObject *self, PyObject *write)
{
    fu_error err = {0};
    fu_status status;
    if (PyLong_Check(write)) {
        long value = PyLong_AsLong(write);
        if (value == -1 && PyErr_Occurred())
            return NULL;
        if (value < 0 || value > INT_MAX)
            return PyErr_Format(PyExc_ValueError, "render(): %ld is not a file descriptor", value);
        int fd = (int)value;
        status = fu_unwound_render(&self->u, py_core_write_fd, &fd, &err);
    } else {
        status = fu_unwound_render(&self->u, py_core_write_chunk, write, &err);
    }
    if (status != FU_OK)
        return raise_unless_set(&err);
    Py_RETURN_NONE;
}

/* folded(write, by_count=True): see fu_unwound_folded */
static PyObject *unwound_folded(UnwoundObject *self, PyObject *args)
{
    PyObject *write;
    int by_count = 1;
    if (!PyArg_ParseTuple(args, "O|p", &write, &by_count))
        return NULL;
    fu_error err = {0};
    if (fu_unwound_folded(&self->u, by_count, py_core_write_chunk, write, &err) != FU_OK)
        return raise_unless_set(&err);
    Py_RETURN_NONE;
}

/* ---- statistics and the Python API ------------------------------------------------------------- */

/* statistics() -> (samples with user frames, user frames, {outcome code: samples},
 *                  {user frames per sample: samples}) */
static PyObject *unwound_statistics(UnwoundObject *self, PyObject *unused)
{
    uint64_t by_outcome[FU_UNWOUND_OUTCOME_CODES], unwound, frames, *by_depth;
    uint32_t deepest;
    if (!fu_unwound_statistics(&self->u, &unwound, &frames, by_outcome, &by_depth, &deepest))
        return PyErr_NoMemory();
    PyObject *outcomes = py_core_count_dict(by_outcome, FU_UNWOUND_OUTCOME_CODES);
    PyObject *depths = outcomes ? py_core_count_dict(by_depth, (size_t)deepest + 1) : NULL;
    free(by_depth);
    if (!depths) {
        Py_XDECREF(outcomes);
        return NULL;
    }
    return Py_BuildValue("(KKNN)", (unsigned long long)unwound, (unsigned long long)frames, outcomes, depths);
}

static PyObject *id_tuple(const uint32_t *ids, uint32_t from, uint32_t to)
{
    PyObject *t = PyTuple_New(to - from);
    for (uint32_t k = from; t && k < to; k++) {
        PyObject *v = PyLong_FromUnsignedLong(ids[k]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, k - from, v);
    }
    return t;
}

/* sample(i) -> (comm: bytes, pid, tid, time | None, outcome code, kernel frame ids, user frame ids) */
static PyObject *unwound_sample(UnwoundObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->u.sample_count, &i))
        return NULL;
    const fu_perf_sample *s = &self->u.samples[i];
    const char *comm;
    size_t comm_len;
    fu_unwound_comm(&self->u, i, &comm, &comm_len);
    PyObject *time = s->present & FU_PERF_SAMPLE_TIME ? PyLong_FromUnsignedLongLong(s->time) : Py_NewRef(Py_None);
    return Py_BuildValue("(y#iiNBNN)", comm, (Py_ssize_t)comm_len, (int)(int32_t)s->pid, (int)(int32_t)s->tid, time,
                         self->u.outcomes[i], id_tuple(self->u.frame_ids, self->u.bounds[2 * i], self->u.bounds[2 * i + 1]),
                         id_tuple(self->u.frame_ids, self->u.bounds[2 * i + 1], self->u.bounds[2 * i + 2]));
}

/* A Python int from a magnitude and a sign. */
static PyObject *int128_to_python(unsigned __int128 magnitude, bool negative)
{
    PyObject *value = PyLong_FromUnsignedLongLong((unsigned long long)magnitude);
    uint64_t high = (uint64_t)(magnitude >> 64);
    if (value && high) {
        PyObject *h = PyLong_FromUnsignedLongLong(high), *shift = PyLong_FromLong(64);
        PyObject *shifted = h && shift ? PyNumber_Lshift(h, shift) : NULL;
        PyObject *sum = shifted ? PyNumber_Or(shifted, value) : NULL;
        Py_XDECREF(h);
        Py_XDECREF(shift);
        Py_XDECREF(shifted);
        Py_SETREF(value, sum);
    }
    if (value && negative)
        Py_SETREF(value, PyNumber_Negative(value));
    return value;
}

/* frame(j) -> (address as printed, symbol | None, offset, dso) */
static PyObject *unwound_frame(UnwoundObject *self, PyObject *arg)
{
    size_t j;
    if (!py_core_index_arg(arg, self->u.frame_count, &j))
        return NULL;
    const fu_unwound_frame *f = &self->u.frames[j];
    const char *dso;
    size_t dso_len;
    fu_unwound_frame_dso(&self->u, f, &dso, &dso_len);
    PyObject *printed = int128_to_python(f->address, f->negative);
    PyObject *symbol = f->has_symbol ? PyUnicode_DecodeUTF8(f->name, f->name_len, "replace") : Py_NewRef(Py_None);
    PyObject *path = PyUnicode_DecodeFSDefaultAndSize(dso, (Py_ssize_t)dso_len);
    if (!printed || !symbol || !path) {
        Py_XDECREF(printed);
        Py_XDECREF(symbol);
        Py_XDECREF(path);
        return NULL;
    }
    return Py_BuildValue("(NNKN)", printed, symbol, (unsigned long long)(f->has_symbol ? f->offset : 0), path);
}

static PyObject *unwound_get(UnwoundObject *self, void *which)
{
    return PyLong_FromSize_t(which ? self->u.frame_count : self->u.sample_count);
}

static PyMethodDef unwound_methods[] = {
    {"render", (PyCFunction)unwound_render, METH_O, "render(write): perf script's text, in bytes chunks"},
    {"folded", (PyCFunction)unwound_folded, METH_VARARGS,
     "folded(write, by_count=True): collapsed stacks with counts, in bytes chunks (by_count False: in order of "
     "first appearance, for a stream's windows to be merged)"},
    {"statistics", (PyCFunction)unwound_statistics, METH_NOARGS,
     "statistics() -> (unwound samples, user frames, {outcome code: samples}, {depth: samples})"},
    {"sample", (PyCFunction)unwound_sample, METH_O,
     "sample(i) -> (comm, pid, tid, time, outcome code, kernel frame ids, user frame ids)"},
    {"frame", (PyCFunction)unwound_frame, METH_O, "frame(j) -> (address, symbol, offset, dso)"},
    {NULL},
};

static PyGetSetDef unwound_getset[] = {
    {"sample_count", (getter)unwound_get, NULL, "samples", NULL},
    {"frame_count", (getter)unwound_get, NULL, "distinct frames", (void *)1},
    {NULL},
};

static PyType_Slot unwound_slots[] = {
    {Py_tp_dealloc, unwound_dealloc},
    {Py_tp_methods, unwound_methods},
    {Py_tp_getset, unwound_getset},
    {Py_tp_doc, "A recording's samples, unwound and symbolized (see native/py/py_perf_script.c)."},
    {0, NULL},
};

static PyType_Spec unwound_spec = {
    .name = "fastunwind._core.UnwoundSamples",
    .basicsize = sizeof(UnwoundObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = unwound_slots,
};

/* ---- FoldedStacks: the folded stacks of a stream's windows, counted together (fu_folded) -------- */

typedef struct FoldedObject {
    PyObject_HEAD
    fu_folded f;
} FoldedObject;

static void folded_dealloc(FoldedObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_folded_free(&self->f);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* add(unwound): count an UnwoundSamples' stacks */
static PyObject *folded_add(FoldedObject *self, PyObject *unwound)
{
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    const fu_unwound *u = module ? py_core_payload(module, PY_UNWOUND_SAMPLES, unwound) : NULL;
    if (!u)
        return NULL;
    fu_error err = {0};
    if (fu_folded_add(&self->f, u, &err) != FU_OK)
        return py_core_raise(&err);
    Py_RETURN_NONE;
}

/* write(write): every stack counted so far, most frequent first, as bytes chunks */
static PyObject *folded_write(FoldedObject *self, PyObject *write)
{
    fu_error err = {0};
    if (fu_folded_write(&self->f, true, py_core_write_chunk, write, &err) != FU_OK)
        return raise_unless_set(&err);
    Py_RETURN_NONE;
}

static PyMethodDef folded_methods[] = {
    {"add", (PyCFunction)folded_add, METH_O, "add(unwound): count the stacks of an UnwoundSamples"},
    {"write", (PyCFunction)folded_write, METH_O,
     "write(write): the stacks counted so far, most frequent first (ties in order of first appearance)"},
    {NULL},
};

static PyType_Slot folded_slots[] = {
    {Py_tp_dealloc, folded_dealloc},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_methods, folded_methods},
    {Py_tp_doc, "FoldedStacks(): the folded stacks of several UnwoundSamples counted together (core/perf_script.h)."},
    {0, NULL},
};

static PyType_Spec folded_spec = {
    .name = "fastunwind._core.FoldedStacks",
    .basicsize = sizeof(FoldedObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = folded_slots,
};

static PyMethodDef perf_script_methods[] = {
    {"symbolize_samples", symbolize_samples, METH_VARARGS,
     "symbolize_samples(perf_data, space_ids, comm_ids, comm_names, unwound, spaces, mappings, kernel_symbols, "
     "outcome_names) -> UnwoundSamples; see native/py/py_perf_script.c"},
    {NULL},
};

int py_perf_script_init(PyObject *module)
{
    if (py_core_add_type(module, PY_UNWOUND_SAMPLES, &unwound_spec) < 0)
        return -1;
    PyObject *folded = PyType_FromModuleAndSpec(module, &folded_spec, NULL);
    if (!folded || PyModule_AddObject(module, "FoldedStacks", folded) < 0) {
        Py_XDECREF(folded);
        return -1;
    }
    if (PyModule_AddFunctions(module, perf_script_methods) < 0 ||
        PyModule_AddIntConstant(module, "UNWOUND_INLINE", FU_UNWOUND_INLINE) < 0 ||
        PyModule_AddIntConstant(module, "UNWOUND_SRCLINE", FU_UNWOUND_SRCLINE) < 0)
        return -1;
    return 0;
}
