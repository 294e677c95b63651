"""perf report's table of a recording: functions by self samples (`perf report --no-children`) and by
total samples, the function anywhere on the stack (`--children`).

The recording is streamed as `fastunwind perf-script` streams it (perf/script.py, stream_recording),
and each window's unwound, symbolized samples are counted in C (native/core/report.c): no Python per
sample or per frame, memory that grows with the distinct functions, not with the recording. The
rules perf follows, and so this table, are in native/core/report.h; so is the table's text
(`render_report`, the launcher's too).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from fastunwind import _core
from fastunwind.perf.sample_filter import SampleFilter
from fastunwind.perf.script import DEFAULT_MAX_FRAMES, Statistics, stream_recording
from fastunwind.typecheck import NamedTuple

__all__ = ["SORT_KEYS", "CountedReport", "ReportRow", "ReportTable", "count_recording", "parse_sort",
           "render_report", "report_recording"]

#: perf report's --sort keys this table knows, and their flags in the C table
SORT_KEYS: dict[str, int] = dict(_core.REPORT_SORT_KEYS)


class ReportRow(NamedTuple):
    """One entry: a combination of the sort's keys (the others are None, or 0 for pid and tid)."""

    name: str | None    #: the symbol, or its DSO-relative address as perf prints it (0x%016x)
    module: str | None  #: the DSO's path, [kernel.kallsyms] or [unknown]
    comm: str | None
    pid: int
    tid: int
    self: int           #: samples whose first frame is here
    total: int          #: samples with this entry anywhere on the stack (counted once each)
    srcline: str | None = None  #: "file:line" (the file's basename), "??:0" when not known


class ReportTable(NamedTuple):
    samples: int
    rows: list[ReportRow]  #: most samples first (total samples when by_total, else self)


def parse_sort(text: str) -> tuple[str, ...]:
    """perf report's --sort value ("sym", "comm,dso,sym", ...): the keys in order, each once;
    ValueError naming a key it does not know."""
    keys = tuple(dict.fromkeys(key.strip() for key in text.split(",") if key.strip()))
    unknown = [key for key in keys if key not in SORT_KEYS]
    if unknown or not keys:
        raise ValueError(f"unknown sort key {unknown[0]!r}" if unknown else "no sort key given")
    return keys


def _flags(keys: Sequence[str]) -> int:
    flags = 0
    for key in keys:
        flags |= SORT_KEYS[key]
    return flags


class CountedReport(NamedTuple):
    """A recording's samples counted: by the sort's keys, and (--per-thread) by them, tid and comm."""

    table: _core.Report
    threads: _core.Report | None
    stats: Statistics


def count_recording(path: str, sort: Sequence[str] = ("sym",), *, per_thread: bool = False,
                    max_frames: int = DEFAULT_MAX_FRAMES, backend: str | None = None, synth: str = "off",
                    sample_filter: SampleFilter | None = None,
                    on_window: Callable[[float | None], None] | None = None) -> CountedReport:
    """The samples of the recording at `path` ("-": standard input) counted by `sort` (keys of
    SORT_KEYS); with `per_thread`, also by thread (sort + tid and comm). `sample_filter`: only its
    samples are counted. `backend`, `synth`: see AddressSpace.to_core; `on_window`: see
    stream_recording."""
    reports = [_core.Report(_flags(sort))]
    if per_thread:
        reports.append(_core.Report(_flags(sort) | _core.REPORT_SORT_TID | _core.REPORT_SORT_COMM))
    stats = stream_recording(path, None, mode="stats", max_frames=max_frames, backend=backend, synth=synth,
                             consumers=reports, sample_filter=sample_filter, on_window=on_window,
                             srcline_fields=_core.UNWOUND_SRCLINE if "srcline" in sort else 0)
    return CountedReport(reports[0], reports[1] if per_thread else None, stats)


def report_recording(path: str, sort: Sequence[str] = ("sym",), *, by_total: bool = False, per_thread: bool = False,
                     limit: int = -1, max_frames: int = DEFAULT_MAX_FRAMES, backend: str | None = None,
                     synth: str = "off", sample_filter: SampleFilter | None = None,
                     on_window: Callable[[float | None], None] | None = None
                     ) -> tuple[ReportTable, ReportTable | None, Statistics]:
    """count_recording's table as rows, most samples first (by total with `by_total`), at most
    `limit` (-1: all); with `per_thread`, also the whole table by thread."""
    counted = count_recording(path, sort, per_thread=per_thread, max_frames=max_frames, backend=backend, synth=synth,
                              sample_filter=sample_filter, on_window=on_window)
    tables = [ReportTable(report.samples, [ReportRow(*row) for row in report.rows(by_total, limit if i == 0 else -1)])
              for i, report in enumerate((counted.table, counted.threads)) if report is not None]
    return tables[0], tables[1] if per_thread else None, counted.stats


def render_report(counted: CountedReport, sort: Sequence[str], source: str, *, by_total: bool = False,
                  limit: int = -1, width: int | None = None) -> bytes:
    """The report's text (native/core/report.h, fu_report_write_table): the table titled by
    `source` (the recording's name), then with per-thread counts a table per thread; at most
    `limit` rows each (-1: all); lines longer than `width` characters are cut with "…" (None: names
    in full)."""
    keys = [SORT_KEYS[key] for key in sort]
    columns = -1 if width is None else width
    text = counted.table.table(keys, by_total, limit, columns, os.fsencode(source))
    if counted.threads is not None:
        text += counted.threads.thread_tables(keys, by_total, limit, columns)
    return text
