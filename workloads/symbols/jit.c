/* A tiny JIT for the JIT-naming tests: copies a counting loop into an anonymous executable page and
 * runs it until about `seconds` have passed. It names the code as JITs tell perf (perf's
 * tools/perf/Documentation/jit-interface.txt and jitdump-specification.txt):
 *   jit SECONDS               a perf map, /tmp/perf-<pid>.map (read by perf script);
 *   jit SECONDS jitdump DIR   a jitdump file, DIR/jit-<pid>.dump, mapped executable so that perf
 *                             record sees it; `perf inject --jit` turns its JIT_CODE_LOAD record
 *                             into DIR/jitted-<pid>-0.so and a mapping of it. Record with -k mono:
 *                             the record's timestamp is CLOCK_MONOTONIC. */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* mov $0x200000, %ecx; 1: dec %ecx; jnz 1b; ret */
static const unsigned char spin[] = {0xb9, 0x00, 0x00, 0x20, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};
static const char name[] = "jitted_spin_loop";

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int write_perf_map(const unsigned char *code)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (!map)
        return 1;
    fprintf(map, "%lx %zx %s\n", (unsigned long)(uintptr_t)code, sizeof spin, name);
    fclose(map);
    printf("%s\n", path);
    return 0;
}

/* The jitdump header and one JIT_CODE_LOAD record (all fields host-endian). */
static int write_jitdump(const char *dir, const unsigned char *code)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/jit-%d.dump", dir, (int)getpid());
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (fd < 0)
        return 1;
    struct {
        uint32_t magic, version, total_size, elf_mach, pad1, pid;
        uint64_t timestamp, flags;
    } header = {0x4A695444, 1, sizeof header, EM_X86_64, 0, (uint32_t)getpid(), monotonic_ns(), 0};
    struct {
        uint32_t id, total_size;
        uint64_t timestamp;
        uint32_t pid, tid;
        uint64_t vma, code_addr, code_size, code_index;
    } load = {0, 0, monotonic_ns(), (uint32_t)getpid(), (uint32_t)syscall(SYS_gettid),
              (uint64_t)(uintptr_t)code, (uint64_t)(uintptr_t)code, sizeof spin, 0};
    load.total_size = (uint32_t)(sizeof load + sizeof name + sizeof spin);
    /* the marker perf record looks for: the dump file mapped executable */
    void *marker = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (marker == MAP_FAILED)
        return 1;
    if (write(fd, &header, sizeof header) != sizeof header || write(fd, &load, sizeof load) != sizeof load ||
        write(fd, name, sizeof name) != sizeof name || write(fd, spin, sizeof spin) != sizeof spin)
        return 1;
    close(fd);
    printf("%s\n", path);
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    memcpy(page + 0x40, spin, sizeof spin);
    int failed = argc > 3 && strcmp(argv[2], "jitdump") == 0 ? write_jitdump(argv[3], page + 0x40)
                                                                : write_perf_map(page + 0x40);
    if (failed)
        return 1;
    fflush(stdout);
    void (*run)(void) = (void (*)(void))(page + 0x40);
    uint64_t start = monotonic_ns();
    do
        run();
    while ((monotonic_ns() - start) / 1e9 < seconds);
    return 0;
}
