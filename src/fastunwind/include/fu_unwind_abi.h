/* fu_unwind_abi: what the walker shares with code compiled outside the extension (the eh_elf shared
 * objects that `fastunwind compile` generates and builds with the system C compiler): the register
 * set, the memory reader, and the entry point of a compiled unwind table.
 *
 * This header ships inside the package (fastunwind/include) so that the generator can compile
 * against the very definitions the extension was built with; FU_UNWIND_ABI_VERSION is stamped into
 * every generated object and checked when it is loaded. Change anything here, bump the version.
 */
#ifndef FASTUNWIND_UNWIND_ABI_H
#define FASTUNWIND_UNWIND_ABI_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define FU_UNWIND_ABI_VERSION 3

/* The DWARF x86-64 registers the walker tracks: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 (0..15)
 * and the return address column (16). */
#define FU_WALK_REGISTERS 17
#define FU_REG_RBP 6
#define FU_REG_RSP 7
#define FU_REG_RA 16

typedef struct fu_regs {
    uint64_t value[FU_WALK_REGISTERS]; /* meaningful only where `valid` has the register's bit */
    uint32_t valid;                    /* bit per register */
} fu_regs;

static inline bool fu_regs_get(const fu_regs *r, unsigned reg, uint64_t *out)
{
    if (reg >= FU_WALK_REGISTERS || !(r->valid >> reg & 1))
        return false;
    *out = r->value[reg];
    return true;
}

static inline void fu_regs_set(fu_regs *r, unsigned reg, uint64_t value)
{
    r->value[reg] = value;
    r->valid |= 1u << reg;
}

/* Reads `size` (1..8) bytes at avma `address` as a little-endian value. Returns FU_READ_OK, or
 * why not: FU_READ_PAST_DUMP means the address lies beyond the end of a captured stack dump (the
 * stack is truncated, not corrupt). */
typedef enum fu_read_status { FU_READ_OK = 0, FU_READ_UNREADABLE, FU_READ_PAST_DUMP } fu_read_status;
typedef fu_read_status (*fu_read_fn)(void *context, uint64_t address, unsigned size, uint64_t *out);

/* The walker's only way to a target's memory. `window` is an optional bounds-checked direct view
 * (a perf sample's stack dump: most reads of a walk land there), read inline; every other address
 * goes to `read`, which checks its own bounds. window_size 0: no window. */
typedef struct fu_reader {
    const uint8_t *window;
    uint64_t window_address, window_size;
    fu_read_fn read;
    void *context;
} fu_reader;

static inline fu_read_status fu_reader_read(const fu_reader *r, uint64_t address, unsigned size, uint64_t *out)
{
    uint64_t offset = address - r->window_address; /* wraps for addresses below the window */
    if (offset < r->window_size && size <= r->window_size - offset && size - 1u < 8u) {
        uint64_t v = 0;
        memcpy(&v, r->window + offset, size);
        *out = v;
        return FU_READ_OK;
    }
    return r->read(r->context, address, size, out);
}

/* ---- compiled unwind tables (eh_elf) ------------------------------------------------------------ */

/* What a compiled step returns. The first two are successes: `caller` holds the caller's registers
 * exactly as the DWARF interpreter (walk.c, apply_row) gives them, before the walker's own checks. */
typedef enum fu_eh_elf_status {
    FU_EH_ELF_CFI = 0,            /* an ordinary frame */
    FU_EH_ELF_SIGNAL,             /* the row's CIE has the 'S' augmentation: a signal trampoline */
    FU_EH_ELF_NO_INFO,            /* no FDE covers pc (the walker tries the frame pointer) */
    FU_EH_ELF_INTERPRET,          /* the row uses something not compiled: ask the DWARF interpreter */
    FU_EH_ELF_REGISTER_UNKNOWN,   /* the CFA's register, or the return address's source register,
                                   * has no known value */
    FU_EH_ELF_EXPRESSION_ERROR,   /* a compiled expression needs a register that is unknown */
    FU_EH_ELF_UNREADABLE,         /* a required read failed: *fault_address, FU_READ_UNREADABLE */
    FU_EH_ELF_PAST_DUMP,          /* a required read failed: *fault_address, FU_READ_PAST_DUMP */
    FU_EH_ELF_STATUS_COUNT
} fu_eh_elf_status;

/* The entry point every eh_elf exports as `fu_eh_elf_step`: one step from the frame whose registers
 * are `regs`, at `pc`, an svma of the ELF file (the walker has already applied the bias and the
 * `return address - 1` rule), to its caller. Memory only through `reader`. Returns fu_eh_elf_status.
 * `caller` and `regs` are distinct buffers. */
typedef int (*fu_eh_elf_step_fn)(uint64_t pc, const fu_regs *regs, fu_regs *caller, const fu_reader *reader,
                                 uint64_t *fault_address);

/* The same step in two halves, so that a caller can remember which body applies at a PC (the
 * walker's cache) and skip the search next time:
 *   `fu_eh_elf_find` (exported): the body in force at svma `pc`, 1..fu_eh_elf_info.body_count, or 0
 *   where no FDE covers pc (FU_EH_ELF_NO_INFO);
 *   `fu_eh_elf_bodies` (exported, body_count + 1 entries, [0] NULL): body b does the step from
 *   `regs` to `caller` (never FU_EH_ELF_NO_INFO), given `caller` already holding the psABI's
 *   callee-saved registers of `regs` (rbx, rbp, r12-r15: their values and validity bits, every
 *   other register invalid): the part of every step that does not depend on the row.
 * fu_eh_elf_step(pc, ...) prepares `caller` so and calls fu_eh_elf_bodies[fu_eh_elf_find(pc)]. */
typedef unsigned (*fu_eh_elf_find_fn)(uint64_t pc);
typedef int (*fu_eh_elf_body_fn)(const fu_regs *regs, fu_regs *caller, const fu_reader *reader,
                                 uint64_t *fault_address);

#define FU_EH_ELF_MAX_KEY 64

/* Every eh_elf also exports `fu_eh_elf_info`, checked before its step is used. */
typedef struct fu_eh_elf_info {
    uint32_t abi_version;          /* FU_UNWIND_ABI_VERSION */
    uint32_t generator_version;    /* the generator's own version (fastunwind.eh_elf) */
    uint32_t key_kind;             /* 1 build-id, 2 hash of path, size and mtime (as compact tables) */
    uint32_t key_size;
    uint8_t key[FU_EH_ELF_MAX_KEY];
    uint64_t row_count;            /* rows compiled, for statistics */
    uint32_t body_count;           /* entries of fu_eh_elf_bodies after the NULL at [0] */
    uint32_t reserved;             /* 0 */
    /* bytes of the .eh_frame and .debug_frame it was built from (decompressed), FU_EH_ELF_NO_SECTION
     * if none: an eh_elf whose module has other sections now (a debug file installed since) is
     * not used, and this is checked from the module's section headers, without parsing them */
    uint64_t eh_frame_size, debug_frame_size;
} fu_eh_elf_info;

#define FU_EH_ELF_NO_SECTION UINT64_MAX

#endif
