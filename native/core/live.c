/* live: stop one thread, copy its registers and stack, release it (see live.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* PTRACE_SEIZE and friends, process_vm_readv */
#endif
#include "live.h"

#include <elf.h> /* NT_PRSTATUS */
#include <errno.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "clock.h"
#include "memory.h"
#include "x86_64.h"

const char *fu_live_outcome_name(int outcome)
{
    static const char *const names[FU_LIVE_OUTCOME_COUNT] = {
        [FU_LIVE_CAPTURED] = "captured",         [FU_LIVE_EXITED] = "exited",
        [FU_LIVE_NOT_PERMITTED] = "not_permitted", [FU_LIVE_NOT_STOPPED] = "not_stopped",
        [FU_LIVE_NO_REGISTERS] = "no_registers", [FU_LIVE_FAILED] = "failed",
    };
    return outcome >= 0 && outcome < FU_LIVE_OUTCOME_COUNT ? names[outcome] : "?";
}

/* The writable mapping, a [start, end) pair of `stacks` (live.h fu_live_stacks), rsp `sp` is in;
 * NULL if none is (a mapping made after the caller read the maps). */
static const uint64_t *stack_mapping(const fu_live_stacks *stacks, uint64_t sp)
{
    size_t low = 0, high = stacks->count; /* binary search: the last range starting at or below sp */
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (stacks->ranges[2 * mid] <= sp)
            low = mid + 1;
        else
            high = mid;
    }
    return low > 0 && sp < stacks->ranges[2 * (low - 1) + 1] ? &stacks->ranges[2 * (low - 1)] : NULL;
}

/* The end of the stack copy for a thread whose rsp is `sp`, in `mapping` (or NULL). */
static uint64_t stack_end(const fu_live_stacks *stacks, const uint64_t *mapping, uint64_t sp)
{
    uint64_t limit = sp + (stacks->max_stack < UINT64_MAX - sp ? stacks->max_stack : UINT64_MAX - sp);
    return mapping != NULL && mapping[1] < limit ? mapping[1] : limit;
}

/* The start of the copy: the red zone below rsp, as much of it as its mapping holds. */
static uint64_t stack_start(const uint64_t *mapping, uint64_t sp)
{
    if (mapping == NULL)
        return sp;
    return sp - mapping[0] < FU_LIVE_RED_ZONE ? mapping[0] : sp - FU_LIVE_RED_ZONE;
}

/* Wait for `tid`'s stop after PTRACE_INTERRUPT, polling (no blocking wait that could hang) up to
 * `timeout_ms`. Returns the outcome so far: CAPTURED (stopped: *signal is a signal to deliver on
 * detach, or 0), EXITED (its exit collected), NOT_STOPPED or FAILED. */
static fu_live_outcome wait_for_stop(int tid, unsigned timeout_ms, int *signal, int *error)
{
    *signal = 0;
    uint64_t started = fu_monotonic_ns();
    uint64_t deadline = started + (uint64_t)timeout_ms * 1000000u;
    long pause_ns = FU_LIVE_POLL_FIRST_NS;
    for (;;) { /* bounded by the deadline */
        int status;
        pid_t got = waitpid(tid, &status, __WALL | WNOHANG);
        if (got == tid) {
            if (WIFEXITED(status) || WIFSIGNALED(status))
                return FU_LIVE_EXITED;
            if (!WIFSTOPPED(status))
                continue;
            /* a PTRACE_EVENT_STOP (our interrupt, or a group stop) carries the event in bits 16+;
             * a signal-delivery stop does not, and its signal goes back on detach */
            if (status >> 16 != PTRACE_EVENT_STOP)
                *signal = WSTOPSIG(status);
            return FU_LIVE_CAPTURED;
        }
        if (got == -1 && errno != EINTR) {
            *error = errno;
            return errno == ECHILD ? FU_LIVE_EXITED : FU_LIVE_FAILED;
        }
        uint64_t now = fu_monotonic_ns();
        if (now >= deadline)
            return FU_LIVE_NOT_STOPPED;
        if (now - started < FU_LIVE_SPIN_NS) {
            sched_yield();
            continue;
        }
        struct timespec pause = {0, pause_ns};
        nanosleep(&pause, NULL);
        if (pause_ns < FU_LIVE_POLL_MAX_NS)
            pause_ns *= 2;
    }
}

/* Detach `tid` whatever its state: stopped, at once (handing back `signal`); else (exiting, or not
 * yet at its stop) once it stops, or collect its exit, waiting up to FU_LIVE_RELEASE_TIMEOUT_MS.
 * A traced thread's exit is its tracer's to collect, and until it is, the thread group's leader
 * cannot be reaped by its parent: a thread left uncollected would keep the process a zombie. */
static void release(int tid, int signal)
{
    if (ptrace(PTRACE_DETACH, tid, NULL, (void *)(uintptr_t)signal) == 0)
        return;
    int error = 0;
    if (wait_for_stop(tid, FU_LIVE_RELEASE_TIMEOUT_MS, &signal, &error) == FU_LIVE_CAPTURED)
        ptrace(PTRACE_DETACH, tid, NULL, (void *)(uintptr_t)signal);
}

bool fu_live_capture_thread(int pid, int tid, int mem_fd, const fu_live_stacks *stacks, fu_buffer *stacks_out,
                            fu_live_thread *out)
{
    *out = (fu_live_thread){.tid = tid, .outcome = FU_LIVE_FAILED, .stack_offset = stacks_out->len};
    size_t max_stack = stacks->max_stack < FU_LIVE_MAX_STACK ? stacks->max_stack : FU_LIVE_MAX_STACK;
    /* room for the largest copy before the thread stops: no allocation while it is stopped */
    if (!fu_buffer_reserve(stacks_out, max_stack + FU_LIVE_RED_ZONE)) {
        out->error = ENOMEM;
        return false;
    }
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) == -1) {
        out->error = errno;
        out->outcome = errno == ESRCH ? FU_LIVE_EXITED : errno == EPERM ? FU_LIVE_NOT_PERMITTED : FU_LIVE_FAILED;
        return true;
    }
    uint64_t stopped_at = fu_monotonic_ns();
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) == -1) {
        out->error = errno;
        out->outcome = errno == ESRCH ? FU_LIVE_EXITED : FU_LIVE_FAILED;
        release(tid, 0);
        return true;
    }
    int signal = 0;
    fu_live_outcome stopped = wait_for_stop(tid, FU_LIVE_STOP_TIMEOUT_MS, &signal, &out->error);
    if (stopped != FU_LIVE_CAPTURED) {
        out->outcome = stopped;
        if (stopped != FU_LIVE_EXITED)
            release(tid, 0);
        return true;
    }
    struct user_regs_struct user;
    struct iovec registers = {&user, sizeof user};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_PRSTATUS, &registers) == -1) {
        out->error = errno;
        out->outcome = errno == ESRCH ? FU_LIVE_EXITED : FU_LIVE_NO_REGISTERS;
    } else {
        fu_regs_from_user_regs(&user, &out->regs);
        fu_state_regs_from_user_regs(&user, &out->state);
        uint64_t sp = out->regs.value[FU_REG_RSP];
        fu_live_stacks bounded = {stacks->ranges, stacks->count, max_stack};
        const uint64_t *mapping = stack_mapping(&bounded, sp);
        uint64_t start = stack_start(mapping, sp), end = stack_end(&bounded, mapping, sp);
        size_t got = fu_read_pid_range(pid, mem_fd, start, stacks_out->data + stacks_out->len, (size_t)(end - start));
        stacks_out->len += got;
        out->stack_address = start;
        out->stack_size = got;
        out->outcome = FU_LIVE_CAPTURED;
    }
    release(tid, signal);
    out->stopped_ns = fu_monotonic_ns() - stopped_at;
    return true;
}
