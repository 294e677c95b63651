/* The one shared base of the Python binding (native/py). Every py_X.c includes this header and the
 * core headers of its stage, and nothing else of native/py: no binding calls another. py_module.c
 * lists the py_X_init functions (the init table) and owns the module definition.
 *
 * - Types: each binding registers its types with py_core_add_type under a py_type_id; the module
 *   state holds them, so any binding can check an argument's type (py_core_payload) without knowing
 *   the binding that defines it.
 * - Payloads: every object starts with py_core_object; `payload` points at the core struct the object
 *   wraps (fu_cfi_table, fu_compact_table, fu_perf_data, ...), NULL until __init__ succeeded.
 * - Errors: py_core_raise raises a fu_error as the exception core/error.h names for its status,
 *   looked up in fastunwind.errors, then in builtins.
 */
#ifndef FASTUNWIND_PY_CORE_H
#define FASTUNWIND_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stddef.h>

#include "cfi.h"
#include "error.h"

typedef enum py_type_id {
    PY_CFI_TABLE,       /* payload: fu_cfi_table (py_cfi.c) */
    PY_COMPACT_TABLE,   /* fu_compact_table (py_compact_table.c) */
    PY_EH_ELF,          /* fu_eh_elf_table (py_eh_elf.c) */
    PY_ADDRESS_SPACE,   /* fu_space_with_cache (py_address_space.c) */
    PY_PERF_DATA,       /* fu_perf_data, parsed (py_perf_data.c) */
    PY_SYMBOL_TABLE,    /* fu_symbol_table (py_symbols.c) */
    PY_UNWOUND_SAMPLES, /* (py_perf_script.c) */
    PY_REPORT,          /* fu_report (py_report.c) */
    PY_PROFILE,         /* fu_profile (py_profile.c) */
    PY_BPF_SESSION,     /* fu_bpf_session (py_bpf.c) */
    PY_CORE_FILE,       /* fu_core_memory of a core file (py_coredump.c) */
    PY_SOURCE_LINES,    /* fu_srcline_module (py_srcline.c) */
    PY_MAPPED_FILE,     /* fu_mapped_file (py_mapped_file.c) */
    PY_TYPE_COUNT
} py_type_id;

/* The first member of every object of the binding's types. */
typedef struct py_core_object {
    PyObject_HEAD
    void *payload;
} py_core_object;

/* The module state. */
typedef struct py_core_state {
    PyTypeObject *types[PY_TYPE_COUNT];
} py_core_state;

/* Each binding's entry: adds its types, functions and constants to the module; -1 with an exception
 * set on failure. */
typedef int (*py_init_fn)(PyObject *module);

/* Creates the type from `spec` (its basicsize includes a py_core_object first), records it as `id`
 * and adds it to the module under the last component of spec->name. */
int py_core_add_type(PyObject *module, py_type_id id, PyType_Spec *spec);
/* The type registered as `id` (borrowed), or NULL if none yet. */
PyTypeObject *py_core_type(PyObject *module, py_type_id id);
/* `consumer.add(samples)` of a consumer of symbolized windows (a Report, a Profile: type `id`):
 * add(its payload, the UnwoundSamples' fu_unwound, err) without the GIL; None, or NULL with the
 * error raised. */
PyObject *py_core_add_window(PyObject *consumer, py_type_id id, PyObject *samples,
                             fu_status (*add)(void *payload, const void *unwound, fu_error *err));
/* A core sink (fu_sink_fn) calling the Python callable `write` with bytes; false with its exception set. */
bool py_core_write_chunk(void *write, const uint8_t *data, size_t len);
/* A core sink writing to the file descriptor *(int *)fd with write(2), the GIL released meanwhile
 * (no bytes object, no copy); false with OSError set (BrokenPipeError for EPIPE). */
bool py_core_write_fd(void *fd, const uint8_t *data, size_t len);
/* The payload of `object`, which must be of type `id`: NULL with TypeError ("expected a CfiTable, not
 * int") or, for an object whose __init__ has not succeeded, RuntimeError ("CfiTable is not
 * initialized"). */
void *py_core_payload(PyObject *module, py_type_id id, PyObject *object);

/* Raises err as fu_status_exception(err->status) names it (MemoryError without its message); NULL. */
PyObject *py_core_raise(const fu_error *err);
/* The same with a message formatted here; NULL. */
PyObject *py_core_raise_format(fu_status status, const char *format, ...);

/* An index argument in [0, count) into *index; false with IndexError or TypeError set. */
bool py_core_index_arg(PyObject *arg, size_t count, size_t *index);
/* bytes holding a copy of [data, data + size), or NULL with an exception. */
PyObject *py_core_bytes(const void *data, size_t size);
/* {index: count} of the non-zero counts[0..n) (statistics by outcome code, by depth), or NULL with
 * an exception. */
PyObject *py_core_count_dict(const uint64_t *counts, size_t n);
/* module.<attribute> = (name(0), ..., name(count - 1)); -1 with an exception. */
int py_core_add_names(PyObject *module, const char *attribute, int count, const char *(*name)(int));
/* module.<attribute> = (number(0), ..., number(count - 1)); -1 with an exception. */
int py_core_add_numbers(PyObject *module, const char *attribute, int count, int (*number)(int));

/* A Python sequence of (vaddr, bytes-like) pairs as fu_image_segments over the objects' buffers,
 * which stay acquired until py_core_segments_release (safe on a zeroed or partly filled one). */
typedef struct py_core_segments {
    Py_buffer *buffers;
    fu_image_segment *segments;
    Py_ssize_t count;
} py_core_segments;
/* False with an exception set (what was acquired is released by py_core_segments_release). */
bool py_core_segments_from(PyObject *sequence, py_core_segments *out);
void py_core_segments_release(py_core_segments *segments);

/* For the module definition (py_module.c). */
int py_core_state_traverse(PyObject *module, visitproc visit, void *arg);
int py_core_state_clear(PyObject *module);

#endif
