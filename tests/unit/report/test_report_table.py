"""The report's text table and sort keys without a recording: columns fitted to a width (the last
cut with an ellipsis) or printed in full, and perf's --sort syntax."""

from __future__ import annotations

import io

import pytest

from fastunwind.commands.report import _print_table
from fastunwind.perf.report import ReportRow, ReportTable, parse_sort

LONG = "std::vector<int, std::allocator<int>>::_M_realloc_insert<int const&>" * 3
TABLE = ReportTable(10, [ReportRow(LONG, "/usr/lib/libfoo.so.1", None, 0, 0, 7, 9),
                         ReportRow("main", "/usr/bin/app", None, 0, 0, 3, 10)])


def test_full_names_without_a_width():
    out = io.StringIO()
    _print_table(out, TABLE, ("dso", "sym"), False, None, "10 samples")
    lines = out.getvalue().splitlines()
    assert lines[0] == "# 10 samples, sorted by self samples (--sort dso,sym)"
    assert lines[3].split(maxsplit=5) == ["70.00%", "90.00%", "7", "9", "libfoo.so.1", LONG]
    assert lines[4].split() == ["30.00%", "100.00%", "3", "10", "app", "main"]


def test_columns_fit_the_width():
    out = io.StringIO()
    _print_table(out, TABLE, ("dso", "sym"), True, 80, "10 samples")
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[3].endswith("…") and "libfoo.so.1" in lines[3]


def test_sort_keys_as_perf_writes_them():
    assert parse_sort("comm, dso,sym,dso") == ("comm", "dso", "sym")
    assert parse_sort("sym,srcline") == ("sym", "srcline")
    with pytest.raises(ValueError, match="unknown sort key 'parent'"):
        parse_sort("sym,parent")
    with pytest.raises(ValueError):
        parse_sort(",")
