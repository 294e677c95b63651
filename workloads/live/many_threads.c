/* many_threads: THREADS threads (argv[1], default 64), each DEPTH (argv[2], default 40) frames deep
 * in a recursion built without frame pointers, blocked in pause(); prints "ready" when all are.
 * The process benchmarks/bench_backtrace.py snapshots. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_int ready;
static int depth = 40;

static __attribute__((noinline)) int recurse(int n)
{
    if (n == 0) {
        atomic_fetch_add(&ready, 1);
        for (;;)
            pause();
    }
    int r = recurse(n - 1);
    __asm__ volatile("" ::: "memory"); /* no tail call */
    return r + n;
}

static void *thread_body(void *unused)
{
    (void)unused;
    return (void *)(long)recurse(depth - 4); /* with thread_body, start_thread, clone3 and pause */
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 64;
    depth = argc > 2 ? atoi(argv[2]) : 40;
    pthread_t t;
    for (int i = 0; i < threads; i++)
        pthread_create(&t, NULL, thread_body, NULL);
    while (atomic_load(&ready) < threads)
        usleep(1000);
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
