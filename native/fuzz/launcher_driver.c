/* launcher_driver: the launcher's entry points (native/cli) under ASAN+UBSAN.
 *
 * fu_cli_parse over LAUNCHER_ROUNDS seeded command lines: tokens of the verbs' options, their
 * values (numbers, paths, abbreviations, "=" forms, bytes that are neither) in any order and count.
 * Every accepted line must be one the launcher can serve: its verb's required argument present,
 * pids and tids positive, tids distinct and within FU_CLI_MAX_TIDS.
 *
 *   launcher_driver_asan --seed S --rounds N
 */
#define FUZZ_DRIVER "launcher_driver"
#define FUZZ_REPLAY "launcher_driver_asan --seed"
#include "fuzz_common.h"

#include <time.h>

#include "arguments.h"

static const char *const TOKENS[] = {
    "backtrace", "core", "-p", "--pid", "--pid=", "-p7", "--tid", "--tid=3", "--json", "--registers", "--reg",
    "-o", "--output", "--output=out", "-oout", "--exe", "--exe=./a", "--sysroot", "--sysroot=/", "--help", "--",
    "-", "", "0", "1", "42", "2147483647", "99999999999", "-5", "+5", " 5", "1_0", "core.1", "/tmp/x", "=",
    "--json=1", "-p=3", "--pidx", "table",
};
#define TOKEN_COUNT (sizeof TOKENS / sizeof *TOKENS)
#define MAX_ARGS 24

static void check_request(const fu_cli_request *r)
{
    CHECK(r->verb == FU_CLI_BACKTRACE || r->verb == FU_CLI_CORE, "verb %d", (int)r->verb);
    if (r->verb == FU_CLI_BACKTRACE)
        CHECK(r->pid > 0 && !r->core_file && !r->exe && !r->sysroot, "backtrace without a pid, or with core's");
    else
        CHECK(r->core_file && r->core_file[0] && r->core_file[0] != '-' && r->pid == 0 && r->tid_count == 0,
              "core without its file, or with backtrace's");
    CHECK(r->tid_count <= FU_CLI_MAX_TIDS, "%zu tids", r->tid_count);
    for (size_t i = 0; i < r->tid_count; i++) {
        CHECK(r->tids[i] > 0, "tid %d", r->tids[i]);
        for (size_t j = 0; j < i; j++)
            CHECK(r->tids[i] != r->tids[j], "tid %d twice", r->tids[i]);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL), rounds = 200000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = strtoull(argv[i + 1], NULL, 10);
    }
    printf("launcher_driver: seed %llu, %llu command lines\n", (unsigned long long)seed, (unsigned long long)rounds);
    uint64_t state = seed;
    char mutated[MAX_ARGS][16];
    size_t accepted = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        char *args[MAX_ARGS + 1];
        int count = 1 + (int)rng_below(&state, MAX_ARGS);
        args[0] = "fastunwind";
        for (int i = 1; i < count; i++) {
            const char *token = i == 1 && rng_below(&state, 4) ? TOKENS[rng_below(&state, 2)]
                                                               : TOKENS[rng_below(&state, TOKEN_COUNT)];
            if (rng_below(&state, 8) == 0) { /* a byte of the token changed, or the token cut */
                snprintf(mutated[i], sizeof mutated[i], "%s", token);
                size_t len = strlen(mutated[i]);
                if (len)
                    mutated[i][rng_below(&state, len)] = (char)(1 + rng_below(&state, 255));
                token = mutated[i];
            }
            args[i] = (char *)token;
        }
        args[count] = NULL;
        char label[64];
        snprintf(label, sizeof label, "command line %llu", (unsigned long long)round);
        fuzz_begin_input(NULL, 0, label);
        fu_cli_request request;
        if (fu_cli_parse(count, args, &request)) {
            check_request(&request);
            accepted++;
        }
    }
    printf("launcher_driver: %zu accepted, every one servable\n", accepted);
    return 0;
}
