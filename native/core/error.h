/* The C core's errors: one status per kind of failure, and the one table that names the Python
 * exception each status is raised as (fu_status_exception). The binding (py/py_core.c,
 * py_core_raise) resolves that name in fastunwind.errors, then in builtins, so no binding keeps an
 * exception class of its own and the core stays free of the Python API.
 *
 * Every entry point that can fail returns a fu_status and fills a fu_error with what, where and which
 * value (STYLE.md, habit 4); FU_OK is 0 so that `if (status)` reads as "failed".
 */
#ifndef FASTUNWIND_ERROR_H
#define FASTUNWIND_ERROR_H

typedef enum fu_status {
    FU_OK = 0,
    FU_ERR_CFI = 1,        /* malformed CFI: CfiError */
    FU_ERR_EXPR = 2,       /* DWARF expression error: ExprError */
    FU_ERR_NOMEM = 3,      /* out of memory: MemoryError */
    FU_ERR_NOT_FOUND = 4,  /* no FDE covers an address: NoUnwindInfo */
    FU_ERR_COMPACT = 5,    /* a compact table cannot be built, or a serialized one is corrupt: CompactTableError */
    FU_ERR_EH_ELF = 6,     /* an eh_elf cannot be built or loaded: EhElfError */
    FU_ERR_INVALID = 7,    /* an argument out of range or inconsistent: ValueError */
    FU_ERR_PERF_DATA = 16, /* malformed perf.data: PerfDataError */
    FU_ERR_TRACE = 17,     /* a command cannot be started or traced under ptrace: TraceError */
    FU_ERR_BPF = 18,       /* the kernel refused the BPF unwinder (load, map, attach): BpfError */
    FU_ERR_CORE = 19,      /* a malformed or unsupported core file: CoreFileError */
    FU_ERR_ELF = 20,       /* a malformed or unsupported ELF file: ElfError */
    FU_ERR_BPF_MAP_MEMORY = 21, /* the kernel refused the memory of the BPF table map: BpfMapMemoryError */
    FU_ERR_FILE_CHANGED = 22, /* a mapped file truncated while read (mapped_file.h): FileChangedError */
} fu_status;

typedef struct fu_error {
    fu_status status;
    char message[256];
} fu_error;

/* Set err to `status` and the formatted message (truncated to 255 bytes); returns `status`. */
fu_status fu_fail(fu_error *err, fu_status status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The name of the Python exception `status` is raised as: a class of fastunwind.errors ("CfiError",
 * "ExprError", "NoUnwindInfo", "CompactTableError", "EhElfError", "PerfDataError", "TraceError",
 * "CoreFileError", "ElfError", "BpfMapMemoryError", "FileChangedError") or a builtin
 * ("MemoryError", "ValueError"; "ValueError" for a status not in the table). */
const char *fu_status_exception(fu_status status);

#endif
