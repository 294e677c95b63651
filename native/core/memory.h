/* memory: the readers through which the walker sees a target's memory (fu_read_fn, fu_unwind_abi.h).
 *
 * - a captured stack (perf sample, core file thread): [stack_address, +size) from the dump, then
 *   the read-only segments of the mapped modules; addresses just above the dump are "past the
 *   dump" (the stack was truncated), anything else unreadable;
 * - a core file: the bytes of its PT_LOAD segments (coredump.h), then, for mappings the dump left
 *   out (p_filesz < p_memsz: the kernel's coredump_filter skips file-backed text), the bytes of the
 *   mapped files at their avmas, as eu-stack reads them;
 * - the current process, or another one (a traced process, native/core/trace.c): its memory through
 *   process_vm_readv, so a bad pointer is an error, never a fault. Pages that are executable but not
 *   readable fail there (the kernel checks read permission); ptrace's PEEKDATA would force them.
 */
#ifndef FASTUNWIND_MEMORY_H
#define FASTUNWIND_MEMORY_H

#include "address_space.h"
#include "fu_unwind_abi.h" /* fu_reader, fu_read_status */

/* How far above a stack dump an address still counts as "the stack continued past the dump"
 * rather than "not stack memory": the 8 MiB default stack limit rounded up to 4 GiB keeps any
 * thread stack inside while excluding the rest of the address space. */
#define FU_STACK_SPAN ((uint64_t)1 << 32)

typedef struct fu_dump_memory {
    const uint8_t *stack;
    uint64_t stack_address;
    uint64_t stack_size;
    const fu_address_space *space;
} fu_dump_memory;

fu_read_status fu_read_dump(void *dump_memory, uint64_t address, unsigned size, uint64_t *out);
fu_read_status fu_read_self(void *unused, uint64_t address, unsigned size, uint64_t *out);

/* A core file's memory: the context of fu_read_core. Both lists are sorted by vaddr and do not
 * overlap within themselves; `dumped` wins where both hold an address (a written private mapping). */
typedef struct fu_core_memory {
    const fu_image_segment *dumped; /* the present bytes of the PT_LOAD segments */
    size_t dumped_count;
    const fu_image_segment *files;  /* mapped files' bytes, by avma */
    size_t file_count;
} fu_core_memory;
fu_read_status fu_read_core(void *core_memory, uint64_t address, unsigned size, uint64_t *out);
/* The `size` bytes at `address`, where one segment of either list holds them all, else NULL. */
const uint8_t *fu_core_memory_at(const fu_core_memory *m, uint64_t address, size_t size);

/* The reader of a core file: the dumped segment holding `sp` (the thread's stack) is its inline
 * window, fu_read_core the rest. `m` must outlive the reader. */
fu_reader fu_core_reader(const fu_core_memory *m, uint64_t sp);

/* Another process's memory: the context of fu_read_pid. */
typedef struct fu_pid_memory {
    int pid;
} fu_pid_memory;
fu_read_status fu_read_pid(void *pid_memory, uint64_t address, unsigned size, uint64_t *out);
/* `size` bytes at `address` of process `pid` into dst; false if any of them is unreadable. */
bool fu_read_pid_bytes(int pid, uint64_t address, void *dst, size_t size);

/* Up to `size` bytes of process `pid` from `address` into dst, for a copy of a live thread's stack
 * (native/core/live.c): the bytes read up to the first unreadable page (the count is returned;
 * 0 when `address` itself is unreadable). Through process_vm_readv, FU_PID_READ_CHUNK bytes a call
 * and page by page where a chunk is partly unreadable; through `mem_fd` (an open /proc/PID/mem,
 * or -1 for none) where process_vm_readv is refused (ENOSYS, EPERM under some seccomp and LSM
 * policies) but the file may be read. */
#define FU_PID_READ_CHUNK (256u * 1024u)
#define FU_PAGE_SIZE 4096u
size_t fu_read_pid_range(int pid, int mem_fd, uint64_t address, void *dst, size_t size);

/* The reader of a captured stack: the dump is its inline window, fu_read_dump the rest. `m` must
 * outlive the reader. */
static inline fu_reader fu_dump_reader(const fu_dump_memory *m)
{
    return (fu_reader){m->stack, m->stack_address, m->stack_size, fu_read_dump, (void *)m};
}

/* The reader of the current process (no window: every read is checked by the kernel). */
static inline fu_reader fu_self_reader(void)
{
    return (fu_reader){NULL, 0, 0, fu_read_self, NULL};
}

#endif
