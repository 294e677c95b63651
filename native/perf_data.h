/* perf_data: the perf.data reader's C interface (tools/perf/Documentation/perf.data-file-format.txt,
 * include/uapi/linux/perf_event.h). The walker consumes fu_perf_sample directly, without Python.
 *
 * All pointers point into the caller's buffer of the file (or of a decompressed PERF_RECORD_COMPRESSED
 * payload owned by the fu_perf_data), which must outlive the fu_perf_data.
 */
#ifndef FASTUNWIND_PERF_DATA_H
#define FASTUNWIND_PERF_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

/* perf's x86-64 user register numbering (arch/x86/include/uapi/asm/perf_regs.h). */
enum fu_perf_reg {
    FU_PERF_REG_AX = 0, FU_PERF_REG_BX, FU_PERF_REG_CX, FU_PERF_REG_DX, FU_PERF_REG_SI,
    FU_PERF_REG_DI, FU_PERF_REG_BP, FU_PERF_REG_SP, FU_PERF_REG_IP, FU_PERF_REG_FLAGS,
    FU_PERF_REG_CS, FU_PERF_REG_SS, FU_PERF_REG_DS, FU_PERF_REG_ES, FU_PERF_REG_FS, FU_PERF_REG_GS,
    FU_PERF_REG_R8, FU_PERF_REG_R9, FU_PERF_REG_R10, FU_PERF_REG_R11, FU_PERF_REG_R12,
    FU_PERF_REG_R13, FU_PERF_REG_R14, FU_PERF_REG_R15
};

/* One PERF_RECORD_SAMPLE, decoded. Absent fields are 0 / NULL (see `present`, PERF_SAMPLE_* bits). */
typedef struct fu_perf_sample {
    uint64_t present;          /* the attr's sample_type */
    uint32_t attr_index;       /* which event (index into the file's attrs) */
    uint16_t misc;             /* header.misc: PERF_RECORD_MISC_USER / _KERNEL / ... */
    uint64_t file_offset;      /* of the record in the file (for messages) */
    uint64_t ip;
    uint32_t pid, tid;
    uint64_t time;
    uint64_t addr, id, stream_id, period;
    uint32_t cpu;
    const uint64_t *callchain; /* PERF_SAMPLE_CALLCHAIN: entries, PERF_CONTEXT_* markers included */
    uint64_t callchain_count;
    uint64_t regs_abi;         /* PERF_SAMPLE_REGS_ABI_NONE (0) / _32 / _64 */
    uint64_t regs_mask;        /* the attr's sample_regs_user */
    const uint8_t *regs;       /* popcount(regs_mask) u64 values (unaligned: read with memcpy) */
    const uint8_t *stack;      /* PERF_SAMPLE_STACK_USER: the dumped bytes, starting at the user sp */
    uint64_t stack_size;       /* dyn_size when given (bytes actually valid), else the dumped size */
} fu_perf_sample;

/* The value of perf register `reg` in a sample; false if not sampled (or no user regs). */
bool fu_perf_sample_reg(const fu_perf_sample *sample, unsigned reg, uint64_t *value);

#endif
