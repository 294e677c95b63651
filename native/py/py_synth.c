/* The synth stage's binding: check_fdes (native/core/check.h over synth.h), with the GIL released.
 *
 * check_overlaps(table) -> bytes: per entry of the CfiTable, the uint32 index of another FDE its range
 *   meets, or 0xffffffff (check.h fu_check_overlaps): computed once, for every check_fdes of the table.
 *
 * check_fdes(table, entries, overlaps, code, segments, noreturn, function_entries, eh_frame, debug_frame,
 *            work, foreign_entries=b"")
 *   table: the CfiTable whose FDEs are checked; entries: their indices (uint32 buffer); overlaps:
 *   check_overlaps(table);
 *   code / segments: executable / all PT_LOAD segments as (vaddr, bytes); noreturn: sorted uint64
 *   buffer of addresses whose callees never return; function_entries: sorted uint64 buffer of known
 *   function entries (check.h fu_check_image); eh_frame, debug_frame: the image's CfiTables
 *   (or None) for call-target coverage; work: a writable 8-byte buffer counting the decoded
 *   instructions interpreted for the file, shared by the calls checking its chunks (native endian
 *   uint64, check.h FU_CHECK_MAX_FILE_INSTRUCTIONS).
 *   foreign_entries: sorted uint64 buffer of addresses other FDEs enter (check.h fu_check_image).
 *   -> (results: bytes of len(CHECK_RESULT_FIELD_NAMES) uint32 per FDE, named in order by
 *       CHECK_RESULT_FIELD_NAMES (RESULT_FIELD_NAMES below); details: [(position, reason, ((address, what, declared, derived), ...))]
 *       for every FDE whose verdict is not agree; uncovered: bytes of uint64 call targets no FDE covers;
 *       called_non_entry: bytes of uint64 call targets starting an FDE whose first row is not an entry row,
 *       foreign: bytes of uint64 jump targets and landing pads outside the FDE that names them)
 *
 * synth_function(code, start, noreturn=b"", segments=())
 *   interprets the function whose bytes are `code` at svma `start` from its entry state.
 *   -> (outcome, reason, rows, counts): outcome is SYNTH_DECIDED or SYNTH_UNDECIDED (with the
 *   reason); rows, one per reached instruction in address order, (address, cfa, columns): cfa and
 *   each column of SYNTH_COLUMNS a rule (kind, reg, value, 0) as CfiTable.state gives them; counts,
 *   fu_synth_counts as a dict. For tests and tools on one function: `check` never builds these.
 *
 * compare_decoders(code, address)
 *   the decoder's fast path held to Zydis on every instruction of `code` at svma `address`
 *   (fu_x86_compare_decoders) -> {instructions, fast, mismatches, first_mismatch, first_difference}.
 */
#include "py_core.h"

#include "check.h"

/* The uint32 fields of one FDE's result, in the order the results bytes hold them (the one place
 * that order is written: Python reads it from CHECK_RESULT_FIELD_NAMES). */
#define RESULT_FIELDS 9
static const char *const RESULT_FIELD_NAMES[RESULT_FIELDS] = {
    "entry", "verdict", "agree", "mismatch", "unknown", "unreached", "from_declared_entry", "finding_total",
    "skipped"};

static const fu_cfi_table *optional_table(PyObject *module, PyObject *object, bool *ok)
{
    *ok = true;
    if (object == Py_None)
        return NULL;
    const fu_cfi_table *t = py_core_payload(module, PY_CFI_TABLE, object);
    *ok = t != NULL;
    return t;
}

static PyObject *details_of(const fu_check_batch *batch)
{
    PyObject *details = PyList_New(0);
    if (!details)
        return NULL;
    const fu_check_finding *findings = (const fu_check_finding *)batch->findings.data;
    for (size_t i = 0; i < batch->count; i++) {
        const fu_check_fde_result *r = &batch->results[i];
        if (r->verdict == FU_CHECK_AGREE)
            continue;
        PyObject *list = PyTuple_New(r->finding_count);
        if (!list)
            goto fail;
        for (uint32_t k = 0; k < r->finding_count; k++) {
            const fu_check_finding *f = &findings[r->first_finding + k];
            PyObject *item = Py_BuildValue("(KIss)", (unsigned long long)f->address, f->what, f->declared, f->derived);
            if (!item) {
                Py_DECREF(list);
                goto fail;
            }
            PyTuple_SET_ITEM(list, k, item);
        }
        PyObject *entry = Py_BuildValue("(nsN)", (Py_ssize_t)i, r->reason, list);
        if (!entry || PyList_Append(details, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
    }
    return details;
fail:
    Py_DECREF(details);
    return NULL;
}

static PyObject *check_overlaps(PyObject *module, PyObject *arg)
{
    const fu_cfi_table *table = py_core_payload(module, PY_CFI_TABLE, arg);
    if (!table)
        return NULL;
    PyObject *partner = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)table->entry_count * 4);
    if (partner)
        fu_check_overlaps(table, (uint32_t *)PyBytes_AS_STRING(partner));
    return partner;
}

static PyObject *check_fdes(PyObject *module, PyObject *args)
{
    PyObject *table_object, *code_object, *segments_object, *eh_frame_object, *debug_frame_object;
    Py_buffer entries = {0}, overlaps = {0}, noreturn = {0}, function_entries = {0}, work = {0}, foreign_entries = {0};
    py_core_segments code = {0}, segments = {0};
    fu_check_batch batch;
    memset(&batch, 0, sizeof batch);
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "Oy*y*OOy*y*OOw*|y*", &table_object, &entries, &overlaps, &code_object,
                          &segments_object, &noreturn, &function_entries, &eh_frame_object, &debug_frame_object, &work,
                          &foreign_entries))
        return NULL;
    bool ok_eh, ok_debug;
    const fu_cfi_table *table = py_core_payload(module, PY_CFI_TABLE, table_object);
    const fu_cfi_table *eh_frame = optional_table(module, eh_frame_object, &ok_eh);
    const fu_cfi_table *debug_frame = optional_table(module, debug_frame_object, &ok_debug);
    if (!table || !ok_eh || !ok_debug || !py_core_segments_from(code_object, &code) ||
        !py_core_segments_from(segments_object, &segments))
        goto cleanup;
    if (entries.len % 4 || noreturn.len % 8 || function_entries.len % 8 || foreign_entries.len % 8 || work.len != 8 ||
        (uintptr_t)work.buf % 8 || (uintptr_t)overlaps.buf % 4 || overlaps.len != (Py_ssize_t)table->entry_count * 4) {
        PyErr_SetString(PyExc_ValueError, "entries must hold uint32 values, overlaps one aligned uint32 per entry "
                                          "of the table, noreturn, function_entries and foreign_entries uint64 "
                                          "values, work one aligned uint64");
        goto cleanup;
    }
    fu_check_image image = {
        .code = code.segments, .code_count = (size_t)code.count,
        .segments = segments.segments, .segment_count = (size_t)segments.count,
        .noreturn = noreturn.buf, .noreturn_count = (size_t)noreturn.len / 8,
        .function_entries = function_entries.buf, .function_entry_count = (size_t)function_entries.len / 8,
        .tables = {eh_frame, debug_frame},
        .foreign_entries = foreign_entries.buf, .foreign_entry_count = (size_t)foreign_entries.len / 8,
        .work_done = work.buf,
    };
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_check_fdes(&image, table, overlaps.buf, entries.buf, (size_t)entries.len / 4, &batch, &err);
    Py_END_ALLOW_THREADS
    if (status != FU_OK) {
        py_core_raise(&err);
        goto cleanup;
    }
    PyObject *results = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(batch.count * RESULT_FIELDS * 4));
    if (!results)
        goto cleanup;
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(results);
    for (size_t i = 0; i < batch.count; i++) {
        const fu_check_fde_result *r = &batch.results[i];
        uint32_t fields[RESULT_FIELDS] = {r->entry, r->verdict, r->agree, r->mismatch, r->unknown, r->unreached,
                                          r->from_declared_entry, r->finding_total,
                                          r->skipped};
        memcpy(out + i * RESULT_FIELDS, fields, sizeof fields);
    }
    PyObject *details = details_of(&batch);
    PyObject *uncovered = details ? py_core_bytes(batch.uncovered_calls.data, batch.uncovered_calls.len) : NULL;
    PyObject *called = uncovered ? py_core_bytes(batch.called_non_entry.data, batch.called_non_entry.len) : NULL;
    PyObject *foreign = called ? py_core_bytes(batch.foreign_entries.data, batch.foreign_entries.len) : NULL;
    if (!details || !uncovered || !called || !foreign) {
        Py_DECREF(results);
        Py_XDECREF(details);
        Py_XDECREF(uncovered);
        Py_XDECREF(called);
        goto cleanup;
    }
    result = Py_BuildValue("(NNNNN)", results, details, uncovered, called, foreign);
cleanup:
    fu_check_batch_free(&batch);
    py_core_segments_release(&code);
    py_core_segments_release(&segments);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&overlaps);
    PyBuffer_Release(&noreturn);
    PyBuffer_Release(&function_entries);
    PyBuffer_Release(&work);
    PyBuffer_Release(&foreign_entries);
    return result;
}

typedef struct row_sink {
    PyObject *rows;
    bool failed;
} row_sink;

static PyObject *rule_tuple(const fu_rule *r)
{
    return Py_BuildValue("(iiLI)", r->kind, r->reg, (long long)r->value, r->expr_len);
}

static bool collect_row(void *context, uint64_t address, const fu_x86_insn *insn, const fu_synth_state *state,
                        uint32_t changed)
{
    row_sink *sink = context;
    fu_synth_row row;
    fu_synth_derive_row(state, FU_X86_REG_NONE, &row);
    PyObject *columns = PyTuple_New(FU_SYNTH_COLUMN_COUNT);
    if (!columns) {
        sink->failed = true;
        return false;
    }
    for (unsigned k = 0; k < FU_SYNTH_COLUMN_COUNT; k++) {
        PyObject *rule = rule_tuple(&row.columns[k]);
        if (!rule) {
            Py_DECREF(columns);
            sink->failed = true;
            return false;
        }
        PyTuple_SET_ITEM(columns, k, rule);
    }
    PyObject *item = Py_BuildValue("(KNN)", (unsigned long long)address, rule_tuple(&row.cfa), columns);
    if (!item || PyList_Append(sink->rows, item) < 0) {
        Py_XDECREF(item);
        sink->failed = true;
        return false;
    }
    Py_DECREF(item);
    return true;
}

static PyObject *synth_function(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"code", "start", "noreturn", "segments", NULL};
    Py_buffer code = {0}, noreturn = {0};
    unsigned long long start;
    PyObject *segments_object = NULL, *result = NULL;
    py_core_segments segments = {0};
    fu_synth_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    row_sink sink = {PyList_New(0), false};
    if (!sink.rows)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*K|y*O", kwlist, &code, &start, &noreturn, &segments_object))
        goto cleanup;
    if ((noreturn.obj && noreturn.len % 8) ||
        (segments_object && !py_core_segments_from(segments_object, &segments)))
        goto cleanup_value;
    fu_synth_function function = {
        .start = start, .end = start + (uint64_t)code.len, .code = code.buf,
        .noreturn = noreturn.obj ? noreturn.buf : NULL, .noreturn_count = noreturn.obj ? (size_t)noreturn.len / 8 : 0,
        .segments = segments.segments, .segment_count = (size_t)segments.count, .entry = NULL};
    fu_synth_counts counts;
    char reason[FU_SYNTH_REASON_MAX];
    fu_synth_outcome outcome = fu_synth_run(&function, &scratch, collect_row, &sink, &counts, reason);
    if (sink.failed)
        goto cleanup;
    if (outcome == FU_SYNTH_NO_MEMORY) {
        PyErr_NoMemory();
        goto cleanup;
    }
    result = Py_BuildValue("(isO{sIsIsIsIsI})", (int)outcome, reason, sink.rows, "instructions", counts.instructions,
                           "reached", counts.reached, "blocks", counts.blocks, "jump_tables", counts.jump_tables,
                           "assumed_noreturn", counts.assumed_noreturn);
    goto cleanup;
cleanup_value:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "noreturn must hold uint64 values");
cleanup:
    fu_synth_scratch_free(&scratch);
    py_core_segments_release(&segments);
    if (code.obj)
        PyBuffer_Release(&code);
    if (noreturn.obj)
        PyBuffer_Release(&noreturn);
    Py_DECREF(sink.rows);
    return result;
}

static PyObject *compare_decoders(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer code = {0};
    unsigned long long address;
    if (!PyArg_ParseTuple(args, "y*K", &code, &address))
        return NULL;
    fu_x86_decoder decoder;
    fu_x86_decoder_init(&decoder);
    fu_x86_decoder_comparison comparison;
    Py_BEGIN_ALLOW_THREADS
    fu_x86_compare_decoders(&decoder, code.buf, (size_t)code.len, address, &comparison);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&code);
    return Py_BuildValue("{sKsKsKsKss}", "instructions", (unsigned long long)comparison.instructions, "fast",
                         (unsigned long long)comparison.fast, "mismatches", (unsigned long long)comparison.mismatches,
                         "first_mismatch", (unsigned long long)comparison.first_mismatch, "first_difference",
                         comparison.first_difference);
}

static int add_columns(PyObject *module)
{
    PyObject *columns = PyTuple_New(FU_SYNTH_COLUMN_COUNT);
    if (!columns)
        return -1;
    for (unsigned k = 0; k < FU_SYNTH_COLUMN_COUNT; k++)
        PyTuple_SET_ITEM(columns, k, PyLong_FromLong(fu_synth_columns[k]));
    return PyModule_AddObject(module, "SYNTH_COLUMNS", columns) < 0 ? (Py_DECREF(columns), -1) : 0;
}

static PyMethodDef synth_functions[] = {
    {"synth_function", (PyCFunction)(void (*)(void))synth_function, METH_VARARGS | METH_KEYWORDS,
     "synth_function(code, start, noreturn=b'', segments=()) -> (outcome, reason, rows, counts)"},
    {"compare_decoders", compare_decoders, METH_VARARGS,
     "compare_decoders(code, address) -> {instructions, fast, mismatches, first_mismatch, first_difference}"},
    {"check_overlaps", check_overlaps, METH_O, "check_overlaps(table) -> bytes of uint32 per entry"},
    {"check_fdes", check_fdes, METH_VARARGS,
     "check_fdes(table, entries, overlaps, code, segments, noreturn, function_entries, eh_frame, debug_frame, work, "
     "foreign_entries=b'')"
     " -> (results, details, uncovered, called_non_entry, foreign_entries)"},
    {NULL},
};

int py_synth_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, synth_functions) < 0)
        return -1;
    PyObject *names = PyTuple_New(RESULT_FIELDS);
    if (!names)
        return -1;
    for (Py_ssize_t i = 0; i < RESULT_FIELDS; i++) {
        PyObject *name = PyUnicode_FromString(RESULT_FIELD_NAMES[i]);
        if (!name) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    if (PyModule_AddObject(module, "CHECK_RESULT_FIELD_NAMES", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "CHECK_AGREE", FU_CHECK_AGREE) < 0 ||
        PyModule_AddIntConstant(module, "CHECK_MAX_FILE_INSTRUCTIONS", FU_CHECK_MAX_FILE_INSTRUCTIONS) < 0 ||
        PyModule_AddIntConstant(module, "CHECK_MISMATCH", FU_CHECK_MISMATCH) < 0 ||
        PyModule_AddIntConstant(module, "CHECK_UNDECIDED", FU_CHECK_UNDECIDED) < 0 ||
        PyModule_AddIntConstant(module, "CHECK_WHAT_CFA", FU_CHECK_WHAT_CFA) < 0 ||
        PyModule_AddIntConstant(module, "CHECK_WHAT_RANGE", FU_CHECK_WHAT_RANGE) < 0 ||
        PyModule_AddIntConstant(module, "SYNTH_DECIDED", FU_SYNTH_DECIDED) < 0 ||
        PyModule_AddIntConstant(module, "SYNTH_UNDECIDED", FU_SYNTH_UNDECIDED) < 0 || add_columns(module) < 0)
        return -1;
    return 0;
}
