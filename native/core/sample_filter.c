/* sample_filter: see sample_filter.h. */
#include "sample_filter.h"

#include <stdlib.h>

bool fu_sample_filter_listed(const uint32_t *values, size_t count, uint32_t value)
{
    if (!count)
        return true;
    size_t low = 0, high = count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (values[mid] < value)
            low = mid + 1;
        else
            high = mid;
    }
    return low < count && values[low] == value;
}

bool fu_sample_filter_keep(const fu_sample_filter *f, const fu_perf_sample *sample)
{
    if (!fu_sample_filter_listed(f->pids, f->pid_count, sample->pid) || !fu_sample_filter_listed(f->tids, f->tid_count, sample->tid) ||
        !fu_sample_filter_listed(f->cpus, f->cpu_count, sample->cpu))
        return false;
    if (!f->range_count)
        return true;
    for (size_t r = 0; r < f->range_count; r++) {
        uint64_t start = f->ranges[2 * r], end = f->ranges[2 * r + 1];
        if ((!start || sample->time >= start) && (!end || sample->time <= end))
            return true;
    }
    return false;
}

size_t fu_perf_keep_samples(fu_perf_data *pd, const bool *keep)
{
    size_t old_count = pd->sample_count, kept = 0, out = 0;
    uint32_t *renumber = malloc((old_count ? old_count : 1) * sizeof *renumber);
    if (!renumber)
        return SIZE_MAX;
    for (size_t i = 0; i < old_count; i++) {
        renumber[i] = keep[i] ? (uint32_t)kept : UINT32_MAX;
        if (keep[i]) {
            pd->samples[kept] = pd->samples[i];
            pd->samples[kept].index = (uint32_t)kept;
            kept++;
        }
    }
    for (size_t e = 0; e < pd->event_count; e++) {
        fu_perf_event event = pd->events[e];
        if (event.kind == FU_PERF_EVENT_SAMPLE) {
            if (event.index >= old_count || renumber[event.index] == UINT32_MAX)
                continue;
            event.index = renumber[event.index];
        }
        pd->events[out++] = event;
    }
    pd->event_count = out;
    pd->sample_count = kept;
    free(renumber);
    return kept;
}
