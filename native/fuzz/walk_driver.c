/* walk_driver: the stack walker (walk.c, memory.c, the compact tables) on hostile and mutated
 * stacks, for the sanitizer and fuzzing builds of native/fuzz/Makefile (`make asan-walk`,
 * `make fuzz-walk`).
 *
 * Set-up, once per run (from the seed, so a failing input replays with the same --seed):
 *   - unwind tables: .eh_frame and .debug_frame of real ELF files (the arguments, e.g. libc and
 *     ld.so, plus this driver itself and a gcc -g -fno-asynchronous-unwind-tables shared object
 *     with only .debug_frame), a hostile .eh_frame + .debug_frame built here (CFA = SP, RA
 *     same_value / val_offset / register / expression, DRAP, PLT, looping and unreadable
 *     expressions, signal and RA-column-3 CIEs, huge and negative offsets, gaps without CFI), and
 *     hand-made sections of the CFI corpus (--raw); each parsed, evaluated and, where it can be,
 *     turned into a compact table (built, serialized and validated by fu_compact_open) and laid
 *     out as the BPF unwinder's map slots (bpf_layout.c: rows, pages, rules, the evicting ring);
 *   - address spaces of 1-3 of those modules at random biases (overlaps rejected as
 *     fu_address_space_init does), with and without their compact tables, some with a fake compiled
 *     table (fake_compiled) that returns every fu_eh_elf_status and some garbage; each space
 *     in the six backends, each (space, backend) with one fu_walk_cache bound once and shared by
 *     every input, as unwind_samples shares it.
 *
 * One input (decode_input): a fixed header chooses the space, the backend, max_frames, the
 * registers (valid mask; values raw, in the stack or PCs of the modules' FDEs), the stack address
 * (typical, random, or near 2^64); the rest is the stack dump (0..16 KiB), taken raw or with tagged
 * words turned into return addresses and stack pointers (so that libFuzzer's byte mutations make
 * frames). The standalone generator also writes stacks of real frames: it walks the DWARF rows
 * backwards from a PC, putting return addresses and saved registers where the rules read them.
 *
 * Checks per input (a violation aborts, like a sanitizer report): the walk ends within the
 * watchdog; frame_count <= max_frames and FU_WALK_MAX_FRAMES; FRAME_LIMIT exactly when the limit
 * was reached; the outcome, frame kinds and flags are in range; every frame's module is UINT32_MAX
 * or the module whose [start, end) holds its lookup address (ip, or ip - 1 after a call); then the
 * same result, frame for frame, from
 *   - the walk without a cache, with the shared cache (twice: cold and warm), with a freshly bound
 *     cache and with a cache bound to another space (which fu_walk must ignore);
 *   - fu_walk_step applied frame by frame with fu_walk's checks restated (reference_walk);
 *   - backends auto and dwarf, in spaces without a compiled step (compact tables are exact);
 * and a walk of the dump cut short that ends ("end") is the whole dump's (check_cut_dump).
 *
 * Two builds share check_input(): libFuzzer (-DFU_LIBFUZZER) and the standalone gcc ASAN+UBSAN
 * driver, whose main() runs the hand-written hostile cases, then --iterations seeded inputs, half
 * generated afresh and half mutations of earlier ones; a failing input is saved under --save-dir
 * and `walk_driver --seed S --replay FILE` runs it again.
 *
 * Exit status: 0 clean, 2 usage or set-up failure, 3 timeout; a sanitizer report or an invariant
 * violation aborts (SIGABRT) after the input is named and saved.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bpf_layout.h"
#include "compact_table.h"
#include "intern.h"
#include "memory.h"
#include "step_batch.h"
#include "walk.h"

/* ---- limits ------------------------------------------------------------------------------------ */

#define MAX_TEMPLATES 32
#define MAX_SEGMENTS 16
#define MAX_SPACES 12
#define MAX_SPACE_MODULES 3
/* PCs sampled per module as starting points and return addresses. */
#define CANDIDATES_PER_MODULE 2048
#define MAX_STACK (16u << 10)
/* Input layout: HEADER_SIZE bytes of choices (decode_input), then the stack dump. */
#define HEADER_SIZE 172
#define MAX_INPUT (HEADER_SIZE + MAX_STACK)
/* Frames the generator lays out at most (deep enough for frame limits of 127 and below). */
#define SYNTH_MAX_DEPTH 200
#define DEFAULT_TIMEOUT 10
#define DEFAULT_ITERATIONS 100000
#define POOL_SIZE 64
/* A raw corpus section becomes a module over at most this much of its FDEs' range. */
#define RAW_MODULE_MAX (1u << 20)

#define FUZZ_DRIVER "walk_driver"
/* the address spaces come from the seed, the modules from the arguments: both as in the run */
#define FUZZ_REPLAY "walk_driver --seed <the seed above> <the run's --raw and ELF arguments> --replay"
#include "fuzz_common.h"

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "walk_driver: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

/* ---- randomness ------------------------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
    uint64_t s = x;
    return rng_next(&s);
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- modules: tables of one file, before placement --------------------------------------------- */

typedef struct template_module {
    char name[96];
    const uint8_t *eh_data, *debug_data; /* section bytes, alive for the run */
    fu_cfi_table eh_frame, debug_frame;
    bool has_eh, has_debug;
    fu_image_segment segments[MAX_SEGMENTS];
    size_t segment_count;
    uint64_t exec_lo, exec_hi;           /* svma range of the executable mapping */
    uint8_t *compact_bytes;
    fu_compact_table compact;
    bool has_compact;
    /* the same table with every row of its first DWARF table laid over as CORRECTED (a repair view
     * that corrects nothing): walks through it must mark the frames and change nothing else */
    uint8_t *corrected_bytes;
    fu_compact_table corrected;
    bool has_corrected;
    uint64_t candidates[CANDIDATES_PER_MODULE]; /* svmas inside FDEs, within the executable range */
    size_t candidate_count;
    bool real; /* an ELF file (its CFI is a compiler's): the generator lays its frames out */
} template_module;

static template_module *templates;
static size_t template_count;

static void parse_table(template_module *t, fu_section_kind kind, const uint8_t *data, uint64_t size, uint64_t address,
                        uint64_t text_base, uint64_t data_base)
{
    fu_section section = {
        .kind = kind, .data = data, .size = size, .address = address, .text_base = text_base,
        .data_base = data_base, .address_size = 8, .segments = t->segments, .segment_count = t->segment_count,
    };
    fu_cfi_table *table = kind == FU_SECTION_EH_FRAME ? &t->eh_frame : &t->debug_frame;
    fu_error err = {0};
    fu_status status = fu_cfi_table_parse(table, &section, &err);
    if (status == FU_OK)
        status = fu_cfi_table_evaluate(table, &err);
    if (status != FU_OK)
        die("%s: %s", t->name, err.message);
    if (kind == FU_SECTION_EH_FRAME)
        t->has_eh = true;
    else
        t->has_debug = true;
}

/* The ring with uses: three copies of the module fill it; the fourth, whose next window (from 0) is
 * the first copy's, in use, evicts the oldest unused one (the second) instead; with every copy in
 * use, the next evicts one, inside the map. */
static void check_bpf_ring_uses(const template_module *t, const fu_bpf_module *module, uint32_t count,
                                uint32_t *evicted)
{
    static uint32_t users[FU_BPF_MAX_MODULES];
    memset(users, 0, sizeof users);
    fu_bpf_ring ring = {.capacity = 3 * count, .users = users};
    uint32_t ids[5], first, n;
    fu_error err = {0};
    for (int round = 0; round < 5; round++) {
        if (fu_bpf_ring_place(&ring, count, &first, &ids[round], evicted, &n, &err) != FU_OK)
            die("%s: BPF ring with uses: %s", t->name, err.message);
        bool expected = round < 3 ? n == 0 : round == 3 ? n == 1 && evicted[0] == ids[1] : n == 1;
        if (!expected || first > ring.capacity - count)
            die("%s: BPF ring with uses: module %d placed at %u (capacity %u), %u evicted", t->name, round, first,
                ring.capacity, n);
        ring.modules[ids[round]] = *module;
        ring.modules[ids[round]].first_slot = first;
        users[ids[round]] = round != 1; /* the second copy: its process gone */
    }
    fu_bpf_ring_free(&ring);
}

/* The ring's growth: full with three copies of the module, a fourth does not fit; grown by one
 * copy's slots, it fits and goes at the former end, evicting none; grown again by less than a copy
 * past a free tail, the window from head (free up to the former end) is kept. */
static void check_bpf_ring_growth(const template_module *t, const fu_bpf_module *module, uint32_t count,
                                  uint32_t *evicted)
{
    fu_bpf_ring ring = {.capacity = 3 * count};
    uint32_t first, id, n;
    fu_error err = {0};
    for (int round = 0; round < 5; round++) {
        if (round == 3) {
            if (fu_bpf_ring_fits(&ring, count))
                die("%s: BPF ring growth: a fourth copy fits a ring of three", t->name);
            fu_bpf_ring_grow(&ring, 4 * count + count / 2);
        }
        if (round == 4)
            fu_bpf_ring_grow(&ring, 5 * count);
        bool fits = fu_bpf_ring_fits(&ring, count);
        if (fu_bpf_ring_place(&ring, count, &first, &id, evicted, &n, &err) != FU_OK)
            die("%s: BPF ring growth: %s", t->name, err.message);
        if (!fits || n != 0 || (round >= 3 && first != (uint32_t)round * count))
            die("%s: BPF ring growth: module %d placed at %u (capacity %u), %u evicted", t->name, round, first,
                ring.capacity, n);
        ring.modules[id] = *module;
        ring.modules[id].first_slot = first;
    }
    fu_bpf_ring_free(&ring);
}

/* The table as the BPF unwinder's slots (bpf_layout.c): the lookup finds fu_compact_find's rule at
 * each row's first and last byte (packed, or through the shared dictionary), and the ring places it
 * (evicting) in maps too small and just big enough. */
static void check_bpf_layout(const template_module *t)
{
    uint64_t count = fu_bpf_module_slot_count(&t->compact);
    if (count == 0)
        return;
    fu_bpf_block *slots = malloc(sizeof *slots * count);
    fu_bpf_rules rules = {0};
    fu_bpf_module module;
    fu_error err = {0};
    if (!slots || fu_bpf_layout_module(&t->compact, &rules, slots, &module, &err) != FU_OK)
        die("%s: BPF layout: %s", t->name, err.message);
    if (module.slot_count != count)
        die("%s: BPF layout: %u slots laid out, %llu counted", t->name, module.slot_count, (unsigned long long)count);
    uint32_t size = (uint32_t)(t->compact.end_svma - t->compact.base_svma);
    for (uint32_t i = 0; i < t->compact.row_count; i++) {
        uint32_t end = i + 1 < t->compact.row_count ? t->compact.row_start[i + 1] : size;
        uint32_t probes[2] = {t->compact.row_start[i], end - 1};
        for (int k = 0; k < 2; k++) {
            uint32_t expected;
            fu_bpf_rule found;
            if (probes[k] >= size || !fu_compact_find(&t->compact, t->compact.base_svma + probes[k], &expected))
                continue;
            uint32_t rule = t->compact.rule_index16 ? t->compact.rule_index16[expected]
                                                    : t->compact.rule_index32[expected];
            if (!fu_bpf_find_rule(slots, &module, &rules, probes[k], &found) ||
                memcmp(&found, &t->compact.rules[rule], sizeof found) != 0)
                die("%s: BPF layout: offset 0x%x finds another rule than the compact table's", t->name, probes[k]);
        }
    }
    static uint32_t evicted[FU_BPF_MAX_MODULES + 1];
    fu_bpf_ring ring = {.capacity = (uint32_t)(count + count / 2)};
    for (int round = 0; round < 4; round++) {
        uint32_t first, id, n;
        if (fu_bpf_ring_place(&ring, (uint32_t)count, &first, &id, evicted, &n, &err) != FU_OK)
            die("%s: BPF ring: %s", t->name, err.message);
        if (first > ring.capacity - count || (round > 0 && n != 1))
            die("%s: BPF ring: module %d placed at %u (capacity %u), %u evicted", t->name, round, first,
                ring.capacity, n);
        ring.modules[id] = module;
        ring.modules[id].first_slot = first;
    }
    fu_bpf_ring_free(&ring);
    check_bpf_ring_uses(t, &module, (uint32_t)count, evicted);
    check_bpf_ring_growth(t, &module, (uint32_t)count, evicted);
    fu_bpf_rules_free(&rules);
    free(slots);
}

/* The compact table of a template, when its CFI allows one (it may not: an FDE up to 2^64). */
static void build_compact(template_module *t)
{
    fu_compact_build build;
    fu_error err = {0};
    if (fu_compact_build_tables(&build, t->has_eh ? &t->eh_frame : NULL, t->has_debug ? &t->debug_frame : NULL, NULL,
                                &err) != FU_OK) {
        printf("walk_driver: %s: no compact table (%s)\n", t->name, err.message);
        return;
    }
    static const uint8_t key[20] = {0xfa, 0x57};
    size_t size = 0;
    if (fu_compact_serialize(&build, FU_COMPACT_KEY_BUILD_ID, key, sizeof key, FU_COMPACT_SYNTH_OFF, &t->compact_bytes, &size, &err) != FU_OK)
        die("%s: compact table serialization: %s", t->name, err.message);
    fu_compact_build_free(&build);
    if (fu_compact_open(&t->compact, t->compact_bytes, size, &err) != FU_OK)
        die("%s: a fresh compact table does not validate: %s", t->name, err.message);
    t->has_compact = true;
    check_bpf_layout(t);

    const fu_cfi_table *view = t->has_eh ? &t->eh_frame : &t->debug_frame;
    uint8_t *origins = malloc(view->entry_count ? view->entry_count : 1);
    if (!origins)
        die("out of memory");
    memset(origins, FU_COMPACT_ORIGIN_CORRECTED, view->entry_count);
    fu_compact_overlay overlay = {NULL, 0, FU_COMPACT_SYNTH_REPAIR | FU_COMPACT_SYNTH_VERSION << 8};
    fu_compact_overlay_row *rows = NULL;
    if (fu_compact_overlay_of_table(view, origins, view->entry_count, &rows, &overlay.count, &err) != FU_OK)
        die("%s: overlay of its own table: %s", t->name, err.message);
    overlay.rows = rows;
    if (fu_compact_build_tables(&build, t->has_eh ? &t->eh_frame : NULL, t->has_debug ? &t->debug_frame : NULL,
                                &overlay, &err) == FU_OK) {
        if (fu_compact_serialize(&build, FU_COMPACT_KEY_BUILD_ID, key, sizeof key, overlay.synth, &t->corrected_bytes,
                                 &size, &err) != FU_OK)
            die("%s: corrected compact table serialization: %s", t->name, err.message);
        fu_compact_build_free(&build);
        if (fu_compact_open(&t->corrected, t->corrected_bytes, size, &err) != FU_OK)
            die("%s: a fresh corrected compact table does not validate: %s", t->name, err.message);
        t->has_corrected = true;
    } else {
        printf("walk_driver: %s: no corrected compact table (%s)\n", t->name, err.message);
    }
    free(rows);
    free(origins);
}

/* PCs to start walks at and to return to: random FDEs of either table, at row addresses and
 * anywhere inside, all within the executable range (candidate() adds PCs anywhere). */
static void sample_candidates(template_module *t, uint64_t *rng)
{
    const fu_cfi_table *tables[2] = {t->has_eh ? &t->eh_frame : NULL, t->has_debug ? &t->debug_frame : NULL};
    for (unsigned attempt = 0; attempt < 8 * CANDIDATES_PER_MODULE && t->candidate_count < CANDIDATES_PER_MODULE;
         attempt++) {
        const fu_cfi_table *table = tables[rng_below(rng, 2)];
        uint64_t pc;
        if (!table || table->fde_count == 0) {
            continue;
        } else {
            const fu_entry *e = &table->entries[table->fde_sorted[rng_below(rng, table->fde_count)]];
            if (e->row_count > 0 && rng_below(rng, 2))
                pc = table->row_address[e->first_row + rng_below(rng, e->row_count)];
            else
                pc = e->pc_begin + rng_below(rng, e->pc_range ? e->pc_range : 1);
        }
        if (pc >= t->exec_lo && pc < t->exec_hi)
            t->candidates[t->candidate_count++] = pc;
    }
    if (t->candidate_count == 0)
        t->candidates[t->candidate_count++] = t->exec_lo;
}

static template_module *new_template(const char *name)
{
    if (template_count == MAX_TEMPLATES)
        die("more than %d modules", MAX_TEMPLATES);
    template_module *t = &templates[template_count++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

static const uint8_t *map_file(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    *size = (size_t)st.st_size;
    return p;
}

/* An ELF64 x86-64 file: its executable PT_LOAD, read-only PT_LOAD bytes, .eh_frame, .debug_frame. */
static bool load_elf(const char *path, uint64_t *rng)
{
    size_t size;
    const uint8_t *file = map_file(path, &size);
    if (!file) {
        fprintf(stderr, "walk_driver: cannot map %s: %s (skipped)\n", path, strerror(errno));
        return false;
    }
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_machine != EM_X86_64 || eh->e_phoff > size || eh->e_phnum > (size - eh->e_phoff) / sizeof(Elf64_Phdr) ||
        eh->e_shoff > size || eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr) || eh->e_shstrndx >= eh->e_shnum)
        die("%s: not an ELF64 x86-64 file this driver reads", path);
    const char *slash = strrchr(path, '/');
    template_module *t = new_template(slash ? slash + 1 : path);
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        if ((ph[i].p_flags & PF_X) && t->exec_hi == 0) {
            t->exec_lo = ph[i].p_vaddr;
            t->exec_hi = ph[i].p_vaddr + ph[i].p_memsz;
        }
        if (!(ph[i].p_flags & PF_W) && ph[i].p_filesz && ph[i].p_offset <= size &&
            ph[i].p_filesz <= size - ph[i].p_offset && t->segment_count < MAX_SEGMENTS)
            t->segments[t->segment_count++] =
                (fu_image_segment){ph[i].p_vaddr, file + ph[i].p_offset, ph[i].p_filesz};
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
    const Elf64_Shdr *strtab = &sh[eh->e_shstrndx];
    uint64_t text = 0, got = 0;
    const Elf64_Shdr *eh_frame = NULL, *debug_frame = NULL;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (strtab->sh_offset > size || sh[i].sh_name >= size - strtab->sh_offset)
            continue;
        const char *name = (const char *)file + strtab->sh_offset + sh[i].sh_name;
        if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset)
            continue;
        if (strcmp(name, ".text") == 0)
            text = sh[i].sh_addr;
        else if (strcmp(name, ".got") == 0)
            got = sh[i].sh_addr;
        else if (strcmp(name, ".eh_frame") == 0)
            eh_frame = &sh[i];
        else if (strcmp(name, ".debug_frame") == 0 && !(sh[i].sh_flags & SHF_COMPRESSED))
            debug_frame = &sh[i];
    }
    if (t->exec_hi <= t->exec_lo || (!eh_frame && !debug_frame))
        die("%s: no executable segment or no CFI", path);
    if (eh_frame)
        parse_table(t, FU_SECTION_EH_FRAME, file + eh_frame->sh_offset, eh_frame->sh_size, eh_frame->sh_addr, text, got);
    if (debug_frame)
        parse_table(t, FU_SECTION_DEBUG_FRAME, file + debug_frame->sh_offset, debug_frame->sh_size,
                    debug_frame->sh_addr, text, got);
    build_compact(t);
    sample_candidates(t, rng);
    t->real = true;
    printf("walk_driver: module %s: %s%s%s, executable [0x%" PRIx64 ", 0x%" PRIx64 "), %zu PCs\n", t->name,
           t->has_eh ? ".eh_frame " : "", t->has_debug ? ".debug_frame " : "",
           t->has_compact ? "compact" : "no compact", t->exec_lo, t->exec_hi, t->candidate_count);
    return true;
}

/* A section of the CFI corpus (make_corpus.py) as a module's only table: its FDEs' range (at most
 * RAW_MODULE_MAX of it) is the module's executable range. */
static bool load_raw(const char *path, uint64_t *rng)
{
    size_t size;
    const uint8_t *data = map_file(path, &size);
    if (!data) {
        fprintf(stderr, "walk_driver: cannot map %s (skipped)\n", path);
        return false;
    }
    const char *slash = strrchr(path, '/');
    template_module *t = new_template(slash ? slash + 1 : path);
    bool debug = strstr(t->name, "debug-frame") != NULL;
    parse_table(t, debug ? FU_SECTION_DEBUG_FRAME : FU_SECTION_EH_FRAME, data, size, debug ? 0 : 0x10000, 0x10000,
                0x200000);
    const fu_cfi_table *table = debug ? &t->debug_frame : &t->eh_frame;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t k = 0; k < table->fde_count; k++) {
        const fu_entry *e = &table->entries[table->fde_sorted[k]];
        lo = e->pc_begin < lo ? e->pc_begin : lo;
        uint64_t end = e->pc_range > UINT64_MAX - e->pc_begin ? UINT64_MAX : e->pc_begin + e->pc_range;
        hi = end > hi ? end : hi;
    }
    if (lo >= hi) {
        fu_cfi_table_free(debug ? &t->debug_frame : &t->eh_frame);
        template_count--; /* no FDE: nothing to walk through */
        return false;
    }
    if (hi - lo > RAW_MODULE_MAX)
        hi = lo + RAW_MODULE_MAX;
    t->exec_lo = lo;
    t->exec_hi = hi;
    build_compact(t);
    sample_candidates(t, rng);
    return true;
}

/* ---- the hostile tables, built here ------------------------------------------------------------ */

typedef struct section_builder {
    uint8_t *data;
    size_t size, cap;
    bool eh; /* .eh_frame (CIE id 0, pcrel CIE pointers, udata4 addresses) or .debug_frame */
} section_builder;

static void sb_bytes(section_builder *b, const void *p, size_t n)
{
    if (b->size + n > b->cap) {
        b->cap = (b->size + n) * 2;
        b->data = realloc(b->data, b->cap);
        if (!b->data)
            die("out of memory");
    }
    memcpy(b->data + b->size, p, n);
    b->size += n;
}

static void sb_le(section_builder *b, uint64_t v, unsigned n)
{
    uint8_t bytes[8];
    put_le(bytes, v, n);
    sb_bytes(b, bytes, n);
}

static void sb_uleb(section_builder *b, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        if (v)
            byte |= 0x80;
        sb_bytes(b, &byte, 1);
    } while (v);
}

/* A CIE: code alignment 1, data alignment -8, RA column `ra`, augmentation "zR" (+ "S") in
 * .eh_frame; its initial instructions. Returns its offset. */
static size_t sb_cie(section_builder *b, uint8_t ra, bool signal, const uint8_t *insns, size_t n)
{
    size_t at = b->size;
    sb_le(b, 0, 4); /* length, patched */
    sb_le(b, b->eh ? 0 : 0xffffffffu, 4);
    uint8_t version = 1;
    sb_bytes(b, &version, 1);
    const char *augmentation = b->eh ? (signal ? "zRS" : "zR") : "";
    sb_bytes(b, augmentation, strlen(augmentation) + 1);
    sb_uleb(b, 1);
    uint8_t data_alignment = 0x78; /* sleb -8 */
    sb_bytes(b, &data_alignment, 1);
    sb_bytes(b, &ra, 1);
    if (b->eh) {
        sb_uleb(b, 1);
        uint8_t encoding = 0x03; /* DW_EH_PE_udata4, absolute */
        sb_bytes(b, &encoding, 1);
    }
    sb_bytes(b, insns, n);
    while ((b->size - at) % 8 != 0) {
        uint8_t nop = 0;
        sb_bytes(b, &nop, 1);
    }
    put_le(b->data + at, b->size - at - 4, 4);
    return at;
}

static void sb_fde(section_builder *b, size_t cie, uint64_t pc, uint64_t range, const uint8_t *insns, size_t n)
{
    size_t at = b->size;
    sb_le(b, 0, 4);
    sb_le(b, b->eh ? at + 4 - cie : cie, 4);
    if (b->eh) {
        sb_le(b, pc, 4);
        sb_le(b, range, 4);
        sb_uleb(b, 0);
    } else {
        sb_le(b, pc, 8);
        sb_le(b, range, 8);
    }
    sb_bytes(b, insns, n);
    while ((b->size - at) % 8 != 0) {
        uint8_t nop = 0;
        sb_bytes(b, &nop, 1);
    }
    put_le(b->data + at, b->size - at - 4, 4);
}

/* One hostile FDE: its CIE (0 ordinary, 1 signal 'S', 2 RA column 3) and instructions. */
typedef struct hostile_fde {
    unsigned cie;
    uint8_t insns[48];
    size_t n;
} hostile_fde;

#define I(...) {__VA_ARGS__}, sizeof((uint8_t[]){__VA_ARGS__})
/* DW_CFA_*: def_cfa 0x0c, def_cfa_register 0x0d, def_cfa_offset 0x0e, def_cfa_expression 0x0f,
 * expression 0x10, offset_extended_sf 0x11, def_cfa_sf 0x12, val_offset 0x14, val_expression 0x16, undefined 0x07,
 * same_value 0x08, register 0x09, remember 0x0a, restore_state 0x0b, advance_loc 0x40 | d,
 * offset 0x80 | reg, restore 0xc0 | reg. DW_OP_breg7 0x77, breg6 0x76, deref 0x06, skip 0x2f. */
static const hostile_fde hostile_fdes[] = {
    {0, I(0x0e, 0x00)},                                     /* CFA = rsp: the caller's SP is ours */
    {0, I(0x0e, 0x00, 0x80 | 16, 0x02)},                    /* CFA = rsp, RA at rsp - 16 */
    {0, I(0x08, 16)},                                       /* RA same_value: the IP never changes */
    {0, I(0x14, 16, 0x01)},                                 /* RA = CFA - 8 (val_offset) */
    {0, I(0x0f, 0x03, 0x77, 0x00, 0x06, 0x86, 0x02)},       /* DRAP: CFA = *rsp, rbp at CFA - 16 */
    /* a DRAP body: CFA = *(rbp - 8), rbp at rbp + 0, r15 at rbp - 16, r13 at CFA - 16 */
    {0, I(0x0f, 0x03, 0x76, 0x78, 0x06, 0x10, 6, 0x02, 0x76, 0x00, 0x10, 15, 0x02, 0x76, 0x70, 0x80 | 13, 0x02)},
    {0, I(0x10, 3, 0x02, 0x76, 0x58, 0x10, 6, 0x02, 0x76, 0x00)}, /* DRAP epilogue: CFA = rsp + 8, rbx at rbp - 40 */
    {0, I(0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22)}, /* the PLT CFA */
    {0, I(0x0f, 0x03, 0x2f, 0xfd, 0xff)},                   /* CFA expression loops (DW_OP_skip -3) */
    {0, I(0x10, 16, 0x02, 0x77, 0x08)},                     /* RA at the address rsp + 8 */
    {0, I(0x09, 16, 3)},                                    /* RA in rbx */
    {0, I(0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06, 0x7f, 0x0c, 0x07, 0x08, 0xc6)}, /* push rbp; mov; leave */
    {0, I(0x0c, 10, 0x00, 0x0a, 0x86, 0x02, 0x42, 0x0c, 0x07, 0x10, 0x0b)}, /* CFA = r10; remember/restore */
    {0, I(0x0c, 11, 0x08)},                                 /* CFA = r11 + 8 (unknown in callers) */
    {0, I(0x0e, 0x18, 0x80 | 7, 0x03)},                     /* rsp saved at CFA - 24 */
    {1, I(0x0e, 0xa0, 0x01, 0x10, 16, 0x03, 0x77, 0xa8, 0x01, 0x10, 7, 0x03, 0x77, 0x98, 0x01)}, /* signal */
    {2, I(0x0e, 0x10, 0x80 | 3, 0x01, 0x80 | 16, 0x02)},    /* RA column 3, and a rule for column 16 */
    {0, I(0x12, 0x07, 0x01)},                               /* CFA = rsp - 8: the SP goes backwards */
    {0, I(0x0c, 0x07, 0x80, 0x80, 0x80, 0x80, 0x10)},        /* CFA = rsp + 2^32: not compact */
    {0, I(0x0f, 0x0a, 0x0e, 0xef, 0xbe, 0xad, 0xde, 0x00, 0x00, 0xad, 0xde, 0x06)}, /* CFA = *0xdead0000deadbeef */
    {0, I(0x07, 16)},                                       /* RA undefined: the end of the stack */
    {0, I(0x16, 3, 0x02, 0x77, 0x00, 0x14, 6, 0x02, 0x07, 12, 0x08, 13)}, /* val rules for rbx, rbp */
    {0, I(0x0f, 0x02, 0x80, 0x00)},                         /* CFA = rip */
    {0, I(0x0c, 0x06, 0x10, 0x86, 0x02)},                   /* CFA = rbp + 16 */
    {0, I(0x0e, 0x90, 0x0d, 0x11, 3, 0xc8, 0x01, 0x11, 6, 0x7f)}, /* saves at CFA - 1600, CFA + 8 */
    {0, I(0x09, 0, 3, 0x09, 6, 16)},                        /* rax = rbx, rbp = RA */
    {0, I(0x10, 16, 0x06, 0x77, 0xff, 0xff, 0xff, 0xff, 0x07)}, /* RA at rsp + 2^31 - 1 (an int32 edge) */
};
#undef I

#define HOSTILE_BASE 0x1000u
#define HOSTILE_FDE_SPAN 0x100u
#define HOSTILE_COUNT (sizeof hostile_fdes / sizeof hostile_fdes[0])
/* .eh_frame covers [HOSTILE_BASE, +HOSTILE_COUNT spans); then a gap of the same size without CFI;
 * then .debug_frame's copies of the same FDEs; .debug_frame also copies the first ten over
 * .eh_frame's range (which wins there). */
#define HOSTILE_DEBUG_BASE (HOSTILE_BASE + 2 * HOSTILE_COUNT * HOSTILE_FDE_SPAN)

static void build_hostile(section_builder *b, uint64_t *rng)
{
    static const uint8_t initial[] = {0x0c, 0x07, 0x08, 0x80 | 16, 0x01}; /* CFA = rsp + 8, RA at CFA - 8 */
    static const uint8_t initial_ra3[] = {0x0c, 0x07, 0x08};
    size_t cies[3];
    cies[0] = sb_cie(b, 16, false, initial, sizeof initial);
    cies[1] = b->eh ? sb_cie(b, 16, true, initial, sizeof initial) : cies[0];
    cies[2] = sb_cie(b, 3, false, initial_ra3, sizeof initial_ra3);
    uint64_t base = b->eh ? HOSTILE_BASE : HOSTILE_DEBUG_BASE;
    for (size_t i = 0; i < HOSTILE_COUNT; i++) {
        const hostile_fde *f = &hostile_fdes[i];
        /* the second half of each FDE's span: a row of the CIE's rules after an advance */
        uint8_t insns[64];
        memcpy(insns, f->insns, f->n);
        size_t n = f->n;
        if (rng_below(rng, 2)) {
            insns[n++] = 0x02; /* DW_CFA_advance_loc1 */
            insns[n++] = HOSTILE_FDE_SPAN / 2;
            insns[n++] = 0x0c;
            insns[n++] = 0x07;
            insns[n++] = 0x08;
        }
        sb_fde(b, cies[f->cie], base + i * HOSTILE_FDE_SPAN, HOSTILE_FDE_SPAN, insns, n);
    }
    if (!b->eh)
        for (size_t i = 0; i < 10; i++)
            sb_fde(b, cies[0], HOSTILE_BASE + i * HOSTILE_FDE_SPAN, HOSTILE_FDE_SPAN, hostile_fdes[(i * 7) % HOSTILE_COUNT].insns,
                   hostile_fdes[(i * 7) % HOSTILE_COUNT].n);
}

static void load_hostile(uint64_t *rng)
{
    static section_builder eh = {.eh = true}, debug = {.eh = false};
    build_hostile(&eh, rng);
    build_hostile(&debug, rng);
    template_module *t = new_template("hostile");
    t->exec_lo = HOSTILE_BASE;
    t->exec_hi = HOSTILE_DEBUG_BASE + HOSTILE_COUNT * HOSTILE_FDE_SPAN + 0x100;
    /* an image segment over the code: reads of module addresses (a CFA = rip) find bytes */
    static uint8_t image[0x1000];
    for (size_t i = 0; i < sizeof image; i++)
        image[i] = (uint8_t)mix(i);
    t->segments[t->segment_count++] = (fu_image_segment){HOSTILE_BASE, image, sizeof image};
    parse_table(t, FU_SECTION_EH_FRAME, eh.data, eh.size, 0x40000, 0, 0);
    parse_table(t, FU_SECTION_DEBUG_FRAME, debug.data, debug.size, 0, 0, 0);
    for (uint32_t k = 0; k < t->eh_frame.entry_count; k++)
        if (t->eh_frame.entries[k].has_error)
            fprintf(stderr, "walk_driver: hostile .eh_frame: %s\n", t->eh_frame.entries[k].error_message);
    for (uint32_t k = 0; k < t->debug_frame.entry_count; k++)
        if (t->debug_frame.entries[k].has_error)
            fprintf(stderr, "walk_driver: hostile .debug_frame: %s\n", t->debug_frame.entries[k].error_message);
    CHECK(t->eh_frame.error_count == 0 && t->debug_frame.error_count == 0 &&
              t->eh_frame.fde_count == HOSTILE_COUNT && t->debug_frame.fde_count == HOSTILE_COUNT + 10,
          "the hostile tables do not parse as intended (%u + %u errors, %u + %u FDEs)", t->eh_frame.error_count,
          t->debug_frame.error_count, t->eh_frame.fde_count, t->debug_frame.fde_count);
    build_compact(t);
    sample_candidates(t, rng);
}

/* ---- a fake compiled table: every fu_eh_elf_status, deterministic in (pc, registers) ----------- */

#define FAKE_BODIES 8

/* The body at pc: 0 (no FDE) for a fifth of the PCs, now and then one past the last body (the
 * walker must not trust it), else 1..FAKE_BODIES. */
static unsigned fake_find(uint64_t pc)
{
    uint64_t h = mix(pc * 31);
    if (h % 5 == 0)
        return 0;
    if (h % 97 == 0)
        return FAKE_BODIES + 1;
    return 1 + (unsigned)((h >> 8) % FAKE_BODIES);
}

static int fake_body(unsigned number, const fu_regs *regs, fu_regs *caller, const fu_reader *reader,
                     uint64_t *fault_address)
{
    uint64_t rsp = 0;
    bool have_rsp = fu_regs_get(regs, FU_REG_RSP, &rsp);
    uint64_t h = mix(number * 31 + rsp * 7 + regs->valid);
    int status = (int)(h % 11);
    if (status == FU_EH_ELF_NO_INFO || status == 8)
        return FU_EH_ELF_STATUS_COUNT; /* a body never says NO_INFO: garbage either way */
    if (status == 9)
        return (int)(h >> 32) | INT32_MIN; /* garbage, negative */
    if (status == 10)
        status = FU_EH_ELF_CFI;
    if (status == FU_EH_ELF_CFI || status == FU_EH_ELF_SIGNAL) {
        /* like a compiled rsp-based row: CFA = rsp + 8k, RA read at CFA - 8 through the reader */
        caller->valid = regs->valid & ((1u << 3) | (1u << FU_REG_RBP) | (0xfu << 12));
        memcpy(caller->value, regs->value, sizeof caller->value);
        if (!have_rsp)
            return FU_EH_ELF_REGISTER_UNKNOWN;
        uint64_t cfa = rsp + 8 * (1 + (h >> 8) % 16), ra;
        fu_read_status read = fu_reader_read(reader, cfa - 8, 8, &ra);
        if (read != FU_READ_OK) {
            *fault_address = (h >> 16) & 1 ? cfa - 8 : h; /* the address, or garbage */
            return read == FU_READ_PAST_DUMP ? FU_EH_ELF_PAST_DUMP : FU_EH_ELF_UNREADABLE;
        }
        if ((h >> 20) % 8 != 0)
            fu_regs_set(caller, FU_REG_RSP, (h >> 24) % 8 == 0 ? h : cfa); /* sometimes a garbage SP */
        if ((h >> 28) % 16 != 0)
            fu_regs_set(caller, FU_REG_RA, ra);
        return status;
    }
    *fault_address = h;
    return status;
}

#define FAKE_BODY(n)                                                                                           \
    static int fake_body_##n(const fu_regs *regs, fu_regs *caller, const fu_reader *reader, uint64_t *fault)   \
    {                                                                                                          \
        return fake_body(n, regs, caller, reader, fault);                                                      \
    }
FAKE_BODY(1)
FAKE_BODY(2)
FAKE_BODY(3)
FAKE_BODY(4)
FAKE_BODY(5)
FAKE_BODY(6)
FAKE_BODY(7)
FAKE_BODY(8)
static const fu_eh_elf_body_fn fake_bodies[FAKE_BODIES + 1] = {
    NULL, fake_body_1, fake_body_2, fake_body_3, fake_body_4, fake_body_5, fake_body_6, fake_body_7, fake_body_8,
};

static int fake_step(uint64_t pc, const fu_regs *regs, fu_regs *caller, const fu_reader *reader, uint64_t *fault)
{
    unsigned body = fake_find(pc);
    if (body == 0)
        return FU_EH_ELF_NO_INFO;
    return body <= FAKE_BODIES ? fake_bodies[body](regs, caller, reader, fault) : FU_EH_ELF_STATUS_COUNT;
}

static const fu_eh_elf_table fake_compiled = {fake_step, fake_find, fake_bodies, FAKE_BODIES};

/* ---- address spaces ------------------------------------------------------------------------------ */

typedef struct space_set {
    fu_module modules[MAX_SPACE_MODULES];
    size_t template_of[MAX_SPACE_MODULES];
    fu_address_space spaces[FU_BACKEND_COUNT]; /* the same modules in each backend */
    fu_walk_cache *caches[FU_BACKEND_COUNT];   /* bound once, shared by every input */
    bool has_compiled;
    /* the modules with their corrected compact tables (template_module.corrected), backend auto */
    fu_module corrected_modules[MAX_SPACE_MODULES];
    fu_address_space corrected_space;
    fu_walk_cache *corrected_cache;
    uint64_t *candidates; /* avmas: the real modules' (the ELF files') first, then the others' */
    size_t candidate_count, real_count;
} space_set;

static space_set spaces[MAX_SPACES];
static size_t space_count;
static size_t hostile_template;

/* Where a module of `size` bytes starts: typical mmap regions, low, next to the previous module,
 * or near the top of the address space. */
static uint64_t pick_start(uint64_t *rng, uint64_t size, uint64_t previous_end)
{
    switch (rng_below(rng, 6)) {
    case 0: return previous_end ? previous_end : 0x400000; /* adjacent: end == start */
    case 1: return previous_end + 0x1000 * (1 + rng_below(rng, 64));
    case 2: return 0x555555554000ull + 0x1000 * rng_below(rng, 1 << 16);
    case 3: return 0x1000 * (1 + rng_below(rng, 64)); /* low */
    case 4: return (UINT64_MAX - size - 0x1000 * rng_below(rng, 16)) & ~0xfffull; /* near 2^64 */
    default: return 0x7f0000000000ull + 0x1000 * rng_below(rng, 1 << 24);
    }
}

static int compare_modules(const void *a, const void *b)
{
    const fu_module *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static void make_space(space_set *s, uint64_t *rng, const size_t *fixed, size_t fixed_count, int compiled_mode)
{
    for (unsigned attempt = 0;; attempt++) {
        if (attempt == 10000)
            die("no placement of the modules without overlap in 10000 attempts");
        size_t count = fixed_count ? fixed_count : 1 + (size_t)rng_below(rng, MAX_SPACE_MODULES);
        uint64_t previous_end = 0;
        memset(s->modules, 0, sizeof s->modules);
        bool ok = true;
        for (size_t i = 0; i < count; i++) {
            size_t ti = fixed_count ? fixed[i] : (size_t)rng_below(rng, template_count);
            for (unsigned retry = 0; !fixed_count && !templates[ti].real && retry < 2; retry++)
                ti = (size_t)rng_below(rng, template_count); /* mostly real modules */
            const template_module *t = &templates[ti];
            uint64_t size = t->exec_hi - t->exec_lo;
            uint64_t start = pick_start(rng, size, previous_end);
            if (size > UINT64_MAX - start) {
                ok = false;
                break;
            }
            fu_module *m = &s->modules[i];
            m->start = start;
            m->end = start + size;
            m->bias = start - t->exec_lo;
            m->compact = t->has_compact && (compiled_mode == 2 || rng_below(rng, 3)) ? &t->compact : NULL;
            m->eh_frame = t->has_eh ? &t->eh_frame : NULL;
            m->debug_frame = t->has_debug ? &t->debug_frame : NULL;
            m->segments = t->segments;
            m->segment_count = t->segment_count;
            m->id = (uint32_t)ti; /* sorted below: the id says which template */
            if (rng_below(rng, 2)) { /* an entry point anywhere in the code: entry code where no FDE is */
                uint64_t entry = t->exec_lo + rng_below(rng, size);
                fu_module_set_entry(m, entry);
                if (m->compact && (m->eh_frame || m->debug_frame)) { /* the compact table's answer is the same */
                    fu_module alone = {.compact = m->compact};
                    fu_module_set_entry(&alone, entry);
                    if (alone.entry_code_size != m->entry_code_size)
                        invariant_failed("entry code at 0x%llx: %llu bytes from the compact table, %llu from the DWARF tables",
                                         (unsigned long long)entry, (unsigned long long)alone.entry_code_size,
                                         (unsigned long long)m->entry_code_size);
                }
            }
            if (compiled_mode == 1 ? i == 0 : compiled_mode == 0 && rng_below(rng, 5) == 0)
                m->compiled = &fake_compiled;
            previous_end = m->end;
        }
        if (!ok)
            continue;
        qsort(s->modules, count, sizeof s->modules[0], compare_modules);
        for (size_t i = 1; i < count; i++)
            if (s->modules[i].start < s->modules[i - 1].end)
                ok = false; /* overlapping mappings: fu_address_space_init refuses them too */
        if (!ok)
            continue;
        s->has_compiled = false;
        s->candidate_count = s->real_count = 0;
        for (size_t i = 0; i < count; i++) {
            s->template_of[i] = s->modules[i].id;
            s->has_compiled |= s->modules[i].compiled != NULL;
            s->candidate_count += templates[s->modules[i].id].candidate_count;
            s->real_count += templates[s->modules[i].id].real ? templates[s->modules[i].id].candidate_count : 0;
        }
        s->candidates = malloc(s->candidate_count * sizeof *s->candidates);
        if (!s->candidates)
            die("out of memory");
        size_t n = 0;
        for (int real = 1; real >= 0; real--)
            for (size_t i = 0; i < count; i++) {
                const template_module *t = &templates[s->modules[i].id];
                for (size_t k = 0; t->real == real && k < t->candidate_count; k++)
                    s->candidates[n++] = t->candidates[k] + s->modules[i].bias;
            }
        for (size_t i = 0; i < count; i++) {
            const template_module *t = &templates[s->modules[i].id];
            s->corrected_modules[i] = s->modules[i];
            if (s->modules[i].compact && t->has_corrected)
                s->corrected_modules[i].compact = &t->corrected;
        }
        fu_error corrected_err = {0};
        if (fu_address_space_init(&s->corrected_space, s->corrected_modules, count, FU_BACKEND_AUTO,
                                  &corrected_err) != FU_OK) /* its image reads need the segments' span */
            die("corrected address space: %s", corrected_err.message);
        s->corrected_cache = malloc(sizeof *s->corrected_cache);
        if (!s->corrected_cache)
            die("out of memory");
        fu_walk_cache_bind(s->corrected_cache, &s->corrected_space);
        for (unsigned b = 0; b < FU_BACKEND_COUNT; b++) {
            fu_error err = {0};
            if (fu_address_space_init(&s->spaces[b], s->modules, count, b, &err) != FU_OK)
                die("address space: %s", err.message); /* overlaps were left out above */
            s->caches[b] = malloc(sizeof *s->caches[b]);
            if (!s->caches[b])
                die("out of memory");
            fu_walk_cache_bind(s->caches[b], &s->spaces[b]);
        }
        return;
    }
}

static const char *template_name(const space_set *s, size_t i) { return templates[s->template_of[i]].name; }

static void describe_spaces(void)
{
    for (size_t k = 0; k < space_count; k++) {
        const space_set *s = &spaces[k];
        printf("walk_driver: space %zu:", k);
        for (size_t i = 0; i < s->spaces[0].count; i++) {
            const fu_module *m = &s->modules[i];
            printf(" %s [0x%" PRIx64 ", 0x%" PRIx64 ")%s%s", template_name(s, i), m->start, m->end,
                   m->compact ? " compact" : "", m->compiled ? " compiled" : "");
        }
        printf("\n");
    }
}

static void setup(uint64_t seed, char **elves, size_t elf_count, char **raws, size_t raw_count)
{
    uint64_t rng = seed ^ 0x5eed5eed5eedull;
    templates = calloc(MAX_TEMPLATES, sizeof *templates);
    if (!templates)
        die("out of memory");
    load_hostile(&rng);
    hostile_template = 0;
    for (size_t i = 0; i < elf_count; i++)
        load_elf(elves[i], &rng);
    for (size_t i = 0; i < raw_count; i++)
        load_raw(raws[i], &rng);
    /* space 0: the hostile module with its compact table next to the first ELF (libc), for the
     * hand-written cases; space 1: the hostile module with a compiled step; then random spaces, a
     * few of them without compiled steps and with every compact table. */
    size_t fixed0[2] = {hostile_template, template_count > 1 ? 1 : 0};
    make_space(&spaces[space_count++], &rng, fixed0, template_count > 1 ? 2 : 1, 2);
    size_t fixed1[1] = {hostile_template};
    make_space(&spaces[space_count++], &rng, fixed1, 1, 1);
    while (space_count < MAX_SPACES) {
        int mode = space_count % 3 == 0 ? 2 : 0;
        make_space(&spaces[space_count++], &rng, NULL, 0, mode);
    }
}

/* ---- one input --------------------------------------------------------------------------------- */

typedef struct walk_case {
    size_t space;
    unsigned backend;
    size_t max_frames;
    bool other_cache; /* also walk with a cache bound to another space */
    fu_regs regs;
    uint8_t *stack; /* exact-size heap copy: ASAN sees any read past it */
    uint64_t stack_address, stack_size;
} walk_case;

typedef struct reader_bytes {
    const uint8_t *data;
    size_t size, pos;
} reader_bytes;

static uint64_t take(reader_bytes *r, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++, r->pos++)
        if (r->pos < r->size)
            v |= (uint64_t)r->data[r->pos] << (8 * i);
    return v;
}

/* A PC of space s chosen by `pick`: mostly in an FDE of a real module, else in an FDE of any
 * module, sometimes anywhere in a module's mapping (gaps without CFI included). */
static uint64_t candidate(const space_set *s, uint64_t pick)
{
    switch (pick >> 60) {
    case 0: {
        const fu_module *m = &s->modules[(pick >> 32) % s->spaces[0].count];
        return m->start + (pick & 0xffffffff) % (m->end - m->start);
    }
    case 1:
    case 2:
    case 3: return s->candidates[pick % s->candidate_count];
    default: return s->candidates[pick % (s->real_count ? s->real_count : s->candidate_count)];
    }
}


/* Header: space u8, backend u8, max_frames u16, flags u8, mask mode u8, mask u24, stack mode u8,
 * stack u64, then per register (17): kind u8, value u64. The rest of the input is the stack. */
static void decode_input(const uint8_t *data, size_t size, walk_case *c)
{
    reader_bytes r = {data, size < HEADER_SIZE ? size : HEADER_SIZE, 0};
    memset(c, 0, sizeof *c);
    c->space = (size_t)take(&r, 1) % space_count;
    const space_set *s = &spaces[c->space];
    c->backend = (unsigned)take(&r, 1) % FU_BACKEND_COUNT;
    uint64_t frames = take(&r, 2);
    switch (frames & 3) {
    case 0: c->max_frames = FU_WALK_MAX_FRAMES; break;
    case 1: c->max_frames = 127; break;
    case 2: c->max_frames = (frames >> 2) % 9; break;
    default: c->max_frames = frames >> 2; break; /* up to 16383: clipped by fu_walk */
    }
    uint64_t flags = take(&r, 1);
    c->other_cache = flags & 1;
    bool shaped = flags & 2;
    uint64_t mask_mode = take(&r, 1), mask = take(&r, 3);
    switch (mask_mode % 4) {
    case 0:
    case 1: c->regs.valid = (1u << FU_WALK_REGISTERS) - 1; break;
    case 2: c->regs.valid = (uint32_t)(mask & 0x1ffff) | (1u << FU_REG_RA); break;
    default: c->regs.valid = (uint32_t)(mask & 0x1ffff); break;
    }
    uint64_t stack_mode = take(&r, 1), stack = take(&r, 8);
    c->stack_size = size > HEADER_SIZE ? size - HEADER_SIZE : 0;
    if (c->stack_size > MAX_STACK)
        c->stack_size = MAX_STACK;
    switch (stack_mode % 8) {
    case 5: c->stack_address = stack & ~7ull; break;
    case 6: c->stack_address = 0 - (1 + stack % 0x5000); break; /* the dump wraps past 2^64 */
    case 7: c->stack_address = stack; break;                   /* exact, maybe unaligned */
    default: c->stack_address = 0x7ffd00000000ull + (stack & 0xfffff8); break;
    }
    uint64_t span = c->stack_size + 128;
    for (unsigned reg = 0; reg < FU_WALK_REGISTERS; reg++) {
        uint64_t kind = take(&r, 1), v = take(&r, 8), value;
        switch (kind % 8) {
        case 0: value = v; break;
        case 1: value = v & 0xffffffff; break;
        case 2: value = c->stack_address + (v % span & ~7ull); break;
        case 3: value = c->stack_address + v % span - 64; break;
        case 4: value = candidate(s, v); break;
        case 5: value = candidate(s, v) + 1; break;
        case 6: value = 0; break;
        default: value = c->stack_address + c->stack_size - v % 64; break;
        }
        c->regs.value[reg] = value;
    }
    c->stack = malloc(c->stack_size ? c->stack_size : 1);
    if (!c->stack)
        die("out of memory");
    if (c->stack_size)
        memcpy(c->stack, data + HEADER_SIZE, c->stack_size);
    if (shaped) {
        /* tagged words: 0 a return address, 1 a stack address, 2 a PC; others stay */
        for (uint64_t at = 0; at + 8 <= c->stack_size; at += 8) {
            uint64_t w = get_le(c->stack + at, 8);
            switch (w & 7) {
            case 0: put_le(c->stack + at, candidate(s, w >> 3) + 1, 8); break;
            case 1: put_le(c->stack + at, c->stack_address + ((w >> 3) % (c->stack_size + 16) & ~7ull), 8); break;
            case 2: put_le(c->stack + at, candidate(s, w >> 3), 8); break;
            default: break;
            }
        }
    }
}

/* ---- the checks -------------------------------------------------------------------------------- */

/* one frame of a walk, gathered from fu_walk's columns for the checks */
typedef struct frame {
    uint64_t ip;
    uint32_t module;
    uint8_t kind, flags;
} frame;

typedef struct walk_out {
    fu_walk_result result;
    frame frames[FU_WALK_MAX_FRAMES];
} walk_out;

static void check_same(const walk_out *a, const walk_out *b, const char *what_a, const char *what_b)
{
    CHECK(a->result.outcome == b->result.outcome && a->result.frame_count == b->result.frame_count &&
              a->result.fault_address == b->result.fault_address,
          "%s: %s after %zu frames (fault 0x%" PRIx64 "), %s: %s after %zu frames (fault 0x%" PRIx64 ")", what_a,
          fu_walk_outcome_name(a->result.outcome), a->result.frame_count, a->result.fault_address, what_b,
          fu_walk_outcome_name(b->result.outcome), b->result.frame_count, b->result.fault_address);
    for (size_t i = 0; i < a->result.frame_count; i++) {
        const frame *x = &a->frames[i], *y = &b->frames[i];
        CHECK(x->ip == y->ip && x->module == y->module && x->kind == y->kind && x->flags == y->flags,
              "frame %zu: %s has ip 0x%" PRIx64 " module %u kind %u flags %u, %s ip 0x%" PRIx64
              " module %u kind %u flags %u",
              i, what_a, x->ip, x->module, x->kind, x->flags, what_b, y->ip, y->module, y->kind, y->flags);
    }
}

/* fu_walk restated over fu_walk_step: one step per frame, fu_walk's own checks between steps. */
static void reference_walk(const fu_address_space *space, const fu_regs *initial, const fu_reader *reader,
                           size_t max_frames, walk_out *out)
{
    fu_walk_result *result = &out->result;
    *result = (fu_walk_result){FU_WALK_END, 0, 0};
    if (max_frames > FU_WALK_MAX_FRAMES)
        max_frames = FU_WALK_MAX_FRAMES;
    fu_regs regs = *initial, caller;
    uint64_t ip;
    if (max_frames == 0 || !fu_regs_get(&regs, FU_REG_RA, &ip)) {
        result->outcome = max_frames == 0 ? FU_WALK_FRAME_LIMIT : FU_WALK_REGISTER_UNKNOWN;
        return;
    }
    bool ip_is_return_address = false;
    uint8_t kind = FU_FRAME_FIRST;
    for (;;) {
        frame *frame = &out->frames[result->frame_count++];
        int64_t m = fu_address_space_find(space, fu_lookup_address(ip, ip_is_return_address));
        frame->ip = ip;
        frame->module = m < 0 ? UINT32_MAX : (uint32_t)m;
        frame->kind = kind;
        frame->flags = 0;
        if (result->frame_count == max_frames) {
            result->outcome = FU_WALK_FRAME_LIMIT;
            return;
        }
        int caller_kind = fu_walk_step(space, reader, &regs, ip_is_return_address, &caller, &frame->flags, result);
        if (caller_kind < 0)
            return;
        CHECK(caller_kind == FU_FRAME_CFI || caller_kind == FU_FRAME_SIGNAL || caller_kind == FU_FRAME_FP,
              "fu_walk_step returned frame kind %d", caller_kind);
        bool signal_frame = caller_kind == FU_FRAME_SIGNAL;
        kind = (uint8_t)caller_kind;
        uint64_t next_ip, sp, next_sp;
        if (!fu_regs_get(&caller, FU_REG_RA, &next_ip) || next_ip == 0) {
            result->outcome = FU_WALK_END;
            return;
        }
        if (!fu_regs_get(&caller, FU_REG_RSP, &next_sp)) {
            result->outcome = FU_WALK_REGISTER_UNKNOWN;
            return;
        }
        if (fu_regs_get(&regs, FU_REG_RSP, &sp)) {
            if (next_sp == sp && next_ip == ip) {
                result->outcome = FU_WALK_NO_PROGRESS;
                return;
            }
            if (!signal_frame && next_sp < sp) {
                result->outcome = FU_WALK_SP_BACKWARDS;
                result->fault_address = next_sp;
                return;
            }
        }
        regs = caller;
        ip = next_ip;
        ip_is_return_address = !signal_frame;
    }
}

/* What one walk must satisfy on its own. */
static void check_walk(const fu_address_space *space, const fu_regs *initial, size_t max_frames, const walk_out *w)
{
    const fu_walk_result *r = &w->result;
    size_t limit = max_frames < FU_WALK_MAX_FRAMES ? max_frames : FU_WALK_MAX_FRAMES;
    CHECK((unsigned)r->outcome < FU_WALK_OUTCOME_COUNT, "outcome %d", (int)r->outcome);
    CHECK(r->frame_count <= limit, "%zu frames, limit %zu", r->frame_count, limit);
    CHECK((r->outcome == FU_WALK_FRAME_LIMIT) == (r->frame_count == limit),
          "outcome %s after %zu frames, limit %zu", fu_walk_outcome_name(r->outcome), r->frame_count, limit);
    bool ra_known = initial->valid >> FU_REG_RA & 1;
    CHECK(r->frame_count > 0 || limit == 0 || !ra_known, "no frame although the IP is known");
    CHECK(r->frame_count == 0 || w->frames[0].ip == initial->value[FU_REG_RA], "frame 0 is not the sampled IP");
    for (size_t i = 0; i < r->frame_count; i++) {
        const frame *f = &w->frames[i];
        CHECK((i == 0) == (f->kind == FU_FRAME_FIRST) && f->kind <= FU_FRAME_FP, "frame %zu kind %u", i, f->kind);
        CHECK((f->flags & ~FU_FRAME_SIGNAL_TRAMPOLINE) == 0, "frame %zu flags %u", i, f->flags);
        /* the walker looks frame i up at ip - 1 when ip is a return address (a caller recovered
         * through CFI or the frame pointer), else at ip */
        bool return_address = f->kind == FU_FRAME_CFI || f->kind == FU_FRAME_FP;
        uint64_t lookup = fu_lookup_address(f->ip, return_address);
        int64_t m = fu_address_space_find(space, lookup);
        if (f->module == UINT32_MAX) {
            CHECK(m < 0, "frame %zu (ip 0x%" PRIx64 ") outside every module, but module %lld holds it", i, f->ip,
                  (long long)m);
        } else {
            CHECK(f->module < space->count, "frame %zu module %u of %zu", i, f->module, space->count);
            const fu_module *mod = &space->modules[f->module];
            CHECK(lookup >= mod->start && lookup < mod->end,
                  "frame %zu ip 0x%" PRIx64 " (lookup 0x%" PRIx64 ") outside module %u [0x%" PRIx64 ", 0x%" PRIx64 ")",
                  i, f->ip, lookup, f->module, mod->start, mod->end);
        }
        /* a frame whose CIE is a signal frame's is followed by a FU_FRAME_SIGNAL caller */
        if (i + 1 < r->frame_count)
            CHECK(((f->flags & FU_FRAME_SIGNAL_TRAMPOLINE) != 0) == (w->frames[i + 1].kind == FU_FRAME_SIGNAL),
                  "frame %zu flags %u, next kind %u", i, f->flags, w->frames[i + 1].kind);
    }
}

/* statistics: what the inputs reached */
static unsigned long outcome_count[FU_WALK_OUTCOME_COUNT], kind_count[4], deep_walks, total_frames, walks_checked;
static unsigned long signal_frames, backend_comparisons, shaped_walks, corrected_walks, corrected_frames;

static walk_out out_a, out_b, out_c;
static bool verbose;
static fu_walk_cache fresh_cache;

static void walk_into(const fu_address_space *space, const walk_case *c, const fu_reader *reader,
                      fu_walk_cache *cache, walk_out *out)
{
    static uint64_t ips[FU_WALK_MAX_FRAMES];
    static uint32_t modules[FU_WALK_MAX_FRAMES];
    static uint8_t kinds[FU_WALK_MAX_FRAMES], flags[FU_WALK_MAX_FRAMES];
    /* poison the frames past what the walk writes: a stale frame would show as a difference */
    memset(ips, 0xa5, sizeof ips);
    memset(modules, 0xa5, sizeof modules);
    memset(kinds, 0xa5, sizeof kinds);
    memset(flags, 0xa5, sizeof flags);
    fu_regs registers = c->regs; /* the walk clobbers them */
    if (cache && reader->window) /* as unwind_samples does a few samples ahead */
        fu_walk_prefetch(cache, registers.value[FU_REG_RA], reader->window, reader->window_size);
    fu_walk(space, &registers, reader, cache, &(fu_frames){ips, modules, kinds, flags}, c->max_frames, &out->result);
    for (size_t i = 0; i < out->result.frame_count && i < FU_WALK_MAX_FRAMES; i++)
        out->frames[i] = (frame){ips[i], modules[i], kinds[i], flags[i]};
    /* each frame's registers again (backtrace --registers): the same frames' IPs */
    static fu_regs per_frame[FU_WALK_MAX_FRAMES];
    fu_walk_frame_registers(space, &c->regs, reader, &(fu_frames){ips, modules, kinds, flags}, out->result.frame_count,
                            per_frame);
    for (size_t i = 0; i < out->result.frame_count; i++)
        if (!(per_frame[i].valid >> FU_REG_RA & 1) || per_frame[i].value[FU_REG_RA] != ips[i])
            abort();
}

/* The walk over the stack with one word changed (the one holding one of its return addresses, or
 * any), with `cache` warm from the original walk, against the same without a cache: a shape of
 * the original walk (walk.h) must not be followed where the words it compares differ. */
static void check_one_word_changed(const fu_address_space *space, const walk_case *c, fu_walk_cache *cache,
                                   const uint8_t *data, size_t size)
{
    if (c->stack_size < 8)
        return;
    uint64_t h = fu_hash_bytes(data, size, 0); /* of the input: a replay changes the same word */
    uint64_t at = (h >> 8) % (c->stack_size - 7); /* any word, unless a return address is found */
    if (out_a.result.frame_count > 1 && h & 1) {
        uint64_t ra = out_a.frames[1 + (h >> 1) % (out_a.result.frame_count - 1)].ip;
        for (uint64_t i = 0; i + 8 <= c->stack_size; i++)
            if (get_le(c->stack + i, 8) == ra) {
                at = i;
                break;
            }
    }
    walk_case changed = *c;
    changed.stack = malloc(c->stack_size);
    if (!changed.stack)
        die("out of memory");
    memcpy(changed.stack, c->stack, c->stack_size);
    put_le(changed.stack + at, get_le(c->stack + at, 8) + (h >> 56 | 1) * 8, 8);
    fu_dump_memory memory = {changed.stack, c->stack_address, c->stack_size, space};
    fu_reader reader = fu_dump_reader(&memory);
    static walk_out uncached;
    walk_into(space, &changed, &reader, NULL, &uncached);
    walk_into(space, &changed, &reader, cache, &out_b);
    check_same(&uncached, &out_b, "without a cache, one stack word changed", "a cache warm from the original");
    free(changed.stack);
}

/* The walk over the dump cut short (just after one of its return addresses' slots, so that the
 * slot is the cut dump's last 8 bytes, or anywhere), without a cache: a walk the cut dump ends
 * ("end") is the whole dump's walk, which ends too. A stack is never complete because its dump ran
 * out. */
static void check_cut_dump(const fu_address_space *space, const walk_case *c, const uint8_t *data, size_t size)
{
    if (c->stack_size == 0)
        return;
    uint64_t h = fu_hash_bytes(data, size, 1); /* of the input: a replay cuts at the same byte */
    uint64_t cut = (h >> 8) % c->stack_size;
    if (out_a.result.frame_count > 1 && h & 1) {
        uint64_t ra = out_a.frames[1 + (h >> 1) % (out_a.result.frame_count - 1)].ip;
        for (uint64_t i = 0; i + 8 <= c->stack_size; i++)
            if (get_le(c->stack + i, 8) == ra) {
                cut = i + 8;
                break;
            }
    }
    /* where a module's image holds bytes of the part cut off (a space mapped over the stack: no
     * process has one), the cut dump reads other memory there: no claim */
    for (uint64_t at = cut; at < c->stack_size; at++) {
        uint64_t byte;
        if (fu_address_space_read_image(space, c->stack_address + at, 1, &byte))
            return;
    }
    fu_dump_memory memory = {c->stack, c->stack_address, cut, space};
    fu_reader reader = fu_dump_reader(&memory);
    static walk_out cut_short;
    walk_into(space, c, &reader, NULL, &cut_short);
    if (cut_short.result.outcome == FU_WALK_END)
        check_same(&out_a, &cut_short, "the whole dump", "the dump cut short, ended");
}

/* fu_step_batch over the walker's step (what the property tests call through _core.step_batch): the
 * first step of the case, as fu_walk_step takes it. */
static void check_step_batch(const fu_address_space *space, const walk_case *c, const fu_reader *reader)
{
    fu_step_state state = {{0}, c->regs.valid, 0};
    memcpy(state.regs, c->regs.value, sizeof state.regs);
    fu_step_record record;
    fu_step_batch(space, (const uint8_t *)&state, 1, c->stack, c->stack_size, c->stack_address, fu_step_walker,
                  (void *)space, (uint8_t *)&record);
    fu_walk_result result = {FU_WALK_END, 0, 0};
    fu_regs caller = {{0}, 0};
    uint8_t flags = 0;
    int kind = fu_walk_step(space, reader, &c->regs, false, &caller, &flags, &result);
    CHECK(record.kind == kind && record.flags == flags, "step batch: kind %d flags %u, fu_walk_step: kind %d flags %u",
          record.kind, record.flags, kind, flags);
    if (kind < 0) {
        CHECK(record.outcome == (uint8_t)result.outcome && record.fault_address == result.fault_address,
              "step batch: outcome %u at 0x%" PRIx64 ", fu_walk_step: %s at 0x%" PRIx64, record.outcome,
              record.fault_address, fu_walk_outcome_name(result.outcome), result.fault_address);
        return;
    }
    CHECK(record.outcome == FU_STEP_NO_OUTCOME && record.valid == caller.valid,
          "step batch: outcome %u valid 0x%x, fu_walk_step: valid 0x%x", record.outcome, record.valid, caller.valid);
    for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
        CHECK(!(caller.valid >> r & 1) || record.regs[r] == caller.value[r],
              "step batch: register %u 0x%" PRIx64 ", fu_walk_step: 0x%" PRIx64, r, record.regs[r], caller.value[r]);
}

/* Whether no frame of `w` lies in a module other than an ELF file's (compiler CFI, which the
 * overlay of a corrected table restates row for row): every step it took, a real table's. */
static bool frames_in_real_modules(const space_set *s, const walk_out *w)
{
    for (size_t i = 0; i < w->result.frame_count; i++)
        if (w->frames[i].module != UINT32_MAX && !templates[s->template_of[w->frames[i].module]].real)
            return false;
    return true;
}

/* The space with its corrected compact tables: walks without a cache, with the shared one (twice)
 * and a fresh one (twice: its shape followed) are the same, flags included; where every frame is in
 * a compiler's module or none and no step is compiled, they are out_a's but for the CORRECTED marks. */
static void check_corrected(const space_set *s, const walk_case *c)
{
    const fu_address_space *space = &s->corrected_space;
    fu_dump_memory memory = {c->stack, c->stack_address, c->stack_size, space};
    fu_reader reader = fu_dump_reader(&memory);
    walk_into(space, c, &reader, NULL, &out_b);
    walk_into(space, c, &reader, s->corrected_cache, &out_c);
    check_same(&out_b, &out_c, "corrected without a cache", "corrected with the shared cache");
    walk_into(space, c, &reader, s->corrected_cache, &out_c);
    check_same(&out_b, &out_c, "corrected without a cache", "corrected with the shared cache, again");
    fu_walk_cache_bind(&fresh_cache, space);
    walk_into(space, c, &reader, &fresh_cache, &out_c);
    check_same(&out_b, &out_c, "corrected without a cache", "corrected with a fresh cache");
    walk_into(space, c, &reader, &fresh_cache, &out_c);
    check_same(&out_b, &out_c, "corrected without a cache", "corrected with a fresh cache, again");
    corrected_walks++;
    for (size_t i = 0; i < out_b.result.frame_count; i++)
        corrected_frames += (out_b.frames[i].flags & FU_FRAME_CORRECTED) != 0;
    if (s->has_compiled || !frames_in_real_modules(s, &out_a) || !frames_in_real_modules(s, &out_b))
        return;
    for (size_t i = 0; i < out_b.result.frame_count; i++)
        out_b.frames[i].flags &= (uint8_t)~FU_FRAME_CORRECTED;
    check_same(&out_a, &out_b, "auto without a cache", "corrected without a cache, marks ignored");
}

static void check_input(const uint8_t *data, size_t size)
{
    walk_case c;
    decode_input(data, size, &c);
    space_set *s = &spaces[c.space];
    const fu_address_space *space = &s->spaces[c.backend];
    fu_dump_memory memory = {c.stack, c.stack_address, c.stack_size, space};
    fu_reader reader = fu_dump_reader(&memory);
    char what[64];
    snprintf(what, sizeof what, "%s without a cache", fu_backend_name((fu_backend)c.backend));

    walk_into(space, &c, &reader, NULL, &out_a);
    check_walk(space, &c.regs, c.max_frames, &out_a);
    walks_checked++;
    outcome_count[out_a.result.outcome]++;
    total_frames += out_a.result.frame_count;
    deep_walks += out_a.result.frame_count >= 8;
    for (size_t i = 0; i < out_a.result.frame_count; i++) {
        kind_count[out_a.frames[i].kind & 3]++;
        signal_frames += out_a.frames[i].flags != 0;
    }

    if (verbose)
        printf("walk_driver: %s: space %zu, %s, max %zu, stack 0x%" PRIx64 " +0x%" PRIx64 ": %s after %zu frames\n",
               current_label, c.space, fu_backend_name((fu_backend)c.backend), c.max_frames, c.stack_address, c.stack_size,
               fu_walk_outcome_name(out_a.result.outcome), out_a.result.frame_count);
    for (size_t i = 0; verbose && i < out_a.result.frame_count; i++)
        printf("walk_driver:   frame %zu: 0x%" PRIx64 " module %u kind %u\n", i, out_a.frames[i].ip,
               out_a.frames[i].module, out_a.frames[i].kind);
    /* the shared cache, cold then warm: the cache changes nothing */
    walk_into(space, &c, &reader, s->caches[c.backend], &out_b);
    check_same(&out_a, &out_b, what, "the shared cache");
    walk_into(space, &c, &reader, s->caches[c.backend], &out_b);
    check_same(&out_a, &out_b, what, "the shared cache, again");
    /* a fresh cache: the first walk writes its shape down (if it has one: walk.h), the second
     * follows it, and a stack with one word changed must not */
    fu_walk_cache_bind(&fresh_cache, space);
    walk_into(space, &c, &reader, &fresh_cache, &out_b);
    check_same(&out_a, &out_b, what, "a freshly bound cache");
    for (size_t i = 0; i < 1u << FU_WALK_SHAPE_BITS; i++) {
        const fu_walk_shape *shape = &fresh_cache.shapes[i];
        shaped_walks += shape->frames && shape->ip[0] == c.regs.value[FU_REG_RA];
    }
    walk_into(space, &c, &reader, &fresh_cache, &out_b);
    check_same(&out_a, &out_b, what, "a freshly bound cache, again");
    check_one_word_changed(space, &c, &fresh_cache, data, size);
    check_cut_dump(space, &c, data, size);
    if (c.other_cache) {
        /* bound to another space (other modules, or the same in another backend): ignored */
        const space_set *other = &spaces[(c.space + 1) % space_count];
        walk_into(space, &c, &reader, other->caches[c.backend], &out_b);
        check_same(&out_a, &out_b, what, "a cache bound to another space");
        walk_into(space, &c, &reader, s->caches[(c.backend + 1) % FU_BACKEND_COUNT], &out_b);
        check_same(&out_a, &out_b, what, "a cache bound to the space in another backend");
    }

    /* fu_walk_step, frame by frame */
    reference_walk(space, &c.regs, &reader, c.max_frames, &out_b);
    check_same(&out_a, &out_b, what, "fu_walk_step frame by frame");
    check_step_batch(space, &c, &reader);

    /* compact tables are exact: without a compiled step, auto and table (compact table, then
     * DWARF) walk as DWARF alone */
    if (!s->has_compiled && (c.backend == FU_BACKEND_AUTO || c.backend == FU_BACKEND_DWARF ||
                             c.backend == FU_BACKEND_TABLE)) {
        unsigned other_backend = c.backend == FU_BACKEND_DWARF ? FU_BACKEND_AUTO : FU_BACKEND_DWARF;
        const fu_address_space *twin = &s->spaces[other_backend];
        fu_dump_memory twin_memory = {c.stack, c.stack_address, c.stack_size, twin};
        fu_reader twin_reader = fu_dump_reader(&twin_memory);
        walk_into(twin, &c, &twin_reader, s->caches[other_backend], &out_b);
        backend_comparisons++;
        check_same(&out_a, &out_b, what, other_backend == FU_BACKEND_AUTO ? "auto (with the cache)" : "dwarf (with the cache)");
    }
    if (c.backend == FU_BACKEND_AUTO)
        check_corrected(s, &c);
    free(c.stack);
}

#ifdef FU_LIBFUZZER

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The modules come from FU_WALK_ELVES (colon-separated; default libc and ld.so) and this binary;
 * the spaces from FU_WALK_SEED (default 1). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char *elves[16];
    size_t n = 0;
    const char *list = getenv("FU_WALK_ELVES");
    static char buffer[4096];
    snprintf(buffer, sizeof buffer, "%s",
             list ? list : "/lib/x86_64-linux-gnu/libc.so.6:/lib64/ld-linux-x86-64.so.2:/proc/self/exe");
    for (char *p = strtok(buffer, ":"); p && n < 16; p = strtok(NULL, ":"))
        elves[n++] = p;
    const char *seed = getenv("FU_WALK_SEED");
    setup(seed ? strtoull(seed, NULL, 0) : 1, elves, n, NULL, 0);
    describe_spaces();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_begin_input(data, size, "a libFuzzer input");
    check_input(data, size);
    return 0;
}

#else /* standalone driver */

/* ---- the generator: inputs, in decode_input's format ---------------------------------------------- */

typedef struct input {
    uint8_t data[MAX_INPUT];
    size_t size;
} input;

/* A PC in an FDE of a real module (of any module if the space has none). */
static uint64_t real_candidate(const space_set *s, uint64_t pick)
{
    return s->candidates[pick % (s->real_count ? s->real_count : s->candidate_count)];
}

static void set_register(uint8_t *header, unsigned reg, uint8_t kind, uint64_t value)
{
    header[18 + reg * 9] = kind;
    put_le(header + 18 + reg * 9 + 1, value, 8);
}

/* The DWARF row at `lookup` of module m, resolved as find_row does. */
static const fu_state *row_at(const fu_module *m, uint64_t svma, const fu_cfi_table **table, const fu_entry **entry)
{
    const fu_cfi_table *tables[2] = {m->eh_frame, m->debug_frame};
    for (unsigned i = 0; i < 2; i++) {
        int64_t fde;
        int64_t row = tables[i] ? fu_cfi_table_find_row(tables[i], svma, &fde) : -1;
        if (row >= 0) {
            *table = tables[i];
            *entry = &tables[i]->entries[fde];
            return fu_cfi_table_state(tables[i], tables[i]->row_state[row]);
        }
    }
    return NULL;
}

/* Lay out real frames: from the first PC, each row's CFA and save slots get the caller's return
 * address (another candidate PC + 1), its saved registers and, for rbp-based CFAs, an rbp that
 * puts the CFA where the stack needs it. Stops where a rule is beyond what it models (CFA
 * expressions, other CFA registers, a signal frame) or the stack ends; the rest stays random. */
static void synthesize_frames(const space_set *s, uint64_t *rng, uint64_t stack_address, uint8_t *stack,
                              uint64_t stack_size, uint8_t *header)
{
    /* at the dump's start half the time, as in a perf sample (where walks have shapes, walk.h) */
    uint64_t sp = stack_address + (rng_below(rng, 2) ? 0 : 8 * rng_below(rng, 8));
    uint64_t pc = real_candidate(s, rng_next(rng));
    set_register(header, FU_REG_RSP, 0, sp);
    set_register(header, FU_REG_RA, 0, pc);
    /* rbp: where its value lives (the register of frame 0, or a save slot), or decided */
    enum { RBP_REGISTER, RBP_SLOT, RBP_FIXED } rbp_state = RBP_REGISTER;
    uint64_t rbp_slot = 0, rbp_value = 0;
    bool return_address = false;
    /* half the time around the deepest walks with a shape (walk.h) */
    unsigned depth = 1 + (unsigned)rng_below(rng, rng_below(rng, 2) ? FU_WALK_SHAPE_FRAMES + 2 : SYNTH_MAX_DEPTH);
#define IN_STACK(a) ((a) - stack_address < stack_size && stack_size - ((a) - stack_address) >= 8)
#define DECIDE_RBP(v)                                                                               \
    do {                                                                                            \
        rbp_value = (v);                                                                            \
        if (rbp_state == RBP_REGISTER)                                                              \
            set_register(header, FU_REG_RBP, 0, rbp_value);                                         \
        else if (rbp_state == RBP_SLOT)                                                             \
            put_le(stack + (rbp_slot - stack_address), rbp_value, 8);                               \
        rbp_state = RBP_FIXED;                                                                      \
    } while (0)
    unsigned d = 0;
    for (; d < depth; d++) {
        uint64_t lookup = fu_lookup_address(pc, return_address);
        int64_t mi = fu_address_space_find(&s->spaces[0], lookup);
        if (mi < 0)
            break;
        const fu_module *m = &s->modules[mi];
        const fu_cfi_table *table;
        const fu_entry *entry;
        const fu_state *state = row_at(m, lookup - m->bias, &table, &entry);
        /* the last frame's caller: half the time a zero return address, which ends the walk */
        uint64_t next_pc = d + 1 == depth && rng_below(rng, 2) ? 0 : real_candidate(s, rng_next(rng)) + 1, cfa;
        if (!state) {
            /* no CFI: a frame-pointer frame at rbp = sp + 16k */
            if (rbp_state == RBP_FIXED)
                break;
            uint64_t rbp = sp + 16 * rng_below(rng, 8);
            if (!IN_STACK(rbp) || !IN_STACK(rbp + 8))
                break;
            DECIDE_RBP(rbp);
            put_le(stack + (rbp + 8 - stack_address), next_pc, 8);
            rbp_state = RBP_SLOT;
            rbp_slot = rbp;
            sp = rbp + 16;
            pc = next_pc;
            return_address = true;
            continue;
        }
        if ((entry->cie && entry->cie->signal_frame) || state->cfa.kind != FU_CFA_REG_OFFSET)
            break;
        if (state->cfa.reg == FU_REG_RSP) {
            cfa = sp + (uint64_t)state->cfa.value;
        } else if (state->cfa.reg == FU_REG_RBP) {
            if (rbp_state == RBP_FIXED) {
                cfa = rbp_value + (uint64_t)state->cfa.value;
            } else {
                cfa = sp + 16 + 8 * rng_below(rng, 32);
                DECIDE_RBP(cfa - (uint64_t)state->cfa.value);
            }
        } else {
            break;
        }
        if (cfa < sp || cfa - stack_address > stack_size)
            break;
        uint64_t ra_column = entry->cie ? entry->cie->ra_column : FU_REG_RA;
        bool caller_rbp_saved = false, ends = true;
        uint64_t caller_rbp_slot = 0;
        for (unsigned k = 0; k < state->count; k++) {
            unsigned column = table->column_pool[state->first + k];
            const fu_rule *rule = &table->rule_pool[state->first + k];
            if (rule->kind != FU_RULE_OFFSET)
                continue;
            uint64_t slot = cfa + (uint64_t)rule->value;
            /* a slot below the SP (an epilogue's rule after the pop) holds the callee's bytes */
            if (!IN_STACK(slot) || slot < sp)
                continue;
            if (column == ra_column) {
                put_le(stack + (slot - stack_address), next_pc, 8);
                ends = false;
            } else if (column == FU_REG_RBP) {
                caller_rbp_saved = true;
                caller_rbp_slot = slot;
            } else {
                put_le(stack + (slot - stack_address), rng_next(rng), 8);
            }
        }
        if (caller_rbp_saved) {
            if (rbp_state != RBP_FIXED)
                DECIDE_RBP(rng_next(rng)); /* this frame's rbp, unused: anything */
            rbp_state = RBP_SLOT;
            rbp_slot = caller_rbp_slot;
            put_le(stack + (rbp_slot - stack_address), stack_address + 8 * rng_below(rng, stack_size / 8 + 1), 8);
        }
        if (verbose)
            printf("walk_driver: generator: frame %u pc 0x%" PRIx64 " sp 0x%" PRIx64 " cfa 0x%" PRIx64 " next 0x%" PRIx64 "%s\n",
                   d, pc, sp, cfa, next_pc, ends ? " (ends)" : "");
        if (ends)
            break;
        sp = cfa;
        pc = next_pc;
        return_address = true;
    }
    if (verbose)
        printf("walk_driver: generator: %u of %u frames laid out\n", d, depth);
#undef IN_STACK
#undef DECIDE_RBP
}

static void generate(input *in, uint64_t *rng)
{
    uint8_t *h = in->data;
    memset(h, 0, HEADER_SIZE);
    size_t space = (size_t)rng_below(rng, space_count);
    h[0] = (uint8_t)space;
    static const uint8_t backends[] = {FU_BACKEND_AUTO,  FU_BACKEND_AUTO,       FU_BACKEND_AUTO,
                                       FU_BACKEND_DWARF, FU_BACKEND_DWARF,      FU_BACKEND_TABLE,
                                       FU_BACKEND_COMPILED, FU_BACKEND_TABLE_ONLY, FU_BACKEND_COMPILED_ONLY};
    h[1] = backends[rng_below(rng, sizeof backends)];
    /* max_frames: mostly the full limit, sometimes 127, tiny limits, or anything up to 16383 */
    static const uint16_t frames[] = {0, 0, 0, 1, 2 | 1 << 2, 2 | 3 << 2, 3 | 1024 << 2, 3 | 1025 << 2};
    uint16_t f = rng_below(rng, 4) ? frames[rng_below(rng, sizeof frames / sizeof frames[0])] : (uint16_t)rng_next(rng);
    put_le(h + 2, f, 2);
    bool synthesize = rng_below(rng, 3) != 0;
    h[4] = (uint8_t)(rng_below(rng, 4) == 0) | (uint8_t)(!synthesize && rng_below(rng, 4) ? 2 : 0);
    h[5] = (uint8_t)(rng_below(rng, 4) ? 0 : rng_next(rng)); /* mostly every register valid */
    put_le(h + 6, rng_next(rng), 3);
    uint64_t size_choice = rng_below(rng, 8);
    uint64_t stack_size = size_choice == 0 ? 0 : size_choice == 1 ? rng_below(rng, 64) : rng_below(rng, MAX_STACK + 1);
    in->size = HEADER_SIZE + stack_size;
    uint8_t *stack = in->data + HEADER_SIZE;
    for (uint64_t i = 0; i < stack_size; i++)
        stack[i] = (uint8_t)rng_next(rng);
    h[9] = (uint8_t)(rng_below(rng, 8) ? 7 : rng_next(rng)); /* mostly an exact address */
    uint64_t stack_address = rng_below(rng, 16) ? 0x7ffd00000000ull + 8 * rng_below(rng, 1 << 20) : rng_next(rng);
    put_le(h + 10, stack_address, 8);
    for (unsigned reg = 0; reg < FU_WALK_REGISTERS; reg++) {
        uint8_t kind = (uint8_t)rng_next(rng);
        if (reg == FU_REG_RA && rng_below(rng, 4))
            kind = 4; /* a PC of the modules */
        else if ((reg == FU_REG_RSP || reg == FU_REG_RBP) && rng_below(rng, 4))
            kind = 2; /* in the stack */
        set_register(h, reg, kind, rng_next(rng));
    }
    if (synthesize && (h[9] % 8) == 7)
        synthesize_frames(&spaces[space], rng, stack_address, stack, stack_size, h);
}

/* Mutate an earlier input: stack bytes and words (return addresses, stack pointers, copies),
 * truncation, and header fields (space, backend, limit, register kinds and values). */
static void mutate(input *in, uint64_t *rng)
{
    unsigned rounds = 1 + (unsigned)rng_below(rng, 4);
    uint64_t stack_size = in->size - HEADER_SIZE;
    uint8_t *stack = in->data + HEADER_SIZE;
    const space_set *s = &spaces[in->data[0] % space_count];
    uint64_t stack_address = get_le(in->data + 10, 8);
    for (unsigned r = 0; r < rounds; r++) {
        uint64_t words = stack_size / 8;
        uint64_t w = words ? rng_below(rng, words) : 0;
        switch (rng_below(rng, 10)) {
        case 0:
            if (stack_size)
                stack[rng_below(rng, stack_size)] ^= (uint8_t)(1u << rng_below(rng, 8));
            break;
        case 1:
            if (words)
                put_le(stack + 8 * w, candidate(s, rng_next(rng)) + 1, 8);
            break;
        case 2:
            if (words)
                put_le(stack + 8 * w, stack_address + 8 * rng_below(rng, words + 2), 8);
            break;
        case 3:
            if (words)
                put_le(stack + 8 * w, 0, 8);
            break;
        case 4:
            if (words > 1)
                memcpy(stack + 8 * w, stack + 8 * rng_below(rng, words), 8);
            break;
        case 5:
            stack_size = rng_below(rng, stack_size + 1);
            in->size = HEADER_SIZE + stack_size;
            break;
        case 6: in->data[rng_below(rng, 5)] = (uint8_t)rng_next(rng); break; /* space, backend, limit, flags */
        case 7: {
            unsigned reg = (unsigned)rng_below(rng, FU_WALK_REGISTERS);
            uint8_t *field = in->data + 18 + reg * 9;
            if (rng_below(rng, 2))
                field[0] = (uint8_t)rng_next(rng);
            else
                put_le(field + 1, get_le(field + 1, 8) + (rng_below(rng, 2) ? 8 : (uint64_t)-8), 8);
            break;
        }
        case 8: in->data[5 + rng_below(rng, 4)] ^= (uint8_t)(1u << rng_below(rng, 8)); break; /* valid mask */
        default:
            put_le(in->data + 10, get_le(in->data + 10, 8) + 8 * (rng_below(rng, 65) - 32), 8); /* stack moves */
            break;
        }
    }
}

/* ---- hand-written hostile cases ------------------------------------------------------------------ */

/* An input on space 0 (the hostile module, then libc) with exact registers and stack words. */
typedef struct hand_case {
    const char *name;
    uint64_t stack_address, stack_size;
    uint32_t valid;
    uint64_t rip, rsp, rbp;
    uint64_t words[8]; /* at rsp .. rsp + 56 when in the dump (and at rsp - 8, -16: words[6], [7]) */
    unsigned backend;
} hand_case;

static uint64_t hostile_bias(void)
{
    for (size_t i = 0; i < spaces[0].spaces[0].count; i++)
        if (spaces[0].template_of[i] == hostile_template)
            return spaces[0].modules[i].bias;
    die("space 0 has no hostile module");
}

static uint64_t hostile_pc(unsigned fde) { return hostile_bias() + HOSTILE_BASE + fde * HOSTILE_FDE_SPAN + 4; }

static void encode_hand_case(const hand_case *hc, input *in)
{
    uint8_t *h = in->data;
    memset(h, 0, HEADER_SIZE);
    h[0] = 0;
    h[1] = (uint8_t)hc->backend;
    h[4] = 1;
    h[5] = 2 + 1; /* mask as given */
    put_le(h + 6, hc->valid, 3);
    h[9] = 7;
    put_le(h + 10, hc->stack_address, 8);
    for (unsigned reg = 0; reg < FU_WALK_REGISTERS; reg++)
        set_register(h, reg, 0, 0x1000 * reg);
    set_register(h, FU_REG_RA, 0, hc->rip);
    set_register(h, FU_REG_RSP, 0, hc->rsp);
    set_register(h, FU_REG_RBP, 0, hc->rbp);
    in->size = HEADER_SIZE + hc->stack_size;
    uint8_t *stack = in->data + HEADER_SIZE;
    memset(stack, 0, hc->stack_size);
    for (unsigned i = 0; i < 8; i++) {
        uint64_t at = i < 6 ? hc->rsp + 8 * i : hc->rsp - 8 * (i - 5);
        if (at - hc->stack_address < hc->stack_size && hc->stack_size - (at - hc->stack_address) >= 8)
            put_le(stack + (at - hc->stack_address), hc->words[i], 8);
    }
}

static size_t hand_cases(hand_case *out)
{
    const uint32_t all = (1u << FU_WALK_REGISTERS) - 1;
    const uint64_t stack = 0x7ffd12340000ull, top = 0 - 0x1000ull;
    const uint64_t libc_pc = real_candidate(&spaces[0], 7);
    /* the middle of libc's code, an image the reader reads as memory */
    const fu_module *libc = &spaces[0].modules[spaces[0].template_of[0] == hostile_template ? 1 : 0];
    const uint64_t in_libc_image = (libc->start + (libc->end - libc->start) / 2) & ~(uint64_t)15;
    const uint64_t gap = hostile_bias() + HOSTILE_BASE + HOSTILE_COUNT * HOSTILE_FDE_SPAN + 0x40;
    size_t n = 0;
    for (unsigned backend = 0; backend < FU_BACKEND_COUNT; backend++) {
        /* zero-size stack */
        out[n++] = (hand_case){"zero-size stack", stack, 0, all, libc_pc, stack, stack, {0}, backend};
        /* the dump at 2^64 - 4096, rsp at its top word: reads wrap */
        out[n++] = (hand_case){"stack near 2^64", top, 0x1000, all, hostile_pc(0), 0 - 8ull, 0 - 16ull,
                               {hostile_pc(1) + 1, 0, 0, 0, 0, 0, hostile_pc(2) + 1, 0}, backend};
        out[n++] = (hand_case){"stack ending at 2^64 - 8", 0 - 0x1008ull, 0x1000, all, hostile_pc(9), 0 - 0x10ull,
                               0 - 0x20ull, {0}, backend};
        /* sp below the dump */
        out[n++] = (hand_case){"sp below the dump", stack, 0x800, all, libc_pc, stack - 0x1000, stack, {0}, backend};
        /* every save slot (rsp- or rbp-based) in libc's image, none in the dump: read from the image
         * alike through the plain and the corrected compact tables */
        out[n++] = (hand_case){"save slots in an image", stack, 0x800, all, libc_pc, in_libc_image, in_libc_image,
                               {0}, backend};
        /* rsp unknown; RA unknown */
        out[n++] = (hand_case){"rsp unknown", stack, 0x800, all & ~(1u << FU_REG_RSP), hostile_pc(7), stack + 0x100,
                               stack + 0x200, {0}, backend};
        out[n++] = (hand_case){"RA unknown", stack, 0x800, all & ~(1u << FU_REG_RA), hostile_pc(0), stack, stack,
                               {0}, backend};
        out[n++] = (hand_case){"only RA known", stack, 0x800, 1u << FU_REG_RA, hostile_pc(0), stack, stack, {0}, backend};
        /* a frame-pointer chain into itself: [rbp] = rbp, [rbp + 8] = a PC in the module's gap */
        out[n++] = (hand_case){"frame-pointer cycle", stack, 0x800, all, gap, stack, stack,
                               {stack, gap + 1, stack, gap + 1, 0, 0, 0, 0}, backend};
        out[n++] = (hand_case){"frame-pointer two-cycle", stack, 0x800, all, gap, stack, stack,
                               {stack + 16, gap + 1, stack, gap + 1, 0, 0, 0, 0}, backend};
        /* CFA = rsp, RA at rsp - 8 = the same IP: no progress; RA at rsp - 16 another CFA = rsp
         * frame returning here: a two-frame cycle at one SP that only the frame limit ends */
        out[n++] = (hand_case){"CFA = SP, RA = IP", stack, 0x800, all, hostile_pc(0), stack + 0x100, stack,
                               {0, 0, 0, 0, 0, 0, hostile_pc(0), 0}, backend};
        out[n++] = (hand_case){"CFA = SP two-cycle", stack, 0x800, all, hostile_pc(0), stack + 0x100, stack,
                               {0, 0, 0, 0, 0, 0, hostile_pc(1) + 1, hostile_pc(0) + 1}, backend};
        /* RA same_value: the IP stays, the SP climbs 8 per frame */
        out[n++] = (hand_case){"RA same_value", stack, 0x4000, all, hostile_pc(2), stack, stack, {0}, backend};
        /* every hostile FDE from a stack whose words all return into FDE 0 */
        for (unsigned fde = 0; fde < HOSTILE_COUNT; fde++)
            out[n++] = (hand_case){"hostile FDE", stack, 0x800, all, hostile_pc(fde), stack + 0x100, stack + 0x200,
                                   {hostile_pc(0) + 1, hostile_pc(fde) + 1, stack + 0x300, hostile_pc(9) + 1,
                                    hostile_pc(4) + 1, 0, hostile_pc(1) + 1, hostile_pc(0) + 1},
                                   backend};
    }
    return n;
}

/* ---- main ------------------------------------------------------------------------------------------ */

static const char *save_dir;
static unsigned timeout_seconds = DEFAULT_TIMEOUT;
static unsigned long long seed;

static void run_input(const input *in, const char *label, const char *save_name)
{
    /* an exact-size heap copy, as libFuzzer hands inputs over */
    uint8_t *copy = malloc(in->size ? in->size : 1);
    if (!copy)
        die("out of memory");
    memcpy(copy, in->data, in->size);
    fuzz_begin_input(copy, in->size, label);
    if (save_dir)
        snprintf(save_path, sizeof save_path, "%s/%s", save_dir, save_name);
    alarm(timeout_seconds);
    check_input(copy, in->size);
    alarm(0);
    current_data = NULL;
    free(copy);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: walk_driver [--seed S] [--iterations N] [--only I] [--timeout SECONDS] [--save-dir DIR]\n"
            "                   [--raw SECTION]... [--replay INPUT] ELF...\n"
            "Walk hostile, random and mutated stacks over the unwind tables of the ELF files (and of raw\n"
            "corpus sections), checking each walk's invariants, that the walk cache changes nothing,\n"
            "that fu_walk_step agrees and that auto and dwarf backends agree. The address spaces come\n"
            "from the seed: replay a saved input with the seed that made it.\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned long iterations = DEFAULT_ITERATIONS;
    long only = -1;
    bool have_seed = false;
    const char *replay = NULL;
    char *raws[64];
    size_t raw_count = 0;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *option = argv[i];
        if (i + 1 >= argc)
            return usage();
        const char *value = argv[++i];
        if (strcmp(option, "--seed") == 0) {
            seed = strtoull(value, NULL, 0);
            have_seed = true;
        } else if (strcmp(option, "--iterations") == 0)
            iterations = strtoul(value, NULL, 0);
        else if (strcmp(option, "--only") == 0)
            only = strtol(value, NULL, 0);
        else if (strcmp(option, "--timeout") == 0)
            timeout_seconds = (unsigned)strtoul(value, NULL, 0);
        else if (strcmp(option, "--save-dir") == 0)
            save_dir = value;
        else if (strcmp(option, "--replay") == 0)
            replay = value;
        else if (strcmp(option, "--verbose") == 0)
            verbose = strcmp(value, "0") != 0;
        else if (strcmp(option, "--raw") == 0 && raw_count < 64)
            raws[raw_count++] = argv[i];
        else
            return usage();
    }
    if (!have_seed)
        seed = (unsigned long long)time(NULL);
    fuzz_install_failure_handlers();
    if (save_dir)
        mkdir(save_dir, 0755);
    /* the driver itself is one of the modules (its .eh_frame: gcc's, with ASAN's code) */
    char *elves[32];
    size_t elf_count = 0;
    for (; i < argc && elf_count < 31; i++)
        elves[elf_count++] = argv[i];
    elves[elf_count++] = "/proc/self/exe";
    printf("walk_driver: seed %llu (reproduce with --seed %llu)\n", seed, seed);
    setup(seed, elves, elf_count, raws, raw_count);
    describe_spaces();

    static input in;
    if (replay) {
        FILE *f = fopen(replay, "rb");
        if (!f)
            die("cannot open %s", replay);
        in.size = fread(in.data, 1, sizeof in.data, f);
        fclose(f);
        run_input(&in, replay, "replayed");
        printf("walk_driver: %s: clean (%s after %zu frames)\n", replay, fu_walk_outcome_name(out_a.result.outcome),
               out_a.result.frame_count);
        return 0;
    }

    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    unsigned long inputs = 0;
    char label[256], name[128];
    if (only < 0) {
        static hand_case cases[FU_BACKEND_COUNT * (13 + HOSTILE_COUNT)];
        size_t n = hand_cases(cases);
        for (size_t k = 0; k < n; k++) {
            encode_hand_case(&cases[k], &in);
            snprintf(label, sizeof label, "hand-written case %zu: %s, backend %s (--seed %llu)", k, cases[k].name,
                     fu_backend_name((fu_backend)cases[k].backend), seed);
            snprintf(name, sizeof name, "failing-walk-seed%llu-hand%zu", seed, k);
            run_input(&in, label, name);
            inputs++;
        }
        printf("walk_driver: %zu hand-written cases clean\n", n);
    }
    /* inputs: fresh ones on even iterations, mutants of the pool's on odd ones */
    static input pool[POOL_SIZE];
    size_t pool_count = 0;
    for (unsigned long it = 0; it < iterations; it++) {
        uint64_t rng = seed ^ (it + 1) * 0x9e3779b97f4a7c15ull;
        rng_next(&rng);
        if (it % 2 == 0 || pool_count == 0) {
            generate(&in, &rng);
            pool[pool_count < POOL_SIZE ? pool_count++ : rng_below(&rng, POOL_SIZE)] = in;
        } else {
            in = pool[rng_below(&rng, pool_count)];
            mutate(&in, &rng);
        }
        if (only >= 0 && it != (unsigned long)only)
            continue;
        snprintf(label, sizeof label, "input %lu (--seed %llu --iterations %lu --only %lu)", it, seed, iterations, it);
        snprintf(name, sizeof name, "failing-walk-seed%llu-i%lu", seed, it);
        run_input(&in, label, name);
        inputs++;
    }
    struct timespec finished;
    clock_gettime(CLOCK_MONOTONIC, &finished);
    double seconds = (double)(finished.tv_sec - started.tv_sec) + (double)(finished.tv_nsec - started.tv_nsec) / 1e9;
    printf("walk_driver: %lu inputs clean in %.1f s: %lu frames (%lu walks of 8 frames or more); frames by kind: "
           "%lu first, %lu cfi, %lu signal, %lu frame pointer; %lu signal trampolines\n",
           inputs, seconds, total_frames, deep_walks, kind_count[0], kind_count[1], kind_count[2], kind_count[3],
           signal_frames);
    printf("walk_driver: %lu walks compared between the auto and dwarf backends; %lu walks had a shape "
           "written down (walk.h)\n", backend_comparisons, shaped_walks);
    printf("walk_driver: %lu walks through corrected compact tables, %lu frames marked corrected\n", corrected_walks,
           corrected_frames);
    printf("walk_driver: outcomes:");
    for (unsigned o = 0; o < FU_WALK_OUTCOME_COUNT; o++)
        printf(" %s %lu", fu_walk_outcome_name((fu_walk_outcome)o), outcome_count[o]);
    printf("\n");
    return 0;
}

#endif
