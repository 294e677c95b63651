/* Where the caches live and the symbol tables' keys: see cache_paths.h. */
#define _GNU_SOURCE
#include "cache_paths.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool fu_cache_root(char *out, size_t size)
{
    const char *base = getenv("XDG_CACHE_HOME");
    int n;
    if (base && base[0]) {
        n = snprintf(out, size, "%s/fastunwind", base);
    } else {
        /* os.path.expanduser("~"): $HOME, else the password database's home */
        const char *home = getenv("HOME");
        if (!home) {
            const struct passwd *entry = getpwuid(getuid());
            home = entry ? entry->pw_dir : NULL;
        }
        if (!home)
            return false;
        size_t len = strlen(home);
        while (len > 1 && home[len - 1] == '/') /* os.path.join keeps one separator */
            len--;
        if (len == 0) /* an empty $HOME: os.path.join("", ".cache"), relative */
            n = snprintf(out, size, ".cache/fastunwind");
        else
            n = snprintf(out, size, "%.*s%s.cache/fastunwind", (int)len, home, home[len - 1] == '/' ? "" : "/");
    }
    return n > 0 && (size_t)n < size;
}

bool fu_cache_entry_path(const char *kind, const uint8_t *build_id, size_t build_id_size, const char *suffix,
                         char *out, size_t size)
{
    char root[4096];
    if (!fu_cache_root(root, sizeof root))
        return false;
    int n = snprintf(out, size, "%s/%s/", root, kind);
    if (n < 0 || (size_t)n + 2 * build_id_size + strlen(suffix) + 1 > size)
        return false;
    size_t at = (size_t)n;
    for (size_t i = 0; i < build_id_size; i++)
        at += (size_t)snprintf(out + at, size - at, "%02x", build_id[i]);
    snprintf(out + at, size - at, "%s", suffix);
    return true;
}

/* A NUL, then the identity of the file at `path` (nothing if there is none). */
static bool append_identity(fu_buffer *out, const char *path)
{
    struct stat st;
    if (!path || !path[0] || stat(path, &st) != 0)
        return true;
    char text[128];
    int n = snprintf(text, sizeof text, "%ju%c%ju%c%jd%c%jd", (uintmax_t)st.st_dev, 0, (uintmax_t)st.st_ino, 0,
                     (intmax_t)st.st_size, 0, (intmax_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
    return fu_buffer_append(out, "\0", 1) && fu_buffer_append(out, text, (size_t)n);
}

bool fu_symbol_key_elf(const char *build_id_hex, const char *path, const char *debug_path, fu_buffer *out)
{
    const char *debug = debug_path ? debug_path : "";
    return fu_buffer_append(out, "elf\0", 4) && fu_buffer_append(out, build_id_hex, strlen(build_id_hex)) &&
           append_identity(out, path) && fu_buffer_append(out, "\0", 1) &&
           fu_buffer_append(out, debug, strlen(debug)) && append_identity(out, debug);
}

bool fu_symbol_key_memory_image(const char *build_id_hex, const char *debug_path, fu_buffer *out)
{
    const char *debug = debug_path ? debug_path : "";
    return fu_buffer_append(out, "image\0", 6) && fu_buffer_append(out, build_id_hex, strlen(build_id_hex)) &&
           fu_buffer_append(out, "\0", 1) && fu_buffer_append(out, debug, strlen(debug)) &&
           append_identity(out, debug);
}

bool fu_symbol_key_kallsyms(const char *path, fu_buffer *out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    return fu_buffer_append(out, "kallsyms\0", 9) && fu_buffer_append(out, path, strlen(path)) &&
           append_identity(out, path);
}
