"""`check` on the system's own libraries: the rows derived from the machine code agree with the CFI
the compilers wrote. Thresholds of issue 23: at least 95% of FDEs decided, and at least 99% of the
instructions of decided FDEs agreeing. Every mismatch seen here on Debian 12's libc is a real CFI
bug (docs/DESIGN.md, "check"); the figures for libLLVM-14 and python3.11 are in docs/BENCHMARKS.md."""

from __future__ import annotations

import os

import pytest

from fastunwind.check import check_file

LIBRARIES = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libm.so.6",
             "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"]


@pytest.mark.parametrize("path", LIBRARIES)
def test_derived_rows_agree_with_the_compilers(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    counts = check_file(path).counts()
    assert counts.decided_percent >= 95.0, counts
    assert counts.agreement_percent >= 99.0, counts


def test_libc_mismatches_are_hand_written_assembly_without_cfi() -> None:
    """glibc's x86_64 mpn routines push rbx and rbp under an FDE of DW_CFA_nop only (the CFA stays
    rsp+8): every mismatch of libc is of that kind (the CFA, found from the first push on)."""
    path = LIBRARIES[0]
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    for verdict in check_file(path).verdicts():
        if verdict.verdict == "mismatch":
            first = verdict.findings[0]
            assert first.what == "cfa" and first.declared == "rsp+8" and first.address == verdict.pc_begin + 1, verdict


def test_threads_give_the_same_report() -> None:
    """-j 2 checks chunks of FDEs on two threads (GIL released): the same report as one thread."""
    path = LIBRARIES[0]
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    assert check_file(path, jobs=2).to_json() == check_file(path, jobs=1).to_json()
