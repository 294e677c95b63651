/* Serving a command line natively: see launcher.h. */
#include "launcher.h"

int fu_cli_serve(const fu_cli_request *request)
{
    (void)request;
    return FU_CLI_NOT_SERVED;
}
