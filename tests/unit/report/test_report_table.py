"""The report's text table (native/core/report.c, fu_report_write_table: the one layout of the
Python path and the launcher) on a real recording: names in full or lines cut to a width with an
ellipsis, the thread tables, and perf's --sort syntax."""

from __future__ import annotations

import pytest

from fastunwind.perf.report import count_recording, parse_sort, render_report
from tests.support.recordings import PerfRecordings


@pytest.fixture(scope="module")
def counted(perf_recordings: PerfRecordings):
    recording = perf_recordings.get("c")
    return str(recording.data_file), count_recording(str(recording.data_file), ("dso", "sym"), per_thread=True)


def test_full_names_without_a_width(counted):
    source, report = counted
    lines = render_report(report._replace(threads=None), ("dso", "sym"), source).decode().splitlines()
    assert lines[0] == f"# {report.table.samples} samples of {source}, sorted by self samples (--sort dso,sym)"
    assert lines[1] == "#" and lines[2].split() == ["#", "Self", "Total", "Self", "n", "Total", "n",
                                                    "Shared", "Object", "Symbol"]
    rows = report.table.rows(False)
    assert len(lines) == 3 + len(rows)
    for line, (name, module, _comm, _pid, _tid, self, total, _srcline) in zip(lines[3:], rows):
        cells = line.split(maxsplit=5)
        assert cells[:4] == [f"{100 * self / report.table.samples:.2f}%", f"{100 * total / report.table.samples:.2f}%",
                             str(self), str(total)]
        assert cells[4] == module.rsplit("/", 1)[-1] and line.endswith(name)
    # the columns line up: every row's symbol starts where the heading's does
    start = lines[2].index("Symbol")
    assert all(line[start - 2:start] == "  " and line[start] != " " for line in lines[3:])


def test_columns_fit_the_width(counted):
    source, report = counted
    full = render_report(report, ("dso", "sym"), source, by_total=True, limit=3).decode().splitlines()
    cut = render_report(report, ("dso", "sym"), source, by_total=True, limit=3, width=40).decode().splitlines()
    assert len(cut) == len(full)
    for whole, line in zip(full, cut):
        if whole.startswith("# ") or whole.startswith("thread") or len(whole) <= 40:
            assert line == whole
        else:
            assert len(line) == 40 and line.endswith("…") and whole.startswith(line[:-1])


def test_a_table_per_thread(counted):
    source, report = counted
    text = render_report(report, ("dso", "sym"), source, limit=2).decode()
    sections = text.split("\n\n")
    threads = report.threads.threads(False, 2)
    assert len(sections) == 1 + len(threads)
    samples = [thread[3] for thread in threads]
    assert samples == sorted(samples, reverse=True) and sum(samples) == report.table.samples
    for section, (comm, pid, tid, count, rows) in zip(sections[1:], threads):
        lines = section.splitlines()
        assert lines[0] == (f"# thread {comm} {pid}/{tid}: {count} samples "
                            f"({100 * count / report.threads.samples:.2f}% of {report.threads.samples}), "
                            "sorted by self samples (--sort dso,sym)")
        assert len(lines) == 3 + len(rows) and len(rows) <= 2


def test_sort_keys_as_perf_writes_them():
    assert parse_sort("comm, dso,sym,dso") == ("comm", "dso", "sym")
    assert parse_sort("sym,srcline") == ("sym", "srcline")
    with pytest.raises(ValueError, match="unknown sort key 'parent'"):
        parse_sort("sym,parent")
    with pytest.raises(ValueError):
        parse_sort(",")
