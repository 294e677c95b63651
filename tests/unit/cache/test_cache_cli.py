"""`fastunwind cache`: lists the caches, prunes least recently used entries to a size, clears them;
an entry removed is rebuilt when next needed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from fastunwind import cache
from fastunwind.address_space import ModuleImage


def run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "fastunwind", "cache", *args], capture_output=True, text=True,
                          env=env)


def make_entry(tmp_path, kind: str, name: str, size: int, age_seconds: float) -> str:
    directory = tmp_path / "fastunwind" / kind
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name + cache.KINDS[kind])
    path.write_bytes(bytes(size))
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return str(path)


def test_list_prune_to_a_size_oldest_first_then_clear(tmp_path):
    old = make_entry(tmp_path, "compact", "aa", 4000, 300)
    middle = make_entry(tmp_path, "eh_elf", "bb", 3000, 200)
    new = make_entry(tmp_path, "compact", "cc", 2000, 100)
    stale_temporary = tmp_path / "fastunwind" / "compact" / "dd.fut.x1.tmp"
    stale_temporary.write_bytes(b"half")
    then = time.time() - 2 * cache.STALE_TEMPORARY_SECONDS
    os.utime(stale_temporary, (then, then))
    listed = run(tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "3 entries, 8.8 KiB" in listed.stdout and re.search(r"^  compact +2 entries", listed.stdout, re.M)
    # the counts in one column, whatever the kinds' names
    assert len({line.index(" entries") for line in listed.stdout.splitlines()[1:]}) == 1
    pruned = run(tmp_path, "--max-size", "4K")  # 9,000 bytes: the two oldest go
    assert pruned.returncode == 0, pruned.stderr
    assert "removed 2 entries" in pruned.stdout
    assert not os.path.exists(old) and not os.path.exists(middle) and os.path.exists(new)
    cleared = run(tmp_path, "--clear")
    assert "removed 1 entries" in cleared.stdout and "0 entries, 0 B" in cleared.stdout
    assert not os.path.exists(new) and not stale_temporary.exists()


def test_a_bad_size_is_refused(tmp_path):
    result = run(tmp_path, "--max-size", "lots")
    assert result.returncode == 1 and "--max-size 'lots': a size like 500M" in result.stderr


def test_a_removed_compact_table_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = ModuleImage.load("/bin/true")
    assert first.compact is not None and first.compact_source == "built"
    assert [e.kind for e in cache.entries()] == ["compact"]
    assert len(cache.clear()) == 1
    again = ModuleImage.load("/bin/true")
    assert again.compact is not None and again.compact_source == "built"
    third = ModuleImage.load("/bin/true")
    assert third.compact is not None and third.compact_source == "cache"
