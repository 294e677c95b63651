/* Serving a command line natively: see launcher.h. */
#define _GNU_SOURCE
#include "launcher.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backtrace.h"
#include "core.h"
#include "stacks.h"

static char unserved_reason[512];

void fu_cli_unserved(const char *why, const char *detail)
{
    if (!unserved_reason[0])
        snprintf(unserved_reason, sizeof unserved_reason, "%s%s%s", why, detail && detail[0] ? ": " : "",
                 detail ? detail : "");
}

const char *fu_cli_unserved_reason(void) { return unserved_reason[0] ? unserved_reason : "(no reason noted)"; }

int fu_cli_serve(const fu_cli_request *request)
{
    fu_buffer out = {0};
    int status = request->verb == FU_CLI_BACKTRACE ? fu_cli_backtrace(request, &out) : fu_cli_core(request, &out);
    if (status == FU_CLI_NOT_SERVED || status == FU_CLI_INTERRUPTED) {
        free(out.data);
        return status;
    }
    /* -o: the Python CLI's open(path, "w"); one it cannot open is its error to word */
    int fd = request->output ? open(request->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666) : STDOUT_FILENO;
    if (fd < 0) {
        fu_cli_unserved("the output file cannot be opened", request->output);
        free(out.data);
        return FU_CLI_NOT_SERVED;
    }
    bool written = fu_cli_write_all(fd, out.data, out.len);
    if (request->output)
        written = close(fd) == 0 && written;
    free(out.data);
    /* a reader that went away (`| head`): the Python CLI stops quietly with 0 as well */
    return written || !request->output ? status : 1;
}
