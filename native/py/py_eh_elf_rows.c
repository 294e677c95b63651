/* eh_elf_rows: the rows of a module as the eh_elf generator (fastunwind.eh_elf) compiles them.
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
 *
 * Exactness. As compact_table.c does, the generator does not re-implement DWARF's row selection:
 * the walker's lookup (fu_table_find_row on .eh_frame, then .debug_frame) compares a PC only with
 * FDE starts, FDE ends and row addresses, so between two consecutive such values its answer cannot
 * change. The intervals are those values, sorted; each is asked once. Overlapping FDEs, rows past
 * their FDE's end and FDEs that failed to evaluate come out exactly as the walker sees them.
 */
#include "py_core.h"

#include <stdlib.h>
#include <string.h>

#include "cfi.h"
#include "fu_unwind_abi.h"

#define NO_KEY UINT32_MAX

/* ra_column values at or above this compare unequal to every column (columns are < FU_MAX_COLUMNS),
 * so the key may clamp them without merging rows the walker distinguishes. */
#define RA_COLUMN_CLAMP 255u

typedef struct key_set {
    uint64_t *packed;  /* by key index */
    uint32_t count, cap;
    uint32_t *slots;   /* open addressing, key index + 1, 0 = empty; power-of-two size */
    uint32_t slot_count;
} key_set;

static uint64_t pack_key(unsigned table, const fu_entry *fde, uint32_t state)
{
    uint64_t ra = fde->cie ? fde->cie->ra_column : FU_REG_RA;
    if (ra > RA_COLUMN_CLAMP)
        ra = RA_COLUMN_CLAMP;
    bool signal = fde->cie && fde->cie->signal_frame;
    return (uint64_t)state | ra << 32 | (uint64_t)signal << 40 | (uint64_t)table << 41;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* The index of `packed`, added if new; UINT32_MAX when out of memory. */
static uint32_t key_intern(key_set *s, uint64_t packed)
{
    if ((uint64_t)(s->count + 1) * 2 > s->slot_count) {
        uint32_t n = s->slot_count ? s->slot_count * 2 : 1024;
        uint32_t *slots = calloc(n, sizeof *slots);
        if (!slots)
            return UINT32_MAX;
        for (uint32_t i = 0; i < s->count; i++) {
            uint32_t h = (uint32_t)hash_u64(s->packed[i]) & (n - 1);
            while (slots[h])
                h = (h + 1) & (n - 1);
            slots[h] = i + 1;
        }
        free(s->slots);
        s->slots = slots;
        s->slot_count = n;
    }
    uint32_t h = (uint32_t)hash_u64(packed) & (s->slot_count - 1);
    while (s->slots[h]) {
        if (s->packed[s->slots[h] - 1] == packed)
            return s->slots[h] - 1;
        h = (h + 1) & (s->slot_count - 1);
    }
    if (!fu_grow_array((void **)&s->packed, &s->cap, (uint64_t)s->count + 1, sizeof *s->packed))
        return UINT32_MAX;
    s->packed[s->count] = packed;
    s->slots[h] = s->count + 1;
    return s->count++;
}

/* The key in force at `pc`, as the walker resolves rows, or NO_KEY. */
static uint32_t key_at(key_set *s, const fu_table *const tables[2], uint64_t pc, bool *failed)
{
    int64_t row, fde;
    int which = fu_tables_find_row(tables, pc, &row, &fde);
    if (which < 0)
        return NO_KEY;
    uint32_t key = key_intern(s, pack_key((unsigned)which, &tables[which]->entries[fde], tables[which]->row_state[row]));
    *failed = key == UINT32_MAX;
    return key;
}

/* An expression's bytes, or None if its (offset, length) is not inside the section. */
static PyObject *expression_bytes(const fu_table *t, const fu_rule *rule)
{
    if (rule->kind != FU_CFA_EXPRESSION && rule->kind != FU_RULE_EXPRESSION && rule->kind != FU_RULE_VAL_EXPRESSION)
        Py_RETURN_NONE;
    if (rule->value < 0 || (uint64_t)rule->value > t->section.size ||
        rule->expr_len > t->section.size - (uint64_t)rule->value)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)t->section.data + rule->value, rule->expr_len);
}

static PyObject *rule_tuple(const fu_table *t, unsigned column, const fu_rule *rule, bool with_column)
{
    PyObject *expr = expression_bytes(t, rule);
    if (!expr)
        return NULL;
    if (with_column)
        return Py_BuildValue("(IIILN)", column, (unsigned)rule->kind, (unsigned)rule->reg, (long long)rule->value,
                             expr);
    return Py_BuildValue("(IILN)", (unsigned)rule->kind, (unsigned)rule->reg, (long long)rule->value, expr);
}

static PyObject *describe_key(const fu_table *const tables[2], uint64_t packed)
{
    unsigned table = (unsigned)(packed >> 41 & 1);
    bool signal = packed >> 40 & 1;
    unsigned ra_column = (unsigned)(packed >> 32 & 0xff);
    const fu_table *t = tables[table];
    const fu_state *state = fu_table_state(t, (uint32_t)packed);
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
    const fu_table *tables[2] = {NULL, NULL};
    if ((eh != Py_None && !(tables[0] = py_core_payload(module, PY_CFI_TABLE, eh))) ||
        (debug != Py_None && !(tables[1] = py_core_payload(module, PY_CFI_TABLE, debug))))
        return NULL;
    PyObject *result = NULL, *descriptions = NULL;
    key_set set = {0};
    uint64_t *bounds = NULL, *starts = NULL;
    uint32_t *keys = NULL;
    const char *failure = NULL; /* set without the GIL, raised after */
    uint64_t wrap_at = 0;
    size_t unique = 0, intervals = 0;
    fu_error err = {0};

    Py_BEGIN_ALLOW_THREADS
    if (fu_tables_boundaries(tables, &bounds, &unique, &err) != FU_OK ||
        !(starts = malloc((unique ? unique : 1) * sizeof *starts)) ||
        !(keys = malloc((unique ? unique : 1) * sizeof *keys))) {
        failure = "memory";
    } else {
        /* one lookup per interval [bounds[i], bounds[i + 1]); equal neighbours merged, the leading
         * gap dropped; the trailing gap's start becomes `end` */
        for (size_t i = 0; i < unique && !failure; i++) {
            bool failed = false;
            uint32_t key = key_at(&set, tables, bounds[i], &failed);
            if (failed) {
                failure = "memory";
            } else if (i + 1 == unique && key != NO_KEY) {
                failure = "wrap";
                wrap_at = bounds[i];
            } else if (!(intervals > 0 && keys[intervals - 1] == key) && !(intervals == 0 && key == NO_KEY)) {
                starts[intervals] = bounds[i];
                keys[intervals++] = key;
            }
        }
    }
    Py_END_ALLOW_THREADS

    if (failure && strcmp(failure, "memory") == 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (failure) {
        char hex_wrap[17]; /* PyUnicode_FromFormat has no %llx before Python 3.12 */
        snprintf(hex_wrap, sizeof hex_wrap, "%llx", (unsigned long long)wrap_at);
        py_core_raise_format(FU_ERR_EH_ELF,
                             "an FDE covers 0x%s up to the end of the address space: no eh_elf can be built",
                             hex_wrap);
        goto done;
    }
    descriptions = PyTuple_New(set.count);
    if (!descriptions)
        goto done;
    for (uint32_t k = 0; k < set.count; k++) {
        PyObject *d = describe_key(tables, set.packed[k]);
        if (!d)
            goto done;
        PyTuple_SET_ITEM(descriptions, k, d);
    }
    uint64_t base = intervals ? starts[0] : 0, end = intervals ? starts[intervals - 1] : 0;
    size_t count = intervals ? intervals - 1 : 0; /* the last interval is the trailing gap */
    result = Py_BuildValue("(KKy#y#O)", (unsigned long long)base, (unsigned long long)end, (const char *)starts,
                           (Py_ssize_t)(count * sizeof *starts), (const char *)keys,
                           (Py_ssize_t)(count * sizeof *keys), descriptions);
done:
    Py_XDECREF(descriptions);
    free(bounds);
    free(starts);
    free(keys);
    free(set.packed);
    free(set.slots);
    return result;
}

static PyMethodDef eh_elf_rows_methods[] = {
    {"eh_elf_rows", eh_elf_rows, METH_VARARGS,
     "eh_elf_rows(eh_frame, debug_frame) -> (base, end, starts: u64 bytes, keys: u32 bytes, descriptions)"},
    {NULL},
};

int py_eh_elf_rows_init(PyObject *module)
{
    return PyModule_AddFunctions(module, eh_elf_rows_methods);
}
