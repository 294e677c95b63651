/* perf_regs: a perf sample's user registers (PERF_SAMPLE_REGS_USER, x86-64) in the walker's DWARF
 * numbering. The extraction is per sample and hot: the plan of a regs_mask is made once (every
 * sample of an event has the same mask) and the copies are inline here for perf_walk.c's loop. */
#ifndef FASTUNWIND_PERF_REGS_H
#define FASTUNWIND_PERF_REGS_H

#include <stdint.h>
#include <string.h>

#include "perf_data.h"
#include "walk.h"
#include "x86_64.h"

/* How to read one regs_mask's values: the sample stores the registers of the mask's set bits in
 * bit order; the walker's registers are the `count` values at index[k], going to DWARF register
 * dwarf[k]. Every sample of an event has the same mask, so a plan is made once and reused. */
typedef struct fu_perf_register_plan {
    uint64_t mask;
    unsigned count;
    uint8_t index[FU_WALK_REGISTERS], dwarf[FU_WALK_REGISTERS];
    uint32_t valid; /* the DWARF registers the plan fills */
    /* Where the sample stores rip, rsp and rbp (the walk's head registers, FU_PERF_HEAD_REGISTER_DWARF);
     * one the mask lacks reads the plan's first register instead, a value in the block that
     * `valid` says nothing of (copies without a branch; with count 0 nothing is read). And the
     * least and most of these indices, for the prefetch of their bytes. */
    uint8_t head_index[3];
    uint8_t head_lowest, head_highest;
} fu_perf_register_plan;

/* The registers fu_walk_begin reads: all a walk that follows a shape needs of a sample's. */
static const uint8_t FU_PERF_HEAD_REGISTER_DWARF[3] = {FU_REG_RA, FU_REG_RSP, FU_REG_RBP};

/* The plan of `mask` (perf_regs.c). */
void fu_perf_register_plan_make(uint64_t mask, fu_perf_register_plan *plan);

/* The sample's rip, rsp and rbp in DWARF numbering, where its mask has them, and regs->valid for
 * all its user registers (fu_perf_sample_registers reads the others); makes `plan` the sample's. */
static inline void fu_perf_sample_head_registers(const fu_perf_sample *sample, fu_perf_register_plan *plan, fu_regs *regs)
{
    regs->valid = 0;
    if (!sample->regs || sample->regs_abi == 0)
        return;
    if (sample->regs_mask != plan->mask)
        fu_perf_register_plan_make(sample->regs_mask, plan);
    if (plan->count == 0)
        return;
    for (unsigned h = 0; h < sizeof FU_PERF_HEAD_REGISTER_DWARF; h++)
        memcpy(&regs->value[FU_PERF_HEAD_REGISTER_DWARF[h]], sample->regs + 8 * plan->head_index[h], 8);
    regs->valid = plan->valid;
}

/* The sample's user registers in DWARF numbering, after fu_perf_sample_head_registers (`plan` the
 * sample's). */
static inline void fu_perf_sample_registers(const fu_perf_sample *sample, const fu_perf_register_plan *plan, fu_regs *regs)
{
    if (!regs->valid)
        return;
    const uint8_t *in = sample->regs;
    if (plan->mask == FU_PERF_DEFAULT_REGS_MASK) {
        /* The plan of this mask as straight-line copies (a third of the loop's instructions): in
         * the sample ax bx cx dx si di bp sp ip flags cs ss r8..r15, in DWARF order rax rdx rcx
         * rbx, then rsi rdi rbp rsp and r8..r15 in runs, then rip. */
        memcpy(&regs->value[0], in + 8 * FU_PERF_REG_AX, 8);
        memcpy(&regs->value[1], in + 8 * FU_PERF_REG_DX, 8);
        memcpy(&regs->value[2], in + 8 * FU_PERF_REG_CX, 8);
        memcpy(&regs->value[3], in + 8 * FU_PERF_REG_BX, 8);
        memcpy(&regs->value[4], in + 8 * FU_PERF_REG_SI, 4 * 8);
        memcpy(&regs->value[8], in + 8 * (FU_PERF_REG_R8 - 4), 8 * 8); /* ds es fs gs not sampled */
        memcpy(&regs->value[16], in + 8 * FU_PERF_REG_IP, 8);
    } else {
        for (unsigned k = 0; k < plan->count; k++)
            memcpy(&regs->value[plan->dwarf[k]], in + 8 * plan->index[k], 8);
    }
}

/* The registers a walk of `sample` starts from (all its user registers, DWARF numbering). */
void fu_perf_sample_walk_registers(const fu_perf_sample *sample, fu_regs *regs);

#endif
