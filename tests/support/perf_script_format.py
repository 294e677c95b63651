"""Parse and render `perf script --no-inline -F comm,tid,time,ip,sym,symoff,dso` output (perf 6.1).

Decoding is kept apart from rendering, and `render(parse(text)) == text` byte for byte on real perf
output (tests/golden/test_perf_script_format.py checks it on every recording), so fastunwind's own
printer can be diffed against perf's as text and compared as data.

The format, from perf 6.1 tools/perf/builtin-script.c (perf_sample__fprintf_start) and
util/evsel_fprintf.c (sample__fprintf_callchain), for a sample with a callchain:

    cworkload  6915  2555.833453: \\n                 comm ' ' tid '%5d' ' ' time '%5lu.%06lu' ': '
    \\t            1cdd sigusr1_handler_work+0x3d (/tmp/wl/cworkload)\\n
    \\t           3c04f [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)\\n
    \\tffffffff81000130 entry_SYSCALL_64_after_hwframe+0x76 ([kernel.kallsyms])\\n
    \\n                                                  one blank line ends the sample

  - A frame line is a tab, the address as %16x, a space, the symbol with "+0x%lx" offset (always
    printed, "+0x0" included) or "[unknown]" without one, a space and the DSO in parentheses
    ("[unknown]" when no map covers the address).
  - The address is what perf resolved: map-relative (an offset into the DSO as mapped, which for a
    PIE or shared library equals the ELF virtual address) for user frames with a map, absolute for
    kernel frames and for frames without a map. Caller frames are return address - 1 (perf
    decrements every frame's IP except a signal frame's, to mimic dwfl_frame_pc); the frame beneath
    a signal frame (the interrupted PC) is not decremented.
  - comm is the kernel's comm (at most 15 characters: "cworkload-fp-debugframe" prints as
    "cworkload-fp-de") and may contain spaces; the tid and time are found from the right.
  - A sample whose callchain is empty prints its header and then the blank line; perf prints no frame.
  - Symbols are demangled C++ and may contain spaces and parentheses; the DSO is the last
    " (...)" group on the line.
"""
from __future__ import annotations

import dataclasses
import re

# perf prints kernel addresses of the x86-64 kernel half; the lowest canonical one.
KERNEL_ADDRESS_START = 0xFFFF800000000000
UNKNOWN = "[unknown]"

# Lazy comm: every space before the tid lands in the padding group and is given back to comm
# beyond what "%5d" and the separator account for (parse_header).
_HEADER = re.compile(r"^(?P<comm>.*?)(?P<pad> +)(?P<tid>-?\d+) +(?P<time>\d+\.\d+): (?:(?P<event>\S+): )?$")
_FRAME_START = re.compile(r"^\t *(?P<ip>[0-9a-f]+) ")
_OFFSET = re.compile(r"^(?P<name>.*)\+0x(?P<offset>[0-9a-f]+)$")


class PerfScriptFormatError(ValueError):
    """A line that is not perf 6.1's `perf script -F comm,tid,time,ip,sym,symoff,dso` format."""

    def __init__(self, line_number: int, line: str, expected: str):
        super().__init__(f"perf script output line {line_number}: expected {expected}, got {line!r}")
        self.line_number = line_number
        self.line = line


@dataclasses.dataclass(frozen=True)
class Frame:
    ip: int                  # as perf printed it (see the module docstring: map-relative, ra - 1)
    symbol: str              # "[unknown]" when perf found none
    offset: int | None       # the "+0x.." after the symbol; None for "[unknown]"
    dso: str                 # path, "[kernel.kallsyms]", "[vdso]", or "[unknown]"

    @property
    def is_kernel_address(self) -> bool:
        return self.ip >= KERNEL_ADDRESS_START or self.dso.startswith("[kernel")

    @property
    def unknown(self) -> bool:
        return self.symbol == UNKNOWN

    def render(self) -> str:
        symbol = self.symbol if self.offset is None else f"{self.symbol}+0x{self.offset:x}"
        return f"\t{self.ip:16x} {symbol} ({self.dso})\n"


@dataclasses.dataclass(frozen=True)
class Sample:
    comm: str
    tid: int
    time: str                # perf's text ("2555.833453"): exact, and the matching key with tid
    frames: tuple[Frame, ...]
    #: the event's name where the header has one (`-F ...,event,...`; fastunwind's default): not compared
    event: str = dataclasses.field(default="", compare=False)

    @property
    def key(self) -> tuple[int, str]:
        return (self.tid, self.time)

    def kernel_frames(self) -> tuple[Frame, ...]:
        """The leading kernel part of the callchain. Only a prefix counts: perf's callchain is
        kernel frames, then user frames, and a garbage user frame can look like a kernel address
        (ffffffffffffffff is IP 0 decremented, printed where libunwind ends on a zero return address)."""
        count = 0
        while count < len(self.frames) and self.frames[count].is_kernel_address:
            count += 1
        return self.frames[:count]

    def user_frames(self) -> tuple[Frame, ...]:
        return self.frames[len(self.kernel_frames()):]

    def render(self) -> str:
        seconds, fraction = self.time.split(".")
        event = f"{self.event}: " if self.event else ""
        return (f"{self.comm} {self.tid:5d} {seconds:>5}.{fraction}: {event}\n"
                + "".join(frame.render() for frame in self.frames) + "\n")


def _dso_start(line: str) -> int:
    """Index of the "(" that opens the DSO group closing the line, matched by balance from the
    right so a DSO like "/usr/lib/x.so (deleted)" stays whole; -1 when there is none."""
    if not line.endswith(")"):
        return -1
    depth = 0
    for index in range(len(line) - 1, -1, -1):
        if line[index] == ")":
            depth += 1
        elif line[index] == "(":
            depth -= 1
            if depth == 0:
                return index if line[index - 1:index] == " " else -1
    return -1


def parse_frame(line: str, line_number: int = 0) -> Frame:
    """One "\\t<ip> <symbol>[+0x<offset>] (<dso>)" line, without its newline."""
    start = _FRAME_START.match(line)
    dso_start = _dso_start(line)
    if not start or dso_start <= start.end():
        raise PerfScriptFormatError(line_number, line, "a frame '\\t<ip> <symbol>+0x<offset> (<dso>)'")
    symbol_text, dso = line[start.end():dso_start - 1], line[dso_start + 1:-1]
    offset = None
    if symbol_text != UNKNOWN:
        with_offset = _OFFSET.match(symbol_text)
        if not with_offset:
            raise PerfScriptFormatError(line_number, line, "a symbol with '+0x<offset>' or [unknown]")
        symbol_text, offset = with_offset.group("name"), int(with_offset.group("offset"), 16)
    frame = Frame(int(start.group("ip"), 16), symbol_text, offset, dso)
    if frame.render() != line + "\n":
        raise PerfScriptFormatError(line_number, line, f"a line that renders back the same "
                                    f"(it renders as {frame.render()!r})")
    return frame


def parse_header(line: str, line_number: int = 0) -> tuple[str, int, str, str]:
    """(comm, tid, time, event) from "comm  tid  time: " or "comm  tid  time: event: "."""
    match = _HEADER.match(line)
    if match:
        # "%5d": the tid is right-aligned in 5 columns after one separating space; any other
        # spaces before it belong to comm.
        padding_used = 1 + max(0, 5 - len(match.group("tid")))
        if len(match.group("pad")) >= padding_used:
            comm = match.group("comm") + match.group("pad")[:len(match.group("pad")) - padding_used]
            comm_tid_time = (comm, int(match.group("tid")), match.group("time"))
            event = match.group("event") or ""
            if Sample(*comm_tid_time, (), event).render().split("\n", 1)[0] == line:
                return (*comm_tid_time, event)
    raise PerfScriptFormatError(line_number, line, "a sample header 'comm tid seconds.micros: '")


def parse(text: str) -> list[Sample]:
    """Every sample in the output, in order. Raises PerfScriptFormatError on anything else."""
    samples: list[Sample] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()   # the final newline
    index = 0
    while index < len(lines):
        comm, tid, time, event = parse_header(lines[index], index + 1)
        index += 1
        frames = []
        while index < len(lines) and lines[index] != "":
            frames.append(parse_frame(lines[index], index + 1))
            index += 1
        if index == len(lines):
            raise PerfScriptFormatError(index, lines[index - 1], "a blank line ending the sample")
        index += 1
        samples.append(Sample(comm, tid, time, tuple(frames), event))
    return samples


def render(samples: list[Sample] | tuple[Sample, ...]) -> str:
    return "".join(sample.render() for sample in samples)
