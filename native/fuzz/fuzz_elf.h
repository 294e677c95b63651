/* fuzz_elf.h: ELF64 section headers for the fuzz drivers that take their seeds from real files
 * (names_driver, symbols_driver), read without trusting the file: a seed's mutants reach here too. */
#ifndef FUZZ_ELF_H
#define FUZZ_ELF_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* An ELF64 file's section headers, read without trusting the file (seeds and their mutants). */
typedef struct fuzz_elf64 {
    const uint8_t *file;
    size_t size;
    Elf64_Ehdr eh;
    Elf64_Shdr strings; /* the section names' section */
} fuzz_elf64;

/* False if `file` is not an ELF64 file whose section table and names' header lie inside it. */
static inline bool fuzz_elf64_open(fuzz_elf64 *e, const uint8_t *file, size_t size)
{
    if (size < sizeof(Elf64_Ehdr) || memcmp(file, ELFMAG, SELFMAG) != 0 || file[EI_CLASS] != ELFCLASS64)
        return false;
    e->file = file;
    e->size = size;
    memcpy(&e->eh, file, sizeof e->eh);
    const Elf64_Ehdr *eh = &e->eh;
    if (eh->e_shoff > size || eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr) || eh->e_shstrndx >= eh->e_shnum)
        return false;
    memcpy(&e->strings, file + eh->e_shoff + eh->e_shstrndx * sizeof(Elf64_Shdr), sizeof e->strings);
    return true;
}

/* Section `i` (< e->eh.e_shnum) and its name, if its bytes and its NUL-terminated name lie inside
 * the file (a NOBITS section has no bytes: false). */
static inline bool fuzz_elf64_section(const fuzz_elf64 *e, unsigned i, Elf64_Shdr *sh, const char **name)
{
    memcpy(sh, e->file + e->eh.e_shoff + i * sizeof *sh, sizeof *sh);
    size_t size = e->size, names = e->strings.sh_offset;
    if (sh->sh_type == SHT_NOBITS || sh->sh_offset > size || sh->sh_size > size - sh->sh_offset || names > size ||
        sh->sh_name >= size - names)
        return false;
    *name = (const char *)e->file + names + sh->sh_name;
    return memchr(*name, 0, size - names - sh->sh_name) != NULL;
}

#endif
