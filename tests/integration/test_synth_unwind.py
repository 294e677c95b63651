"""Unwinding through synthesized rows (`--synth off|missing|repair`, issue 23): perf recordings of a
program built here that spends its time in assembly without CFI and in functions whose CFI is wrong
(scripts/synth_unwind.py: the faults tests/integration/test_check_seeded.py seeds, and a function
that keeps its frame in rcx across a call as x264's do, each a loop), and a short x264 encode with
Debian's ffmpeg, whose assembly has neither CFI nor symbols.

With `repair` at least 95% of the samples landing in those functions unwind to the outermost frame:
of the seeded program's, of the encode's with its stack's pages present, and of the encode's as it
runs whose walk stays within the stack dump (the others are cut short at a page that was not
present, which perf does not copy past: docs/DESIGN.md). Every sample whose walk used no derived
row has the DWARF backend's frames and outcome, in every mode; and no stack ends `end` short of an
outermost frame. The CLI counts the frames through derived rows (`--stats`, `report --json`), and
the tables are cached per mode."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fastunwind.address_space import ImageCache, ModuleImage, parse_proc_maps
from fastunwind.elf import PF_X, PT_LOAD
from fastunwind.tables import compact
from scripts import record_workloads, synth_unwind

#: seconds of each program: ~100 samples of the seeded one, a few hundred of the encode
SEEDED_SECONDS = 0.3
FFMPEG_SECONDS = 1.0


def _record(directory: Path, name: str, command: list[str], preload: Path | None = None) -> Path:
    problem = record_workloads.perf_problem(directory)
    if problem:
        pytest.skip(problem.message)
    data_file = directory / f"{name}.data"
    synth_unwind.record(command, data_file, preload)
    return data_file


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("synth-unwind")
    program = synth_unwind.build_seeded(directory)
    return program, _record(directory, "seeded", synth_unwind.seeded_command(program, SEEDED_SECONDS))


@pytest.fixture(scope="module")
def seeded_counts(seeded: tuple[Path, Path]) -> dict[str, synth_unwind.ModeCount]:
    return {c.mode: c for c in synth_unwind.analyse(seeded[1])}


def test_repair_unwinds_the_seeded_functions_to_the_outermost_frame(seeded_counts) -> None:
    off, missing, repair = seeded_counts["off"], seeded_counts["missing"], seeded_counts["repair"]
    assert repair.landed >= 20, "too few samples in the seeded functions to judge"
    assert repair.complete_percent >= synth_unwind.REQUIRED_PERCENT, synth_unwind.report("seeded", [off, missing, repair])
    # without synthesized rows the CFI alone (and the frame-pointer guess) loses most of them
    assert off.complete < missing.complete < repair.complete
    assert off.synthesized_frames == off.corrected_frames == off.derived_samples == 0
    assert missing.synthesized_frames > 0 and missing.corrected_frames == 0
    assert repair.corrected_frames > 0


def test_frames_identical_where_no_derived_row_is_used_and_no_false_end(seeded_counts) -> None:
    for count in seeded_counts.values():
        assert count.differing == 0, count
        assert count.mode == "off" or count.false_ends == 0, count


def test_stats_and_report_json_count_the_frames_through_derived_rows(seeded, seeded_counts, fastunwind_cli) -> None:
    _program, data_file = seeded
    repair = seeded_counts["repair"]
    ran = fastunwind_cli(["perf-script", "-i", str(data_file), "--stats", "--synth", "repair"])
    assert ran.returncode == 0, ran.stderr
    assert (f"{repair.synthesized_frames} frames through synthesized rows, {repair.corrected_frames} through "
            f"corrected rows, in {repair.derived_samples} samples").encode() in b" ".join(ran.stdout.split())
    ran = fastunwind_cli(["report", "-i", str(data_file), "--json", "--synth", "repair"])
    assert ran.returncode == 0, ran.stderr
    synth = json.loads(ran.stdout)["synth"]
    assert synth == {"mode": "repair", "synthesized_frames": repair.synthesized_frames,
                     "corrected_frames": repair.corrected_frames, "samples": repair.derived_samples,
                     "complete_samples": synth["complete_samples"]}
    assert synth["complete_samples"] >= repair.complete
    ran = fastunwind_cli(["report", "-i", str(data_file), "--json", "--synth", "off"])
    assert "synth" not in json.loads(ran.stdout)


def test_default_is_missing_and_dwarf_backend_refuses_synthesized_rows(seeded, seeded_counts, fastunwind_cli) -> None:
    _program, data_file = seeded
    ran = fastunwind_cli(["perf-script", "-i", str(data_file), "--stats"])
    assert f"synthesized rows (missing): {seeded_counts['missing'].synthesized_frames} frames".encode() in \
        b" ".join(ran.stdout.split())
    ran = fastunwind_cli(["perf-script", "-i", str(data_file), "--backend", "dwarf", "--stats"])
    assert ran.returncode == 0 and b"synthesized rows" not in ran.stdout
    ran = fastunwind_cli(["perf-script", "-i", str(data_file), "--backend", "dwarf", "--synth", "repair"])
    assert ran.returncode == 2 and b"compact tables" in ran.stderr


def test_synthesized_tables_are_cached_by_build_id_mode_and_version(seeded, tmp_path) -> None:
    program, _data_file = seeded
    image = ModuleImage.load(str(program))
    paths = {mode: compact.cache_path(image, str(tmp_path), mode) for mode in compact.SYNTH_MODES}
    assert len(set(paths.values())) == 3
    assert paths["repair"].endswith(f".synth-repair-v{compact._core.COMPACT_SYNTH_VERSION}.fut")
    built = compact.load(image, str(tmp_path), synth="repair")
    assert built is not None and compact.source(image, "repair") == "built"
    assert built.origin_rows[compact._core.COMPACT_ORIGIN_CORRECTED] > 0
    assert built.origin_rows[compact._core.COMPACT_ORIGIN_SYNTHESIZED] > 0
    assert built.synth == compact.synth_value("repair")
    again = ModuleImage.load(str(program))
    cached = compact.load(again, str(tmp_path), synth="repair")
    assert cached is not None and compact.source(again, "repair") == "cache"
    assert cached.origin_rows == built.origin_rows
    # a table of another mode under this mode's name is not taken for it
    os.replace(compact.cache_path(again, str(tmp_path), "repair"), paths["missing"])
    third = ModuleImage.load(str(program))
    assert compact.load(third, str(tmp_path), synth="missing") is not None
    assert compact.source(third, "missing") == "built"
    assert compact.load(third, str(tmp_path), synth="off").origin_rows[1:] == (0, 0)


def test_the_process_entry_code_still_ends_stacks_with_synthesized_rows() -> None:
    """ld.so's _start is code without CFI (a synthesized row covers it with --synth missing); the
    entry code must still be found from the declared rows alone, so that its rbp-0 mark ends a
    stack rather than a synthesized row reading argc as a return address."""
    ld_so = "/lib64/ld-linux-x86-64.so.2"
    image = ImageCache().get(ld_so)
    assert image is not None
    code = next(s for s in image.elf.segments if s.type == PT_LOAD and s.flags & PF_X)
    start = 0x7f0000000000 + code.vaddr - code.vaddr % 4096
    maps = f"{start:x}-{start + code.memsz + 4096:x} r-xp {code.offset - code.offset % 4096:08x} 00:00 0 {ld_so}\n"
    space = parse_proc_maps(maps, ImageCache())
    bias = space.mappings[0].bias
    synthesized = compact.for_image(space.mappings[0].image, "missing")
    assert synthesized is not None and synthesized.origin_rows[compact._core.COMPACT_ORIGIN_SYNTHESIZED] > 0
    row = synthesized.lookup(image.elf.entry)
    assert row is not None and synthesized.rule(row[1])["origin"] == compact._core.COMPACT_ORIGIN_SYNTHESIZED
    for mode in compact.SYNTH_MODES:
        assert space.to_core("auto", mode).step_source(bias + image.elf.entry) == "entry_code", mode


@pytest.mark.skipif(not shutil.which("ffmpeg"), reason="ffmpeg is not installed (make setup installs it)")
@pytest.mark.parametrize("prefaulted", [False, True], ids=["as-it-runs", "stack-present"])
def test_x264_encode(tmp_path, prefaulted: bool) -> None:
    """A short encode: x264's assembly unwinds through synthesized rows to the outermost frame, and
    nothing else changes. As it runs, the walks that end `truncated` are those whose dump perf cut
    at a page that was not present; with the stack's pages present first, none is cut. (`make
    synth-unwind` records a longer one and prints the figures of docs/BENCHMARKS.md.)"""
    preload = synth_unwind.build_stack_prefault(tmp_path) if prefaulted else None
    data_file = _record(tmp_path, "ffmpeg-x264", synth_unwind.ffmpeg_command(tmp_path, FFMPEG_SECONDS), preload)
    counts = {c.mode: c for c in synth_unwind.analyse(data_file, ("off", "repair"))}  # each mode's tables: ~5 s
    off, repair = counts["off"], counts["repair"]
    table = synth_unwind.report("ffmpeg-x264", [off, repair])
    assert repair.landed >= 20, f"too few samples in x264's assembly to judge\n{table}"
    assert repair.synthesized_frames > 0 and off.complete_percent < 35, table
    assert repair.landed_outcomes["truncated"] == repair.cut_at_absent_page, table
    figure = repair.complete_percent if prefaulted else repair.within_dump_percent
    assert figure >= synth_unwind.REQUIRED_PERCENT, table
    for count in counts.values():
        assert count.differing == 0, count
        assert count.mode == "off" or count.false_ends == 0, count
