/* intern: the hash set of the core, an index over records kept in the caller's array: it maps a
 * key to the index of the record holding it. The set stores only (hash, index); equality is the
 * caller's callback on the record, so one implementation serves keys of any shape (integers,
 * strings, tuples). Open addressing with linear probing, capacity a power of two, at most half
 * full. */
#ifndef FASTUNWIND_INTERN_H
#define FASTUNWIND_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define FU_INTERN_NONE UINT32_MAX

typedef struct fu_intern_set {
    uint64_t *hashes;
    uint32_t *indices; /* FU_INTERN_NONE: empty slot */
    size_t count, cap;
} fu_intern_set;

/* Does the record at `index` hold `key`? */
typedef bool (*fu_intern_equal)(const void *context, uint32_t index, const void *key);

static inline uint64_t fu_hash_u64(uint64_t x)
{
    /* splitmix64's finalizer */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t fu_hash_bytes(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ fu_hash_u64(seed); /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return fu_hash_u64(h);
}

static inline uint32_t fu_intern_find(const fu_intern_set *s, uint64_t hash, fu_intern_equal equal, const void *context,
                                     const void *key)
{
    if (!s->cap)
        return FU_INTERN_NONE;
    size_t mask = s->cap - 1;
    /* at most half full: the probe meets an empty slot within cap steps */
    for (size_t i = hash & mask, n = 0; n < s->cap; i = (i + 1) & mask, n++) {
        if (s->indices[i] == FU_INTERN_NONE)
            return FU_INTERN_NONE;
        if (s->hashes[i] == hash && equal(context, s->indices[i], key))
            return s->indices[i];
    }
    return FU_INTERN_NONE;
}

static inline void fu_intern_place(uint64_t *hashes, uint32_t *indices, size_t cap, uint64_t hash, uint32_t index)
{
    size_t mask = cap - 1, i = hash & mask;
    while (indices[i] != FU_INTERN_NONE)
        i = (i + 1) & mask;
    hashes[i] = hash;
    indices[i] = index;
}

/* Add `index` under `hash` (the caller found no equal key); false if out of memory. */
static inline bool fu_intern_insert(fu_intern_set *s, uint64_t hash, uint32_t index)
{
    if (2 * (s->count + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        if (cap > SIZE_MAX / sizeof(uint64_t))
            return false;
        uint64_t *hashes = malloc(cap * sizeof *hashes);
        uint32_t *indices = malloc(cap * sizeof *indices);
        if (!hashes || !indices) {
            free(hashes);
            free(indices);
            return false;
        }
        for (size_t i = 0; i < cap; i++)
            indices[i] = FU_INTERN_NONE;
        for (size_t i = 0; i < s->cap; i++)
            if (s->indices[i] != FU_INTERN_NONE)
                fu_intern_place(hashes, indices, cap, s->hashes[i], s->indices[i]);
        free(s->hashes);
        free(s->indices);
        s->hashes = hashes;
        s->indices = indices;
        s->cap = cap;
    }
    fu_intern_place(s->hashes, s->indices, s->cap, hash, index);
    s->count++;
    return true;
}

static inline void fu_intern_free(fu_intern_set *s)
{
    free(s->hashes);
    free(s->indices);
    s->hashes = NULL;
    s->indices = NULL;
    s->count = s->cap = 0;
}

#endif
