/* The Python side of core/perf_walk.c: arguments, the walk caches the spaces lend, the spare
 * buffers, and the results as bytes.
 *
 * unwind_samples(perf_data, space_ids, spaces, max_frames=FU_PERF_MAX_STACK, threads=0)
 *   space_ids: bytes of uint32, one per sample (UINT32_MAX: skip the sample)
 *   threads: walking threads (0: FASTUNWIND_THREADS, else the CPUs; see fu_perf_walk_threads); each
 *       walks a contiguous share of the samples with walk caches of its own, the results joined in
 *       order
 *   -> (outcomes: bytes u8[n], frame_starts: bytes u32[n + 1], ips: bytes u64[frames],
 *       modules: bytes u32[frames], kinds: bytes u8[frames], flags: bytes u8[frames],
 *       walk_ns: int)
 *
 * callchain_samples(perf_data, space_ids, spaces, max_frames=FU_PERF_MAX_STACK): the same columns for a recording
 *   without user stacks (perf record -g, --call-graph fp or lbr, or no call graph): each sample's
 *   user frames are the user entries of its kernel callchain (outcome FU_SAMPLE_CALLCHAIN), or,
 *   without a callchain, its sampled IP alone (FU_SAMPLE_IP_ONLY); nothing is walked. Frames are of
 *   kind FU_FRAME_FIRST: perf prints callchain entries as they are, not at return address - 1.
 *
 * flagged_samples(outcomes, frame_starts, flags, mask) -> {outcome code: samples}
 *   of a batch's columns, the samples with a frame whose flags meet `mask` (fu_perf_flagged_samples).
 */
#include "py_core.h"

#include "perf_regs.h"
#include "perf_walk.h"

/* The space of an AddressSpace argument already checked with py_core_payload. */
static fu_space_with_cache *checked_space(PyObject *object) { return ((py_core_object *)object)->payload; }

/* The parsed reader of a PerfData argument, or NULL with an exception. */
static const fu_perf_data *perf_data_of(PyObject *module, PyObject *object)
{
    return py_core_payload(module, PY_PERF_DATA, object);
}

static const char *bytes_of(const fu_buffer *g) { return g->data ? (const char *)g->data : ""; }

/* The last batch's buffers, kept for the next batch (taken and put back with the GIL held), so
 * that its walks write into pages already mapped: with fresh buffers the first batch after
 * another faulted in a page per 4 KiB of frames as it walked (c's 53,870 frames: 100 page faults
 * inside the timed loop, in a process whose earlier batch had freed the same sizes; the peers'
 * harnesses map their frame arrays before timing). Buffers of more than SPARE_BUFFERS_MAX_BYTES
 * in all are freed instead of kept. */
#define SPARE_BUFFERS_MAX_BYTES ((size_t)64 << 20)
static fu_perf_walk_buffers spare_buffers;

/* The spare buffers, emptied (or none: all zero). */
static fu_perf_walk_buffers take_spare_buffers(void)
{
    fu_perf_walk_buffers b = spare_buffers;
    spare_buffers = (fu_perf_walk_buffers){0};
    b.outcomes.len = b.starts.len = 0;
    for (unsigned c = 0; c < 4; c++)
        b.frames.column[c].len = 0;
    return b;
}

/* Keep `b` as the spare buffers (in place of any kept since), or free it if it is too big. */
static void keep_spare_buffers(fu_perf_walk_buffers *b)
{
    size_t bytes = b->outcomes.cap + b->starts.cap;
    for (unsigned c = 0; c < 4; c++)
        bytes += b->frames.column[c].cap;
    if (bytes > SPARE_BUFFERS_MAX_BYTES) {
        fu_perf_walk_buffers_free(b);
        return;
    }
    fu_perf_walk_buffers_free(&spare_buffers);
    spare_buffers = *b;
    *b = (fu_perf_walk_buffers){0};
}

/* A batch's input checked: the recording (its samples), one space id per sample, and the address
 * spaces (`*spaces`: allocated, one more than the spaces; the caller frees it). NULL with an
 * exception set otherwise. */
static const fu_perf_data *batch_input(PyObject *module, PyObject *perf_data, PyObject *seq, const Py_buffer *space_ids,
                                       const fu_address_space ***spaces)
{
    const fu_perf_data *pd = seq ? perf_data_of(module, perf_data) : NULL;
    if (!pd)
        return NULL;
    if ((size_t)space_ids->len != pd->sample_count * sizeof(uint32_t)) {
        PyErr_Format(PyExc_ValueError, "space_ids has %zd bytes for %zu samples", space_ids->len, pd->sample_count);
        return NULL;
    }
    Py_ssize_t space_count = PySequence_Fast_GET_SIZE(seq);
    if (!(*spaces = PyMem_Calloc((size_t)space_count + 1, sizeof **spaces))) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < space_count; i++) {
        const fu_space_with_cache *held = py_core_payload(module, PY_ADDRESS_SPACE, PySequence_Fast_GET_ITEM(seq, i));
        if (!held)
            return NULL;
        (*spaces)[i] = &held->space;
    }
    return pd;
}

/* A batch's result: (outcomes, frame starts, ips, modules, kinds, flags, walk_ns). */
static PyObject *batch_result(fu_perf_walk_buffers *b, uint64_t walk_ns)
{
    const fu_buffer *columns = b->frames.column; /* ips, modules, kinds, flags */
    return Py_BuildValue("(y#y#y#y#y#y#K)", bytes_of(&b->outcomes), (Py_ssize_t)b->outcomes.len,
                         bytes_of(&b->starts), (Py_ssize_t)b->starts.len, bytes_of(&columns[0]),
                         (Py_ssize_t)columns[0].len, bytes_of(&columns[1]), (Py_ssize_t)columns[1].len,
                         bytes_of(&columns[2]), (Py_ssize_t)columns[2].len, bytes_of(&columns[3]),
                         (Py_ssize_t)columns[3].len, (unsigned long long)walk_ns);
}

static PyObject *unwind_samples(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"perf_data", "space_ids", "spaces", "max_frames", "threads", NULL};
    PyObject *perf_data, *spaces_list;
    Py_buffer space_ids;
    Py_ssize_t max_frames = FU_PERF_MAX_STACK, threads_arg = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*O|nn", kwlist, &perf_data, &space_ids, &spaces_list,
                                     &max_frames, &threads_arg))
        return NULL;
    PyObject *result = NULL;
    const fu_address_space **spaces = NULL;
    fu_walk_cache **caches = NULL; /* per thread, the lent walk cache of each space a sample names */
    fu_perf_walk_buffers buffers = take_spare_buffers();
    fu_perf_walk_buffers extra[FU_PERF_WALK_THREADS_MAX];
    memset(extra, 0, sizeof extra);
    unsigned threads = 1;
    PyObject *seq = PySequence_Fast(spaces_list, "spaces must be a sequence of AddressSpace");
    const fu_perf_data *pd = batch_input(module, perf_data, seq, &space_ids, &spaces);
    if (!pd)
        goto done;
    size_t count = pd->sample_count;
    const fu_perf_sample *samples = pd->samples;
    threads = threads_arg <= 0                             ? fu_perf_walk_threads(count)
              : threads_arg < FU_PERF_WALK_THREADS_MAX ? (unsigned)threads_arg
                                                       : FU_PERF_WALK_THREADS_MAX;
    if (threads > 1 && count < threads)
        threads = 1;
    Py_ssize_t space_count = PySequence_Fast_GET_SIZE(seq);
    if (!(caches = PyMem_Calloc(((size_t)space_count + 1) * threads, sizeof *caches))) {
        PyErr_NoMemory();
        goto done;
    }
    /* the walk caches of the spaces that samples name, lent by the spaces for the batch: one per
     * thread, so that no two threads write one */
    const uint32_t *ids = space_ids.buf;
    for (size_t s = 0; s < count; s++) {
        uint32_t id;
        memcpy(&id, &ids[s], sizeof id);
        if (id == UINT32_MAX || (id < (uint32_t)space_count && caches[id]))
            continue;
        if (id >= (uint32_t)space_count) {
            PyErr_Format(PyExc_ValueError, "sample %zu: space id %u is out of range (%zd spaces)", s, id, space_count);
            goto done;
        }
        fu_space_with_cache *held = checked_space(PySequence_Fast_GET_ITEM(seq, id));
        for (unsigned t = 0; t < threads; t++)
            if (!(caches[(size_t)t * ((size_t)space_count + 1) + id] =
                      fu_walk_cache_borrow(&held->slot, &held->space))) {
                PyErr_NoMemory();
                goto done;
            }
    }
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    fu_perf_walk_request request = {samples, count, ids, spaces, caches, (size_t)space_count + 1, threads,
                                    (size_t)max_frames};
    uint64_t walk_ns = 0;
    bool ok;
    Py_BEGIN_ALLOW_THREADS
    ok = fu_perf_walk_samples(&request, &buffers, extra, &walk_ns);
    Py_END_ALLOW_THREADS
    if (!ok) {
        PyErr_NoMemory();
        goto done;
    }
    result = batch_result(&buffers, walk_ns);
done:
    keep_spare_buffers(&buffers);
    for (unsigned t = 1; t < FU_PERF_WALK_THREADS_MAX; t++)
        fu_perf_walk_buffers_free(&extra[t]);
    for (unsigned t = 0; caches && spaces && t < threads; t++)
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            fu_walk_cache *cache = caches[(size_t)t * ((size_t)PySequence_Fast_GET_SIZE(seq) + 1) + i];
            if (cache)
                fu_walk_cache_return(&checked_space(PySequence_Fast_GET_ITEM(seq, i))->slot, cache);
        }
    PyMem_Free(caches);
    PyMem_Free(spaces);
    Py_XDECREF(seq);
    PyBuffer_Release(&space_ids);
    return result;
}

static PyObject *callchain_samples(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"perf_data", "space_ids", "spaces", "max_frames", NULL};
    PyObject *perf_data, *spaces_list;
    Py_buffer space_ids;
    Py_ssize_t max_frames = FU_PERF_MAX_STACK;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*O|n", kwlist, &perf_data, &space_ids, &spaces_list, &max_frames))
        return NULL;
    PyObject *result = NULL;
    const fu_address_space **spaces = NULL;
    fu_perf_walk_buffers buffers = take_spare_buffers();
    PyObject *seq = PySequence_Fast(spaces_list, "spaces must be a sequence of AddressSpace");
    const fu_perf_data *pd = batch_input(module, perf_data, seq, &space_ids, &spaces);
    if (!pd)
        goto done;
    size_t count = pd->sample_count;
    const fu_perf_sample *samples = pd->samples;
    Py_ssize_t space_count = PySequence_Fast_GET_SIZE(seq);
    if (max_frames < 1 || max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    fu_perf_walk_request request = {samples, count, space_ids.buf, spaces, NULL, 0, 1, (size_t)max_frames};
    fu_error err = {0};
    if (fu_perf_callchain_samples(&request, (size_t)space_count, &buffers, &err) != FU_OK) {
        py_core_raise(&err);
        goto done;
    }
    result = batch_result(&buffers, 0);
done:
    keep_spare_buffers(&buffers);
    PyMem_Free(spaces);
    Py_XDECREF(seq);
    PyBuffer_Release(&space_ids);
    return result;
}

/* sample_walk_registers(perf_data, index) -> 17-tuple of int or None: the registers a walk of
 * sample `index` starts from, in DWARF numbering (for tests of the extraction). */
static PyObject *sample_walk_registers(PyObject *module, PyObject *args)
{
    PyObject *perf_data, *index_object;
    if (!PyArg_ParseTuple(args, "OO", &perf_data, &index_object))
        return NULL;
    size_t index;
    const fu_perf_data *pd = perf_data_of(module, perf_data);
    if (!pd || !py_core_index_arg(index_object, pd->sample_count, &index))
        return NULL;
    const fu_perf_sample *samples = pd->samples;
    fu_regs regs;
    fu_perf_sample_walk_registers(&samples[index], &regs);
    PyObject *values = PyTuple_New(FU_WALK_REGISTERS);
    for (unsigned r = 0; values && r < FU_WALK_REGISTERS; r++) {
        PyObject *v = regs.valid >> r & 1 ? PyLong_FromUnsignedLongLong(regs.value[r]) : Py_NewRef(Py_None);
        if (!v)
            Py_CLEAR(values);
        else
            PyTuple_SET_ITEM(values, r, v);
    }
    return values;
}

/* flagged_samples(outcomes, starts, flags, mask) -> {outcome code: samples with a frame flagged `mask`} */
static PyObject *flagged_samples(PyObject *module, PyObject *args)
{
    Py_buffer outcomes, starts, flags;
    unsigned char mask;
    if (!PyArg_ParseTuple(args, "y*y*y*b", &outcomes, &starts, &flags, &mask))
        return NULL;
    PyObject *result = NULL;
    uint64_t by_outcome[256];
    if (starts.len != 4 * (outcomes.len + 1) ||
        !fu_perf_flagged_samples(outcomes.buf, starts.buf, (size_t)outcomes.len, flags.buf, (size_t)flags.len, mask,
                                 by_outcome)) {
        PyErr_SetString(PyExc_ValueError, "flagged_samples: the columns do not fit together");
        goto done;
    }
    result = py_core_count_dict(by_outcome, 256);
done:
    PyBuffer_Release(&outcomes);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&flags);
    return result;
}

static PyMethodDef perf_walk_methods[] = {
    {"flagged_samples", flagged_samples, METH_VARARGS,
     "flagged_samples(outcomes, starts, flags, mask) -> {outcome code: samples with a frame whose flags meet mask}"},
    {"sample_walk_registers", sample_walk_registers, METH_VARARGS,
     "sample_walk_registers(perf_data, index) -> the DWARF registers 0..16 a walk of the sample starts from"},
    {"unwind_samples", (PyCFunction)(void (*)(void))unwind_samples, METH_VARARGS | METH_KEYWORDS,
     "unwind_samples(perf_data, space_ids, spaces, max_frames=" Py_STRINGIFY(FU_PERF_MAX_STACK)
     ") -> outcome and frame arrays, walk_ns"},
    {"callchain_samples", (PyCFunction)(void (*)(void))callchain_samples, METH_VARARGS | METH_KEYWORDS,
     "callchain_samples(perf_data, space_ids, spaces, max_frames=" Py_STRINGIFY(FU_PERF_MAX_STACK)
     ") -> unwind_samples' columns from the "
     "samples' kernel callchains (or IPs), for recordings without user stacks"},
    {NULL},
};

static const char *sample_outcome_name(int code)
{
    const char *name = fu_sample_outcome_name((unsigned)code);
    return name ? name : "?";
}

int py_perf_walk_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, perf_walk_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "SAMPLE_NO_USER_REGISTERS", FU_SAMPLE_NO_USER_REGISTERS) < 0 ||
        PyModule_AddIntConstant(module, "SAMPLE_SKIPPED", FU_SAMPLE_SKIPPED) < 0 ||
        PyModule_AddIntConstant(module, "SAMPLE_CALLCHAIN", FU_SAMPLE_CALLCHAIN) < 0 ||
        PyModule_AddIntConstant(module, "SAMPLE_IP_ONLY", FU_SAMPLE_IP_ONLY) < 0 ||
        PyModule_AddIntConstant(module, "PERF_MAX_FRAMES", FU_PERF_MAX_STACK) < 0)
        return -1;
    /* the name of every outcome code a sample can have, "?" for the others */
    return py_core_add_names(module, "SAMPLE_OUTCOMES", 256, sample_outcome_name);
}
