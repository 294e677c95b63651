/* cache_paths: where fastunwind's caches live and how an entry is named (cache.py's layout, one
 * home for the Python path, through _core, and the launcher):
 *
 *   $XDG_CACHE_HOME/fastunwind/KIND/NAME SUFFIX   (~/.cache where XDG_CACHE_HOME is unset or empty)
 *
 * and the keys a symbol table's entry is checked against (symbol_cache.h stores the key in the
 * entry): an ELF file's ("elf", its build-id in hex, the identity of the file and of its separate
 * debug file), an ELF image copied from memory's, such as the vDSO ("image", its build-id in hex,
 * its separate debug file and that file's identity: no file of its own to identify) and a kallsyms
 * copy's ("kallsyms", its path and identity), NUL-separated, where a
 * file's identity is its device, inode, size and modification time in ns (in decimal,
 * NUL-separated; nothing for a file that is not there).
 */
#ifndef FASTUNWIND_CACHE_PATHS_H
#define FASTUNWIND_CACHE_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

/* The caches' root ($XDG_CACHE_HOME/fastunwind, else $HOME/.cache/fastunwind, else the user's home
 * directory from the password database) into `out`; false if it is unknown or longer than `size`. */
bool fu_cache_root(char *out, size_t size);
/* The kind and suffix of the launcher's records of a recording's needs (native/cli/recording.c:
 * the files a check before its first write read, by identity), entries of the caches as the
 * tables are (cache.py KINDS: listed, pruned and cleared with them). */
#define FU_NEEDS_CACHE_KIND "recordings"
#define FU_NEEDS_CACHE_SUFFIX ".needs"
/* The entry of `kind` ("compact", "symbols", ...) for the build-id `build_id` (hex-encoded in the
 * name) with `suffix` (".fut", ".fus", ...) into `out`; false as fu_cache_root, or too long. */
bool fu_cache_entry_path(const char *kind, const uint8_t *build_id, size_t build_id_size, const char *suffix,
                         char *out, size_t size);

/* The suffix of a compact table's entry with `synth`'s rows (FU_COMPACT_SYNTH_*: tables/compact.py
 * cache_path): ".fut", or ".synth-MODE-vVERSION.fut"; false if longer than `size`. */
bool fu_compact_cache_suffix(unsigned synth, char *out, size_t size);

/* perf's build-id cache (perf-buildid-cache(1), elf/build_id_cache.py), where `perf record` keeps a
 * copy of every file it saw: $PERF_BUILDID_DIR, else ~/.debug. */
#define FU_BUILD_ID_CACHE_PATH_MAX 8192
#define FU_BUILD_ID_CACHE_MAX_ID 32 /* build-id bytes a name holds at most */
/* What /proc/PID/maps and MMAP records append to the name of a file unlinked while mapped. */
#define FU_DELETED_SUFFIX " (deleted)"
bool fu_build_id_cache_root(char *out, size_t size);
/* Its copy of `name` (a path, or a pseudo file: [kernel.kallsyms], [vdso]) with the build-id
 * `build_id_hex`: ROOT/NAME (without its leading slashes)/HEX/FILE ("elf", "kallsyms", "vdso"),
 * appended to `out` with its NUL; false if too long or out of memory. */
bool fu_build_id_cache_file(const char *name, const char *build_id_hex, const char *file, fu_buffer *out);
/* Where perf may keep its copy of `name` recorded with `build_id` (padded with zeros to 20 bytes
 * in a recording; a file's note may be shorter: lld writes 8), in the order they are tried
 * (perf/replay.py): by name (and the name without FU_DELETED_SUFFIX), then under .build-id/, each
 * with the build-id without its zero padding, then as recorded; each appended to `out` with its
 * NUL. False if a path is too long or out of memory. */
bool fu_build_id_cache_candidates(const char *name, const uint8_t *build_id, size_t size, const char *file,
                                  fu_buffer *out);

/* The key of an ELF file's symbol table (symbols.py symbol_table_for_file): appended to `out`;
 * debug_path NULL or "": none. False when out of memory. */
bool fu_symbol_key_elf(const char *build_id_hex, const char *path, const char *debug_path, fu_buffer *out);
/* The key of the symbol table of an ELF image held in memory (the vDSO a process or a core holds),
 * which its build-id names (symbols.py symbol_table_for_file), appended to `out`; debug_path NULL
 * or "": none. False when out of memory. */
bool fu_symbol_key_memory_image(const char *build_id_hex, const char *debug_path, fu_buffer *out);
/* The key of a kallsyms copy's symbol table (symbols.py cached_kernel_symbol_table), appended to
 * `out`; false when out of memory or when there is no file at `path` (nothing to key). */
bool fu_symbol_key_kallsyms(const char *path, fu_buffer *out);

#endif
