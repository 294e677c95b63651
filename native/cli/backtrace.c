/* `fastunwind backtrace -p PID` served in C: live.py's snapshot (its maps, files, vDSO, one thread
 * stopped, copied and released at a time, walked while every thread runs), named and rendered as
 * stacks.py renders it. Whatever the Python path would word as an error (no such process, a tid
 * that is not a thread, no thread traceable) is left to it: fu_cli_backtrace returns
 * FU_CLI_NOT_SERVED before anything is written, and the Python CLI serves the command line.
 */
#define _GNU_SOURCE
#include "backtrace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher.h"
#include "live.h"
#include "stacks.h"

/* Most threads listed (/proc/PID/task) in one snapshot: the kernel's threads-max is of this order. */
#define MAX_THREADS (1u << 22)
/* The largest /proc/PID/maps read (65530 mappings of a few hundred bytes each). */
#define MAX_MAPS_BYTES (64u << 20)

static volatile sig_atomic_t interrupted;

static void on_signal(int signo) { interrupted = signo; }

/* A /proc file's bytes (NUL-terminated; its size in *len), or NULL. */
static char *read_proc(const char *path, size_t *len, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    fu_buffer text = {0};
    for (;;) {
        if (!fu_buffer_reserve(&text, 65536) || text.len > max) {
            free(text.data);
            close(fd);
            return NULL;
        }
        ssize_t n = read(fd, text.data + text.len, 65536);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(text.data);
            close(fd);
            return NULL;
        }
        if (n == 0)
            break;
        text.len += (size_t)n;
    }
    close(fd);
    if (!fu_buffer_reserve(&text, 1)) {
        free(text.data);
        return NULL;
    }
    text.data[text.len] = '\0';
    *len = text.len;
    return (char *)text.data;
}

static int by_value(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* live.py _threads: the process's tids sorted, or the ones asked for (each a thread of it). */
static int *threads(const fu_cli_request *request, size_t *count)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", request->pid);
    DIR *dir = opendir(path);
    if (!dir)
        return NULL;
    fu_buffer present = {0};
    struct dirent *entry;
    bool ok = true;
    while (ok && (entry = readdir(dir))) {
        char *end;
        long tid = strtol(entry->d_name, &end, 10);
        if (entry->d_name[0] == '.' || *end || tid <= 0)
            continue;
        int value = (int)tid;
        ok = present.len / sizeof value < MAX_THREADS && fu_buffer_append(&present, &value, sizeof value);
    }
    closedir(dir);
    int *tids = (int *)present.data;
    size_t n = present.len / sizeof(int);
    if (!ok || !n) {
        free(tids);
        return NULL;
    }
    qsort(tids, n, sizeof *tids, by_value);
    if (request->tid_count) {
        for (size_t i = 0; i < request->tid_count; i++)
            if (!bsearch(&request->tids[i], tids, n, sizeof *tids, by_value)) {
                free(tids);
                return NULL;
            }
        memcpy(tids, request->tids, request->tid_count * sizeof *tids);
        n = request->tid_count;
    }
    *count = n;
    return tids;
}

/* Whether the maps text holds a character Python's splitlines or split would treat otherwise
 * than a line feed and spaces do here (\r, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029). */
static bool has_other_separators(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\r' || c == '\v' || c == '\f' || c == '\t' || (c >= 0x1c && c <= 0x1f))
            return true;
        if (c == 0xc2 && i + 1 < len && (unsigned char)text[i + 1] == 0x85)
            return true;
        if (c == 0xe2 && i + 2 < len && (unsigned char)text[i + 1] == 0x80 &&
            ((unsigned char)text[i + 2] == 0xa8 || (unsigned char)text[i + 2] == 0xa9))
            return true;
    }
    return false;
}

/* One /proc/PID/maps line's fields (live.py / address_space.py split(maxsplit=5)). */
typedef struct maps_line {
    uint64_t start, end, pgoff, inode;
    const char *perms;
    size_t perms_len;
    char *path; /* NUL-terminated in place; "" if none */
    size_t path_len;
    int fields;
} maps_line;

static const char *skip_spaces(const char *p) { while (*p == ' ') p++; return p; }

static void parse_line(char *line, maps_line *out)
{
    memset(out, 0, sizeof *out);
    out->path = "";
    char *p = (char *)skip_spaces(line), *end;
    out->start = strtoull(p, &end, 16);
    if (end == p || *end != '-')
        return;
    out->end = strtoull(end + 1, &end, 16);
    if (*end != ' ')
        return;
    out->fields = 1;
    p = (char *)skip_spaces(end);
    out->perms = p;
    while (*p && *p != ' ')
        p++;
    out->perms_len = (size_t)(p - out->perms);
    if (!out->perms_len)
        return;
    out->fields = 2;
    p = (char *)skip_spaces(p);
    out->pgoff = strtoull(p, &end, 16);
    if (end == p || (*end && *end != ' '))
        return;
    p = (char *)skip_spaces(end);
    while (*p && *p != ' ') /* the device */
        p++;
    p = (char *)skip_spaces(p);
    out->inode = strtoull(p, &end, 10);
    if (end == p || (*end && *end != ' '))
        return;
    p = (char *)skip_spaces(end);
    if (!*p)
        return;
    out->fields = 6;
    out->path = p;
    out->path_len = strlen(p);
}

#define DELETED_SUFFIX " (deleted)"

/* live.py _Locator: where the process's file `path` is opened. */
static void locate(int pid, const char *path, uint64_t start, uint64_t end, uint64_t inode, char *out, size_t size)
{
    char rooted[4096];
    snprintf(rooted, sizeof rooted, "/proc/%d/root%s", pid, path);
    struct stat root_st, st;
    bool root_ok = stat(rooted, &root_st) == 0;
    const char *candidates[2] = {path, rooted};
    for (int i = 0; i < 2; i++)
        if (root_ok && stat(candidates[i], &st) == 0 && st.st_ino == inode && st.st_dev == root_st.st_dev &&
            st.st_ino == root_st.st_ino) {
            snprintf(out, size, "%s", candidates[i]);
            return;
        }
    snprintf(out, size, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)start, (unsigned long long)end);
}

/* The vDSO's image from the process's memory (address_space.py vdso_image); NULL: none. */
static fu_cli_image *vdso_image(int pid, const char *maps, fu_cli_image *out, bool *unserved)
{
    const char *line = maps;
    while (*line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        size_t trimmed = len;
        while (trimmed && line[trimmed - 1] == ' ')
            trimmed--;
        if (trimmed >= 6 && memcmp(line + trimmed - 6, "[vdso]", 6) == 0) {
            unsigned long long start, end;
            if (sscanf(line, "%llx-%llx", &start, &end) != 2 || end <= start || end - start > (1u << 20))
                break;
            char path[64];
            snprintf(path, sizeof path, "/proc/%d/mem", pid);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            uint8_t *copy = malloc(end - start);
            ssize_t n = fd >= 0 && copy ? pread(fd, copy, end - start, (off_t)start) : -1;
            if (fd >= 0)
                close(fd);
            if (n != (ssize_t)(end - start)) {
                free(copy);
                return NULL; /* unreadable: the Python path has no vDSO image either */
            }
            if (fu_cli_image_open(out, "", (fu_cli_bytes){.data = copy, .size = end - start, .owned = true}, true) == FU_CLI_MODULE_OK)
                return out;
            fu_cli_image_free(out);
            *unserved = true;
            return NULL;
        }
        if (!eol)
            break;
        line = eol + 1;
    }
    return NULL;
}

/* The state letter of /proc/.../stat, 'X' if the task is gone (live.py _state). */
static char task_state(int pid, int tid)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    char *text = read_proc(path, &len, 4096);
    if (!text)
        return 'X';
    char *paren = strrchr(text, ')');
    char state = 'X';
    if (paren) {
        const char *p = paren + 1;
        while (*p == ' ' || *p == '\n' || *p == '\t')
            p++;
        if (*p)
            state = *p;
    }
    free(text);
    return state;
}

/* The thread's name as live.py _thread_name shows it, appended to `out`. */
static bool thread_name(int pid, int tid, fu_buffer *out)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", pid, tid);
    char *comm = read_proc(path, &len, 4096);
    if (!comm)
        return true;
    bool ok = fu_snapshot_escape_name((const uint8_t *)comm, len, out);
    free(comm);
    return ok;
}

typedef struct snapshot {
    char *maps;
    fu_cli_mapping *mappings;
    size_t mapping_count;
    uint64_t *ranges;
    size_t range_count;
    fu_cli_images images;
    fu_cli_image vdso;
    fu_cli_space space;
    int *tids;
    size_t tid_count;
} snapshot;

static void snapshot_free(snapshot *s)
{
    fu_cli_images_free(&s->images);
    fu_cli_image_free(&s->vdso);
    fu_cli_space_free(&s->space);
    free(s->mappings);
    free(s->ranges);
    free(s->maps);
    free(s->tids);
}

/* Read the maps and open the modules (live.py address_space) with `synth`'s tables; false: the
 * Python path's. */
static bool open_address_space(int pid, unsigned synth, snapshot *s)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    if (!(s->maps = read_proc(path, &len, MAX_MAPS_BYTES)) || !len || memchr(s->maps, '\0', len) ||
        has_other_separators(s->maps, len))
        return false;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += s->maps[i] == '\n';
    s->mappings = calloc(lines, sizeof *s->mappings);
    s->ranges = calloc(2 * lines, sizeof *s->ranges);
    if (!s->mappings || !s->ranges || !fu_cli_images_init(&s->images) || lines > FU_CLI_MAX_MAPPINGS)
        return false;
    bool unserved = false;
    fu_cli_image *vdso = vdso_image(pid, s->maps, &s->vdso, &unserved);
    char *line = s->maps;
    while (line && *line && !unserved) {
        char *eol = strchr(line, '\n');
        if (eol)
            *eol = '\0';
        maps_line m;
        parse_line(line, &m);
        line = eol ? eol + 1 : NULL;
        if (m.fields >= 2 && m.perms_len >= 2 && m.perms[1] == 'w') {
            s->ranges[2 * s->range_count] = m.start;
            s->ranges[2 * s->range_count++ + 1] = m.end;
        }
        if (m.fields < 6 || !memchr(m.perms, 'x', m.perms_len))
            continue;
        bool is_vdso = strcmp(m.path, "[vdso]") == 0;
        if (!is_vdso && m.path[0] != '/')
            continue;
        fu_cli_mapping *mapping = &s->mappings[s->mapping_count++];
        *mapping = (fu_cli_mapping){.start = m.start, .end = m.end, .pgoff = m.pgoff, .path = m.path};
        fu_cli_image *image = vdso;
        if (!is_vdso) {
            size_t plen = strlen(m.path), slen = strlen(DELETED_SUFFIX);
            if (plen >= slen && strcmp(m.path + plen - slen, DELETED_SUFFIX) == 0)
                m.path[plen - slen] = '\0';
            char located[4200];
            locate(pid, m.path, m.start, m.end, m.inode, located, sizeof located);
            image = fu_cli_images_get(&s->images, located, &unserved);
        }
        mapping->path_len = strlen(mapping->path);
        uint64_t bias;
        if (image && fu_cli_image_bias(image, m.start, m.end, m.pgoff, &bias)) {
            mapping->image = image;
            mapping->bias = bias;
        }
    }
    if (unserved)
        return false;
    /* the stack bounds: writable mappings, sorted (live.py _stack_ranges) */
    for (size_t i = 1; i < s->range_count; i++)
        for (size_t j = i; j > 0 && s->ranges[2 * j] < s->ranges[2 * (j - 1)]; j--) {
            uint64_t a = s->ranges[2 * j], b = s->ranges[2 * j + 1];
            s->ranges[2 * j] = s->ranges[2 * (j - 1)];
            s->ranges[2 * j + 1] = s->ranges[2 * (j - 1) + 1];
            s->ranges[2 * (j - 1)] = a;
            s->ranges[2 * (j - 1) + 1] = b;
        }
    return fu_cli_space_init(&s->space, s->mappings, s->mapping_count, synth);
}

int fu_cli_backtrace(const fu_cli_request *request, fu_buffer *out)
{
    int pid = request->pid;
    if (pid == getpid()) {
        fu_cli_unserved("the launcher's own pid", NULL);
        return FU_CLI_NOT_SERVED;
    }
    /* Ctrl-C and SIGTERM (the Python path turns both into KeyboardInterrupt): noted, and acted on
     * between threads, every thread released (live.h); an exec of the Python CLI resets them */
    struct sigaction action = {.sa_handler = on_signal};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    snapshot s = {0};
    int status = FU_CLI_NOT_SERVED;
    if (!(s.tids = threads(request, &s.tid_count)) || !open_address_space(pid, request->synth, &s)) {
        fu_cli_unserved(s.tids ? "the process's modules or maps" : "the process's threads", NULL);
        snapshot_free(&s);
        return FU_CLI_NOT_SERVED;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    int mem_fd = open(path, O_RDONLY | O_CLOEXEC);
    fu_live_stacks bounds = {s.ranges, s.range_count, FU_LIVE_MAX_STACK};
    fu_buffer stack = {0}, name = {0};
    bool json = request->json, with_registers = request->registers || request->json;
    size_t not_permitted = 0, exited = 0;
    bool ok = fu_snapshot_head(pid, json, out);
    for (size_t i = 0; ok && i < s.tid_count && !interrupted; i++) {
        int tid = s.tids[i];
        fu_live_thread thread;
        stack.len = 0;
        if (!fu_live_capture_thread(pid, tid, mem_fd, &bounds, &stack, &thread)) {
            ok = false;
            break;
        }
        name.len = 0;
        ok = (!json || i == 0 || fu_snapshot_json_separator(out)) && thread_name(pid, tid, &name);
        fu_snapshot_text name_text = {name.data ? (const char *)name.data : "", name.len};
        if (!ok)
            break;
        if (thread.outcome != FU_LIVE_CAPTURED) {
            fu_live_outcome outcome = thread.outcome;
            /* ptrace refuses a thread that is exiting as it refuses a forbidden one (EPERM) */
            if (outcome == FU_LIVE_NOT_PERMITTED && strchr("ZX", task_state(pid, tid)))
                outcome = FU_LIVE_EXITED;
            not_permitted += outcome == FU_LIVE_NOT_PERMITTED;
            exited += outcome == FU_LIVE_EXITED;
            const char *reason = thread.error ? strerror(thread.error) : "";
            fu_snapshot_thread t = {.tid = tid, .name = name_text, .outcome = fu_live_outcome_name(outcome),
                                    .reason = {reason, strlen(reason)}};
            ok = json ? fu_snapshot_thread_json(&t, out) : fu_snapshot_thread_text(&t, out);
            continue;
        }
        fu_dump_memory memory = {stack.data + thread.stack_offset, thread.stack_address, thread.stack_size,
                                 &s.space.space};
        fu_reader reader = fu_dump_reader(&memory);
        bool complete;
        ok = fu_cli_render_walk(&s.space, &thread.regs, &thread.state, &reader, tid, name_text, json, with_registers,
                                out, &complete);
    }
    if (mem_fd >= 0)
        close(mem_fd);
    free(stack.data);
    free(name.data);
    if (interrupted) {
        fputs("fastunwind: interrupted\n", stderr);
        status = FU_CLI_INTERRUPTED;
    } else if (ok && not_permitted < s.tid_count && exited < s.tid_count && fu_snapshot_tail(json, out) &&
               !fu_cli_space_unserved(&s.space)) {
        status = 0;
    }
    if (status == FU_CLI_NOT_SERVED)
        fu_cli_unserved("every thread refused or gone", NULL);
    /* every thread refused, or gone: the Python path words why (nothing was written) */
    snapshot_free(&s);
    return status;
}
