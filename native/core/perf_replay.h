/* perf_replay: a recording's processes and address spaces over time, replayed in C without Python
 * per event (a Python loop over hackbench's 4,300 events cost 20 ms, python3's 18,000 ones 90 ms).
 *
 * Events are taken in the reader's time order. MMAP/MMAP2 of executable memory (plain MMAP records
 * are executable mappings only) add a mapping to the process; a new mapping removes every mapping it
 * overlaps, as mmap(2) does. COMM with the exec flag empties the process's mappings; FORK of a new
 * process (pid != ppid) copies the parent's mappings and name (threads share their process's).
 * Every sample gets its process's address space at that moment (a process first seen in a sample
 * starts empty and is counted in samples_without_process) and its thread's name (the last COMM of
 * the thread, else the process's name). Equal snapshots are one space: `spaces` lists each space's
 * mappings sorted by start, as indices into `mappings` (the mappings some space holds, in order of
 * first use), whose `file` indexes `files`: every executable mapping's file name with the build-id
 * its MMAP2 record carried, in order of first appearance. Anonymous executable memory (JIT code) of
 * process PID is named "/tmp/perf-PID.map", as perf names it (is_anonymous in perf_replay.c).
 *
 * A fu_replay keeps that state across the windows of a stream (perf_data.h, "Streaming"):
 * fu_replay_run takes the next window's events, and the results list only what is new since the
 * last fu_replay_reported (indices keep counting from the earlier lists). The replay keeps copies
 * of the names it holds, since a window's bytes are given back after it. The Python side is
 * py/py_perf_replay.c (replay_recording, Replay).
 */
#ifndef FASTUNWIND_PERF_REPLAY_H
#define FASTUNWIND_PERF_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "buffer.h"
#include "intern.h"
#include "perf_data.h"

/* No space or comm (a sample the event index does not list); ids are u32 below it. */
#define FU_REPLAY_NONE FU_INTERN_NONE

typedef struct fu_replay_file {
    fu_perf_string name;
    bool perf_map;       /* anonymous executable memory: named /tmp/perf-<perf_map_pid>.map */
    uint32_t perf_map_pid;
    bool has_build_id;
    uint8_t build_id_size;
    uint8_t build_id[20];
} fu_replay_file;

typedef struct fu_replay_mapping {
    uint64_t start, end, pgoff;
    uint32_t file;
} fu_replay_mapping;

typedef struct fu_replay_process {
    uint32_t pid;
    fu_perf_string comm;
    uint32_t *maps;   /* mapping ids sorted by start, non-overlapping (owned) */
    uint32_t map_count, map_cap;
    uint32_t space;   /* FU_REPLAY_NONE: changed since its space was last computed */
} fu_replay_process;

typedef struct fu_replay_thread_comm {
    uint32_t tid;
    fu_perf_string comm;
} fu_replay_thread_comm;

typedef struct fu_replay_space {
    size_t offset;    /* into the pool of mapping ids */
    uint32_t count;
} fu_replay_space;

/* Copies of the names the replay holds (chunks that never move). */
typedef struct fu_replay_name_chunk {
    struct fu_replay_name_chunk *next;
    size_t used, cap;
    char bytes[];
} fu_replay_name_chunk;
#define NAME_CHUNK_BYTES 65536

/* Records of each kind in growing arrays, each with its index set. */
typedef struct fu_replay {
    fu_buffer files, mappings, processes, thread_comms, spaces, space_pool, comm_names, names;
    fu_intern_set file_index, mapping_index, process_index, thread_comm_index, space_index, comm_name_index,
        name_index;
    fu_replay_name_chunk *chunks;
    uint64_t samples_without_process;
    /* what earlier feeds reported: mapping id -> its number in the results (FU_REPLAY_NONE: not yet) */
    fu_buffer renumbered;
    fu_buffer numbered; /* mapping ids by their number in the results */
    uint32_t used_mappings, reported_mappings, reported_spaces, reported_files, reported_comm_names;
    size_t reported_pool;
} fu_replay;

/* The records of `field` (files, mappings, spaces, comm_names: fu_perf_string) and their count. */
#define FU_REPLAY_RECORDS(r, field, type) ((type *)(r)->field.data)
#define FU_REPLAY_COUNT(r, field, type) ((uint32_t)((r)->field.len / sizeof(type)))

/* Replays pd's events in order into `r` (zeroed before the first window), writing each sample's
 * space and comm ids. Fails with FU_ERR_INVALID ("the recording's event index points past its
 * records", more samples than u32 ids) or FU_ERR_NOMEM. */
fu_status fu_replay_run(fu_replay *r, const fu_perf_data *pd, uint32_t *space_ids, uint32_t *comm_ids, fu_error *err);
/* Numbers the mappings that spaces added since the last fu_replay_reported hold, in first-use order:
 * renumbered[id] is a mapping's number, numbered[n] the mapping of number n. */
fu_status fu_replay_number_mappings(fu_replay *r, fu_error *err);
/* What the results have listed so far: the next ones list only what is newer. */
void fu_replay_reported(fu_replay *r);
void fu_replay_free(fu_replay *r);

#endif
