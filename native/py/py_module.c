/* fastunwind._core: the Python binding of the C core (native/core).
 *
 * This file holds only the module definition and the init table: each binding (py_X.c) adds its
 * types, functions and constants in its py_X_init, on the shared base of py_core.h. Errors are raised
 * as fastunwind.errors classes, named by core/error.h's table.
 */
#include "py_core.h"

int py_x86_64_init(PyObject *module);        /* register_name, the register facts */
int py_cfi_init(PyObject *module);           /* CfiTable, parse_eh_frame_hdr */
int py_dwarf_expr_init(PyObject *module);    /* evaluate_expression, format_expression */
int py_compact_table_init(PyObject *module); /* CompactTable, build_compact_table */
int py_eh_elf_init(PyObject *module);        /* EhElf, eh_elf_step_batch */
int py_eh_elf_rows_init(PyObject *module);   /* eh_elf_rows */
int py_address_space_init(PyObject *module); /* AddressSpace, the backends' names */
int py_walk_init(PyObject *module);          /* unwind, unwind_self, step_batch */
int py_perf_data_init(PyObject *module);     /* PerfData, PerfDataError */
int py_perf_replay_init(PyObject *module);   /* replay_recording */
int py_perf_walk_init(PyObject *module);     /* unwind_samples, callchain_samples, sample_walk_registers */
int py_symbols_init(PyObject *module);       /* SymbolTable */
int py_perf_script_init(PyObject *module);   /* symbolize_samples, UnwoundSamples */
int py_synth_init(PyObject *module);         /* check_fdes, synth_function */
int py_check_scope_init(PyObject *module);   /* check_symbols, check_uncovered */
int py_synth_table_init(PyObject *module);   /* synth_table */
int py_trace_init(PyObject *module);         /* trace */
int py_report_init(PyObject *module);        /* Report */
int py_profile_init(PyObject *module);       /* Profile */
int py_sample_filter_init(PyObject *module); /* filter_samples, keep_comms */
int py_live_init(PyObject *module);          /* live_capture */
int py_bpf_init(PyObject *module);           /* BpfSession, the in-kernel unwinder */
int py_coredump_init(PyObject *module);      /* CoreFile */
int py_srcline_init(PyObject *module);       /* SourceLines */
int py_snapshot_init(PyObject *module);      /* render_snapshot */
int py_cache_paths_init(PyObject *module);   /* cache_root, symbol_key_elf/_memory_image/_kallsyms */
int py_elf_init(PyObject *module);           /* elf_headers, elf_build_id, elf_mapping_bias, ... */
int py_mapped_file_init(PyObject *module);   /* MappedFile; installs the SIGBUS guard */

static const py_init_fn INITS[] = {
    py_x86_64_init,        py_cfi_init,       py_dwarf_expr_init,  py_compact_table_init, py_eh_elf_init,
    py_eh_elf_rows_init,   py_address_space_init, py_walk_init,    py_perf_data_init,     py_perf_replay_init,
    py_perf_walk_init,     py_symbols_init,   py_perf_script_init, py_synth_init,         py_synth_table_init,
    py_check_scope_init,   py_trace_init,
    py_report_init,        py_sample_filter_init, py_profile_init, py_live_init,          py_bpf_init,
    py_coredump_init,      py_srcline_init,   py_snapshot_init,    py_cache_paths_init,   py_elf_init,
    py_mapped_file_init,
};

static int module_exec(PyObject *module)
{
    for (size_t i = 0; i < sizeof INITS / sizeof INITS[0]; i++)
        if (INITS[i](module) < 0)
            return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static int module_clear(PyObject *module) { return py_core_state_clear(module); }

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fastunwind._core",
    .m_doc = "fastunwind's C core: CFI parsing, evaluation, lookup, DWARF expressions, readelf-format output.",
    .m_size = sizeof(py_core_state),
    .m_slots = module_slots,
    .m_traverse = py_core_state_traverse,
    .m_clear = module_clear,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModuleDef_Init(&core_module); }
