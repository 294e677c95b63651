/* perf_regs: see perf_regs.h. */
#include "perf_regs.h"

void fu_perf_register_plan_make(uint64_t mask, fu_perf_register_plan *plan)
{
    plan->mask = mask;
    plan->count = 0;
    plan->valid = 0;
    unsigned k = 0;
    for (uint64_t bits = mask; bits; bits &= bits - 1, k++) {
        unsigned perf_reg = (unsigned)__builtin_ctzll(bits);
        int reg = fu_dwarf_of_perf_register(perf_reg);
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
