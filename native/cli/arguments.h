/* arguments: the command lines the launcher serves itself, read exactly as the Python CLI's
 * parser (src/fastunwind/commands/backtrace.py, core.py, perf_script.py,
 * report.py) reads them, or not at all.
 *
 * Only the spellings listed in the option tables (FU_CLI_OPTIONS) are accepted; anything else (an
 * abbreviation argparse would accept, another verb, --help, a value the Python parser would word
 * an error about) makes fu_cli_parse return false and the Python CLI run instead, so that every
 * line the user sees is the Python CLI's. tests/unit/layout/test_launcher_options.py checks that
 * every option of the tables exists in the Python parser with the same meaning.
 */
#ifndef FASTUNWIND_CLI_ARGUMENTS_H
#define FASTUNWIND_CLI_ARGUMENTS_H

#include <stdbool.h>
#include <stddef.h>

/* The most --tid options a command line may carry (more: the Python CLI serves it). */
#define FU_CLI_MAX_TIDS 256

typedef enum fu_cli_verb { FU_CLI_BACKTRACE, FU_CLI_CORE, FU_CLI_PERF_SCRIPT, FU_CLI_REPORT } fu_cli_verb;

typedef struct fu_cli_request {
    fu_cli_verb verb;
    int pid;                      /* backtrace: -p */
    int tids[FU_CLI_MAX_TIDS];    /* backtrace: --tid, in the order given */
    size_t tid_count;
    const char *core_file;        /* core: FILE */
    const char *exe;              /* core: --exe, or NULL */
    const char *sysroot;          /* core: --sysroot, or NULL */
    const char *input;            /* perf-script, report: -i (default perf.data) */
    const char *output;           /* -o, or NULL: standard output */
    bool json, registers;
    bool folded;                  /* perf-script: --folded */
    bool children;                /* report: --children */
    const char *sort;             /* report: --sort (default sym) */
    int top;                      /* report: --top (default -1: every row) */
    unsigned synth;               /* backtrace, core: --synth (FU_COMPACT_SYNTH_*, default missing) */
} fu_cli_request;

/* What an option takes (the Python parser's action). */
typedef enum fu_cli_value {
    FU_CLI_FLAG,       /* action="store_true" */
    FU_CLI_INT,        /* type=int, stored */
    FU_CLI_INT_APPEND, /* type=int, action="append" */
    FU_CLI_PATH,       /* a string, stored */
    FU_CLI_SYNTH,      /* choices=COMPACT_SYNTH_MODES: one of the --synth names, stored */
} fu_cli_value;

typedef struct fu_cli_option {
    const char *short_name; /* "-p", or NULL */
    const char *long_name;  /* "--pid" */
    fu_cli_value value;
} fu_cli_option;

/* Read argv (argv[0] the command) into *out; false if the Python CLI must serve the command line. */
bool fu_cli_parse(int argc, char **argv, fu_cli_request *out);

#endif
