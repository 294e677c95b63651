/* fuzz_common: what the standalone sanitizer drivers of native/fuzz share (cfi_driver.c,
 * walk_driver.c): the current input, saved when it fails (sanitizer report, invariant violation,
 * watchdog), the sanitizer defaults, CHECK, and the seeded randomness.
 *
 * Include once, after defining FUZZ_DRIVER (the program name in messages) and FUZZ_REPLAY (the
 * command that replays a saved input, followed by its path). FU_LIBFUZZER builds leave out the
 * signal handlers and sanitizer defaults (libFuzzer has its own).
 */
#ifndef FASTUNWIND_FUZZ_COMMON_H
#define FASTUNWIND_FUZZ_COMMON_H

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#define FUZZ_HAVE_SANITIZER_CALLBACK 1
#endif
#endif

/* ---- failure reporting: which input, saved for replay ---------------------------------------- */

static const uint8_t *current_data;
static size_t current_size;
static char current_label[512];
static char save_path[1024]; /* where the current input is written if it fails; "" = nowhere */

/* Name the input about to run (what a failure report says and saves). */
static inline void fuzz_begin_input(const uint8_t *data, size_t size, const char *label)
{
    current_data = data;
    current_size = size;
    snprintf(current_label, sizeof current_label, "%s", label);
}

/* Async-signal-safe: called from the SIGALRM handler and the sanitizer death callback. */
static void save_current_input(void)
{
    if (!save_path[0] || !current_data)
        return;
    int fd = open(save_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return;
    size_t done = 0;
    while (done < current_size) {
        ssize_t n = write(fd, current_data + done, current_size - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(fd);
}

static void write_stderr(const char *s) { (void)!write(2, s, strlen(s)); }

static volatile sig_atomic_t failure_reported;

static void report_failing_input(const char *what)
{
    if (failure_reported)
        return; /* an invariant violation or a sanitizer report also ends in SIGABRT */
    failure_reported = 1;
    write_stderr(FUZZ_DRIVER ": ");
    write_stderr(what);
    write_stderr(" on input: ");
    write_stderr(current_label);
    write_stderr("\n");
    if (save_path[0] && current_data) {
        save_current_input();
        write_stderr(FUZZ_DRIVER ": input saved to ");
        write_stderr(save_path);
        write_stderr(" (replay: " FUZZ_REPLAY " ");
        write_stderr(save_path);
        write_stderr(")\n");
    }
}

#ifndef FU_LIBFUZZER
/* Sanitizer defaults for the standalone driver (environment options still win). gcc links ASan
 * and UBSan as two runtimes, and only ASan's calls the death callback; with abort_on_error a
 * UBSan report ends in abort(), which on_abort catches. Exported through -rdynamic, which the
 * runtimes (shared libraries) need to see these. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void)
{
    return "abort_on_error=1:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1";
}
__attribute__((used)) const char *__ubsan_default_options(void)
{
    return "abort_on_error=1:halt_on_error=1:print_stacktrace=1";
}

static void on_sanitizer_death(void) { report_failing_input("sanitizer report"); }

static void on_abort(int signo)
{
    report_failing_input("abort (sanitizer report or invariant violation)");
    signal(signo, SIG_DFL);
    raise(signo);
}

static void on_alarm(int signo)
{
    (void)signo;
    report_failing_input("TIMEOUT (watchdog)");
    _exit(3);
}

/* The failing input reported (and saved) on a sanitizer report, an abort and the watchdog's alarm. */
static void fuzz_install_failure_handlers(void)
{
#ifdef FUZZ_HAVE_SANITIZER_CALLBACK
    __sanitizer_set_death_callback(on_sanitizer_death);
#endif
    signal(SIGABRT, on_abort);
    signal(SIGALRM, on_alarm);
}
#endif

static void invariant_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void invariant_failed(const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fprintf(stderr, FUZZ_DRIVER ": invariant violated: %s\n", message);
    report_failing_input("invariant violation");
    abort();
}

#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond))                      \
            invariant_failed(__VA_ARGS__); \
    } while (0)

/* ---- deterministic randomness (splitmix64: reproducible from the printed seed) --------------- */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n); n = 0 stands for 2^64 (a range + 1 that wrapped). */
static uint64_t rng_below(uint64_t *state, uint64_t n) { return n ? rng_next(state) % n : rng_next(state); }

/* ---- mutations ------------------------------------------------------------------------------ */

/* A seeded mutant of [data, data + size), in place: bit flips, a cut (the size it keeps is
 * returned), or one of `hostile`'s values over 1, 2, 4 or 8 bytes at an aligned offset. */
static inline size_t fuzz_mutate(uint8_t *data, size_t size, uint64_t *rng, const uint64_t *hostile, size_t hostile_count)
{
    switch (rng_below(rng, 4)) {
    case 0: /* bit flips */
        for (uint64_t i = 0, n = 1 + rng_below(rng, 8); size && i < n; i++)
            data[rng_below(rng, size)] ^= (uint8_t)(1u << rng_below(rng, 8));
        return size;
    case 1: /* cut */
        return size ? (size_t)rng_below(rng, size) : 0;
    default: {
        unsigned width = 1u << rng_below(rng, 4);
        if (size < width)
            return size;
        size_t at = (size_t)rng_below(rng, size - width + 1) & ~(size_t)(width - 1);
        uint64_t v = hostile[rng_below(rng, hostile_count)];
        memcpy(data + at, &v, width);
        return size;
    }
    }
}

/* ---- the options and replay of the drivers that build and mutate inputs --------------------- */

#ifndef FU_LIBFUZZER
#include <time.h>

#include "fuzz_files.h"

/* --seed N, --built N (inputs built by the driver), --mutations N (of each file given), --timeout S
 * (per input), --save-dir DIR (a failing input saved there as `failure_name`), --replay FILE; the
 * first other argument starts the files. */
typedef struct fuzz_options {
    uint64_t seed, built, mutations;
    unsigned timeout;
    const char *replay;
    int first_file;
} fuzz_options;

static inline fuzz_options fuzz_parse_options(int argc, char **argv, uint64_t built, uint64_t mutations,
                                              const char *failure_name)
{
    fuzz_options o = {(uint64_t)time(NULL), built, mutations, 20, NULL, argc};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            o.seed = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--built") == 0 && i + 1 < argc)
            o.built = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--mutations") == 0 && i + 1 < argc)
            o.mutations = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            o.timeout = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--save-dir") == 0 && i + 1 < argc)
            snprintf(save_path, sizeof save_path, "%s/%s", argv[++i], failure_name);
        else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc)
            o.replay = argv[++i];
        else {
            o.first_file = i;
            break;
        }
    }
    return o;
}

/* A function that runs one input (the label names it in a failure report). */
typedef void (*fuzz_run_fn)(const uint8_t *data, size_t size, const char *label, uint64_t *rng);

/* Input `number` the driver built (`what`: "core", "file"), run, then one mutant of it, run; the
 * data freed. */
static inline void fuzz_run_built(uint8_t *data, size_t size, const char *what, uint64_t number,
                                  const fuzz_options *o, uint64_t *rng, fuzz_run_fn run,
                                  size_t (*mutate)(uint8_t *data, size_t size, uint64_t *rng))
{
    char label[256];
    snprintf(label, sizeof label, "built %s %llu (seed %llu)", what, (unsigned long long)number,
             (unsigned long long)o->seed);
    alarm(o->timeout);
    run(data, size, label, rng);
    size_t kept = mutate(data, size, rng);
    snprintf(label, sizeof label, "mutant of built %s %llu (seed %llu)", what, (unsigned long long)number,
             (unsigned long long)o->seed);
    run(data, kept, label, rng);
    free(data);
}

/* --replay: the saved input run once by `run`; the exit status (0 passed, 2 unreadable). */
static inline int fuzz_replay(const fuzz_options *o, uint64_t *rng, fuzz_run_fn run)
{
    size_t size;
    uint8_t *data = fuzz_read_file(o->replay, SIZE_MAX, &size);
    if (!data)
        return 2;
    alarm(o->timeout);
    run(data, size, o->replay, rng);
    free(data);
    printf(FUZZ_DRIVER ": %s passed\n", o->replay);
    return 0;
}
#endif

#endif
