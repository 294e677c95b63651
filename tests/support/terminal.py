"""Running fastunwind with its stderr on a pseudo-terminal, to see what a person sees there
(progress bars, colour)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from tests.support.paths import SRC


def on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, bytes]:
    """Runs fastunwind with stderr on a pseudo-terminal (progress bars for any input size); what the
    terminal showed."""
    import pty

    script = ("import sys; import fastunwind.commands as commands; commands.LONG_INPUT_BYTES = 0; "
              "from fastunwind.cli import main; sys.exit(main(sys.argv[1:]))")
    master, slave = pty.openpty()
    shown: list[bytes] = []

    def read() -> None:  # drained as it comes: a full terminal buffer would block the command
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC), "TERM": "xterm-256color", "COLUMNS": "120",
                   **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}, **env}
    try:
        result = subprocess.run([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=slave,
                                timeout=600, env=environment)
    finally:
        os.close(slave)
        reader.join(timeout=60)
        os.close(master)
    return result, b"".join(shown)
