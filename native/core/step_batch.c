/* step_batch: see step_batch.h. */
#include "step_batch.h"

#include <string.h>

#include "memory.h"

_Static_assert(sizeof(((fu_step_state *)0)->regs) == sizeof(((fu_regs *)0)->value), "fu_step_state holds fu_regs");

void fu_step_batch(const fu_address_space *space, const uint8_t *states, size_t count, const uint8_t *stack,
                   uint64_t stack_size, uint64_t stack_address, fu_step_one_fn one, void *context,
                   uint8_t *records)
{
    fu_dump_memory memory = {stack, stack_address, stack_size, space};
    fu_reader reader = fu_dump_reader(&memory);
    for (size_t i = 0; i < count; i++) {
        fu_step_state state;
        memcpy(&state, states + i * sizeof state, sizeof state);
        fu_regs regs = {{0}, 0};
        for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
            if (state.valid >> r & 1)
                fu_regs_set(&regs, r, state.regs[r]);
        fu_step_record record;
        memset(&record, 0, sizeof record);
        one(context, &regs, &state, &reader, &record);
        memcpy(records + i * sizeof record, &record, sizeof record);
    }
}

void fu_step_walker(void *space, const fu_regs *regs, const fu_step_state *state, const fu_reader *reader,
                    fu_step_record *record)
{
    fu_walk_result result = {FU_WALK_END, 0, 0};
    fu_regs caller = {{0}, 0};
    int kind = fu_walk_step(space, reader, regs, state->ip_is_return_address != 0, &caller, &record->flags, &result);
    record->kind = (int8_t)kind;
    record->outcome = kind < 0 ? (uint8_t)result.outcome : FU_STEP_NO_OUTCOME;
    record->fault_address = kind < 0 ? result.fault_address : 0;
    if (kind >= 0) {
        record->valid = caller.valid;
        for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
            record->regs[r] = caller.valid >> r & 1 ? caller.value[r] : 0;
    }
}
