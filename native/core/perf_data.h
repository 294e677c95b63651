/* perf_data: the perf.data reader's C interface (tools/perf/Documentation/perf.data-file-format.txt,
 * include/uapi/linux/perf_event.h). The walker consumes fu_perf_sample directly, without Python.
 *
 * All pointers point into the caller's buffer of the file (or of a decompressed PERF_RECORD_COMPRESSED
 * payload owned by the fu_perf_data), which must outlive the fu_perf_data.
 *
 * Two layouts are read (perf.data-file-format.txt, "perf.data format" and "Pipe-mode data"):
 *
 *   file mode                               pipe mode (perf record -o -)
 *   +---------------------------+           +---------------------------+
 *   | perf_file_header (104 B)  |           | magic "PERFILE2", size=16 |
 *   |  attrs/data sections,     |           +---------------------------+
 *   |  feature bitmap           |           | HEADER_ATTR, HEADER_FEATURE|
 *   +---------------------------+           | records ... (to the end)  |
 *   | ids of each attr          |           +---------------------------+
 *   | attrs: {attr, ids section}|
 *   | data: records ...         |
 *   | feature section table     |
 *   | feature sections          |
 *   +---------------------------+
 *
 * Event order: records are kept in file order while parsing, then every record the reader delivers
 * (SAMPLE, MMAP/MMAP2, COMM, FORK, EXIT) is put in one index sorted by time with a *stable* sort, so
 * records with equal times keep their file order. perf script orders by time within FINISHED_ROUND
 * windows (util/ordered-events.c); a stable global sort by time gives the same sequence whenever perf
 * did not have to deliver a late event out of order. A record without a time (no PERF_SAMPLE_TIME,
 * or sample_id_all off) sorts at the time of the record before it in the file. The samples array is
 * in that same time order: sample i is the i-th sample delivered.
 */
#ifndef FASTUNWIND_PERF_DATA_H
#define FASTUNWIND_PERF_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

/* The perf reader's failures are reported through fu_error with FU_ERR_PERF_DATA (error.h); the
 * message names the file offset in hex. */

/* perf_event.h, enum perf_callchain_context: markers in a callchain, the context of what follows
 * (PERF_CONTEXT_MAX and above); and where the kernel's half of the address space starts. */
#define FU_PERF_CONTEXT_USER ((uint64_t)-512)
#define FU_PERF_CONTEXT_MAX ((uint64_t)-4095)
#define FU_PERF_KERNEL_START ((uint64_t)1 << 63)

/* ---- bounds on input-driven work (each has a named error) ---------------------------------- */

/* Events (attrs) in one file. perf record opens one attr per -e; a group of 64 is already large. */
#define FU_PERF_MAX_ATTRS 4096
/* Event ids over all attrs (one per attr per CPU or per inherited thread): `perf record -a` with 100
 * events on 256 CPUs has 25600. Each costs 32 bytes of lookup table. */
#define FU_PERF_MAX_IDS (1u << 22)
/* perf_event_attr.size: the kernel refuses anything above a page (perf_copy_attr); 6.x uses 136. */
#define FU_PERF_MAX_ATTR_SIZE 4096
/* Bytes of decompressed PERF_RECORD_COMPRESSED data per file, unless the caller sets another bound.
 * perf record -z reaches ratios of 10-30 on DWARF stacks; 4 GiB covers a ~200 MiB compressed file. */
#define FU_PERF_DEFAULT_MAX_DECOMPRESSED ((uint64_t)4 << 30)
/* Strings (file names, comm, cmdline words, event names) are cut to this many bytes. */
#define FU_PERF_MAX_STRING 4096

/* PERF_SAMPLE_* bits (enum perf_event_sample_format). */
enum {
    FU_PERF_SAMPLE_IP = 1u << 0, FU_PERF_SAMPLE_TID = 1u << 1, FU_PERF_SAMPLE_TIME = 1u << 2,
    FU_PERF_SAMPLE_ADDR = 1u << 3, FU_PERF_SAMPLE_READ = 1u << 4, FU_PERF_SAMPLE_CALLCHAIN = 1u << 5,
    FU_PERF_SAMPLE_ID = 1u << 6, FU_PERF_SAMPLE_CPU = 1u << 7, FU_PERF_SAMPLE_PERIOD = 1u << 8,
    FU_PERF_SAMPLE_STREAM_ID = 1u << 9, FU_PERF_SAMPLE_RAW = 1u << 10,
    FU_PERF_SAMPLE_BRANCH_STACK = 1u << 11, FU_PERF_SAMPLE_REGS_USER = 1u << 12,
    FU_PERF_SAMPLE_STACK_USER = 1u << 13, FU_PERF_SAMPLE_WEIGHT = 1u << 14,
    FU_PERF_SAMPLE_DATA_SRC = 1u << 15, FU_PERF_SAMPLE_IDENTIFIER = 1u << 16,
    FU_PERF_SAMPLE_TRANSACTION = 1u << 17, FU_PERF_SAMPLE_REGS_INTR = 1u << 18,
    FU_PERF_SAMPLE_PHYS_ADDR = 1u << 19, FU_PERF_SAMPLE_AUX = 1u << 20, FU_PERF_SAMPLE_CGROUP = 1u << 21,
    FU_PERF_SAMPLE_DATA_PAGE_SIZE = 1u << 22, FU_PERF_SAMPLE_CODE_PAGE_SIZE = 1u << 23,
    FU_PERF_SAMPLE_WEIGHT_STRUCT = 1u << 24
};

/* read_format bits (enum perf_event_read_format). */
enum {
    FU_PERF_FORMAT_TOTAL_TIME_ENABLED = 1u << 0, FU_PERF_FORMAT_TOTAL_TIME_RUNNING = 1u << 1,
    FU_PERF_FORMAT_ID = 1u << 2, FU_PERF_FORMAT_GROUP = 1u << 3, FU_PERF_FORMAT_LOST = 1u << 4
};

/* branch_sample_type bits that change the sample layout. */
#define FU_PERF_SAMPLE_BRANCH_HW_INDEX (1ull << 17)
#define FU_PERF_SAMPLE_BRANCH_COUNTERS (1ull << 19) /* Linux 6.8: u64 cntr[nr] after the entries */

/* Record types (enum perf_event_type, and perf's user types from tools/lib/perf/include/perf/event.h). */
enum {
    FU_PERF_RECORD_MMAP = 1, FU_PERF_RECORD_LOST = 2, FU_PERF_RECORD_COMM = 3, FU_PERF_RECORD_EXIT = 4,
    FU_PERF_RECORD_THROTTLE = 5, FU_PERF_RECORD_UNTHROTTLE = 6, FU_PERF_RECORD_FORK = 7,
    FU_PERF_RECORD_READ = 8, FU_PERF_RECORD_SAMPLE = 9, FU_PERF_RECORD_MMAP2 = 10,
    FU_PERF_RECORD_HEADER_ATTR = 64, FU_PERF_RECORD_HEADER_EVENT_TYPE = 65,
    FU_PERF_RECORD_HEADER_TRACING_DATA = 66, FU_PERF_RECORD_HEADER_BUILD_ID = 67,
    FU_PERF_RECORD_FINISHED_ROUND = 68, FU_PERF_RECORD_ID_INDEX = 69, FU_PERF_RECORD_AUXTRACE_INFO = 70,
    FU_PERF_RECORD_AUXTRACE = 71, FU_PERF_RECORD_AUXTRACE_ERROR = 72, FU_PERF_RECORD_THREAD_MAP = 73,
    FU_PERF_RECORD_CPU_MAP = 74, FU_PERF_RECORD_STAT_CONFIG = 75, FU_PERF_RECORD_STAT = 76,
    FU_PERF_RECORD_STAT_ROUND = 77, FU_PERF_RECORD_EVENT_UPDATE = 78, FU_PERF_RECORD_TIME_CONV = 79,
    FU_PERF_RECORD_HEADER_FEATURE = 80, FU_PERF_RECORD_COMPRESSED = 81, FU_PERF_RECORD_FINISHED_INIT = 82
};

/* header.misc bits whose meaning depends on the record type (perf_event.h). */
#define FU_PERF_RECORD_MISC_CPUMODE_MASK 0x7
#define FU_PERF_RECORD_MISC_COMM_EXEC (1u << 13)      /* COMM */
#define FU_PERF_RECORD_MISC_MMAP_BUILD_ID (1u << 14)  /* MMAP2: build-id instead of maj/min/ino */
#define FU_PERF_RECORD_MISC_BUILD_ID_SIZE (1u << 15)  /* HEADER_BUILD_ID: the size byte is valid */

/* Feature bits of the file header (tools/perf/util/header.h). */
enum {
    FU_PERF_HEADER_BUILD_ID = 2, FU_PERF_HEADER_CMDLINE = 11, FU_PERF_HEADER_EVENT_DESC = 12,
    FU_PERF_HEADER_SAMPLE_TIME = 21, FU_PERF_HEADER_COMPRESSED = 27, FU_PERF_HEADER_FEAT_BITS = 256
};

/* One PERF_RECORD_SAMPLE, decoded. Absent fields are 0 / NULL (see `present`, PERF_SAMPLE_* bits),
 * except pid/tid/cpu which are UINT32_MAX (perf's -1) and period, which is the attr's sample_period
 * when PERF_SAMPLE_PERIOD is not sampled (what perf script prints). */
typedef struct fu_perf_sample {
    uint64_t present;          /* the attr's sample_type */
    uint32_t attr_index;       /* which event (index into the file's attrs) */
    uint16_t misc;             /* header.misc: PERF_RECORD_MISC_USER / _KERNEL / ... */
    uint64_t file_offset;      /* of the record in the file (for messages) */
    uint64_t ip;
    uint32_t pid, tid;
    uint64_t time;
    uint64_t addr, id, stream_id, period;
    uint32_t cpu;
    const uint64_t *callchain; /* PERF_SAMPLE_CALLCHAIN: entries, PERF_CONTEXT_* markers included */
    uint64_t callchain_count;
    uint64_t regs_abi;         /* PERF_SAMPLE_REGS_ABI_NONE (0) / _32 / _64 */
    uint64_t regs_mask;        /* the attr's sample_regs_user */
    const uint8_t *regs;       /* popcount(regs_mask) u64 values (unaligned: read with memcpy) */
    const uint8_t *stack;      /* PERF_SAMPLE_STACK_USER: the dumped bytes, starting at the user sp */
    uint64_t stack_size;       /* dyn_size when given (bytes actually valid), else the dumped size */
    /* ---- added fields: everything else a sample can carry, in the kernel's order ---- */
    uint64_t stack_dump_size;  /* the dumped size (the `size` field; stack_size <= this) */
    uint32_t index;            /* position in the time-ordered samples array */
    uint32_t compressed;       /* 1 if the record came out of a PERF_RECORD_COMPRESSED stream;
                                  file_offset is then the COMPRESSED record's offset */
    /* PERF_SAMPLE_READ: the raw read_format block (unaligned u64s) and its decoded head */
    const uint8_t *read;
    uint64_t read_size;        /* bytes */
    uint64_t read_format;      /* the attr's read_format */
    uint64_t read_value_count; /* GROUP: nr; otherwise 1 */
    uint64_t time_enabled, time_running;
    /* PERF_SAMPLE_RAW */
    const uint8_t *raw;
    uint32_t raw_size;
    /* PERF_SAMPLE_BRANCH_STACK: nr entries of {from, to, flags} (unaligned u64s) */
    uint64_t branch_count;
    uint64_t branch_hw_index;  /* with PERF_SAMPLE_BRANCH_HW_INDEX, else UINT64_MAX (perf's -1ULL) */
    const uint8_t *branches;
    const uint8_t *branch_counters; /* PERF_SAMPLE_BRANCH_COUNTERS: nr u64s, else NULL */
    uint64_t weight;           /* PERF_SAMPLE_WEIGHT or _WEIGHT_STRUCT (the u64 as stored) */
    uint64_t data_src, transaction;
    uint64_t intr_regs_abi, intr_regs_mask;
    const uint8_t *intr_regs;  /* popcount(intr_regs_mask) u64s */
    uint64_t phys_addr, cgroup, data_page_size, code_page_size;
    const uint8_t *aux;
    uint64_t aux_size;
} fu_perf_sample;

/* The value of perf register `reg` in a sample; false if not sampled (or no user regs). */
bool fu_perf_sample_reg(const fu_perf_sample *sample, unsigned reg, uint64_t *value);
/* The same for PERF_SAMPLE_REGS_INTR. */
bool fu_perf_sample_intr_reg(const fu_perf_sample *sample, unsigned reg, uint64_t *value);

/* ---- attrs (events) ----------------------------------------------------------------------------- */

typedef struct fu_perf_attr {
    /* struct perf_event_attr, fields past the stated size are 0 */
    uint32_t type, size;
    uint64_t config, sample_period, sample_type, read_format, flags;
    uint32_t wakeup_events, bp_type;
    uint64_t config1, config2, branch_sample_type, sample_regs_user;
    uint32_t sample_stack_user;
    int32_t clockid;
    uint64_t sample_regs_intr;
    uint32_t aux_watermark;
    uint16_t sample_max_stack;
    uint32_t aux_sample_size;
    uint64_t sig_data, config3;
    /* decoded flags bits */
    bool freq, sample_id_all;
    uint64_t *ids;             /* owned */
    uint64_t id_count;
    char *name;                /* owned; from HEADER_EVENT_DESC or EVENT_UPDATE, NULL if unknown */
    uint64_t file_offset;
} fu_perf_attr;

/* ---- side-band records ---------------------------------------------------------------------------- */

typedef enum fu_perf_event_kind {
    FU_PERF_EVENT_SAMPLE = 0, FU_PERF_EVENT_MMAP = 1, FU_PERF_EVENT_COMM = 2, FU_PERF_EVENT_FORK = 3,
    FU_PERF_EVENT_EXIT = 4
} fu_perf_event_kind;

/* What sample_id_all appends to a non-sample record (struct sample_id): absent fields as in
 * fu_perf_sample (pid/tid/cpu UINT32_MAX, others 0); `present` is the attr's sample_type restricted
 * to TID|TIME|ID|STREAM_ID|CPU|IDENTIFIER, or 0 without sample_id_all. */
typedef struct fu_perf_sample_id {
    uint64_t present;
    uint32_t pid, tid;
    uint64_t time, id, stream_id;
    uint32_t cpu;
    uint32_t attr_index;
} fu_perf_sample_id;

/* MMAP and MMAP2 (both variants). Strings point into the file (or decompressed) bytes and are not
 * NUL-terminated: use the length. */
typedef struct fu_perf_mmap {
    uint64_t file_offset;
    uint16_t misc;
    bool is_mmap2, has_build_id;
    uint32_t pid, tid;
    uint64_t start, length, pgoff;
    uint32_t maj, min;         /* MMAP2 without MISC_MMAP_BUILD_ID */
    uint64_t ino, ino_generation;
    uint8_t build_id_size;     /* MMAP2 with MISC_MMAP_BUILD_ID (at most 20) */
    uint8_t build_id[20];
    uint32_t prot, flags;      /* MMAP2 */
    const char *filename;
    uint32_t filename_len;
    fu_perf_sample_id sample_id;
} fu_perf_mmap;

typedef struct fu_perf_comm {
    uint64_t file_offset;
    uint16_t misc;
    bool exec;                 /* PERF_RECORD_MISC_COMM_EXEC */
    uint32_t pid, tid;
    const char *comm;
    uint32_t comm_len;
    fu_perf_sample_id sample_id;
} fu_perf_comm;

/* FORK and EXIT share a layout. */
typedef struct fu_perf_task {
    uint64_t file_offset;
    uint16_t misc;
    bool is_exit;
    uint32_t pid, ppid, tid, ptid;
    uint64_t time;             /* the record's own time field */
    fu_perf_sample_id sample_id;
} fu_perf_task;

/* Where a record sits: its offset in the recording's bytes, or with FU_PERF_POSITION_DECOMPRESSED
 * set, in the decompressed stream of PERF_RECORD_COMPRESSED payloads. A stream releases the bytes
 * below its pending records' positions (see "Streaming" below). */
#define FU_PERF_POSITION_DECOMPRESSED ((uint64_t)1 << 63)

/* One entry of the time-ordered index. */
typedef struct fu_perf_event {
    uint64_t time;             /* the sort key (see the top of this file) */
    uint64_t position;         /* of the record (FU_PERF_POSITION_DECOMPRESSED: in the stream) */
    uint32_t index;            /* into samples / mmaps / comms / tasks */
    uint8_t kind;              /* fu_perf_event_kind */
} fu_perf_event;

typedef struct fu_perf_build_id {
    uint64_t file_offset;
    uint16_t misc;
    int32_t pid;
    uint8_t size;              /* 20 unless MISC_BUILD_ID_SIZE said otherwise */
    uint8_t build_id[20];
    const char *filename;
    uint32_t filename_len;
} fu_perf_build_id;

/* A string kept as a (pointer, length) into the file. */
typedef struct fu_perf_string {
    const char *data;
    uint32_t len;
} fu_perf_string;

/* A block of aligned copies of u64 arrays that sat at unaligned addresses in the input (see
 * aligned_words in perf_data.c); fu_perf_data owns a list of them. */
struct fu_perf_block {
    struct fu_perf_block *next;
    size_t used, cap;  /* in u64 words */
    uint64_t words[];
};

/* Options; zeroes mean the defaults. */
typedef struct fu_perf_options {
    uint64_t max_decompressed; /* 0: FU_PERF_DEFAULT_MAX_DECOMPRESSED */
} fu_perf_options;

typedef struct fu_perf_stats {
    uint64_t records;          /* records seen, compressed ones included */
    uint64_t compressed_records;
    uint64_t decompressed_bytes;
    uint64_t skipped_records;  /* known but unused, or unknown types skipped by their size */
    uint64_t unknown_id_samples; /* samples whose id matches no attr (dropped, as perf does) */
    uint64_t lost;             /* sum of PERF_RECORD_LOST.lost */
    uint64_t finished_rounds;
} fu_perf_stats;

/* A recording cut short: perf record killed before it rewrote the header (perf 6.1 warns "The
 * file's data size field is 0 which is unexpected. Was the 'perf record' command properly
 * terminated?"), a truncated copy (head -c, a full disk), or a pipe stream that ends inside a record.
 * Like perf, the reader then takes the records up to the file's end, treats feature sections that
 * lie outside the file as absent, and drops an incomplete last record (never reading past it).
 * `note` says what was found and where in one line ("" for a whole recording). */
typedef struct fu_perf_cut {
    bool unterminated;         /* file mode: the header's data size is 0 */
    bool truncated;            /* file mode: the header's data section runs past the file's end */
    uint64_t declared_data_end; /* data offset + the header's data size, when truncated */
    uint64_t dropped_offset;   /* file offset of the incomplete record dropped at the end */
    uint64_t dropped_present;  /* its bytes in the file (0: nothing dropped) */
    uint64_t dropped_size;     /* its header's size, 0 if the header itself is incomplete */
    uint64_t dropped_stream_bytes; /* bytes of a compressed stream's incomplete last record */
    /* feature bits the header announces whose section lies outside the file (absent) */
    uint64_t missing_features[FU_PERF_HEADER_FEAT_BITS / 64];
    char note[384];
} fu_perf_cut;

typedef struct fu_perf_data {
    const uint8_t *data;       /* the caller's bytes */
    uint64_t size;
    bool pipe_mode;
    uint64_t data_offset, data_size; /* the data section (pipe mode: after the 16-byte header) */
    uint64_t feature_bits[FU_PERF_HEADER_FEAT_BITS / 64];
    fu_perf_attr *attrs;
    uint32_t attr_count, attr_cap;
    fu_perf_sample *samples;   /* time order */
    size_t sample_count, sample_cap;
    fu_perf_mmap *mmaps;       /* file order */
    size_t mmap_count, mmap_cap;
    fu_perf_comm *comms;
    size_t comm_count, comm_cap;
    fu_perf_task *tasks;
    size_t task_count, task_cap;
    fu_perf_event *events;     /* time order */
    size_t event_count, event_cap;
    fu_perf_build_id *build_ids;
    size_t build_id_count, build_id_cap;
    fu_perf_string *cmdline;
    uint32_t cmdline_count;
    uint8_t *decompressed;     /* the concatenated output of every COMPRESSED record (owned: an
                                  anonymous mapping of decompressed_mapped bytes, see perf_data.c) */
    uint64_t decompressed_size;
    uint64_t decompressed_mapped;
    struct fu_perf_block *aligned; /* owned copies of misaligned callchains (see perf_data.c) */
    uint32_t compression_type, compression_level, compression_mmap_len; /* HEADER_COMPRESSED */
    uint64_t first_sample_time, last_sample_time; /* HEADER_SAMPLE_TIME (perf record's; 0 when absent) */
    fu_perf_stats stats;
    fu_perf_cut cut;
    /* A window of a stream (fu_perf_stream_next): attrs, build-ids, cmdline, the decompressed
     * bytes and the id table are the stream's, lent; only the record arrays are the window's. */
    bool borrowed_header;
    struct fu_perf_block *kept_records; /* owned copies of pipe-mode header records (streams) */
    /* id -> attr lookup: open addressing, filled as attrs arrive (the first attr listing an id wins) */
    struct fu_perf_id_entry *id_map;
    size_t id_map_count, id_map_cap;  /* cap: a power of two, or 0 */
} fu_perf_data;

/* Parse a whole recording. On failure err names the file offset and the problem; `pd` is left
 * freeable. `data` must stay valid until fu_perf_data_free. */
fu_status fu_perf_data_parse(fu_perf_data *pd, const uint8_t *data, uint64_t size,
                             const fu_perf_options *options, fu_error *err);
void fu_perf_data_free(fu_perf_data *pd);
const char *fu_perf_record_name(uint32_t type);

/* ---- Streaming ----------------------------------------------------------------------------------
 *
 * A recording read window by window, in bounded memory whatever its length: a regular file is
 * mapped and the pages behind the decoder are dropped from the process (MADV_DONTNEED: the page
 * cache keeps them); a pipe is read into a reserved, never-moving region whose consumed pages are
 * freed the same way; decompressed bytes likewise. Records are decoded in file order by the same
 * functions as fu_perf_data_parse and queued; at a FINISHED_ROUND, once the queue holds at least
 * `window_bytes` of records, the queued records with a time up to the largest time seen before the
 * previous FINISHED_ROUND are delivered as one window, sorted by time with the same stable sort:
 * the rule of perf's ordered-events queue (util/ordered-events.c, OE_FLUSH__ROUND: perf record
 * writes a FINISHED_ROUND after each pass over the per-CPU buffers, so no later record is older
 * than what the round before last held). The concatenated windows are then the whole-file order
 * unless a record arrives older than a delivered one (counted in `out_of_order`; perf warns about
 * the same records and delivers them late, as the stream does). At the end, everything queued is
 * delivered. A window is an fu_perf_data holding only its records (samples, side-band, events, in
 * time order); its pointers stay valid until the next call to fu_perf_stream_next. */

/* What a pipe can stream through the reserved region: address space only (MAP_NORESERVE), pages
 * are freed behind the decoder. */
#define FU_PERF_STREAM_MAX_BYTES ((uint64_t)1 << 40)
/* Bytes of records a window holds at least (the last excepted, and windows end at a FINISHED_ROUND):
 * the recording's bytes in memory are about three windows (the one being unwound, the next being cut
 * ahead, the queue behind). Measured on a 436 MB recording (perf-script, peak RSS and time): 2 MiB
 * 48 MB, 4 MiB 53 MB, 8 MiB 70 MB, 16 MiB 91 MB, 64 MiB 233 MB, the time within noise from 4 MiB on
 * (about 0.1 ms of Python per window); below, windows are as short as perf record's rounds. */
#define FU_PERF_DEFAULT_WINDOW_BYTES ((uint64_t)8 << 20)
/* Bytes read from a pipe at a time. */
#define FU_PERF_STREAM_READ_BYTES ((uint64_t)1 << 20)

typedef struct fu_perf_stream fu_perf_stream;

/* Start reading the recording on `fd` (a regular file, mapped, or a pipe, read), decoding its
 * header into `pd` (attrs, features; the pending records live there too). `window_bytes`: the
 * least bytes of records a window holds (0: FU_PERF_DEFAULT_WINDOW_BYTES). The fd is not closed. */
fu_status fu_perf_stream_open(fu_perf_stream **stream, fu_perf_data *pd, int fd, uint64_t window_bytes,
                              const fu_perf_options *options, fu_error *err);
/* The next window into `window` (zeroed by the caller, freed with fu_perf_data_free); *done with
 * nothing delivered at the end of the recording. FU_ERR_FILE_CHANGED when the recording was truncated
 * in place while this window or the last was read (mapped_file.h). */
fu_status fu_perf_stream_next(fu_perf_stream *stream, fu_perf_data *window, bool *done, fu_error *err);
/* FU_ERR_FILE_CHANGED when the recording's file was truncated under its mapping since it was opened
 * (mapped_file.h: what was read past the cut was zeros); for the end of the work on a window, before
 * its output. fu_perf_stream_next asks it for every window it cuts. */
fu_status fu_perf_stream_check(const fu_perf_stream *stream, fu_error *err);
/* Cut each next window on a thread of its own while the caller works on the last (off by default).
 * Then the stream's header (attrs, build-ids) may change under the caller until fu_perf_stream_wait. */
void fu_perf_stream_decode_ahead(fu_perf_stream *stream, bool on);
/* Leave out MMAP2 records of memory that is not executable (counted as skipped; their times still
 * order the records without one that follow): all the replay uses, on recordings where data mmaps
 * are most records (off by default: the API's events() lists every mapping). */
void fu_perf_stream_executable_mmaps_only(fu_perf_stream *stream, bool on);
/* Wait for the window being cut ahead, if any; safe from several threads at once (the bindings
 * wait without the GIL, so two Python threads may ask a stream's header together). */
void fu_perf_stream_wait(fu_perf_stream *stream);
/* Records delivered older than an earlier window's (see above). */
uint64_t fu_perf_stream_out_of_order(const fu_perf_stream *stream);
void fu_perf_stream_free(fu_perf_stream *stream);

#endif
