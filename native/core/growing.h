/* A growable byte buffer for the bindings' results (frames, symbols): doubling capacity, one
 * definition for every file that collects output of unknown size. */
#ifndef FASTUNWIND_GROWING_H
#define FASTUNWIND_GROWING_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct fu_growing {
    unsigned char *data;
    size_t len, cap;
} fu_growing;

/* Make room for `extra` more bytes; false if out of memory. */
static inline bool fu_growing_reserve(fu_growing *g, size_t extra)
{
    if (extra <= g->cap - g->len)
        return true;
    size_t cap = g->cap ? g->cap : 4096;
    while (cap - g->len < extra) {
        if (cap > (size_t)-1 / 2)
            return false;
        cap *= 2;
    }
    unsigned char *p = realloc(g->data, cap);
    if (!p)
        return false;
    g->data = p;
    g->cap = cap;
    return true;
}

static inline bool fu_growing_append(fu_growing *g, const void *item, size_t size)
{
    if (!fu_growing_reserve(g, size))
        return false;
    if (size) /* data is NULL before the first allocation, and memcpy(NULL, ..., 0) is undefined */
        memcpy(g->data + g->len, item, size);
    g->len += size;
    return true;
}

#endif
