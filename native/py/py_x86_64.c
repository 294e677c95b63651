/* The architecture's binding: x86_64.h's register facts as _core constants and register_name, so
 * that Python states none of them.
 *
 * RETURN_ADDRESS_COLUMN, WALK_REGISTERS, REG_RSP: DWARF numbering; CALLEE_SAVED_MASK: a
 * valid mask of the psABI's callee-saved registers; PERF_REGISTER_NAMES and PERF_REGISTER_DWARF:
 * perf's user registers by perf number, their names and DWARF registers (-1: not tracked);
 * STATE_REGISTER_NAMES, STATE_KEPT_BY_CALLS: the registers gdb shows beside the walker's, and the
 * mask of those a caller keeps.
 */
#include "py_core.h"

#include "x86_64.h"

static PyObject *register_name(PyObject *module, PyObject *arg)
{
    unsigned long long reg = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    const char *name = fu_register_name(reg);
    if (!name)
        Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

static PyMethodDef x86_64_functions[] = {
    {"register_name", register_name, METH_O, "register_name(column) -> str | None (readelf's x86-64 names)"},
    {NULL},
};

static const char *perf_register_name(int perf_reg) { return fu_perf_register_name((unsigned)perf_reg); }

static int dwarf_of_perf_register(int perf_reg) { return fu_dwarf_of_perf_register((unsigned)perf_reg); }

static const char *user_register_name(int index) { return fu_user_register_name(index); }

static const char *state_register_name(int index) { return fu_state_register_name(index); }

int py_x86_64_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, x86_64_functions) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "RETURN_ADDRESS_COLUMN", FU_RETURN_ADDRESS_COLUMN) < 0 ||
        PyModule_AddIntConstant(module, "WALK_REGISTERS", FU_WALK_REGISTERS) < 0 ||
        PyModule_AddIntConstant(module, "REG_RSP", FU_REG_RSP) < 0 ||
        PyModule_AddIntConstant(module, "CALLEE_SAVED_MASK", FU_CALLEE_SAVED_MASK) < 0 ||
        PyModule_AddIntConstant(module, "STATE_KEPT_BY_CALLS", FU_STATE_KEPT_BY_CALLS) < 0)
        return -1;
    if (py_core_add_names(module, "PERF_REGISTER_NAMES", FU_PERF_REGISTER_COUNT, perf_register_name) < 0 ||
        py_core_add_numbers(module, "PERF_REGISTER_DWARF", FU_PERF_REGISTER_COUNT, dwarf_of_perf_register) < 0 ||
        py_core_add_names(module, "USER_REGISTER_NAMES", FU_USER_REGISTER_COUNT, user_register_name) < 0 ||
        py_core_add_names(module, "STATE_REGISTER_NAMES", FU_STATE_REGISTERS, state_register_name) < 0)
        return -1;
    return 0;
}
