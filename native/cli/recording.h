/* recording: `fastunwind perf-script -i FILE` and `fastunwind report -i FILE` in C (perf/script.py
 * stream_recording's text and folded modes, commands/report.py's default table). */
#ifndef FASTUNWIND_CLI_RECORDING_H
#define FASTUNWIND_CLI_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arguments.h"
#include "buffer.h"
#include "launcher.h"

/* Output held in memory before the run is known to be served: past it, once a pass over the rest
 * of the recording has found everything the run needs in the caches, the text is written as each
 * window is rendered, as the Python path writes it. */
#define FU_CLI_HELD_OUTPUT_BYTES ((size_t)8 << 20)

/* Whether a record of a recording's needs (recording.c: the files a check read, by identity) still
 * holds: every file it lists is as it was. */
bool fu_cli_needs_hold(const uint8_t *data, size_t size);

/* The run's exit status (its text in `out`, the rest of it written there by fu_cli_output_flush
 * as it goes past FU_CLI_HELD_OUTPUT_BYTES), or FU_CLI_NOT_SERVED with nothing written (a table
 * missing anywhere in the recording is found before the first write). */
int fu_cli_perf_script(const fu_cli_request *request, fu_cli_output *out);

/* `report -i FILE [-o FILE] [--children] [--sort KEYS] [--top N]`: commands/report.py's table
 * (names in full: not on a terminal; keys sym, dso, comm, tid), or FU_CLI_NOT_SERVED with nothing
 * written. */
int fu_cli_report(const fu_cli_request *request, fu_cli_output *out);

#endif
