/* radix_sort: the core's sort of records by a 64-bit key (addresses), stable and without a comparator
 * call per comparison, and the search of a sorted array of such keys: qsort's calls took 125M instructions to sort libLLVM-14's 120k call targets
 * and relocated addresses (check_scope.c) and 50M for its 95k FDEs (lookup.c's index). */
#ifndef FASTUNWIND_RADIX_SORT_H
#define FASTUNWIND_RADIX_SORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The digit: 11 bits, six passes over 64-bit keys, each skipped where every key has the same digit
 * (the addresses of one file share their high bits). */
#define FU_RADIX_BITS 11
#define FU_RADIX_SIZE (1u << FU_RADIX_BITS)

static inline uint64_t fu_radix_key(const unsigned char *item)
{
    uint64_t key;
    memcpy(&key, item, sizeof key);
    return key;
}

/* Sort `count` records of `size` bytes by the uint64_t each starts with, keeping the order of equal
 * keys (an LSD radix sort); false if out of memory. Inlined at each call, where `size` is a
 * constant: the records then move as words, not by a memcpy call each. */
static inline __attribute__((always_inline)) bool fu_radix_sort(void *items, size_t count, size_t size)
{
    if (count < 2)
        return true;
    unsigned char *scratch = malloc(count * size);
    if (!scratch)
        return false;
    unsigned char *from = items, *to = scratch;
    for (unsigned shift = 0; shift < 64; shift += FU_RADIX_BITS) {
        size_t counts[FU_RADIX_SIZE] = {0};
        for (size_t i = 0; i < count; i++)
            counts[(fu_radix_key(from + i * size) >> shift) & (FU_RADIX_SIZE - 1)]++;
        if (counts[(fu_radix_key(from) >> shift) & (FU_RADIX_SIZE - 1)] == count)
            continue; /* one digit for all: this pass keeps the order */
        size_t at = 0;
        for (unsigned d = 0; d < FU_RADIX_SIZE; d++) {
            size_t n = counts[d];
            counts[d] = at;
            at += n;
        }
        for (size_t i = 0; i < count; i++)
            memcpy(to + counts[(fu_radix_key(from + i * size) >> shift) & (FU_RADIX_SIZE - 1)]++ * size,
                   from + i * size, size);
        unsigned char *swap = from;
        from = to;
        to = swap;
    }
    if (from != items)
        memcpy(items, from, count * size);
    free(scratch);
    return true;
}

/* Sort addresses and drop repeats; returns the new count (false in *ok when out of memory). */
static inline size_t fu_sort_unique(uint64_t *values, size_t count, bool *ok)
{
    if (!(*ok = fu_radix_sort(values, count, sizeof *values)))
        return 0;
    size_t kept = count ? 1 : 0;
    for (size_t i = 1; i < count; i++)
        if (values[i] != values[kept - 1])
            values[kept++] = values[i];
    return kept;
}

/* The first index of sorted `keys` whose key is not below `key` (`count` if none); `*found` whether
 * that key is `key`. */
static inline size_t fu_sorted_find(const uint64_t *keys, size_t count, uint64_t key, bool *found)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (keys[mid] < key)
            low = mid + 1;
        else
            high = mid;
    }
    *found = low < count && keys[low] == key;
    return low;
}

#endif
