/* blocked_threads: a process whose threads are held in different kinds of frames, for the live
 * and core-file backtraces' oracles (tests/integration/test_backtrace_live.py). Built without
 * frame pointers (-O2 -fomit-frame-pointer): every caller is found through CFI.
 *
 *   recursion  50 frames of a recursive function, then blocked in pause()
 *   signal     blocked in pause() inside a SIGUSR1 handler (the frames go through __restore_rt)
 *   qsort      blocked in the comparator qsort calls back (a libc frame between ours)
 *   leaf       spinning in a leaf function without a frame of its own
 *   realign    blocked in a callee of a function that realigns its stack (VLA + _Alignas(64): DRAP)
 *
 * Prints "ready" once every thread is in place; then runs until killed, or, for the core-file
 * tests (tests/golden/test_core_against_eu_stack.py), with an argument "segv" writes through a null
 * pointer and with "abort" calls abort(): a kernel core of every thread where it is held.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 5
static atomic_int ready;

static __attribute__((noinline)) void block(void)
{
    atomic_fetch_add(&ready, 1);
    for (;;)
        pause();
}

static __attribute__((noinline)) int recurse(int depth)
{
    if (depth == 0)
        block();
    int r = recurse(depth - 1);
    __asm__ volatile("" ::: "memory"); /* no tail call */
    return r + depth;
}

static void *recursion_thread(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "recursion");
    return (void *)(long)recurse(50);
}

static void on_usr1(int signal_number)
{
    (void)signal_number;
    block();
}

static void *signal_thread(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "signal");
    pthread_kill(pthread_self(), SIGUSR1);
    return NULL;
}

static int compare(const void *a, const void *b)
{
    block();
    return *(const int *)a - *(const int *)b;
}

static void *qsort_thread(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "qsort");
    int values[8] = {5, 3, 7, 1, 8, 2, 6, 4};
    qsort(values, 8, sizeof values[0], compare);
    return NULL;
}

static __attribute__((noinline)) void spin_leaf(volatile unsigned long *counter)
{
    atomic_fetch_add(&ready, 1);
    for (;;)
        (*counter)++;
}

static void *leaf_thread(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "leaf");
    volatile unsigned long counter = 0;
    spin_leaf(&counter);
    return NULL;
}

static __attribute__((noinline)) void realigned(int n)
{
    char vla[n];
    _Alignas(64) char aligned[64];
    memset(vla, 1, (size_t)n);
    memset(aligned, 2, sizeof aligned);
    __asm__ volatile("" : : "r"(vla), "r"(aligned) : "memory");
    block();
}

static void *realign_thread(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "realign");
    realigned(100);
    return NULL;
}

/* through a volatile pointer: a literal null store is undefined behaviour gcc may drop */
static int *volatile nowhere;

static __attribute__((noinline)) void crash_by_null_pointer(void)
{
    *nowhere = 1;
}

int main(int argc, char **argv)
{
    signal(SIGUSR1, on_usr1);
    void *(*bodies[THREADS])(void *) = {recursion_thread, signal_thread, qsort_thread, leaf_thread, realign_thread};
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, bodies[i], NULL);
    while (atomic_load(&ready) < THREADS)
        usleep(1000);
    printf("ready\n");
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "segv") == 0)
        crash_by_null_pointer();
    else if (argc > 1 && strcmp(argv[1], "abort") == 0)
        abort();
    for (;;)
        pause();
}
