/* mapped_file_driver: core/mapped_file.c under AddressSanitizer + UndefinedBehaviorSanitizer. Each
 * round writes a file of random size and bytes, maps it (guarded; populated or not), may drop its
 * pages, truncates it to a random size and reads it whole: the bytes below the cut must be the file's,
 * those past it zeros, and the file must say it changed exactly when a page lay wholly past the cut.
 * Then every slot of the table is taken and one more file is opened (read into memory: a cut leaves
 * its bytes), and a child maps a file without the guard and reads past a cut: it must not survive
 * (a SIGBUS the guard does not own goes on to the sanitizer's handler or the default action); then the
 * same with a handler installed over the guard, which the guard is put back in front of.
 * Exit status 0 when every check held; the seed is printed first.
 *
 *   make -C native/fuzz asan-mapped-file [SEED=N]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mapped_file.h"

#define CHECK(condition)                                                                                 \
    do {                                                                                                 \
        if (!(condition)) {                                                                              \
            fprintf(stderr, "mapped_file_driver: %s:%d: %s (seed %llu, round %d)\n", __FILE__, __LINE__, \
                    #condition, (unsigned long long)seed, round_number);                                 \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static uint64_t seed, state;
static int round_number = -1;
static char path[256];

static uint64_t next_random(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static int write_file(const uint8_t *data, size_t size)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, size) == (ssize_t)size);
    return fd;
}

static void one_round(size_t page)
{
    size_t size = 1 + (size_t)(next_random() % (16 * page));
    uint8_t *original = malloc(size);
    CHECK(original != NULL);
    for (size_t i = 0; i < size; i++)
        original[i] = (uint8_t)next_random();
    int fd = write_file(original, size);
    fu_mapped_file file;
    fu_error err = {0};
    CHECK(fu_mapped_file_open(&file, fd, size, next_random() % 2, &err) == FU_OK);
    CHECK(file.guard > 0 && file.size == size && memcmp(file.data, original, size) == 0);
    if (next_random() % 2)
        fu_mapped_file_release_pages(&file);
    size_t cut = (size_t)(next_random() % (size + 1));
    CHECK(ftruncate(fd, (off_t)cut) == 0);
    for (size_t i = 0; i < size; i++) {
        uint8_t byte = ((volatile const uint8_t *)file.data)[i];
        CHECK(byte == (i < cut ? original[i] : 0));
    }
    bool whole_page_cut = (cut + page - 1) / page * page < size;
    CHECK(fu_mapped_file_changed(&file) == whole_page_cut);
    CHECK(fu_mapped_file_check(&file, path, &err) == (whole_page_cut ? FU_ERR_FILE_CHANGED : FU_OK));
    CHECK(!whole_page_cut || (err.status == FU_ERR_FILE_CHANGED && strstr(err.message, path) != NULL));
    fu_mapped_file_close(&file);
    fu_mapped_file_close(&file); /* idempotent */
    CHECK(file.data == NULL);
    close(fd);
    free(original);
}

/* Every slot taken: one more file is read into memory, which a cut does not change. */
static void beyond_the_bound(size_t page)
{
    static fu_mapped_file held[FU_MAPPED_FILE_MAX_GUARDED];
    uint8_t bytes[3 * 4096];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t)next_random();
    int fd = write_file(bytes, sizeof bytes);
    fu_error err = {0};
    for (size_t i = 0; i < FU_MAPPED_FILE_MAX_GUARDED; i++)
        CHECK(fu_mapped_file_open(&held[i], fd, sizeof bytes, false, &err) == FU_OK && held[i].guard > 0);
    fu_mapped_file extra;
    CHECK(fu_mapped_file_open(&extra, fd, sizeof bytes, false, &err) == FU_OK && extra.guard == 0);
    CHECK(ftruncate(fd, (off_t)page) == 0);
    CHECK(memcmp(extra.data, bytes, sizeof bytes) == 0 && !fu_mapped_file_changed(&extra));
    fu_mapped_file_release_pages(&extra); /* nothing for a copy */
    fu_mapped_file_close(&extra);
    for (size_t i = 0; i < FU_MAPPED_FILE_MAX_GUARDED; i++)
        fu_mapped_file_close(&held[i]);
    /* the slots are free again */
    CHECK(fu_mapped_file_open(&extra, fd, page, false, &err) == FU_OK && extra.guard > 0);
    fu_mapped_file_close(&extra);
    CHECK(fu_mapped_file_open(&extra, fd, 0, false, &err) == FU_ERR_INVALID);
    close(fd);
}

/* A mapping the guard does not know: reading past its cut must still end the process. */
static void foreign_fault_kills(size_t page)
{
    uint8_t bytes[2 * 4096] = {1};
    int fd = write_file(bytes, sizeof bytes);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        int quiet = open("/dev/null", O_WRONLY); /* the sanitizer's report of the expected fault */
        if (quiet >= 0)
            dup2(quiet, STDERR_FILENO);
        const volatile uint8_t *mapped = mmap(NULL, sizeof bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (mapped == MAP_FAILED || ftruncate(fd, 0) != 0)
            _exit(2);
        _exit(mapped[page] == 0 ? 0 : 3); /* 0: the fault was swallowed */
    }
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 2));
    close(fd);
}

/* A handler installed over the guard that hands on what it gets, as a chaining handler does: it calls
 * the handler it displaced (the guard's level 0), after writing a byte to `displacer_pipe`. */
static struct sigaction displaced;
static int displacer_pipe = -1;

static void displacer(int signal_number, siginfo_t *info, void *context)
{
    ssize_t ignored = write(displacer_pipe, "d", 1);
    (void)ignored;
    displaced.sa_sigaction(signal_number, info, context);
}

/* A handler installed over the guard later: the guard is put back in front of it, a cut file still
 * reads as zeros, and a fault the guard does not own reaches that handler once, then the guard's older
 * level (the sanitizer's handler, or the default action): the process still ends. */
static void a_later_handler_is_put_behind(size_t page)
{
    int pipe_ends[2];
    CHECK(pipe(pipe_ends) == 0);
    displacer_pipe = pipe_ends[1];
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = displacer;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    CHECK(sigaction(SIGBUS, &action, &displaced) == 0);
    CHECK(fu_mapped_file_guard_refresh());
    CHECK(!fu_mapped_file_guard_refresh()); /* in front already: one query, nothing done */
    uint8_t bytes[2 * 4096] = {1};
    int fd = write_file(bytes, sizeof bytes);
    fu_mapped_file file;
    fu_error err = {0};
    CHECK(fu_mapped_file_open(&file, fd, sizeof bytes, false, &err) == FU_OK && file.guard > 0);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(((volatile const uint8_t *)file.data)[page] == 0 && fu_mapped_file_changed(&file));
    fu_mapped_file_close(&file);
    close(fd);
    foreign_fault_kills(page);
    close(pipe_ends[1]);
    char calls[8];
    CHECK(read(pipe_ends[0], calls, sizeof calls) == 1); /* the displacer, once, by the child's fault */
    close(pipe_ends[0]);
    /* the displacer gone (its previous handler, the guard's level 0, put back): the chain is cut there */
    CHECK(sigaction(SIGBUS, &displaced, NULL) == 0);
    CHECK(!fu_mapped_file_guard_refresh());
    foreign_fault_kills(page);
}

int main(int argc, char **argv)
{
    int rounds = 2000;
    seed = (uint64_t)time(NULL);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
    }
    printf("mapped_file_driver: seed %llu, %d rounds\n", (unsigned long long)seed, rounds);
    state = seed | 1;
    snprintf(path, sizeof path, "%s/fastunwind-mapped-file-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    fu_error err = {0};
    CHECK(fu_mapped_file_guard_install(&err) == FU_OK);
    CHECK(fu_mapped_file_guard_install(&err) == FU_OK); /* once: the second does nothing */
    for (round_number = 0; round_number < rounds; round_number++)
        one_round(page);
    beyond_the_bound(page);
    foreign_fault_kills(page);
    a_later_handler_is_put_behind(page);
    unlink(path);
    printf("mapped_file_driver: %d rounds, %llu pages read as zeros\n", rounds,
           (unsigned long long)fu_mapped_file_changes());
    return 0;
}
