/* check_scope: function symbols, noreturn functions and code without CFI, for check (check_scope.h). */
#include "check_scope.h"

#include "radix_sort.h"

#include <stdlib.h>
#include <string.h>

/* gABI "Sections", "Symbol Table"; x86-64 psABI "Relocation Types" */
#define SHT_PROGBITS 1
#define SHT_SYMTAB 2
#define SHT_RELA 4
#define SHT_DYNSYM 11
#define SHF_EXECINSTR 0x4
#define SHF_COMPRESSED 0x800
#define STT_FUNC 2
#define ELF64_RELA_SIZE 24
#define R_X86_64_RELATIVE 8

/* Sorted: bsearch'd by fu_check_noreturn_name. Not __libc_message: in glibc 2.36
 * (sysdeps/posix/libc_fatal.c) it aborts only when its action has do_abort and returns otherwise
 * (Debian 12's libc.so.6: a `ret` at __libc_message+0x1b1). */
static const char *const NORETURN_FUNCTIONS[] = {
    "Py_Exit", "Py_FatalError", "_Exit", "_Py_FatalErrorFormat", "_Py_FatalErrorFunc", "_Py_FatalError_TstateNULL",
    "_Unwind_Resume", "_ZN4llvm24llvm_unreachable_internalEPKcS1_j", "_ZSt9terminatev", "__assert_fail",
    "__assert_perror_fail", "__chk_fail", "__cxa_bad_cast", "__cxa_bad_typeid", "__cxa_call_terminate",
    "__cxa_call_unexpected", "__cxa_deleted_virtual", "__cxa_pure_virtual", "__cxa_rethrow", "__cxa_throw",
    "__cxa_throw_bad_array_new_length", "__fortify_fail", "__gnat_last_chance_handler", "__libc_fatal",
    "__libc_longjmp", "__libc_siglongjmp", "__longjmp_chk", "__malloc_assert", "__pthread_exit", "__pthread_unwind",
    "__pthread_unwind_next", "__stack_chk_fail", "__stack_chk_fail_local", "__terminate", "_dl_fatal_printf",
    "_dl_reloc_bad_type", "_dl_signal_error", "_dl_signal_exception", "_exit", "_longjmp", "abort", "err", "errx",
    "exit", "longjmp", "malloc_printerr", "pthread_exit", "quick_exit", "siglongjmp", "verr", "verrx",
};
#define NORETURN_COUNT (sizeof NORETURN_FUNCTIONS / sizeof NORETURN_FUNCTIONS[0])
/* LLVM's report_fatal_error overloads */
static const char REPORT_FATAL_ERROR[] = "_ZN4llvm18report_fatal_error";
/* libstdc++'s std::__throw_length_error, ...: _ZSt<digits>__throw_ */
static const char STD_THROW_PREFIX[] = "_ZSt";
static const char STD_THROW_INFIX[] = "__throw_";

typedef struct name_key {
    const char *name;
    size_t len;
} name_key;

static int compare_name(const void *key, const void *element)
{
    const name_key *k = key;
    const char *name = *(const char *const *)element;
    size_t len = strlen(name);
    int c = memcmp(k->name, name, k->len < len ? k->len : len);
    return c ? c : (k->len > len) - (k->len < len);
}

static bool starts_with(const char *name, size_t len, const char *prefix, size_t prefix_len)
{
    return len >= prefix_len && memcmp(name, prefix, prefix_len) == 0;
}

bool fu_check_noreturn_name(const char *name, size_t len)
{
    const char *at = memchr(name, '@', len);
    if (at)
        len = (size_t)(at - name);
    name_key key = {name, len};
    if (bsearch(&key, NORETURN_FUNCTIONS, NORETURN_COUNT, sizeof NORETURN_FUNCTIONS[0], compare_name))
        return true;
    if (starts_with(name, len, REPORT_FATAL_ERROR, sizeof REPORT_FATAL_ERROR - 1))
        return true;
    if (!starts_with(name, len, STD_THROW_PREFIX, sizeof STD_THROW_PREFIX - 1))
        return false;
    size_t i = sizeof STD_THROW_PREFIX - 1;
    size_t digits = i;
    while (i < len && name[i] >= '0' && name[i] <= '9')
        i++;
    return i > digits && starts_with(name + i, len - i, STD_THROW_INFIX, sizeof STD_THROW_INFIX - 1);
}

/* A function symbol as read (fu_radix_sort keys on `value`, its first field). */
typedef struct candidate {
    uint64_t value, size;
    const char *name;
    uint32_t len;
} candidate;

static inline uint64_t read_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The function symbols of one symbol table appended to `found`; false if the table does not read
 * (the file then gives none). */
static bool read_table(const fu_elf *elf, const fu_elf_section *table, fu_buffer *found, bool *no_memory)
{
    if (table->size == 0)
        return true;
    if (table->entsize != FU_ELF_SYMBOL_SIZE(64) || table->size % FU_ELF_SYMBOL_SIZE(64) ||
        table->size / FU_ELF_SYMBOL_SIZE(64) > FU_CHECK_MAX_SYMBOLS || table->link >= elf->section_count)
        return false;
    fu_error ignored = {0};
    const uint8_t *records, *strings;
    size_t size, strings_size;
    fu_elf_section string_section = fu_elf_section_at(elf, table->link);
    if (fu_elf_section_bytes(elf, table, &records, &size, &ignored) ||
        fu_elf_section_bytes(elf, &string_section, &strings, &strings_size, &ignored))
        return false;
    for (size_t offset = 0; offset + FU_ELF_SYMBOL_SIZE(64) <= size; offset += FU_ELF_SYMBOL_SIZE(64)) {
        fu_elf_symbol symbol = fu_elf_symbol_from(64, records + offset);
        uint32_t name_offset = symbol.name;
        /* every name must read, as the file's symbol table is read whole (elf/__init__.py) */
        size_t len = 0;
        if (name_offset < strings_size) {
            size_t room = strings_size - name_offset;
            if (room > (size_t)FU_ELF_MAX_NAME_LENGTH + 1)
                room = (size_t)FU_ELF_MAX_NAME_LENGTH + 1;
            const char *start = (const char *)strings + name_offset;
            const char *end = memchr(start, 0, room);
            if (!end)
                return false;
            len = (size_t)(end - start);
        } else if (name_offset != 0 || strings_size != 0) {
            return false;
        }
        if ((symbol.info & 0xf) != STT_FUNC || symbol.shndx == 0 || symbol.value == 0 || len == 0)
            continue;
        candidate c = {symbol.value, symbol.size, (const char *)strings + name_offset, (uint32_t)len};
        if (!fu_buffer_append(found, &c, sizeof c)) {
            *no_memory = true;
            return false;
        }
    }
    return true;
}

/* gcc's out-of-line part of a function (`foo.cold`, `foo.cold.12`): entered by a jump, not a call. */
static bool is_cold_part(const candidate *c)
{
    static const char COLD[] = ".cold";
    for (const char *dot = c->name, *end = c->name + c->len; (dot = memchr(dot, '.', (size_t)(end - dot)));
         dot++)
        if ((size_t)(end - dot) >= sizeof COLD - 1 && memcmp(dot, COLD, sizeof COLD - 1) == 0)
            return true;
    return false;
}

void fu_check_symbols_free(fu_check_symbols *symbols)
{
    free(symbols->starts);
    free(symbols->sizes);
    free(symbols->name_offsets);
    free(symbols->names);
    free(symbols->noreturn);
    free(symbols->entries);
    memset(symbols, 0, sizeof *symbols);
}

fu_status fu_check_symbols_read(const fu_elf *const *files, size_t file_count, fu_check_symbols *out,
                                fu_error *err)
{
    memset(out, 0, sizeof *out);
    if (file_count > FU_CHECK_MAX_SYMBOL_FILES)
        return fu_fail(err, FU_ERR_INVALID, "%zu symbol files, at most %u", file_count, FU_CHECK_MAX_SYMBOL_FILES);
    fu_buffer found = {0};
    bool no_memory = false;
    for (size_t f = 0; f < file_count && !no_memory; f++) {
        const fu_elf *elf = files[f];
        size_t before = found.len;
        bool ok = true;
        for (size_t i = 0; i < elf->section_count && ok; i++) {
            fu_elf_section section = fu_elf_section_at(elf, i);
            if (section.type == SHT_SYMTAB || section.type == SHT_DYNSYM)
                ok = read_table(elf, &section, &found, &no_memory);
        }
        if (!ok)
            found.len = before;
    }
    candidate *c = (candidate *)found.data;
    size_t count = found.len / sizeof *c;
    if (no_memory)
        goto nomem;
    out->noreturn = malloc((count ? count : 1) * sizeof *out->noreturn);
    out->entries = malloc((count ? count : 1) * sizeof *out->entries);
    out->starts = malloc((count ? count : 1) * sizeof *out->starts);
    out->sizes = malloc((count ? count : 1) * sizeof *out->sizes);
    out->name_offsets = malloc((count ? count : 1) * sizeof *out->name_offsets);
    if (!out->noreturn || !out->entries || !out->starts || !out->sizes || !out->name_offsets)
        goto nomem;
    for (size_t i = 0; i < count; i++) {
        if (fu_check_noreturn_name(c[i].name, c[i].len))
            out->noreturn[out->noreturn_count++] = c[i].value;
        if (!is_cold_part(&c[i]))
            out->entries[out->entry_count++] = c[i].value;
    }
    bool sorted_noreturn, sorted_entries;
    out->noreturn_count = fu_sort_unique(out->noreturn, out->noreturn_count, &sorted_noreturn);
    out->entry_count = fu_sort_unique(out->entries, out->entry_count, &sorted_entries);
    if (!sorted_noreturn || !sorted_entries)
        goto nomem;
    /* by address, aliases in table order */
    if (!fu_radix_sort(c, count, sizeof *c))
        goto nomem;
    fu_buffer names = {0};
    for (size_t i = 0; i < count;) {
        /* of the aliases at one address, the first without a leading underscore, else the first */
        size_t chosen = i, j = i;
        for (; j < count && c[j].value == c[i].value; j++)
            if (c[chosen].name[0] == '_' && c[j].name[0] != '_')
                chosen = j;
        if (names.len + c[chosen].len + 1 > FU_CHECK_MAX_NAME_BYTES ||
            !fu_buffer_reserve(&names, c[chosen].len + 1)) {
            free(names.data);
            goto nomem;
        }
        out->starts[out->count] = c[chosen].value;
        out->sizes[out->count] = c[chosen].size;
        out->name_offsets[out->count++] = (uint32_t)names.len;
        fu_buffer_append(&names, c[chosen].name, c[chosen].len);
        fu_buffer_append(&names, "", 1);
        i = j;
    }
    out->names = (char *)names.data;
    out->names_size = names.len;
    free(found.data);
    return FU_OK;
nomem:
    free(found.data);
    fu_check_symbols_free(out);
    return fu_fail(err, FU_ERR_NOMEM, "out of memory reading function symbols");
}

static bool sorted(const uint64_t *values, size_t count, bool strictly)
{
    for (size_t i = 1; i < count; i++)
        if (values[i] < values[i - 1] || (strictly && values[i] == values[i - 1]))
            return false;
    return true;
}

bool fu_check_symbols_valid(const fu_check_symbols *s)
{
    if (!sorted(s->starts, s->count, true) || !sorted(s->noreturn, s->noreturn_count, false) ||
        !sorted(s->entries, s->entry_count, false))
        return false;
    for (size_t i = 0; i < s->count; i++)
        if (s->name_offsets[i] >= s->names_size ||
            !memchr(s->names + s->name_offsets[i], 0, s->names_size - s->name_offsets[i]))
            return false;
    return true;
}

static bool checked_fde(const fu_entry *e)
{
    return !e->has_error && e->kind == FU_ENTRY_FDE && e->pc_begin != 0;
}

fu_status fu_check_scope_fdes(const fu_cfi_table *table, fu_buffer *out, fu_error *err)
{
    for (uint32_t i = 0; i < table->entry_count; i++)
        if (checked_fde(&table->entries[i]) && !fu_buffer_append(out, &i, sizeof i))
            return fu_fail(err, FU_ERR_NOMEM, "out of memory listing FDEs");
    return FU_OK;
}

/* An address range [start, end) of instructions. */
typedef struct span {
    uint64_t start, end;
} span;

static int compare_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->start != y->start)
        return (x->start > y->start) - (x->start < y->start);
    return (x->end > y->end) - (x->end < y->end);
}

/* Whether `address` is inside the last span (sorted) starting at or below it. */
static bool inside(const span *spans, size_t count, uint64_t address)
{
    size_t low = 0, high = count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (spans[mid].start <= address)
            low = mid + 1;
        else
            high = mid;
    }
    return low > 0 && address < spans[low - 1].end;
}

static bool covered(const fu_cfi_table *const tables[2], uint64_t address)
{
    int64_t fde;
    for (int t = 0; t < 2; t++)
        if (tables[t] && fu_cfi_table_find_row(tables[t], address, &fde) >= 0)
            return true;
    return false;
}

static uint64_t end_of(uint64_t start, uint64_t size)
{
    return size > UINT64_MAX - start ? UINT64_MAX : start + size;
}

/* Where the file's instructions are, sorted: its executable sections, else its executable segments. */
static bool instruction_spans(const fu_check_scope_input *in, fu_buffer *spans)
{
    for (size_t i = 0; i < in->elf->section_count; i++) {
        fu_elf_section s = fu_elf_section_at(in->elf, i);
        span r = {s.addr, end_of(s.addr, s.size)};
        if ((s.flags & SHF_EXECINSTR) && s.type == SHT_PROGBITS && s.size && !fu_buffer_append(spans, &r, sizeof r))
            return false;
    }
    if (!spans->len)
        for (size_t i = 0; i < in->code_count; i++) {
            span r = {in->code[i].vaddr, end_of(in->code[i].vaddr, in->code[i].size)};
            if (!fu_buffer_append(spans, &r, sizeof r))
                return false;
        }
    if (spans->len > sizeof(span))
        qsort(spans->data, spans->len / sizeof(span), sizeof(span), compare_span);
    return true;
}

/* The addends of the dynamic R_X86_64_RELATIVE relocations (SHT_RELA sections not against one
 * section, sh_info 0) between the first instruction and the end of the last span: function
 * pointers in initialized data (x264's tables of pointers to its assembly). */
static fu_status relocated_code(const fu_check_scope_input *in, const span *spans, size_t span_count,
                                fu_buffer *out, fu_error *err)
{
    if (!span_count)
        return FU_OK;
    uint64_t low = spans[0].start, high = spans[span_count - 1].end;
    for (size_t i = 0; i < in->elf->section_count; i++) {
        fu_elf_section s = fu_elf_section_at(in->elf, i);
        if (s.type != SHT_RELA || s.info != 0 || s.entsize != ELF64_RELA_SIZE || (s.flags & SHF_COMPRESSED))
            continue;
        const uint8_t *data;
        size_t size;
        if (fu_elf_section_bytes(in->elf, &s, &data, &size, err))
            return err->status;
        for (size_t offset = 0; offset + ELF64_RELA_SIZE <= size; offset += ELF64_RELA_SIZE) {
            uint64_t info = read_u64(data + offset + 8), addend = read_u64(data + offset + 16);
            if ((info & 0xffffffffu) == R_X86_64_RELATIVE && low <= addend && addend < high &&
                !fu_buffer_append(out, &addend, sizeof addend))
                return fu_fail(err, FU_ERR_NOMEM, "out of memory reading relocations");
        }
    }
    return FU_OK;
}

static bool append_u64(fu_buffer *b, uint64_t value)
{
    return fu_buffer_append(b, &value, sizeof value);
}

fu_status fu_check_uncovered(const fu_check_scope_input *in, fu_buffer *out, fu_error *err)
{
    const fu_check_symbols *symbols = in->symbols;
    fu_buffer spans = {0}, candidates = {0}, starts = {0}, boundaries = {0};
    fu_status status = FU_OK;
    if (!instruction_spans(in, &spans))
        goto nomem;
    const span *instructions = (const span *)spans.data;
    size_t instruction_count = spans.len / sizeof(span);
    /* code addresses named by the code, relocations and the loader, not at a symbol, inside the
     * instructions, that no FDE covers */
    if (!fu_buffer_append(&candidates, in->targets, in->target_count * sizeof *in->targets))
        goto nomem;
    if ((status = relocated_code(in, instructions, instruction_count, &candidates, err)))
        goto done;
    uint64_t *c = (uint64_t *)candidates.data;
    bool ok;
    size_t candidate_count = fu_sort_unique(c, candidates.len / sizeof *c, &ok);
    if (!ok)
        goto nomem;
    for (size_t i = 0; i < candidate_count; i++) {
        bool named;
        fu_sorted_find(symbols->starts, symbols->count, c[i], &named);
        if (!named && inside(instructions, instruction_count, c[i]) && !covered(in->tables, c[i]) &&
            !append_u64(&starts, c[i]))
            goto nomem;
    }
    /* function symbols in executable segments that no FDE covers */
    for (size_t i = 0; i < symbols->count; i++) {
        uint64_t value = symbols->starts[i];
        for (size_t k = 0; k < in->code_count; k++)
            if (value >= in->code[k].vaddr && value - in->code[k].vaddr < in->code[k].size) {
                if (!covered(in->tables, value) && !append_u64(&starts, value))
                    goto nomem;
                break;
            }
    }
    uint64_t *s = (uint64_t *)starts.data;
    size_t start_count = fu_sort_unique(s, starts.len / sizeof *s, &ok);
    if (!ok)
        goto nomem;
    if (!start_count)
        goto done;
    /* where a range without a symbol's size ends */
    for (int t = 0; t < 2; t++) {
        const fu_cfi_table *table = in->tables[t];
        for (uint32_t i = 0; table && i < table->entry_count; i++)
            if (checked_fde(&table->entries[i]) && !append_u64(&boundaries, table->entries[i].pc_begin))
                goto nomem;
    }
    if (!fu_buffer_append(&boundaries, symbols->starts, symbols->count * sizeof(uint64_t)) ||
        !fu_buffer_append(&boundaries, s, start_count * sizeof *s))
        goto nomem;
    for (size_t k = 0; k < in->code_count; k++)
        if (!append_u64(&boundaries, end_of(in->code[k].vaddr, in->code[k].size)))
            goto nomem;
    for (size_t k = 0; k < instruction_count; k++)
        if (!append_u64(&boundaries, instructions[k].end))
            goto nomem;
    uint64_t *b = (uint64_t *)boundaries.data;
    size_t boundary_count = fu_sort_unique(b, boundaries.len / sizeof *b, &ok);
    if (!ok)
        goto nomem;
    for (size_t i = 0; i < start_count; i++) {
        fu_check_uncovered_range range = {s[i], 0, UINT32_MAX};
        bool named;
        size_t at = fu_sorted_find(symbols->starts, symbols->count, s[i], &named);
        if (named)
            range.name = symbols->name_offsets[at];
        if (named && symbols->sizes[at]) {
            range.end = s[i] + symbols->sizes[at]; /* as Python's int: no wrap for a sane size */
            if (range.end < s[i])
                range.end = UINT64_MAX;
        } else {
            bool boundary;
            size_t next = fu_sorted_find(b, boundary_count, s[i], &boundary);
            while (next < boundary_count && b[next] <= s[i])
                next++;
            range.end = next < boundary_count ? b[next] : end_of(s[i], 1);
        }
        if (!fu_buffer_append(out, &range, sizeof range))
            goto nomem;
    }
    goto done;
nomem:
    status = fu_fail(err, FU_ERR_NOMEM, "out of memory finding code without CFI");
done:
    free(spans.data);
    free(candidates.data);
    free(starts.data);
    free(boundaries.data);
    return status;
}
