/* Shared by the files of the Python binding (module.c, walk_binding.c, perf_binding.c): the
 * extension module's state and the C-level accessors one binding offers another. */
#ifndef FASTUNWIND_BINDING_H
#define FASTUNWIND_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cfi.h"

typedef struct module_state {
    PyObject *cfi_error;       /* fastunwind.errors.CfiError */
    PyObject *expr_error;      /* fastunwind.errors.ExprError */
    PyObject *cfi_table_type;  /* fastunwind._core.CfiTable */
    PyObject *compact_error;   /* fastunwind.errors.CompactTableError */
    PyObject *compact_table_type; /* fastunwind._core.CompactTable */
    PyObject *eh_elf_error;    /* fastunwind.errors.EhElfError */
    PyObject *eh_elf_type;     /* fastunwind._core.EhElf */
} module_state;

module_state *fu_module_state(PyObject *module);

/* The evaluated table of a fastunwind._core.CfiTable, or NULL with TypeError set. */
const fu_table *fu_cfi_table_of(PyObject *module, PyObject *object);

struct fu_compact_table;
/* The validated table of a fastunwind._core.CompactTable, or NULL with TypeError set. */
const struct fu_compact_table *fu_compact_table_of(PyObject *module, PyObject *object);

struct fu_address_space;
/* The address space of a fastunwind._core.AddressSpace, or NULL with TypeError set. */
const struct fu_address_space *fu_address_space_of(PyObject *module, PyObject *object);

/* The entry points of a fastunwind._core.EhElf (a loaded, checked compiled unwind table), or NULL
 * with TypeError set. Valid while the object lives (it keeps the shared object open). */
struct fu_compiled_table;
const struct fu_compiled_table *fu_compiled_table_of(PyObject *module, PyObject *object);

/* Each adds its types and functions to the module; -1 with an exception set on failure. */
int fu_walk_binding_init(PyObject *module);
int fu_perf_walk_binding_init(PyObject *module);
int fu_compact_binding_init(PyObject *module);
int fu_symbols_binding_init(PyObject *module);
int fu_eh_elf_binding_init(PyObject *module);      /* eh_elf_binding.c */
int fu_eh_elf_rows_binding_init(PyObject *module); /* eh_elf_rows.c */
int fu_perf_script_binding_init(PyObject *module); /* perf_script.c: symbolization and rendering */
int fu_perf_replay_binding_init(PyObject *module); /* perf_replay.c: replay_recording */

#endif
