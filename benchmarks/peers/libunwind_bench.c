/* libunwind_bench: unwind every sample with libunwind's remote API, set up the way perf 6.1 does
 * it (tools/perf/util/unwind-libunwind-local.c):
 *
 *   - one unw_addr_space_t per address space, created with our accessors and
 *     unw_set_caching_policy(UNW_CACHE_GLOBAL), reused for every sample of it (perf keeps one per
 *     process's maps and flushes it only when the maps change);
 *   - find_proc_info: the mapping of the IP, its file's .eh_frame_hdr handed to
 *     dwarf_search_unwind_table as a UNW_INFO_FORMAT_REMOTE_TABLE (segbase = the header's avma,
 *     table_data = the search table after the 12-byte header, table_len in words);
 *   - .debug_frame: perf calls dwarf_find_debug_frame only when libunwind was built with
 *     --enable-debug-frame; Debian's x86-64 libunwind 1.6.2 is not (the symbol is not exported), so
 *     perf is built with NO_LIBUNWIND_DEBUG_FRAME and so is this harness;
 *   - access_mem: the stack dump, else the mapped file's bytes (samples.h); access_reg: the sample;
 *   - per sample: unw_init_remote, then unw_step / unw_get_reg(UNW_REG_IP) until unw_step <= 0 or
 *     FU_PERF_MAX_STACK frames (the sampled IP counts as the first, as in perf's get_entries).
 *
 *     libunwind_bench SAMPLES_FILE [REPEAT] [--frames FILE] [--mode no-cache]
 *
 * --mode no-cache uses UNW_CACHE_NONE (libunwind's default), to show what the cache is worth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libunwind.h>

#include "samples.h"

/* Not in libunwind.h; perf declares it the same way. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
                                              unw_proc_info_t *pi, int need_unwind_info, void *arg);
#define dwarf_search_unwind_table UNW_OBJ(dwarf_search_unwind_table)

/* DW_EH_PE_* (LSB 5.0, "DWARF Exception Header Encoding") */
#define DW_EH_PE_omit 0xff
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_datarel_sdata4 0x3b

/* What find_proc_info needs from a file's .eh_frame_hdr, decoded once per file. */
typedef struct search_table {
    const bench_image *image;
    bool usable;
    uint64_t table_offset; /* from the header's start */
    uint64_t fde_count;
} search_table;

typedef struct context {
    const bench_set *set;
    const bench_space *space;
    const bench_sample *sample;
    search_table *tables; /* one per set image */
} context;

/* .eh_frame_hdr (LSB 5.0): u8 version = 1, u8 eh_frame_ptr_enc, u8 fde_count_enc, u8 table_enc,
 * encoded eh_frame_ptr, encoded fde_count, then the table. libunwind's remote table wants the
 * table as datarel sdata4 pairs; anything else is "no table" (libunwind would fall back to a
 * linear .eh_frame scan only for local unwinding). */
static search_table decode_header(const bench_image *image)
{
    search_table table = {image, false, 0, 0};
    if (!image->eh_frame_hdr_vaddr || image->eh_frame_hdr_size < 12)
        return table;
    uint64_t bytes[2];
    const bench_segment *segment = NULL;
    for (unsigned i = 0; i < image->segment_count; i++)
        if (image->eh_frame_hdr_vaddr >= image->segments[i].vaddr &&
            image->eh_frame_hdr_vaddr - image->segments[i].vaddr + 12 <= image->segments[i].filesz)
            segment = &image->segments[i];
    if (!segment)
        return table;
    memcpy(bytes, image->data + segment->offset + (image->eh_frame_hdr_vaddr - segment->vaddr), 12);
    const uint8_t *h = (const uint8_t *)bytes;
    if (h[0] != 1 || h[3] != DW_EH_PE_datarel_sdata4 || h[1] == DW_EH_PE_omit ||
        (h[1] & 0x0f) != DW_EH_PE_sdata4 || (h[2] & 0x0f) != DW_EH_PE_udata4)
        return table; /* every file in these recordings uses the 4-byte encodings */
    uint32_t count;
    memcpy(&count, h + 8, 4);
    table.usable = true;
    table.table_offset = 12;
    table.fde_count = count;
    return table;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
    context *ctx = arg;
    const bench_mapping *mapping = bench_find_mapping(ctx->space, ip);
    if (!mapping || !mapping->image)
        return -UNW_ENOINFO;
    const search_table *table = NULL;
    for (uint32_t i = 0; i < ctx->set->image_count; i++)
        if (ctx->tables[i].image == mapping->image)
            table = &ctx->tables[i];
    if (!table || !table->usable)
        return -UNW_ENOINFO;
    unw_dyn_info_t di;
    memset(&di, 0, sizeof di);
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = mapping->start;
    di.end_ip = mapping->end;
    di.u.rti.segbase = mapping->image->eh_frame_hdr_vaddr + mapping->bias;
    di.u.rti.table_data = di.u.rti.segbase + table->table_offset;
    di.u.rti.table_len = table->fde_count * 8 / sizeof(unw_word_t);
    return dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
    (void)as, (void)pi, (void)arg; /* perf's is empty too: libunwind frees its table-format info */
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil_addr, void *arg)
{
    (void)as, (void)dil_addr, (void)arg;
    return -UNW_ENOINFO;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp, int write, void *arg)
{
    (void)as;
    context *ctx = arg;
    if (write) {
        *valp = 0;
        return 0;
    }
    uint64_t value;
    if (!bench_read_word(ctx->set, ctx->sample, addr, &value)) {
        *valp = 0;
        return -UNW_EINVAL;
    }
    *valp = value;
    return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t regnum, unw_word_t *valp, int write, void *arg)
{
    (void)as;
    context *ctx = arg;
    if (write)
        return 0;
    /* UNW_X86_64_RAX..UNW_X86_64_RIP are the DWARF numbers 0..16, the order of the sample's registers */
    if (regnum < 0 || regnum >= FU_WALK_REGISTERS || !(ctx->sample->register_valid >> regnum & 1))
        return -UNW_EBADREG;
    *valp = ctx->sample->registers[regnum];
    return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t num, unw_fpreg_t *val, int write, void *arg)
{
    (void)as, (void)num, (void)val, (void)write, (void)arg;
    return -UNW_EINVAL;
}

static int resume(unw_addr_space_t as, unw_cursor_t *cu, void *arg)
{
    (void)as, (void)cu, (void)arg;
    return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *bufp, size_t buf_len, unw_word_t *offp,
                         void *arg)
{
    (void)as, (void)addr, (void)bufp, (void)buf_len, (void)offp, (void)arg;
    return -UNW_EINVAL;
}

static unw_accessors_t accessors = {
    .find_proc_info = find_proc_info,
    .put_unwind_info = put_unwind_info,
    .get_dyn_info_list_addr = get_dyn_info_list_addr,
    .access_mem = access_mem,
    .access_reg = access_reg,
    .access_fpreg = access_fpreg,
    .resume = resume,
    .get_proc_name = get_proc_name,
};

/* How a walk ended, for the outcome counts. */
enum { END_STEP_ZERO, END_FRAME_LIMIT, END_INIT_FAILED, END_STEP_ERROR, END_COUNT };
static const char *const end_names[END_COUNT] = {"end", "frame_limit", "init_failed", "step_error"};

int main(int argc, char **argv)
{
    bench_arguments arguments;
    bench_set set;
    bench_frames frames = {0};
    unw_addr_space_t *spaces = NULL;
    search_table *tables = NULL;
    int status = 1;
    if (!bench_parse_arguments(argc, argv, &arguments))
        return 2;
    bool cache = !(arguments.mode && strcmp(arguments.mode, "no-cache") == 0);
    if (arguments.mode && cache) {
        fprintf(stderr, "%s: unknown --mode '%s' (known: no-cache)\n", argv[0], arguments.mode);
        return 2;
    }
    if (!bench_load(arguments.samples_path, &set))
        return 1;
    if (!bench_frames_init(&frames, set.sample_count))
        goto cleanup;
    tables = calloc(set.image_count + 1, sizeof *tables);
    for (uint32_t i = 0; i < set.image_count; i++)
        tables[i] = decode_header(set.images[i]);
    spaces = calloc(set.space_count + 1, sizeof *spaces);
    for (uint32_t s = 0; s < set.space_count; s++) {
        spaces[s] = unw_create_addr_space(&accessors, 0);
        if (!spaces[s]) {
            fprintf(stderr, "unw_create_addr_space failed\n");
            goto cleanup;
        }
        unw_set_caching_policy(spaces[s], cache ? UNW_CACHE_GLOBAL : UNW_CACHE_NONE);
    }
    uint64_t total_frames = 0;
    bench_passes timing = {0};
    uint64_t ends[END_COUNT] = {0};
    bench_evict_caches();
    for (unsigned r = 0; r < arguments.repeat; r++) {
        uint64_t started = bench_now_ns();
        for (uint32_t i = 0; i < set.sample_count; i++) {
            const bench_sample *sample = &set.samples[i];
            uint64_t *pcs = &frames.pcs[(size_t)i * FU_PERF_MAX_STACK];
            context ctx = {&set, &set.spaces[sample->space], sample, tables};
            unw_cursor_t cursor;
            uint32_t n = 0;
            pcs[n++] = sample->registers[FU_REG_RA];
            int end = END_INIT_FAILED;
            if (unw_init_remote(&cursor, spaces[sample->space], &ctx) == 0) {
                int step;
                while ((step = unw_step(&cursor)) > 0 && n < FU_PERF_MAX_STACK) {
                    unw_word_t ip;
                    unw_get_reg(&cursor, UNW_REG_IP, &ip);
                    pcs[n++] = ip;
                }
                end = step > 0 ? END_FRAME_LIMIT : step == 0 ? END_STEP_ZERO : END_STEP_ERROR;
            }
            if (r == 0)
                ends[end]++;
            frames.counts[i] = n;
            total_frames += n;
        }
        bench_passes_add(&timing, bench_now_ns() - started);
    }
    if (arguments.frames_path && !bench_frames_write(&frames, &set, arguments.frames_path))
        goto cleanup;
    char outcomes[256];
    snprintf(outcomes, sizeof outcomes,
             "{\"%s\": %llu, \"%s\": %llu, \"%s\": %llu, \"%s\": %llu}, \"ns_first_pass\": %llu, "
             "\"ns_best_pass\": %llu",
             end_names[0], (unsigned long long)ends[0], end_names[1], (unsigned long long)ends[1], end_names[2],
             (unsigned long long)ends[2], end_names[3], (unsigned long long)ends[3], (unsigned long long)timing.first_ns,
             (unsigned long long)timing.best_ns);
    bench_report(cache ? "libunwind" : "libunwind-no-cache", &set, arguments.repeat, total_frames, timing.total_ns,
                 arguments.frames_path, outcomes);
    status = 0;
cleanup:
    if (spaces)
        for (uint32_t s = 0; s < set.space_count; s++)
            if (spaces[s])
                unw_destroy_addr_space(spaces[s]);
    free(spaces);
    free(tables);
    bench_frames_free(&frames);
    bench_free(&set);
    return status;
}
