/* Bounded cursor over untrusted bytes.
 *
 * Every byte of .eh_frame / .debug_frame / .eh_frame_hdr that the core reads goes through one of
 * these. A cursor never reads at or past `end`; a failed read sets `failed` and returns 0, so a
 * parser can read a whole header and check once (the pattern gimli's sub-readers and readelf's
 * SAFE_BYTE_GET follow). Bounds checks are written as length comparisons (`n <= end - pos`) so they
 * cannot overflow.
 */
#ifndef FASTUNWIND_CURSOR_H
#define FASTUNWIND_CURSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fu_cursor {
    const uint8_t *start; /* first byte of the section: offsets are relative to it */
    const uint8_t *pos;
    const uint8_t *end;
    bool failed;          /* a read ran past `end` or a LEB128 did not fit 64 bits */
} fu_cursor;

static inline fu_cursor fu_cursor_make(const uint8_t *start, const uint8_t *pos, const uint8_t *end)
{
    fu_cursor c = {start, pos, end, false};
    return c;
}

static inline size_t fu_cursor_left(const fu_cursor *c) { return (size_t)(c->end - c->pos); }
static inline uint64_t fu_cursor_offset(const fu_cursor *c) { return (uint64_t)(c->pos - c->start); }

/* A cursor limited to the next n bytes (or to what is left, marking failure). */
static inline fu_cursor fu_cursor_sub(fu_cursor *c, uint64_t n)
{
    fu_cursor s = *c;
    if (n > fu_cursor_left(c)) {
        c->failed = true;
        n = fu_cursor_left(c);
    }
    s.end = c->pos + n;
    s.failed = false;
    return s;
}

static inline bool fu_cursor_skip(fu_cursor *c, uint64_t n)
{
    if (n > fu_cursor_left(c)) {
        c->pos = c->end;
        c->failed = true;
        return false;
    }
    c->pos += n;
    return true;
}

/* Little-endian unsigned read of 1..8 bytes. */
static inline uint64_t fu_read_uint(fu_cursor *c, unsigned size)
{
    if (size == 0 || size > 8 || size > fu_cursor_left(c)) {
        c->pos = c->end;
        c->failed = true;
        return 0;
    }
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* the data is little-endian as the host: one load where the size is known at the call site
     * (perf.data's u32/u64 fields: the byte loop was a third of decoding a recording's records) */
    if (size == 8) {
        memcpy(&v, c->pos, 8);
        c->pos += 8;
        return v;
    }
    if (size == 4) {
        uint32_t w;
        memcpy(&w, c->pos, 4);
        c->pos += 4;
        return w;
    }
#endif
    for (unsigned i = 0; i < size; i++)
        v |= (uint64_t)c->pos[i] << (8 * i);
    c->pos += size;
    return v;
}

static inline int64_t fu_read_sint(fu_cursor *c, unsigned size)
{
    uint64_t v = fu_read_uint(c, size);
    if (size > 0 && size < 8) {
        uint64_t sign = (uint64_t)1 << (size * 8 - 1);
        v = (v ^ sign) - sign;
    }
    return (int64_t)v;
}

static inline uint8_t fu_read_u8(fu_cursor *c) { return (uint8_t)fu_read_uint(c, 1); }

/* ULEB128 (DWARF 5 §7.6). Bits beyond 64 that are not zero mark the cursor failed; a value
 * without its terminating byte before `end` too. */
static inline uint64_t fu_read_uleb(fu_cursor *c)
{
    uint64_t result = 0;
    unsigned shift = 0;
    while (c->pos < c->end) {
        uint8_t byte = *c->pos++;
        if (shift < 64) {
            uint64_t part = (uint64_t)(byte & 0x7f);
            if (shift > 57 && (part >> (64 - shift)) != 0)
                c->failed = true;
            result |= part << shift;
        } else if ((byte & 0x7f) != 0) {
            c->failed = true;
        }
        shift += 7;
        if (!(byte & 0x80))
            return result;
    }
    c->failed = true;
    return result;
}

static inline int64_t fu_read_sleb(fu_cursor *c)
{
    uint64_t result = 0;
    unsigned shift = 0;
    while (c->pos < c->end) {
        uint8_t byte = *c->pos++;
        if (shift < 64)
            result |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
        if (!(byte & 0x80)) {
            if (shift < 64 && (byte & 0x40))
                result |= ~(uint64_t)0 << shift;
            return (int64_t)result;
        }
    }
    c->failed = true;
    return (int64_t)result;
}

#endif
