"""The real-binary corpus (scripts/corpus.py) against perf 6.1: programs linked by every linker and
layout, Rust, Go, C++, Debian's programs, a rebuilt binary, processes exec'd during the recording.

`make test` runs the cases marked `sample`; `make corpus` (FASTUNWIND_CORPUS=all) every case.
Each case is built and recorded once per module, into a temporary directory.
"""
from __future__ import annotations

import array
import io
import os
import subprocess
from pathlib import Path

import pytest

from fastunwind.address_space import ModuleImage
from fastunwind.perf_script import render_perf_script, unwind_recording

from scripts import corpus
from scripts import record_workloads
from tests.support.perf_compare import compare
from tests.support.perf_script_format import Frame, Sample, parse
from tests.support.step_batch import BIAS, module_spaces

CASES = corpus.selected(os.environ.get("FASTUNWIND_CORPUS"))

#: the share of samples perf unwound completely whose user frames must be ours, and of the frames
#: both print at one address whose names must agree (issue 21)
FRAMES_AGREEMENT = 0.99
NAMES_AGREEMENT = 0.99
#: where perf cannot judge (processes exec'd during the recording): the share of samples that
#: must reach the outermost frame
COMPLETE_SHARE = 0.95
#: the outermost frame of every goroutine: the Go runtime writes its address + 1 as the return
#: address of the goroutine's first function (gostartcall), with no call before it
GO_GOROUTINE_BASE = "runtime.goexit"
#: callees whose caller frame holds an interrupted PC, not a return address: Go's asynchronous
#: preemption (a SIGURG handler pushes the interrupted PC and resumes at runtime.asyncPreempt, with
#: no call before it) and the kernel's signal frames (the sigreturn trampolines)
ENTERED_WITHOUT_CALL = ("runtime.asyncPreempt", "runtime.sigreturn__sigaction", "__restore_rt")


@pytest.fixture(scope="module")
def corpus_recordings(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("corpus")
    problem = record_workloads.perf_problem(directory)
    recordings: dict[str, record_workloads.Recording] = {}

    def get(name: str) -> record_workloads.Recording:
        if problem:
            pytest.skip(problem.message)
        if name not in recordings:
            recordings[name] = corpus.record(corpus.CASES[name], directory)
        recording = recordings[name]
        if recording.status == "skipped":
            pytest.skip(f"corpus case {name}: {recording.reason}")
        assert recording.status == "recorded", f"corpus case {name}: {recording.reason}"
        return recording

    return get


def _time_text(time_ns: int) -> str:
    return f"{time_ns // 1_000_000_000}.{time_ns % 1_000_000_000 // 1000:06d}"


def _ours(data_file: Path) -> tuple[list[Sample], dict[tuple[int, str], str]]:
    """Our perf-script text parsed, and each sample's outcome by (tid, time)."""
    samples, _ = unwind_recording(str(data_file))
    out = io.BytesIO()
    render_perf_script(samples, out)
    outcomes = {(sample.tid, _time_text(sample.time)): sample.outcome for sample in samples}
    return parse(out.getvalue().decode("utf-8", "surrogateescape")), outcomes


def _name(frame: Frame) -> str:
    return frame.symbol if frame.offset is None else f"{frame.symbol}+0x{frame.offset:x}"


def _follows_call(code: bytes, return_offset: int) -> bool:
    """The bytes before `return_offset` end with a call: E8 rel32, or FF /2 (call r/m64, any
    addressing form; a REX or notrack prefix before FF changes nothing here)."""
    if return_offset >= 5 and code[return_offset - 5] == 0xE8:
        return True
    for length in range(2, 8):
        at = return_offset - length
        if at < 0 or code[at] != 0xFF:
            continue
        modrm = code[at + 1]
        mod, reg, rm = modrm >> 6, modrm >> 3 & 7, modrm & 7
        if reg != 2:
            continue
        size = 2
        if mod != 3 and rm == 4:
            size += 1  # SIB
            if mod == 0 and code[at + 2] & 7 == 5:
                size += 4
        if mod == 0 and rm == 5:
            size += 4  # rip-relative
        size += {1: 1, 2: 4}.get(mod, 0)
        if size == length:
            return True
    return False


@pytest.fixture(scope="module")
def judged(corpus_recordings):
    """judged(name) -> (our samples, our outcomes by (tid, time), the comparison with perf's or
    None for a case judged by completeness), once per case."""
    results: dict[str, tuple] = {}

    def get(name: str):
        if name not in results:
            recording = corpus_recordings(name)
            ours, outcomes = _ours(recording.data_file)
            report = None
            if corpus.CASES[name].judge == "perf":
                report = compare(ours, parse(recording.script_file.read_text(errors="surrogateescape")))
            results[name] = (ours, outcomes, report)
        return results[name]

    return get


@pytest.mark.parametrize("name", CASES)
def test_corpus_frames(name: str, judged) -> None:
    ours, outcomes, report = judged(name)
    assert ours, f"{name}: no samples"
    if report is None:
        _judge_complete(name, ours, outcomes)
        return
    counts = report.counts
    assert counts["missing_in_ours"] == counts["missing_in_perf"] == 0, report.describe()
    # perf unwound completely unless it stopped before us (perf 6.1 stops at frames without CFI,
    # or printed unmapped frames read past its stack copy, or nothing where it knew no mapping)
    complete = report.matched - counts["ours_longer"] - counts["perf_stopped_at_unknown"] - \
        counts["unmapped_where_perf_empty"]
    assert complete > 0.5 * report.matched, report.describe()
    assert report.identical >= FRAMES_AGREEMENT * complete, f"{name}:\n{report.describe()}"
    # every outcome is right: a stack shorter than perf's did not reach the outermost frame
    for comparison in report.differences("ours_shorter"):
        assert outcomes[comparison.key] != "end", f"{name}: {comparison.describe()}"


@pytest.mark.parametrize("name", [name for name in CASES if corpus.CASES[name].judge == "perf"])
def test_corpus_names(name: str, judged) -> None:
    """Where our frames and perf's are the same addresses, the same names."""
    _, _, report = judged(name)
    same_address = differing = 0
    differences: dict[tuple[str, str], int] = {}
    for comparison in report.comparisons:
        if comparison.kind != "identical":
            continue
        for mine, theirs in zip(comparison.ours.user_frames(), comparison.perf.user_frames()):
            same_address += 1
            if _name(mine) != _name(theirs):
                differing += 1
                key = (_name(mine), _name(theirs))
                differences[key] = differences.get(key, 0) + 1
    shown = "\n".join(f"  {n:5} ours {a!r}, perf {b!r}" for (a, b), n in
                      sorted(differences.items(), key=lambda item: -item[1])[:10])
    assert differing <= (1 - NAMES_AGREEMENT) * same_address, \
        f"{name}: {differing} of {same_address} frames named otherwise than perf names them:\n{shown}"


def _judge_complete(name: str, ours: list[Sample], outcomes: dict[tuple[int, str], str]) -> None:
    """Samples in mapped code reach the outermost frame, and each caller frame follows a call."""
    with_map = [s for s in ours if s.user_frames() and s.user_frames()[0].dso.startswith("/")]
    assert with_map, f"{name}: no sample in mapped user code"
    complete = [s for s in with_map if outcomes[s.key] == "end"]
    incomplete = [f"{s.key}: {outcomes[s.key]}, last {s.user_frames()[-1]}" for s in with_map
                  if outcomes[s.key] != "end"][:5]
    assert len(complete) >= COMPLETE_SHARE * len(with_map), \
        f"{name}: {len(complete)} of {len(with_map)} stacks complete:\n" + "\n".join(incomplete)
    files: dict[str, bytes] = {}
    checked = 0
    for sample in complete:
        frames = sample.user_frames()
        for callee, frame in zip(frames, frames[1:]):
            if not frame.dso.startswith("/"):
                continue  # [vdso]: not a file here
            if frame.symbol.startswith(GO_GOROUTINE_BASE) or callee.symbol.startswith(ENTERED_WITHOUT_CALL):
                continue
            if frame.dso not in files:
                files[frame.dso] = Path(frame.dso).read_bytes()
            # a caller frame is printed at its return address - 1, as a file offset
            assert _follows_call(files[frame.dso], frame.ip + 1), \
                f"{name}: {sample.key}: {frame} (the caller of {callee.symbol}) does not follow a call"
            checked += 1
    assert checked > 0


def test_follows_call_recognises_calls() -> None:
    assert _follows_call(bytes.fromhex("90e800000000"), 6)              # call rel32
    assert _follows_call(bytes.fromhex("41ffd4"), 3)                    # call *%r12
    assert _follows_call(bytes.fromhex("ff5008"), 3)                    # call *0x8(%rax)
    assert _follows_call(bytes.fromhex("ff1500000000"), 6)              # call *0x0(%rip)
    assert _follows_call(bytes.fromhex("ff14c500000000"), 7)              # call *0x0(,%rax,8)
    assert not _follows_call(bytes.fromhex("4889e5c3"), 4)              # mov %rsp,%rbp; ret
    assert not _follows_call(bytes.fromhex("ffe0"), 2)                  # jmp *%rax


def test_a_rebuilt_binary_without_a_cached_copy_is_named_once_on_stderr(corpus_recordings, tmp_path) -> None:
    """With perf's build-id cache elsewhere (empty), the rebuilt binary is not used: one warning
    line for it, and perf-script still prints every sample (exit 0)."""
    recording = corpus_recordings("c-lld-rebuilt")
    env = {**os.environ, "PERF_BUILDID_DIR": str(tmp_path)}
    done = subprocess.run([*_fastunwind(), "perf-script", "-i", str(recording.data_file)],
                          capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.decode().splitlines() if "c-lld-rebuilt" in line]
    assert len(warnings) == 1 and "another build-id" in warnings[0], done.stderr
    assert done.stdout.count(b"\n\n") == len(_ours(recording.data_file)[0])


def _fastunwind() -> list[str]:
    import sys

    return [sys.executable, "-m", "fastunwind"]


#: the functions of workloads/corpus/realigned.c that realign their stack through a DRAP register
REALIGNING = ("realigned", "inner.")


@pytest.mark.parametrize("synth", ["off", "missing"])
def test_realigned_frames_are_perfs_and_the_compact_tables(synth: str, corpus_recordings) -> None:
    """The DRAP frames of c-realigned (a CFA dereferenced through rbp, saves relative to rbp, r13's
    relative to the CFA) are unwound by the compact table (every row a rule of it, the rows with
    rbp-relative saves applied as such), with and without synthesized rows, as perf unwinds them."""
    if "c-realigned" not in CASES:
        pytest.skip("c-realigned is not among the selected corpus cases")
    recording = corpus_recordings("c-realigned")
    binary = recording.data_file.parent / "c-realigned"
    image = ModuleImage.load(str(binary))
    table = image.load_compact_table(use_cache=False)
    assert table is not None and table.slow_row_count == 0
    starts, rules = array.array("Q", table.rows()[0]), array.array("I", table.rows()[1])
    rbp_rows = [start for start, rule in zip(starts, rules) if table.rule(rule)["saved_at_rbp"]]
    space = module_spaces(image, table, ("table-only",))["table-only"]
    assert rbp_rows and all(space.step_source(BIAS + start) == "rbp_slots_rule" for start in rbp_rows)
    samples, _ = unwind_recording(str(recording.data_file), synth=synth)
    out = io.BytesIO()
    render_perf_script(samples, out)
    ours = parse(out.getvalue().decode("utf-8", "surrogateescape"))
    report = compare(ours, parse(recording.script_file.read_text(errors="surrogateescape")))
    through = [c for c in report.comparisons if c.perf is not None and
               any(f.symbol.startswith(REALIGNING) for f in c.perf.user_frames()[1:])]
    print(f"synth {synth}: {len(through)} of {report.matched} samples through DRAP frames; {report.describe()}")
    assert len(through) >= 0.5 * report.matched, report.describe()  # DRAP frames as callers
    identical = sum(c.kind == "identical" for c in through)
    assert identical >= FRAMES_AGREEMENT * len(through), f"synth {synth}:\n{report.describe()}"
