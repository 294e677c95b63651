"""address_space_identity reads /proc/PID/stat, whose command name is any bytes the process chose:
one that is not UTF-8 (another test's hostile process, seen by `record --bpf -a`) is read, not an
error."""

from __future__ import annotations

import subprocess
import sys

from fastunwind.bpf import address_space_identity

NAME = b"\xff\xfe) odd ("  # not UTF-8, and holding the parentheses that enclose it in /proc/PID/stat


def test_a_command_name_of_any_bytes_is_read() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys\n"
                              f"open('/proc/self/comm', 'wb').write({NAME!r})\n"
                              "print(flush=True)\nsys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"
        with open(f"/proc/{child.pid}/comm", "rb") as f:
            assert f.read() == NAME + b"\n"
        start_code, end_code, start_stack, start_brk = address_space_identity(child.pid)
        assert 0 < start_code < end_code and start_stack > 0 and start_brk > 0
    finally:
        child.communicate(b"")
