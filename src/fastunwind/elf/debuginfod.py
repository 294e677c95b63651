"""Debug files fetched from debuginfod servers by build-id, when `DEBUGINFOD_URLS` is set: the
servers' HTTP protocol (debuginfod(8), "WEBAPI": `GET /buildid/<hex>/debuginfo`), asked in the
order the variable lists them (space-separated), the first answer kept.

Fetched files are cached as the debuginfod client caches them, `<cache>/<hex>/debuginfo` under
$DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client (~/.cache/debuginfod_client), so
that elfutils' and gdb's clients and this one share what was fetched. A server that does not have
the file (404) is remembered as such for the run; one that cannot be reached, or answers slower
than DEBUGINFOD_TIMEOUT seconds (default TIMEOUT_SECONDS), costs one line of `failures` and is not
asked again in the run.
"""

from __future__ import annotations

import os
import re
import threading

from fastunwind.cache import write_atomically

#: seconds a server has to answer and send each block (debuginfod-find's default is 90: too long to
#: hold a profile's output back for one missing file)
TIMEOUT_SECONDS = 10.0
#: the largest debug file accepted (libLLVM-14's is ~1 GB)
MAX_BYTES = 4 << 30
#: bytes read at a time
BLOCK_BYTES = 1 << 20
_BUILD_ID = re.compile(r"[0-9a-f]{2,128}")


def server_urls() -> list[str]:
    """The servers of $DEBUGINFOD_URLS, in order (none: debuginfod is not used)."""
    return [url.rstrip("/") for url in os.environ.get("DEBUGINFOD_URLS", "").split() if url]


def cache_root() -> str:
    """The debuginfod client's cache: $DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client."""
    explicit = os.environ.get("DEBUGINFOD_CACHE_PATH")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "debuginfod_client")


def timeout_seconds() -> float:
    try:
        value = float(os.environ.get("DEBUGINFOD_TIMEOUT", TIMEOUT_SECONDS))
    except ValueError:
        return TIMEOUT_SECONDS
    return value if value > 0 else TIMEOUT_SECONDS


class DebuginfodClient:
    """Fetches debug files by build-id from the servers of $DEBUGINFOD_URLS, once per build-id a
    run; thread-safe (symbol tables are made on a worker thread)."""

    def __init__(self, urls: list[str] | None = None) -> None:
        self.urls = server_urls() if urls is None else urls
        #: one line per server given up on, for stderr
        self.failures: list[str] = []
        self._unreachable: set[str] = set()
        self._lock = threading.Lock()

    def debuginfo(self, build_id: str) -> str | None:
        """The path of the debug file of `build_id` (hex): cached, else fetched; None if no server
        has it (or none is set)."""
        if not self.urls or not _BUILD_ID.fullmatch(build_id):
            return None
        path = os.path.join(cache_root(), build_id, "debuginfo")
        if os.path.isfile(path):
            return path
        with self._lock:
            if os.path.isfile(path):
                return path
            for url in self.urls:
                if url not in self._unreachable and self._fetch(url, build_id, path):
                    return path
        return None

    def _fetch(self, url: str, build_id: str, path: str) -> bool:
        import urllib.error
        import urllib.request

        location = f"{url}/buildid/{build_id}/debuginfo"
        try:
            with urllib.request.urlopen(location, timeout=timeout_seconds()) as response:
                chunks, size = [], 0
                while block := response.read(BLOCK_BYTES):
                    size += len(block)
                    if size > MAX_BYTES:
                        raise OSError(f"larger than {MAX_BYTES} bytes")
                    chunks.append(block)
        except urllib.error.HTTPError as error:
            if error.code == 404:  # the server does not have it: ask the next
                return False
            self._give_up(url, location, f"HTTP {error.code} {error.reason}")
            return False
        except (OSError, ValueError) as error:  # URLError, timeouts and resets are OSErrors
            reason = getattr(error, "reason", None) or error
            self._give_up(url, location, str(reason))
            return False
        data = b"".join(chunks)
        if not data.startswith(b"\x7fELF"):
            self._give_up(url, location, "the answer is not an ELF file")
            return False
        write_atomically(path, data)
        return True

    def _give_up(self, url: str, location: str, reason: str) -> None:
        self._unreachable.add(url)
        self.failures.append(f"debuginfod: {location}: {reason} (timeout {timeout_seconds():g} s; "
                             "this server is not asked again in this run)")
