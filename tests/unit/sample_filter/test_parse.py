"""perf's syntax of the sample filters, parsed without a recording."""

from __future__ import annotations

import pytest

from fastunwind.perf.sample_filter import SampleFilter, parse_cpus, parse_ids, parse_time_percentages, parse_times


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


def test_time_percentages_as_perf_reads_them():
    assert parse_time_percentages("10%/2") == ((0.1, 0.2),)
    assert parse_time_percentages("0%-10%,30%-40%") == ((0.0, 0.1), (0.3, 0.4))
    assert parse_time_percentages("50%") == ((0.0, 0.5),)  # "50%" is "50%/1"
    assert parse_time_percentages("10%/1,10%/3,") == ((0.0, 0.1), (0.2, 0.30000000000000004))  # a trailing comma ends


@pytest.mark.parametrize("text", ["10%/2x", "110%", "10%,20%", "0%-", "10%/1,0%-10%", "50%,", "5%/0", "abc%", "%"])
def test_bad_time_percentages(text):
    with pytest.raises(ValueError):
        parse_time_percentages(text)


def test_percentages_become_ranges_of_the_recordings_span():
    # perf's set_percent_time: first + round(fraction * span), the end 1 ns short of the next slice
    # unless it is the span's end; halves rounded away from zero (C's round)
    halves = SampleFilter(percent_ranges=parse_time_percentages("0%-50%,50%-100%")).with_span(1000, 1005)
    assert halves.ranges == ((1000, 1002), (1003, 1005)) and not halves.percent_ranges  # 2.5 ns rounds to 3
    tenth = SampleFilter(percent_ranges=parse_time_percentages("10%/2")).with_span(10_000, 20_000)
    assert tenth.ranges == ((11_000, 11_999),)
