/* Calls into libc through the PLT (memcmp, qsort, strlen) in a loop: the PLT tests' program, and
 * the perf agreement tests' (argument: rounds). Hashing between the calls keeps the stubs' share of
 * the samples near 0.5%: perf 6.1 misnames PLT frames (test_names_against_perf.py), and the
 * agreement target is 99% of all frames. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static unsigned long hash(unsigned long h, int rounds)
{
    for (int i = 0; i < rounds; i++)
        h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ul + (unsigned long)i;
    return h;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 1;
    char a[16] = "abcdefgh", b[16] = "abcdefgi";
    unsigned long n = 0;
    int values[256];
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < 256; i++)
            values[i] = (int)((i * 7919 + r) & 1023);
        qsort(values, 256, sizeof values[0], compare);
        for (int i = 0; i < 2000; i++)
            n = hash(n + (unsigned long)memcmp(a, b, (size_t)(i & 7) + 1) + strlen(a + (i & 3)), 8);
    }
    printf("%lu %d\n", n, values[0]);
    return 0;
}
