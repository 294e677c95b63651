/* libunwind_stacks: every thread's stack as libunwind's own ptrace and coredump walkers see it, the
 * third oracle of `fastunwind backtrace -p` and `fastunwind core` (tests/golden/test_against_libunwind.py).
 *
 *     libunwind_stacks -p PID        each thread of PID: PTRACE_SEIZE + PTRACE_INTERRUPT, walked with
 *                                    _UPT_create / _UPT_accessors, then PTRACE_DETACH (always)
 *     libunwind_stacks --core CORE   each thread of CORE as libunwind's coredump library lists it
 *                                    (_UCD_create, _UCD_select_thread), walked by libunwind over
 *                                    the core's memory and mapped files ("core files" below says
 *                                    what 1.6.2 lacks and what the harness supplies)
 *
 * Prints one JSON document: {"pid", "threads": [{"tid", "end", "frames": [{"pc", "unwind_info",
 * "registers"}]}]}; "pc" is UNW_REG_IP (the interrupted PC in frame 0 and after a signal frame, a
 * return address elsewhere), "unwind_info" whether libunwind found the frame's CFI (unw_get_proc_info),
 * "registers" the callee-saved registers, rsp and rip that unw_get_reg gives at that frame, and
 * "end" why the walk stopped: "outermost" (unw_step returned 0), "error N" (unw_step's -UNW_E*),
 * "limit" (MAX_FRAMES), or "init N" / "attach ERRNO" when the walk could not start.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/procfs.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libunwind-coredump.h>
#include <libunwind-ptrace.h>

/* the deepest stack printed: the test programs' deepest thread has about 60 frames */
#define MAX_FRAMES 1024
/* the most threads of one process or core */
#define MAX_THREADS 4096

/* The registers printed per frame: the ones a frame may recover from the CFI (System V AMD64 ABI,
 * 3.2.1: rbx, rbp, r12-r15 are callee-saved) plus the CFA's rsp and the PC. Scratch registers are
 * left out: libunwind keeps the callee's values for them in callers' frames. */
static const struct {
    const char *name;
    int number;
} REGISTERS[] = {
    {"rip", UNW_X86_64_RIP}, {"rsp", UNW_X86_64_RSP}, {"rbp", UNW_X86_64_RBP}, {"rbx", UNW_X86_64_RBX},
    {"r12", UNW_X86_64_R12}, {"r13", UNW_X86_64_R13}, {"r14", UNW_X86_64_R14}, {"r15", UNW_X86_64_R15},
};

/* Prints one thread's walk as a JSON object (without a separating comma). */
static void print_walk(int tid, unw_addr_space_t space, void *argument)
{
    printf("{\"tid\": %d, \"frames\": [", tid);
    unw_cursor_t cursor;
    int status = unw_init_remote(&cursor, space, argument);
    if (status < 0) {
        printf("], \"end\": \"init %d\"}", status);
        return;
    }
    const char *separator = "";
    for (int frame = 0; frame < MAX_FRAMES; frame++) {
        unw_word_t pc;
        if (unw_get_reg(&cursor, UNW_REG_IP, &pc) < 0) {
            printf("], \"end\": \"no pc\"}");
            return;
        }
        /* whether libunwind found the frame's CFI: without it, its step to the caller is a guess
         * (x86_64/Gstep.c: the frame-pointer chain, or a frameless leaf), and unw_get_proc_info
         * still succeeds with a made-up one-byte procedure at the PC (x86_64/Gget_proc_info.c) */
        unw_proc_info_t info;
        bool unwind_info = unw_get_proc_info(&cursor, &info) == 0 && !(info.start_ip == pc && info.end_ip == pc + 1);
        printf("%s{\"pc\": %llu, \"unwind_info\": %s, \"registers\": {", separator, (unsigned long long)pc,
               unwind_info ? "true" : "false");
        const char *comma = "";
        for (size_t i = 0; i < sizeof REGISTERS / sizeof REGISTERS[0]; i++) {
            unw_word_t value;
            if (unw_get_reg(&cursor, REGISTERS[i].number, &value) == 0) {
                printf("%s\"%s\": %llu", comma, REGISTERS[i].name, (unsigned long long)value);
                comma = ", ";
            }
        }
        printf("}}");
        separator = ", ";
        status = unw_step(&cursor);
        if (status == 0) {
            printf("], \"end\": \"outermost\"}");
            return;
        }
        if (status < 0) {
            printf("], \"end\": \"error %d\"}", status);
            return;
        }
    }
    printf("], \"end\": \"limit\"}");
}

/* ---- live processes ---------------------------------------------------------------------------- */

/* Stops `tid` (seize + interrupt: a thread already in a group stop reports that stop instead) and
 * waits for its stop. Returns 0 or an errno; on an error the thread is not left traced. A signal
 * that arrived first is its stop instead, kept in *signal for the detach to hand back. */
static int stop_thread(int tid, int *signal)
{
    *signal = 0;
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) == -1)
        return errno;
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) == -1) {
        int error = errno;
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        return error;
    }
    for (;;) { /* until the stop, the exit or an error: each retry is an EINTR */
        int status;
        pid_t got = waitpid(tid, &status, __WALL);
        if (got == tid && WIFSTOPPED(status)) {
            if (status >> 16 != PTRACE_EVENT_STOP)
                *signal = WSTOPSIG(status);
            return 0;
        }
        if (got == tid)
            return ESRCH; /* exited */
        if (errno != EINTR)
            return errno;
    }
}

static int live(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (tasks == NULL) {
        fprintf(stderr, "libunwind_stacks: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int tids[MAX_THREADS];
    int count = 0;
    for (struct dirent *entry; (entry = readdir(tasks)) != NULL && count < MAX_THREADS;)
        if (entry->d_name[0] != '.')
            tids[count++] = atoi(entry->d_name);
    closedir(tasks);
    unw_addr_space_t space = unw_create_addr_space(&_UPT_accessors, 0);
    if (space == NULL) {
        fprintf(stderr, "libunwind_stacks: unw_create_addr_space failed\n");
        return 1;
    }
    printf("{\"pid\": %d, \"threads\": [", pid);
    for (int i = 0; i < count; i++) {
        if (i > 0)
            printf(", ");
        int signal;
        int error = stop_thread(tids[i], &signal);
        if (error != 0) {
            printf("{\"tid\": %d, \"frames\": [], \"end\": \"attach %d\"}", tids[i], error);
            continue;
        }
        void *upt = _UPT_create(tids[i]);
        if (upt == NULL)
            printf("{\"tid\": %d, \"frames\": [], \"end\": \"_UPT_create failed\"}", tids[i]);
        else {
            print_walk(tids[i], space, upt);
            _UPT_destroy(upt);
        }
        /* a group stop the thread was in stays: the detached thread goes back to it */
        ptrace(PTRACE_DETACH, tids[i], NULL, (void *)(uintptr_t)signal);
    }
    printf("]}\n");
    unw_destroy_addr_space(space);
    return 0;
}

/* ---- core files -------------------------------------------------------------------------------- */

/* libunwind 1.6.2's coredump library cannot walk a core of a program built today by itself: its
 * _UCD_find_proc_info takes every module's text to start at file offset 0 (`mapoff = 0`, marked
 * FIXME in its source), where a PIE or a shared library built with separate code segments (the
 * default of binutils >= 2.31) has it at 0x1000 or further, and gdb's gcore does not even dump the
 * file-backed text it would map; its _UCD_access_reg maps only rax..rsp and rip on x86-64, reading
 * r8..r15 as pr_reg[0] (r15). So the core is read as follows: _UCD_create, _UCD_select_thread and
 * _UCD_access_reg give the threads and their registers (r8..r15 from the same NT_PRSTATUS note,
 * read here), memory is the core's PT_LOAD contents and else the file NT_FILE maps there (at its
 * offset), and find_proc_info hands the module's .eh_frame_hdr, read through that memory, to
 * libunwind's dwarf_search_unwind_table (the remote-table lookup perf uses). The walk itself,
 * unw_init_remote and unw_step, is libunwind's. */

/* Not in libunwind.h; perf declares it the same way (and libunwind_bench.c). */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
                                              unw_proc_info_t *pi, int need_unwind_info, void *arg);

/* DW_EH_PE_* (LSB 5.0, "DWARF Exception Header Encoding"): the .eh_frame_hdr encodings libunwind's
 * remote table takes */
#define DW_EH_PE_datarel_sdata4 0x3b
#define DW_EH_PE_udata4 0x03

typedef struct file_mapping {
    uint64_t start, end, offset; /* offset: in the file, in bytes */
    const char *path;
    const unsigned char *file; /* mmap'ed at the first read, NULL if it cannot be */
    size_t file_size;
    bool opened;
} file_mapping;

typedef struct core_file {
    const unsigned char *bytes;
    size_t size;
    const Elf64_Phdr *segments;
    unsigned segment_count;
    file_mapping *mappings;
    uint64_t mapping_count;
    const unsigned char *file_note; /* NT_FILE's descriptor, its paths pointed into */
    /* each NT_PRSTATUS note's pr_reg, in the notes' order (the order of _UCD_select_thread) */
    struct user_regs_struct thread_registers[MAX_THREADS];
    int thread_count;
    struct UCD_info *info;
} core_file;

static bool read_bytes(const unsigned char *from, size_t from_size, uint64_t offset, void *out, size_t size)
{
    if (offset > from_size || size > from_size - offset)
        return false;
    memcpy(out, from + offset, size);
    return true;
}

static const file_mapping *mapping_at(const core_file *core, uint64_t address)
{
    for (uint64_t i = 0; i < core->mapping_count; i++)
        if (core->mappings[i].start <= address && address < core->mappings[i].end)
            return &core->mappings[i];
    return NULL;
}

/* The process's memory: the dumped bytes, else the mapped file's. */
static bool read_memory(core_file *core, uint64_t address, void *out, size_t size)
{
    for (unsigned i = 0; i < core->segment_count; i++) {
        const Elf64_Phdr *segment = &core->segments[i];
        if (segment->p_type == PT_LOAD && segment->p_vaddr <= address && address - segment->p_vaddr < segment->p_filesz
            && size <= segment->p_filesz - (address - segment->p_vaddr))
            return read_bytes(core->bytes, core->size, segment->p_offset + (address - segment->p_vaddr), out, size);
    }
    file_mapping *mapping = (file_mapping *)mapping_at(core, address);
    if (mapping == NULL || size > mapping->end - address)
        return false;
    if (!mapping->opened) {
        mapping->opened = true;
        int fd = open(mapping->path, O_RDONLY);
        struct stat status;
        if (fd >= 0 && fstat(fd, &status) == 0 && status.st_size > 0) {
            void *mapped = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapped != MAP_FAILED) {
                mapping->file = mapped;
                mapping->file_size = (size_t)status.st_size;
            }
        }
        if (fd >= 0)
            close(fd);
    }
    return mapping->file != NULL
           && read_bytes(mapping->file, mapping->file_size, mapping->offset + (address - mapping->start), out, size);
}

/* NT_FILE's descriptor (Linux fs/binfmt_elf.c, fill_files_note): count and page size, then count
 * (start, end, file offset in pages) triples, then count NUL-terminated paths. */
static bool parse_file_note(core_file *core, const unsigned char *note, size_t size)
{
    uint64_t count, page_size;
    if (size < 16)
        return false;
    memcpy(&count, note, 8);
    memcpy(&page_size, note + 8, 8);
    if (count > (size - 16) / 24 || (core->mappings = calloc(count + 1, sizeof *core->mappings)) == NULL)
        return false;
    const char *path = (const char *)note + 16 + count * 24;
    const char *end = (const char *)note + size;
    for (uint64_t i = 0; i < count; i++) {
        const char *terminator = memchr(path, '\0', (size_t)(end - path));
        if (terminator == NULL)
            return false;
        uint64_t triple[3];
        memcpy(triple, note + 16 + i * 24, sizeof triple);
        core->mappings[i] = (file_mapping){.start = triple[0], .end = triple[1], .offset = triple[2] * page_size,
                                           .path = path};
        path = terminator + 1;
    }
    core->mapping_count = count;
    return true;
}

/* The core's program headers, NT_FILE and each NT_PRSTATUS's registers (ELF64 little-endian, as
 * _UCD_create accepts). */
static bool parse_core(core_file *core)
{
    Elf64_Ehdr header;
    if (!read_bytes(core->bytes, core->size, 0, &header, sizeof header) || header.e_phentsize != sizeof(Elf64_Phdr)
        || header.e_phoff > core->size || header.e_phnum > (core->size - header.e_phoff) / sizeof(Elf64_Phdr)
        || header.e_phoff % 8 != 0)
        return false;
    core->segments = (const Elf64_Phdr *)(core->bytes + header.e_phoff);
    core->segment_count = header.e_phnum;
    for (unsigned i = 0; i < core->segment_count; i++) {
        const Elf64_Phdr *segment = &core->segments[i];
        if (segment->p_type != PT_NOTE || segment->p_offset > core->size
            || segment->p_filesz > core->size - segment->p_offset)
            continue;
        const unsigned char *notes = core->bytes + segment->p_offset;
        /* each note: namesz, descsz, type, the name and the descriptor padded to 4 bytes */
        for (size_t at = 0; segment->p_filesz - at >= sizeof(Elf64_Nhdr);) {
            Elf64_Nhdr note;
            memcpy(&note, notes + at, sizeof note);
            size_t descriptor_at = at + sizeof note + ((note.n_namesz + 3u) & ~3u);
            if (descriptor_at > segment->p_filesz || note.n_descsz > segment->p_filesz - descriptor_at)
                break;
            const unsigned char *descriptor = notes + descriptor_at;
            if (note.n_type == NT_FILE && core->file_note == NULL) {
                core->file_note = descriptor;
                if (!parse_file_note(core, descriptor, note.n_descsz))
                    return false;
            } else if (note.n_type == NT_PRSTATUS && note.n_descsz >= sizeof(struct elf_prstatus)
                       && core->thread_count < MAX_THREADS)
                memcpy(&core->thread_registers[core->thread_count++], descriptor + offsetof(struct elf_prstatus, pr_reg),
                       sizeof core->thread_registers[0]);
            at = descriptor_at + ((note.n_descsz + 3u) & ~3u);
        }
    }
    return true;
}

/* The core being walked and its selected thread: libunwind's `arg` is the UCD_info its own
 * accessors take, so the rest is reached from here. */
static core_file the_core;
static int selected_thread;

static int core_access_mem(unw_addr_space_t as, unw_word_t address, unw_word_t *value, int write, void *arg)
{
    (void)as, (void)arg;
    if (write || !read_memory(&the_core, address, value, sizeof *value))
        return -UNW_EINVAL;
    return 0;
}

static int core_access_reg(unw_addr_space_t as, unw_regnum_t number, unw_word_t *value, int write, void *arg)
{
    if (write)
        return -UNW_EINVAL;
    if (number < UNW_X86_64_R8 || number > UNW_X86_64_R15)
        return _UCD_access_reg(as, number, value, write, arg);
    const struct user_regs_struct *registers = &the_core.thread_registers[selected_thread];
    const unsigned long long values[] = {registers->r8,  registers->r9,  registers->r10, registers->r11,
                                         registers->r12, registers->r13, registers->r14, registers->r15};
    *value = values[number - UNW_X86_64_R8];
    return 0;
}

/* The start of the ELF image `address` is in: the start of its file's mapping at offset 0, or of
 * the dumped segment (the vDSO, which no file backs). */
static bool image_start(const core_file *core, uint64_t address, uint64_t *start)
{
    const file_mapping *mapping = mapping_at(core, address);
    if (mapping != NULL) {
        for (uint64_t i = 0; i < core->mapping_count; i++)
            if (core->mappings[i].offset == 0 && strcmp(core->mappings[i].path, mapping->path) == 0
                && core->mappings[i].start <= address && (!*start || core->mappings[i].start > *start))
                *start = core->mappings[i].start;
        return *start != 0;
    }
    for (unsigned i = 0; i < core->segment_count; i++)
        if (core->segments[i].p_type == PT_LOAD && core->segments[i].p_vaddr <= address
            && address - core->segments[i].p_vaddr < core->segments[i].p_memsz) {
            *start = core->segments[i].p_vaddr;
            return true;
        }
    return false;
}

static int core_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *info, int need_unwind_info,
                               void *arg)
{
    uint64_t start = 0;
    Elf64_Ehdr header;
    if (!image_start(&the_core, ip, &start) || !read_memory(&the_core, start, &header, sizeof header)
        || memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_phentsize != sizeof(Elf64_Phdr))
        return -UNW_ENOINFO;
    uint64_t first = UINT64_MAX, last = 0, header_vaddr = 0;
    for (unsigned i = 0; i < header.e_phnum; i++) {
        Elf64_Phdr segment;
        if (!read_memory(&the_core, start + header.e_phoff + i * sizeof segment, &segment, sizeof segment))
            return -UNW_ENOINFO;
        if (segment.p_type == PT_LOAD) {
            first = segment.p_vaddr < first ? segment.p_vaddr : first;
            last = segment.p_vaddr + segment.p_memsz > last ? segment.p_vaddr + segment.p_memsz : last;
        } else if (segment.p_type == PT_GNU_EH_FRAME)
            header_vaddr = segment.p_vaddr;
    }
    if (first == UINT64_MAX || header_vaddr == 0)
        return -UNW_ENOINFO;
    uint64_t bias = start - (first & ~(uint64_t)0xfff);
    /* .eh_frame_hdr (LSB 5.0): version 1, eh_frame_ptr's encoding, fde_count's, the table's, the
     * encoded eh_frame_ptr and fde_count, then the table: libunwind wants datarel sdata4 pairs */
    unsigned char bytes[12];
    if (!read_memory(&the_core, bias + header_vaddr, bytes, sizeof bytes) || bytes[0] != 1
        || bytes[3] != DW_EH_PE_datarel_sdata4 || (bytes[2] & 0x0f) != DW_EH_PE_udata4)
        return -UNW_ENOINFO;
    uint32_t fde_count;
    memcpy(&fde_count, bytes + 8, 4);
    unw_dyn_info_t table = {.format = UNW_INFO_FORMAT_REMOTE_TABLE, .start_ip = bias + first, .end_ip = bias + last};
    table.u.rti.segbase = bias + header_vaddr;
    table.u.rti.table_data = table.u.rti.segbase + sizeof bytes;
    table.u.rti.table_len = fde_count * 8 / sizeof(unw_word_t);
    return UNW_OBJ(dwarf_search_unwind_table)(as, ip, &table, info, need_unwind_info, arg);
}

static void core_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *info, void *arg)
{
    (void)as, (void)info, (void)arg; /* libunwind frees what a remote table's lookup allocated */
}

static int core(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat status;
    if (fd < 0 || fstat(fd, &status) != 0 || status.st_size == 0) {
        fprintf(stderr, "libunwind_stacks: %s: %s\n", path, strerror(errno));
        return 1;
    }
    the_core.size = (size_t)status.st_size;
    void *mapped = mmap(NULL, the_core.size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    the_core.bytes = mapped;
    if (mapped == MAP_FAILED || !parse_core(&the_core)) {
        fprintf(stderr, "libunwind_stacks: %s: not a core this harness reads\n", path);
        return 1;
    }
    the_core.info = _UCD_create(path);
    if (the_core.info == NULL) {
        fprintf(stderr, "libunwind_stacks: _UCD_create(%s) failed\n", path);
        return 1;
    }
    unw_accessors_t accessors = _UCD_accessors;
    accessors.find_proc_info = core_find_proc_info;
    accessors.put_unwind_info = core_put_unwind_info;
    accessors.access_mem = core_access_mem;
    accessors.access_reg = core_access_reg;
    unw_addr_space_t space = unw_create_addr_space(&accessors, 0);
    int threads = _UCD_get_num_threads(the_core.info);
    if (space == NULL || threads != the_core.thread_count) {
        fprintf(stderr, "libunwind_stacks: %s: %d threads in libunwind, %d NT_PRSTATUS notes\n", path, threads,
                the_core.thread_count);
        return 1;
    }
    printf("{\"pid\": %d, \"threads\": [", (int)_UCD_get_pid(the_core.info));
    for (selected_thread = 0; selected_thread < threads; selected_thread++) {
        _UCD_select_thread(the_core.info, selected_thread);
        unw_word_t pc;
        /* the notes read here are libunwind's, in the same order */
        if (_UCD_access_reg(space, UNW_X86_64_RIP, &pc, 0, the_core.info) != 0
            || pc != the_core.thread_registers[selected_thread].rip) {
            fprintf(stderr, "libunwind_stacks: %s: thread %d's registers differ from libunwind's\n", path,
                    selected_thread);
            return 1;
        }
        if (selected_thread > 0)
            printf(", ");
        print_walk((int)_UCD_get_pid(the_core.info), space, the_core.info);
    }
    printf("]}\n");
    unw_destroy_addr_space(space);
    _UCD_destroy(the_core.info);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "-p") == 0)
        return live(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "--core") == 0)
        return core(argv[2]);
    fprintf(stderr, "usage: libunwind_stacks -p PID | --core CORE\n");
    return 2;
}
