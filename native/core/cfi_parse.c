/* cfi_parse: split .eh_frame / .debug_frame into CIE and FDE entries and decode their headers.
 *
 * Formats: DWARF 5 §6.4.1 (.debug_frame: CIE id 0xffffffff / 0xffffffffffffffff, CIE pointer is
 * a section offset) and LSB 5.0 §10.6 (.eh_frame: CIE id 0, CIE pointer is relative to the
 * pointer field itself, 'z' augmentation with DW_EH_PE-encoded pointers). Each entry is read
 * through a cursor cut to its declared length, so a bad entry cannot read into the next one.
 *
 * An entry that cannot be decoded is kept with its error (has_error, error_message) and the walk
 * goes on where the entry's length says it ends; a length that overruns the section ends the walk.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cfi.h"

void fu_entry_set_error(fu_entry *entry, const char *message)
{
    if (entry->has_error)
        return; /* keep the first error */
    entry->has_error = true;
    size_t n = strlen(message) + 1;
    entry->error_message = malloc(n);
    if (entry->error_message)
        memcpy(entry->error_message, message, n);
}

static const char *section_name(const fu_section *s)
{
    return s->kind == FU_SECTION_EH_FRAME ? ".eh_frame" : ".debug_frame";
}

static void entry_error(fu_cfi_table *t, fu_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void entry_error(fu_cfi_table *t, fu_entry *e, const char *fmt, ...)
{
    char detail[200], message[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(message, sizeof message, "%s at %s+0x%llx: %s",
             e->kind == FU_ENTRY_CIE ? "CIE" : "FDE", section_name(&t->section),
             (unsigned long long)e->offset, detail);
    if (!e->has_error)
        t->error_count++;
    fu_entry_set_error(e, message);
}

unsigned fu_encoded_size(uint8_t encoding, unsigned address_size)
{
    switch (encoding & 0x07) {
    case FU_PE_absptr: return address_size;
    case FU_PE_udata2: return 2;
    case FU_PE_udata4: return 4;
    case FU_PE_udata8: return 8;
    default: return 0; /* uleb128/sleb128: variable; 5-7 invalid */
    }
}

const fu_image_segment *fu_image_segment_holding(const fu_image_segment *segments, size_t count, uint64_t address,
                                                 uint64_t size)
{
    for (size_t i = 0; i < count; i++) {
        const fu_image_segment *seg = &segments[i];
        if (address >= seg->vaddr && address - seg->vaddr <= seg->size && size <= seg->size - (address - seg->vaddr))
            return seg;
    }
    return NULL;
}

/* Read the pointer stored at svma `address` in the file image (DW_EH_PE_indirect). */
static bool read_image_pointer(const fu_section *s, uint64_t address, uint64_t *out)
{
    const fu_image_segment *seg = fu_image_segment_holding(s->segments, s->segment_count, address, s->address_size);
    if (!seg)
        return false;
    fu_cursor c = fu_cursor_make(seg->data, seg->data + (address - seg->vaddr), seg->data + seg->size);
    *out = fu_read_uint(&c, s->address_size);
    return !c.failed;
}

bool fu_read_encoded(fu_cursor *c, uint8_t encoding, const fu_section *section, uint64_t func_base,
                     uint64_t *value, bool *unresolved)
{
    *unresolved = false;
    if (encoding == FU_PE_omit) {
        *value = 0;
        return true;
    }
    uint64_t field_svma = section->address + fu_cursor_offset(c);
    uint8_t application = encoding & 0x70;
    if (application == FU_PE_aligned) {
        /* The value starts at the next address_size boundary (of the svma). */
        uint64_t misalign = field_svma % section->address_size;
        if (misalign && !fu_cursor_skip(c, section->address_size - misalign))
            return false;
        field_svma = section->address + fu_cursor_offset(c);
    }
    uint64_t v;
    switch (encoding & 0x0f) {
    case FU_PE_absptr: v = fu_read_uint(c, section->address_size); break;
    case FU_PE_uleb128: v = fu_read_uleb(c); break;
    case FU_PE_udata2: v = fu_read_uint(c, 2); break;
    case FU_PE_udata4: v = fu_read_uint(c, 4); break;
    case FU_PE_udata8: v = fu_read_uint(c, 8); break;
    case FU_PE_sleb128: v = (uint64_t)fu_read_sleb(c); break;
    case FU_PE_sdata2: v = (uint64_t)fu_read_sint(c, 2); break;
    case FU_PE_sdata4: v = (uint64_t)fu_read_sint(c, 4); break;
    case FU_PE_sdata8: v = (uint64_t)fu_read_sint(c, 8); break;
    default: c->failed = true; return false;
    }
    if (c->failed)
        return false;
    if (application == 0x60 || application == 0x70) { /* not defined by the LSB */
        c->failed = true;
        return false;
    }
    if (v == 0 && application != 0) {
        /* A stored 0 is a null pointer, not "0 bytes from the base": no base, no indirection
         * (libgcc's read_encoded_value_with_base; GCC writes 0 for "no LSDA"). */
        *value = 0;
        return true;
    }
    switch (application) {
    case 0x00: case FU_PE_aligned: break;
    case FU_PE_pcrel: v += field_svma; break;
    case FU_PE_textrel: v += section->text_base; break;
    case FU_PE_datarel: v += section->data_base; break;
    case FU_PE_funcrel: v += func_base; break;
    default: c->failed = true; return false; /* 0x60, 0x70: not defined */
    }
    if (encoding & FU_PE_indirect) {
        uint64_t target;
        if (read_image_pointer(section, v, &target))
            v = target;
        else
            *unresolved = true;
    }
    *value = v;
    return true;
}

/* readelf's value for an encoded pointer: the stored value, plus the field's svma if pcrel. Only
 * used for display, so that `fastunwind table` prints what readelf prints. */
static uint64_t readelf_display_value(fu_cursor c, uint8_t encoding, const fu_section *s)
{
    unsigned size = fu_encoded_size(encoding, s->address_size);
    if (size == 0)
        size = s->address_size; /* readelf reads LEB encodings as absptr-sized */
    uint64_t field_svma = s->address + fu_cursor_offset(&c);
    uint64_t v = (encoding & FU_PE_signed) ? (uint64_t)fu_read_sint(&c, size) : fu_read_uint(&c, size);
    if ((encoding & 0x70) == FU_PE_pcrel)
        v += field_svma;
    return v;
}

bool fu_grow_array(void **array, uint32_t *cap, uint64_t need, size_t item)
{
    if (need <= *cap)
        return true;
    if (need > UINT32_MAX)
        return false;
    uint64_t n = *cap ? (uint64_t)*cap * 2 : 64;
    while (n < need)
        n *= 2;
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    void *p = realloc(*array, (size_t)n * item);
    if (!p)
        return false;
    *array = p;
    *cap = (uint32_t)n;
    return true;
}

static fu_entry *new_entry(fu_cfi_table *t)
{
    if (!fu_grow_array((void **)&t->entries, &t->entry_cap, (uint64_t)t->entry_count + 1, sizeof(fu_entry)))
        return NULL;
    fu_entry *e = &t->entries[t->entry_count++];
    memset(e, 0, sizeof *e);
    e->cie_entry = UINT32_MAX;
    e->cie_slot = UINT32_MAX;
    return e;
}

/* `text` with bytes outside printable ASCII written as \xNN, for messages (they cross into
 * Python as UTF-8). */
static const char *printable(const char *text, char *out, size_t size)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && n + 5 <= size; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '\\')
            out[n++] = (char)*p;
        else
            n += (size_t)snprintf(out + n, size - n, "\\x%02x", *p);
    }
    out[n] = 0;
    return out;
}

/* The 'z' augmentation data (LSB 5.0 §10.6.1.1): a ULEB length, then that many bytes, which
 * `aug` is cut to; `c` moves past them. */
static bool read_augmentation_data(fu_cfi_table *t, fu_entry *e, fu_cursor *c, fu_cursor *aug)
{
    e->aug_data_len = fu_read_uleb(c);
    e->aug_data_offset = fu_cursor_offset(c);
    if (c->failed || e->aug_data_len > fu_cursor_left(c)) {
        entry_error(t, e, "augmentation data length 0x%llx overruns the entry",
                    (unsigned long long)e->aug_data_len);
        return false;
    }
    *aug = fu_cursor_sub(c, e->aug_data_len);
    fu_cursor_skip(c, e->aug_data_len);
    return true;
}

/* Decode a CIE's fields after the CIE id (DWARF 5 §6.4.1 items 3-9; LSB 5.0 §10.6.1.1). */
static void parse_cie(fu_cfi_table *t, fu_entry *e, fu_cursor *c)
{
    if (!fu_grow_array((void **)&t->cies, &t->cie_cap, (uint64_t)t->cie_count + 1, sizeof(fu_cie_info))) {
        entry_error(t, e, "out of memory");
        return;
    }
    fu_cie_info *cie = &t->cies[t->cie_count++];
    memset(cie, 0, sizeof *cie);
    e->cie_slot = t->cie_count - 1;
    cie->lsda_encoding = FU_PE_omit;
    cie->personality_encoding = FU_PE_omit;
    cie->fde_encoding = FU_PE_absptr;
    cie->address_size = t->section.address_size;

    cie->version = fu_read_u8(c);
    if (c->failed) {
        entry_error(t, e, "truncated before the version");
        return;
    }
    if (cie->version != 1 && cie->version != 3 && cie->version != 4) {
        entry_error(t, e, "unsupported CIE version %u (expected 1, 3 or 4)", cie->version);
        return;
    }
    /* Augmentation string: NUL-terminated, bounded by FU_MAX_AUGMENTATION. */
    size_t n = 0;
    for (;;) {
        if (fu_cursor_left(c) == 0) {
            entry_error(t, e, "augmentation string has no terminating NUL");
            return;
        }
        uint8_t ch = fu_read_u8(c);
        if (ch == 0)
            break;
        if (n == FU_MAX_AUGMENTATION) {
            entry_error(t, e, "augmentation string longer than %d bytes", FU_MAX_AUGMENTATION);
            return;
        }
        cie->augmentation[n++] = (char)ch;
    }
    cie->augmentation[n] = 0;
    cie->augmentation_len = (uint8_t)n;
    if (strcmp(cie->augmentation, "eh") == 0)
        fu_cursor_skip(c, t->section.address_size); /* old GCC: the eh_ptr field */
    if (cie->version >= 4) {
        cie->address_size = fu_read_u8(c);
        cie->segment_size = fu_read_u8(c);
        if (!c->failed && (cie->address_size < 1 || cie->address_size > 8)) {
            entry_error(t, e, "invalid address size %u", cie->address_size);
            return;
        }
        if (!c->failed && cie->segment_size + cie->address_size > 8) {
            entry_error(t, e, "invalid segment selector size %u", cie->segment_size);
            return;
        }
    }
    cie->code_align = fu_read_uleb(c);
    cie->data_align = fu_read_sleb(c);
    cie->ra_column = cie->version == 1 ? fu_read_u8(c) : fu_read_uleb(c);
    if (c->failed) {
        entry_error(t, e, "truncated in the alignment factors or return address column");
        return;
    }
    if (cie->ra_column >= FU_MAX_COLUMNS) {
        entry_error(t, e, "return address column %llu exceeds the limit of %d columns",
                    (unsigned long long)cie->ra_column, FU_MAX_COLUMNS);
        return;
    }
    if (cie->augmentation[0] == 'z') {
        cie->has_z = true;
        fu_cursor aug;
        if (!read_augmentation_data(t, e, c, &aug))
            return;
        char quoted[4 * FU_MAX_AUGMENTATION + 1];
        for (const char *p = cie->augmentation + 1; *p; p++) {
            bool unresolved;
            switch (*p) {
            case 'L': cie->lsda_encoding = fu_read_u8(&aug); break;
            case 'R': cie->fde_encoding = fu_read_u8(&aug); break;
            case 'S': cie->signal_frame = true; break;
            case 'B': cie->has_b = true; break;
            case 'P':
                cie->personality_encoding = fu_read_u8(&aug);
                if (!fu_read_encoded(&aug, cie->personality_encoding, &t->section, 0,
                                     &cie->personality, &unresolved)) {
                    entry_error(t, e, "bad personality pointer (encoding 0x%02x)",
                                cie->personality_encoding);
                    return;
                }
                cie->personality_indirect_unresolved = unresolved;
                break;
            default:
                /* LSB: an unknown character ends what we can interpret; with 'z' the
                 * instructions are still found through the augmentation length. */
                goto done;
            }
            if (aug.failed) {
                entry_error(t, e, "augmentation data too short for \"%s\"", printable(cie->augmentation, quoted, sizeof quoted));
                return;
            }
        }
    done:;
    } else if (cie->augmentation[0] != 0 && strcmp(cie->augmentation, "eh") != 0) {
        /* Without 'z' the instructions' position is unknowable after an unknown augmentation. */
        char quoted[4 * FU_MAX_AUGMENTATION + 1];
        entry_error(t, e, "unknown augmentation \"%s\" without 'z'", printable(cie->augmentation, quoted, sizeof quoted));
        return;
    }
    e->insns_offset = fu_cursor_offset(c);
    e->header_ok = true;
}

static void parse_fde(fu_cfi_table *t, fu_entry *e, fu_cursor *c, const fu_cie_info *cie)
{
    fu_section view = t->section;
    view.address_size = cie->address_size;
    if (cie->segment_size)
        e->segment_selector = fu_read_uint(c, cie->segment_size);
    fu_cursor at_begin = *c;
    bool unresolved;
    uint8_t encoding = cie->fde_encoding;
    if (!fu_read_encoded(c, encoding, &view, 0, &e->pc_begin, &unresolved)) {
        entry_error(t, e, "truncated or invalid initial location (encoding 0x%02x)", encoding);
        return;
    }
    if (unresolved) {
        entry_error(t, e, "indirect initial location points outside the file's segments");
        return;
    }
    e->display_pc_begin = readelf_display_value(at_begin, encoding, &view);
    /* a null initial location marks a function the linker discarded: libgcc skips such FDEs */
    e->discarded = e->pc_begin == 0 && (encoding & 0x70) != 0;
    /* The address range uses the encoding's format but never its application (LSB 5.0 §10.6.1.2). */
    bool ignored;
    if (!fu_read_encoded(c, encoding & 0x0f, &view, 0, &e->pc_range, &ignored)) {
        entry_error(t, e, "truncated address range");
        return;
    }
    if (cie->has_z) {
        fu_cursor aug;
        if (!read_augmentation_data(t, e, c, &aug))
            return;
        if (cie->lsda_encoding != FU_PE_omit && e->aug_data_len > 0) {
            if (!fu_read_encoded(&aug, cie->lsda_encoding, &view, e->pc_begin, &e->lsda, &unresolved)) {
                entry_error(t, e, "bad LSDA pointer (encoding 0x%02x)", cie->lsda_encoding);
                return;
            }
            e->has_lsda = e->lsda != 0; /* a stored 0 means "no LSDA" */
        }
    }
    e->insns_offset = fu_cursor_offset(c);
    e->header_ok = true;
}

/* Find the CIE entry starting at section offset `target`, among the entries parsed so far or
 * ahead of `from` (a forward reference: readelf accepts it, so do we). */
static int64_t find_cie(fu_cfi_table *t, uint64_t target)
{
    /* entries are in offset order: binary search */
    uint32_t lo = 0, hi = t->entry_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->entries[mid].offset < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->entry_count && t->entries[lo].offset == target && t->entries[lo].kind == FU_ENTRY_CIE)
        return lo;
    return -1;
}

fu_status fu_cfi_table_parse(fu_cfi_table *t, const fu_section *section, fu_error *err)
{
    memset(t, 0, sizeof *t);
    t->section = *section;
    if (section->address_size != 4 && section->address_size != 8)
        return fu_fail(err, FU_ERR_CFI, "unsupported address size %u", section->address_size);
    const uint8_t *base = section->data;
    fu_cursor c = fu_cursor_make(base, base, base + section->size);
    bool is_eh = section->kind == FU_SECTION_EH_FRAME;

    /* Pass 1: entry boundaries, CIEs. Every iteration consumes at least 4 bytes, so the walk is
     * bounded by the section size. */
    while (fu_cursor_left(&c) > 0) {
        fu_entry *e = new_entry(t);
        if (!e)
            return fu_fail(err, FU_ERR_NOMEM, "out of memory for CFI entries");
        e->offset = fu_cursor_offset(&c);
        uint64_t length = fu_read_uint(&c, 4);
        if (c.failed) {
            e->kind = FU_ENTRY_FDE;
            e->end = section->size;
            entry_error(t, e, "truncated length field (%zu bytes left)",
                        (size_t)(section->size - e->offset));
            break;
        }
        e->offset_size = 4;
        if (length == 0) {
            /* Zero terminator (LSB 5.0 §10.6.1). readelf skips zero bytes that follow. */
            e->kind = FU_ENTRY_TERMINATOR;
            while (c.pos < c.end && *c.pos == 0)
                c.pos++;
            e->end = fu_cursor_offset(&c);
            continue;
        }
        if (length == 0xffffffff) {
            length = fu_read_uint(&c, 8);
            e->offset_size = 8;
            if (c.failed) {
                e->kind = FU_ENTRY_FDE;
                e->end = section->size;
                entry_error(t, e, "truncated 64-bit length field (%zu bytes left)",
                            (size_t)(section->size - e->offset - 4));
                break;
            }
        }
        e->length = length;
        e->kind = FU_ENTRY_FDE;
        if (c.failed || length > fu_cursor_left(&c)) {
            e->end = section->size;
            entry_error(t, e, "length 0x%llx overruns the section (0x%zx bytes left)",
                        (unsigned long long)length, fu_cursor_left(&c));
            break;
        }
        fu_cursor body = fu_cursor_sub(&c, length);
        fu_cursor_skip(&c, length);
        e->end = fu_cursor_offset(&c);
        e->id = fu_read_uint(&body, e->offset_size);
        if (body.failed) {
            entry_error(t, e, "entry too short for its CIE id / pointer");
            continue;
        }
        bool is_cie = is_eh ? e->id == 0
                            : (e->offset_size == 4 ? e->id == 0xffffffffu : e->id == UINT64_MAX);
        if (is_cie) {
            e->kind = FU_ENTRY_CIE;
            parse_cie(t, e, &body);
        } else {
        }
    }

    /* t->cies no longer moves: point CIE entries at their info. */
    for (uint32_t i = 0; i < t->entry_count; i++) {
        fu_entry *e = &t->entries[i];
        if (e->kind == FU_ENTRY_CIE && e->cie_slot != UINT32_MAX) {
            e->cie = &t->cies[e->cie_slot];
            e->cie_entry = i;
        }
    }

    /* Pass 2: FDEs (they need their CIE's encodings). */
    for (uint32_t i = 0; i < t->entry_count; i++) {
        fu_entry *e = &t->entries[i];
        if (e->kind != FU_ENTRY_FDE || e->has_error)
            continue;
        uint64_t id_field = e->offset + (e->offset_size == 8 ? 12 : 4);
        uint64_t target;
        if (is_eh) {
            /* The CIE pointer is the distance back from the pointer field to the CIE. */
            uint64_t sign = (uint64_t)1 << (e->offset_size * 8 - 1);
            uint64_t delta = (e->id ^ sign) - sign;
            target = id_field - delta;
        } else {
            target = e->id;
        }
        int64_t cie_entry = target < section->size ? find_cie(t, target) : -1;
        if (cie_entry < 0) {
            entry_error(t, e, "CIE pointer 0x%llx does not lead to a CIE (target offset 0x%llx)",
                        (unsigned long long)e->id, (unsigned long long)target);
            continue;
        }
        fu_entry *ce = &t->entries[cie_entry];
        if (ce->has_error) {
            entry_error(t, e, "its CIE at 0x%llx is malformed", (unsigned long long)ce->offset);
            e->cie_entry = (uint32_t)cie_entry;
            continue;
        }
        e->cie_entry = (uint32_t)cie_entry;
        e->cie = ce->cie;
        fu_cursor body = fu_cursor_make(base, base + id_field + e->offset_size, base + e->end);
        parse_fde(t, e, &body, e->cie);
    }
    return FU_OK;
}

void fu_cfi_table_free(fu_cfi_table *t)
{
    for (uint32_t i = 0; i < t->entry_count; i++)
        free(t->entries[i].error_message);
    free(t->entries);
    free(t->cies);
    free(t->row_address);
    free(t->row_state);
    free(t->states);
    free(t->column_pool);
    free(t->rule_pool);
    fu_intern_free(&t->state_index);
    free(t->fde_sorted);
    free(t->fde_starts);
    memset(t, 0, sizeof *t);
}
