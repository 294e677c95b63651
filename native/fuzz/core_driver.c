/* core_driver: native/core/coredump.c (the notes and segments of an ELF core) and memory.c's core
 * reader (fu_read_core, fu_core_reader) under AddressSanitizer + UndefinedBehaviorSanitizer.
 *
 * Inputs: cores built here (threads, a process name, an auxiliary vector, mapped files, loads with
 * and without their bytes), the core files given as arguments (a gcore of a real process), and
 * seeded mutants of each: bit flips, cuts, and fields set to hostile values (counts, sizes,
 * offsets). Every input is a malloc'd copy of exactly its size, so a read past it is a report. After
 * a parse that succeeds the driver checks what the core promises (segments sorted, disjoint, their
 * bytes inside the input; paths terminated inside it; counts within their limits) and reads its
 * memory at and around every segment's edges through both readers, which must agree.
 *
 *   make -C native/fuzz asan-core [SEED=N]
 *   build/core_driver_asan --replay FILE     (a saved failing input)
 *
 * Built with -DFU_LIBFUZZER, it is a libFuzzer target over the same checks (make fuzz-core).
 */
#define _GNU_SOURCE
#define FUZZ_DRIVER "core_driver"
#define FUZZ_REPLAY "build/core_driver_asan --replay"
#include "fuzz_common.h"

#include <time.h>

#include "coredump.h"
#include "memory.h"
#include "fuzz_files.h"

/* ---- the checks on one input ---------------------------------------------------------------- */

static bool inside(const uint8_t *data, size_t size, const void *p, uint64_t n)
{
    const uint8_t *q = p;
    return q >= data && (uint64_t)(q - data) <= size && n <= size - (uint64_t)(q - data);
}

static void check_reads(const fu_core *core, const uint8_t *data, size_t size, uint64_t *rng)
{
    fu_core_memory memory = {core->memory, core->memory_count, NULL, 0};
    for (size_t i = 0; i < core->segment_count; i++) {
        const fu_core_segment *seg = &core->segments[i];
        CHECK(fu_core_segment_at(core, seg->vaddr) == seg, "segment %zu not found at its own vaddr", i);
        CHECK(!seg->present || fu_core_memory_at(&memory, seg->vaddr, seg->present) == seg->data,
              "segment %zu's present bytes not where the memory says", i);
        CHECK(!fu_core_memory_at(&memory, seg->vaddr, seg->present + 1) || i + 1 < core->segment_count,
              "segment %zu: a read past its present bytes succeeded", i);
        /* the edges of the segment and of its present bytes, and a few addresses inside */
        uint64_t probes[8] = {seg->vaddr, seg->vaddr + seg->present - 1, seg->vaddr + seg->present,
                              seg->vaddr + seg->memsz - 1, seg->vaddr - 1, seg->vaddr + seg->memsz,
                              seg->vaddr + rng_below(rng, seg->memsz), seg->vaddr + rng_below(rng, seg->present + 1)};
        for (unsigned p = 0; p < 8; p++) {
            unsigned width = 1u + (unsigned)rng_below(rng, 8);
            uint64_t direct = 0, through_window = 0;
            fu_read_status a = fu_read_core(&memory, probes[p], width, &direct);
            fu_reader reader = fu_core_reader(&memory, probes[p]);
            fu_read_status b = fu_reader_read(&reader, probes[p], width, &through_window);
            CHECK(a == b, "readers disagree at 0x%llx", (unsigned long long)probes[p]);
            CHECK(a != FU_READ_OK || direct == through_window, "readers read different values at 0x%llx",
                  (unsigned long long)probes[p]);
            if (a == FU_READ_OK) { /* it must be this segment's present bytes, or another's */
                const fu_core_segment *holder = fu_core_segment_at(core, probes[p]);
                CHECK(holder && probes[p] - holder->vaddr + width <= holder->present,
                      "a read at 0x%llx outside any segment's present bytes", (unsigned long long)probes[p]);
            }
        }
    }
    (void)data;
    (void)size;
}

static void run_one(const uint8_t *input, size_t size, const char *label, uint64_t *rng)
{
    uint8_t *data = malloc(size ? size : 1);
    if (!data)
        abort();
    if (size)
        memcpy(data, input, size);
    fuzz_begin_input(data, size, label);
    fu_core core;
    fu_error err;
    fu_status status = fu_core_parse(&core, data, size, &err);
    if (status == FU_OK) {
        CHECK(core.thread_count <= FU_CORE_MAX_THREADS && core.file_count <= FU_CORE_MAX_FILES &&
                  core.segment_count <= FU_CORE_MAX_SEGMENTS,
              "counts beyond their limits");
        for (size_t i = 0; i < core.segment_count; i++) {
            const fu_core_segment *s = &core.segments[i];
            CHECK(s->present <= s->filesz && s->filesz <= s->memsz, "segment %zu: present > filesz > memsz", i);
            CHECK(!s->present || inside(data, size, s->data, s->present), "segment %zu's bytes outside the input", i);
            CHECK(i == 0 || s->vaddr - core.segments[i - 1].vaddr >= core.segments[i - 1].memsz,
                  "segments %zu and %zu overlap or are unsorted", i - 1, i);
        }
        for (size_t i = 0; i < core.file_count; i++) {
            const char *path = core.files[i].path;
            CHECK(inside(data, size, path, strnlen(path, size) + 1), "path %zu runs past the input", i);
            CHECK(core.files[i].start <= core.files[i].end, "file %zu: start > end", i);
        }
        CHECK(memchr(core.name, 0, sizeof core.name) && memchr(core.arguments, 0, sizeof core.arguments),
              "name or arguments not terminated");
        check_reads(&core, data, size, rng);
        fu_core_free(&core);
    } else {
        CHECK(status == FU_ERR_CORE || status == FU_ERR_NOMEM, "status %d", (int)status);
        CHECK(err.message[0] != 0, "an error without a message");
    }
    free(data);
}

#ifdef FU_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t rng = size;
    run_one(data, size, "libFuzzer input", &rng);
    return 0;
}
#else

/* ---- cores built here ----------------------------------------------------------------------- */

typedef struct builder {
    uint8_t *data;
    size_t len, cap;
} builder;

static void put(builder *b, const void *bytes, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
        if (!b->data)
            abort();
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
}
static void put_u16(builder *b, uint16_t v) { put(b, &v, 2); }
static void put_u32(builder *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(builder *b, uint64_t v) { put(b, &v, 8); }
static void put_zeros(builder *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put(b, "", 1);
}
static void set_u64(builder *b, size_t at, uint64_t v) { memcpy(b->data + at, &v, 8); }

static void note(builder *b, uint32_t type, const void *desc, uint32_t desc_size)
{
    put_u32(b, 5);
    put_u32(b, desc_size);
    put_u32(b, type);
    put(b, "CORE\0\0\0", 8);
    put(b, desc, desc_size);
    put_zeros(b, (4 - desc_size % 4) % 4);
}

/* A core with `threads` threads, `loads` PT_LOADs (every other one without its bytes) and an
 * NT_FILE entry per load; the fields a mutation aims at are at known offsets. */
static builder build_core(uint64_t *rng)
{
    builder b = {0};
    unsigned threads = (unsigned)rng_below(rng, 5), loads = 1 + (unsigned)rng_below(rng, 4);
    unsigned phnum = 1 + loads;
    /* ELF header */
    put(&b, "\177ELF\2\1\1\0\0\0\0\0\0\0\0\0", 16);
    put_u16(&b, 4);  /* ET_CORE */
    put_u16(&b, 62); /* EM_X86_64 */
    put_u32(&b, 1);
    put_u64(&b, 0);
    put_u64(&b, 64); /* e_phoff */
    put_u64(&b, 0);
    put_u32(&b, 0);
    put_u16(&b, 64);
    put_u16(&b, 56);
    put_u16(&b, (uint16_t)phnum);
    put_u16(&b, 64);
    put_u16(&b, 0);
    put_u16(&b, 0);
    size_t phdrs = b.len;
    put_zeros(&b, 56 * (size_t)phnum);
    /* notes */
    size_t notes = b.len;
    uint8_t prstatus[336] = {0};
    for (unsigned t = 0; t < threads; t++) {
        uint32_t tid = 1000 + t;
        memcpy(prstatus + 32, &tid, 4);
        for (unsigned r = 0; r < FU_USER_REGISTER_COUNT; r++) {
            uint64_t v = 0x7ff000 + 8 * rng_below(rng, 0x400);
            memcpy(prstatus + 112 + 8 * r, &v, 8);
        }
        note(&b, 1, prstatus, sizeof prstatus);
    }
    uint8_t prpsinfo[136] = {0};
    memcpy(prpsinfo + 40, "synthetic", 9);
    note(&b, 3, prpsinfo, sizeof prpsinfo);
    uint64_t auxv[8] = {33, 0x7ffe000, 9, 0x401000, 3, 0x400040, 0, 0};
    note(&b, 6, auxv, sizeof auxv);
    builder files = {0};
    put_u64(&files, loads);
    put_u64(&files, 4096);
    for (unsigned l = 0; l < loads; l++) {
        put_u64(&files, 0x400000 + 0x10000 * (uint64_t)l);
        put_u64(&files, 0x401000 + 0x10000 * (uint64_t)l);
        put_u64(&files, l);
    }
    for (unsigned l = 0; l < loads; l++)
        put(&files, "/lib/x.so", 10);
    note(&b, 0x46494c45u, files.data, (uint32_t)files.len);
    free(files.data);
    size_t notes_size = b.len - notes;
    /* program headers, then the loads' bytes */
    uint8_t *ph = b.data + phdrs;
    uint32_t note_type = 4, load_type = 1, flags = 5;
    memcpy(ph, &note_type, 4);
    set_u64(&b, phdrs + 8, notes);
    set_u64(&b, phdrs + 32, notes_size);
    for (unsigned l = 0; l < loads; l++) {
        size_t at = phdrs + 56 * (size_t)(l + 1);
        uint64_t vaddr = l == 0 ? 0x7ff000 : 0x400000 + 0x10000 * (uint64_t)(l - 1);
        uint64_t filesz = l % 2 == 0 ? 0x2000 : 0;
        memcpy(b.data + at, &load_type, 4);
        memcpy(b.data + at + 4, &flags, 4);
        set_u64(&b, at + 8, b.len);
        set_u64(&b, at + 16, vaddr);
        set_u64(&b, at + 32, filesz);
        set_u64(&b, at + 40, 0x2000);
        for (uint64_t i = 0; i < filesz; i += 8) {
            uint64_t word = rng_next(rng);
            put(&b, &word, 8);
        }
    }
    return b;
}

/* ---- mutations ------------------------------------------------------------------------------ */

static const uint64_t HOSTILE[] = {0, 1, 3, 4, 5, 0x7f, 0xff, 0xffff, 0x10000, 0x7fffffff, 0xffffffff,
                                   0x100000000ull, 0x7fffffffffffffffull, 0xffffffffffffffffull};

static size_t mutate(uint8_t *data, size_t size, uint64_t *rng)
{
    return fuzz_mutate(data, size, rng, HOSTILE, sizeof HOSTILE / sizeof HOSTILE[0]);
}

/* [*start, *start + *size) of the first PT_NOTE of a well-formed core (gcore writes its notes at
 * the end of the file, the kernel at the start); false if there is none. */
static bool notes_region(const uint8_t *data, size_t size, size_t *start, size_t *length)
{
    uint64_t phoff;
    uint16_t phnum;
    if (size < 64)
        return false;
    memcpy(&phoff, data + 32, 8);
    memcpy(&phnum, data + 56, 2);
    for (uint16_t i = 0; i < phnum && phoff <= size && (uint64_t)(i + 1) * 56 <= size - phoff; i++) {
        uint32_t type;
        uint64_t offset, filesz;
        memcpy(&type, data + phoff + 56 * (uint64_t)i, 4);
        memcpy(&offset, data + phoff + 56 * (uint64_t)i + 8, 8);
        memcpy(&filesz, data + phoff + 56 * (uint64_t)i + 32, 8);
        if (type == 4 && offset <= size && filesz <= size - offset) {
            *start = (size_t)offset;
            *length = (size_t)filesz;
            return true;
        }
    }
    return false;
}

int main(int argc, char **argv)
{
    fuzz_options options = fuzz_parse_options(argc, argv, 2000, 200, "core-failure");
    uint64_t seed = options.seed, built = options.built, mutations = options.mutations;
    unsigned timeout = options.timeout;
    int first_file = options.first_file;
    fuzz_install_failure_handlers();
    uint64_t rng = seed;
    if (options.replay)
        return fuzz_replay(&options, &rng, run_one);
    printf("core_driver: seed %llu\n", (unsigned long long)seed);
    fflush(stdout);
    char label[256];
    size_t inputs = 0;
    for (uint64_t i = 0; i < built; i++) { /* each built core, then a mutant of it */
        builder b = build_core(&rng);
        fuzz_run_built(b.data, b.len, "core", i, &options, &rng, run_one, mutate);
        inputs += 2;
    }
    for (int f = first_file; f < argc; f++) {
        size_t size;
        uint8_t *original = fuzz_read_file(argv[f], SIZE_MAX, &size);
        if (!original) {
            fprintf(stderr, "core_driver: cannot read %s\n", argv[f]);
            return 2;
        }
        alarm(timeout);
        run_one(original, size, argv[f], &rng);
        uint8_t *copy = malloc(size ? size : 1);
        size_t notes = 0, notes_size = 0;
        bool has_notes = notes_region(original, size, &notes, &notes_size);
        for (uint64_t m = 0; copy && m < mutations; m++) {
            memcpy(copy, original, size);
            /* mutate the bytes a parse reads: the headers, or the notes (a cut there cuts the file) */
            size_t from = 0, length = size < 4096 ? size : 4096;
            if (has_notes && m % 2) {
                from = notes;
                length = notes_size;
            }
            size_t kept = mutate(copy + from, length, &rng);
            snprintf(label, sizeof label, "mutant %llu of %s (seed %llu)", (unsigned long long)m, argv[f],
                     (unsigned long long)seed);
            alarm(timeout);
            run_one(copy, kept < length ? from + kept : size, label, &rng);
            inputs++;
        }
        free(copy);
        free(original);
    }
    alarm(0);
    printf("core_driver: %zu inputs passed\n", inputs);
    return 0;
}
#endif
