"""Real recordings the DWARF path does not cover, against perf 6.1's `perf script`, sample by sample:

- cut short: `perf record` killed with SIGKILL (by `kill -9` and by `timeout -s KILL`), and `head -c`
  copies of a whole recording cut in the header, in the attrs, inside a sample and in the feature
  sections. perf 6.1 warns on a killed recording ("data size field is 0 ... Was the 'perf record'
  command properly terminated?") and then processes nothing (its reader takes the data size as
  given) and dies of SIGBUS on a copy cut inside its data (it maps past the file's end); so the
  oracle is perf script on a repaired copy: data size set to the complete records, feature bits
  cleared, which perf reads to the end. We must print the same samples, and one note on stderr.
- without user stacks: `perf record -g` (frame pointers: the kernel's callchain) and a recording
  without a call graph (the sampled IP alone), which we print from the record as perf script does;
  `--call-graph lbr`, where the PMU allows it.
"""
from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scripts import record_workloads
from tests.support.paths import SRC
from tests.support.perf_compare import compare
from tests.support.perf_script_format import parse

CLI = [sys.executable, "-m", "fastunwind", "perf-script"]
DATA_OFFSET_FIELD, DATA_SIZE_FIELD, FEATURES_FIELD = 0x28, 0x30, 0x48  # struct perf_file_header
#: the share of samples whose user frames must equal perf's (-g: the exec'd sample in a process that
#: just called execve is replayed in the new image by our replay, in the old one by perf)
AGREEMENT_PERCENT = 99.0


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
           **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)


def perf_script(data: Path) -> str:
    result = subprocess.run(record_workloads.perf_script_command(data), capture_output=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-500:]
    return result.stdout.decode(errors="surrogateescape")


def repaired_copy(cut: Path, out: Path) -> int:
    """`cut` with the header's data size set to its complete records and no features: what perf
    reads to the end. Returns the number of complete records. An independent walk of the record
    headers (u16 size at +6), not fastunwind's reader."""
    data = bytearray(cut.read_bytes())
    data_offset = struct.unpack_from("<Q", data, DATA_OFFSET_FIELD)[0]
    pos, records = data_offset, 0
    while pos + 8 <= len(data):
        size = struct.unpack_from("<H", data, pos + 6)[0]
        if size < 8 or pos + size > len(data):
            break
        pos += size
        records += 1
    struct.pack_into("<Q", data, DATA_SIZE_FIELD, pos - data_offset)
    struct.pack_into("<4Q", data, FEATURES_FIELD, 0, 0, 0, 0)
    out.write_bytes(bytes(data[:pos]))
    return records


def record(tmp_path: Path, name: str, perf_args: list[str], command: list[str], kill_after: float | None = None,
           timeout_kill: float | None = None) -> Path:
    data = tmp_path / f"{name}.data"
    argv = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "1000", *perf_args, "-o", str(data), "--", *command]
    if timeout_kill is not None:
        argv = ["timeout", "-s", "KILL", str(timeout_kill), *argv]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(process.pid, signal.SIGKILL)
    _, stderr = process.communicate(timeout=60)
    if not data.exists() or data.stat().st_size == 0:
        pytest.skip(f"perf record {' '.join(perf_args)} did not record here: {stderr.decode(errors='replace')[:300]}")
    if kill_after is None and timeout_kill is None and process.returncode != 0:
        pytest.skip(f"perf record {' '.join(perf_args)} failed here: {stderr.decode(errors='replace')[:300]}")
    return data


@pytest.fixture(scope="module")
def workloads(perf_recordings) -> Path:
    """The build directory of the C workloads (built and perf permitted, else skipped)."""
    perf_recordings.get("c")
    return perf_recordings.settings.build_dir


def assert_same_samples(ours_text: str, perf_text: str, unwound: bool = True) -> None:
    """The same samples, and the same user frames in AGREEMENT_PERCENT of them; for unwound stacks
    also where perf went on with a frame read beyond its stack copy (perf_stopped_at_unknown, the
    difference test_perf_script_agreement.py explains), and where neither knows the sampled IP's
    mapping (a cut that dropped the exec's mmaps: perf prints no frame, we the IP unmapped)."""
    ours, perf = parse(ours_text), parse(perf_text)
    assert perf, "perf script printed no sample"
    report = compare(ours, perf)
    print(report.describe(limit=3))
    assert len(ours) == len(perf), report.describe(limit=5)
    agreeing = report.identical + report.counts["unmapped_where_perf_empty"] + \
        (report.counts["perf_stopped_at_unknown"] if unwound else 0)
    assert 100 * agreeing >= AGREEMENT_PERCENT * len(perf), report.describe(limit=5)


# ---- recordings cut short --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["kill -9", "timeout -s KILL"])
def test_killed_recording_prints_every_complete_sample(tmp_path, workloads, how):
    command = [str(workloads / "cworkload"), "3"]
    if how == "kill -9":
        data = record(tmp_path, "killed", ["--call-graph", "dwarf"], command, kill_after=1.0)
    else:
        data = record(tmp_path, "killed", ["--call-graph", "dwarf"], command, timeout_kill=1)
    if struct.unpack_from("<Q", data.read_bytes(), DATA_SIZE_FIELD)[0] != 0:
        pytest.skip("perf record finished its header before the kill")
    perf_itself = subprocess.run(record_workloads.perf_script_command(data), capture_output=True, text=True)
    assert "properly terminated" in perf_itself.stderr  # what perf says; it then prints no sample
    result = run("-i", str(data))
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"fastunwind: note: {data}: perf.data+0x30: data size is 0: the recording was "
                                    "not properly terminated") and len(result.stderr.splitlines()) == 1
    repaired = tmp_path / "repaired.data"
    repaired_copy(data, repaired)
    assert_same_samples(result.stdout, perf_script(repaired))
    stats = run("-i", str(data), "--stats")
    assert stats.returncode == 0 and "cut short:" in stats.stdout and "feature sections absent: BUILD_ID" in stats.stdout


@pytest.fixture(scope="module")
def whole(perf_recordings) -> Path:
    return perf_recordings.get("c").data_file


def cut_points(data: Path) -> dict[str, int]:
    raw = data.read_bytes()
    attrs_offset, _, data_offset, data_size = struct.unpack_from("<QQQQ", raw, 0x18)
    data_end = data_offset + data_size
    # inside a sample: the middle of the data, moved off any record boundary by the walk below
    pos, middle = data_offset, data_offset + data_size // 2
    while True:
        size = struct.unpack_from("<H", raw, pos + 6)[0]
        if pos + size > middle:
            break
        pos += size
    return {"header": 50, "attrs": attrs_offset + 8, "mid_sample": pos + max(1, size // 2),
            "record_boundary": pos, "feature_table": data_end + 8, "feature_sections": len(raw) - 5}


@pytest.mark.parametrize("where", ["header", "attrs", "mid_sample", "record_boundary", "feature_table",
                                  "feature_sections"])
def test_truncated_copy(tmp_path, whole, where):
    cut = tmp_path / f"cut-{where}.data"
    offset = cut_points(whole)[where]
    cut.write_bytes(whole.read_bytes()[:offset])
    result = run("-i", str(cut))
    if where in ("header", "attrs"):  # nothing usable: one error line
        assert result.returncode == 1 and result.stderr.startswith("fastunwind: error:")
        assert len(result.stderr.splitlines()) == 1
        return
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"fastunwind: note: {cut}: the file is truncated: it ends at {offset:#x}")
    assert len(result.stderr.splitlines()) == 1
    if where == "mid_sample":
        assert "the incomplete record at" in result.stderr
    if where.startswith("feature"):
        # perf reads a copy cut after its data itself (skipping the sections it cannot seek to):
        # every sample, the same as ours (symbols may differ: without BUILD_ID the [vdso] copy in
        # the build-id cache is not found)
        assert_same_samples(result.stdout, perf_script(cut))
        assert len(parse(result.stdout)) == len(parse(run("-i", str(whole)).stdout))
    else:
        repaired = tmp_path / "repaired.data"
        repaired_copy(cut, repaired)
        assert_same_samples(result.stdout, perf_script(repaired))


# ---- recordings without user stacks ---------------------------------------------------------------


def test_frame_pointer_recording_is_printed_as_perf_script_does(tmp_path, workloads):
    """perf record -g of a workload built with frame pointers: the kernel's callchains, user and
    kernel frames, as perf script prints them (perf_compare.py's user frames, and kernel frames too)."""
    data = record(tmp_path, "fp", ["-g"], [str(workloads / "cworkload-fp"), "0.5"])
    result = run("-i", str(data))
    assert result.returncode == 0, result.stderr
    assert "DWARF unwinding needs perf record --call-graph dwarf" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    perf_text = perf_script(data)
    assert_same_samples(result.stdout, perf_text, unwound=False)
    ours, perf = parse(result.stdout), parse(perf_text)
    kernel_same = sum(1 for o, p in zip(ours, perf)
                      if [(f.ip, f.dso) for f in o.kernel_frames()] == [(f.ip, f.dso) for f in p.kernel_frames()])
    assert kernel_same >= AGREEMENT_PERCENT / 100 * len(perf)
    folded = run("-i", str(data), "--folded")
    assert folded.returncode == 0
    counts = [int(line.rsplit(" ", 1)[1]) for line in folded.stdout.splitlines()]
    assert sum(counts) == len(perf)
    assert any(";main;" in line for line in folded.stdout.splitlines())
    assert "[callchain]" not in folded.stdout  # a callchain is whole, not rooted at an outcome


def test_recording_without_call_graph_prints_the_sampled_ip(tmp_path, workloads):
    data = record(tmp_path, "plain", [], [str(workloads / "cworkload-fp"), "0.3"])
    result = run("-i", str(data))
    assert result.returncode == 0, result.stderr
    assert "no call graph in the recording" in result.stderr
    # one line per sample, the IP as sampled: the same lines but for symbol names (a PLT entry is
    # perf's `cos@plt`, our symbol table's `_init+0xb0`: symbols.c's business, not this test's)
    line = re.compile(r"^(\s*\S+ +-?\d+ +[\d.]+:(?: \S+:)?  +[0-9a-f]+) (.*) (\(.*\))$")
    ours, perf = result.stdout.splitlines(), perf_script(data).splitlines()
    assert len(ours) == len(perf) and perf
    split = [(line.match(o), line.match(p)) for o, p in zip(ours, perf)]
    assert all(o and p and o.group(1, 3) == p.group(1, 3) for o, p in split), [
        (o.string if o else None, p.string if p else None) for o, p in split if not (o and p) or o.group(1, 3) != p.group(1, 3)][:3]
    assert sum(o == p for o, p in zip(ours, perf)) >= 0.95 * len(perf)
    stats = run("-i", str(data), "--stats")
    assert stats.returncode == 0 and "ip_only" in stats.stdout


def test_lbr_recording(tmp_path, workloads):
    data = tmp_path / "lbr.data"
    recorded = subprocess.run(["perf", "record", "-q", "--call-graph", "lbr", "-o", str(data), "--",
                               str(workloads / "cworkload-fp"), "0.3"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
    if recorded.returncode != 0:
        pytest.skip("perf record --call-graph lbr is unavailable here (no LBR in this CPU or VM): "
                    + (recorded.stderr.strip().splitlines() or ["?"])[-1][:200])
    result = run("-i", str(data))
    assert result.returncode == 0, result.stderr
    # perf stitches LBR entries into the user part; we print the kernel's callchain: the kernel
    # frames and the sampled IP must agree at least
    ours, perf = parse(result.stdout), parse(perf_script(data))
    assert len(ours) == len(perf)
    assert all(o.user_frames()[:1] == p.user_frames()[:1] for o, p in zip(ours, perf))
