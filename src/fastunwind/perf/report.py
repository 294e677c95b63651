"""perf report's table of a recording: functions by self samples (`perf report --no-children`) and by
total samples, the function anywhere on the stack (`--children`).

The recording is streamed as `fastunwind perf-script` streams it (perf/script.py, stream_recording),
and each window's unwound, symbolized samples are counted in C (native/core/report.c): no Python per
sample or per frame, memory that grows with the distinct functions, not with the recording. The
rules perf follows, and so this table, are in native/core/report.h.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from fastunwind import _core
from fastunwind.perf.sample_filter import SampleFilter
from fastunwind.perf.script import DEFAULT_MAX_FRAMES, Statistics, stream_recording

__all__ = ["SORT_KEYS", "ReportRow", "ReportTable", "parse_sort", "report_recording"]

#: perf report's --sort keys this table knows, and their flags in the C table
SORT_KEYS = {"sym": _core.REPORT_SORT_SYM, "dso": _core.REPORT_SORT_DSO, "comm": _core.REPORT_SORT_COMM,
             "tid": _core.REPORT_SORT_TID, "srcline": _core.REPORT_SORT_SRCLINE}


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


def report_recording(path: str, sort: Sequence[str] = ("sym",), *, by_total: bool = False, per_thread: bool = False,
                     limit: int = -1, max_frames: int = DEFAULT_MAX_FRAMES, backend: str | None = None,
                     synth: str = "off", sample_filter: SampleFilter | None = None,
                     on_window: Callable[[float | None], None] | None = None
                     ) -> tuple[ReportTable, ReportTable | None, Statistics]:
    """The table of the recording at `path` ("-": standard input) sorted by `sort` (keys of
    SORT_KEYS), at most `limit` rows (-1: all); with `per_thread`, also the whole table by thread
    (sort + tid and comm). `sample_filter`: only its samples are counted. `backend`, `synth`: see
    AddressSpace.to_core; `on_window`: see stream_recording."""
    reports = [_core.Report(_flags(sort))]
    if per_thread:
        reports.append(_core.Report(_flags(sort) | _core.REPORT_SORT_TID | _core.REPORT_SORT_COMM))
    stats = stream_recording(path, None, mode="stats", max_frames=max_frames, backend=backend, synth=synth,
                             consumers=reports, sample_filter=sample_filter, on_window=on_window,
                             srcline_fields=_core.UNWOUND_SRCLINE if "srcline" in sort else 0)
    tables = [ReportTable(report.samples, [ReportRow(*row) for row in report.rows(by_total, limit if i == 0 else -1)])
              for i, report in enumerate(reports)]
    return tables[0], tables[1] if per_thread else None, stats
