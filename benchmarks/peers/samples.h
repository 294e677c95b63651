/* samples: what every peer harness shares: the .samples file written by
 * benchmarks/export_samples.py (its docstring is the format's definition), the ELF files of the
 * mappings opened once, bounded memory reads (stack dump, then file bytes), the timing and the
 * one-line JSON report.
 *
 * Memory model, the same for every peer, and the same as fastunwind's walker gets:
 *   1. an address inside [stack_address, stack_address + stack_size) reads the dump;
 *   2. else, an address inside a usable mapping's ELF file, located through the mapping's bias
 *      (svma = avma - bias) and the file's PT_LOAD headers, reads the file's bytes (perf reads the
 *      DSO file the same way: dso__data_read_addr);
 *   3. else it is unreadable.
 */
#ifndef BENCH_SAMPLES_H
#define BENCH_SAMPLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* fastunwind's core headers (the Makefile's -I): the registers (FU_WALK_REGISTERS, FU_REG_RBP,
 * FU_REG_RSP, FU_REG_RA: the IP), and perf's default callchain depth, first frame included
 * (FU_PERF_MAX_STACK, kernel.perf_event_max_stack), which every harness stops at as fastunwind does. */
#include "perf_walk.h"
#include "x86_64.h"

/* A file with more than this is not one export_samples.py wrote for a benchmark. */
#define BENCH_MAX_SPACES 100000
#define BENCH_MAX_MAPPINGS 100000
#define BENCH_MAX_SAMPLES 10000000
#define BENCH_MAX_SEGMENTS 64
#define BENCH_MAPPING_USABLE 1u

typedef struct bench_segment {
    uint64_t vaddr, filesz, offset; /* a PT_LOAD: svma range [vaddr, vaddr + filesz) at file offset */
} bench_segment;

/* One ELF file, mapped read-only once and shared by every mapping of it. */
typedef struct bench_image {
    char *path;
    int fd;
    const uint8_t *data;
    size_t size;
    uint16_t type; /* e_type: ET_EXEC or ET_DYN */
    bench_segment segments[BENCH_MAX_SEGMENTS];
    unsigned segment_count;
    uint64_t eh_frame_hdr_vaddr, eh_frame_hdr_size; /* 0 if absent */
    bool has_debug_frame;
} bench_image;

typedef struct bench_mapping {
    uint64_t start, end, pgoff, bias;
    uint32_t flags;
    char *path;
    bench_image *image; /* NULL unless BENCH_MAPPING_USABLE and the file opened */
} bench_mapping;

typedef struct bench_space {
    bench_mapping *mappings; /* sorted by start */
    uint32_t count;
} bench_space;

typedef struct bench_sample {
    uint32_t space, register_valid, perf_index, tid;
    uint64_t registers[FU_WALK_REGISTERS];
    uint64_t stack_address, stack_size;
    const uint8_t *stack;
} bench_sample;

typedef struct bench_set {
    bench_space *spaces;
    uint32_t space_count;
    bench_sample *samples;
    uint32_t sample_count;
    bench_image **images;
    uint32_t image_count;
    uint8_t *file; /* the whole .samples file; samples point into it */
    size_t file_size;
} bench_set;

/* Reads the file; on failure prints what and where to stderr and returns false. */
bool bench_load(const char *path, bench_set *set);
void bench_free(bench_set *set);

const bench_mapping *bench_find_mapping(const bench_space *space, uint64_t avma);
/* 8 bytes at avma from the sample's dump, then from the files (see above). */
bool bench_read_word(const bench_set *set, const bench_sample *sample, uint64_t avma, uint64_t *out);
/* 8 bytes at avma from a usable mapping's file only. */
bool bench_read_file_word(const bench_space *space, uint64_t avma, uint64_t *out);

uint64_t bench_now_ns(void);

/* Write BENCH_EVICT_BYTES of other memory, so that the first timed pass starts with the samples
 * out of the CPU caches, paged in but not cached, like fastunwind's first pass (bench_unwind.py
 * evicts the same way before it): the first pass then measures a cold unwinder on cold data. */
#define BENCH_EVICT_BYTES ((size_t)256 << 20)
/* ... in pieces of this size: one memset of it all streams past the caches (glibc's non-temporal
 * threshold is about 3/4 of the L3) and evicts nothing */
#define BENCH_EVICT_PIECE_BYTES ((size_t)64 << 10)
void bench_evict_caches(void);

/* Timings of the repetitions: total, first (the cold run, closest to real use) and best. */
typedef struct bench_passes {
    uint64_t total_ns, first_ns, best_ns;
    unsigned count;
} bench_passes;

void bench_passes_add(bench_passes *passes, uint64_t pass_ns);

/* Frames of every sample of one repetition, for the agreement check. */
typedef struct bench_frames {
    uint64_t *pcs;     /* sample_count * FU_PERF_MAX_STACK */
    uint32_t *counts;  /* per sample */
    uint32_t sample_count;
} bench_frames;

bool bench_frames_init(bench_frames *frames, uint32_t sample_count);
void bench_frames_free(bench_frames *frames);
/* One line per sample: perf_index, then the PCs in hex (the sampled IP, then return addresses). */
bool bench_frames_write(const bench_frames *frames, const bench_set *set, const char *path);

typedef struct bench_arguments {
    const char *samples_path;
    unsigned repeat;
    const char *frames_path; /* NULL: do not write */
    const char *mode;        /* harness-specific variant, or NULL */
} bench_arguments;

/* usage: NAME SAMPLES_FILE [REPEAT] [--frames FILE] [--mode MODE] */
bool bench_parse_arguments(int argc, char **argv, bench_arguments *arguments);

/* The JSON line on stdout. frames: every repetition's total; outcomes: a JSON object text or NULL. */
void bench_report(const char *tool, const bench_set *set, unsigned repeat, uint64_t frames, uint64_t ns_total,
                  const char *frames_path, const char *outcomes_json);

#endif
