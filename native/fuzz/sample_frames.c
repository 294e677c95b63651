/* sample_frames: a few functions whose frames differ (leaf, callee-saved registers, alloca, stack
 * realignment, varargs, a frame pointer), compiled by native/fuzz/Makefile with
 * `gcc -g -O1 -fno-asynchronous-unwind-tables -c` to get a real .debug_frame to mutate. */
#include <alloca.h>
#include <stdarg.h>
#include <string.h>

extern int sink(const void *p, int n);

int leaf(int a, int b) { return a * b + 1; }

int many_registers(int a, int b, int c, int d, int e, int f)
{
    int x = sink(&a, b), y = sink(&c, d), z = sink(&e, f);
    return x + y * z + a + b + c + d + e + f;
}

int dynamic_stack(int n)
{
    char *buffer = alloca((unsigned)n + 16);
    memset(buffer, n, (unsigned)n + 16);
    return sink(buffer, n);
}

/* an over-aligned local and a variable-length array: gcc realigns the stack through a DRAP register
 * (the CFA dereferenced through rbp, the saves relative to rbp) */
int realigned(int n)
{
    _Alignas(32) char aligned[32];
    char variable[n + 1];
    memset(aligned, n, sizeof aligned);
    memset(variable, n, (unsigned)n + 1);
    return sink(aligned, n) + sink(variable, n);
}

int sum_varargs(int count, ...)
{
    va_list ap;
    va_start(ap, count);
    int total = 0;
    for (int i = 0; i < count; i++)
        total += va_arg(ap, int);
    va_end(ap);
    return sink(&total, count);
}

__attribute__((optimize("no-omit-frame-pointer"))) int with_frame_pointer(int n)
{
    volatile int local[32];
    for (int i = 0; i < 32; i++)
        local[i] = n + i;
    return sink((const void *)local, n);
}
