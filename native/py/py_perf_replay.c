/* perf_replay: a recording's processes and address spaces over time, replayed in C without Python
 * per event (a Python loop over hackbench's 4,300 events cost 20 ms, python3's 18,000 ones 90 ms).
 *
 * replay_recording(perf_data) -> (space_ids: bytes u32[samples], comm_ids: bytes u32[samples],
 *     comm_names: [bytes], spaces: [bytes u32[mappings]], mappings: [(start, end, pgoff, file)],
 *     files: [(filename: bytes, build_id: bytes | None)], samples_without_process: int)
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
 * process PID is named "/tmp/perf-PID.map", as perf names it (see is_anonymous).
 *
 * Replay() keeps that state across the windows of a stream (perf_data.h, "Streaming"):
 * Replay.feed(window) takes the next window's events and returns the same tuple, its lists holding
 * only what is new since the last feed (indices keep counting from the earlier lists). The replay
 * keeps copies of the names it holds, since a window's bytes are given back after it.
 * replay_recording(perf_data) is one feed of a fresh Replay.
 */
#include "py_core.h"

#include "growing.h"
#include "index_set.h"
#include "perf_data.h"

#define PROT_EXEC 4

typedef struct rp_file {
    fu_perf_string name;
    bool perf_map;       /* anonymous executable memory: named /tmp/perf-<perf_map_pid>.map */
    uint32_t perf_map_pid;
    bool has_build_id;
    uint8_t build_id_size;
    uint8_t build_id[20];
} rp_file;

typedef struct rp_mapping {
    uint64_t start, end, pgoff;
    uint32_t file;
} rp_mapping;

typedef struct rp_process {
    uint32_t pid;
    fu_perf_string comm;
    uint32_t *maps;   /* mapping ids sorted by start, non-overlapping (owned) */
    uint32_t map_count, map_cap;
    uint32_t space;   /* FU_INDEX_NONE: changed since its space was last computed */
} rp_process;

typedef struct rp_thread_comm {
    uint32_t tid;
    fu_perf_string comm;
} rp_thread_comm;

typedef struct rp_space {
    size_t offset;    /* into the pool of mapping ids */
    uint32_t count;
} rp_space;

/* Copies of the names the replay holds (chunks that never move). */
typedef struct name_chunk {
    struct name_chunk *next;
    size_t used, cap;
    char bytes[];
} name_chunk;
#define NAME_CHUNK_BYTES 65536

/* Records of each kind in growing arrays, each with its index set. */
typedef struct replay {
    fu_growing files, mappings, processes, thread_comms, spaces, space_pool, comm_names, names;
    fu_index_set file_index, mapping_index, process_index, thread_comm_index, space_index, comm_name_index,
        name_index;
    name_chunk *chunks;
    uint64_t samples_without_process;
    /* what earlier feeds reported: mapping id -> its number in the results (FU_INDEX_NONE: not yet) */
    fu_growing renumbered;
    uint32_t used_mappings, reported_spaces, reported_files, reported_comm_names;
    size_t reported_pool;
} replay;

#define RECORDS(r, field, type) ((type *)(r)->field.data)
#define COUNT(r, field, type) ((uint32_t)((r)->field.len / sizeof(type)))

/* ---- equality callbacks (key: a record of the same type, or a u32 for pid/tid keyed records) ---- */

static bool same_string(fu_perf_string a, fu_perf_string b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

static bool file_equal(const void *ctx, uint32_t i, const void *key)
{
    const rp_file *a = &RECORDS((const replay *)ctx, files, rp_file)[i], *b = key;
    return same_string(a->name, b->name) && a->perf_map == b->perf_map && a->perf_map_pid == b->perf_map_pid &&
           a->has_build_id == b->has_build_id &&
           (!a->has_build_id ||
            (a->build_id_size == b->build_id_size && memcmp(a->build_id, b->build_id, a->build_id_size) == 0));
}

static bool mapping_equal(const void *ctx, uint32_t i, const void *key)
{
    const rp_mapping *a = &RECORDS((const replay *)ctx, mappings, rp_mapping)[i], *b = key;
    return a->start == b->start && a->end == b->end && a->pgoff == b->pgoff && a->file == b->file;
}

static bool process_equal(const void *ctx, uint32_t i, const void *key)
{
    return RECORDS((const replay *)ctx, processes, rp_process)[i].pid == *(const uint32_t *)key;
}

static bool thread_comm_equal(const void *ctx, uint32_t i, const void *key)
{
    return RECORDS((const replay *)ctx, thread_comms, rp_thread_comm)[i].tid == *(const uint32_t *)key;
}

typedef struct space_key {
    const uint32_t *maps;
    uint32_t count;
} space_key;

static bool space_equal(const void *ctx, uint32_t i, const void *key)
{
    const replay *r = ctx;
    const rp_space *s = &RECORDS(r, spaces, rp_space)[i];
    const space_key *k = key;
    return s->count == k->count &&
           (k->count == 0 || memcmp((const uint32_t *)r->space_pool.data + s->offset, k->maps, 4 * k->count) == 0);
}

static bool comm_name_equal(const void *ctx, uint32_t i, const void *key)
{
    return same_string(RECORDS((const replay *)ctx, comm_names, fu_perf_string)[i], *(const fu_perf_string *)key);
}

/* ---- interning: the index of the record equal to `item`, added if new; FU_INDEX_NONE: no memory ---- */

static uint32_t intern(fu_growing *records, fu_index_set *index, const void *item, size_t size, uint64_t hash,
                       fu_index_equal equal, const replay *r)
{
    uint32_t found = fu_index_find(index, hash, equal, r, item);
    if (found != FU_INDEX_NONE)
        return found;
    size_t count = records->len / size;
    if (count >= FU_INDEX_NONE - 1 || !fu_growing_append(records, item, size))
        return FU_INDEX_NONE;
    if (!fu_index_insert(index, hash, (uint32_t)count)) {
        records->len -= size;
        return FU_INDEX_NONE;
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
    return same_string(RECORDS((const replay *)ctx, names, fu_perf_string)[i], *(const fu_perf_string *)key);
}

/* The replay's own copy of `s` (one per distinct name); .data NULL: no memory. */
static fu_perf_string own_name(replay *r, fu_perf_string s)
{
    fu_perf_string none = {NULL, 0};
    uint64_t hash = string_hash(s, 5);
    uint32_t found = fu_index_find(&r->name_index, hash, name_equal, r, &s);
    if (found != FU_INDEX_NONE)
        return RECORDS(r, names, fu_perf_string)[found];
    name_chunk *c = r->chunks;
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
    if (intern(&r->names, &r->name_index, &copy, sizeof copy, hash, name_equal, r) == FU_INDEX_NONE)
        return none;
    return copy;
}

static uint32_t intern_file(replay *r, const fu_perf_mmap *m)
{
    rp_file f = {.name = {m->filename, m->filename_len}, .has_build_id = m->has_build_id};
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
    uint32_t found = fu_index_find(&r->file_index, hash, file_equal, r, &f);
    if (found != FU_INDEX_NONE)
        return found;
    if (!(f.name = own_name(r, f.name)).data)
        return FU_INDEX_NONE;
    return intern(&r->files, &r->file_index, &f, sizeof f, hash, file_equal, r);
}

static uint32_t intern_mapping(replay *r, const rp_mapping *m)
{
    uint64_t hash = fu_hash_u64(fu_hash_u64(fu_hash_u64(m->start) ^ m->end) ^ m->pgoff) ^ m->file;
    return intern(&r->mappings, &r->mapping_index, m, sizeof *m, hash, mapping_equal, r);
}

/* The process `pid`, created empty if new; NULL: no memory. The pointer is valid until the next
 * process is created. */
static rp_process *find_process(replay *r, uint32_t pid)
{
    uint32_t i = fu_index_find(&r->process_index, fu_hash_u64(pid), process_equal, r, &pid);
    return i == FU_INDEX_NONE ? NULL : &RECORDS(r, processes, rp_process)[i];
}

static rp_process *process(replay *r, uint32_t pid)
{
    rp_process *found = find_process(r, pid);
    if (found)
        return found;
    rp_process p = {.pid = pid, .comm = {"", 0}, .space = FU_INDEX_NONE};
    uint32_t i = intern(&r->processes, &r->process_index, &p, sizeof p, fu_hash_u64(pid), process_equal, r);
    return i == FU_INDEX_NONE ? NULL : &RECORDS(r, processes, rp_process)[i];
}

static const fu_perf_string *thread_comm(const replay *r, uint32_t tid)
{
    uint32_t i = fu_index_find(&r->thread_comm_index, fu_hash_u64(tid), thread_comm_equal, r, &tid);
    return i == FU_INDEX_NONE ? NULL : &RECORDS(r, thread_comms, rp_thread_comm)[i].comm;
}

static bool set_thread_comm(replay *r, uint32_t tid, fu_perf_string comm)
{
    uint32_t i = fu_index_find(&r->thread_comm_index, fu_hash_u64(tid), thread_comm_equal, r, &tid);
    if (i != FU_INDEX_NONE) {
        RECORDS(r, thread_comms, rp_thread_comm)[i].comm = comm;
        return true;
    }
    rp_thread_comm t = {tid, comm};
    return intern(&r->thread_comms, &r->thread_comm_index, &t, sizeof t, fu_hash_u64(tid), thread_comm_equal, r) !=
           FU_INDEX_NONE;
}

static bool reserve_maps(rp_process *p, uint32_t need)
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

static bool on_mmap(replay *r, const fu_perf_mmap *m)
{
    bool executable = m->is_mmap2 ? (m->prot & PROT_EXEC) != 0 : true;
    if (!executable || m->length == 0)
        return true;
    uint64_t start = m->start, end = start + m->length < start ? UINT64_MAX : start + m->length;
    uint32_t file = intern_file(r, m);
    if (file == FU_INDEX_NONE)
        return false;
    rp_mapping mapping = {start, end, m->pgoff, file};
    uint32_t id = intern_mapping(r, &mapping);
    rp_process *p = id == FU_INDEX_NONE ? NULL : process(r, m->pid);
    if (!p || !reserve_maps(p, p->map_count + 1))
        return false;
    /* keep the mappings it does not overlap, insert it in start order */
    const rp_mapping *all = RECORDS(r, mappings, rp_mapping);
    uint32_t kept = 0, at = FU_INDEX_NONE;
    for (uint32_t i = 0; i < p->map_count; i++) {
        const rp_mapping *old = &all[p->maps[i]];
        if (old->end <= start || old->start >= end) {
            if (at == FU_INDEX_NONE && old->start > start)
                at = kept;
            p->maps[kept++] = p->maps[i];
        }
    }
    if (at == FU_INDEX_NONE)
        at = kept;
    memmove(p->maps + at + 1, p->maps + at, (size_t)(kept - at) * sizeof *p->maps);
    p->maps[at] = id;
    p->map_count = kept + 1;
    p->space = FU_INDEX_NONE;
    return true;
}

static bool on_comm(replay *r, const fu_perf_comm *c)
{
    fu_perf_string comm = own_name(r, (fu_perf_string){c->comm, c->comm_len});
    if (!comm.data || !set_thread_comm(r, c->tid, comm))
        return false;
    rp_process *p = process(r, c->pid);
    if (!p)
        return false;
    if (c->pid == c->tid)
        p->comm = comm;
    if (c->exec) {
        p->map_count = 0;
        p->space = FU_INDEX_NONE;
    }
    return true;
}

static bool on_fork(replay *r, const fu_perf_task *t)
{
    if (t->pid == t->ppid)
        return true; /* a new thread shares its process's address space */
    bool had_parent = find_process(r, t->ppid) != NULL;
    rp_process *child = process(r, t->pid);
    if (!child)
        return false;
    const rp_process *parent = had_parent ? find_process(r, t->ppid) : NULL; /* after the child's creation */
    if (parent) {
        if (!reserve_maps(child, parent->map_count))
            return false;
        if (parent->map_count)
            memcpy(child->maps, parent->maps, (size_t)parent->map_count * sizeof *child->maps);
        child->map_count = parent->map_count;
        child->comm = parent->comm;
        child->space = FU_INDEX_NONE;
    }
    const fu_perf_string *parent_comm = thread_comm(r, t->ppid);
    if (parent_comm && !thread_comm(r, t->tid))
        return set_thread_comm(r, t->tid, *parent_comm);
    return true;
}

/* The space of the process's current mappings (shared with every equal snapshot). */
static uint32_t space_of(replay *r, rp_process *p)
{
    if (p->space != FU_INDEX_NONE)
        return p->space;
    space_key key = {p->maps, p->map_count};
    uint64_t hash = fu_hash_bytes(p->maps, 4 * (size_t)p->map_count, 3);
    uint32_t found = fu_index_find(&r->space_index, hash, space_equal, r, &key);
    if (found == FU_INDEX_NONE) {
        rp_space s = {r->space_pool.len / 4, p->map_count};
        size_t count = r->spaces.len / sizeof s;
        if (count >= FU_INDEX_NONE - 1 || !fu_growing_append(&r->space_pool, p->maps, 4 * (size_t)p->map_count) ||
            !fu_growing_append(&r->spaces, &s, sizeof s) || !fu_index_insert(&r->space_index, hash, (uint32_t)count))
            return FU_INDEX_NONE;
        found = (uint32_t)count;
    }
    return p->space = found;
}

static bool on_sample(replay *r, const fu_perf_sample *s, uint32_t *space_id, uint32_t *comm_id)
{
    if (!find_process(r, s->pid))
        r->samples_without_process++;
    rp_process *p = process(r, s->pid);
    if (!p || (*space_id = space_of(r, p)) == FU_INDEX_NONE)
        return false;
    const fu_perf_string *comm = thread_comm(r, s->tid);
    fu_perf_string name = comm && comm->len ? *comm : p->comm;
    *comm_id = intern(&r->comm_names, &r->comm_name_index, &name, sizeof name, string_hash(name, 4), comm_name_equal,
                      r);
    return *comm_id != FU_INDEX_NONE;
}

static void replay_free(replay *r)
{
    for (uint32_t i = 0; i < COUNT(r, processes, rp_process); i++)
        free(RECORDS(r, processes, rp_process)[i].maps);
    fu_growing *arrays[] = {&r->files, &r->mappings, &r->processes, &r->thread_comms,
                            &r->spaces, &r->space_pool, &r->comm_names, &r->names, &r->renumbered};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        free(arrays[i]->data);
    fu_index_set *sets[] = {&r->file_index, &r->mapping_index, &r->process_index, &r->thread_comm_index,
                            &r->space_index, &r->comm_name_index, &r->name_index};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        fu_index_free(sets[i]);
    while (r->chunks) {
        name_chunk *next = r->chunks->next;
        free(r->chunks);
        r->chunks = next;
    }
    memset(r, 0, sizeof *r);
}

/* ---- results as Python objects ---------------------------------------------------------------- */

static PyObject *string_bytes(fu_perf_string s) { return PyBytes_FromStringAndSize(s.len ? s.data : "", s.len); }

/* Only the mappings some space holds are listed: their indices are renumbered in first-use order,
 * which later feeds continue (the pool only grows). Each list holds what is new since the last feed. */
static PyObject *build_result(replay *r, PyObject *space_ids, PyObject *comm_ids)
{
    uint32_t mapping_count = COUNT(r, mappings, rp_mapping);
    size_t known = r->renumbered.len / 4;
    if (!fu_growing_reserve(&r->renumbered, 4 * ((size_t)mapping_count - known + 1)))
        return PyErr_NoMemory();
    for (size_t i = known; i < mapping_count; i++)
        ((uint32_t *)(void *)r->renumbered.data)[i] = FU_INDEX_NONE;
    r->renumbered.len = 4 * (size_t)mapping_count;
    uint32_t *renumbered = (uint32_t *)(void *)r->renumbered.data;
    const uint32_t *pool = (const uint32_t *)(const void *)r->space_pool.data;
    PyObject *mappings = PyList_New(0), *result = NULL;
    for (size_t k = r->reported_pool; mappings && k < r->space_pool.len / 4; k++) {
        uint32_t id = pool[k];
        if (renumbered[id] == FU_INDEX_NONE) {
            const rp_mapping *m = &RECORDS(r, mappings, rp_mapping)[id];
            PyObject *item = Py_BuildValue("(KKKI)", (unsigned long long)m->start, (unsigned long long)m->end,
                                           (unsigned long long)m->pgoff, m->file);
            if (!item || PyList_Append(mappings, item) < 0)
                Py_CLEAR(mappings);
            Py_XDECREF(item);
            renumbered[id] = r->used_mappings++;
        }
    }
    uint32_t comm_count = COUNT(r, comm_names, fu_perf_string), space_count = COUNT(r, spaces, rp_space),
             file_count = COUNT(r, files, rp_file);
    PyObject *comm_names = PyList_New(comm_count - r->reported_comm_names);
    PyObject *spaces = PyList_New(space_count - r->reported_spaces);
    PyObject *files = PyList_New(file_count - r->reported_files);
    if (!mappings || !comm_names || !spaces || !files)
        goto done;
    for (uint32_t i = r->reported_comm_names; i < comm_count; i++) {
        PyObject *name = string_bytes(RECORDS(r, comm_names, fu_perf_string)[i]);
        if (!name)
            goto done;
        PyList_SET_ITEM(comm_names, i - r->reported_comm_names, name);
    }
    for (uint32_t i = r->reported_spaces; i < space_count; i++) {
        const rp_space *sp = &RECORDS(r, spaces, rp_space)[i];
        PyObject *ids = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)sp->count);
        if (!ids)
            goto done;
        uint32_t *out = (uint32_t *)(void *)PyBytes_AS_STRING(ids);
        for (uint32_t k = 0; k < sp->count; k++)
            out[k] = renumbered[pool[sp->offset + k]];
        PyList_SET_ITEM(spaces, i - r->reported_spaces, ids);
    }
    for (uint32_t i = r->reported_files; i < file_count; i++) {
        const rp_file *f = &RECORDS(r, files, rp_file)[i];
        PyObject *build_id = f->has_build_id ? PyBytes_FromStringAndSize((const char *)f->build_id, f->build_id_size)
                                             : Py_NewRef(Py_None);
        PyObject *name = f->perf_map ? PyBytes_FromFormat("/tmp/perf-%u.map", (unsigned)f->perf_map_pid)
                                     : string_bytes(f->name);
        if (!build_id || !name) {
            Py_XDECREF(name);
            Py_XDECREF(build_id);
            goto done;
        }
        PyObject *item = Py_BuildValue("(NN)", name, build_id);
        if (!item)
            goto done;
        PyList_SET_ITEM(files, i - r->reported_files, item);
    }
    result = Py_BuildValue("(OOOOOOK)", space_ids, comm_ids, comm_names, spaces, mappings, files,
                           (unsigned long long)r->samples_without_process);
    if (result) {
        r->reported_pool = r->space_pool.len / 4;
        r->reported_comm_names = comm_count;
        r->reported_spaces = space_count;
        r->reported_files = file_count;
    }
done:
    Py_XDECREF(comm_names);
    Py_XDECREF(spaces);
    Py_XDECREF(mappings);
    Py_XDECREF(files);
    return result;
}

static PyObject *replay_feed(PyObject *module, replay *r, PyObject *perf_data)
{
    const fu_perf_data *pd = py_core_payload(module, PY_PERF_DATA, perf_data);
    if (!pd)
        return NULL;
    if (pd->sample_count > FU_INDEX_NONE)
        return PyErr_Format(PyExc_ValueError, "%zu samples: more than this replay indexes", pd->sample_count);
    PyObject *space_ids = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)pd->sample_count);
    PyObject *comm_ids = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)pd->sample_count);
    if (!space_ids || !comm_ids) {
        Py_XDECREF(space_ids);
        Py_XDECREF(comm_ids);
        return NULL;
    }
    uint32_t *spaces_out = (uint32_t *)(void *)PyBytes_AS_STRING(space_ids);
    uint32_t *comms_out = (uint32_t *)(void *)PyBytes_AS_STRING(comm_ids);
    for (size_t i = 0; i < pd->sample_count; i++)
        spaces_out[i] = comms_out[i] = FU_INDEX_NONE; /* a sample the event index does not list */
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
                ok = on_sample(r, &pd->samples[event->index], &spaces_out[event->index], &comms_out[event->index]);
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
    PyObject *result = NULL;
    if (bad_index)
        PyErr_SetString(PyExc_ValueError, "the recording's event index points past its records");
    else if (!ok)
        PyErr_NoMemory();
    else
        result = build_result(r, space_ids, comm_ids);
    Py_DECREF(space_ids);
    Py_DECREF(comm_ids);
    return result;
}

static PyObject *replay_recording(PyObject *module, PyObject *perf_data)
{
    replay r = {0};
    PyObject *result = replay_feed(module, &r, perf_data);
    replay_free(&r);
    return result;
}

/* ---- Replay: the state kept across a stream's windows ------------------------------------------- */

typedef struct ReplayObject {
    PyObject_HEAD
    replay r;
} ReplayObject;

static void replay_object_dealloc(ReplayObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    replay_free(&self->r);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *replay_object_feed(ReplayObject *self, PyObject *perf_data)
{
    PyObject *module = PyType_GetModule(Py_TYPE(self));
    return module ? replay_feed(module, &self->r, perf_data) : NULL;
}

static PyMethodDef replay_object_methods[] = {
    {"feed", (PyCFunction)replay_object_feed, METH_O,
     "feed(window) -> replay_recording's tuple for the window, its lists holding only what is new"},
    {NULL},
};

static PyType_Slot replay_slots[] = {
    {Py_tp_dealloc, replay_object_dealloc},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_methods, replay_object_methods},
    {Py_tp_doc, "Replay(): processes and address spaces replayed across a stream's windows (perf_replay.c)."},
    {0, NULL},
};

static PyType_Spec replay_spec = {
    .name = "fastunwind._core.Replay",
    .basicsize = sizeof(ReplayObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = replay_slots,
};

static PyMethodDef replay_methods[] = {
    {"replay_recording", replay_recording, METH_O,
     "replay_recording(perf_data) -> (space_ids, comm_ids, comm_names, spaces, mappings, files, "
     "samples_without_process); see native/py/py_perf_replay.c"},
    {NULL},
};

int py_perf_replay_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, replay_methods) < 0)
        return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &replay_spec, NULL);
    if (!type || PyModule_AddObject(module, "Replay", type) < 0) {
        Py_XDECREF(type);
        return -1;
    }
    return 0;
}
