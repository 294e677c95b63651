/* Threads whose first call into libc's malloc sets up their tcache (tests/golden/
 * test_srcline_against_perf.py), linked with ld_init_spin.c's library so that it starts with the
 * library's constructor spinning under ld.so's call_init. In glibc 2.36 (Debian 12) malloc calls
 * the out-of-line part of the inlined tcache_init (`tcache_init.part.0`) once a thread: a
 * breakpoint event there samples the thread with malloc's return address (`malloc+0x11d`) as the
 * caller frame, where the DWARF has tcache_init inlined into __libc_malloc.
 *
 *   first_malloc THREADS   start THREADS threads one after another, each mallocs once
 *   first_malloc --libc-base   print the address libc is loaded at (for the breakpoint's address)
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern volatile unsigned long ld_init_spun;

/* volatile: GCC removes a malloc whose block is freed unread */
static void *volatile kept;

static void *first_malloc(void *argument)
{
    kept = malloc(16);
    free(kept);
    return argument;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--libc-base") == 0) {
        Dl_info info;
        if (!dladdr((void *)malloc, &info))
            return 1;
        printf("%p\n", info.dli_fbase);
        return 0;
    }
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    for (int i = 0; i < threads; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, first_malloc, NULL) != 0 || pthread_join(thread, NULL) != 0)
            return 1;
    }
    printf("%lu\n", ld_init_spun);
    return 0;
}
