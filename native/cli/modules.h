/* modules: a process's modules opened for the launcher as the Python path opens them
 * (image.py, address_space.py, tables/compact.py, symbols.py), with the tables taken from the
 * caches the Python path writes, under the same names and keys (cache.py).
 *
 * A module is served only when every fact the Python path would use is one this reader knows to
 * be the same: an ELF64 x86-64 file whose headers lie within it, with a build-id, its compact
 * table in the cache for that build-id and the sizes of the CFI sections it has now, its symbol
 * table in the cache for the key symbols.py computes; no compressed CFI section, no .gnu_debuglink
 * candidate (its CRC is the Python path's to check). A cached eh_elf (the auto backend's second
 * table) is loaded and checked as tables/eh_elf.py does (core/eh_elf.c fu_eh_elf_load). Anything else is FU_CLI_MODULE_UNSERVED: the launcher hands the command to the Python
 * CLI, which builds and caches what was missing.
 */
#ifndef FASTUNWIND_CLI_MODULES_H
#define FASTUNWIND_CLI_MODULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "address_space.h"
#include "cfi.h"
#include "compact_table.h"
#include "eh_elf.h"
#include "elf_file.h"
#include "mapped_file.h"
#include "symbols.h"

/* Most distinct module files one snapshot opens (a process maps a few hundred at most). */
#define FU_CLI_MAX_IMAGES 4096

/* Bytes of a file mapped read-only (`mapped`, closed by fu_cli_bytes_free), or owned (free'd) when
 * `owned`. */
typedef struct fu_cli_bytes {
    const uint8_t *data;
    size_t size;
    bool owned;
    fu_mapped_file mapped;
} fu_cli_bytes;

/* An ELF file the launcher read: its bytes, its headers (core/elf_file.h) and its build-id. */
typedef struct fu_cli_elf {
    fu_cli_bytes bytes;
    fu_elf file;
    uint8_t build_id[FU_ELF_MAX_BUILD_ID];
    size_t build_id_size; /* 0: none */
} fu_cli_elf;

/* One module file, opened once per snapshot. */
typedef struct fu_cli_image {
    dev_t dev;
    ino_t ino;
    fu_cli_elf elf;
    fu_cli_elf debug;            /* its separate debug file (by build-id), bytes.data NULL if none */
    fu_image_segment *segments;  /* read-only PT_LOAD bytes by svma (the walker's image reads) */
    size_t segment_count;
    uint64_t process_entry;      /* image.py process_entry */
    fu_cli_bytes compact_file;
    fu_compact_table compact;
    fu_cfi_table *eh_frame, *debug_frame; /* the compact table's slow rows' FDEs, or NULL */
    fu_image_segment *cfi_segments[2];    /* the bases' segments of each parsed table */
    fu_eh_elf_loaded compiled;   /* handle NULL: none */
    fu_eh_elf_table compiled_table;
    char *path;                  /* what the Python path names the image by (the symbol key's path) */
    char *debug_path;            /* the path of `debug` (the symbol key's debug path), or NULL */
    bool vdso;                   /* the vDSO's copy: its symbol table built here, not cached */
    bool tables_loaded;          /* fu_cli_image_tables done */
    unsigned synth;              /* the synthesized rows of its compact table (FU_COMPACT_SYNTH_*) */
    fu_elf_section eh_frame_section, debug_frame_section; /* the CFI it has, where has_* */
    bool has_eh_frame, has_debug_frame;
    const fu_cli_elf *debug_frame_owner;                  /* the file of debug_frame_section */
    fu_cli_bytes symbol_file;
    fu_symbol_table symbols;
    bool has_symbols;
    bool symbols_missing;        /* asked for, not in the cache: the snapshot is the Python path's */
} fu_cli_image;

typedef enum fu_cli_module_status {
    FU_CLI_MODULE_OK = 0,
    FU_CLI_MODULE_UNREADABLE, /* not a file the Python path opens either (its mapping has no image) */
    FU_CLI_MODULE_UNSERVED,   /* the Python path must serve the snapshot */
} fu_cli_module_status;

/* Open the ELF file of `bytes` (taken: freed by fu_cli_elf_free whatever the outcome). */
fu_cli_module_status fu_cli_elf_open(fu_cli_elf *elf, fu_cli_bytes bytes);
void fu_cli_elf_free(fu_cli_elf *elf);
/* The regular file at `path`, not empty, mapped read-only; false for anything else. */
bool fu_cli_read_file(const char *path, fu_cli_bytes *out);
/* Every file fu_cli_read_file reads from now on is named to `seen` with its fstat (NULL: none):
 * how a check of a recording's needs learns the files it read (recording.c). */
typedef void (*fu_cli_file_seen_fn)(void *context, const char *path, const struct stat *st);
void fu_cli_observe_files(fu_cli_file_seen_fn seen, void *context);
/* Name `path` to the observer as a file read (a file whose identity a key holds, not read here). */
void fu_cli_note_file(const char *path);
void fu_cli_bytes_free(fu_cli_bytes *bytes);

/* Open the image of the ELF file in `bytes` (taken) found at `path` (what the Python path names
 * the image by: the symbol key's path): what image.py reads when it opens one. `vdso`: the bytes
 * are the vDSO's copy from memory, whose symbol table is built here (the Python path's key for it
 * names a descriptor that may be another file's by then, so its cache entry is not this one's). */
fu_cli_module_status fu_cli_image_open(fu_cli_image *image, const char *path, fu_cli_bytes bytes, bool vdso);
void fu_cli_image_free(fu_cli_image *image);
/* Its unwind tables from the caches (and a vDSO's symbols), once: for an image a mapping uses, as
 * the Python path builds them only for those; its compact table the one with `synth`'s rows
 * (FU_COMPACT_SYNTH_*: tables/compact.py for_image). False (the reason noted): the Python path's. */
bool fu_cli_image_tables(fu_cli_image *image, unsigned synth);

/* avma - svma of an executable mapping [start, end) of file offset pgoff (core/elf_file.h
 * fu_elf_mapping_bias, as image.py bias_for_mapping); false if no PT_LOAD holds pgoff. */
bool fu_cli_image_bias(const fu_cli_image *image, uint64_t start, uint64_t end, uint64_t pgoff, uint64_t *bias);

/* The module of `image` mapped at [start, end) with `bias`, its tables as the auto backend sees
 * them; `id` the caller's. */
void fu_cli_image_module(const fu_cli_image *image, uint64_t start, uint64_t end, uint64_t bias, uint32_t id,
                         fu_module *out);

/* The symbol at `lookup` (an avma) of `image` mapped at `bias`: its name and the offset of
 * `address` into it; false without one (stacks.py _name). The symbol table is opened on first use,
 * as the Python path builds it on first use: one not in the cache sets image->symbols_missing. */
bool fu_cli_image_symbol(fu_cli_image *image, uint64_t bias, uint64_t address, uint64_t lookup,
                         const char **name, size_t *name_len, uint64_t *offset);

/* Its symbol table (symbols.py symbol_table_for_file), opened from the cache on first use; NULL
 * when it is not there (image->symbols_missing set, the reason noted: the Python path's run). */
const fu_symbol_table *fu_cli_image_symbols(fu_cli_image *image);

/* The images of one snapshot, by the file they were read from (device, inode, size, mtime: live.py
 * FileImages), each opened once. */
typedef struct fu_cli_images {
    fu_cli_image *images;
    struct stat *keys;
    size_t count;
} fu_cli_images;

bool fu_cli_images_init(fu_cli_images *set);
void fu_cli_images_free(fu_cli_images *set);
/* The image of the file at `path` (address_space.py ImageCache.get): NULL where the Python path has
 * none (no regular file there, not ELF); *unserved where it would have one this reader cannot
 * promise to be the same. */
fu_cli_image *fu_cli_images_get(fu_cli_images *set, const char *path, bool *unserved);

#endif
