/* live: copy the registers and the stack of a live process's threads, each thread stopped alone
 * and for as short a time as the copy takes.
 *
 * A thread is seized (PTRACE_SEIZE: no signal, nothing the process can see but the stop) and
 * interrupted (PTRACE_INTERRUPT: this thread only, not the whole group as SIGSTOP would); once it
 * reports the stop, its registers are read (PTRACE_GETREGSET, NT_PRSTATUS), its stack copied from
 * rsp to the end of the mapping rsp is in (the used part of the stack: it grows down), at most
 * `max_stack` bytes, with the red zone below rsp (FU_LIVE_RED_ZONE), and it is released (PTRACE_DETACH, with the signal it was stopped for if a
 * signal beat the interrupt). The walk runs afterwards, on the copy, with no thread stopped.
 *
 * Every thread that was seized is detached before fu_live_capture_thread returns, whatever failed,
 * or its exit collected (a traced thread's exit is its tracer's to collect; uncollected, it would
 * keep its process a zombie). A thread that does not stop within FU_LIVE_STOP_TIMEOUT_MS
 * (uninterruptible sleep) is reported NOT_STOPPED and waited for FU_LIVE_RELEASE_TIMEOUT_MS more,
 * to be detached when it stops or collected when it exits; one still in uninterruptible sleep then
 * stays seized until it stops or the tracer exits (the kernel detaches a dead tracer's tracees).
 * Signals to the tracer (Ctrl-C) do not interrupt a capture: the caller sees them after it
 * returned, every thread released.
 */
#ifndef FASTUNWIND_LIVE_H
#define FASTUNWIND_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "x86_64.h" /* fu_regs, fu_state_regs */

/* How long a thread may take to report its stop after PTRACE_INTERRUPT. A running or sleeping
 * thread stops within microseconds (the interrupt is delivered at its next return to user mode);
 * only one in uninterruptible sleep (disk, NFS, a frozen cgroup) takes longer. */
#define FU_LIVE_STOP_TIMEOUT_MS 1000
/* How long a thread that could not be detached (not stopped: exiting, or slow to take the
 * interrupt) is waited for, to be detached or its exit collected. */
#define FU_LIVE_RELEASE_TIMEOUT_MS 10000
/* How much of a stack a capture copies at most above rsp: the default stack limit (ulimit -s, 8 MiB). */
#define FU_LIVE_MAX_STACK (8u * 1024u * 1024u)
/* The red zone below rsp, copied too (System V AMD64 ABI 3.2.2: 128 bytes that signal and
 * interrupt handling leave alone). A caller's saved registers may be read there: clang's
 * epilogues emit no .cfi_restore after their pops, so until the return the CFI still names the
 * popped slots, now below rsp (seen in libLLVM-14's, tests/golden/test_against_libunwind.py). */
#define FU_LIVE_RED_ZONE 128u
/* How a thread's stop is awaited: polled with sched_yield for its first FU_LIVE_SPIN_NS (a
 * sleeping or running thread reports its stop within ~10-50 µs, and a nanosleep, however short,
 * lasts the timer slack, 50 µs by default: polling with nanosleep from 2 µs up made the 64-thread
 * benchmark's capture 11 ms, ~170 µs a thread), then with pauses from FU_LIVE_POLL_FIRST_NS
 * doubling up to FU_LIVE_POLL_MAX_NS. */
#define FU_LIVE_SPIN_NS 500000
#define FU_LIVE_POLL_FIRST_NS 50000
#define FU_LIVE_POLL_MAX_NS 1000000

typedef enum fu_live_outcome {
    FU_LIVE_CAPTURED = 0,  /* registers and stack copied */
    FU_LIVE_EXITED,        /* the thread was gone, or exited while it was being stopped */
    FU_LIVE_NOT_PERMITTED, /* ptrace refused (EPERM: credentials, yama ptrace_scope, another tracer) */
    FU_LIVE_NOT_STOPPED,   /* no stop within FU_LIVE_STOP_TIMEOUT_MS */
    FU_LIVE_NO_REGISTERS,  /* stopped, but PTRACE_GETREGSET failed */
    FU_LIVE_FAILED,        /* another ptrace or waitpid failure (error says which errno) */
    FU_LIVE_OUTCOME_COUNT
} fu_live_outcome;
/* "captured", "exited", "not_permitted", "not_stopped", "no_registers", "failed"; "?" else. */
const char *fu_live_outcome_name(int outcome);

typedef struct fu_live_thread {
    int tid;
    fu_live_outcome outcome;
    int error;               /* errno of the call that failed, else 0 */
    fu_regs regs;            /* CAPTURED: every walker register valid */
    fu_state_regs state;     /* CAPTURED: eflags, segment selectors, fs_base, gs_base (all valid) */
    uint64_t stack_address;  /* the copy is of [stack_address, +stack_size): from the red zone below rsp up */
    size_t stack_offset;     /* where the copy starts in the capture's buffer */
    size_t stack_size;
    uint64_t stopped_ns;     /* from PTRACE_INTERRUPT to PTRACE_DETACH */
} fu_live_thread;

/* Where a thread's stack copy lies: `stacks` holds `count` sorted, non-overlapping [start, end)
 * pairs (the process's writable mappings); the copy ends at the end of the one rsp is in, else (a
 * mapping made after the caller read the maps) at rsp + max_stack, and at most there; it starts
 * FU_LIVE_RED_ZONE below rsp, or at the start of that mapping if nearer, or at rsp in none. */
typedef struct fu_live_stacks {
    const uint64_t *ranges; /* start0, end0, start1, end1, ... */
    size_t count;
    size_t max_stack;
} fu_live_stacks;

/* Stop thread `tid` of process `pid`, copy its registers and stack (appended to `stacks_out`), and
 * release it. `mem_fd` is an open /proc/PID/mem or -1 (memory.h fu_read_pid_range). Writes *out;
 * false only when out of memory (the thread is released, out->outcome FAILED, error ENOMEM). */
bool fu_live_capture_thread(int pid, int tid, int mem_fd, const fu_live_stacks *stacks, fu_buffer *stacks_out,
                            fu_live_thread *out);

#endif
