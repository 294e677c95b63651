/* symbol_cache: a symbol table (symbols.h) as a file that is mapped and used in place, so that a
 * table is built once per file and not once per run. Building costs most of a short perf-script
 * run's symbol work: the kernel's 122k kallsyms lines ~108M instructions, libLLVM-14's and clang's
 * tables ~150M (callgrind); checking a cached one a few M.
 *
 * Layout (native byte order, x86-64 only; every array 8-byte aligned from the file's start):
 *
 *   offset 0   magic "FUSYMTAB", u32 version (FU_SYMBOL_CACHE_VERSION), u32 flags (bit 0 bounded,
 *              bit 1 usable, bit 2 demangle), u64 count, u64 names_size, u32 key_size, u32 zero
 *   40         key (key_size bytes, what the table was built from), zero-padded to 8
 *   then       u64 starts[count]; u64 ends[count] (bounded tables only);
 *              u32 name_offsets[count]; u32 name_lengths[count]; names (names_size bytes), zero-padded to 8
 *
 * fu_symbol_cache_load accepts only a file that is all of this, for the key it is given, and whose
 * table keeps the builders' invariants (starts strictly increasing, ends at or above starts, names
 * within the names and valid UTF-8, at most FU_MAX_SYMBOLS): a corrupt, truncated, foreign or older
 * file is an FU_ERR_INVALID, never a wrong table. Change FU_SYMBOL_CACHE_VERSION whenever a builder
 * of symbols.c keeps other symbols or names: cached tables of the old rules are then rebuilt. */
#ifndef FASTUNWIND_SYMBOL_CACHE_H
#define FASTUNWIND_SYMBOL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "error.h"
#include "symbols.h"

#define FU_SYMBOL_CACHE_VERSION 1
#define FU_SYMBOL_CACHE_HEADER_SIZE 40
/* Longest key: a few paths and their sizes and times. */
#define FU_SYMBOL_CACHE_MAX_KEY 8192

/* Append `table` as a cache file for `key` to `out`. FU_ERR_INVALID for a key longer than
 * FU_SYMBOL_CACHE_MAX_KEY, FU_ERR_NOMEM. */
fu_status fu_symbol_cache_write(const fu_symbol_table *table, const uint8_t *key, size_t key_size, fu_buffer *out,
                                fu_error *err);

/* The table of the cache file `data` (8-byte aligned) built for `key`, its arrays pointing into
 * `data` (out->borrowed: `data` must outlive the table; fu_symbol_table_free frees only what
 * lookups add). FU_ERR_INVALID (why, in err) if the file is not a valid table for `key`. */
fu_status fu_symbol_cache_load(const uint8_t *data, size_t size, const uint8_t *key, size_t key_size,
                               fu_symbol_table *out, fu_error *err);

#endif
