"""Compare two `perf script` outputs sample by sample: fastunwind's stacks against perf 6.1's.

Samples are matched by (tid, time). Only user frames are compared, as (dso, address) sequences:
symbols are perf's symbolization, not unwinding, and kernel frames come from the kernel's own
callchain in the record, not from a walker. Each matched pair is classified:

    identical                  the same user frames
    ours_longer                perf's frames are a proper prefix of ours (perf stopped early)
    ours_shorter               ours are a proper prefix of perf's (we stopped early)
    perf_stopped_at_unknown    equal up to frame k, then perf has only frames without a map
                               ("[unknown] ([unknown])", e.g. ffffffffffffffff: a zero return
                               address decremented) where ours go on or end
    unmapped_where_perf_empty  perf printed no user frame, ours only frames without a map: the
                               sampled IP lies in no mapping either knows of (a process before
                               its exec's mmaps, a recording cut before them); perf prints
                               nothing then, we print the IP
    differ_at_frame            equal up to frame k, then different
    missing_in_ours            perf has the sample, we do not
    missing_in_perf            we have it, perf does not

    python3 -m tests.support.perf_compare OURS PERF [--limit 10] [--json]    (from the repository root)

OURS and PERF are perf-script-format text files; a path ending in .data is run through
`perf script --no-inline -F comm,tid,time,ip,sym,symoff,dso` first. Exit status 0 when every
sample is identical, 1 otherwise, 2 on a usage or format error.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from tests.support.perf_script_format import UNKNOWN, Frame, PerfScriptFormatError, Sample, parse

KINDS = ("identical", "ours_longer", "ours_shorter", "perf_stopped_at_unknown", "unmapped_where_perf_empty",
         "differ_at_frame", "missing_in_ours", "missing_in_perf")


def user_addresses(sample: Sample) -> tuple[tuple[str, int], ...]:
    return tuple((frame.dso, frame.ip) for frame in sample.user_frames())


@dataclasses.dataclass(frozen=True)
class SampleComparison:
    key: tuple[int, str]                 # (tid, time)
    kind: str                            # one of KINDS
    frame_index: int | None              # first differing user frame (None: identical or missing)
    ours: Sample | None
    perf: Sample | None

    def describe(self, context: int = 2) -> str:
        tid, time = self.key
        head = f"tid {tid} time {time}: {self.kind}"
        if self.frame_index is not None:
            head += f" at user frame {self.frame_index}"
        lines = [head]
        for label, sample in (("ours", self.ours), ("perf", self.perf)):
            if sample is None:
                lines.append(f"    {label}: (no such sample)")
                continue
            frames = sample.user_frames()
            start = max(0, (self.frame_index or 0) - context)
            shown = frames[start:(self.frame_index or 0) + context + 1]
            lines.append(f"    {label}: {len(frames)} user frames"
                         + (f", from frame {start}:" if shown else ""))
            lines.extend(f"        #{start + offset:<3}{_frame_text(frame)}" for offset, frame in enumerate(shown))
        return "\n".join(lines)


def _frame_text(frame: Frame) -> str:
    symbol = frame.symbol if frame.offset is None else f"{frame.symbol}+0x{frame.offset:x}"
    return f"{frame.ip:16x} {symbol} ({frame.dso})"


def _no_map(frame: Frame) -> bool:
    return frame.dso == UNKNOWN


def compare_sample(ours: Sample | None, perf: Sample | None) -> SampleComparison:
    if ours is None or perf is None:
        sample = ours or perf
        if sample is None:
            raise ValueError("compare_sample needs at least one sample")
        return SampleComparison(sample.key, "missing_in_ours" if ours is None else "missing_in_perf",
                                None, ours, perf)
    our_frames, perf_frames = user_addresses(ours), user_addresses(perf)
    if our_frames == perf_frames:
        return SampleComparison(ours.key, "identical", None, ours, perf)
    if not perf_frames and all(_no_map(frame) for frame in ours.user_frames()):
        return SampleComparison(ours.key, "unmapped_where_perf_empty", 0, ours, perf)
    common = 0
    while common < min(len(our_frames), len(perf_frames)) and our_frames[common] == perf_frames[common]:
        common += 1
    if common == len(perf_frames):
        kind = "ours_longer"
    elif all(_no_map(frame) for frame in perf.user_frames()[common:]):
        kind = "perf_stopped_at_unknown"
    elif common == len(our_frames):
        kind = "ours_shorter"
    else:
        kind = "differ_at_frame"
    return SampleComparison(ours.key, kind, common, ours, perf)


@dataclasses.dataclass(frozen=True)
class ComparisonReport:
    comparisons: tuple[SampleComparison, ...]

    @property
    def counts(self) -> dict[str, int]:
        counts = collections.Counter(comparison.kind for comparison in self.comparisons)
        return {kind: counts.get(kind, 0) for kind in KINDS}

    @property
    def matched(self) -> int:
        return sum(1 for c in self.comparisons if c.kind not in ("missing_in_ours", "missing_in_perf"))

    @property
    def identical(self) -> int:
        return self.counts["identical"]

    @property
    def identical_percent(self) -> float:
        return 100.0 * self.identical / len(self.comparisons) if self.comparisons else 100.0

    def differences(self, kind: str | None = None) -> list[SampleComparison]:
        return [c for c in self.comparisons if c.kind != "identical" and (kind is None or c.kind == kind)]

    def describe(self, limit: int = 10) -> str:
        lines = [f"{len(self.comparisons)} samples ({self.matched} matched by tid and time): "
                 f"{self.identical} identical ({self.identical_percent:.1f}%)"]
        lines.extend(f"    {kind:<24} {count}" for kind, count in self.counts.items()
                     if count and kind != "identical")
        # The first `limit` differences, spread over the kinds so a rare kind is not hidden.
        by_kind = [self.differences(kind) for kind in KINDS if kind != "identical"]
        shown: list[SampleComparison] = []
        while len(shown) < limit and any(by_kind):
            for group in by_kind:
                if group and len(shown) < limit:
                    shown.append(group.pop(0))
        if shown:
            lines.append(f"first differences ({len(shown)} of {len(self.differences())}):")
            lines.extend(comparison.describe() for comparison in shown)
        return "\n".join(lines)

    def to_json(self, limit: int = 50) -> dict:
        return {"samples": len(self.comparisons), "matched": self.matched, "identical": self.identical,
                "identical_percent": round(self.identical_percent, 3), "counts": self.counts,
                "differences": [{"tid": c.key[0], "time": c.key[1], "kind": c.kind,
                                 "frame_index": c.frame_index,
                                 "ours": [_frame_text(f) for f in c.ours.user_frames()] if c.ours else None,
                                 "perf": [_frame_text(f) for f in c.perf.user_frames()] if c.perf else None}
                                for c in self.differences()[:limit]]}


def compare(ours: list[Sample], perf: list[Sample]) -> ComparisonReport:
    """Pair samples by (tid, time) in perf's order (repeated keys pair up in order of appearance),
    then ours that perf lacks."""
    our_by_key: dict[tuple[int, str], collections.deque[Sample]] = collections.defaultdict(collections.deque)
    for sample in ours:
        our_by_key[sample.key].append(sample)
    comparisons = []
    for sample in perf:
        queue = our_by_key.get(sample.key)
        comparisons.append(compare_sample(queue.popleft() if queue else None, sample))
    for sample in ours:
        queue = our_by_key.get(sample.key)
        if queue and queue[0] is sample:
            comparisons.append(compare_sample(queue.popleft(), None))
    return ComparisonReport(tuple(comparisons))


def load(path: str | Path) -> list[Sample]:
    """Parse a perf-script-format text file, or run perf script on a .data file first."""
    path = Path(path)
    if path.suffix == ".data":
        text = subprocess.run(["perf", "script", "--no-inline", "-F", "comm,tid,time,ip,sym,symoff,dso",
                               "-i", str(path)], capture_output=True, check=True).stdout.decode()
    else:
        text = path.read_text()
    return parse(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare two perf-script outputs (ours vs perf's) by user frames (dso, address).",
        epilog="example (from the repository root): python3 -m tests.support.perf_compare ours.txt .build/recordings/c.data --limit 5")
    parser.add_argument("ours", help="our output (text), or a .data file")
    parser.add_argument("perf", help="perf's output (text), or a .data file to run perf script on")
    parser.add_argument("--limit", type=int, default=10, help="differences to show (default 10)")
    parser.add_argument("--json", action="store_true", help="machine-readable report")
    arguments = parser.parse_args(argv)
    try:
        report = compare(load(arguments.ours), load(arguments.perf))
    except (OSError, PerfScriptFormatError, subprocess.CalledProcessError) as error:
        print(f"compare: {error}", file=sys.stderr)
        return 2
    if arguments.json:
        print(json.dumps(report.to_json(arguments.limit), indent=2))
    else:
        print(report.describe(arguments.limit))
    return 0 if report.identical == len(report.comparisons) else 1


if __name__ == "__main__":
    sys.exit(main())
