/* Where the caches live and the symbol tables' keys: see cache_paths.h. */
#define _GNU_SOURCE
#include "cache_paths.h"

#include "compact_table.h"
#include "eh_elf.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* os.path.expanduser("~/" + relative) into `out`: $HOME, else the password database's home. */
static bool in_home(const char *relative, char *out, size_t size)
{
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
    int n = len == 0 ? snprintf(out, size, "%s", relative) /* an empty $HOME: relative */
                     : snprintf(out, size, "%.*s%s%s", (int)len, home, home[len - 1] == '/' ? "" : "/", relative);
    return n > 0 && (size_t)n < size;
}

bool fu_cache_root(char *out, size_t size)
{
    const char *base = getenv("XDG_CACHE_HOME");
    if (!base || !base[0])
        return in_home(".cache/fastunwind", out, size);
    int n = snprintf(out, size, "%s/fastunwind", base);
    return n > 0 && (size_t)n < size;
}

bool fu_compact_cache_suffix(unsigned synth, char *out, size_t size)
{
    int n = synth == FU_COMPACT_SYNTH_OFF
                ? snprintf(out, size, ".fut")
                : snprintf(out, size, ".synth-%s-v%d.fut", fu_compact_synth_mode_name(synth), FU_COMPACT_SYNTH_VERSION);
    return n > 0 && (size_t)n < size;
}

bool fu_build_id_cache_root(char *out, size_t size)
{
    const char *dir = getenv("PERF_BUILDID_DIR");
    if (!dir || !dir[0])
        return in_home(".debug", out, size);
    int n = snprintf(out, size, "%s", dir);
    return n > 0 && (size_t)n < size;
}

/* os.path.join(a, b) for a relative b, appended to `out` with its NUL. */
static bool append_joined(fu_buffer *out, const char *a, const char *b)
{
    size_t len = strlen(a);
    return fu_buffer_append(out, a, len) && (len == 0 || a[len - 1] == '/' || fu_buffer_append(out, "/", 1)) &&
           fu_buffer_append(out, b, strlen(b) + 1);
}

bool fu_build_id_cache_file(const char *name, const char *build_id_hex, const char *file, fu_buffer *out)
{
    char root[FU_BUILD_ID_CACHE_PATH_MAX], relative[FU_BUILD_ID_CACHE_PATH_MAX];
    while (*name == '/')
        name++;
    int n = snprintf(relative, sizeof relative, "%s%s%s/%s", name, name[0] ? "/" : "", build_id_hex, file);
    return fu_build_id_cache_root(root, sizeof root) && n > 0 && (size_t)n < sizeof relative &&
           append_joined(out, root, relative);
}

bool fu_build_id_cache_candidates(const char *name, const uint8_t *build_id, size_t size, const char *file,
                                  fu_buffer *out)
{
    if (size > FU_BUILD_ID_CACHE_MAX_ID)
        return false;
    size_t trimmed = size;
    while (trimmed && build_id[trimmed - 1] == 0)
        trimmed--;
    char hex[2][2 * FU_BUILD_ID_CACHE_MAX_ID + 1];
    fu_hex(hex[0], sizeof hex[0], build_id, trimmed);
    fu_hex(hex[1], sizeof hex[1], build_id, size);
    size_t hex_count = trimmed == size ? 1 : 2;
    char names[2][FU_BUILD_ID_CACHE_PATH_MAX];
    int n = snprintf(names[0], sizeof names[0], "%s", name);
    if (n < 0 || (size_t)n >= sizeof names[0])
        return false;
    memcpy(names[1], names[0], (size_t)n + 1);
    size_t suffix = strlen(FU_DELETED_SUFFIX);
    if ((size_t)n >= suffix && strcmp(names[1] + n - suffix, FU_DELETED_SUFFIX) == 0)
        names[1][(size_t)n - suffix] = '\0';
    size_t name_count = strcmp(names[0], names[1]) == 0 ? 1 : 2;
    for (size_t k = 0; k < name_count; k++)
        for (size_t h = 0; h < hex_count; h++)
            if (!fu_build_id_cache_file(names[k], hex[h], file, out))
                return false;
    char root[FU_BUILD_ID_CACHE_PATH_MAX], relative[FU_BUILD_ID_CACHE_PATH_MAX];
    if (!fu_build_id_cache_root(root, sizeof root))
        return false;
    for (size_t h = 0; h < hex_count; h++) {
        n = snprintf(relative, sizeof relative, ".build-id/%.2s/%s/%s", hex[h], hex[h] + 2, file);
        if (n < 0 || (size_t)n >= sizeof relative || !append_joined(out, root, relative))
            return false;
    }
    return true;
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
