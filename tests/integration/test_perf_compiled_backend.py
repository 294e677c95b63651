"""The compiled backend on real recordings: once `fastunwind compile --from REC` has built every
module's eh_elf, `fastunwind perf-script --backend compiled` prints exactly what the compact table
backend (and the DWARF interpreter) print, and the compiled tables are what ran."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fastunwind import _core
from fastunwind.perf.data import PerfData
from fastunwind.perf.replay import replay

WORKLOADS = ["c", "python", "hackbench-threads", "hackbench-processes", "compiler"]


def fastunwind(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fastunwind", *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_compiled_backend_prints_what_the_table_backend_prints(workload, perf_recordings):
    data = str(perf_recordings.get(workload).data_file)
    compiled = fastunwind("compile", "--from", data)
    assert compiled.returncode == 0, compiled.stderr
    outputs = {}
    for backend in ("compiled", "table", "dwarf"):
        # the declared CFI alone: the table backend would add synthesized rows (--synth missing) where
        # a module has code without CFI, which the other two do not serve
        result = fastunwind("perf-script", "-i", data, "--backend", backend,
                            *(("--synth", "off") if backend == "table" else ()))
        assert result.returncode == 0, result.stderr
        outputs[backend] = result.stdout
    assert outputs["compiled"] == outputs["table"] == outputs["dwarf"]
    assert outputs["compiled"].count("\n") > 100
    # every module with unwind tables has its eh_elf, and the compiled tables alone give most frames
    perf = PerfData.open(data)
    replayed = replay(perf)
    spaces = replayed.session.spaces
    images = {m.image for s in spaces for m in s.mappings if m.image is not None}
    with_rows = [image for image in images
                 if any(t is not None and t.row_count for t in (image.eh_frame, image.debug_frame))]
    assert with_rows and all(image.compiled is not None for image in with_rows)
    ids = replayed.space_ids.tobytes()
    only = _core.unwind_samples(perf.native, ids, [s.to_core("compiled-only") for s in spaces], 127)
    dwarf = _core.unwind_samples(perf.native, ids, [s.to_core("dwarf") for s in spaces], 127)
    assert len(only[2]) >= 0.5 * len(dwarf[2])
