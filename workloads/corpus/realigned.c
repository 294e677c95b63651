/* The corpus's stack-realigning program (scripts/corpus.py, case c-realigned: gcc -O2
 * -mstackrealign). A function with a 32-byte-aligned local and a variable-length array realigns its
 * stack through a DRAP register: gcc -O2 keeps the entry stack pointer in r10, then states the CFA
 * as `DW_OP_breg6 (rbp): -8; DW_OP_deref` and the callee-saved registers as `DW_CFA_expression
 * DW_OP_breg6 (rbp): k`; a nested function takes the static chain in r10, so its DRAP register is
 * r13, pushed before the realignment (a CFA-relative save among the rbp-relative ones). Both spend
 * time in their own bodies and call a leaf, so samples land in the DRAP rows and beneath them. */
#include <stdio.h>
#include <stdlib.h>
#include "cpu_time.h"

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long leaf(const long *values, int count)
{
    unsigned long s = 0;
    for (int round = 0; round < 20; round++)
        for (int i = 0; i < count; i++)
            s += (unsigned long)values[i] * 2654435761u ^ (s >> 7);
    return s;
}

/* The work of both realigning functions, inlined into their bodies (where the samples should land). */
static inline __attribute__((always_inline)) unsigned long mix(long *block, long *variable, int count, long seed)
{
    unsigned long s = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 8; i++)
            block[i] = (long)(i * round) ^ (long)s ^ seed;
        for (int i = 0; i < count; i++)
            variable[i] = i + round + (long)(s & 15);
        s += (unsigned long)block[round & 7] + (unsigned long)variable[count / 2];
    }
    return s + leaf(block, 8) + leaf(variable, count);
}

__attribute__((noinline)) unsigned long realigned(int count)
{
    _Alignas(32) long block[8];
    long variable[count];
    return mix(block, variable, count, 0);
}

unsigned long realigned_nested(int count)
{
    long total = count;
    __attribute__((noinline)) unsigned long inner(int k)
    {
        _Alignas(32) long block[8];
        long variable[k];
        return mix(block, variable, k, total);
    }
    return inner(count) + (unsigned long)total;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5, end = now() + seconds;
    for (int i = 0; now() < end; i++)
        sink += realigned(64 + i % 8) + realigned_nested(32 + i % 4);
    printf("%lu\n", sink);
    return 0;
}
