"""The names README.md ("Python API") and docs/BENCHMARKS.md document keep importing and working,
whatever module they moved to: `fastunwind.cfi`, `.walk`, `.elf`, `.errors`, `._core`, `.core`, and the
compatibility names `fastunwind.perf_script`, `fastunwind.eh_elf`, `fastunwind.bench`, which
re-export the modules that hold the code now."""

from __future__ import annotations

import importlib

import pytest

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def test_the_readme_cfi_example_runs() -> None:
    from fastunwind.cfi import UnwindInfo

    info = UnwindInfo.open(LIBC)
    section, fde, row = info.lookup(0x2728F)
    assert section is info.sections[0] and fde is not None
    assert isinstance(row.cfa.describe(), str) and isinstance(row.registers[16].describe(), str)
    eh_frame = info.sections[0]
    first = next(iter(eh_frame.fdes()))
    assert eh_frame.rows(first)
    starts, state_ids = eh_frame.row_arrays()
    assert len(starts) == len(state_ids) > 0
    cfa, registers = eh_frame.state(state_ids[0])
    assert cfa.describe()


def test_walk_elf_errors_and_core_names() -> None:
    from fastunwind import _core, errors, walk
    from fastunwind.elf import ElfFile

    assert callable(walk.unwind_stack)
    walked = walk.unwind_current_thread()
    assert walked.frames and walked.outcome in walk.OUTCOMES
    assert ElfFile.open(LIBC).build_id
    assert _core.evaluate_expression(b"\x77\x08", {7: 0x1000}) == 0x1008  # DW_OP_breg7 (rsp): 8
    for name in ("ElfError", "CfiError", "ExprError", "NoUnwindInfo"):
        assert issubclass(getattr(errors, name), Exception)


def test_the_top_level_stack_api() -> None:
    import fastunwind
    from fastunwind import live, stacks

    assert fastunwind.backtrace is live.backtrace
    thread = fastunwind.unwind_current_thread()
    assert isinstance(thread, stacks.Thread) and thread.complete and thread.frames[0].symbol
    assert issubclass(fastunwind.LiveError, fastunwind.FastunwindError)
    with pytest.raises(AttributeError):
        fastunwind.no_such_name  # noqa: B018


def test_the_core_file_api() -> None:
    import fastunwind.core
    from fastunwind import stacks
    from fastunwind.errors import CoreFileError, FastunwindError

    assert callable(fastunwind.core.open) and issubclass(CoreFileError, FastunwindError)
    for name in ("threads", "snapshot", "problems", "close"):
        assert hasattr(fastunwind.core.CoreFile, name)
    assert "Thread" in vars(stacks) and "ProcessSnapshot" in vars(stacks)


@pytest.mark.parametrize("shim, home, documented", [
    ("fastunwind.perf_script", "fastunwind.perf.script", "unwind_recording"),
    ("fastunwind.eh_elf", "fastunwind.tables.eh_elf", "compile_images"),
    ("fastunwind.bench", "fastunwind.perf.bench", "time_backend"),
])
def test_compatibility_names_re_export_their_home(shim: str, home: str, documented: str) -> None:
    module = importlib.import_module(shim)
    assert getattr(module, documented) is getattr(importlib.import_module(home), documented)
    assert documented in module.__all__
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
