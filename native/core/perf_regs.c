/* perf_regs: see perf_regs.h. */
#include "perf_regs.h"

/* The DWARF register (0..16: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip) of each of perf's x86-64
 * user registers (arch/x86/include/uapi/asm/perf_regs.h), -1 for those the walker does not use. */
static const int8_t dwarf_of_perf_register[24] = {
    [FU_PERF_REG_AX] = 0, [FU_PERF_REG_BX] = 3, [FU_PERF_REG_CX] = 2, [FU_PERF_REG_DX] = 1,
    [FU_PERF_REG_SI] = 4, [FU_PERF_REG_DI] = 5, [FU_PERF_REG_BP] = 6, [FU_PERF_REG_SP] = 7,
    [FU_PERF_REG_IP] = 16, [FU_PERF_REG_FLAGS] = -1, [FU_PERF_REG_CS] = -1, [FU_PERF_REG_SS] = -1,
    [FU_PERF_REG_DS] = -1, [FU_PERF_REG_ES] = -1, [FU_PERF_REG_FS] = -1, [FU_PERF_REG_GS] = -1,
    [FU_PERF_REG_R8] = 8, [FU_PERF_REG_R9] = 9, [FU_PERF_REG_R10] = 10, [FU_PERF_REG_R11] = 11,
    [FU_PERF_REG_R12] = 12, [FU_PERF_REG_R13] = 13, [FU_PERF_REG_R14] = 14, [FU_PERF_REG_R15] = 15,
};

void fu_perf_register_plan_make(uint64_t mask, fu_perf_register_plan *plan)
{
    plan->mask = mask;
    plan->count = 0;
    plan->valid = 0;
    unsigned k = 0;
    for (uint64_t bits = mask; bits; bits &= bits - 1, k++) {
        unsigned perf_reg = (unsigned)__builtin_ctzll(bits);
        int8_t reg = perf_reg < 24 ? dwarf_of_perf_register[perf_reg] : -1;
        if (reg < 0 || plan->valid >> reg & 1)
            continue;
        plan->index[plan->count] = (uint8_t)k;
        plan->dwarf[plan->count++] = (uint8_t)reg;
        plan->valid |= 1u << reg;
    }
    plan->head_lowest = UINT8_MAX;
    plan->head_highest = 0;
    for (unsigned h = 0; h < sizeof FU_PERF_HEAD_REGISTER_DWARF; h++) {
        plan->head_index[h] = plan->count ? plan->index[0] : 0;
        for (unsigned k = 0; k < plan->count; k++)
            if (plan->dwarf[k] == FU_PERF_HEAD_REGISTER_DWARF[h])
                plan->head_index[h] = plan->index[k];
        plan->head_lowest = plan->head_index[h] < plan->head_lowest ? plan->head_index[h] : plan->head_lowest;
        plan->head_highest = plan->head_index[h] > plan->head_highest ? plan->head_index[h] : plan->head_highest;
    }
}

void fu_perf_sample_walk_registers(const fu_perf_sample *sample, fu_regs *regs)
{
    fu_perf_register_plan plan;
    fu_perf_register_plan_make(0, &plan);
    fu_perf_sample_head_registers(sample, &plan, regs);
    fu_perf_sample_registers(sample, &plan, regs);
}
