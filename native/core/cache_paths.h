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
/* The entry of `kind` ("compact", "symbols", ...) for the build-id `build_id` (hex-encoded in the
 * name) with `suffix` (".fut", ".fus", ...) into `out`; false as fu_cache_root, or too long. */
bool fu_cache_entry_path(const char *kind, const uint8_t *build_id, size_t build_id_size, const char *suffix,
                         char *out, size_t size);

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
