/* elf_driver: native/core/elf_file.c (an ELF file's headers, sections, segments, notes and build-id,
 * .gnu_debuglink, the process entry, a mapping's bias, the debug files to try, the build-id of a
 * file's first page in memory) and native/core/check_scope.c (check's function symbols, noreturn
 * functions and code without CFI, from the file's symbol tables, sections and relocations) under
 * AddressSanitizer + UndefinedBehaviorSanitizer.
 *
 * Inputs: ELF files built here (ELF32 and ELF64, with and without extended numbering, note regions
 * of 4- and 8-byte padding, a .dynamic, a .gnu_debuglink), the files given as arguments (libc,
 * ld.so, the driver itself) and seeded mutants of each: bit flips, cuts, and header fields set to
 * hostile values. Every input is a malloc'd copy of exactly its size, so a read past it is a
 * report. After an open that succeeds the driver checks what the reader promises: every section's
 * and segment's bytes it returns lie inside the input, every name ends inside the name table, a
 * build-id has 1 to 64 bytes, a bias is one of a PT_LOAD holding the offset; the debug-file
 * candidates of every build-id and link name it reads are NUL-terminated paths within their count.
 *
 *   make -C native/fuzz asan-elf [SEED=N]
 *   build/elf_driver_asan --replay FILE     (a saved failing input)
 */
#define _GNU_SOURCE
#define FUZZ_DRIVER "elf_driver"
#define FUZZ_REPLAY "build/elf_driver_asan --replay"
#include "fuzz_common.h"
#include "fuzz_files.h"

#include <elf.h>

#include "check_scope.h"
#include "elf_file.h"
#include "radix_sort.h"

static bool inside(const uint8_t *input, size_t size, const uint8_t *data, size_t length)
{
    return length == 0 || (data >= input && length <= size && (size_t)(data - input) <= size - length);
}

/* The input as a memory at a base address (a file's first pages in a core). */
typedef struct input_memory {
    const uint8_t *data;
    size_t size;
    uint64_t base;
} input_memory;

static const uint8_t *input_at(const void *memory, uint64_t address, size_t size)
{
    const input_memory *m = memory;
    if (address < m->base || address - m->base > m->size || size > m->size - (address - m->base))
        return NULL;
    return m->data + (address - m->base);
}

/* Inputs opened, and of those with a build-id: a driver whose built files stop parsing says so. */
static size_t opened, with_build_id;

/* Whether an error's message is text any caller can print (Python decodes it as UTF-8): printable
 * ASCII, a hostile input's bytes escaped. */
static bool printable_message(const fu_error *err)
{
    for (const unsigned char *c = (const unsigned char *)err->message; *c; c++)
        if (*c < 0x20 || *c >= 0x7f)
            return false;
    return err->message[0] != '\0';
}

static bool holds(const uint64_t *sorted, size_t count, uint64_t value)
{
    bool found;
    fu_sorted_find(sorted, count, value, &found);
    return found;
}

/* check_scope over the file (once, or as its own debug file too) and its .eh_frame: a symbol table
 * that holds together, noreturn functions among the symbols, the FDEs judged well-formed ones,
 * uncovered ranges sorted, non-empty, named inside the names, starting where no FDE covers. */
static void run_check_scope(const fu_elf *elf, uint64_t *rng)
{
    const fu_elf *files[2] = {elf, elf};
    fu_check_symbols symbols;
    fu_error err = {0};
    if (fu_check_symbols_read(files, 1 + rng_below(rng, 2), &symbols, &err) != FU_OK) {
        CHECK(err.status == FU_ERR_NOMEM, "symbols failed with status %d", (int)err.status);
        return;
    }
    CHECK(fu_check_symbols_valid(&symbols), "a symbol table that does not hold together");
    for (size_t i = 0; i < symbols.count; i++) {
        const char *name = symbols.names + symbols.name_offsets[i];
        CHECK(name[0] != '\0' && symbols.starts[i] != 0, "an empty name or a symbol at 0");
        CHECK(!fu_check_noreturn_name(name, strlen(name)) || holds(symbols.noreturn, symbols.noreturn_count,
                                                                   symbols.starts[i]),
              "a noreturn function's symbol missing from noreturn");
    }
    fu_image_segment code[8];
    size_t code_count = 0;
    for (size_t i = 0; i < elf->segment_count && code_count < 8; i++) {
        fu_elf_segment p = fu_elf_segment_at(elf, i);
        const uint8_t *bytes;
        size_t length;
        if (p.type == PT_LOAD && (p.flags & PF_X) && fu_elf_segment_bytes(elf, &p, &bytes, &length, &err) == FU_OK)
            code[code_count++] = (fu_image_segment){p.vaddr, bytes, length};
    }
    uint64_t targets[32];
    size_t target_count = rng_below(rng, 33);
    for (size_t i = 0; i < target_count; i++) {
        uint64_t near = code_count ? code[rng_below(rng, code_count)].vaddr : 0;
        targets[i] = rng_below(rng, 4) == 0 ? rng_next(rng)
                     : symbols.count && rng_below(rng, 2) ? symbols.starts[rng_below(rng, symbols.count)] + rng_below(rng, 3)
                                                          : near + rng_below(rng, 0x10000);
    }
    /* the file's .eh_frame, parsed and evaluated, for the FDEs judged and the coverage lookups */
    fu_cfi_table table;
    memset(&table, 0, sizeof table);
    bool have_table = false;
    fu_elf_section eh_frame;
    const uint8_t *eh_bytes;
    size_t eh_size;
    if (fu_elf_section_named(elf, ".eh_frame", &eh_frame) &&
        fu_elf_section_bytes(elf, &eh_frame, &eh_bytes, &eh_size, &err) == FU_OK) {
        fu_section section = {.kind = FU_SECTION_EH_FRAME, .data = eh_bytes, .size = eh_size,
                              .address = eh_frame.addr, .address_size = 8, .segments = code,
                              .segment_count = code_count};
        fu_elf_pointer_bases(elf, &section.text_base, &section.data_base);
        have_table = fu_cfi_table_parse(&table, &section, &err) == FU_OK && fu_cfi_table_evaluate(&table, &err) == FU_OK;
    }
    if (have_table) {
        fu_buffer fdes = {0};
        if (fu_check_scope_fdes(&table, &fdes, &err) == FU_OK) {
            const uint32_t *index = (const uint32_t *)fdes.data;
            for (size_t i = 0; i < fdes.len / sizeof *index; i++)
                CHECK(index[i] < table.entry_count && table.entries[index[i]].kind == FU_ENTRY_FDE &&
                      !table.entries[index[i]].has_error && table.entries[index[i]].pc_begin != 0 &&
                      (i == 0 || index[i - 1] < index[i]), "an FDE judged that is no well-formed FDE");
        }
        free(fdes.data);
    }
    fu_check_scope_input input = {.elf = elf, .tables = {have_table ? &table : NULL, NULL}, .code = code,
                                  .code_count = code_count, .symbols = &symbols, .targets = targets,
                                  .target_count = target_count};
    fu_buffer ranges = {0};
    if (fu_check_uncovered(&input, &ranges, &err) == FU_OK) {
        const fu_check_uncovered_range *r = (const fu_check_uncovered_range *)ranges.data;
        size_t count = ranges.len / sizeof *r;
        for (size_t i = 0; i < count; i++) {
            CHECK(r[i].start < r[i].end || r[i].end == UINT64_MAX, "an empty uncovered range");
            CHECK(i == 0 || r[i - 1].start < r[i].start, "uncovered ranges not sorted");
            CHECK(r[i].name == UINT32_MAX || r[i].name < symbols.names_size, "a name outside the names");
            int64_t fde;
            CHECK(!have_table || fu_cfi_table_find_row(&table, r[i].start, &fde) < 0, "an uncovered start an FDE covers");
        }
    } else {
        CHECK((err.status == FU_ERR_ELF || err.status == FU_ERR_NOMEM) && printable_message(&err),
              "uncovered failed without a printable error");
    }
    free(ranges.data);
    fu_cfi_table_free(&table);
    fu_check_symbols_free(&symbols);
}

/* Everything the reader promises of one input. */
static void run_one(const uint8_t *input, size_t size, const char *label, uint64_t *rng)
{
    uint8_t *data = malloc(size ? size : 1);
    CHECK(data != NULL, "out of memory");
    memcpy(data, input, size);
    fuzz_begin_input(data, size, label);
    /* the build-id of the input read as a file's first pages in memory, at its base or inside it */
    input_memory memory = {data, size, rng_below(rng, 2) ? 0x7f0000000000ull : UINT64_MAX - size};
    uint8_t in_memory[FU_ELF_MAX_BUILD_ID];
    size_t in_memory_size;
    uint64_t start = memory.base + (rng_below(rng, 4) ? 0 : rng_below(rng, size + 1));
    fu_elf_build_id_in_memory(input_at, &memory, start, in_memory, &in_memory_size);
    CHECK(in_memory_size <= FU_ELF_MAX_BUILD_ID, "a build-id of %zu bytes in memory", in_memory_size);
    fu_elf elf;
    fu_error err = {0};
    if (fu_elf_open(&elf, data, size, &err) != FU_OK) {
        CHECK(err.status == FU_ERR_ELF && printable_message(&err), "open failed without a printable ElfError message");
        free(data);
        return;
    }
    opened++;
    CHECK(elf.section_count <= FU_ELF_MAX_SECTIONS && elf.segment_count <= FU_ELF_MAX_SEGMENTS, "counts past bounds");
    for (size_t i = 0; i < elf.section_count; i++) {
        fu_elf_section s = fu_elf_section_at(&elf, i);
        const char *name = fu_elf_section_name(&elf, &s);
        CHECK(name[0] == '\0' || inside(data, size, (const uint8_t *)name, strlen(name) + 1),
              "section %zu's name ends outside the input", i);
        const uint8_t *bytes;
        size_t length;
        if (fu_elf_section_bytes(&elf, &s, &bytes, &length, &err) == FU_OK)
            CHECK(inside(data, size, bytes, length), "section %zu's bytes outside the input", i);
        fu_elf_section named;
        CHECK(fu_elf_section_named(&elf, name, &named) && strcmp(fu_elf_section_name(&elf, &named), name) == 0,
              "section %zu not found by its name", i);
    }
    for (size_t i = 0; i < elf.segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(&elf, i);
        const uint8_t *bytes;
        size_t length;
        if (fu_elf_segment_bytes(&elf, &p, &bytes, &length, &err) == FU_OK)
            CHECK(inside(data, size, bytes, length) && length == p.filesz, "segment %zu's bytes outside the input", i);
        CHECK(!fu_elf_segment_loaded(&p, true) || fu_elf_segment_loaded(&p, false), "a read-only load not loaded");
    }
    uint8_t build_id[FU_ELF_MAX_BUILD_ID];
    size_t build_id_size = 0;
    if (fu_elf_build_id(&elf, build_id, &build_id_size, &err) != FU_OK)
        CHECK(err.status == FU_ERR_ELF && printable_message(&err), "build-id failed without a printable ElfError message");
    CHECK(build_id_size <= FU_ELF_MAX_BUILD_ID, "a build-id of %zu bytes", build_id_size);
    with_build_id += build_id_size > 0;
    const char *link = NULL;
    uint32_t crc;
    if (fu_elf_debuglink(&elf, &link, &crc, &err) != FU_OK)
        CHECK(err.status == FU_ERR_ELF && printable_message(&err), "debuglink failed without a printable ElfError message");
    else if (link)
        CHECK(inside(data, size, (const uint8_t *)link, strlen(link) + 1), "debuglink name outside the input");
    uint64_t text_base, data_base;
    fu_elf_pointer_bases(&elf, &text_base, &data_base);
    uint64_t entry;
    if (fu_elf_process_entry(&elf, &entry, &err) == FU_OK)
        CHECK(entry == 0 || entry == elf.entry, "a process entry that is not e_entry");
    for (int m = 0; m < 16; m++) {
        uint64_t pgoff = (rng_below(rng, 2) ? rng_next(rng) : rng_below(rng, size + 0x2000)) & ~0xfffull;
        uint64_t start = 0x7f0000000000ull + (rng_below(rng, 0x100000) << 12), bias;
        bool executable = fu_elf_offset_executable(&elf, pgoff);
        if (!fu_elf_mapping_bias(&elf, start, start + 0x10000, pgoff, &bias)) {
            CHECK(!executable, "an executable offset 0x%llx without a bias", (unsigned long long)pgoff);
            continue;
        }
        bool held = false;
        for (size_t i = 0; i < elf.segment_count && !held; i++) {
            fu_elf_segment p = fu_elf_segment_at(&elf, i);
            held = p.type == PT_LOAD && bias == start - pgoff + p.offset - p.vaddr;
        }
        CHECK(held, "a bias of no PT_LOAD segment");
    }
    const char *const roots[] = {"/usr/lib/debug", "/", "", "/tmp/debug/"};
    fu_buffer paths = {0};
    fu_elf_debug_rule rules[FU_ELF_MAX_DEBUG_CANDIDATES];
    size_t count;
    bool ignored;
    if (fu_elf_debug_candidates(build_id, build_id_size, link, "/usr/bin/program", "/opt/real/program", roots, 4,
                                &paths, rules, &count, &ignored, &err) == FU_OK) {
        CHECK(count <= FU_ELF_MAX_DEBUG_CANDIDATES, "%zu candidates", count);
        size_t at = 0;
        for (size_t i = 0; i < count; i++) {
            const char *end = memchr(paths.data + at, '\0', paths.len - at);
            CHECK(end != NULL, "candidate %zu not terminated", i);
            at = (size_t)(end - (const char *)paths.data) + 1;
        }
        CHECK(at == paths.len, "bytes after the last candidate");
    }
    free(paths.data);
    run_check_scope(&elf, rng);
    free(data);
}

/* ---- inputs built here ------------------------------------------------------------------------ */

typedef struct builder {
    uint8_t *data;
    size_t len, cap;
} builder;

static void put(builder *b, size_t at, const void *bytes, size_t n)
{
    if (at + n > b->cap) {
        b->cap = (at + n) * 2;
        b->data = realloc(b->data, b->cap);
        CHECK(b->data != NULL, "out of memory");
    }
    if (at > b->len)
        memset(b->data + b->len, 0, at - b->len);
    memcpy(b->data + at, bytes, n);
    if (at + n > b->len)
        b->len = at + n;
}

static size_t append(builder *b, const void *bytes, size_t n, size_t alignment)
{
    size_t at = (b->len + alignment - 1) & ~(alignment - 1);
    put(b, at, bytes, n);
    return at;
}

/* Notes: a few of random owners and types, a GNU build-id among them (or not), padded to `padding`. */
static void put_notes(builder *b, uint64_t *rng, size_t padding)
{
    unsigned count = 1 + (unsigned)rng_below(rng, 4);
    for (unsigned i = 0; i < count; i++) {
        bool build_id = rng_below(rng, 2);
        const char *owner = build_id || rng_below(rng, 2) ? "GNU" : "Linux";
        uint32_t descriptor_size = build_id ? (uint32_t)(1 + rng_below(rng, 40)) : (uint32_t)rng_below(rng, 24);
        uint32_t header[3] = {(uint32_t)strlen(owner) + 1, descriptor_size,
                              build_id ? NT_GNU_BUILD_ID : (uint32_t)rng_below(rng, 6)};
        size_t at = append(b, header, sizeof header, padding);
        put(b, at + 12, owner, header[0]);
        size_t descriptor = at + ((12 + header[0] + padding - 1) & ~(padding - 1));
        for (uint32_t k = 0; k < descriptor_size; k++) {
            uint8_t byte = (uint8_t)rng_next(rng);
            put(b, descriptor + k, &byte, 1);
        }
        uint8_t zero = 0;
        put(b, (descriptor + descriptor_size + padding - 1) & ~(padding - 1), &zero, 0);
    }
}

/* An ELF64 (or ELF32 when `wide` is false) file: PT_LOAD segments with random offsets and flags, a
 * PT_NOTE, a PT_INTERP sometimes, sections .note.gnu.build-id, .dynamic (+ .dynstr),
 * .gnu_debuglink, names; extended numbering sometimes. */
static builder build_elf(uint64_t *rng, bool wide)
{
    builder b = {0};
    unsigned header_size = wide ? 64 : 52, shentsize = wide ? 64 : 40, phentsize = wide ? 56 : 32;
    uint8_t zero[64] = {0};
    put(&b, 0, zero, header_size);
    /* notes */
    size_t padding = rng_below(rng, 3) == 0 ? 8 : 4;
    size_t notes_at = (b.len + 7) & ~(size_t)7;
    put(&b, notes_at, zero, 0);
    b.len = notes_at;
    put_notes(&b, rng, padding);
    size_t notes_size = b.len - notes_at;
    /* .dynstr and .dynamic */
    const char dynstr[] = "\0libc.so.6\0";
    size_t dynstr_at = append(&b, dynstr, sizeof dynstr, 1);
    size_t dynamic_at = (b.len + 7) & ~(size_t)7, entries = rng_below(rng, 4);
    for (size_t i = 0; i < entries; i++) {
        uint64_t tag = rng_below(rng, 3) ? DT_NEEDED : rng_below(rng, 30), value = rng_below(rng, 16);
        if (wide) {
            put(&b, dynamic_at + 16 * i, &tag, 8);
            put(&b, dynamic_at + 16 * i + 8, &value, 8);
        } else {
            uint32_t t = (uint32_t)tag, v = (uint32_t)value;
            put(&b, dynamic_at + 8 * i, &t, 4);
            put(&b, dynamic_at + 8 * i + 4, &v, 4);
        }
    }
    size_t dynamic_size = entries * (wide ? 16 : 8);
    /* .gnu_debuglink */
    const char *names[] = {"program.debug", "", "..", "a/b", "x"};
    const char *link = names[rng_below(rng, 5)];
    size_t link_at = append(&b, link, strlen(link) + 1, 4);
    uint32_t crc = (uint32_t)rng_next(rng);
    size_t link_size = ((strlen(link) + 1 + 3) & ~(size_t)3) + 4 - rng_below(rng, 2) * 4;
    put(&b, link_at + ((strlen(link) + 1 + 3) & ~(size_t)3), &crc, 4);
    const char interp[] = "/lib64/ld-linux-x86-64.so.2";
    size_t interp_at = append(&b, interp, sizeof interp, 1);
    /* section names */
    const char shstrtab[] = "\0.note.gnu.build-id\0.dynamic\0.dynstr\0.gnu_debuglink\0.shstrtab\0.text\0";
    size_t shstrtab_at = append(&b, shstrtab, sizeof shstrtab, 1);
    /* program headers: PT_LOADs sharing pages as lld and mold lay them out, a PT_NOTE, PT_INTERP */
    unsigned loads = 1 + (unsigned)rng_below(rng, 4), segments = loads + 1 + (rng_below(rng, 2) ? 1 : 0);
    size_t phoff = append(&b, zero, 0, 8);
    for (unsigned i = 0; i < segments; i++) {
        uint32_t type = i < loads ? PT_LOAD : i == loads ? PT_NOTE : PT_INTERP;
        uint32_t flags = i < loads ? (uint32_t)(PF_R | (rng_below(rng, 2) ? PF_X : 0) | (rng_below(rng, 4) ? 0 : PF_W)) : PF_R;
        uint64_t offset = i < loads ? i * 0x770 + rng_below(rng, 0x100) : i == loads ? notes_at : interp_at;
        uint64_t filesz = i < loads ? 0x800 + rng_below(rng, 0x3000) : i == loads ? notes_size : sizeof interp;
        uint64_t vaddr = i < loads ? 0x400000 + i * 0x1000 + offset % 0x1000 : offset, align = i == loads ? padding : 0x1000;
        uint8_t p[56] = {0};
        if (wide) {
            uint64_t fields[6] = {offset, vaddr, vaddr, filesz, filesz + rng_below(rng, 0x1000), align};
            memcpy(p, &type, 4);
            memcpy(p + 4, &flags, 4);
            memcpy(p + 8, fields, sizeof fields);
        } else {
            uint32_t fields[8] = {type, (uint32_t)offset, (uint32_t)vaddr, (uint32_t)vaddr, (uint32_t)filesz,
                                  (uint32_t)filesz, flags, (uint32_t)align};
            memcpy(p, fields, sizeof fields);
        }
        put(&b, phoff + i * phentsize, p, phentsize);
    }
    /* section headers: null, notes, .dynamic, .dynstr, .gnu_debuglink, .shstrtab */
    size_t shoff = (b.len + 7) & ~(size_t)7;
    struct {
        uint32_t name, type;
        uint64_t offset, size, align;
        uint32_t link;
    } sections[] = {
        {0, SHT_NULL, 0, 0, 0, 0},
        {1, SHT_NOTE, notes_at, notes_size, padding, 0},
        {20, SHT_DYNAMIC, dynamic_at, dynamic_size, 8, 3},
        {29, SHT_STRTAB, dynstr_at, sizeof dynstr, 1, 0},
        {37, SHT_PROGBITS, link_at, link_size, 4, 0},
        {52, SHT_STRTAB, shstrtab_at, sizeof shstrtab, 1, 0},
    };
    unsigned section_count = sizeof sections / sizeof sections[0];
    bool extended = rng_below(rng, 4) == 0;
    for (unsigned i = 0; i < section_count; i++) {
        uint8_t s[64] = {0};
        uint64_t size = sections[i].size, link = sections[i].link, info = 0;
        if (i == 0 && extended) {
            size = section_count;
            link = section_count - 1;
            info = segments;
        }
        if (wide) {
            memcpy(s, &sections[i].name, 4);
            memcpy(s + 4, &sections[i].type, 4);
            memcpy(s + 24, &sections[i].offset, 8);
            memcpy(s + 32, &size, 8);
            uint32_t l = (uint32_t)link, n = (uint32_t)info;
            memcpy(s + 40, &l, 4);
            memcpy(s + 44, &n, 4);
            memcpy(s + 48, &sections[i].align, 8);
        } else {
            uint32_t fields[10] = {sections[i].name, sections[i].type, 0, 0, (uint32_t)sections[i].offset,
                                   (uint32_t)size, (uint32_t)link, (uint32_t)info, (uint32_t)sections[i].align, 0};
            memcpy(s, fields, sizeof fields);
        }
        put(&b, shoff + i * shentsize, s, shentsize);
    }
    /* the ELF header */
    uint8_t ident[16] = {0x7f, 'E', 'L', 'F', wide ? ELFCLASS64 : ELFCLASS32, ELFDATA2LSB, EV_CURRENT};
    put(&b, 0, ident, sizeof ident);
    uint16_t type = rng_below(rng, 2) ? ET_DYN : ET_EXEC, machine = wide ? EM_X86_64 : EM_386;
    uint16_t phnum = extended ? PN_XNUM : (uint16_t)segments, shnum = extended ? 0 : (uint16_t)section_count,
             shstrndx = extended ? SHN_XINDEX : (uint16_t)(section_count - 1);
    uint64_t entry = 0x401000;
    put(&b, 16, &type, 2);
    put(&b, 18, &machine, 2);
    uint32_t version = EV_CURRENT;
    put(&b, 20, &version, 4);
    size_t shift = wide ? 0 : 12;
    if (wide) {
        put(&b, 24, &entry, 8);
        put(&b, 32, &phoff, 8);
        put(&b, 40, &shoff, 8);
    } else {
        uint32_t e = (uint32_t)entry, ph = (uint32_t)phoff, sh = (uint32_t)shoff;
        put(&b, 24, &e, 4);
        put(&b, 28, &ph, 4);
        put(&b, 32, &sh, 4);
    }
    uint16_t sizes[6] = {(uint16_t)header_size, (uint16_t)phentsize, phnum, (uint16_t)shentsize, shnum, shstrndx};
    put(&b, 52 - shift, sizes, sizeof sizes);
    return b;
}

static const uint64_t HOSTILE[] = {0, 1, 0xff, 0xffff, 0xff00, 0x7fffffff, 0xffffffff, 0x100000000ull,
                                   0x7fffffffffffffffull, 0xffffffffffffffffull, 0x1000, 12, 40, 56, 64};

/* A mutant: in the headers (the first 256 bytes) half the time, anywhere otherwise. */
static size_t mutate(uint8_t *data, size_t size, uint64_t *rng)
{
    size_t span = rng_below(rng, 2) && size > 256 ? 256 : size;
    size_t kept = fuzz_mutate(data, span, rng, HOSTILE, sizeof HOSTILE / sizeof HOSTILE[0]);
    return kept < span ? kept : size;
}

int main(int argc, char **argv)
{
    const fuzz_options o = fuzz_parse_options(argc, argv, 4000, 400, "elf-failure");
    fuzz_install_failure_handlers();
    uint64_t rng = o.seed;
    if (o.replay)
        return fuzz_replay(&o, &rng, run_one);
    printf("elf_driver: seed %llu, %llu built files\n", (unsigned long long)o.seed, (unsigned long long)o.built);
    fflush(stdout);
    size_t inputs = 0;
    for (uint64_t i = 0; i < o.built; i++) { /* each built file, then a mutant of it */
        builder b = build_elf(&rng, rng_below(&rng, 4) != 0);
        fuzz_run_built(b.data, b.len, "file", i, &o, &rng, run_one, mutate);
        inputs += 2;
    }
    for (int f = o.first_file; f < argc; f++) {
        size_t size;
        uint8_t *original = fuzz_read_file(argv[f], SIZE_MAX, &size);
        if (!original) {
            fprintf(stderr, "elf_driver: cannot read %s\n", argv[f]);
            return 2;
        }
        alarm(o.timeout);
        run_one(original, size, argv[f], &rng);
        uint8_t *copy = malloc(size);
        CHECK(copy != NULL, "out of memory");
        for (uint64_t m = 0; m < o.mutations; m++) {
            memcpy(copy, original, size);
            size_t kept = mutate(copy, size, &rng);
            char label[256];
            snprintf(label, sizeof label, "mutant %llu of %s (seed %llu)", (unsigned long long)m, argv[f],
                     (unsigned long long)o.seed);
            alarm(o.timeout);
            run_one(copy, kept, label, &rng);
        }
        free(copy);
        free(original);
        inputs += 1 + o.mutations;
    }
    printf("elf_driver: %zu inputs passed (%zu opened, %zu with a build-id)\n", inputs, opened, with_build_id);
    CHECK(o.built == 0 || opened > o.built / 2, "fewer than half the built files open: the builder is broken");
    return 0;
}
