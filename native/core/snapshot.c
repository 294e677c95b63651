/* The text and JSON of a snapshot of thread stacks: see snapshot.h. */
#include "snapshot.h"

#include <stdio.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at `s` (Unicode §3.9 table 3-7, as Python's
 * decoder accepts: no overlongs, no surrogates, nothing past U+10FFFF) and its code point; 0 if
 * the byte at `s` starts none. */
static size_t utf8_decode(const uint8_t *s, size_t len, uint32_t *cp)
{
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t n;
    uint8_t lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf)
        n = 2;
    else if (b >= 0xe0 && b <= 0xef) {
        n = 3;
        if (b == 0xe0)
            lo = 0xa0;
        if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        n = 4;
        if (b == 0xf0)
            lo = 0x90;
        if (b == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (len < n || s[1] < lo || s[1] > hi)
        return 0;
    uint32_t value = b & (0xffu >> (n + 1));
    value = value << 6 | (s[1] & 0x3f);
    for (size_t i = 2; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
        value = value << 6 | (s[i] & 0x3f);
    }
    *cp = value;
    return n;
}

static bool put(fu_buffer *out, const char *text) { return fu_buffer_append(out, text, strlen(text)); }

/* `format` (at most FORMAT_ROOM bytes of text around one number) with `value`. */
#define FORMAT_ROOM 64
static bool putf(fu_buffer *out, const char *format, unsigned long long value)
{
    char text[FORMAT_ROOM + 24];
    int n = snprintf(text, sizeof text, format, value);
    return n >= 0 && (size_t)n < sizeof text && fu_buffer_append(out, text, (size_t)n);
}

bool fu_snapshot_escape_name(const uint8_t *name, size_t len, fu_buffer *out)
{
    while (len && name[len - 1] == '\n')
        len--;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(name + i, len - i, &cp);
        if (n) {
            if (!fu_buffer_append(out, name + i, n))
                return false;
            i += n;
        } else {
            if (!putf(out, "\\x%02x", name[i]))
                return false;
            i++;
        }
    }
    return true;
}

/* ---- text --------------------------------------------------------------------------------------- */

/* Shown register `index` of a frame (the walker's FU_WALK_REGISTERS, then the state registers):
 * its name into `name`, its value into *value; false where unknown. */
static bool shown_register(const fu_snapshot_frame *f, unsigned index, char name[8], uint64_t *value)
{
    if (index >= FU_WALK_REGISTERS) {
        unsigned i = index - FU_WALK_REGISTERS;
        snprintf(name, 8, "%s", fu_state_register_name((int)i));
        *value = f->state->value[i];
        return f->state->valid >> i & 1;
    }
    const char *known = fu_register_name(index);
    if (known)
        snprintf(name, 8, "%s", known);
    else
        snprintf(name, 8, "r%u", index);
    *value = f->registers->value[index];
    return f->registers->valid >> index & 1;
}

#define SHOWN_REGISTERS (FU_WALK_REGISTERS + FU_STATE_REGISTERS)

static bool register_lines(const fu_snapshot_frame *f, fu_buffer *out)
{
    for (unsigned first = 0; first < SHOWN_REGISTERS; first += FU_SNAPSHOT_REGISTERS_PER_LINE) {
        char line[256];
        size_t at = (size_t)snprintf(line, sizeof line, "    ");
        for (unsigned r = first; r < first + FU_SNAPSHOT_REGISTERS_PER_LINE && r < SHOWN_REGISTERS; r++) {
            char name[8];
            uint64_t value;
            bool known = shown_register(f, r, name, &value);
            if (r > first)
                at += (size_t)snprintf(line + at, sizeof line - at, "  ");
            if (known)
                at += (size_t)snprintf(line + at, sizeof line - at, "%3s 0x%016llx", name, (unsigned long long)value);
            else
                at += (size_t)snprintf(line + at, sizeof line - at, "%3s %-18s", name, "<unknown>");
        }
        while (at && line[at - 1] == ' ') /* rstrip */
            at--;
        line[at++] = '\n';
        if (!fu_buffer_append(out, line, at))
            return false;
    }
    return true;
}

bool fu_snapshot_thread_text(const fu_snapshot_thread *thread, fu_buffer *out)
{
    if (!putf(out, "TID %lld (", (unsigned long long)thread->tid) ||
        !fu_buffer_append(out, thread->name.data, thread->name.len) || !put(out, "):\n"))
        return false;
    for (size_t i = 0; i < thread->frame_count; i++) {
        const fu_snapshot_frame *f = &thread->frames[i];
        char head[64];
        int n = snprintf(head, sizeof head, "#%-2zu 0x%016llx in ", i, (unsigned long long)f->address);
        if (!fu_buffer_append(out, head, (size_t)n))
            return false;
        if (f->symbol.data) {
            if (!fu_buffer_append(out, f->symbol.data, f->symbol.len) ||
                !putf(out, "+0x%llx", (unsigned long long)f->offset))
                return false;
        } else if (!put(out, "??")) {
            return false;
        }
        if (f->module.data && f->module.len &&
            (!put(out, " (") || !fu_buffer_append(out, f->module.data, f->module.len) || !put(out, ")")))
            return false;
        if (f->derived && (!put(out, " [") || !put(out, f->derived) || !put(out, "]")))
            return false;
        if (!put(out, "\n") || (f->registers && !register_lines(f, out)))
            return false;
    }
    if (strcmp(thread->outcome, "end") != 0) {
        if (!put(out, "(stack incomplete: ") || !put(out, thread->outcome) ||
            (thread->fault_address && !putf(out, " at %#llx", (unsigned long long)thread->fault_address)) ||
            (thread->reason.len &&
             (!put(out, ": ") || !fu_buffer_append(out, thread->reason.data, thread->reason.len))) ||
            !put(out, ")\n"))
            return false;
    }
    return true;
}

/* ---- JSON --------------------------------------------------------------------------------------- */

static bool json_unit(fu_buffer *out, uint32_t unit) { return putf(out, "\\u%04llx", unit); }

/* A JSON string as json.dump (ensure_ascii) writes the Python string the bytes decode to
 * (surrogateescape: an undecodable byte b is U+DC00 + b); NULL: null. */
static bool json_string(fu_buffer *out, const fu_snapshot_text *text)
{
    if (!text->data)
        return put(out, "null");
    const uint8_t *s = (const uint8_t *)text->data;
    if (!put(out, "\""))
        return false;
    for (size_t i = 0; i < text->len;) {
        uint32_t cp;
        size_t n = utf8_decode(s + i, text->len - i, &cp);
        if (!n) {
            cp = 0xdc00u + s[i];
            n = 1;
        }
        i += n;
        bool ok;
        switch (cp) {
        case '"': ok = put(out, "\\\""); break;
        case '\\': ok = put(out, "\\\\"); break;
        case '\n': ok = put(out, "\\n"); break;
        case '\r': ok = put(out, "\\r"); break;
        case '\t': ok = put(out, "\\t"); break;
        case '\b': ok = put(out, "\\b"); break;
        case '\f': ok = put(out, "\\f"); break;
        default:
            if (cp >= 0x20 && cp < 0x7f) {
                char c = (char)cp;
                ok = fu_buffer_append(out, &c, 1);
            } else if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                ok = json_unit(out, 0xd800 | v >> 10) && json_unit(out, 0xdc00 | (v & 0x3ff));
            } else {
                ok = json_unit(out, cp);
            }
        }
        if (!ok)
            return false;
    }
    return put(out, "\"");
}

static bool json_registers(const fu_snapshot_frame *f, fu_buffer *out)
{
    if (!put(out, "{"))
        return false;
    for (unsigned r = 0; r < SHOWN_REGISTERS; r++) {
        char name[8];
        uint64_t value;
        bool known = shown_register(f, r, name, &value);
        if ((r && !put(out, ", ")) || !put(out, "\"") || !put(out, name) || !put(out, "\": ") ||
            !(known ? putf(out, "%llu", (unsigned long long)value) : put(out, "null")))
            return false;
    }
    return put(out, "}");
}

bool fu_snapshot_thread_json(const fu_snapshot_thread *thread, fu_buffer *out)
{
    fu_snapshot_text outcome = {thread->outcome, strlen(thread->outcome)};
    if (!putf(out, "{\"tid\": %lld, \"name\": ", (unsigned long long)thread->tid) || !json_string(out, &thread->name) ||
        !put(out, ", \"outcome\": ") || !json_string(out, &outcome) || !put(out, ", \"frames\": ["))
        return false;
    for (size_t i = 0; i < thread->frame_count; i++) {
        const fu_snapshot_frame *f = &thread->frames[i];
        if ((i && !put(out, ", ")) || !putf(out, "{\"address\": %llu, \"symbol\": ", (unsigned long long)f->address) ||
            !json_string(out, &f->symbol) || !putf(out, ", \"offset\": %llu, \"module\": ", (unsigned long long)f->offset) ||
            !json_string(out, &f->module) ||
            (f->derived && (!put(out, ", \"derived\": \"") || !put(out, f->derived) || !put(out, "\""))) ||
            !put(out, ", \"registers\": ") ||
            !(f->registers ? json_registers(f, out) : put(out, "{}")) || !put(out, "}"))
            return false;
    }
    return put(out, "]}");
}

bool fu_snapshot_head(int64_t pid, bool json, fu_buffer *out)
{
    return putf(out, json ? "{\"pid\": %lld, \"threads\": [" : "PID %lld\n", (unsigned long long)pid);
}

bool fu_snapshot_tail(bool json, fu_buffer *out) { return !json || put(out, "]}\n"); }

bool fu_snapshot_json_separator(fu_buffer *out) { return put(out, ", "); }
