/* synth_decode: Zydis's decoded instructions summarized for synth.c (see synth_decode.h). */
#include "synth_decode.h"

#include <string.h>

#include <Zydis/Zydis.h>

_Static_assert(sizeof(ZydisDecoder) <= sizeof(((fu_x86_decoder *)0)->opaque), "fu_x86_decoder too small");

void fu_x86_decoder_init(fu_x86_decoder *decoder)
{
    memset(decoder, 0, sizeof *decoder);
    ZydisDecoderInit((ZydisDecoder *)decoder->opaque, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
}

/* Zydis orders the 64-bit registers as the encoding does (rax rcx rdx rbx rsp rbp rsi rdi r8..r15);
 * DWARF numbers them rax rdx rcx rbx rsi rdi rbp rsp r8..r15 (System V AMD64 ABI, figure 3.36). */
static const uint8_t dwarf_of_encoding[FU_X86_GPR_COUNT] = {
    FU_REG_RAX, FU_REG_RCX, FU_REG_RDX, FU_REG_RBX, FU_REG_RSP, FU_REG_RBP, FU_REG_RSI, FU_REG_RDI,
    FU_REG_R8,  FU_REG_R9,  FU_REG_R10, FU_REG_R11, FU_REG_R12, FU_REG_R13, FU_REG_R14, FU_REG_R15};

/* The DWARF number of the general-purpose register holding `reg` (al, ax, eax, rax -> 0), or
 * FU_X86_REG_NONE. */
static uint8_t decode_gpr(ZydisRegister reg)
{
    if (reg == ZYDIS_REGISTER_NONE)
        return FU_X86_REG_NONE;
    if (reg == ZYDIS_REGISTER_RIP)
        return FU_X86_REG_RIP;
    ZydisRegister wide = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
    if (wide < ZYDIS_REGISTER_RAX || wide > ZYDIS_REGISTER_R15)
        return FU_X86_REG_NONE;
    return dwarf_of_encoding[wide - ZYDIS_REGISTER_RAX];
}

static void decode_operand(const ZydisDecodedOperand *operand, fu_x86_operand *out)
{
    memset(out, 0, sizeof *out);
    out->reg = out->index = FU_X86_REG_NONE;
    out->width = (uint8_t)(operand->size / 8);
    switch (operand->type) {
    case ZYDIS_OPERAND_TYPE_REGISTER:
        out->reg = decode_gpr(operand->reg.value);
        out->kind = out->reg < FU_X86_GPR_COUNT ? FU_X86_OPERAND_REGISTER : FU_X86_OPERAND_OTHER;
        break;
    case ZYDIS_OPERAND_TYPE_MEMORY:
        out->kind = FU_X86_OPERAND_MEMORY;
        out->reg = decode_gpr(operand->mem.base);
        out->index = decode_gpr(operand->mem.index);
        out->scale = operand->mem.scale;
        out->value = operand->mem.disp.value;
        out->segment = operand->mem.segment == ZYDIS_REGISTER_FS || operand->mem.segment == ZYDIS_REGISTER_GS;
        break;
    case ZYDIS_OPERAND_TYPE_IMMEDIATE:
        out->kind = FU_X86_OPERAND_IMMEDIATE;
        out->value = operand->imm.is_signed ? operand->imm.value.s : (int64_t)operand->imm.value.u;
        break;
    default:
        out->kind = FU_X86_OPERAND_OTHER;
        break;
    }
}

void fu_x86_decode(const fu_x86_decoder *decoder, const uint8_t *code, size_t size, uint64_t address,
                   fu_x86_insn *insn)
{
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
    static const fu_x86_insn empty = {.dest = {.reg = FU_X86_REG_NONE, .index = FU_X86_REG_NONE},
                                      .source = {.reg = FU_X86_REG_NONE, .index = FU_X86_REG_NONE}};
    *insn = empty;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull((const ZydisDecoder *)decoder->opaque, code, size, &zi, operands))) {
        insn->kind = FU_X86_INVALID;
        return;
    }
    insn->length = zi.length;
    for (unsigned i = 0; i < zi.operand_count; i++) {
        const ZydisDecodedOperand *op = &operands[i];
        if (op->type == ZYDIS_OPERAND_TYPE_REGISTER && (op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) {
            uint8_t reg = decode_gpr(op->reg.value);
            if (reg < FU_X86_GPR_COUNT)
                insn->writes |= (uint16_t)(1u << reg);
        }
        if (op->type == ZYDIS_OPERAND_TYPE_MEMORY && op->mem.type == ZYDIS_MEMOP_TYPE_MEM &&
            (op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) && op->visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT) {
            insn->stores = true;
            decode_operand(op, &insn->dest);
        }
    }
    unsigned visible = zi.operand_count_visible;
    switch (zi.meta.category) {
    case ZYDIS_CATEGORY_COND_BR:
    case ZYDIS_CATEGORY_UNCOND_BR:
    case ZYDIS_CATEGORY_CALL:
        insn->kind = zi.meta.category == ZYDIS_CATEGORY_CALL ? FU_X86_CALL
                     : zi.meta.category == ZYDIS_CATEGORY_COND_BR ? FU_X86_JCC : FU_X86_JMP;
        if (visible >= 1 && operands[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && operands[0].imm.is_relative) {
            ZyanU64 target;
            if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &operands[0], address, &target))) {
                insn->has_target = true;
                insn->target = target;
            }
        } else if (visible >= 1) {
            decode_operand(&operands[0], &insn->source);
        }
        if (insn->kind == FU_X86_JCC && !insn->has_target)
            insn->kind = FU_X86_INVALID; /* far or malformed: nothing the compilers emit */
        if (zi.mnemonic == ZYDIS_MNEMONIC_JNBE)
            insn->condition = FU_X86_JUMP_IF_ABOVE;
        else if (zi.mnemonic == ZYDIS_MNEMONIC_JNB)
            insn->condition = FU_X86_JUMP_IF_ABOVE_OR_EQUAL;
        return;
    case ZYDIS_CATEGORY_RET:
        insn->kind = FU_X86_RET;
        return;
    default:
        break;
    }
    switch (zi.mnemonic) {
    case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2: case ZYDIS_MNEMONIC_HLT:
    case ZYDIS_MNEMONIC_INT3:
        insn->kind = FU_X86_TRAP;
        return;
    case ZYDIS_MNEMONIC_PUSH:
        insn->kind = FU_X86_PUSH;
        decode_operand(&operands[0], &insn->source);
        insn->source.width = (uint8_t)(zi.operand_width / 8);
        insn->stores = false;
        return;
    case ZYDIS_MNEMONIC_POP:
        insn->kind = FU_X86_POP;
        decode_operand(&operands[0], &insn->dest);
        insn->dest.width = (uint8_t)(zi.operand_width / 8);
        insn->stores = false;
        return;
    case ZYDIS_MNEMONIC_LEAVE:
        insn->kind = FU_X86_LEAVE;
        return;
    case ZYDIS_MNEMONIC_ENTER:
        insn->kind = FU_X86_ENTER;
        decode_operand(&operands[0], &insn->source);
        decode_operand(&operands[1], &insn->dest); /* the nesting level, an immediate */
        return;
    case ZYDIS_MNEMONIC_MOV: case ZYDIS_MNEMONIC_MOVSXD: case ZYDIS_MNEMONIC_LEA: case ZYDIS_MNEMONIC_ADD:
    case ZYDIS_MNEMONIC_SUB: case ZYDIS_MNEMONIC_AND: case ZYDIS_MNEMONIC_XCHG: case ZYDIS_MNEMONIC_CMP:
        if (visible != 2)
            break;
        insn->kind = zi.mnemonic == ZYDIS_MNEMONIC_LEA ? FU_X86_LEA
                     : zi.mnemonic == ZYDIS_MNEMONIC_ADD ? FU_X86_ADD
                     : zi.mnemonic == ZYDIS_MNEMONIC_SUB ? FU_X86_SUB
                     : zi.mnemonic == ZYDIS_MNEMONIC_AND ? FU_X86_AND
                     : zi.mnemonic == ZYDIS_MNEMONIC_XCHG ? FU_X86_XCHG
                     : zi.mnemonic == ZYDIS_MNEMONIC_CMP ? FU_X86_CMP : FU_X86_MOV;
        decode_operand(&operands[0], &insn->dest);
        decode_operand(&operands[1], &insn->source);
        insn->source.sign_extends = zi.mnemonic == ZYDIS_MNEMONIC_MOVSXD;
        return;
    default:
        break;
    }
    insn->kind = FU_X86_OTHER;
    insn->is_nop = zi.mnemonic == ZYDIS_MNEMONIC_NOP;
}
