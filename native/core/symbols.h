/* symbols: function symbol tables for symbolization, built and searched in C (a Python loop over
 * libc's ~10k .symtab entries cost 11 ms, over the kernel's ~120k kallsyms lines 50 ms: more than
 * unwinding a whole recording). The Python type is fastunwind._core.SymbolTable (py/py_symbols.c).
 *
 * fu_symbols_from_elf: the symbols perf 6.1 keeps from one symbol table (dso__load_sym): defined
 *     STT_FUNC and STT_GNU_IFUNC symbols, and STT_NOTYPE labels (not SHN_ABS) in sections whose name
 *     contains "text" (section_flags[shndx] & 1; bytes indexed by section). Then perf's fix-ups, in
 *     its order: symbols__fixup_end (a zero-sized symbol extends to the next one's start, the last to
 *     the page after its start's page), then symbols__fixup_duplicate, whose choose_best_symbol
 *     keeps, of the symbols starting at one address, a sized one over a zero-sized one, non-weak
 *     over weak, global over local, fewer leading underscores, the longer name (all on the
 *     demangled name, as perf demangles before inserting), on a tie the first in the table. With
 *     `plt`, x86-64 PLT stubs named "symbol@plt" (plt.c), at the addresses no symbol of the table
 *     starts at.
 * fu_symbols_from_perf_map: a JIT's /tmp/perf-PID.map (perf_map.c); of several entries at one
 *     address the last one.
 * fu_symbols_from_kallsyms: t/T/w/W lines of /proc/kallsyms; an address belongs to the nearest
 *     symbol at or below it (of several at one address, the last in the file). All addresses 0
 *     (kptr_restrict) or no symbols: `usable` is false and every lookup fails. With queries, one
 *     pass keeps only the symbols the lookups of those addresses find (a few hundred of ~120k: no
 *     sort, no name copied for the others); lookups of other addresses may then find a farther
 *     symbol.
 *
 * Names of ELF tables are demangled (demangle.c) on their first lookup, and kept; kallsyms and
 * perf-map names are not (perf demangles neither). Input is read through bounded cursors; a
 * truncated or malformed entry ends the scan (ELF) or is skipped (kallsyms and perf-map lines).
 * Names are decoded as UTF-8, invalid bytes replaced by U+FFFD as Python's "replace" does. */
#ifndef FASTUNWIND_SYMBOLS_H
#define FASTUNWIND_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "plt.h"

/* Longest symbol name kept; C++ names reach a few KiB, longer ones are data, not names. */
#define FU_MAX_SYMBOL_NAME 65536
/* Sources of one ELF table (file, separate debug file; .symtab and .dynsym each). */
#define FU_MAX_SYMBOL_SOURCES 64
/* Symbols in one table: names and arrays are indexed by u32. */
#define FU_MAX_SYMBOLS (1u << 26)

/* Symbols sorted by start, one per address. A bounded table (ELF .symtab/.dynsym) contains an
 * address only below the symbol's end; an unbounded one (kallsyms) gives the nearest symbol at or
 * below any address. Names are UTF-8 (invalid bytes replaced by U+FFFD, as Python decodes them). */
typedef struct fu_symbol_table {
    uint64_t *starts;
    uint64_t *ends;           /* bounded tables only */
    uint32_t *name_offsets;   /* into names */
    uint32_t *name_lengths;
    char *names;
    size_t count;
    bool bounded;
    bool usable;              /* false: every lookup fails (kallsyms with hidden addresses) */
    bool demangle;            /* ELF tables: names are shown demangled (demangle.h) */
    bool borrowed;            /* the arrays and names belong to a cache file (symbol_cache.h), not the table */
    char **plain;             /* demangled names, filled on first use (NULL: not yet) */
    uint32_t *plain_lengths;
} fu_symbol_table;

/* The index of the symbol for `address`; false if none. */
bool fu_symbol_find(const fu_symbol_table *table, uint64_t address, size_t *index);

/* The name of symbol `index` as perf prints it: demangled (ELF tables), computed on first use and
 * kept with the table. */
const char *fu_symbol_name(const fu_symbol_table *table, size_t index, size_t *len);

/* One .symtab or .dynsym section with its string table, and a byte of flags per section of the file
 * (bit 0: the section's name contains "text", perf's elf_sec__filter for labels). */
typedef struct fu_symbol_source {
    const uint8_t *symtab;
    size_t symtab_size;
    const char *strtab;
    size_t strtab_size;
    int elf_class; /* 32 or 64 */
    const uint8_t *section_flags;
    size_t section_count;
} fu_symbol_source;

/* The builders fill `out` (freed with fu_symbol_table_free) or fail with FU_ERR_INVALID ("more than
 * 67108864 symbols", "symbol names exceed 4 GiB", a bad elf_class) or FU_ERR_NOMEM, leaving `out`
 * empty. The input must outlive only the call. */
fu_status fu_symbols_from_elf(const fu_symbol_source *sources, size_t source_count, const fu_plt_input *plt,
                              fu_symbol_table *out, fu_error *err);
fu_status fu_symbols_from_perf_map(const uint8_t *text, size_t size, fu_symbol_table *out, fu_error *err);
/* queries: the addresses to keep symbols for (any order), or NULL for all of them. */
fu_status fu_symbols_from_kallsyms(const uint8_t *text, size_t size, const uint64_t *queries, size_t query_count,
                                   fu_symbol_table *out, fu_error *err);
void fu_symbol_table_free(fu_symbol_table *table);

/* True if `text` is well-formed UTF-8 (Unicode §3.9, as Python's decoder accepts it). */
bool fu_utf8_valid(const char *text, size_t size);

#endif
