/* x86_64: see x86_64.h. */
#define _GNU_SOURCE /* REG_RAX and the like (sys/ucontext.h) */
#include "x86_64.h"

#include <sys/ucontext.h>
#include <sys/user.h>

/* readelf's x86-64 table (binutils dwarf.c), System V AMD64 ABI figure 3.36 numbering. */
static const char *const register_names[] = {
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
    "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
    "rip",
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
    "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
    "st0", "st1", "st2", "st3", "st4", "st5", "st6", "st7",
    "mm0", "mm1", "mm2", "mm3", "mm4", "mm5", "mm6", "mm7",
    "rflags",
    "es", "cs", "ss", "ds", "fs", "gs", NULL, NULL,
    "fs.base", "gs.base", NULL, NULL,
    "tr", "ldtr",
    "mxcsr", "fcw", "fsw",
    "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
    "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31",
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, /* 83-90 */
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, /* 91-98 */
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, /* 99-106 */
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, /* 107-114 */
    NULL, NULL, NULL,                               /* 115-117 */
    "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7",
};

const char *fu_register_name(uint64_t column)
{
    if (column < sizeof register_names / sizeof register_names[0])
        return register_names[column];
    return NULL;
}

/* LLVM's names of the x86-64 DWARF registers (X86RegisterInfo.td), as llvm-dwarfdump prints
 * them; NULL where LLVM has no name and prints the number instead. */
static const char *const llvm_register_names[] = {
    "RAX", "RDX", "RCX", "RBX", "RSI", "RDI", "RBP", "RSP",
    "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15", "RIP",
    "XMM0", "XMM1", "XMM2", "XMM3", "XMM4", "XMM5", "XMM6", "XMM7",
    "XMM8", "XMM9", "XMM10", "XMM11", "XMM12", "XMM13", "XMM14", "XMM15",
    "ST0", "ST1", "ST2", "ST3", "ST4", "ST5", "ST6", "ST7",
    "MM0", "MM1", "MM2", "MM3", "MM4", "MM5", "MM6", "MM7",
};

const char *fu_llvm_register_name(uint64_t reg)
{
    return reg < sizeof llvm_register_names / sizeof llvm_register_names[0] ? llvm_register_names[reg] : NULL;
}

static const char *const perf_register_names[FU_PERF_REGISTER_COUNT] = {
    "ax", "bx", "cx", "dx", "si", "di", "bp", "sp", "ip", "flags", "cs", "ss",
    "ds", "es", "fs", "gs", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
};

const char *fu_perf_register_name(unsigned perf_reg)
{
    return perf_reg < FU_PERF_REGISTER_COUNT ? perf_register_names[perf_reg] : NULL;
}

static const int8_t dwarf_of_perf_register[FU_PERF_REGISTER_COUNT] = {
    [FU_PERF_REG_AX] = FU_REG_RAX, [FU_PERF_REG_BX] = FU_REG_RBX, [FU_PERF_REG_CX] = FU_REG_RCX,
    [FU_PERF_REG_DX] = FU_REG_RDX, [FU_PERF_REG_SI] = FU_REG_RSI, [FU_PERF_REG_DI] = FU_REG_RDI,
    [FU_PERF_REG_BP] = FU_REG_RBP, [FU_PERF_REG_SP] = FU_REG_RSP, [FU_PERF_REG_IP] = FU_REG_RA,
    [FU_PERF_REG_FLAGS] = -1, [FU_PERF_REG_CS] = -1, [FU_PERF_REG_SS] = -1,
    [FU_PERF_REG_DS] = -1, [FU_PERF_REG_ES] = -1, [FU_PERF_REG_FS] = -1, [FU_PERF_REG_GS] = -1,
    [FU_PERF_REG_R8] = FU_REG_R8, [FU_PERF_REG_R9] = FU_REG_R9, [FU_PERF_REG_R10] = FU_REG_R10,
    [FU_PERF_REG_R11] = FU_REG_R11, [FU_PERF_REG_R12] = FU_REG_R12, [FU_PERF_REG_R13] = FU_REG_R13,
    [FU_PERF_REG_R14] = FU_REG_R14, [FU_PERF_REG_R15] = FU_REG_R15,
};

int fu_dwarf_of_perf_register(unsigned perf_reg)
{
    return perf_reg < FU_PERF_REGISTER_COUNT ? dwarf_of_perf_register[perf_reg] : -1;
}

void fu_regs_from_gregs(const long long *gregs, fu_regs *regs)
{
    static const int from_greg[FU_WALK_REGISTERS] = {
        [FU_REG_RAX] = REG_RAX, [FU_REG_RDX] = REG_RDX, [FU_REG_RCX] = REG_RCX, [FU_REG_RBX] = REG_RBX,
        [FU_REG_RSI] = REG_RSI, [FU_REG_RDI] = REG_RDI, [FU_REG_RBP] = REG_RBP, [FU_REG_RSP] = REG_RSP,
        [FU_REG_R8] = REG_R8,   [FU_REG_R9] = REG_R9,   [FU_REG_R10] = REG_R10, [FU_REG_R11] = REG_R11,
        [FU_REG_R12] = REG_R12, [FU_REG_R13] = REG_R13, [FU_REG_R14] = REG_R14, [FU_REG_R15] = REG_R15,
        [FU_REG_RA] = REG_RIP,
    };
    regs->valid = 0;
    for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
        fu_regs_set(regs, r, (uint64_t)gregs[from_greg[r]]);
}

/* user_regs_struct's words, in order (the word order of a core's NT_PRSTATUS) */
static const char *const user_register_names[FU_USER_REGISTER_COUNT] = {
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi",
    "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs",
};
_Static_assert(sizeof(struct user_regs_struct) == 8 * FU_USER_REGISTER_COUNT, "user_regs_struct is 27 words");

const char *fu_user_register_name(int index)
{
    return index >= 0 && index < FU_USER_REGISTER_COUNT ? user_register_names[index] : NULL;
}

void fu_regs_from_user_regs(const struct user_regs_struct *u, fu_regs *regs)
{
    const uint64_t by_column[FU_WALK_REGISTERS] = {
        [FU_REG_RAX] = u->rax, [FU_REG_RDX] = u->rdx, [FU_REG_RCX] = u->rcx, [FU_REG_RBX] = u->rbx,
        [FU_REG_RSI] = u->rsi, [FU_REG_RDI] = u->rdi, [FU_REG_RBP] = u->rbp, [FU_REG_RSP] = u->rsp,
        [FU_REG_R8] = u->r8,   [FU_REG_R9] = u->r9,   [FU_REG_R10] = u->r10, [FU_REG_R11] = u->r11,
        [FU_REG_R12] = u->r12, [FU_REG_R13] = u->r13, [FU_REG_R14] = u->r14, [FU_REG_R15] = u->r15,
        [FU_REG_RA] = u->rip,
    };
    regs->valid = 0;
    for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
        fu_regs_set(regs, r, by_column[r]);
}

static const char *const state_register_names[FU_STATE_REGISTERS] = {
    "eflags", "cs", "ss", "ds", "es", "fs", "gs", "fs_base", "gs_base",
};
const char *fu_state_register_name(int index)
{
    return index >= 0 && index < FU_STATE_REGISTERS ? state_register_names[index] : NULL;
}

void fu_state_regs_from_user_regs(const struct user_regs_struct *u, fu_state_regs *state)
{
    *state = (fu_state_regs){
        {u->eflags, u->cs, u->ss, u->ds, u->es, u->fs, u->gs, u->fs_base, u->gs_base},
        (1u << FU_STATE_REGISTERS) - 1,
    };
}

void fu_state_regs_of_caller(const fu_state_regs *callee, fu_state_regs *caller)
{
    caller->valid = callee->valid & FU_STATE_KEPT_BY_CALLS;
    for (unsigned i = 0; i < FU_STATE_REGISTERS; i++)
        caller->value[i] = caller->valid >> i & 1 ? callee->value[i] : 0;
}
