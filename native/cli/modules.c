/* A process's module files opened as the Python path opens them: see modules.h. */
#define _GNU_SOURCE
#include "modules.h"

#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_paths.h"
#include "launcher.h"
#include "symbol_cache.h"

/* Notes one region may hold before the reader stops (elf/__init__.py MAX_NOTE_COUNT). */
#define MAX_NOTES 4096
/* The separate debug files' root (elf/__init__.py DEFAULT_DEBUG_ROOTS). */
#define DEBUG_ROOT "/usr/lib/debug"
#define PAGE_SIZE 4096u

void fu_cli_bytes_free(fu_cli_bytes *bytes)
{
    if (bytes->data) {
        if (bytes->owned)
            free((void *)bytes->data);
        else
            munmap((void *)bytes->data, bytes->size);
    }
    *bytes = (fu_cli_bytes){0};
}

static fu_cli_file_seen_fn file_seen;
static void *file_seen_context;

void fu_cli_observe_files(fu_cli_file_seen_fn seen, void *context)
{
    file_seen = seen;
    file_seen_context = context;
}

void fu_cli_note_file(const char *path)
{
    struct stat st;
    if (file_seen && stat(path, &st) == 0)
        file_seen(file_seen_context, path, &st);
}

bool fu_cli_read_file(const char *path, fu_cli_bytes *out)
{
    *out = (fu_cli_bytes){0};
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO in its place does not block */
    if (fd < 0)
        return false;
    struct stat st;
    bool ok = false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void *mapped = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (mapped != MAP_FAILED) {
            *out = (fu_cli_bytes){mapped, (size_t)st.st_size, false};
            ok = true;
            if (file_seen)
                file_seen(file_seen_context, path, &st);
        }
    }
    close(fd);
    return ok;
}

/* ---- ELF headers ------------------------------------------------------------------------------ */

static const Elf64_Phdr *phdr(const fu_cli_elf *elf, size_t i) { return (const Elf64_Phdr *)elf->phdrs + i; }
static const Elf64_Shdr *shdr(const fu_cli_elf *elf, size_t i) { return (const Elf64_Shdr *)elf->shdrs + i; }

static bool within(const fu_cli_elf *elf, uint64_t offset, uint64_t size)
{
    return offset <= elf->bytes.size && size <= elf->bytes.size - offset;
}

/* The section's name, or "" where it is not within the names. */
static const char *section_name(const fu_cli_elf *elf, const Elf64_Shdr *s)
{
    if (!elf->shstrtab || s->sh_name >= elf->shstrtab_size)
        return "";
    const char *name = elf->shstrtab + s->sh_name;
    return memchr(name, '\0', elf->shstrtab_size - s->sh_name) ? name : "";
}

/* The first section called `name`, or NULL. */
static const Elf64_Shdr *section_named(const fu_cli_elf *elf, const char *name)
{
    for (size_t i = 0; i < elf->shnum; i++)
        if (strcmp(section_name(elf, shdr(elf, i)), name) == 0)
            return shdr(elf, i);
    return NULL;
}

/* A section's bytes; false if it has none in the file or they overrun it. */
static bool section_bytes(const fu_cli_elf *elf, const Elf64_Shdr *s, const uint8_t **data, size_t *size)
{
    if (s->sh_type == SHT_NOBITS || !within(elf, s->sh_offset, s->sh_size))
        return false;
    *data = elf->bytes.data + s->sh_offset;
    *size = (size_t)s->sh_size;
    return true;
}

/* The NT_GNU_BUILD_ID of a note region: 1 found, 0 none, -1 malformed (the Python reader raises;
 * elf/__init__.py _iter_notes: name and descriptor padded to 4, or 8 in a region aligned to 8,
 * counted from the note's start). */
static int build_id_in_notes(const uint8_t *data, size_t size, uint64_t alignment, fu_cli_elf *elf)
{
    size_t padding = alignment == 8 ? 8 : 4, position = 0;
    for (unsigned n = 0; n < MAX_NOTES; n++) {
        if (position >= size)
            return 0;
        if (size - position < 12)
            return -1;
        uint32_t header[3];
        memcpy(header, data + position, sizeof header);
        size_t name_start = position + 12;
        if (header[0] > size - name_start)
            return -1;
        size_t descriptor_start = position + ((12 + (size_t)header[0] + padding - 1) & ~(padding - 1));
        if (descriptor_start > size || header[1] > size - descriptor_start)
            return -1;
        const uint8_t *name = data + name_start;
        const uint8_t *nul = memchr(name, '\0', header[0]);
        size_t name_len = nul ? (size_t)(nul - name) : header[0];
        if (header[2] == NT_GNU_BUILD_ID && name_len == 3 && memcmp(name, "GNU", 3) == 0) {
            if (header[1] < 1 || header[1] > FU_CLI_MAX_BUILD_ID)
                return -1;
            memcpy(elf->build_id, data + descriptor_start, header[1]);
            elf->build_id_size = header[1];
            return 1;
        }
        position = descriptor_start + ((header[1] + padding - 1) & ~(padding - 1));
    }
    return -1; /* more notes than the reader reads */
}

static fu_cli_module_status find_build_id(fu_cli_elf *elf)
{
    for (size_t i = 0; i < elf->shnum; i++) {
        const Elf64_Shdr *s = shdr(elf, i);
        const uint8_t *data;
        size_t size;
        if (s->sh_type != SHT_NOTE)
            continue;
        if (!section_bytes(elf, s, &data, &size))
            return FU_CLI_MODULE_UNSERVED;
        int found = build_id_in_notes(data, size, s->sh_addralign, elf);
        if (found)
            return found > 0 ? FU_CLI_MODULE_OK : FU_CLI_MODULE_UNSERVED;
    }
    for (size_t i = 0; i < elf->phnum; i++) {
        const Elf64_Phdr *p = phdr(elf, i);
        if (p->p_type != PT_NOTE)
            continue;
        if (!within(elf, p->p_offset, p->p_filesz))
            return FU_CLI_MODULE_UNSERVED;
        int found = build_id_in_notes(elf->bytes.data + p->p_offset, (size_t)p->p_filesz, p->p_align, elf);
        if (found)
            return found > 0 ? FU_CLI_MODULE_OK : FU_CLI_MODULE_UNSERVED;
    }
    return FU_CLI_MODULE_OK;
}

void fu_cli_elf_free(fu_cli_elf *elf)
{
    fu_cli_bytes_free(&elf->bytes);
    memset(elf, 0, sizeof *elf);
}

fu_cli_module_status fu_cli_elf_open(fu_cli_elf *elf, fu_cli_bytes bytes)
{
    memset(elf, 0, sizeof *elf);
    elf->bytes = bytes;
    if (bytes.size < sizeof(Elf64_Ehdr) || memcmp(bytes.data, ELFMAG, SELFMAG) != 0) {
        fu_cli_elf_free(elf);
        return FU_CLI_MODULE_UNREADABLE;
    }
    Elf64_Ehdr h;
    memcpy(&h, bytes.data, sizeof h);
    /* another class, byte order or machine: the Python reader's to judge */
    if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB || h.e_machine != EM_X86_64 ||
        (h.e_phnum && h.e_phentsize != sizeof(Elf64_Phdr)) || (h.e_shnum && h.e_shentsize != sizeof(Elf64_Shdr)) ||
        h.e_shnum >= SHN_LORESERVE || h.e_phnum == PN_XNUM ||
        !within(elf, h.e_phoff, (uint64_t)h.e_phnum * sizeof(Elf64_Phdr)) ||
        !within(elf, h.e_shoff, (uint64_t)h.e_shnum * sizeof(Elf64_Shdr)) || h.e_phoff % 8 || h.e_shoff % 8) {
        fu_cli_elf_free(elf);
        return FU_CLI_MODULE_UNSERVED;
    }
    elf->type = h.e_type;
    elf->entry = h.e_entry;
    elf->phnum = h.e_phnum;
    elf->shnum = h.e_shnum;
    elf->phdrs = bytes.data + h.e_phoff;
    elf->shdrs = bytes.data + h.e_shoff;
    if (h.e_shnum) {
        const Elf64_Shdr *names = h.e_shstrndx < h.e_shnum ? shdr(elf, h.e_shstrndx) : NULL;
        const uint8_t *data;
        size_t size;
        if (!names || !section_bytes(elf, names, &data, &size)) {
            fu_cli_elf_free(elf);
            return FU_CLI_MODULE_UNSERVED;
        }
        elf->shstrtab = (const char *)data;
        elf->shstrtab_size = size;
    }
    fu_cli_module_status status = find_build_id(elf);
    if (status != FU_CLI_MODULE_OK)
        fu_cli_elf_free(elf);
    return status;
}

/* ---- what image.py and frame_sections.py read -------------------------------------------------- */

typedef enum { EH_FRAME = 0, DEBUG_FRAME = 1 } frame_kind;

/* The first section of `kind` with contents (frame_sections.py frame_sources), or NULL; *unserved
 * when it is compressed (the Python reader decompresses it). */
static const Elf64_Shdr *frame_section(const fu_cli_elf *elf, frame_kind kind, bool *unserved)
{
    for (size_t i = 0; i < elf->shnum; i++) {
        const Elf64_Shdr *s = shdr(elf, i);
        const char *name = section_name(elf, s);
        bool is_kind = kind == EH_FRAME ? strcmp(name, ".eh_frame") == 0
                                        : strcmp(name, ".debug_frame") == 0 || strcmp(name, ".zdebug_frame") == 0;
        if (!is_kind || s->sh_size == 0 || s->sh_type == SHT_NOBITS)
            continue;
        if (s->sh_flags & SHF_COMPRESSED || name[1] == 'z')
            *unserved = true;
        return s;
    }
    return NULL;
}

/* Whether no file of the .gnu_debuglink search exists (elf/__init__.py find_debug_file, its second
 * rule: the link's name in the file's directory, as given and with symlinks resolved, in .debug/
 * there, and under DEBUG_ROOT): then it finds nothing. One that exists is the Python path's to
 * check (its CRC-32); a link it would warn about or could not read, too. */
static bool debuglink_candidates_absent(const fu_cli_image *image, const char *path)
{
    const fu_cli_elf *elf = &image->elf;
    const Elf64_Shdr *link = section_named(elf, ".gnu_debuglink");
    const uint8_t *data;
    size_t size;
    if (!link)
        return true;
    if (!section_bytes(elf, link, &data, &size))
        return false;
    const uint8_t *nul = memchr(data, '\0', size);
    if (!nul || nul == data || size < (((size_t)(nul - data) + 1 + 3) & ~(size_t)3) + 4)
        return false;
    const char *name = (const char *)data;
    if (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    char resolved[4096], directories[2][4096];
    if (path[0] != '/' || !realpath(path, resolved))
        return false;
    snprintf(directories[0], sizeof directories[0], "%s", path);
    snprintf(directories[1], sizeof directories[1], "%s", resolved);
    for (int d = 0; d < 2; d++) {
        char *slash = strrchr(directories[d], '/');
        slash[slash == directories[d] ? 1 : 0] = '\0';
    }
    for (int d = 0; d < 2; d++) {
        const char *directory = directories[d];
        const char *base = strcmp(directory, "/") ? directory : "";
        char candidate[16384];
        for (int c = 0; c < 3; c++) {
            int n = c == 0   ? snprintf(candidate, sizeof candidate, "%s/%s", base, name)
                    : c == 1 ? snprintf(candidate, sizeof candidate, "%s/.debug/%s", base, name)
                             : snprintf(candidate, sizeof candidate, DEBUG_ROOT "/%s%s%s", directory + 1,
                                        directory[1] ? "/" : "", name);
            struct stat st;
            if (n < 0 || (size_t)n >= sizeof candidate || (stat(candidate, &st) == 0 && S_ISREG(st.st_mode)))
                return false;
        }
    }
    return true;
}

/* The separate debug file by build-id (elf/__init__.py find_debug_file, its first rule); UNSERVED
 * where the second rule (.gnu_debuglink, CRC-checked) could find one. */
static fu_cli_module_status open_debug_file(fu_cli_image *image, const char *path)
{
    const fu_cli_elf *elf = &image->elf;
    if (elf->build_id_size > 1) {
        char path[256] = DEBUG_ROOT "/.build-id/";
        size_t at = strlen(path);
        for (size_t i = 0; i < elf->build_id_size; i++) {
            at += (size_t)snprintf(path + at, sizeof path - at, "%02x", elf->build_id[i]);
            if (i == 0)
                path[at++] = '/';
        }
        snprintf(path + at, sizeof path - at, ".debug");
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            fu_cli_bytes bytes;
            if (!fu_cli_read_file(path, &bytes))
                return FU_CLI_MODULE_UNSERVED;
            if (fu_cli_elf_open(&image->debug, bytes) != FU_CLI_MODULE_OK)
                return FU_CLI_MODULE_UNSERVED;
            if (image->debug.build_id_size == elf->build_id_size &&
                memcmp(image->debug.build_id, elf->build_id, elf->build_id_size) == 0)
                return FU_CLI_MODULE_OK;
            fu_cli_elf_free(&image->debug);
        }
    }
    return debuglink_candidates_absent(image, path) ? FU_CLI_MODULE_OK : FU_CLI_MODULE_UNSERVED;
}

/* The debug file's path (as open_debug_file built it), into `path`. */
static void debug_file_path(const fu_cli_elf *elf, char *path, size_t size)
{
    size_t at = (size_t)snprintf(path, size, DEBUG_ROOT "/.build-id/");
    for (size_t i = 0; i < elf->build_id_size && at < size; i++) {
        at += (size_t)snprintf(path + at, size - at, "%02x", elf->build_id[i]);
        if (i == 0 && at < size)
            path[at++] = '/';
    }
    if (at < size)
        snprintf(path + at, size - at, ".debug");
}

/* image.py process_entry (elf/dynamic.py): e_entry for an executable, a file with PT_INTERP or one
 * that needs no library; else 0. UNSERVED where .dynamic cannot be read as the Python reader does. */
static fu_cli_module_status process_entry(const fu_cli_elf *elf, uint64_t *entry)
{
    bool interpreter = false, needed = false;
    for (size_t i = 0; i < elf->phnum; i++)
        if (phdr(elf, i)->p_type == PT_INTERP) {
            if (!within(elf, phdr(elf, i)->p_offset, phdr(elf, i)->p_filesz))
                return FU_CLI_MODULE_UNSERVED;
            interpreter = true;
        }
    const Elf64_Shdr *dynamic = section_named(elf, ".dynamic");
    if (dynamic && dynamic->sh_link > 0 && dynamic->sh_link < elf->shnum) {
        const uint8_t *data, *strings;
        size_t size, strings_size;
        if (!section_bytes(elf, dynamic, &data, &size) ||
            !section_bytes(elf, shdr(elf, dynamic->sh_link), &strings, &strings_size))
            return FU_CLI_MODULE_UNSERVED;
        for (size_t at = 0; at + sizeof(Elf64_Dyn) <= size; at += sizeof(Elf64_Dyn)) {
            Elf64_Dyn d;
            memcpy(&d, data + at, sizeof d);
            if (d.d_tag == DT_NULL)
                break;
            if (d.d_tag == DT_NEEDED && d.d_un.d_val < strings_size)
                needed = true;
        }
    }
    *entry = elf->type == ET_EXEC || interpreter || !needed ? elf->entry : 0;
    return FU_CLI_MODULE_OK;
}

/* The PT_LOAD segments with bytes in the file, `read_only` ones or all (image.py segments,
 * frame_sections.py SectionBases.segments). */
static fu_cli_module_status load_segments(const fu_cli_elf *elf, bool read_only, fu_image_segment **out, size_t *count)
{
    *out = calloc(elf->phnum ? elf->phnum : 1, sizeof **out);
    *count = 0;
    if (!*out)
        return FU_CLI_MODULE_UNSERVED;
    for (size_t i = 0; i < elf->phnum; i++) {
        const Elf64_Phdr *p = phdr(elf, i);
        if (p->p_type != PT_LOAD || !p->p_filesz || (read_only && p->p_flags & PF_W))
            continue;
        if (!within(elf, p->p_offset, p->p_filesz))
            return FU_CLI_MODULE_UNSERVED;
        (*out)[(*count)++] = (fu_image_segment){p->p_vaddr, elf->bytes.data + p->p_offset, p->p_filesz};
    }
    return FU_CLI_MODULE_OK;
}

/* The table of one CFI section with only the FDEs lookups in `ranges` return (image.py
 * slow_row_tables; ranges NULL: all). */
static fu_cli_module_status parse_frame_table(const fu_cli_elf *elf, const Elf64_Shdr *s, frame_kind kind,
                                              const uint64_t *ranges, size_t range_count, fu_cfi_table **out,
                                              fu_image_segment **segments)
{
    const uint8_t *data;
    size_t size, segment_count;
    if (elf->type == ET_REL || !section_bytes(elf, s, &data, &size))
        return FU_CLI_MODULE_UNSERVED; /* relocated sections: the Python reader's */
    if (load_segments(elf, false, segments, &segment_count) != FU_CLI_MODULE_OK)
        return FU_CLI_MODULE_UNSERVED;
    const Elf64_Shdr *text = section_named(elf, ".text"), *got = section_named(elf, ".got");
    fu_section section = {
        .kind = kind == EH_FRAME ? FU_SECTION_EH_FRAME : FU_SECTION_DEBUG_FRAME,
        .data = data,
        .size = size,
        .address = s->sh_addr,
        .text_base = text ? text->sh_addr : 0,
        .data_base = got ? got->sh_addr : 0,
        .address_size = 8,
        .segments = *segments,
        .segment_count = segment_count,
    };
    fu_cfi_table *table = calloc(1, sizeof *table);
    fu_error err = {0};
    if (!table)
        return FU_CLI_MODULE_UNSERVED;
    *out = table;
    if (fu_cfi_table_parse(table, &section, &err) != FU_OK ||
        fu_cfi_table_evaluate_ranges(table, ranges, range_count, &err) != FU_OK)
        return FU_CLI_MODULE_UNSERVED; /* the Python path's error to word */
    return FU_CLI_MODULE_OK;
}

/* ---- the caches ------------------------------------------------------------------------------- */

/* The table with `synth`'s rows (FU_COMPACT_SYNTH_*): tables/compact.py cache_path names it
 * `<build-id>.fut`, or `<build-id>.synth-<mode>-v<version>.fut` with rows derived from the code. */
static fu_cli_module_status open_compact_table(fu_cli_image *image, const Elf64_Shdr *eh_frame,
                                               const fu_cli_elf *debug_owner, const Elf64_Shdr *debug_frame,
                                               unsigned synth)
{
    char path[4096], suffix[64];
    uint32_t synth_value = synth == FU_COMPACT_SYNTH_OFF ? 0 : synth | FU_COMPACT_SYNTH_VERSION << 8;
    if (!fu_compact_cache_suffix(synth, suffix, sizeof suffix) ||
        !fu_cache_entry_path("compact", image->elf.build_id, image->elf.build_id_size, suffix, path, sizeof path))
        return FU_CLI_MODULE_UNSERVED;
    fu_error err = {0};
    if (!fu_cli_read_file(path, &image->compact_file) ||
        image->compact_file.size < sizeof(fu_compact_header) ||
        fu_compact_open(&image->compact, image->compact_file.data, image->compact_file.size, &err) != FU_OK)
        return FU_CLI_MODULE_UNSERVED;
    const fu_compact_header *h = image->compact.header;
    uint64_t eh_size = eh_frame ? eh_frame->sh_size : FU_COMPACT_NO_SECTION;
    uint64_t debug_size = debug_frame ? debug_frame->sh_size : FU_COMPACT_NO_SECTION;
    if (h->key_kind != FU_COMPACT_KEY_BUILD_ID || h->key_size != image->elf.build_id_size ||
        memcmp(h->key, image->elf.build_id, image->elf.build_id_size) != 0 || h->synth != synth_value ||
        h->eh_frame_size != eh_size || h->debug_frame_size != debug_size)
        return FU_CLI_MODULE_UNSERVED;
    if (h->slow_row_count == 0)
        return FU_CLI_MODULE_OK;
    uint64_t ranges[2 * FU_CFI_MAX_SELECTED_RANGES];
    size_t count = fu_compact_slow_ranges(&image->compact, ranges, FU_CFI_MAX_SELECTED_RANGES);
    const uint64_t *selected = count > FU_CFI_MAX_SELECTED_RANGES ? NULL : ranges;
    if (count > FU_CFI_MAX_SELECTED_RANGES)
        count = 0;
    if (eh_frame && parse_frame_table(&image->elf, eh_frame, EH_FRAME, selected, count, &image->eh_frame,
                                      &image->cfi_segments[0]) != FU_CLI_MODULE_OK)
        return FU_CLI_MODULE_UNSERVED;
    if (debug_frame && parse_frame_table(debug_owner, debug_frame, DEBUG_FRAME, selected, count,
                                         &image->debug_frame, &image->cfi_segments[1]) != FU_CLI_MODULE_OK)
        return FU_CLI_MODULE_UNSERVED;
    return FU_CLI_MODULE_OK;
}

/* The cached eh_elf, where one is valid (tables/eh_elf.py for_image: FASTUNWIND_COMPILED=0 disables
 * them); false where the cache cannot be named. */
static bool open_compiled(fu_cli_image *image, const Elf64_Shdr *eh_frame, const Elf64_Shdr *debug_frame)
{
    const char *enabled = getenv("FASTUNWIND_COMPILED");
    if (enabled && strcmp(enabled, "0") == 0)
        return true;
    char path[4096], why[512];
    if (!fu_cache_entry_path("eh_elf", image->elf.build_id, image->elf.build_id_size, ".so", path, sizeof path))
        return false;
    if (access(path, F_OK) != 0)
        return true;
    if (fu_eh_elf_load(path, FU_COMPACT_KEY_BUILD_ID, image->elf.build_id, image->elf.build_id_size,
                       FU_EH_ELF_GENERATOR_VERSION, true, eh_frame ? eh_frame->sh_size : FU_EH_ELF_NO_SECTION,
                       debug_frame ? debug_frame->sh_size : FU_EH_ELF_NO_SECTION, &image->compiled, why,
                       sizeof why) == NULL)
        image->compiled_table = (fu_eh_elf_table){image->compiled.step, image->compiled.find, image->compiled.bodies,
                                                  image->compiled.info.body_count};
    return true;
}

static fu_cli_module_status open_symbol_table(fu_cli_image *image, const char *path)
{
    fu_buffer key = {0};
    char hex[2 * FU_CLI_MAX_BUILD_ID + 1], debug_path[256] = "";
    for (size_t i = 0; i < image->elf.build_id_size; i++)
        snprintf(hex + 2 * i, 3, "%02x", image->elf.build_id[i]);
    if (image->debug.bytes.data)
        debug_file_path(&image->elf, debug_path, sizeof debug_path);
    bool built = fu_symbol_key_elf(hex, path, debug_path, &key);
    char file[4096];
    fu_error err = {0};
    fu_cli_module_status status = FU_CLI_MODULE_UNSERVED;
    if (built && fu_cache_entry_path("symbols", image->elf.build_id, image->elf.build_id_size, ".fus", file,
                                             sizeof file) &&
        fu_cli_read_file(file, &image->symbol_file) &&
        fu_symbol_cache_load(image->symbol_file.data, image->symbol_file.size, key.data, key.len, &image->symbols,
                             &err) == FU_OK) {
        image->has_symbols = true;
        status = FU_CLI_MODULE_OK;
    }
    free(key.data);
    return status;
}

/* The vDSO's symbol table, built as symbols.py _symbol_table_of builds it for a file without a
 * debug file or PLT: its .symtab, else its .dynsym. */
static fu_cli_module_status build_vdso_symbols(fu_cli_image *image)
{
    const fu_cli_elf *elf = &image->elf;
    if (section_named(elf, ".plt") || section_named(elf, ".plt.sec") || section_named(elf, ".plt.got"))
        return FU_CLI_MODULE_UNSERVED;
    uint8_t flags[SHN_LORESERVE];
    for (size_t i = 0; i < elf->shnum; i++)
        flags[i] = strstr(section_name(elf, shdr(elf, i)), "text") ? 1 : 0;
    fu_symbol_source source;
    size_t sources = 0;
    for (unsigned type = SHT_SYMTAB; !sources && type <= SHT_DYNSYM; type += SHT_DYNSYM - SHT_SYMTAB) {
        for (size_t i = 0; i < elf->shnum; i++) {
            const Elf64_Shdr *s = shdr(elf, i);
            const uint8_t *symbols, *strings;
            size_t symbols_size, strings_size;
            if (s->sh_type != type || s->sh_link >= elf->shnum)
                continue;
            if (!section_bytes(elf, s, &symbols, &symbols_size) ||
                !section_bytes(elf, shdr(elf, s->sh_link), &strings, &strings_size))
                return FU_CLI_MODULE_UNSERVED;
            source = (fu_symbol_source){symbols, symbols_size, (const char *)strings, strings_size, 64, flags,
                                        elf->shnum};
            sources = 1;
            break;
        }
    }
    fu_error err = {0};
    if (fu_symbols_from_elf(&source, sources, NULL, &image->symbols, &err) != FU_OK)
        return FU_CLI_MODULE_UNSERVED;
    image->has_symbols = true;
    return FU_CLI_MODULE_OK;
}

/* ---- the image -------------------------------------------------------------------------------- */

static fu_cli_module_status image_open(fu_cli_image *image, const char *path, fu_cli_bytes bytes, bool vdso);

fu_cli_module_status fu_cli_image_open(fu_cli_image *image, const char *path, fu_cli_bytes bytes, bool vdso)
{
    fu_cli_module_status status = image_open(image, path, bytes, vdso);
    if (status == FU_CLI_MODULE_UNSERVED)
        fu_cli_unserved("a module not read here as the Python reader reads it", vdso ? "[vdso]" : path);
    return status;
}

/* What image.py's ModuleImage reads when it opens a file: headers, build-id, the debug file, the
 * CFI sections' sizes, the read-only segments. */
static fu_cli_module_status image_open(fu_cli_image *image, const char *path, fu_cli_bytes bytes, bool vdso)
{
    fu_cli_module_status status = fu_cli_elf_open(&image->elf, bytes);
    if (status != FU_CLI_MODULE_OK)
        return status;
    fu_cli_elf *elf = &image->elf;
    image->vdso = vdso;
    if (!elf->build_id_size)
        return FU_CLI_MODULE_UNSERVED; /* tables cached under a hash of path, size and mtime */
    if (open_debug_file(image, path) != FU_CLI_MODULE_OK)
        return FU_CLI_MODULE_UNSERVED;
    bool compressed = false;
    image->eh_frame_section = frame_section(elf, EH_FRAME, &compressed);
    image->debug_frame_owner = elf;
    image->debug_frame_section = frame_section(elf, DEBUG_FRAME, &compressed);
    if (!image->debug_frame_section && image->debug.bytes.data) {
        image->debug_frame_owner = &image->debug;
        image->debug_frame_section = frame_section(&image->debug, DEBUG_FRAME, &compressed);
    }
    if (compressed || load_segments(elf, true, &image->segments, &image->segment_count) != FU_CLI_MODULE_OK ||
        process_entry(elf, &image->process_entry) != FU_CLI_MODULE_OK)
        return FU_CLI_MODULE_UNSERVED;
    if (vdso)
        return image->debug.bytes.data ? FU_CLI_MODULE_UNSERVED : FU_CLI_MODULE_OK;
    return (image->path = strdup(path)) ? FU_CLI_MODULE_OK : FU_CLI_MODULE_UNSERVED;
}

bool fu_cli_image_tables(fu_cli_image *image, unsigned synth)
{
    if (image->tables_loaded)
        return image->synth == synth;
    image->synth = synth;
    if (open_compact_table(image, image->eh_frame_section, image->debug_frame_owner, image->debug_frame_section,
                           synth) !=
            FU_CLI_MODULE_OK ||
        !open_compiled(image, image->eh_frame_section, image->debug_frame_section) ||
        (image->vdso && build_vdso_symbols(image) != FU_CLI_MODULE_OK)) {
        fu_cli_unserved("a module whose unwind tables are not in the cache", image->vdso ? "[vdso]" : image->path);
        return false;
    }
    image->tables_loaded = true;
    return true;
}

void fu_cli_image_free(fu_cli_image *image)
{
    if (image->has_symbols)
        fu_symbol_table_free(&image->symbols);
    fu_eh_elf_unload(&image->compiled);
    free(image->path);
    for (int i = 0; i < 2; i++)
        free(image->cfi_segments[i]);
    fu_cfi_table *tables[2] = {image->eh_frame, image->debug_frame};
    for (int i = 0; i < 2; i++)
        if (tables[i]) {
            fu_cfi_table_free(tables[i]);
            free(tables[i]);
        }
    free(image->segments);
    fu_cli_bytes_free(&image->compact_file);
    fu_cli_bytes_free(&image->symbol_file);
    fu_cli_elf_free(&image->debug);
    fu_cli_elf_free(&image->elf);
    memset(image, 0, sizeof *image);
}

bool fu_cli_image_bias(const fu_cli_image *image, uint64_t start, uint64_t end, uint64_t pgoff, uint64_t *bias)
{
    const fu_cli_elf *elf = &image->elf;
    const Elf64_Phdr *candidates[64];
    size_t count = 0;
    for (size_t i = 0; i < elf->phnum && count < 64; i++) {
        const Elf64_Phdr *p = phdr(elf, i);
        uint64_t first_page = p->p_offset - p->p_offset % PAGE_SIZE;
        if (p->p_type == PT_LOAD && first_page <= pgoff && pgoff < p->p_offset + p->p_filesz)
            candidates[count++] = p;
    }
    if (!count)
        return false;
    for (size_t i = 0; i < count; i++)
        if (candidates[i]->p_flags & PF_X) {
            *bias = start - pgoff + candidates[i]->p_offset - candidates[i]->p_vaddr;
            return true;
        }
    for (size_t i = 0; i < count; i++) {
        uint64_t b = start - pgoff + candidates[i]->p_offset - candidates[i]->p_vaddr;
        if (candidates[i]->p_vaddr + b < end && start < candidates[i]->p_vaddr + b + candidates[i]->p_memsz) {
            *bias = b;
            return true;
        }
    }
    *bias = start - pgoff + candidates[0]->p_offset - candidates[0]->p_vaddr;
    return true;
}

void fu_cli_image_module(const fu_cli_image *image, uint64_t start, uint64_t end, uint64_t bias, uint32_t id,
                         fu_module *out)
{
    *out = (fu_module){
        .start = start,
        .end = end,
        .bias = bias,
        .compact = &image->compact,
        .compiled = image->compiled.handle ? &image->compiled_table : NULL,
        .eh_frame = image->eh_frame,
        .debug_frame = image->debug_frame,
        .segments = image->segments,
        .segment_count = image->segment_count,
        .id = id,
    };
    fu_module_set_entry(out, image->process_entry);
}

const fu_symbol_table *fu_cli_image_symbols(fu_cli_image *image)
{
    if (!image->has_symbols && !image->symbols_missing && image->path &&
        open_symbol_table(image, image->path) != FU_CLI_MODULE_OK) {
        image->symbols_missing = true;
        fu_cli_unserved("a module's symbol table is not in the cache", image->path);
    }
    return image->has_symbols ? &image->symbols : NULL;
}

bool fu_cli_image_symbol(fu_cli_image *image, uint64_t bias, uint64_t address, uint64_t lookup,
                         const char **name, size_t *name_len, uint64_t *offset)
{
    fu_cli_image_symbols(image);
    /* Python's lookup - bias, with the bias signed: below 0 or past 2^64, no symbol */
    __int128 svma = (__int128)lookup - (__int128)(int64_t)bias;
    size_t index;
    if (!image->has_symbols || svma < 0 || svma > (__int128)UINT64_MAX ||
        !fu_symbol_find(&image->symbols, (uint64_t)svma, &index))
        return false;
    *name = fu_symbol_name(&image->symbols, index, name_len);
    *offset = (uint64_t)svma - image->symbols.starts[index] + (address - lookup);
    return true;
}

/* ---- the images of one snapshot ------------------------------------------------------------------ */

bool fu_cli_images_init(fu_cli_images *set)
{
    set->count = 0;
    set->images = calloc(FU_CLI_MAX_IMAGES, sizeof *set->images);
    set->keys = calloc(FU_CLI_MAX_IMAGES, sizeof *set->keys);
    return set->images && set->keys;
}

void fu_cli_images_free(fu_cli_images *set)
{
    for (size_t i = 0; i < set->count; i++)
        fu_cli_image_free(&set->images[i]);
    free(set->images);
    free(set->keys);
    memset(set, 0, sizeof *set);
}

/* The image of the file at `path` (address_space.py ImageCache.get): NULL where the Python path
 * has none; *unserved where it would have one this reader cannot promise to be the same. */
fu_cli_image *fu_cli_images_get(fu_cli_images *set, const char *path, bool *unserved)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL; /* no file there: no image (os.path.isfile) */
    for (size_t i = 0; i < set->count; i++) {
        const struct stat *k = &set->keys[i];
        if (k->st_dev == st.st_dev && k->st_ino == st.st_ino && k->st_size == st.st_size &&
            k->st_mtim.tv_sec == st.st_mtim.tv_sec && k->st_mtim.tv_nsec == st.st_mtim.tv_nsec)
            return &set->images[i];
    }
    if (set->count == FU_CLI_MAX_IMAGES) {
        *unserved = true;
        return NULL;
    }
    fu_cli_bytes bytes;
    if (!fu_cli_read_file(path, &bytes)) {
        *unserved = true; /* readable by stat, not by us: the Python reader's to say */
        return NULL;
    }
    fu_cli_image *image = &set->images[set->count];
    fu_cli_module_status status = fu_cli_image_open(image, path, bytes, false);
    if (status == FU_CLI_MODULE_OK) {
        set->keys[set->count++] = st;
        return image;
    }
    fu_cli_image_free(image);
    *unserved = status == FU_CLI_MODULE_UNSERVED; /* UNREADABLE: not ELF, no image for either path */
    return NULL;
}

