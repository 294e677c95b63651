"""perf-script's symbol tables made ahead on a worker thread (perf/script.py _SymbolTables): each
made once whoever asks first, the worker's queued maker used even when the main thread asks before
the worker starts it, a maker's error raised to the asker."""
from __future__ import annotations

import threading

import pytest

from fastunwind.perf import script
from fastunwind.perf.script import _SymbolTables


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch):
    monkeypatch.setattr(script, "PREFETCH_CPUS", 2)


def test_each_table_is_made_once_by_the_worker_or_the_asker():
    tables = _SymbolTables()
    made: list[str] = []
    release = threading.Event()

    def maker(key: str, wait: bool = False):
        def make():
            if wait:
                release.wait(10)
            made.append(key)
            return key  # stands for a SymbolTable
        return make

    tables.prefetch("slow", maker("slow", wait=True))  # keeps the worker busy
    tables.prefetch("queued", maker("queued"))
    assert tables.get("queued", maker("asker's")) == "queued"  # the queued maker, run by the asker
    release.set()
    assert tables.get("slow", maker("asker's")) == "slow"  # waited for
    assert tables.get("new", maker("new")) == "new"
    tables.prefetch("new", maker("again"))
    assert tables.get("new", maker("again")) == "new"
    assert sorted(made) == ["new", "queued", "slow"]


def test_an_error_is_raised_to_the_asker():
    tables = _SymbolTables()

    def broken():
        raise OSError("unreadable")

    tables.prefetch("broken", broken)
    with pytest.raises(OSError, match="unreadable"):
        tables.get("broken", broken)


def test_without_a_second_cpu_nothing_is_made_ahead(monkeypatch):
    monkeypatch.setattr(script, "PREFETCH_CPUS", 1)
    tables = _SymbolTables()
    tables.prefetch("x", lambda: pytest.fail("made ahead on one CPU"))
    assert tables.get("x", lambda: None) is None
