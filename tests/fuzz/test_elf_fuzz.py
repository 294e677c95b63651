"""A short run of the ELF reader's sanitizer fuzz target (`make -C native/fuzz asan-elf`,
native/fuzz/elf_driver.c): ELF32 and ELF64 files built by the driver, libc, ld.so and the driver
itself, with seeded mutants of each, read under ASAN+UBSAN by core/elf_file.c (headers, sections,
segments, notes, debuglink, process entry, bias, debug-file candidates, the build-id of a file's
first page in memory) with what the reader promises checked.

The full run is `make asan-elf` (or `make asan`). FASTUNWIND_ELF_FUZZ_SEED=<seed> repeats a run.
"""
from __future__ import annotations

from pathlib import Path

from tests.support.fuzz_targets import run_target

BUILT = 3000  # with their mutants and MUTATIONS of each real file: a few seconds under ASAN
MUTATIONS = 500


def test_elf_reader_fuzz_target_short_run(tmp_path: Path) -> None:
    output = run_target(tmp_path, "asan-elf", "FASTUNWIND_ELF_FUZZ_SEED", ELF_BUILT=BUILT, ELF_MUTATIONS=MUTATIONS)
    assert "inputs passed" in output, output[-3000:]
