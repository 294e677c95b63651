/* The in-kernel unwinder: at each sample of a perf event (cpu-clock, one per CPU for every process,
 * or one per thread in scope inherited by its children: the events choose what is sampled) walks the user
 * stack of the interrupted process from the compact tables user space loaded into the maps of
 * bpf_layout.h, reading the stack only with bpf_probe_read_user, and sends the sample (its time,
 * thread, CPU, command name, user frames, kernel stack id and outcome) into its CPU's batch, sent
 * whole through the `samples` ring buffer (fu_bpf_batch). Nothing of the stack's contents leaves the
 * kernel but return addresses.
 *
 * The leaf's cold lines (its rule cache entry, module entry and block slot) are fetched together
 * first (start_fetches), so that their misses overlap. One frame is one bpf_loop iteration (step):
 * its rule from the CPU's previous walk where that walk had a frame at the same stack pointer and
 * PC (the memo), else find the mapping (the previous
 * frame's or one of the last four found, else a binary search over the process's sorted mappings),
 * the module's rule (the CPU's rule cache, else the slot of the PC's 512-byte block, one cache line
 * holding its rows' starts and packed rules; a continuation for a dense block, the dictionary for a
 * rule the packing cannot state), apply the rule (CFA from rsp, rbp or
 * another known register, the PLT expression, the DRAP deref, the signal context), read the return
 * address and the callee-saved registers the rule restores. Where no row covers the PC the frame
 * pointer is followed; a row the compact table leaves to the DWARF interpreter ends the walk as
 * FU_BPF_SLOW_ROW. Every loop has a constant bound. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

typedef __u8 uint8_t;
typedef __s8 int8_t;
typedef __u32 uint32_t;
typedef __s32 int32_t;
typedef __u64 uint64_t;
#include "bpf_layout.h"

/* bpf_probe_read_user is offered to GPL-compatible programs only */
char LICENSE[] SEC("license") = "GPL";

/* Set by user space before loading: time the walks and the samples (bpf_ktime_get_ns around them,
 * the *_NS counters); off, a sample reads the clock once, for its time. */
const volatile bool timing = false;
/* Incremented by user space after each change of the pids map: a CPU's last_scope is stale. */
__u64 scope_epoch = 0;

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, FU_BPF_MAX_RULES);
    __type(key, __u32);
    __type(value, fu_bpf_rule);
    __uint(map_flags, BPF_F_MMAPABLE);
} rules SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, FU_BPF_DEFAULT_SLOTS); /* user space sets the bound before loading */
    __type(key, __u32);
    __type(value, fu_bpf_block);
    __uint(map_flags, BPF_F_MMAPABLE);
} slots SEC(".maps");

/* The slots past the `slots` map's (its max_entries, which user space sets before loading, is
 * base_slots): segments of FU_BPF_SEGMENT_SLOTS that user space creates and inserts while recording,
 * when the tables outgrow the map (bpf_session.c grow_slots). */
const volatile __u32 base_slots = FU_BPF_DEFAULT_SLOTS;

struct slot_segment {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, FU_BPF_SEGMENT_SLOTS);
    __uint(key_size, sizeof(__u32));
    __uint(value_size, sizeof(fu_bpf_block));
    __uint(map_flags, BPF_F_MMAPABLE);
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
    __uint(max_entries, 1); /* user space sets the most segments the map may grow by */
    __type(key, __u32);
    __array(values, struct slot_segment);
} slot_segments SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, FU_BPF_MAX_MODULES);
    __type(key, __u32);
    __type(value, fu_bpf_module);
    __uint(map_flags, BPF_F_MMAPABLE);
} modules SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, FU_BPF_MAX_PROCESSES);
    __type(key, __u32);
    __type(value, fu_bpf_process);
} processes SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, FU_BPF_MAX_PROCESSES);
    __type(key, __u32);
    __type(value, __u32);
} pids SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, FU_BPF_MAX_PROCESSES);
    __type(key, __u32);
    __type(value, __u64);
} missing SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, FU_BPF_SAMPLE_RING_BYTES);
} samples SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_STACK_TRACE);
    __uint(max_entries, FU_BPF_KERNEL_STACKS);
    __uint(key_size, sizeof(__u32));
    __uint(value_size, 127 * sizeof(__u64));
} kstacks SEC(".maps");

/* DWARF register numbers the walk uses */
#define REG_RBX 3
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16
#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
#define REGISTERS 32 /* the array's size: a register number masked with 31 stays inside */
#define CALLEE_SAVED ((1u << 3) | (1u << 6) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15))

/* The DWARF number of fu_bpf_rule.saved_offset_by_8[i] (compact_table.h fu_compact_saved_register):
 * rbx, rbp, r12..r15. */
static __always_inline __u32 saved_register(int i)
{
    return i == 0 ? REG_RBX : i == 1 ? REG_RBP : 10 + i;
}

/* The signal frame's save slots (compact_table.h fu_compact_signal_context), relative to the lowest
 * one (FU_COMPACT_SIGNAL_CONTEXT_LOW = 40), read as one block of 136 bytes. */
#define SIGNAL_LOW 40
#define SIGNAL_WORDS 17

/* Stack reads go through a window of the stack copied with one bpf_probe_read_user: a call costs
 * mostly its fixed part and its first cold line (4, 8 and 16 KiB windows cost a walk alike, smaller
 * reads more: docs/BENCHMARKS.md), and a window serves the next frames too (the walk moves up the
 * stack); one that crosses the end of the stack's mapping fails (a fault, dearer than the read) and
 * is read again up to its page's end, so windows stop at the main thread's stack top where the
 * process's identity gives it. */
#define WINDOW 4096
#define WINDOW_BELOW 64
#define PAGE 4096

/* The mappings a walk remembers: a stack goes back and forth between a few libraries (clang's
 * between clang, libclang-cpp, libLLVM and libc), and each search is a few dependent cache lines
 * of the process's mappings. */
#define RECENT_MAPPINGS 4

/* The process slot this CPU's last walk used: for the same thread group, address space (mm) and exec
 * while user space has not changed the pids map since (scope_epoch), the next sample skips the pid
 * lookup and the address space's identity check (cold lines at each sample: ~0.5 us at 999 Hz). */
struct last_scope {
    __u64 mm;
    __u64 exec_id; /* the task's self_exec_id: an exec increments it (an mm may be reused across execs) */
    __u64 epoch;
    __u32 tgid;
    __u32 space; /* fu_bpf_stack.space_pid */
    __u32 slot;
    __u32 reserved;
    __u64 stack_top; /* the walk's window stops there (start_walk) */
};

/* The previous walk's rules, by frame (the memo): a frame's rule is a function of its PC, the
 * process's mappings and the modules' tables alone, and tables_epoch changes before any of them
 * does (bpf_session.c), so a frame at a PC the CPU's previous walk looked up in the same process
 * slot, with no change of epoch between that walk's start and its end and this walk's start, takes
 * that rule from here (one sequential 32-byte entry) instead of the mapping, the module's entry and
 * the rule cache or the block's slot (two or three lines the profiled program evicted). The rule
 * is then applied as any other: every stack read of the frame is made again, so the walk's frames
 * and outcome are those of a walk without the memo. Frames are matched by their stack pointer (the
 * entries ascend with it, as the walk does up the stack, so one cursor walks both), then by PC. */
struct memo_frame {
    __u64 pc;
    __u64 sp;
    fu_bpf_rule rule;
};

/* entries of a memo: FU_BPF_MAX_FRAMES rounded up to a power of two, so that an index masked with
 * MEMO_FRAMES - 1 stays inside (the verifier's bound) */
#define MEMO_FRAMES 64

struct memo {
    __u64 epoch;
    __u32 process;
    __u32 count; /* at most FU_BPF_MAX_FRAMES */
    struct memo_frame frames[MEMO_FRAMES];
};

/* User space adds 1 before it changes a process slot or a module's generation (bpf_session.c). */
volatile __u64 tables_epoch;

/* The CPU's state: the counters and the sample's header first (the lines every sample writes, on one
 * page: bpf_layout.h fu_bpf_cpu_counters), then the walk's. */
struct walk {
    fu_bpf_cpu_counters counters; /* first: user space reads them there */
    fu_bpf_sample sample;         /* its header (its user frames are written in the CPU's batch) */
    /* the mappings the walks found last (end 0: none), the previous frame's at `current`: kept from
     * walk to walk (start_walk) */
    fu_bpf_mapping recent[RECENT_MAPPINGS];
    /* where each recent mapping's module had its slots when a frame last read its entry (base_svma
     * ~0: not known): the leaf's block slot is fetched from there before the module's entry arrives
     * (start_fetches; a stale one only fetches a line the walk does not use) */
    __u64 recent_base_svma[RECENT_MAPPINGS];
    __u32 recent_first_slot[RECENT_MAPPINGS];
    __u32 current;
    __u32 recent_next; /* the entry the next search replaces */
    __u64 recent_epoch;     /* the process slot and tables_epoch the recent mappings were copied at */
    __u32 recent_process;
    __u64 window_base;      /* the window holds [window_base, window_base + WINDOW) when window_ok */
    __u64 window_end;       /* or, near the top of the stack, only up to here */
    __u64 stack_top;        /* the end of the page of the main thread's stack top (mm's start_stack);
                             * 0: unknown */
    __u8 window[WINDOW + 8];
    __u64 regs[REGISTERS]; /* DWARF numbering; REG_RA holds the IP */
    __u32 known;           /* bit r: regs[r] is the caller's true value */
    __u32 process;
    __u32 rule_cache_base; /* this CPU's first part in rule_caches */
    __u8 outcome;
    __u8 ip_is_return; /* look the IP up at IP - 1 (a return address) */
    __u8 done;
    __u8 wake; /* user space has a process to load: wake it */
    __u32 batch_at; /* where the sample's record starts in the CPU's batch (its frames are written
                     * there, its header here, in `sample`, copied there at the end) */
    __u64 signal[SIGNAL_WORDS];
    struct last_scope last;
    __u64 epoch;            /* tables_epoch at the walk's start */
    __u32 memo_previous;    /* memos[memo_previous & 1]: the previous walk's, the other this one's */
    __u32 memo_cursor;      /* the previous walk's first entry whose sp is not below this frame's */
    __u8 memo_usable;       /* the previous walk's memo is of this process slot and epoch */
    __u32 memo_frames;      /* this walk's frames whose rule came from the memo */
    struct memo memos[2];
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct walk);
} scratch SEC(".maps");

/* The rule found for (module, generation, svma), direct-mapped: the outer frames repeat from sample
 * to sample. */
struct cached_rule {
    __u64 svma;
    __u32 module;
    __u32 generation;
    fu_bpf_rule rule;
};

/* A CPU's rule cache is FU_BPF_RULE_CACHE_PARTS maps of its own, in the outer map `rule_caches` from
 * the CPU's number times FU_BPF_RULE_CACHE_PARTS (user space creates them: bpf_session.c), each of
 * at most FU_BPF_DIRECT_MAP_BYTES: kmalloc'd, in the kernel's direct map, where one array holding
 * every CPU's part is vmalloc'd (4 KiB pages, each a translation the profiled program evicts). The
 * verifier inlines both lookups. */
#define RULE_CACHE_PART_ENTRIES (FU_BPF_DIRECT_MAP_BYTES / sizeof(struct cached_rule))

struct rule_cache_part {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, RULE_CACHE_PART_ENTRIES);
    __uint(key_size, sizeof(__u32));
    /* by size: clang leaves an inner map's value struct a forward declaration in BTF */
    __uint(value_size, sizeof(struct cached_rule));
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
    __uint(max_entries, FU_BPF_RULE_CACHE_PARTS); /* user space sets FU_BPF_RULE_CACHE_PARTS per possible CPU */
    __type(key, __u32);
    __array(values, struct rule_cache_part);
} rule_caches SEC(".maps");

/* A CPU's batch of samples: one map of its own (kmalloc'd, bpf_layout.h fu_bpf_batch), in the outer
 * map `batches` at the CPU's number (user space creates them: bpf_session.c). */
struct batch {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __uint(key_size, sizeof(__u32));
    __uint(value_size, sizeof(fu_bpf_batch));
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
    __uint(max_entries, 1); /* user space sets one per possible CPU */
    __type(key, __u32);
    __array(values, struct batch);
} batches SEC(".maps");

static __always_inline void count_n(__u32 counter, __u64 n)
{
    __u32 zero = 0;
    struct walk *w = bpf_map_lookup_elem(&scratch, &zero);
    if (w && counter < FU_BPF_COUNTER_COUNT)
        w->counters.count[counter] += n;
}

static __always_inline void count(__u32 counter)
{
    count_n(counter, 1);
}

/* The CPU's batch (bpf_layout.h fu_bpf_batch), or NULL. */
static __always_inline fu_bpf_batch *cpu_batch(__u32 cpu)
{
    __u32 zero = 0;
    void *inner = bpf_map_lookup_elem(&batches, &cpu);
    return inner ? bpf_map_lookup_elem(inner, &zero) : NULL;
}

/* Reads the user word at addr into *out, from the window or by refilling it there; 0 or a
 * bpf_probe_read_user error. */
static __always_inline long read_user(struct walk *w, __u64 addr, __u64 *out)
{
    __u64 off = addr - w->window_base;
    if (addr >= w->window_base && addr + 8 <= w->window_end && off <= WINDOW - 8) {
        *out = *(__u64 *)(w->window + (off & (WINDOW - 1)));
        return 0;
    }
    /* the whole window from a little below addr (a frame's rbp slot is read after its return
     * address, 8 bytes lower) */
    count(FU_BPF_COUNTER_STACK_READS);
    __u64 base = addr - WINDOW_BELOW, size = WINDOW;
    if (addr < w->stack_top && w->stack_top - base < WINDOW)
        size = w->stack_top - base;
    if (addr >= WINDOW_BELOW && size >= WINDOW_BELOW + 8 && size <= WINDOW &&
        bpf_probe_read_user(w->window, size, (void *)base) == 0) {
        w->window_base = base;
        w->window_end = base + size;
        *out = *(__u64 *)(w->window + WINDOW_BELOW);
        return 0;
    }
    /* else from addr to the end of its page (the top of the stack is a page end) */
    size = PAGE - (addr & (PAGE - 1));
    if (size > WINDOW)
        size = WINDOW;
    w->window_end = 0;
    if (size < 8 || size > WINDOW)
        return -1;
    long e = bpf_probe_read_user(w->window, size, (void *)addr);
    if (e)
        return e;
    w->window_base = addr;
    w->window_end = addr + size;
    *out = *(__u64 *)w->window;
    return 0;
}

static __always_inline long finish(struct walk *w, __u8 outcome)
{
    w->outcome = outcome;
    w->done = 1;
    return 1;
}

/* Asks user space to (re)load the process's mappings; the first ask since user space last took them
 * wakes it (the sample is sent with BPF_RB_FORCE_WAKEUP) instead of waiting for its next poll. */
static __always_inline void note_missing(struct walk *w, __u32 tgid)
{
    __u64 one = 1, *seen = bpf_map_lookup_elem(&missing, &tgid);
    if (seen)
        __sync_fetch_and_add(seen, 1);
    else if (bpf_map_update_elem(&missing, &tgid, &one, BPF_NOEXIST) == 0)
        w->wake = 1;
}

/* Whether the sampled task's address space is the one process p's mappings were read from
 * (fu_bpf_space_identity; unknown: yes). */
static __always_inline bool same_address_space(const struct mm_struct *mm, const fu_bpf_process *p)
{
    const fu_bpf_space_identity *id = &p->identity;
    if (!(id->start_code | id->end_code | id->start_stack | id->start_brk))
        return true;
    return mm->start_code == id->start_code && mm->end_code == id->end_code && mm->start_stack == id->start_stack &&
           mm->start_brk == id->start_brk;
}

/* The mapping covering pc, or NULL. */
static __always_inline const fu_bpf_mapping *find_mapping(const fu_bpf_process *p, __u64 pc)
{
    __u32 n = p->count, lo = 0;
    if (n == 0 || n > FU_BPF_MAX_MAPPINGS)
        return NULL;
    for (int i = 0; i < FU_BPF_MAPPING_SEARCH_STEPS && n > 1; i++) {
        __u32 half = n / 2, mid = (lo + half) & (FU_BPF_MAX_MAPPINGS - 1);
        if (p->mappings[mid].start <= pc)
            lo = mid;
        n -= half;
    }
    const fu_bpf_mapping *m = &p->mappings[lo & (FU_BPF_MAX_MAPPINGS - 1)];
    return m->start <= pc && pc < m->end ? m : NULL;
}

/* Follows the frame pointer: CFA = rbp + 16, the return address at rbp + 8, the caller's rbp at rbp. */
static __always_inline long frame_pointer_step(struct walk *w)
{
    __u64 bp = w->regs[REG_RBP], sp = w->regs[REG_RSP];
    if (!(w->known & (1u << REG_RBP)) || bp < sp || (bp & 7) || bp == 0)
        return finish(w, FU_BPF_NO_UNWIND_INFO);
    __u64 saved[2];
    if (read_user(w, bp, &saved[0]) || read_user(w, bp + 8, &saved[1]))
        return finish(w, FU_BPF_UNREADABLE);
    count(FU_BPF_COUNTER_FP_FRAMES);
    w->regs[REG_RSP] = bp + 16;
    w->regs[REG_RBP] = saved[0];
    w->regs[REG_RA] = saved[1];
    w->known &= CALLEE_SAVED | (1u << REG_RSP) | (1u << REG_RA);
    w->ip_is_return = 1;
    if (saved[1] == 0)
        return finish(w, FU_BPF_NO_UNWIND_INFO); /* a frame-pointer chain does not prove an outermost frame */
    return 0;
}

static __always_inline long signal_step(struct walk *w)
{
    __u64 sp = w->regs[REG_RSP];
    if (bpf_probe_read_user(w->signal, sizeof w->signal, (void *)(sp + SIGNAL_LOW)))
        return finish(w, FU_BPF_UNREADABLE);
    /* (offset - 40) / 8 of fu_compact_signal_context, DWARF 0..16 */
    w->regs[0] = w->signal[13];
    w->regs[1] = w->signal[12];
    w->regs[2] = w->signal[14];
    w->regs[3] = w->signal[11];
    w->regs[4] = w->signal[9];
    w->regs[5] = w->signal[8];
    w->regs[6] = w->signal[10];
    w->regs[7] = w->signal[15];
    w->regs[8] = w->signal[0];
    w->regs[9] = w->signal[1];
    w->regs[10] = w->signal[2];
    w->regs[11] = w->signal[3];
    w->regs[12] = w->signal[4];
    w->regs[13] = w->signal[5];
    w->regs[14] = w->signal[6];
    w->regs[15] = w->signal[7];
    w->regs[16] = w->signal[16];
    w->known = (1u << 17) - 1;
    w->ip_is_return = 0; /* the interrupted instruction itself */
    return w->regs[REG_RA] == 0 ? finish(w, FU_BPF_END) : 0;
}

/* Slot `at` of the tables: in the `slots` map (whose inlined lookup is NULL from base_slots on),
 * else in a segment the map grew by; NULL where there is none. The slots map's lookup is all a walk pays
 * while the map has not grown: the segments are reached only past its end. */
static __always_inline const fu_bpf_block *slot_at(__u32 at)
{
    const fu_bpf_block *b = bpf_map_lookup_elem(&slots, &at);
    if (b)
        return b;
    __u32 rest = at - base_slots, segment = rest >> FU_BPF_SEGMENT_SHIFT, within = rest & (FU_BPF_SEGMENT_SLOTS - 1);
    void *inner = bpf_map_lookup_elem(&slot_segments, &segment);
    return inner ? bpf_map_lookup_elem(inner, &within) : NULL;
}

/* The rule cache's entry of (module, svma) on this CPU, or NULL: a hash's low bits choose the part,
 * the next 16 its entry (scaled to the part's entries). */
static __always_inline struct cached_rule *rule_cache_entry(const struct walk *w, __u64 svma, __u32 module_id)
{
    __u32 hash = (__u32)(svma ^ (svma >> 17) ^ ((__u64)module_id << 7));
    __u32 part = w->rule_cache_base + hash % FU_BPF_RULE_CACHE_PARTS;
    __u32 index = (__u32)(((hash / FU_BPF_RULE_CACHE_PARTS) & 0xffff) * RULE_CACHE_PART_ENTRIES >> 16);
    void *cache = bpf_map_lookup_elem(&rule_caches, &part);
    return cache ? bpf_map_lookup_elem(cache, &index) : NULL;
}

/* The rule of the frame at pc (frame n) from the process's mappings and the module's table into *rule
 * (-1), or the step's end where there is none (the bpf_loop callback's return: the frame pointer
 * followed, or the walk ended). */
static __always_inline long find_rule(struct walk *w, __u64 pc, __u32 n, fu_bpf_rule *rule)
{
    /* consecutive frames mostly stay in one mapping, and a stack visits a few: the walk's recent
     * mappings are tried before the process's are searched */
    __u32 current = w->current & (RECENT_MAPPINGS - 1);
    if (pc < w->recent[current].start || pc >= w->recent[current].end) {
        current = RECENT_MAPPINGS;
        for (int i = 0; i < RECENT_MAPPINGS; i++)
            if (w->recent[i].start <= pc && pc < w->recent[i].end) {
                current = i;
                break;
            }
        if (current == RECENT_MAPPINGS) {
            count(FU_BPF_COUNTER_MAPPING_SEARCHES);
            const fu_bpf_process *p = bpf_map_lookup_elem(&processes, &w->process);
            if (!p)
                return finish(w, FU_BPF_NO_PROCESS);
            const fu_bpf_mapping *m = find_mapping(p, pc);
            if (!m && p->left_out) /* not asked for again: user space left them out, and its rescan sees new ones */
                return finish(w, FU_BPF_MAPPINGS_LEFT_OUT);
            if (!m) {
                note_missing(w, w->sample.stack.space_pid); /* mapped since user space last looked (or JIT code): ask for a rescan */
                /* the sampled PC is always in a mapping of the process: not finding it means the loaded
                 * mappings are older than its code (an exec, a mapping since), not that it lacks CFI */
                if (n == 0)
                    return finish(w, FU_BPF_NO_PROCESS);
                return frame_pointer_step(w);
            }
            current = w->recent_next++ & (RECENT_MAPPINGS - 1);
            w->recent[current] = *m;
            w->recent_base_svma[current] = ~0ull;
        }
        w->current = current;
    }
    const fu_bpf_mapping *mapping = &w->recent[current & (RECENT_MAPPINGS - 1)];
    if (mapping->module == FU_BPF_NO_MODULE)
        return frame_pointer_step(w);
    __u32 module_id = mapping->module, generation = mapping->generation;
    __u64 svma = pc - mapping->bias;
    const fu_bpf_module *mod = bpf_map_lookup_elem(&modules, &module_id);
    if (!mod)
        return finish(w, FU_BPF_NO_TABLE);
    if (READ_ONCE(mod->generation) != generation)
        return finish(w, FU_BPF_TABLE_EVICTED);
    if (generation & 1)
        return finish(w, FU_BPF_NO_TABLE);
    if (svma < mod->base_svma || svma >= mod->end_svma)
        return frame_pointer_step(w);
    w->recent_base_svma[current & (RECENT_MAPPINGS - 1)] = mod->base_svma;
    w->recent_first_slot[current & (RECENT_MAPPINGS - 1)] = mod->first_slot;
    /* the rule of a PC this CPU walked recently (the outer frames repeat from sample to sample)
     * costs one line; else the slot of the PC's block: its rows' starts and packed rules in one line
     * (bpf_layout.c fu_bpf_find_rule) */
    struct cached_rule *cached = rule_cache_entry(w, svma, module_id);
    if (cached && cached->svma == svma && cached->module == module_id && cached->generation == generation) {
        *rule = cached->rule;
    } else {
        count(FU_BPF_COUNTER_SLOT_LOOKUPS);
        __u32 offset = (__u32)(svma - mod->base_svma), block = offset >> FU_BPF_BLOCK_SHIFT;
        __u32 within = offset & ((1u << FU_BPF_BLOCK_SHIFT) - 1), first = mod->first_slot,
              slot_count = mod->slot_count;
        if (block >= mod->block_count)
            return finish(w, FU_BPF_NO_TABLE);
        __u32 at = first + block;
        const fu_bpf_block *b = slot_at(at);
        if (!b)
            return finish(w, FU_BPF_NO_TABLE);
        for (int i = 0; i < FU_BPF_BLOCK_CHAIN_STEPS; i++) {
            __u32 next = b->next;
            if (!next || within < next >> FU_BPF_NEXT_SLOT_BITS)
                break;
            if ((next & FU_BPF_NEXT_SLOT_MASK) >= slot_count)
                return finish(w, FU_BPF_NO_TABLE);
            count(FU_BPF_COUNTER_EXTRA_LOOKUPS);
            at = first + (next & FU_BPF_NEXT_SLOT_MASK);
            b = slot_at(at);
            if (!b)
                return finish(w, FU_BPF_NO_TABLE);
        }
        if (b->next && within >= b->next >> FU_BPF_NEXT_SLOT_BITS)
            return finish(w, FU_BPF_NO_TABLE);
        __u32 row = b->rows[fu_bpf_block_row(b, within)] & FU_BPF_PACKED_RULE;
        if (!(row & FU_BPF_PACKED_ESCAPE)) {
            fu_bpf_unpack_rule(row, rule);
        } else {
            count(FU_BPF_COUNTER_EXTRA_LOOKUPS);
            __u32 rule_id = row & ~FU_BPF_PACKED_ESCAPE;
            fu_bpf_rule *found = bpf_map_lookup_elem(&rules, &rule_id);
            if (!found)
                return finish(w, FU_BPF_NO_TABLE);
            *rule = *found;
        }
        if (READ_ONCE(mod->generation) != generation) /* evicted while we read: do not trust the row */
            return finish(w, FU_BPF_TABLE_EVICTED);
        if (cached) {
            cached->svma = svma;
            cached->module = module_id;
            cached->generation = generation;
            cached->rule = *rule;
        }
    }

    return -1;
}

/* The previous walk's rule for the frame at (pc, sp) into *rule, if it had a frame there. */
static __always_inline bool rule_from_memo(struct walk *w, __u64 pc, __u64 sp, fu_bpf_rule *rule)
{
    const struct memo *m = &w->memos[w->memo_previous & 1];
    __u32 c = w->memo_cursor, count = m->count;
    for (int i = 0; i < FU_BPF_MAX_FRAMES && c < count && m->frames[c & (MEMO_FRAMES - 1)].sp < sp; i++)
        c++;
    w->memo_cursor = c;
    const struct memo_frame *f = &m->frames[c & (MEMO_FRAMES - 1)];
    if (c >= count || f->sp != sp || f->pc != pc)
        return false;
    *rule = f->rule;
    return true;
}

/* Keeps the frame's rule in this walk's memo (for the next walk on this CPU). */
static __always_inline void remember_rule(struct walk *w, __u64 pc, __u64 sp, const fu_bpf_rule *rule)
{
    struct memo *m = &w->memos[(w->memo_previous + 1) & 1];
    __u32 c = m->count;
    if (c >= FU_BPF_MAX_FRAMES)
        return;
    struct memo_frame *f = &m->frames[c & (MEMO_FRAMES - 1)];
    f->pc = pc;
    f->sp = sp;
    f->rule = *rule;
    m->count = c + 1;
}

/* Applies the frame's rule: the caller's CFA, return address and callee-saved registers (the bpf_loop
 * callback's return: 0 to go on, 1 when the walk ended). */
static __always_inline long apply_rule(struct walk *w, const fu_bpf_rule *rule, __u64 ip)
{
    __u64 sp = w->regs[REG_RSP], cfa;
    __u32 reg = rule->cfa_register & (REGISTERS - 1);
    switch (rule->cfa_kind) {
    case FU_BPF_CFA_NO_INFO:
        return frame_pointer_step(w);
    case FU_BPF_CFA_SLOW:
        return finish(w, FU_BPF_SLOW_ROW);
    case FU_BPF_CFA_RSP:
        cfa = sp + (__s64)rule->cfa_offset;
        break;
    case FU_BPF_CFA_RBP:
        if (!(w->known & (1u << REG_RBP)))
            return finish(w, FU_BPF_REGISTER_UNKNOWN);
        cfa = w->regs[REG_RBP] + (__s64)rule->cfa_offset;
        break;
    case FU_BPF_CFA_REGISTER:
        if (!(w->known & (1u << reg)))
            return finish(w, FU_BPF_REGISTER_UNKNOWN);
        cfa = w->regs[reg] + (__s64)rule->cfa_offset;
        break;
    case FU_BPF_CFA_PLT:
        cfa = sp + 8 + ((ip & 15) >= 11 ? 8 : 0);
        break;
    case FU_BPF_CFA_DEREF:
        if (!(w->known & (1u << reg)))
            return finish(w, FU_BPF_EXPRESSION_ERROR);
        if (read_user(w, w->regs[reg] + (__s64)rule->cfa_offset, &cfa))
            return finish(w, FU_BPF_UNREADABLE);
        break;
    case FU_BPF_CFA_SIGNAL_CONTEXT:
        return signal_step(w);
    default:
        return finish(w, FU_BPF_NO_TABLE);
    }
    /* a rule derived from the code always has a return address (compact_table.c): only declared
     * CFI ends a stack */
    if (rule->ra_offset_by_8 == FU_BPF_KEEP || rule->ra_offset_by_8 == FU_BPF_UNDEFINED)
        return finish(w, rule->origin == FU_BPF_ORIGIN_DECLARED ? FU_BPF_END : FU_BPF_NO_UNWIND_INFO);
    if (rule->origin != FU_BPF_ORIGIN_DECLARED)
        count(FU_BPF_COUNTER_DERIVED_FRAMES);
    if (cfa <= sp)
        return finish(w, FU_BPF_SP_BACKWARDS);
    __u64 ra;
    if (read_user(w, cfa + 8 * (__s64)rule->ra_offset_by_8, &ra))
        return finish(w, FU_BPF_UNREADABLE);
    /* the callee-saved registers the rule restores are read from their slots (in the window, with
     * the return address): below the CFA, where an unreadable slot makes its register unknown, or
     * (slot > 0, DRAP frames) from the callee's rbp, which must be known and the slot readable (the
     * C walker's outcomes, walk_step.inc apply_rbp_slots_rule); one it leaves undefined becomes
     * unknown, the others keep their value; caller-saved registers stay known where the rule keeps
     * them */
    __u32 known = w->known & (CALLEE_SAVED | rule->kept_caller_saved);
    __u64 rbp = w->regs[REG_RBP];
    bool rbp_known = w->known & (1u << REG_RBP);
    for (int i = 0; i < 6; i++) {
        __s8 slot = rule->saved_offset_by_8[i];
        __u32 r = saved_register(i);
        if (slot == FU_BPF_UNDEFINED) {
            known &= ~(1u << r);
        } else if (slot != FU_BPF_KEEP) {
            if (slot > 0 && !rbp_known)
                return finish(w, FU_BPF_EXPRESSION_ERROR);
            __u64 at = slot > 0 ? rbp + 8 * (__s64)(FU_BPF_RBP_SLOT_FIRST - slot) : cfa + 8 * (__s64)slot;
            if (read_user(w, at, &w->regs[r & (REGISTERS - 1)]) == 0)
                known |= 1u << r;
            else if (slot > 0)
                return finish(w, FU_BPF_UNREADABLE);
            else
                known &= ~(1u << r);
        }
    }
    w->regs[REG_RSP] = cfa;
    w->regs[REG_RA] = ra;
    w->known = known | (1u << REG_RSP) | (1u << REG_RA);
    w->ip_is_return = 1;
    return ra == 0 ? finish(w, FU_BPF_END) : 0;
}

static long step(__u32 index, void *context)
{
    __u32 zero = 0;
    struct walk *w = bpf_map_lookup_elem(&scratch, &zero);
    if (!w)
        return 1;
    __u32 n = w->sample.stack.user_count;
    if (n >= FU_BPF_MAX_FRAMES)
        return finish(w, FU_BPF_FRAME_LIMIT);
    __u64 ip = w->regs[REG_RA];
    /* the frame straight into the sample's record in the CPU's batch: the sample found the batch
     * and its record's start within bounds (start_record), so neither test fails; they are the
     * verifier's */
    fu_bpf_batch *b = cpu_batch(w->sample.cpu);
    __u32 at = w->batch_at;
    if (!b || at > FU_BPF_BATCH_BYTES - FU_BPF_SAMPLE_MAX_BYTES)
        return finish(w, FU_BPF_FRAME_LIMIT);
    *(__u64 *)(b->data + at + FU_BPF_SAMPLE_HEADER + 8 * n) = ip;
    w->sample.stack.user_count = n + 1;
    if (n > 0 && !w->ip_is_return)
        w->sample.stack.interrupted |= 1ull << n;
    __u64 pc = ip - (w->ip_is_return ? 1 : 0);

    fu_bpf_rule rule;
    __u64 sp = w->regs[REG_RSP];
    if (w->memo_usable && rule_from_memo(w, pc, sp, &rule)) {
        w->memo_frames++;
    } else {
        long stepped = find_rule(w, pc, n, &rule);
        if (stepped >= 0)
            return stepped;
    }
    remember_rule(w, pc, sp, &rule);
    return apply_rule(w, &rule, ip);
}

/* What this walk takes from the CPU's previous one: its recent mappings, copies of the process slot's
 * entries, while the slot is the same and the epoch has not changed since that walk started (the
 * slot's entries are then those it copied), and its memo (remember_rule); this walk's memo starts
 * empty. */
static __always_inline void start_walk(struct walk *w, __u64 stack_top)
{
    w->stack_top = stack_top;
    const struct memo *previous = &w->memos[w->memo_previous & 1];
    w->epoch = tables_epoch;
    if (w->recent_epoch != w->epoch || w->recent_process != w->process) {
        for (int i = 0; i < RECENT_MAPPINGS; i++)
            w->recent[i].end = 0;
        w->current = 0;
        w->recent_next = 0;
        w->recent_epoch = w->epoch;
        w->recent_process = w->process;
    }
    w->memo_usable = previous->count && previous->epoch == w->epoch && previous->process == w->process;
    w->memo_cursor = 0;
    w->memo_frames = 0;
    w->memos[(w->memo_previous + 1) & 1].count = 0;
}

/* Loads a byte at p and discards it: its line is fetched while the walk goes on (a volatile load,
 * which the compiler and the JIT keep). */
static __always_inline void touch(const void *p)
{
    __u8 v = *(const volatile __u8 *)p;
    barrier_var(v);
}

/* Starts the leaf's cold lines at once, before any of them is used: its rule cache entry, its
 * module's entry and its block's slot, where the leaf's PC is in one of the recent mappings. Looked
 * up in order, each waited for the one before (the module's entry for the slot's position, the rule
 * cache's compare for the slot); fetched together, their misses overlap (docs/DESIGN.md, "Where a
 * frame's time goes"). Nothing is read from them here: the leaf's lookup reads them as it would
 * have, so a stale mapping or position only costs a line fetched for nothing. */
static __always_inline void start_fetches(struct walk *w)
{
    __u64 pc = w->regs[REG_RA];
    for (int i = 0; i < RECENT_MAPPINGS; i++) {
        const fu_bpf_mapping *m = &w->recent[i];
        if (pc < m->start || pc >= m->end || m->module == FU_BPF_NO_MODULE)
            continue;
        __u32 module_id = m->module;
        __u64 svma = pc - m->bias, base = w->recent_base_svma[i];
        const struct cached_rule *cached = rule_cache_entry(w, svma, module_id);
        if (cached)
            touch(cached);
        const fu_bpf_module *mod = bpf_map_lookup_elem(&modules, &module_id);
        if (mod)
            touch(mod);
        if (svma >= base) {
            __u32 at = w->recent_first_slot[i] + (__u32)((svma - base) >> FU_BPF_BLOCK_SHIFT);
            const fu_bpf_block *b = slot_at(at);
            if (b)
                touch(b);
        }
        break;
    }
}

/* This walk's memo serves the next if the tables did not change while it was walked. */
static __always_inline void end_walk(struct walk *w)
{
    struct memo *m = &w->memos[(w->memo_previous + 1) & 1];
    m->epoch = w->epoch;
    m->process = w->process;
    if (tables_epoch != w->epoch)
        m->count = 0;
    w->memo_previous++;
}

/* Sends the batch's records as one ring buffer record (a full ring drops them: counted) and empties
 * it. */
static __always_inline void send_batch(fu_bpf_batch *b, __u64 flags)
{
    __u32 bytes = b->bytes;
    if (bytes > FU_BPF_BATCH_BYTES)
        bytes = FU_BPF_BATCH_BYTES;
    if (bytes && bpf_ringbuf_output(&samples, b->data, bytes, flags))
        count_n(FU_BPF_COUNTER_SAMPLES_DROPPED, b->records);
    b->bytes = 0;
    b->records = 0;
}

/* Where the sample's record starts in the CPU's batch: after its records, or at its start once they
 * are sent, when a sample might not fit after them (at most FU_BPF_BATCH_BYTES -
 * FU_BPF_SAMPLE_MAX_BYTES: a record of every frame fits). */
static __always_inline __u32 start_record(fu_bpf_batch *b)
{
    __u32 at = b->bytes;
    if (at > FU_BPF_BATCH_BYTES - FU_BPF_SAMPLE_MAX_BYTES) {
        send_batch(b, BPF_RB_NO_WAKEUP);
        at = 0;
    }
    return at;
}

static __always_inline void load_registers(struct walk *w, const bpf_user_pt_regs_t *r)
{
    w->regs[0] = r->ax;
    w->regs[1] = r->dx;
    w->regs[2] = r->cx;
    w->regs[3] = r->bx;
    w->regs[4] = r->si;
    w->regs[5] = r->di;
    w->regs[6] = r->bp;
    w->regs[7] = r->sp;
    w->regs[8] = r->r8;
    w->regs[9] = r->r9;
    w->regs[10] = r->r10;
    w->regs[11] = r->r11;
    w->regs[12] = r->r12;
    w->regs[13] = r->r13;
    w->regs[14] = r->r14;
    w->regs[15] = r->r15;
    w->regs[16] = r->ip;
    w->known = (1u << 17) - 1;
}

/* The user registers saved at the kernel entry of a sample that interrupted the kernel, into the walk;
 * false if they are not a user state. A subprogram: inlined, the compiler merges its loads with the
 * context's, which the verifier refuses (one instruction reading the context and the stack). */
static __noinline bool load_entry_registers(struct walk *w, struct task_struct *task)
{
    struct pt_regs saved;
    if (bpf_probe_read_kernel(&saved, sizeof saved, (void *)bpf_task_pt_regs(task)) || (saved.cs & 3) != 3)
        return false;
    load_registers(w, &saved);
    return true;
}

SEC("perf_event")
int sample(struct bpf_perf_event_data *ctx)
{
    /* the thread and its process from the task's own fields (bpf_get_current_pid_tgid's values): a
     * helper call costs its cold kernel text at each sample */
    struct task_struct *task = bpf_get_current_task_btf();
    __u32 tgid = task->tgid, zero = 0;
    if (tgid == 0)
        return 0;
    __u64 entered = timing ? bpf_ktime_get_ns() : 0;
    struct walk *w = bpf_map_lookup_elem(&scratch, &zero);
    if (!w)
        return 0;
    count(FU_BPF_COUNTER_SAMPLES);
    __u32 cpu = bpf_get_smp_processor_id();
    fu_bpf_batch *b = cpu_batch(cpu);
    if (!b) {
        count(FU_BPF_COUNTER_SAMPLES_DROPPED);
        return 0;
    }
    __u32 at = start_record(b);
    w->batch_at = at;
    __builtin_memset(&w->sample, 0, FU_BPF_SAMPLE_HEADER);
    w->sample.tid = task->pid;
    w->sample.cpu = cpu;
    w->rule_cache_base = w->sample.cpu * FU_BPF_RULE_CACHE_PARTS;
    /* the command name as two 8-byte loads (the kernel keeps it NUL-padded): bpf_get_current_comm's
     * call (its cold text, its string copy) cost ~200 ns a sample at 999 Hz, ~470 at 99 Hz */
    __builtin_memcpy(w->sample.comm, task->comm, sizeof w->sample.comm);
    w->sample.stack.pid = tgid;
    /* the context is read in 8-byte words only (cs is a u16 in this kernel's pt_regs) */
    __u64 cs = *(volatile __u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));
    w->sample.stack.kernel_stack = (cs & 3) != 3 ? bpf_get_stackid(ctx, &kstacks, 0) : -1;
    w->done = 0;
    w->wake = 0;
    w->window_end = 0;
    w->outcome = FU_BPF_END;
    w->ip_is_return = 0;
    bool walked = false;
    struct mm_struct *mm = task->mm;
    /* the user registers: the sample's own when it interrupted user code, else those saved at the
     * kernel entry */
    bool user = false;
    if (mm && (cs & 3) == 3) {
        load_registers(w, &ctx->regs);
        user = true;
    } else if (mm) {
        user = load_entry_registers(w, task);
    }
    if (!user) {
        w->outcome = FU_BPF_KERNEL_ONLY;
    } else {
        __u64 epoch = READ_ONCE(scope_epoch), exec_id = task->self_exec_id;
        bool found = w->last.tgid == tgid && w->last.mm == (__u64)mm && w->last.exec_id == exec_id &&
                     w->last.epoch == epoch;
        if (!found) {
            __u32 *slot = bpf_map_lookup_elem(&pids, &tgid), space = tgid;
            /* a child that has not exec'd since fork has its parent's mappings: it is walked with
             * them (and not loaded: a forking server's children are many and short-lived) */
            if (!slot && exec_id == task->parent_exec_id) {
                space = task->real_parent->tgid;
                slot = bpf_map_lookup_elem(&pids, &space);
            }
            w->outcome = FU_BPF_NOT_LOADED;
            if (!slot) {
                space = tgid;
                note_missing(w, tgid);
            }
            /* mappings read from another address space (the process exec'd since, or the parent a
             * child forked from did) would walk the new code with the old tables: the sampled
             * process is loaded anew instead */
            const fu_bpf_process *p = slot ? bpf_map_lookup_elem(&processes, slot) : NULL;
            if (p && !same_address_space(mm, p)) {
                count(FU_BPF_COUNTER_SPACE_CHANGED);
                note_missing(w, tgid);
                w->outcome = FU_BPF_NO_PROCESS;
                p = NULL;
            }
            w->last.tgid = 0;
            if (p) {
                __u64 stack_start = p->identity.start_stack;
                w->last = (struct last_scope){.mm = (__u64)mm, .exec_id = exec_id, .epoch = epoch, .tgid = tgid,
                                              .space = space, .slot = *slot,
                                              .stack_top = stack_start ? (stack_start | (PAGE - 1)) + 1 : 0};
                found = true;
            }
            w->sample.stack.space_pid = space;
        }
        if (!found) {
            *(__u64 *)(b->data + at + FU_BPF_SAMPLE_HEADER) = w->regs[REG_RA];
            w->sample.stack.user_count = 1;
        } else {
            w->sample.stack.space_pid = w->last.space;
            w->outcome = FU_BPF_END;
            w->process = w->last.slot;
            __u64 start = timing ? bpf_ktime_get_ns() : 0;
            start_walk(w, w->last.stack_top);
            start_fetches(w);
            bpf_loop(FU_BPF_MAX_FRAMES + 1, step, NULL, 0);
            end_walk(w);
            __u64 n = w->sample.stack.user_count, m = w->memo_frames;
            count_n(FU_BPF_COUNTER_MEMO_FRAMES, m);
            if (timing) {
                __u64 walk_ns = bpf_ktime_get_ns() - start;
                count_n(FU_BPF_COUNTER_WALK_NS, walk_ns);
                count_n(FU_BPF_COUNTER_WALK_NS_BY_FRAMES, n * walk_ns);
                count_n(FU_BPF_COUNTER_MEMO_FRAMES_SQUARED, m * m);
                count_n(FU_BPF_COUNTER_MEMO_BY_FRAMES, n * m);
                count_n(FU_BPF_COUNTER_WALK_NS_BY_MEMO, m * walk_ns);
            }
            count(FU_BPF_COUNTER_WALKED_SAMPLES);
            count_n(FU_BPF_COUNTER_FRAMES, n);
            count_n(FU_BPF_COUNTER_FRAMES_SQUARED, n * n);
            walked = true;
            if (!w->done)
                w->outcome = FU_BPF_FRAME_LIMIT;
        }
    }
    w->sample.stack.outcome = w->outcome;
    count(FU_BPF_COUNTER_OUTCOME + (w->outcome < FU_BPF_OUTCOME_COUNT ? w->outcome : 0));
    w->sample.time = bpf_ktime_get_ns();
    __u32 frames = w->sample.stack.user_count;
    if (frames > FU_BPF_MAX_FRAMES)
        frames = FU_BPF_MAX_FRAMES;
    /* the header before the frames the walk wrote; no wakeup (user space takes the records every
     * 100 ms) unless there is a process to load */
    __builtin_memcpy(b->data + at, &w->sample, FU_BPF_SAMPLE_HEADER);
    b->bytes = at + FU_BPF_SAMPLE_HEADER + 8 * frames;
    b->records++;
    if (w->wake)
        send_batch(b, BPF_RB_FORCE_WAKEUP);
    if (timing && walked) {
        __u64 sample_ns = bpf_ktime_get_ns() - entered;
        count_n(FU_BPF_COUNTER_SAMPLE_NS, sample_ns);
        count_n(FU_BPF_COUNTER_SAMPLE_NS_BY_FRAMES, frames * sample_ns);
    }
    return 0;
}
