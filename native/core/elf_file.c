/* An ELF file's headers and the facts read from them: see elf_file.h. */
#include "elf_file.h"

#include <stdio.h>
#include <string.h>

/* gABI values this reader needs (<elf.h> spelled out: the core names what it reads). */
enum {
    EI_NIDENT = 16,
    ELF_CLASS_32 = 1,
    ELF_CLASS_64 = 2,
    ELF_DATA_LSB = 1,
    ELF_DATA_MSB = 2,
    ELF_VERSION_CURRENT = 1,
    ET_EXEC = 2,
    SHN_UNDEF = 0,
    SHN_XINDEX = 0xffff,
    PN_XNUM = 0xffff,
    SHT_NOTE = 7,
    SHT_NOBITS = 8,
    SHF_COMPRESSED = 0x800,
    PT_LOAD = 1,
    PT_INTERP = 3,
    PT_NOTE = 4,
    PF_X = 1,
    PF_W = 2,
    NT_GNU_BUILD_ID = 3,
    DT_NULL = 0,
    DT_NEEDED = 1,
};

/* Record sizes by class: header after e_ident, section header, program header. */
#define HEADER_SIZE(c) ((c) == 64 ? 48u : 36u)
#define SECTION_HEADER_SIZE(c) ((c) == 64 ? 64u : 40u)
#define PROGRAM_HEADER_SIZE(c) ((c) == 64 ? 56u : 32u)

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }
/* A word of the class: 8 bytes in ELF64, 4 in ELF32. */
static uint64_t word(unsigned elf_class, const uint8_t *p) { return elf_class == 64 ? le64(p) : le32(p); }

bool fu_elf_within(const fu_elf *elf, uint64_t offset, uint64_t size)
{
    return offset <= elf->size && size <= elf->size - offset;
}

/* [offset, offset + size) of the file, or FU_ERR_ELF naming `what`. */
static fu_status file_slice(const fu_elf *elf, uint64_t offset, uint64_t size, const char *what, const uint8_t **out,
                            fu_error *err)
{
    if (!fu_elf_within(elf, offset, size))
        return fu_fail(err, FU_ERR_ELF,
                       "%s at offset 0x%llx with size 0x%llx extends beyond the end of the file (size 0x%zx)", what,
                       (unsigned long long)offset, (unsigned long long)size, elf->size);
    *out = elf->data + offset;
    return FU_OK;
}

/* One record of `record_size` bytes at `offset`, or FU_ERR_ELF naming `what`. */
static fu_status record_at(const fu_elf *elf, uint64_t offset, unsigned record_size, const char *what,
                           const uint8_t **out, fu_error *err)
{
    if (!fu_elf_within(elf, offset, record_size))
        return fu_fail(err, FU_ERR_ELF, "%s at offset 0x%llx (0x%x bytes) extends beyond the end of the file (size 0x%zx)",
                       what, (unsigned long long)offset, record_size, elf->size);
    *out = elf->data + offset;
    return FU_OK;
}

fu_elf_symbol fu_elf_symbol_from(unsigned elf_class, const uint8_t *p)
{
    if (elf_class == 64)
        return (fu_elf_symbol){le32(p), p[4], le16(p + 6), le64(p + 8), le64(p + 16)};
    return (fu_elf_symbol){le32(p), p[12], le16(p + 14), le32(p + 4), le32(p + 8)};
}

static fu_elf_section section_from(unsigned elf_class, const uint8_t *p, uint32_t index)
{
    if (elf_class == 64)
        return (fu_elf_section){index,       le32(p),      le32(p + 4),  le32(p + 40), le32(p + 44),
                                le64(p + 8), le64(p + 16), le64(p + 24), le64(p + 32), le64(p + 48),
                                le64(p + 56)};
    return (fu_elf_section){index,       le32(p),      le32(p + 4),  le32(p + 24), le32(p + 28), le32(p + 8),
                            le32(p + 12), le32(p + 16), le32(p + 20), le32(p + 32), le32(p + 36)};
}

fu_elf_section fu_elf_section_at(const fu_elf *elf, size_t index)
{
    return section_from(elf->elf_class, elf->section_headers + index * SECTION_HEADER_SIZE(elf->elf_class),
                        (uint32_t)index);
}

fu_elf_segment fu_elf_segment_at(const fu_elf *elf, size_t index)
{
    const uint8_t *p = elf->program_headers + index * PROGRAM_HEADER_SIZE(elf->elf_class);
    if (elf->elf_class == 64)
        return (fu_elf_segment){le32(p),      le32(p + 4),  le64(p + 8),  le64(p + 16),
                                le64(p + 24), le64(p + 32), le64(p + 40), le64(p + 48)};
    return (fu_elf_segment){le32(p),      le32(p + 24), le32(p + 4),  le32(p + 8),
                            le32(p + 12), le32(p + 16), le32(p + 20), le32(p + 28)};
}

const char *fu_elf_section_name(const fu_elf *elf, const fu_elf_section *section)
{
    return elf->section_names && section->name < elf->section_names_size
               ? (const char *)elf->section_names + section->name
               : "";
}

bool fu_elf_section_named(const fu_elf *elf, const char *name, fu_elf_section *out)
{
    for (size_t i = 0; i < elf->section_count; i++) {
        *out = fu_elf_section_at(elf, i);
        if (strcmp(fu_elf_section_name(elf, out), name) == 0)
            return true;
    }
    return false;
}

/* e_ident: magic, class, byte order, version. */
static fu_status read_ident(fu_elf *elf, fu_error *err)
{
    const uint8_t *d = elf->data;
    if (elf->size < EI_NIDENT)
        return fu_fail(err, FU_ERR_ELF, "file too short for e_ident (size 0x%zx, need 0x%x)", elf->size, EI_NIDENT);
    if (memcmp(d, "\x7f" "ELF", 4) != 0)
        return fu_fail(err, FU_ERR_ELF, "not an ELF file: magic at offset 0x0 is %02x%02x%02x%02x", d[0], d[1], d[2],
                       d[3]);
    if (d[4] != ELF_CLASS_32 && d[4] != ELF_CLASS_64)
        return fu_fail(err, FU_ERR_ELF, "bad EI_CLASS at offset 0x4: 0x%x", d[4]);
    elf->elf_class = d[4] == ELF_CLASS_64 ? 64 : 32;
    if (d[5] == ELF_DATA_MSB)
        return fu_fail(err, FU_ERR_ELF, "big-endian ELF (EI_DATA at offset 0x5 is 0x%x) is not supported", d[5]);
    if (d[5] != ELF_DATA_LSB)
        return fu_fail(err, FU_ERR_ELF, "bad EI_DATA at offset 0x5: 0x%x", d[5]);
    if (d[6] != ELF_VERSION_CURRENT)
        return fu_fail(err, FU_ERR_ELF, "bad EI_VERSION at offset 0x6: 0x%x", d[6]);
    return FU_OK;
}

/* A table of `count` headers of `record` bytes at `offset` (what: "section", "program"). */
static fu_status header_table(fu_elf *elf, uint64_t offset, uint64_t count, unsigned record, const char *what,
                              const char *field, const uint8_t **out, fu_error *err)
{
    char where[96];
    snprintf(where, sizeof where, "%s header table (0x%llx entries, %s)", what, (unsigned long long)count, field);
    return file_slice(elf, offset, count * record, where, out, err);
}

/* The section name table: the string at each section's sh_name NUL-terminated within it, within
 * FU_ELF_MAX_NAME_LENGTH (index 0 of an empty table is the empty name). */
static fu_status check_section_names(const fu_elf *elf, fu_error *err)
{
    for (size_t i = 0; elf->section_names && i < elf->section_count; i++) {
        fu_elf_section s = fu_elf_section_at(elf, i);
        size_t table = elf->section_names_size;
        if (s.name == 0 && table == 0)
            continue;
        if (s.name >= table)
            return fu_fail(err, FU_ERR_ELF,
                           "name of section [%zu] in the section name table: string offset 0x%x is outside the string "
                           "table (size 0x%zx)",
                           i, s.name, table);
        size_t limit = table - s.name < FU_ELF_MAX_NAME_LENGTH + 1 ? table - s.name : FU_ELF_MAX_NAME_LENGTH + 1;
        if (!memchr(elf->section_names + s.name, '\0', limit))
            return fu_fail(err, FU_ERR_ELF,
                           "name of section [%zu] in the section name table: string at offset 0x%x is not "
                           "NUL-terminated within the table (or longer than 0x%x bytes)",
                           i, s.name, FU_ELF_MAX_NAME_LENGTH);
    }
    return FU_OK;
}

/* The section header table (gABI "Extended Section Numbering": section 0 holds the real count in
 * sh_size, the names' index in sh_link and the program header count in sh_info when they do not
 * fit the header); *zero NULL without a table. */
static fu_status read_sections(fu_elf *elf, uint64_t shoff, unsigned shentsize, unsigned shnum, unsigned shstrndx,
                               fu_elf_section *zero, bool *has_zero, fu_error *err)
{
    unsigned c = elf->elf_class, record = SECTION_HEADER_SIZE(c);
    *has_zero = false;
    if (shoff == 0) {
        if (shnum != 0)
            return fu_fail(err, FU_ERR_ELF,
                           "ELF header says 0x%x sections (e_shnum) but has no section header table (e_shoff 0x0)",
                           shnum);
        if (shstrndx != SHN_UNDEF && shstrndx != SHN_XINDEX)
            return fu_fail(err, FU_ERR_ELF, "e_shstrndx 0x%x without a section header table", shstrndx);
        return FU_OK;
    }
    if (shentsize != record)
        return fu_fail(err, FU_ERR_ELF, "bad e_shentsize 0x%x for ELF%u (expected 0x%x)", shentsize, c, record);
    const uint8_t *p = NULL;
    if (record_at(elf, shoff, record, "section header 0 (e_shoff)", &p, err))
        return err->status;
    *zero = section_from(c, p, 0);
    *has_zero = true;
    uint64_t count = shnum ? shnum : zero->size;
    if (count > FU_ELF_MAX_SECTIONS)
        return fu_fail(err, FU_ERR_ELF, "section count 0x%llx exceeds the limit 0x%x", (unsigned long long)count,
                       FU_ELF_MAX_SECTIONS);
    if (header_table(elf, shoff, count, record, "section", "e_shoff", &elf->section_headers, err))
        return err->status;
    elf->section_count = (size_t)count;
    uint64_t names_index = shstrndx == SHN_XINDEX ? zero->link : shstrndx;
    if (names_index == SHN_UNDEF)
        return FU_OK;
    if (names_index >= count)
        return fu_fail(err, FU_ERR_ELF,
                       "section name string table index (e_shstrndx) 0x%llx is not below the section count 0x%llx",
                       (unsigned long long)names_index, (unsigned long long)count);
    fu_elf_section names = fu_elf_section_at(elf, (size_t)names_index);
    if (names.type == SHT_NOBITS)
        return fu_fail(err, FU_ERR_ELF, "section name string table [%llu] is SHT_NOBITS", (unsigned long long)names_index);
    char what[64];
    snprintf(what, sizeof what, "section name string table [%llu]", (unsigned long long)names_index);
    if (file_slice(elf, names.offset, names.size, what, &elf->section_names, err))
        return err->status;
    elf->section_names_size = (size_t)names.size;
    return check_section_names(elf, err);
}

static fu_status read_segments(fu_elf *elf, uint64_t phoff, unsigned phentsize, unsigned phnum,
                               const fu_elf_section *zero, bool has_zero, fu_error *err)
{
    unsigned c = elf->elf_class, record = PROGRAM_HEADER_SIZE(c);
    uint64_t count = phnum == PN_XNUM && has_zero ? zero->info : phnum;
    if (count == 0)
        return FU_OK;
    if (phoff == 0)
        return fu_fail(err, FU_ERR_ELF, "ELF header says 0x%llx program headers but e_phoff is 0x0",
                       (unsigned long long)count);
    if (phentsize != record)
        return fu_fail(err, FU_ERR_ELF, "bad e_phentsize 0x%x for ELF%u (expected 0x%x)", phentsize, c, record);
    if (count > FU_ELF_MAX_SEGMENTS)
        return fu_fail(err, FU_ERR_ELF, "program header count 0x%llx exceeds the limit 0x%x", (unsigned long long)count,
                       FU_ELF_MAX_SEGMENTS);
    if (header_table(elf, phoff, count, record, "program", "e_phoff", &elf->program_headers, err))
        return err->status;
    elf->segment_count = (size_t)count;
    return FU_OK;
}

fu_status fu_elf_open(fu_elf *elf, const uint8_t *data, size_t size, fu_error *err)
{
    *elf = (fu_elf){.data = data, .size = size};
    const uint8_t *h = NULL;
    if (read_ident(elf, err) || record_at(elf, EI_NIDENT, HEADER_SIZE(elf->elf_class), "ELF header", &h, err))
        return err->status;
    unsigned c = elf->elf_class;
    /* the fields after e_entry sit 4 bytes lower in ELF32, whose addresses and offsets are 4 bytes */
    size_t shift = c == 64 ? 0 : 12;
    elf->type = le16(h);
    elf->machine = le16(h + 2);
    elf->entry = word(c, h + 8);
    uint64_t phoff = c == 64 ? le64(h + 16) : le32(h + 12), shoff = c == 64 ? le64(h + 24) : le32(h + 16);
    unsigned phentsize = le16(h + 38 - shift), phnum = le16(h + 40 - shift), shentsize = le16(h + 42 - shift),
             shnum = le16(h + 44 - shift), shstrndx = le16(h + 46 - shift);
    fu_elf_section zero;
    bool has_zero;
    if (read_sections(elf, shoff, shentsize, shnum, shstrndx, &zero, &has_zero, err) ||
        read_segments(elf, phoff, phentsize, phnum, &zero, has_zero, err))
        return err->status;
    return FU_OK;
}

/* A section's name as the messages print it: a byte outside printable ASCII as \xNN (a message is
 * text, UTF-8 for Python's exception: a hostile name's bytes are not), cut short to fit. */
#define PRINTABLE_NAME_SIZE 64
static void printable_name(const fu_elf *elf, const fu_elf_section *s, char name[PRINTABLE_NAME_SIZE])
{
    size_t at = 0;
    for (const unsigned char *c = (const unsigned char *)fu_elf_section_name(elf, s); *c && at + 5 < PRINTABLE_NAME_SIZE;
         c++)
        at += (size_t)snprintf(name + at, PRINTABLE_NAME_SIZE - at, *c >= 0x20 && *c < 0x7f ? "%c" : "\\x%02x", *c);
    name[at] = '\0';
}

/* "section [3] '.note.gnu.build-id'": how the messages name a section. */
static void section_where(const fu_elf *elf, const fu_elf_section *s, char *where, size_t size)
{
    char name[PRINTABLE_NAME_SIZE];
    printable_name(elf, s, name);
    snprintf(where, size, "section [%u] '%s'", s->index, name);
}

fu_status fu_elf_section_bytes(const fu_elf *elf, const fu_elf_section *section, const uint8_t **data, size_t *size,
                               fu_error *err)
{
    *data = elf->data;
    *size = 0;
    if (section->type == SHT_NOBITS)
        return FU_OK;
    char what[160];
    section_where(elf, section, what, sizeof what);
    if (file_slice(elf, section->offset, section->size, what, data, err))
        return err->status;
    *size = (size_t)section->size;
    return FU_OK;
}

/* The contents of a section read as a structure (notes, .dynamic, .gnu_debuglink): its bytes,
 * FU_ERR_ELF where it is compressed (no linker compresses those: only debug sections are). */
static fu_status section_contents(const fu_elf *elf, const fu_elf_section *section, const uint8_t **data,
                                  size_t *size, fu_error *err)
{
    if (section->flags & SHF_COMPRESSED) {
        char where[160], name[PRINTABLE_NAME_SIZE];
        section_where(elf, section, where, sizeof where);
        printable_name(elf, section, name);
        return fu_fail(err, FU_ERR_ELF, "%s: compressed (SHF_COMPRESSED), which a %s section never is", where, name);
    }
    return fu_elf_section_bytes(elf, section, data, size, err);
}

fu_status fu_elf_segment_bytes(const fu_elf *elf, const fu_elf_segment *segment, const uint8_t **data, size_t *size,
                               fu_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "segment at file offset 0x%llx", (unsigned long long)segment->offset);
    *size = 0;
    if (file_slice(elf, segment->offset, segment->filesz, what, data, err))
        return err->status;
    *size = (size_t)segment->filesz;
    return FU_OK;
}

static uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) & ~(alignment - 1); }

/* The NT_GNU_BUILD_ID (owner "GNU") of a region of notes at `file_offset` (a section, a PT_NOTE
 * segment, a mapped file's notes in a core's memory): *size 0 when none. Name and descriptor are
 * padded to 4, or 8 in a region aligned to 8, counted from the note's start. `where` begins the
 * messages. */
static fu_status build_id_in_notes(const uint8_t *data, size_t size, uint64_t alignment, uint64_t file_offset,
                                  const char *where, uint8_t build_id[FU_ELF_MAX_BUILD_ID], size_t *build_id_size,
                                  fu_error *err)
{
    uint64_t padding = alignment == 8 ? 8 : 4, position = 0;
    *build_id_size = 0;
    for (unsigned n = 0; n < FU_ELF_MAX_NOTES; n++) {
        if (position >= size)
            return FU_OK;
        unsigned long long at = (unsigned long long)(file_offset + position);
        if (size - position < 12)
            return fu_fail(err, FU_ERR_ELF, "%s: note header at offset 0x%llx is truncated (0x%llx bytes left)", where,
                           at, (unsigned long long)(size - position));
        uint32_t name_size = le32(data + position), descriptor_size = le32(data + position + 4),
                 type = le32(data + position + 8);
        uint64_t name_start = position + 12;
        if (name_size > size - name_start)
            return fu_fail(err, FU_ERR_ELF, "%s: note at offset 0x%llx: n_namesz 0x%x overruns the notes", where, at,
                           name_size);
        /* the descriptor starts at the next multiple of the padding after the name, counted from the
         * note's start (header + name), which matters for 8-byte padding */
        uint64_t descriptor_start = position + align_up(12 + (uint64_t)name_size, padding);
        if (descriptor_start > size || descriptor_size > size - descriptor_start)
            return fu_fail(err, FU_ERR_ELF, "%s: note at offset 0x%llx: n_descsz 0x%x overruns the notes", where, at,
                           descriptor_size);
        const uint8_t *name = data + name_start, *nul = memchr(name, '\0', name_size);
        size_t name_length = nul ? (size_t)(nul - name) : name_size;
        if (type == NT_GNU_BUILD_ID && name_length == 3 && memcmp(name, "GNU", 3) == 0) {
            if (descriptor_size < 1 || descriptor_size > FU_ELF_MAX_BUILD_ID)
                return fu_fail(err, FU_ERR_ELF,
                               "%s: NT_GNU_BUILD_ID note has a build-id of 0x%x bytes (expected 1 to 0x%x)", where,
                               descriptor_size, FU_ELF_MAX_BUILD_ID);
            memcpy(build_id, data + descriptor_start, descriptor_size);
            *build_id_size = descriptor_size;
            return FU_OK;
        }
        position = descriptor_start + align_up(descriptor_size, padding);
    }
    return fu_fail(err, FU_ERR_ELF, "%s: more than %u notes", where, FU_ELF_MAX_NOTES);
}

fu_status fu_elf_build_id(const fu_elf *elf, uint8_t build_id[FU_ELF_MAX_BUILD_ID], size_t *build_id_size,
                          fu_error *err)
{
    char where[160];
    const uint8_t *data;
    size_t size;
    *build_id_size = 0;
    for (size_t i = 0; i < elf->section_count; i++) {
        fu_elf_section s = fu_elf_section_at(elf, i);
        if (s.type != SHT_NOTE)
            continue;
        section_where(elf, &s, where, sizeof where);
        if (section_contents(elf, &s, &data, &size, err) ||
            build_id_in_notes(data, size, s.addralign, s.offset, where, build_id, build_id_size, err))
            return err->status;
        if (*build_id_size)
            return FU_OK;
    }
    for (size_t i = 0; i < elf->segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(elf, i);
        if (p.type != PT_NOTE)
            continue;
        snprintf(where, sizeof where, "PT_NOTE segment %zu", i);
        if (file_slice(elf, p.offset, p.filesz, where, &data, err) ||
            build_id_in_notes(data, (size_t)p.filesz, p.align, p.offset, where, build_id, build_id_size, err))
            return err->status;
        if (*build_id_size)
            return FU_OK;
    }
    return FU_OK;
}

void fu_elf_build_id_in_memory(fu_elf_memory_at at, const void *memory, uint64_t start,
                               uint8_t build_id[FU_ELF_MAX_BUILD_ID], size_t *build_id_size)
{
    *build_id_size = 0;
    const uint8_t *header = at(memory, start, 64);
    if (!header || memcmp(header, "\x7f" "ELF", 4) != 0 || header[4] != ELF_CLASS_64)
        return;
    uint64_t phoff = le64(header + 32);
    unsigned phentsize = le16(header + 54), phnum = le16(header + 56);
    if (phentsize != PROGRAM_HEADER_SIZE(64) || phnum == 0 || phnum > FU_ELF_MAX_MEMORY_PROGRAM_HEADERS ||
        phoff > UINT64_MAX - start)
        return;
    const uint8_t *headers = at(memory, start + phoff, (size_t)phnum * phentsize);
    for (unsigned i = 0; headers && i < phnum; i++) {
        const uint8_t *p = headers + (size_t)i * phentsize;
        uint64_t offset = le64(p + 8), filesz = le64(p + 32);
        if (le32(p) != PT_NOTE || filesz > FU_ELF_MAX_MEMORY_NOTE_BYTES || offset > UINT64_MAX - start)
            continue; /* a hostile or foreign header: no note the memory could hold */
        const uint8_t *notes = at(memory, start + offset, (size_t)filesz);
        fu_error err = {0};
        if (notes && build_id_in_notes(notes, (size_t)filesz, 4, offset, "notes", build_id, build_id_size,
                                              &err) == FU_OK && *build_id_size)
            return;
        *build_id_size = 0;
    }
}

fu_status fu_elf_debuglink(const fu_elf *elf, const char **name, uint32_t *crc, fu_error *err)
{
    fu_elf_section s;
    const uint8_t *data;
    size_t size;
    *name = NULL;
    *crc = 0;
    if (!fu_elf_section_named(elf, ".gnu_debuglink", &s))
        return FU_OK;
    if (section_contents(elf, &s, &data, &size, err))
        return err->status;
    char where[160];
    section_where(elf, &s, where, sizeof where);
    const uint8_t *nul = memchr(data, '\0', size);
    if (!nul || nul == data)
        return fu_fail(err, FU_ERR_ELF, "%s: at offset 0x%llx: file name is %s", where, (unsigned long long)s.offset,
                       nul ? "empty" : "not NUL-terminated");
    size_t crc_offset = align_up((uint64_t)(nul - data) + 1, 4);
    if (size < 4 || crc_offset > size - 4)
        return fu_fail(err, FU_ERR_ELF, "%s: section size 0x%zx leaves no room for the CRC at +0x%zx", where, size,
                       crc_offset);
    *name = (const char *)data;
    *crc = le32(data + crc_offset);
    return FU_OK;
}

fu_status fu_elf_process_entry(const fu_elf *elf, uint64_t *entry, fu_error *err)
{
    bool interpreter = false, needed = false;
    const uint8_t *data, *strings;
    size_t size, strings_size;
    for (size_t i = 0; i < elf->segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(elf, i);
        if (p.type != PT_INTERP)
            continue;
        if (fu_elf_segment_bytes(elf, &p, &data, &size, err))
            return err->status;
        interpreter = true;
    }
    fu_elf_section dynamic;
    if (fu_elf_section_named(elf, ".dynamic", &dynamic) && dynamic.link > 0 && dynamic.link < elf->section_count) {
        fu_elf_section names = fu_elf_section_at(elf, dynamic.link);
        if (section_contents(elf, &names, &strings, &strings_size, err) ||
            section_contents(elf, &dynamic, &data, &size, err))
            return err->status;
        size_t record = elf->elf_class == 64 ? 16 : 8, half = record / 2;
        for (size_t at = 0; at + record <= size; at += record) { /* bounded by the section's size */
            uint64_t tag = word(elf->elf_class, data + at), value = word(elf->elf_class, data + at + half);
            if (tag == DT_NULL)
                break;
            if (tag == DT_NEEDED && value < strings_size)
                needed = true;
        }
    }
    *entry = elf->type == ET_EXEC || interpreter || !needed ? elf->entry : 0;
    return FU_OK;
}

bool fu_elf_segment_loaded(const fu_elf_segment *p, bool read_only)
{
    return p->type == PT_LOAD && p->filesz && !(read_only && p->flags & PF_W);
}

void fu_elf_pointer_bases(const fu_elf *elf, uint64_t *text_base, uint64_t *data_base)
{
    fu_elf_section s;
    *text_base = fu_elf_section_named(elf, ".text", &s) ? s.addr : 0;
    *data_base = fu_elf_section_named(elf, ".got", &s) ? s.addr : 0;
}

/* Whether `p` is a PT_LOAD whose pages hold file offset `pgoff` (mappings start on a page; the
 * segment's first page begins below p_offset). */
static bool load_holds(const fu_elf_segment *p, uint64_t pgoff)
{
    uint64_t first_page = p->offset - p->offset % FU_ELF_PAGE_SIZE;
    uint64_t file_end = p->filesz > UINT64_MAX - p->offset ? UINT64_MAX : p->offset + p->filesz;
    return p->type == PT_LOAD && first_page <= pgoff && pgoff < file_end;
}

bool fu_elf_offset_executable(const fu_elf *elf, uint64_t pgoff)
{
    for (size_t i = 0; i < elf->segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(elf, i);
        if (load_holds(&p, pgoff) && p.flags & PF_X)
            return true;
    }
    return false;
}

bool fu_elf_mapping_bias(const fu_elf *elf, uint64_t start, uint64_t end, uint64_t pgoff, uint64_t *bias)
{
    /* pass 0: the executable segment; 1: one overlapping the mapping; 2: the first */
    for (int pass = 0; pass < 3; pass++) {
        for (size_t i = 0; i < elf->segment_count; i++) {
            fu_elf_segment p = fu_elf_segment_at(elf, i);
            if (!load_holds(&p, pgoff))
                continue;
            uint64_t b = start - pgoff + p.offset - p.vaddr;
            if (pass == 0 && !(p.flags & PF_X))
                continue;
            if (pass == 1 && !(p.vaddr + b < end && start < p.vaddr + b + p.memsz))
                continue;
            *bias = b;
            return true;
        }
    }
    return false;
}

/* Append `path` NUL-terminated with its rule; FU_ERR_NOMEM where the buffer cannot grow. */
static fu_status add_candidate(fu_buffer *paths, fu_elf_debug_rule rules[], size_t *count, fu_elf_debug_rule rule,
                               const char *a, const char *b, const char *c, const char *d, fu_error *err)
{
    const char *parts[] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (parts[i] && !fu_buffer_append(paths, parts[i], strlen(parts[i])))
            return fu_fail(err, FU_ERR_NOMEM, "out of memory for the debug file candidates");
    if (!fu_buffer_append(paths, "", 1))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the debug file candidates");
    rules[(*count)++] = rule;
    return FU_OK;
}

/* The separator os.path.join puts after `text`: none after "" or a trailing '/'. */
static const char *separator_after(const char *text) { return !*text || text[strlen(text) - 1] == '/' ? "" : "/"; }

fu_status fu_elf_debug_candidates(const uint8_t *build_id, size_t build_id_size, const char *link_name,
                                  const char *path, const char *resolved_path, const char *const *roots,
                                  size_t root_count, fu_buffer *paths,
                                  fu_elf_debug_rule rules[FU_ELF_MAX_DEBUG_CANDIDATES], size_t *count,
                                  bool *link_ignored, fu_error *err)
{
    *count = 0;
    *link_ignored = false;
    if (root_count > FU_ELF_MAX_DEBUG_ROOTS)
        return fu_fail(err, FU_ERR_INVALID, "%zu debug roots: at most %d", root_count, FU_ELF_MAX_DEBUG_ROOTS);
    if (build_id_size > FU_ELF_MAX_BUILD_ID)
        return fu_fail(err, FU_ERR_INVALID, "a build-id of %zu bytes: at most %d", build_id_size, FU_ELF_MAX_BUILD_ID);
    if (build_id_size > 1) {
        char head[3], rest[2 * FU_ELF_MAX_BUILD_ID + 8];
        snprintf(head, sizeof head, "%02x", build_id[0]);
        for (size_t i = 1; i < build_id_size; i++)
            snprintf(rest + 2 * (i - 1), 3, "%02x", build_id[i]);
        strcat(rest, ".debug");
        for (size_t r = 0; r < root_count; r++) {
            char prefix[24];
            snprintf(prefix, sizeof prefix, "%s.build-id/%s/", separator_after(roots[r]), head);
            if (add_candidate(paths, rules, count, FU_ELF_DEBUG_BY_BUILD_ID, roots[r], prefix, rest, NULL, err))
                return err->status;
        }
    }
    if (!link_name)
        return FU_OK;
    if (!*link_name || strchr(link_name, '/') || strcmp(link_name, ".") == 0 || strcmp(link_name, "..") == 0) {
        *link_ignored = true; /* a file name, never a path: binutils stores the basename */
        return FU_OK;
    }
    /* the directories of the path as given and resolved (os.path.dirname of an absolute path) */
    const char *given[2] = {path, resolved_path};
    char directories[2][4096];
    size_t directory_count = 0;
    for (int d = 0; d < 2; d++) {
        const char *slash = strrchr(given[d], '/');
        size_t length = !slash ? 0 : slash == given[d] ? 1 : (size_t)(slash - given[d]);
        if (length >= sizeof directories[0])
            return fu_fail(err, FU_ERR_INVALID, "a path of %zu bytes: too long for a debug file search", length);
        memcpy(directories[directory_count], given[d], length);
        directories[directory_count][length] = '\0';
        if (directory_count == 0 || strcmp(directories[0], directories[directory_count]) != 0)
            directory_count++;
    }
    for (size_t d = 0; d < directory_count; d++) {
        const char *directory = directories[d], *separator = separator_after(directory);
        if (add_candidate(paths, rules, count, FU_ELF_DEBUG_BY_LINK, directory, separator, link_name, NULL, err) ||
            add_candidate(paths, rules, count, FU_ELF_DEBUG_BY_LINK, directory, separator, ".debug/", link_name, err))
            return err->status;
    }
    for (size_t r = 0; r < root_count; r++)
        for (size_t d = 0; d < directory_count; d++) {
            /* <root>/<dir without its leading '/'>/<name> */
            const char *relative = directories[d] + strspn(directories[d], "/");
            char middle[4096 + 2];
            snprintf(middle, sizeof middle, "%s%s%s", separator_after(roots[r]), relative, *relative ? "/" : "");
            if (add_candidate(paths, rules, count, FU_ELF_DEBUG_BY_LINK, roots[r], middle, link_name, NULL, err))
                return err->status;
        }
    return FU_OK;
}
