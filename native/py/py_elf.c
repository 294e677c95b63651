/* The ELF reader's binding (core/elf_file.c): one home for an ELF file's headers and the facts read
 * from them, for elf/__init__.py (ElfFile) and image.py (ModuleImage) as for the launcher.
 *
 * Each function takes the file's bytes (any buffer) and reads its headers again (a few dozen
 * records); failures raise ElfError with the core's message, which the caller prefixes with the
 * file's name.
 *
 * elf_headers(data) -> (elf_class, type, machine, entry, sections, segments): sections as
 *   (index, name, type, flags, addr, offset, size, link, info, addralign, entsize), segments as
 *   (type, flags, offset, vaddr, paddr, filesz, memsz, align);
 * elf_build_id(data) -> bytes | None; elf_debuglink(data) -> (name, crc) | None;
 * elf_process_entry(data) -> int;
 * elf_mapping_bias(data, start, end, pgoff) -> int | None; elf_offset_executable(data, pgoff) -> bool;
 * elf_loaded_segments(data, read_only) -> [segment index]; elf_pointer_bases(data) -> (text, data);
 * elf_debug_file_candidates(build_id, link_name, path, resolved_path, roots) ->
 *   ([(path, rule)], link_ignored)
 */
#include "py_core.h" /* Python.h first */

#include "elf_file.h"

/* The headers of the bytes in `view`; false with ElfError raised. */
static bool open_view(const Py_buffer *view, fu_elf *elf)
{
    fu_error err = {0};
    if (fu_elf_open(elf, view->buf, (size_t)view->len, &err) == FU_OK)
        return true;
    py_core_raise(&err);
    return false;
}

/* read(the headers of the one argument's bytes), or NULL with ElfError raised. */
static PyObject *over_elf(PyObject *args, PyObject *(*read)(const fu_elf *elf))
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    fu_elf elf;
    PyObject *result = open_view(&view, &elf) ? read(&elf) : NULL;
    PyBuffer_Release(&view);
    return result;
}

static PyObject *headers_of(const fu_elf *elf)
{
    PyObject *sections = NULL, *segments = NULL, *result = NULL;
    if (!(sections = PyList_New((Py_ssize_t)elf->section_count)) ||
        !(segments = PyList_New((Py_ssize_t)elf->segment_count)))
        goto done;
    for (size_t i = 0; i < elf->section_count; i++) {
        fu_elf_section s = fu_elf_section_at(elf, i);
        const char *name = fu_elf_section_name(elf, &s);
        PyObject *text = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "backslashreplace");
        PyObject *item = text ? Py_BuildValue("(INIKKKKIIKK)", s.index, text, s.type, (unsigned long long)s.flags,
                                              (unsigned long long)s.addr, (unsigned long long)s.offset,
                                              (unsigned long long)s.size, s.link, s.info,
                                              (unsigned long long)s.addralign, (unsigned long long)s.entsize)
                              : NULL;
        if (!item)
            goto done;
        PyList_SET_ITEM(sections, (Py_ssize_t)i, item);
    }
    for (size_t i = 0; i < elf->segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(elf, i);
        PyObject *item = Py_BuildValue("(IIKKKKKK)", p.type, p.flags, (unsigned long long)p.offset,
                                       (unsigned long long)p.vaddr, (unsigned long long)p.paddr,
                                       (unsigned long long)p.filesz, (unsigned long long)p.memsz,
                                       (unsigned long long)p.align);
        if (!item)
            goto done;
        PyList_SET_ITEM(segments, (Py_ssize_t)i, item);
    }
    result = Py_BuildValue("(IHHKOO)", elf->elf_class, elf->type, elf->machine, (unsigned long long)elf->entry, sections,
                           segments);
done:
    Py_XDECREF(sections);
    Py_XDECREF(segments);
    return result;
}

static PyObject *elf_headers(PyObject *module, PyObject *args) { return over_elf(args, headers_of); }

static PyObject *build_id_of(const fu_elf *elf)
{
    uint8_t build_id[FU_ELF_MAX_BUILD_ID];
    size_t size;
    fu_error err = {0};
    if (fu_elf_build_id(elf, build_id, &size, &err))
        return py_core_raise(&err);
    if (!size)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)build_id, (Py_ssize_t)size);
}

static PyObject *elf_build_id(PyObject *module, PyObject *args) { return over_elf(args, build_id_of); }

static PyObject *debuglink_of(const fu_elf *elf)
{
    const char *name;
    uint32_t crc;
    fu_error err = {0};
    if (fu_elf_debuglink(elf, &name, &crc, &err))
        return py_core_raise(&err);
    if (!name)
        Py_RETURN_NONE;
    return Py_BuildValue("(y#I)", name, (Py_ssize_t)strlen(name), crc);
}

static PyObject *elf_debuglink(PyObject *module, PyObject *args) { return over_elf(args, debuglink_of); }

static PyObject *process_entry_of(const fu_elf *elf)
{
    uint64_t entry;
    fu_error err = {0};
    return fu_elf_process_entry(elf, &entry, &err) ? py_core_raise(&err) : PyLong_FromUnsignedLongLong(entry);
}

static PyObject *elf_process_entry(PyObject *module, PyObject *args) { return over_elf(args, process_entry_of); }

static PyObject *elf_mapping_bias(PyObject *module, PyObject *args)
{
    Py_buffer view;
    unsigned long long start, end, pgoff;
    if (!PyArg_ParseTuple(args, "y*KKK", &view, &start, &end, &pgoff))
        return NULL;
    fu_elf elf;
    PyObject *result = NULL;
    if (open_view(&view, &elf)) {
        uint64_t bias;
        /* avma - svma as a signed difference: a file linked above where it is mapped has a negative one */
        result = fu_elf_mapping_bias(&elf, start, end, pgoff, &bias) ? PyLong_FromLongLong((long long)bias)
                                                                     : Py_NewRef(Py_None);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *elf_offset_executable(PyObject *module, PyObject *args)
{
    Py_buffer view;
    unsigned long long pgoff;
    if (!PyArg_ParseTuple(args, "y*K", &view, &pgoff))
        return NULL;
    fu_elf elf;
    PyObject *result = open_view(&view, &elf) ? PyBool_FromLong(fu_elf_offset_executable(&elf, pgoff)) : NULL;
    PyBuffer_Release(&view);
    return result;
}

static PyObject *elf_loaded_segments(PyObject *module, PyObject *args)
{
    Py_buffer view;
    int read_only;
    if (!PyArg_ParseTuple(args, "y*p", &view, &read_only))
        return NULL;
    fu_elf elf;
    PyObject *result = open_view(&view, &elf) ? PyList_New(0) : NULL;
    for (size_t i = 0; result && i < elf.segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(&elf, i);
        if (!fu_elf_segment_loaded(&p, read_only))
            continue;
        PyObject *index = PyLong_FromSize_t(i);
        if (!index || PyList_Append(result, index) < 0)
            Py_CLEAR(result);
        Py_XDECREF(index);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *pointer_bases_of(const fu_elf *elf)
{
    uint64_t text_base, data_base;
    fu_elf_pointer_bases(elf, &text_base, &data_base);
    return Py_BuildValue("(KK)", (unsigned long long)text_base, (unsigned long long)data_base);
}

static PyObject *elf_pointer_bases(PyObject *module, PyObject *args) { return over_elf(args, pointer_bases_of); }

/* The roots as filesystem bytes (kept in `owners`) and their pointers; false with an exception. */
static bool root_paths(PyObject *roots, PyObject **owners, const char **paths, size_t *count)
{
    PyObject *sequence = PySequence_Fast(roots, "roots must be a sequence of paths");
    if (!sequence)
        return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
    *count = 0;
    if (n > FU_ELF_MAX_DEBUG_ROOTS) {
        PyErr_Format(PyExc_ValueError, "%zd debug roots: at most %d", n, FU_ELF_MAX_DEBUG_ROOTS);
        Py_DECREF(sequence);
        return false;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(sequence, i), &owners[i])) {
            Py_DECREF(sequence);
            return false;
        }
        paths[i] = PyBytes_AS_STRING(owners[i]);
        *count = (size_t)i + 1;
    }
    Py_DECREF(sequence);
    return true;
}

static PyObject *elf_debug_file_candidates(PyObject *module, PyObject *args)
{
    Py_buffer build_id = {0}, link = {0};
    PyObject *path, *resolved, *roots, *owners[FU_ELF_MAX_DEBUG_ROOTS] = {0};
    if (!PyArg_ParseTuple(args, "z*z*O&O&O", &build_id, &link, PyUnicode_FSConverter, &path, PyUnicode_FSConverter,
                          &resolved, &roots))
        return NULL;
    const char *root_names[FU_ELF_MAX_DEBUG_ROOTS];
    size_t root_count = 0;
    PyObject *result = NULL, *list = NULL, *link_name = NULL;
    fu_buffer paths = {0};
    if (!root_paths(roots, owners, root_names, &root_count))
        goto done;
    if (link.buf && !(link_name = PyBytes_FromStringAndSize(link.buf, link.len))) /* NUL-terminated */
        goto done;
    if (link_name && strlen(PyBytes_AS_STRING(link_name)) != (size_t)link.len) {
        PyErr_SetString(PyExc_ValueError, "a .gnu_debuglink name with a NUL byte");
        goto done;
    }
    fu_elf_debug_rule rules[FU_ELF_MAX_DEBUG_CANDIDATES];
    size_t count;
    bool link_ignored;
    fu_error err = {0};
    if (fu_elf_debug_candidates(build_id.buf, build_id.buf ? (size_t)build_id.len : 0,
                                link_name ? PyBytes_AS_STRING(link_name) : NULL, PyBytes_AS_STRING(path),
                                PyBytes_AS_STRING(resolved), root_names, root_count, &paths, rules, &count,
                                &link_ignored, &err)) {
        py_core_raise(&err);
        goto done;
    }
    if (!(list = PyList_New((Py_ssize_t)count)))
        goto done;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        const char *candidate = (const char *)paths.data + at;
        size_t len = strlen(candidate);
        PyObject *text = PyUnicode_DecodeFSDefaultAndSize(candidate, (Py_ssize_t)len);
        PyObject *item = text ? Py_BuildValue("(Ni)", text, (int)rules[i]) : NULL;
        if (!item)
            goto done;
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
        at += len + 1;
    }
    result = Py_BuildValue("(OO)", list, link_ignored ? Py_True : Py_False);
done:
    Py_XDECREF(list);
    Py_XDECREF(link_name);
    free(paths.data);
    for (size_t i = 0; i < root_count; i++)
        Py_DECREF(owners[i]);
    if (build_id.buf)
        PyBuffer_Release(&build_id);
    if (link.buf)
        PyBuffer_Release(&link);
    Py_DECREF(path);
    Py_DECREF(resolved);
    return result;
}

static PyMethodDef elf_methods[] = {
    {"elf_headers", elf_headers, METH_VARARGS,
     "elf_headers(data) -> (elf_class, type, machine, entry, sections, segments) of an ELF file's bytes"},
    {"elf_build_id", elf_build_id, METH_VARARGS, "elf_build_id(data) -> the NT_GNU_BUILD_ID note's bytes, or None"},
    {"elf_debuglink", elf_debuglink, METH_VARARGS, "elf_debuglink(data) -> (file name, CRC-32) or None"},
    {"elf_process_entry", elf_process_entry, METH_VARARGS,
     "elf_process_entry(data) -> where a process starts running the file, else 0"},
    {"elf_mapping_bias", elf_mapping_bias, METH_VARARGS,
     "elf_mapping_bias(data, start, end, pgoff) -> avma - svma of an executable mapping, or None"},
    {"elf_offset_executable", elf_offset_executable, METH_VARARGS,
     "elf_offset_executable(data, pgoff) -> whether a PT_LOAD holding that file offset is executable"},
    {"elf_loaded_segments", elf_loaded_segments, METH_VARARGS,
     "elf_loaded_segments(data, read_only) -> the indexes of the segments the walker reads as the file's bytes"},
    {"elf_pointer_bases", elf_pointer_bases, METH_VARARGS,
     "elf_pointer_bases(data) -> (sh_addr of .text, of .got): what CFI pointer encodings are relative to"},
    {"elf_debug_file_candidates", elf_debug_file_candidates, METH_VARARGS,
     "elf_debug_file_candidates(build_id, link_name, path, resolved_path, roots) -> ([(path, rule)], link_ignored)"},
    {NULL},
};

int py_elf_init(PyObject *module)
{
    if (PyModule_AddIntConstant(module, "ELF_DEBUG_BY_BUILD_ID", FU_ELF_DEBUG_BY_BUILD_ID) < 0 ||
        PyModule_AddIntConstant(module, "ELF_DEBUG_BY_LINK", FU_ELF_DEBUG_BY_LINK) < 0 ||
        PyModule_AddIntConstant(module, "ELF_MAX_NAME_LENGTH", FU_ELF_MAX_NAME_LENGTH) < 0)
        return -1;
    return PyModule_AddFunctions(module, elf_methods);
}
