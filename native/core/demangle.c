/* demangle: see demangle.h. libiberty (binutils' demangler, Debian libiberty-dev) is linked
 * statically into the extension and its symbols kept out of the module's exports (setup.py). */
#include "demangle.h"

#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

static const char PLT_SUFFIX[] = "@plt";

char *fu_demangle(const char *name, size_t len, size_t *out_len)
{
    size_t suffix = 0;
    if (len >= sizeof PLT_SUFFIX - 1 && memcmp(name + len - (sizeof PLT_SUFFIX - 1), PLT_SUFFIX,
                                                 sizeof PLT_SUFFIX - 1) == 0)
        suffix = sizeof PLT_SUFFIX - 1;
    size_t base = len - suffix;
    if (!fu_maybe_mangled(name, base) || base > FU_DEMANGLE_MAX_INPUT)
        return NULL;
    char input[FU_DEMANGLE_MAX_INPUT + 1];
    memcpy(input, name, base);
    input[base] = '\0';
    if (memchr(input, 0, base))
        return NULL;
    char *plain = cplus_demangle(input, DMGL_NO_OPTS);
    if (!plain)
        return NULL;
    size_t n = strlen(plain);
    if (suffix) {
        char *longer = realloc(plain, n + suffix + 1);
        if (!longer) {
            free(plain);
            return NULL;
        }
        plain = longer;
        memcpy(plain + n, PLT_SUFFIX, suffix + 1);
        n += suffix;
    }
    *out_len = n;
    return plain;
}
