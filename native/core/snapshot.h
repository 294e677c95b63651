/* snapshot: the text and JSON of every thread's stack of a process (`fastunwind backtrace -p`,
 * `fastunwind core`): the one rendering the launcher (native/cli) and the Python path
 * (stacks.render_text / render_json, through _core.render_snapshot) both print.
 *
 *   text:  PID n
 *          TID n (name):
 *          #0  0x00007f12a4c2e1b9 in qsort_r+0x1b9 (/usr/lib/x86_64-linux-gnu/libc.so.6)
 *              rax 0x...  rbx <unknown>  ...          (--registers: four a line, the walker's
 *                                                       then eflags ... gs_base: x86_64.h)
 *          (stack incomplete: OUTCOME[ at 0xFAULT][: reason])
 *   JSON:  {"pid": n, "threads": [{"tid": n, "name": s, "outcome": s, "frames": [{"address": n,
 *          "symbol": s|null, "offset": n, "module": s|null, "registers": {name: n|null}}]}]}
 *          as Python's json.dump writes it (", " and ": ", ASCII: \uXXXX escapes).
 *
 * Strings are bytes as the system gave them: a module path as /proc/PID/maps or NT_FILE has it
 * (text: the bytes; JSON: decoded as os.fsdecode decodes, undecodable bytes as \udcXX escapes), a
 * thread name already escaped (`\xNN` for bytes that are not UTF-8: fu_snapshot_escape_name), a
 * symbol UTF-8.
 */
#ifndef FASTUNWIND_SNAPSHOT_H
#define FASTUNWIND_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "x86_64.h" /* fu_regs, FU_WALK_REGISTERS, fu_state_regs */

/* Registers a line of the text rendering's register block (stacks.py REGISTERS_PER_LINE). */
#define FU_SNAPSHOT_REGISTERS_PER_LINE 4

typedef struct fu_snapshot_text {
    const char *data; /* NULL: none (JSON null) */
    size_t len;
} fu_snapshot_text;

typedef struct fu_snapshot_frame {
    uint64_t address;
    fu_snapshot_text symbol;
    uint64_t offset;
    fu_snapshot_text module;
    const fu_regs *registers; /* NULL: not asked for (no register lines, no "registers" key) */
    const fu_state_regs *state; /* with `registers`: the frame's eflags, segments and bases */
    /* "synthesized" or "corrected": the step to this frame used rows derived from the machine code
     * (walk.h FU_FRAME_DERIVED; text: a " [synthesized]" mark, JSON: a "derived" key); NULL: CFI */
    const char *derived;
} fu_snapshot_frame;

typedef struct fu_snapshot_thread {
    int64_t tid;
    fu_snapshot_text name;
    const char *outcome;     /* "end" only for a complete stack */
    uint64_t fault_address;  /* 0: none */
    fu_snapshot_text reason; /* why a thread was not walked, or empty */
    const fu_snapshot_frame *frames;
    size_t frame_count;
} fu_snapshot_thread;

/* Append one thread's text lines (its header, frames, registers, the incomplete line) to `out`. */
bool fu_snapshot_thread_text(const fu_snapshot_thread *thread, fu_buffer *out);
/* Append one thread's JSON object. */
bool fu_snapshot_thread_json(const fu_snapshot_thread *thread, fu_buffer *out);
/* The document's head and tail: "PID n\n" (text) or `{"pid": n, "threads": [` (JSON) before the
 * threads, nothing or "]}\n" after; JSON threads are separated by fu_snapshot_json_separator. */
bool fu_snapshot_head(int64_t pid, bool json, fu_buffer *out);
bool fu_snapshot_tail(bool json, fu_buffer *out);
bool fu_snapshot_json_separator(fu_buffer *out);

/* A thread name (/proc comm, any bytes) as the Python path shows it: bytes that are not UTF-8 as
 * `\xNN` (Python's errors="backslashreplace"), without the trailing newlines; appended to `out`. */
bool fu_snapshot_escape_name(const uint8_t *name, size_t len, fu_buffer *out);

#endif
