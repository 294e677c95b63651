/* The CFI stages' binding: CfiTable, parse_eh_frame_hdr.
 *
 * CfiTable(data, kind, address, address_size=8, text_base=0, data_base=0, segments=())
 *   parses and evaluates one .eh_frame or .debug_frame section, with the GIL released. The
 *   object keeps the section's buffer alive (expressions are referenced in place).
 * Bulk data leaves as bytes (rows as packed arrays); per-entry accessors exist for convenience.
 */
#include "py_core.h"

#include "cfi.h"

typedef struct CfiTableObject {
    py_core_object base; /* payload: &table once parsed and evaluated */
    fu_cfi_table table;
    Py_buffer data;
    py_core_segments segments; /* for DW_EH_PE_indirect pointers */
    bool parsed;
} CfiTableObject;

static void table_dealloc(CfiTableObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->parsed)
        fu_cfi_table_free(&self->table);
    if (self->data.obj)
        PyBuffer_Release(&self->data);
    py_core_segments_release(&self->segments);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static int table_init(CfiTableObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "kind", "address", "address_size", "text_base", "data_base",
                             "segments", "ranges", NULL};
    int kind = 0, address_size = 8;
    unsigned long long address = 0, text_base = 0, data_base = 0;
    PyObject *segments = NULL, *ranges_arg = NULL;
    if (self->parsed || self->data.obj) {
        PyErr_SetString(PyExc_RuntimeError, "CfiTable is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*iK|iKKOO", kwlist, &self->data, &kind, &address,
                                     &address_size, &text_base, &data_base, &segments, &ranges_arg))
        return -1;
    Py_buffer ranges = {0}; /* u64 pairs: only the FDEs lookups there can return (cfi.h) */
    if (ranges_arg && ranges_arg != Py_None) {
        if (PyObject_GetBuffer(ranges_arg, &ranges, PyBUF_SIMPLE) < 0)
            return -1;
        if (ranges.len % 16) {
            PyBuffer_Release(&ranges);
            PyErr_SetString(PyExc_ValueError, "ranges must be bytes of (start, end) u64 pairs");
            return -1;
        }
    }
    if (kind != FU_SECTION_EH_FRAME && kind != FU_SECTION_DEBUG_FRAME) {
        PyErr_Format(PyExc_ValueError, "kind must be 0 (.eh_frame) or 1 (.debug_frame), not %d", kind);
        return -1;
    }
    if (segments && segments != Py_None && !py_core_segments_from(segments, &self->segments)) {
        if (ranges.obj)
            PyBuffer_Release(&ranges);
        return -1;
    }
    fu_section section = {
        .kind = (fu_section_kind)kind,
        .data = self->data.buf,
        .size = (uint64_t)self->data.len,
        .address = address,
        .text_base = text_base,
        .data_base = data_base,
        .address_size = (uint8_t)address_size,
        .segments = self->segments.segments,
        .segment_count = (size_t)self->segments.count,
    };
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_cfi_table_parse(&self->table, &section, &err);
    if (status == FU_OK)
        status = fu_cfi_table_evaluate_ranges(&self->table, ranges.obj ? ranges.buf : NULL, (size_t)ranges.len / 16,
                                              &err);
    Py_END_ALLOW_THREADS
    if (ranges.obj)
        PyBuffer_Release(&ranges);
    self->parsed = true;
    if (status != FU_OK) {
        if (status != FU_ERR_NOMEM && status != FU_ERR_EXPR)
            err.status = FU_ERR_CFI; /* as CfiError, whatever the stage */
        py_core_raise(&err);
        return -1;
    }
    self->base.payload = &self->table;
    return 0;
}

static PyObject *table_render(CfiTableObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"raw", "fd", "notes", NULL};
    int raw = 0, fd = -1;
    PyObject *notes_object = NULL, *notes_list = NULL;
    const char **notes = NULL;
    Py_ssize_t note_count = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|piO", kwlist, &raw, &fd, &notes_object))
        return NULL;
    if (notes_object && notes_object != Py_None) {
        if (raw) {
            PyErr_SetString(PyExc_ValueError, "notes are printed with the interpreted rows only");
            return NULL;
        }
        notes_list = PySequence_Fast(notes_object, "notes must be a sequence of str");
        if (!notes_list)
            return NULL;
        note_count = PySequence_Fast_GET_SIZE(notes_list);
        notes = PyMem_Calloc(note_count ? (size_t)note_count : 1, sizeof *notes);
        if (!notes) {
            Py_DECREF(notes_list);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t i = 0; i < note_count; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(notes_list, i);
            if (item != Py_None && !(notes[i] = PyUnicode_AsUTF8(item))) {
                PyMem_Free(notes);
                Py_DECREF(notes_list);
                return NULL;
            }
        }
    }
    fu_out out = {.fd = fd};
    Py_BEGIN_ALLOW_THREADS
    if (raw)
        fu_print_readelf_raw(&out, &self->table);
    else
        fu_print_readelf_interp_noted(&out, &self->table, notes, (size_t)note_count);
    fu_out_flush(&out);
    Py_END_ALLOW_THREADS
    PyMem_Free(notes);
    Py_XDECREF(notes_list);
    if (out.failed) {
        free(out.buf);
        if (fd >= 0)
            return PyErr_SetFromErrno(PyExc_OSError);
        return PyErr_NoMemory();
    }
    PyObject *result = fd >= 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(out.buf, (Py_ssize_t)out.len);
    free(out.buf);
    return result;
}

static PyObject *rule_tuple(const fu_rule *r)
{
    return Py_BuildValue("(iiLI)", r->kind, r->reg, (long long)r->value, r->expr_len);
}

/* state(i) -> (cfa_rule, ((column, rule), ...)), rule = (kind, reg, value, expr_len) */
static PyObject *table_state(CfiTableObject *self, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || (uint64_t)i >= self->table.state_count) {
        PyErr_Format(PyExc_IndexError, "state %zd out of range", i);
        return NULL;
    }
    const fu_state *st = fu_cfi_table_state(&self->table, (uint32_t)i);
    PyObject *columns = PyTuple_New(st->count);
    if (!columns)
        return NULL;
    for (unsigned k = 0; k < st->count; k++) {
        PyObject *item = Py_BuildValue("(iN)", self->table.column_pool[st->first + k],
                                       rule_tuple(&self->table.rule_pool[st->first + k]));
        if (!item) {
            Py_DECREF(columns);
            return NULL;
        }
        PyTuple_SET_ITEM(columns, k, item);
    }
    return Py_BuildValue("(NN)", rule_tuple(&st->cfa), columns);
}

/* entry(i) -> dict of the entry's fields */
static PyObject *table_entry(CfiTableObject *self, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || (uint64_t)i >= self->table.entry_count) {
        PyErr_Format(PyExc_IndexError, "entry %zd out of range", i);
        return NULL;
    }
    const fu_entry *e = &self->table.entries[i];
    PyObject *d = Py_BuildValue(
        "{s:i,s:K,s:K,s:K,s:i,s:K,s:K,s:K,s:O,s:O,s:I,s:I,s:z,s:K,s:K}",
        "kind", e->kind, "offset", (unsigned long long)e->offset, "length", (unsigned long long)e->length,
        "id", (unsigned long long)e->id, "offset_size", e->offset_size,
        "pc_begin", (unsigned long long)e->pc_begin, "pc_range", (unsigned long long)e->pc_range,
        "lsda", (unsigned long long)e->lsda, "has_lsda", e->has_lsda ? Py_True : Py_False,
        "discarded", e->discarded ? Py_True : Py_False,
        "first_row", e->first_row, "row_count", e->row_count, "error", e->error_message,
        "aug_data_offset", (unsigned long long)e->aug_data_offset,
        "aug_data_len", (unsigned long long)e->aug_data_len);
    if (!d)
        return NULL;
    PyObject *cie_entry = e->cie_entry == UINT32_MAX ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(e->cie_entry);
    if (!cie_entry || PyDict_SetItemString(d, "cie_entry", cie_entry) < 0) {
        Py_XDECREF(cie_entry);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(cie_entry);
    if (e->cie && e->header_ok) {
        const fu_cie_info *c = e->cie;
        /* bytes, not necessarily UTF-8: one character per byte */
        PyObject *augmentation = PyUnicode_DecodeLatin1(c->augmentation, c->augmentation_len, NULL);
        if (!augmentation) {
            Py_DECREF(d);
            return NULL;
        }
        PyObject *info = Py_BuildValue(
            "{s:i,s:N,s:K,s:L,s:K,s:i,s:i,s:i,s:O,s:K,s:O,s:i,s:i}", "version", c->version,
            "augmentation", augmentation, "code_align", (unsigned long long)c->code_align,
            "data_align", (long long)c->data_align, "ra_column", (unsigned long long)c->ra_column,
            "fde_encoding", c->fde_encoding, "lsda_encoding", c->lsda_encoding,
            "personality_encoding", c->personality_encoding,
            "signal_frame", c->signal_frame ? Py_True : Py_False,
            "personality", (unsigned long long)c->personality,
            "personality_unresolved", c->personality_indirect_unresolved ? Py_True : Py_False,
            "address_size", c->address_size,
            "segment_size", c->segment_size);
        if (!info || PyDict_SetItemString(d, "cie", info) < 0) {
            Py_XDECREF(info);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(info);
    }
    return d;
}

/* rows() -> (addresses: bytes of uint64, states: bytes of uint32) */
static PyObject *table_rows(CfiTableObject *self, PyObject *unused)
{
    return Py_BuildValue("(y#y#)", (const char *)self->table.row_address,
                         (Py_ssize_t)self->table.row_count * 8, (const char *)self->table.row_state,
                         (Py_ssize_t)self->table.row_count * 4);
}

/* entry_rows() -> (kind: bytes u8, first_row: bytes u32, row_count: bytes u32,
 *                  pc_begin: bytes u64, pc_range: bytes u64) per entry */
static PyObject *table_entry_arrays(CfiTableObject *self, PyObject *unused)
{
    uint32_t n = self->table.entry_count;
    PyObject *kind = PyBytes_FromStringAndSize(NULL, n);
    PyObject *first = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 4);
    PyObject *count = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 4);
    PyObject *begin = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
    PyObject *range = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
    if (!kind || !first || !count || !begin || !range) {
        Py_XDECREF(kind); Py_XDECREF(first); Py_XDECREF(count); Py_XDECREF(begin); Py_XDECREF(range);
        return NULL;
    }
    uint8_t *k = (uint8_t *)PyBytes_AS_STRING(kind);
    uint32_t *f = (uint32_t *)PyBytes_AS_STRING(first), *c = (uint32_t *)PyBytes_AS_STRING(count);
    uint64_t *b = (uint64_t *)PyBytes_AS_STRING(begin), *r = (uint64_t *)PyBytes_AS_STRING(range);
    for (uint32_t i = 0; i < n; i++) {
        const fu_entry *e = &self->table.entries[i];
        k[i] = e->has_error ? 0xff : e->kind;
        f[i] = e->first_row;
        c[i] = e->row_count;
        b[i] = e->pc_begin;
        r[i] = e->pc_range;
    }
    return Py_BuildValue("(NNNNN)", kind, first, count, begin, range);
}

/* lookup(pc) -> (entry_index, row_index) or None */
static PyObject *table_lookup(CfiTableObject *self, PyObject *arg)
{
    unsigned long long pc = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred())
        return NULL;
    int64_t fde;
    int64_t row = fu_cfi_table_find_row(&self->table, pc, &fde);
    if (row < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LL)", (long long)fde, (long long)row);
}

/* format_expression(offset, length, style) -> str; style "readelf" or "llvm" */
static PyObject *table_format_expression(CfiTableObject *self, PyObject *args)
{
    unsigned long long offset, length;
    const char *style = "readelf";
    if (!PyArg_ParseTuple(args, "KK|s", &offset, &length, &style))
        return NULL;
    if (offset > self->table.section.size || length > self->table.section.size - offset) {
        PyErr_SetString(PyExc_ValueError, "expression outside the section");
        return NULL;
    }
    fu_out out = {.fd = -1};
    const uint8_t *expr = self->table.section.data + offset;
    if (strcmp(style, "llvm") == 0)
        fu_expr_print_llvm(&out, expr, length, self->table.section.address_size);
    else
        fu_expr_print_readelf(&out, expr, length, self->table.section.address_size);
    PyObject *s = out.failed ? PyErr_NoMemory() : PyUnicode_FromStringAndSize(out.buf ? out.buf : "", (Py_ssize_t)out.len);
    free(out.buf);
    return s;
}

/* entry_at(offset) -> index of the entry starting at that section offset, or None */
static PyObject *table_entry_at(CfiTableObject *self, PyObject *arg)
{
    unsigned long long offset = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred())
        return NULL;
    uint32_t lo = 0, hi = self->table.entry_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (self->table.entries[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < self->table.entry_count && self->table.entries[lo].offset == offset)
        return PyLong_FromUnsignedLong(lo);
    Py_RETURN_NONE;
}

static PyObject *table_errors(CfiTableObject *self, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    for (uint32_t i = 0; i < self->table.entry_count; i++) {
        const fu_entry *e = &self->table.entries[i];
        if (!e->has_error)
            continue;
        PyObject *item = Py_BuildValue("(Ks)", (unsigned long long)e->offset,
                                       e->error_message ? e->error_message : "out of memory");
        if (!item || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
}

/* Bytes of memory the evaluated table holds (rows, states, rule pool, entries, index). */
static PyObject *table_memory(CfiTableObject *self, PyObject *unused)
{
    const fu_cfi_table *t = &self->table;
    uint64_t rows = (uint64_t)t->row_cap * (sizeof(uint64_t) + sizeof(uint32_t));
    uint64_t states = (uint64_t)t->state_cap * sizeof(fu_state) +
                      (uint64_t)t->pool_cap * (sizeof(fu_rule) + 1) + (uint64_t)t->state_index.cap * (sizeof(uint64_t) + sizeof(uint32_t));
    uint64_t entries = (uint64_t)t->entry_cap * sizeof(fu_entry) + (uint64_t)t->cie_cap * sizeof(fu_cie_info) +
                       (uint64_t)t->entry_count * 4;
    return Py_BuildValue("{s:K,s:K,s:K}", "rows", (unsigned long long)rows, "states",
                         (unsigned long long)states, "entries", (unsigned long long)entries);
}

static PyObject *get_count(CfiTableObject *self, void *which)
{
    const fu_cfi_table *t = &self->table;
    switch ((intptr_t)which) {
    case 0: return PyLong_FromUnsignedLong(t->entry_count);
    case 1: return PyLong_FromUnsignedLong(t->row_count);
    case 2: return PyLong_FromUnsignedLong(t->state_count);
    case 3: return PyLong_FromUnsignedLong(t->fde_count);
    case 4: return PyLong_FromUnsignedLong(t->error_count);
    default: return PyLong_FromUnsignedLong(t->cie_count);
    }
}

static PyGetSetDef table_getset[] = {
    {"entry_count", (getter)get_count, NULL, "number of entries (CIEs, FDEs, terminators)", (void *)0},
    {"row_count", (getter)get_count, NULL, "number of rows", (void *)1},
    {"state_count", (getter)get_count, NULL, "number of distinct row states", (void *)2},
    {"indexed_fde_count", (getter)get_count, NULL, "FDEs in the lookup index", (void *)3},
    {"error_count", (getter)get_count, NULL, "entries that failed to parse or evaluate", (void *)4},
    {"cie_count", (getter)get_count, NULL, "number of CIEs", (void *)5},
    {NULL},
};

static PyMethodDef table_methods[] = {
    {"render", (PyCFunction)(void (*)(void))table_render, METH_VARARGS | METH_KEYWORDS,
     "render(raw=False, fd=-1, notes=None): readelf -wF (or -wf with raw) text; written to fd if given, else "
     "returned as bytes; notes: a str (or None) per FDE, printed after its header line"},
    {"state", (PyCFunction)table_state, METH_O, "state(i) -> (cfa_rule, ((column, rule), ...))"},
    {"entry", (PyCFunction)table_entry, METH_O, "entry(i) -> dict of the entry's fields"},
    {"rows", (PyCFunction)table_rows, METH_NOARGS, "rows() -> (uint64 addresses, uint32 state ids) as bytes"},
    {"entry_arrays", (PyCFunction)table_entry_arrays, METH_NOARGS,
     "entry_arrays() -> (kind u8, first_row u32, row_count u32, pc_begin u64, pc_range u64) as bytes"},
    {"lookup", (PyCFunction)table_lookup, METH_O, "lookup(pc) -> (entry_index, row_index) or None"},
    {"format_expression", (PyCFunction)table_format_expression, METH_VARARGS,
     "format_expression(offset, length, style='readelf'|'llvm') -> str"},
    {"entry_at", (PyCFunction)table_entry_at, METH_O, "entry_at(offset) -> entry index or None"},
    {"errors", (PyCFunction)table_errors, METH_NOARGS, "errors() -> [(entry_offset, message)]"},
    {"memory", (PyCFunction)table_memory, METH_NOARGS, "memory() -> bytes held, by part"},
    {NULL},
};

static PyType_Slot table_slots[] = {
    {Py_tp_dealloc, table_dealloc},
    {Py_tp_init, table_init},
    {Py_tp_methods, table_methods},
    {Py_tp_getset, table_getset},
    {Py_tp_doc, "One parsed and evaluated CFI section (see fastunwind.cfi for the Python API)."},
    {0, NULL},
};

static PyType_Spec table_spec = {
    .name = "fastunwind._core.CfiTable",
    .basicsize = sizeof(CfiTableObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = table_slots,
};

/* parse_eh_frame_hdr(data, address, eh_frame_address=0, eh_frame_size=0)
 *   -> (version, eh_frame_ptr_encoding, fde_count_encoding, table_encoding, eh_frame_ptr,
 *       entries: bytes of uint64 pairs (initial location, FDE address), absolute svmas) */
static PyObject *parse_eh_frame_hdr(PyObject *module, PyObject *args)
{
    Py_buffer data;
    unsigned long long address, eh_frame_address = 0, eh_frame_size = 0;
    if (!PyArg_ParseTuple(args, "y*K|KK", &data, &address, &eh_frame_address, &eh_frame_size))
        return NULL;
    fu_hdr hdr;
    fu_error err = {0};
    if (fu_hdr_parse(&hdr, data.buf, (uint64_t)data.len, address, eh_frame_address, eh_frame_size, &err) != FU_OK) {
        PyBuffer_Release(&data);
        return py_core_raise(&err);
    }
    PyObject *entries = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(hdr.count * 16));
    if (!entries) {
        PyBuffer_Release(&data);
        return NULL;
    }
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(entries);
    for (uint64_t i = 0; i < hdr.count; i++)
        fu_hdr_entry(&hdr, i, &out[2 * i], &out[2 * i + 1]);
    PyBuffer_Release(&data);
    return Py_BuildValue("(iiiiKN)", hdr.version, hdr.eh_frame_ptr_encoding, hdr.fde_count_encoding,
                         hdr.table_encoding, (unsigned long long)hdr.eh_frame_ptr, entries);
}

static PyMethodDef cfi_functions[] = {
    {"parse_eh_frame_hdr", parse_eh_frame_hdr, METH_VARARGS,
     "parse_eh_frame_hdr(data, address, eh_frame_address=0, eh_frame_size=0) -> header fields and entries"},
    {NULL},
};

static const char *rule_kind_name(int kind) { return fu_rule_kind_name(kind); }

/* RULE_KINDS, the names by code, and RULE_<NAME> for each code (fastunwind.cfi.RuleKind's values). */
static int add_rule_kinds(PyObject *module)
{
    if (py_core_add_names(module, "RULE_KINDS", FU_RULE_KIND_COUNT, rule_kind_name) < 0)
        return -1;
    for (int kind = 0; kind < FU_RULE_KIND_COUNT; kind++) {
        char name[32];
        snprintf(name, sizeof name, "RULE_%s", fu_rule_kind_name(kind));
        if (PyModule_AddIntConstant(module, name, kind) < 0)
            return -1;
    }
    return 0;
}

int py_cfi_init(PyObject *module)
{
    if (py_core_add_type(module, PY_CFI_TABLE, &table_spec) < 0 || PyModule_AddFunctions(module, cfi_functions) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "MAX_COLUMNS", FU_MAX_COLUMNS) < 0 ||
        PyModule_AddIntConstant(module, "MAX_STATE_STACK", FU_MAX_STATE_STACK) < 0 ||
        PyModule_AddIntConstant(module, "CFI_MAX_SELECTED_RANGES", FU_CFI_MAX_SELECTED_RANGES) < 0 ||
        PyModule_AddIntConstant(module, "STATE_SIZE", sizeof(fu_state)) < 0)
        return -1;
    return add_rule_kinds(module);
}
