/* step_batch: batches of independent unwind steps, for the property tests (py_walk.c step_batch: the
 * walker's step; py_eh_elf.c eh_elf_step_batch: a compiled table's step alone).
 *
 * A state is u64 regs[17], u32 valid mask, u32 ip_is_return_address; a record i8 caller kind (-1: no
 * caller), u8 outcome (fu_walk_outcome, FU_STEP_NO_OUTCOME when there is none), u8 flags of the
 * frame, u8 status (the fu_eh_elf_status in eh_elf_step_batch, else 0), u32 caller's valid mask, u64
 * fault address, u64 regs[17] (0 where invalid).
 */
#ifndef FASTUNWIND_STEP_BATCH_H
#define FASTUNWIND_STEP_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "walk.h"

#define FU_STEP_NO_OUTCOME 0xff
typedef struct fu_step_state {
    uint64_t regs[17];
    uint32_t valid;
    uint32_t ip_is_return_address;
} fu_step_state;
typedef struct fu_step_record {
    int8_t kind;
    uint8_t outcome;
    uint8_t flags;
    uint8_t status;
    uint32_t valid;
    uint64_t fault_address;
    uint64_t regs[17];
} fu_step_record;

/* One step from `regs` (decoded from `state`) into `record` (zeroed beforehand). */
typedef void (*fu_step_one_fn)(void *context, const fu_regs *regs, const fu_step_state *state,
                               const fu_reader *reader, fu_step_record *record);

/* `count` steps: state i at states + i * sizeof(fu_step_state) (any alignment), its record written to
 * records + i * sizeof(fu_step_record). Memory is the stack dump [stack_address, +stack_size) plus
 * the space's module images. */
void fu_step_batch(const fu_address_space *space, const uint8_t *states, size_t count, const uint8_t *stack,
                   uint64_t stack_size, uint64_t stack_address, fu_step_one_fn one, void *context,
                   uint8_t *records);

/* The walker's step (fu_walk_step) as a fu_step_one_fn; `context` is the fu_address_space. */
void fu_step_walker(void *space, const fu_regs *regs, const fu_step_state *state, const fu_reader *reader,
                    fu_step_record *record);

#endif
