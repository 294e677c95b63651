"""perf's syntax of the sample filters, parsed without a recording."""

from __future__ import annotations

import pytest

from fastunwind.perf.sample_filter import SampleFilter, parse_cpus, parse_ids, parse_times


def test_lists_and_ranges_as_perf_writes_them():
    assert parse_ids("12,7", "pid list") == (12, 7)
    assert parse_cpus("0-2,4") == (0, 1, 2, 4)
    # perf's parse_nsec_time: the fraction is padded to nanoseconds; either side may be open
    assert parse_times("12.5,13.000000001") == ((12_500_000_000, 13_000_000_001),)
    assert parse_times(",7 9,") == ((0, 7_000_000_000), (9_000_000_000, 0))
    assert not SampleFilter().active and SampleFilter(cpus=(1,)).active


@pytest.mark.parametrize("text", ["1.2", "a,b", "1.0123456789,", "10%/2", ""])
def test_bad_times(text):
    with pytest.raises(ValueError):
        parse_times(text)
