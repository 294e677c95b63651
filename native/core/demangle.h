/* demangle: C++ (Itanium ABI), Rust legacy and Rust v0 names, as perf 6.1 prints them: libiberty's
 * cplus_demangle(name, DMGL_NO_OPTS) (perf's demangle_sym without -v: automatic style, no
 * parameters, no `const`; Rust legacy without its ::h<hash>), a "name@plt" as the demangled name
 * + "@plt" (perf demangles before appending it). */
#ifndef FASTUNWIND_DEMANGLE_H
#define FASTUNWIND_DEMANGLE_H

#include <stddef.h>

/* Names longer than this are not demangled (kept as they are): the longest mangled name in
 * libLLVM-14 is ~3.3 KiB; libiberty's own recursion limit guards the rest. */
#define FU_DEMANGLE_MAX_INPUT 16384

/* The demangled form of name[0..len) (malloc'd, NUL-terminated, *out_len set), or NULL if it is not
 * a mangled name (or out of memory). */
char *fu_demangle(const char *name, size_t len, size_t *out_len);

/* True if a name may be mangled (C++ _Z, Rust v0 _R): the only ones worth a demangler call. */
static inline int fu_maybe_mangled(const char *name, size_t len)
{
    return len > 2 && name[0] == '_' && (name[1] == 'Z' || name[1] == 'R');
}

#endif
