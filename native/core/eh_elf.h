/* eh_elf: what the core checks of a compiled unwind table (an eh_elf, fu_unwind_abi.h) before it is
 * loaded with dlopen: that the file is a complete x86-64 ELF shared object, so that a truncated or
 * foreign file is refused with a reason instead of crashing the loader; and the loading and the
 * checks of what it says it is (fu_eh_elf_load: the binding py/py_eh_elf.c and the launcher). */
#ifndef FASTUNWIND_EH_ELF_H
#define FASTUNWIND_EH_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fu_unwind_abi.h"

/* Program headers beyond this are not a compiled table (the compiler's output has under 16). */
#define FU_EH_ELF_MAX_PHDRS 64

/* A compiled table's file larger than this is refused before it is copied (fu_eh_elf_load): libLLVM-14's
 * is 4.3 MB. */
#define FU_EH_ELF_MAX_FILE_BYTES (256u << 20)

/* NULL if `path` is a complete x86-64 ELF shared object (its headers as core/elf_file.h reads them,
 * the PT_LOAD / PT_DYNAMIC segments inside the file), else what is wrong, written in `why`. */
const char *fu_eh_elf_check_file(const char *path, char *why, size_t why_size);

/* The version of the generator (tables/eh_elf.py) whose eh_elfs this fastunwind uses: one it does
 * did not write is refused, and rebuilt by `fastunwind compile`. */
#define FU_EH_ELF_GENERATOR_VERSION 8

/* An eh_elf loaded (dlopen) and checked: its entry points and its fu_eh_elf_info (a copy). */
typedef struct fu_eh_elf_loaded {
    void *handle;
    int copy_fd; /* the sealed copy dlopen mapped (fu_eh_elf_load), held while loaded: valid when handle is */
    fu_eh_elf_step_fn step;
    fu_eh_elf_find_fn find;
    const fu_eh_elf_body_fn *bodies;
    fu_eh_elf_info info;
} fu_eh_elf_loaded;

/* Load the eh_elf at `path` and check it before anything calls into it. Its code runs from its
 * mapping, where no page of zeros can stand in for a page cut by a truncation in place
 * (core/mapped_file.h), so what is loaded is a private copy: the file's bytes copied into a memfd
 * sealed against any change of size or bytes, the file's checks (fu_eh_elf_check_file's) on that
 * copy, and dlopen(RTLD_NOW | RTLD_LOCAL) of /proc/self/fd/N. The memfd is held until
 * fu_eh_elf_unload: the loader knows an object by that name, which another descriptor of the same
 * number must not get while it is loaded. Then its symbols, then its info against what
 * the caller expects: FU_UNWIND_ABI_VERSION, `generator_version` (FU_EH_ELF_GENERATOR_VERSION
 * but in tests), the key, and with
 * `check_sizes` the sizes of the CFI sections it was built from (FU_EH_ELF_NO_SECTION: none).
 * NULL and *out filled, or what is wrong (written in `why`; the handle and the copy closed): a file
 * above FU_EH_ELF_MAX_FILE_BYTES, one cut while copied ("changed while read"), no /proc. */
const char *fu_eh_elf_load(const char *path, uint32_t key_kind, const uint8_t *key, size_t key_size,
                           uint32_t generator_version, bool check_sizes, uint64_t eh_frame_size, uint64_t debug_frame_size, fu_eh_elf_loaded *out,
                           char *why, size_t why_size);
void fu_eh_elf_unload(fu_eh_elf_loaded *loaded);

/* `n` bytes as lower-case hex into `out` (cut to what fits, NUL-terminated). */
void fu_hex(char *out, size_t out_size, const uint8_t *bytes, size_t n);

/* "cfi", "signal", ... for a fu_eh_elf_status (the names _core.EH_ELF_STATUSES lists); "?" else. */
const char *fu_eh_elf_status_name(int status);

#endif
