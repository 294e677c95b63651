/* A tiny JIT for the perf-map tests: copies a counting loop into an anonymous executable page, names
 * it in /tmp/perf-<pid>.map (perf's JIT interface), and runs it until about `seconds` have passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* mov $0x200000, %ecx; 1: dec %ecx; jnz 1b; ret */
static const unsigned char spin[] = {0xb9, 0x00, 0x00, 0x20, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    memcpy(page + 0x40, spin, sizeof spin);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (!map)
        return 1;
    fprintf(map, "%lx %zx jitted_spin_loop\n", (unsigned long)(uintptr_t)(page + 0x40), sizeof spin);
    fclose(map);
    void (*run)(void) = (void (*)(void))(page + 0x40);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        run();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    printf("%s\n", path);
    return 0;
}
