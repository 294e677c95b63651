/* The compact table's Python binding.
 *
 * build_compact_table(eh_frame, debug_frame, key_kind, key, view=None, origins=b"", synth=0) -> bytes
 *   builds from a module's CfiTable objects (either may be None) and serializes, GIL released; with
 *   a view (a CfiTable of the module's rows with the code's word where its CFI is missing or wrong,
 *   its FDE k of origin origins[k]: fu_compact_overlay_of_table) and its synth mode | version,
 *   the view's corrected and synthesized rows laid over the module's own.
 * CompactTable(buffer)
 *   validates a serialized table (bytes, or an mmap of a cached file) and keeps the buffer alive
 *   while an AddressSpace uses it. A corrupt, truncated or foreign buffer raises
 *   fastunwind.errors.CompactTableError naming the first problem.
 */
#include "py_core.h"

#include "compact_table.h"

typedef struct CompactTableObject {
    py_core_object base; /* payload: &table once opened */
    fu_compact_table table;
    Py_buffer data;
    bool opened;
} CompactTableObject;

static PyObject *build_compact_table(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"eh_frame", "debug_frame", "key_kind", "key", "view", "origins", "synth", NULL};
    PyObject *eh, *debug, *view = Py_None;
    unsigned int key_kind, synth = FU_COMPACT_SYNTH_OFF;
    Py_buffer key = {0}, origins = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOIy*|Oy*I", kwlist, &eh, &debug, &key_kind, &key, &view, &origins,
                                     &synth))
        return NULL;
    PyObject *result = NULL;
    const fu_cfi_table *eh_table = NULL, *debug_table = NULL, *view_table = NULL;
    if ((eh != Py_None && !(eh_table = py_core_payload(module, PY_CFI_TABLE, eh))) ||
        (debug != Py_None && !(debug_table = py_core_payload(module, PY_CFI_TABLE, debug))) ||
        (view != Py_None && !(view_table = py_core_payload(module, PY_CFI_TABLE, view))))
        goto done;
    if (key_kind != FU_COMPACT_KEY_BUILD_ID && key_kind != FU_COMPACT_KEY_FILE_HASH) {
        PyErr_Format(PyExc_ValueError, "key_kind must be %d (build-id) or %d (file hash), not %u",
                     FU_COMPACT_KEY_BUILD_ID, FU_COMPACT_KEY_FILE_HASH, key_kind);
        goto done;
    }
    if ((synth == FU_COMPACT_SYNTH_OFF) != !view_table) {
        PyErr_SetString(PyExc_ValueError, "a view is given with a synth mode, and only then");
        goto done;
    }
    fu_compact_overlay overlay = {NULL, 0, synth};
    fu_compact_overlay_row *overlay_rows = NULL;
    fu_compact_build build;
    fu_error err = {0};
    uint8_t *buf = NULL;
    size_t size = 0;
    fu_status status = FU_OK;
    Py_BEGIN_ALLOW_THREADS
    if (view_table)
        status = fu_compact_overlay_of_table(view_table, origins.buf, (size_t)origins.len, &overlay_rows,
                                             &overlay.count, &err);
    overlay.rows = overlay_rows;
    if (status == FU_OK)
        status = fu_compact_build_tables(&build, eh_table, debug_table, view_table ? &overlay : NULL, &err);
    if (status == FU_OK) {
        status = fu_compact_serialize(&build, key_kind, key.buf, (size_t)key.len, synth, &buf, &size, &err);
        fu_compact_build_free(&build);
    }
    free(overlay_rows);
    Py_END_ALLOW_THREADS
    if (status != FU_OK) {
        py_core_raise(&err);
        goto done;
    }
    result = PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)size);
    free(buf);
done:
    PyBuffer_Release(&key);
    if (origins.obj)
        PyBuffer_Release(&origins);
    return result;
}

static void compact_dealloc(CompactTableObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->data.obj)
        PyBuffer_Release(&self->data);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static int compact_init(CompactTableObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buffer", NULL};
    if (self->data.obj) {
        PyErr_SetString(PyExc_RuntimeError, "CompactTable is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*", kwlist, &self->data))
        return -1;
    fu_error err = {0};
    if (fu_compact_open(&self->table, self->data.buf, (size_t)self->data.len, &err) != FU_OK) {
        py_core_raise(&err);
        PyBuffer_Release(&self->data);
        return -1;
    }
    self->opened = true;
    self->base.payload = &self->table;
    return 0;
}

static bool check_opened(CompactTableObject *self)
{
    if (!self->opened)
        PyErr_SetString(PyExc_RuntimeError, "CompactTable is not initialized");
    return self->opened;
}


static PyObject *rule_dict(const fu_compact_rule *r)
{
    PyObject *saved = PyDict_New(), *saved_at_rbp = PyDict_New();
    if (!saved || !saved_at_rbp) {
        Py_XDECREF(saved);
        Py_XDECREF(saved_at_rbp);
        return NULL;
    }
    for (unsigned i = 0; i < FU_COMPACT_SAVED_REGISTERS; i++) {
        int8_t by_8 = r->saved_offset_by_8[i];
        if (by_8 == FU_COMPACT_KEEP)
            continue;
        bool at_rbp = fu_compact_slot_at_rbp(by_8);
        PyObject *key = PyLong_FromLong(fu_compact_saved_register[i]);
        PyObject *value = by_8 == FU_COMPACT_UNDEFINED ? PyUnicode_FromString("undefined")
                          : at_rbp                     ? PyLong_FromLongLong(fu_compact_rbp_slot_offset(by_8))
                                                       : PyLong_FromLong(by_8 * 8);
        int failed = !key || !value || PyDict_SetItem(at_rbp ? saved_at_rbp : saved, key, value) < 0;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (failed) {
            Py_DECREF(saved);
            Py_DECREF(saved_at_rbp);
            return NULL;
        }
    }
    PyObject *ra = r->ra_offset_by_8 == FU_COMPACT_KEEP || r->ra_offset_by_8 == FU_COMPACT_UNDEFINED
                       ? Py_NewRef(Py_None)
                       : PyLong_FromLong(r->ra_offset_by_8 * 8);
    return Py_BuildValue("{s:s,s:i,s:i,s:N,s:N,s:N,s:i,s:i}", "cfa", fu_compact_cfa_kind_name(r->cfa_kind),
                         "register", r->cfa_register, "offset", r->cfa_offset, "ra_offset", ra, "saved", saved,
                         "saved_at_rbp", saved_at_rbp, "origin", r->origin, "kept_caller_saved", r->kept_caller_saved);
}

/* rule(i) -> {"cfa": kind, "register", "offset", "ra_offset": bytes or None, "saved": {reg: offset from
 *             the CFA}, "saved_at_rbp": {reg: offset from rbp}, "origin": fu_compact_origin,
 *             "kept_caller_saved": bit per register} */
static PyObject *compact_rule(CompactTableObject *self, PyObject *arg)
{
    if (!check_opened(self))
        return NULL;
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || (uint64_t)i >= self->table.header->rule_count) {
        PyErr_Format(PyExc_IndexError, "rule %zd out of range", i);
        return NULL;
    }
    return rule_dict(&self->table.rules[i]);
}

/* lookup(svma) -> (row index, rule index) or None */
static PyObject *compact_lookup(CompactTableObject *self, PyObject *arg)
{
    if (!check_opened(self))
        return NULL;
    unsigned long long pc = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred())
        return NULL;
    uint32_t row;
    const fu_compact_rule *rule = fu_compact_find(&self->table, pc, &row);
    if (!rule)
        Py_RETURN_NONE;
    return Py_BuildValue("(In)", row, (Py_ssize_t)(rule - self->table.rules));
}

/* rows() -> (row starts as svma: bytes of u64, rule indexes: bytes of u32) */
static PyObject *compact_rows(CompactTableObject *self, PyObject *unused)
{
    if (!check_opened(self))
        return NULL;
    uint32_t n = self->table.row_count;
    PyObject *starts = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
    PyObject *rules = starts ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 4) : NULL;
    if (!rules) {
        Py_XDECREF(starts);
        return NULL;
    }
    uint64_t *s = (uint64_t *)PyBytes_AS_STRING(starts);
    uint32_t *r = (uint32_t *)PyBytes_AS_STRING(rules);
    for (uint32_t i = 0; i < n; i++) {
        s[i] = self->table.base_svma + self->table.row_start[i];
        r[i] = self->table.rule_index16 ? self->table.rule_index16[i] : self->table.rule_index32[i];
    }
    return Py_BuildValue("(NN)", starts, rules);
}

/* slow_ranges() -> bytes of (start, end) u64 svma pairs, or None past CFI_MAX_SELECTED_RANGES:
 * where the walker asks the DWARF tables (fu_compact_slow_ranges) */
static PyObject *compact_slow_ranges(CompactTableObject *self, PyObject *unused)
{
    if (!check_opened(self))
        return NULL;
    uint64_t ranges[2 * FU_CFI_MAX_SELECTED_RANGES];
    size_t n = fu_compact_slow_ranges(&self->table, ranges, FU_CFI_MAX_SELECTED_RANGES);
    if (n > FU_CFI_MAX_SELECTED_RANGES)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)ranges, (Py_ssize_t)(16 * n));
}

/* benchmark_lookups(addresses: bytes of u64 svma, passes, two_level=True) -> (ns total, checksum)
 * Times fu_compact_find (two_level) over the addresses, or a plain binary search over all the row
 * starts (the format's first design): the measurement behind the page index (compact_table.h). */
static PyObject *compact_benchmark_lookups(CompactTableObject *self, PyObject *args)
{
    Py_buffer addresses;
    Py_ssize_t passes;
    int two_level = 1;
    if (!check_opened(self) || !PyArg_ParseTuple(args, "y*n|p", &addresses, &passes, &two_level))
        return NULL;
    const fu_compact_table *t = &self->table;
    size_t n = (size_t)addresses.len / 8;
    const uint64_t *pcs = addresses.buf;
    uint64_t checksum = 0, elapsed = 0;
    Py_BEGIN_ALLOW_THREADS
    elapsed = fu_compact_benchmark_lookups(t, pcs, n, passes > 0 ? (size_t)passes : 0, two_level, &checksum);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&addresses);
    return Py_BuildValue("(KK)", (unsigned long long)elapsed, (unsigned long long)checksum);
}

static PyObject *compact_get(CompactTableObject *self, void *which)
{
    if (!check_opened(self))
        return NULL;
    const fu_compact_header *h = self->table.header;
    switch ((intptr_t)which) {
    case 0: return PyLong_FromUnsignedLong(h->row_count);
    case 1: return PyLong_FromUnsignedLong(h->rule_count);
    case 2: return PyLong_FromUnsignedLong(h->slow_row_count);
    case 3: return PyLong_FromUnsignedLong(h->no_info_row_count);
    case 4: return PyLong_FromUnsignedLongLong(h->base_svma);
    case 5: return PyLong_FromUnsignedLongLong(h->end_svma);
    case 6: return PyLong_FromUnsignedLongLong(h->file_size);
    case 7: return PyBytes_FromStringAndSize((const char *)h->key, h->key_size);
    case 8: return PyLong_FromUnsignedLong(h->key_kind);
    case 9:
        return h->eh_frame_size == FU_COMPACT_NO_SECTION ? Py_NewRef(Py_None)
                                                         : PyLong_FromUnsignedLongLong(h->eh_frame_size);
    case 10:
        return h->debug_frame_size == FU_COMPACT_NO_SECTION ? Py_NewRef(Py_None)
                                                            : PyLong_FromUnsignedLongLong(h->debug_frame_size);
    case 11: return PyLong_FromUnsignedLongLong(h->slow_bytes);
    case 12: return PyLong_FromUnsignedLongLong(h->covered_bytes);
    case 13: return PyLong_FromUnsignedLong(h->rule_index_size);
    case 14: return PyLong_FromUnsignedLong(h->page_count);
    case 15: return PyLong_FromUnsignedLong(h->synth);
    case 16:
        return Py_BuildValue("(III)", h->origin_row_count[0], h->origin_row_count[1], h->origin_row_count[2]);
    case 17:
        return Py_BuildValue("(KKK)", (unsigned long long)h->origin_bytes[0], (unsigned long long)h->origin_bytes[1],
                             (unsigned long long)h->origin_bytes[2]);
    default: Py_RETURN_NONE;
    }
}

static PyGetSetDef compact_getset[] = {
    {"row_count", (getter)compact_get, NULL, "rows, gaps included", (void *)0},
    {"rule_count", (getter)compact_get, NULL, "entries of the rule dictionary", (void *)1},
    {"slow_row_count", (getter)compact_get, NULL, "rows on the slow path (DWARF tables)", (void *)2},
    {"no_info_row_count", (getter)compact_get, NULL, "rows of gaps between FDEs", (void *)3},
    {"base_svma", (getter)compact_get, NULL, "row starts are relative to it", (void *)4},
    {"end_svma", (getter)compact_get, NULL, "end of the last row", (void *)5},
    {"size", (getter)compact_get, NULL, "bytes of the serialized table", (void *)6},
    {"key", (getter)compact_get, NULL, "the build-id (or file hash) it was built for", (void *)7},
    {"key_kind", (getter)compact_get, NULL, "1: build-id, 2: hash of path, size and mtime", (void *)8},
    {"eh_frame_size", (getter)compact_get, NULL, "bytes of the .eh_frame it was built from, or None", (void *)9},
    {"debug_frame_size", (getter)compact_get, NULL, "bytes of the .debug_frame it was built from, or None",
     (void *)10},
    {"slow_bytes", (getter)compact_get, NULL, "bytes of code covered by slow rows", (void *)11},
    {"covered_bytes", (getter)compact_get, NULL, "bytes of code covered by CFI", (void *)12},
    {"rule_index_size", (getter)compact_get, NULL, "2 (u16) or 4 (u32)", (void *)13},
    {"page_count", (getter)compact_get, NULL, "entries of the page index", (void *)14},
    {"synth", (getter)compact_get, NULL, "COMPACT_SYNTH_OFF, or a mode | COMPACT_SYNTH_VERSION << 8", (void *)15},
    {"origin_rows", (getter)compact_get, NULL, "rows by origin (declared, corrected, synthesized)", (void *)16},
    {"origin_bytes", (getter)compact_get, NULL, "bytes of code covered, by origin", (void *)17},
    {NULL},
};

static PyMethodDef compact_methods[] = {
    {"rule", (PyCFunction)compact_rule, METH_O, "rule(i) -> dict"},
    {"lookup", (PyCFunction)compact_lookup, METH_O, "lookup(svma) -> (row index, rule index) or None"},
    {"rows", (PyCFunction)compact_rows, METH_NOARGS, "rows() -> (u64 svma starts, u32 rule indexes) as bytes"},
    {"slow_ranges", (PyCFunction)compact_slow_ranges, METH_NOARGS,
     "slow_ranges() -> bytes of (start, end) u64 svma pairs of the slow rows, merged; None past CFI_MAX_SELECTED_RANGES"},
    {"benchmark_lookups", (PyCFunction)compact_benchmark_lookups, METH_VARARGS,
     "benchmark_lookups(addresses, passes, two_level=True) -> (ns, checksum)"},
    {NULL},
};

static PyType_Slot compact_slots[] = {
    {Py_tp_dealloc, compact_dealloc},
    {Py_tp_init, compact_init},
    {Py_tp_methods, compact_methods},
    {Py_tp_getset, compact_getset},
    {Py_tp_doc, "A validated compact unwind table (native/compact_table.h) over a buffer it keeps alive."},
    {0, NULL},
};

static PyType_Spec compact_spec = {
    .name = "fastunwind._core.CompactTable",
    .basicsize = sizeof(CompactTableObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = compact_slots,
};

static PyMethodDef compact_functions[] = {
    {"build_compact_table", (PyCFunction)(void (*)(void))build_compact_table, METH_VARARGS | METH_KEYWORDS,
     "build_compact_table(eh_frame, debug_frame, key_kind, key, view=None, origins=b'', synth=0) -> bytes (a "
     "serialized compact table)"},

    {NULL},
};

static const char *synth_mode_name(int mode) { return fu_compact_synth_mode_name((unsigned)mode); }

int py_compact_table_init(PyObject *module)
{
    if (py_core_add_type(module, PY_COMPACT_TABLE, &compact_spec) < 0)
        return -1;
    if (PyModule_AddFunctions(module, compact_functions) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "COMPACT_VERSION", FU_COMPACT_VERSION) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_KEY_BUILD_ID", FU_COMPACT_KEY_BUILD_ID) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_KEY_FILE_HASH", FU_COMPACT_KEY_FILE_HASH) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_HEADER_SIZE", sizeof(fu_compact_header)) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_RULE_SIZE", sizeof(fu_compact_rule)) < 0 ||
        py_core_add_names(module, "COMPACT_SYNTH_MODES", FU_COMPACT_SYNTH_MODES, synth_mode_name) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_SYNTH_VERSION", FU_COMPACT_SYNTH_VERSION) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_ORIGIN_DECLARED", FU_COMPACT_ORIGIN_DECLARED) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_ORIGIN_CORRECTED", FU_COMPACT_ORIGIN_CORRECTED) < 0 ||
        PyModule_AddIntConstant(module, "COMPACT_ORIGIN_SYNTHESIZED", FU_COMPACT_ORIGIN_SYNTHESIZED) < 0)
        return -1;
    static const uint8_t plt_expression[FU_COMPACT_PLT_EXPRESSION_SIZE] = FU_COMPACT_PLT_EXPRESSION;
    PyObject *plt = PyBytes_FromStringAndSize((const char *)plt_expression, sizeof plt_expression);
    if (!plt || PyModule_AddObject(module, "COMPACT_PLT_EXPRESSION", plt) < 0) {
        Py_XDECREF(plt);
        return -1;
    }
    return 0;
}
