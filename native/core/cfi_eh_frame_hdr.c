/* eh_frame_hdr: the binary search table that the linker writes beside .eh_frame
 * (LSB 5.0 §10.6.2, "The .eh_frame_hdr section").
 *
 *   u8 version (1) | u8 eh_frame_ptr_enc | u8 fde_count_enc | u8 table_enc
 *   encoded eh_frame_ptr | encoded fde_count | fde_count x (initial_location, fde_address)
 *
 * Table values are relative to the start of .eh_frame_hdr (DW_EH_PE_datarel). The table is
 * usable for binary search only with a fixed-size encoding and sorted entries that point into
 * .eh_frame; anything else is reported, and callers fall back to the index they build from
 * .eh_frame itself.
 */
#include <stdlib.h>

#include "cfi.h"

fu_status fu_hdr_parse(fu_hdr *hdr, const uint8_t *data, uint64_t size, uint64_t address,
                       uint64_t eh_frame_address, uint64_t eh_frame_size, fu_error *err)
{
    memset(hdr, 0, sizeof *hdr);
    fu_cursor c = fu_cursor_make(data, data, data + size);
    hdr->version = fu_read_u8(&c);
    hdr->eh_frame_ptr_encoding = fu_read_u8(&c);
    hdr->fde_count_encoding = fu_read_u8(&c);
    hdr->table_encoding = fu_read_u8(&c);
    if (c.failed)
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: truncated header (%llu bytes)", (unsigned long long)size);
    if (hdr->version != 1)
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: unsupported version %u", hdr->version);
    fu_section view = {.kind = FU_SECTION_EH_FRAME, .data = data, .size = size, .address = address,
                       .data_base = address, .address_size = 8};
    bool unresolved;
    if (!fu_read_encoded(&c, hdr->eh_frame_ptr_encoding, &view, 0, &hdr->eh_frame_ptr, &unresolved))
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: bad eh_frame_ptr (encoding 0x%02x)",
                       hdr->eh_frame_ptr_encoding);
    if (hdr->fde_count_encoding == FU_PE_omit || hdr->table_encoding == FU_PE_omit)
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: no search table (count encoding 0x%02x, table encoding 0x%02x)",
                       hdr->fde_count_encoding, hdr->table_encoding);
    uint64_t count;
    if (!fu_read_encoded(&c, hdr->fde_count_encoding, &view, 0, &count, &unresolved))
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: bad fde_count (encoding 0x%02x)", hdr->fde_count_encoding);
    if (hdr->table_encoding != (FU_PE_datarel | FU_PE_sdata4))
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: table encoding 0x%02x is not datarel|sdata4", hdr->table_encoding);
    /* each entry is 8 bytes: the count is bounded by what is left of the section */
    if (count > fu_cursor_left(&c) / 8)
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: %llu entries do not fit in the %zu bytes left",
                       (unsigned long long)count, fu_cursor_left(&c));
    if (eh_frame_address && hdr->eh_frame_ptr != eh_frame_address)
        return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: eh_frame_ptr 0x%llx is not .eh_frame's address 0x%llx",
                       (unsigned long long)hdr->eh_frame_ptr, (unsigned long long)eh_frame_address);
    hdr->count = count;
    hdr->table = c.pos;
    hdr->address = address;
    hdr->table_offset = fu_cursor_offset(&c);
    /* validate: sorted by initial location, FDE addresses inside .eh_frame */
    int64_t previous = INT64_MIN;
    for (uint64_t i = 0; i < count; i++) {
        fu_cursor e = fu_cursor_make(hdr->table, hdr->table + i * 8, hdr->table + count * 8);
        int64_t location = fu_read_sint(&e, 4), fde = fu_read_sint(&e, 4);
        if (location < previous)
            return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: table not sorted at entry %llu", (unsigned long long)i);
        previous = location;
        uint64_t fde_address = address + (uint64_t)fde;
        if (eh_frame_address && (fde_address < eh_frame_address || fde_address - eh_frame_address >= eh_frame_size))
            return fu_fail(err, FU_ERR_CFI, ".eh_frame_hdr: entry %llu points at 0x%llx, outside .eh_frame",
                           (unsigned long long)i, (unsigned long long)fde_address);
    }
    return FU_OK;
}

void fu_hdr_entry(const fu_hdr *hdr, uint64_t i, uint64_t *initial_location, uint64_t *fde_address)
{
    fu_cursor e = fu_cursor_make(hdr->table, hdr->table + i * 8, hdr->table + hdr->count * 8);
    *initial_location = hdr->address + (uint64_t)fu_read_sint(&e, 4);
    *fde_address = hdr->address + (uint64_t)fu_read_sint(&e, 4);
}

int64_t fu_hdr_find(const fu_hdr *hdr, uint64_t pc)
{
    uint64_t lo = 0, hi = hdr->count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2, location, fde;
        fu_hdr_entry(hdr, mid, &location, &fde);
        if (location <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? -1 : (int64_t)(lo - 1);
}
