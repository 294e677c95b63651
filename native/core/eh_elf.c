/* eh_elf: the checks on a compiled unwind table's file before it is loaded (see eh_elf.h). */
#define _GNU_SOURCE
#include "eh_elf.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_file.h"
#include "mapped_file.h"

/* The checks of a mapped file's headers (core/elf_file.h reads them), or NULL. */
static const char *check_headers(const uint8_t *data, size_t size, char *why, size_t why_size)
{
    fu_elf elf;
    fu_error err = {0};
    if (size < 16 || memcmp(data, ELFMAG, SELFMAG) != 0) {
        snprintf(why, why_size, "not an ELF file (%zu bytes, no ELF header)", size);
        return why;
    }
    if (fu_elf_open(&elf, data, size, &err) != FU_OK) {
        snprintf(why, why_size, "truncated or corrupt: %s", err.message);
        return why;
    }
    if (elf.elf_class != 64 || elf.machine != EM_X86_64 || elf.type != ET_DYN) {
        snprintf(why, why_size, "not an x86-64 ELF shared object (ELF%u, machine %u, type %u)", elf.elf_class,
                 elf.machine, elf.type);
        return why;
    }
    if (elf.segment_count == 0 || elf.segment_count > FU_EH_ELF_MAX_PHDRS) {
        snprintf(why, why_size, "truncated or corrupt: %zu program headers", elf.segment_count);
        return why;
    }
    for (size_t i = 0; i < elf.segment_count; i++) {
        fu_elf_segment p = fu_elf_segment_at(&elf, i);
        const uint8_t *bytes;
        size_t length;
        if ((p.type == PT_LOAD || p.type == PT_DYNAMIC) && fu_elf_segment_bytes(&elf, &p, &bytes, &length, &err)) {
            snprintf(why, why_size, "truncated: segment %zu: %s", i, err.message);
            return why;
        }
    }
    return NULL;
}

/* fu_eh_elf_check_file on an open descriptor (not closed). */
static const char *check_descriptor(int fd, char *why, size_t why_size)
{
    const char *problem = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_size, "cannot stat: %s", strerror(errno));
        problem = why;
    } else if (st.st_size == 0) {
        problem = check_headers(NULL, 0, why, why_size);
    } else {
        fu_mapped_file mapped;
        fu_error err = {0};
        if (fu_mapped_file_open(&mapped, fd, (size_t)st.st_size, false, &err) != FU_OK) {
            snprintf(why, why_size, "cannot map: %s", err.message);
            problem = why;
        } else {
            problem = check_headers(mapped.data, mapped.size, why, why_size);
            if (fu_mapped_file_changed(&mapped)) {
                snprintf(why, why_size, "changed while read (truncated in place)");
                problem = why;
            }
            fu_mapped_file_close(&mapped);
        }
    }
    return problem;
}

const char *fu_eh_elf_check_file(const char *path, char *why, size_t why_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_size, "cannot open: %s", strerror(errno));
        return why;
    }
    const char *problem = check_descriptor(fd, why, why_size);
    close(fd);
    return problem;
}

/* The file's bytes in a memfd sealed against growing, shrinking and writing (eh_elf.h fu_eh_elf_load),
 * checked as fu_eh_elf_check_file checks the file: its descriptor, or -1 with `why` written. */
static int sealed_copy(const char *path, char *why, size_t why_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_size, "cannot open: %s", strerror(errno));
        return -1;
    }
    int copy = -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_size, "cannot stat: %s", strerror(errno));
        goto done;
    }
    if ((uint64_t)st.st_size > FU_EH_ELF_MAX_FILE_BYTES) {
        snprintf(why, why_size, "%lld bytes: above the bound of %u for a compiled table", (long long)st.st_size,
                 FU_EH_ELF_MAX_FILE_BYTES);
        goto done;
    }
    const char *base = strrchr(path, '/');
    char name[64];
    snprintf(name, sizeof name, "fastunwind-eh_elf:%s", base ? base + 1 : path);
    copy = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (copy < 0) {
        snprintf(why, why_size, "cannot make a private copy: memfd_create: %s", strerror(errno));
        goto done;
    }
    /* bounded by the size: every round copies at least a byte or ends the loop */
    off_t offset = 0;
    while (offset < st.st_size) {
        ssize_t n = sendfile(copy, fd, &offset, (size_t)(st.st_size - offset));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                snprintf(why, why_size, "changed while read (truncated in place: it ends at 0x%llx, not at its size "
                         "0x%llx)", (unsigned long long)offset, (unsigned long long)st.st_size);
            else
                snprintf(why, why_size, "cannot copy: %s", strerror(errno));
            goto fail;
        }
    }
    if (fcntl(copy, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        snprintf(why, why_size, "cannot seal the private copy: %s", strerror(errno));
        goto fail;
    }
    if (check_descriptor(copy, why, why_size))
        goto fail;
    goto done;
fail:
    close(copy);
    copy = -1;
done:
    close(fd);
    return copy;
}

void fu_hex(char *out, size_t out_size, const uint8_t *bytes, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 3 <= out_size; i++)
        k += (size_t)snprintf(out + k, out_size - k, "%02x", bytes[i]);
    out[k < out_size ? k : out_size - 1] = '\0';
}

const char *fu_eh_elf_status_name(int status)
{
    static const char *const names[FU_EH_ELF_STATUS_COUNT] = {
        "cfi", "signal", "no_info", "interpret", "register_unknown", "expression_error", "unreadable", "past_dump"};
    return status >= 0 && status < FU_EH_ELF_STATUS_COUNT ? names[status] : "?";
}

void fu_eh_elf_unload(fu_eh_elf_loaded *loaded)
{
    if (loaded->handle) {
        dlclose(loaded->handle);
        close(loaded->copy_fd);
    }
    memset(loaded, 0, sizeof *loaded);
}

const char *fu_eh_elf_load(const char *path, uint32_t key_kind, const uint8_t *key, size_t key_size,
                           uint32_t generator_version, bool check_sizes, uint64_t eh_frame_size, uint64_t debug_frame_size, fu_eh_elf_loaded *out,
                           char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    if (key_size > FU_EH_ELF_MAX_KEY) {
        snprintf(why, why_size, "a key of %zu bytes (at most %d)", key_size, FU_EH_ELF_MAX_KEY);
        return why;
    }
    int copy = sealed_copy(path, why, why_size);
    if (copy < 0)
        return why;
    char copy_path[64];
    snprintf(copy_path, sizeof copy_path, "/proc/self/fd/%d", copy);
    void *handle = dlopen(copy_path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *message = dlerror();
        snprintf(why, why_size, "dlopen failed: %s", message ? message : "?");
        close(copy);
        return why;
    }
    const fu_eh_elf_info *info = dlsym(handle, "fu_eh_elf_info");
    fu_eh_elf_loaded loaded = {.handle = handle, .copy_fd = copy};
    if (!info) {
        snprintf(why, why_size, "no fu_eh_elf_info symbol: not a compiled unwind table");
        goto fail;
    }
    /* the version first: an older object's info is shorter, and its other symbols may be missing */
    if (info->abi_version != FU_UNWIND_ABI_VERSION) {
        snprintf(why, why_size, "ABI version %u, this fastunwind uses %d", info->abi_version, FU_UNWIND_ABI_VERSION);
        goto fail;
    }
    loaded.step = (fu_eh_elf_step_fn)dlsym(handle, "fu_eh_elf_step");
    loaded.find = (fu_eh_elf_find_fn)dlsym(handle, "fu_eh_elf_find");
    loaded.bodies = (const fu_eh_elf_body_fn *)dlsym(handle, "fu_eh_elf_bodies");
    if (!loaded.step || !loaded.find || !loaded.bodies) {
        snprintf(why, why_size, "no %s symbol: not a compiled unwind table",
                 !loaded.step ? "fu_eh_elf_step" : !loaded.find ? "fu_eh_elf_find" : "fu_eh_elf_bodies");
        goto fail;
    }
    for (uint32_t b = 1; b <= info->body_count; b++)
        if (!loaded.bodies[b]) {
            snprintf(why, why_size, "body %u of %u is missing", b, info->body_count);
            goto fail;
        }
    if (info->generator_version != generator_version) {
        snprintf(why, why_size, "generator version %u, expected %u", info->generator_version, generator_version);
        goto fail;
    }
    if (info->key_kind != key_kind || info->key_size != (uint32_t)key_size || info->key_size > FU_EH_ELF_MAX_KEY ||
        memcmp(info->key, key, key_size) != 0) {
        char have[2 * FU_EH_ELF_MAX_KEY + 1], want[2 * FU_EH_ELF_MAX_KEY + 1];
        fu_hex(have, sizeof have, info->key, info->key_size <= FU_EH_ELF_MAX_KEY ? info->key_size : 0);
        fu_hex(want, sizeof want, key, key_size);
        snprintf(why, why_size, "built for key %u:%s, expected %u:%s (another build of the file)", info->key_kind, have,
                 key_kind, want);
        goto fail;
    }
    if (check_sizes && (info->eh_frame_size != eh_frame_size || info->debug_frame_size != debug_frame_size)) {
        snprintf(why, why_size, "built from other CFI sections than the file has now (a debug file added or removed?)");
        goto fail;
    }
    loaded.info = *info;
    *out = loaded;
    return NULL;
fail:
    dlclose(handle);
    close(copy);
    return why;
}
