/* memory: readers for the walker (see memory.h). */
#define _GNU_SOURCE /* process_vm_readv */
#include "memory.h"

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
