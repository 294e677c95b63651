/* perf_replay: see perf_replay.h. */
#include "perf_replay.h"

#include <stdlib.h>
#include <string.h>

/* mmap(2)'s PROT_EXEC, as MMAP2 records carry it (the kernel's value on every architecture). */
#define PROT_EXEC 4

/* ---- equality callbacks (key: a record of the same type, or a u32 for pid/tid keyed records) ---- */

static bool same_string(fu_perf_string a, fu_perf_string b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

static bool file_equal(const void *ctx, uint32_t i, const void *key)
{
    const fu_replay_file *a = &FU_REPLAY_RECORDS((const fu_replay *)ctx, files, fu_replay_file)[i], *b = key;
    return same_string(a->name, b->name) && a->perf_map == b->perf_map && a->perf_map_pid == b->perf_map_pid &&
           a->has_build_id == b->has_build_id &&
           (!a->has_build_id ||
            (a->build_id_size == b->build_id_size && memcmp(a->build_id, b->build_id, a->build_id_size) == 0));
}

static bool mapping_equal(const void *ctx, uint32_t i, const void *key)
{
    const fu_replay_mapping *a = &FU_REPLAY_RECORDS((const fu_replay *)ctx, mappings, fu_replay_mapping)[i], *b = key;
    return a->start == b->start && a->end == b->end && a->pgoff == b->pgoff && a->file == b->file;
}

static bool process_equal(const void *ctx, uint32_t i, const void *key)
{
    return FU_REPLAY_RECORDS((const fu_replay *)ctx, processes, fu_replay_process)[i].pid == *(const uint32_t *)key;
}

static bool thread_comm_equal(const void *ctx, uint32_t i, const void *key)
{
    return FU_REPLAY_RECORDS((const fu_replay *)ctx, thread_comms, fu_replay_thread_comm)[i].tid == *(const uint32_t *)key;
}

typedef struct space_key {
    const uint32_t *maps;
    uint32_t count;
} space_key;

static bool space_equal(const void *ctx, uint32_t i, const void *key)
{
    const fu_replay *r = ctx;
    const fu_replay_space *s = &FU_REPLAY_RECORDS(r, spaces, fu_replay_space)[i];
    const space_key *k = key;
    return s->count == k->count &&
           (k->count == 0 || memcmp((const uint32_t *)r->space_pool.data + s->offset, k->maps, 4 * k->count) == 0);
}

static bool comm_name_equal(const void *ctx, uint32_t i, const void *key)
{
    return same_string(FU_REPLAY_RECORDS((const fu_replay *)ctx, comm_names, fu_perf_string)[i], *(const fu_perf_string *)key);
}

/* ---- interning: the index of the record equal to `item`, added if new; FU_REPLAY_NONE: no memory ---- */

static uint32_t intern(fu_buffer *records, fu_intern_set *index, const void *item, size_t size, uint64_t hash,
                       fu_intern_equal equal, const fu_replay *r)
{
    uint32_t found = fu_intern_find(index, hash, equal, r, item);
    if (found != FU_REPLAY_NONE)
        return found;
    size_t count = records->len / size;
    if (count >= FU_REPLAY_NONE - 1 || !fu_buffer_append(records, item, size))
        return FU_REPLAY_NONE;
    if (!fu_intern_insert(index, hash, (uint32_t)count)) {
        records->len -= size;
        return FU_REPLAY_NONE;
    }
    return (uint32_t)count;
}

static uint64_t string_hash(fu_perf_string s, uint64_t seed) { return fu_hash_bytes(s.data, s.len, seed); }

/* perf's is_anon_memory (util/map.c): memory without a file. perf names an executable one of process
 * PID "/tmp/perf-PID.map", the symbol file JITs write (map__new), and prints its addresses as they
 * are (identity map_ip). */
static bool is_anonymous(const fu_perf_mmap *m)
{
    static const char anon[] = "//anon", zero[] = "/dev/zero", hugepage[] = "/anon_hugepage";
    fu_perf_string name = {m->filename, m->filename_len};
    return (name.len == sizeof anon - 1 && memcmp(name.data, anon, name.len) == 0) ||
           (name.len >= sizeof zero - 1 && memcmp(name.data, zero, sizeof zero - 1) == 0) ||
           (name.len >= sizeof hugepage - 1 && memcmp(name.data, hugepage, sizeof hugepage - 1) == 0);
}

static bool name_equal(const void *ctx, uint32_t i, const void *key)
{
    return same_string(FU_REPLAY_RECORDS((const fu_replay *)ctx, names, fu_perf_string)[i], *(const fu_perf_string *)key);
}

/* The replay's own copy of `s` (one per distinct name); .data NULL: no memory. */
static fu_perf_string own_name(fu_replay *r, fu_perf_string s)
{
    fu_perf_string none = {NULL, 0};
    uint64_t hash = string_hash(s, 5);
    uint32_t found = fu_intern_find(&r->name_index, hash, name_equal, r, &s);
    if (found != FU_REPLAY_NONE)
        return FU_REPLAY_RECORDS(r, names, fu_perf_string)[found];
    fu_replay_name_chunk *c = r->chunks;
    if (!c || c->cap - c->used < (size_t)s.len + 1) {
        size_t cap = (size_t)s.len + 1 > NAME_CHUNK_BYTES ? (size_t)s.len + 1 : NAME_CHUNK_BYTES;
        if (!(c = malloc(sizeof *c + cap)))
            return none;
        c->next = r->chunks;
        c->used = 0;
        c->cap = cap;
        r->chunks = c;
    }
    fu_perf_string copy = {c->bytes + c->used, s.len};
    if (s.len)
        memcpy(c->bytes + c->used, s.data, s.len);
    c->used += (size_t)s.len + 1;
    if (intern(&r->names, &r->name_index, &copy, sizeof copy, hash, name_equal, r) == FU_REPLAY_NONE)
        return none;
    return copy;
}

static uint32_t intern_file(fu_replay *r, const fu_perf_mmap *m)
{
    fu_replay_file f = {.name = {m->filename, m->filename_len}, .has_build_id = m->has_build_id};
    if (is_anonymous(m)) {
        f.perf_map = true;
        f.perf_map_pid = m->pid;
    }
    uint64_t hash = string_hash(f.name, 1) ^ fu_hash_u64((uint64_t)f.perf_map << 32 | f.perf_map_pid);
    if (m->has_build_id) {
        f.build_id_size = m->build_id_size <= 20 ? m->build_id_size : 20;
        memcpy(f.build_id, m->build_id, f.build_id_size);
        hash = fu_hash_bytes(f.build_id, f.build_id_size, hash);
    }
    uint32_t found = fu_intern_find(&r->file_index, hash, file_equal, r, &f);
    if (found != FU_REPLAY_NONE)
        return found;
    if (!(f.name = own_name(r, f.name)).data)
        return FU_REPLAY_NONE;
    return intern(&r->files, &r->file_index, &f, sizeof f, hash, file_equal, r);
}

static uint32_t intern_mapping(fu_replay *r, const fu_replay_mapping *m)
{
    uint64_t hash = fu_hash_u64(fu_hash_u64(fu_hash_u64(m->start) ^ m->end) ^ m->pgoff) ^ m->file;
    return intern(&r->mappings, &r->mapping_index, m, sizeof *m, hash, mapping_equal, r);
}

/* The process `pid`, created empty if new; NULL: no memory. The pointer is valid until the next
 * process is created. */
static fu_replay_process *find_process(fu_replay *r, uint32_t pid)
{
    uint32_t i = fu_intern_find(&r->process_index, fu_hash_u64(pid), process_equal, r, &pid);
    return i == FU_REPLAY_NONE ? NULL : &FU_REPLAY_RECORDS(r, processes, fu_replay_process)[i];
}

static fu_replay_process *process(fu_replay *r, uint32_t pid)
{
    fu_replay_process *found = find_process(r, pid);
    if (found)
        return found;
    fu_replay_process p = {.pid = pid, .comm = {"", 0}, .space = FU_REPLAY_NONE};
    uint32_t i = intern(&r->processes, &r->process_index, &p, sizeof p, fu_hash_u64(pid), process_equal, r);
    return i == FU_REPLAY_NONE ? NULL : &FU_REPLAY_RECORDS(r, processes, fu_replay_process)[i];
}

static const fu_perf_string *thread_comm(const fu_replay *r, uint32_t tid)
{
    uint32_t i = fu_intern_find(&r->thread_comm_index, fu_hash_u64(tid), thread_comm_equal, r, &tid);
    return i == FU_REPLAY_NONE ? NULL : &FU_REPLAY_RECORDS(r, thread_comms, fu_replay_thread_comm)[i].comm;
}

static bool set_thread_comm(fu_replay *r, uint32_t tid, fu_perf_string comm)
{
    uint32_t i = fu_intern_find(&r->thread_comm_index, fu_hash_u64(tid), thread_comm_equal, r, &tid);
    if (i != FU_REPLAY_NONE) {
        FU_REPLAY_RECORDS(r, thread_comms, fu_replay_thread_comm)[i].comm = comm;
        return true;
    }
    fu_replay_thread_comm t = {tid, comm};
    return intern(&r->thread_comms, &r->thread_comm_index, &t, sizeof t, fu_hash_u64(tid), thread_comm_equal, r) !=
           FU_REPLAY_NONE;
}

static bool reserve_maps(fu_replay_process *p, uint32_t need)
{
    if (need <= p->map_cap)
        return true;
    uint32_t cap = p->map_cap ? p->map_cap : 16;
    while (cap < need) {
        if (cap > UINT32_MAX / 2)
            return false;
        cap *= 2;
    }
    uint32_t *maps = realloc(p->maps, (size_t)cap * sizeof *maps);
    if (!maps)
        return false;
    p->maps = maps;
    p->map_cap = cap;
    return true;
}

/* ---- events ---------------------------------------------------------------------------------- */

static bool on_mmap(fu_replay *r, const fu_perf_mmap *m)
{
    bool executable = m->is_mmap2 ? (m->prot & PROT_EXEC) != 0 : true;
    if (!executable || m->length == 0)
        return true;
    uint64_t start = m->start, end = start + m->length < start ? UINT64_MAX : start + m->length;
    uint32_t file = intern_file(r, m);
    if (file == FU_REPLAY_NONE)
        return false;
    fu_replay_mapping mapping = {start, end, m->pgoff, file};
    uint32_t id = intern_mapping(r, &mapping);
    fu_replay_process *p = id == FU_REPLAY_NONE ? NULL : process(r, m->pid);
    if (!p || !reserve_maps(p, p->map_count + 1))
        return false;
    /* keep the mappings it does not overlap, insert it in start order */
    const fu_replay_mapping *all = FU_REPLAY_RECORDS(r, mappings, fu_replay_mapping);
    uint32_t kept = 0, at = FU_REPLAY_NONE;
    for (uint32_t i = 0; i < p->map_count; i++) {
        const fu_replay_mapping *old = &all[p->maps[i]];
        if (old->end <= start || old->start >= end) {
            if (at == FU_REPLAY_NONE && old->start > start)
                at = kept;
            p->maps[kept++] = p->maps[i];
        }
    }
    if (at == FU_REPLAY_NONE)
        at = kept;
    memmove(p->maps + at + 1, p->maps + at, (size_t)(kept - at) * sizeof *p->maps);
    p->maps[at] = id;
    p->map_count = kept + 1;
    p->space = FU_REPLAY_NONE;
    return true;
}

static bool on_comm(fu_replay *r, const fu_perf_comm *c)
{
    fu_perf_string comm = own_name(r, (fu_perf_string){c->comm, c->comm_len});
    if (!comm.data || !set_thread_comm(r, c->tid, comm))
        return false;
    fu_replay_process *p = process(r, c->pid);
    if (!p)
        return false;
    if (c->pid == c->tid)
        p->comm = comm;
    if (c->exec) {
        p->map_count = 0;
        p->space = FU_REPLAY_NONE;
    }
    return true;
}

static bool on_fork(fu_replay *r, const fu_perf_task *t)
{
    if (t->pid == t->ppid)
        return true; /* a new thread shares its process's address space */
    bool had_parent = find_process(r, t->ppid) != NULL;
    fu_replay_process *child = process(r, t->pid);
    if (!child)
        return false;
    const fu_replay_process *parent = had_parent ? find_process(r, t->ppid) : NULL; /* after the child's creation */
    if (parent) {
        if (!reserve_maps(child, parent->map_count))
            return false;
        if (parent->map_count)
            memcpy(child->maps, parent->maps, (size_t)parent->map_count * sizeof *child->maps);
        child->map_count = parent->map_count;
        child->comm = parent->comm;
        child->space = FU_REPLAY_NONE;
    }
    const fu_perf_string *parent_comm = thread_comm(r, t->ppid);
    if (parent_comm && !thread_comm(r, t->tid))
        return set_thread_comm(r, t->tid, *parent_comm);
    return true;
}

/* The space of the process's current mappings (shared with every equal snapshot). */
static uint32_t space_of(fu_replay *r, fu_replay_process *p)
{
    if (p->space != FU_REPLAY_NONE)
        return p->space;
    space_key key = {p->maps, p->map_count};
    uint64_t hash = fu_hash_bytes(p->maps, 4 * (size_t)p->map_count, 3);
    uint32_t found = fu_intern_find(&r->space_index, hash, space_equal, r, &key);
    if (found == FU_REPLAY_NONE) {
        fu_replay_space s = {r->space_pool.len / 4, p->map_count};
        size_t count = r->spaces.len / sizeof s;
        if (count >= FU_REPLAY_NONE - 1 || !fu_buffer_append(&r->space_pool, p->maps, 4 * (size_t)p->map_count) ||
            !fu_buffer_append(&r->spaces, &s, sizeof s) || !fu_intern_insert(&r->space_index, hash, (uint32_t)count))
            return FU_REPLAY_NONE;
        found = (uint32_t)count;
    }
    return p->space = found;
}

static bool on_sample(fu_replay *r, const fu_perf_sample *s, uint32_t *space_id, uint32_t *comm_id)
{
    if (!find_process(r, s->pid))
        r->samples_without_process++;
    fu_replay_process *p = process(r, s->pid);
    if (!p || (*space_id = space_of(r, p)) == FU_REPLAY_NONE)
        return false;
    const fu_perf_string *comm = thread_comm(r, s->tid);
    fu_perf_string name = comm && comm->len ? *comm : p->comm;
    *comm_id = intern(&r->comm_names, &r->comm_name_index, &name, sizeof name, string_hash(name, 4), comm_name_equal,
                      r);
    return *comm_id != FU_REPLAY_NONE;
}

void fu_replay_free(fu_replay *r)
{
    for (uint32_t i = 0; i < FU_REPLAY_COUNT(r, processes, fu_replay_process); i++)
        free(FU_REPLAY_RECORDS(r, processes, fu_replay_process)[i].maps);
    fu_buffer *arrays[] = {&r->files, &r->mappings, &r->processes, &r->thread_comms,
                            &r->spaces, &r->space_pool, &r->comm_names, &r->names, &r->renumbered, &r->numbered};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        free(arrays[i]->data);
    fu_intern_set *sets[] = {&r->file_index, &r->mapping_index, &r->process_index, &r->thread_comm_index,
                            &r->space_index, &r->comm_name_index, &r->name_index};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        fu_intern_free(sets[i]);
    while (r->chunks) {
        fu_replay_name_chunk *next = r->chunks->next;
        free(r->chunks);
        r->chunks = next;
    }
    memset(r, 0, sizeof *r);
}

/* ---- the replay of one recording or window ----------------------------------------------------- */

fu_status fu_replay_run(fu_replay *r, const fu_perf_data *pd, uint32_t *space_ids, uint32_t *comm_ids, fu_error *err)
{
    if (pd->sample_count > FU_REPLAY_NONE)
        return fu_fail(err, FU_ERR_INVALID, "%zu samples: more than this replay indexes", pd->sample_count);
    for (size_t i = 0; i < pd->sample_count; i++)
        space_ids[i] = comm_ids[i] = FU_REPLAY_NONE; /* a sample the event index does not list */
    bool ok = true, bad_index = false;
    /* one event per iteration: bounded by the recording's event count */
    for (size_t e = 0; e < pd->event_count && ok; e++) {
        const fu_perf_event *event = &pd->events[e];
        switch (event->kind) {
        case FU_PERF_EVENT_SAMPLE:
            if (event->index >= pd->sample_count) {
                bad_index = true;
                ok = false;
            } else {
                ok = on_sample(r, &pd->samples[event->index], &space_ids[event->index], &comm_ids[event->index]);
            }
            break;
        case FU_PERF_EVENT_MMAP:
            bad_index = event->index >= pd->mmap_count;
            ok = !bad_index && on_mmap(r, &pd->mmaps[event->index]);
            break;
        case FU_PERF_EVENT_COMM:
            bad_index = event->index >= pd->comm_count;
            ok = !bad_index && on_comm(r, &pd->comms[event->index]);
            break;
        case FU_PERF_EVENT_FORK:
            bad_index = event->index >= pd->task_count;
            ok = !bad_index && on_fork(r, &pd->tasks[event->index]);
            break;
        default: /* EXIT changes nothing that is replayed */
            break;
        }
    }
    if (bad_index)
        return fu_fail(err, FU_ERR_INVALID, "the recording's event index points past its records");
    if (!ok)
        return fu_fail(err, FU_ERR_NOMEM, "out of memory replaying %zu events", pd->event_count);
    return FU_OK;
}

fu_status fu_replay_number_mappings(fu_replay *r, fu_error *err)
{
    uint32_t mapping_count = FU_REPLAY_COUNT(r, mappings, fu_replay_mapping);
    size_t known = r->renumbered.len / 4;
    if (!fu_buffer_reserve(&r->renumbered, 4 * ((size_t)mapping_count - known + 1)))
        return fu_fail(err, FU_ERR_NOMEM, "out of memory numbering %u mappings", mapping_count);
    for (size_t i = known; i < mapping_count; i++)
        ((uint32_t *)(void *)r->renumbered.data)[i] = FU_REPLAY_NONE;
    r->renumbered.len = 4 * (size_t)mapping_count;
    uint32_t *renumbered = (uint32_t *)(void *)r->renumbered.data;
    const uint32_t *pool = (const uint32_t *)(const void *)r->space_pool.data;
    for (size_t k = r->reported_pool; k < r->space_pool.len / 4; k++) {
        uint32_t id = pool[k];
        if (renumbered[id] == FU_REPLAY_NONE) {
            if (!fu_buffer_append(&r->numbered, &id, sizeof id))
                return fu_fail(err, FU_ERR_NOMEM, "out of memory numbering %u mappings", mapping_count);
            renumbered[id] = r->used_mappings++;
        }
    }
    return FU_OK;
}

void fu_replay_reported(fu_replay *r)
{
    r->reported_pool = r->space_pool.len / 4;
    r->reported_mappings = r->used_mappings;
    r->reported_comm_names = FU_REPLAY_COUNT(r, comm_names, fu_perf_string);
    r->reported_spaces = FU_REPLAY_COUNT(r, spaces, fu_replay_space);
    r->reported_files = FU_REPLAY_COUNT(r, files, fu_replay_file);
}
