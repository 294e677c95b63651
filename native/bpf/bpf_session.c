/* bpf_session: load, attach, fill and drain the in-kernel unwinder (bpf_session.h). */
#define _GNU_SOURCE
#include "bpf_session.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "unwind.skel.h" /* generated: bpftool gen skeleton (setup.py) */

/* A module a process slot's mappings name, as they name it (its generation then). */
typedef struct module_ref {
    uint32_t id, generation;
} module_ref;

/* The uses a module loaded for the process being loaded counts as: more than all the processes' mappings
 * together, so that the process's next module does not evict it (its reload would evict that one). */
#define PENDING_USES (FU_BPF_MAX_PROCESSES * FU_BPF_MAX_MAPPINGS)

typedef struct process_slot {
    uint32_t pid;
    bool used;
    module_ref *modules; /* of its mappings with a table, counted in the session's users */
    uint32_t module_count;
} process_slot;

struct fu_bpf_session {
    struct fu_unwind *skel;
    struct bpf_link **links;
    int *events;
    int event_count, event_capacity;
    /* the table maps, mmap'd */
    fu_bpf_rule *rules;
    fu_bpf_block *slots; /* the first base_slots slots; the others in segments */
    fu_bpf_module *modules;
    size_t rules_size, slots_size, modules_size;
    uint32_t base_slots;
    /* the segments the slots map grew by (slot_segments: FU_BPF_SEGMENT_SLOTS each), at most
     * segment_limit of them; 0 once the kernel refused one */
    fu_bpf_block **segments;
    uint32_t segment_count, segment_limit;
    uint32_t rules_loaded; /* dictionary entries already in the map */
    fu_bpf_rules dictionary;
    fu_bpf_ring ring;
    uint32_t generation[FU_BPF_MAX_MODULES];
    uint32_t users[FU_BPF_MAX_MODULES]; /* by id: mappings of the loaded processes naming the module, and
                                         * PENDING_USES for a module loaded since the last process was set
                                         * (for a process being loaded: pending) */
    module_ref pending[FU_BPF_MAX_MODULES];
    uint32_t pending_count;
    uint32_t evicted_in_use; /* modules evicted with users */
    uint32_t slots_peak;     /* the most slots loaded modules held at once */
    process_slot processes[FU_BPF_MAX_PROCESSES];
    /* freed process slots are reused last-freed-last (a walk may still read a slot just replaced) */
    uint32_t free_slots[FU_BPF_MAX_PROCESSES];
    uint32_t free_head, free_count;
    fu_bpf_process scratch;
    uint64_t kernel[FU_BPF_KERNEL_MAX_FRAMES];
    struct ring_buffer *samples; /* the program's ring buffer, taken into `log` */
    int *batches;                /* each CPU's batch map (fu_bpf_batch), -1: none */
    int batch_count;
    bool stopped;                /* the events closed and the batches taken (fu_bpf_session_stop) */
    fu_bpf_log log;
    uint32_t stacks_reported; /* stacks of the log handed to a drain's fn */
    fu_error ring_err;        /* the first record the log refused */
};

static fu_status bpf_failed(fu_error *err, const char *what, int error)
{
    if (error < 0)
        error = -error;
    return fu_fail(err, FU_ERR_BPF, "%s: %s", what, strerror(error ? error : EINVAL));
}

static void *map_memory(struct bpf_map *map, size_t *size, fu_error *err)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = (size_t)bpf_map__value_size(map) * bpf_map__max_entries(map);
    bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
    if (p == MAP_FAILED) {
        bpf_failed(err, "mapping a BPF map into memory", errno);
        return NULL;
    }
    *size = bytes;
    return p;
}

/* ring_buffer__consume's callback: one record into the log (a refused one stops the consumption;
 * its reason is kept for the drain to return). */
static int take_sample(void *context, void *data, size_t size)
{
    fu_bpf_session *s = context;
    return fu_bpf_log_add_batch(&s->log, data, size, &s->ring_err) == FU_OK ? 0 : -1;
}

/* Creates the slots map of `slot_capacity` slots for the skeleton's `slots` before the rest is
 * loaded, so that the kernel refusing its memory (the one map whose size the caller chooses) is told
 * apart from any other refusal: FU_ERR_BPF_MAP_MEMORY. */
static fu_status create_slots_map(struct bpf_map *slots, uint32_t slot_capacity, fu_error *err)
{
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = bpf_map__map_flags(slots));
    int fd = bpf_map_create(bpf_map__type(slots), "slots", bpf_map__key_size(slots), bpf_map__value_size(slots),
                            slot_capacity, &opts);
    if (fd < 0) {
        int e = errno;
        if (e == ENOMEM || e == E2BIG)
            return fu_fail(err, FU_ERR_BPF_MAP_MEMORY, "the kernel refused a BPF table map of %u slots (%llu MiB): %s",
                           slot_capacity, (unsigned long long)slot_capacity * sizeof(fu_bpf_block) >> 20,
                           strerror(e));
        return bpf_failed(err, "creating the BPF table map", e);
    }
    int e = bpf_map__reuse_fd(slots, fd);
    close(fd); /* the map holds its own copy of the fd */
    return e ? bpf_failed(err, "giving the BPF table map to the unwinder", e) : FU_OK;
}

fu_status fu_bpf_session_open(fu_bpf_session **out, uint32_t slot_capacity, uint32_t slot_limit, bool timing,
                              fu_error *err)
{
    *out = NULL;
    if (slot_capacity == 0)
        return fu_fail(err, FU_ERR_INVALID, "the BPF tables need at least one slot");
    fu_bpf_session *s = calloc(1, sizeof *s);
    if (!s)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    s->ring.capacity = slot_capacity;
    s->base_slots = slot_capacity;
    s->segment_limit = slot_limit > slot_capacity ? (slot_limit - slot_capacity) / FU_BPF_SEGMENT_SLOTS : 0;
    s->segments = s->segment_limit ? calloc(s->segment_limit, sizeof *s->segments) : NULL;
    if (s->segment_limit && !s->segments) {
        free(s);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    }
    s->ring.users = s->users;
    for (uint32_t i = 0; i < FU_BPF_MAX_PROCESSES; i++)
        s->free_slots[i] = i;
    s->free_count = FU_BPF_MAX_PROCESSES;
    libbpf_set_print(NULL); /* the errors are returned, not printed */
    s->skel = fu_unwind__open();
    if (!s->skel) {
        fu_status st = bpf_failed(err, "opening the BPF unwinder", errno);
        free(s);
        return st;
    }
    s->skel->rodata->timing = timing;
    s->skel->rodata->base_slots = slot_capacity;
    fu_status st = create_slots_map(s->skel->maps.slots, slot_capacity, err);
    if (st != FU_OK) {
        fu_bpf_session_close(s);
        return st;
    }
    int cpus = libbpf_num_possible_cpus();
    uint32_t rule_cache_parts = cpus > 0 ? FU_BPF_RULE_CACHE_PARTS * (uint32_t)cpus : 0;
    int e = cpus > 0 ? bpf_map__set_max_entries(s->skel->maps.rule_caches, rule_cache_parts) : cpus;
    if (!e) /* an outer map has at least one entry */
        e = bpf_map__set_max_entries(s->skel->maps.slot_segments, s->segment_limit ? s->segment_limit : 1);
    if (!e)
        e = bpf_map__set_max_entries(s->skel->maps.batches, (uint32_t)cpus);
    /* libbpf frees its definition of the inner maps at the load */
    const struct bpf_map *part = bpf_map__inner_map(s->skel->maps.rule_caches);
    uint32_t part_value_size = part ? bpf_map__value_size(part) : 0, part_entries = part ? bpf_map__max_entries(part) : 0;
    if (!e && !part)
        e = -EINVAL;
    if (e) {
        fu_bpf_session_close(s);
        return bpf_failed(err, "sizing the BPF rule caches and batches", e);
    }
    s->batches = malloc(sizeof *s->batches * (size_t)cpus);
    if (!s->batches) {
        fu_bpf_session_close(s);
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    }
    e = fu_unwind__load(s->skel);
    if (e) {
        fu_bpf_session_close(s);
        return bpf_failed(err, "loading the BPF unwinder (the verifier or the kernel refused it)", e);
    }
    /* each CPU's rule cache parts: maps of their own, so that each is kmalloc'd (bpf_layout.h
     * FU_BPF_DIRECT_MAP_BYTES); the outer map holds them, so their fds are closed at once */
    for (uint32_t i = 0; i < rule_cache_parts; i++) {
        int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fu_rule_cache", sizeof(uint32_t), part_value_size, part_entries,
                                NULL);
        e = fd < 0 ? -errno : bpf_map_update_elem(bpf_map__fd(s->skel->maps.rule_caches), &i, &fd, BPF_ANY) ? -errno : 0;
        if (fd >= 0)
            close(fd);
        if (e) {
            fu_bpf_session_close(s);
            return bpf_failed(err, "creating the per-CPU rule caches", e);
        }
    }
    /* each CPU's batch: a map of its own (kmalloc'd), its fd kept to take what is left in it at the
     * end (fu_bpf_session_stop) */
    for (int cpu = 0; cpu < cpus; cpu++) {
        uint32_t key = (uint32_t)cpu;
        int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fu_batch", sizeof(uint32_t), sizeof(fu_bpf_batch), 1, NULL);
        e = fd < 0 ? -errno : bpf_map_update_elem(bpf_map__fd(s->skel->maps.batches), &key, &fd, BPF_ANY) ? -errno : 0;
        if (fd >= 0)
            s->batches[s->batch_count++] = fd;
        if (e) {
            fu_bpf_session_close(s);
            return bpf_failed(err, "creating the per-CPU sample batches", e);
        }
    }
    s->samples = ring_buffer__new(bpf_map__fd(s->skel->maps.samples), take_sample, s, NULL);
    if (!s->samples) {
        st = bpf_failed(err, "opening the BPF samples ring buffer", errno);
        fu_bpf_session_close(s);
        return st;
    }
    if (!(s->rules = map_memory(s->skel->maps.rules, &s->rules_size, err)) ||
        !(s->slots = map_memory(s->skel->maps.slots, &s->slots_size, err)) ||
        !(s->modules = map_memory(s->skel->maps.modules, &s->modules_size, err))) {
        fu_bpf_session_close(s);
        return FU_ERR_BPF;
    }
    *out = s;
    return FU_OK;
}

/* Opens a cpu-clock event at `frequency` Hz (perf_event_open's pid and cpu; inherited by the
 * threads and children the task starts when `inherit`) and attaches the program to it. ENODEV (an
 * offline CPU) leaves nothing open and is not an error. */
static fu_status attach_event(fu_bpf_session *s, uint64_t frequency, int pid, int cpu, bool inherit, fu_error *err)
{
    if (frequency == 0)
        return fu_fail(err, FU_ERR_INVALID, "the sampling frequency must be above 0");
    if (s->stopped)
        return fu_fail(err, FU_ERR_INVALID, "the BPF session's sampling has ended");
    if (s->event_count == s->event_capacity) {
        int capacity = s->event_capacity ? 2 * s->event_capacity : 8;
        struct bpf_link **links = realloc(s->links, (size_t)capacity * sizeof *links);
        if (links)
            s->links = links;
        int *events = links ? realloc(s->events, (size_t)capacity * sizeof *events) : NULL;
        if (!events)
            return fu_fail(err, FU_ERR_NOMEM, "out of memory");
        s->events = events;
        s->event_capacity = capacity;
    }
    struct perf_event_attr attr = {
        .type = PERF_TYPE_SOFTWARE,
        .size = sizeof attr,
        .config = PERF_COUNT_SW_CPU_CLOCK,
        .sample_freq = frequency,
        .freq = 1,
        .inherit = inherit,
    };
    int fd = (int)syscall(SYS_perf_event_open, &attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        if (errno == ENODEV && cpu >= 0)
            return FU_OK;
        return bpf_failed(err, cpu >= 0 ? "perf_event_open (cpu-clock, one per CPU)"
                                        : "perf_event_open (cpu-clock, inherited by the thread's children)", errno);
    }
    struct bpf_link *link = bpf_program__attach_perf_event(s->skel->progs.sample, fd);
    if (!link) {
        int e = errno;
        close(fd);
        return bpf_failed(err, "attaching the BPF unwinder to a perf event", e);
    }
    s->events[s->event_count] = fd;
    s->links[s->event_count++] = link;
    return FU_OK;
}

fu_status fu_bpf_session_attach_cpus(fu_bpf_session *s, uint64_t frequency, fu_error *err)
{
    int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0)
        return bpf_failed(err, "counting the CPUs", cpus);
    for (int cpu = 0; cpu < cpus; cpu++) {
        fu_status st = attach_event(s, frequency, -1, cpu, false, err);
        if (st != FU_OK)
            return st;
    }
    return FU_OK;
}

fu_status fu_bpf_session_attach_thread(fu_bpf_session *s, uint64_t frequency, uint32_t tid, fu_error *err)
{
    if (tid == 0 || tid > INT32_MAX)
        return fu_fail(err, FU_ERR_INVALID, "%u is not a thread id", tid);
    return attach_event(s, frequency, (int)tid, -1, true, err);
}

/* Before a process slot or a module's generation changes: the walks' memos of the rules found
 * before it are not used after it (unwind.bpf.c). */
static void advance_tables_epoch(fu_bpf_session *s)
{
    __atomic_fetch_add(&s->skel->bss->tables_epoch, 1, __ATOMIC_SEQ_CST);
}

/* Adds segments to the slots (slot_segments) until `count` slots fit without evicting a module,
 * where the segment limit allows as many; none where it does not, or where the kernel refuses one
 * (no more are asked for then: the ring evicts as without segments). A segment is in the outer map
 * before any module's slots are written in it. */
static void grow_slots(fu_bpf_session *s, uint32_t count)
{
    uint32_t wanted = count / FU_BPF_SEGMENT_SLOTS + (count % FU_BPF_SEGMENT_SLOTS != 0);
    if (fu_bpf_ring_fits(&s->ring, count) || wanted > s->segment_limit - s->segment_count)
        return;
    size_t bytes = (size_t)FU_BPF_SEGMENT_SLOTS * sizeof(fu_bpf_block);
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
    int outer = bpf_map__fd(s->skel->maps.slot_segments);
    for (uint32_t i = 0; i < wanted; i++) {
        int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fu_slots", sizeof(uint32_t), sizeof(fu_bpf_block),
                                FU_BPF_SEGMENT_SLOTS, &opts);
        void *p = fd < 0 ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        uint32_t index = s->segment_count;
        bool inserted = p != MAP_FAILED && bpf_map_update_elem(outer, &index, &fd, BPF_ANY) == 0;
        if (fd >= 0)
            close(fd); /* the outer map and the mapping hold the map */
        if (!inserted) {
            if (p != MAP_FAILED)
                munmap(p, bytes);
            s->segment_limit = s->segment_count;
            break;
        }
        s->segments[s->segment_count++] = p;
    }
    fu_bpf_ring_grow(&s->ring, s->base_slots + s->segment_count * FU_BPF_SEGMENT_SLOTS);
}

/* Slot `at` of the tables in user space's mappings of the slots map and its segments. */
static fu_bpf_block *slot_at(fu_bpf_session *s, uint32_t at)
{
    if (at < s->base_slots)
        return &s->slots[at];
    uint32_t rest = at - s->base_slots;
    return &s->segments[rest >> FU_BPF_SEGMENT_SHIFT][rest & (FU_BPF_SEGMENT_SLOTS - 1)];
}

/* Writes `count` slots from `first` on, across the slots map's end and the segments'. */
static void write_slots(fu_bpf_session *s, uint32_t first, const fu_bpf_block *blocks, uint32_t count)
{
    for (uint32_t done = 0, n; done < count; done += n) {
        uint32_t at = first + done;
        uint32_t room = at < s->base_slots ? s->base_slots - at
                                           : FU_BPF_SEGMENT_SLOTS - ((at - s->base_slots) & (FU_BPF_SEGMENT_SLOTS - 1));
        n = count - done < room ? count - done : room;
        memcpy(slot_at(s, at), blocks + done, sizeof *blocks * n);
    }
}

static void set_generation(fu_bpf_session *s, uint32_t id, uint32_t generation)
{
    advance_tables_epoch(s);
    __atomic_store_n(&s->modules[id].generation, generation, __ATOMIC_RELEASE);
    s->generation[id] = generation;
}

fu_status fu_bpf_session_load_module(fu_bpf_session *s, const fu_compact_table *t, uint32_t *id, uint32_t *generation,
                                     fu_error *err)
{
    uint64_t slot_count = fu_bpf_module_slot_count(t);
    if (slot_count == 0)
        return fu_fail(err, FU_ERR_INVALID, "an empty compact table has nothing to load");
    if (slot_count <= FU_BPF_MAX_SLOTS)
        grow_slots(s, (uint32_t)slot_count);
    if (slot_count > s->ring.capacity)
        return fu_fail(err, FU_ERR_INVALID, "a table of %llu slots does not fit the %u of the BPF map",
                       (unsigned long long)slot_count, s->ring.capacity);
    uint32_t count = (uint32_t)slot_count;
    fu_bpf_block *staged = malloc(sizeof *staged * count);
    if (!staged)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    fu_bpf_module module;
    fu_status st = fu_bpf_layout_module(t, &s->dictionary, staged, &module, err);
    uint32_t evicted[FU_BPF_MAX_MODULES + 1], evicted_count = 0, first = 0, new_id = 0;
    if (st == FU_OK)
        st = fu_bpf_ring_place(&s->ring, count, &first, &new_id, evicted, &evicted_count, err);
    if (st != FU_OK) {
        free(staged);
        return st;
    }
    /* new rules first: rows never name a rule the map lacks */
    for (; s->rules_loaded < s->dictionary.count; s->rules_loaded++)
        s->rules[s->rules_loaded] = s->dictionary.rules[s->rules_loaded];
    /* the evicted modules and the reused id turn odd (being written) before their slots change */
    for (uint32_t i = 0; i < evicted_count; i++) {
        s->evicted_in_use += s->users[evicted[i]] != 0; /* mapped by a process, or pending */
        s->users[evicted[i]] = 0; /* the processes' mappings of it name a generation gone */
        if (!(s->generation[evicted[i]] & 1))
            set_generation(s, evicted[i], s->generation[evicted[i]] + 1);
    }
    if (!(s->generation[new_id] & 1))
        set_generation(s, new_id, s->generation[new_id] + 1);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    write_slots(s, first, staged, count);
    free(staged);
    module.first_slot = first;
    module.generation = s->generation[new_id];
    s->modules[new_id] = module;
    s->ring.modules[new_id] = module;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    set_generation(s, new_id, s->generation[new_id] + 1);
    if (s->pending_count < FU_BPF_MAX_MODULES) { /* else no use: a pin nothing would release */
        s->users[new_id] = PENDING_USES;
        s->pending[s->pending_count++] = (module_ref){new_id, s->generation[new_id]};
    }
    uint32_t used = fu_bpf_session_slots_used(s);
    if (used > s->slots_peak)
        s->slots_peak = used;
    *id = new_id;
    *generation = s->generation[new_id];
    return FU_OK;
}

bool fu_bpf_session_module_loaded(const fu_bpf_session *s, uint32_t id, uint32_t generation)
{
    return id < FU_BPF_MAX_MODULES && s->generation[id] == generation && !(generation & 1);
}

static int find_process(const fu_bpf_session *s, uint32_t pid)
{
    for (int i = 0; i < FU_BPF_MAX_PROCESSES; i++)
        if (s->processes[i].used && s->processes[i].pid == pid)
            return i;
    return -1;
}

/* After a change of the pids map: the CPUs' memos of their last process slot are stale. */
static void pids_changed(fu_bpf_session *s)
{
    __atomic_fetch_add(&s->skel->bss->scope_epoch, 1, __ATOMIC_SEQ_CST);
}

/* `uses` of a module fewer, unless it was evicted since (its users were cleared then). */
static void drop_uses(fu_bpf_session *s, module_ref module, uint32_t uses)
{
    if (s->generation[module.id] == module.generation && s->users[module.id] >= uses)
        s->users[module.id] -= uses;
}

/* The modules loaded since the last process was set no longer count that as a use. */
static void release_pending(fu_bpf_session *s)
{
    for (uint32_t i = 0; i < s->pending_count; i++)
        drop_uses(s, s->pending[i], PENDING_USES);
    s->pending_count = 0;
}

/* The slot's mappings no longer count as users of the modules they name (those still loaded). */
static void release_slot(fu_bpf_session *s, uint32_t slot)
{
    process_slot *p = &s->processes[slot];
    for (uint32_t i = 0; i < p->module_count; i++)
        drop_uses(s, p->modules[i], 1);
    free(p->modules);
    *p = (process_slot){0};
    s->free_slots[(s->free_head + s->free_count++) % FU_BPF_MAX_PROCESSES] = slot;
}

fu_status fu_bpf_session_set_process(fu_bpf_session *s, uint32_t pid, const fu_bpf_space_identity *identity,
                                     const fu_bpf_mapping *mappings, uint32_t count, uint32_t left_out, bool *set,
                                     fu_error *err)
{
    *set = false;
    if (count > FU_BPF_MAX_MAPPINGS)
        return fu_fail(err, FU_ERR_INVALID, "%u mappings: the BPF unwinder holds at most %u per process", count,
                       FU_BPF_MAX_MAPPINGS);
    for (uint32_t i = 1; i < count; i++)
        if (mappings[i].start < mappings[i - 1].end)
            return fu_fail(err, FU_ERR_INVALID, "mappings must be sorted and disjoint");
    int old = find_process(s, pid);
    if (s->free_count == 0 || (old < 0 && s->free_count == 1))
        return FU_OK; /* the last free slot is a loaded process's, for its reload */
    module_ref *modules = malloc(sizeof *modules * (count ? count : 1));
    if (!modules)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    uint32_t module_count = 0;
    for (uint32_t i = 0; i < count; i++)
        if (fu_bpf_session_module_loaded(s, mappings[i].module, mappings[i].generation))
            modules[module_count++] = (module_ref){mappings[i].module, mappings[i].generation};
    /* the new mappings go to a fresh slot, then the pid points at it: a walk sees the old or the new */
    uint32_t slot = s->free_slots[s->free_head];
    memset(&s->scratch, 0, sizeof s->scratch);
    s->scratch.count = count;
    s->scratch.left_out = left_out;
    s->scratch.identity = *identity;
    memcpy(s->scratch.mappings, mappings, sizeof *mappings * count);
    advance_tables_epoch(s);
    int e = bpf_map_update_elem(bpf_map__fd(s->skel->maps.processes), &slot, &s->scratch, BPF_ANY);
    if (!e)
        e = bpf_map_update_elem(bpf_map__fd(s->skel->maps.pids), &pid, &slot, BPF_ANY);
    if (e) {
        free(modules);
        return bpf_failed(err, "writing a process's mappings", e);
    }
    pids_changed(s);
    s->free_head = (s->free_head + 1) % FU_BPF_MAX_PROCESSES;
    s->free_count--;
    for (uint32_t i = 0; i < module_count; i++)
        s->users[modules[i].id]++;
    release_pending(s);
    if (old >= 0)
        release_slot(s, (uint32_t)old);
    s->processes[slot] = (process_slot){.pid = pid, .used = true, .modules = modules, .module_count = module_count};
    *set = true;
    return FU_OK;
}

void fu_bpf_session_forget_process(fu_bpf_session *s, uint32_t pid)
{
    bpf_map_delete_elem(bpf_map__fd(s->skel->maps.pids), &pid);
    pids_changed(s);
    int slot = find_process(s, pid);
    if (slot >= 0)
        release_slot(s, (uint32_t)slot);
}

size_t fu_bpf_session_take_missing(fu_bpf_session *s, uint32_t *pids, size_t cap)
{
    int fd = bpf_map__fd(s->skel->maps.missing);
    size_t n = 0;
    uint32_t key;
    /* take the first key each time: the keys taken are deleted */
    for (size_t bound = 0; n < cap && bound < FU_BPF_MAX_PROCESSES; bound++) {
        if (bpf_map_get_next_key(fd, NULL, &key))
            break;
        bpf_map_delete_elem(fd, &key);
        pids[n++] = key;
    }
    return n;
}

/* ring_buffer__consume's or __poll's result: the samples taken, or why not. */
static fu_status samples_taken(fu_bpf_session *s, int taken, fu_error *err)
{
    if (taken < 0 && s->ring_err.status != FU_OK) {
        *err = s->ring_err;
        return err->status;
    }
    if (taken < 0 && taken != -EINTR)
        return bpf_failed(err, "taking the BPF samples", taken);
    return FU_OK;
}

fu_status fu_bpf_session_wait(fu_bpf_session *s, int timeout_ms, fu_error *err)
{
    if (!s->samples)
        return FU_OK;
    if (samples_taken(s, ring_buffer__poll(s->samples, timeout_ms), err) != FU_OK)
        return err->status;
    /* the poll takes records only when the program woke it, and it sends without a wakeup but
     * for a process to load: the batches sent since are taken here, or the ring would hold every
     * one until the end (and refuse them once full) */
    return samples_taken(s, ring_buffer__consume(s->samples), err);
}

fu_status fu_bpf_session_drain(fu_bpf_session *s, fu_bpf_stack_fn fn, void *context, fu_error *err)
{
    if (s->samples && samples_taken(s, ring_buffer__consume(s->samples), err) != FU_OK)
        return err->status;
    int kstacks = s->skel ? bpf_map__fd(s->skel->maps.kstacks) : -1;
    for (uint32_t count = fu_bpf_log_stack_count(&s->log); s->stacks_reported < count; s->stacks_reported++) {
        const fu_bpf_stack *stack = fu_bpf_log_stack(&s->log, s->stacks_reported);
        uint32_t kernel_count = 0;
        if (stack->kernel_stack >= 0 && kstacks >= 0) {
            uint32_t id = (uint32_t)stack->kernel_stack;
            memset(s->kernel, 0, sizeof s->kernel);
            if (bpf_map_lookup_elem(kstacks, &id, s->kernel) == 0)
                while (kernel_count < FU_BPF_KERNEL_MAX_FRAMES && s->kernel[kernel_count])
                    kernel_count++;
        }
        if (!fn(context, stack, s->kernel, kernel_count))
            return fu_fail(err, FU_ERR_INVALID, "draining the stacks stopped");
    }
    return FU_OK;
}

const fu_bpf_log *fu_bpf_session_log(const fu_bpf_session *s)
{
    return &s->log;
}

fu_status fu_bpf_session_counters(fu_bpf_session *s, uint64_t *out, fu_error *err)
{
    int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0)
        return bpf_failed(err, "counting the CPUs", cpus);
    /* each CPU's state, rounded up to 8 bytes, begins with its counters (bpf_layout.h) */
    size_t stride = ((size_t)bpf_map__value_size(s->skel->maps.scratch) + 7) & ~(size_t)7;
    if (stride < sizeof(fu_bpf_cpu_counters))
        return fu_fail(err, FU_ERR_INVALID, "the program's per-CPU state is smaller than its counters");
    char *per_cpu = calloc((size_t)cpus, stride);
    if (!per_cpu)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    uint32_t zero = 0;
    int e = bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.scratch), &zero, per_cpu);
    if (e) {
        free(per_cpu);
        return bpf_failed(err, "reading the counters", e);
    }
    memset(out, 0, FU_BPF_COUNTER_COUNT * sizeof *out);
    for (int c = 0; c < cpus; c++) {
        fu_bpf_cpu_counters counters;
        memcpy(&counters, per_cpu + (size_t)c * stride, sizeof counters);
        for (uint32_t i = 0; i < FU_BPF_COUNTER_COUNT; i++)
            out[i] += counters.count[i];
    }
    free(per_cpu);
    return FU_OK;
}

fu_status fu_bpf_session_run_time(fu_bpf_session *s, uint64_t *run_ns, uint64_t *runs, fu_error *err)
{
    struct bpf_prog_info info;
    uint32_t size = sizeof info;
    memset(&info, 0, sizeof info);
    int e = bpf_obj_get_info_by_fd(bpf_program__fd(s->skel->progs.sample), &info, &size);
    if (e)
        return bpf_failed(err, "reading the BPF program's statistics", e);
    *run_ns = info.run_time_ns;
    *runs = info.run_cnt;
    return FU_OK;
}

uint64_t fu_bpf_session_table_bytes(const fu_bpf_session *s)
{
    return s->rules_size + s->slots_size + s->modules_size +
           (uint64_t)s->segment_count * FU_BPF_SEGMENT_SLOTS * sizeof(fu_bpf_block);
}

uint32_t fu_bpf_session_slot_capacity(const fu_bpf_session *s)
{
    return s->ring.capacity;
}

uint32_t fu_bpf_session_slots_used(const fu_bpf_session *s)
{
    uint64_t used = 0;
    for (uint32_t i = 0; i < s->ring.module_count; i++)
        used += s->ring.modules[i].slot_count;
    return (uint32_t)used;
}

uint32_t fu_bpf_session_slots_peak(const fu_bpf_session *s)
{
    return s->slots_peak;
}

uint32_t fu_bpf_session_evicted_in_use(const fu_bpf_session *s)
{
    return s->evicted_in_use;
}

/* Detaches the program from its events and closes them: once closed, no run of the program is
 * under way or to come (closing a cpu-clock event cancels its timer and waits for its handler). */
static void close_events(fu_bpf_session *s)
{
    for (int i = 0; i < s->event_count; i++) {
        bpf_link__destroy(s->links[i]);
        close(s->events[i]);
    }
    s->event_count = s->event_capacity = 0;
    free(s->links);
    free(s->events);
    s->links = NULL;
    s->events = NULL;
}

fu_status fu_bpf_session_stop(fu_bpf_session *s, fu_error *err)
{
    if (s->stopped)
        return FU_OK;
    close_events(s);
    s->stopped = true;
    if (s->samples && samples_taken(s, ring_buffer__consume(s->samples), err) != FU_OK)
        return err->status;
    fu_bpf_batch *batch = malloc(sizeof *batch);
    if (!batch)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory");
    uint32_t zero = 0;
    fu_status st = FU_OK;
    for (int cpu = 0; st == FU_OK && cpu < s->batch_count; cpu++) {
        if (bpf_map_lookup_elem(s->batches[cpu], &zero, batch)) {
            st = bpf_failed(err, "reading a CPU's sample batch", errno);
        } else if (batch->bytes > FU_BPF_BATCH_BYTES) {
            st = fu_fail(err, FU_ERR_INVALID, "a CPU's sample batch of %u bytes (it holds %u)", batch->bytes,
                         (unsigned)FU_BPF_BATCH_BYTES);
        } else {
            size_t before = fu_bpf_log_sample_count(&s->log) + s->log.unlogged;
            st = fu_bpf_log_add_batch(&s->log, batch->data, batch->bytes, err);
            if (st == FU_OK && fu_bpf_log_sample_count(&s->log) + s->log.unlogged - before != batch->records)
                st = fu_fail(err, FU_ERR_INVALID, "a CPU's sample batch of %u records held %zu", batch->records,
                             fu_bpf_log_sample_count(&s->log) + (size_t)s->log.unlogged - before);
        }
    }
    free(batch);
    if (st == FU_OK)
        fu_bpf_log_sort(&s->log);
    return st;
}

void fu_bpf_session_detach(fu_bpf_session *s)
{
    close_events(s);
    s->stopped = true;
    for (int i = 0; i < s->batch_count; i++)
        close(s->batches[i]);
    s->batch_count = 0;
    ring_buffer__free(s->samples);
    s->samples = NULL;
    if (s->rules)
        munmap(s->rules, s->rules_size);
    if (s->slots)
        munmap(s->slots, s->slots_size);
    if (s->modules)
        munmap(s->modules, s->modules_size);
    for (uint32_t i = 0; i < s->segment_count; i++)
        munmap(s->segments[i], (size_t)FU_BPF_SEGMENT_SLOTS * sizeof(fu_bpf_block));
    s->segment_count = s->segment_limit = 0;
    s->rules = NULL;
    s->slots = NULL;
    s->modules = NULL;
    fu_unwind__destroy(s->skel);
    s->skel = NULL;
}

void fu_bpf_session_close(fu_bpf_session *s)
{
    if (!s)
        return;
    fu_bpf_session_detach(s);
    free(s->batches);
    for (uint32_t i = 0; i < FU_BPF_MAX_PROCESSES; i++)
        free(s->processes[i].modules);
    free(s->segments);
    fu_bpf_rules_free(&s->dictionary);
    fu_bpf_ring_free(&s->ring);
    fu_bpf_log_free(&s->log);
    free(s);
}
