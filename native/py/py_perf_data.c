/* fastunwind._core.PerfData: the Python type over the perf.data reader (core/perf_data.c).
 *
 * PerfData(buffer, max_decompressed=0) parses a whole recording with the GIL released and keeps the
 * buffer (bytes, mmap, ...) pinned: samples point into it. The Python API (fastunwind.perf_data)
 * builds dataclasses from the per-record accessors below; bulk columns leave as packed bytes; C code
 * elsewhere in the extension reads the parsed reader (fu_perf_data) as the object's py_core payload.
 * Errors are raised as fastunwind.errors.PerfDataError (FU_ERR_PERF_DATA in core/error.h's table; the
 * class is also the module attribute _core.PerfDataError).
 */
#include "py_core.h" /* Python.h first */

#include "perf_data.h"

/* One type, three roles: a whole recording (`view`: its bytes); a stream (`stream`; `pd` holds the
 * header and the queued records); a window of a stream (`owner`: the stream object, whose bytes the
 * window's samples point into; `pd` holds the window's records and lends the stream's header). */
typedef struct PerfDataObject {
    py_core_object base; /* payload: &pd once parsed */
    fu_perf_data pd;
    Py_buffer view;
    bool parsed;
    fu_perf_stream *stream;
    PyObject *owner;
} PerfDataObject;

/* A stream's header may change while its next window is cut ahead: wait for that first. */
static void settle(PerfDataObject *self)
{
    PerfDataObject *stream = self->owner ? (PerfDataObject *)self->owner : self;
    if (stream->stream) {
        Py_BEGIN_ALLOW_THREADS
        fu_perf_stream_wait(stream->stream);
        Py_END_ALLOW_THREADS
    }
}

static void perf_dealloc(PerfDataObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    fu_perf_stream_wait(self->stream); /* before pd, which its thread writes */
    if (self->parsed)
        fu_perf_data_free(&self->pd);
    fu_perf_stream_free(self->stream); /* after pd, which points into its bytes */
    Py_XDECREF(self->owner);
    if (self->view.obj)
        PyBuffer_Release(&self->view);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static int perf_init(PerfDataObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "max_decompressed", NULL};
    unsigned long long max_decompressed = 0;
    if (self->parsed || self->view.obj) {
        PyErr_SetString(PyExc_RuntimeError, "PerfData is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|K", kwlist, &self->view, &max_decompressed))
        return -1;
    fu_perf_options options = {.max_decompressed = max_decompressed};
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_perf_data_parse(&self->pd, self->view.buf, (uint64_t)self->view.len, &options, &err);
    Py_END_ALLOW_THREADS
    self->parsed = true; /* the partial state is freeable either way */
    if (status != FU_OK) {
        py_core_raise(&err);
        return -1;
    }
    self->base.payload = &self->pd;
    return 0;
}

/* PerfData.open_stream(fd, window_bytes=0, max_decompressed=0): a recording read window by window
 * from a file descriptor (perf_data.h, "Streaming"); the header is decoded now. */
static PyObject *perf_open_stream(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"fd", "window_bytes", "max_decompressed", "decode_ahead", "executable_mmaps_only",
                             NULL};
    int fd, decode_ahead = 0, executable_mmaps_only = 0;
    unsigned long long window_bytes = 0, max_decompressed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|KKpp", kwlist, &fd, &window_bytes, &max_decompressed,
                                     &decode_ahead, &executable_mmaps_only))
        return NULL;
    PerfDataObject *self = (PerfDataObject *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    if (!self)
        return NULL;
    fu_perf_options options = {.max_decompressed = max_decompressed};
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_perf_stream_open(&self->stream, &self->pd, fd, window_bytes, &options, &err);
    Py_END_ALLOW_THREADS
    self->parsed = true;
    if (status != FU_OK) {
        py_core_raise(&err);
        Py_DECREF(self);
        return NULL;
    }
    self->base.payload = &self->pd;
    fu_perf_stream_decode_ahead(self->stream, decode_ahead);
    fu_perf_stream_executable_mmaps_only(self->stream, executable_mmaps_only);
    return (PyObject *)self;
}

/* check_unchanged(): FileChangedError if the stream's mapped file was truncated since it was opened;
 * nothing for a PerfData that is no stream (its buffer is the caller's to check). */
static PyObject *perf_check_unchanged(PerfDataObject *self, PyObject *unused)
{
    (void)unused;
    fu_error err = {0};
    if (self->stream && fu_perf_stream_check(self->stream, &err) != FU_OK)
        return py_core_raise(&err);
    Py_RETURN_NONE;
}

/* next_window() -> PerfData of the next window's records in time order, or None at the end. The
 * previous window's samples must not be read any more (their bytes are given back). */
static PyObject *perf_next_window(PerfDataObject *self, PyObject *unused)
{
    if (!self->stream) {
        PyErr_SetString(PyExc_TypeError, "next_window() needs a PerfData made by open_stream()");
        return NULL;
    }
    PerfDataObject *window = (PerfDataObject *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
    if (!window)
        return NULL;
    fu_error err = {0};
    fu_status status;
    bool done = false;
    Py_BEGIN_ALLOW_THREADS
    status = fu_perf_stream_next(self->stream, &window->pd, &done, &err);
    Py_END_ALLOW_THREADS
    window->parsed = true;
    window->owner = Py_NewRef(self);
    if (status != FU_OK || done) {
        Py_DECREF(window);
        if (status != FU_OK) {
            py_core_raise(&err);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    window->base.payload = &window->pd;
    return (PyObject *)window;
}

/* ---- helpers ----------------------------------------------------------------------------------- */

static PyObject *bytes_of(const char *s, uint32_t len)
{
    return PyBytes_FromStringAndSize(s ? s : "", s ? (Py_ssize_t)len : 0);
}

static PyObject *signed32(uint32_t v) { return PyLong_FromLong((long)(int32_t)v); }

static PyObject *time_or_none(const fu_perf_sample_id *sid)
{
    if (sid->present & FU_PERF_SAMPLE_TIME)
        return PyLong_FromUnsignedLongLong(sid->time);
    Py_RETURN_NONE;
}

/* u64 values that may be unaligned, as a tuple of ints. */
static PyObject *u64_tuple(const uint8_t *p, uint64_t n)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (!t)
        return NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, p + 8 * i, 8);
        PyObject *o = PyLong_FromUnsignedLongLong(v);
        if (!o) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, o);
    }
    return t;
}

/* ---- accessors --------------------------------------------------------------------------------- */

static PyObject *perf_attrs(PerfDataObject *self, PyObject *unused)
{
    settle(self);
    PyObject *list = PyList_New(self->pd.attr_count);
    if (!list)
        return NULL;
    for (uint32_t i = 0; i < self->pd.attr_count; i++) {
        const fu_perf_attr *a = &self->pd.attrs[i];
        PyObject *ids = PyTuple_New((Py_ssize_t)a->id_count);
        if (!ids) {
            Py_DECREF(list);
            return NULL;
        }
        for (uint64_t j = 0; j < a->id_count; j++)
            PyTuple_SET_ITEM(ids, (Py_ssize_t)j, PyLong_FromUnsignedLongLong(a->ids[j]));
        /* the event's name from HEADER_EVENT_DESC: bytes from the file, not necessarily UTF-8 */
        PyObject *name = a->name ? PyUnicode_DecodeUTF8(a->name, (Py_ssize_t)strlen(a->name), "backslashreplace")
                                 : Py_NewRef(Py_None);
        if (!name) {
            Py_DECREF(ids);
            Py_DECREF(list);
            return NULL;
        }
        PyObject *d = Py_BuildValue(
            "{s:I,s:I,s:K,s:K,s:K,s:K,s:K,s:I,s:I,s:K,s:K,s:K,s:K,s:I,s:i,s:K,s:I,s:H,s:I,s:K,s:K,s:O,s:O,"
            "s:N,s:N,s:K}",
            "type", a->type, "size", a->size, "config", (unsigned long long)a->config,
            "sample_period", (unsigned long long)a->sample_period, "sample_type",
            (unsigned long long)a->sample_type, "read_format", (unsigned long long)a->read_format, "flags",
            (unsigned long long)a->flags, "wakeup_events", a->wakeup_events, "bp_type", a->bp_type, "config1",
            (unsigned long long)a->config1, "config2", (unsigned long long)a->config2, "branch_sample_type",
            (unsigned long long)a->branch_sample_type, "sample_regs_user",
            (unsigned long long)a->sample_regs_user, "sample_stack_user", a->sample_stack_user, "clockid",
            (int)a->clockid, "sample_regs_intr", (unsigned long long)a->sample_regs_intr, "aux_watermark",
            a->aux_watermark, "sample_max_stack", a->sample_max_stack, "aux_sample_size", a->aux_sample_size,
            "sig_data", (unsigned long long)a->sig_data, "config3", (unsigned long long)a->config3, "freq",
            a->freq ? Py_True : Py_False, "sample_id_all", a->sample_id_all ? Py_True : Py_False, "ids", ids,
            "name", name, "file_offset", (unsigned long long)a->file_offset);
        if (!d) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

static PyObject *perf_build_ids(PerfDataObject *self, PyObject *unused)
{
    settle(self);
    PyObject *list = PyList_New((Py_ssize_t)self->pd.build_id_count);
    if (!list)
        return NULL;
    for (size_t i = 0; i < self->pd.build_id_count; i++) {
        const fu_perf_build_id *b = &self->pd.build_ids[i];
        PyObject *t = Py_BuildValue("(iy#NHK)", (int)b->pid, (const char *)b->build_id, (Py_ssize_t)b->size,
                                    bytes_of(b->filename, b->filename_len), b->misc,
                                    (unsigned long long)b->file_offset);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *perf_cmdline(PerfDataObject *self, PyObject *unused)
{
    settle(self);
    PyObject *list = PyList_New(self->pd.cmdline_count);
    if (!list)
        return NULL;
    for (uint32_t i = 0; i < self->pd.cmdline_count; i++) {
        PyObject *b = bytes_of(self->pd.cmdline[i].data, self->pd.cmdline[i].len);
        if (!b) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, b);
    }
    return list;
}

static PyObject *perf_stats(PerfDataObject *self, PyObject *unused)
{
    settle(self);
    const fu_perf_stats *s = &self->pd.stats;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:I,s:I,s:K}", "records", (unsigned long long)s->records,
                         "compressed_records", (unsigned long long)s->compressed_records, "decompressed_bytes",
                         (unsigned long long)s->decompressed_bytes, "skipped_records",
                         (unsigned long long)s->skipped_records, "lost", (unsigned long long)s->lost,
                         "finished_rounds", (unsigned long long)s->finished_rounds, "feature_bits_low",
                         (unsigned long long)self->pd.feature_bits[0], "compression_type",
                         self->pd.compression_type, "compression_mmap_len", self->pd.compression_mmap_len,
                         "out_of_order", (unsigned long long)(self->stream ? fu_perf_stream_out_of_order(self->stream)
                                                                             : 0));
}

/* cut() -> None for a whole recording, else (note: str, missing feature bits: tuple of int,
 * dropped record's file offset or None): see fu_perf_cut */
static PyObject *perf_cut(PerfDataObject *self, PyObject *unused)
{
    const fu_perf_cut *cut = &self->pd.cut;
    if (!cut->note[0])
        Py_RETURN_NONE;
    PyObject *bits = PyList_New(0);
    for (unsigned bit = 0; bits && bit < FU_PERF_HEADER_FEAT_BITS; bit++) {
        if (!(cut->missing_features[bit / 64] >> (bit % 64) & 1))
            continue;
        PyObject *v = PyLong_FromUnsignedLong(bit);
        if (!v || PyList_Append(bits, v) < 0)
            Py_CLEAR(bits);
        Py_XDECREF(v);
    }
    if (!bits)
        return NULL;
    PyObject *missing = PyList_AsTuple(bits);
    Py_DECREF(bits);
    PyObject *dropped = cut->dropped_present ? PyLong_FromUnsignedLongLong(cut->dropped_offset) : Py_NewRef(Py_None);
    if (!missing || !dropped) {
        Py_XDECREF(missing);
        Py_XDECREF(dropped);
        return NULL;
    }
    return Py_BuildValue("(sNN)", cut->note, missing, dropped);
}

/* events() -> (kinds: bytes, one u8 per event; indices: bytes, one native u32 per event) */
static PyObject *perf_events(PerfDataObject *self, PyObject *unused)
{
    size_t n = self->pd.event_count;
    PyObject *kinds = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    PyObject *indices = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 4));
    if (!kinds || !indices) {
        Py_XDECREF(kinds);
        Py_XDECREF(indices);
        return NULL;
    }
    uint8_t *k = (uint8_t *)PyBytes_AS_STRING(kinds);
    uint32_t *x = (uint32_t *)(void *)PyBytes_AS_STRING(indices);
    for (size_t i = 0; i < n; i++) {
        k[i] = self->pd.events[i].kind;
        x[i] = self->pd.events[i].index;
    }
    return Py_BuildValue("(NN)", kinds, indices);
}

/* mmap(i) -> (pid, tid, start, length, pgoff, filename, build_id|None, prot, flags, maj, min, ino,
 *            ino_generation, time|None, is_mmap2, misc, cpu, file_offset) */
static PyObject *perf_mmap(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.mmap_count, &i))
        return NULL;
    const fu_perf_mmap *m = &self->pd.mmaps[i];
    PyObject *build_id;
    if (m->has_build_id)
        build_id = PyBytes_FromStringAndSize((const char *)m->build_id, m->build_id_size);
    else
        build_id = Py_NewRef(Py_None);
    return Py_BuildValue("(NNKKKNNIIIIKKNOHNK)", signed32(m->pid), signed32(m->tid), (unsigned long long)m->start,
                         (unsigned long long)m->length, (unsigned long long)m->pgoff,
                         bytes_of(m->filename, m->filename_len), build_id, m->prot, m->flags, m->maj, m->min,
                         (unsigned long long)m->ino, (unsigned long long)m->ino_generation,
                         time_or_none(&m->sample_id), m->is_mmap2 ? Py_True : Py_False, m->misc,
                         signed32(m->sample_id.cpu), (unsigned long long)m->file_offset);
}

/* comm(i) -> (pid, tid, comm, exec, time|None, misc, file_offset) */
static PyObject *perf_comm(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.comm_count, &i))
        return NULL;
    const fu_perf_comm *c = &self->pd.comms[i];
    return Py_BuildValue("(NNNONHK)", signed32(c->pid), signed32(c->tid), bytes_of(c->comm, c->comm_len),
                         c->exec ? Py_True : Py_False, time_or_none(&c->sample_id), c->misc,
                         (unsigned long long)c->file_offset);
}

/* task(i) -> (pid, ppid, tid, ptid, record_time, sample_time|None, is_exit, file_offset) */
static PyObject *perf_task(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.task_count, &i))
        return NULL;
    const fu_perf_task *t = &self->pd.tasks[i];
    return Py_BuildValue("(NNNNKNOK)", signed32(t->pid), signed32(t->ppid), signed32(t->tid), signed32(t->ptid),
                         (unsigned long long)t->time, time_or_none(&t->sample_id), t->is_exit ? Py_True : Py_False,
                         (unsigned long long)t->file_offset);
}

/* sample(i) -> (pid, tid, time|None, ip, cpu, period, attr_index, misc, sample_type, id, addr,
 *              stream_id, callchain_count, stack_size, file_offset) */
static PyObject *perf_sample(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.sample_count, &i))
        return NULL;
    const fu_perf_sample *s = &self->pd.samples[i];
    PyObject *time = (s->present & FU_PERF_SAMPLE_TIME) ? PyLong_FromUnsignedLongLong(s->time)
                                                        : Py_NewRef(Py_None);
    return Py_BuildValue("(NNNKNKIHKKKKKKK)", signed32(s->pid), signed32(s->tid), time, (unsigned long long)s->ip,
                         signed32(s->cpu), (unsigned long long)s->period, s->attr_index, s->misc,
                         (unsigned long long)s->present, (unsigned long long)s->id, (unsigned long long)s->addr,
                         (unsigned long long)s->stream_id, (unsigned long long)s->callchain_count,
                         (unsigned long long)s->stack_size, (unsigned long long)s->file_offset);
}

static PyObject *perf_sample_callchain(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.sample_count, &i))
        return NULL;
    const fu_perf_sample *s = &self->pd.samples[i];
    return u64_tuple((const uint8_t *)s->callchain, s->callchain ? s->callchain_count : 0);
}

/* sample_stack(i) -> bytes: the valid part (dyn_size) of the user stack dump */
static PyObject *perf_sample_stack(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.sample_count, &i))
        return NULL;
    const fu_perf_sample *s = &self->pd.samples[i];
    return bytes_of((const char *)s->stack, (uint32_t)(s->stack ? s->stack_size : 0));
}

/* sample_regs(i) -> (abi, mask, values tuple) for REGS_USER */
static PyObject *perf_sample_regs(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.sample_count, &i))
        return NULL;
    const fu_perf_sample *s = &self->pd.samples[i];
    uint64_t n = s->regs ? (uint64_t)__builtin_popcountll(s->regs_mask) : 0;
    return Py_BuildValue("(KKN)", (unsigned long long)s->regs_abi, (unsigned long long)s->regs_mask,
                         u64_tuple(s->regs, n));
}

/* sample_reg(i, reg) -> int | None, through fu_perf_sample_reg */
static PyObject *perf_sample_reg(PerfDataObject *self, PyObject *args)
{
    Py_ssize_t i;
    unsigned int reg;
    if (!PyArg_ParseTuple(args, "nI", &i, &reg))
        return NULL;
    if (i < 0 || (size_t)i >= self->pd.sample_count)
        return PyErr_Format(PyExc_IndexError, "index %zd out of range", i);
    uint64_t v;
    if (!fu_perf_sample_reg(&self->pd.samples[i], reg, &v))
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(v);
}

/* sample_extra(i) -> dict of the remaining fields (read, raw, branches, weight, ...) */
static PyObject *perf_sample_extra(PerfDataObject *self, PyObject *arg)
{
    size_t i;
    if (!py_core_index_arg(arg, self->pd.sample_count, &i))
        return NULL;
    const fu_perf_sample *s = &self->pd.samples[i];
    PyObject *branches = u64_tuple(s->branches, s->branch_count * 3);
    PyObject *counters = u64_tuple(s->branch_counters, s->branch_counters ? s->branch_count : 0);
    uint64_t intr_n = s->intr_regs ? (uint64_t)__builtin_popcountll(s->intr_regs_mask) : 0;
    PyObject *intr = u64_tuple(s->intr_regs, intr_n);
    PyObject *read = u64_tuple(s->read, s->read ? s->read_size / 8 : 0);
    if (!branches || !counters || !intr || !read) {
        Py_XDECREF(branches);
        Py_XDECREF(counters);
        Py_XDECREF(intr);
        Py_XDECREF(read);
        return NULL;
    }
    return Py_BuildValue(
        "{s:N,s:K,s:K,s:K,s:K,s:N,s:N,s:K,s:N,s:N,s:K,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:I}",
        "read", read, "read_format", (unsigned long long)s->read_format, "read_value_count",
        (unsigned long long)s->read_value_count, "time_enabled", (unsigned long long)s->time_enabled,
        "time_running", (unsigned long long)s->time_running, "raw", bytes_of((const char *)s->raw, s->raw_size),
        "branches", branches, "branch_hw_index", (unsigned long long)s->branch_hw_index, "branch_counters",
        counters, "stack_dump", bytes_of((const char *)s->stack, (uint32_t)(s->stack ? s->stack_dump_size : 0)),
        "stack_dump_size", (unsigned long long)s->stack_dump_size, "weight", (unsigned long long)s->weight,
        "data_src", (unsigned long long)s->data_src, "transaction", (unsigned long long)s->transaction,
        "intr_regs_abi", (unsigned long long)s->intr_regs_abi, "intr_regs", intr, "intr_regs_mask",
        (unsigned long long)s->intr_regs_mask, "phys_addr", (unsigned long long)s->phys_addr, "cgroup",
        (unsigned long long)s->cgroup, "data_page_size", (unsigned long long)s->data_page_size, "aux",
        bytes_of((const char *)s->aux, (uint32_t)(s->aux ? s->aux_size : 0)), "code_page_size",
        (unsigned long long)s->code_page_size, "regs_abi", (unsigned long long)s->regs_abi, "compressed",
        s->compressed);
}

/* sample_column(name) -> bytes of native u64, one per sample (time order): for bulk use. */
static PyObject *perf_sample_column(PerfDataObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    enum { TIME, IP, PID, TID, CPU, PERIOD, ATTR, CALLCHAIN_COUNT, STACK_SIZE } which;
    if (!strcmp(name, "time")) which = TIME;
    else if (!strcmp(name, "ip")) which = IP;
    else if (!strcmp(name, "pid")) which = PID;
    else if (!strcmp(name, "tid")) which = TID;
    else if (!strcmp(name, "cpu")) which = CPU;
    else if (!strcmp(name, "period")) which = PERIOD;
    else if (!strcmp(name, "attr_index")) which = ATTR;
    else if (!strcmp(name, "callchain_count")) which = CALLCHAIN_COUNT;
    else if (!strcmp(name, "stack_size")) which = STACK_SIZE;
    else
        return PyErr_Format(PyExc_ValueError, "unknown sample column %R", arg);
    size_t n = self->pd.sample_count;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!out)
        return NULL;
    uint64_t *v = (uint64_t *)(void *)PyBytes_AS_STRING(out);
    const fu_perf_sample *s = self->pd.samples;
    for (size_t i = 0; i < n; i++) {
        switch (which) {
        case TIME: v[i] = s[i].time; break;
        case IP: v[i] = s[i].ip; break;
        case PID: v[i] = s[i].pid; break;
        case TID: v[i] = s[i].tid; break;
        case CPU: v[i] = s[i].cpu; break;
        case PERIOD: v[i] = s[i].period; break;
        case ATTR: v[i] = s[i].attr_index; break;
        case CALLCHAIN_COUNT: v[i] = s[i].callchain_count; break;
        case STACK_SIZE: v[i] = s[i].stack_size; break;
        }
    }
    return out;
}

static PyObject *perf_get(PerfDataObject *self, void *which)
{
    switch ((intptr_t)which) {
    case 0: return PyLong_FromSize_t(self->pd.sample_count);
    case 1: return PyLong_FromSize_t(self->pd.event_count);
    case 2: return PyLong_FromSize_t(self->pd.mmap_count);
    case 3: return PyLong_FromSize_t(self->pd.comm_count);
    case 4: return PyLong_FromSize_t(self->pd.task_count);
    case 5: return PyBool_FromLong(self->pd.pipe_mode);
    case 7: return Py_BuildValue("(KK)", (unsigned long long)self->pd.first_sample_time,
                                 (unsigned long long)self->pd.last_sample_time);
    default: return PyLong_FromUnsignedLongLong(self->pd.decompressed_size);
    }
}

static PyGetSetDef perf_getset[] = {
    {"sample_count", (getter)perf_get, NULL, "number of samples", (void *)0},
    {"event_count", (getter)perf_get, NULL, "samples + MMAP/COMM/FORK/EXIT records", (void *)1},
    {"mmap_count", (getter)perf_get, NULL, "MMAP and MMAP2 records", (void *)2},
    {"comm_count", (getter)perf_get, NULL, "COMM records", (void *)3},
    {"task_count", (getter)perf_get, NULL, "FORK and EXIT records", (void *)4},
    {"pipe_mode", (getter)perf_get, NULL, "the recording was written by perf record -o -", (void *)5},
    {"decompressed_size", (getter)perf_get, NULL, "bytes decompressed from COMPRESSED records", (void *)6},
    {"sample_time", (getter)perf_get, NULL, "(first, last) sample time in ns (HEADER_SAMPLE_TIME; 0, 0 if absent)",
     (void *)7},
    {NULL},
};

static PyMethodDef perf_methods[] = {
    {"open_stream", (PyCFunction)(void (*)(void))perf_open_stream, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "open_stream(fd, window_bytes=0, max_decompressed=0, decode_ahead=False, executable_mmaps_only=False) -> "
     "a PerfData read window by window (decode_ahead: each next window cut on a thread while the caller works "
     "on the last; executable_mmaps_only: MMAP2 records of data left out)"},
    {"next_window", (PyCFunction)perf_next_window, METH_NOARGS,
     "next_window() -> PerfData of the next window's records in time order, None at the end"},
    {"attrs", (PyCFunction)perf_attrs, METH_NOARGS, "attrs() -> [dict of perf_event_attr fields, ids, name]"},
    {"build_ids", (PyCFunction)perf_build_ids, METH_NOARGS,
     "build_ids() -> [(pid, build_id bytes, filename bytes, misc, file_offset)]"},
    {"cmdline", (PyCFunction)perf_cmdline, METH_NOARGS, "cmdline() -> [bytes] (HEADER_CMDLINE)"},
    {"stats", (PyCFunction)perf_stats, METH_NOARGS, "stats() -> dict of record counts"},
    {"cut", (PyCFunction)perf_cut, METH_NOARGS,
     "cut() -> None, or (note, missing feature bits, dropped record offset or None) for a recording cut short"},
    {"events", (PyCFunction)perf_events, METH_NOARGS,
     "events() -> (kinds: bytes of u8, indices: bytes of native u32), in time order"},
    {"mmap", (PyCFunction)perf_mmap, METH_O, "mmap(i) -> tuple (see py_perf_data.c)"},
    {"check_unchanged", (PyCFunction)perf_check_unchanged, METH_NOARGS,
     "check_unchanged(): FileChangedError if a stream's file was truncated under its mapping"},
    {"comm", (PyCFunction)perf_comm, METH_O, "comm(i) -> tuple"},
    {"task", (PyCFunction)perf_task, METH_O, "task(i) -> tuple (FORK or EXIT)"},
    {"sample", (PyCFunction)perf_sample, METH_O, "sample(i) -> tuple of the main fields"},
    {"sample_callchain", (PyCFunction)perf_sample_callchain, METH_O, "sample_callchain(i) -> tuple of u64"},
    {"sample_stack", (PyCFunction)perf_sample_stack, METH_O, "sample_stack(i) -> bytes (dyn_size bytes)"},
    {"sample_regs", (PyCFunction)perf_sample_regs, METH_O, "sample_regs(i) -> (abi, mask, values)"},
    {"sample_reg", (PyCFunction)perf_sample_reg, METH_VARARGS, "sample_reg(i, perf_reg) -> int | None"},
    {"sample_extra", (PyCFunction)perf_sample_extra, METH_O, "sample_extra(i) -> dict of the other fields"},
    {"sample_column", (PyCFunction)perf_sample_column, METH_O,
     "sample_column(name) -> bytes of native u64 per sample; name in time, ip, pid, tid, cpu, period, "
     "attr_index, callchain_count, stack_size"},
    {NULL},
};

static PyType_Slot perf_slots[] = {
    {Py_tp_dealloc, perf_dealloc},
    {Py_tp_init, perf_init},
    {Py_tp_methods, perf_methods},
    {Py_tp_getset, perf_getset},
    {Py_tp_doc, "A parsed perf.data recording (see fastunwind.perf_data for the Python API)."},
    {0, NULL},
};

static PyType_Spec perf_spec = {
    .name = "fastunwind._core.PerfData",
    .basicsize = sizeof(PerfDataObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = perf_slots,
};

int py_perf_data_init(PyObject *module)
{
    /* _core.PerfDataError: fastunwind.errors' class, which py_core_raise raises for FU_ERR_PERF_DATA */
    PyObject *errors = PyImport_ImportModule("fastunwind.errors");
    if (!errors)
        return -1;
    PyObject *cls = PyObject_GetAttrString(errors, fu_status_exception(FU_ERR_PERF_DATA));
    Py_DECREF(errors);
    if (!cls)
        return -1;
    if (PyModule_AddObject(module, "PerfDataError", cls) < 0) {
        Py_DECREF(cls);
        return -1;
    }
    if (py_core_add_type(module, PY_PERF_DATA, &perf_spec) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "PERF_MAX_ATTRS", FU_PERF_MAX_ATTRS) < 0 ||
        PyModule_AddIntConstant(module, "PERF_MAX_ATTR_SIZE", FU_PERF_MAX_ATTR_SIZE) < 0 ||
        PyModule_AddObject(module, "PERF_DEFAULT_MAX_DECOMPRESSED",
                           PyLong_FromUnsignedLongLong(FU_PERF_DEFAULT_MAX_DECOMPRESSED)) < 0)
        return -1;
    /* the PERF_SAMPLE_* bits the package reads a sample_type by, and the kinds of events() it tells
     * apart (the others are FORK and EXIT) */
    if (PyModule_AddIntConstant(module, "PERF_SAMPLE_CALLCHAIN", FU_PERF_SAMPLE_CALLCHAIN) < 0 ||
        PyModule_AddIntConstant(module, "PERF_SAMPLE_CPU", FU_PERF_SAMPLE_CPU) < 0 ||
        PyModule_AddIntConstant(module, "PERF_SAMPLE_REGS_USER", FU_PERF_SAMPLE_REGS_USER) < 0 ||
        PyModule_AddIntConstant(module, "PERF_SAMPLE_STACK_USER", FU_PERF_SAMPLE_STACK_USER) < 0 ||
        PyModule_AddIntConstant(module, "PERF_EVENT_SAMPLE", FU_PERF_EVENT_SAMPLE) < 0 ||
        PyModule_AddIntConstant(module, "PERF_EVENT_MMAP", FU_PERF_EVENT_MMAP) < 0 ||
        PyModule_AddIntConstant(module, "PERF_EVENT_COMM", FU_PERF_EVENT_COMM) < 0)
        return -1;
    return 0;
}
