"""perf script's and perf report's sample filters: `--pid`, `--tid`, `--cpu`, `--time` and `--comm`,
in perf's syntax, applied in C to each window of a stream before its samples are replayed, walked and
symbolized (native/core/sample_filter.c): a sample filtered out costs its decoding only. `--comm`
needs the thread's name at the sample's time, which the replay knows: it is applied right after the
replay, before the walk.
"""

from __future__ import annotations

import array
from typing import NamedTuple

from fastunwind import _core

__all__ = ["SampleFilter", "parse_cpus", "parse_ids", "parse_names", "parse_times"]

NS_PER_SECOND = 1_000_000_000


class SampleFilter(NamedTuple):
    """What to keep: samples of these pids, tids, cpus (each: any when empty), in one of these time
    ranges (ns, both ends included, 0 open) and of threads with one of these names."""

    pids: tuple[int, ...] = ()
    tids: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()
    ranges: tuple[tuple[int, int], ...] = ()
    comms: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return any(self)

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
        raise ValueError(f"time {whole!r}: ranges are start,end in seconds (sec.nsec), either side may be empty"
                         + ("; percentages are not supported" if "%" in whole else ""))
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


def parse_names(text: str) -> tuple[str, ...]:
    """perf's --comms list: "bash,python3"."""
    return tuple(name for name in text.split(",") if name)
