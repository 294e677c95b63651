/* One address space of a process's mappings, and its threads walked, named and rendered: see
 * stacks.h. */
#define _GNU_SOURCE
#include "stacks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int by_start(const void *a, const void *b)
{
    uint64_t x = ((const fu_cli_mapping *)a)->start, y = ((const fu_cli_mapping *)b)->start;
    return x < y ? -1 : x > y;
}

bool fu_cli_space_init(fu_cli_space *space, fu_cli_mapping *mappings, size_t count, unsigned synth)
{
    memset(space, 0, sizeof *space);
    space->mappings = mappings;
    space->count = count;
    qsort(mappings, count, sizeof *mappings, by_start);
    size_t max = FU_WALK_MAX_FRAMES;
    space->modules = calloc(count ? count : 1, sizeof *space->modules);
    uint8_t *block = malloc(max * (8 + 4 + 1 + 1));
    space->frame_registers = malloc(max * sizeof *space->frame_registers);
    space->named = malloc(max * sizeof *space->named);
    if (!space->modules || !block || !space->frame_registers || !space->named) {
        free(block);
        return false;
    }
    space->frames = (fu_frames){(uint64_t *)(void *)block, (uint32_t *)(void *)(block + 8 * max), block + 12 * max,
                                block + 13 * max};
    for (size_t i = 0; i < count; i++) {
        const fu_cli_mapping *m = &mappings[i];
        if (m->image && !fu_cli_image_tables(m->image, synth))
            return false;
        if (m->image)
            fu_cli_image_module(m->image, m->start, m->end, m->bias, (uint32_t)i, &space->modules[i]);
        else
            space->modules[i] = (fu_module){.start = m->start, .end = m->end, .id = (uint32_t)i};
    }
    fu_error err = {0};
    return fu_address_space_init(&space->space, space->modules, count, FU_BACKEND_AUTO, &err) == FU_OK;
}

void fu_cli_space_free(fu_cli_space *space)
{
    free(space->modules);
    free(space->frames.ip);
    free(space->frame_registers);
    free(space->named);
    memset(space, 0, sizeof *space);
}

bool fu_cli_render_walk(fu_cli_space *space, const fu_regs *regs, const fu_state_regs *state,
                        const fu_reader *reader, int64_t tid, fu_snapshot_text name, bool json, bool with_registers,
                        fu_buffer *out, bool *complete)
{
    fu_regs walked = *regs;
    fu_state_regs callers;
    fu_state_regs_of_caller(state, &callers);
    fu_walk_result r;
    fu_walk(&space->space, &walked, reader, NULL, &space->frames, FU_WALK_MAX_FRAMES, &r);
    if (with_registers)
        fu_walk_frame_registers(&space->space, regs, reader, &space->frames, r.frame_count, space->frame_registers);
    for (size_t i = 0; i < r.frame_count; i++) {
        uint64_t address = space->frames.ip[i];
        uint32_t module = space->frames.module[i];
        fu_snapshot_frame *f = &space->named[i];
        *f = (fu_snapshot_frame){.address = address,
                                 .registers = with_registers ? &space->frame_registers[i] : NULL,
                                 .state = i ? &callers : state,
                                 .derived = fu_frame_derived_name(space->frames.flags[i])};
        /* fu_frames' module is the space's index, which init sorted as the ids */
        const fu_cli_mapping *m = module < space->count ? &space->mappings[space->space.modules[module].id] : NULL;
        if (!m)
            continue;
        f->module = (fu_snapshot_text){m->path, m->path_len};
        const char *symbol;
        size_t len;
        uint64_t lookup = fu_frame_name_address(address, space->frames.kind[i], space->frames.flags[i]);
        if (m->image && fu_cli_image_symbol(m->image, m->bias, address, lookup, &symbol, &len, &f->offset))
            f->symbol = (fu_snapshot_text){symbol, len};
        if (m->image && m->image->symbols_missing)
            return false;
    }
    *complete = r.outcome == FU_WALK_END;
    fu_snapshot_thread thread = {
        .tid = tid,
        .name = name,
        .outcome = fu_walk_outcome_name(r.outcome),
        .fault_address = r.fault_address,
        .frames = space->named,
        .frame_count = r.frame_count,
    };
    return json ? fu_snapshot_thread_json(&thread, out) : fu_snapshot_thread_text(&thread, out);
}

bool fu_cli_space_unserved(const fu_cli_space *space)
{
    for (size_t i = 0; i < space->count; i++)
        if (space->mappings[i].image && space->mappings[i].image->symbols_missing)
            return true;
    return false;
}

bool fu_cli_write_all(int fd, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= (size_t)n;
    }
    return true;
}
