/* blocked_threads: a process whose threads stop in different kinds of frames, for the oracles of
 * stack snapshots (eu-stack, gdb) of a live process or a core file.
 *
 *   blocked_threads wait    every thread in place, then main blocks too (for gcore, eu-stack -p)
 *   blocked_threads segv    ... then main writes through a null pointer (a kernel core by SIGSEGV)
 *   blocked_threads abort   ... then main calls abort() (a kernel core by SIGABRT)
 *   blocked_threads MODE N  with N more threads blocked in the recursion (at most MAX_EXTRA; the
 *                           benchmark's 64 threads of ~45 frames: N = 58)
 *
 * It prints "ready PID" once every thread is in place. The threads (built with gcc -O2, so without
 * frame pointers):
 *   recursion   RECURSION_DEPTH calls of one function, then blocked in read()
 *   signal      blocked in read() inside a SIGUSR1 handler that interrupted pthread_kill()
 *   qsort       blocked in read() inside qsort's comparator (a libc callback)
 *   busy        spinning in a leaf function with no stack frame
 *   realigned   blocked in read() below a function that realigns its stack (a VLA and a 64-byte
 *               aligned local: gcc's DRAP, the CFA in r10 and then a dereferenced expression)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECURSION_DEPTH 40
#define THREADS 5
#define MAX_EXTRA 1000

static int never_written[2]; /* a pipe no one writes: read() on it blocks for good */
static int in_place;
static volatile unsigned long spins;

static void arrived(void) { __atomic_add_fetch(&in_place, 1, __ATOMIC_SEQ_CST); }

__attribute__((noinline)) static void block_forever(void)
{
    char byte;
    arrived();
    for (;;)
        if (read(never_written[0], &byte, 1) == 0)
            pause();
}

__attribute__((noinline)) static int recurse(int depth)
{
    if (depth == 0)
        block_forever();
    int below = recurse(depth - 1);
    __asm__ volatile("" ::: "memory"); /* no tail call, no loop: one frame per level */
    return below + depth;
}

static void *recursion_thread(void *unused)
{
    (void)unused;
    return (void *)(long)recurse(RECURSION_DEPTH);
}

static void on_signal(int signal_number)
{
    (void)signal_number;
    block_forever();
}

static void *signal_thread(void *unused)
{
    (void)unused;
    pthread_kill(pthread_self(), SIGUSR1);
    return NULL;
}

static int compare(const void *a, const void *b)
{
    static int blocked;
    if (!__atomic_exchange_n(&blocked, 1, __ATOMIC_SEQ_CST))
        block_forever();
    return *(const int *)a - *(const int *)b;
}

static void *qsort_thread(void *unused)
{
    (void)unused;
    int values[64];
    for (int i = 0; i < 64; i++)
        values[i] = (i * 37) % 64;
    qsort(values, 64, sizeof values[0], compare);
    return (void *)(long)values[0];
}

__attribute__((noinline)) static void spin(void)
{
    for (;;)
        spins++;
}

static void *busy_thread(void *unused)
{
    (void)unused;
    arrived();
    spin();
    return NULL;
}

__attribute__((noinline)) static int realigned(int size)
{
    char variable[size];
    _Alignas(64) char aligned[64];
    memset(variable, 1, (size_t)size);
    memset(aligned, 2, sizeof aligned);
    __asm__ volatile("" : : "r"(variable), "r"(aligned) : "memory");
    block_forever();
    return variable[size - 1] + aligned[3];
}

static void *realigned_thread(void *arg)
{
    return (void *)(long)realigned((int)(long)arg);
}

/* through a volatile pointer: a literal null store is undefined behaviour gcc may drop */
static int *volatile nowhere;

__attribute__((noinline)) static void crash_by_null_pointer(void)
{
    *nowhere = 1;
}

int main(int argc, char **argv)
{
    const char *end = argc > 1 ? argv[1] : "wait";
    if (pipe(never_written) != 0)
        return 2;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigaction(SIGUSR1, &action, NULL);
    void *(*const bodies[THREADS])(void *) = {recursion_thread, signal_thread, qsort_thread, busy_thread,
                                             realigned_thread};
    int extra = argc > 2 ? atoi(argv[2]) : 0;
    if (extra < 0 || extra > MAX_EXTRA)
        return 2;
    for (int i = 0; i < THREADS + extra; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, i < THREADS ? bodies[i] : recursion_thread, (void *)(long)(100 + argc)) != 0)
            return 2;
    }
    while (__atomic_load_n(&in_place, __ATOMIC_SEQ_CST) < THREADS + extra)
        usleep(1000);
    usleep(20000); /* each blocked thread from its arrival into read() */
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (strcmp(end, "segv") == 0)
        crash_by_null_pointer();
    else if (strcmp(end, "abort") == 0)
        abort();
    block_forever();
    return 0;
}
