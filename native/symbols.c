/* symbols: function symbol tables for symbolization, built in C (a Python loop over libc's ~10k
 * .symtab entries and the kernel's ~120k kallsyms lines cost more than unwinding a recording).
 *
 * function_symbols(symtab, strtab, elf_class) -> (values: bytes u64, sizes: bytes u64,
 *     binds: bytes u8, names: list[bytes])  for defined STT_FUNC / STT_GNU_IFUNC symbols
 * kallsyms_symbols(text) -> (addresses: bytes u64, names: list[bytes])  for t/T/w/W lines,
 *     in the file's order (the caller sorts)
 *
 * Both read their input through a bounded cursor; a truncated or malformed entry ends the scan.
 */
#include "binding.h"

#include "cursor.h"
#include "growing.h"

#define STT_FUNC 2
#define STT_GNU_IFUNC 10
#define SHN_UNDEF 0
/* Longest symbol name kept; C++ names reach a few KiB, longer ones are data, not names. */
#define FU_MAX_SYMBOL_NAME 65536

static PyObject *name_at(const uint8_t *strtab, size_t strtab_size, uint64_t offset)
{
    if (offset >= strtab_size)
        return NULL;
    const uint8_t *start = strtab + offset;
    size_t limit = strtab_size - offset < FU_MAX_SYMBOL_NAME ? strtab_size - offset : FU_MAX_SYMBOL_NAME;
    const uint8_t *nul = memchr(start, 0, limit);
    if (!nul)
        return NULL;
    return PyBytes_FromStringAndSize((const char *)start, nul - start);
}

static PyObject *function_symbols(PyObject *module, PyObject *args)
{
    Py_buffer symtab, strtab;
    int elf_class;
    if (!PyArg_ParseTuple(args, "y*y*i", &symtab, &strtab, &elf_class))
        return NULL;
    PyObject *names = PyList_New(0), *result = NULL;
    fu_growing values = {0}, sizes = {0}, binds = {0};
    unsigned entsize = elf_class == 64 ? 24 : 16;
    const uint8_t *base = symtab.buf;
    /* the table's length bounds the loop: one entry of entsize bytes per iteration */
    for (size_t off = 0; names && off + entsize <= (size_t)symtab.len; off += entsize) {
        fu_cursor c = fu_cursor_make(base, base + off, base + off + entsize);
        uint64_t name, value, size;
        uint8_t info;
        uint16_t shndx;
        if (elf_class == 64) {
            name = fu_read_uint(&c, 4);
            info = fu_read_u8(&c);
            fu_read_u8(&c); /* st_other */
            shndx = (uint16_t)fu_read_uint(&c, 2);
            value = fu_read_uint(&c, 8);
            size = fu_read_uint(&c, 8);
        } else {
            name = fu_read_uint(&c, 4);
            value = fu_read_uint(&c, 4);
            size = fu_read_uint(&c, 4);
            info = fu_read_u8(&c);
            fu_read_u8(&c);
            shndx = (uint16_t)fu_read_uint(&c, 2);
        }
        unsigned type = info & 0xf;
        uint8_t bind = info >> 4;
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || shndx == SHN_UNDEF || name == 0)
            continue;
        PyObject *text = name_at(strtab.buf, (size_t)strtab.len, name);
        if (!text) {
            if (PyErr_Occurred())
                goto done;
            continue; /* a name outside the string table: skip the symbol */
        }
        int failed = PyList_Append(names, text);
        Py_DECREF(text);
        if (failed < 0 || !fu_growing_append(&values, &value, 8) || !fu_growing_append(&sizes, &size, 8) || !fu_growing_append(&binds, &bind, 1)) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto done;
        }
    }
    if (names)
        result = Py_BuildValue("(y#y#y#O)", values.data ? (const char *)values.data : "", (Py_ssize_t)values.len,
                               sizes.data ? (const char *)sizes.data : "", (Py_ssize_t)sizes.len, binds.data ? (const char *)binds.data : "",
                               (Py_ssize_t)binds.len, names);
done:
    Py_XDECREF(names);
    free(values.data);
    free(sizes.data);
    free(binds.data);
    PyBuffer_Release(&symtab);
    PyBuffer_Release(&strtab);
    return result;
}

static int hex_digit(uint8_t ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static PyObject *kallsyms_symbols(PyObject *module, PyObject *arg)
{
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *names = PyList_New(0), *result = NULL;
    fu_growing addresses = {0};
    const uint8_t *p = text.buf, *end = p + text.len;
    /* one line per iteration: "ffffffff81000000 T _stext [module]" */
    while (names && p < end) {
        const uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        uint64_t address = 0;
        const uint8_t *q = p;
        int digits = 0, d;
        while (q < eol && digits < 16 && (d = hex_digit(*q)) >= 0) {
            address = address << 4 | (uint64_t)d;
            q++;
            digits++;
        }
        if (digits > 0 && eol - q >= 3 && q[0] == ' ' && (q[1] == 't' || q[1] == 'T' || q[1] == 'w' || q[1] == 'W') &&
            q[2] == ' ') {
            const uint8_t *name = q + 3, *name_end = name;
            while (name_end < eol && *name_end != ' ' && *name_end != '\t')
                name_end++;
            PyObject *item = PyBytes_FromStringAndSize((const char *)name, name_end - name);
            if (!item || PyList_Append(names, item) < 0 || !fu_growing_append(&addresses, &address, 8)) {
                Py_XDECREF(item);
                if (!PyErr_Occurred())
                    PyErr_NoMemory();
                goto done;
            }
            Py_DECREF(item);
        }
        p = eol + 1;
    }
    if (names)
        result = Py_BuildValue("(y#O)", addresses.data ? (const char *)addresses.data : "", (Py_ssize_t)addresses.len, names);
done:
    Py_XDECREF(names);
    free(addresses.data);
    PyBuffer_Release(&text);
    return result;
}

static PyMethodDef symbol_methods[] = {
    {"function_symbols", function_symbols, METH_VARARGS,
     "function_symbols(symtab, strtab, elf_class) -> (values u64, sizes u64, binds u8, names)"},
    {"kallsyms_symbols", kallsyms_symbols, METH_O, "kallsyms_symbols(text) -> (addresses u64, names)"},
    {NULL},
};

int fu_symbols_binding_init(PyObject *module)
{
    return PyModule_AddFunctions(module, symbol_methods);
}
