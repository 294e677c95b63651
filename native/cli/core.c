/* `fastunwind core FILE` in C: see core.h. */
#include "core.h"

#include "launcher.h"

int fu_cli_core(const fu_cli_request *request, fu_buffer *out)
{
    (void)request;
    (void)out;
    return FU_CLI_NOT_SERVED;
}
