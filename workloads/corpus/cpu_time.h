/* The corpus programs' clock: they run for a given number of seconds of CPU time, so that a loaded
 * machine still gives as many samples. */
#ifndef CORPUS_CPU_TIME_H
#define CORPUS_CPU_TIME_H

#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

#endif
