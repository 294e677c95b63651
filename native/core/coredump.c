/* coredump: the notes and segments of an ELF core file (see coredump.h). */
#include "coredump.h"

#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "cursor.h"

/* ELF facts (System V gABI; the Linux note types of include/uapi/linux/elf.h). */
enum {
    ELF_HEADER_SIZE = 64,
    ELF_PHDR_SIZE = 56,
    ELF_SHDR_SIZE = 64,
    ET_CORE = 4,
    EM_X86_64 = 62,
    PN_XNUM = 0xffff, /* e_phnum too big: the count is section header 0's sh_info */
    PT_LOAD = 1,
    PT_NOTE = 4,
    NT_PRSTATUS = 1,
    NT_PRPSINFO = 3,
    NT_AUXV = 6,
    AT_NULL = 0,
    AT_PHDR = 3,
    AT_ENTRY = 9,
    AT_SYSINFO_EHDR = 33,
};
#define NT_FILE 0x46494c45u

/* struct elf_prstatus on x86-64 (include/linux/elfcore.h): siginfo (12 bytes), pr_cursig at 12,
 * pr_pid at 32, pr_reg (user_regs_struct) at 112, pr_fpvalid after it: 336 bytes. */
enum { PRSTATUS_CURSIG = 12, PRSTATUS_PID = 32, PRSTATUS_REG = 112, PRSTATUS_SIZE = 336 };
/* struct elf_prpsinfo on x86-64: pr_pid at 24, pr_fname[16] at 40, pr_psargs[80] at 56: 136 bytes. */
enum { PRPSINFO_PID = 24, PRPSINFO_FNAME = 40, PRPSINFO_PSARGS = 56, PRPSINFO_SIZE = 136 };

typedef struct parser {
    const uint8_t *data;
    size_t size;
    fu_core *core;
    fu_buffer threads; /* fu_core_thread */
    size_t notes;      /* read so far, against FU_CORE_MAX_NOTES */
    fu_error *err;
} parser;

/* A cursor over [offset, offset + size) of the file, or false if that is not inside it. */
static bool file_range(const parser *p, uint64_t offset, uint64_t size, fu_cursor *out)
{
    if (offset > p->size || size > p->size - offset)
        return false;
    *out = fu_cursor_make(p->data, p->data + offset, p->data + offset + size);
    return true;
}

static fu_status parse_prstatus(parser *p, fu_cursor *desc, uint64_t at)
{
    if (fu_cursor_left(desc) < PRSTATUS_SIZE)
        return fu_fail(p->err, FU_ERR_CORE, "NT_PRSTATUS at offset 0x%llx: %zu bytes, expected %d (not an x86-64 core?)",
                       (unsigned long long)at, fu_cursor_left(desc), PRSTATUS_SIZE);
    if (p->threads.len / sizeof(fu_core_thread) >= FU_CORE_MAX_THREADS)
        return fu_fail(p->err, FU_ERR_CORE, "NT_PRSTATUS at offset 0x%llx: more than %d threads",
                       (unsigned long long)at, FU_CORE_MAX_THREADS);
    fu_core_thread t;
    const uint8_t *base = desc->pos;
    fu_cursor c = fu_cursor_make(base, base + PRSTATUS_CURSIG, base + PRSTATUS_SIZE);
    t.signal = (int32_t)fu_read_uint(&c, 2);
    c.pos = base + PRSTATUS_PID;
    t.tid = (int32_t)fu_read_uint(&c, 4);
    c.pos = base + PRSTATUS_REG;
    for (unsigned r = 0; r < FU_USER_REGISTER_COUNT; r++) /* bound: the struct's register count */
        t.user_regs[r] = fu_read_uint(&c, 8);
    if (!fu_buffer_append(&p->threads, &t, sizeof t))
        return fu_fail(p->err, FU_ERR_NOMEM, "out of memory for the threads of a core");
    return FU_OK;
}

static void copy_text(char *out, size_t out_size, const uint8_t *in, size_t in_size)
{
    size_t n = 0;
    while (n < in_size && n + 1 < out_size && in[n]) /* bound: both sizes */
        n++;
    memcpy(out, in, n);
    out[n] = 0;
}

static fu_status parse_prpsinfo(parser *p, fu_cursor *desc, uint64_t at)
{
    if (fu_cursor_left(desc) < PRPSINFO_SIZE)
        return fu_fail(p->err, FU_ERR_CORE, "NT_PRPSINFO at offset 0x%llx: %zu bytes, expected %d",
                       (unsigned long long)at, fu_cursor_left(desc), PRPSINFO_SIZE);
    fu_core *core = p->core;
    fu_cursor c = fu_cursor_make(desc->pos, desc->pos + PRPSINFO_PID, desc->pos + PRPSINFO_SIZE);
    core->pid = (int32_t)fu_read_uint(&c, 4);
    copy_text(core->name, sizeof core->name, desc->pos + PRPSINFO_FNAME, 16);
    copy_text(core->arguments, sizeof core->arguments, desc->pos + PRPSINFO_PSARGS, 80);
    core->has_prpsinfo = true;
    return FU_OK;
}

static fu_status parse_auxv(parser *p, fu_cursor *desc, uint64_t at)
{
    fu_core_auxv *auxv = &p->core->auxv;
    /* bound: FU_CORE_MAX_AUXV entries, and the note's bytes */
    for (unsigned i = 0; i < FU_CORE_MAX_AUXV && fu_cursor_left(desc) >= 16; i++) {
        uint64_t type = fu_read_uint(desc, 8), value = fu_read_uint(desc, 8);
        if (type == AT_NULL) {
            p->core->has_auxv = true;
            return FU_OK;
        }
        if (type == AT_SYSINFO_EHDR)
            auxv->sysinfo_ehdr = value;
        else if (type == AT_ENTRY)
            auxv->entry = value;
        else if (type == AT_PHDR)
            auxv->phdr = value;
    }
    if (fu_cursor_left(desc) >= 16)
        return fu_fail(p->err, FU_ERR_CORE, "NT_AUXV at offset 0x%llx: more than %d entries without AT_NULL",
                       (unsigned long long)at, FU_CORE_MAX_AUXV);
    p->core->has_auxv = true; /* a vector cut without its AT_NULL: the entries read stand */
    return FU_OK;
}

/* NT_FILE (fs/binfmt_elf.c, fill_files_note): count, page size, count x (start, end, page offset),
 * then count NUL-terminated paths. */
static fu_status parse_files(parser *p, fu_cursor *desc, uint64_t at)
{
    fu_core *core = p->core;
    if (core->has_files)
        return fu_fail(p->err, FU_ERR_CORE, "NT_FILE at offset 0x%llx: a second NT_FILE note", (unsigned long long)at);
    uint64_t count = fu_read_uint(desc, 8), page_size = fu_read_uint(desc, 8);
    if (desc->failed)
        return fu_fail(p->err, FU_ERR_CORE, "NT_FILE at offset 0x%llx: shorter than its header", (unsigned long long)at);
    if (count > FU_CORE_MAX_FILES)
        return fu_fail(p->err, FU_ERR_CORE, "NT_FILE at offset 0x%llx: %llu entries, more than %d",
                       (unsigned long long)at, (unsigned long long)count, FU_CORE_MAX_FILES);
    if (count * 24 > fu_cursor_left(desc))
        return fu_fail(p->err, FU_ERR_CORE, "NT_FILE at offset 0x%llx: %llu entries do not fit its %zu bytes",
                       (unsigned long long)at, (unsigned long long)count, fu_cursor_left(desc) + 16);
    if (count && !(core->files = calloc(count, sizeof *core->files)))
        return fu_fail(p->err, FU_ERR_NOMEM, "out of memory for %llu NT_FILE entries", (unsigned long long)count);
    core->file_count = count;
    for (uint64_t i = 0; i < count; i++) { /* bound: count, checked above */
        fu_core_file *f = &core->files[i];
        f->start = fu_read_uint(desc, 8);
        f->end = fu_read_uint(desc, 8);
        uint64_t pages = fu_read_uint(desc, 8);
        if (f->end < f->start || (page_size && pages > UINT64_MAX / page_size))
            return fu_fail(p->err, FU_ERR_CORE, "NT_FILE at offset 0x%llx: entry %llu: range 0x%llx-0x%llx, page offset 0x%llx",
                           (unsigned long long)at, (unsigned long long)i, (unsigned long long)f->start,
                           (unsigned long long)f->end, (unsigned long long)pages);
        f->offset = pages * page_size;
        if (i > 0 && f->start < core->files[i - 1].end) /* the kernel lists them by address, disjoint */
            return fu_fail(p->err, FU_ERR_CORE, "NT_FILE at offset 0x%llx: entry %llu at 0x%llx is below the end of entry %llu (0x%llx)",
                           (unsigned long long)at, (unsigned long long)i, (unsigned long long)f->start,
                           (unsigned long long)(i - 1), (unsigned long long)core->files[i - 1].end);
    }
    for (uint64_t i = 0; i < count; i++) { /* bound: count */
        const uint8_t *nul = memchr(desc->pos, 0, fu_cursor_left(desc));
        if (!nul)
            return fu_fail(p->err, FU_ERR_CORE, "NT_FILE at offset 0x%llx: path %llu of %llu is missing or not terminated",
                           (unsigned long long)at, (unsigned long long)i, (unsigned long long)count);
        core->files[i].path = (const char *)desc->pos;
        desc->pos = nul + 1;
    }
    core->has_files = true;
    return FU_OK;
}

/* The notes of one PT_NOTE segment: namesz, descsz, type, then name and desc, each padded to 4
 * bytes (the kernel's and gcore's core notes are 4-byte aligned). */
static fu_status parse_notes(parser *p, fu_cursor *segment)
{
    /* bound: each note consumes at least its 12-byte header; FU_CORE_MAX_NOTES in all */
    while (fu_cursor_left(segment) > 0) {
        uint64_t at = (uint64_t)(segment->pos - p->data);
        if (++p->notes > FU_CORE_MAX_NOTES)
            return fu_fail(p->err, FU_ERR_CORE, "note at offset 0x%llx: more than %d notes", (unsigned long long)at,
                           FU_CORE_MAX_NOTES);
        uint64_t name_size = fu_read_uint(segment, 4), desc_size = fu_read_uint(segment, 4);
        uint64_t type = fu_read_uint(segment, 4);
        fu_cursor name = fu_cursor_sub(segment, name_size);
        fu_cursor_skip(segment, name_size + (4 - name_size % 4) % 4);
        fu_cursor desc = fu_cursor_sub(segment, desc_size);
        fu_cursor_skip(segment, desc_size);
        if (segment->failed)
            return fu_fail(p->err, FU_ERR_CORE, "note at offset 0x%llx: name of %llu and desc of %llu bytes overrun the PT_NOTE segment",
                           (unsigned long long)at, (unsigned long long)name_size, (unsigned long long)desc_size);
        fu_cursor_skip(segment, (4 - desc_size % 4) % 4);
        segment->failed = false; /* the last note's padding may be cut by the segment's end */
        bool is_core = name_size == 5 && memcmp(name.pos, "CORE", 5) == 0;
        if (!is_core)
            continue; /* "LINUX" (xstate, siginfo's kin) and others: not needed to unwind */
        fu_status s = FU_OK;
        if (type == NT_PRSTATUS)
            s = parse_prstatus(p, &desc, at);
        else if (type == NT_PRPSINFO)
            s = parse_prpsinfo(p, &desc, at);
        else if (type == NT_AUXV)
            s = parse_auxv(p, &desc, at);
        else if (type == NT_FILE)
            s = parse_files(p, &desc, at);
        if (s)
            return s;
    }
    return FU_OK;
}

static int by_vaddr(const void *a, const void *b)
{
    uint64_t x = ((const fu_core_segment *)a)->vaddr, y = ((const fu_core_segment *)b)->vaddr;
    return x < y ? -1 : x > y;
}

static fu_status parse(parser *p)
{
    fu_core *core = p->core;
    fu_cursor header;
    if (!file_range(p, 0, ELF_HEADER_SIZE, &header) || memcmp(p->data, "\177ELF", 4) != 0)
        return fu_fail(p->err, FU_ERR_CORE, "not an ELF file");
    if (p->data[4] != 2 || p->data[5] != 1)
        return fu_fail(p->err, FU_ERR_CORE, "not a 64-bit little-endian ELF file (class %u, data %u)", p->data[4],
                       p->data[5]);
    fu_cursor_skip(&header, 16);
    uint64_t type = fu_read_uint(&header, 2), machine = fu_read_uint(&header, 2);
    if (type != ET_CORE)
        return fu_fail(p->err, FU_ERR_CORE, "not a core file (e_type %llu)", (unsigned long long)type);
    if (machine != EM_X86_64)
        return fu_fail(p->err, FU_ERR_CORE, "a core of machine %llu, not x86-64 (%d)", (unsigned long long)machine,
                       EM_X86_64);
    fu_cursor_skip(&header, 4 + 8); /* e_version, e_entry */
    uint64_t phoff = fu_read_uint(&header, 8), shoff = fu_read_uint(&header, 8);
    fu_cursor_skip(&header, 4 + 2); /* e_flags, e_ehsize */
    uint64_t phentsize = fu_read_uint(&header, 2), phnum = fu_read_uint(&header, 2);
    if (phnum == PN_XNUM) {
        fu_cursor section0;
        if (!file_range(p, shoff, ELF_SHDR_SIZE, &section0))
            return fu_fail(p->err, FU_ERR_CORE, "e_phnum is PN_XNUM but section header 0 at 0x%llx is outside the file",
                           (unsigned long long)shoff);
        fu_cursor_skip(&section0, 44); /* sh_info */
        phnum = fu_read_uint(&section0, 4);
    }
    if (phentsize != ELF_PHDR_SIZE)
        return fu_fail(p->err, FU_ERR_CORE, "e_phentsize %llu, expected %d", (unsigned long long)phentsize, ELF_PHDR_SIZE);
    if (phnum > FU_CORE_MAX_SEGMENTS)
        return fu_fail(p->err, FU_ERR_CORE, "%llu program headers, more than %d", (unsigned long long)phnum,
                       FU_CORE_MAX_SEGMENTS);
    fu_cursor phdrs;
    if (!file_range(p, phoff, phnum * ELF_PHDR_SIZE, &phdrs))
        return fu_fail(p->err, FU_ERR_CORE, "%llu program headers at 0x%llx run past the end of the file (%zu bytes)",
                       (unsigned long long)phnum, (unsigned long long)phoff, p->size);
    if (phnum && !(core->segments = calloc(phnum, sizeof *core->segments)))
        return fu_fail(p->err, FU_ERR_NOMEM, "out of memory for %llu program headers", (unsigned long long)phnum);
    for (uint64_t i = 0; i < phnum; i++) { /* bound: phnum <= FU_CORE_MAX_SEGMENTS */
        uint64_t at = phoff + i * ELF_PHDR_SIZE;
        uint64_t p_type = fu_read_uint(&phdrs, 4), flags = fu_read_uint(&phdrs, 4);
        uint64_t offset = fu_read_uint(&phdrs, 8), vaddr = fu_read_uint(&phdrs, 8);
        fu_cursor_skip(&phdrs, 8); /* p_paddr */
        uint64_t filesz = fu_read_uint(&phdrs, 8), memsz = fu_read_uint(&phdrs, 8);
        fu_cursor_skip(&phdrs, 8); /* p_align */
        if (p_type == PT_NOTE) {
            fu_cursor notes;
            if (!file_range(p, offset, filesz, &notes))
                return fu_fail(p->err, FU_ERR_CORE, "PT_NOTE (program header at 0x%llx): 0x%llx bytes at 0x%llx run past the end of the file (%zu bytes)",
                               (unsigned long long)at, (unsigned long long)filesz, (unsigned long long)offset, p->size);
            fu_status s = parse_notes(p, &notes);
            if (s)
                return s;
        } else if (p_type == PT_LOAD) {
            if (memsz == 0)
                continue;
            if (filesz > memsz || vaddr + memsz < vaddr)
                return fu_fail(p->err, FU_ERR_CORE, "PT_LOAD (program header at 0x%llx): vaddr 0x%llx, filesz 0x%llx, memsz 0x%llx",
                               (unsigned long long)at, (unsigned long long)vaddr, (unsigned long long)filesz,
                               (unsigned long long)memsz);
            fu_core_segment *seg = &core->segments[core->segment_count++];
            *seg = (fu_core_segment){vaddr, memsz, filesz, 0, NULL, (uint32_t)flags};
            if (filesz && offset < p->size) { /* what of it the file still holds */
                seg->present = filesz < p->size - offset ? filesz : p->size - offset;
                seg->data = p->data + offset;
            }
            core->truncated_bytes += filesz - seg->present;
        }
    }
    if (!core->has_prpsinfo && p->threads.len)
        core->pid = ((const fu_core_thread *)(void *)p->threads.data)->tid;
    core->threads = (fu_core_thread *)(void *)p->threads.data;
    core->thread_count = p->threads.len / sizeof(fu_core_thread);
    p->threads = (fu_buffer){0};
    if (core->segment_count > 1)
        qsort(core->segments, core->segment_count, sizeof *core->segments, by_vaddr);
    for (size_t i = 1; i < core->segment_count; i++) { /* bound: the segments */
        const fu_core_segment *a = &core->segments[i - 1], *b = &core->segments[i];
        if (b->vaddr - a->vaddr < a->memsz)
            return fu_fail(p->err, FU_ERR_CORE, "PT_LOAD segments 0x%llx+0x%llx and 0x%llx+0x%llx overlap",
                           (unsigned long long)a->vaddr, (unsigned long long)a->memsz, (unsigned long long)b->vaddr,
                           (unsigned long long)b->memsz);
    }
    if (core->segment_count && !(core->memory = calloc(core->segment_count, sizeof *core->memory)))
        return fu_fail(p->err, FU_ERR_NOMEM, "out of memory for %zu segments", core->segment_count);
    for (size_t i = 0; i < core->segment_count; i++) { /* bound: the segments */
        const fu_core_segment *seg = &core->segments[i];
        if (seg->present)
            core->memory[core->memory_count++] = (fu_image_segment){seg->vaddr, seg->data, seg->present};
    }
    return FU_OK;
}

fu_status fu_core_parse(fu_core *core, const uint8_t *data, size_t size, fu_error *err)
{
    memset(core, 0, sizeof *core);
    parser p = {data, size, core, {0}, 0, err};
    fu_status s = parse(&p);
    if (s) {
        free(p.threads.data);
        fu_core_free(core);
    }
    return s;
}

void fu_core_free(fu_core *core)
{
    free(core->segments);
    free(core->memory);
    free(core->threads);
    free(core->files);
    memset(core, 0, sizeof *core);
}

const fu_core_segment *fu_core_segment_at(const fu_core *core, uint64_t address)
{
    size_t lo = 0, hi = core->segment_count;
    while (lo < hi) { /* bound: halves each time */
        size_t mid = lo + (hi - lo) / 2;
        if (core->segments[mid].vaddr <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || address - core->segments[lo - 1].vaddr >= core->segments[lo - 1].memsz)
        return NULL;
    return &core->segments[lo - 1];
}
