/* The DWARF expression binding: evaluate_expression (for Python callers, memory read through a Python
 * callable) and format_expression (readelf's or llvm-dwarfdump's text). */
#include "py_core.h"

#include <string.h>

#include "cfi.h"

typedef struct py_reader {
    PyObject *callable;
    bool raised;
} py_reader;

static bool read_via_python(void *opaque, uint64_t address, unsigned size, uint64_t *out)
{
    py_reader *r = opaque;
    if (r->raised || !r->callable || r->callable == Py_None)
        return false;
    PyObject *b = PyObject_CallFunction(r->callable, "KI", (unsigned long long)address, size);
    if (!b) {
        r->raised = true;
        return false;
    }
    if (b == Py_None) {
        Py_DECREF(b);
        return false;
    }
    char *buf;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(b, &buf, &len) < 0 || len != (Py_ssize_t)size) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "memory reader returned %zd bytes, expected %u", len, size);
        Py_DECREF(b);
        r->raised = true;
        return false;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < size; i++)
        v |= (uint64_t)(uint8_t)buf[i] << (8 * i);
    Py_DECREF(b);
    *out = v;
    return true;
}

/* evaluate_expression(expr, registers: dict[int,int], read=None, initial=None) -> int */
static PyObject *evaluate_expression(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"expression", "registers", "read", "initial", NULL};
    Py_buffer expr;
    PyObject *registers, *read = Py_None, *initial = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O!|OO", kwlist, &expr, &PyDict_Type, &registers,
                                     &read, &initial))
        return NULL;
    fu_expr_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.address_size = 8;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(registers, &pos, &key, &value)) {
        long reg = PyLong_AsLong(key);
        unsigned long long v = PyLong_AsUnsignedLongLongMask(value);
        if (PyErr_Occurred()) {
            PyBuffer_Release(&expr);
            return NULL;
        }
        if (reg < 0 || reg >= FU_MAX_COLUMNS) {
            PyBuffer_Release(&expr);
            return PyErr_Format(PyExc_ValueError, "register %ld out of range", reg);
        }
        ctx.regs[reg] = v;
        ctx.valid[reg / 64] |= (uint64_t)1 << (reg % 64);
    }
    py_reader reader = {read, false};
    ctx.read_memory = read_via_python;
    ctx.opaque = &reader;
    uint64_t init = 0;
    if (initial != Py_None) {
        init = PyLong_AsUnsignedLongLongMask(initial);
        if (PyErr_Occurred()) {
            PyBuffer_Release(&expr);
            return NULL;
        }
    }
    uint64_t result;
    fu_error err = {0};
    fu_status status = fu_expr_evaluate(expr.buf, (uint64_t)expr.len, &ctx, initial != Py_None, init,
                                        &result, &err);
    PyBuffer_Release(&expr);
    if (reader.raised)
        return NULL;
    if (status != FU_OK)
        return py_core_raise(&err);
    return PyLong_FromUnsignedLongLong(result);
}

/* format_expression(expr, style='readelf') -> str */
static PyObject *format_expression(PyObject *module, PyObject *args)
{
    Py_buffer expr;
    const char *style = "readelf";
    if (!PyArg_ParseTuple(args, "y*|s", &expr, &style))
        return NULL;
    fu_out out = {.fd = -1};
    if (strcmp(style, "llvm") == 0)
        fu_expr_print_llvm(&out, expr.buf, (uint64_t)expr.len, 8);
    else
        fu_expr_print_readelf(&out, expr.buf, (uint64_t)expr.len, 8);
    PyBuffer_Release(&expr);
    PyObject *s = out.failed ? PyErr_NoMemory() : PyUnicode_FromStringAndSize(out.buf ? out.buf : "", (Py_ssize_t)out.len);
    free(out.buf);
    return s;
}

static PyMethodDef dwarf_expr_functions[] = {
    {"evaluate_expression", (PyCFunction)(void (*)(void))evaluate_expression, METH_VARARGS | METH_KEYWORDS,
     "evaluate_expression(expression, registers, read=None, initial=None) -> int"},
    {"format_expression", format_expression, METH_VARARGS, "format_expression(expr, style='readelf') -> str"},
    {NULL},
};

int py_dwarf_expr_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, dwarf_expr_functions) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "EXPR_STACK", FU_EXPR_STACK) < 0 ||
        PyModule_AddIntConstant(module, "EXPR_MAX_STEPS", FU_EXPR_MAX_STEPS) < 0)
        return -1;
    return 0;
}
