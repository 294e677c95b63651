/* srcline: see srcline.h. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "srcline.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <libelf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffer.h"
#include "demangle.h"
#include "intern.h"

typedef struct resolved {
    uint64_t svma;
    fu_srcline_chain chain;
} resolved;

typedef struct text_ref {
    uint32_t offset, len;
} text_ref;

struct fu_srcline_module {
    int fd;
    Elf *elf;
    Dwarf *dwarf;                     /* NULL: the file has no DWARF (why: dwarf_error) */
    char dwarf_error[128];
    fu_buffer pool;                   /* texts */
    fu_buffer texts;                  /* text_ref: the distinct texts of the pool */
    fu_intern_set text_index;
    fu_buffer locations;              /* fu_srcline_location */
    fu_buffer addresses;              /* resolved */
    fu_intern_set address_index;
    fu_buffer units;                  /* unit_index: the units whose functions are indexed */
    fu_intern_set unit_index;
    fu_buffer functions;              /* function_range, each unit's sorted by low */
};

fu_status fu_srcline_open(const char *path, fu_srcline_module **out, fu_error *err)
{
    *out = NULL;
    fu_srcline_module *m = calloc(1, sizeof *m);
    if (!m)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory opening %s", path);
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd < 0) {
        int e = errno;
        free(m);
        return fu_fail(err, FU_ERR_INVALID, "%s: %s", path, strerror(e));
    }
    elf_version(EV_CURRENT);
    m->elf = elf_begin(m->fd, ELF_C_READ_MMAP, NULL);
    if (!m->elf || elf_kind(m->elf) != ELF_K_ELF) {
        fu_fail(err, FU_ERR_INVALID, "%s: not an ELF file (%s)", path, elf_errmsg(-1));
        if (m->elf)
            elf_end(m->elf);
        close(m->fd);
        free(m);
        return err->status;
    }
    /* an ELF file without DWARF (or with DWARF libdw refuses) is a module without source lines */
    m->dwarf = dwarf_begin_elf(m->elf, DWARF_C_READ, NULL);
    if (!m->dwarf)
        snprintf(m->dwarf_error, sizeof m->dwarf_error, "%s", dwarf_errmsg(-1));
    *out = m;
    return FU_OK;
}

const char *fu_srcline_dwarf_error(const fu_srcline_module *m)
{
    return m->dwarf ? NULL : m->dwarf_error;
}

void fu_srcline_close(fu_srcline_module *m)
{
    if (!m)
        return;
    if (m->dwarf)
        dwarf_end(m->dwarf);
    elf_end(m->elf);
    close(m->fd);
    free(m->pool.data);
    free(m->texts.data);
    free(m->locations.data);
    free(m->addresses.data);
    free(m->units.data);
    free(m->functions.data);
    fu_intern_free(&m->text_index);
    fu_intern_free(&m->address_index);
    fu_intern_free(&m->unit_index);
    free(m);
}

const fu_srcline_location *fu_srcline_location_at(const fu_srcline_module *m, uint32_t index)
{
    return &((const fu_srcline_location *)(const void *)m->locations.data)[index];
}

const char *fu_srcline_text(const fu_srcline_module *m, uint32_t offset)
{
    return (const char *)m->pool.data + offset;
}

size_t fu_srcline_address_count(const fu_srcline_module *m)
{
    return m->addresses.len / sizeof(resolved);
}

/* ---- texts: each distinct one kept once ---------------------------------------------------------- */

typedef struct text_key {
    const char *data;
    size_t len;
} text_key;

static bool text_equal(const void *context, uint32_t i, const void *key)
{
    const fu_srcline_module *m = context;
    const text_ref *t = &((const text_ref *)(const void *)m->texts.data)[i];
    const text_key *k = key;
    return t->len == k->len && memcmp(m->pool.data + t->offset, k->data, k->len) == 0;
}

/* The pool offset of `data` (added if new); false if out of memory or past u32 offsets. */
static bool keep_text(fu_srcline_module *m, const char *data, size_t len, uint32_t *offset)
{
    text_key key = {data, len};
    uint64_t hash = fu_hash_bytes(data, len, 7);
    uint32_t found = fu_intern_find(&m->text_index, hash, text_equal, m, &key);
    if (found != FU_INTERN_NONE) {
        *offset = ((const text_ref *)(const void *)m->texts.data)[found].offset;
        return true;
    }
    size_t count = m->texts.len / sizeof(text_ref);
    if (len > UINT32_MAX || m->pool.len > UINT32_MAX - len || count >= FU_INTERN_NONE - 1)
        return false;
    text_ref ref = {(uint32_t)m->pool.len, (uint32_t)len};
    if (!fu_buffer_append(&m->pool, data, len) || !fu_buffer_append(&m->texts, &ref, sizeof ref) ||
        !fu_intern_insert(&m->text_index, hash, (uint32_t)count))
        return false;
    *offset = ref.offset;
    return true;
}

/* ---- resolving an address ------------------------------------------------------------------------- */

/* The compilation unit around `svma`: .debug_aranges (dwarf_addrdie), else each unit's ranges in
 * turn (Clang emits no .debug_aranges); false if none covers it. The scan is bounded by the units
 * of .debug_info (each dwarf_next_unit call consumes one). */
static bool unit_die(Dwarf *dwarf, uint64_t svma, Dwarf_Die *cu)
{
    if (dwarf_addrdie(dwarf, svma, cu))
        return true;
    Dwarf_Off offset = 0, next;
    size_t header_size;
    while (dwarf_nextcu(dwarf, offset, &next, &header_size, NULL, NULL, NULL) == 0) {
        if (dwarf_offdie(dwarf, offset + header_size, cu) && dwarf_haspc(cu, svma) == 1)
            return true;
        offset = next;
    }
    return false;
}

/* ---- a unit's functions, indexed by address ------------------------------------------------------
 *
 * dwarf_getscopes searches a unit's whole DIE tree for every address: 3 ms an address in a C++ unit
 * that includes <algorithm> (138 addresses of a std::sort program took 414 ms). The subprograms
 * with code of each unit are indexed once instead (their ranges, sorted), and an address's scopes
 * are then found inside its subprogram only. */

typedef struct function_range {
    uint64_t low, high; /* [low, high) */
    Dwarf_Off die;
} function_range;

typedef struct unit_index {
    Dwarf_Off unit;
    uint32_t first, count; /* into functions */
} unit_index;

/* Nesting of namespaces and types searched for function definitions (C++ nests a few levels). */
#define FU_SRCLINE_MAX_NAMESPACE_DEPTH 64

static bool index_functions(fu_srcline_module *m, Dwarf_Die *parent, int depth)
{
    Dwarf_Die child;
    if (depth > FU_SRCLINE_MAX_NAMESPACE_DEPTH || dwarf_child(parent, &child) != 0)
        return true;
    do { /* each sibling once: bounded by the unit's DIEs */
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram) {
            Dwarf_Addr base, start, end;
            ptrdiff_t offset = 0;
            while ((offset = dwarf_ranges(&child, offset, &base, &start, &end)) > 0) {
                function_range range = {start, end, dwarf_dieoffset(&child)};
                if (start < end && !fu_buffer_append(&m->functions, &range, sizeof range))
                    return false;
            }
        } else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
                   tag == DW_TAG_union_type || tag == DW_TAG_module) {
            if (!index_functions(m, &child, depth + 1))
                return false;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return true;
}

static int by_low(const void *a, const void *b)
{
    const function_range *x = a, *y = b;
    return x->low < y->low ? -1 : x->low > y->low;
}

static bool unit_equal(const void *context, uint32_t i, const void *key)
{
    const fu_srcline_module *m = context;
    return ((const unit_index *)(const void *)m->units.data)[i].unit == *(const Dwarf_Off *)key;
}

/* The subprogram with code at svma in unit `cu`, from the unit's index (built on first use); false
 * if none (or out of memory): the caller then searches the whole unit (searched_scopes). */
static bool function_die(fu_srcline_module *m, Dwarf_Die *cu, uint64_t svma, Dwarf_Die *out)
{
    Dwarf_Off unit = dwarf_dieoffset(cu);
    uint64_t hash = fu_hash_u64(unit ^ 0x5ca1ab1e);
    uint32_t found = fu_intern_find(&m->unit_index, hash, unit_equal, m, &unit);
    if (found == FU_INTERN_NONE) {
        size_t first = m->functions.len / sizeof(function_range);
        size_t count_units = m->units.len / sizeof(unit_index);
        if (!index_functions(m, cu, 0) || m->functions.len / sizeof(function_range) >= UINT32_MAX ||
            count_units >= FU_INTERN_NONE - 1) {
            m->functions.len = first * sizeof(function_range);
            return false;
        }
        size_t count = m->functions.len / sizeof(function_range) - first;
        if (count) /* functions.data is NULL before the first range */
            qsort((function_range *)(void *)m->functions.data + first, count, sizeof(function_range), by_low);
        unit_index entry = {unit, (uint32_t)first, (uint32_t)count};
        if (!fu_buffer_append(&m->units, &entry, sizeof entry) ||
            !fu_intern_insert(&m->unit_index, hash, (uint32_t)count_units))
            return false;
        found = (uint32_t)count_units;
    }
    const unit_index *entry = &((const unit_index *)(const void *)m->units.data)[found];
    const function_range *ranges = (const function_range *)(const void *)m->functions.data + entry->first;
    size_t low = 0, high = entry->count; /* the first range starting above svma */
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (ranges[mid].low <= svma)
            low = mid + 1;
        else
            high = mid;
    }
    /* ranges do not nest, but a function's later range may start before another's ends: look back a few */
    for (size_t i = low, looked = 0; i > 0 && looked < 8; i--, looked++)
        if (svma < ranges[i - 1].high)
            return dwarf_offdie(dwarf_cu_getdwarf(cu->cu), ranges[i - 1].die, out) != NULL;
    return false;
}

/* The scopes around svma inside `function` that name a function (the subprogram, then each inlined
 * subroutine inward), outermost first, at most FU_SRCLINE_MAX_DEPTH; their count. Lexical blocks
 * are passed through. */
static int function_scopes(Dwarf_Die *function, uint64_t svma, Dwarf_Die *scopes)
{
    int count = 0;
    scopes[count++] = *function;
    Dwarf_Die current = *function;
    /* each level goes one DIE deeper: bounded by the tree's depth and the scope limit */
    for (int level = 0; level < 4 * FU_SRCLINE_MAX_DEPTH && count < FU_SRCLINE_MAX_DEPTH; level++) {
        Dwarf_Die child;
        bool deeper = false;
        if (dwarf_child(&current, &child) != 0)
            break;
        do {
            int tag = dwarf_tag(&child);
            if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) && dwarf_haspc(&child, svma) == 1) {
                if (tag == DW_TAG_inlined_subroutine)
                    scopes[count++] = child;
                current = child;
                deeper = true;
                break;
            }
        } while (dwarf_siblingof(&child, &child) == 0);
        if (!deeper)
            break;
    }
    return count;
}

/* function_scopes' answer from a search of the whole unit, for code the index does not place:
 * dwarf_getscopes follows an inlined subroutine into its abstract origin's parents, so its
 * innermost scope's own parents (dwarf_getscopes_die) are the concrete nesting, as eu-addr2line
 * walks it. */
static int searched_scopes(Dwarf_Die *cu, uint64_t svma, Dwarf_Die *scopes)
{
    Dwarf_Die *found = NULL;
    int found_count = dwarf_getscopes(cu, svma, &found);
    if (found_count > 0) {
        Dwarf_Die innermost = found[0];
        free(found);
        found = NULL;
        found_count = dwarf_getscopes_die(&innermost, &found);
    }
    int count = 0, outermost = -1;
    for (int i = 0; i < found_count && outermost < 0; i++)
        if (dwarf_tag(&found[i]) == DW_TAG_subprogram)
            outermost = i;
    for (int i = outermost; i >= 0 && count < FU_SRCLINE_MAX_DEPTH; i--) {
        int tag = dwarf_tag(&found[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
            scopes[count++] = found[i];
    }
    free(found);
    return count;
}

/* A function's name as addr2line -f gives it, demangled as perf demangles (NULL: none). The result
 * is malloc'd when demangled (*owned set). */
static const char *function_name(Dwarf_Die *die, size_t *len, char **owned)
{
    Dwarf_Attribute attribute;
    const char *name = NULL;
    *owned = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attribute) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attribute))
        name = dwarf_formstring(&attribute);
    if (!name && dwarf_attr_integrate(die, DW_AT_name, &attribute))
        name = dwarf_formstring(&attribute);
    if (!name)
        return NULL;
    *len = strlen(name);
    if (fu_maybe_mangled(name, *len)) {
        size_t plain_len;
        char *plain = fu_demangle(name, *len, &plain_len);
        if (plain) {
            *owned = plain;
            *len = plain_len;
            return plain;
        }
    }
    return name;
}

/* The call site of an inlined subroutine: its file (NULL: not known) and line. */
static const char *call_site(Dwarf_Die *cu, Dwarf_Die *inlined, uint32_t *line)
{
    Dwarf_Attribute attribute;
    Dwarf_Word value;
    *line = 0;
    if (dwarf_attr(inlined, DW_AT_call_line, &attribute) && dwarf_formudata(&attribute, &value) == 0)
        *line = value > UINT32_MAX ? 0 : (uint32_t)value;
    Dwarf_Files *files;
    size_t file_count;
    if (!dwarf_attr(inlined, DW_AT_call_file, &attribute) || dwarf_formudata(&attribute, &value) != 0 ||
        dwarf_getsrcfiles(cu, &files, &file_count) != 0 || value >= file_count)
        return NULL;
    return dwarf_filesrc(files, value, NULL, NULL);
}

/* Append one location; false if out of memory or past u32 offsets. */
static bool add_location(fu_srcline_module *m, const char *name, size_t name_len, const char *file, uint32_t line)
{
    fu_srcline_location location = {.line = line};
    if (name && name_len) {
        if (!keep_text(m, name, name_len, &location.name))
            return false;
        location.name_len = (uint32_t)name_len;
    }
    size_t file_len = file ? strlen(file) : 0;
    if (file_len) {
        if (!keep_text(m, file, file_len, &location.file))
            return false;
        location.file_len = (uint32_t)file_len;
    }
    return m->locations.len / sizeof location < UINT32_MAX - 1 &&
           fu_buffer_append(&m->locations, &location, sizeof location);
}

/* The chain at svma, appended to the locations (see srcline.h for what each location is); false if
 * out of memory. */
static bool resolve(fu_srcline_module *m, uint64_t svma, fu_srcline_chain *chain)
{
    chain->first = (uint32_t)(m->locations.len / sizeof(fu_srcline_location));
    chain->count = 0;
    Dwarf_Die cu;
    if (!m->dwarf || !unit_die(m->dwarf, svma, &cu))
        return true;
    Dwarf_Line *row = dwarf_getsrc_die(&cu, svma);
    const char *file = row ? dwarf_linesrc(row, NULL, NULL) : NULL;
    int row_line = 0;
    if (row && dwarf_lineno(row, &row_line) != 0)
        row_line = 0;
    uint32_t line = row_line > 0 ? (uint32_t)row_line : 0;
    Dwarf_Die function, *found = malloc(FU_SRCLINE_MAX_DEPTH * sizeof *found);
    if (!found)
        return false;
    int found_count = function_die(m, &cu, svma, &function) ? function_scopes(&function, svma, found)
                                                              : searched_scopes(&cu, svma, found);
    bool ok = true;
    uint32_t depth = 0;
    /* innermost first: each inlined subroutine is a location in its origin, called from the next */
    for (int i = found_count - 1; ok && i >= 0; i--) {
        size_t name_len = 0;
        char *owned;
        const char *name = function_name(&found[i], &name_len, &owned);
        ok = add_location(m, name, name_len, file, line);
        free(owned);
        depth++;
        if (i > 0)
            file = call_site(&cu, &found[i], &line);
    }
    free(found);
    if (ok && depth == 0) { /* code in no function of the unit (assembly): its line alone */
        ok = add_location(m, NULL, 0, file, line);
        depth = 1;
    }
    chain->count = depth;
    return ok;
}

static bool address_equal(const void *context, uint32_t i, const void *key)
{
    const fu_srcline_module *m = context;
    return ((const resolved *)(const void *)m->addresses.data)[i].svma == *(const uint64_t *)key;
}

fu_status fu_srcline_lookup(fu_srcline_module *m, uint64_t svma, fu_srcline_chain *out, fu_error *err)
{
    uint64_t hash = fu_hash_u64(svma);
    uint32_t found = fu_intern_find(&m->address_index, hash, address_equal, m, &svma);
    if (found != FU_INTERN_NONE) {
        *out = ((const resolved *)(const void *)m->addresses.data)[found].chain;
        return FU_OK;
    }
    size_t count = fu_srcline_address_count(m);
    if (count >= FU_SRCLINE_MAX_ADDRESSES)
        return fu_fail(err, FU_ERR_INVALID, "source lines of more than %u addresses in one module",
                       FU_SRCLINE_MAX_ADDRESSES);
    resolved entry = {.svma = svma};
    if (!resolve(m, svma, &entry.chain) || !fu_buffer_append(&m->addresses, &entry, sizeof entry) ||
        !fu_intern_insert(&m->address_index, hash, (uint32_t)count))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory for the source lines at 0x%llx", (unsigned long long)svma);
    *out = entry.chain;
    return FU_OK;
}
