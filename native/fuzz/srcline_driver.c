/* srcline_driver: native/core/srcline.c under AddressSanitizer + UndefinedBehaviorSanitizer on real
 * ELF files with DWARF (FILE arguments: programs built with -g, separate debug files) and seeded
 * mutations of them (bits flipped anywhere in the file, written to a temporary file libdw opens).
 * For each: lookups at random addresses and at addresses near the ones that have a chain; every
 * chain must be within FU_SRCLINE_MAX_DEPTH, its texts inside the module's pool, and a repeated
 * lookup must give the cached chain. Exit status 0 when every input passed; the seed is printed
 * first.
 *
 *   make -C native/fuzz asan-srcline [SEED=N]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "srcline.h"
#include "fuzz_files.h"

static uint64_t state; /* xorshift64, from the printed seed */
static uint64_t next_random(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* Lookups over [0, span): random addresses, then neighbours of those with a chain. */
static void check_module(fu_srcline_module *m, uint64_t span, int lookups)
{
    uint64_t hit = 0;
    for (int i = 0; i < lookups; i++) {
        uint64_t svma = hit && (i & 1) ? hit + next_random() % 64 : next_random() % (span ? span : 1);
        fu_srcline_chain chain, again;
        fu_error err = {0};
        if (fu_srcline_lookup(m, svma, &chain, &err) != FU_OK)
            continue;
        if (chain.count > FU_SRCLINE_MAX_DEPTH)
            abort();
        for (uint32_t k = 0; k < chain.count; k++) {
            const fu_srcline_location *at = fu_srcline_location_at(m, chain.first + k);
            if (at->name_len && fu_srcline_text(m, at->name)[at->name_len - 1] == '\0')
                abort(); /* a text's length covers its bytes, not a terminator */
            if (at->file_len)
                (void)fu_srcline_text(m, at->file)[at->file_len - 1]; /* inside the pool (ASAN) */
        }
        if (chain.count)
            hit = svma;
        if (fu_srcline_lookup(m, svma, &again, &err) != FU_OK || again.first != chain.first ||
            again.count != chain.count)
            abort(); /* the second lookup is the cached one */
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL);
    int mutations = 20, lookups = 2000, first = 1;
    for (; first + 1 < argc && argv[first][0] == '-'; first += 2) {
        if (!strcmp(argv[first], "--seed"))
            seed = strtoull(argv[first + 1], NULL, 0);
        else if (!strcmp(argv[first], "--mutations"))
            mutations = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--lookups"))
            lookups = atoi(argv[first + 1]);
    }
    printf("srcline_driver: seed %llu\n", (unsigned long long)seed);
    state = seed | 1;
    for (int a = first; a < argc; a++) {
        size_t size;
        unsigned char *data = fuzz_read_file(argv[a], SIZE_MAX, &size);
        if (!data) {
            fprintf(stderr, "%s: unreadable\n", argv[a]);
            return 1;
        }
        fu_srcline_module *m;
        fu_error err = {0};
        if (fu_srcline_open(argv[a], &m, &err) != FU_OK) {
            fprintf(stderr, "%s: %s\n", argv[a], err.message);
            return 1;
        }
        check_module(m, size, lookups);
        printf("%s: %zu addresses resolved%s\n", argv[a], fu_srcline_address_count(m),
               fu_srcline_dwarf_error(m) ? " (no DWARF)" : "");
        fu_srcline_close(m);
        char path[] = "/tmp/srcline_driver.XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0)
            return 1;
        close(fd);
        for (int i = 0; i < mutations; i++) {
            unsigned char *copy = malloc(size);
            memcpy(copy, data, size);
            for (int k = 0; k < 1 + (int)(next_random() % 16); k++)
                copy[next_random() % size] ^= (unsigned char)(1u << (next_random() % 8));
            FILE *f = fopen(path, "wb");
            fwrite(copy, 1, size, f);
            fclose(f);
            free(copy);
            if (fu_srcline_open(path, &m, &err) == FU_OK) {
                check_module(m, size, lookups / 10);
                fu_srcline_close(m);
            }
        }
        unlink(path);
        printf("%s: %d mutants\n", argv[a], mutations);
        free(data);
    }
    return 0;
}
