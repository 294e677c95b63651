/* Serving a command line natively: see launcher.h. */
#define _GNU_SOURCE
#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backtrace.h"
#include "core.h"
#include "mapped_file.h"
#include "recording.h"
#include "stacks.h"

static char unserved_reason[512];

void fu_cli_unserved(const char *why, const char *detail)
{
    if (!unserved_reason[0])
        snprintf(unserved_reason, sizeof unserved_reason, "%s%s%s", why, detail && detail[0] ? ": " : "",
                 detail ? detail : "");
}

const char *fu_cli_unserved_reason(void) { return unserved_reason[0] ? unserved_reason : "(no reason noted)"; }

/* Write to the opened output unless a write failed already (then its errno is kept). */
static void write_out(fu_cli_output *out, const void *data, size_t len)
{
    errno = 0;
    if (!out->failed && !fu_cli_write_all(out->fd, data, len)) {
        out->failed = true;
        out->write_error = errno ? errno : EIO; /* a write of nothing: no errno of its own */
    }
}

bool fu_cli_output_flush(fu_cli_output *out)
{
    /* -o: the Python CLI's open(path, "w") */
    if (out->fd < 0)
        out->fd = out->path ? open(out->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666) : STDOUT_FILENO;
    if (out->fd < 0)
        return false;
    write_out(out, out->held.data, out->held.len);
    out->held.len = 0;
    return true;
}

/* Whether text written to a file of this kind can be taken back: a regular file's (truncated back),
 * /dev/null's (nothing kept). */
static bool takes_back(const struct stat *st)
{
    return S_ISREG(st->st_mode) || (S_ISCHR(st->st_mode) && st->st_rdev == makedev(1, 3));
}

bool fu_cli_output_open_rewindable(fu_cli_output *out)
{
    struct stat st;
    if (out->fd >= 0 || out->held.len)
        return false;
    if (out->path) {
        /* -o: opened (truncated) now, as the Python CLI opens it before the command runs */
        if ((stat(out->path, &st) == 0 && !takes_back(&st)) || !fu_cli_output_flush(out))
            return false;
        out->start = 0;
    } else {
        int flags = fcntl(STDOUT_FILENO, F_GETFL);
        if (flags < 0 || (flags & O_APPEND) || fstat(STDOUT_FILENO, &st) != 0 || !takes_back(&st))
            return false;
        off_t start = S_ISREG(st.st_mode) ? lseek(STDOUT_FILENO, 0, SEEK_CUR) : 0;
        if (start < 0)
            return false;
        out->fd = STDOUT_FILENO;
        out->start = start;
    }
    out->rewindable = true;
    return true;
}

bool fu_cli_output_rewind(fu_cli_output *out)
{
    if (!out->rewindable)
        return false;
    struct stat st;
    if (fstat(out->fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (ftruncate(out->fd, (off_t)out->start) != 0 || lseek(out->fd, (off_t)out->start, SEEK_SET) < 0))
        return false;
    if (out->path)
        close(out->fd);
    out->fd = -1;
    out->rewindable = false;
    out->failed = false;
    out->write_error = 0;
    out->held.len = 0;
    return true;
}

bool fu_cli_output_add(fu_cli_output *out, const void *data, size_t len)
{
    if (out->fd < 0 || out->held.len)
        return fu_buffer_append(&out->held, data, len);
    write_out(out, data, len);
    return true;
}

/* The tables the Python path would walk with are the ones read here: the auto backend's (compact
 * tables, then eh_elfs, then the DWARF tables: address_space.py default_backend), compact tables
 * not disabled (tables/compact.py enabled). */
static bool default_tables(void)
{
    const char *backend = getenv("FASTUNWIND_BACKEND"), *compact = getenv("FASTUNWIND_COMPACT");
    if ((backend && backend[0] && strcmp(backend, "auto") != 0) || (compact && strcmp(compact, "0") == 0)) {
        fu_cli_unserved("FASTUNWIND_BACKEND or FASTUNWIND_COMPACT chooses other tables", NULL);
        return false;
    }
    return true;
}

int fu_cli_serve(const fu_cli_request *request)
{
    /* a reader that goes away is a failed write, as for the Python CLI (which ignores SIGPIPE too,
     * so the exec of it inherits nothing it would not set itself) */
    signal(SIGPIPE, SIG_IGN);
    fu_error guard_err = {0};
    (void)fu_mapped_file_guard_install(&guard_err); /* refused: files are read into memory instead */
    fu_cli_output out = {.path = request->output, .fd = -1};
    int status = FU_CLI_NOT_SERVED;
    uint64_t changes_before = fu_mapped_file_changes();
    if (default_tables()) {
        switch (request->verb) {
        case FU_CLI_BACKTRACE: status = fu_cli_backtrace(request, &out.held); break;
        case FU_CLI_CORE: status = fu_cli_core(request, &out.held); break;
        case FU_CLI_PERF_SCRIPT: status = fu_cli_perf_script(request, &out); break;
        case FU_CLI_REPORT: status = fu_cli_report(request, &out); break;
        }
    }
    /* a file truncated under its mapping (core/mapped_file.h): read as zeros, so nothing is answered
     * from it; the Python CLI says which file, or how the module is classified */
    if (fu_mapped_file_changes() != changes_before) {
        if (out.fd < 0) {
            fu_cli_unserved("a file changed while read", NULL);
            free(out.held.data);
            return FU_CLI_NOT_SERVED;
        }
        fprintf(stderr, "fastunwind: error: a file changed while read (truncated in place): the output is "
                        "incomplete\n");
        status = 1;
    }
    if ((status == FU_CLI_NOT_SERVED || status == FU_CLI_INTERRUPTED) && out.fd < 0) {
        free(out.held.data);
        return status;
    }
    if (!fu_cli_output_flush(&out)) {
        fu_cli_unserved("the output file cannot be opened", request->output);
        free(out.held.data);
        return FU_CLI_NOT_SERVED;
    }
    bool written = !out.failed;
    int error = out.failed ? out.write_error : 0;
    if (request->output && close(out.fd) != 0) {
        written = false;
        error = error ? error : errno;
    }
    free(out.held.data);
    /* a full disk, an I/O error: the Python CLI's OSError, its message and 1 */
    if (error && error != EPIPE) {
        fprintf(stderr, "fastunwind: error: %s\n", strerror(error));
        return 1;
    }
    /* a reader that went away (`| head`): the Python CLI stops quietly with 0 as well */
    return written || !request->output ? status : 1;
}
