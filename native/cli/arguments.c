/* The launcher's command lines: see arguments.h. */
#define _GNU_SOURCE
#include "arguments.h"

#include <string.h>

#include "compact_table.h"

/* The options each verb serves natively (the test of the launcher's options reads these tables:
 * one option a line, as written). */
static const fu_cli_option BACKTRACE_OPTIONS[] = {
    {"-p", "--pid", FU_CLI_INT},
    {NULL, "--tid", FU_CLI_INT_APPEND},
    {NULL, "--registers", FU_CLI_FLAG},
    {NULL, "--json", FU_CLI_FLAG},
    {"-o", "--output", FU_CLI_PATH},
    {NULL, "--synth", FU_CLI_SYNTH},
};
static const fu_cli_option CORE_OPTIONS[] = {
    {NULL, "--exe", FU_CLI_PATH},
    {NULL, "--sysroot", FU_CLI_PATH},
    {NULL, "--registers", FU_CLI_FLAG},
    {NULL, "--json", FU_CLI_FLAG},
    {"-o", "--output", FU_CLI_PATH},
    {NULL, "--synth", FU_CLI_SYNTH},
};

static const fu_cli_option PERF_SCRIPT_OPTIONS[] = {
    {"-i", "--input", FU_CLI_PATH},
    {NULL, "--folded", FU_CLI_FLAG},
    {"-o", "--output", FU_CLI_PATH},
};

static const fu_cli_option REPORT_OPTIONS[] = {
    {"-i", "--input", FU_CLI_PATH},
    {"-o", "--output", FU_CLI_PATH},
    {NULL, "--children", FU_CLI_FLAG},
    {"-s", "--sort", FU_CLI_PATH},
    {NULL, "--top", FU_CLI_INT},
};

/* A positive int written as argparse's int() reads it and nothing else can: 1 to 9 decimal digits. */
static bool parse_positive_int(const char *text, int *out)
{
    size_t len = strlen(text);
    if (len == 0 || len > 9)
        return false;
    int value = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        value = value * 10 + (text[i] - '0');
    }
    *out = value;
    return value > 0;
}

/* The option `arg` names among `options` (exactly, not an abbreviation), and where its value is:
 * `inline_value` after "--name=" or "-pVALUE", else NULL (the next argument). */
static const fu_cli_option *find_option(const fu_cli_option *options, size_t count, const char *arg,
                                        const char **inline_value)
{
    *inline_value = NULL;
    for (size_t i = 0; i < count; i++) {
        const fu_cli_option *option = &options[i];
        size_t long_len = strlen(option->long_name);
        if (strncmp(arg, option->long_name, long_len) == 0) {
            if (arg[long_len] == '\0')
                return option;
            if (arg[long_len] == '=' && option->value != FU_CLI_FLAG) {
                *inline_value = arg + long_len + 1;
                return option;
            }
        }
        if (option->short_name && strncmp(arg, option->short_name, 2) == 0) {
            if (arg[2] == '\0')
                return option;
            if (option->value != FU_CLI_FLAG && arg[2] != '=') {
                *inline_value = arg + 2;
                return option;
            }
        }
    }
    return NULL;
}

static bool store(fu_cli_request *out, const fu_cli_option *option, const char *value)
{
    const char *name = option->long_name;
    if (option->value == FU_CLI_FLAG) {
        if (strcmp(name, "--json") == 0)
            out->json = true;
        else if (strcmp(name, "--folded") == 0)
            out->folded = true;
        else if (strcmp(name, "--children") == 0)
            out->children = true;
        else
            out->registers = true;
        return true;
    }
    /* a value the Python parser could read as an option, or an empty one: its words, not ours */
    if (value[0] == '-' || value[0] == '\0')
        return false;
    if (option->value == FU_CLI_SYNTH) {
        for (unsigned mode = 0; mode < FU_COMPACT_SYNTH_MODES; mode++)
            if (strcmp(value, fu_compact_synth_mode_name(mode)) == 0) {
                out->synth = mode;
                return true;
            }
        return false; /* not a choice: the Python parser's error */
    }
    if (option->value == FU_CLI_PATH) {
        if (strcmp(name, "--output") == 0)
            out->output = value;
        else if (strcmp(name, "--input") == 0)
            out->input = value;
        else if (strcmp(name, "--sort") == 0)
            out->sort = value;
        else if (strcmp(name, "--exe") == 0)
            out->exe = value;
        else
            out->sysroot = value;
        return true;
    }
    int number;
    if (!parse_positive_int(value, &number))
        return false;
    if (option->value == FU_CLI_INT) {
        *(strcmp(name, "--top") == 0 ? &out->top : &out->pid) = number;
        return true;
    }
    for (size_t i = 0; i < out->tid_count; i++)
        if (out->tids[i] == number)
            return true; /* a thread asked for twice is shown once */
    if (out->tid_count == FU_CLI_MAX_TIDS)
        return false;
    out->tids[out->tid_count++] = number;
    return true;
}

bool fu_cli_parse(int argc, char **argv, fu_cli_request *out)
{
    memset(out, 0, sizeof *out);
    out->synth = FU_COMPACT_SYNTH_MISSING; /* commands.synth_mode's default with the auto backend */
    if (argc < 2)
        return false;
    const fu_cli_option *options;
    size_t count;
    if (strcmp(argv[1], "backtrace") == 0) {
        out->verb = FU_CLI_BACKTRACE;
        options = BACKTRACE_OPTIONS;
        count = sizeof BACKTRACE_OPTIONS / sizeof *BACKTRACE_OPTIONS;
    } else if (strcmp(argv[1], "core") == 0) {
        out->verb = FU_CLI_CORE;
        options = CORE_OPTIONS;
        count = sizeof CORE_OPTIONS / sizeof *CORE_OPTIONS;
    } else if (strcmp(argv[1], "perf-script") == 0) {
        out->verb = FU_CLI_PERF_SCRIPT;
        out->input = "perf.data"; /* the Python parser's default */
        options = PERF_SCRIPT_OPTIONS;
        count = sizeof PERF_SCRIPT_OPTIONS / sizeof *PERF_SCRIPT_OPTIONS;
    } else if (strcmp(argv[1], "report") == 0) {
        out->verb = FU_CLI_REPORT;
        out->input = "perf.data"; /* the Python parser's defaults */
        out->sort = "sym";
        out->top = -1;
        options = REPORT_OPTIONS;
        count = sizeof REPORT_OPTIONS / sizeof *REPORT_OPTIONS;
    } else {
        return false;
    }
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || arg[1] == '\0') {
            /* a positional argument: core's FILE, once */
            if (out->verb != FU_CLI_CORE || out->core_file || arg[0] == '-' || arg[0] == '\0')
                return false;
            out->core_file = arg;
            continue;
        }
        const char *value;
        const fu_cli_option *option = find_option(options, count, arg, &value);
        if (!option)
            return false; /* --help, --, an abbreviation, an option of another verb */
        if (option->value != FU_CLI_FLAG && !value) {
            if (i + 1 == argc)
                return false;
            value = argv[++i];
        }
        if (!store(out, option, value))
            return false;
    }
    switch (out->verb) {
    case FU_CLI_BACKTRACE: return out->pid > 0;
    case FU_CLI_CORE: return out->core_file != NULL;
    case FU_CLI_PERF_SCRIPT:
    case FU_CLI_REPORT: return true;
    }
    return false;
}
