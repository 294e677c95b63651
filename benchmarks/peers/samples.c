/* samples: the .samples reader, ELF images, bounded reads, timing and the report (samples.h). */
#define _GNU_SOURCE
#include "samples.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A bounded cursor over the .samples file. */
typedef struct reader {
    const uint8_t *data;
    size_t size, pos;
    const char *path;
    bool failed;
} reader;

static bool reader_take(reader *r, void *out, size_t n, const char *what)
{
    if (r->failed || n > r->size - r->pos) {
        if (!r->failed)
            fprintf(stderr, "%s: truncated at offset 0x%zx reading %s (%zu bytes)\n", r->path, r->pos, what, n);
        r->failed = true;
        return false;
    }
    if (out)
        memcpy(out, r->data + r->pos, n);
    r->pos += n;
    return true;
}

static uint32_t reader_u32(reader *r, const char *what)
{
    uint32_t v = 0;
    reader_take(r, &v, 4, what);
    return v;
}

static uint64_t reader_u64(reader *r, const char *what)
{
    uint64_t v = 0;
    reader_take(r, &v, 8, what);
    return v;
}

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

/* a whole number of huge pages, which the kernel aligns an anonymous mapping of to one */
static size_t huge_page_multiple(size_t size) { return (size + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1); }

static bool read_whole_file(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size <= 0) {
        fprintf(stderr, "%s: empty or unreadable\n", path);
        fclose(f);
        return false;
    }
    *size = (size_t)st.st_size;
    /* in 2 MiB pages, as fastunwind reads a recording (perf_data.py, HUGE_PAGE_READ_MAX_BYTES), so
     * that every tool finds the samples' stack dumps behind the same TLB */
    void *memory = mmap(NULL, huge_page_multiple(*size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *data = memory == MAP_FAILED ? NULL : memory;
    if (*data)
        madvise(*data, huge_page_multiple(*size), MADV_HUGEPAGE);
    bool ok = *data && fread(*data, 1, *size, f) == *size;
    fclose(f);
    if (!ok)
        fprintf(stderr, "%s: cannot read %zu bytes\n", path, *size);
    return ok;
}

/* Maps the ELF file and reads its PT_LOAD headers and the two CFI sections' places. NULL if the
 * file cannot be opened or is not a 64-bit little-endian ELF (the peers then treat the mapping as
 * fastunwind treats a module without image: no unwind info, nothing to read). */
static bench_image *image_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return NULL;
    }
    void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    bench_image *image = calloc(1, sizeof *image);
    image->path = strdup(path);
    image->fd = fd;
    image->data = data;
    image->size = (size_t)st.st_size;
    const Elf64_Ehdr *eh = data;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return image; /* no segments: nothing readable */
    image->type = eh->e_type;
    if (eh->e_phoff < image->size && eh->e_phnum <= (image->size - eh->e_phoff) / sizeof(Elf64_Phdr)) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(image->data + eh->e_phoff);
        for (unsigned i = 0; i < eh->e_phnum && image->segment_count < BENCH_MAX_SEGMENTS; i++)
            if (ph[i].p_type == PT_LOAD && ph[i].p_filesz && ph[i].p_offset <= image->size &&
                ph[i].p_filesz <= image->size - ph[i].p_offset)
                image->segments[image->segment_count++] =
                    (bench_segment){ph[i].p_vaddr, ph[i].p_filesz, ph[i].p_offset};
    }
    if (eh->e_shoff < image->size && eh->e_shnum <= (image->size - eh->e_shoff) / sizeof(Elf64_Shdr) &&
        eh->e_shstrndx < eh->e_shnum) {
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(image->data + eh->e_shoff);
        const Elf64_Shdr *names = &sh[eh->e_shstrndx];
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            if (names->sh_offset >= image->size || sh[i].sh_name >= image->size - names->sh_offset)
                continue;
            const char *name = (const char *)image->data + names->sh_offset + sh[i].sh_name;
            size_t room = image->size - names->sh_offset - sh[i].sh_name;
            if (strnlen(name, room) == room)
                continue;
            if (strcmp(name, ".eh_frame_hdr") == 0 && sh[i].sh_type != SHT_NOBITS) {
                image->eh_frame_hdr_vaddr = sh[i].sh_addr;
                image->eh_frame_hdr_size = sh[i].sh_size;
            } else if (strcmp(name, ".debug_frame") == 0 && sh[i].sh_type != SHT_NOBITS) {
                image->has_debug_frame = true;
            }
        }
    }
    return image;
}

static bench_image *image_for(bench_set *set, const char *path)
{
    for (uint32_t i = 0; i < set->image_count; i++)
        if (strcmp(set->images[i]->path, path) == 0)
            return set->images[i];
    bench_image *image = image_open(path);
    if (image) {
        set->images = realloc(set->images, sizeof *set->images * (set->image_count + 1));
        set->images[set->image_count++] = image;
    }
    return image;
}

bool bench_load(const char *path, bench_set *set)
{
    memset(set, 0, sizeof *set);
    if (!read_whole_file(path, &set->file, &set->file_size))
        return false;
    reader r = {set->file, set->file_size, 0, path, false};
    char magic[8];
    if (!reader_take(&r, magic, 8, "magic") || memcmp(magic, "FUSAMPLE", 8) != 0) {
        fprintf(stderr, "%s: not a .samples file (magic is not FUSAMPLE)\n", path);
        return false;
    }
    uint32_t version = reader_u32(&r, "version");
    set->space_count = reader_u32(&r, "space_count");
    set->sample_count = reader_u32(&r, "sample_count");
    uint32_t register_count = reader_u32(&r, "register_count");
    reader_u64(&r, "stack_bytes");
    if (r.failed)
        return false;
    if (version != 1 || register_count != FU_WALK_REGISTERS || set->space_count > BENCH_MAX_SPACES ||
        set->sample_count > BENCH_MAX_SAMPLES) {
        fprintf(stderr, "%s: unsupported header: version %u, %u registers, %u spaces, %u samples\n", path, version,
                register_count, set->space_count, set->sample_count);
        return false;
    }
    set->spaces = calloc(set->space_count + 1, sizeof *set->spaces);
    set->samples = calloc(set->sample_count + 1, sizeof *set->samples);
    for (uint32_t s = 0; s < set->space_count && !r.failed; s++) {
        bench_space *space = &set->spaces[s];
        space->count = reader_u32(&r, "mapping_count");
        if (space->count > BENCH_MAX_MAPPINGS) {
            fprintf(stderr, "%s: space %u has 0x%x mappings (limit 0x%x)\n", path, s, space->count, BENCH_MAX_MAPPINGS);
            return false;
        }
        space->mappings = calloc(space->count + 1, sizeof *space->mappings);
        for (uint32_t m = 0; m < space->count && !r.failed; m++) {
            bench_mapping *mapping = &space->mappings[m];
            mapping->start = reader_u64(&r, "mapping start");
            mapping->end = reader_u64(&r, "mapping end");
            mapping->pgoff = reader_u64(&r, "mapping pgoff");
            mapping->bias = reader_u64(&r, "mapping bias");
            mapping->flags = reader_u32(&r, "mapping flags");
            uint32_t length = reader_u32(&r, "path length");
            mapping->path = calloc(1, (size_t)length + 1);
            reader_take(&r, mapping->path, length, "path");
            if (!r.failed && (mapping->flags & BENCH_MAPPING_USABLE))
                mapping->image = image_for(set, mapping->path);
        }
    }
    for (uint32_t i = 0; i < set->sample_count && !r.failed; i++) {
        bench_sample *sample = &set->samples[i];
        sample->space = reader_u32(&r, "sample space");
        sample->register_valid = reader_u32(&r, "register_valid");
        sample->perf_index = reader_u32(&r, "perf_sample_index");
        sample->tid = reader_u32(&r, "tid");
        for (unsigned k = 0; k < FU_WALK_REGISTERS; k++)
            sample->registers[k] = reader_u64(&r, "register");
        sample->stack_address = reader_u64(&r, "stack_address");
        sample->stack_size = reader_u64(&r, "stack_size");
        if (r.failed)
            break;
        if (sample->space >= set->space_count) {
            fprintf(stderr, "%s: sample %u: space %u out of range (%u spaces)\n", path, i, sample->space,
                    set->space_count);
            return false;
        }
        if (sample->stack_size > r.size - r.pos) {
            fprintf(stderr, "%s: sample %u: stack of 0x%" PRIx64 " bytes past the end of the file (offset 0x%zx)\n",
                    path, i, sample->stack_size, r.pos);
            return false;
        }
        sample->stack = r.data + r.pos;
        r.pos += sample->stack_size;
    }
    return !r.failed;
}

void bench_free(bench_set *set)
{
    for (uint32_t s = 0; s < set->space_count; s++) {
        for (uint32_t m = 0; m < set->spaces[s].count; m++)
            free(set->spaces[s].mappings[m].path);
        free(set->spaces[s].mappings);
    }
    for (uint32_t i = 0; i < set->image_count; i++) {
        munmap((void *)set->images[i]->data, set->images[i]->size);
        close(set->images[i]->fd);
        free(set->images[i]->path);
        free(set->images[i]);
    }
    free(set->images);
    free(set->spaces);
    free(set->samples);
    if (set->file)
        munmap(set->file, huge_page_multiple(set->file_size));
    memset(set, 0, sizeof *set);
}

const bench_mapping *bench_find_mapping(const bench_space *space, uint64_t avma)
{
    uint32_t low = 0, high = space->count;
    while (low < high) {
        uint32_t mid = low + (high - low) / 2;
        if (avma < space->mappings[mid].start)
            high = mid;
        else if (avma >= space->mappings[mid].end)
            low = mid + 1;
        else
            return &space->mappings[mid];
    }
    return NULL;
}

static bool image_read(const bench_image *image, uint64_t svma, uint64_t *out)
{
    for (unsigned i = 0; i < image->segment_count; i++) {
        const bench_segment *s = &image->segments[i];
        if (svma >= s->vaddr && svma - s->vaddr <= s->filesz && s->filesz - (svma - s->vaddr) >= 8) {
            memcpy(out, image->data + s->offset + (svma - s->vaddr), 8);
            return true;
        }
    }
    return false;
}

bool bench_read_file_word(const bench_space *space, uint64_t avma, uint64_t *out)
{
    /* The executable mapping whose file holds avma: usually the mapping itself; constants and the
     * .eh_frame_hdr of a -z separate-code file sit in a read-only segment next to it, so look at
     * every usable mapping's file (a handful per process). */
    const bench_mapping *hit = bench_find_mapping(space, avma);
    if (hit && hit->image && image_read(hit->image, avma - hit->bias, out))
        return true;
    for (uint32_t m = 0; m < space->count; m++) {
        const bench_mapping *mapping = &space->mappings[m];
        if (mapping != hit && mapping->image && image_read(mapping->image, avma - mapping->bias, out))
            return true;
    }
    return false;
}

bool bench_read_word(const bench_set *set, const bench_sample *sample, uint64_t avma, uint64_t *out)
{
    if (avma >= sample->stack_address && avma - sample->stack_address <= sample->stack_size &&
        sample->stack_size - (avma - sample->stack_address) >= 8) {
        memcpy(out, sample->stack + (avma - sample->stack_address), 8);
        return true;
    }
    return bench_read_file_word(&set->spaces[sample->space], avma, out);
}

void bench_passes_add(bench_passes *passes, uint64_t pass_ns)
{
    passes->total_ns += pass_ns;
    if (passes->count == 0)
        passes->first_ns = pass_ns;
    if (passes->count == 0 || pass_ns < passes->best_ns)
        passes->best_ns = pass_ns;
    passes->count++;
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_evict_caches(void)
{
    static volatile unsigned char *junk;
    if (!junk)
        junk = malloc(BENCH_EVICT_BYTES);
    if (junk)
        for (size_t offset = 0; offset < BENCH_EVICT_BYTES; offset += BENCH_EVICT_PIECE_BYTES)
            memset((unsigned char *)junk + offset, 1, BENCH_EVICT_PIECE_BYTES);
}

bool bench_frames_init(bench_frames *frames, uint32_t sample_count)
{
    frames->sample_count = sample_count;
    frames->pcs = calloc((size_t)sample_count * FU_PERF_MAX_STACK + 1, sizeof *frames->pcs);
    frames->counts = calloc((size_t)sample_count + 1, sizeof *frames->counts);
    if (!frames->pcs || !frames->counts)
        return false;
    /* calloc's pages are mapped on first write; fastunwind's timed passes write into memory that
     * an untimed walk has mapped (bench_unwind.py; unwind_samples keeps a batch's buffers for the
     * next), so these are mapped before timing too */
    memset(frames->pcs, 0, ((size_t)sample_count * FU_PERF_MAX_STACK + 1) * sizeof *frames->pcs);
    memset(frames->counts, 0, ((size_t)sample_count + 1) * sizeof *frames->counts);
    return true;
}

void bench_frames_free(bench_frames *frames)
{
    free(frames->pcs);
    free(frames->counts);
}

bool bench_frames_write(const bench_frames *frames, const bench_set *set, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return false;
    }
    for (uint32_t i = 0; i < frames->sample_count; i++) {
        fprintf(f, "%u", set->samples[i].perf_index);
        for (uint32_t k = 0; k < frames->counts[i]; k++)
            fprintf(f, " %" PRIx64, frames->pcs[(size_t)i * FU_PERF_MAX_STACK + k]);
        fputc('\n', f);
    }
    return fclose(f) == 0;
}

bool bench_parse_arguments(int argc, char **argv, bench_arguments *arguments)
{
    *arguments = (bench_arguments){NULL, 1, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--frames") == 0 && i + 1 < argc)
            arguments->frames_path = argv[++i];
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
            arguments->mode = argv[++i];
        else if (!arguments->samples_path)
            arguments->samples_path = argv[i];
        else {
            char *end;
            unsigned long n = strtoul(argv[i], &end, 10);
            if (*end || n == 0 || n > 100000) {
                fprintf(stderr, "%s: REPEAT must be 1..100000, not '%s'\n", argv[0], argv[i]);
                return false;
            }
            arguments->repeat = (unsigned)n;
        }
    }
    if (!arguments->samples_path) {
        fprintf(stderr, "usage: %s SAMPLES_FILE [REPEAT] [--frames FILE] [--mode MODE]\n"
                        "example: %s /tmp/hackbench.samples 10 --frames /tmp/pcs.txt\n", argv[0], argv[0]);
        return false;
    }
    return true;
}

void bench_report(const char *tool, const bench_set *set, unsigned repeat, uint64_t frames, uint64_t ns_total,
                  const char *frames_path, const char *outcomes_json)
{
    printf("{\"tool\": \"%s\", \"samples\": %u, \"repeat\": %u, \"frames\": %" PRIu64 ", \"ns_total\": %" PRIu64
           ", \"ns_per_frame\": %.3f, \"ns_per_sample\": %.1f",
           tool, set->sample_count, repeat, frames / repeat, ns_total, frames ? (double)ns_total / (double)frames : 0.0,
           set->sample_count ? (double)ns_total / ((double)set->sample_count * repeat) : 0.0);
    if (outcomes_json)
        printf(", \"outcomes\": %s", outcomes_json);
    if (frames_path)
        printf(", \"per_sample_frames\": \"%s\"", frames_path);
    printf("}\n");
}
