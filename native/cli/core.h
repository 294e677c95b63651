/* core: `fastunwind core FILE` in C (core.c). */
#ifndef FASTUNWIND_CLI_CORE_H
#define FASTUNWIND_CLI_CORE_H

#include "arguments.h"
#include "buffer.h"

/* The core's stacks rendered into `out` (its warnings on stderr) and the exit status, or
 * FU_CLI_NOT_SERVED (launcher.h). */
int fu_cli_core(const fu_cli_request *request, fu_buffer *out);

#endif
