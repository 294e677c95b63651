"""`perf record --call-graph dwarf` driven through a pipe (`-o -`: perf's pipe-mode perf.data,
whose header and features arrive as records), so that the recording is unwound as its samples
arrive and no stack dump is written to disk (`fastunwind record`).

perf's failures are explained in one line: perf missing, or not allowed to record
(kernel.perf_event_paranoid: its value and the sysctl that allows it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence

from fastunwind.errors import FastunwindError

#: what a failure to record looks like in perf's error text
_NOT_PERMITTED = re.compile(r"perf_event_paranoid|Permission denied|No permission|EACCES|EPERM|not permitted",
                            re.IGNORECASE)
PARANOID_PATH = "/proc/sys/kernel/perf_event_paranoid"


class RecordError(FastunwindError):
    """perf cannot record here (missing, not permitted, or failed); the message says how to fix it."""


def paranoid_level() -> int | None:
    try:
        with open(PARANOID_PATH) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def perf_record_command(*, frequency: int, event: str, pid: str | None, command: Sequence[str]) -> list[str]:
    """The perf record command line writing pipe-mode perf.data to standard output (`pid`: one or
    several, comma-separated, as perf record -p takes them)."""
    target = ["-p", str(pid)] if pid is not None else ["--", *command]
    return ["perf", "record", "-q", "-e", event, "-F", str(frequency), "--call-graph", "dwarf", "-o", "-", *target]


def explain_failure(status: int, perf_said: str) -> str:
    """One line on why perf record ended with `status`, from what it wrote on stderr."""
    first = next((line.strip() for line in perf_said.splitlines() if line.strip()), "(nothing)")
    if _NOT_PERMITTED.search(perf_said):
        return (f"perf may not record here (kernel.perf_event_paranoid = {paranoid_level()}, uid {os.getuid()}): "
                f"allow it with `sudo sysctl kernel.perf_event_paranoid=1` (or run as root); perf said: {first}")
    return f"perf record failed (exit status {status}): {first}"


class PerfRecording:
    """A running `perf record -o -`: `path` names the pipe its recording comes through (/dev/fd/N,
    for PerfData.open_stream). While it runs, Ctrl-C is perf's to act on (it stops the profiled
    command, or detaches from the process, and ends its stream cleanly): a SIGINT this process gets
    is passed on to perf at once (through the signal wakeup fd, read by a thread: the main thread
    may be inside a C call reading the pipe) and the output is still written. Until finish()."""

    def __init__(self, argv: list[str]) -> None:
        if shutil.which(argv[0]) is None:
            raise RecordError("perf is not installed (Debian: apt-get install linux-perf)")
        self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self._process.stdout is not None and self._process.stderr is not None
        self.path = f"/dev/fd/{self._process.stdout.fileno()}"
        self._errors: list[bytes] = []
        self._stderr = threading.Thread(target=self._read_errors, name="perf-stderr", daemon=True)
        self._stderr.start()
        self._wakeup_read, self._wakeup_write = os.pipe()
        os.set_blocking(self._wakeup_write, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._wakeup_write)
        self._previous = signal.signal(signal.SIGINT, lambda number, frame: None)
        self._forwarder = threading.Thread(target=self._forward_interrupts, name="perf-sigint", daemon=True)
        self._forwarder.start()

    def _forward_interrupts(self) -> None:
        while signals := os.read(self._wakeup_read, 64):  # b"": the write end closed by finish()
            if signal.SIGINT in signals and self._process.poll() is None:
                self._process.send_signal(signal.SIGINT)

    def _read_errors(self) -> None:
        stream = self._process.stderr
        assert stream is not None
        for line in stream:
            self._errors.append(line)

    def finish(self) -> None:
        """Wait for perf, restore Ctrl-C; RecordError if perf failed (why, in one line)."""
        try:
            status = self._process.wait()
        finally:
            signal.signal(signal.SIGINT, self._previous)
            signal.set_wakeup_fd(self._previous_wakeup)
            os.close(self._wakeup_write)
            self._forwarder.join(timeout=5)
            os.close(self._wakeup_read)
            if self._process.stdout is not None:
                self._process.stdout.close()
        self._stderr.join(timeout=5)
        # perf ends with the status of a profiled command killed by Ctrl-C: not a failure of perf's
        if status in (0, -signal.SIGINT, 128 + signal.SIGINT):
            return
        raise RecordError(explain_failure(status, b"".join(self._errors).decode(errors="replace")))

    def stop(self) -> None:
        """Stop perf (after a failure on our side), as Ctrl-C would."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
        try:
            self.finish()
        except RecordError:
            pass
