/* clock: the monotonic clock the timed loops read (perf_walk.c's batch, the compact-table lookup
 * benchmark). A file that includes it defines _POSIX_C_SOURCE (or _GNU_SOURCE) first, for
 * clock_gettime under -std=c11. */
#ifndef FASTUNWIND_CLOCK_H
#define FASTUNWIND_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t fu_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
