/* fuzz_files: reading a whole input file, shared by the drivers of native/fuzz. */
#ifndef FASTUNWIND_FUZZ_FILES_H
#define FASTUNWIND_FUZZ_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The first `limit` bytes of the file at `path` (all of it if shorter), read in chunks so that files
 * whose size stat does not tell (/proc/kallsyms) are read too; *size is the count. NULL if the file
 * cannot be opened or read, or memory runs out; else a malloc'd buffer (at least one byte) the caller
 * frees. */
static inline uint8_t *fuzz_read_file(const char *path, size_t limit, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *data = malloc(cap);
    while (data && n < limit) {
        if (n == cap) {
            uint8_t *grown = realloc(data, cap * 2);
            if (!grown) {
                free(data);
                data = NULL;
                break;
            }
            data = grown;
            cap *= 2;
        }
        size_t want = cap - n < limit - n ? cap - n : limit - n;
        size_t got = fread(data + n, 1, want, f);
        n += got;
        if (got < want)
            break;
    }
    if (data && ferror(f)) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = data ? n : 0;
    return data;
}

#endif
