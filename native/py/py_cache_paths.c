/* The caches' binding (core/cache_paths.c): where they live and the symbol tables' keys, one home
 * for cache.py, symbols.py and the launcher.
 *
 * cache_root() -> str; symbol_key_elf(build_id_hex, path, debug_path) -> bytes;
 * symbol_key_memory_image(build_id_hex, debug_path) -> bytes;
 * symbol_key_kallsyms(path) -> bytes | None (None: no file there)
 */
#include "py_core.h" /* Python.h first */

#include "cache_paths.h"

static PyObject *cache_root(PyObject *module, PyObject *unused)
{
    char root[4096];
    if (!fu_cache_root(root, sizeof root))
        return PyErr_Format(PyExc_OSError, "no home directory for the caches (neither XDG_CACHE_HOME nor HOME set)");
    return PyUnicode_DecodeFSDefault(root);
}

static PyObject *key_result(bool ok, fu_buffer *key)
{
    PyObject *result = ok ? PyBytes_FromStringAndSize((const char *)key->data, (Py_ssize_t)key->len) : NULL;
    free(key->data);
    return result;
}

static PyObject *symbol_key_elf(PyObject *module, PyObject *args)
{
    PyObject *build_id, *path, *debug_path = NULL;
    if (!PyArg_ParseTuple(args, "O&O&O&", PyUnicode_FSConverter, &build_id, PyUnicode_FSConverter, &path,
                          PyUnicode_FSConverter, &debug_path)) {
        return NULL;
    }
    fu_buffer key = {0};
    bool ok = fu_symbol_key_elf(PyBytes_AS_STRING(build_id), PyBytes_AS_STRING(path), PyBytes_AS_STRING(debug_path),
                                &key);
    Py_DECREF(build_id);
    Py_DECREF(path);
    Py_DECREF(debug_path);
    return ok ? key_result(true, &key) : (free(key.data), PyErr_NoMemory());
}

static PyObject *symbol_key_memory_image(PyObject *module, PyObject *args)
{
    PyObject *build_id, *debug_path;
    if (!PyArg_ParseTuple(args, "O&O&", PyUnicode_FSConverter, &build_id, PyUnicode_FSConverter, &debug_path))
        return NULL;
    fu_buffer key = {0};
    bool ok = fu_symbol_key_memory_image(PyBytes_AS_STRING(build_id), PyBytes_AS_STRING(debug_path), &key);
    Py_DECREF(build_id);
    Py_DECREF(debug_path);
    return ok ? key_result(true, &key) : (free(key.data), PyErr_NoMemory());
}

static PyObject *symbol_key_kallsyms(PyObject *module, PyObject *args)
{
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path))
        return NULL;
    fu_buffer key = {0};
    bool ok = fu_symbol_key_kallsyms(PyBytes_AS_STRING(path), &key);
    Py_DECREF(path);
    if (!ok) {
        free(key.data);
        Py_RETURN_NONE;
    }
    return key_result(true, &key);
}

static PyMethodDef cache_paths_methods[] = {
    {"cache_root", cache_root, METH_NOARGS, "cache_root() -> the caches' directory (core/cache_paths.h)"},
    {"symbol_key_elf", symbol_key_elf, METH_VARARGS,
     "symbol_key_elf(build_id_hex, path, debug_path) -> bytes: the key of an ELF file's cached symbol table"},
    {"symbol_key_memory_image", symbol_key_memory_image, METH_VARARGS,
     "symbol_key_memory_image(build_id_hex, debug_path) -> bytes: the key of an in-memory ELF image's (the vDSO's) "
     "cached symbol table"},
    {"symbol_key_kallsyms", symbol_key_kallsyms, METH_VARARGS,
     "symbol_key_kallsyms(path) -> bytes | None: the key of a kallsyms copy's cached symbol table"},
    {NULL},
};

int py_cache_paths_init(PyObject *module)
{
    return PyModule_AddFunctions(module, cache_paths_methods);
}
