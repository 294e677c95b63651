/* perf_script: a recording's unwound samples symbolized and rendered without Python per sample or
 * per frame: perf script's text, FlameGraph's folded stacks, the outcome statistics.
 *
 * symbolize_samples(perf_data, space_ids, comm_ids, comm_names, unwound, spaces, mappings,
 *                   kernel_symbols, outcome_names) -> UnwoundSamples
 *   space_ids, comm_ids: bytes u32 per sample (replay_recording's); comm_names: [bytes]
 *   unwound: unwind_samples' result (outcomes, frame_starts, ips, modules, kinds, flags, walk_ns)
 *   spaces: [bytes u32]: per address space, the index in `mappings` of each of its mappings, in the
 *       order the walker's address space numbers them
 *   mappings: [(start, pgoff, bias, path: str, symbols)]: symbols is None (no readable module) or a
 *       callable returning the module's SymbolTable or None, called once, when a frame needs it
 *   kernel_symbols: callable taking the distinct kernel addresses (bytes of u64) and returning the
 *       kernel's SymbolTable (for those addresses) or None; called once, if there are kernel frames
 *   outcome_names: 256 names (str) by outcome code
 *
 * perf script's rules (perf 6.1, `-F comm,tid,time,ip,sym,symoff,dso --no-inline`): per sample a
 * header `comm  tid  sec.usec: `, one line `\t%16x sym+0xoff (dso)` per frame, kernel frames (the
 * sample's callchain entries in [2^63, PERF_CONTEXT_MAX)) then user frames, and a blank line. A
 * user frame is printed at its DSO-relative address (avma - map start + pgoff), callers at their
 * return address - 1 except the frame a signal interrupted; its symbol is looked up at svma = avma
 * - bias. Every distinct (mapping, address) is resolved and formatted once.
 *
 * Symbol names are the tables' (fu_symbol_name: demangled in C, kept with the table).
 *
 * UnwoundSamples methods: render(write) and folded(write) call write(bytes) with chunks of the
 * text; statistics(); sample(i) and frame(j) for the Python API.
 */
#include "py_core.h"

#include <stdlib.h>

#include "growing.h"
#include "index_set.h"
#include "perf_data.h"
#include "symbols.h"
#include "walk.h"

#define PERF_CONTEXT_MAX ((uint64_t)-4095)
#define KERNEL_START ((uint64_t)1 << 63)
#define NO_MODULE UINT32_MAX                /* fu_frames.module of an IP in no mapping */
#define MAPPING_NONE UINT32_MAX             /* a user frame in no mapping */
#define MAPPING_KERNEL (UINT32_MAX - 1)
#define CHUNK (1u << 20)                    /* bytes handed to write() at a time */
#define OUTCOME_CODES 256

typedef struct map_info {
    uint64_t start, pgoff;
    int64_t bias;
    PyObject *path;      /* bytes, fs-encoded */
    PyObject *loader;    /* callable or NULL (no module: no symbols) */
    PyObject *symbols;   /* the loaded SymbolTable, or NULL */
    bool loaded;
} map_info;

typedef struct frame_rec {
    uint64_t key;        /* avma (user) or ip (kernel) */
    uint32_t mapping;    /* index into maps, MAPPING_NONE or MAPPING_KERNEL */
    bool negative;       /* the printed address is below 0 (a return address at a mapping's start) */
    bool has_symbol;
    unsigned __int128 address; /* printed address, magnitude */
    const char *name;    /* UTF-8, into a SymbolTable (its name or demangled name); valid while has_symbol */
    uint32_t name_len;
    uint64_t offset;
    uint32_t line_offset, line_len; /* the formatted line in `lines`, once rendered */
} frame_rec;

typedef struct UnwoundObject {
    py_core_object base; /* no payload yet: the object is made whole by symbolize_samples */
    PyObject *perf_data, *comm_names, *outcome_names;
    const fu_perf_sample *samples;
    size_t sample_count;
    uint32_t *comm_ids;
    uint8_t *outcomes;
    uint32_t *bounds;    /* per sample: kernel frames from bounds[2i], user frames from bounds[2i+1] to bounds[2i+2] */
    uint32_t *frame_ids; /* into frames */
    frame_rec *frames;
    size_t frame_count;
    map_info *maps;
    size_t map_count;
    PyObject *kernel_symbols;
    fu_growing lines;
    bool lines_ready;
} UnwoundObject;

static void unwound_dealloc(UnwoundObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    for (size_t i = 0; i < self->map_count; i++) {
        Py_XDECREF(self->maps[i].path);
        Py_XDECREF(self->maps[i].loader);
        Py_XDECREF(self->maps[i].symbols);
    }
    free(self->maps);
    free(self->comm_ids);
    free(self->outcomes);
    free(self->bounds);
    free(self->frame_ids);
    free(self->frames);
    free(self->lines.data);
    Py_XDECREF(self->kernel_symbols);
    Py_XDECREF(self->perf_data);
    Py_XDECREF(self->comm_names);
    Py_XDECREF(self->outcome_names);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* ---- resolving frames ------------------------------------------------------------------------ */

typedef struct frame_key {
    uint32_t mapping;
    uint64_t address;
} frame_key;

static bool frame_equal(const void *ctx, uint32_t i, const void *key)
{
    const frame_rec *f = &((const frame_rec *)ctx)[i];
    const frame_key *k = key;
    return f->mapping == k->mapping && f->key == k->address;
}

/* Call a loader once (with one argument, or none: NULL); its table (or None) is kept, checked to be
 * a SymbolTable. */
static bool load_symbols(UnwoundObject *self, PyObject *loader, PyObject *argument, PyObject **symbols)
{
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    if (!module)
        return false;
    PyObject *table = argument ? PyObject_CallOneArg(loader, argument) : PyObject_CallNoArgs(loader);
    if (!table)
        return false;
    if (table == Py_None) {
        Py_DECREF(table);
        return true;
    }
    if (!py_core_payload(module, PY_SYMBOL_TABLE, table)) {
        Py_DECREF(table);
        return false;
    }
    *symbols = table;
    return true;
}

static void set_symbol(frame_rec *f, PyObject *symbols, uint64_t address)
{
    size_t index, len;
    /* checked by load_symbols */
    const fu_symbol_table *table = symbols ? ((py_core_object *)symbols)->payload : NULL;
    if (table && fu_symbol_find(table, address, &index)) {
        f->has_symbol = true;
        f->name = fu_symbol_name(table, index, &len);
        f->name_len = (uint32_t)len;
        f->offset = address - table->starts[index];
    }
}

typedef struct resolver {
    UnwoundObject *self;
    fu_index_set index;
    size_t frame_cap;
} resolver;

/* The id of the frame for (mapping, address), resolved on first sight; UINT32_MAX with an exception. */
static uint32_t frame_id(resolver *r, uint32_t mapping, uint64_t address)
{
    UnwoundObject *self = r->self;
    frame_key key = {mapping, address};
    uint64_t hash = fu_hash_u64(address ^ (uint64_t)mapping << 40 ^ (uint64_t)mapping);
    uint32_t found = fu_index_find(&r->index, hash, frame_equal, self->frames, &key);
    if (found != FU_INDEX_NONE)
        return found;
    if (self->frame_count == r->frame_cap) {
        size_t cap = r->frame_cap ? 2 * r->frame_cap : 1024;
        frame_rec *frames = cap < FU_INDEX_NONE ? realloc(self->frames, cap * sizeof *frames) : NULL;
        if (!frames) {
            PyErr_NoMemory();
            return FU_INDEX_NONE;
        }
        self->frames = frames;
        r->frame_cap = cap;
    }
    frame_rec f = {.key = address, .mapping = mapping};
    if (mapping == MAPPING_KERNEL || mapping == MAPPING_NONE) {
        f.address = address;
    } else {
        map_info *m = &self->maps[mapping];
        __int128 printed = (__int128)address - (__int128)m->start + (__int128)m->pgoff;
        f.negative = printed < 0;
        f.address = (unsigned __int128)(printed < 0 ? -printed : printed);
        if (m->loader && !m->loaded) {
            m->loaded = true;
            if (!load_symbols(self, m->loader, NULL, &m->symbols))
                return FU_INDEX_NONE;
        }
        __int128 svma = (__int128)address - (__int128)m->bias;
        if (m->symbols && svma >= 0 && svma <= (__int128)UINT64_MAX)
            set_symbol(&f, m->symbols, (uint64_t)svma);
    }
    uint32_t id = (uint32_t)self->frame_count;
    if (!fu_index_insert(&r->index, hash, id)) {
        PyErr_NoMemory();
        return FU_INDEX_NONE;
    }
    self->frames[self->frame_count++] = f;
    return id;
}

/* The kernel frames' symbols: the loader gets their addresses (bytes of u64) and is called only if
 * there are any. False with an exception set. */
static bool kernel_symbols(UnwoundObject *self, PyObject *loader)
{
    size_t n = 0;
    for (size_t i = 0; i < self->frame_count; i++)
        n += self->frames[i].mapping == MAPPING_KERNEL;
    if (!n)
        return true; /* not paid without kernel frames */
    PyObject *addresses = PyBytes_FromStringAndSize(NULL, 8 * (Py_ssize_t)n);
    if (!addresses)
        return false;
    uint64_t *out = (uint64_t *)(void *)PyBytes_AS_STRING(addresses);
    for (size_t i = 0, k = 0; i < self->frame_count; i++)
        if (self->frames[i].mapping == MAPPING_KERNEL)
            out[k++] = self->frames[i].key;
    bool ok = load_symbols(self, loader, addresses, &self->kernel_symbols);
    Py_DECREF(addresses);
    for (size_t i = 0; ok && i < self->frame_count; i++)
        if (self->frames[i].mapping == MAPPING_KERNEL)
            set_symbol(&self->frames[i], self->kernel_symbols, self->frames[i].key);
    return ok;
}

static bool read_maps(UnwoundObject *self, PyObject *mappings)
{
    PyObject *seq = PySequence_Fast(mappings, "mappings must be a list of (start, pgoff, bias, path, symbols)");
    if (!seq)
        return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    bool ok = n < (Py_ssize_t)MAPPING_KERNEL && (self->maps = calloc((size_t)n + 1, sizeof *self->maps)) != NULL;
    if (!ok)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        map_info *m = &self->maps[i];
        unsigned long long start, pgoff;
        long long bias;
        PyObject *path, *loader;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KKLOO", &start, &pgoff, &bias, &path, &loader) &&
             (m->path = PyUnicode_EncodeFSDefault(path)) != NULL;
        if (ok)
            self->map_count = (size_t)i + 1; /* dealloc releases what it holds */
        if (ok && loader != Py_None && !PyCallable_Check(loader)) {
            PyErr_SetString(PyExc_TypeError, "a mapping's symbols must be None or a callable");
            ok = false;
        }
        if (ok) {
            m->start = start;
            m->pgoff = pgoff;
            m->bias = bias;
            m->loader = loader == Py_None ? NULL : Py_NewRef(loader);
        }
    }
    Py_DECREF(seq);
    return ok;
}

/* The spaces' mapping lists, checked against the mappings. */
typedef struct space_view {
    const uint32_t *maps;
    uint32_t count;
} space_view;

static space_view *read_spaces(PyObject *spaces, size_t map_count, Py_ssize_t *count)
{
    PyObject *seq = PySequence_Fast(spaces, "spaces must be a list of bytes");
    if (!seq)
        return NULL;
    *count = PySequence_Fast_GET_SIZE(seq);
    space_view *views = calloc((size_t)*count + 1, sizeof *views);
    if (!views) {
        PyErr_NoMemory();
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *count; i++) {
        PyObject *ids = PySequence_Fast_GET_ITEM(seq, i); /* the list owner keeps the bytes alive */
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

static bool append_u32(fu_growing *g, uint32_t v)
{
    if (g->len / 4 >= FU_INDEX_NONE - 1) /* ids and bounds are u32 */
        return false;
    return fu_growing_append(g, &v, 4);
}

static PyObject *symbolize_samples(PyObject *module, PyObject *args)
{
    PyObject *perf_data, *comm_names, *unwound, *spaces, *mappings, *kernel_loader, *outcome_names;
    Py_buffer space_ids, comm_ids;
    if (!PyArg_ParseTuple(args, "Oy*y*O!O!O!O!OO!", &perf_data, &space_ids, &comm_ids, &PyList_Type, &comm_names,
                          &PyTuple_Type, &unwound, &PyList_Type, &spaces, &PyList_Type, &mappings, &kernel_loader,
                          &PyTuple_Type, &outcome_names))
        return NULL;
    PyTypeObject *type = py_core_type(module, PY_UNWOUND_SAMPLES);
    UnwoundObject *self = (UnwoundObject *)type->tp_alloc(type, 0);
    resolver r = {.self = self};
    fu_growing bounds = {0}, ids = {0};
    space_view *views = NULL;
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
    self->samples = pd->samples;
    self->sample_count = pd->sample_count;
    size_t n = self->sample_count;
    if (!PyCallable_Check(kernel_loader) || PyTuple_GET_SIZE(outcome_names) != OUTCOME_CODES) {
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
    const uint8_t *outcomes = columns[0].buf, *kinds = columns[4].buf;
    size_t frames = (size_t)columns[2].len / 8;
    if ((size_t)columns[0].len != n || (size_t)columns[1].len != 4 * (n + 1) || (size_t)columns[3].len != 4 * frames ||
        (size_t)columns[4].len != frames) {
        PyErr_SetString(PyExc_ValueError, "unwound's columns do not match the samples");
        goto fail;
    }
    if (!read_maps(self, mappings) || !(views = read_spaces(spaces, self->map_count, &space_count)))
        goto fail;
    self->comm_ids = malloc(4 * (n ? n : 1));
    self->outcomes = malloc(n ? n : 1);
    if (!self->comm_ids || !self->outcomes) {
        PyErr_NoMemory();
        goto fail;
    }
    memcpy(self->comm_ids, comm_ids.buf, 4 * n);
    memcpy(self->outcomes, outcomes, n);
    Py_ssize_t comm_count = PyTuple_GET_SIZE(self->comm_names);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = self->comm_ids[i];
        if (id != FU_INDEX_NONE &&
            (id >= (uint64_t)comm_count || !PyBytes_Check(PyTuple_GET_ITEM(self->comm_names, id)))) {
            PyErr_SetString(PyExc_ValueError, "a comm id is out of range (or its name is not bytes)");
            goto fail;
        }
    }
    const uint32_t *starts = columns[1].buf, *modules = columns[3].buf, *space_of = space_ids.buf;
    const uint64_t *ips = columns[2].buf;
    /* one sample per iteration, each over its own callchain and frames: bounded by the input */
    for (size_t s = 0; s < n; s++) {
        const fu_perf_sample *sample = &self->samples[s];
        if (!append_u32(&bounds, (uint32_t)(ids.len / 4)))
            goto nomem;
        /* without a callchain, a kernel IP is the sample's one kernel frame (user IPs come in `unwound`) */
        bool ip_only = !(sample->present & FU_PERF_SAMPLE_CALLCHAIN);
        uint64_t entries = ip_only ? 1 : sample->callchain ? sample->callchain_count : 0;
        for (uint64_t c = 0; c < entries; c++) {
            uint64_t ip = ip_only ? sample->ip : sample->callchain[c];
            if (ip < KERNEL_START || ip >= PERF_CONTEXT_MAX)
                continue;
            uint32_t id = frame_id(&r, MAPPING_KERNEL, ip);
            if (id == FU_INDEX_NONE)
                goto fail;
            if (!append_u32(&ids, id))
                goto nomem;
        }
        if (!append_u32(&bounds, (uint32_t)(ids.len / 4)))
            goto nomem;
        uint32_t first = starts[s], last = starts[s + 1];
        if (first > last || last > frames) {
            PyErr_SetString(PyExc_ValueError, "unwound's frame starts are out of order");
            goto fail;
        }
        if (last > first && space_of[s] >= (uint32_t)space_count) {
            PyErr_SetString(PyExc_ValueError, "a sample with frames has no address space");
            goto fail;
        }
        for (uint32_t k = first; k < last; k++) {
            uint64_t avma = ips[k];
            /* callers the walker recovered from a return address at that address - 1; not the frame a
             * signal interrupted, nor callchain entries (callchain_samples: perf prints them as they are) */
            if (k > first && (kinds[k] == FU_FRAME_CFI || kinds[k] == FU_FRAME_FP))
                avma -= 1;
            uint32_t mapping = MAPPING_NONE;
            if (modules[k] != NO_MODULE) {
                const space_view *space = &views[space_of[s]];
                if (modules[k] >= space->count) {
                    PyErr_SetString(PyExc_ValueError, "a frame's module is out of its address space");
                    goto fail;
                }
                mapping = space->maps[modules[k]];
            }
            uint32_t id = frame_id(&r, mapping, avma);
            if (id == FU_INDEX_NONE)
                goto fail;
            if (!append_u32(&ids, id))
                goto nomem;
        }
    }
    if (!append_u32(&bounds, (uint32_t)(ids.len / 4)))
        goto nomem;
    if (!kernel_symbols(self, kernel_loader))
        goto fail;
    self->bounds = (uint32_t *)bounds.data;
    self->frame_ids = (uint32_t *)ids.data;
    bounds.data = ids.data = NULL;
    if (!self->bounds && !(self->bounds = calloc(1, 4)))
        goto nomem;
    goto done;
nomem:
    PyErr_NoMemory();
fail:
    Py_CLEAR(self);
done:
    for (int i = 0; i < held; i++)
        PyBuffer_Release(&columns[i]);
    PyBuffer_Release(&space_ids);
    PyBuffer_Release(&comm_ids);
    fu_index_free(&r.index);
    free(views);
    free(bounds.data);
    free(ids.data);
    return (PyObject *)self;
}

/* ---- text -------------------------------------------------------------------------------------- */

static void put(fu_growing *out, const void *data, size_t len)
{
    memcpy(out->data + out->len, data, len); /* the caller reserved the room */
    out->len += len;
}

/* Python's format(value, f"{width}d") / "0{width}d" for unsigned values. */
static void put_udec(fu_growing *out, uint64_t v, int width, char pad)
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = n; i < width; i++)
        out->data[out->len++] = (unsigned char)pad;
    while (n)
        out->data[out->len++] = (unsigned char)digits[--n];
}

static void put_sdec(fu_growing *out, int64_t v, int width)
{
    if (v >= 0) {
        put_udec(out, (uint64_t)v, width, ' ');
        return;
    }
    uint64_t magnitude = (uint64_t)0 - (uint64_t)v;
    int digits = 1;
    for (uint64_t m = magnitude; m >= 10; m /= 10)
        digits++;
    for (int i = digits + 1; i < width; i++)
        out->data[out->len++] = ' ';
    out->data[out->len++] = '-';
    put_udec(out, magnitude, 0, ' ');
}

/* Python's format(value, f"{width}x"), the sign counted in the width. */
static void put_hex(fu_growing *out, unsigned __int128 v, bool negative, int width)
{
    static const char hex[] = "0123456789abcdef";
    char digits[40];
    int n = 0;
    do {
        digits[n++] = hex[(unsigned)(v & 15)];
        v >>= 4;
    } while (v);
    for (int i = n + negative; i < width; i++)
        out->data[out->len++] = ' ';
    if (negative)
        out->data[out->len++] = '-';
    while (n)
        out->data[out->len++] = (unsigned char)digits[--n];
}

static const char KERNEL_DSO[] = "[kernel.kallsyms]", UNKNOWN_DSO[] = "[unknown]";

static void frame_dso(const UnwoundObject *self, const frame_rec *f, const char **dso, size_t *len)
{
    if (f->mapping == MAPPING_KERNEL) {
        *dso = KERNEL_DSO;
        *len = sizeof KERNEL_DSO - 1;
    } else if (f->mapping == MAPPING_NONE) {
        *dso = UNKNOWN_DSO;
        *len = sizeof UNKNOWN_DSO - 1;
    } else {
        PyObject *path = self->maps[f->mapping].path;
        *dso = PyBytes_AS_STRING(path);
        *len = (size_t)PyBytes_GET_SIZE(path);
    }
}

/* Each frame's line, formatted once: "\t%16x sym+0xoff (dso)\n" or "\t%16x [unknown] (dso)\n". */
static bool format_lines(UnwoundObject *self)
{
    if (self->lines_ready)
        return true;
    self->lines.len = 0;
    for (size_t i = 0; i < self->frame_count; i++) {
        frame_rec *f = &self->frames[i];
        const char *dso;
        size_t dso_len;
        frame_dso(self, f, &dso, &dso_len);
        size_t need = 1 + 41 + 1 + (f->has_symbol ? f->name_len + 3 + 16 : 9) + 2 + dso_len + 2;
        if (!fu_growing_reserve(&self->lines, need) || self->lines.len + need > UINT32_MAX) {
            PyErr_NoMemory();
            return false;
        }
        fu_growing *out = &self->lines;
        size_t begin = out->len;
        put(out, "\t", 1);
        put_hex(out, f->address, f->negative, 16);
        put(out, " ", 1);
        if (f->has_symbol) {
            put(out, f->name, f->name_len);
            put(out, "+0x", 3);
            put_hex(out, f->offset, false, 0);
        } else {
            put(out, "[unknown]", 9);
        }
        put(out, " (", 2);
        put(out, dso, dso_len);
        put(out, ")\n", 2);
        f->line_offset = (uint32_t)begin;
        f->line_len = (uint32_t)(out->len - begin);
    }
    self->lines_ready = true;
    return true;
}

/* Hand the buffer to write() when it holds a chunk (or at the end: force). */
static bool flush(fu_growing *out, PyObject *write, bool force)
{
    if (!out->len || (!force && out->len < CHUNK))
        return true;
    PyObject *chunk = PyBytes_FromStringAndSize((const char *)out->data, (Py_ssize_t)out->len);
    PyObject *result = chunk ? PyObject_CallOneArg(write, chunk) : NULL;
    Py_XDECREF(chunk);
    out->len = 0;
    if (!result)
        return false;
    Py_DECREF(result);
    return true;
}

static void comm_of(const UnwoundObject *self, size_t s, const char **comm, size_t *len)
{
    uint32_t id = self->comm_ids[s];
    if (id == FU_INDEX_NONE) {
        *comm = "";
        *len = 0;
        return;
    }
    PyObject *name = PyTuple_GET_ITEM(self->comm_names, id);
    *comm = PyBytes_AS_STRING(name);
    *len = (size_t)PyBytes_GET_SIZE(name);
}

/* The rest of a sample without a callchain: ":  %16x sym+0xoff (dso)\n" for its one frame (the IP
 * as sampled, not DSO-relative), ":\n" if it has none. False with an exception set. */
static bool render_ip_line(const UnwoundObject *self, size_t s, fu_growing *out)
{
    uint32_t k = self->bounds[2 * s];
    if (k == self->bounds[2 * s + 2]) {
        if (!fu_growing_reserve(out, 2))
            goto nomem;
        put(out, ":\n", 2);
        return true;
    }
    const frame_rec *f = &self->frames[self->frame_ids[k]];
    const char *dso;
    size_t dso_len;
    frame_dso(self, f, &dso, &dso_len);
    if (!fu_growing_reserve(out, 3 + 41 + 1 + (f->has_symbol ? f->name_len + 3 + 16 : 9) + 2 + dso_len + 2))
        goto nomem;
    put(out, ":  ", 3);
    put_hex(out, f->key, false, 16);
    put(out, " ", 1);
    if (f->has_symbol) {
        put(out, f->name, f->name_len);
        put(out, "+0x", 3);
        put_hex(out, f->offset, false, 0);
    } else {
        put(out, "[unknown]", 9);
    }
    put(out, " (", 2);
    put(out, dso, dso_len);
    put(out, ")\n", 2);
    return true;
nomem:
    PyErr_NoMemory();
    return false;
}

/* render(write): perf script's text of every sample, in chunks of about 1 MiB */
static PyObject *unwound_render(UnwoundObject *self, PyObject *write)
{
    if (!format_lines(self))
        return NULL;
    fu_growing out = {0};
    bool ok = true;
    for (size_t s = 0; ok && s < self->sample_count; s++) {
        const fu_perf_sample *sample = &self->samples[s];
        const char *comm;
        size_t comm_len;
        comm_of(self, s, &comm, &comm_len);
        if (!fu_growing_reserve(&out, comm_len + 80)) { /* 16 columns of padding, tid, time */
            PyErr_NoMemory();
            ok = false;
            break;
        }
        /* perf script prints a sample without a callchain on one line: comm right-aligned in 16
         * columns, then " %16x sym+0xoff (dso)" with the IP as sampled (builtin-script.c) */
        bool ip_only = !(sample->present & FU_PERF_SAMPLE_CALLCHAIN);
        for (size_t pad = comm_len; ip_only && pad < 16; pad++)
            put(&out, " ", 1);
        put(&out, comm, comm_len);
        put(&out, " ", 1);
        put_sdec(&out, (int32_t)sample->tid, 5);
        put(&out, " ", 1);
        put_udec(&out, sample->time / 1000000000u, 5, ' ');
        put(&out, ".", 1);
        put_udec(&out, sample->time % 1000000000u / 1000u, 6, '0');
        if (ip_only) {
            ok = render_ip_line(self, s, &out);
            ok = ok && flush(&out, write, false);
            continue;
        }
        put(&out, ": \n", 3);
        for (uint32_t k = self->bounds[2 * s]; k < self->bounds[2 * s + 2]; k++) {
            const frame_rec *f = &self->frames[self->frame_ids[k]];
            if (!fu_growing_reserve(&out, f->line_len)) {
                PyErr_NoMemory();
                ok = false;
                break;
            }
            put(&out, self->lines.data + f->line_offset, f->line_len);
        }
        ok = ok && fu_growing_reserve(&out, 1);
        if (ok)
            put(&out, "\n", 1);
        else if (!PyErr_Occurred())
            PyErr_NoMemory();
        ok = ok && flush(&out, write, false);
    }
    ok = ok && flush(&out, write, true);
    free(out.data);
    return ok ? Py_NewRef(Py_None) : NULL;
}

/* ---- folded stacks ------------------------------------------------------------------------------ */

typedef struct stack_rec {
    size_t offset, len; /* into the pool */
    uint64_t count;
    uint32_t order;
} stack_rec;

typedef struct stack_ctx {
    const fu_growing *pool;
    const stack_rec *stacks;
} stack_ctx;

static bool stack_equal(const void *ctx, uint32_t i, const void *key)
{
    const stack_ctx *c = ctx;
    const stack_rec *s = &c->stacks[i];
    const fu_growing *k = key;
    return s->len == k->len && memcmp(c->pool->data + s->offset, k->data, k->len) == 0;
}

static int by_count_then_order(const void *a, const void *b)
{
    const stack_rec *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* A frame's folded name: its symbol, else "[unknown DSO-BASENAME]". */
static bool append_folded_name(const UnwoundObject *self, const frame_rec *f, fu_growing *out)
{
    if (f->has_symbol && f->name_len)
        return fu_growing_append(out, f->name, f->name_len);
    const char *dso;
    size_t len;
    frame_dso(self, f, &dso, &len);
    for (size_t i = len; i > 0; i--)
        if (dso[i - 1] == '/') {
            dso += i;
            len -= i;
            break;
        }
    return fu_growing_append(out, "[unknown ", 9) && fu_growing_append(out, dso, len) &&
           fu_growing_append(out, "]", 1);
}

/* Whether a stack with this outcome is whole: the walk reached the end, or the frames are the
 * kernel's callchain or the IP alone (nothing was walked that could stop early). */
static bool stack_complete(const char *outcome, size_t len)
{
    static const char *const whole[] = {"end", "callchain", "ip_only"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (len == strlen(whole[i]) && memcmp(outcome, whole[i], len) == 0)
            return true;
    return false;
}

/* folded(write, by_count=True): "comm;[outcome;]root;...;leaf count" lines, most frequent first
 * (ties in order of first appearance; by_count False: all in order of first appearance). A stack
 * that did not reach its end ("end") is rooted at "[outcome]" so that it is never drawn as a
 * complete one; a sample without user frames has no such root. */
static PyObject *unwound_folded(UnwoundObject *self, PyObject *args)
{
    PyObject *write;
    int by_count = 1;
    if (!PyArg_ParseTuple(args, "O|p", &write, &by_count))
        return NULL;
    fu_growing pool = {0}, line = {0}, stacks = {0}, out = {0};
    fu_index_set index = {0};
    bool ok = true;
    for (size_t s = 0; ok && s < self->sample_count; s++) {
        const char *comm;
        size_t comm_len;
        comm_of(self, s, &comm, &comm_len);
        line.len = 0;
        ok = fu_growing_append(&line, comm, comm_len);
        uint32_t kernel = self->bounds[2 * s], user = self->bounds[2 * s + 1], end = self->bounds[2 * s + 2];
        const char *outcome = "";
        Py_ssize_t outcome_len = 0;
        if (ok && end > user) {
            outcome = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(self->outcome_names, self->outcomes[s]), &outcome_len);
            if (!outcome)
                goto fail;
            if (!stack_complete(outcome, (size_t)outcome_len))
                ok = fu_growing_append(&line, ";[", 2) && fu_growing_append(&line, outcome, (size_t)outcome_len) &&
                     fu_growing_append(&line, "]", 1);
        }
        for (uint32_t k = end; ok && k > kernel; k--)
            ok = fu_growing_append(&line, ";", 1) &&
                 append_folded_name(self, &self->frames[self->frame_ids[k - 1]], &line);
        if (!ok)
            break;
        stack_ctx ctx = {&pool, (const stack_rec *)stacks.data};
        uint64_t hash = fu_hash_bytes(line.data, line.len, 6);
        uint32_t found = fu_index_find(&index, hash, stack_equal, &ctx, &line);
        if (found != FU_INDEX_NONE) {
            ((stack_rec *)stacks.data)[found].count++;
            continue;
        }
        stack_rec rec = {pool.len, line.len, 1, (uint32_t)(stacks.len / sizeof rec)};
        ok = stacks.len / sizeof rec < FU_INDEX_NONE - 1 && fu_growing_append(&pool, line.data, line.len) &&
             fu_growing_append(&stacks, &rec, sizeof rec) && fu_index_insert(&index, hash, rec.order);
    }
    size_t count = stacks.len / sizeof(stack_rec);
    if (ok && count && by_count)
        qsort(stacks.data, count, sizeof(stack_rec), by_count_then_order);
    for (size_t i = 0; ok && i < count; i++) {
        const stack_rec *rec = &((const stack_rec *)stacks.data)[i];
        ok = fu_growing_reserve(&out, rec->len + 24);
        if (ok) {
            put(&out, pool.data + rec->offset, rec->len);
            put(&out, " ", 1);
            put_udec(&out, rec->count, 0, ' ');
            put(&out, "\n", 1);
            if (!flush(&out, write, false))
                goto fail;
        }
    }
    if (!ok) {
        PyErr_NoMemory();
        goto fail;
    }
    if (!flush(&out, write, true))
        goto fail;
    free(pool.data);
    free(line.data);
    free(stacks.data);
    free(out.data);
    fu_index_free(&index);
    Py_RETURN_NONE;
fail:
    free(pool.data);
    free(line.data);
    free(stacks.data);
    free(out.data);
    fu_index_free(&index);
    return NULL;
}

/* ---- statistics and the Python API ------------------------------------------------------------- */

/* A dict {key: count} of the non-zero counts. */
static PyObject *count_dict(const uint64_t *counts, size_t n)
{
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        if (!counts[i])
            continue;
        PyObject *key = PyLong_FromSize_t(i), *value = PyLong_FromUnsignedLongLong(counts[i]);
        if (!key || !value || PyDict_SetItem(dict, key, value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return dict;
}

/* statistics() -> (samples with user frames, user frames, {outcome code: samples},
 *                  {user frames per sample: samples}) */
static PyObject *unwound_statistics(UnwoundObject *self, PyObject *unused)
{
    uint64_t by_outcome[OUTCOME_CODES] = {0}, unwound = 0, frames = 0;
    uint32_t deepest = 0;
    for (size_t s = 0; s < self->sample_count; s++) {
        uint32_t depth = self->bounds[2 * s + 2] - self->bounds[2 * s + 1];
        deepest = depth > deepest ? depth : deepest;
    }
    uint64_t *by_depth = calloc((size_t)deepest + 1, sizeof *by_depth);
    if (!by_depth)
        return PyErr_NoMemory();
    for (size_t s = 0; s < self->sample_count; s++) {
        uint32_t depth = self->bounds[2 * s + 2] - self->bounds[2 * s + 1];
        by_outcome[self->outcomes[s]]++;
        by_depth[depth]++;
        unwound += depth > 0;
        frames += depth;
    }
    PyObject *outcomes = count_dict(by_outcome, OUTCOME_CODES);
    PyObject *depths = outcomes ? count_dict(by_depth, (size_t)deepest + 1) : NULL;
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
    if (!py_core_index_arg(arg, self->sample_count, &i))
        return NULL;
    const fu_perf_sample *s = &self->samples[i];
    const char *comm;
    size_t comm_len;
    comm_of(self, i, &comm, &comm_len);
    PyObject *time = s->present & FU_PERF_SAMPLE_TIME ? PyLong_FromUnsignedLongLong(s->time) : Py_NewRef(Py_None);
    return Py_BuildValue("(y#iiNBNN)", comm, (Py_ssize_t)comm_len, (int)(int32_t)s->pid, (int)(int32_t)s->tid, time,
                         self->outcomes[i], id_tuple(self->frame_ids, self->bounds[2 * i], self->bounds[2 * i + 1]),
                         id_tuple(self->frame_ids, self->bounds[2 * i + 1], self->bounds[2 * i + 2]));
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
    if (!py_core_index_arg(arg, self->frame_count, &j))
        return NULL;
    const frame_rec *f = &self->frames[j];
    const char *dso;
    size_t dso_len;
    frame_dso(self, f, &dso, &dso_len);
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
    return PyLong_FromSize_t(which ? self->frame_count : self->sample_count);
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
    if (PyModule_AddFunctions(module, perf_script_methods) < 0)
        return -1;
    return 0;
}
