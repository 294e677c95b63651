/* synth_decode: x86-64 machine instructions reduced to what the abstract interpreter (synth.c) needs:
 * which stack-pointer and register effects an instruction has and where control goes next.
 *
 * Two decoders fill the summary: a fast path for the common encodings of compiled code
 * (synth_decode_fast.c, 99.7% of libLLVM-14's instructions) and Zydis 4 (Debian's libzydis-dev)
 * for everything else; synth_decode.c is the only file that includes Zydis, so the interpreter
 * depends on this summary, not on the decoder library (an AArch64 decoder would fill the same
 * struct). Wherever the fast path answers, its summary is Zydis's, field by field
 * (fu_x86_compare_decoders, run on real code by the tests). Registers use the DWARF x86-64 numbering of x86_64.h (0 rax ... 15
 * r15); FU_X86_REG_RIP stands for a RIP-relative base.
 */
#ifndef FASTUNWIND_SYNTH_DECODE_H
#define FASTUNWIND_SYNTH_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "x86_64.h"

/* The general-purpose registers: DWARF numbers 0-15 (x86_64.h), below the return address. */
#define FU_X86_GPR_COUNT FU_REG_RA
/* Operand bases beside them: RIP-relative, and none. */
#define FU_X86_REG_RIP FU_X86_GPR_COUNT
#define FU_X86_REG_NONE 0xff
/* The longest x86 instruction (Intel SDM vol. 2, §2.3.11). */
#define FU_X86_MAX_INSN_LENGTH 15

typedef enum fu_x86_kind {
    FU_X86_OTHER = 0, /* no control flow; writes the registers of `writes`, and memory if store */
    FU_X86_PUSH,      /* rsp -= width; [rsp] = source */
    FU_X86_POP,       /* dest = [rsp]; rsp += width */
    FU_X86_MOV,       /* dest = source (a load, a store or a register copy); movsxd and movzx included */
    FU_X86_LEA,       /* dest (register) = source's address */
    FU_X86_ADD,       /* dest += source */
    FU_X86_SUB,       /* dest -= source */
    FU_X86_AND,       /* dest &= source */
    FU_X86_XCHG,      /* dest <-> source (registers) */
    FU_X86_CMP,       /* flags from dest - source (a jump table's bound: cmp idx, imm; ja default) */
    FU_X86_LEAVE,     /* rsp = rbp; pop rbp */
    FU_X86_ENTER,     /* push rbp; rbp = rsp; rsp -= immediate (nesting level 0 only) */
    FU_X86_CALL,      /* direct when has_target; the callee returns to the next instruction */
    FU_X86_JMP,       /* direct when has_target, else through `source` */
    FU_X86_JCC,       /* conditional, direct (jcc, loop*, jrcxz) */
    FU_X86_RET,
    FU_X86_TRAP,      /* ud0/ud1/ud2, hlt, int3: execution does not continue */
    FU_X86_INVALID    /* the bytes do not decode */
} fu_x86_kind;

typedef enum fu_x86_operand_kind {
    FU_X86_OPERAND_NONE = 0,
    FU_X86_OPERAND_REGISTER, /* a general-purpose register (reg, width) */
    FU_X86_OPERAND_MEMORY,   /* [base + index * scale + displacement] of `width` bytes */
    FU_X86_OPERAND_IMMEDIATE,
    FU_X86_OPERAND_OTHER     /* a vector, segment or other register */
} fu_x86_operand_kind;

typedef struct fu_x86_operand {
    uint8_t kind;   /* fu_x86_operand_kind */
    uint8_t reg;    /* register operand, or the memory operand's base; FU_X86_REG_NONE if none */
    uint8_t index;  /* memory operand's index register, FU_X86_REG_NONE if none */
    uint8_t scale;
    uint16_t width; /* bytes; a memory operand: 0 when its size is the machine's (xsave's area) */
    bool sign_extends : 1; /* movsxd: the 4-byte source is sign-extended */
    bool segment : 1;      /* memory through fs/gs (thread-local, never the stack) */
    bool untracked_address : 1; /* memory not at base + index * scale + displacement of 64-bit
                                 * general-purpose registers: the 0x67 prefix truncates that to 32
                                 * bits; a vector index (scatter, gather) makes many addresses */
    int64_t value;  /* displacement, or immediate */
} fu_x86_operand;

typedef struct fu_x86_insn {
    uint8_t kind;    /* fu_x86_kind */
    uint8_t length;
    uint8_t condition; /* FU_X86_JCC: FU_X86_JUMP_IF_ABOVE, FU_X86_JUMP_IF_ABOVE_OR_EQUAL, or 0 */
    bool has_target : 1;
    bool stores : 1; /* FU_X86_OTHER: writes the memory of `dest`, explicit or hidden (`stos`, `movs`:
                      * [rdi]) */
    bool is_nop : 1; /* a nop (padding, alignment) */
    bool repeats : 1; /* a `rep` string store: `dest` (dest.width bytes) is written rcx times, upwards
                       * (the direction flag is clear, psABI §3.2.1) */
    uint16_t writes; /* every general-purpose register written, explicit or not, bit per DWARF number */
    uint64_t target; /* direct branch or call target (svma) */
    fu_x86_operand dest, source;
} fu_x86_insn;
/* Written once per decoded instruction and read by every walk: kept small (the bitfields). */
_Static_assert(sizeof(fu_x86_insn) == 48, "the decoded-instruction record");

/* The unsigned conditions that bound a jump table's index (`ja`/`jae` to the default case). */
enum { FU_X86_JUMP_IF_ABOVE = 1, FU_X86_JUMP_IF_ABOVE_OR_EQUAL = 2 };

/* An opaque decoder (Zydis's, configured for 64-bit long mode). */
typedef struct fu_x86_decoder {
    uint8_t opaque[64] __attribute__((aligned(8)));
} fu_x86_decoder;

/* The general-purpose registers in encoding order (rax rcx rdx rbx rsp rbp rsi rdi r8..r15) to
 * their DWARF numbers. */
extern const uint8_t fu_x86_dwarf_of_encoding[FU_X86_GPR_COUNT];

void fu_x86_decoder_init(fu_x86_decoder *decoder);
/* Decode the instruction at `code` (at most `size` bytes available) whose address is `address`:
 * fu_x86_decode_fast where it answers, else Zydis. Never reads past code + size; an instruction
 * that does not decode (or is cut off) is FU_X86_INVALID with length 0. */
void fu_x86_decode(const fu_x86_decoder *decoder, const uint8_t *code, size_t size, uint64_t address,
                   fu_x86_insn *insn);
/* The same summary from Zydis alone. */
void fu_x86_decode_zydis(const fu_x86_decoder *decoder, const uint8_t *code, size_t size, uint64_t address,
                         fu_x86_insn *insn);
/* The fast path (synth_decode_fast.c): the common encodings of compiled code, decoded by table
 * and switch (its speed beside Zydis's: docs/BENCHMARKS.md, issue 23's check section). `insn`
 * must hold fu_x86_insn_empty; true when it is filled with exactly what fu_x86_decode_zydis gives;
 * false (insn partly written) for anything it does not know exactly, or bytes cut off. */
bool fu_x86_decode_fast(const uint8_t *code, size_t size, uint64_t address, fu_x86_insn *insn);

/* The fast path held to Zydis over a run of bytes (the differential test): decoded linearly by Zydis
 * (bytes that do not decode are stepped over one at a time), every instruction is also given to
 * fu_x86_decode_fast, whose answer must equal Zydis's summary field by field, and which must not
 * answer where Zydis finds no instruction. */
typedef struct fu_x86_decoder_comparison {
    uint64_t instructions;   /* positions decoded (instructions and undecodable bytes) */
    uint64_t fast;           /* of which the fast path answered */
    uint64_t mismatches;     /* of which its answer differed from Zydis's */
    uint64_t first_mismatch; /* the address of the first */
    char first_difference[160]; /* "field: fast <value>, zydis <value>" of the first */
} fu_x86_decoder_comparison;

void fu_x86_compare_decoders(const fu_x86_decoder *decoder, const uint8_t *code, size_t size, uint64_t address,
                             fu_x86_decoder_comparison *comparison);

/* A call to the instruction right after it (`call 1f; 1: pop %reg`, how position-independent 32-bit
 * code reads its address): it pushes that address and has no callee. */
static inline bool fu_x86_is_get_pc(const fu_x86_insn *insn, uint64_t address)
{
    return insn->kind == FU_X86_CALL && insn->has_target && insn->target == address + insn->length;
}

/* An instruction summary with nothing in it (no operands: registers FU_X86_REG_NONE). */
extern const fu_x86_insn fu_x86_insn_empty;

#endif
