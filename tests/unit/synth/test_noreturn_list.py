"""The C core's list of functions that never return (core/check_scope.c): a call to one ends a path,
so a function that can return must not be on it (the code after the call would go unchecked)."""

from __future__ import annotations

from fastunwind import _core


def test_libc_message_returns_without_do_abort() -> None:
    # glibc 2.36 sysdeps/posix/libc_fatal.c: abort () only `if ((action & do_abort))`
    assert not _core.check_noreturn_name("__libc_message")
    assert _core.check_noreturn_name("__libc_fatal") and _core.check_noreturn_name("abort@GLIBC_2.2.5")


def test_patterns_and_their_near_misses() -> None:
    # libstdc++'s std::__throw_* helpers: _ZSt, at least one digit, __throw_
    assert _core.check_noreturn_name("_ZSt20__throw_length_errorPKc")
    assert not _core.check_noreturn_name("_ZSt__throw_length_errorPKc")
    assert _core.check_noreturn_name("_ZN4llvm18report_fatal_errorEPKcb")
    assert not _core.check_noreturn_name("abor") and not _core.check_noreturn_name("aborts")
    assert not _core.check_noreturn_name("")
