/* launcher_driver: the launcher's entry points (native/cli) and the snapshot rendering
 * (core/snapshot.c) under ASAN+UBSAN.
 *
 * 1. fu_cli_parse over LAUNCHER_ROUNDS seeded command lines: tokens of the verbs' options, their
 *    values (numbers, paths, abbreviations, "=" forms, bytes that are neither) in any order and
 *    count. Every accepted line must be one the launcher can serve: its verb's required argument
 *    present, pids and tids positive, tids distinct and within FU_CLI_MAX_TIDS.
 * 2. The module reader (modules.c: ELF headers, notes, sections, the debug file, process entry,
 *    bias, the vDSO's symbol table) over each ELF file given and seeded mutants of it, with the
 *    caches in an empty directory; a served image must have its build-id.
 * 3. The renderings (snapshot.c) of threads with random bytes as names, paths and symbols, random
 *    registers and outcomes: the JSON must be ASCII, the text must hold every name's bytes.
 * 4. fu_cli_backtrace of a child of its own (a command line for it, random tids): whatever it
 *    serves, the child keeps running, untraced.
 * 5. The caches' paths and keys (core/cache_paths.c) under odd environments: a root always ends
 *    in "fastunwind", a key is NUL-separated and starts with its kind; perf's build-id cache's
 *    candidates all under its root; a compact entry's suffix ends in ".fut".
 * 6. fu_cli_core (core.c: the core's modules found, their build-ids read from the core's memory,
 *    the vDSO) over a core given with --core and CORE_MUTANTS seeded mutants of it.
 * 7. fu_cli_perf_script and fu_cli_report (recording.c: the stream, the replay, the recorded files
 *    found by build-id in the file system and perf's build-id cache, the walks, the text, the
 *    folded stacks, the report's table) over a recording given with --perf and RECORDING_MUTANTS
 *    seeded mutants of it: served or not, never a crash.
 * 8. fu_cli_needs_hold (recording.c: a record of a recording's needs, read from the cache) over a
 *    record of files as they are, which must hold, and seeded mutants of it (bytes changed, cut,
 *    repeated), each a heap copy of its exact size.
 *
 *   launcher_driver_asan --seed S --rounds N [--core CORE] [--perf perf.data] [ELF files...]
 */
#define _GNU_SOURCE
#define FUZZ_DRIVER "launcher_driver"
#define FUZZ_REPLAY "launcher_driver_asan --seed"
#include "fuzz_common.h"

#include <time.h>

#include <signal.h>
#include <sys/wait.h>

#include "arguments.h"
#include "backtrace.h"
#include "cache_paths.h"
#include "core.h"
#include "fuzz_files.h"
#include "launcher.h"
#include "modules.h"
#include "recording.h"
#include "snapshot.h"

static const char *const TOKENS[] = {
    "backtrace", "core", "-p", "--pid", "--pid=", "-p7", "--tid", "--tid=3", "--json", "--registers", "--reg",
    "-o", "--output", "--output=out", "-oout", "--exe", "--exe=./a", "--sysroot", "--sysroot=/", "--help", "--",
    "-", "", "0", "1", "42", "2147483647", "99999999999", "-5", "+5", " 5", "1_0", "core.1", "/tmp/x", "=",
    "--json=1", "-p=3", "--pidx", "table", "perf-script", "-i", "--input", "--input=x.data", "-ix.data",
    "--folded", "report", "--children", "--sort", "-s", "sym,dso", "--top", "--top=3",
};
#define TOKEN_COUNT (sizeof TOKENS / sizeof *TOKENS)
#define MAX_ARGS 24

static void check_request(const fu_cli_request *r)
{
    CHECK(r->verb == FU_CLI_BACKTRACE || r->verb == FU_CLI_CORE || r->verb == FU_CLI_PERF_SCRIPT ||
              r->verb == FU_CLI_REPORT, "verb %d", (int)r->verb);
    if (r->verb == FU_CLI_PERF_SCRIPT || r->verb == FU_CLI_REPORT)
        CHECK(r->input && r->input[0] && r->input[0] != '-' && r->pid == 0 && !r->core_file &&
                  (r->verb == FU_CLI_PERF_SCRIPT || !r->folded),
              "perf-script or report without its input, or with another verb's");
    else if (r->verb == FU_CLI_BACKTRACE)
        CHECK(r->pid > 0 && !r->core_file && !r->exe && !r->sysroot, "backtrace without a pid, or with core's");
    else
        CHECK(r->core_file && r->core_file[0] && r->core_file[0] != '-' && r->pid == 0 && r->tid_count == 0,
              "core without its file, or with backtrace's");
    if (r->verb == FU_CLI_REPORT)
        CHECK(r->sort && r->sort[0] && r->sort[0] != '-' && r->top != 0, "report without its sort, or --top 0");
    CHECK(r->tid_count <= FU_CLI_MAX_TIDS, "%zu tids", r->tid_count);
    for (size_t i = 0; i < r->tid_count; i++) {
        CHECK(r->tids[i] > 0, "tid %d", r->tids[i]);
        for (size_t j = 0; j < i; j++)
            CHECK(r->tids[i] != r->tids[j], "tid %d twice", r->tids[i]);
    }
}

/* A mutant of `size` bytes in `copy`: 1 to max_flips bytes changed, within the first `head` bytes
 * three times in four (headers and notes: where the readers decide), and cut one time in eight;
 * its length. */
static size_t mutate(uint8_t *copy, size_t size, size_t head, unsigned max_flips, uint64_t *state)
{
    if (!size)
        return 0;
    unsigned flips = 1 + (unsigned)rng_below(state, max_flips);
    for (unsigned f = 0; f < flips; f++) {
        size_t at = rng_below(state, 4) ? rng_below(state, size < head ? size : head) : rng_below(state, size);
        copy[at] = (uint8_t)rng_next(state);
    }
    return rng_below(state, 8) == 0 ? rng_below(state, size) : size;
}

/* Mutants of one ELF file through the module reader. */
#define ELF_MUTANTS 300
#define MAX_ELF_BYTES (4u << 20)

static void read_modules(const char *path, uint64_t *state)
{
    size_t size;
    uint8_t *original = fuzz_read_file(path, MAX_ELF_BYTES, &size);
    CHECK(original != NULL, "cannot read %s", path);
    for (int m = 0; m <= ELF_MUTANTS; m++) {
        uint8_t *copy = malloc(size ? size : 1);
        CHECK(copy != NULL, "out of memory");
        memcpy(copy, original, size);
        size_t len = m > 0 ? mutate(copy, size, 4096, 16, state) : size;
        char label[256];
        snprintf(label, sizeof label, "%s mutant %d", path, m);
        fuzz_begin_input(copy, len, label);
        fu_cli_image image;
        memset(&image, 0, sizeof image);
        bool vdso = rng_below(state, 2);
        fu_cli_module_status status = fu_cli_image_open(&image, path, (fu_cli_bytes){copy, len, true}, vdso);
        if (status == FU_CLI_MODULE_OK) {
            CHECK(image.elf.build_id_size > 0, "a served image without a build-id");
            CHECK(!fu_cli_image_tables(&image, (unsigned)rng_below(state, FU_COMPACT_SYNTH_MODES)), "tables found in an empty cache");
            uint64_t bias;
            for (int q = 0; q < 8; q++) {
                uint64_t start = rng_next(state) & ~0xfffull;
                if (fu_cli_image_bias(&image, start, start + 0x10000, rng_below(state, 0x100000) & ~0xfffull, &bias)) {
                    const char *name;
                    size_t name_len;
                    uint64_t offset, address = start + rng_below(state, 0x10000);
                    if (fu_cli_image_symbol(&image, bias, address, address - 1, &name, &name_len, &offset))
                        CHECK(name != NULL, "a symbol without a name");
                }
            }
        }
        fu_cli_image_free(&image);
    }
    free(original);
}

#define CORE_MUTANTS 200
#define RECORDING_MUTANTS 200

/* A request of `verb` with random output options. */
static fu_cli_request random_request(fu_cli_verb verb, uint64_t *state)
{
    fu_cli_request request;
    memset(&request, 0, sizeof request);
    request.verb = verb;
    request.json = rng_below(state, 2);
    request.registers = rng_below(state, 2);
    return request;
}

/* `serve` over the file at `path` and `mutants` seeded mutants of it (bytes changed within its
 * first `head` bytes mostly), each written to a file of its own first. */
static void each_mutant(const char *path, const char *what, int mutants, size_t head, uint64_t *state,
                        void (*serve)(const char *file, uint64_t *state))
{
    size_t size;
    uint8_t *original = fuzz_read_file(path, 64u << 20, &size);
    CHECK(original != NULL, "cannot read %s", path);
    char mutant[] = "/tmp/launcher_driver_input.XXXXXX";
    int fd = mkstemp(mutant);
    CHECK(fd >= 0, "mkstemp");
    for (int m = 0; m <= mutants; m++) {
        uint8_t *copy = malloc(size ? size : 1);
        CHECK(copy != NULL, "out of memory");
        memcpy(copy, original, size);
        size_t len = m > 0 ? mutate(copy, size, head, 32, state) : size;
        CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, copy, len, 0) == (ssize_t)len, "writing the mutant");
        char label[128];
        snprintf(label, sizeof label, "%s mutant %d", what, m);
        fuzz_begin_input(copy, len, label);
        serve(mutant, state);
        free(copy);
    }
    close(fd);
    unlink(mutant);
    free(original);
}

static void serve_core(const char *file, uint64_t *state)
{
    fu_cli_request request = random_request(FU_CLI_CORE, state);
    request.core_file = file;
    if (rng_below(state, 4) == 0)
        request.sysroot = "/nonexistent";
    fu_buffer out = {0};
    int status = fu_cli_core(&request, &out);
    CHECK(status == FU_CLI_NOT_SERVED || status == 0 || status == 2, "core status %d", status);
    free(out.data);
}

static void serve_recording(const char *file, uint64_t *state)
{
    fu_cli_request request;
    memset(&request, 0, sizeof request);
    request.input = file;
    unsigned kind = rng_below(state, 3); /* text, folded, report */
    request.verb = kind == 2 ? FU_CLI_REPORT : FU_CLI_PERF_SCRIPT;
    request.folded = kind == 1;
    static const char *const SORTS[] = {"sym", "dso,sym", "comm,tid,dso", "tid,sym,tid", "srcline", "sym,"};
    request.sort = SORTS[rng_below(state, sizeof SORTS / sizeof *SORTS)];
    request.children = rng_below(state, 2);
    request.top = (int)rng_below(state, 4) - 1;
    /* the report's table goes to a regular file (a device may be a terminal: the Python path's) */
    char path[] = "/tmp/fu-launcher-report-XXXXXX";
    int file_fd = kind == 2 ? mkstemp(path) : -1;
    CHECK(kind != 2 || file_fd >= 0, "mkstemp");
    if (file_fd >= 0)
        close(file_fd);
    fu_cli_output out = {.path = kind == 2 ? path : "/dev/null", .fd = -1};
    request.output = out.path;
    int status = kind == 2 ? fu_cli_report(&request, &out) : fu_cli_perf_script(&request, &out);
    CHECK(status == FU_CLI_NOT_SERVED || status == 0 || status == 1, "recording status %d", status);
    CHECK(status != FU_CLI_NOT_SERVED || out.fd < 0, "not served after writing");
    if (out.fd >= 0)
        close(out.fd);
    if (kind == 2)
        unlink(path);
    free(out.held.data);
}

static void needs_records(uint64_t *state, uint64_t rounds)
{
    static const char *const FILES[] = {"/proc/self/exe", "/etc/passwd", "/"};
    fu_buffer record = {0};
    CHECK(fu_buffer_append(&record, "FUNEEDS1", 8), "out of memory");
    for (size_t i = 0; i < sizeof FILES / sizeof *FILES; i++) {
        struct stat st;
        CHECK(stat(FILES[i], &st) == 0, "stat %s", FILES[i]);
        uint64_t fields[5] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
                              (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec};
        uint32_t len = (uint32_t)strlen(FILES[i]);
        CHECK(fu_buffer_append(&record, fields, sizeof fields) && fu_buffer_append(&record, &len, sizeof len) &&
                  fu_buffer_append(&record, FILES[i], len), "out of memory");
    }
    fuzz_begin_input(record.data, record.len, "record of needs");
    CHECK(fu_cli_needs_hold(record.data, record.len), "a record of files as they are does not hold");
    for (uint64_t round = 0; round < rounds; round++) {
        size_t size = record.len;
        unsigned how = (unsigned)rng_below(state, 3);
        if (how == 1)
            size = (size_t)rng_below(state, record.len + 1); /* cut */
        else if (how == 2)
            size = 2 * record.len; /* the files twice, the magic in between */
        uint8_t *copy = malloc(size ? size : 1);
        CHECK(copy != NULL, "out of memory");
        for (size_t i = 0; i < size; i++)
            copy[i] = record.data[i % record.len];
        for (uint64_t flips = how == 0 ? 1 + rng_below(state, 4) : 0; flips > 0 && size; flips--)
            copy[rng_below(state, size)] = (uint8_t)rng_next(state);
        char label[64];
        snprintf(label, sizeof label, "record of needs, mutant %llu", (unsigned long long)round);
        fuzz_begin_input(copy, size, label);
        (void)fu_cli_needs_hold(copy, size); /* a record cut between files holds: fewer files listed */
        free(copy);
    }
    free(record.data);
}

static void cache_paths(uint64_t *state)
{
    static const char *const HOMES[] = {"/root", "/", "", "//x//", "/home/a b", NULL};
    static const char *const FILES[] = {"/proc/kallsyms", "/nonexistent", "", "/", "/etc/passwd"};
    char *saved_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    for (int round = 0; round < 200; round++) {
        const char *home = HOMES[rng_below(state, 6)], *xdg = rng_below(state, 2) ? HOMES[rng_below(state, 6)] : NULL;
        if (home)
            setenv("HOME", home, 1);
        else
            unsetenv("HOME");
        if (xdg)
            setenv("XDG_CACHE_HOME", xdg, 1);
        else
            unsetenv("XDG_CACHE_HOME");
        char root[4096], entry[64];
        if (fu_cache_root(root, sizeof root))
            CHECK(strlen(root) >= 10 && strcmp(root + strlen(root) - 10, "fastunwind") == 0, "cache root %s", root);
        uint8_t build_id[40];
        for (size_t i = 0; i < sizeof build_id; i++)
            build_id[i] = (uint8_t)rng_next(state);
        (void)fu_cache_entry_path("symbols", build_id, rng_below(state, sizeof build_id), ".fus", entry, sizeof entry);
        fu_buffer key = {0};
        const char *file = FILES[rng_below(state, 5)];
        if (fu_symbol_key_kallsyms(file, &key))
            CHECK(key.len > 9 && memcmp(key.data, "kallsyms", 9) == 0, "kallsyms key");
        key.len = 0;
        CHECK(fu_symbol_key_elf("00ff", file, rng_below(state, 2) ? FILES[rng_below(state, 5)] : NULL, &key) &&
                  memcmp(key.data, "elf\0" "00ff", 8) == 0,
              "elf key");
        key.len = 0;
        CHECK(fu_symbol_key_memory_image("00ff", rng_below(state, 2) ? FILES[rng_below(state, 5)] : NULL, &key) &&
                  memcmp(key.data, "image\0" "00ff", 10) == 0,
              "memory image key");
        free(key.data);
        /* perf's build-id cache: every candidate under the root, 2 to 6 of them, NUL-separated */
        static const char *const NAMES[] = {"/usr/lib/libc.so.6", "[vdso]", "/a (deleted)", "", "/", "x"};
        if (rng_below(state, 2))
            setenv("PERF_BUILDID_DIR", HOMES[rng_below(state, 5)], 1);
        else
            unsetenv("PERF_BUILDID_DIR");
        char id_root[FU_BUILD_ID_CACHE_PATH_MAX];
        fu_buffer paths = {0};
        size_t id_size = rng_below(state, FU_BUILD_ID_CACHE_MAX_ID + 1);
        if (rng_below(state, 2))
            memset(build_id + id_size / 2, 0, id_size - id_size / 2);
        if (fu_build_id_cache_candidates(NAMES[rng_below(state, 6)], build_id, id_size, "elf", &paths)) {
            CHECK(fu_build_id_cache_root(id_root, sizeof id_root), "candidates without a root");
            size_t count = 0;
            for (size_t at = 0; at < paths.len; at += strlen((const char *)paths.data + at) + 1, count++)
                CHECK(strncmp((const char *)paths.data + at, id_root, strlen(id_root)) == 0, "a candidate outside %s",
                      id_root);
            CHECK(paths.len && ((const char *)paths.data)[paths.len - 1] == '\0' && count >= 2 && count <= 6,
                  "%zu candidates", count);
        }
        free(paths.data);
        char suffix[64];
        unsigned synth = (unsigned)rng_below(state, FU_COMPACT_SYNTH_MODES + 1);
        if (fu_compact_cache_suffix(synth, suffix, sizeof suffix))
            CHECK(strlen(suffix) >= 4 && strcmp(suffix + strlen(suffix) - 4, ".fut") == 0, "compact suffix %s", suffix);
    }
    unsetenv("PERF_BUILDID_DIR");
    if (saved_home)
        setenv("HOME", saved_home, 1);
    if (saved_xdg)
        setenv("XDG_CACHE_HOME", saved_xdg, 1);
    free(saved_home);
    free(saved_xdg);
}

static void random_text(uint64_t *state, char *buffer, size_t max, fu_snapshot_text *out)
{
    if (rng_below(state, 6) == 0) {
        *out = (fu_snapshot_text){NULL, 0};
        return;
    }
    size_t len = rng_below(state, max);
    for (size_t i = 0; i < len; i++)
        buffer[i] = rng_below(state, 3) ? (char)(' ' + rng_below(state, 95)) : (char)rng_next(state);
    *out = (fu_snapshot_text){buffer, len};
}

static void render_snapshots(uint64_t *state, uint64_t rounds)
{
    static const char *const OUTCOMES[] = {"end", "truncated", "unreadable", "exited", "not_permitted"};
    for (uint64_t round = 0; round < rounds; round++) {
        char names[4][64];
        fu_snapshot_frame frames[8];
        fu_regs regs[8];
        fu_state_regs states[8];
        size_t count = rng_below(state, 8);
        for (size_t i = 0; i < count; i++) {
            regs[i].valid = (uint32_t)rng_next(state);
            for (unsigned r = 0; r < FU_WALK_REGISTERS; r++)
                regs[i].value[r] = rng_next(state);
            if (i && rng_below(state, 2)) {
                fu_state_regs_of_caller(&states[i - 1], &states[i]);
            } else {
                states[i].valid = (uint32_t)rng_next(state);
                for (unsigned r = 0; r < FU_STATE_REGISTERS; r++)
                    states[i].value[r] = rng_next(state);
            }
            frames[i] = (fu_snapshot_frame){.address = rng_next(state), .offset = rng_next(state),
                                            .registers = rng_below(state, 2) ? &regs[i] : NULL, .state = &states[i]};
            random_text(state, names[0], sizeof names[0], &frames[i].symbol);
            random_text(state, names[1], sizeof names[1], &frames[i].module);
        }
        fu_buffer escaped = {0}, out = {0};
        fu_snapshot_text raw_name;
        random_text(state, names[2], sizeof names[2], &raw_name);
        CHECK(fu_snapshot_escape_name((const uint8_t *)(raw_name.data ? raw_name.data : ""), raw_name.len, &escaped),
              "escape_name failed");
        fu_snapshot_text reason;
        random_text(state, names[3], sizeof names[3], &reason);
        fu_snapshot_thread thread = {
            .tid = (int64_t)rng_below(state, 1u << 22), .name = {(const char *)escaped.data, escaped.len},
            .outcome = OUTCOMES[rng_below(state, 5)], .fault_address = rng_below(state, 2) ? rng_next(state) : 0,
            .reason = reason.data ? reason : (fu_snapshot_text){"", 0}, .frames = frames, .frame_count = count};
        bool json = rng_below(state, 2);
        CHECK(fu_snapshot_head(7, json, &out) && (json ? fu_snapshot_thread_json(&thread, &out)
                                                       : fu_snapshot_thread_text(&thread, &out)) &&
                  fu_snapshot_tail(json, &out),
              "rendering failed");
        for (size_t i = 0; json && i < out.len; i++)
            CHECK((out.data[i] >= 0x20 && out.data[i] < 0x7f) || out.data[i] == 0x0a, "JSON byte 0x%02x", out.data[i]);
        free(escaped.data);
        free(out.data);
    }
}

/* A child that sleeps in two threads' worth of frames: the shell's sleep. */
static void backtrace_child(uint64_t *state)
{
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    usleep(100000);
    for (int round = 0; round < 20; round++) {
        fu_cli_request request = random_request(FU_CLI_BACKTRACE, state);
        request.pid = child;
        if (rng_below(state, 2)) {
            request.tids[request.tid_count++] = rng_below(state, 2) ? child : (int)rng_below(state, 1u << 22) + 1;
        }
        fu_buffer out = {0};
        int status = fu_cli_backtrace(&request, &out);
        CHECK(status == FU_CLI_NOT_SERVED || status == 0, "backtrace status %d", status);
        free(out.data);
        char path[64], text[512] = "";
        snprintf(path, sizeof path, "/proc/%d/status", (int)child);
        FILE *f = fopen(path, "r");
        CHECK(f != NULL, "the child is gone");
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = 0;
        CHECK(strstr(text, "TracerPid:\t0\n") != NULL, "the child is left traced");
        CHECK(strstr(text, "State:\tS") != NULL || strstr(text, "State:\tR") != NULL, "the child is left stopped");
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL), rounds = 200000;
    int first_file = argc;
    const char *core = NULL, *recording = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 < argc && strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--core") == 0)
            core = argv[i + 1];
        else if (i + 1 < argc && strcmp(argv[i], "--perf") == 0)
            recording = argv[i + 1];
        else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0)
            rounds = strtoull(argv[i + 1], NULL, 10);
        else {
            first_file = i;
            break;
        }
    }
    fuzz_install_failure_handlers();
    /* the caches: an empty directory (every table a miss: the readers run, nothing is served) */
    char cache[] = "/tmp/launcher_driver.XXXXXX";
    CHECK(mkdtemp(cache) != NULL, "mkdtemp");
    setenv("XDG_CACHE_HOME", cache, 1);
    printf("launcher_driver: seed %llu, %llu command lines\n", (unsigned long long)seed, (unsigned long long)rounds);
    uint64_t state = seed;
    char mutated[MAX_ARGS][16];
    size_t accepted = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        char *args[MAX_ARGS + 1];
        int count = 1 + (int)rng_below(&state, MAX_ARGS);
        args[0] = "fastunwind";
        for (int i = 1; i < count; i++) {
            const char *token = i == 1 && rng_below(&state, 4) ? TOKENS[rng_below(&state, 2)]
                                                               : TOKENS[rng_below(&state, TOKEN_COUNT)];
            if (rng_below(&state, 8) == 0) { /* a byte of the token changed, or the token cut */
                snprintf(mutated[i], sizeof mutated[i], "%s", token);
                size_t len = strlen(mutated[i]);
                if (len)
                    mutated[i][rng_below(&state, len)] = (char)(1 + rng_below(&state, 255));
                token = mutated[i];
            }
            args[i] = (char *)token;
        }
        args[count] = NULL;
        char label[64];
        snprintf(label, sizeof label, "command line %llu", (unsigned long long)round);
        fuzz_begin_input(NULL, 0, label);
        fu_cli_request request;
        if (fu_cli_parse(count, args, &request)) {
            check_request(&request);
            accepted++;
        }
    }
    printf("launcher_driver: %zu accepted, every one servable\n", accepted);
    for (int i = first_file; i < argc; i++) {
        read_modules(argv[i], &state);
        printf("launcher_driver: %s and %d mutants read\n", argv[i], ELF_MUTANTS);
    }
    render_snapshots(&state, rounds / 10);
    printf("launcher_driver: %llu snapshots rendered\n", (unsigned long long)(rounds / 10));
    cache_paths(&state);
    printf("launcher_driver: cache paths and keys under odd environments\n");
    needs_records(&state, rounds);
    printf("launcher_driver: %llu records of needs read\n", (unsigned long long)rounds);
    if (core) {
        each_mutant(core, "core", CORE_MUTANTS, 65536, &state, serve_core);
        printf("launcher_driver: %s and %d mutants read\n", core, CORE_MUTANTS);
    }
    if (recording) {
        each_mutant(recording, "recording", RECORDING_MUTANTS, 4096, &state, serve_recording);
        printf("launcher_driver: %s and %d mutants read\n", recording, RECORDING_MUTANTS);
    }
    backtrace_child(&state);
    printf("launcher_driver: a child backtraced, left running\n");
    rmdir(cache);
    return 0;
}
