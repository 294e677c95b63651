"""The decoder's fast path (native/core/synth_decode_fast.c) against Zydis on every instruction of
real `.text` sections: wherever it answers, its summary (length, registers written, stores, the
operands the interpreter reads, branch targets) equals Zydis's, and it answers for most of the code
(the point of it). `make test` runs libc and ld.so; `make decode-compare` (FASTUNWIND_DECODE_COMPARE=all)
adds libstdc++, python3.11 and libLLVM-14 (12M instructions)."""

from __future__ import annotations

import os

import pytest

from fastunwind import _core
from fastunwind.elf import ElfFile

SAMPLE = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
ALL = SAMPLE + ["/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/bin/python3.11",
                "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"]
FILES = ALL if os.environ.get("FASTUNWIND_DECODE_COMPARE") == "all" else SAMPLE
#: the share of instructions the fast path must answer: Debian 12's libc 94.6%, ld.so 95.9%,
#: libstdc++ 99.4%, python3.11 99.5%, libLLVM-14 99.7% (the rest: SSE/AVX, lock, string operations)
MIN_FAST_SHARE = 0.90


@pytest.mark.parametrize("path", FILES)
def test_fast_path_agrees_with_zydis_on_text(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    with ElfFile.open(path) as elf:
        text = elf.section(".text")
        assert text is not None
        code = bytes(elf.section_data(text))
    result = _core.compare_decoders(code, text.addr)
    print(f"{path}: {result['fast']} of {result['instructions']} instructions by the fast path")
    assert result["mismatches"] == 0, (
        f"{result['mismatches']} mismatches, the first at 0x{result['first_mismatch']:x}: {result['first_difference']}")
    assert int(result["fast"]) >= MIN_FAST_SHARE * int(result["instructions"]), result
