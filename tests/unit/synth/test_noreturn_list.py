"""check.py's list of functions that never return: a call to one ends a path, so a function that
can return must not be on it (the code after the call would go unchecked)."""

from __future__ import annotations

from fastunwind.check import _is_noreturn


def test_libc_message_returns_without_do_abort() -> None:
    # glibc 2.36 sysdeps/posix/libc_fatal.c: abort () only `if ((action & do_abort))`
    assert not _is_noreturn("__libc_message")
    assert _is_noreturn("__libc_fatal") and _is_noreturn("abort@GLIBC_2.2.5")
