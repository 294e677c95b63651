/* Guarded file mappings (mapped_file.h).
 *
 * The table is lock-free: a slot is claimed by compare-and-swap of `claimed`, its range published by
 * storing `start` then `length` (release), withdrawn by clearing `length` first; the handler reads
 * `length` (acquire) then `start`, so it never sees a half-written range. The handler calls mmap as a
 * raw syscall: mmap is not on POSIX's list of async-signal-safe functions, but it is one system call
 * that touches no user-space state (no lock, no allocation), which is what makes a function safe in
 * practice; errno is saved around it.
 */
#define _GNU_SOURCE
#include "mapped_file.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct guarded_range {
    atomic_bool claimed;
    atomic_uintptr_t start;
    atomic_size_t length; /* 0: no range */
    atomic_bool changed;
} guarded_range;

static guarded_range guarded[FU_MAPPED_FILE_MAX_GUARDED];
/* The chain of handlers behind the guard, oldest first: [0] what SIGBUS had when the guard was
 * installed, then each handler installed over the guard since, in front of which the guard put itself
 * back (fu_mapped_file_guard_refresh). The guard in front of chain[0..k] is installed as its level k,
 * its own function (guard_levels[k]): a handler that put it there saved that level as its "previous",
 * so the guard knows, by the function called, how deep in the chain a fault handed on has come (a
 * handler of the chain hands back to the level it displaced), and by the function installed, which
 * handlers of the chain have put their previous one back since (faulthandler.disable()). An entry is
 * written before `chain_length` counts it (release). */
static struct sigaction chain[FU_MAPPED_FILE_MAX_CHAIN];
static atomic_int chain_length;
static atomic_flag refreshing = ATOMIC_FLAG_INIT;
static atomic_bool guard_installed;
static atomic_uint_fast64_t pages_replaced;
static uintptr_t page_size;

/* The default action: the fault repeats when the handler returns, now fatal; a signal that was sent
 * (kill, raise), which nothing repeats, is raised again (delivered once the handler returns). */
static void take_default_action(const siginfo_t *info)
{
    struct sigaction fatal;
    memset(&fatal, 0, sizeof fatal);
    fatal.sa_handler = SIG_DFL;
    sigemptyset(&fatal.sa_mask);
    sigaction(SIGBUS, &fatal, NULL);
    if (info->si_code <= 0)
        raise(SIGBUS);
}

/* Hand a fault the guard does not own to chain[level]: its function, or the default action. */
static void hand_on(int level, int signal_number, siginfo_t *info, void *context)
{
    const struct sigaction *next = &chain[level];
    if (next->sa_flags & SA_SIGINFO)
        next->sa_sigaction(signal_number, info, context);
    else if (next->sa_handler != SIG_DFL && next->sa_handler != SIG_IGN)
        next->sa_handler(signal_number);
    else
        take_default_action(info);
}

static void on_sigbus(int level, int signal_number, siginfo_t *info, void *context)
{
    uintptr_t address = (uintptr_t)info->si_addr;
    if (info->si_code > 0) {
        for (size_t i = 0; i < FU_MAPPED_FILE_MAX_GUARDED; i++) {
            size_t length = atomic_load_explicit(&guarded[i].length, memory_order_acquire);
            uintptr_t start = atomic_load_explicit(&guarded[i].start, memory_order_relaxed);
            if (length == 0 || address - start >= length)
                continue;
            int saved_errno = errno;
            long zeros = syscall(SYS_mmap, address & ~(page_size - 1), (size_t)page_size, PROT_READ,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            errno = saved_errno;
            if (zeros == -1)
                break; /* no page to put there: the fault is fatal */
            atomic_store_explicit(&guarded[i].changed, true, memory_order_relaxed);
            atomic_fetch_add_explicit(&pages_replaced, 1, memory_order_relaxed);
            return;
        }
    }
    int saved_errno = errno;
    hand_on(level, signal_number, info, context);
    errno = saved_errno;
}

#define GUARD_LEVEL(k) \
    static void on_sigbus_##k(int signal_number, siginfo_t *info, void *context) { on_sigbus(k, signal_number, info, context); }
GUARD_LEVEL(0)
GUARD_LEVEL(1)
GUARD_LEVEL(2)
GUARD_LEVEL(3)
GUARD_LEVEL(4)
GUARD_LEVEL(5)
GUARD_LEVEL(6)
GUARD_LEVEL(7)
static void (*const guard_levels[])(int, siginfo_t *, void *) = {on_sigbus_0, on_sigbus_1, on_sigbus_2, on_sigbus_3,
                                                                 on_sigbus_4, on_sigbus_5, on_sigbus_6, on_sigbus_7};
_Static_assert(sizeof guard_levels / sizeof guard_levels[0] == FU_MAPPED_FILE_MAX_CHAIN, "a guard level per chain entry");

static void guard_action(int level, struct sigaction *action)
{
    memset(action, 0, sizeof *action);
    action->sa_sigaction = guard_levels[level];
    action->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action->sa_mask);
}

/* The guard's level that `action` installs, or -1: another handler. */
static int guard_level(const struct sigaction *action)
{
    if (!(action->sa_flags & SA_SIGINFO))
        return -1;
    for (int level = 0; level < FU_MAPPED_FILE_MAX_CHAIN; level++)
        if (action->sa_sigaction == guard_levels[level])
            return level;
    return -1;
}

fu_status fu_mapped_file_guard_install(fu_error *err)
{
    if (atomic_exchange(&guard_installed, true))
        return FU_OK;
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction action;
    guard_action(0, &action);
    if (sigaction(SIGBUS, &action, &chain[0]) != 0) {
        atomic_store(&guard_installed, false);
        return fu_fail(err, FU_ERR_INVALID, "cannot install the SIGBUS handler: %s", strerror(errno));
    }
    atomic_store_explicit(&chain_length, 1, memory_order_release);
    return FU_OK;
}

bool fu_mapped_file_guard_refresh(void)
{
    if (!atomic_load_explicit(&guard_installed, memory_order_relaxed))
        return false;
    struct sigaction current;
    if (sigaction(SIGBUS, NULL, &current) != 0 ||
        guard_level(&current) == atomic_load_explicit(&chain_length, memory_order_relaxed) - 1)
        return false; /* the guard is in front of the whole chain */
    if (atomic_flag_test_and_set(&refreshing))
        return false; /* another thread is at it */
    bool put_back = false;
    int length = atomic_load_explicit(&chain_length, memory_order_relaxed);
    int level = sigaction(SIGBUS, NULL, &current) == 0 ? guard_level(&current) : length - 1;
    if (level >= 0) {
        /* the handlers above `level` put back the guard they had displaced: they are gone */
        atomic_store_explicit(&chain_length, level + 1, memory_order_release);
    } else if (length < FU_MAPPED_FILE_MAX_CHAIN) {
        chain[length] = current;
        atomic_store_explicit(&chain_length, length + 1, memory_order_release);
        struct sigaction action;
        guard_action(length, &action);
        put_back = sigaction(SIGBUS, &action, NULL) == 0;
        if (!put_back)
            atomic_store_explicit(&chain_length, length, memory_order_release);
    }
    atomic_flag_clear(&refreshing);
    return put_back;
}

static int claim_slot(void)
{
    for (int i = 0; i < FU_MAPPED_FILE_MAX_GUARDED; i++) {
        bool free_slot = false;
        if (!atomic_load_explicit(&guarded[i].claimed, memory_order_relaxed) &&
            atomic_compare_exchange_strong(&guarded[i].claimed, &free_slot, true))
            return i;
    }
    return -1;
}

/* The copy is anonymous memory, page-aligned as a mapping is: a reader that gives back the pages it
 * has read (MADV_DONTNEED, perf_data.c's stream) treats both alike. */
static fu_status read_whole(fu_mapped_file *file, int fd, size_t size, fu_error *err)
{
    void *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory reading a file of %zu bytes", size);
    uint8_t *copy = memory;
    size_t done = 0;
    while (done < size) {
        ssize_t n = pread(fd, copy + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int reason = errno;
            munmap(memory, size);
            if (n == 0)
                return fu_fail(err, FU_ERR_FILE_CHANGED, "changed while read (truncated in place: it ends at 0x%zx, "
                                                         "not at its size 0x%zx)", done, size);
            return fu_fail(err, FU_ERR_INVALID, "cannot read the file at 0x%zx: %s", done, strerror(reason));
        }
        done += (size_t)n;
    }
    file->data = copy;
    file->size = size;
    return FU_OK;
}

fu_status fu_mapped_file_open(fu_mapped_file *file, int fd, size_t size, bool populate, fu_error *err)
{
    memset(file, 0, sizeof *file);
    if (size == 0)
        return fu_fail(err, FU_ERR_INVALID, "cannot map an empty file");
    (void)fu_mapped_file_guard_refresh();
    int slot = atomic_load(&guard_installed) ? claim_slot() : -1;
    if (slot < 0)
        return read_whole(file, fd, size, err);
    void *mapped = mmap(NULL, size, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    if (mapped == MAP_FAILED) {
        int reason = errno;
        atomic_store(&guarded[slot].claimed, false);
        return fu_fail(err, FU_ERR_INVALID, "cannot map the file: %s", strerror(reason));
    }
    atomic_store_explicit(&guarded[slot].changed, false, memory_order_relaxed);
    atomic_store_explicit(&guarded[slot].start, (uintptr_t)mapped, memory_order_relaxed);
    atomic_store_explicit(&guarded[slot].length, size, memory_order_release);
    file->data = mapped;
    file->size = size;
    file->guard = slot + 1;
    return FU_OK;
}

bool fu_mapped_file_changed(const fu_mapped_file *file)
{
    return file->guard > 0 && atomic_load_explicit(&guarded[file->guard - 1].changed, memory_order_relaxed);
}

uint64_t fu_mapped_file_changes(void) { return atomic_load_explicit(&pages_replaced, memory_order_relaxed); }

fu_status fu_mapped_file_check(const fu_mapped_file *file, const char *name, fu_error *err)
{
    if (!fu_mapped_file_changed(file))
        return FU_OK;
    return fu_fail(err, FU_ERR_FILE_CHANGED,
                   "%s: changed while read (truncated in place: pages past its new end read as zeros)", name);
}

void fu_mapped_file_release_pages(const fu_mapped_file *file)
{
    if (file->guard > 0)
        (void)madvise((void *)file->data, file->size, MADV_DONTNEED);
}

void fu_mapped_file_close(fu_mapped_file *file)
{
    if (!file->data)
        return;
    guarded_range *range = file->guard > 0 ? &guarded[file->guard - 1] : NULL;
    if (range) {
        atomic_store_explicit(&range->length, 0, memory_order_release);
        atomic_store_explicit(&range->start, 0, memory_order_relaxed);
    }
    munmap((void *)file->data, file->size);
    if (range)
        atomic_store(&range->claimed, false); /* free for another file once unmapped */
    memset(file, 0, sizeof *file);
}
