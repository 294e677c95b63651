/* Files mapped for reading, guarded against being truncated under the mapping (docs/DESIGN.md,
 * "Files changed while mapped").
 *
 * A page of a file mapping that lies past the file's end once the file is truncated in place (cp over
 * a library, a build rewriting an .so, perf still writing a perf.data) raises SIGBUS when read. Every
 * file mapping fastunwind reads is opened here: it is registered in a fixed table of guarded ranges,
 * and the process-wide SIGBUS handler (fu_mapped_file_guard_install, once at start) replaces a
 * faulting page of a registered range by a page of zeros, marks the range changed and returns, so
 * the interrupted read goes on with zeros. Each operation over a mapping asks once, when it is done,
 * whether its file changed (fu_mapped_file_check), and then fails with FU_ERR_FILE_CHANGED instead of
 * answering from the zeros. A SIGBUS outside the registered ranges goes to the handler that was there
 * before (Python's faulthandler) or the default action: a real bug still crashes. A handler installed
 * over the guard later (faulthandler.enable() after the import) is found by fu_mapped_file_guard_refresh,
 * when a mapping is opened or an operation starts, and the guard is put back in front of it, handing
 * it what the guard does not own.
 */
#ifndef FASTUNWIND_MAPPED_FILE_H
#define FASTUNWIND_MAPPED_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Mappings guarded at once. One more is read into memory instead (fu_mapped_file_open): correct, at
 * the cost of a copy. A process holds one per open module image, perf.data, cached table or core. */
#define FU_MAPPED_FILE_MAX_GUARDED 4096

/* Handlers the guard hands on to, at most: the one it found at install, then each one installed over it
 * that it put itself back in front of. Past the bound, a handler installed over the guard stays in
 * front of it (a cut file is then fatal, as without the guard). */
#define FU_MAPPED_FILE_MAX_CHAIN 8

typedef struct fu_mapped_file {
    const uint8_t *data; /* the file's bytes, read-only; NULL when closed */
    size_t size;
    int guard; /* 1 + its range's index in the guard's table; 0: none (read into memory, or closed) */
} fu_mapped_file;

/* Install the SIGBUS handler, once per process (later calls do nothing); it hands every fault it does
 * not own to the handler installed before it. FU_ERR_INVALID if sigaction refuses. */
fu_status fu_mapped_file_guard_install(fu_error *err);

/* Put the guard back in front of SIGBUS's handler if another was installed over it since: the guard
 * then hands that handler the faults it does not own, and what that handler hands back goes on to the
 * handlers before it (mapped_file.c, the chain). One sigaction query when the guard is in front.
 * Whether it was put back. Called by fu_mapped_file_open; the Python side calls it when an operation
 * starts (_core.guard_mapped_files). */
bool fu_mapped_file_guard_refresh(void);

/* Map `size` bytes (the file's size, above 0) of the regular file `fd` read-only and guard them;
 * `populate` maps every page at once (MAP_POPULATE). With the table full, or no guard installed, the
 * bytes are read into memory instead. FU_ERR_INVALID (mmap's or read's reason), FU_ERR_FILE_CHANGED
 * (a copy that ends before `size`), FU_ERR_NOMEM. */
fu_status fu_mapped_file_open(fu_mapped_file *file, int fd, size_t size, bool populate, fu_error *err);

/* Whether a page of the file was replaced by zeros since it was opened (it was truncated under us):
 * one load, for the end of an operation. */
bool fu_mapped_file_changed(const fu_mapped_file *file);

/* Pages replaced by zeros in this process so far, over every guarded file: a whole command's check. */
uint64_t fu_mapped_file_changes(void);

/* FU_OK, or FU_ERR_FILE_CHANGED naming `name` when the file changed. */
fu_status fu_mapped_file_check(const fu_mapped_file *file, const char *name, fu_error *err);

/* Drop the mapping's pages from memory (MADV_DONTNEED: a later read maps them again from the page
 * cache); nothing for bytes read into memory. */
void fu_mapped_file_release_pages(const fu_mapped_file *file);

/* Unguard and unmap (a copy too). Idempotent. */
void fu_mapped_file_close(fu_mapped_file *file);

#endif
