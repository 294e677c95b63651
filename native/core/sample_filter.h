/* sample_filter: perf script's and perf report's sample filters (`--pid`, `--tid`, `--cpu`, `--time`;
 * `--comm` through the replay's comm ids) applied to a window of a recording before it is replayed
 * and walked, so that a sample filtered out costs its decoding and nothing more. The Python side is
 * py/py_sample_filter.c.
 *
 * perf's rules (perf 6.1): a sample is kept when its pid is listed (or no pid is), its tid likewise,
 * its cpu likewise (util/cpumap.c lists), and its time lies in one of the ranges, both ends included
 * (util/time-utils.c perf_time__ranges_skip_sample; an end of 0 is open). Lists are sorted by the
 * caller.
 */
#ifndef FASTUNWIND_SAMPLE_FILTER_H
#define FASTUNWIND_SAMPLE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf_data.h"

/* Values a list holds at most, and time ranges: perf's own --time takes at most 10 ranges
 * (util/time-utils.c, "num" of the percent forms); a pid list longer than this is a typo. */
#define FU_FILTER_MAX_VALUES 65536
#define FU_FILTER_MAX_RANGES 256

typedef struct fu_sample_filter {
    const uint32_t *pids, *tids, *cpus; /* sorted, ascending */
    size_t pid_count, tid_count, cpu_count;
    const uint64_t *ranges;             /* start, end pairs in ns (0: open) */
    size_t range_count;
} fu_sample_filter;

/* Whether the sorted list `values` holds `value` (an empty list holds every value). */
bool fu_sample_filter_listed(const uint32_t *values, size_t count, uint32_t value);
/* Whether `sample` passes the filter. */
bool fu_sample_filter_keep(const fu_sample_filter *f, const fu_perf_sample *sample);
/* Keep only the samples of `pd` (a whole recording or a window) for which keep[i] is true: the
 * samples are moved down in order, their `index` renumbered, the events of the others dropped.
 * Returns the samples kept, or SIZE_MAX if out of memory (nothing changed). */
size_t fu_perf_keep_samples(fu_perf_data *pd, const bool *keep);

#endif
