/* The corpus's C program: linked by every linker and layout (scripts/corpus.py). Deep calls, libc
 * calling back into the program (qsort's comparator) and calls through the PLT (memcmp, strlen),
 * for a given number of seconds. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "cpu_time.h"

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long leaf(unsigned long n)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++)
        s += i * i ^ (s >> 3);
    return s;
}

__attribute__((noinline)) unsigned long descend(int depth, unsigned long n)
{
    char buffer[64];
    if (depth == 0)
        return leaf(n);
    memset(buffer, depth, sizeof buffer);
    return descend(depth - 1, n) + (unsigned long)strlen(buffer + depth % 8);
}

static int compare_ints(const void *a, const void *b)
{
    sink += leaf(100);
    return memcmp(a, b, sizeof(int));
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5, end = now() + seconds;
    int numbers[256];
    while (now() < end) {
        sink += descend(6, 2000);
        for (int i = 0; i < 256; i++)
            numbers[i] = (i * 7919) % 256;
        qsort(numbers, 256, sizeof numbers[0], compare_ints);
    }
    printf("%lu\n", sink);
    return 0;
}
