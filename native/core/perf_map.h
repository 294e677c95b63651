/* perf_map: the symbol files JITs write for perf, /tmp/perf-PID.map (tools/perf/Documentation/
 * jit-interface.txt): one "START SIZE name" line per function, START and SIZE in hex without 0x.
 * perf names the anonymous executable mappings of process PID after the file and takes their
 * symbols from it (tools/perf/util/symbol.c, dso__load_perf_map). Pure C: the ASAN driver links it. */
#ifndef FASTUNWIND_PERF_MAP_H
#define FASTUNWIND_PERF_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Lines longer than this are skipped (counted in too_long): a JIT's name is a function signature,
 * a few hundred bytes; 64 KiB is the longest ELF name fastunwind keeps (symbols.c). */
#define FU_PERF_MAP_MAX_LINE 65536
/* Lines read at most; the rest of the file is ignored (counted in ignored): 2^24 JITted functions
 * is more than any recorded process compiles. */
#define FU_PERF_MAP_MAX_LINES (1u << 24)

typedef struct fu_perf_map_entry {
    uint64_t start, size;
    const char *name; /* into the text, not NUL-terminated */
    size_t name_len;
} fu_perf_map_entry;

typedef struct fu_perf_map_counts {
    size_t entries, malformed, too_long, ignored;
} fu_perf_map_counts;

/* Called per well-formed line in file order; false stops the parse (returns false). */
typedef bool (*fu_perf_map_emit)(void *context, const fu_perf_map_entry *entry);

/* Parse `text` as perf does: START in hex, one separator, SIZE in hex, one separator, the rest of
 * the line is the name (spaces included); a line whose name would be 2 bytes or shorter is skipped
 * (perf's `len + 2 >= line_len` test), as is one with more than 16 hex digits in a number. */
bool fu_perf_map_parse(const uint8_t *text, size_t size, fu_perf_map_emit emit, void *context,
                       fu_perf_map_counts *counts);

#endif
