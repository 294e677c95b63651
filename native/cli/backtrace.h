/* backtrace: `fastunwind backtrace -p PID` in C (backtrace.c). */
#ifndef FASTUNWIND_CLI_BACKTRACE_H
#define FASTUNWIND_CLI_BACKTRACE_H

#include "arguments.h"
#include "buffer.h"

/* The snapshot rendered into `out` and the exit status, or FU_CLI_NOT_SERVED (launcher.h). */
int fu_cli_backtrace(const fu_cli_request *request, fu_buffer *out);

#endif
