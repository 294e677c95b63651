/* memory: readers for the walker (see memory.h). */
#define _GNU_SOURCE /* process_vm_readv */
#include "memory.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

fu_read_status fu_read_dump(void *context, uint64_t address, unsigned size, uint64_t *out)
{
    const fu_dump_memory *m = context;
    if (size == 0 || size > 8)
        return FU_READ_UNREADABLE;
    if (address >= m->stack_address && address - m->stack_address < m->stack_size &&
        size <= m->stack_size - (address - m->stack_address)) {
        uint64_t v = 0;
        memcpy(&v, m->stack + (address - m->stack_address), size);
        *out = v;
        return FU_READ_OK;
    }
    if (fu_address_space_read_image(m->space, address, size, out))
        return FU_READ_OK;
    if (address >= m->stack_address && address - m->stack_address < FU_STACK_SPAN)
        return FU_READ_PAST_DUMP;
    return FU_READ_UNREADABLE;
}

/* The segment of `segments` (sorted by vaddr, not overlapping) holding [address, address + size), or NULL. */
static const fu_image_segment *sorted_segment_holding(const fu_image_segment *segments, size_t count,
                                                      uint64_t address, size_t size)
{
    size_t lo = 0, hi = count;
    while (lo < hi) { /* bound: halves each time */
        size_t mid = lo + (hi - lo) / 2;
        if (segments[mid].vaddr <= address)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const fu_image_segment *seg = &segments[lo - 1];
    uint64_t into = address - seg->vaddr;
    return into < seg->size && size <= seg->size - into ? seg : NULL;
}

const uint8_t *fu_core_memory_at(const fu_core_memory *m, uint64_t address, size_t size)
{
    const fu_image_segment *seg = sorted_segment_holding(m->dumped, m->dumped_count, address, size);
    if (!seg)
        seg = sorted_segment_holding(m->files, m->file_count, address, size);
    return seg && size ? seg->data + (address - seg->vaddr) : NULL;
}

fu_read_status fu_read_core(void *core_memory, uint64_t address, unsigned size, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *at = size <= 8 ? fu_core_memory_at(core_memory, address, size) : NULL;
    if (!at)
        return FU_READ_UNREADABLE;
    memcpy(&v, at, size);
    *out = v;
    return FU_READ_OK;
}

fu_reader fu_core_reader(const fu_core_memory *m, uint64_t sp)
{
    const fu_image_segment *stack = sorted_segment_holding(m->dumped, m->dumped_count, sp, 1);
    if (!stack)
        return (fu_reader){NULL, 0, 0, fu_read_core, (void *)m};
    return (fu_reader){stack->data, stack->vaddr, stack->size, fu_read_core, (void *)m};
}

fu_read_status fu_read_self(void *unused, uint64_t address, unsigned size, uint64_t *out)
{
    (void)unused;
    fu_pid_memory self = {getpid()};
    return fu_read_pid(&self, address, size, out);
}

fu_read_status fu_read_pid(void *pid_memory, uint64_t address, unsigned size, uint64_t *out)
{
    uint64_t v = 0;
    if (size == 0 || size > 8 || !fu_read_pid_bytes(((const fu_pid_memory *)pid_memory)->pid, address, &v, size))
        return FU_READ_UNREADABLE;
    *out = v;
    return FU_READ_OK;
}

bool fu_read_pid_bytes(int pid, uint64_t address, void *dst, size_t size)
{
    if (size == 0 || size > UINT64_MAX - address)
        return false;
    struct iovec local = {dst, size}, remote = {(void *)(uintptr_t)address, size};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)size;
}

/* One piece of a range read: process_vm_readv, else pread on /proc/PID/mem; bytes read or -1. */
static ssize_t read_pid_piece(int pid, int mem_fd, uint64_t address, uint8_t *dst, size_t size, bool *use_file)
{
    if (!*use_file) {
        struct iovec local = {dst, size}, remote = {(void *)(uintptr_t)address, size};
        ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (got >= 0 || (errno != ENOSYS && errno != EPERM) || mem_fd < 0)
            return got;
        *use_file = true;
    }
    if (address > (uint64_t)INT64_MAX)
        return -1; /* beyond what an off_t can say: not user memory */
    return pread(mem_fd, dst, size, (off_t)address);
}

size_t fu_read_pid_range(int pid, int mem_fd, uint64_t address, void *dst, size_t size)
{
    if (size > UINT64_MAX - address)
        size = (size_t)(UINT64_MAX - address);
    uint8_t *out = dst;
    size_t done = 0;
    bool use_file = false;
    /* bounded by size / FU_PAGE_SIZE + size / FU_PID_READ_CHUNK calls */
    while (done < size) {
        size_t chunk = size - done < FU_PID_READ_CHUNK ? size - done : FU_PID_READ_CHUNK;
        ssize_t got = read_pid_piece(pid, mem_fd, address + done, out + done, chunk, &use_file);
        if (got == (ssize_t)chunk) {
            done += chunk;
            continue;
        }
        /* partly unreadable: page by page up to the first page that fails */
        for (size_t end = done + chunk; done < end;) {
            uint64_t at = address + done;
            size_t page = FU_PAGE_SIZE - (size_t)(at % FU_PAGE_SIZE);
            if (page > end - done)
                page = end - done;
            ssize_t piece = read_pid_piece(pid, mem_fd, at, out + done, page, &use_file);
            if (piece <= 0)
                return done;
            done += (size_t)piece;
            if ((size_t)piece < page)
                return done;
        }
    }
    return done;
}
