/* A process's module files opened as the Python path opens them: see modules.h. */
#define _GNU_SOURCE
#include "modules.h"

#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_paths.h"
#include "launcher.h"
#include "symbol_cache.h"

void fu_cli_bytes_free(fu_cli_bytes *bytes)
{
    if (bytes->owned)
        free((void *)bytes->data);
    else
        fu_mapped_file_close(&bytes->mapped);
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
        fu_error err = {0};
        if (fu_mapped_file_open(&out->mapped, fd, (size_t)st.st_size, false, &err) == FU_OK) {
            out->data = out->mapped.data;
            out->size = out->mapped.size;
            ok = true;
            if (file_seen)
                file_seen(file_seen_context, path, &st);
        }
    }
    close(fd);
    return ok;
}

/* ---- ELF headers ------------------------------------------------------------------------------ */

/* A section's bytes as the file holds them; false where it has none (SHT_NOBITS) or they overrun it. */
static bool section_bytes(const fu_cli_elf *elf, const fu_elf_section *s, const uint8_t **data, size_t *size)
{
    fu_error err = {0};
    return s->type != SHT_NOBITS && fu_elf_section_bytes(&elf->file, s, data, size, &err) == FU_OK;
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
    fu_error err = {0};
    fu_cli_module_status status = FU_CLI_MODULE_UNSERVED;
    if (bytes.size < sizeof(Elf64_Ehdr) || memcmp(bytes.data, ELFMAG, SELFMAG) != 0)
        status = FU_CLI_MODULE_UNREADABLE;
    /* a malformed file, another class or machine, more sections than the vDSO's symbol flags hold:
     * the Python reader's to judge */
    else if (fu_elf_open(&elf->file, bytes.data, bytes.size, &err) == FU_OK && elf->file.elf_class == 64 &&
             elf->file.machine == EM_X86_64 && elf->file.section_count < SHN_LORESERVE &&
             fu_elf_build_id(&elf->file, elf->build_id, &elf->build_id_size, &err) == FU_OK)
        return FU_CLI_MODULE_OK;
    fu_cli_elf_free(elf);
    return status;
}

/* ---- what image.py and frame_sections.py read -------------------------------------------------- */

typedef enum { EH_FRAME = 0, DEBUG_FRAME = 1 } frame_kind;

/* The first section of `kind` with contents (frame_sections.py frame_sources) into *out; false
 * without one; *unserved when it is compressed (the Python reader decompresses it). */
static bool frame_section(const fu_cli_elf *elf, frame_kind kind, fu_elf_section *out, bool *unserved)
{
    for (size_t i = 0; i < elf->file.section_count; i++) {
        fu_elf_section s = fu_elf_section_at(&elf->file, i);
        const char *name = fu_elf_section_name(&elf->file, &s);
        bool is_kind = kind == EH_FRAME ? strcmp(name, ".eh_frame") == 0
                                        : strcmp(name, ".debug_frame") == 0 || strcmp(name, ".zdebug_frame") == 0;
        if (!is_kind || s.size == 0 || s.type == SHT_NOBITS)
            continue;
        if (s.flags & SHF_COMPRESSED || name[1] == 'z')
            *unserved = true;
        *out = s;
        return true;
    }
    return false;
}

/* The separate debug file (elf/__init__.py find_debug_file: core/elf_file.h
 * fu_elf_debug_candidates, in order): a file by build-id whose own build-id is the same is opened;
 * UNSERVED where a .gnu_debuglink candidate exists (its CRC-32 is the Python path's to check), or
 * the link is one the Python path would read otherwise (malformed, not a plain name: it raises or
 * warns). */
static fu_cli_module_status open_debug_file(fu_cli_image *image, const char *path)
{
    const fu_cli_elf *elf = &image->elf;
    static const char *const roots[] = {FU_ELF_DEBUG_ROOT};
    fu_error err = {0};
    const char *link = NULL;
    uint32_t crc;
    char resolved[4096];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            /* by the link, read only when no file by build-id is found */
            if (fu_elf_debuglink(&elf->file, &link, &crc, &err) != FU_OK)
                return FU_CLI_MODULE_UNSERVED;
            if (!link)
                return FU_CLI_MODULE_OK;
            if (path[0] != '/' || !realpath(path, resolved))
                return FU_CLI_MODULE_UNSERVED;
        }
        fu_buffer paths = {0};
        fu_elf_debug_rule rules[FU_ELF_MAX_DEBUG_CANDIDATES];
        size_t count;
        bool link_ignored;
        if (fu_elf_debug_candidates(pass == 0 ? elf->build_id : NULL, pass == 0 ? elf->build_id_size : 0, link, path,
                                    pass == 0 ? path : resolved, roots, 1, &paths, rules, &count, &link_ignored,
                                    &err) != FU_OK ||
            link_ignored) {
            free(paths.data);
            return FU_CLI_MODULE_UNSERVED;
        }
        fu_cli_module_status status = FU_CLI_MODULE_OK;
        const char *candidate = (const char *)paths.data;
        for (size_t i = 0; i < count && status == FU_CLI_MODULE_OK && !image->debug.bytes.data;
             i++, candidate += strlen(candidate) + 1) {
            struct stat st;
            if (stat(candidate, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            fu_cli_bytes bytes;
            if (rules[i] == FU_ELF_DEBUG_BY_LINK || !fu_cli_read_file(candidate, &bytes) ||
                fu_cli_elf_open(&image->debug, bytes) != FU_CLI_MODULE_OK) {
                status = FU_CLI_MODULE_UNSERVED;
            } else if (image->debug.build_id_size == elf->build_id_size &&
                       memcmp(image->debug.build_id, elf->build_id, elf->build_id_size) == 0) {
                image->debug_path = strdup(candidate);
                if (!image->debug_path)
                    status = FU_CLI_MODULE_UNSERVED;
            } else {
                fu_cli_elf_free(&image->debug);
            }
        }
        free(paths.data);
        if (status != FU_CLI_MODULE_OK || image->debug.bytes.data)
            return status;
    }
    return FU_CLI_MODULE_OK;
}

/* The PT_LOAD segments with bytes in the file, `read_only` ones or all (image.py segments,
 * frame_sections.py SectionBases.segments). */
static fu_cli_module_status load_segments(const fu_cli_elf *elf, bool read_only, fu_image_segment **out, size_t *count)
{
    *out = calloc(elf->file.segment_count ? elf->file.segment_count : 1, sizeof **out);
    *count = 0;
    if (!*out)
        return FU_CLI_MODULE_UNSERVED;
    for (size_t i = 0; i < elf->file.segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(&elf->file, i);
        const uint8_t *data;
        size_t size;
        fu_error err = {0};
        if (!fu_elf_segment_loaded(&p, read_only))
            continue;
        if (fu_elf_segment_bytes(&elf->file, &p, &data, &size, &err) != FU_OK)
            return FU_CLI_MODULE_UNSERVED;
        (*out)[(*count)++] = (fu_image_segment){p.vaddr, data, size};
    }
    return FU_CLI_MODULE_OK;
}

/* The table of one CFI section with only the FDEs lookups in `ranges` return (image.py
 * slow_row_tables; ranges NULL: all). */
static fu_cli_module_status parse_frame_table(const fu_cli_elf *elf, const fu_elf_section *s, frame_kind kind,
                                              const uint64_t *ranges, size_t range_count, fu_cfi_table **out,
                                              fu_image_segment **segments)
{
    const uint8_t *data;
    size_t size, segment_count;
    if (elf->file.type == ET_REL || !section_bytes(elf, s, &data, &size))
        return FU_CLI_MODULE_UNSERVED; /* relocated sections: the Python reader's */
    if (load_segments(elf, false, segments, &segment_count) != FU_CLI_MODULE_OK)
        return FU_CLI_MODULE_UNSERVED;
    uint64_t text_base, data_base;
    fu_elf_pointer_bases(&elf->file, &text_base, &data_base);
    fu_section section = {
        .kind = kind == EH_FRAME ? FU_SECTION_EH_FRAME : FU_SECTION_DEBUG_FRAME,
        .data = data,
        .size = size,
        .address = s->addr,
        .text_base = text_base,
        .data_base = data_base,
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
static fu_cli_module_status open_compact_table(fu_cli_image *image, const fu_elf_section *eh_frame,
                                               const fu_cli_elf *debug_owner, const fu_elf_section *debug_frame,
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
    uint64_t eh_size = eh_frame ? eh_frame->size : FU_COMPACT_NO_SECTION;
    uint64_t debug_size = debug_frame ? debug_frame->size : FU_COMPACT_NO_SECTION;
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
static bool open_compiled(fu_cli_image *image, const fu_elf_section *eh_frame, const fu_elf_section *debug_frame)
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
                       FU_EH_ELF_GENERATOR_VERSION, true, eh_frame ? eh_frame->size : FU_EH_ELF_NO_SECTION,
                       debug_frame ? debug_frame->size : FU_EH_ELF_NO_SECTION, &image->compiled, why,
                       sizeof why) == NULL)
        image->compiled_table = (fu_eh_elf_table){image->compiled.step, image->compiled.find, image->compiled.bodies,
                                                  image->compiled.info.body_count};
    return true;
}

static fu_cli_module_status open_symbol_table(fu_cli_image *image, const char *path)
{
    fu_buffer key = {0};
    char hex[2 * FU_ELF_MAX_BUILD_ID + 1];
    for (size_t i = 0; i < image->elf.build_id_size; i++)
        snprintf(hex + 2 * i, 3, "%02x", image->elf.build_id[i]);
    bool built = fu_symbol_key_elf(hex, path, image->debug_path ? image->debug_path : "", &key);
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
    const fu_elf *file = &elf->file;
    fu_elf_section s;
    if (fu_elf_section_named(file, ".plt", &s) || fu_elf_section_named(file, ".plt.sec", &s) ||
        fu_elf_section_named(file, ".plt.got", &s))
        return FU_CLI_MODULE_UNSERVED;
    uint8_t flags[SHN_LORESERVE]; /* fu_cli_elf_open: fewer sections */
    for (size_t i = 0; i < file->section_count; i++) {
        s = fu_elf_section_at(file, i);
        flags[i] = strstr(fu_elf_section_name(file, &s), "text") ? 1 : 0;
    }
    fu_symbol_source source;
    size_t sources = 0;
    for (unsigned type = SHT_SYMTAB; !sources && type <= SHT_DYNSYM; type += SHT_DYNSYM - SHT_SYMTAB) {
        for (size_t i = 0; i < file->section_count; i++) {
            s = fu_elf_section_at(file, i);
            const uint8_t *symbols, *strings;
            size_t symbols_size, strings_size;
            if (s.type != type || s.link >= file->section_count)
                continue;
            fu_elf_section names = fu_elf_section_at(file, s.link);
            if (!section_bytes(elf, &s, &symbols, &symbols_size) ||
                !section_bytes(elf, &names, &strings, &strings_size))
                return FU_CLI_MODULE_UNSERVED;
            source = (fu_symbol_source){symbols, symbols_size, (const char *)strings, strings_size, 64, flags,
                                        file->section_count};
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
    fu_error err = {0};
    image->has_eh_frame = frame_section(elf, EH_FRAME, &image->eh_frame_section, &compressed);
    image->debug_frame_owner = elf;
    image->has_debug_frame = frame_section(elf, DEBUG_FRAME, &image->debug_frame_section, &compressed);
    if (!image->has_debug_frame && image->debug.bytes.data) {
        image->debug_frame_owner = &image->debug;
        image->has_debug_frame = frame_section(&image->debug, DEBUG_FRAME, &image->debug_frame_section, &compressed);
    }
    if (compressed || load_segments(elf, true, &image->segments, &image->segment_count) != FU_CLI_MODULE_OK ||
        fu_elf_process_entry(&elf->file, &image->process_entry, &err) != FU_OK)
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
    const fu_elf_section *eh_frame = image->has_eh_frame ? &image->eh_frame_section : NULL,
                         *debug_frame = image->has_debug_frame ? &image->debug_frame_section : NULL;
    if (open_compact_table(image, eh_frame, image->debug_frame_owner, debug_frame, synth) != FU_CLI_MODULE_OK ||
        !open_compiled(image, eh_frame, debug_frame) ||
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
    free(image->debug_path);
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
    return fu_elf_mapping_bias(&image->elf.file, start, end, pgoff, bias);
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

