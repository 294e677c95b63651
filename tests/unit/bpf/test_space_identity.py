"""address_space_identity: the fields of /proc/PID/stat that identify an address space, or all zero
(not checked) where the kernel hides them, as it does from a reader without ptrace access (start_code
and end_code shown as 1, start_stack and start_brk as 0), or where the process has none."""

from __future__ import annotations

import io
import os
from typing import Any

import pytest

from fastunwind import bpf


def _stat(start_code: int, end_code: int, start_stack: int, start_brk: int) -> str:
    # fields 1 and 2, then 3 .. 52 with fields 26, 27, 28 and 47 set (a comm with a space and a ')')
    fields = ["0"] * 50
    fields[0] = "R"
    fields[26 - 3], fields[27 - 3], fields[28 - 3], fields[47 - 3] = map(str, (start_code, end_code, start_stack,
                                                                             start_brk))
    return "42 (a) b) " + " ".join(fields) + "\n"


def _with_stat(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    def fake_open(path: str, *args: Any, **kwargs: Any) -> io.StringIO:
        assert path == "/proc/42/stat"
        return io.StringIO(text)
    monkeypatch.setattr(bpf, "open", fake_open, raising=False)


def test_shown_fields_are_the_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_stat(monkeypatch, _stat(0x400000, 0x401000, 0x7FFC0000, 0x405000))
    assert bpf.address_space_identity(42) == (0x400000, 0x401000, 0x7FFC0000, 0x405000)


def test_hidden_fields_are_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_stat(monkeypatch, _stat(1, 1, 0, 0))
    assert bpf.address_space_identity(42) == (0, 0, 0, 0)


def test_no_address_space_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_stat(monkeypatch, _stat(0, 0, 0, 0))
    assert bpf.address_space_identity(42) == (0, 0, 0, 0)


def test_this_process_is_shown() -> None:
    start_code, end_code, start_stack, start_brk = bpf.address_space_identity(os.getpid())
    assert start_stack and end_code >= start_code
