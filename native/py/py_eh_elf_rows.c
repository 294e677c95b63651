/* _core.eh_elf_rows over core/eh_elf_rows.c: the rows of a module as the eh_elf generator
 * (fastunwind.eh_elf) compiles them.
 *
 * eh_elf_rows(eh_frame, debug_frame) -> (base, end, starts, keys, descriptions)
 *
 *   The covered range [base, end) cut into intervals: interval i is [starts[i], starts[i + 1])
 *   (the last one ends at `end`), `starts` a bytes object of u64 svmas, `keys` one of u32. Key
 *   UINT32_MAX is a gap (no FDE covers the interval); any other key indexes `descriptions`, one per
 *   distinct (table, row state, CIE signal flag, CIE return address column):
 *
 *     (table, signal_frame, ra_column, address_size, cfa, rules)
 *     cfa   = (kind, register, value, expression bytes or None)
 *     rules = ((column, kind, register, value, expression bytes or None), ...) sorted by column
 *
 *   with the kinds of cfi.h's fu_rule_kind (value: the offset, or for expressions their offset in
 *   the section; the bytes are given). Neighbouring intervals with the same key are merged.
 */
#include "py_core.h"

#include "cfi.h"
#include "eh_elf_rows.h"

/* An expression's bytes, or None if its (offset, length) is not inside the section. */
static PyObject *expression_bytes(const fu_cfi_table *t, const fu_rule *rule)
{
    if (rule->kind != FU_CFA_EXPRESSION && rule->kind != FU_RULE_EXPRESSION && rule->kind != FU_RULE_VAL_EXPRESSION)
        Py_RETURN_NONE;
    if (rule->value < 0 || (uint64_t)rule->value > t->section.size ||
        rule->expr_len > t->section.size - (uint64_t)rule->value)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)t->section.data + rule->value, rule->expr_len);
}

static PyObject *rule_tuple(const fu_cfi_table *t, unsigned column, const fu_rule *rule, bool with_column)
{
    PyObject *expr = expression_bytes(t, rule);
    if (!expr)
        return NULL;
    if (with_column)
        return Py_BuildValue("(IIILN)", column, (unsigned)rule->kind, (unsigned)rule->reg, (long long)rule->value,
                             expr);
    return Py_BuildValue("(IILN)", (unsigned)rule->kind, (unsigned)rule->reg, (long long)rule->value, expr);
}

static PyObject *describe_key(const fu_cfi_table *const tables[2], uint64_t packed)
{
    fu_eh_elf_key key = fu_eh_elf_key_unpack(packed);
    unsigned table = key.table, ra_column = key.ra_column;
    bool signal = key.signal_frame;
    const fu_cfi_table *t = tables[table];
    const fu_state *state = fu_cfi_table_state(t, key.state);
    PyObject *rules = PyTuple_New(state->count);
    if (!rules)
        return NULL;
    for (unsigned k = 0; k < state->count; k++) {
        PyObject *item = rule_tuple(t, t->column_pool[state->first + k], &t->rule_pool[state->first + k], true);
        if (!item) {
            Py_DECREF(rules);
            return NULL;
        }
        PyTuple_SET_ITEM(rules, k, item);
    }
    PyObject *cfa = rule_tuple(t, 0, &state->cfa, false);
    if (!cfa) {
        Py_DECREF(rules);
        return NULL;
    }
    return Py_BuildValue("(IOIINN)", table, signal ? Py_True : Py_False, ra_column,
                         (unsigned)t->section.address_size, cfa, rules);
}

static PyObject *eh_elf_rows(PyObject *module, PyObject *args)
{
    PyObject *eh, *debug;
    if (!PyArg_ParseTuple(args, "OO", &eh, &debug))
        return NULL;
    const fu_cfi_table *tables[2] = {NULL, NULL};
    if ((eh != Py_None && !(tables[0] = py_core_payload(module, PY_CFI_TABLE, eh))) ||
        (debug != Py_None && !(tables[1] = py_core_payload(module, PY_CFI_TABLE, debug))))
        return NULL;
    fu_eh_elf_rows rows;
    fu_error err = {0};
    fu_status status;
    Py_BEGIN_ALLOW_THREADS
    status = fu_eh_elf_rows_build(tables, &rows, &err);
    Py_END_ALLOW_THREADS
    if (status != FU_OK)
        return py_core_raise(&err);
    PyObject *result = NULL, *descriptions = PyTuple_New(rows.key_count);
    if (!descriptions)
        goto done;
    for (uint32_t k = 0; k < rows.key_count; k++) {
        PyObject *d = describe_key(tables, rows.packed[k]);
        if (!d)
            goto done;
        PyTuple_SET_ITEM(descriptions, k, d);
    }
    result = Py_BuildValue("(KKy#y#O)", (unsigned long long)rows.base, (unsigned long long)rows.end,
                           (const char *)rows.starts, (Py_ssize_t)(rows.count * sizeof *rows.starts),
                           (const char *)rows.keys, (Py_ssize_t)(rows.count * sizeof *rows.keys), descriptions);
done:
    Py_XDECREF(descriptions);
    fu_eh_elf_rows_free(&rows);
    return result;
}

static PyMethodDef eh_elf_rows_methods[] = {
    {"eh_elf_rows", eh_elf_rows, METH_VARARGS,
     "eh_elf_rows(eh_frame, debug_frame) -> (base, end, starts: u64 bytes, keys: u32 bytes, descriptions)"},
    {NULL},
};

int py_eh_elf_rows_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, eh_elf_rows_methods) < 0)
        return -1;
    /* the key of a gap (no FDE covers it) */
    return PyModule_AddObject(module, "EH_ELF_NO_KEY", PyLong_FromUnsignedLong(FU_EH_ELF_NO_KEY));
}
