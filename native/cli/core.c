/* `fastunwind core FILE` in C: core.py's CoreFile (the core parsed by core/coredump.c, its mapped
 * files looked up and checked by build-id, the vDSO from the core, the files' bytes for what the
 * dump left out), walked and rendered as stacks.py renders it, its problems as the Python CLI's
 * warnings. What the Python path words as an error (an unreadable core, a module whose reading
 * fails in a way this reader does not word) is left to it.
 */
#define _GNU_SOURCE
#include "core.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <unistd.h>

#include "coredump.h"
#include "eh_elf.h"
#include "launcher.h"
#include "stacks.h"

/* The longest problem line (paths of a few KiB). */
#define MAX_PROBLEM 16384

/* fu_core_memory_at as elf_file.h's reader of a memory. */
static const uint8_t *core_memory_at(const void *memory, uint64_t address, size_t size)
{
    return fu_core_memory_at(memory, address, size);
}

/* Whether the text is plain enough to be printed as the Python CLI prints it (valid UTF-8: a path
 * that is not is written back by Python with escapes this launcher does not reproduce). */
static bool printable(const char *text) { return fu_utf8_valid(text, strlen(text)); }

typedef struct core_run {
    fu_cli_bytes file;
    fu_core core;
    fu_cli_images images;
    fu_cli_image vdso;
    fu_cli_bytes *file_maps;
    size_t file_map_count;
    fu_cli_mapping *mappings;
    size_t mapping_count;
    fu_image_segment *mapped_files;
    size_t mapped_file_count;
    fu_buffer problems; /* the warning lines, in order */
    fu_cli_space space;
    char **candidates; /* the paths looked up, kept for the mappings' lifetime */
    size_t candidate_count;
} core_run;

static void run_free(core_run *r)
{
    fu_cli_space_free(&r->space);
    fu_cli_images_free(&r->images);
    fu_cli_image_free(&r->vdso);
    for (size_t i = 0; i < r->file_map_count; i++)
        fu_cli_bytes_free(&r->file_maps[i]);
    for (size_t i = 0; i < r->candidate_count; i++)
        free(r->candidates[i]);
    free(r->candidates);
    free(r->file_maps);
    free(r->mappings);
    free(r->mapped_files);
    free(r->problems.data);
    fu_core_free(&r->core);
    fu_cli_bytes_free(&r->file);
}

static bool problem(core_run *r, const char *line)
{
    return fu_buffer_append(&r->problems, "fastunwind: warning: ", 21) &&
           fu_buffer_append(&r->problems, line, strlen(line)) && fu_buffer_append(&r->problems, "\n", 1);
}

static int by_avma(const void *a, const void *b)
{
    uint64_t x = ((const fu_image_segment *)a)->vaddr, y = ((const fu_image_segment *)b)->vaddr;
    return x < y ? -1 : x > y;
}

/* The core's PT_LOADs by start address (ties in the core's order), so that finding the one at an
 * address is a binary search: a core may hold FU_CORE_MAX_SEGMENTS of them and as many mapped
 * files, and a scan per file was minutes of a hostile core's time. */
typedef struct segment_index {
    const fu_core *core;
    size_t *order;
} segment_index;

static int by_start_then_order(const void *a, const void *b, void *context)
{
    const fu_core_segment *segments = ((const segment_index *)context)->core->segments;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (segments[x].vaddr != segments[y].vaddr)
        return segments[x].vaddr < segments[y].vaddr ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool segment_index_init(segment_index *index, const fu_core *core)
{
    index->core = core;
    index->order = malloc((core->segment_count + 1) * sizeof *index->order);
    if (!index->order)
        return false;
    for (size_t i = 0; i < core->segment_count; i++)
        index->order[i] = i;
    qsort_r(index->order, core->segment_count, sizeof *index->order, by_start_then_order, index);
    return true;
}

/* The PT_LOAD of the core starting at `vaddr` (the first in the core's order), or NULL. */
static const fu_core_segment *segment_at_start(const segment_index *index, uint64_t vaddr)
{
    const fu_core_segment *segments = index->core->segments;
    size_t low = 0, high = index->core->segment_count; /* the first whose start is at or above vaddr */
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (segments[index->order[mid]].vaddr < vaddr)
            low = mid + 1;
        else
            high = mid;
    }
    return low < index->core->segment_count && segments[index->order[low]].vaddr == vaddr
               ? &segments[index->order[low]]
               : NULL;
}

/* The core's mapped files grouped by path, each group's ranges by (start, end, offset), ties in
 * the core's order: `order` holds the entries so, and entry i's group is order[first[i] ..
 * last[i]) (one sort, where a scan of the rest per path was quadratic in the entries). */
typedef struct file_groups {
    const fu_core *core;
    size_t *order, *first, *last;
} file_groups;

static int by_path_then_range(const void *a, const void *b, void *context)
{
    const fu_core_file *files = ((const file_groups *)context)->core->files;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int by_path = strcmp(files[x].path, files[y].path);
    if (by_path)
        return by_path;
    if (files[x].start != files[y].start)
        return files[x].start < files[y].start ? -1 : 1;
    if (files[x].end != files[y].end)
        return files[x].end < files[y].end ? -1 : 1;
    if (files[x].offset != files[y].offset)
        return files[x].offset < files[y].offset ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool file_groups_init(file_groups *g, const fu_core *core)
{
    size_t n = core->file_count;
    g->core = core;
    g->order = malloc((n + 1) * sizeof *g->order);
    g->first = malloc((n + 1) * sizeof *g->first);
    g->last = malloc((n + 1) * sizeof *g->last);
    if (!g->order || !g->first || !g->last)
        return false;
    for (size_t i = 0; i < n; i++)
        g->order[i] = i;
    qsort_r(g->order, n, sizeof *g->order, by_path_then_range, g);
    for (size_t begin = 0, end; begin < n; begin = end) {
        for (end = begin + 1; end < n && strcmp(core->files[g->order[end]].path, core->files[g->order[begin]].path) == 0;)
            end++;
        for (size_t k = begin; k < end; k++) {
            g->first[g->order[k]] = begin;
            g->last[g->order[k]] = end;
        }
    }
    return true;
}

static void file_groups_free(file_groups *g)
{
    free(g->order);
    free(g->first);
    free(g->last);
}

/* core.py _executable. */
static bool executable(const fu_core_segment *segment, const fu_cli_image *image, uint64_t offset)
{
    if (segment)
        return segment->flags & PF_X;
    if (!image)
        return true;
    return fu_elf_offset_executable(&image->elf.file, offset);
}

/* The modules of the core's mapped files (core.py _find_modules); false: the Python path's. */
static bool find_modules(core_run *r, const fu_cli_request *request)
{
    fu_core *core = &r->core;
    fu_core_memory dumped = {core->memory, core->memory_count, NULL, 0};
    size_t n = core->file_count;
    r->mappings = calloc(n + 1, sizeof *r->mappings);
    r->mapped_files = calloc(n + 1, sizeof *r->mapped_files);
    r->file_maps = calloc(n + 1, sizeof *r->file_maps);
    r->candidates = calloc(n + 1, sizeof *r->candidates);
    bool *done = calloc(n + 1, sizeof *done);
    segment_index segments = {0};
    file_groups groups = {0};
    if (!r->mappings || !r->mapped_files || !r->file_maps || !r->candidates || !done ||
        !segment_index_init(&segments, core) || !file_groups_init(&groups, core) || !fu_cli_images_init(&r->images)) {
        free(done);
        free(segments.order);
        file_groups_free(&groups);
        return false;
    }
    const char *program = NULL;
    for (size_t i = 0; i < n && !program; i++)
        if (core->files[i].start <= core->auxv.phdr && core->auxv.phdr < core->files[i].end)
            program = core->files[i].path;
    bool ok = true;
    char line[MAX_PROBLEM];
    for (size_t i = 0; ok && i < n; i++) {
        if (done[i])
            continue;
        const char *path = core->files[i].path;
        if (!printable(path) || (request->exe && !printable(request->exe)) ||
            (request->sysroot && !printable(request->sysroot))) {
            ok = false;
            break;
        }
        /* the ranges of this path (its group: i is its first in the core's order), done once seen */
        size_t group_first = groups.first[i], group_last = groups.last[i];
        uint64_t header = UINT64_MAX;
        bool any_x = false;
        for (size_t k = group_first; k < group_last; k++) {
            const fu_core_file *file = &core->files[groups.order[k]];
            if (file->offset == 0 && file->start < header)
                header = file->start;
            const fu_core_segment *segment = segment_at_start(&segments, file->start);
            any_x = any_x || (segment && segment->flags & PF_X);
            done[groups.order[k]] = true;
        }
        uint8_t expected[FU_ELF_MAX_BUILD_ID];
        size_t expected_size = 0;
        if (header != UINT64_MAX)
            fu_elf_build_id_in_memory(core_memory_at, &dumped, header, expected, &expected_size);
        bool has_expected = expected_size > 0;
        const uint8_t *magic = header != UINT64_MAX ? fu_core_memory_at(&dumped, header, 4) : NULL;
        if (magic && memcmp(magic, ELFMAG, 4) != 0)
            continue; /* data, not a module */
        char candidate[8192];
        if (request->exe && program && strcmp(path, program) == 0)
            snprintf(candidate, sizeof candidate, "%s", request->exe);
        else if (request->sysroot) {
            const char *relative = path;
            while (*relative == '/')
                relative++;
            size_t len = strlen(request->sysroot);
            snprintf(candidate, sizeof candidate, "%s%s%s", request->sysroot,
                     len && request->sysroot[len - 1] == '/' ? "" : "/", relative);
        } else
            snprintf(candidate, sizeof candidate, "%s", path);
        bool unserved = false;
        fu_cli_image *image = fu_cli_images_get(&r->images, candidate, &unserved);
        if (unserved) {
            ok = false;
            break;
        }
        const char *why = NULL;
        if (!image) {
            struct stat st;
            char where[8300] = "";
            if (strcmp(candidate, path) != 0)
                snprintf(where, sizeof where, " (looked up as %s)", candidate);
            snprintf(line, sizeof line, "%s%s: %s: not used", path, where,
                     stat(candidate, &st) == 0 ? "not a readable ELF file" : "not found");
            why = line;
        } else if (has_expected && (image->elf.build_id_size != expected_size ||
                                    memcmp(image->elf.build_id, expected, expected_size) != 0)) {
            char want[2 * FU_ELF_MAX_BUILD_ID + 1], found[2 * FU_ELF_MAX_BUILD_ID + 1];
            fu_hex(want, sizeof want, expected, expected_size);
            fu_hex(found, sizeof found, image->elf.build_id, image->elf.build_id_size);
            snprintf(line, sizeof line, "%s: build-id %s in the core, %s in %s: not used", path, want,
                     image->elf.build_id_size ? found : "none", candidate);
            why = line;
            image = NULL;
        }
        if (!image && !magic && !any_x)
            continue; /* nothing says it is code */
        if (why && !problem(r, why)) {
            ok = false;
            break;
        }
        fu_cli_bytes *file_map = NULL;
        if (image) {
            file_map = &r->file_maps[r->file_map_count];
            if (fu_cli_read_file(candidate, file_map))
                r->file_map_count++;
            else
                file_map = NULL;
        }
        char *kept = strdup(path);
        if (!kept) {
            ok = false;
            break;
        }
        r->candidates[r->candidate_count++] = kept;
        /* this path's ranges, sorted (start, end, offset) */
        for (size_t k = group_first; k < group_last; k++) {
            const fu_core_file *next = &core->files[groups.order[k]];
            if (executable(segment_at_start(&segments, next->start), image, next->offset)) {
                fu_cli_mapping *m = &r->mappings[r->mapping_count++];
                *m = (fu_cli_mapping){.start = next->start, .end = next->end, .pgoff = next->offset, .path = kept,
                                      .path_len = strlen(kept)};
                uint64_t bias;
                if (image && fu_cli_image_bias(image, next->start, next->end, next->offset, &bias)) {
                    m->image = image;
                    m->bias = bias;
                }
            }
            if (file_map && next->offset < file_map->size) {
                uint64_t size = file_map->size - next->offset;
                if (size > next->end - next->start)
                    size = next->end - next->start;
                r->mapped_files[r->mapped_file_count++] =
                    (fu_image_segment){next->start, file_map->data + next->offset, size};
            }
        }
    }
    uint64_t start = core->auxv.sysinfo_ehdr;
    const fu_core_segment *segment = start ? segment_at_start(&segments, start) : NULL; /* the vDSO's */
    free(done);
    free(segments.order);
    file_groups_free(&groups);
    if (!ok)
        return false;
    if (request->exe && !program) {
        snprintf(line, sizeof line, "--exe %s: no mapping of the core holds the program's headers (AT_PHDR 0x%llx): "
                 "not used", request->exe, (unsigned long long)core->auxv.phdr);
        if (!problem(r, line))
            return false;
    }
    /* the vDSO from the core (core.py _vdso) */
    if (segment) {
        const uint8_t *data = segment->present ? fu_core_memory_at(&dumped, segment->vaddr, segment->present) : NULL;
        fu_cli_mapping vdso = {.start = segment->vaddr, .end = segment->vaddr + segment->memsz, .path = "[vdso]",
                               .path_len = 6};
        if (!data) {
            snprintf(line, sizeof line, "[vdso] at 0x%llx: not in the core: not used", (unsigned long long)start);
            if (!problem(r, line))
                return false;
        } else {
            uint8_t *copy = malloc(segment->present);
            if (!copy)
                return false;
            memcpy(copy, data, segment->present);
            if (fu_cli_image_open(&r->vdso, "", (fu_cli_bytes){.data = copy, .size = segment->present, .owned = true}, true) != FU_CLI_MODULE_OK)
                return false; /* its ElfError's words are the Python path's */
            uint64_t bias;
            if (fu_cli_image_bias(&r->vdso, vdso.start, vdso.end, 0, &bias)) {
                vdso.image = &r->vdso;
                vdso.bias = bias;
            }
        }
        bool inside = false;
        for (size_t i = 0; i < r->mapping_count; i++)
            inside = inside || (r->mappings[i].start < vdso.end && vdso.start < r->mappings[i].end);
        if (inside) {
            snprintf(line, sizeof line, "[vdso] at 0x%llx: inside a mapped file: not used", (unsigned long long)start);
            if (data && !problem(r, line))
                return false;
        } else {
            r->mappings[r->mapping_count++] = vdso;
        }
    }
    qsort(r->mapped_files, r->mapped_file_count, sizeof *r->mapped_files, by_avma);
    return true;
}

int fu_cli_core(const fu_cli_request *request, fu_buffer *out)
{
    core_run r;
    memset(&r, 0, sizeof r);
    fu_error err = {0};
    struct stat st;
    int status = FU_CLI_NOT_SERVED;
    if (stat(request->core_file, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0 ||
        !fu_cli_read_file(request->core_file, &r.file) || fu_core_parse(&r.core, r.file.data, r.file.size, &err) != FU_OK ||
        !find_modules(&r, request) || !fu_cli_space_init(&r.space, r.mappings, r.mapping_count, request->synth)) {
        fu_cli_unserved("the core or one of its modules", request->core_file);
        run_free(&r);
        return FU_CLI_NOT_SERVED;
    }
    fu_core_memory memory = {r.core.memory, r.core.memory_count, r.mapped_files, r.mapped_file_count};
    bool json = request->json, with_registers = request->registers || request->json, complete = true;
    bool ok = fu_snapshot_head(r.core.pid, json, out);
    fu_snapshot_text name = {r.core.name, strlen(r.core.name)};
    for (size_t i = 0; ok && i < r.core.thread_count; i++) {
        const fu_core_thread *t = &r.core.threads[i];
        struct user_regs_struct user;
        memcpy(&user, t->user_regs, sizeof user);
        fu_regs regs;
        fu_regs_from_user_regs(&user, &regs);
        fu_state_regs state;
        fu_state_regs_from_user_regs(&user, &state);
        uint64_t sp = 0;
        fu_regs_get(&regs, FU_REG_RSP, &sp);
        fu_reader reader = fu_core_reader(&memory, sp);
        bool walked_to_end;
        ok = (!json || i == 0 || fu_snapshot_json_separator(out)) &&
             fu_cli_render_walk(&r.space, &regs, &state, &reader, t->tid, name, json, with_registers, out,
                                &walked_to_end);
        complete = complete && walked_to_end;
    }
    if (ok && r.core.truncated_bytes) {
        char line[MAX_PROBLEM];
        snprintf(line, sizeof line, "%s: truncated: 0x%llx bytes of memory the headers list are missing",
                 request->core_file, (unsigned long long)r.core.truncated_bytes);
        ok = printable(request->core_file) && problem(&r, line);
    }
    if (ok && fu_snapshot_tail(json, out) && !fu_cli_space_unserved(&r.space)) {
        fu_cli_write_all(STDERR_FILENO, r.problems.data, r.problems.len);
        status = complete ? 0 : 2;
    }
    run_free(&r);
    return status;
}
