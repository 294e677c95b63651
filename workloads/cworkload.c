/* cworkload: a CPU-bound program whose samples land in the places a DWARF unwinder finds hard.
 *
 *   cworkload SECONDS [PHASE...]
 *
 * Runs the phases below round-robin, each for a slice of SLICE_MILLISECONDS, until SECONDS of its own
 * CPU time have passed (every phase spins: on a loaded machine perf's cpu-clock takes as many
 * samples as on an idle one), or only the named PHASEs. Every phase is a noinline function with a
 * distinctive name so a sample can be attributed from its symbols alone (tests/perf checks that
 * each phase shows up in `perf script`):
 *
 *   phase_deep_recursion     recurse_deep_nontail: 200 non-tail-recursive frames, work at the leaf
 *                            and every 50 levels (recursion_leaf_work)
 *   phase_big_frame_recursion recurse_big_frames: 48 frames of 512+ bytes, deeper than the 8 KiB of
 *                            stack perf copies per sample, so perf's copy cuts the stack short
 *   phase_qsort_callbacks    qsort -> compare_records_with_work: libc calling back into us
 *   phase_plt_libm_libc      sin/cos/exp/log/memcpy/strlen through the PLT into libm and libc
 *   phase_signal_timer       SIGALRM from an interval timer interrupts spin_until_signal; the
 *                            handler sigalrm_handler_work runs ~SIGNAL_WORK_MILLISECONDS with
 *                            __restore_rt beneath it and the interrupted (not returned-to) PC below
 *   phase_signal_raise       raise(SIGUSR1) -> sigusr1_handler_work, beneath: __restore_rt, then
 *                            libc's raise / pthread_kill path
 *   phase_drap_realign       drap_realigned_vla: a VLA plus an _Alignas(64) local, so gcc -O2
 *                            realigns the stack through a DRAP register (CFA = r10, then a
 *                            dereferencing DW_CFA_def_cfa_expression); it calls drap_callee_leaf
 *   phase_noreturn_longjmp   noreturn_caller ends in a call to the noreturn
 *                            noreturn_spin_then_longjmp (so its return address may point past the
 *                            end of noreturn_caller); that spins, then longjmps back
 *
 * Build it with workloads/Makefile: -O2 -fomit-frame-pointer -g (CFI in .eh_frame), and the
 * frame-pointer-only variants without CFI.
 */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
/* noinline is not enough to keep gcc -O2 from cloning (foo.constprop.0) or splitting (foo.part.0)
 * a function, which would rename the symbol the tests look for. */
#define PHASE_FUNCTION __attribute__((noinline, noclone, noipa))

/* 10 ms per phase slice: at -F 1000..2000 that is 10-20 samples per slice, and a 1 s recording
 * visits every one of the 8 phases about 12 times. */
#define SLICE_MILLISECONDS 10
#define RECURSION_DEPTH 200
#define SORT_RECORDS 2048
/* Long enough that most samples taken while the signal phase runs land inside the handler. */
#define SIGNAL_WORK_MILLISECONDS 8

volatile uint64_t sink; /* results go here so -O2 cannot delete the work */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A little arithmetic the compiler cannot fold away; used as "real work" by every phase. */
static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* ---- deep recursion ---------------------------------------------------------------------- */

PHASE_FUNCTION uint64_t recursion_leaf_work(uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 20000; i++)
        x = mix(x + (uint64_t)i);
    return x;
}

/* Not a tail call: the result of the recursive call goes through mix() after it returns, so every
 * level keeps its frame and the stack really is RECURSION_DEPTH frames deep at the leaf. (A plain
 * `below * 31 + depth` is not enough: gcc's tail-recursion pass turns a linear accumulator like that
 * into a loop, leaving one frame.) */
PHASE_FUNCTION uint64_t recurse_deep_nontail(int depth, uint64_t seed) {
    if (depth == 0)
        return recursion_leaf_work(seed);
    uint64_t below = recurse_deep_nontail(depth - 1, mix(seed + (uint64_t)depth));
    /* Work every 50 levels as well as at the bottom, so samples land at several stack depths. Each
     * level takes 32 bytes of stack, so all 200 fit in the 8 KiB perf copies per sample, but perf
     * script prints at most kernel.perf_event_max_stack (127) frames: the deeper samples are cut
     * there, the shallower ones reach main. */
    if (depth % 50 == 0)
        below ^= recursion_leaf_work(below);
    return mix(below) ^ (uint64_t)depth;
}

/* 48 levels of 512+ byte frames, about 27 KiB: more than the 8 KiB of stack perf copies by default,
 * so a sample at the bottom has its stack cut off by the copy, well before the 127-frame limit. */
#define BIG_FRAME_DEPTH 48

PHASE_FUNCTION uint64_t recurse_big_frames(int depth, uint64_t seed) {
    volatile uint64_t frame_filler[64]; /* volatile: kept on the stack, not in registers */
    for (int i = 0; i < 64; i++)
        frame_filler[i] = mix(seed + (uint64_t)i);
    uint64_t below = depth == 0 ? recursion_leaf_work(seed)
                                : recurse_big_frames(depth - 1, frame_filler[depth & 63]);
    return mix(below) ^ frame_filler[(below >> 3) & 63];
}

PHASE_FUNCTION void phase_big_frame_recursion(double until) {
    uint64_t seed = 1;
    while (now_seconds() < until)
        sink += recurse_big_frames(BIG_FRAME_DEPTH, seed++);
}

PHASE_FUNCTION void phase_deep_recursion(double until) {
    uint64_t seed = 1;
    while (now_seconds() < until)
        sink += recurse_deep_nontail(RECURSION_DEPTH, seed++);
}

/* ---- qsort with a comparator doing real work --------------------------------------------- */

struct record {
    uint64_t key;
    char name[24];
};

PHASE_FUNCTION int compare_records_with_work(const void *left, const void *right) {
    const struct record *a = left, *b = right;
    uint64_t ka = a->key, kb = b->key;
    for (int i = 0; i < 40; i++) {
        ka = mix(ka);
        kb = mix(kb);
    }
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return strcmp(a->name, b->name);
}

PHASE_FUNCTION void phase_qsort_callbacks(double until) {
    static struct record records[SORT_RECORDS];
    uint64_t round = 0;
    while (now_seconds() < until) {
        for (int i = 0; i < SORT_RECORDS; i++) {
            records[i].key = mix((uint64_t)i * 7919 + round);
            snprintf(records[i].name, sizeof records[i].name, "r%d", i);
        }
        qsort(records, SORT_RECORDS, sizeof records[0], compare_records_with_work);
        sink += records[0].key;
        round++;
    }
}

/* ---- PLT calls into libm and libc -------------------------------------------------------- */

PHASE_FUNCTION void phase_plt_libm_libc(double until) {
    static char buffer_a[4096], buffer_b[4096];
    volatile size_t length = sizeof buffer_a - 1; /* volatile: keep memcpy a real call */
    memset(buffer_a, 'x', sizeof buffer_a - 1);
    double x = 0.5;
    while (now_seconds() < until) {
        for (int i = 0; i < 2000; i++) {
            x = sin(x) + cos(x * 0.5) + exp(-x) + log(x + 2.0);
            memcpy(buffer_b, buffer_a, length);
            sink += strlen(buffer_b);
        }
        sink += (uint64_t)(x * 1000.0);
    }
}

/* ---- signal handlers that do work -------------------------------------------------------- */

static volatile sig_atomic_t signal_handled;

PHASE_FUNCTION void signal_handler_busy_work(void) {
    double until = now_seconds() + SIGNAL_WORK_MILLISECONDS * 1e-3;
    uint64_t x = 12345;
    while (now_seconds() < until)
        for (int i = 0; i < 1000; i++)
            x = mix(x + (uint64_t)i);
    sink += x;
}

/* The handlers work in their own bodies as well as in a callee, so samples land both with the
 * handler as the leaf (directly above __restore_rt) and one frame further up. */
PHASE_FUNCTION void sigalrm_handler_work(int signal_number) {
    uint64_t x = (uint64_t)signal_number;
    for (int i = 0; i < 200000; i++)
        x = mix(x + (uint64_t)i);
    sink += x;
    signal_handler_busy_work();
    signal_handled = 1;
}

PHASE_FUNCTION void sigusr1_handler_work(int signal_number) {
    uint64_t x = (uint64_t)signal_number;
    for (int i = 0; i < 200000; i++)
        x = mix(x + (uint64_t)i);
    sink += x;
    signal_handler_busy_work();
    signal_handled = 1;
}

/* Interrupted by SIGALRM: the signal frame's saved PC is in this loop, not after a call. */
PHASE_FUNCTION void spin_until_signal(void) {
    uint64_t x = 1;
    while (!signal_handled)
        x = mix(x);
    sink += x;
}

PHASE_FUNCTION void phase_signal_timer(double until) {
    while (now_seconds() < until) {
        signal_handled = 0;
        struct itimerval timer = {.it_value = {.tv_sec = 0, .tv_usec = 1000}};
        setitimer(ITIMER_REAL, &timer, NULL);
        spin_until_signal();
    }
}

PHASE_FUNCTION void phase_signal_raise(double until) {
    while (now_seconds() < until) {
        signal_handled = 0;
        raise(SIGUSR1);
        sink += (uint64_t)signal_handled;
    }
}

/* ---- stack realignment through DRAP ------------------------------------------------------ */

/* 200 rounds, so that the tests' short recordings sample it as well as its caller (0.5 s at 1000 Hz:
 * 13 samples here, 37 in the caller); with 20 rounds it got a tenth of the phase's samples, and a
 * test that needs one here failed once for lack of it. */
PHASE_FUNCTION uint64_t drap_callee_leaf(const uint64_t *values, int count) {
    uint64_t x = 0;
    for (int round = 0; round < 200; round++)
        for (int i = 0; i < count; i++)
            x = mix(x ^ values[i]);
    return x;
}

/* gcc -O2 -fomit-frame-pointer: the _Alignas(64) local forces realignment and the VLA makes the
 * frame size dynamic, so gcc saves the incoming stack pointer in a DRAP register (r10) and the CFA
 * is expressed through it ("DW_CFA_def_cfa: r10 ofs 0", then
 * "DW_CFA_def_cfa_expression (DW_OP_breg6 (rbp): -8; DW_OP_deref)"). */
PHASE_FUNCTION uint64_t drap_realigned_vla(int count) {
    uint64_t values[count];
    _Alignas(64) uint64_t aligned_block[8];
    for (int i = 0; i < 8; i++)
        aligned_block[i] = mix((uint64_t)i + (uint64_t)(uintptr_t)aligned_block % 64);
    uint64_t x = 0;
    for (int round = 0; round < 200; round++)
        for (int i = 0; i < count; i++) {
            values[i] = mix(x + aligned_block[i & 7] + (uint64_t)i);
            x ^= values[i];
        }
    return x + drap_callee_leaf(values, count);
}

PHASE_FUNCTION void phase_drap_realign(double until) {
    int count = 64;
    while (now_seconds() < until)
        sink += drap_realigned_vla(count + (int)(sink & 7));
}

/* ---- a noreturn call path ---------------------------------------------------------------- */

static jmp_buf noreturn_escape;

PHASE_FUNCTION __attribute__((noreturn)) void noreturn_spin_then_longjmp(uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 200000; i++)
        x = mix(x + (uint64_t)i);
    sink += x;
    longjmp(noreturn_escape, 1);
}

/* The call to the noreturn function is this function's last instruction: gcc emits no epilogue,
 * so the return address pushed by that call is the first byte after noreturn_caller (often the
 * next function's first instruction). An unwinder must look up return address - 1. */
PHASE_FUNCTION void noreturn_caller(uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 50000; i++)
        x = mix(x ^ (uint64_t)i);
    noreturn_spin_then_longjmp(x);
}

PHASE_FUNCTION void phase_noreturn_longjmp(double until) {
    static volatile uint64_t seed;
    while (now_seconds() < until) {
        if (setjmp(noreturn_escape) == 0)
            noreturn_caller(seed++);
    }
}

/* ---- driver ------------------------------------------------------------------------------ */

struct phase {
    const char *name;
    void (*run)(double until);
};

static const struct phase phases[] = {
    {"deep_recursion", phase_deep_recursion},
    {"big_frame_recursion", phase_big_frame_recursion},
    {"qsort_callbacks", phase_qsort_callbacks},
    {"plt_libm_libc", phase_plt_libm_libc},
    {"signal_timer", phase_signal_timer},
    {"signal_raise", phase_signal_raise},
    {"drap_realign", phase_drap_realign},
    {"noreturn_longjmp", phase_noreturn_longjmp},
};
#define PHASE_COUNT (sizeof phases / sizeof phases[0])

static void usage(void) {
    fprintf(stderr, "usage: cworkload SECONDS [PHASE...]\nphases:");
    for (size_t i = 0; i < PHASE_COUNT; i++)
        fprintf(stderr, " %s", phases[i].name);
    fprintf(stderr, "\nexample: cworkload 1.5            (every phase, round-robin)\n"
                    "         cworkload 0.5 drap_realign\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage();
        return 2;
    }
    char *end;
    double seconds = strtod(argv[1], &end);
    if (*end != '\0' || !(seconds > 0)) {
        fprintf(stderr, "cworkload: SECONDS must be a positive number, not '%s'\n", argv[1]);
        usage();
        return 2;
    }
    int selected[PHASE_COUNT];
    for (size_t i = 0; i < PHASE_COUNT; i++)
        selected[i] = argc == 2;
    for (int a = 2; a < argc; a++) {
        size_t i = 0;
        while (i < PHASE_COUNT && strcmp(argv[a], phases[i].name) != 0)
            i++;
        if (i == PHASE_COUNT) {
            fprintf(stderr, "cworkload: unknown phase '%s'\n", argv[a]);
            usage();
            return 2;
        }
        selected[i] = 1;
    }

    struct sigaction action = {0};
    action.sa_handler = sigalrm_handler_work;
    sigaction(SIGALRM, &action, NULL);
    action.sa_handler = sigusr1_handler_work;
    sigaction(SIGUSR1, &action, NULL);

    double deadline = now_seconds() + seconds;
    while (now_seconds() < deadline)
        for (size_t i = 0; i < PHASE_COUNT; i++) {
            if (!selected[i])
                continue;
            double slice_end = now_seconds() + SLICE_MILLISECONDS * 1e-3;
            phases[i].run(slice_end < deadline ? slice_end : deadline);
        }
    return (int)(sink & 0); /* always 0, but keeps sink live */
}
