"""`backtrace -p` and `core --synth` on the seeded program of test_synth_seeded (a hand-written
function without CFI calling `leaf`, which stops the process): with `--synth off` the stack stops
at the function without CFI; with `missing` (the default) the walk goes through it to `_start`, at
the PCs eu-stack finds when given the synthesized debug file (without it eu-stack stops there too).
The frame whose step used the synthesized rows is marked ("derived"). The launcher's output is the
Python path's, byte for byte, for both verbs and every mode."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fastunwind import synth
from tests.integration.test_launcher_native import launch
from tests.integration.test_synth_seeded import build_program, wait_stopped
from tests.support import cores

pytestmark = pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("eu-stack")),
                                reason="needs gcc and eu-stack (make test installs them)")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_program(tmp_path_factory.mktemp("seeded"))


@pytest.fixture(scope="module")
def stopped(seeded: Path) -> Iterator[int]:
    """The seeded program, stopped in `leaf` called from `no_cfi_frame` (no CFI)."""
    process = subprocess.Popen([str(seeded), "stop"], stdout=subprocess.DEVNULL)
    try:
        wait_stopped(process)  # type: ignore[arg-type]
        yield process.pid
    finally:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def core_file(stopped: int, tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return cores.gcore_of(stopped, tmp_path_factory.mktemp("core") / "core")
    except cores.CoreUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def debug_directory(seeded: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A debuginfo path holding the seeded program's synthesized (`missing`) debug file."""
    directory = tmp_path_factory.mktemp("debug")
    synth.write_debug_file(synth.synthesize(str(seeded), "missing"), str(directory))
    return directory


def same_on_both_paths(args: list[str], cache: Path) -> dict[str, object]:
    """The Python path's JSON (run first: it fills the cache) and the launcher's (required native),
    byte-identical with the same status; the document."""
    python = launch(args, cache, native="0")
    native = launch(args, cache, native="require")
    assert (native.returncode, native.stdout, native.stderr) == (python.returncode, python.stdout, python.stderr)
    document: dict[str, object] = json.loads(python.stdout)
    return document


def main_thread(document: dict[str, object]) -> dict[str, object]:
    threads = document["threads"]
    assert isinstance(threads, list) and len(threads) == 1, threads
    thread: dict[str, object] = threads[0]
    return thread


def symbols(thread: dict[str, object]) -> list[object]:
    frames = thread["frames"]
    assert isinstance(frames, list)
    return [frame["symbol"] for frame in frames]


def pcs(thread: dict[str, object]) -> list[int]:
    frames = thread["frames"]
    assert isinstance(frames, list)
    return [frame["address"] for frame in frames]


def derived(thread: dict[str, object]) -> list[object]:
    frames = thread["frames"]
    assert isinstance(frames, list)
    return [frame.get("derived") for frame in frames]


def assert_stops_at_the_function_without_cfi(thread: dict[str, object]) -> None:
    names = symbols(thread)
    assert thread["outcome"] != "end", thread
    assert "no_cfi_frame" in names and "main" not in names, names
    assert derived(thread) == [None] * len(names)


def assert_walks_through_it(thread: dict[str, object], eu_stack: list[int]) -> None:
    names = symbols(thread)
    assert thread["outcome"] == "end", thread
    at = names.index("leaf")
    assert names[at + 1:at + 3] == ["no_cfi_frame", "main"] and names[-1] == "_start", names
    assert pcs(thread) == eu_stack
    # marked: the frame whose step to its caller used the synthesized rows, and no other
    assert derived(thread) == [("synthesized" if name == "no_cfi_frame" else None) for name in names]


@pytest.mark.parametrize("mode", ["off", "missing", "repair", None])
def test_live(stopped: int, mode: str | None, debug_directory: Path, tmp_path: Path) -> None:
    args = ["backtrace", "-p", str(stopped), "--json", *(["--synth", mode] if mode else [])]
    thread = main_thread(same_on_both_paths(args, tmp_path / "cache"))
    if mode == "off":
        without = cores.eu_stack_pcs(["-p", str(stopped), f"--debuginfo-path={tmp_path}"])[stopped]
        assert_stops_at_the_function_without_cfi(thread)
        assert pcs(thread) == without[:len(pcs(thread))]
    else:
        with_file = cores.eu_stack_pcs(["-p", str(stopped), f"--debuginfo-path={debug_directory}:/usr/lib/debug"])
        assert_walks_through_it(thread, with_file[stopped])


@pytest.mark.parametrize("mode", ["off", "missing", None])
def test_core(core_file: Path, seeded: Path, mode: str | None, debug_directory: Path, tmp_path: Path) -> None:
    args = ["core", str(core_file), "--json", *(["--synth", mode] if mode else [])]
    document = same_on_both_paths(args, tmp_path / "cache") if mode != "off" else None
    if document is None:  # a stack that did not reach its outermost frame: exit status 2 on both paths
        python = launch(args, tmp_path / "cache", native="0")
        native = launch(args, tmp_path / "cache", native="require")
        assert (native.returncode, native.stdout, native.stderr) == (python.returncode, python.stdout, python.stderr)
        assert python.returncode == 2, python.stderr
        assert_stops_at_the_function_without_cfi(main_thread(json.loads(python.stdout)))
        return
    with_file = cores.eu_stack_pcs([*cores.eu_stack_core_arguments(core_file, seeded),
                                    f"--debuginfo-path={debug_directory}:/usr/lib/debug"])
    (tid,) = with_file
    assert_walks_through_it(main_thread(document), with_file[tid])


def test_the_vdso_copies_get_the_rows_of_the_vdso_file(stopped: int, core_file: Path, tmp_path: Path) -> None:
    """The vDSO is read from the process's memory and from the core, not reopened by path: its
    synthesized view is the one synth gives the same bytes as a file, from either copy."""
    from fastunwind import core, live
    from fastunwind.address_space import VDSO
    from fastunwind.tables import synthesized

    space, _maps = live.address_space(stopped)
    (live_image,) = {m.image for m in space.mappings if m.path == VDSO and m.image is not None}
    with core.open(core_file) as opened:
        (core_image,) = {m.image for m in opened.space.mappings if m.path == VDSO and m.image is not None}
        core_copy = core_image.memory_copy
        core_origins = synthesized.view(core_image, "missing")[1]
    assert live_image.memory_copy is not None and live_image.memory_copy == core_copy
    file = tmp_path / "vdso.so"
    file.write_bytes(live_image.memory_copy)
    expected = bytes(synthesized.ORIGIN_CODES[r.origin] for r in synth.synthesize(str(file), "missing").ranges)
    assert synthesized.view(live_image, "missing")[1] == expected == core_origins
