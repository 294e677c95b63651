/* stacks: a process's mappings of module images as one address space, and one thread walked over
 * it, named and rendered (stacks.py unwind_thread + symbolize + the renderings, in C).
 */
#ifndef FASTUNWIND_CLI_STACKS_H
#define FASTUNWIND_CLI_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "address_space.h"
#include "buffer.h"
#include "memory.h"
#include "modules.h"
#include "snapshot.h"
#include "walk.h"

/* Most executable mappings of one address space (vm.max_map_count is 65530). */
#define FU_CLI_MAX_MAPPINGS 65536

/* An executable mapping: [start, end) of `image` (NULL: a file that has none) at `bias`, named
 * `path` (the bytes the process names it by). */
typedef struct fu_cli_mapping {
    uint64_t start, end, pgoff, bias;
    const char *path;
    size_t path_len;
    fu_cli_image *image;
} fu_cli_mapping;

typedef struct fu_cli_space {
    fu_cli_mapping *mappings; /* sorted by start (fu_cli_space_init) */
    size_t count;
    fu_module *modules;       /* one per mapping, its index the module's id */
    fu_address_space space;
    /* the walk's scratch, reused by every thread */
    fu_frames frames;
    fu_regs *frame_registers;
    fu_snapshot_frame *named;
} fu_cli_space;

/* Sort the mappings (taken), load the tables with `synth`'s rows (FU_COMPACT_SYNTH_*) of the
 * images they use (fu_cli_image_tables) and make the walker's address space of them (the auto
 * backend); false: out of memory, or a table is the Python path's. */
bool fu_cli_space_init(fu_cli_space *space, fu_cli_mapping *mappings, size_t count, unsigned synth);
void fu_cli_space_free(fu_cli_space *space);

/* Walk a thread from `regs` (frame 0's state registers `state`) through `reader`, name its frames
 * and append its rendering (text, or JSON with each frame's registers) to `out`; *complete: the
 * walk reached the outermost frame. False when out of memory or a module's symbol table is missing
 * from the cache (fu_cli_space_unserved then). */
bool fu_cli_render_walk(fu_cli_space *space, const fu_regs *regs, const fu_state_regs *state,
                        const fu_reader *reader, int64_t tid, fu_snapshot_text name, bool json, bool with_registers,
                        fu_buffer *out, bool *complete);

/* Whether a module's symbols were asked for and are not in the cache. */
bool fu_cli_space_unserved(const fu_cli_space *space);

/* Write all of `data` to `fd`; false (errno set) if it could not. */
bool fu_cli_write_all(int fd, const void *data, size_t size);

#endif
