/* The error table (error.h). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

fu_status fu_fail(fu_error *err, fu_status status, const char *fmt, ...)
{
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}

const char *fu_status_exception(fu_status status)
{
    switch (status) {
    case FU_ERR_CFI: return "CfiError";
    case FU_ERR_EXPR: return "ExprError";
    case FU_ERR_NOMEM: return "MemoryError";
    case FU_ERR_NOT_FOUND: return "NoUnwindInfo";
    case FU_ERR_COMPACT: return "CompactTableError";
    case FU_ERR_EH_ELF: return "EhElfError";
    case FU_ERR_PERF_DATA: return "PerfDataError";
    case FU_ERR_TRACE: return "TraceError";
    case FU_ERR_BPF: return "BpfError";
    case FU_ERR_CORE: return "CoreFileError";
    case FU_ERR_ELF: return "ElfError";
    case FU_ERR_BPF_MAP_MEMORY: return "BpfMapMemoryError";
    case FU_ERR_FILE_CHANGED: return "FileChangedError";
    case FU_OK:
    case FU_ERR_INVALID:
    default: return "ValueError";
    }
}
