/* x86_64: the architecture's register facts, in one header (docs/ARCHITECTURE.md, "Registers": an
 * AArch64 port adds its own beside this one).
 *
 * - DWARF numbering (System V AMD64 ABI, figure 3.36): 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi,
 *   6 rbp, 7 rsp, 8-15 r8-r15, 16 the return address (rip). The walker tracks 0-16; the subset
 *   that generated eh_elf code needs (FU_WALK_REGISTERS, FU_REG_RBP/RSP/RA) is the shipped ABI,
 *   fu_unwind_abi.h, and the rest is stated here against it.
 * - the psABI's callee-saved registers (§3.2.1);
 * - perf's user register numbering (arch/x86/include/uapi/asm/perf_regs.h) and what `perf record
 *   --call-graph dwarf` samples;
 * - the registers of a ucontext_t (glibc's gregs), for walking the current thread;
 * - the kernel's struct user_regs_struct (a core's NT_PRSTATUS, ptrace's NT_PRSTATUS regset).
 */
#ifndef FASTUNWIND_X86_64_H
#define FASTUNWIND_X86_64_H

#include <stdint.h>

#include "fu_unwind_abi.h" /* FU_WALK_REGISTERS, FU_REG_RBP, FU_REG_RSP, FU_REG_RA, fu_regs */

/* DWARF register numbers (the ones the walker tracks; fu_register_name has them all). */
enum fu_dwarf_register {
    FU_REG_RAX = 0, FU_REG_RDX = 1, FU_REG_RCX = 2, FU_REG_RBX = 3, FU_REG_RSI = 4, FU_REG_RDI = 5,
    FU_REG_R8 = 8, FU_REG_R9, FU_REG_R10, FU_REG_R11, FU_REG_R12, FU_REG_R13, FU_REG_R14, FU_REG_R15,
};
_Static_assert(FU_REG_RBP == 6 && FU_REG_RSP == 7 && FU_REG_R15 == 15, "DWARF x86-64 numbering");
_Static_assert(FU_REG_RA == 16 && FU_WALK_REGISTERS == FU_REG_RA + 1, "the return address is the last tracked");

/* The DWARF column of the return address in x86-64 CFI (a CIE may name another; the walker keeps
 * a row's return address in slot FU_REG_RA whatever its column). */
#define FU_RETURN_ADDRESS_COLUMN 16
_Static_assert(FU_RETURN_ADDRESS_COLUMN == FU_REG_RA, "rip's column is the walker's return address slot");

/* The psABI's callee-saved registers (§3.2.1: rbx, rbp, r12-r15), which a caller keeps unless a
 * rule says otherwise, as a fu_regs valid mask. */
#define FU_CALLEE_SAVED_MASK                                                                                \
    ((1u << FU_REG_RBX) | (1u << FU_REG_RBP) | (1u << FU_REG_R12) | (1u << FU_REG_R13) | (1u << FU_REG_R14) | \
     (1u << FU_REG_R15))

/* readelf's name of DWARF column `column` (binutils dwarf.c's x86-64 table), or NULL. */
const char *fu_register_name(uint64_t column);
/* LLVM's name of DWARF register `reg` as llvm-dwarfdump prints it (X86RegisterInfo.td), or NULL
 * where LLVM prints the number. */
const char *fu_llvm_register_name(uint64_t reg);

/* perf's x86-64 user register numbering (arch/x86/include/uapi/asm/perf_regs.h). */
enum fu_perf_reg {
    FU_PERF_REG_AX = 0, FU_PERF_REG_BX, FU_PERF_REG_CX, FU_PERF_REG_DX, FU_PERF_REG_SI,
    FU_PERF_REG_DI, FU_PERF_REG_BP, FU_PERF_REG_SP, FU_PERF_REG_IP, FU_PERF_REG_FLAGS,
    FU_PERF_REG_CS, FU_PERF_REG_SS, FU_PERF_REG_DS, FU_PERF_REG_ES, FU_PERF_REG_FS, FU_PERF_REG_GS,
    FU_PERF_REG_R8, FU_PERF_REG_R9, FU_PERF_REG_R10, FU_PERF_REG_R11, FU_PERF_REG_R12,
    FU_PERF_REG_R13, FU_PERF_REG_R14, FU_PERF_REG_R15,
    FU_PERF_REGISTER_COUNT
};

/* perf's name of user register `perf_reg` ("ax", ..., "r15", as `perf script -F uregs` prints
 * them), or NULL. */
const char *fu_perf_register_name(unsigned perf_reg);
/* The DWARF register (0..16) of perf's user register `perf_reg`, or -1 for those the walker does
 * not track (flags, segment registers) and numbers beyond FU_PERF_REGISTER_COUNT. */
int fu_dwarf_of_perf_register(unsigned perf_reg);

/* The user registers `perf record --call-graph dwarf` samples on x86-64 (PERF_REGS_MASK in perf's
 * arch/x86/include/perf_regs.h): every general register, rip, flags, cs and ss; not ds, es, fs, gs. */
#define FU_PERF_DEFAULT_REGS_MASK 0xff0fffull

/* The walker's registers (all FU_WALK_REGISTERS valid) from a ucontext_t's general registers
 * (`uc_mcontext.gregs`, glibc's greg_t (long long) array, indexed by REG_RAX and the like). */
void fu_regs_from_gregs(const long long *gregs, fu_regs *regs);

/* struct user_regs_struct (arch/x86/include/asm/user_64.h): 27 words. */
#define FU_USER_REGISTER_COUNT 27
/* The name of word `index` of user_regs_struct ("r15", ..., "rip", "cs", "eflags", "rsp", ...,
 * "gs"), or NULL. */
const char *fu_user_register_name(int index);
/* The walker's registers (all FU_WALK_REGISTERS valid) from the kernel's user_regs_struct
 * (<sys/user.h>): what PTRACE_GETREGSET's NT_PRSTATUS and a core file's NT_PRSTATUS hold. */
struct user_regs_struct;
void fu_regs_from_user_regs(const struct user_regs_struct *user, fu_regs *regs);

/* The registers gdb's `info registers` shows beside the walker's, by gdb's names (which are
 * user_regs_struct's): eflags, the segment selectors cs ss ds es fs gs, fs_base and gs_base. The
 * walker does not track them: a thread's stop gives them (frame 0), and a caller's are its
 * callee's where a call keeps them (FU_STATE_KEPT_BY_CALLS), else unknown. */
#define FU_STATE_REGISTERS 9
typedef struct fu_state_regs {
    uint64_t value[FU_STATE_REGISTERS];
    uint32_t valid; /* bit i: value[i] known */
} fu_state_regs;
/* A call keeps the thread's segment selectors and bases; not eflags (no flag survives a call:
 * the psABI preserves none, and gdb's same value there is a guess). */
#define FU_STATE_KEPT_BY_CALLS 0x1feu
/* The name of state register `index` ("eflags", "cs", ..., "gs_base"), or NULL. */
const char *fu_state_register_name(int index);
/* The state registers (all valid) from the kernel's user_regs_struct. */
void fu_state_regs_from_user_regs(const struct user_regs_struct *user, fu_state_regs *state);
/* A caller's state registers from its callee's: those FU_STATE_KEPT_BY_CALLS, the rest unknown. */
void fu_state_regs_of_caller(const fu_state_regs *callee, fu_state_regs *caller);

#endif
