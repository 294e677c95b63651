/* synth_decode: Zydis's decoded instructions summarized (the decoder behind the fast path of
 * synth_decode_fast.c, whose fu_x86_decode calls it), and the two compared (see synth_decode.h). */
#include "synth_decode.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <Zydis/Zydis.h>

_Static_assert(sizeof(ZydisDecoder) <= sizeof(((fu_x86_decoder *)0)->opaque), "fu_x86_decoder too small");

void fu_x86_decoder_init(fu_x86_decoder *decoder)
{
    memset(decoder, 0, sizeof *decoder);
    ZydisDecoderInit((ZydisDecoder *)decoder->opaque, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
}

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
    return fu_x86_dwarf_of_encoding[wide - ZYDIS_REGISTER_RAX];
}

static void decode_operand(const ZydisDecodedInstruction *zi, const ZydisDecodedOperand *operand, fu_x86_operand *out)
{
    memset(out, 0, sizeof *out);
    out->reg = out->index = FU_X86_REG_NONE;
    out->width = (uint16_t)(operand->size / 8);
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
        out->untracked_address = zi->address_width != 64 ||
                                 (operand->mem.index != ZYDIS_REGISTER_NONE && out->index == FU_X86_REG_NONE);
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

/* The xsave family: the area's size depends on the features enabled (XCR0), not on the encoding. */
static bool writes_machine_sized_area(ZydisMnemonic mnemonic)
{
    switch (mnemonic) {
    case ZYDIS_MNEMONIC_XSAVE: case ZYDIS_MNEMONIC_XSAVE64: case ZYDIS_MNEMONIC_XSAVEC: case ZYDIS_MNEMONIC_XSAVEC64:
    case ZYDIS_MNEMONIC_XSAVEOPT: case ZYDIS_MNEMONIC_XSAVEOPT64: case ZYDIS_MNEMONIC_XSAVES: case ZYDIS_MNEMONIC_XSAVES64:
        return true;
    default:
        return false;
    }
}

void fu_x86_decode_zydis(const fu_x86_decoder *decoder, const uint8_t *code, size_t size, uint64_t address,
                         fu_x86_insn *insn)
{
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
    *insn = fu_x86_insn_empty;
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
        /* memory written, explicitly or not (`stos`, `movs`: [rdi]); the stack writes of push, call,
         * enter and pushf are their kinds' (or make rsp unknown) */
        if (op->type == ZYDIS_OPERAND_TYPE_MEMORY && op->mem.type == ZYDIS_MEMOP_TYPE_MEM &&
            (op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
            (op->visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT || decode_gpr(op->mem.base) != FU_REG_RSP)) {
            insn->stores = true;
            decode_operand(&zi, op, &insn->dest);
            insn->repeats = op->visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT &&
                            (zi.attributes & ZYDIS_ATTRIB_HAS_REP);
            if (writes_machine_sized_area(zi.mnemonic))
                insn->dest.width = 0;
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
            decode_operand(&zi, &operands[0], &insn->source);
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
        decode_operand(&zi, &operands[0], &insn->source);
        insn->source.width = (uint8_t)(zi.operand_width / 8);
        insn->stores = false;
        return;
    case ZYDIS_MNEMONIC_POP:
        insn->kind = FU_X86_POP;
        decode_operand(&zi, &operands[0], &insn->dest);
        insn->dest.width = (uint8_t)(zi.operand_width / 8);
        insn->stores = false;
        return;
    case ZYDIS_MNEMONIC_LEAVE:
        insn->kind = FU_X86_LEAVE;
        return;
    case ZYDIS_MNEMONIC_ENTER:
        insn->kind = FU_X86_ENTER;
        decode_operand(&zi, &operands[0], &insn->source);
        decode_operand(&zi, &operands[1], &insn->dest); /* the nesting level, an immediate */
        return;
    case ZYDIS_MNEMONIC_MOV: case ZYDIS_MNEMONIC_MOVSXD: case ZYDIS_MNEMONIC_MOVZX: case ZYDIS_MNEMONIC_LEA:
    case ZYDIS_MNEMONIC_ADD:
    case ZYDIS_MNEMONIC_SUB: case ZYDIS_MNEMONIC_AND: case ZYDIS_MNEMONIC_XCHG: case ZYDIS_MNEMONIC_CMP:
        if (visible != 2)
            break;
        insn->kind = zi.mnemonic == ZYDIS_MNEMONIC_LEA ? FU_X86_LEA
                     : zi.mnemonic == ZYDIS_MNEMONIC_ADD ? FU_X86_ADD
                     : zi.mnemonic == ZYDIS_MNEMONIC_SUB ? FU_X86_SUB
                     : zi.mnemonic == ZYDIS_MNEMONIC_AND ? FU_X86_AND
                     : zi.mnemonic == ZYDIS_MNEMONIC_XCHG ? FU_X86_XCHG
                     : zi.mnemonic == ZYDIS_MNEMONIC_CMP ? FU_X86_CMP : FU_X86_MOV;
        decode_operand(&zi, &operands[0], &insn->dest);
        decode_operand(&zi, &operands[1], &insn->source);
        insn->source.sign_extends = zi.mnemonic == ZYDIS_MNEMONIC_MOVSXD;
        return;
    default:
        break;
    }
    insn->kind = FU_X86_OTHER;
    insn->is_nop = zi.mnemonic == ZYDIS_MNEMONIC_NOP;
}

/* The first field where `a` and `b` differ, written as "field: fast A, zydis B"; false if none. */
static bool describe_operand_difference(const char *name, const fu_x86_operand *a, const fu_x86_operand *b,
                                        char *out, size_t out_size)
{
    const struct {
        const char *field;
        int64_t a, b;
    } fields[] = {
        {"kind", a->kind, b->kind},   {"reg", a->reg, b->reg},       {"index", a->index, b->index},
        {"scale", a->scale, b->scale}, {"width", a->width, b->width}, {"sign_extends", a->sign_extends, b->sign_extends},
        {"segment", a->segment, b->segment}, {"untracked_address", a->untracked_address, b->untracked_address},
        {"value", a->value, b->value},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].a != fields[i].b) {
            snprintf(out, out_size, "%s.%s: fast 0x%" PRIx64 ", zydis 0x%" PRIx64, name, fields[i].field,
                     (uint64_t)fields[i].a, (uint64_t)fields[i].b);
            return true;
        }
    return false;
}

static bool describe_difference(const fu_x86_insn *a, const fu_x86_insn *b, char *out, size_t out_size)
{
    const struct {
        const char *field;
        uint64_t a, b;
    } fields[] = {
        {"kind", a->kind, b->kind},         {"length", a->length, b->length},
        {"has_target", a->has_target, b->has_target}, {"target", a->target, b->target},
        {"stores", a->stores, b->stores},   {"is_nop", a->is_nop, b->is_nop},
        {"condition", a->condition, b->condition}, {"repeats", a->repeats, b->repeats},
        {"writes", a->writes, b->writes},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].a != fields[i].b) {
            snprintf(out, out_size, "%s: fast 0x%" PRIx64 ", zydis 0x%" PRIx64, fields[i].field, fields[i].a,
                     fields[i].b);
            return true;
        }
    return describe_operand_difference("dest", &a->dest, &b->dest, out, out_size) ||
           describe_operand_difference("source", &a->source, &b->source, out, out_size);
}

void fu_x86_compare_decoders(const fu_x86_decoder *decoder, const uint8_t *code, size_t size, uint64_t address,
                             fu_x86_decoder_comparison *comparison)
{
    memset(comparison, 0, sizeof *comparison);
    for (size_t offset = 0; offset < size;) {
        fu_x86_insn zydis, fast = fu_x86_insn_empty;
        fu_x86_decode_zydis(decoder, code + offset, size - offset, address + offset, &zydis);
        comparison->instructions++;
        if (fu_x86_decode_fast(code + offset, size - offset, address + offset, &fast)) {
            comparison->fast++;
            char difference[sizeof comparison->first_difference];
            bool differs = zydis.kind == FU_X86_INVALID
                               ? (snprintf(difference, sizeof difference, "the fast path decodes bytes Zydis rejects"), true)
                               : describe_difference(&fast, &zydis, difference, sizeof difference);
            if (differs && comparison->mismatches++ == 0) {
                comparison->first_mismatch = address + offset;
                memcpy(comparison->first_difference, difference, sizeof difference);
            }
        }
        offset += zydis.kind == FU_X86_INVALID ? 1 : zydis.length;
    }
}
