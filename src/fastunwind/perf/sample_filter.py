"""perf script's and perf report's sample filters: `--pid`, `--tid`, `--cpu`, `--time` and `--comm`,
in perf's syntax, applied in C to each window of a stream before its samples are replayed, walked and
symbolized (native/core/sample_filter.c): a sample filtered out costs its decoding only. `--comm`
needs the thread's name at the sample's time, which the replay knows: it is applied right after the
replay, before the walk.
"""

from __future__ import annotations

import array
import math

from fastunwind import _core
from fastunwind.typecheck import NamedTuple

__all__ = ["SampleFilter", "parse_cpus", "parse_ids", "parse_names", "parse_time_percentages", "parse_times"]

NS_PER_SECOND = 1_000_000_000


class SampleFilter(NamedTuple):
    """What to keep: samples of these pids, tids, cpus (each: any when empty), in one of these time
    ranges (ns, both ends included, 0 open) and of threads with one of these names."""

    pids: tuple[int, ...] = ()
    tids: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()
    ranges: tuple[tuple[int, int], ...] = ()
    comms: tuple[str, ...] = ()
    #: --time as percentages of the recording's span (perf's "10%/2", "0%-10%,30%-40%"): (start,
    #: end) fractions, made `ranges` by with_span once the recording's sample times are known
    percent_ranges: tuple[tuple[float, float], ...] = ()

    @property
    def active(self) -> bool:
        return any(self)

    def with_span(self, first: int, last: int) -> "SampleFilter":
        """The filter with its percentages as time ranges of the span from `first` to `last` (ns,
        perf record's HEADER_SAMPLE_TIME), as perf's set_percent_time (util/time-utils.c) makes
        them: start and end rounded to the nearest ns, the end one ns short of the next slice's
        start unless it is the span's end."""
        total = (last - first) % (1 << 64)  # perf's u64
        ranges = []
        for start_fraction, end_fraction in self.percent_ranges:
            start = (first + _c_round(start_fraction * total)) % (1 << 64)
            end = (first + _c_round(end_fraction * total)) % (1 << 64)
            if end > start and end != last:
                end -= 1
            ranges.append((start, end))
        return self._replace(ranges=tuple(ranges), percent_ranges=())

    def select(self, window: _core.PerfData) -> None:
        """Drop the window's samples outside the pids, tids, cpus and ranges (in place)."""
        if self.pids or self.tids or self.cpus or self.ranges:
            ranges = array.array("Q", [value for pair in self.ranges for value in pair])
            _core.filter_samples(window, _u32(self.pids), _u32(self.tids), _u32(self.cpus), ranges.tobytes())

    def select_comms(self, window: _core.PerfData, space_ids: bytes, comm_ids: bytes, comm_names: list[bytes]
                     ) -> tuple[bytes, bytes]:
        """Drop the window's samples of threads not named in `comms` (in place), given the replay's
        ids and names; the kept samples' space and comm ids."""
        if not self.comms:
            return space_ids, comm_ids
        wanted = {name.encode("utf-8", "surrogateescape") for name in self.comms}
        ids = [index for index, name in enumerate(comm_names) if name in wanted]
        return _core.keep_comms(window, space_ids, comm_ids, _u32(ids))


def _c_round(value: float) -> int:
    """C's round() of a value >= 0: halves away from zero (Python's round() takes them to even)."""
    whole = int(value)
    return whole + (value - whole >= 0.5)


def _u32(values: tuple[int, ...] | list[int]) -> bytes:
    return array.array("I", sorted(set(values))).tobytes()


def parse_ids(text: str, what: str) -> tuple[int, ...]:
    """perf's pid or tid list: "1,2,3"."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{what} {text!r}: a comma-separated list of numbers") from None
    if not values or any(v < 0 or v >= 1 << 32 for v in values) or len(values) > _core.FILTER_MAX_VALUES:
        raise ValueError(f"{what} {text!r}: a comma-separated list of numbers")
    return values


def parse_cpus(text: str) -> tuple[int, ...]:
    """perf's CPU list (util/cpumap.c): "0-2,4"."""
    cpus: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last) if dash else int(first)
        except ValueError:
            raise ValueError(f"cpu list {text!r}: numbers and ranges like 0-2,4") from None
        if low < 0 or high < low or high - low + len(cpus) > _core.FILTER_MAX_VALUES:
            raise ValueError(f"cpu list {text!r}: numbers and ranges like 0-2,4")
        cpus.extend(range(low, high + 1))
    return tuple(cpus)


def _nanoseconds(text: str, whole: str) -> int:
    """perf's parse_nsec_time: seconds, optionally "." and up to 9 digits of fraction."""
    seconds, dot, fraction = text.partition(".")
    if not seconds.isdigit() or (dot and (not fraction.isdigit() or len(fraction) > 9)):
        raise ValueError(f"time {whole!r}: ranges are start,end in seconds (sec.nsec), either side may be empty")
    return int(seconds) * NS_PER_SECOND + int(fraction.ljust(9, "0") if dot else 0)


def parse_times(text: str) -> tuple[tuple[int, int], ...]:
    """perf's --time: "start,end" ranges separated by spaces, in seconds with up to 9 decimals;
    either side may be empty (open)."""
    ranges = []
    for part in text.split():
        start, comma, end = part.partition(",")
        if not comma:
            _nanoseconds("", text)  # raises: a range needs its comma
        ranges.append((_nanoseconds(start, text) if start else 0, _nanoseconds(end, text) if end else 0))
    if not ranges or len(ranges) > _core.FILTER_MAX_RANGES:
        raise ValueError(f"time {text!r}: ranges are start,end in seconds (sec.nsec)")
    return tuple(ranges)


def _percent(text: str, whole: str) -> float:
    """perf's parse_percent: a number up to a "%" (what follows it is ignored, as perf does), as a
    fraction."""
    number, percent, _rest = text.partition("%")
    try:
        value = float(number) if number.strip() else 0.0  # strtod of "" is 0, which perf takes
    except ValueError:
        value = math.nan
    if not percent or not math.isfinite(value):
        raise ValueError(_percent_error(whole))
    return value / 100.0


def _percent_error(whole: str) -> str:
    return (f"time {whole!r}: percentages of the recording are a%/n (the nth slice of a%), a%-b% or a%, "
            "several separated by commas, each within 0%-100%")


def parse_time_percentages(text: str) -> tuple[tuple[float, float], ...]:
    """perf's --time in percentages (util/time-utils.c, perf_time__percent_parse_str): "10%/2" (the
    second 10% slice), "0%-10%", "50%" (the first half), several separated by commas (all of one
    form: slices when any "/" is present, else ranges when any "-" is); (start, end) fractions."""
    whole = text
    if "/" not in text and "-" not in text:  # one percentage, its "%" the last character: "50%" is "50%/1"
        if text.find("%") != len(text) - 1:
            raise ValueError(_percent_error(whole))
        text += "/1"
    parts = text.split(",")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()  # perf stops at a trailing comma
    if len(parts) > _core.FILTER_MAX_RANGES:
        raise ValueError(_percent_error(whole))
    ranges = []
    for part in parts:
        if "/" in text:  # perf_time__percent_parse_str: "/" anywhere makes every part a slice
            size_text, slash, index_text = part.partition("/")
            size = _percent(size_text, whole) if slash else 0.0
            try:
                index = int(index_text)
            except ValueError:
                raise ValueError(_percent_error(whole)) from None
            if size <= 0.0:
                raise ValueError(_percent_error(whole))
            start, end = size * (index - 1), size * index
        else:
            start_text, dash, end_text = part.partition("-")
            if not dash:
                raise ValueError(_percent_error(whole))
            start, end = _percent(start_text, whole), _percent(end_text, whole)
        if not (0.0 <= start <= 1.0 and 0.0 <= end <= 1.0):
            raise ValueError(_percent_error(whole))
        ranges.append((start, end))
    return tuple(ranges)


def parse_names(text: str) -> tuple[str, ...]:
    """perf's --comms list: "bash,python3"."""
    return tuple(name for name in text.split(",") if name)
