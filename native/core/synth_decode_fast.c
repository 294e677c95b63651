/* synth_decode_fast: the encodings most compiled x86-64 code is made of, summarized without Zydis
 * (synth_decode.h). Legacy prefixes 66/F2/F3/64/65 (and 2E before a multi-byte nop), REX, the
 * one-byte map and the common part of the two-byte map (0F) with ModRM, SIB, displacement and
 * immediate (Intel SDM vol. 2, chapter 2 and appendix A). It answers only where it knows the exact
 * summary Zydis would give (tests/unit/synth/test_decode.py and `make decode-compare` hold it to
 * that); anything else (VEX/EVEX, lock, address-size and other segment prefixes, x87, string and
 * system instructions, rare opcodes, truncated bytes) returns false and goes to Zydis. Also the
 * interface synth.c calls, fu_x86_decode: the fast path inlined into it, Zydis behind it.
 */
#include "synth_decode.h"

#include <string.h>

/* The general-purpose registers in encoding order (rax rcx rdx rbx rsp rbp rsi rdi r8..r15) to
 * their DWARF numbers (rax rdx rcx rbx rsi rdi rbp rsp r8..r15: System V AMD64 ABI, figure 3.36). */
const uint8_t fu_x86_dwarf_of_encoding[FU_X86_GPR_COUNT] = {
    FU_REG_RAX, FU_REG_RCX, FU_REG_RDX, FU_REG_RBX, FU_REG_RSP, FU_REG_RBP, FU_REG_RSI, FU_REG_RDI,
    FU_REG_R8,  FU_REG_R9,  FU_REG_R10, FU_REG_R11, FU_REG_R12, FU_REG_R13, FU_REG_R14, FU_REG_R15};

const fu_x86_insn fu_x86_insn_empty = {.dest = {.reg = FU_X86_REG_NONE, .index = FU_X86_REG_NONE},
                                       .source = {.reg = FU_X86_REG_NONE, .index = FU_X86_REG_NONE}};

enum { REX_B = 1, REX_X = 2, REX_R = 4, REX_W = 8, REX_PRESENT = 0x40 };

/* Which of 66, F2, F3 came before the opcode: the operand size, and the mandatory prefix of the
 * SSE moves (SDM vol. 2, §2.1.2 and appendix A.2.5). */
enum { PREFIX_OPERAND_SIZE = 1, PREFIX_REPNE = 2, PREFIX_REP = 4, PREFIX_FS_GS = 8, PREFIX_CS = 16 };

/* 66, F2, F3, 64, 65 and 2E: the legacy prefixes the fast path knows. */
static const bool is_legacy_prefix[256] = {[0x66] = true, [0xf2] = true, [0xf3] = true,
                                           [0x64] = true, [0x65] = true, [0x2e] = true};

typedef struct fast_decoding {
    const uint8_t *code;
    size_t position;
    uint8_t prefixes;
    uint8_t rex;
    uint8_t operand_width; /* bytes: 8 with REX.W, else 2 with 66, else 4 */
    uint8_t reg_field;     /* ModRM.reg with REX.R */
} fast_decoding;

/* Bytes are read unchecked: decode_fast decodes from a buffer with FAST_READ_SLACK bytes
 * readable past any position a decoding can reach, and rejects an instruction that ends past the
 * bytes it was given. */
static inline __attribute__((always_inline)) uint8_t read_u8(fast_decoding *d)
{
    return d->code[d->position++];
}

/* A little-endian immediate or displacement of `bytes` bytes, sign-extended. */
static inline __attribute__((always_inline)) int64_t read_signed(fast_decoding *d, unsigned bytes)
{
    const uint8_t *p = d->code + d->position;
    d->position += bytes;
    switch (bytes) {
    case 1: return (int8_t)p[0];
    case 2: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
    case 4: return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    default: {
        uint64_t v = 0;
        for (unsigned i = 0; i < 8; i++)
            v |= (uint64_t)p[i] << (8 * i);
        return (int64_t)v;
    }
    }
}

/* An immediate whose value the summary does not hold. */
static inline __attribute__((always_inline)) void skip(fast_decoding *d, unsigned bytes)
{
    d->position += bytes;
}

static inline __attribute__((always_inline)) void set_register(fu_x86_operand *o, unsigned encoding, unsigned width, uint8_t rex)
{
    /* without REX, byte registers 4-7 are ah, ch, dh, bh: parts of rax, rcx, rdx, rbx */
    if (width == 1 && !rex && encoding >= 4 && encoding < 8)
        encoding -= 4;
    o->kind = FU_X86_OPERAND_REGISTER;
    o->reg = fu_x86_dwarf_of_encoding[encoding];
    o->index = FU_X86_REG_NONE;
    o->width = (uint16_t)width;
}

/* An immediate of `width` bytes as encoded (Zydis's operand size for it). */
static inline __attribute__((always_inline)) void set_immediate(fu_x86_operand *o, int64_t value, unsigned width)
{
    o->kind = FU_X86_OPERAND_IMMEDIATE;
    o->reg = o->index = FU_X86_REG_NONE;
    o->width = (uint16_t)width;
    o->value = value;
}

/* ModRM (and SIB, displacement) into `rm`, an operand of `width` bytes; d->reg_field gets ModRM.reg.
 * SDM vol. 2, tables 2-2 and 2-3 with §2.2.1 for REX and RIP-relative addressing. */
static inline __attribute__((always_inline)) void read_modrm(fast_decoding *d, fu_x86_operand *rm, unsigned width)
{
    uint8_t modrm = read_u8(d);
    unsigned mod = modrm >> 6, rm_field = modrm & 7;
    d->reg_field = (uint8_t)(((modrm >> 3) & 7) | (d->rex & REX_R ? 8 : 0));
    if (mod == 3) {
        set_register(rm, rm_field | (d->rex & REX_B ? 8u : 0u), width, d->rex);
        return;
    }
    rm->kind = FU_X86_OPERAND_MEMORY;
    rm->width = (uint16_t)width;
    rm->segment = (d->prefixes & PREFIX_FS_GS) != 0;
    rm->reg = rm->index = FU_X86_REG_NONE;
    rm->scale = 0;
    unsigned displacement_bytes = mod == 1 ? 1 : mod == 2 ? 4 : 0;
    if (rm_field == 4) {
        uint8_t sib = read_u8(d);
        unsigned index = ((sib >> 3) & 7) | (d->rex & REX_X ? 8u : 0u);
        unsigned base = (sib & 7) | (d->rex & REX_B ? 8u : 0u);
        if (index != 4) { /* index 100b without REX.X: no index */
            rm->index = fu_x86_dwarf_of_encoding[index];
            rm->scale = (uint8_t)(1u << (sib >> 6));
        }
        if ((sib & 7) == 5 && mod == 0)
            displacement_bytes = 4; /* no base */
        else
            rm->reg = fu_x86_dwarf_of_encoding[base];
    } else if (rm_field == 5 && mod == 0) {
        rm->reg = FU_X86_REG_RIP;
        displacement_bytes = 4;
    } else {
        rm->reg = fu_x86_dwarf_of_encoding[rm_field | (d->rex & REX_B ? 8u : 0u)];
    }
    rm->value = displacement_bytes ? read_signed(d, displacement_bytes) : 0;
}

/* The operand an instruction writes: a register joins `writes`, memory makes it a store. */
static inline __attribute__((always_inline)) void written(fu_x86_insn *insn, const fu_x86_operand *o)
{
    if (o->kind == FU_X86_OPERAND_REGISTER)
        insn->writes |= (uint16_t)(1u << o->reg);
    else if (o->kind == FU_X86_OPERAND_MEMORY) {
        insn->stores = true;
        insn->dest = *o;
    }
}

static const uint16_t rsp_bit = 1u << FU_REG_RSP;

/* The eight arithmetic operations of opcodes 00-3F and group 1 (80, 81, 83), by ModRM.reg / opcode
 * bits 5:3: add, or, adc, sbb, and, sub, xor, cmp. */
static const uint8_t arithmetic_kind[8] = {FU_X86_ADD, FU_X86_OTHER, FU_X86_OTHER, FU_X86_OTHER,
                                           FU_X86_AND, FU_X86_SUB,   FU_X86_OTHER, FU_X86_CMP};

/* `dest op= source` for the arithmetic operations, their operands decoded in place: the kinds the
 * interpreter reads keep both; the others (or, adc, sbb, xor) only what they write (a memory
 * destination). cmp writes nothing. */
static inline __attribute__((always_inline)) void arithmetic(fu_x86_insn *insn, unsigned operation)
{
    insn->kind = arithmetic_kind[operation];
    if (insn->kind == FU_X86_OTHER) {
        fu_x86_operand dest = insn->dest;
        insn->dest = insn->source = fu_x86_insn_empty.dest;
        written(insn, &dest);
    } else if (operation != 7) {
        written(insn, &insn->dest);
    }
}

static inline __attribute__((always_inline)) bool direct_branch(fast_decoding *d, fu_x86_insn *insn, uint64_t address, unsigned kind, unsigned bytes)
{
    if (d->rex || (d->prefixes & PREFIX_OPERAND_SIZE))
        return false;
    int64_t displacement = read_signed(d, bytes);
    insn->kind = (uint8_t)kind;
    insn->has_target = true;
    insn->target = address + d->position + (uint64_t)displacement;
    if (kind == FU_X86_CALL)
        insn->writes = rsp_bit;
    return true;
}

/* The 0F map: jcc rel32, cmovcc, setcc, movzx/movsx, imul, bit tests, double shifts, bswap, nops,
 * endbr64, ud2 and the common SSE moves; false for the rest. */
static inline __attribute__((always_inline)) bool decode_two_byte(fast_decoding *d, fu_x86_insn *insn, uint64_t address)
{
    uint8_t opcode = read_u8(d);
    unsigned width = d->operand_width;
    uint8_t mandatory = d->prefixes & (PREFIX_OPERAND_SIZE | PREFIX_REPNE | PREFIX_REP);
    fu_x86_operand rm = {0}, reg = {0};
    if (d->prefixes & PREFIX_CS && opcode != 0x1f)
        return false; /* cs only as gcc's padding: 66 2e 0f 1f 84 00 ... */
    if (opcode == 0x1e && mandatory == PREFIX_REP) { /* F3 0F 1E FA: endbr64 */
        return read_u8(d) == 0xfa;
    }
    if (mandatory & (PREFIX_REP | PREFIX_REPNE)) {
        if ((mandatory & PREFIX_OPERAND_SIZE) || (mandatory & PREFIX_REP && mandatory & PREFIX_REPNE))
            return false;
    }
    if (opcode == 0x1f) { /* nop r/m (SDM: "NOP—No Operation", 0F 1F /0) */
        if (mandatory & (PREFIX_REP | PREFIX_REPNE))
            return false;
        read_modrm(d, &rm, width);
        if (d->reg_field & 7)
            return false;
        insn->is_nop = true;
        return true;
    }
    if (opcode == 0x0b) { /* ud2 */
        insn->kind = FU_X86_TRAP;
        return !mandatory;
    }
    if (opcode >= 0x80 && opcode <= 0x8f) {
        if (mandatory)
            return false;
        insn->condition = opcode == 0x87 ? FU_X86_JUMP_IF_ABOVE : opcode == 0x83 ? FU_X86_JUMP_IF_ABOVE_OR_EQUAL : 0;
        return direct_branch(d, insn, address, FU_X86_JCC, 4);
    }
    /* the SSE moves and logic of vector registers: no general-purpose register written; the store
     * forms write memory of the vector's width */
    switch (opcode) {
    case 0x10: case 0x11: case 0x28: case 0x29: case 0x2e: case 0x2f: case 0x57: case 0xef:
    case 0x6f: case 0x7f: case 0xd6: case 0x6e: case 0x7e: {
        unsigned memory_width = 16;
        bool stores = opcode == 0x11 || opcode == 0x29 || opcode == 0x7f || opcode == 0xd6;
        switch (opcode) {
        case 0x10: case 0x11:
            memory_width = mandatory == PREFIX_REP ? 4 : mandatory == PREFIX_REPNE ? 8 : 16;
            break;
        case 0x28: case 0x29: case 0x57:
            if (mandatory & (PREFIX_REP | PREFIX_REPNE))
                return false;
            break;
        case 0x2e: case 0x2f:
            if (mandatory & (PREFIX_REP | PREFIX_REPNE))
                return false;
            memory_width = mandatory ? 8 : 4;
            break;
        case 0xef: case 0xd6:
            if (mandatory != PREFIX_OPERAND_SIZE)
                return false;
            memory_width = opcode == 0xd6 ? 8 : 16;
            break;
        case 0x6f: case 0x7f:
            if (mandatory != PREFIX_OPERAND_SIZE && mandatory != PREFIX_REP)
                return false;
            break;
        case 0x6e: /* movd/movq xmm, r/m */
            if (mandatory != PREFIX_OPERAND_SIZE)
                return false;
            memory_width = d->rex & REX_W ? 8 : 4;
            break;
        default: /* 0x7e: 66: movd/movq r/m, xmm (a general-purpose register written); F3: movq xmm, xmm/m64 */
            if (mandatory == PREFIX_REP) {
                memory_width = 8;
            } else if (mandatory == PREFIX_OPERAND_SIZE) {
                memory_width = d->rex & REX_W ? 8 : 4;
                read_modrm(d, &rm, memory_width);
                written(insn, &rm);
                return true;
            } else {
                return false;
            }
            break;
        }
        read_modrm(d, &rm, memory_width);
        if (opcode == 0x6e && rm.kind == FU_X86_OPERAND_REGISTER)
            return true; /* reads a general-purpose register */
        if (stores && rm.kind == FU_X86_OPERAND_MEMORY)
            written(insn, &rm);
        return true;
    }
    default:
        break;
    }
    if (mandatory & (PREFIX_REP | PREFIX_REPNE))
        return false;
    if (opcode >= 0x40 && opcode <= 0x4f) { /* cmovcc r, r/m */
        read_modrm(d, &rm, width);
        set_register(&reg, d->reg_field, width, d->rex);
        written(insn, &reg);
        return true;
    }
    if (opcode >= 0x90 && opcode <= 0x9f) { /* setcc r/m8 */
        read_modrm(d, &rm, 1);
        if (d->reg_field & 7)
            return false;
        written(insn, &rm);
        return true;
    }
    if (opcode >= 0xc8 && opcode <= 0xcf) { /* bswap */
        set_register(&reg, (opcode & 7u) | (d->rex & REX_B ? 8u : 0u), width, d->rex);
        written(insn, &reg);
        return width != 2; /* bswap of a 16-bit register is undefined (SDM) */
    }
    switch (opcode) {
    case 0xb6: case 0xb7: /* movzx r, r/m8 / r/m16: a copy (a jump table's index follows it) */
        read_modrm(d, &rm, opcode == 0xb6 ? 1 : 2);
        set_register(&reg, d->reg_field, width, d->rex);
        written(insn, &reg);
        insn->kind = FU_X86_MOV;
        insn->dest = reg;
        insn->source = rm;
        return true;
    case 0xbe: case 0xbf: /* movsx r, r/m8 / r/m16 */
    case 0xaf:            /* imul r, r/m */
    case 0xbc: case 0xbd: /* bsf, bsr */
        read_modrm(d, &rm, opcode == 0xb6 || opcode == 0xbe ? 1 : opcode == 0xb7 || opcode == 0xbf ? 2 : width);
        set_register(&reg, d->reg_field, width, d->rex);
        written(insn, &reg);
        return true;
    case 0xa3: /* bt r/m, r */
        read_modrm(d, &rm, width);
        return rm.kind == FU_X86_OPERAND_REGISTER;
    case 0xab: case 0xb3: case 0xbb: /* bts, btr, btc r/m, r */
        read_modrm(d, &rm, width);
        if (rm.kind != FU_X86_OPERAND_REGISTER)
            return false;
        written(insn, &rm);
        return true;
    case 0xa4: case 0xac: case 0xa5: case 0xad: /* shld, shrd r/m, r, imm8 / cl */
        read_modrm(d, &rm, width);
        skip(d, (opcode & 1) == 0 ? 1 : 0); /* imm8, or the count in cl */
        written(insn, &rm);
        return true;
    default:
        return false;
    }
}

/* Group 2 (C0, C1, D0-D3): rol ror rcl rcr shl shr - sar by ModRM.reg (/6 is left to Zydis). */
static inline __attribute__((always_inline)) bool shift(fast_decoding *d, fu_x86_insn *insn, unsigned width, unsigned immediate_bytes)
{
    fu_x86_operand rm = {0};
    read_modrm(d, &rm, width);
    if ((d->reg_field & 7) == 6)
        return false;
    skip(d, immediate_bytes);
    written(insn, &rm);
    return true;
}

/* Immediate bytes of an operand of `width` bytes: 8-byte operands take a sign-extended imm32. */
static inline __attribute__((always_inline)) unsigned immediate_bytes_of(unsigned width)
{
    return width == 8 ? 4 : width;
}

static inline __attribute__((always_inline)) bool decode_one_byte(fast_decoding *d, uint8_t opcode, fu_x86_insn *insn, uint64_t address)
{
    unsigned width = d->operand_width;
    fu_x86_operand rm = {0}, reg = {0};
    if (d->prefixes & (PREFIX_REP | PREFIX_REPNE | PREFIX_CS)) {
        if (opcode == 0xc3 && d->prefixes == PREFIX_REP && !d->rex) {
            insn->kind = FU_X86_RET; /* rep ret: the AMD branch predictor's two-byte return */
            insn->writes = rsp_bit;
            return true;
        }
        return false;
    }
    switch (opcode) {
    /* add/or/adc/sbb/and/sub/xor/cmp in their six forms */
    case 0x00 ... 0x05: case 0x08 ... 0x0d: case 0x10 ... 0x15: case 0x18 ... 0x1d:
    case 0x20 ... 0x25: case 0x28 ... 0x2d: case 0x30 ... 0x35: case 0x38 ... 0x3d: {
        unsigned operation = opcode >> 3, form = opcode & 7;
        unsigned operand_width = form & 1 ? width : 1;
        if (form < 4) { /* r/m, r (form 0, 1) or r, r/m (2, 3) */
            read_modrm(d, form < 2 ? &insn->dest : &insn->source, operand_width);
            set_register(form < 2 ? &insn->source : &insn->dest, d->reg_field, operand_width, d->rex);
            arithmetic(insn, operation);
            return true;
        }
        unsigned immediate_bytes = immediate_bytes_of(operand_width);
        set_immediate(&insn->source, read_signed(d, immediate_bytes), immediate_bytes);
        set_register(&insn->dest, 0, operand_width, d->rex); /* al, ax, eax, rax */
        arithmetic(insn, operation);
        return true;
    }
    case 0x50 ... 0x5f: /* push r, pop r */
        if (d->prefixes & PREFIX_OPERAND_SIZE)
            return false;
        insn->writes = rsp_bit;
        if (opcode < 0x58) {
            insn->kind = FU_X86_PUSH;
            set_register(&insn->source, (opcode & 7u) | (d->rex & REX_B ? 8u : 0u), 8, d->rex);
        } else {
            insn->kind = FU_X86_POP;
            set_register(&insn->dest, (opcode & 7u) | (d->rex & REX_B ? 8u : 0u), 8, d->rex);
            insn->writes |= (uint16_t)(1u << insn->dest.reg);
        }
        return true;
    case 0x70 ... 0x7f:
        insn->condition = opcode == 0x77 ? FU_X86_JUMP_IF_ABOVE : opcode == 0x73 ? FU_X86_JUMP_IF_ABOVE_OR_EQUAL : 0;
        return direct_branch(d, insn, address, FU_X86_JCC, 1);
    case 0xb0 ... 0xbf: { /* mov r, imm (imm64 with REX.W) */
        unsigned operand_width = opcode < 0xb8 ? 1 : width;
        int64_t value = read_signed(d, operand_width);
        insn->kind = FU_X86_MOV;
        set_register(&insn->dest, (opcode & 7u) | (d->rex & REX_B ? 8u : 0u), operand_width, d->rex);
        set_immediate(&insn->source, value, operand_width);
        written(insn, &insn->dest);
        return true;
    }
    case 0x63: /* movsxd r, r/m32 */
        if (d->prefixes & PREFIX_OPERAND_SIZE)
            return false;
        read_modrm(d, &insn->source, 4);
        insn->kind = FU_X86_MOV;
        set_register(&insn->dest, d->reg_field, width, d->rex);
        insn->source.sign_extends = true;
        written(insn, &insn->dest);
        return true;
    case 0x68: case 0x6a: /* push imm32 / imm8, sign-extended */
        if (d->prefixes & PREFIX_OPERAND_SIZE)
            return false;
        insn->kind = FU_X86_PUSH;
        set_immediate(&insn->source, read_signed(d, opcode == 0x68 ? 4 : 1), 8);
        insn->writes = rsp_bit;
        return true;
    case 0x69: case 0x6b: /* imul r, r/m, imm */
        read_modrm(d, &rm, width);
        skip(d, opcode == 0x69 ? immediate_bytes_of(width) : 1);
        set_register(&reg, d->reg_field, width, d->rex);
        written(insn, &reg);
        return true;
    case 0x80: case 0x81: case 0x83: { /* group 1: arithmetic r/m, imm */
        unsigned operand_width = opcode == 0x80 ? 1 : width;
        unsigned immediate_bytes = opcode == 0x81 ? immediate_bytes_of(operand_width) : 1;
        read_modrm(d, &insn->dest, operand_width);
        set_immediate(&insn->source, read_signed(d, immediate_bytes), immediate_bytes);
        arithmetic(insn, d->reg_field & 7);
        return true;
    }
    case 0x84: case 0x85: /* test r/m, r */
        read_modrm(d, &rm, opcode == 0x84 ? 1 : width);
        return true;
    case 0x86: case 0x87: /* xchg r/m, r */
        read_modrm(d, &rm, opcode == 0x86 ? 1 : width);
        set_register(&reg, d->reg_field, opcode == 0x86 ? 1 : width, d->rex);
        insn->kind = FU_X86_XCHG;
        written(insn, &rm);
        written(insn, &reg);
        insn->dest = rm;
        insn->source = reg;
        return true;
    case 0x88: case 0x89: case 0x8a: case 0x8b: { /* mov r/m, r and mov r, r/m */
        unsigned operand_width = opcode & 1 ? width : 1;
        /* the operands decoded in place (insn holds fu_x86_insn_empty) */
        read_modrm(d, opcode < 0x8a ? &insn->dest : &insn->source, operand_width);
        set_register(opcode < 0x8a ? &insn->source : &insn->dest, d->reg_field, operand_width, d->rex);
        insn->kind = FU_X86_MOV;
        written(insn, &insn->dest);
        return true;
    }
    case 0x8d: /* lea r, m (the address: 8 bytes whatever the destination's width) */
        if (d->prefixes & PREFIX_FS_GS)
            return false;
        read_modrm(d, &insn->source, 8);
        if (insn->source.kind != FU_X86_OPERAND_MEMORY)
            return false;
        insn->kind = FU_X86_LEA;
        set_register(&insn->dest, d->reg_field, width, d->rex);
        written(insn, &insn->dest);
        return true;
    case 0x90: /* nop (with REX.B it is xchg r8, rax) */
        if (d->rex)
            return false;
        insn->is_nop = true;
        return true;
    case 0x98: case 0x99: /* cbw/cwde/cdqe write rax; cwd/cdq/cqo write rdx */
        insn->writes = (uint16_t)(1u << (opcode == 0x98 ? FU_REG_RAX : FU_REG_RDX));
        return true;
    case 0xa8: case 0xa9: /* test al/eax, imm */
        skip(d, opcode == 0xa8 ? 1 : immediate_bytes_of(width));
        return true;
    case 0xc0: case 0xc1:
        return shift(d, insn, opcode == 0xc0 ? 1 : width, 1);
    case 0xd0: case 0xd1: case 0xd2: case 0xd3:
        return shift(d, insn, opcode & 1 ? width : 1, 0);
    case 0xc2: case 0xc3: /* ret, ret imm16 */
        if (d->rex || d->prefixes & PREFIX_OPERAND_SIZE)
            return false;
        skip(d, opcode == 0xc2 ? 2 : 0);
        insn->kind = FU_X86_RET;
        insn->writes = rsp_bit;
        return true;
    case 0xc6: case 0xc7: { /* mov r/m, imm */
        unsigned operand_width = opcode == 0xc6 ? 1 : width;
        unsigned immediate_bytes = immediate_bytes_of(operand_width);
        read_modrm(d, &insn->dest, operand_width);
        if (d->reg_field & 7)
            return false;
        insn->kind = FU_X86_MOV;
        set_immediate(&insn->source, read_signed(d, immediate_bytes), immediate_bytes);
        written(insn, &insn->dest);
        return true;
    }
    case 0xc9: /* leave */
        if (d->prefixes & PREFIX_OPERAND_SIZE)
            return false;
        insn->kind = FU_X86_LEAVE;
        insn->writes = rsp_bit | 1u << FU_REG_RBP;
        return true;
    case 0xcc: case 0xf4: /* int3, hlt */
        insn->kind = FU_X86_TRAP;
        return true;
    case 0xe8:
        return direct_branch(d, insn, address, FU_X86_CALL, 4);
    case 0xe9:
        return direct_branch(d, insn, address, FU_X86_JMP, 4);
    case 0xeb:
        return direct_branch(d, insn, address, FU_X86_JMP, 1);
    case 0xf6: case 0xf7: { /* group 3: test imm, -, not, neg, mul, imul, div, idiv */
        unsigned operand_width = opcode == 0xf6 ? 1 : width;
        read_modrm(d, &rm, operand_width);
        unsigned operation = d->reg_field & 7;
        if (operation == 1)
            return false;
        if (operation == 0) {
            skip(d, immediate_bytes_of(operand_width));
            return true;
        }
        if (operation < 4) {
            written(insn, &rm);
            return true;
        }
        /* mul/imul/div/idiv: ax, or rdx:rax (edx:eax, dx:ax) */
        insn->writes = (uint16_t)(1u << FU_REG_RAX | (opcode == 0xf7 ? 1u << FU_REG_RDX : 0));
        return true;
    }
    case 0xfe: case 0xff: { /* group 4/5: inc, dec, call, -, jmp, -, push */
        unsigned operation = (d->code[d->position] >> 3) & 7; /* ModRM.reg, before reading it */
        if (operation < 2) {
            read_modrm(d, &rm, opcode == 0xfe ? 1 : width);
            written(insn, &rm);
            return true;
        }
        if (opcode == 0xfe || (operation != 2 && operation != 4 && operation != 6) ||
            d->prefixes & PREFIX_OPERAND_SIZE)
            return false;
        read_modrm(d, &rm, 8);
        insn->kind = operation == 2 ? FU_X86_CALL : operation == 4 ? FU_X86_JMP : FU_X86_PUSH;
        insn->source = rm;
        if (operation != 4)
            insn->writes = rsp_bit;
        return true;
    }
    default:
        return false;
    }
}

/* The furthest a decoding reads: 15 bytes of prefixes and opcode (the prefix loop stops there),
 * then 0F, ModRM, SIB, a 4-byte displacement and an 8-byte immediate at most. */
#define FAST_READ_SLACK 32

/* REX, the opcode and what follows, after `prefixes` (the legacy prefixes, ending at `position`).
 * `code` has FAST_READ_SLACK readable bytes; the instruction may take `available` of them. */
static inline __attribute__((always_inline)) bool decode_after_prefixes(const uint8_t *code, size_t position,
                                                                        uint8_t prefixes, size_t available,
                                                                        uint64_t address, fu_x86_insn *insn)
{
    fast_decoding d = {.code = code, .position = position, .prefixes = prefixes};
    uint8_t byte = read_u8(&d);
    if ((byte & 0xf0) == 0x40) { /* REX: only directly before the opcode */
        d.rex = byte;
        byte = read_u8(&d);
        if ((byte & 0xf0) == 0x40)
            return false;
    }
    d.operand_width = d.rex & REX_W ? 8 : d.prefixes & PREFIX_OPERAND_SIZE ? 2 : 4;
    bool known = byte == 0x0f ? decode_two_byte(&d, insn, address) : decode_one_byte(&d, byte, insn, address);
    if (!known || d.position > available) /* not known, or longer than the bytes or the limit */
        return false;
    insn->length = (uint8_t)d.position;
    return true;
}

/* An instruction that may start with legacy prefixes (3% of libLLVM-14's instructions), each group
 * at most once except 66 (gcc's `data16` nops repeat it), within FU_X86_MAX_INSN_LENGTH bytes: kept
 * apart so that the unprefixed decoding, the common one, is compiled knowing it has none. */
static __attribute__((noinline)) bool decode_prefixed(const uint8_t *code, size_t available, uint64_t address,
                                                      fu_x86_insn *insn)
{
    size_t position = 0;
    uint8_t prefixes = 0;
    while (is_legacy_prefix[code[position]]) {
        uint8_t byte = code[position];
        uint8_t prefix = byte == 0x66 ? PREFIX_OPERAND_SIZE : byte == 0xf2 ? PREFIX_REPNE : byte == 0xf3 ? PREFIX_REP
                         : byte == 0x2e ? PREFIX_CS : PREFIX_FS_GS;
        if (prefixes & prefix & ~PREFIX_OPERAND_SIZE || position >= FU_X86_MAX_INSN_LENGTH - 1)
            return false;
        prefixes |= prefix;
        position++;
    }
    return decode_after_prefixes(code, position, prefixes, available, address, insn);
}

/* The end of the code (fewer than FAST_READ_SLACK bytes left): a zero-padded copy decoded, kept out
 * of the hot path so that its buffer does not weigh on every decoding. */
static __attribute__((noinline)) bool decode_near_end(const uint8_t *code, size_t size, uint64_t address,
                                                      fu_x86_insn *insn)
{
    uint8_t padded[FAST_READ_SLACK] = {0};
    memcpy(padded, code, size);
    return decode_prefixed(padded, size < FU_X86_MAX_INSN_LENGTH ? size : FU_X86_MAX_INSN_LENGTH, address, insn);
}

static inline __attribute__((always_inline)) bool decode_fast(const uint8_t *code, size_t size, uint64_t address,
                                                              fu_x86_insn *insn)
{
    if (__builtin_expect(size < FAST_READ_SLACK, 0))
        return decode_near_end(code, size, address, insn);
    if (__builtin_expect(is_legacy_prefix[code[0]], 0))
        return decode_prefixed(code, FU_X86_MAX_INSN_LENGTH, address, insn);
    return decode_after_prefixes(code, 0, 0, FU_X86_MAX_INSN_LENGTH, address, insn);
}

bool fu_x86_decode_fast(const uint8_t *code, size_t size, uint64_t address, fu_x86_insn *insn)
{
    return decode_fast(code, size, address, insn);
}

void fu_x86_decode(const fu_x86_decoder *decoder, const uint8_t *code, size_t size, uint64_t address,
                   fu_x86_insn *insn)
{
    *insn = fu_x86_insn_empty;
    if (!decode_fast(code, size, address, insn))
        fu_x86_decode_zydis(decoder, code, size, address, insn);
}
