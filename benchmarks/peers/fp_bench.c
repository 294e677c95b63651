/* fp_bench: the frame-pointer walk over the same stack dumps, as the speed limit of any unwinder
 * that reads the stack: no tables, two loads per frame.
 *
 *     fp_bench SAMPLES_FILE [REPEAT] [--frames FILE]
 *
 * The rbp chain (System V AMD64 ABI §3.2.2, with -fno-omit-frame-pointer):
 *
 *     rbp + 8  | return address |
 *     rbp      | caller's rbp   |
 *
 * Each step reads both slots from the dump only (bounds-checked), and stops when a slot is outside
 * the dump, the return address is 0, or the chain does not move up the stack. Code built without
 * frame pointers (most of these workloads) ends the chain early: the figure is a speed limit, not a
 * correct unwind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "samples.h"

static inline bool dump_word(const bench_sample *sample, uint64_t avma, uint64_t *out)
{
    uint64_t offset = avma - sample->stack_address; /* wraps below the dump: fails the test below */
    if (offset > sample->stack_size || sample->stack_size - offset < 8)
        return false;
    memcpy(out, sample->stack + offset, 8);
    return true;
}

static uint32_t walk(const bench_sample *sample, uint64_t *pcs)
{
    uint32_t n = 0;
    pcs[n++] = sample->registers[FU_REG_RA];
    if (!(sample->register_valid >> FU_REG_RBP & 1))
        return n;
    uint64_t rbp = sample->registers[FU_REG_RBP];
    while (n < FU_PERF_MAX_STACK) {
        uint64_t caller_rbp, return_address;
        if (!dump_word(sample, rbp, &caller_rbp) || !dump_word(sample, rbp + 8, &return_address) ||
            return_address == 0)
            break;
        pcs[n++] = return_address;
        if (caller_rbp <= rbp) /* the stack grows down: a caller's frame is above */
            break;
        rbp = caller_rbp;
    }
    return n;
}

int main(int argc, char **argv)
{
    bench_arguments arguments;
    bench_set set;
    bench_frames frames;
    int status = 1;
    if (!bench_parse_arguments(argc, argv, &arguments))
        return 2;
    if (!bench_load(arguments.samples_path, &set))
        return 1;
    if (!bench_frames_init(&frames, set.sample_count))
        goto cleanup;
    uint64_t total_frames = 0;
    bench_passes timing = {0};
    bench_evict_caches();
    for (unsigned r = 0; r < arguments.repeat; r++) {
        uint64_t started = bench_now_ns();
        for (uint32_t i = 0; i < set.sample_count; i++) {
            frames.counts[i] = walk(&set.samples[i], &frames.pcs[(size_t)i * FU_PERF_MAX_STACK]);
            total_frames += frames.counts[i];
        }
        bench_passes_add(&timing, bench_now_ns() - started);
    }
    if (arguments.frames_path && !bench_frames_write(&frames, &set, arguments.frames_path))
        goto cleanup;
    char passes[128];
    snprintf(passes, sizeof passes, "{}, \"ns_first_pass\": %llu, \"ns_best_pass\": %llu",
             (unsigned long long)timing.first_ns, (unsigned long long)timing.best_ns);
    bench_report("fp", &set, arguments.repeat, total_frames, timing.total_ns, arguments.frames_path, passes);
    status = 0;
cleanup:
    bench_frames_free(&frames);
    bench_free(&set);
    return status;
}
