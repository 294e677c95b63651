/* trace: single-step a command under ptrace and judge the declared CFI against the truth kept from
 * calls and returns (see trace.h). */
#define _GNU_SOURCE /* process_vm_readv, pipe2, __WALL */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "memory.h"
#include "synth_decode.h"
#include "x86_64.h"

const uint8_t FU_TRACE_SAVED_COLUMNS[FU_TRACE_SAVED_COUNT] = {3, 6, 12, 13, 14, 15};

#define TRACE_REGISTER_COUNT 17 /* DWARF columns 0-15 and 16, the IP */
_Static_assert(TRACE_REGISTER_COUNT == FU_WALK_REGISTERS, "the walker's registers");
#define TRACE_IP 16
#define TRACE_PAGE_SIZE 4096u
/* Code pages kept decoded-ready: a program's hot loop and the library functions it calls fit. */
#define TRACE_CODE_PAGES 64
/* Open addressing over FDE statistics: twice the entries keeps probe chains short. */
#define TRACE_FDE_SLOTS (2 * FU_TRACE_MAX_FDES)

static const char *const OUTCOME_NAMES[FU_TRACE_OUTCOME_COUNT] = {
    "exited", "killed", "step-limit", "timeout", "interrupted", "depth-limit",
};

const char *fu_trace_outcome_name(int outcome)
{
    return outcome >= 0 && outcome < FU_TRACE_OUTCOME_COUNT ? OUTCOME_NAMES[outcome] : "unknown";
}

typedef struct trace_code_page {
    uint64_t page;  /* avma of the page; 0: empty */
    size_t size;    /* bytes read (a page, plus the next instruction's overhang where readable) */
    uint8_t bytes[TRACE_PAGE_SIZE + FU_X86_MAX_INSN_LENGTH];
} trace_code_page;

typedef struct trace_breakpoint {
    uint64_t address;
    uint8_t original;  /* the code byte the int3 replaced */
    bool entry;        /* an FDE start (else only a return address) */
} trace_breakpoint;

typedef struct trace_session {
    int pid;
    const fu_trace_options *options;
    const fu_trace_callbacks *callbacks;
    fu_trace_result *result;
    uint32_t *active;          /* modules of the current image, sorted by start (indices) */
    uint32_t active_count;
    uint32_t last_module;      /* index in active of the last hit, or UINT32_MAX */
    fu_trace_frame *frames;    /* the shadow stack */
    uint32_t depth;
    uint32_t handler_depth;    /* signal handler frames on it */
    uint32_t *fde_slots;       /* fde index + 1, 0 empty */
    trace_code_page *code;
    char *maps;
    fu_x86_decoder decoder;
    trace_breakpoint *breakpoints; /* sorted by address; skip_unchecked only */
    uint32_t breakpoint_count;
    sigset_t child_signal;     /* SIGCHLD, waited for while the command runs */
    bool skipping;             /* skip_unchecked, until the command starts a thread */
} trace_session;

static void trace_plant_entries(trace_session *s, const fu_trace_module *m);
static void trace_unplant_copy(const trace_session *s, uint64_t address, uint8_t *bytes, size_t size);

/* ---- reading the tracee ----------------------------------------------------------------------- */

/* The stack around the slots one step's rules read: the saved registers of a frame lie within a
 * few words of each other, so the first read fetches a window and the others are served from it
 * (one process_vm_readv per step instead of one per rule: ~25% of the tracer's time on /bin/true). */
#define TRACE_WINDOW_BEFORE 128
#define TRACE_WINDOW_BYTES 256

typedef struct trace_window {
    fu_pid_memory memory;
    uint64_t address;  /* of bytes[0] */
    bool valid;
    uint8_t bytes[TRACE_WINDOW_BYTES];
} trace_window;

static bool trace_read(void *window_context, uint64_t address, unsigned size, uint64_t *out)
{
    trace_window *w = window_context;
    if (size == 0 || size > 8)
        return false;
    if (!w->valid && address >= TRACE_WINDOW_BEFORE &&
        fu_read_pid_bytes(w->memory.pid, address - TRACE_WINDOW_BEFORE, w->bytes, sizeof w->bytes)) {
        w->address = address - TRACE_WINDOW_BEFORE;
        w->valid = true;
    }
    if (w->valid && address >= w->address && address - w->address <= sizeof w->bytes - size) {
        uint64_t value = 0;
        memcpy(&value, w->bytes + (address - w->address), size);
        *out = value;
        return true;
    }
    return fu_read_pid(&w->memory, address, size, out) == FU_READ_OK;
}

/* The bytes at `ip` (at most FU_X86_MAX_INSN_LENGTH): from the page cache, else read. Executable
 * pages that are not readable go through PTRACE_PEEKDATA, which the kernel forces. */
static size_t trace_code_at(trace_session *s, uint64_t ip, uint8_t scratch[FU_X86_MAX_INSN_LENGTH + 1],
                            const uint8_t **code)
{
    uint64_t page = ip & ~(uint64_t)(TRACE_PAGE_SIZE - 1);
    trace_code_page *p = &s->code[(page / TRACE_PAGE_SIZE) % TRACE_CODE_PAGES];
    if (p->page != page || page == 0) {
        p->page = 0;
        if (fu_read_pid_bytes(s->pid, page, p->bytes, sizeof p->bytes))
            p->size = sizeof p->bytes;
        else if (fu_read_pid_bytes(s->pid, page, p->bytes, TRACE_PAGE_SIZE))
            p->size = TRACE_PAGE_SIZE;
        else
            p->size = 0;
        if (p->size) {
            p->page = page;
            trace_unplant_copy(s, page, p->bytes, p->size);
        }
    }
    if (p->page == page && ip - page < p->size) {
        *code = p->bytes + (ip - page);
        return p->size - (ip - page);
    }
    size_t got = 0;
    for (unsigned word = 0; word < 2; word++) {
        errno = 0;
        long value = ptrace(PTRACE_PEEKDATA, s->pid, (void *)(uintptr_t)(ip + 8 * word), NULL);
        if (errno)
            break;
        memcpy(scratch + 8 * word, &value, 8);
        got += 8;
    }
    trace_unplant_copy(s, ip, scratch, got);
    *code = scratch;
    return got < FU_X86_MAX_INSN_LENGTH ? got : FU_X86_MAX_INSN_LENGTH;
}

static void trace_registers(const struct user_regs_struct *u, uint64_t regs[TRACE_REGISTER_COUNT])
{
    fu_regs walker;
    fu_regs_from_user_regs(u, &walker);
    memcpy(regs, walker.value, TRACE_REGISTER_COUNT * sizeof regs[0]);
}

/* ---- the judgement of one step ---------------------------------------------------------------- */

typedef bool (*trace_read_fn)(void *opaque, uint64_t address, unsigned size, uint64_t *out);

/* Evaluate an expression rule of `table` over `regs` (unknown beyond the 17 registers). */
static bool trace_expression(const fu_cfi_table *table, const fu_rule *rule, const uint64_t regs[TRACE_REGISTER_COUNT],
                             trace_read_fn read, void *opaque, bool has_initial, uint64_t initial, uint64_t *value)
{
    uint64_t offset = (uint64_t)rule->value;
    if (offset > table->section.size || rule->expr_len > table->section.size - offset)
        return false;
    fu_expr_context ctx;
    memset(ctx.valid, 0, sizeof ctx.valid);
    memcpy(ctx.regs, regs, TRACE_REGISTER_COUNT * sizeof regs[0]);
    for (unsigned column = 0; column < TRACE_REGISTER_COUNT; column++)
        ctx.valid[column / 64] |= (uint64_t)1 << (column % 64);
    ctx.read_memory = read;
    ctx.opaque = opaque;
    ctx.address_size = 8;
    fu_error err;
    return fu_expr_evaluate(table->section.data + offset, rule->expr_len, &ctx, has_initial, initial, value, &err) == FU_OK;
}

/* Where a rule says a register's value lies (*in_memory) or what it is, from the true CFA. False:
 * a rule this check does not judge (undefined, same value, val_*), or one that cannot be computed. */
static bool trace_rule_location(const fu_cfi_table *table, const fu_rule *rule, const uint64_t regs[TRACE_REGISTER_COUNT],
                                uint64_t cfa, trace_read_fn read, void *opaque, uint64_t *location, bool *in_memory)
{
    switch (rule->kind) {
    case FU_RULE_OFFSET:
        *in_memory = true;
        *location = cfa + (uint64_t)rule->value;
        return true;
    case FU_RULE_EXPRESSION:
        *in_memory = true;
        return trace_expression(table, rule, regs, read, opaque, true, cfa, location);
    case FU_RULE_REGISTER:
        if (rule->reg >= TRACE_REGISTER_COUNT)
            return false;
        *in_memory = false;
        *location = regs[rule->reg];
        return true;
    default:
        return false;
    }
}

static void trace_finding(fu_trace_record *findings, unsigned max_findings, unsigned *count, uint8_t what,
                          uint8_t column, uint64_t declared, uint64_t truth)
{
    if (*count < max_findings)
        findings[*count] = (fu_trace_record){.what = what, .column = column, .declared = declared, .truth = truth};
    (*count)++;
}

fu_trace_judgement fu_trace_judge(const fu_cfi_table *table, const fu_state *state, uint64_t ra_column,
                                  const uint64_t regs[17], const fu_trace_frame *frame, trace_read_fn read,
                                  void *opaque, fu_trace_record *findings, unsigned max_findings,
                                  unsigned *finding_count)
{
    unsigned count = 0;
    uint64_t cfa;
    if (state->cfa.kind == FU_CFA_REG_OFFSET) {
        if (state->cfa.reg >= TRACE_REGISTER_COUNT)
            return FU_TRACE_NOT_EVALUABLE;
        cfa = regs[state->cfa.reg] + (uint64_t)state->cfa.value;
    } else if (state->cfa.kind == FU_CFA_EXPRESSION) {
        if (!trace_expression(table, &state->cfa, regs, read, opaque, false, 0, &cfa))
            return FU_TRACE_NOT_EVALUABLE;
    } else {
        return FU_TRACE_NOT_EVALUABLE;
    }
    if (cfa != frame->cfa)
        trace_finding(findings, max_findings, &count, FU_TRACE_WHAT_CFA, 0, cfa, frame->cfa);

    /* The return address and the saved registers are judged from the true CFA, as `check` judges
     * them from the derived one: a wrong CFA is one disagreement, not one per rule. */
    uint64_t location;
    bool in_memory;
    if (ra_column < FU_MAX_COLUMNS) {
        fu_rule rule = fu_state_rule(table, state, (unsigned)ra_column);
        if (trace_rule_location(table, &rule, regs, frame->cfa, read, opaque, &location, &in_memory)) {
            uint64_t truth = in_memory ? frame->cfa - 8 : frame->return_address;
            if (location != truth)
                trace_finding(findings, max_findings, &count, FU_TRACE_WHAT_RA, (uint8_t)ra_column, location, truth);
        }
    }
    for (unsigned i = 0; i < FU_TRACE_SAVED_COUNT; i++) {
        unsigned column = FU_TRACE_SAVED_COLUMNS[i];
        fu_rule rule = fu_state_rule(table, state, column);
        if (!trace_rule_location(table, &rule, regs, frame->cfa, read, opaque, &location, &in_memory))
            continue;
        uint64_t value = location;
        if (in_memory && !read(opaque, location, 8, &value))
            continue;
        if (value != frame->entry_values[i])
            trace_finding(findings, max_findings, &count, FU_TRACE_WHAT_REGISTER, (uint8_t)column, value,
                          frame->entry_values[i]);
    }
    *finding_count = count;
    return count ? FU_TRACE_DISAGREE : FU_TRACE_AGREE;
}

/* ---- modules ------------------------------------------------------------------------------------ */

static bool trace_active_search(const trace_session *s, uint64_t avma, uint32_t *position)
{
    uint32_t low = 0, high = s->active_count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        if (s->result->modules[s->active[middle]].start <= avma)
            low = middle + 1;
        else
            high = middle;
    }
    *position = low; /* the insertion point; the candidate is low - 1 */
    return low > 0 && avma < s->result->modules[s->active[low - 1]].end;
}

/* Add [start, end) unless it overlaps a module of the image (a mapping seen before keeps its
 * tables until an exec). */
static void trace_add_module(trace_session *s, const fu_trace_mapping *mapping, bool ask)
{
    uint32_t position;
    if (trace_active_search(s, mapping->start, &position))
        return;
    if (position < s->active_count && s->result->modules[s->active[position]].start < mapping->end)
        return;
    if (s->result->module_count >= FU_TRACE_MAX_MODULES) {
        s->result->counts.modules_dropped++;
        return;
    }
    fu_trace_module *m = &s->result->modules[s->result->module_count];
    *m = (fu_trace_module){.start = mapping->start, .end = mapping->end, .id = UINT32_MAX};
    if (ask && !s->callbacks->provide_module(s->callbacks->opaque, mapping, m)) {
        m->eh_frame = m->debug_frame = NULL;
        m->checked = false;
    }
    m->start = mapping->start; /* the provider fills the rest */
    m->end = mapping->end;
    memmove(&s->active[position + 1], &s->active[position], (s->active_count - position) * sizeof s->active[0]);
    s->active[position] = s->result->module_count++;
    s->active_count++;
    s->last_module = UINT32_MAX;
    if (s->skipping && m->checked && (m->eh_frame || m->debug_frame))
        trace_plant_entries(s, m);
}

/* Read /proc/PID/maps and add its executable mappings not known yet. */
static void trace_read_maps(trace_session *s)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/maps", s->pid);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t length = 0;
    while (length < FU_TRACE_MAPS_MAX_BYTES - 1) {
        ssize_t n = read(fd, s->maps + length, FU_TRACE_MAPS_MAX_BYTES - 1 - length);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        length += (size_t)n;
    }
    close(fd);
    s->maps[length] = '\0';
    /* "start-end perms offset major:minor inode   path" (proc(5)) */
    for (char *line = s->maps, *next; line < s->maps + length; line = next) {
        char *newline = strchr(line, '\n');
        next = newline ? newline + 1 : s->maps + length;
        if (newline)
            *newline = '\0';
        char *cursor = line;
        unsigned long long start = strtoull(cursor, &cursor, 16);
        if (*cursor != '-')
            continue;
        unsigned long long end = strtoull(cursor + 1, &cursor, 16);
        char perms[5] = {0};
        if (sscanf(cursor, " %4s", perms) != 1 || perms[2] != 'x' || end <= start)
            continue;
        cursor = strstr(cursor, perms) + 4;
        unsigned long long offset = strtoull(cursor, &cursor, 16);
        for (unsigned field = 0; field < 2; field++) { /* device, inode */
            while (*cursor == ' ')
                cursor++;
            while (*cursor && *cursor != ' ')
                cursor++;
        }
        while (*cursor == ' ')
            cursor++;
        fu_trace_mapping mapping = {start, end, offset, cursor};
        trace_add_module(s, &mapping, true);
    }
    memset(s->code, 0, TRACE_CODE_PAGES * sizeof *s->code);
}

/* The module covering `ip`: a miss reads the maps again, and an address no executable mapping
 * covers becomes a page without CFI, so that code outside every mapping costs one read. */
static const fu_trace_module *trace_module_at(trace_session *s, uint64_t ip, uint32_t *index)
{
    if (s->last_module < s->active_count) {
        const fu_trace_module *m = &s->result->modules[s->active[s->last_module]];
        if (ip >= m->start && ip < m->end) {
            *index = s->active[s->last_module];
            return m;
        }
    }
    uint32_t position;
    if (!trace_active_search(s, ip, &position)) {
        if (s->result->module_count >= FU_TRACE_MAX_MODULES)
            return NULL;
        trace_read_maps(s);
        if (!trace_active_search(s, ip, &position)) {
            uint64_t page = ip & ~(uint64_t)(TRACE_PAGE_SIZE - 1);
            trace_add_module(s, &(fu_trace_mapping){page, page + TRACE_PAGE_SIZE, 0, ""}, false);
            if (!trace_active_search(s, ip, &position))
                return NULL;
        }
    }
    s->last_module = position - 1;
    *index = s->active[position - 1];
    return &s->result->modules[*index];
}

/* ---- statistics --------------------------------------------------------------------------------- */

static fu_trace_fde *trace_fde(trace_session *s, uint32_t module, uint32_t table_index, uint32_t entry_index,
                               const fu_entry *entry)
{
    uint64_t key = ((uint64_t)module << 33) ^ ((uint64_t)table_index << 32) ^ entry_index;
    uint32_t slot = (uint32_t)((key * 0x9e3779b97f4a7c15u) >> 40) % TRACE_FDE_SLOTS;
    for (uint32_t probe = 0; probe < TRACE_FDE_SLOTS; probe++, slot = (slot + 1) % TRACE_FDE_SLOTS) {
        uint32_t held = s->fde_slots[slot];
        if (held == 0) {
            if (s->result->fde_count >= FU_TRACE_MAX_FDES)
                return NULL;
            fu_trace_fde *f = &s->result->fdes[s->result->fde_count];
            *f = (fu_trace_fde){.module = module, .table = table_index, .entry = entry_index,
                                .pc_begin = entry->pc_begin, .pc_end = entry->pc_begin + entry->pc_range};
            s->fde_slots[slot] = ++s->result->fde_count;
            return f;
        }
        fu_trace_fde *f = &s->result->fdes[held - 1];
        if (f->module == module && f->table == table_index && f->entry == entry_index)
            return f;
    }
    return NULL;
}

/* Compare the declared row at the current instruction with the top of the shadow stack. True when
 * the instruction is in a module with CFI that is not checked (skip_unchecked runs through it). */
static bool trace_observe(trace_session *s, const uint64_t regs[TRACE_REGISTER_COUNT])
{
    fu_trace_counts *c = &s->result->counts;
    uint64_t ip = regs[TRACE_IP];
    uint32_t module_index;
    const fu_trace_module *m = trace_module_at(s, ip, &module_index);
    if (m && !m->checked && (m->eh_frame || m->debug_frame)) {
        c->unchecked_module++;
        return true;
    }
    const fu_cfi_table *const tables[2] = {m ? m->eh_frame : NULL, m ? m->debug_frame : NULL};
    int64_t row, entry_index;
    int which = m ? fu_cfi_tables_find_row(tables, ip - m->bias, &row, &entry_index) : -1;
    if (which < 0) {
        c->no_cfi++;
        return false;
    }
    const fu_cfi_table *table = tables[which];
    const fu_entry *entry = &table->entries[entry_index];
    if (entry->cie && entry->cie->signal_frame) {
        c->signal_frames++;
        return false;
    }
    if (s->depth == 0) {
        c->unknown_truth++;
        return false;
    }
    if (s->handler_depth) {
        c->in_signal_handler++;
        return false;
    }
    fu_trace_record findings[FU_TRACE_MAX_FINDINGS_PER_STEP];
    unsigned finding_count = 0;
    trace_window window = {.memory = {s->pid}, .valid = false};
    fu_trace_judgement judgement =
        fu_trace_judge(table, fu_cfi_table_state(table, table->row_state[row]), entry->cie ? entry->cie->ra_column : 16,
                       regs, &s->frames[s->depth - 1], trace_read, &window, findings, FU_TRACE_MAX_FINDINGS_PER_STEP,
                       &finding_count);
    if (judgement == FU_TRACE_NOT_EVALUABLE) {
        c->not_evaluable++;
        return false;
    }
    c->checked++;
    fu_trace_fde *fde = trace_fde(s, module_index, (uint32_t)which, (uint32_t)entry_index, entry);
    if (fde)
        fde->checked++;
    else
        c->fdes_dropped_steps++;
    if (judgement == FU_TRACE_AGREE) {
        c->agreeing++;
        return false;
    }
    c->disagreeing++;
    if (!fde) {
        c->records_dropped += finding_count;
        return false;
    }
    fde->disagreeing++;
    for (unsigned i = 0; i < finding_count; i++) {
        if (fde->record_count >= FU_TRACE_RECORDS_PER_FDE || s->result->record_count >= FU_TRACE_MAX_RECORDS ||
            i >= FU_TRACE_MAX_FINDINGS_PER_STEP) {
            c->records_dropped++;
            continue;
        }
        fu_trace_record *r = &s->result->records[s->result->record_count++];
        *r = findings[i];
        r->address = ip;
        r->fde = (uint32_t)(fde - s->result->fdes);
        fde->record_count++;
    }
    return false;
}

/* ---- the truth: following calls and returns ---------------------------------------------------- */

/* Close the frames the stack pointer left: those below rsp, and the top one when rsp reached its
 * CFA other than by a pop (a ret leaves rsp at the CFA; vfork pops its return address into a
 * register and stays in its frame). */
static void trace_resync(trace_session *s, uint64_t rsp, bool by_pop)
{
    while (s->depth > 0) {
        const fu_trace_frame *top = &s->frames[s->depth - 1];
        if (rsp < top->cfa || (rsp == top->cfa && by_pop))
            break;
        if (top->signal_handler)
            s->handler_depth--;
        s->depth--;
        s->result->counts.returns++;
    }
}

/* Open a frame entered at `regs` (rsp at its return address); false at FU_TRACE_MAX_DEPTH. */
static bool trace_push(trace_session *s, const uint64_t regs[TRACE_REGISTER_COUNT], uint64_t return_address,
                       bool signal_handler)
{
    fu_trace_counts *c = &s->result->counts;
    if (s->depth >= FU_TRACE_MAX_DEPTH)
        return false;
    fu_trace_frame *frame = &s->frames[s->depth++];
    frame->cfa = regs[FU_REG_RSP] + 8;
    frame->signal_handler = signal_handler;
    frame->return_address = return_address;
    for (unsigned i = 0; i < FU_TRACE_SAVED_COUNT; i++)
        frame->entry_values[i] = regs[FU_TRACE_SAVED_COLUMNS[i]];
    if (signal_handler) {
        s->handler_depth++;
        c->handlers++;
    } else {
        c->calls++;
    }
    if (s->depth > c->max_depth)
        c->max_depth = s->depth;
    return true;
}

/* Update the shadow stack after one step from `before` (executing `insn`) to `after`. */
static bool trace_follow(trace_session *s, const uint64_t before[TRACE_REGISTER_COUNT], const fu_x86_insn *insn,
                         bool signal_delivered, const uint64_t after[TRACE_REGISTER_COUNT])
{
    uint64_t rsp = after[FU_REG_RSP], previous_rsp = before[FU_REG_RSP];
    bool handler_entered = signal_delivered && rsp < previous_rsp && previous_rsp - rsp > FU_TRACE_SIGNAL_FRAME_MIN_BYTES;
    bool called = !handler_entered && insn->kind == FU_X86_CALL && rsp == previous_rsp - 8 &&
                  after[TRACE_IP] != before[TRACE_IP] + insn->length;
    trace_resync(s, rsp, insn->kind == FU_X86_POP && !handler_entered);
    if (called)
        return trace_push(s, after, before[TRACE_IP] + insn->length, false);
    if (handler_entered) {
        uint64_t restorer = 0; /* the handler returns into the sigreturn trampoline */
        if (fu_read_pid(&(fu_pid_memory){s->pid}, rsp, 8, &restorer) != FU_READ_OK)
            restorer = 0;
        return trace_push(s, after, restorer, true);
    }
    return true;
}

/* ---- breakpoints: running through the modules not checked ---------------------------------------- */

#define TRACE_INT3 0xcc

/* The index of the first breakpoint at or above `address`. */
static uint32_t trace_breakpoint_lower_bound(const trace_session *s, uint64_t address)
{
    uint32_t low = 0, high = s->breakpoint_count;
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        if (s->breakpoints[middle].address < address)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

static int64_t trace_breakpoint_find(const trace_session *s, uint64_t address)
{
    uint32_t low = trace_breakpoint_lower_bound(s, address);
    return low < s->breakpoint_count && s->breakpoints[low].address == address ? (int64_t)low : -1;
}

/* One byte of the tracee's code (PEEKDATA/POKEDATA work on words, and force read-only pages). */
static bool trace_write_byte(int pid, uint64_t address, uint8_t byte, uint8_t *previous)
{
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, pid, (void *)(uintptr_t)address, NULL);
    if (errno)
        return false;
    if (previous)
        *previous = (uint8_t)(word & 0xff);
    word = (long)(((unsigned long)word & ~0xfful) | byte);
    return ptrace(PTRACE_POKEDATA, pid, (void *)(uintptr_t)address, (void *)word) == 0;
}

static void trace_plant(trace_session *s, uint64_t address, bool entry)
{
    int64_t found = trace_breakpoint_find(s, address);
    if (found >= 0) {
        s->breakpoints[found].entry |= entry;
        return;
    }
    if (s->breakpoint_count >= FU_TRACE_MAX_BREAKPOINTS)
        return;
    uint8_t original;
    if (!trace_write_byte(s->pid, address, TRACE_INT3, &original))
        return;
    uint32_t position = trace_breakpoint_lower_bound(s, address);
    memmove(&s->breakpoints[position + 1], &s->breakpoints[position],
            (s->breakpoint_count - position) * sizeof s->breakpoints[0]);
    s->breakpoints[position] = (trace_breakpoint){address, original, entry};
    s->breakpoint_count++;
    s->result->counts.breakpoints++;
}

/* A breakpoint at every FDE start of a checked module: where skipped code calls back into it. */
static void trace_plant_entries(trace_session *s, const fu_trace_module *m)
{
    const fu_cfi_table *const tables[2] = {m->eh_frame, m->debug_frame};
    for (unsigned t = 0; t < 2; t++) {
        const fu_cfi_table *table = tables[t];
        for (uint32_t e = 0; table && e < table->entry_count; e++) {
            const fu_entry *entry = &table->entries[e];
            uint64_t start = entry->pc_begin + m->bias;
            if (entry->kind == FU_ENTRY_FDE && !entry->discarded && entry->pc_range && start >= m->start &&
                start < m->end)
                trace_plant(s, start, true);
        }
    }
}

/* The code bytes as the command wrote them, not as the breakpoints changed them. */
static void trace_unplant_copy(const trace_session *s, uint64_t address, uint8_t *bytes, size_t size)
{
    for (uint32_t i = trace_breakpoint_lower_bound(s, address); i < s->breakpoint_count && s->breakpoints[i].address - address < size; i++)
        bytes[s->breakpoints[i].address - address] = s->breakpoints[i].original;
}

/* Threads of the command are not traced: one reaching an int3 would die of SIGTRAP. So once it
 * creates one, every breakpoint is lifted and the rest of the run is stepped. */
static bool trace_stop_skipping(trace_session *s)
{
    bool lifted = true;
    for (uint32_t i = 0; i < s->breakpoint_count; i++)
        lifted &= trace_write_byte(s->pid, s->breakpoints[i].address, s->breakpoints[i].original, NULL);
    s->breakpoint_count = 0;
    s->skipping = false;
    s->result->counts.threads_seen++;
    return lifted;
}

/* Whether the syscall `number` with first argument `argument` creates a thread (CLONE_THREAD in
 * clone's flags, or in clone3's struct clone_args, whose first field is the flags). */
static bool trace_creates_thread(trace_session *s, uint64_t number, uint64_t argument)
{
    uint64_t flags = argument;
    if (number == SYS_clone3 && fu_read_pid(&(fu_pid_memory){s->pid}, argument, 8, &flags) != FU_READ_OK)
        return true;
    return (number == SYS_clone || number == SYS_clone3) && (flags & CLONE_THREAD);
}

/* ---- the process ------------------------------------------------------------------------------- */

static void trace_kill(int pid)
{
    kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, __WALL) == -1 && errno == EINTR)
        ;
}

static pid_t trace_wait(int pid, int *status)
{
    pid_t got;
    while ((got = waitpid(pid, status, __WALL)) == -1 && errno == EINTR)
        ;
    return got;
}

static fu_status trace_start(const char *path, char *const argv[], char *const envp[], int *pid_out, fu_error *err)
{
    int report[2];
    if (pipe2(report, O_CLOEXEC) == -1)
        return fu_fail(err, FU_ERR_TRACE, "cannot create a pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == -1) {
        int saved = errno;
        close(report[0]);
        close(report[1]);
        return fu_fail(err, FU_ERR_TRACE, "cannot fork: %s", strerror(saved));
    }
    if (pid == 0) {
        /* The child: only async-signal-safe calls until the exec. */
        close(report[0]);
        int failure = 0;
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == -1)
            failure = -errno;
        else
            execve(path, argv, envp);
        if (!failure)
            failure = errno;
        ssize_t written = write(report[1], &failure, sizeof failure);
        (void)written;
        _exit(127);
    }
    close(report[1]);
    int failure = 0;
    ssize_t got;
    while ((got = read(report[0], &failure, sizeof failure)) == -1 && errno == EINTR)
        ;
    close(report[0]);
    int status;
    if (got == (ssize_t)sizeof failure) {
        trace_wait(pid, &status);
        if (failure < 0)
            return fu_fail(err, FU_ERR_TRACE, "cannot trace %s: ptrace(PTRACE_TRACEME): %s", path, strerror(-failure));
        return fu_fail(err, FU_ERR_TRACE, "cannot execute %s: %s", path, strerror(failure));
    }
    if (trace_wait(pid, &status) != pid || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) {
        if (!WIFEXITED(status) && !WIFSIGNALED(status))
            trace_kill(pid);
        return fu_fail(err, FU_ERR_TRACE, "%s did not stop after its exec (wait status %#x)", path, (unsigned)status);
    }
    /* EXITKILL: the command dies with the tracer, never runs on untraced nor stays stopped. */
    if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(uintptr_t)(PTRACE_O_EXITKILL | PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD)) == -1) {
        int saved = errno;
        trace_kill(pid);
        return fu_fail(err, FU_ERR_TRACE, "ptrace(PTRACE_SETOPTIONS) on %s: %s", path, strerror(saved));
    }
    *pid_out = pid;
    return FU_OK;
}

/* Stop signals are not passed on: a stopped command would hang the trace. */
static bool trace_passes_signal(int signal)
{
    return signal != SIGSTOP && signal != SIGTSTP && signal != SIGTTIN && signal != SIGTTOU;
}

static void trace_restart_image(trace_session *s)
{
    s->breakpoint_count = 0; /* gone with the old image */
    s->active_count = 0;
    s->last_module = UINT32_MAX;
    s->depth = 0;
    s->handler_depth = 0;
    memset(s->code, 0, TRACE_CODE_PAGES * sizeof *s->code);
    s->result->counts.execs++;
}

/* Whether the stop budget (clock, caller) is spent: sets the outcome. */
static bool trace_should_end(trace_session *s, uint64_t started)
{
    if (s->options->timeout_ns && fu_monotonic_ns() - started > s->options->timeout_ns) {
        s->result->outcome = FU_TRACE_TIMEOUT;
        return true;
    }
    if (s->callbacks->should_stop && s->callbacks->should_stop(s->callbacks->opaque)) {
        s->result->outcome = FU_TRACE_INTERRUPTED;
        return true;
    }
    return false;
}

/* Record how the command ended if `status` says it did. */
static bool trace_ended(trace_session *s, int status)
{
    if (!WIFEXITED(status) && !WIFSIGNALED(status))
        return false;
    s->result->outcome = WIFEXITED(status) ? FU_TRACE_EXITED : FU_TRACE_KILLED;
    s->result->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status);
    s->pid = 0;
    return true;
}

static bool trace_is_exec(int status) { return status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXEC << 8)); }

/* Whether the function starting at `ip` was entered by a call: its FDE gives a return address
 * (crt1's _start, entered from the kernel, says "undefined"). */
static bool trace_entered_by_call(trace_session *s, uint64_t ip)
{
    uint32_t module_index;
    const fu_trace_module *m = trace_module_at(s, ip, &module_index);
    const fu_cfi_table *const tables[2] = {m ? m->eh_frame : NULL, m ? m->debug_frame : NULL};
    int64_t row, entry_index;
    int which = m ? fu_cfi_tables_find_row(tables, ip - m->bias, &row, &entry_index) : -1;
    if (which < 0)
        return false;
    const fu_cfi_table *table = tables[which];
    const fu_entry *entry = &table->entries[entry_index];
    uint64_t ra_column = entry->cie ? entry->cie->ra_column : 16;
    if ((entry->cie && entry->cie->signal_frame) || ra_column >= FU_MAX_COLUMNS)
        return false;
    return fu_state_rule(table, fu_cfi_table_state(table, table->row_state[row]), (unsigned)ra_column).kind !=
           FU_RULE_UNDEFINED;
}

/* The command runs through unchecked code until a breakpoint (or its end, or a bound). A return
 * breakpoint goes at the innermost frame that returns into checked code; syscall stops
 * (PTRACE_SYSCALL) let mappings made meanwhile (a library loaded, dlopen) be seen. On a breakpoint
 * the IP is set back on it, the frames rsp left are closed, and an FDE start entered by a call
 * opens one. *ended: the command ended or a bound was reached (the outcome is set). */
static fu_status trace_run(trace_session *s, int *signal, uint64_t started, bool *ended, fu_error *err)
{
    fu_trace_counts *c = &s->result->counts;
    for (uint32_t d = s->depth; d-- > 0;) {
        uint32_t module_index;
        const fu_trace_module *m = trace_module_at(s, s->frames[d].return_address, &module_index);
        if (m && m->checked && (m->eh_frame || m->debug_frame)) {
            trace_plant(s, s->frames[d].return_address, false);
            break;
        }
    }
    c->runs++;
    for (;;) {
        if (ptrace(PTRACE_SYSCALL, s->pid, NULL, (void *)(uintptr_t)*signal) == -1)
            return fu_fail(err, FU_ERR_TRACE, "ptrace(PTRACE_SYSCALL) on pid %d: %s", s->pid, strerror(errno));
        if (*signal)
            c->signals++;
        *signal = 0;
        int status;
        pid_t got;
        while ((got = waitpid(s->pid, &status, __WALL | WNOHANG)) == 0 || (got == -1 && errno == EINTR)) {
            if (trace_should_end(s, started)) {
                *ended = true;
                return FU_OK;
            }
            struct timespec poll = {0, FU_TRACE_RUN_POLL_MS * 1000000L};
            sigtimedwait(&s->child_signal, NULL, &poll);
        }
        if (got == -1)
            return fu_fail(err, FU_ERR_TRACE, "waitpid(%d): %s", s->pid, strerror(errno));
        if (trace_ended(s, status)) {
            *ended = true;
            return FU_OK;
        }
        if (trace_is_exec(status)) {
            trace_restart_image(s);
            return FU_OK;
        }
        struct user_regs_struct user;
        if (WSTOPSIG(status) == (SIGTRAP | 0x80)) { /* a syscall stop (PTRACE_O_TRACESYSGOOD) */
            if (ptrace(PTRACE_GETREGS, s->pid, NULL, &user) == -1)
                return fu_fail(err, FU_ERR_TRACE, "ptrace(PTRACE_GETREGS) on pid %d: %s", s->pid, strerror(errno));
            if (user.orig_rax == SYS_mmap || user.orig_rax == SYS_mprotect)
                trace_read_maps(s);
            if (trace_creates_thread(s, user.orig_rax, user.rdi)) {
                if (!trace_stop_skipping(s))
                    return fu_fail(err, FU_ERR_TRACE, "cannot lift the breakpoints of pid %d", s->pid);
                return FU_OK; /* stepped from here on: the syscall stop is left by the next step */
            }
            continue;
        }
        if (WSTOPSIG(status) != SIGTRAP) {
            *signal = trace_passes_signal(WSTOPSIG(status)) ? WSTOPSIG(status) : 0;
            continue;
        }
        if (ptrace(PTRACE_GETREGS, s->pid, NULL, &user) == -1)
            return fu_fail(err, FU_ERR_TRACE, "ptrace(PTRACE_GETREGS) on pid %d: %s", s->pid, strerror(errno));
        int64_t hit = trace_breakpoint_find(s, user.rip - 1);
        if (hit < 0) {
            *signal = SIGTRAP; /* the command's own */
            continue;
        }
        user.rip -= 1;
        if (ptrace(PTRACE_SETREGS, s->pid, NULL, &user) == -1)
            return fu_fail(err, FU_ERR_TRACE, "ptrace(PTRACE_SETREGS) on pid %d: %s", s->pid, strerror(errno));
        uint64_t regs[TRACE_REGISTER_COUNT];
        trace_registers(&user, regs);
        trace_resync(s, regs[FU_REG_RSP], false);
        uint64_t return_address;
        if (s->breakpoints[hit].entry && trace_entered_by_call(s, regs[TRACE_IP]) &&
            fu_read_pid(&(fu_pid_memory){s->pid}, regs[FU_REG_RSP], 8, &return_address) == FU_READ_OK &&
            !trace_push(s, regs, return_address, false)) {
            s->result->outcome = FU_TRACE_DEPTH_LIMIT;
            *ended = true;
        }
        return FU_OK;
    }
}

/* Step until the command ends or a bound stops it; the command is alive only on failure. */
static fu_status trace_loop(trace_session *s, fu_error *err)
{
    fu_trace_result *result = s->result;
    fu_trace_counts *c = &result->counts;
    uint64_t max_steps = s->options->max_steps ? s->options->max_steps : FU_TRACE_DEFAULT_MAX_STEPS;
    uint64_t started = fu_monotonic_ns();
    uint64_t before[TRACE_REGISTER_COUNT] = {0};
    fu_x86_insn insn = {.kind = FU_X86_OTHER};
    int signal = 0;
    bool stepped = false, signal_delivered = false;
    for (;;) {
        struct user_regs_struct user;
        if (ptrace(PTRACE_GETREGS, s->pid, NULL, &user) == -1)
            return fu_fail(err, FU_ERR_TRACE, "ptrace(PTRACE_GETREGS) on pid %d: %s", s->pid, strerror(errno));
        uint64_t regs[TRACE_REGISTER_COUNT];
        trace_registers(&user, regs);
        if (stepped && !trace_follow(s, before, &insn, signal_delivered, regs)) {
            result->outcome = FU_TRACE_DEPTH_LIMIT;
            return FU_OK;
        }
        if (c->steps >= max_steps) {
            result->outcome = FU_TRACE_STEP_LIMIT;
            return FU_OK;
        }
        if (c->steps % FU_TRACE_POLL_STEPS == 0 && trace_should_end(s, started))
            return FU_OK;
        if (trace_observe(s, regs) && s->skipping) {
            bool ended = false;
            fu_status status = trace_run(s, &signal, started, &ended, err);
            if (status || ended)
                return status;
            stepped = false;
            continue;
        }
        uint64_t ip = regs[TRACE_IP];
        uint8_t scratch[FU_X86_MAX_INSN_LENGTH + 1];
        const uint8_t *code;
        size_t available = trace_code_at(s, ip, scratch, &code);
        fu_x86_decode(&s->decoder, code, available, ip, &insn);
        memcpy(before, regs, sizeof before);
        bool syscall = available >= 2 && code[0] == 0x0f && code[1] == 0x05;
        if (s->skipping && syscall && trace_creates_thread(s, regs[0], regs[5]) && !trace_stop_skipping(s))
            return fu_fail(err, FU_ERR_TRACE, "cannot lift the breakpoints of pid %d", s->pid);

        /* A breakpoint under the IP is lifted for the step that executes its instruction. */
        int64_t planted = s->breakpoint_count ? trace_breakpoint_find(s, ip) : -1;
        if (planted >= 0 && !trace_write_byte(s->pid, ip, s->breakpoints[planted].original, NULL))
            return fu_fail(err, FU_ERR_TRACE, "cannot lift the breakpoint at %#" PRIx64 " of pid %d", ip, s->pid);
        int delivered = signal, status;
        if (ptrace(PTRACE_SINGLESTEP, s->pid, NULL, (void *)(uintptr_t)delivered) == -1)
            return fu_fail(err, FU_ERR_TRACE, "ptrace(PTRACE_SINGLESTEP) on pid %d: %s", s->pid, strerror(errno));
        c->steps++;
        if (delivered)
            c->signals++;
        if (trace_wait(s->pid, &status) == -1)
            return fu_fail(err, FU_ERR_TRACE, "waitpid(%d): %s", s->pid, strerror(errno));
        if (trace_ended(s, status))
            return FU_OK;
        signal = 0;
        stepped = true;
        signal_delivered = delivered != 0;
        if (trace_is_exec(status)) {
            /* An exec replaced the image: nothing of the old one is followed into the new. */
            trace_restart_image(s);
            stepped = false;
            continue;
        }
        if (planted >= 0 && !trace_write_byte(s->pid, ip, TRACE_INT3, NULL))
            return fu_fail(err, FU_ERR_TRACE, "cannot plant the breakpoint at %#" PRIx64 " of pid %d", ip, s->pid);
        if (WSTOPSIG(status) != SIGTRAP && trace_passes_signal(WSTOPSIG(status)))
            signal = WSTOPSIG(status); /* delivered with the next step */
    }
}

fu_status fu_trace_run(const char *path, char *const argv[], char *const envp[], const fu_trace_options *options,
                       const fu_trace_callbacks *callbacks, fu_trace_result *result, fu_error *err)
{
    memset(result, 0, sizeof *result);
    trace_session s = {.options = options, .callbacks = callbacks, .result = result, .last_module = UINT32_MAX,
                       .skipping = options->skip_unchecked};
    fu_status status = FU_OK;
    result->modules = calloc(FU_TRACE_MAX_MODULES, sizeof *result->modules);
    result->fdes = calloc(FU_TRACE_MAX_FDES, sizeof *result->fdes);
    result->records = calloc(FU_TRACE_MAX_RECORDS, sizeof *result->records);
    s.active = calloc(FU_TRACE_MAX_MODULES, sizeof *s.active);
    s.frames = calloc(FU_TRACE_MAX_DEPTH, sizeof *s.frames);
    s.fde_slots = calloc(TRACE_FDE_SLOTS, sizeof *s.fde_slots);
    s.code = calloc(TRACE_CODE_PAGES, sizeof *s.code);
    s.maps = malloc(FU_TRACE_MAPS_MAX_BYTES);
    s.breakpoints = options->skip_unchecked ? calloc(FU_TRACE_MAX_BREAKPOINTS, sizeof *s.breakpoints) : NULL;
    if (!result->modules || !result->fdes || !result->records || !s.active || !s.frames || !s.fde_slots || !s.code ||
        !s.maps || (options->skip_unchecked && !s.breakpoints)) {
        status = fu_fail(err, FU_ERR_NOMEM, "out of memory for the trace's tables");
        goto cleanup;
    }
    fu_x86_decoder_init(&s.decoder);
    /* SIGCHLD stays pending for sigtimedwait while the command runs between breakpoints (blocked,
     * it is not discarded even though its default action is to be ignored). */
    sigset_t previous_mask;
    sigemptyset(&s.child_signal);
    sigaddset(&s.child_signal, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &s.child_signal, &previous_mask);
    uint64_t started = fu_monotonic_ns();
    status = trace_start(path, argv, envp, &s.pid, err);
    if (!status)
        status = trace_loop(&s, err);
    result->elapsed_ns = fu_monotonic_ns() - started;
    if (s.pid > 0)
        trace_kill(s.pid);
    pthread_sigmask(SIG_SETMASK, &previous_mask, NULL);

cleanup:
    free(s.breakpoints);
    free(s.active);
    free(s.frames);
    free(s.fde_slots);
    free(s.code);
    free(s.maps);
    if (status)
        fu_trace_result_free(result);
    return status;
}

void fu_trace_result_free(fu_trace_result *result)
{
    free(result->modules);
    free(result->fdes);
    free(result->records);
    result->modules = NULL;
    result->fdes = NULL;
    result->records = NULL;
    result->module_count = result->fde_count = result->record_count = 0;
}
