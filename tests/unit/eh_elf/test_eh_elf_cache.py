"""The eh_elf cache: what is loaded always matches; a truncated, foreign, stale or non-ELF cache
entry is refused with a clear EhElfError and rebuilt; a missing or failing compiler names the file."""

from __future__ import annotations

import os
import shutil

import pytest

from fastunwind import _core
from fastunwind.tables import eh_elf
from fastunwind.address_space import ModuleImage
from fastunwind.errors import EhElfError

SMALL = "/lib/x86_64-linux-gnu/libpthread.so.0"  #: 5 ranges: compiles in ~0.1 s
OTHER = "/usr/bin/hackbench"


@pytest.fixture
def image():
    if not os.path.isfile(SMALL):
        pytest.skip(f"{SMALL} not installed")
    return ModuleImage.load(SMALL)


def build(image, directory, **kwargs):
    (result,) = eh_elf.compile_images([image], directory=str(directory), **kwargs)
    if isinstance(result, Exception):
        raise result
    return result


def test_built_once_then_found_in_the_cache(image, tmp_path):
    first = build(image, tmp_path)
    assert first.source == "built" and os.path.basename(first.target) == image.build_id.hex() + ".so"
    assert first.eh_elf.key == bytes(image.build_id) and first.eh_elf.key_kind == _core.COMPACT_KEY_BUILD_ID
    assert first.eh_elf.abi_version == _core.UNWIND_ABI_VERSION
    assert first.eh_elf.generator_version == eh_elf.GENERATOR_VERSION
    assert first.eh_elf.row_count == image.dwarf_row_count()
    assert build(image, tmp_path).source == "cache"
    assert build(image, tmp_path, force=True).source == "built"
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".build-")], "work directories left"


@pytest.mark.parametrize("damage,message", [
    (lambda path: os.truncate(path, os.path.getsize(path) // 2), "truncated"),
    (lambda path: os.truncate(path, 10), "not an ELF file"),
    (lambda path: open(path, "wb").write(b"#!/bin/sh\necho not a shared object\n" * 10), "not an ELF file"),
    (lambda path: os.truncate(path, 0), "not an ELF file"),
])
def test_a_corrupt_entry_is_refused_and_rebuilt(image, tmp_path, damage, message):
    target = build(image, tmp_path).target
    damage(target)
    with pytest.raises(EhElfError, match=message):
        eh_elf.open_cached(image, target)
    assert eh_elf.load(image, str(tmp_path)) is None
    assert build(image, tmp_path).source == "built"
    assert eh_elf.load(image, str(tmp_path)) is not None


def test_an_entry_built_for_another_file_is_refused(image, tmp_path):
    if not os.path.isfile(OTHER):
        pytest.skip(f"{OTHER} not installed")
    other = build(ModuleImage.load(OTHER), tmp_path)
    shutil.copyfile(other.target, eh_elf.cache_path(image, str(tmp_path)))
    with pytest.raises(EhElfError, match="built for key 1:.*expected 1:" + image.build_id.hex()):
        eh_elf.open_cached(image, eh_elf.cache_path(image, str(tmp_path)))
    assert build(image, tmp_path).source == "built"


def test_another_generator_version_or_other_cfi_sections_are_refused(image, tmp_path, monkeypatch):
    target = build(image, tmp_path).target
    kind, key = image.compact_key()
    with pytest.raises(EhElfError, match=f"generator version {eh_elf.GENERATOR_VERSION}, expected 99"):
        _core.EhElf(target, kind, key, generator_version=99)
    eh_frame_size, debug_frame_size = image.frame_sizes()
    for other in ((eh_frame_size, 12345678), (eh_frame_size + 1, debug_frame_size)):  # a debug file added
        with pytest.raises(EhElfError, match="other CFI sections"):
            _core.EhElf(target, kind, key, generator_version=eh_elf.GENERATOR_VERSION, frame_sizes=other)
    assert _core.EhElf(target, kind, key, generator_version=eh_elf.GENERATOR_VERSION,
                       frame_sizes=image.frame_sizes()).row_count == image.dwarf_row_count()
    monkeypatch.setattr(eh_elf, "GENERATOR_VERSION", eh_elf.GENERATOR_VERSION + 1)
    assert eh_elf.load(image, str(tmp_path)) is None
    rebuilt = build(image, tmp_path)
    assert rebuilt.source == "built" and rebuilt.eh_elf.generator_version == eh_elf.GENERATOR_VERSION


def test_another_abi_version_is_refused(image, tmp_path, monkeypatch):
    """An object whose fu_eh_elf_info says another ABI: the generated main.c, edited."""
    generated = eh_elf.write_sources(image, str(tmp_path / "src"))
    main = tmp_path / "src" / "main.c"
    main.write_text(main.read_text().replace("    FU_UNWIND_ABI_VERSION,", "    FU_UNWIND_ABI_VERSION + 7,"))
    objects = []
    for name in generated.sources:
        eh_elf._run(eh_elf.compiler() + eh_elf._compile_flags() + ["-c", name, "-o", name + ".o"], name,
                    str(tmp_path / "src"))
        objects.append(name + ".o")
    target = eh_elf.cache_path(image, str(tmp_path))
    eh_elf._run(eh_elf.compiler() + ["-shared", "-o", target, *objects], "link", str(tmp_path / "src"))
    with pytest.raises(EhElfError, match=f"ABI version {_core.UNWIND_ABI_VERSION + 7}, this fastunwind uses"):
        eh_elf.open_cached(image, target)
    assert build(image, tmp_path).source == "built"


def test_a_shared_object_without_the_entry_points_is_refused(image, tmp_path):
    (tmp_path / "empty.c").write_text("int nothing_here(void) { return 0; }\n")
    target = eh_elf.cache_path(image, str(tmp_path))
    eh_elf._run(eh_elf.compiler() + ["-shared", "-fPIC", "-o", target, "empty.c"], "empty", str(tmp_path))
    with pytest.raises(EhElfError, match="no fu_eh_elf_info symbol"):
        eh_elf.open_cached(image, target)


def test_a_missing_compiler_names_the_file_and_the_compiler(image, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    (result,) = eh_elf.compile_images([image], directory=str(tmp_path))
    assert isinstance(result, EhElfError)
    assert SMALL in str(result) and "cannot run the C compiler '/nonexistent/cc'" in str(result)
    assert not os.path.exists(eh_elf.cache_path(image, str(tmp_path)))


def test_a_failing_compiler_shows_its_output(image, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "gcc -include /nonexistent/forced.h")
    (result,) = eh_elf.compile_images([image], directory=str(tmp_path))
    assert isinstance(result, EhElfError)
    assert SMALL in str(result) and "failed with status" in str(result) and "error" in str(result)


def test_ehelf_needs_the_generator_version(image, tmp_path):
    target = build(image, tmp_path).target
    with pytest.raises(TypeError, match="generator_version"):
        _core.EhElf(target, *image.compact_key())
