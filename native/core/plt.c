/* plt: "symbol@plt" names for x86-64 PLT stubs, from the GOT slot each one jumps through and the
 * relocation of that slot (see plt.h for the layouts). Pure C, no Python: the ASAN driver links it. */
#include "plt.h"

#include <stdlib.h>
#include <string.h>

#include "cursor.h"

typedef struct slot {
    uint64_t offset; /* r_offset: the GOT slot's address */
    uint32_t symbol;
    uint32_t type;
    uint64_t addend;
} slot;

static int by_offset(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

uint32_t fu_plt_entry_size(uint64_t sh_entsize, uint64_t sh_addralign, bool is_plt_got)
{
    if (sh_entsize == FU_PLT_ENTRY_SMALL || sh_entsize == FU_PLT_ENTRY_LARGE)
        return (uint32_t)sh_entsize;
    return is_plt_got && sh_addralign == FU_PLT_ENTRY_SMALL ? FU_PLT_ENTRY_SMALL : FU_PLT_ENTRY_LARGE;
}

static const fu_plt_prefix prefixes[] = FU_PLT_PREFIXES;

/* The offset of the jump's displacement in the entry at `entry` (`size` bytes), or 0 if none of
 * the prefixes matches. */
static size_t jump_displacement(const uint8_t *entry, size_t size)
{
    for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++) {
        const fu_plt_prefix *prefix = &prefixes[p];
        if (size < (size_t)prefix->length + FU_PLT_JMP_LENGTH)
            continue;
        bool same = true;
        for (size_t i = 0; same && i < prefix->length; i++)
            same = (entry[i] & prefix->mask[i]) == (prefix->bytes[i] & prefix->mask[i]);
        if (same && entry[prefix->length] == FU_PLT_JMP_OPCODE_0 && entry[prefix->length + 1] == FU_PLT_JMP_OPCODE_1)
            return (size_t)prefix->length + 2;
    }
    return 0;
}

/* The slot relocations of every relocation section, sorted by address. */
static slot *read_slots(const fu_plt_input *in, size_t *count)
{
    size_t total = 0;
    for (unsigned r = 0; r < in->relocation_count && r < FU_PLT_MAX_RELOCATION_SECTIONS; r++)
        total += in->relocation_sizes[r] / FU_ELF64_RELA_SIZE;
    slot *slots = malloc((total ? total : 1) * sizeof *slots);
    if (!slots)
        return NULL;
    size_t n = 0;
    for (unsigned r = 0; r < in->relocation_count && r < FU_PLT_MAX_RELOCATION_SECTIONS; r++) {
        const uint8_t *base = in->relocations[r];
        size_t size = in->relocation_sizes[r];
        /* one Elf64_Rela per iteration: the section's size bounds the loop */
        for (size_t off = 0; size - off >= FU_ELF64_RELA_SIZE; off += FU_ELF64_RELA_SIZE) {
            fu_cursor c = fu_cursor_make(base, base + off, base + off + FU_ELF64_RELA_SIZE);
            uint64_t offset = fu_read_uint(&c, 8), info = fu_read_uint(&c, 8), addend = fu_read_uint(&c, 8);
            uint32_t type = (uint32_t)info;
            if (type == FU_R_X86_64_JUMP_SLOT || type == FU_R_X86_64_GLOB_DAT || type == FU_R_X86_64_IRELATIVE)
                slots[n++] = (slot){offset, (uint32_t)(info >> 32), type, addend};
        }
    }
    qsort(slots, n, sizeof *slots, by_offset);
    *count = n;
    return slots;
}

static const slot *find_slot(const slot *slots, size_t n, uint64_t address)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (slots[mid].offset < address)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && slots[lo].offset == address ? &slots[lo] : NULL;
}

/* The name of .dynsym entry `index` (in .dynstr, NUL-terminated there); false if outside either. */
static bool symbol_name(const fu_plt_input *in, uint32_t index, const char **name, size_t *len)
{
    if (index >= in->dynsym_size / FU_ELF64_SYM_SIZE)
        return false;
    const uint8_t *entry = in->dynsym + (size_t)index * FU_ELF64_SYM_SIZE;
    fu_cursor c = fu_cursor_make(in->dynsym, entry, entry + 4);
    uint64_t offset = fu_read_uint(&c, 4);
    if (offset == 0 || offset >= in->dynstr_size)
        return false;
    const char *nul = memchr(in->dynstr + offset, 0, in->dynstr_size - offset);
    if (!nul || nul == in->dynstr + offset)
        return false;
    *name = in->dynstr + offset;
    *len = (size_t)(nul - *name);
    return true;
}

fu_plt_status fu_plt_synthesize(const fu_plt_input *in, fu_plt_emit emit, void *context, fu_plt_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    size_t slot_count = 0;
    slot *slots = read_slots(in, &slot_count);
    if (!slots)
        return FU_PLT_NO_MEMORY;
    fu_plt_status status = FU_PLT_OK;
    for (unsigned s = 0; s < in->section_count && s < FU_PLT_MAX_SECTIONS && status == FU_PLT_OK; s++) {
        const fu_plt_section *section = &in->sections[s];
        size_t step = section->entry_size == FU_PLT_ENTRY_SMALL ? FU_PLT_ENTRY_SMALL : FU_PLT_ENTRY_LARGE;
        size_t entries = section->size / step;
        if (entries > FU_PLT_MAX_ENTRIES)
            entries = FU_PLT_MAX_ENTRIES;
        for (size_t e = 0; e < entries; e++) {
            const uint8_t *entry = section->data + e * step;
            uint64_t address = section->address + e * step;
            size_t at = jump_displacement(entry, step);
            if (!at) {
                counts->unmatched++;
                continue;
            }
            fu_cursor c = fu_cursor_make(entry, entry + at, entry + at + 4);
            int32_t displacement = (int32_t)(uint32_t)fu_read_uint(&c, 4);
            /* rip-relative: from the end of the jump; wraps as the CPU's address arithmetic does */
            uint64_t target = address + at + 4 + (uint64_t)(int64_t)displacement;
            const slot *found = find_slot(slots, slot_count, target);
            if (!found) {
                counts->no_relocation++;
                continue;
            }
            fu_plt_stub stub = {.address = address, .size = (uint32_t)step, .addend = found->addend};
            if (found->type == FU_R_X86_64_IRELATIVE || found->symbol == 0) {
                if (found->type != FU_R_X86_64_IRELATIVE) {
                    counts->bad_symbol++;
                    continue;
                }
            } else if (!symbol_name(in, found->symbol, &stub.name, &stub.name_len)) {
                counts->bad_symbol++;
                continue;
            }
            counts->named++;
            if (!emit(context, &stub)) {
                status = FU_PLT_STOPPED;
                break;
            }
        }
    }
    free(slots);
    return status;
}
