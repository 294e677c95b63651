/* The caches' binding (core/cache_paths.c): where they live and the symbol tables' keys, one home
 * for cache.py, symbols.py and the launcher.
 *
 * cache_root() -> str; symbol_key_elf(build_id_hex, path, debug_path) -> bytes;
 * symbol_key_memory_image(build_id_hex, debug_path) -> bytes;
 * symbol_key_kallsyms(path) -> bytes | None (None: no file there); compact_cache_suffix(synth) -> str;
 * build_id_cache_root() -> str; build_id_cache_file(name, build_id_hex, file) -> str;
 * build_id_cache_candidates(name, build_id, file) -> list[str]
 */
#include "py_core.h" /* Python.h first */

#include "cache_paths.h"
#include "compact_table.h"

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

static PyObject *compact_cache_suffix(PyObject *module, PyObject *args)
{
    unsigned int synth;
    char suffix[64];
    if (!PyArg_ParseTuple(args, "I", &synth))
        return NULL;
    if (synth >= FU_COMPACT_SYNTH_MODES || !fu_compact_cache_suffix(synth, suffix, sizeof suffix))
        return PyErr_Format(PyExc_ValueError, "synth mode %u: not one of the %d modes", synth, FU_COMPACT_SYNTH_MODES);
    return PyUnicode_FromString(suffix);
}

static PyObject *build_id_cache_root(PyObject *module, PyObject *unused)
{
    char root[FU_BUILD_ID_CACHE_PATH_MAX];
    if (!fu_build_id_cache_root(root, sizeof root))
        return PyErr_Format(PyExc_OSError, "no home directory for perf's build-id cache (neither PERF_BUILDID_DIR "
                                           "nor HOME set)");
    return PyUnicode_DecodeFSDefault(root);
}

/* The NUL-terminated paths of `paths` as a list of str (os.fsdecode). */
static PyObject *path_list(const fu_buffer *paths)
{
    PyObject *list = PyList_New(0);
    for (size_t at = 0; list && at < paths->len;) {
        const char *path = (const char *)paths->data + at;
        size_t len = strlen(path);
        PyObject *item = PyUnicode_DecodeFSDefaultAndSize(path, (Py_ssize_t)len);
        if (!item || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
        at += len + 1;
    }
    return list;
}

static PyObject *build_id_cache_file(PyObject *module, PyObject *args)
{
    PyObject *name, *hex, *file;
    if (!PyArg_ParseTuple(args, "O&O&O&", PyUnicode_FSConverter, &name, PyUnicode_FSConverter, &hex,
                          PyUnicode_FSConverter, &file))
        return NULL;
    fu_buffer path = {0};
    bool ok = fu_build_id_cache_file(PyBytes_AS_STRING(name), PyBytes_AS_STRING(hex), PyBytes_AS_STRING(file), &path);
    Py_DECREF(name);
    Py_DECREF(hex);
    Py_DECREF(file);
    PyObject *result = ok ? PyUnicode_DecodeFSDefault((const char *)path.data)
                          : PyErr_Format(PyExc_OSError, "perf's build-id cache: no home directory, or a path too long");
    free(path.data);
    return result;
}

static PyObject *build_id_cache_candidates(PyObject *module, PyObject *args)
{
    PyObject *name, *file;
    Py_buffer build_id;
    if (!PyArg_ParseTuple(args, "O&y*O&", PyUnicode_FSConverter, &name, &build_id, PyUnicode_FSConverter, &file))
        return NULL;
    fu_buffer paths = {0};
    PyObject *result = NULL;
    if ((size_t)build_id.len > FU_BUILD_ID_CACHE_MAX_ID)
        PyErr_Format(PyExc_ValueError, "a build-id of %zd bytes: at most %d", build_id.len, FU_BUILD_ID_CACHE_MAX_ID);
    else if (!fu_build_id_cache_candidates(PyBytes_AS_STRING(name), build_id.buf, (size_t)build_id.len,
                                           PyBytes_AS_STRING(file), &paths))
        PyErr_Format(PyExc_OSError, "perf's build-id cache: no home directory, or a path too long");
    else
        result = path_list(&paths);
    free(paths.data);
    PyBuffer_Release(&build_id);
    Py_DECREF(name);
    Py_DECREF(file);
    return result;
}

static PyMethodDef cache_paths_methods[] = {
    {"compact_cache_suffix", compact_cache_suffix, METH_VARARGS,
     "compact_cache_suffix(synth) -> the suffix of a compact table's cache entry with synth's rows (a mode's code)"},
    {"build_id_cache_root", build_id_cache_root, METH_NOARGS,
     "build_id_cache_root() -> perf's build-id cache: $PERF_BUILDID_DIR, else ~/.debug"},
    {"build_id_cache_file", build_id_cache_file, METH_VARARGS,
     "build_id_cache_file(name, build_id_hex, file) -> where perf keeps its copy of name with that build-id"},
    {"build_id_cache_candidates", build_id_cache_candidates, METH_VARARGS,
     "build_id_cache_candidates(name, build_id, file) -> the paths where perf may keep its copy, in order"},
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
    if (PyModule_AddStringConstant(module, "NEEDS_CACHE_KIND", FU_NEEDS_CACHE_KIND) < 0 ||
        PyModule_AddStringConstant(module, "NEEDS_CACHE_SUFFIX", FU_NEEDS_CACHE_SUFFIX) < 0)
        return -1;
    return PyModule_AddFunctions(module, cache_paths_methods);
}
