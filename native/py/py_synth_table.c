/* The synthesized table's binding (native/core/synth_table.h), with the GIL released.
 *
 * synth_table(eh_frame, debug_frame, code, segments, noreturn, function_entries, mismatch_eh_frame,
 *             mismatch_debug_frame, uncovered, mode)
 *   eh_frame, debug_frame: the file's CfiTables (either None); code / segments: executable / all
 *   PT_LOAD segments as (vaddr, bytes); noreturn, function_entries: sorted uint64 buffers (as
 *   check_fdes takes them); mismatch_*: sorted uint32 entries of that table the check judged
 *   `mismatch` (used by SYNTH_REPAIR); uncovered: uint64 (start, end) pairs of code without CFI;
 *   mode: SYNTH_MISSING or SYNTH_REPAIR.
 *   -> (debug_frame, ranges, uncovered_results, counts): debug_frame, the view encoded as a
 *   `.debug_frame` section (CfiTable(debug_frame, DEBUG_FRAME, 0) reads it: its FDEs are the ranges,
 *   in order; build_compact_table takes that table); ranges, bytes of len(SYNTH_RANGE_FIELD_NAMES)
 *   uint64 per range in the order of SYNTH_RANGE_FIELD_NAMES; uncovered_results, per uncovered pair
 *   (start, end, decided, ranges, reason); counts, {"work", "corrected_kept_declared"}.
 */
#include "py_core.h"

#include "synth_table.h"

/* The uint64 fields of one range, in the order the ranges bytes hold them (the one place that
 * order is written: Python reads it from SYNTH_RANGE_FIELD_NAMES). */
#define RANGE_FIELDS 7
static const char *const RANGE_FIELD_NAMES[RANGE_FIELDS] = {"start", "end", "origin", "table", "entry", "rows",
                                                            "derived_rows"};
static const char *const ORIGIN_NAMES[] = {"declared", "corrected", "synthesized"};

static PyObject *ranges_bytes(const fu_synth_table *table)
{
    size_t count = fu_synth_table_range_count(table);
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * RANGE_FIELDS * 8));
    if (!bytes)
        return NULL;
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(bytes);
    const fu_synth_range *ranges = (const fu_synth_range *)table->ranges.data;
    for (size_t i = 0; i < count; i++) {
        const fu_synth_range *r = &ranges[i];
        uint64_t fields[RANGE_FIELDS] = {r->start, r->end, r->origin, r->table, r->entry, r->row_count,
                                         r->derived_rows};
        memcpy(out + i * RANGE_FIELDS, fields, sizeof fields);
    }
    return bytes;
}

static PyObject *uncovered_list(const fu_synth_table *table)
{
    size_t count = table->uncovered.len / sizeof(fu_synth_uncovered_result);
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (!list)
        return NULL;
    const fu_synth_uncovered_result *results = (const fu_synth_uncovered_result *)table->uncovered.data;
    for (size_t i = 0; i < count; i++) {
        const fu_synth_uncovered_result *r = &results[i];
        PyObject *item = Py_BuildValue("(KKOIs)", (unsigned long long)r->start, (unsigned long long)r->end,
                                       r->outcome == FU_SYNTH_DECIDED ? Py_True : Py_False, r->ranges, r->reason);
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyObject *synth_table(PyObject *module, PyObject *args)
{
    PyObject *eh_object, *debug_object, *code_object, *segments_object, *result = NULL;
    Py_buffer noreturn = {0}, entries = {0}, mismatch_eh = {0}, mismatch_debug = {0}, uncovered = {0};
    int mode;
    py_core_segments code = {0}, segments = {0};
    fu_synth_table table;
    memset(&table, 0, sizeof table);
    fu_buffer encoded = {0};
    if (!PyArg_ParseTuple(args, "OOOOy*y*y*y*y*i", &eh_object, &debug_object, &code_object, &segments_object,
                          &noreturn, &entries, &mismatch_eh, &mismatch_debug, &uncovered, &mode))
        return NULL;
    const fu_cfi_table *eh_frame = NULL, *debug_frame = NULL;
    if ((eh_object != Py_None && !(eh_frame = py_core_payload(module, PY_CFI_TABLE, eh_object))) ||
        (debug_object != Py_None && !(debug_frame = py_core_payload(module, PY_CFI_TABLE, debug_object))) ||
        !py_core_segments_from(code_object, &code) ||
        !py_core_segments_from(segments_object, &segments))
        goto cleanup;
    if (noreturn.len % 8 || entries.len % 8 || mismatch_eh.len % 4 || mismatch_debug.len % 4 || uncovered.len % 16 ||
        (mode != FU_SYNTH_MISSING && mode != FU_SYNTH_REPAIR)) {
        PyErr_SetString(PyExc_ValueError, "noreturn and function_entries must hold uint64 values, mismatch_* uint32 "
                                          "values, uncovered uint64 pairs; mode SYNTH_MISSING or SYNTH_REPAIR");
        goto cleanup;
    }
    fu_check_image image = {
        .code = code.segments, .code_count = (size_t)code.count,
        .segments = segments.segments, .segment_count = (size_t)segments.count,
        .noreturn = noreturn.buf, .noreturn_count = (size_t)noreturn.len / 8,
        .function_entries = entries.buf, .function_entry_count = (size_t)entries.len / 8,
        .tables = {eh_frame, debug_frame},
    };
    fu_synth_request request = {
        .image = &image, .mode = (fu_synth_mode)mode,
        .mismatch = {mismatch_eh.buf, mismatch_debug.buf},
        .mismatch_count = {(size_t)mismatch_eh.len / 4, (size_t)mismatch_debug.len / 4},
        .uncovered = uncovered.buf, .uncovered_count = (size_t)uncovered.len / 16,
    };
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_synth_table_build(&table, &request, &err);
    if (status == FU_OK)
        status = fu_synth_table_encode(&table, &encoded, &err);
    Py_END_ALLOW_THREADS
    if (status != FU_OK) {
        py_core_raise(&err);
        goto cleanup;
    }
    PyObject *section = py_core_bytes(encoded.data, encoded.len);
    PyObject *ranges = section ? ranges_bytes(&table) : NULL;
    PyObject *results = ranges ? uncovered_list(&table) : NULL;
    if (!results) {
        Py_XDECREF(section);
        Py_XDECREF(ranges);
        goto cleanup;
    }
    result = Py_BuildValue("(NNN{sKsI})", section, ranges, results, "work", (unsigned long long)table.work_done,
                           "corrected_kept_declared", table.corrected_kept_declared);
cleanup:
    fu_synth_table_free(&table);
    free(encoded.data);
    py_core_segments_release(&code);
    py_core_segments_release(&segments);
    PyBuffer_Release(&noreturn);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&mismatch_eh);
    PyBuffer_Release(&mismatch_debug);
    PyBuffer_Release(&uncovered);
    return result;
}

static const char *origin_name(int origin) { return ORIGIN_NAMES[origin]; }
static const char *range_field_name(int field) { return RANGE_FIELD_NAMES[field]; }

static PyMethodDef synth_table_functions[] = {
    {"synth_table", synth_table, METH_VARARGS,
     "synth_table(eh_frame, debug_frame, code, segments, noreturn, function_entries, mismatch_eh_frame, "
     "mismatch_debug_frame, uncovered, mode) -> (debug_frame, ranges, uncovered_results, counts)"},
    {NULL},
};

int py_synth_table_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, synth_table_functions) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "SYNTH_MISSING", FU_SYNTH_MISSING) < 0 ||
        PyModule_AddIntConstant(module, "SYNTH_REPAIR", FU_SYNTH_REPAIR) < 0 ||
        PyModule_AddIntConstant(module, "SYNTH_ROW_DERIVED", FU_SYNTH_ROW_DERIVED) < 0 ||
        PyModule_AddIntConstant(module, "SYNTH_MAX_RANGES", FU_SYNTH_TABLE_MAX_RANGES) < 0)
        return -1;
    if (py_core_add_names(module, "SYNTH_ORIGIN_NAMES", FU_ORIGIN_SYNTHESIZED + 1, origin_name) < 0 ||
        py_core_add_names(module, "SYNTH_RANGE_FIELD_NAMES", RANGE_FIELDS, range_field_name) < 0)
        return -1;
    return 0;
}
