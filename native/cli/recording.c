/* `fastunwind perf-script -i FILE [--folded] [-o FILE]` and `fastunwind report -i FILE [-o FILE]`
 * in C: perf/script.py stream_recording's text, folded and stats (report's) modes,
 * over the same core functions (the stream of core/perf_data.c with decode-ahead and executable
 * mmaps only, core/perf_replay.c, core/perf_walk.c on the walker threads, core/perf_script.c's
 * symbols and text), with the recording's files opened as perf/replay.py opens them (the file
 * itself when its build-id is the recorded one, else perf's copy in its build-id cache) and every
 * table taken from the caches the Python path writes: compact tables with the rows `--synth
 * missing` derives (perf-script's default with the auto backend), eh_elfs, symbol tables, the
 * kernel's symbols from its kallsyms copy's cache entry. What the Python path would word on
 * stderr (a module replaced or missing, no samples, no user stacks) or
 * build (a table not in the cache), and JIT code's perf maps, are left to it.
 */
#define _GNU_SOURCE
#include "recording.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_paths.h"
#include "compact_table.h"
#include "modules.h"
#include "perf_data.h"
#include "perf_replay.h"
#include "perf_script.h"
#include "perf_walk.h"
#include "report.h"
#include "stacks.h"
#include "symbol_cache.h"

/* perf's pseudo files: the vDSO, the kernel */
#define VDSO "[vdso]"
#define KERNEL "[kernel.kallsyms]"
/* The longest path built here (a build-id cache path of a long file name). */
#define MAX_PATH_BYTES FU_BUILD_ID_CACHE_PATH_MAX

/* A file of the replay: what its mappings are named by and the image they use (NULL: none). */
typedef struct run_file {
    char *name;
    bool perf_map; /* JIT code: its symbols are the perf map's */
    fu_cli_image *image;
} run_file;

/* An executable mapping of the replay, in the results' numbering. */
typedef struct run_mapping {
    uint64_t start, end, pgoff, bias;
    uint32_t file;
    fu_cli_image *image; /* NULL: no image, or no PT_LOAD holds its offset */
} run_mapping;

/* An address space for the walker, with its modules and its walk caches. */
typedef struct run_space {
    fu_space_with_cache held;
    fu_module *modules;
    uint32_t *maps; /* mapping numbers, in the walker's module order */
    uint32_t count;
} run_space;

typedef struct run {
    fu_cli_images images;
    fu_replay replay;
    run_file *files;
    size_t file_count, file_cap;
    run_mapping *mappings;
    size_t mapping_count, mapping_cap;
    run_space **spaces;
    size_t space_count, space_cap;
    fu_text *comms;
    size_t comm_count, comm_cap;
    fu_text outcomes[FU_UNWOUND_OUTCOME_CODES];
    const fu_perf_data *header;
    bool kernel_loaded, has_kernel;
    fu_cli_bytes kernel_file;
    fu_symbol_table kernel;
    fu_perf_walk_buffers buffers, extra[FU_PERF_WALK_THREADS_MAX];
} run;

static void run_free(run *r)
{
    for (size_t i = 0; i < r->space_count; i++) {
        run_space *s = r->spaces[i];
        fu_walk_cache_slot_free(&s->held.slot);
        free(s->modules);
        free(s->maps);
        free(s);
    }
    free(r->spaces);
    for (size_t i = 0; i < r->file_count; i++)
        free(r->files[i].name);
    free(r->files);
    free(r->mappings);
    free(r->comms);
    if (r->has_kernel)
        fu_symbol_table_free(&r->kernel);
    fu_cli_bytes_free(&r->kernel_file);
    fu_replay_free(&r->replay);
    fu_cli_images_free(&r->images);
    fu_perf_walk_buffers_free(&r->buffers);
    for (unsigned t = 0; t < FU_PERF_WALK_THREADS_MAX; t++)
        fu_perf_walk_buffers_free(&r->extra[t]);
}

/* Room for one more of an array's items. */
static bool grow(void **items, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return true;
    size_t next = *cap ? 2 * *cap : 64;
    void *grown = realloc(*items, next * size);
    if (!grown)
        return false;
    *items = grown;
    *cap = next;
    return true;
}

/* perf/replay.py _same_build_id: the recorded build-id (padded with zeros to 20 bytes) is the file's. */
static bool same_build_id(const uint8_t *expected, size_t expected_size, const fu_cli_image *image)
{
    return image->elf.build_id_size && image->elf.build_id_size <= expected_size &&
           memcmp(expected, image->elf.build_id, image->elf.build_id_size) == 0;
}

/* perf/replay.py _cached_copy: perf's copy of `name` with build-id `expected` (the first of
 * fu_build_id_cache_candidates with that build-id), or NULL; *unserved where a candidate is a file
 * this reader cannot promise to read as the Python reader does, or the paths cannot be made. */
static fu_cli_image *cached_copy(run *r, const char *name, const uint8_t *expected, size_t expected_size,
                                 const char *file, bool *unserved)
{
    fu_buffer paths = {0};
    fu_cli_image *found = NULL;
    if (!fu_build_id_cache_candidates(name, expected, expected_size, file, &paths))
        *unserved = true;
    for (size_t at = 0; !found && !*unserved && at < paths.len; at += strlen((const char *)paths.data + at) + 1) {
        fu_cli_image *image = fu_cli_images_get(&r->images, (const char *)paths.data + at, unserved);
        if (image && !*unserved && same_build_id(expected, expected_size, image))
            found = image;
    }
    free(paths.data);
    return found;
}

/* perf/replay.py _is_anonymous: no file to read (perf's pseudo names, anonymous memory). */
static bool anonymous(const char *name)
{
    static const char *const names[] = {"//anon", "/dev/zero", "/anon_hugepage"};
    if (name[0] != '/')
        return true;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return strncmp(name, "/SYSV", 5) == 0 || strncmp(name, "/memfd:", 7) == 0;
}

/* symbols.py PERF_MAP_PATH: /tmp/perf-<digits>.map */
static bool perf_map_path(const char *name)
{
    if (strncmp(name, "/tmp/perf-", 10) != 0)
        return false;
    const char *digits = name + 10, *end = digits;
    while (*end >= '0' && *end <= '9')
        end++;
    return end > digits && strcmp(end, ".map") == 0;
}

/* The build-id the recording's table lists for `name` (the last entry wins, as the Python dict). */
static bool recorded_build_id(const fu_perf_data *header, const char *name, const uint8_t **build_id, size_t *size)
{
    bool found = false;
    size_t len = strlen(name);
    for (size_t i = 0; i < header->build_id_count; i++) {
        const fu_perf_build_id *b = &header->build_ids[i];
        if (b->filename_len == len && memcmp(b->filename, name, len) == 0) {
            *build_id = b->build_id;
            *size = b->size;
            found = true;
        }
    }
    return found;
}

/* perf/replay.py _usable_image: the image of a file the replay found; false: the Python path's
 * (a file replaced or missing is a warning of its own, a file not read here as it reads it). */
static bool usable_image(run *r, const fu_replay_file *f, run_file *out)
{
    char name[MAX_PATH_BYTES];
    if (f->perf_map)
        snprintf(name, sizeof name, "/tmp/perf-%u.map", (unsigned)f->perf_map_pid);
    else if (f->name.len >= sizeof name || memchr(f->name.data, 0, f->name.len) ||
             !fu_utf8_valid(f->name.data, f->name.len)) {
        fu_cli_unserved("a recorded file name not read here as the Python path decodes it", NULL);
        return false;
    } else
        snprintf(name, sizeof name, "%.*s", (int)f->name.len, f->name.data);
    if (!(out->name = strdup(name)))
        return false;
    out->perf_map = perf_map_path(name);
    out->image = NULL;
    const uint8_t *expected = NULL;
    size_t expected_size = 0;
    if (f->has_build_id) {
        expected = f->build_id;
        expected_size = f->build_id_size;
    } else {
        recorded_build_id(r->header, name, &expected, &expected_size);
    }
    bool unserved = false;
    if (strcmp(name, VDSO) == 0) {
        if (expected_size)
            out->image = cached_copy(r, VDSO, expected, expected_size, "vdso", &unserved);
        return !unserved;
    }
    if (anonymous(name) || out->perf_map)
        return true;
    fu_cli_image *image = fu_cli_images_get(&r->images, name, &unserved);
    if (unserved)
        return false;
    if (image && (!expected_size || same_build_id(expected, expected_size, image))) {
        out->image = image;
        return true;
    }
    if (expected_size && (out->image = cached_copy(r, name, expected, expected_size, "elf", &unserved)))
        return true;
    if (!unserved)
        fu_cli_unserved("a recorded module replaced or missing (the Python path's warning)", name);
    return false;
}

/* The window's new files, mappings, spaces and thread names (py_perf_replay.c build_result). */
static bool take_replay(run *r)
{
    fu_replay *rp = &r->replay;
    fu_error err = {0};
    if (fu_replay_number_mappings(rp, &err) != FU_OK)
        return false;
    uint32_t file_count = FU_REPLAY_COUNT(rp, files, fu_replay_file);
    for (uint32_t i = rp->reported_files; i < file_count; i++) {
        if (!grow((void **)&r->files, &r->file_cap, r->file_count, sizeof *r->files))
            return false;
        run_file *f = &r->files[r->file_count];
        memset(f, 0, sizeof *f);
        bool ok = usable_image(r, &FU_REPLAY_RECORDS(rp, files, fu_replay_file)[i], f);
        r->file_count++;
        if (!ok)
            return false;
    }
    const uint32_t *numbered = (const uint32_t *)(const void *)rp->numbered.data;
    const uint32_t *renumbered = (const uint32_t *)(const void *)rp->renumbered.data;
    for (uint32_t n = rp->reported_mappings; n < rp->used_mappings; n++) {
        const fu_replay_mapping *m = &FU_REPLAY_RECORDS(rp, mappings, fu_replay_mapping)[numbered[n]];
        if (m->file >= r->file_count || !grow((void **)&r->mappings, &r->mapping_cap, r->mapping_count,
                                              sizeof *r->mappings))
            return false;
        run_mapping *out = &r->mappings[r->mapping_count++];
        *out = (run_mapping){m->start, m->end, m->pgoff, 0, m->file, NULL};
        fu_cli_image *image = r->files[m->file].image;
        if (image && fu_cli_image_bias(image, m->start, m->end, m->pgoff, &out->bias))
            out->image = image;
        else
            out->bias = 0;
    }
    const uint32_t *pool = (const uint32_t *)(const void *)rp->space_pool.data;
    uint32_t space_count = FU_REPLAY_COUNT(rp, spaces, fu_replay_space);
    for (uint32_t i = rp->reported_spaces; i < space_count; i++) {
        const fu_replay_space *sp = &FU_REPLAY_RECORDS(rp, spaces, fu_replay_space)[i];
        run_space *s = calloc(1, sizeof *s);
        if (!s || !grow((void **)&r->spaces, &r->space_cap, r->space_count, sizeof *r->spaces)) {
            free(s);
            return false;
        }
        r->spaces[r->space_count++] = s;
        s->count = sp->count;
        s->maps = calloc(sp->count + 1, sizeof *s->maps);
        s->modules = calloc(sp->count + 1, sizeof *s->modules);
        if (!s->maps || !s->modules)
            return false;
        /* address_space.py AddressSpace: the mappings by start (the replay's order), each a module
         * whose id is its index there */
        for (uint32_t k = 0; k < sp->count; k++) {
            uint32_t number = renumbered[pool[sp->offset + k]];
            if (number >= r->mapping_count)
                return false;
            s->maps[k] = number;
            const run_mapping *m = &r->mappings[number];
            if (m->image) {
                if (!fu_cli_image_tables(m->image, FU_COMPACT_SYNTH_MISSING))
                    return false;
                fu_cli_image_module(m->image, m->start, m->end, m->bias, k, &s->modules[k]);
            } else {
                s->modules[k] = (fu_module){.start = m->start, .end = m->end, .id = k};
            }
        }
        if (fu_address_space_init(&s->held.space, s->modules, sp->count, FU_BACKEND_AUTO, &err) != FU_OK)
            return false;
    }
    uint32_t comm_count = FU_REPLAY_COUNT(rp, comm_names, fu_perf_string);
    for (uint32_t i = rp->reported_comm_names; i < comm_count; i++) {
        if (!grow((void **)&r->comms, &r->comm_cap, r->comm_count, sizeof *r->comms))
            return false;
        fu_perf_string name = FU_REPLAY_RECORDS(rp, comm_names, fu_perf_string)[i];
        r->comms[r->comm_count++] = (fu_text){name.data, name.len};
    }
    fu_replay_reported(rp);
    return true;
}

/* The symbols of a mapping, as perf/script.py _symbol_loader gives them: its image's (symbols.py
 * symbol_table_for_file, from the cache); a perf map's are the Python path's. */
static const fu_symbol_table *load_mapping(void *context, uint32_t mapping, bool *failed)
{
    run *r = context;
    const run_mapping *m = &r->mappings[mapping];
    *failed = false;
    if (m->image) {
        const fu_symbol_table *table = fu_cli_image_symbols(m->image);
        *failed = table == NULL;
        return table;
    }
    if (r->files[m->file].perf_map) {
        fu_cli_unserved("JIT code's perf map", r->files[m->file].name);
        *failed = true;
    }
    return NULL;
}

/* The kernel's whole symbol table from the cache (perf/script.py _KernelSymbols, symbols.py
 * cached_kernel_symbol_table); NULL: the Python path reads kallsyms. */
static const fu_symbol_table *kernel_symbols(run *r)
{
    if (r->kernel_loaded)
        return r->has_kernel ? &r->kernel : NULL;
    r->kernel_loaded = true;
    const uint8_t *build_id;
    size_t size;
    char hex[2 * FU_BUILD_ID_CACHE_MAX_ID + 1], name[128], entry[MAX_PATH_BYTES], root[4096];
    fu_buffer key = {0};
    fu_error err = {0};
    if (recorded_build_id(r->header, KERNEL, &build_id, &size) && size <= FU_BUILD_ID_CACHE_MAX_ID) {
        fu_hex(hex, sizeof hex, build_id, size);
        snprintf(name, sizeof name, "symbols/kallsyms-%s.fus", hex);
        fu_buffer path = {0};
        if (fu_build_id_cache_file(KERNEL, hex, "kallsyms", &path) &&
            fu_symbol_key_kallsyms((const char *)path.data, &key) && fu_cache_root(root, sizeof root) &&
            snprintf(entry, sizeof entry, "%s/%s", root, name) < (int)sizeof entry &&
            fu_cli_read_file(entry, &r->kernel_file) &&
            fu_symbol_cache_load(r->kernel_file.data, r->kernel_file.size, key.data, key.len, &r->kernel, &err) ==
                FU_OK)
            r->has_kernel = true;
        if (r->has_kernel)
            fu_cli_note_file((const char *)path.data); /* its identity is in the entry's key */
        free(path.data);
    }
    free(key.data);
    if (!r->has_kernel)
        fu_cli_unserved("the kernel's symbols are not in the cache", NULL);
    return r->has_kernel ? &r->kernel : NULL;
}

/* Walk a window's samples in their spaces on the walker threads (py_perf_walk.c unwind_samples). */
static bool walk(run *r, const fu_perf_data *window, const uint32_t *space_ids)
{
    size_t count = window->sample_count, stride = r->space_count + 1;
    unsigned threads = fu_perf_walk_threads(count);
    if (threads > 1 && count < threads)
        threads = 1;
    fu_walk_cache **caches = calloc(stride * threads, sizeof *caches);
    const fu_address_space **spaces = calloc(stride, sizeof *spaces);
    bool ok = caches && spaces;
    for (size_t i = 0; ok && i < r->space_count; i++)
        spaces[i] = &r->spaces[i]->held.space;
    for (size_t s = 0; ok && s < count; s++) {
        uint32_t id = space_ids[s];
        if (id == FU_REPLAY_NONE || (id < r->space_count && caches[id]))
            continue;
        if (id >= r->space_count) {
            ok = false;
            break;
        }
        for (unsigned t = 0; ok && t < threads; t++)
            ok = (caches[t * stride + id] = fu_walk_cache_borrow(&r->spaces[id]->held.slot, spaces[id])) != NULL;
    }
    uint64_t walk_ns;
    fu_perf_walk_request request = {window->samples, count, space_ids, spaces, caches, stride, threads,
                                    FU_PERF_MAX_STACK};
    ok = ok && fu_perf_walk_samples(&request, &r->buffers, r->extra, &walk_ns);
    for (unsigned t = 0; caches && t < threads; t++)
        for (size_t i = 0; i < r->space_count; i++)
            if (caches[t * stride + i])
                fu_walk_cache_return(&r->spaces[i]->held.slot, caches[t * stride + i]);
    free(caches);
    free(spaces);
    return ok;
}

static bool append_sink(void *context, const uint8_t *data, size_t len)
{
    return fu_cli_output_add(context, data, len);
}

/* Room for the text held before the run is known to be served (FU_CLI_HELD_OUTPUT_BYTES and the
 * chunk that crosses it), taken at once rather than doubled up to it (each doubling a copy). Not
 * advised into 2 MiB pages: in this VM zeroing five fresh huge pages cost ~7 ms of CPU, the 2,000
 * faults of 4 KiB pages ~2 ms. */
static bool reserve_held(fu_buffer *held)
{
    return fu_buffer_reserve(held, FU_CLI_HELD_OUTPUT_BYTES + FU_UNWOUND_CHUNK);
}

/* Symbolize and render a walked window (py_perf_script.c symbolize_samples, render), or add its
 * stacks to `folded` (--folded: written once every window is read), or count its samples in
 * `report` (py_report.c add). */
static bool render(run *r, const fu_perf_data *window, const uint32_t *space_ids, const uint32_t *comm_ids,
                   fu_cli_output *out, fu_folded *folded, fu_report *report)
{
    fu_unwound_map *maps = calloc(r->mapping_count + 1, sizeof *maps);
    fu_unwound_space *views = calloc(r->space_count + 1, sizeof *views);
    bool ok = maps && views;
    for (size_t i = 0; ok && i < r->mapping_count; i++) {
        const run_mapping *m = &r->mappings[i];
        const run_file *f = &r->files[m->file];
        maps[i] = (fu_unwound_map){.start = m->start, .pgoff = m->pgoff, .bias = (int64_t)m->bias,
                                   .path = {f->name, strlen(f->name)}, .has_symbols = m->image || f->perf_map};
    }
    for (size_t i = 0; ok && i < r->space_count; i++)
        views[i] = (fu_unwound_space){r->spaces[i]->maps, r->spaces[i]->count};
    const fu_buffer *columns = r->buffers.frames.column; /* ips, modules, kinds, flags */
    fu_unwound u;
    memset(&u, 0, sizeof u);
    u.samples = window->samples;
    u.sample_count = window->sample_count;
    u.attrs = window->attrs;
    u.attr_count = window->attr_count;
    u.comm_names = r->comms;
    u.comm_count = r->comm_count;
    u.outcome_names = r->outcomes;
    u.maps = maps;
    u.map_count = r->mapping_count;
    fu_unwound_columns cols = {r->buffers.outcomes.data, (const uint32_t *)(const void *)r->buffers.starts.data,
                               (const uint64_t *)(const void *)columns[0].data,
                               (const uint32_t *)(const void *)columns[1].data, columns[2].data, columns[0].len / 8};
    fu_error err = {0};
    bool failed = false;
    ok = ok && fu_unwound_build(&u, comm_ids, space_ids, views, r->space_count, &cols, load_mapping, r, &failed,
                                &err) == FU_OK;
    if (ok && fu_unwound_kernel_addresses(&u, NULL)) {
        const fu_symbol_table *kernel = kernel_symbols(r);
        ok = kernel != NULL;
        if (ok)
            fu_unwound_set_kernel_symbols(&u, kernel);
    }
    if (report)
        ok = ok && fu_report_add(report, &u, &err) == FU_OK;
    else if (folded)
        ok = ok && fu_folded_add(folded, &u, &err) == FU_OK;
    else
        ok = ok && fu_unwound_render(&u, append_sink, out, &err) == FU_OK;
    fu_unwound_free(&u);
    free(maps);
    free(views);
    return ok;
}

/* perf/walk.py recording_source is "dwarf": every sampling event records user registers and stack. */
static bool user_stacks(const fu_perf_data *header)
{
    size_t sampling = 0;
    for (size_t i = 0; i < header->attr_count; i++) {
        const fu_perf_attr *a = &header->attrs[i];
        if ((a->type == PERF_TYPE_SOFTWARE && a->config == PERF_COUNT_SW_DUMMY) || a->sample_period == 0)
            continue;
        sampling++;
        uint64_t both = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
        if ((a->sample_type & both) != both)
            return false;
    }
    return sampling > 0;
}

/* What the run needs before its first window: the recording a regular file read as a stream the
 * Python path reads it (a pipe, a terminal's progress bar, FASTUNWIND_WINDOW_BYTES are its). */
static int open_recording(const fu_cli_request *request, fu_perf_stream **stream, fu_perf_data *header)
{
    struct stat st;
    const char *window_bytes = getenv("FASTUNWIND_WINDOW_BYTES");
    if (isatty(STDERR_FILENO) || (window_bytes && window_bytes[0]) || stat(request->input, &st) != 0 ||
        !S_ISREG(st.st_mode))
        return -1;
    int fd = open(request->input, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    fu_perf_options options = {0};
    fu_error err = {0};
    if (fu_perf_stream_open(stream, header, fd, 0, &options, &err) != FU_OK) {
        fu_perf_data_free(header); /* before the stream, into whose bytes it points */
        fu_perf_stream_free(*stream);
        close(fd);
        return -1;
    }
    fu_perf_stream_decode_ahead(*stream, true);
    fu_perf_stream_executable_mmaps_only(*stream, true);
    return fd;
}

/* perf/report.py parse_sort for the spellings read here ("sym", "comm,dso,sym": the core's keys but
 * srcline, commas and nothing else); false: the Python path's (its error, srcline, spaces, empty keys). */
static bool parse_sort(const char *text, fu_report_layout *layout)
{
    unsigned flags = 0;
    layout->key_count = 0;
    for (const char *at = text;; at++) {
        size_t len = strcspn(at, ","), k = 0;
        while (k < FU_REPORT_KEY_COUNT &&
               (strlen(fu_report_keys[k].name) != len || strncmp(at, fu_report_keys[k].name, len)))
            k++;
        if (k == FU_REPORT_KEY_COUNT || fu_report_keys[k].flag == FU_REPORT_SORT_SRCLINE)
            return false;
        if (!(flags & fu_report_keys[k].flag))
            layout->keys[layout->key_count++] = fu_report_keys[k].flag;
        flags |= fu_report_keys[k].flag;
        at += len;
        if (!*at)
            return true;
    }
}

/* The flags of a layout's keys (the report's sort). */
static unsigned layout_flags(const fu_report_layout *layout)
{
    unsigned flags = 0;
    for (size_t k = 0; k < layout->key_count; k++)
        flags |= layout->keys[k];
    return flags;
}

/* What `walk` and `render` will ask of the caches for the mappings new since `first_mapping` and
 * a window's samples, asked now: every mapped image's symbols (the Python path caches them all
 * ahead), a JIT's perf map (the Python path's), the kernel's symbols where a sample has kernel
 * frames. */
static bool symbols_at_hand(run *r, size_t first_mapping, const fu_perf_data *window)
{
    bool failed = false;
    for (size_t i = first_mapping; !failed && i < r->mapping_count; i++)
        if (r->mappings[i].image || r->files[r->mappings[i].file].perf_map)
            load_mapping(r, (uint32_t)i, &failed);
    bool kernel = false;
    for (size_t s = 0; !kernel && s < window->sample_count; s++)
        kernel = fu_perf_sample_kernel_frames(&window->samples[s]);
    return !failed && (!kernel || kernel_symbols(r));
}

/* ---- the record of a recording's needs -----------------------------------------------------------
 * What a check found at hand: every file it read (the modules, their tables and symbols, the
 * kernel's), by path and identity, kept in the cache under the recording's own identity. While
 * every one is as it was, a later run of the same recording reads the same files and finds them
 * (the decisions are the files' contents): it skips the check. Each file is 5 u64 (device, inode,
 * size, mtime seconds and nanoseconds) and a u32 path length, then the path. */
#define NEEDS_MAGIC "FUNEEDS1"
/* Files a record lists at most: a recording of a whole machine maps a few thousand files. */
#define NEEDS_MAX_FILES 65536
#define NEEDS_FILE_BYTES (5 * 8 + 4)

typedef struct needs {
    fu_buffer bytes;
    size_t count;
    bool failed; /* out of memory, too many files: no record is kept */
} needs;

static void identity(uint64_t fields[5], const struct stat *st)
{
    fields[0] = (uint64_t)st->st_dev;
    fields[1] = (uint64_t)st->st_ino;
    fields[2] = (uint64_t)st->st_size;
    fields[3] = (uint64_t)st->st_mtim.tv_sec;
    fields[4] = (uint64_t)st->st_mtim.tv_nsec;
}

static void note_file(void *context, const char *path, const struct stat *st)
{
    needs *n = context;
    uint64_t fields[5];
    identity(fields, st);
    uint32_t len = (uint32_t)strlen(path);
    n->failed = n->failed || ++n->count > NEEDS_MAX_FILES || !fu_buffer_append(&n->bytes, fields, sizeof fields) ||
                !fu_buffer_append(&n->bytes, &len, sizeof len) || !fu_buffer_append(&n->bytes, path, len);
}

bool fu_cli_needs_hold(const uint8_t *data, size_t size)
{
    size_t magic = sizeof NEEDS_MAGIC - 1;
    if (size < magic || memcmp(data, NEEDS_MAGIC, magic) != 0)
        return false;
    char path[PATH_MAX];
    size_t at = magic;
    for (size_t count = 0; at < size; count++) {
        uint64_t fields[5], now[5];
        uint32_t len;
        if (count >= NEEDS_MAX_FILES || size - at < NEEDS_FILE_BYTES)
            return false;
        memcpy(fields, data + at, sizeof fields);
        memcpy(&len, data + at + sizeof fields, sizeof len);
        at += NEEDS_FILE_BYTES;
        if (len == 0 || len >= sizeof path || size - at < len || memchr(data + at, 0, len))
            return false;
        memcpy(path, data + at, len);
        path[len] = 0;
        at += len;
        struct stat st;
        if (stat(path, &st) != 0)
            return false;
        identity(now, &st);
        if (memcmp(fields, now, sizeof now) != 0)
            return false;
    }
    return true;
}

/* The record's path for the recording `st`: <cache>/recordings/DEV-INODE-SIZE-SECONDS.NANOSECONDS.needs. */
static bool needs_path(const struct stat *st, char *path, size_t size)
{
    char root[4096];
    uint64_t fields[5];
    identity(fields, st);
    if (!fu_cache_root(root, sizeof root))
        return false;
    int n = snprintf(path, size, "%s/" FU_NEEDS_CACHE_KIND "/%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64 ".%09" PRIu64
                     FU_NEEDS_CACHE_SUFFIX, root, fields[0], fields[1], fields[2], fields[3], fields[4]);
    return n > 0 && (size_t)n < size;
}

/* Whether the recording's record of needs exists and holds (its check can be skipped). */
static bool needs_known(const fu_cli_request *request)
{
    struct stat st;
    char path[MAX_PATH_BYTES];
    fu_cli_bytes record;
    if (stat(request->input, &st) != 0 || !needs_path(&st, path, sizeof path) || !fu_cli_read_file(path, &record))
        return false;
    bool hold = fu_cli_needs_hold(record.data, record.size);
    fu_cli_bytes_free(&record);
    return hold;
}

/* Keep what a check found as the recording's record (written whole, then renamed into place; a
 * record that cannot be written only means the next run checks again). */
static void keep_needs(const fu_cli_request *request, const needs *n)
{
    struct stat st;
    char path[MAX_PATH_BYTES], temporary[MAX_PATH_BYTES + 32];
    if (n->failed || stat(request->input, &st) != 0 || !needs_path(&st, path, sizeof path))
        return;
    char *slash = strrchr(path, '/');
    *slash = 0;
    mkdir(path, 0777); /* the cache's root exists: the check read its tables */
    *slash = '/';
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, (int)getpid());
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return;
    bool ok = write(fd, NEEDS_MAGIC, sizeof NEEDS_MAGIC - 1) == (ssize_t)(sizeof NEEDS_MAGIC - 1);
    for (size_t at = 0; ok && at < n->bytes.len;) {
        ssize_t written = write(fd, n->bytes.data + at, n->bytes.len - at);
        ok = written > 0;
        at += ok ? (size_t)written : 0;
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(temporary, path) != 0)
        unlink(temporary);
}

/* A pass over the recording. With `out`: the run, its text, its folded stacks, or its samples
 * counted in `report`, its status (FU_CLI_NOT_SERVED with nothing written). Without (`out` NULL):
 * the check, before the run's first write to an output that cannot take text back (a pipe's; a
 * regular file is written as the text comes and truncated back on a fallback), that everything the
 * rest of it needs is at hand (the
 * recording replayed without a walk: every module of a space that has samples usable and its
 * tables in the caches, the symbols of symbols_at_hand, the end's note one the run says), 0 if so,
 * so that a run falls back to the Python path with nothing written, never half-way. */
static int pass(const fu_cli_request *request, fu_cli_output *out, fu_report *report, const fu_report_layout *layout)
{
    run r;
    memset(&r, 0, sizeof r);
    fu_perf_data header;
    memset(&header, 0, sizeof header);
    fu_perf_stream *stream = NULL;
    int fd = open_recording(request, &stream, &header);
    if (fd < 0) {
        fu_cli_unserved("a recording not read here as the Python path reads it", request->input);
        return FU_CLI_NOT_SERVED;
    }
    r.header = &header;
    for (unsigned code = 0; code < FU_UNWOUND_OUTCOME_CODES; code++) {
        const char *name = fu_sample_outcome_name(code);
        r.outcomes[code] = name ? (fu_text){name, strlen(name)} : (fu_text){"?", 1};
    }
    bool ok = !header.pipe_mode && user_stacks(&header) && fu_cli_images_init(&r.images) &&
              (!out || report || request->folded || fu_cli_output_open_rewindable(out) || reserve_held(&out->held));
    bool checked = out == NULL; /* the check of the rest is made before the first write */
    needs found = {0};
    if (!out)
        fu_cli_observe_files(note_file, &found);
    size_t samples = 0;
    fu_error err = {0};
    uint32_t *space_ids = NULL, *comm_ids = NULL;
    fu_folded folded = {0};
    while (ok) {
        fu_perf_data window;
        memset(&window, 0, sizeof window);
        bool done = false;
        if (fu_perf_stream_next(stream, &window, &done, &err) != FU_OK || done) {
            ok = done;
            fu_perf_data_free(&window);
            break;
        }
        size_t n = window.sample_count, first_mapping = r.mapping_count;
        free(space_ids);
        free(comm_ids);
        space_ids = malloc((n + 1) * sizeof *space_ids);
        comm_ids = malloc((n + 1) * sizeof *comm_ids);
        ok = space_ids && comm_ids && n < FU_REPLAY_NONE &&
             fu_replay_run(&r.replay, &window, space_ids, comm_ids, &err) == FU_OK && take_replay(&r);
        if (!out)
            ok = ok && symbols_at_hand(&r, first_mapping, &window);
        else
            ok = ok && walk(&r, &window, space_ids) &&
                 render(&r, &window, space_ids, comm_ids, out, request->folded ? &folded : NULL, report);
        samples += n;
        fu_perf_data_free(&window);
        if (!out)
            continue;
        /* past the held bytes the text goes out as it comes, as the Python path writes each window's,
         * once the rest of the recording is known to be served */
        if (ok && out->held.len >= FU_CLI_HELD_OUTPUT_BYTES) {
            ok = checked || needs_known(request) || pass(request, NULL, NULL, NULL) == 0;
            checked = true;
            ok = ok && fu_cli_output_flush(out);
        }
        if (out->failed)
            break; /* a reader that went away (`| head`): the Python CLI stops there, quietly, with 0 */
    }
    free(space_ids);
    free(comm_ids);
    fu_perf_stream_wait(stream);
    bool gone = out && out->failed;
    /* --folded: the stacks counted over every window, most frequent first (the Python path's
     * _core.FoldedStacks) */
    if (ok && out && request->folded)
        ok = fu_folded_write(&folded, true, append_sink, out, &err) == FU_OK;
    fu_folded_free(&folded);
    /* report: its table, written once every window is counted */
    if (ok && report && report->samples > 0)
        ok = fu_report_write_table(report, layout, (fu_text){request->input, strlen(request->input)}, &out->held,
                                   &err) == FU_OK;
    /* what the Python path says on stderr: no samples is its message; a recording cut short its
     * note (perf/script.py Statistics.notes), said here too */
    ok = ok && (gone || (samples > 0 && (!report || report->samples > 0) && (!header.cut.note[0] ||
                                         fu_utf8_valid(request->input, strlen(request->input)))));
    if (ok && out && !gone && header.cut.note[0])
        fprintf(stderr, "fastunwind: note: %s: %s; %zu complete samples read\n", request->input, header.cut.note,
                samples);
    fu_perf_data_free(&header); /* before the stream, into whose bytes it points */
    fu_perf_stream_free(stream);
    close(fd);
    run_free(&r);
    if (!out) {
        fu_cli_observe_files(NULL, NULL);
        if (ok)
            keep_needs(request, &found);
        free(found.bytes.data);
    }
    if (ok)
        return 0;
    fu_cli_unserved("a recording the Python path serves (its words on stderr, or a table it builds)", request->input);
    if (!out || out->fd < 0 || fu_cli_output_rewind(out))
        return FU_CLI_NOT_SERVED;
    /* the text is partly written (the caches changed since the check): the run cannot become the
     * Python path's any more */
    fprintf(stderr, "fastunwind: error: %s: %s\n", request->input, fu_cli_unserved_reason());
    return 1;
}

/* Most of perf-script's memory is buffers made again for each window (its records, frames, lines,
 * text) at about the sizes of the window before. Kept in the heap and never trimmed, their pages are
 * faulted in once; glibc's defaults map the larger ones afresh (above 128 KiB, until its threshold
 * adapts) and give back the heap's top, which the next window faults in again: ~1,300 page faults
 * of the 100 MB hackbench recording, ~1.5 ms (benchmarks.bench_perf_script, the text run). The peak
 * stays the largest window's. --folded and report, whose output is made once at the end, keep
 * glibc's defaults. */
#define TEXT_RUN_MMAP_THRESHOLD_BYTES (32 << 20) /* glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX) */
#define TEXT_RUN_TRIM_THRESHOLD_BYTES (128 << 20)

int fu_cli_perf_script(const fu_cli_request *request, fu_cli_output *out)
{
    if (!request->folded) {
        (void)mallopt(M_MMAP_THRESHOLD, TEXT_RUN_MMAP_THRESHOLD_BYTES);
        (void)mallopt(M_TRIM_THRESHOLD, TEXT_RUN_TRIM_THRESHOLD_BYTES);
    }
    return pass(request, out, NULL, NULL);
}

int fu_cli_report(const fu_cli_request *request, fu_cli_output *out)
{
    /* commands/report.py fits the columns to a terminal: a terminal's table is the Python path's */
    struct stat st;
    if (request->output ? stat(request->output, &st) == 0 && !S_ISREG(st.st_mode) : isatty(STDOUT_FILENO)) {
        fu_cli_unserved("a report written to a terminal (or a file that may be one)", request->output);
        return FU_CLI_NOT_SERVED;
    }
    fu_report_layout layout = {.by_total = request->children, .limit = request->top, .width = -1};
    if (!parse_sort(request->sort, &layout)) {
        fu_cli_unserved("a --sort value the Python path reads", request->sort);
        return FU_CLI_NOT_SERVED;
    }
    fu_report report;
    fu_report_init(&report, layout_flags(&layout));
    int status = pass(request, out, &report, &layout);
    fu_report_free(&report);
    return status;
}
