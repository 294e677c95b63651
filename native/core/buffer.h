/* buffer: the growable byte buffer of the core (frames, symbols, names, rendered text): doubling
 * capacity, one definition for every file that collects output of unknown size. */
#ifndef FASTUNWIND_BUFFER_H
#define FASTUNWIND_BUFFER_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct fu_buffer {
    unsigned char *data;
    size_t len, cap;
} fu_buffer;

/* Make room for `extra` more bytes; false if out of memory. */
static inline bool fu_buffer_reserve(fu_buffer *g, size_t extra)
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

static inline bool fu_buffer_append(fu_buffer *g, const void *item, size_t size)
{
    if (!fu_buffer_reserve(g, size))
        return false;
    if (size) /* data is NULL before the first allocation, and memcpy(NULL, ..., 0) is undefined */
        memcpy(g->data + g->len, item, size);
    g->len += size;
    return true;
}

#endif
