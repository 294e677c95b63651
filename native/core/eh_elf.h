/* eh_elf: what the core checks of a compiled unwind table (an eh_elf, fu_unwind_abi.h) before the
 * binding (py/py_eh_elf.c) loads it with dlopen: that the file is a complete x86-64 ELF shared
 * object, so that a truncated or foreign file is refused with a reason instead of crashing the
 * loader. */
#ifndef FASTUNWIND_EH_ELF_H
#define FASTUNWIND_EH_ELF_H

#include <stddef.h>
#include <stdint.h>

#include "fu_unwind_abi.h"

/* Program headers beyond this are not a compiled table (the compiler's output has under 16). */
#define FU_EH_ELF_MAX_PHDRS 64

/* NULL if `path` is a complete x86-64 ELF shared object (ELF header, program headers and the
 * PT_LOAD / PT_DYNAMIC segments inside the file, section headers too if any), else what is wrong,
 * written in `why`. */
const char *fu_eh_elf_check_file(const char *path, char *why, size_t why_size);

/* `n` bytes as lower-case hex into `out` (cut to what fits, NUL-terminated). */
void fu_hex(char *out, size_t out_size, const uint8_t *bytes, size_t n);

/* "cfi", "signal", ... for a fu_eh_elf_status (the names _core.EH_ELF_STATUSES lists); "?" else. */
const char *fu_eh_elf_status_name(int status);

#endif
