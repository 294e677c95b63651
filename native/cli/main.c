/* fastunwind: the command users run (installed as the venv's `fastunwind`).
 *
 * `backtrace -p PID` and `core FILE` are served here, in C, without starting a Python interpreter
 * (its start alone costs more than the whole snapshot): when the command line is one the launcher
 * reads exactly as the Python CLI does (arguments.h) and everything the snapshot needs is at hand
 * (launcher.h: the modules' compact and symbol tables in the caches the Python path fills).
 * Everything else, and whatever it cannot serve with the Python CLI's very bytes, is the Python
 * CLI's: this process becomes `fastunwind-python ARGS`, the script pip installs beside this
 * program (pyproject.toml: `python -m fastunwind` by the interpreter of this installation), or,
 * run from the tree (the in-place build, no script beside it), `FU_CLI_PYTHON -m fastunwind ARGS`
 * (the interpreter recorded at build time), so that behaviour is the Python CLI's to the byte.
 * FASTUNWIND_NATIVE=0 sends every command line there; FASTUNWIND_NATIVE=require never does (it
 * says why it would have).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arguments.h"
#include "launcher.h"

#ifndef FU_CLI_PYTHON
#error "FU_CLI_PYTHON: the interpreter of the Python CLI (setup.py defines it)"
#endif

/* The name of the Python CLI's script pip installs beside the launcher (pyproject.toml). */
#define PYTHON_CLI_SCRIPT "fastunwind-python"

/* The path of PYTHON_CLI_SCRIPT in this program's directory into `path`; false if there is none. */
static bool installed_python_cli(char *path, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", path, size);
    if (n <= 0 || (size_t)n >= size)
        return false;
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (!slash || (size_t)(path + size - (slash + 1)) < sizeof PYTHON_CLI_SCRIPT)
        return false;
    memcpy(slash + 1, PYTHON_CLI_SCRIPT, sizeof PYTHON_CLI_SCRIPT);
    return access(path, X_OK) == 0;
}

/* Become `fastunwind-python ARGS` (installed) or `FU_CLI_PYTHON -m fastunwind ARGS` (run from the
 * tree); returns only if that cannot start. */
static int run_python_cli(int argc, char **argv)
{
    static char script[PATH_MAX];
    char **python_argv = calloc((size_t)argc + 3, sizeof *python_argv);
    if (!python_argv) {
        fputs("fastunwind: error: out of memory\n", stderr);
        return 1;
    }
    const char *program = FU_CLI_PYTHON;
    int first = 3;
    if (installed_python_cli(script, sizeof script)) {
        program = script;
        first = 1;
    } else {
        python_argv[1] = (char *)"-m";
        python_argv[2] = (char *)"fastunwind";
    }
    python_argv[0] = (char *)program;
    for (int i = 1; i < argc; i++)
        python_argv[first + i - 1] = argv[i];
    fflush(NULL);
    execv(program, python_argv);
    fprintf(stderr, "fastunwind: error: cannot run the Python CLI (%s): %s\n", program, strerror(errno));
    free(python_argv);
    return 1;
}

int main(int argc, char **argv)
{
    const char *native = getenv("FASTUNWIND_NATIVE");
    bool required = native && strcmp(native, "require") == 0;
    fu_cli_request request;
    int status = FU_CLI_NOT_SERVED;
    if (native && strcmp(native, "0") == 0)
        fu_cli_unserved("FASTUNWIND_NATIVE=0", NULL);
    else if (!fu_cli_parse(argc, argv, &request))
        fu_cli_unserved("a command line the launcher does not read", NULL);
    else
        status = fu_cli_serve(&request);
    if (status != FU_CLI_NOT_SERVED)
        return status;
    if (required) {
        fprintf(stderr, "fastunwind: not served natively: %s\n", fu_cli_unserved_reason());
        return FU_CLI_REQUIRE_STATUS;
    }
    return run_python_cli(argc, argv);
}
