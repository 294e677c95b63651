/* render: the text primitives of the outputs (perf script's lines, folded stacks), appending to a
 * fu_buffer whose room the caller reserved. They print as Python's format() does, so that the
 * outputs match the Python oracles byte for byte. */
#ifndef FASTUNWIND_RENDER_H
#define FASTUNWIND_RENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "buffer.h"

static inline void fu_put(fu_buffer *out, const void *data, size_t len)
{
    if (len)
        memcpy(out->data + out->len, data, len); /* the caller reserved the room */
    out->len += len;
}

/* Python's format(value, f"{width}d") / "0{width}d" for unsigned values. */
static inline void fu_put_udec(fu_buffer *out, uint64_t v, int width, char pad)
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = n; i < width; i++)
        out->data[out->len++] = (unsigned char)pad;
    while (n)
        out->data[out->len++] = (unsigned char)digits[--n];
}

static inline void fu_put_sdec(fu_buffer *out, int64_t v, int width)
{
    if (v >= 0) {
        fu_put_udec(out, (uint64_t)v, width, ' ');
        return;
    }
    uint64_t magnitude = (uint64_t)0 - (uint64_t)v;
    int digits = 1;
    for (uint64_t m = magnitude; m >= 10; m /= 10)
        digits++;
    for (int i = digits + 1; i < width; i++)
        out->data[out->len++] = ' ';
    out->data[out->len++] = '-';
    fu_put_udec(out, magnitude, 0, ' ');
}

/* The most bytes fu_put_hex writes with a width of at most 40: the digits of a u128 and a sign,
 * or the width. */
#define FU_PUT_HEX_MAX 41

/* Python's format(value, f"{width}x"), the sign counted in the width. */
static inline void fu_put_hex(fu_buffer *out, unsigned __int128 v, bool negative, int width)
{
    static const char hex[] = "0123456789abcdef";
    char digits[40];
    int n = 0;
    do {
        digits[n++] = hex[(unsigned)(v & 15)];
        v >>= 4;
    } while (v);
    for (int i = n + negative; i < width; i++)
        out->data[out->len++] = ' ';
    if (negative)
        out->data[out->len++] = '-';
    while (n)
        out->data[out->len++] = (unsigned char)digits[--n];
}

#endif
