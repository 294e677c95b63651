/* address_space: see address_space.h. */
#include "address_space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fu_backend_name(fu_backend backend)
{
    switch (backend) {
    case FU_BACKEND_AUTO: return "auto";
    case FU_BACKEND_DWARF: return "dwarf";
    case FU_BACKEND_TABLE: return "table";
    case FU_BACKEND_COMPILED: return "compiled";
    case FU_BACKEND_TABLE_ONLY: return "table-only";
    case FU_BACKEND_COMPILED_ONLY: return "compiled-only";
    default: return "?";
    }
}

fu_backend fu_backend_from_name(const char *name)
{
    for (unsigned b = 0; b < FU_BACKEND_COUNT; b++)
        if (strcmp(name, fu_backend_name((fu_backend)b)) == 0)
            return (fu_backend)b;
    return FU_BACKEND_COUNT;
}

void fu_backend_names(char *out, size_t size)
{
    if (!size)
        return;
    out[0] = '\0';
    for (unsigned b = 0; b < FU_BACKEND_COUNT; b++) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s", b ? ", " : "", fu_backend_name((fu_backend)b));
    }
}

static int compare_modules(const void *a, const void *b)
{
    const fu_module *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

fu_status fu_address_space_init(fu_address_space *space, fu_module *modules, size_t count, uint32_t backend,
                                fu_error *err)
{
    if (count)
        qsort(modules, count, sizeof *modules, compare_modules);
    for (size_t i = 1; i < count; i++)
        if (modules[i].start < modules[i - 1].end)
            return fu_fail(err, FU_ERR_INVALID, "modules %u and %u overlap at 0x%llx", modules[i - 1].id,
                           modules[i].id, (unsigned long long)modules[i].start);
    for (size_t i = 0; i < count; i++) {
        fu_module *m = &modules[i];
        m->segments_low = UINT64_MAX;
        m->segments_high = 0;
        for (size_t s = 0; s < m->segment_count; s++) {
            const fu_image_segment *seg = &m->segments[s];
            uint64_t end = seg->size > UINT64_MAX - seg->vaddr ? UINT64_MAX : seg->vaddr + seg->size;
            m->segments_low = seg->vaddr < m->segments_low ? seg->vaddr : m->segments_low;
            m->segments_high = end > m->segments_high ? end : m->segments_high;
        }
    }
    space->modules = modules;
    space->count = count;
    space->backend = backend;
    return FU_OK;
}

bool fu_address_space_read_image(const fu_address_space *space, uint64_t avma, unsigned size, uint64_t *out)
{
    /* Any module's read-only segments may hold the address (.rodata is not in the executable
     * mapping). Most reads that come here hold none: a walk's reads just past its stack dump, which
     * visited every segment of every module (a clang recording's ~20 modules: ~930 instructions a
     * read, a tenth of its run) before each module's span was checked first. */
    for (size_t m = 0; m < space->count; m++) {
        const fu_module *mod = &space->modules[m];
        uint64_t svma = avma - mod->bias;
        if (svma < mod->segments_low || svma >= mod->segments_high)
            continue;
        for (size_t s = 0; s < mod->segment_count; s++) {
            const fu_image_segment *seg = &mod->segments[s];
            if (svma >= seg->vaddr && svma - seg->vaddr < seg->size && size <= seg->size - (svma - seg->vaddr)) {
                fu_cursor c = fu_cursor_make(seg->data, seg->data + (svma - seg->vaddr), seg->data + seg->size);
                *out = fu_read_uint(&c, size);
                return !c.failed;
            }
        }
    }
    return false;
}

void fu_module_set_entry(fu_module *m, uint64_t entry)
{
    m->entry_code_start = entry;
    m->entry_code_size = 0;
    if (entry == 0)
        return;
    uint64_t next;
    /* the compact table, built from the whole DWARF tables, gives their answer (its derived rows do
     * not count): the module may have been given only the DWARF tables' FDEs around its slow rows
     * (fu_cfi_table_evaluate_ranges) */
    if (m->compact) {
        if (fu_compact_covers(m->compact, entry, FU_ENTRY_CODE_MAX_BYTES, &next))
            return;
    } else {
        const fu_cfi_table *const tables[2] = {m->eh_frame, m->debug_frame};
        int64_t row, fde;
        if (fu_cfi_tables_find_row(tables, entry, &row, &fde) >= 0)
            return;
        next = fu_cfi_tables_next_fde_start(tables, entry);
    }
    m->entry_code_size = next - entry < FU_ENTRY_CODE_MAX_BYTES ? next - entry : FU_ENTRY_CODE_MAX_BYTES;
}
