/* report: perf report's table of functions by self and total samples, accumulated over a recording's
 * symbolized windows (perf_script.h's fu_unwound) without Python per sample or per frame; the Python
 * side is py/py_report.c, the command `fastunwind report`.
 *
 * perf report's rules (perf 6.1, util/hist.c, util/sort.c):
 *  - self (`--no-children`): a sample counts once, for the entry of its first frame (the sampled IP:
 *    the kernel's first callchain entry, else the first user frame);
 *  - total (`--children`, hist_entry_iter__cumulative): a sample counts once for every distinct entry
 *    of its stack, the leaf included, however often recursion repeats it;
 *  - `--sort sym` tells symbols apart by their DSO and start address (sort__sym_cmp compares the dso
 *    first); a frame without a symbol is an entry of its own per DSO-relative address, printed
 *    `0x%016x` as perf prints it. The frames are perf script's (callers at return address - 1), so the
 *    names are the ones `fastunwind perf-script` prints.
 *  - dso, comm, tid and srcline are further keys (`--sort comm,dso,sym`, `--sort sym,srcline`): an
 *    entry is one combination; srcline is the frame's "file:line" (perf's sort__srcline).
 *
 * Memory grows with the distinct entries (functions x the other keys), never with the samples.
 */
#ifndef FASTUNWIND_REPORT_H
#define FASTUNWIND_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "error.h"
#include "intern.h"
#include "perf_script.h"

/* The keys an entry is told apart by (perf report --sort). */
#define FU_REPORT_SORT_SYM 1u
#define FU_REPORT_SORT_DSO 2u
#define FU_REPORT_SORT_COMM 4u
#define FU_REPORT_SORT_TID 8u /* pid and tid */
#define FU_REPORT_SORT_SRCLINE 16u /* the frame's source line (fu_unwound_frame_srcline; the window's
                                    * srcline_fields must ask for source lines) */
#define FU_REPORT_SORT_ALL 31u

/* Entries (and functions, and strings) a report holds at most: ids are u32, and 16M distinct
 * functions is beyond any recording's symbols (libLLVM-14 has 95k FDEs); a report that would hold
 * more fails with FU_ERR_INVALID rather than grow without bound. */
#define FU_REPORT_MAX_ENTRIES (1u << 24)

typedef struct fu_report_string {
    uint32_t offset, len; /* into the pool */
} fu_report_string;

/* A function: its DSO, and its symbol's start (svma; a kernel address) or, without a symbol, the
 * DSO-relative address of the frame; its name (the symbol's, or that address as perf prints it). */
typedef struct fu_report_function {
    uint32_t dso, name; /* string ids */
    uint64_t address;
    bool has_symbol, kernel;
} fu_report_function;

typedef struct fu_report_entry {
    uint32_t function;   /* FU_INTERN_NONE unless sorted by sym */
    uint32_t dso;        /* string id; FU_INTERN_NONE unless sorted by dso (or sym: the function's) */
    uint32_t comm;       /* string id; FU_INTERN_NONE unless sorted by comm */
    uint32_t srcline;    /* string id; FU_INTERN_NONE unless sorted by srcline */
    int32_t pid, tid;    /* 0 unless sorted by tid */
    uint64_t self, total;
    uint64_t last_sample; /* the serial of the last sample that counted in total (0: none) */
} fu_report_entry;

typedef struct fu_report {
    unsigned sort;       /* FU_REPORT_SORT_* */
    uint64_t samples;
    fu_buffer pool, strings, functions, entries; /* bytes, fu_report_string, _function, _entry */
    fu_intern_set string_index, function_index, entry_index;
    fu_buffer frame_functions, frame_entries, comm_strings, frame_srclines; /* per window: scratch by the window's ids */
    fu_buffer text;      /* scratch: a srcline's text */
} fu_report;

/* The id of `text` in the report's names, added if new; FU_INTERN_NONE with err set. */
uint32_t fu_report_string_id(fu_report *r, fu_text text, fu_error *err);
/* The function of a window's frame (its DSO and symbol, or its DSO-relative address). */
uint32_t fu_report_frame_function(fu_report *r, const fu_unwound *u, const fu_unwound_frame *f, fu_error *err);
/* A function that is only a name, in no DSO (its module is ""): "[truncated]" and the like. */
uint32_t fu_report_named_function(fu_report *r, fu_text name, fu_error *err);
/* An empty report sorted by `sort` (a non-zero combination of FU_REPORT_SORT_*). */
void fu_report_init(fu_report *r, unsigned sort);
/* Counts every sample of a symbolized window. FU_ERR_NOMEM, or FU_ERR_INVALID past
 * FU_REPORT_MAX_ENTRIES (the report is then as before the window's first sample that did not fit). */
fu_status fu_report_add(fu_report *r, const fu_unwound *u, fu_error *err);
/* The entries' indices into `order` (room for every entry), by total (by_total) or self samples,
 * most first, then by the other count, then in order of first appearance; entries with neither
 * count are left out. Returns how many were written, or SIZE_MAX if out of memory. */
size_t fu_report_order(const fu_report *r, bool by_total, uint32_t *order);
static inline size_t fu_report_entry_count(const fu_report *r) { return r->entries.len / sizeof(fu_report_entry); }
static inline const fu_report_entry *fu_report_entry_at(const fu_report *r, size_t i)
{
    return &((const fu_report_entry *)(const void *)r->entries.data)[i];
}
static inline const fu_report_function *fu_report_function_at(const fu_report *r, uint32_t i)
{
    return &((const fu_report_function *)(const void *)r->functions.data)[i];
}
/* String `id` (not NUL-terminated). */
static inline fu_text fu_report_text(const fu_report *r, uint32_t id)
{
    const fu_report_string *s = &((const fu_report_string *)(const void *)r->strings.data)[id];
    return (fu_text){(const char *)r->pool.data + s->offset, s->len};
}
void fu_report_free(fu_report *r);

/* ---- the table's text: `fastunwind report`'s, for the Python path and the launcher alike ---------- */

/* The sort keys, in perf's spelling, with their columns' headings. */
#define FU_REPORT_KEY_COUNT 5
typedef struct fu_report_key {
    const char *name, *heading;
    unsigned flag; /* FU_REPORT_SORT_* */
} fu_report_key;
extern const fu_report_key fu_report_keys[FU_REPORT_KEY_COUNT];
#define FU_REPORT_NUMERIC 4 /* the columns before the keys: Self, Total, Self n, Total n (right-aligned) */

typedef struct fu_report_layout {
    unsigned keys[FU_REPORT_KEY_COUNT]; /* the sort's keys in the order given (FU_REPORT_SORT_*, each once) */
    size_t key_count;
    bool by_total;  /* sorted by total samples (--children), else by self */
    int64_t limit;  /* rows at most (per thread in the thread tables); -1: all */
    long width;     /* a line of more characters is cut to width - 1 and "…" (a terminal's); -1: in full */
} fu_report_layout;

/* The table of `r` (which has samples) appended to `out`: "# N samples of SOURCE, sorted by self
 * samples (--sort sym,dso)", "#", the heading ("#" and the column names), then a row per entry in
 * fu_report_order's order: Self and Total as percentages (two decimals) and as counts, right-aligned,
 * then the keys' cells (the symbol, the DSO's base name, the comm, "pid/tid", the source line),
 * left-aligned by characters but the last, columns joined by two spaces, white space stripped at the
 * end of each line. Names are the recording's bytes (a byte that is not UTF-8 is a character of its
 * own). FU_ERR_INVALID for a layout without keys or with unknown or repeated keys, FU_ERR_NOMEM. */
fu_status fu_report_write_table(const fu_report *r, const fu_report_layout *layout, fu_text source, fu_buffer *out,
                                fu_error *err);

/* A thread of a report sorted by tid: its rows, their self samples, its comm (its first row's). */
typedef struct fu_report_thread {
    int32_t pid, tid;
    uint32_t comm;          /* string id, or FU_INTERN_NONE */
    uint64_t samples;       /* the self samples of its rows */
    size_t first, count;    /* its rows: rows[first, first + count), in the table's order */
    size_t first_position;  /* where its first row is in the table */
} fu_report_thread;
/* The threads of `r` (sorted by FU_REPORT_SORT_TID), most samples first, ties in the order of their
 * first rows; *rows (malloc'd) the entries grouped by thread. FU_ERR_NOMEM. */
fu_status fu_report_threads(const fu_report *r, bool by_total, uint32_t **rows, fu_report_thread **threads,
                            size_t *thread_count, fu_error *err);
/* --per-thread's tables of `threads` (a report sorted by the layout's keys, tid and comm) appended to
 * `out`: for each thread of fu_report_threads, an empty line and its table titled "thread COMM
 * PID/TID: N samples (P% of ALL)", keyed by the layout's keys but comm and tid (sym if none is left),
 * percentages of the thread's samples, at most the layout's limit of rows. */
fu_status fu_report_write_threads(const fu_report *threads, const fu_report_layout *layout, fu_buffer *out,
                                  fu_error *err);

#endif
