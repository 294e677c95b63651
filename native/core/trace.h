/* trace: dynamic validation of the CFI (`fastunwind check --trace -- CMD`), the second oracle of
 * Bastian, Kell and Zappa Nardelli (OOPSLA 2019, §5.2).
 *
 * A command runs under ptrace and is single-stepped one instruction at a time. The truth about each
 * frame is kept from calls and returns, in a shadow stack: a `call` that executed (rsp fell by 8, the
 * IP moved) opens a frame whose return address lies at the new rsp, so its CFA is that rsp + 8, and
 * whose callee-saved registers hold their entry values. At every instruction of a traced module, the
 * declared row (cfi.h: .eh_frame, then .debug_frame) is evaluated over the real registers and memory
 * and compared with the frame on top of the shadow stack:
 *
 *        caller's frame
 *   CFA ───────────────►  ┌──────────────────┐  (rsp before the call)
 *                         │ return address   │  ◄── the RA slot: CFA - 8 (rsp right after the call)
 *                         ├──────────────────┤
 *                         │ callee's saves…  │  ◄── a register declared saved at CFA + N must hold
 *                         └──────────────────┘      its entry value there
 *
 * Frames leave the shadow stack when rsp rises above their CFA (a `ret`, longjmp, an exception's
 * landing pad, a sigreturn), or reaches it by anything but a `pop` (glibc's vfork pops its own
 * return address into rdi and keeps running in its frame). A signal handler is entered without a
 * call: its frames are not judged until it returns.
 *
 * With skip_unchecked, code of the modules not checked (libc, ld.so when only the program is) runs
 * at full speed between int3 breakpoints: one at each FDE start of the checked modules (their
 * functions called back from skipped code, main from __libc_start_main; a frame opens there) and
 * one at the return address into checked code of the call that left it (frames are resynchronised
 * there). Code reached from skipped code by anything but a call or a return (a longjmp target, an
 * exception's landing pad) is not stepped until the next breakpoint. Once the command starts a
 * thread (clone with CLONE_THREAD), the breakpoints are lifted and the rest is stepped: an untraced
 * thread reaching an int3 would die of it. Only the command's main thread is traced;
 * threads it creates and processes it forks run untraced; an exec restarts the modules and the
 * shadow stack.
 *
 * Everything the tracee gives is read through memory.h's pid readers (process_vm_readv, checked by
 * the kernel); every input-driven loop and table has a bound below, with a named outcome or count.
 */
#ifndef FASTUNWIND_TRACE_H
#define FASTUNWIND_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

/* Instructions stepped when the caller gives no limit: /bin/true runs ~150k (most in ld.so), a
 * small C program calling printf ~200k; at ~300k steps per second that is ~15 s of tracing. */
#define FU_TRACE_DEFAULT_MAX_STEPS 5000000u
/* Executable mappings remembered over the whole run (every exec included). */
#define FU_TRACE_MAX_MODULES 1024
/* Frames on the shadow stack; a deeper recursion ends the trace as FU_TRACE_DEPTH_LIMIT. */
#define FU_TRACE_MAX_DEPTH 65536
/* FDEs with statistics; the steps of further FDEs are counted in fdes_dropped_steps. */
#define FU_TRACE_MAX_FDES 65536
/* Disagreements kept: at most FU_TRACE_RECORDS_PER_FDE per FDE, FU_TRACE_MAX_RECORDS in all. */
#define FU_TRACE_RECORDS_PER_FDE 4
#define FU_TRACE_MAX_RECORDS 8192
/* /proc/PID/maps is read whole into a buffer of this size (a process with ~10k mappings). */
#define FU_TRACE_MAPS_MAX_BYTES (1u << 20)
/* Breakpoints of a trace that skips the modules it does not check: the entries of the checked
 * modules' FDEs and the return addresses into them. Beyond it, calls are stepped, not skipped. */
#define FU_TRACE_MAX_BREAKPOINTS 65536
/* While the command runs between breakpoints, the clock and the stop request are polled this
 * often (milliseconds) besides every stop. */
#define FU_TRACE_RUN_POLL_MS 10
/* The clock and the caller's stop request are polled every this many steps (~15 ms). */
#define FU_TRACE_POLL_STEPS 4096u
/* A step whose delivered signal lowered rsp by more than this entered a handler: the kernel's
 * rt_sigframe (ucontext, siginfo and the xsave area) is far larger than a red zone (128) plus a
 * return address. */
#define FU_TRACE_SIGNAL_FRAME_MIN_BYTES 256u

typedef enum fu_trace_outcome {
    FU_TRACE_EXITED = 0,     /* the command exited (exit_status) */
    FU_TRACE_KILLED,         /* a signal killed it (exit_status holds the signal number) */
    FU_TRACE_STEP_LIMIT,     /* max_steps reached: the command was killed */
    FU_TRACE_TIMEOUT,        /* the time limit passed: the command was killed */
    FU_TRACE_INTERRUPTED,    /* the caller asked to stop (Ctrl-C): the command was killed */
    FU_TRACE_DEPTH_LIMIT,    /* FU_TRACE_MAX_DEPTH frames: the command was killed */
    FU_TRACE_OUTCOME_COUNT
} fu_trace_outcome;

/* "exited", "killed", "step-limit", "timeout", "interrupted", "depth-limit". */
const char *fu_trace_outcome_name(int outcome);

/* What a disagreement is about. */
typedef enum fu_trace_what {
    FU_TRACE_WHAT_CFA = 0,      /* declared and true CFA (addresses) */
    FU_TRACE_WHAT_RA,           /* declared and true return-address slot (addresses); for a rule
                                 * naming a register, the values (register vs true return address) */
    FU_TRACE_WHAT_REGISTER,     /* a callee-saved register (column): the value its rule recovers
                                 * vs its value at the frame's entry */
    FU_TRACE_WHAT_COUNT
} fu_trace_what;

/* An executable mapping, as /proc/PID/maps gives it. */
typedef struct fu_trace_mapping {
    uint64_t start, end, offset;
    const char *path; /* "" for an anonymous mapping, "[vdso]" for the vDSO */
} fu_trace_mapping;

/* A mapping with what is known of its code. */
typedef struct fu_trace_module {
    uint64_t start, end;             /* avma */
    uint64_t bias;                   /* avma = svma + bias */
    const fu_cfi_table *eh_frame;    /* may be NULL (no CFI: counted as such) */
    const fu_cfi_table *debug_frame; /* may be NULL */
    uint32_t id;                     /* the caller's identifier */
    bool checked;                    /* compare here; else steps are only counted */
} fu_trace_module;

typedef struct fu_trace_callbacks {
    /* Fill `module` (start/end are set) for a newly seen executable mapping: tables, bias, id,
     * checked. False leaves it without tables. Called once per mapping, rarely (never per step). */
    bool (*provide_module)(void *opaque, const fu_trace_mapping *mapping, fu_trace_module *module);
    /* Polled every FU_TRACE_POLL_STEPS steps; true stops the trace (FU_TRACE_INTERRUPTED). */
    bool (*should_stop)(void *opaque);
    void *opaque;
} fu_trace_callbacks;

typedef struct fu_trace_options {
    uint64_t max_steps;       /* 0: FU_TRACE_DEFAULT_MAX_STEPS */
    uint64_t timeout_ns;      /* 0: none */
    bool skip_unchecked;      /* run through modules not checked instead of stepping them */
} fu_trace_options;

/* Statistics of one FDE the trace met in a checked module. */
typedef struct fu_trace_fde {
    uint32_t module;          /* index in fu_trace_result.modules */
    uint32_t table;           /* 0 .eh_frame, 1 .debug_frame */
    uint32_t entry;           /* entry index in that table */
    uint64_t pc_begin, pc_end; /* svma */
    uint64_t checked;         /* steps compared here (truth known) */
    uint64_t disagreeing;     /* of those, steps with at least one disagreement */
    uint32_t record_count;    /* disagreements kept (at most FU_TRACE_RECORDS_PER_FDE) */
} fu_trace_fde;

/* One disagreement, at one step. */
typedef struct fu_trace_record {
    uint64_t address;         /* avma of the instruction */
    uint32_t fde;             /* index in fu_trace_result.fdes */
    uint8_t what;             /* fu_trace_what */
    uint8_t column;           /* FU_TRACE_WHAT_REGISTER: its DWARF column */
    uint64_t declared, truth;
} fu_trace_record;

typedef struct fu_trace_counts {
    uint64_t steps;            /* instructions stepped */
    uint64_t checked;          /* compared: a checked module, a row, the truth known */
    uint64_t agreeing, disagreeing;
    uint64_t no_cfi;           /* no row covers the IP (no tables, no FDE, anonymous code) */
    uint64_t unknown_truth;    /* a row, but no frame entered by a call (process entry code) */
    uint64_t in_signal_handler; /* a row, inside a signal handler (not judged) */
    uint64_t signal_frames;    /* an 'S' FDE (the sigreturn trampoline): not judged */
    uint64_t not_evaluable;    /* the declared CFA could not be computed (unreadable, expression) */
    uint64_t unchecked_module; /* steps in modules the caller did not ask about */
    uint64_t calls, returns;   /* frames opened by a call; closed by rsp rising */
    uint64_t signals;          /* signals passed on to the command */
    uint64_t handlers;         /* of those, handlers entered */
    uint64_t execs;
    uint64_t max_depth;
    uint64_t fdes_dropped_steps; /* steps in FDEs beyond FU_TRACE_MAX_FDES */
    uint64_t records_dropped;  /* disagreements beyond the kept ones */
    uint64_t modules_dropped;  /* mappings seen beyond FU_TRACE_MAX_MODULES (their code: no CFI) */
    uint64_t runs;             /* skip_unchecked: times the command ran through unchecked code */
    uint64_t breakpoints;      /* breakpoints planted */
    uint64_t threads_seen;     /* skip_unchecked stopped: the command started a thread */
} fu_trace_counts;

typedef struct fu_trace_result {
    int outcome;               /* fu_trace_outcome */
    int exit_status;           /* FU_TRACE_EXITED: the status; FU_TRACE_KILLED: the signal */
    uint64_t elapsed_ns;
    fu_trace_counts counts;
    fu_trace_module *modules;  /* every mapping seen, in order of discovery */
    uint32_t module_count;
    fu_trace_fde *fdes;
    uint32_t fde_count;
    fu_trace_record *records;
    uint32_t record_count;
} fu_trace_result;

/* Run `path` with `argv` and `envp` under ptrace and judge the CFI at every step. On FU_OK the
 * result holds the outcome and the statistics (fu_trace_result_free); on failure (the command could
 * not be started: "cannot execute /x: No such file or directory"; ptrace refused; out of memory)
 * err says why. Whatever happens, the command is not left stopped: it runs to its end or is killed. */
fu_status fu_trace_run(const char *path, char *const argv[], char *const envp[], const fu_trace_options *options,
                       const fu_trace_callbacks *callbacks, fu_trace_result *result, fu_error *err);
void fu_trace_result_free(fu_trace_result *result);

/* The callee-saved registers (System V AMD64 ABI §3.2.1) whose save slots are judged: rbx, rbp,
 * r12-r15. */
#define FU_TRACE_SAVED_COUNT 6
extern const uint8_t FU_TRACE_SAVED_COLUMNS[FU_TRACE_SAVED_COUNT];
/* Disagreements one step can have: the CFA, the return address, each saved register. */
#define FU_TRACE_MAX_FINDINGS_PER_STEP (2 + FU_TRACE_SAVED_COUNT)

/* The CFA, return-address slot and saved registers a row declares, judged against one true frame:
 * the comparison of one step, apart from ptrace so that a driver can feed it any row and registers. */
typedef struct fu_trace_frame {
    uint64_t cfa;              /* the true CFA; the RA slot is cfa - 8 */
    uint64_t return_address;
    uint64_t entry_values[FU_TRACE_SAVED_COUNT]; /* FU_TRACE_SAVED_COLUMNS at the frame's entry */
    bool signal_handler;       /* a handler's frame, entered without a call */
} fu_trace_frame;

typedef enum fu_trace_judgement {
    FU_TRACE_AGREE = 0,
    FU_TRACE_DISAGREE,
    FU_TRACE_NOT_EVALUABLE /* the declared CFA could not be computed */
} fu_trace_judgement;

/* Judge `state` of `table` (its FDE's CIE gives the RA column) at registers `regs` (DWARF columns
 * 0-16, 16 the IP) against `frame`, reading memory through `read`. Writes up to `max_findings`
 * disagreements into `findings` (address and fde left to the caller) and their count into
 * *finding_count. */
fu_trace_judgement fu_trace_judge(const fu_cfi_table *table, const fu_state *state, uint64_t ra_column,
                                  const uint64_t regs[17], const fu_trace_frame *frame,
                                  bool (*read)(void *opaque, uint64_t address, unsigned size, uint64_t *out),
                                  void *opaque, fu_trace_record *findings, unsigned max_findings,
                                  unsigned *finding_count);

#endif
