/* libdw_bench: unwind every sample with elfutils' libdwfl, the way perf 6.1's
 * tools/perf/util/unwind-libdw.c drives it, with one difference in the fast mode (the default):
 *
 *   session (default): one Dwfl per address space, kept across its samples. Every usable mapping
 *     is reported up front with dwfl_report_elf(name, path, -1, bias, add_p_vaddr = true), so that
 *     module avma = svma + bias exactly as fastunwind places it; dwfl_attach_state once with
 *     Dwfl_Thread_Callbacks whose argument points at the current sample; then per sample only
 *     dwfl_getthread_frames. libdwfl builds each module's Dwarf_CFI lazily on first use and keeps
 *     it, so a session is the fastest legitimate way to use it.
 *   per-sample (--mode per-sample): what perf does: dwfl_begin, report, dwfl_attach_state,
 *     dwfl_getthread_frames, dwfl_end for every sample (perf reports modules lazily from
 *     memory_read and the frame callback; here the space's usable mappings are reported at once).
 *
 * Shared by both: Dwfl_Callbacks as perf's offline_callbacks (dwfl_standard_find_debuginfo: a
 * separate debug file's .debug_frame is used when .eh_frame has no entry, as fastunwind does);
 * memory_read: the stack dump, else the mapped file's bytes (samples.h); set_initial_registers:
 * dwfl_thread_state_registers(0, 17, rax..r15, rip) (perf's arch/x86/util/unwind-libdw.c); the
 * frame callback takes dwfl_frame_pc and stops at FU_PERF_MAX_STACK frames.
 *
 *     libdw_bench SAMPLES_FILE [REPEAT] [--frames FILE] [--mode session|per-sample]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h>
#include <elfutils/libdwfl.h>

#include "samples.h"

/* dwfl_attach_state needs a pid; one thread per session, so any fixed number does. */
#define SESSION_PID 1

typedef struct context {
    const bench_set *set;
    const bench_sample *sample;
    uint64_t *pcs;
    uint32_t count;
} context;

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp)
{
    if (*thread_argp != NULL)
        return 0; /* one thread only */
    *thread_argp = dwfl_arg;
    return dwfl_pid(dwfl);
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg)
{
    (void)dwfl;
    context *ctx = dwfl_arg;
    uint64_t value;
    if (!bench_read_word(ctx->set, ctx->sample, addr, &value))
        return false;
    *result = value;
    return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
    context *ctx = thread_arg;
    Dwarf_Word registers[FU_WALK_REGISTERS];
    for (unsigned k = 0; k < FU_WALK_REGISTERS; k++)
        registers[k] = ctx->sample->registers[k];
    return dwfl_thread_state_registers(thread, 0, FU_WALK_REGISTERS, registers);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = next_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

static int frame_callback(Dwfl_Frame *state, void *arg)
{
    context *ctx = arg;
    Dwarf_Addr pc;
    bool is_activation;
    if (!dwfl_frame_pc(state, &pc, &is_activation))
        return DWARF_CB_ABORT;
    ctx->pcs[ctx->count++] = pc;
    return ctx->count >= FU_PERF_MAX_STACK ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* A Dwfl for one address space with every usable mapping reported; NULL (and why on stderr) if
 * libdwfl refuses. */
static Dwfl *open_session(const bench_space *space, context *ctx, bool quiet)
{
    Dwfl *dwfl = dwfl_begin(&callbacks);
    if (!dwfl)
        return NULL;
    dwfl_report_begin(dwfl);
    for (uint32_t m = 0; m < space->count; m++) {
        const bench_mapping *mapping = &space->mappings[m];
        if (!mapping->image)
            continue;
        const char *name = strrchr(mapping->path, '/');
        if (!dwfl_report_elf(dwfl, name ? name + 1 : mapping->path, mapping->path, -1, mapping->bias, true) && !quiet)
            fprintf(stderr, "dwfl_report_elf %s at bias 0x%llx: %s\n", mapping->path,
                    (unsigned long long)mapping->bias, dwfl_errmsg(-1));
    }
    dwfl_report_end(dwfl, NULL, NULL);
    if (!dwfl_attach_state(dwfl, NULL, SESSION_PID, &thread_callbacks, ctx)) {
        if (!quiet)
            fprintf(stderr, "dwfl_attach_state: %s\n", dwfl_errmsg(-1));
        dwfl_end(dwfl);
        return NULL;
    }
    return dwfl;
}

enum { END_NO_MORE_FRAMES, END_FRAME_LIMIT, END_ERROR, END_NO_SESSION, END_COUNT };

int main(int argc, char **argv)
{
    bench_arguments arguments;
    bench_set set;
    bench_frames frames = {0};
    Dwfl **sessions = NULL;
    context *contexts = NULL;
    int status = 1;
    if (!bench_parse_arguments(argc, argv, &arguments))
        return 2;
    bool per_sample = arguments.mode && strcmp(arguments.mode, "per-sample") == 0;
    if (arguments.mode && !per_sample && strcmp(arguments.mode, "session") != 0) {
        fprintf(stderr, "%s: unknown --mode '%s' (known: session, per-sample)\n", argv[0], arguments.mode);
        return 2;
    }
    if (!bench_load(arguments.samples_path, &set))
        return 1;
    if (!bench_frames_init(&frames, set.sample_count))
        goto cleanup;
    sessions = calloc(set.space_count + 1, sizeof *sessions);
    contexts = calloc(set.space_count + 1, sizeof *contexts);
    uint64_t setup_started = bench_now_ns();
    if (!per_sample)
        for (uint32_t s = 0; s < set.space_count; s++) {
            contexts[s].set = &set;
            sessions[s] = open_session(&set.spaces[s], &contexts[s], false);
        }
    uint64_t setup_ns = bench_now_ns() - setup_started;
    uint64_t total_frames = 0;
    bench_passes timing = {0};
    uint64_t ends[END_COUNT] = {0};
    char first_error[200] = "";
    bench_evict_caches();
    for (unsigned r = 0; r < arguments.repeat; r++) {
        uint64_t started = bench_now_ns();
        for (uint32_t i = 0; i < set.sample_count; i++) {
            const bench_sample *sample = &set.samples[i];
            context *ctx = &contexts[sample->space];
            Dwfl *dwfl = sessions[sample->space];
            context local = {&set, sample, NULL, 0};
            if (per_sample) {
                ctx = &local;
                dwfl = open_session(&set.spaces[sample->space], ctx, true);
            }
            ctx->sample = sample;
            ctx->pcs = &frames.pcs[(size_t)i * FU_PERF_MAX_STACK];
            ctx->count = 0;
            int end = END_NO_SESSION;
            if (dwfl) {
                int result = dwfl_getthread_frames(dwfl, SESSION_PID, frame_callback, ctx);
                end = result == 0 ? END_NO_MORE_FRAMES : result == DWARF_CB_ABORT ? END_FRAME_LIMIT : END_ERROR;
                if (end == END_ERROR && !first_error[0])
                    snprintf(first_error, sizeof first_error, "%s", dwfl_errmsg(-1));
            }
            if (per_sample && dwfl)
                dwfl_end(dwfl);
            if (ctx->count == 0) /* no session: the sampled IP alone, as the other harnesses */
                ctx->pcs[ctx->count++] = sample->registers[FU_REG_RA];
            if (r == 0)
                ends[end]++;
            frames.counts[i] = ctx->count;
            total_frames += ctx->count;
        }
        bench_passes_add(&timing, bench_now_ns() - started);
    }
    if (arguments.frames_path && !bench_frames_write(&frames, &set, arguments.frames_path))
        goto cleanup;
    for (char *c = first_error; *c; c++)
        if (*c == '"' || *c == '\\')
            *c = '\'';
    char outcomes[512];
    snprintf(outcomes, sizeof outcomes,
             "{\"end\": %llu, \"frame_limit\": %llu, \"error\": %llu, \"no_session\": %llu}, "
             "\"first_error\": \"%s\", \"ns_setup\": %llu, \"ns_first_pass\": %llu, \"ns_best_pass\": %llu",
             (unsigned long long)ends[0], (unsigned long long)ends[1], (unsigned long long)ends[2],
             (unsigned long long)ends[3], first_error, (unsigned long long)setup_ns, (unsigned long long)timing.first_ns,
             (unsigned long long)timing.best_ns);
    bench_report(per_sample ? "libdw-per-sample" : "libdw", &set, arguments.repeat, total_frames, timing.total_ns,
                 arguments.frames_path, outcomes);
    status = 0;
cleanup:
    if (sessions)
        for (uint32_t s = 0; s < set.space_count; s++)
            if (sessions[s])
                dwfl_end(sessions[s]);
    free(sessions);
    free(contexts);
    bench_frames_free(&frames);
    bench_free(&set);
    return status;
}
