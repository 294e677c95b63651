"""The vDSO's unwind tables come from perf's build-id cache (where `perf record` saves the vDSO it
saw), checked by build-id: a different file under that name is never used."""

from __future__ import annotations

import os
import shutil

import pytest

from fastunwind.address_space import ImageCache
from fastunwind.elf.build_id_cache import build_id_cache_file
from fastunwind.perf.data import PerfData
from fastunwind.perf.replay import VDSO, replay


def recorded_vdso(perf: PerfData) -> str:
    build_id = next((b.build_id for b in perf.build_ids if b.filename == VDSO), None)
    if build_id is None:
        pytest.skip("the recording lists no [vdso] build-id (perf record saves one when the vDSO is mapped)")
    return build_id


def test_the_vdso_mapping_gets_the_cached_vdso(perf_recordings):
    perf = PerfData.open(str(perf_recordings.get("c").data_file))
    build_id = recorded_vdso(perf)
    cached = build_id_cache_file(VDSO, build_id, "vdso")
    if not os.path.isfile(cached):
        pytest.skip(f"perf's build-id cache has no {cached}")
    mappings = [m for m in replay(perf).session.mappings if m.path == VDSO]
    assert mappings and all(m.image is not None and m.image.path == cached for m in mappings)
    image = mappings[0].image
    assert image.build_id.hex() == build_id[: 2 * len(image.build_id)]
    assert image.eh_frame is not None and image.eh_frame.row_count > 0  # the vDSO has CFI for its functions
    assert mappings[0].bias == mappings[0].start  # linked at 0, mapped whole


def test_another_file_under_the_vdso_build_id_is_not_used(perf_recordings, tmp_path, monkeypatch):
    perf = PerfData.open(str(perf_recordings.get("c").data_file))
    build_id = recorded_vdso(perf)
    impostor = tmp_path / VDSO / build_id / "vdso"
    impostor.parent.mkdir(parents=True)
    shutil.copy("/bin/true", impostor)  # an ELF with CFI and another build-id
    monkeypatch.setenv("PERF_BUILDID_DIR", str(tmp_path))
    assert build_id_cache_file(VDSO, build_id, "vdso") == str(impostor)
    mappings = [m for m in replay(perf, ImageCache()).session.mappings if m.path == VDSO]
    assert mappings and all(m.image is None for m in mappings)
