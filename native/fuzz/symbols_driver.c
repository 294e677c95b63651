/* symbols_driver: the symbol-table builders of core/symbols.c (ELF .symtab/.dynsym with PLT stubs,
 * kallsyms, perf maps), their cache files (core/symbol_cache.c: every table built is written, read
 * back and compared, and a mutant of its file must be refused or read as a table that keeps the
 * invariants) and the eh_elf file check of core/eh_elf.c under AddressSanitizer +
 * UndefinedBehaviorSanitizer.
 *
 * An input is a container: u8 mode, u8 blob count, a u32 length per blob, then the blobs (a length
 * past the end is cut to what remains). Every blob is a malloc'd copy of exactly its size, so a read
 * past it is a report. Modes (mode % 4):
 *   0, 1  ELF64 / ELF32: blobs (symtab, strtab) x 1-3 sources; with 10 blobs or more (ELF64), blobs
 *         6-9 are a PLT input: .dynsym, .dynstr, one relocation section, and a PLT section whose
 *         first 8 bytes are its address (fu_symbols_from_elf).
 *   2     kallsyms text (blob 0) and query addresses (blob 1, u64s), built with and without them
 *         (fu_symbols_from_kallsyms).
 *   3     a perf map (blob 0; fu_symbols_from_perf_map).
 *   4     a file (blob 0) written to a memfd, checked as an eh_elf's shared object would be before
 *         dlopen (fu_eh_elf_check_file on /proc/self/fd/N: core/eh_elf.c maps it, core/elf_file.c
 *         reads its headers).
 * Invariants on every table built: starts strictly increasing; ends >= starts (bounded tables);
 * names stored back to back, each valid UTF-8 (the builder replaces invalid bytes); and for
 * LOOKUPS random addresses (half near symbols), fu_symbol_find agrees with a linear scan, and the
 * name it gives (demangled for ELF tables) is readable.
 *
 * Seeds: the ELF files named on the command line (their .symtab/.strtab, .dynsym/.dynstr, .rela.plt
 * and .plt.sec or .plt), /proc/kallsyms if readable (else a synthetic one), a synthetic perf map;
 * then MUTATIONS seeded mutants of each.
 *
 *   make -C native/fuzz asan-symbols [SEED=N]
 *   build/symbols_driver_asan --replay FILE     one saved input
 * Options: --seed N, --mutations N, --timeout S (per input), --save-dir DIR (failing inputs).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <stdbool.h>
#include <time.h>

#define FUZZ_DRIVER "symbols_driver"
#define FUZZ_REPLAY "build/symbols_driver_asan --replay"
#include "fuzz_common.h"
#include "fuzz_elf.h"

#include "eh_elf.h"
#include "symbol_cache.h"
#include "symbols.h"

#include <sys/mman.h> /* memfd_create */
#include "fuzz_files.h"

#define LOOKUPS 2000
#define MAX_BLOBS 16
/* The kallsyms seed is cut to this much of /proc/kallsyms (~5 MB here): enough for every kind of
 * line, short enough for hundreds of mutants under ASAN. */
#define KALLSYMS_SEED_MAX (512 << 10)

static size_t tables_built, lookups_done, eh_elf_files_checked, eh_elf_files_accepted;

/* ---- the container ----------------------------------------------------------------------------- */

typedef struct blobs {
    uint8_t mode;
    unsigned count;
    uint8_t *data[MAX_BLOBS];
    size_t size[MAX_BLOBS];
} blobs;

static void blobs_free(blobs *b)
{
    for (unsigned i = 0; i < b->count; i++)
        free(b->data[i]);
}

static void blobs_split(const uint8_t *input, size_t size, blobs *b)
{
    memset(b, 0, sizeof *b);
    if (size < 2)
        return;
    b->mode = input[0];
    unsigned n = input[1] < MAX_BLOBS ? input[1] : MAX_BLOBS;
    size_t at = 2 + 4 * (size_t)n;
    for (unsigned i = 0; i < n; i++) {
        uint32_t len = 0;
        if (2 + 4 * (size_t)i + 4 <= size)
            memcpy(&len, input + 2 + 4 * i, 4);
        size_t have = at < size ? size - at : 0, take = len < have ? len : have;
        b->data[i] = malloc(take ? take : 1);
        if (take)
            memcpy(b->data[i], input + at, take);
        b->size[i] = take;
        at += take;
        b->count++;
    }
}

/* The container of `count` pieces, malloc'd. */
static uint8_t *blobs_join(uint8_t mode, unsigned count, const uint8_t *const *data, const size_t *size, size_t *out)
{
    size_t total = 2 + 4 * (size_t)count;
    for (unsigned i = 0; i < count; i++)
        total += size[i];
    uint8_t *joined = malloc(total), *p = joined + 2 + 4 * count;
    joined[0] = mode;
    joined[1] = (uint8_t)count;
    for (unsigned i = 0; i < count; i++) {
        uint32_t len = (uint32_t)size[i];
        memcpy(joined + 2 + 4 * i, &len, 4);
        if (size[i])
            memcpy(p, data[i], size[i]);
        p += size[i];
    }
    *out = total;
    return joined;
}

/* ---- invariants --------------------------------------------------------------------------------- */

static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t need = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!need || need > n - i)
            return false;
        uint8_t lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80, hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        for (size_t k = 1; k < need; k++)
            if (k == 1 ? s[i + k] < lo || s[i + k] > hi : s[i + k] < 0x80 || s[i + k] > 0xbf)
                return false;
        i += need;
    }
    return true;
}

static bool linear_find(const fu_symbol_table *t, uint64_t address, size_t *index)
{
    if (!t->usable)
        return false;
    bool found = false;
    for (size_t i = 0; i < t->count && t->starts[i] <= address; i++) {
        *index = i;
        found = true;
    }
    if (found && t->bounded && address >= t->ends[*index] && address != t->starts[*index])
        found = false;
    return found;
}

static void check_table(const fu_symbol_table *t, uint64_t *rng)
{
    tables_built++;
    uint64_t offset = 0;
    for (size_t i = 0; i < t->count; i++) {
        CHECK(i == 0 || t->starts[i] > t->starts[i - 1], "starts not increasing at %zu", i);
        CHECK(!t->bounded || t->ends[i] >= t->starts[i], "symbol %zu ends below its start", i);
        CHECK(t->borrowed || t->name_offsets[i] == offset, "name %zu at %u, expected %llu", i, t->name_offsets[i],
              (unsigned long long)offset);
        CHECK(valid_utf8((const uint8_t *)t->names + t->name_offsets[i], t->name_lengths[i]), "name %zu is not UTF-8",
              i);
        offset += t->name_lengths[i];
    }
    /* the linear scan costs count per lookup: fewer lookups on big tables (kallsyms, libstdc++) */
    size_t lookups = t->count > (size_t)LOOKUPS ? 4000000 / t->count : LOOKUPS;
    for (size_t k = 0; k < (lookups < 50 ? 50 : lookups); k++) {
        uint64_t address = rng_next(rng);
        if (t->count && k % 2) /* near a symbol: its start, end, or a little around them */
            address = (k % 4 == 1 ? t->starts : t->bounded ? t->ends : t->starts)[rng_below(rng, t->count)] +
                      rng_below(rng, 33) - 16;
        size_t fast = 0, slow = 0;
        bool found = fu_symbol_find(t, address, &fast);
        CHECK(found == linear_find(t, address, &slow) && (!found || fast == slow),
              "fu_symbol_find(0x%llx) differs from a linear scan", (unsigned long long)address);
        if (found && k < 200) {
            size_t len;
            const char *name = fu_symbol_name(t, fast, &len);
            volatile uint8_t sum = 0;
            for (size_t i = 0; i < len; i++)
                sum += (uint8_t)name[i];
            (void)sum;
        }
        lookups_done++;
    }
}

static size_t cache_files_written, cache_mutants_accepted;

/* The table through its cache file: read back, the same answers; then a mutant of the file, which
 * is refused or read as a table that keeps check_table's invariants. */
static void check_cache_file(const fu_symbol_table *t, uint64_t *rng)
{
    static const uint8_t key[] = "fuzz\0key";
    fu_buffer file = {0};
    fu_error err = {0};
    if (fu_symbol_cache_write(t, key, sizeof key, &file, &err) != FU_OK) {
        CHECK(err.status == FU_ERR_NOMEM, "symbol cache write failed: %s", err.message);
        return;
    }
    cache_files_written++;
    uint8_t *copy = malloc(file.len); /* exactly its size: a read past it is a report */
    memcpy(copy, file.data, file.len);
    fu_symbol_table loaded;
    CHECK(fu_symbol_cache_load(copy, file.len, key, sizeof key, &loaded, &err) == FU_OK, "own cache file refused: %s",
          err.message);
    CHECK(loaded.count == t->count && loaded.usable == t->usable, "cache file read back as another table");
    for (size_t k = 0; k < 200 && t->count; k++) {
        uint64_t address = t->starts[rng_below(rng, t->count)] + rng_below(rng, 33) - 16;
        size_t a = 0, b = 0, la, lb;
        bool found = fu_symbol_find(t, address, &a);
        CHECK(found == fu_symbol_find(&loaded, address, &b) && (!found || a == b), "cached lookup differs");
        if (found) {
            const char *na = fu_symbol_name(t, a, &la), *nb = fu_symbol_name(&loaded, b, &lb);
            CHECK(la == lb && (la == 0 || memcmp(na, nb, la) == 0), "cached name differs");
        }
    }
    fu_symbol_table_free(&loaded);
    for (uint64_t i = 0, n = 1 + rng_below(rng, 4); i < n; i++)
        copy[rng_below(rng, file.len)] ^= (uint8_t)(1u << rng_below(rng, 8));
    size_t size = rng_below(rng, 8) ? file.len : rng_below(rng, file.len + 1);
    if (fu_symbol_cache_load(copy, size, key, sizeof key, &loaded, &err) == FU_OK) {
        cache_mutants_accepted++;
        check_table(&loaded, rng);
        fu_symbol_table_free(&loaded);
    } else {
        CHECK(err.status == FU_ERR_INVALID, "a bad cache file failed with %d: %s", err.status, err.message);
    }
    free(copy);
    free(file.data);
}

/* ---- one input ----------------------------------------------------------------------------------- */

static uint8_t section_flags[64];

/* FNV-1a: the lookups' addresses come from the input, so that --replay repeats them. */
static uint64_t hash_bytes(const uint8_t *data, size_t size)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 0x100000001b3ull;
    return h;
}

static void run_input(const uint8_t *input, size_t size)
{
    blobs b;
    blobs_split(input, size, &b);
    uint64_t rng = hash_bytes(input, size);
    fu_symbol_table t;
    fu_error err = {0};
    switch (b.mode % 5) {
    case 0:
    case 1: {
        fu_symbol_source sources[3];
        size_t n = 0;
        for (unsigned i = 0; i + 1 < b.count && i < 6 && n < 3; i += 2)
            sources[n++] = (fu_symbol_source){b.data[i], b.size[i], (const char *)b.data[i + 1], b.size[i + 1],
                                              b.mode % 4 == 0 ? 64 : 32, section_flags, sizeof section_flags};
        fu_plt_input plt = {0};
        bool with_plt = b.mode % 4 == 0 && b.count >= 10 && b.size[9] >= 8;
        if (with_plt) {
            plt.dynsym = b.data[6], plt.dynsym_size = b.size[6];
            plt.dynstr = (const char *)b.data[7], plt.dynstr_size = b.size[7];
            plt.relocations[0] = b.data[8], plt.relocation_sizes[0] = b.size[8], plt.relocation_count = 1;
            uint64_t address;
            memcpy(&address, b.data[9], 8);
            plt.sections[0] = (fu_plt_section){address, b.data[9] + 8, b.size[9] - 8, FU_PLT_ENTRY_LARGE};
            plt.section_count = 1;
        }
        if (fu_symbols_from_elf(sources, n, with_plt ? &plt : NULL, &t, &err) == FU_OK) {
            check_table(&t, &rng);
            check_cache_file(&t, &rng);
            fu_symbol_table_free(&t);
        } else {
            CHECK(err.status == FU_ERR_NOMEM || err.status == FU_ERR_INVALID, "from_elf failed with %d: %s",
                  err.status, err.message);
        }
        break;
    }
    case 2:
        for (int with_queries = 0; with_queries < 2 && b.count >= 1; with_queries++) {
            const uint64_t *queries = NULL;
            size_t query_count = 0;
            uint64_t *copy = NULL;
            if (with_queries && b.count >= 2) {
                query_count = b.size[1] / 8;
                copy = malloc(query_count ? 8 * query_count : 1);
                if (query_count)
                    memcpy(copy, b.data[1], 8 * query_count);
                queries = copy;
            } else if (with_queries) {
                break;
            }
            if (fu_symbols_from_kallsyms(b.data[0], b.size[0], queries, query_count, &t, &err) == FU_OK) {
                check_table(&t, &rng);
                check_cache_file(&t, &rng);
                fu_symbol_table_free(&t);
            } else {
                CHECK(err.status == FU_ERR_NOMEM || err.status == FU_ERR_INVALID, "from_kallsyms failed: %s",
                      err.message);
            }
            free(copy);
        }
        break;
    case 3:
        if (b.count >= 1 && fu_symbols_from_perf_map(b.data[0], b.size[0], &t, &err) == FU_OK) {
            check_table(&t, &rng);
            check_cache_file(&t, &rng);
            fu_symbol_table_free(&t);
        }
        break;
    default:
        if (b.count >= 1) {
            int fd = memfd_create("symbols-driver-eh-elf", MFD_CLOEXEC);
            if (fd >= 0 && write(fd, b.data[0], b.size[0]) == (ssize_t)b.size[0]) {
                char path[64], why[256];
                snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
                const char *problem = fu_eh_elf_check_file(path, why, sizeof why);
                CHECK(!problem || (problem[0] && strlen(problem) < sizeof why), "eh_elf check: empty or unterminated reason");
                eh_elf_files_checked++;
                eh_elf_files_accepted += problem == NULL;
            }
            if (fd >= 0)
                close(fd);
        }
    }
    blobs_free(&b);
}

/* ---- seeds and mutation -------------------------------------------------------------------------- */

static void mutate(uint8_t *data, size_t size, uint64_t *rng)
{
    switch (rng_below(rng, 4)) {
    case 0: /* flip bits */
        for (uint64_t i = 0, n = 1 + rng_below(rng, 8); size > 2 && i < n; i++)
            data[2 + rng_below(rng, size - 2)] ^= (uint8_t)(1u << rng_below(rng, 8));
        break;
    case 1: /* overwrite bytes with interesting ones */
        for (uint64_t i = 0, n = 1 + rng_below(rng, 4); size > 2 && i < n; i++)
            data[2 + rng_below(rng, size - 2)] = (uint8_t) "\x00\xff\x80\xc2\xe0\xed\xf0\xf4\n \t_Z"[rng_below(rng, 14)];
        break;
    case 2: /* a blob length */
        if (size > 6)
            data[2 + rng_below(rng, size < 2 + 4 * MAX_BLOBS ? size - 2 : 4 * MAX_BLOBS)] ^= (uint8_t)rng_next(rng);
        break;
    default: /* a copied run */
        if (size > 64) {
            size_t len = 1 + rng_below(rng, 32), from = rng_below(rng, size - len), to = rng_below(rng, size - len);
            memmove(data + to, data + from, len);
        }
    }
}

/* The mode-0 container of an ELF64 file: .symtab/.strtab, .dynsym/.dynstr, padding for source 3, and
 * the PLT input (.dynsym, .dynstr, .rela.plt, .plt.sec or .plt with its address). NULL if none. */
static uint8_t *elf_seed(const uint8_t *file, size_t size, size_t *out)
{
    fuzz_elf64 e;
    if (!fuzz_elf64_open(&e, file, size))
        return NULL;
    const uint8_t *piece[10] = {0};
    size_t piece_size[10] = {0};
    uint8_t *plt = NULL;
    for (unsigned i = 0; i < e.eh.e_shnum; i++) {
        Elf64_Shdr sh;
        const char *name;
        if (!fuzz_elf64_section(&e, i, &sh, &name))
            continue;
        int slot = !strcmp(name, ".symtab") ? 0 : !strcmp(name, ".strtab") ? 1 : !strcmp(name, ".dynsym") ? 2
                 : !strcmp(name, ".dynstr") ? 3 : !strcmp(name, ".rela.plt") ? 8 : -1;
        if (slot >= 0) {
            piece[slot] = file + sh.sh_offset;
            piece_size[slot] = sh.sh_size;
        }
        if ((!strcmp(name, ".plt.sec") || (!strcmp(name, ".plt") && !plt)) && sh.sh_size) {
            free(plt);
            plt = malloc(8 + sh.sh_size);
            memcpy(plt, &sh.sh_addr, 8);
            memcpy(plt + 8, file + sh.sh_offset, sh.sh_size);
            piece_size[9] = 8 + sh.sh_size;
        }
    }
    piece[6] = piece[2], piece_size[6] = piece_size[2];
    piece[7] = piece[3], piece_size[7] = piece_size[3];
    piece[9] = plt;
    uint8_t *joined = NULL;
    if (piece_size[0] || piece_size[2])
        joined = blobs_join(0, plt ? 10 : 6, piece, piece_size, out);
    free(plt);
    return joined;
}

static const char synthetic_kallsyms[] =
    "0000000000000000 A fixed_percpu_data\nffffffff81000000 T _stext\nffffffff81000000 T _text\n"
    "ffffffff81001000 t do_one_initcall\nffffffff81002000 W weak_fn\nffffffff81002000 T weak_fn_strong\n"
    "ffffffff81003000 D data_not_kept\nffffffffc0000000 t module_fn\t[nf_tables]\nffffffff81004000 T caf\xc3\xa9\n";
static const char synthetic_perf_map[] =
    "7f0000001000 40 jitted_function\n7f0000001000 20 later_wins\n1000 10 ab\nzz 10 x\n"
    "2000 ffffffffffffffffff big\n7f0000002000 0 zero_sized \xff\xfe name\n";

static uint64_t input_seed(uint64_t seed, size_t index) { return seed ^ (0x9e3779b97f4a7c15ull * (index + 1)); }

static size_t inputs_run;

static void run_with_mutants(const char *label, uint8_t *input, size_t size, uint64_t seed, int mutations,
                             unsigned timeout)
{
    uint64_t rng = seed;
    uint8_t *mutant = malloc(size ? size : 1);
    for (int m = 0; m <= mutations; m++) {
        memcpy(mutant, input, size);
        for (uint64_t k = 0, n = m ? 1 + rng_below(&rng, 3) : 0; k < n; k++)
            mutate(mutant, size, &rng);
        size_t cut = m && rng_below(&rng, 8) == 0 ? rng_below(&rng, size + 1) : size; /* sometimes truncated */
        char name[480];
        snprintf(name, sizeof name, "%s mutant %d", label, m);
        fuzz_begin_input(mutant, cut, name);
        if (timeout)
            alarm(timeout);
        run_input(mutant, cut);
        alarm(0);
        inputs_run++;
    }
    free(mutant);
}

#ifdef FU_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < sizeof section_flags; i++)
        section_flags[i] = i % 3 != 2;
    run_input(data, size);
    return 0;
}
#else
int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL);
    int mutations = 300;
    unsigned timeout = 20;
    const char *replay = NULL, *save_dir = NULL;
    int first = 1;
    for (; first < argc && !strncmp(argv[first], "--", 2); first += 2) {
        if (first + 1 >= argc)
            break;
        if (!strcmp(argv[first], "--seed"))
            seed = strtoull(argv[first + 1], NULL, 10);
        else if (!strcmp(argv[first], "--mutations"))
            mutations = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--timeout"))
            timeout = (unsigned)atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--replay"))
            replay = argv[first + 1];
        else if (!strcmp(argv[first], "--save-dir"))
            save_dir = argv[first + 1];
    }
    fuzz_install_failure_handlers();
    for (size_t i = 0; i < sizeof section_flags; i++)
        section_flags[i] = i % 3 != 2; /* every third section is not "text": labels there are dropped */
    if (save_dir)
        snprintf(save_path, sizeof save_path, "%s/symbols-%llu.bin", save_dir, (unsigned long long)seed);
    if (replay) {
        size_t size;
        uint8_t *input = fuzz_read_file(replay, (size_t)1 << 30, &size);
        if (!input) {
            fprintf(stderr, FUZZ_DRIVER ": cannot read %s\n", replay);
            return 2;
        }
        save_path[0] = 0;
        fuzz_begin_input(input, size, replay);
        run_input(input, size);
        printf(FUZZ_DRIVER ": %s clean\n", replay);
        free(input);
        return 0;
    }
    printf(FUZZ_DRIVER ": seed %llu, %d mutations of each seed\n", (unsigned long long)seed, mutations);
    fflush(stdout);
    size_t index = 0;
    for (int a = first; a < argc; a++) {
        size_t size, joined_size;
        uint8_t *file = fuzz_read_file(argv[a], (size_t)256 << 20, &size);
        uint8_t *joined = file ? elf_seed(file, size, &joined_size) : NULL;
        free(file);
        if (!joined)
            continue;
        run_with_mutants(argv[a], joined, joined_size, input_seed(seed, index++), mutations, timeout);
        free(joined);
    }
    size_t kallsyms_size = 0;
    uint8_t *kallsyms = fuzz_read_file("/proc/kallsyms", KALLSYMS_SEED_MAX, &kallsyms_size);
    if (!kallsyms || !kallsyms_size) {
        free(kallsyms);
        kallsyms = (uint8_t *)strdup(synthetic_kallsyms);
        kallsyms_size = sizeof synthetic_kallsyms - 1;
    }
    uint64_t queries[64], rng = seed;
    for (size_t i = 0; i < 64; i++)
        queries[i] = i % 2 ? 0xffffffff81000000ull + rng_below(&rng, 1 << 24) : rng_next(&rng);
    const uint8_t *k_pieces[2] = {kallsyms, (const uint8_t *)queries};
    size_t k_sizes[2] = {kallsyms_size, sizeof queries}, joined_size;
    uint8_t *joined = blobs_join(2, 2, k_pieces, k_sizes, &joined_size);
    run_with_mutants("kallsyms", joined, joined_size, input_seed(seed, index++), mutations, timeout);
    free(joined);
    free(kallsyms);
    const uint8_t *synthetic[1] = {(const uint8_t *)synthetic_kallsyms};
    size_t synthetic_size[1] = {sizeof synthetic_kallsyms - 1};
    joined = blobs_join(2, 1, synthetic, synthetic_size, &joined_size);
    run_with_mutants("synthetic kallsyms", joined, joined_size, input_seed(seed, index++), mutations, timeout);
    free(joined);
    /* the shared objects named, as files an eh_elf loader would be given */
    for (int a = first; a < argc; a++) {
        size_t size, file_size;
        uint8_t *file = fuzz_read_file(argv[a], (size_t)4 << 20, &file_size);
        if (!file)
            continue;
        const uint8_t *piece[1] = {file};
        size_t piece_size[1] = {file_size};
        uint8_t *joined_file = blobs_join(4, 1, piece, piece_size, &size);
        char label[300];
        snprintf(label, sizeof label, "%s as an eh_elf file", argv[a]);
        run_with_mutants(label, joined_file, size, input_seed(seed, index++), mutations / 4, timeout);
        free(joined_file);
        free(file);
    }
    const uint8_t *map[1] = {(const uint8_t *)synthetic_perf_map};
    size_t map_size[1] = {sizeof synthetic_perf_map - 1};
    joined = blobs_join(3, 1, map, map_size, &joined_size);
    run_with_mutants("perf map", joined, joined_size, input_seed(seed, index++), mutations, timeout);
    free(joined);
    printf(FUZZ_DRIVER ": %zu inputs clean (%zu tables, %zu lookups checked against a linear scan; %zu cache "
           "files read back, %zu of their mutants accepted; %zu files checked as eh_elfs, %zu accepted)\n", inputs_run,
           tables_built, lookups_done, cache_files_written, cache_mutants_accepted, eh_elf_files_checked,
           eh_elf_files_accepted);
    return 0;
}
#endif
