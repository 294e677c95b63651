/* perf_map: /tmp/perf-PID.map parsed as perf 6.1's dso__load_perf_map reads it (see perf_map.h),
 * bounded: FU_PERF_MAP_MAX_LINE bytes per line, FU_PERF_MAP_MAX_LINES lines. */
#include "perf_map.h"

#include <string.h>

/* Hex digits of a number: at most 16 (a u64); more is a malformed line. */
#define MAX_HEX_DIGITS 16

static int hex_value(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* perf's hex2u64: the hex digits at line[*pos...]; *pos moves past them. False on overflow. */
static bool read_hex(const uint8_t *line, size_t len, size_t *pos, uint64_t *value)
{
    uint64_t v = 0;
    size_t digits = 0;
    while (*pos < len && hex_value(line[*pos]) >= 0) {
        if (++digits > MAX_HEX_DIGITS)
            return false;
        v = v << 4 | (uint64_t)hex_value(line[*pos]);
        (*pos)++;
    }
    *value = v;
    return true;
}

bool fu_perf_map_parse(const uint8_t *text, size_t size, fu_perf_map_emit emit, void *context,
                       fu_perf_map_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    const uint8_t *p = text, *end = text + size;
    size_t lines = 0;
    /* one line per iteration: the text's size bounds the loop, FU_PERF_MAP_MAX_LINES the work */
    while (p < end) {
        const uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((eol ? eol : end) - p);
        const uint8_t *line = p;
        p = eol ? eol + 1 : end;
        if (++lines > FU_PERF_MAP_MAX_LINES) {
            counts->ignored++;
            continue;
        }
        if (len > FU_PERF_MAP_MAX_LINE) {
            counts->too_long++;
            continue;
        }
        fu_perf_map_entry entry;
        size_t pos = 0;
        /* START, one separator, SIZE, one separator, then more than 2 bytes of name */
        if (!read_hex(line, len, &pos, &entry.start) || ++pos + 2 >= len ||
            !read_hex(line, len, &pos, &entry.size) || ++pos + 2 >= len) {
            counts->malformed++;
            continue;
        }
        entry.name = (const char *)line + pos;
        entry.name_len = len - pos;
        counts->entries++;
        if (!emit(context, &entry))
            return false;
    }
    return true;
}
