/* launcher: serving a parsed command line (arguments.h) in C.
 *
 * The rule: a command is served natively only where its output (standard output, standard error,
 * exit status) is the Python CLI's byte for byte; wherever that cannot be promised before anything
 * is written or any thread stopped (a table missing from the caches, a file it cannot open the way
 * the Python path does, an error whose wording is the Python path's), fu_cli_serve returns
 * FU_CLI_NOT_SERVED and the Python CLI serves the command line (which fills the caches, so that
 * the next run is native).
 */
#ifndef FASTUNWIND_CLI_LAUNCHER_H
#define FASTUNWIND_CLI_LAUNCHER_H

#include "arguments.h"

/* fu_cli_serve's answer when the Python CLI must serve the command line (not an exit status). */
#define FU_CLI_NOT_SERVED (-1)
/* The exit status after Ctrl-C or SIGTERM (128 + SIGINT, as the Python CLI's). */
#define FU_CLI_INTERRUPTED 130

#include <stdbool.h>

#include "buffer.h"

/* A command's output: held in `held` until written to -o's file or standard output (the file
 * opened on the first write, as the Python CLI's open(path, "w") before the command runs). */
typedef struct fu_cli_output {
    const char *path; /* -o, or NULL: standard output */
    fu_buffer held;
    int fd;           /* -1 until opened */
    bool failed;      /* a write failed: a reader that went away (EPIPE), or write_error */
    int write_error;  /* the failed write's errno */
    bool rewindable;  /* opened by fu_cli_output_open_rewindable: written from `start` on, and taken back
                         by fu_cli_output_rewind */
    long long start;
} fu_cli_output;

/* Write what is held and empty it; false only if -o's file cannot be opened (nothing written then:
 * its error is the Python CLI's to word). */
bool fu_cli_output_flush(fu_cli_output *out);
/* Open the output before anything is known about the run when what is written to it can be taken
 * back: a regular file (standard output's not opened for appending; -o's, or an absent one) or
 * /dev/null. Then the text need not be held (fu_cli_output_add writes it as it comes). */
bool fu_cli_output_open_rewindable(fu_cli_output *out);
/* Take back what a rewindable output was given (truncate it to where the run started, close -o's
 * file), so that the Python CLI may serve the command line after all; false if it is not one. */
bool fu_cli_output_rewind(fu_cli_output *out);
/* Add text after what is held, or, once the output has been written to and nothing is held, write
 * it straight out (holding it would copy it once more); false if out of memory. */
bool fu_cli_output_add(fu_cli_output *out, const void *data, size_t len);

/* The command's exit status, or FU_CLI_NOT_SERVED (nothing written). */
int fu_cli_serve(const fu_cli_request *request);

/* Note why the command is not served natively (the first reason is kept): with
 * FASTUNWIND_NATIVE=require the launcher prints it and exits FU_CLI_REQUIRE_STATUS instead of
 * running the Python CLI (the tests' proof that a command line was served in C). */
void fu_cli_unserved(const char *why, const char *detail);
const char *fu_cli_unserved_reason(void);
#define FU_CLI_REQUIRE_STATUS 125

#endif
