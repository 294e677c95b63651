/* srcline: source lines and inline chains of code addresses, from a module's DWARF (.debug_line and
 * the DW_TAG_inlined_subroutine DIEs of .debug_info) through elfutils' libdw, the only includer of
 * libdw.h. The Python type is fastunwind._core.SourceLines (py/py_srcline.c); perf_script.c prints
 * the chains as `perf script -F +srcline --inline` does.
 *
 * A lookup at an svma gives a chain of locations, innermost first (what `addr2line -i -f` prints):
 *   location 0: the line table's row for the address (DWARF 5 §6.2), in the innermost function
 *               around it (an inlined subroutine's origin, or the subprogram);
 *   location k: the call site (DW_AT_call_file, DW_AT_call_line; DWARF 5 §3.3.8.2) of the inlined
 *               subroutine of location k-1, in the next function out;
 *   the last:   in the subprogram (the function the code really belongs to).
 * A function's name is its DW_AT_linkage_name (or DW_AT_MIPS_linkage_name), demangled as perf
 * demangles (demangle.h), else its DW_AT_name, through DW_AT_abstract_origin and DW_AT_specification
 * (binutils' addr2line, which perf 6.1 runs, prefers the linkage name the same way). An address in
 * no compilation unit has an empty chain ("??:0" for perf).
 *
 * Every chain is resolved once per module and kept, keyed by svma: profiles revisit the same
 * addresses, so a repeated address costs a hash lookup, not a DWARF walk. Texts are copied into the
 * module's pool (libdw's strings live only while its Dwarf does). */
#ifndef FASTUNWIND_SRCLINE_H
#define FASTUNWIND_SRCLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Inline nesting kept per address: GCC and Clang at -O3 nest a few levels, template-heavy C++ a
 * few dozen (libLLVM-14's deepest chain is 24); deeper scopes are cut, outermost kept. */
#define FU_SRCLINE_MAX_DEPTH 128
/* Addresses a module keeps chains for (ids are u32); past it a lookup fails with FU_ERR_INVALID
 * rather than grow without bound. */
#define FU_SRCLINE_MAX_ADDRESSES (1u << 24)

/* One location of a chain; texts are offsets into the module's pool (fu_srcline_text). */
typedef struct fu_srcline_location {
    uint32_t name, name_len; /* the function; name_len 0: not known */
    uint32_t file, file_len; /* the source file as the line table names it; file_len 0: not known */
    uint32_t line;           /* 0: not known */
} fu_srcline_location;

typedef struct fu_srcline_chain {
    uint32_t first, count; /* locations [first, first + count) */
} fu_srcline_chain;

typedef struct fu_srcline_module fu_srcline_module;

/* Open the DWARF of the ELF file at `path` (a separate debug file, or the module itself). A file
 * without DWARF, or whose DWARF libdw refuses, opens (every chain is then empty); an unreadable or
 * non-ELF one fails with FU_ERR_INVALID naming the reason. FU_ERR_NOMEM. */
fu_status fu_srcline_open(const char *path, fu_srcline_module **out, fu_error *err);
/* NULL if the file's DWARF is read, else why not (libdw's message). */
const char *fu_srcline_dwarf_error(const fu_srcline_module *m);
/* The chain at `svma`, resolved on first sight. FU_ERR_NOMEM, or FU_ERR_INVALID past
 * FU_SRCLINE_MAX_ADDRESSES. */
fu_status fu_srcline_lookup(fu_srcline_module *m, uint64_t svma, fu_srcline_chain *out, fu_error *err);
/* Location `index` of a chain (valid until the next lookup, which may grow the array). */
const fu_srcline_location *fu_srcline_location_at(const fu_srcline_module *m, uint32_t index);
/* The text at `offset` (from a location), not NUL-terminated. */
const char *fu_srcline_text(const fu_srcline_module *m, uint32_t offset);
/* Addresses resolved so far. */
size_t fu_srcline_address_count(const fu_srcline_module *m);
void fu_srcline_close(fu_srcline_module *m);

#endif
