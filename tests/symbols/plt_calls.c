/* Calls into libc through the PLT (memcmp, qsort, strlen) in a loop: the PLT tests' program, and
 * the perf agreement tests' (argument: rounds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare(const void *a, const void *b) { return memcmp(a, b, 4); }

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
            n += (unsigned long)memcmp(a, b, (size_t)(i & 7) + 1) + strlen(a + (i & 3));
    }
    printf("%lu %d\n", n, values[0]);
    return 0;
}
