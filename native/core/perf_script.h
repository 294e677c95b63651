/* perf_script: a recording's unwound samples symbolized and rendered without Python per sample or
 * per frame: perf script's text, FlameGraph's folded stacks, the outcome statistics. The Python side
 * (symbolize_samples, UnwoundSamples) is py/py_perf_script.c.
 *
 * perf script's rules (perf 6.1, `-F comm,tid,time,event,ip,sym,symoff,dso --no-inline`): per sample a
 * header `comm  tid  sec.usec: event: ` (the event's name as perf script's default output prints it,
 * which viewers such as speedscope read; `sec.usec: ` alone when the sample's event is not known),
 * one line `\t%16x sym+0xoff (dso)` per frame, kernel frames (the
 * sample's callchain entries in [2^63, PERF_CONTEXT_MAX)) then user frames, and a blank line. A
 * user frame is printed at its DSO-relative address (avma - map start + pgoff), callers at their
 * return address - 1 except the frame a signal interrupted; its symbol is looked up at svma = avma
 * - bias. Every distinct (mapping, address) is resolved and formatted once. Symbol names are the
 * tables' (fu_symbol_name: demangled in C, kept with the table).
 *
 * Source lines (srcline.h), as perf 6.1 prints them with `-F +srcline` and `--inline`: a user frame
 * whose mapping has a srcline loader gets its chain at the svma. With --inline, a frame with a
 * symbol and a chain of n > 1 locations is preceded by n - 1 lines, innermost first, each
 * "\t%16x function+0xoff (inlined)" (the frame's address and symbol offset, no dso); with srcline,
 * each frame line is followed by "  file:line" (the file's basename; when not known "??:0" with
 * --inline, nothing without; a kernel frame's "  [kernel.kallsyms][address]", a frame in no
 * mapping's nothing), the
 * inlined ones' "  file:line (inlined)" instead of the " (inlined)" suffix. A frame's line is
 * its chain's outermost location with --inline (the call site in the function of its symbol), the
 * innermost without (the line table's); callers are looked up where their frames point (the return
 * address - 1), as perf does. Where perf names a function that is not inlined by its DWARF name,
 * marked "(inlined)" without its dso, because that name differs from its symbol's
 * (`__libc_start_main_impl (inlined)` for `__libc_start_main@@GLIBC_2.34`, one location in
 * `addr2line -i`), the frame is printed as any other. */
#ifndef FASTUNWIND_PERF_SCRIPT_H
#define FASTUNWIND_PERF_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "intern.h"
#include "buffer.h"
#include "perf_data.h"
#include "srcline.h"
#include "symbols.h"

#define FU_UNWOUND_NO_MODULE UINT32_MAX          /* fu_frames.module of an IP in no mapping */
#define FU_UNWOUND_MAPPING_NONE UINT32_MAX       /* a user frame in no mapping */
#define FU_UNWOUND_MAPPING_KERNEL (UINT32_MAX - 1)
#define FU_UNWOUND_CHUNK (1u << 20)              /* bytes handed to a sink at a time */
#define FU_UNWOUND_OUTCOME_CODES 256

/* Text the caller keeps alive (not NUL-terminated). */
typedef struct fu_text {
    const char *data;
    size_t len;
} fu_text;

/* A mapping of the replay: where it starts, its file offset and bias, its path (the dso printed) and,
 * once a frame needs them, its symbols. */
typedef struct fu_unwound_map {
    uint64_t start, pgoff;
    int64_t bias;
    fu_text path;
    bool has_symbols; /* a loader may give its symbols */
    bool loaded;
    const fu_symbol_table *symbols;
    bool has_srclines; /* a srcline loader may give its source lines (fu_unwound.srcline_fields) */
    bool srclines_loaded;
    fu_srcline_module *srclines;
} fu_unwound_map;

/* The source lines of maps[mapping], asked once when a frame first needs them (fu_unwound_load_fn's
 * contract; the context is fu_unwound_build's). */
typedef fu_srcline_module *(*fu_unwound_srcline_fn)(void *context, uint32_t mapping, bool *failed);

/* What perf script prints of a frame's source (fu_unwound.srcline_fields). */
#define FU_UNWOUND_INLINE 1u  /* --inline: a line per inlined function around the address, before its frame */
#define FU_UNWOUND_SRCLINE 2u /* -F +srcline: "  file:line" after each frame line */

typedef struct fu_unwound_frame {
    uint64_t key;        /* avma (user) or ip (kernel) */
    uint32_t mapping;    /* index into maps, FU_UNWOUND_MAPPING_NONE or FU_UNWOUND_MAPPING_KERNEL */
    bool negative;       /* the printed address is below 0 (a return address at a mapping's start) */
    bool has_symbol;
    unsigned __int128 address; /* printed address, magnitude */
    const char *name;    /* UTF-8, into a symbol table (its name or demangled name); valid while has_symbol */
    uint32_t name_len;
    uint64_t offset;
    fu_srcline_chain chain; /* in its mapping's srclines (count 0: none) */
    uint32_t line_offset, line_len; /* the formatted line in `lines`, once rendered */
} fu_unwound_frame;

typedef struct fu_unwound {
    const fu_perf_sample *samples;
    size_t sample_count;
    const fu_text *comm_names;    /* by comm id */
    size_t comm_count;
    const fu_text *outcome_names; /* FU_UNWOUND_OUTCOME_CODES, by outcome code */
    const fu_perf_attr *attrs;    /* the recording's events, by a sample's attr_index (NULL: none) */
    size_t attr_count;
    fu_unwound_map *maps;         /* the caller's */
    size_t map_count;
    uint32_t *comm_ids;           /* per sample (FU_INTERN_NONE: none) */
    uint8_t *outcomes;            /* per sample */
    uint32_t *bounds;    /* per sample: kernel frames from bounds[2i], user frames from bounds[2i+1] to bounds[2i+2] */
    uint32_t *frame_ids; /* into frames */
    fu_unwound_frame *frames;
    size_t frame_count, frame_cap;
    const fu_symbol_table *kernel_symbols;
    /* set by the caller before fu_unwound_build: FU_UNWOUND_INLINE | FU_UNWOUND_SRCLINE (0: neither),
     * and the loader of a mapping's source lines (fu_unwound_srcline_load_fn) */
    unsigned srcline_fields;
    fu_unwound_srcline_fn srcline_load;
    fu_buffer lines;
    bool lines_ready;
} fu_unwound;

/* One address space: the index in the maps of each of its modules, in the walker's order. */
typedef struct fu_unwound_space {
    const uint32_t *maps; /* may be unaligned */
    uint32_t count;
} fu_unwound_space;

/* unwind_samples' columns (perf_walk.h). */
typedef struct fu_unwound_columns {
    const uint8_t *outcomes;
    const uint32_t *starts; /* sample_count + 1 */
    const uint64_t *ips;
    const uint32_t *modules;
    const uint8_t *kinds;
    size_t frame_count;
} fu_unwound_columns;

/* The symbols of maps[mapping], asked once when a frame first needs them: NULL for none, or NULL
 * with *failed set to stop the build (the loader's error is its own). */
typedef const fu_symbol_table *(*fu_unwound_load_fn)(void *context, uint32_t mapping, bool *failed);

/* Takes u's samples, names and maps (set by the caller, the rest zeroed) and resolves every frame:
 * each sample's kernel frames (its callchain's kernel entries, or a kernel IP) then its user frames
 * from `columns`. Fails with FU_ERR_INVALID (the columns, ids or spaces do not fit together; or
 * the loader failed: `failed`), or FU_ERR_NOMEM. */
fu_status fu_unwound_build(fu_unwound *u, const uint32_t *comm_ids, const uint32_t *space_ids,
                           const fu_unwound_space *spaces, size_t space_count, const fu_unwound_columns *columns,
                           fu_unwound_load_fn load, void *context, bool *failed, fu_error *err);
/* Whether fu_unwound_build gives the sample kernel frames: a kernel address in its callchain (not
 * a PERF_CONTEXT_* marker) or, without a callchain, as its IP; known before any walk. */
bool fu_perf_sample_kernel_frames(const fu_perf_sample *sample);
/* The kernel frames' addresses (into `out`, room for the count; NULL: only the count). */
size_t fu_unwound_kernel_addresses(const fu_unwound *u, uint64_t *out);
/* Names the kernel frames from `table` (NULL: none). */
void fu_unwound_set_kernel_symbols(fu_unwound *u, const fu_symbol_table *table);

/* Where the outputs go: false stops the output (the sink's error is its own). */
typedef bool (*fu_sink_fn)(void *context, const uint8_t *data, size_t len);
/* Hands `out` to the sink when it holds FU_UNWOUND_CHUNK bytes (or any, with force: at the end),
 * emptying it; the sink's answer. */
bool fu_sink_flush(fu_buffer *out, fu_sink_fn sink, void *context, bool force);
/* The end of an output made in `out`: what it still holds handed to the sink unless making it ran
 * out of memory (nomem) or the sink already failed (sunk false), then `out` freed. FU_ERR_NOMEM
 * ("out of memory writing <count> <what>"), or FU_ERR_INVALID when the sink failed. */
fu_status fu_sink_finish(fu_buffer *out, fu_sink_fn sink, void *context, bool nomem, bool sunk, size_t count,
                         const char *what, fu_error *err);

/* The room fu_perf_script_put_head needs beyond the comm's bytes. */
#define FU_PERF_SCRIPT_HEAD_MAX 48
/* perf script's start of a sample: "comm tid seconds.microseconds" with the tid right-aligned in 5
 * columns, the seconds in 5 (builtin-script.c's "%5d %5lu.%06lu"); `out` has room reserved. */
void fu_perf_script_put_head(fu_buffer *out, const char *comm, size_t comm_len, uint32_t tid, uint64_t time);

/* perf script's text of every sample, in chunks of about FU_UNWOUND_CHUNK. FU_ERR_NOMEM, or
 * FU_ERR_INVALID when the sink failed. */
fu_status fu_unwound_render(fu_unwound *u, fu_sink_fn sink, void *context, fu_error *err);
/* "comm;[outcome;]root;...;leaf count" lines, most frequent first (ties in order of first
 * appearance; by_count false: all in order of first appearance). A stack that did not reach its end
 * is rooted at "[outcome]" so that it is never drawn as a complete one; a sample without user frames
 * has no such root. Errors as fu_unwound_render. */
fu_status fu_unwound_folded(const fu_unwound *u, bool by_count, fu_sink_fn sink, void *context, fu_error *err);

/* The folded stacks of several batches (a stream's windows) counted together: fu_folded_add each
 * batch's samples (zeroed before the first), then fu_folded_write them once, as fu_unwound_folded
 * writes one batch's (the order of first appearance is across the batches). */
typedef struct fu_folded {
    fu_buffer pool, line, stacks; /* the stacks' text, the one being made, their records */
    fu_intern_set index;
} fu_folded;
fu_status fu_folded_add(fu_folded *f, const fu_unwound *u, fu_error *err);
fu_status fu_folded_write(fu_folded *f, bool by_count, fu_sink_fn sink, void *context, fu_error *err);
void fu_folded_free(fu_folded *f);

/* Samples with user frames, user frames, samples per outcome code and per user depth (by_depth:
 * *deepest + 1 counts, malloc'd). False if out of memory. */
bool fu_unwound_statistics(const fu_unwound *u, uint64_t *unwound, uint64_t *frames,
                           uint64_t by_outcome[FU_UNWOUND_OUTCOME_CODES], uint64_t **by_depth, uint32_t *deepest);

/* The dso a frame prints: [kernel.kallsyms], [unknown] or its mapping's path. */
void fu_unwound_frame_dso(const fu_unwound *u, const fu_unwound_frame *f, const char **dso, size_t *len);
/* Appends the frame's source line as perf report's srcline key shows it: "file:line" of the line
 * table's row (the file's basename), "??:0" when not known; a kernel frame's "symbol+offset" (the
 * offset in decimal, as perf's get_srcline falls back), "[kernel.kallsyms][address]" without a
 * symbol. False if out of memory. */
bool fu_unwound_frame_srcline(const fu_unwound *u, const fu_unwound_frame *f, fu_buffer *out);
/* Sample s's comm ("" for none). */
void fu_unwound_comm(const fu_unwound *u, size_t s, const char **comm, size_t *len);
/* Frees what fu_unwound_build allocated (not the caller's maps and names). */
void fu_unwound_free(fu_unwound *u);

#endif
