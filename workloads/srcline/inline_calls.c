/* Source lines and inline chains (tests/golden/test_srcline_against_perf.py): at -O2 the static
 * functions below are inlined into their callers two and three deep, each hot loop on lines of its
 * own, so that samples land on many lines of many inlined functions. */
#include <stdio.h>
#include <stdlib.h>

static inline unsigned mix(unsigned x)
{
    x ^= x << 13;
    x ^= x >> 17;
    return x ^ (x << 5);
}

static inline unsigned hash_row(const unsigned *row, int n)
{
    unsigned h = 2166136261u;
    for (int i = 0; i < n; i++)
        h = mix(h ^ row[i]);
    return h;
}

static inline double smooth(double x, int rounds)
{
    for (int k = 0; k < rounds; k++)
        x = x * 0.999999 + 1.0 / (k + 1);
    return x;
}

static inline double weigh(const unsigned *row, int n)
{
    return smooth((double)hash_row(row, n), 40) + smooth(row[0], 20);
}

__attribute__((noinline)) double table_pass(const unsigned *table, int rows, int n)
{
    double total = 0;
    for (int r = 0; r < rows; r++)
        total += weigh(table + (size_t)r * n, n);
    return total;
}

__attribute__((noinline)) unsigned checksum_pass(const unsigned *table, int count)
{
    unsigned h = 0;
    for (int i = 0; i < count; i++)
        h += mix(table[i] + h);
    return h;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 400;
    enum { ROWS = 256, WIDTH = 32 };
    unsigned *table = malloc(sizeof *table * ROWS * WIDTH);
    for (int i = 0; i < ROWS * WIDTH; i++)
        table[i] = (unsigned)i * 2654435761u;
    double total = 0;
    unsigned sum = 0;
    for (int r = 0; r < rounds; r++) {
        table[r % (ROWS * WIDTH)] ^= (unsigned)r; /* a new table each round: no call is pure */
        total += table_pass(table, ROWS, WIDTH);
        sum += checksum_pass(table, ROWS * WIDTH);
    }
    printf("%f %u\n", total, sum);
    free(table);
    return 0;
}
