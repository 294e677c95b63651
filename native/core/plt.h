/* plt: facts about x86-64 PLT stubs, and the synthesizer that names them "symbol@plt" from the
 * relocations of the GOT slots they jump through (what objdump -d prints, and perf >= 6.3 does in
 * dso__synthesize_plt_symbols; perf 6.1 only names .plt, by counting .rela.plt entries).
 *
 * Every stub the linkers emit reaches its target with one indirect jump through a GOT slot,
 * `jmp *disp32(%rip)` (ff 25 disp32), after one of a few fixed prefixes. Rather than trusting
 * section sizes and entry counts (lld and mold leave sh_entsize 0, IBT layouts move the named
 * entries to .plt.sec, and .plt.got has no .rela.plt entries at all), every entry of .plt, .plt.sec
 * and .plt.got is matched against the prefixes below; the slot its jump reads (System V AMD64 ABI
 * §5.2: the address after the jump + disp32) is then looked up among the R_X86_64_JUMP_SLOT
 * (.rela.plt), R_X86_64_GLOB_DAT (.rela.dyn, for .plt.got) and R_X86_64_IRELATIVE relocations.
 *
 * Layouts (objdump -d of binaries linked here, Debian 12: binutils 2.40, lld 14, mold 1.10):
 *   bfd, lld  .plt entry       ff 25 <GOT>  68 <index>  e9 <.plt>           16 bytes
 *   bfd       .plt.got         ff 25 <GOT>  66 90                           8 bytes
 *   bfd -z bndplt (MPX)        f2 ff 25 <GOT> ...                           16 bytes
 *   bfd IBT   .plt.sec/.plt.got f3 0f 1e fa  (f2) ff 25 <GOT>  ...          16 bytes
 *   lld IBT   .plt.sec         f3 0f 1e fa  ff 25 <GOT>  66 0f 1f 44 00 00  16 bytes
 *   mold      .plt             f3 0f 1e fa  41 bb <index>  ff 25 <GOT>      16 bytes (32-byte header)
 *   mold      .plt.got         f3 0f 1e fa  ff 25 <GOT>  cc cc ...          16 bytes
 * The headers (push GOT+8; jmp *GOT+16) and IBT's lazy .plt entries (endbr64; push; jmp .plt)
 * match no prefix and are not named.
 */
#ifndef FASTUNWIND_PLT_H
#define FASTUNWIND_PLT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FU_R_X86_64_GLOB_DAT 6
#define FU_R_X86_64_JUMP_SLOT 7
#define FU_R_X86_64_IRELATIVE 37
#define FU_ELF64_RELA_SIZE 24 /* r_offset, r_info (sym << 32 | type), r_addend */
#define FU_ELF64_SYM_SIZE 24

/* The indirect jump through the GOT slot: ff 25 disp32 (jmp *disp32(%rip)). */
#define FU_PLT_JMP_OPCODE_0 0xff
#define FU_PLT_JMP_OPCODE_1 0x25
#define FU_PLT_JMP_LENGTH 6

/* What may precede the jump in an entry; mask 0 bytes are wildcards (mold's index). */
typedef struct fu_plt_prefix {
    uint8_t length;
    uint8_t bytes[10];
    uint8_t mask[10];
} fu_plt_prefix;

#define FU_PLT_PREFIXES                                                                                       \
    {                                                                                                         \
        {0, {0}, {0}},                                           /* bfd/lld .plt, bfd .plt.got */             \
        {1, {0xf2}, {0xff}},                                     /* bnd jmp (MPX -z bndplt) */                \
        {4, {0xf3, 0x0f, 0x1e, 0xfa}, {0xff, 0xff, 0xff, 0xff}}, /* endbr64: lld IBT, mold .plt.got */        \
        {5, {0xf3, 0x0f, 0x1e, 0xfa, 0xf2}, {0xff, 0xff, 0xff, 0xff, 0xff}}, /* endbr64; bnd jmp: bfd IBT */   \
        {10, {0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0xbb}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, /* mold: mov $i,%r11d */ \
    }

/* Entry sizes: sh_entsize when it is 8 or 16; else (lld and mold write 0) 8 for an 8-aligned
 * .plt.got (bfd's non-IBT layout), 16 otherwise. */
#define FU_PLT_ENTRY_SMALL 8
#define FU_PLT_ENTRY_LARGE 16
/* Entries examined per section: 2^20 stubs is 16 MiB of PLT, far beyond any real module
 * (libLLVM-14's .plt.sec has ~2,900). */
#define FU_PLT_MAX_ENTRIES (1u << 20)
/* PLT-like sections (.plt, .plt.sec, .plt.got) and relocation sections (.rela.plt, .rela.dyn). */
#define FU_PLT_MAX_SECTIONS 4
#define FU_PLT_MAX_RELOCATION_SECTIONS 4

typedef struct fu_plt_section {
    uint64_t address; /* sh_addr (svma) */
    const uint8_t *data;
    size_t size;
    uint32_t entry_size; /* FU_PLT_ENTRY_SMALL or FU_PLT_ENTRY_LARGE */
} fu_plt_section;

typedef struct fu_plt_input {
    const uint8_t *dynsym;
    size_t dynsym_size;
    const char *dynstr;
    size_t dynstr_size;
    const uint8_t *relocations[FU_PLT_MAX_RELOCATION_SECTIONS]; /* Elf64_Rela arrays */
    size_t relocation_sizes[FU_PLT_MAX_RELOCATION_SECTIONS];
    unsigned relocation_count;
    fu_plt_section sections[FU_PLT_MAX_SECTIONS];
    unsigned section_count;
} fu_plt_input;

/* One named stub: its name is `name` (name_len bytes, not NUL-terminated, inside dynstr) + "@plt",
 * or for an IRELATIVE slot (name NULL) "*ABS*+0x<addend>@plt", as objdump names them. */
typedef struct fu_plt_stub {
    uint64_t address;
    uint32_t size;
    const char *name;
    size_t name_len;
    uint64_t addend;
} fu_plt_stub;

/* Called per named stub, in section then address order; false stops with FU_PLT_STOPPED. */
typedef bool (*fu_plt_emit)(void *context, const fu_plt_stub *stub);

typedef enum fu_plt_status {
    FU_PLT_OK = 0,
    FU_PLT_NO_MEMORY,
    FU_PLT_STOPPED,
} fu_plt_status;

/* Outcome counts: entries that matched no prefix (headers, lazy stubs, padding), jumps to a slot
 * without a relocation, relocations naming a symbol outside .dynsym or a name outside .dynstr. */
typedef struct fu_plt_counts {
    size_t named, unmatched, no_relocation, bad_symbol;
} fu_plt_counts;

/* Name the stubs of `input`'s sections. Hostile input (truncated sections, bogus symbol indices,
 * names without a NUL) never reads outside the buffers: such entries are counted and skipped. */
fu_plt_status fu_plt_synthesize(const fu_plt_input *input, fu_plt_emit emit, void *context, fu_plt_counts *counts);

/* The entry size for a PLT-like section (see FU_PLT_ENTRY_*). */
uint32_t fu_plt_entry_size(uint64_t sh_entsize, uint64_t sh_addralign, bool is_plt_got);

#endif
