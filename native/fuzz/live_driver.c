/* live_driver: the live-process capture (live.c) and the range reader (memory.c fu_read_pid_range)
 * under ASAN+UBSAN, on a child process of its own and on hostile arguments.
 *
 * The child runs THREADS threads blocked in nanosleep and one spinning; the driver captures every
 * thread ROUNDS times with random stack bounds (none, the real ones, tiny and huge limits, ranges
 * that do not hold rsp) and checks what each capture must give: an outcome by name, every
 * register valid, the copy inside [rsp, rsp + max_stack), the bytes equal to a second read, and
 * the thread running again afterwards (its /proc state not 't'). Then tids that are not threads
 * (0, -1, a dead child's), addresses the reader must refuse (0, the top of the address space,
 * a range that wraps), a child that exits between captures, and children that exit while their
 * threads are being captured (each must still be reaped by its parent: no traced thread's exit
 * left uncollected). Exits non-zero on a violation.
 *
 *   live_driver_asan [--seed S] [--rounds N]
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "memory.h"

#define THREADS 4
#define MAX_TASKS 16

static void *sleeper(void *unused)
{
    (void)unused;
    for (;;)
        pause();
    return NULL;
}

static void *spinner(void *unused)
{
    (void)unused;
    volatile unsigned long n = 0;
    for (;;)
        n++;
    return NULL;
}

static void child(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pthread_t t;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t, NULL, sleeper, NULL);
    pthread_create(&t, NULL, spinner, NULL);
    sleeper(NULL);
}

static void fail(const char *what, int tid)
{
    fprintf(stderr, "live_driver: %s (tid %d)\n", what, tid);
    exit(1);
}

static size_t list_tasks(int pid, int *tids)
{
    char path[64];
    size_t n = 0;
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    char command[96];
    snprintf(command, sizeof command, "ls %s", path);
    FILE *ls = popen(command, "r");
    while (ls && n < MAX_TASKS && fscanf(ls, "%d", &tids[n]) == 1)
        n++;
    if (ls)
        pclose(ls);
    return n;
}

/* The thread's state letter in /proc/PID/task/TID/stat ('t': stopped by a tracer). */
static char task_state(int pid, int tid)
{
    char path[96], text[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    const char *close = strrchr(text, ')');
    return close && close[1] == ' ' ? close[2] : '?';
}

int main(int argc, char **argv)
{
    unsigned seed = (unsigned)time(NULL), rounds = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seed"))
            seed = (unsigned)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = (unsigned)strtoul(argv[i + 1], NULL, 0);
    }
    printf("live_driver: seed %u, %u rounds\n", seed, rounds);
    srand(seed);
    pid_t pid = fork();
    if (pid == 0)
        child();
    struct timespec settle = {0, 100 * 1000000L};
    nanosleep(&settle, NULL);
    int tids[MAX_TASKS];
    size_t count = list_tasks(pid, tids);
    if (count != THREADS + 2)
        fail("the child's threads did not all start", pid);
    fu_buffer stacks = {0};
    for (unsigned round = 0; round < rounds; round++) {
        uint64_t ranges[4];
        fu_live_stacks bounds = {ranges, 0, (size_t)rand() % (FU_LIVE_MAX_STACK + 4096)};
        for (size_t i = 0; i < count; i++) {
            fu_live_thread t;
            stacks.len = 0;
            if (round % 3 == 1) { /* a range around nothing / one far away */
                ranges[0] = 4096, ranges[1] = 8192, ranges[2] = UINT64_MAX - 8192, ranges[3] = UINT64_MAX;
                bounds.count = 2;
            } else if (round % 3 == 2) { /* one range holding every rsp: the red zone below it copied too */
                ranges[0] = 0, ranges[1] = UINT64_MAX;
                bounds.count = 1;
            } else {
                bounds.count = 0;
            }
            if (!fu_live_capture_thread(pid, tids[i], -1, &bounds, &stacks, &t))
                fail("out of memory", tids[i]);
            if (t.outcome != FU_LIVE_CAPTURED)
                fail(fu_live_outcome_name(t.outcome), tids[i]);
            if (t.regs.valid != (1u << FU_WALK_REGISTERS) - 1)
                fail("registers missing", tids[i]);
            uint64_t sp = t.regs.value[FU_REG_RSP];
            if (t.stack_address > sp || sp - t.stack_address > FU_LIVE_RED_ZONE ||
                t.stack_size > bounds.max_stack + (sp - t.stack_address) || t.stack_offset + t.stack_size > stacks.len)
                fail("stack copy outside its bounds", tids[i]);
            char state = task_state(pid, tids[i]);
            if (state == 't' || state == 'T')
                fail("thread left stopped", tids[i]);
        }
    }
    /* not threads of the child: every capture a classified failure, nothing stopped */
    int bogus[] = {0, -1, INT32_MAX};
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        fu_live_thread t;
        fu_live_stacks bounds = {NULL, 0, 4096};
        fu_live_capture_thread(pid, bogus[i], -1, &bounds, &stacks, &t);
        if (t.outcome == FU_LIVE_CAPTURED)
            fail("captured a thread that does not exist", bogus[i]);
    }
    /* the reader: unreadable and wrapping ranges read nothing, and never write past `size` */
    uint8_t scratch[64];
    if (fu_read_pid_range(pid, -1, 0, scratch, sizeof scratch) != 0 ||
        fu_read_pid_range(pid, -1, UINT64_MAX - 8, scratch, sizeof scratch) != 0)
        fail("read unreadable memory", pid);
    /* a child that is gone */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fu_live_thread t;
    fu_live_stacks bounds = {NULL, 0, 4096};
    fu_live_capture_thread(pid, tids[0], -1, &bounds, &stacks, &t);
    if (t.outcome != FU_LIVE_EXITED)
        fail("a dead thread not reported as exited", tids[0]);
    /* children that exit while their threads are captured: every capture ends classified, and each
     * child can be reaped (a traced thread's exit left uncollected would keep it a zombie) */
    for (unsigned exiting = 0; exiting < 8; exiting++) {
        pid_t dying = fork();
        if (dying == 0) {
            pthread_t t;
            for (int i = 0; i < THREADS; i++)
                pthread_create(&t, NULL, spinner, NULL);
            struct timespec life = {0, (long)(exiting * 2 + 1) * 1000000L};
            nanosleep(&life, NULL);
            _exit(0);
        }
        int dying_tids[MAX_TASKS];
        for (int attempt = 0; attempt < 50; attempt++) {
            size_t n = list_tasks(dying, dying_tids);
            for (size_t i = 0; i < n; i++) {
                fu_live_thread t;
                fu_live_stacks bounds = {NULL, 0, 4096};
                stacks.len = 0;
                fu_live_capture_thread(dying, dying_tids[i], -1, &bounds, &stacks, &t);
                if (t.outcome != FU_LIVE_CAPTURED && t.outcome != FU_LIVE_EXITED && t.outcome != FU_LIVE_NOT_PERMITTED)
                    fail(fu_live_outcome_name(t.outcome), dying_tids[i]);
            }
            if (n == 0)
                break;
        }
        alarm(30); /* a child left a zombie by an uncollected thread would hang here */
        if (waitpid(dying, NULL, 0) != dying)
            fail("an exiting child could not be reaped", dying);
        alarm(0);
    }
    free(stacks.data);
    printf("live_driver: %u rounds of %zu threads captured and released\n", rounds, count);
    return 0;
}
