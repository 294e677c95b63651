/* zydis_decode: how long Zydis 4 alone takes to decode a file's code, the floor under
 * `fastunwind check` (benchmarks/bench_check.py). Decodes [offset, offset + size) of FILE linearly,
 * once with ZydisDecoderDecodeFull (the instruction and all its operands, as synth_decode.c does),
 * once with ZydisDecoderDecodeInstruction (without operands), and once with check's own decoder
 * (fu_x86_decode: the fast path of synth_decode_fast.c, Zydis behind it), and prints the seconds of
 * each.
 *
 *   zydis_decode FILE OFFSET SIZE      (hex or decimal)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <Zydis/Zydis.h>

#include "synth_decode.h"

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: zydis_decode FILE OFFSET SIZE\n");
        return 2;
    }
    long offset = strtol(argv[2], NULL, 0), size = strtol(argv[3], NULL, 0);
    FILE *f = fopen(argv[1], "rb");
    unsigned char *code = size > 0 ? malloc((size_t)size) : NULL;
    if (!f || !code || fseek(f, offset, SEEK_SET) != 0 || fread(code, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "zydis_decode: cannot read %ld bytes at %ld of %s\n", size, offset, argv[1]);
        return 2;
    }
    fclose(f);
    ZydisDecoder decoder;
    ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecodedInstruction instruction;
    ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
    ZydisDecoderContext context;
    for (int full = 1; full >= 0; full--) {
        double started = seconds();
        long count = 0;
        for (long at = 0; at < size; count++) {
            ZyanStatus status = full ? ZydisDecoderDecodeFull(&decoder, code + at, (ZyanUSize)(size - at), &instruction, operands)
                                     : ZydisDecoderDecodeInstruction(&decoder, &context, code + at, (ZyanUSize)(size - at),
                                                                     &instruction);
            at += ZYAN_SUCCESS(status) ? instruction.length : 1;
        }
        printf("%s %ld %.6f\n", full ? "full" : "instruction", count, seconds() - started);
    }
    fu_x86_decoder check_decoder;
    fu_x86_decoder_init(&check_decoder);
    double started = seconds();
    long count = 0;
    for (long at = 0; at < size; count++) {
        fu_x86_insn insn;
        fu_x86_decode(&check_decoder, code + at, (size_t)(size - at), (uint64_t)at, &insn);
        at += insn.kind == FU_X86_INVALID ? 1 : insn.length;
    }
    printf("check %ld %.6f\n", count, seconds() - started);
    free(code);
    return 0;
}
