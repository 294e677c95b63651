/* symbols: function symbol tables for symbolization (the Python type fastunwind._core.SymbolTable),
 * and the C accessors the perf-script renderer uses without Python per address. */
#ifndef FASTUNWIND_SYMBOLS_H
#define FASTUNWIND_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    char **plain;             /* demangled names, filled on first use (NULL: not yet) */
    uint32_t *plain_lengths;
} fu_symbol_table;

/* The index of the symbol for `address`; false if none. */
bool fu_symbol_find(const fu_symbol_table *table, uint64_t address, size_t *index);

/* The name of symbol `index` as perf prints it: demangled (ELF tables), computed on first use and
 * kept with the table. */
const char *fu_symbol_name(const fu_symbol_table *table, size_t index, size_t *len);

#endif
