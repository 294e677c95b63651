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

/* An index argument in [0, count) into *index; false with IndexError or TypeError set. */
bool fu_index_arg(PyObject *arg, size_t count, size_t *index);

/* The evaluated table of a fastunwind._core.CfiTable, or NULL with TypeError set. */
const fu_table *fu_cfi_table_of(PyObject *module, PyObject *object);

struct fu_compact_table;
/* The validated table of a fastunwind._core.CompactTable, or NULL with TypeError set. */
const struct fu_compact_table *fu_compact_table_of(PyObject *module, PyObject *object);

struct fu_address_space;
/* The address space of a fastunwind._core.AddressSpace, or NULL with TypeError set. */
const struct fu_address_space *fu_address_space_of(PyObject *module, PyObject *object);

struct fu_walk_cache;
/* The walk cache of an AddressSpace `object` (checked with fu_address_space_of), lent to the caller
 * until fu_address_space_return_cache; both with the GIL held. The space keeps it across calls (52
 * KiB with its shapes, made on first use), so a walk finds settled every PC an earlier walk of the
 * space met, as libunwind's and libdw's caches persist across their unwinds. While it is lent (another thread
 * walks the same space), the caller gets a cache of its own, bound to the space, that the return
 * frees. NULL with MemoryError set if out of memory. */
struct fu_walk_cache *fu_address_space_borrow_cache(PyObject *object);
/* Walk caches a space keeps across calls: one per thread of unwind_samples (perf_walk.c); a borrower
 * beyond them gets a cache of its own, freed when returned. */
#define FU_WALK_KEPT_CACHES 8
void fu_address_space_return_cache(PyObject *object, struct fu_walk_cache *cache);

/* The entry points of a fastunwind._core.EhElf (a loaded, checked compiled unwind table), or NULL
 * with TypeError set. Valid while the object lives (it keeps the shared object open). */
struct fu_compiled_table;
const struct fu_compiled_table *fu_compiled_table_of(PyObject *module, PyObject *object);

/* Batches of independent unwind steps, for the property tests (walk_binding.c step_batch: the
 * walker; eh_elf_binding.c eh_elf_step_batch: a compiled table alone). A state is u64 regs[17],
 * u32 valid mask, u32 ip_is_return_address; a record i8 caller kind (-1: no caller), u8 outcome
 * (fu_walk_outcome, FU_STEP_NO_OUTCOME when there is none), u8 flags of the frame, u8 status (the
 * fu_eh_elf_status in eh_elf_step_batch, else 0), u32 caller's valid mask, u64 fault address,
 * u64 regs[17] (0 where invalid). */
#define FU_STEP_NO_OUTCOME 0xff
typedef struct fu_step_state {
    uint64_t regs[17];
    uint32_t valid;
    uint32_t ip_is_return_address;
} fu_step_state;
typedef struct fu_step_record {
    int8_t kind;
    uint8_t outcome;
    uint8_t flags;
    uint8_t status;
    uint32_t valid;
    uint64_t fault_address;
    uint64_t regs[17];
} fu_step_record;
struct fu_regs;
struct fu_reader;
/* One step from `regs` (decoded from `state`) into `record` (zeroed beforehand); runs without the GIL. */
typedef void (*fu_step_one_fn)(void *context, const struct fu_regs *regs, const fu_step_state *state,
                               const struct fu_reader *reader, fu_step_record *record);
/* The batch: checks the states' size, reads memory from the stack dump at stack_address and the
 * space's module images, calls `one` per state; the records as bytes, or NULL with an exception. */
PyObject *fu_step_batch_run(const struct fu_address_space *space, const Py_buffer *states, const Py_buffer *stack,
                            uint64_t stack_address, fu_step_one_fn one, void *context);

/* Each adds its types and functions to the module; -1 with an exception set on failure. */
int fu_walk_binding_init(PyObject *module);
int fu_perf_walk_binding_init(PyObject *module);
int fu_compact_binding_init(PyObject *module);
int fu_symbols_binding_init(PyObject *module);
int fu_eh_elf_binding_init(PyObject *module);      /* eh_elf_binding.c */
int fu_eh_elf_rows_binding_init(PyObject *module); /* eh_elf_rows.c */
int fu_perf_script_binding_init(PyObject *module); /* perf_script.c: symbolization and rendering */
int fu_perf_replay_binding_init(PyObject *module); /* perf_replay.c: replay_recording */

/* ---- PerfData (py_perf_data.c) ------------------------------------------------------------------ */
#include "perf_data.h"
/* Registers fastunwind._core.PerfData; called from module_exec. */
int fu_perf_binding_init(PyObject *module);
/* The contiguous, time-ordered samples of a fastunwind._core.PerfData object, for other C code in the
 * extension (no Python per sample). NULL with a TypeError set if the object is not a PerfData. The
 * array lives as long as the object. */
const fu_perf_sample *fu_perf_object_samples(PyObject *perf_data, size_t *count);
/* The parsed reader behind a PerfData object (mmaps, comms, tasks, events), or NULL + TypeError. */
const fu_perf_data *fu_perf_object_data(PyObject *perf_data);

/* ---- SymbolTable (py_symbols.c) ----------------------------------------------------------------- */
#include "symbols.h"
/* The table of a fastunwind._core.SymbolTable, or NULL with TypeError set. */
const fu_symbol_table *fu_symbol_table_of(PyObject *object);

#endif
