/* names_driver: native/plt.c and native/perf_map.c under AddressSanitizer + UndefinedBehaviorSanitizer
 * on the sections of real binaries (FILE arguments: .dynsym, .dynstr, .rela.plt, .rela.dyn, .plt,
 * .plt.sec, .plt.got read by their section headers) and seeded mutations of them, and on random and
 * mutated perf maps. Every buffer is a malloc'd copy of exactly its size, so a read past it is a
 * report. Exit status 0 when every input passed; the seed is printed first.
 *
 *   make -C native/fuzz asan-names [SEED=N]
 */
#define _POSIX_C_SOURCE 200809L
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_elf.h"
#include "perf_map.h"
#include "plt.h"

static uint64_t state;
static uint64_t next_random(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static uint8_t *copy_of(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (copy && size)
        memcpy(copy, data, size);
    return copy;
}

static void mutate(uint8_t *data, size_t size)
{
    for (int i = 0; size && i < 1 + (int)(next_random() % 8); i++)
        data[next_random() % size] ^= (uint8_t)(1u << (next_random() % 8));
}

static size_t stubs;
static bool count_stub(void *context, const fu_plt_stub *stub)
{
    (void)context;
    if (stub->name && stub->name_len == 0)
        abort(); /* a named stub has a name */
    stubs++;
    return true;
}

static size_t map_entries;
static bool count_entry(void *context, const fu_perf_map_entry *entry)
{
    (void)context;
    if (entry->name_len <= 2)
        abort(); /* perf's rule: names longer than 2 bytes */
    map_entries++;
    return true;
}

/* The PLT input of an ELF64 file, with every buffer copied; false if it has none. */
static bool plt_input(const uint8_t *file, size_t size, fu_plt_input *in)
{
    memset(in, 0, sizeof *in);
    fuzz_elf64 e;
    if (!fuzz_elf64_open(&e, file, size))
        return false;
    for (unsigned i = 0; i < e.eh.e_shnum; i++) {
        Elf64_Shdr sh;
        const char *name;
        if (!fuzz_elf64_section(&e, i, &sh, &name))
            continue;
        uint8_t *data = copy_of(file + sh.sh_offset, sh.sh_size);
        if (sh.sh_type == SHT_DYNSYM) {
            in->dynsym = data, in->dynsym_size = sh.sh_size;
        } else if (!strcmp(name, ".dynstr")) {
            in->dynstr = (const char *)data, in->dynstr_size = sh.sh_size;
        } else if ((!strcmp(name, ".rela.plt") || !strcmp(name, ".rela.dyn")) &&
                   in->relocation_count < FU_PLT_MAX_RELOCATION_SECTIONS) {
            in->relocations[in->relocation_count] = data;
            in->relocation_sizes[in->relocation_count++] = sh.sh_size;
        } else if ((!strcmp(name, ".plt") || !strcmp(name, ".plt.sec") || !strcmp(name, ".plt.got")) &&
                   in->section_count < FU_PLT_MAX_SECTIONS) {
            in->sections[in->section_count++] = (fu_plt_section){
                sh.sh_addr, data, sh.sh_size, fu_plt_entry_size(sh.sh_entsize, sh.sh_addralign, !strcmp(name, ".plt.got"))};
        } else {
            free(data);
        }
    }
    return in->section_count > 0;
}

static void free_input(fu_plt_input *in)
{
    free((void *)in->dynsym);
    free((void *)in->dynstr);
    for (unsigned i = 0; i < in->relocation_count; i++)
        free((void *)in->relocations[i]);
    for (unsigned i = 0; i < in->section_count; i++)
        free((void *)in->sections[i].data);
}

static void mutate_input(fu_plt_input *in)
{
    switch (next_random() % 4) {
    case 0: mutate((uint8_t *)in->dynsym, in->dynsym_size); break;
    case 1: mutate((uint8_t *)in->dynstr, in->dynstr_size); break;
    case 2:
        if (in->relocation_count)
            mutate((uint8_t *)in->relocations[0], in->relocation_sizes[0] -= next_random() % 2 * 7 % (in->relocation_sizes[0] + 1));
        break;
    default:
        if (in->section_count)
            mutate((uint8_t *)in->sections[0].data, in->sections[0].size);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL);
    int mutations = 500, first = 1;
    if (argc > 2 && !strcmp(argv[1], "--seed")) {
        seed = strtoull(argv[2], NULL, 10);
        first = 3;
    }
    printf("names_driver: seed %llu\n", (unsigned long long)seed);
    state = seed * 2654435761u + 1;
    for (int a = first; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f)
            continue;
        static uint8_t file[64 << 20];
        size_t size = fread(file, 1, sizeof file, f);
        fclose(f);
        for (int m = 0; m <= mutations; m++) {
            fu_plt_input in;
            if (!plt_input(file, size, &in)) {
                free_input(&in);
                break;
            }
            if (m)
                mutate_input(&in);
            fu_plt_counts counts;
            if (fu_plt_synthesize(&in, count_stub, NULL, &counts) != FU_PLT_OK)
                return 1;
            free_input(&in);
        }
    }
    static const char sample[] = "7f0000001000 40 jitted_function\n1000 10 ab\nzz 10 x\n2000 ffffffffffffffffff big\n";
    for (int m = 0; m < 20000; m++) {
        size_t size = m % 3 ? sizeof sample - 1 : next_random() % 300;
        uint8_t *text = m % 3 ? copy_of((const uint8_t *)sample, size) : malloc(size ? size : 1);
        for (size_t i = 0; !(m % 3) && i < size; i++)
            text[i] = "0123456789abcdef \n\xff"[next_random() % 19];
        if (m % 3)
            mutate(text, size);
        fu_perf_map_counts counts;
        fu_perf_map_parse(text, size, count_entry, NULL, &counts);
        free(text);
    }
    printf("names_driver: %zu PLT stubs named, %zu perf-map entries; no report\n", stubs, map_entries);
    return 0;
}
