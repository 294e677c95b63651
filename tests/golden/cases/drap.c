/* Stack realignment. gcc -O2 realigns the frame of a function with an over-aligned local and a
 * variable-length array through a DRAP register (Dynamic Realign Argument Pointer): the CFA is
 * first r10+0 (lea 8(%rsp),%r10), then a dereferencing expression over rbp
 * (DW_CFA_def_cfa_expression: DW_OP_breg6 -8; DW_OP_deref) and the saved registers are
 * DW_CFA_expression rules relative to rbp. A nested function (GNU C) takes the static chain in
 * r10, so its DRAP register is r13, callee-saved: pushed before the realignment, its save stays
 * CFA-relative (DW_CFA_offset r13) in the rows whose other saves are relative to rbp. Built with
 * -O2, with -O2 -mstackrealign (realigns main too), with -O0 and with -O2 -fomit-frame-pointer -g
 * -fno-asynchronous-unwind-tables (the CFI moves to .debug_frame). */
#include <stddef.h>
#include <string.h>

extern void consume(void *pointer, size_t size);

int realigned(int n)
{
    _Alignas(64) char aligned[64];
    char variable[n];
    memset(aligned, 1, sizeof aligned);
    memset(variable, 2, (size_t)n);
    consume(aligned, sizeof aligned);
    consume(variable, (size_t)n);
    return aligned[n & 63] + variable[n / 2];
}

int realigned_callee_saved(int n, int m)
{
    _Alignas(32) long block[8];
    long variable[n];
    register long kept1 = m * 3L, kept2 = m * 5L, kept3 = m * 7L;
    for (int i = 0; i < 8; i++)
        block[i] = i * kept1;
    for (int i = 0; i < n; i++)
        variable[i] = i * kept2;
    consume(block, sizeof block);
    consume(variable, sizeof variable);
    return (int)(block[m & 7] + variable[n / 2] + kept1 + kept2 + kept3);
}

int realigned_nested(int n, int m)
{
    long total = m;
    __attribute__((noinline)) int inner(int k)
    {
        _Alignas(32) long block[8];
        long variable[k];
        for (int i = 0; i < 8; i++)
            block[i] = i * total;
        for (int i = 0; i < k; i++)
            variable[i] = i + total;
        consume(block, sizeof block);
        consume(variable, sizeof variable);
        return (int)(block[k & 7] + variable[k / 2]);
    }
    consume(&total, sizeof total);
    return inner(n);
}

int main(int argc, char **argv)
{
    (void)argv;
    return realigned(argc + 16) + realigned_callee_saved(argc + 8, argc) + realigned_nested(argc + 4, argc);
}
