/* check_scope: what `check` reads of an ELF file besides its CFI and code, and the code it finds
 * without CFI (check.py drives them around check.h's batches).
 *
 * fu_check_symbols_read: the function symbols of a file and of its separate debug file (every
 *     .symtab and .dynsym, in section order, the file's first): defined STT_FUNC symbols with a
 *     name and a value. From them: the sorted addresses of functions that never return (by name,
 *     fu_check_noreturn_name), of known function entries (gcc's `.cold` parts aside: entered by a
 *     jump), and one name per address, where aliases prefer a name without a leading underscore
 *     (the first such, else the first). A file whose symbol tables do not read (a bad sh_entsize,
 *     a table or string table outside the file, a name not terminated within FU_ELF_MAX_NAME_LENGTH)
 *     gives no symbols; the other file still does.
 * fu_check_uncovered: the ranges of code no FDE covers (as the walker looks FDEs up) that start at
 *     a function symbol in an executable segment, or at a code address the checked code names
 *     (direct call and jump targets, addresses a RIP-relative lea takes), an address a dynamic
 *     R_X86_64_RELATIVE relocation stores, or the loader's DT_INIT / DT_FINI, inside the file's
 *     instructions (its SHF_EXECINSTR sections, else without section headers its executable
 *     segments) and not at a symbol. A range ends at its symbol's end, else at the next FDE
 *     start, symbol, start or end of an executable section or segment, else one byte on.
 *
 * Both run on 64-bit little-endian x86-64 files (check refuses the others before). Every read is
 * bounds-checked through elf_file.h; input-driven counts are bounded by the ELF file's own limits.
 */
#ifndef FASTUNWIND_CHECK_SCOPE_H
#define FASTUNWIND_CHECK_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "cfi.h"
#include "elf_file.h"
#include "error.h"

/* Files whose symbols are read: the file and its separate debug file. */
#define FU_CHECK_MAX_SYMBOL_FILES 2
/* Symbols of one symbol table (as symbols.h's tables). */
#define FU_CHECK_MAX_SYMBOLS (1u << 26)
/* Bytes of the names kept (one per address): the names table is indexed by u32. */
#define FU_CHECK_MAX_NAME_BYTES UINT32_MAX

/* Function symbols, one per address, sorted by address; and the addresses of noreturn functions
 * and of function entries, sorted and unique. All malloc'd (fu_check_symbols_free), or borrowed
 * from the caller (fu_check_symbols_valid checks such a table). */
typedef struct fu_check_symbols {
    uint64_t *starts, *sizes;
    uint32_t *name_offsets; /* into names, each NUL-terminated */
    size_t count;
    char *names;
    size_t names_size;
    uint64_t *noreturn;
    size_t noreturn_count;
    uint64_t *entries;
    size_t entry_count;
} fu_check_symbols;

/* Whether a function of this name never returns: a call to it ends a path (the C library's abort,
 * exit, __stack_chk_fail, longjmp..., the C++ and unwinder runtime's throws and terminate,
 * libstdc++'s std::__throw_* helpers, LLVM's report_fatal_error and llvm_unreachable_internal,
 * CPython's fatal errors). A symbol version (`abort@GLIBC_2.2.5`) is ignored. */
bool fu_check_noreturn_name(const char *name, size_t len);

fu_status fu_check_symbols_read(const fu_elf *const *files, size_t file_count, fu_check_symbols *out,
                                fu_error *err);
void fu_check_symbols_free(fu_check_symbols *symbols);
/* Whether a table given by a caller holds together: starts strictly increasing, names inside
 * `names` and terminated there, noreturn and entries sorted. */
bool fu_check_symbols_valid(const fu_check_symbols *symbols);

/* The FDE entries of `table` that check judges: well-formed FDEs not at 0 (an FDE at 0 in a linked
 * file describes code the linker discarded), as uint32 entry indices appended to `out`. */
fu_status fu_check_scope_fdes(const fu_cfi_table *table, fu_buffer *out, fu_error *err);

typedef struct fu_check_uncovered_range {
    uint64_t start, end;
    uint32_t name; /* offset into the symbols' names, UINT32_MAX: none starts there */
} fu_check_uncovered_range;

typedef struct fu_check_scope_input {
    const fu_elf *elf;                 /* its sections (instructions) and dynamic relocations */
    const fu_cfi_table *tables[2];     /* .eh_frame, .debug_frame (either NULL) */
    const fu_image_segment *code;      /* executable PT_LOAD segments */
    size_t code_count;
    const fu_check_symbols *symbols;
    /* code addresses the check found no FDE for (fu_check_batch.uncovered_calls of every batch:
     * unsorted, repeated) and DT_INIT / DT_FINI */
    const uint64_t *targets;
    size_t target_count;
} fu_check_scope_input;

/* The uncovered ranges, sorted by start, as fu_check_uncovered_range appended to `out`. */
fu_status fu_check_uncovered(const fu_check_scope_input *in, fu_buffer *out, fu_error *err);

#endif
