"""The workloads themselves: every recording exists and parses, and perf's own stacks show that
cworkload spends time in each named phase with the property it exists to test (a signal handler
over __restore_rt, a DRAP frame, a call ending a noreturn path, 100+ recursive frames...). If one of
these fails, the workload (or the compiler) changed, not fastunwind."""
from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from scripts import record_workloads
from tests.support.perf_script_format import Frame, Sample

LIBC_NAME = "libc.so.6"
LIBM_NAME = "libm.so.6"


def has_run(sample: Sample, symbols: list[str]) -> bool:
    """`symbols` appear as consecutive frames, leaf-most first, somewhere in the sample."""
    names = [frame.symbol for frame in sample.frames]
    return any(names[i:i + len(symbols)] == symbols for i in range(len(names) - len(symbols) + 1))


def find(samples: list[Sample], symbols: list[str]) -> list[Sample]:
    return [sample for sample in samples if has_run(sample, symbols)]


@lru_cache(maxsize=None)
def signal_frame_ranges(path: str) -> tuple[tuple[int, int], ...]:
    """PC ranges of the FDEs whose CIE augmentation has 'S' (signal frame): libc's __restore_rt,
    from readelf --debug-dump=frames."""
    text = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True, text=True).stdout
    signal_cies, ranges, current_cie = set(), [], None
    for line in text.splitlines():
        cie = re.match(r"^([0-9a-f]{8}) [0-9a-f]+ [0-9a-f]+ CIE", line)
        if cie:
            current_cie = cie.group(1)
        augmentation = re.match(r'^\s+Augmentation:\s+"(\w*)"', line)
        if augmentation and "S" in augmentation.group(1):
            signal_cies.add(current_cie)
        fde = re.match(r"^[0-9a-f]{8} [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]{8}) pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
        if fde and fde.group(1) in signal_cies:
            ranges.append((int(fde.group(2), 16), int(fde.group(3), 16)))
    return tuple(ranges)


def symbol_sizes(path: Path) -> dict[str, int]:
    text = subprocess.run(["nm", "-S", str(path)], capture_output=True, text=True, check=True).stdout
    return {fields[3]: int(fields[1], 16) for fields in (line.split() for line in text.splitlines())
            if len(fields) == 4}


def is_signal_trampoline(frame: Frame) -> bool:
    # perf prints caller frames as return address - 1: the handler's return address is
    # __restore_rt, so its frame shows one byte before it, where libc's signal FDE starts (perf
    # then finds no symbol there and prints "[unknown]").
    return frame.dso.endswith("/" + LIBC_NAME) and any(
        start <= frame.ip + 1 < end for start, end in signal_frame_ranges(frame.dso))


# ---- every workload ------------------------------------------------------------------------------

EXPECTED_COMM = {"c": "cworkload", "c-fp": "cworkload-fp", "c-fp-debugframe": "cworkload-fp-de",
                 "python": "python3", "hackbench-threads": "hackbench", "hackbench-processes": "hackbench"}


@pytest.mark.parametrize("name", list(record_workloads.WORKLOADS))
def test_recording_exists_and_has_stacks(name, perf_recordings, perf_script_samples):
    recording = perf_recordings.get(name)
    assert recording.data_file.stat().st_size > 0
    samples = perf_script_samples(name)
    assert len(samples) >= 100, f"{name}: only {len(samples)} samples"
    with_user_frames = sum(1 for sample in samples if sample.user_frames())
    assert with_user_frames >= 0.8 * len(samples)
    if name in EXPECTED_COMM:
        assert sum(1 for s in samples if s.comm == EXPECTED_COMM[name]) >= 0.5 * len(samples)


# ---- cworkload -----------------------------------------------------------------------------------

PHASES = ["phase_deep_recursion", "phase_qsort_callbacks", "phase_plt_libm_libc", "phase_signal_timer",
          "phase_signal_raise", "phase_drap_realign", "phase_noreturn_longjmp"]


@pytest.mark.parametrize("phase", PHASES)
def test_c_phase_sampled(phase, perf_script_samples):
    samples = perf_script_samples("c")
    hits = find(samples, [phase, "main"])
    # handlers run on the interrupted stack, so the signal phases are reached through them too
    assert len(hits) >= 5, f"{phase}: {len(hits)} samples with {phase} called from main"


def test_c_deep_recursion(perf_script_samples):
    samples = perf_script_samples("c")
    depths = [sum(1 for f in s.frames if f.symbol == "recurse_deep_nontail") for s in samples]
    # 200 levels of 32 bytes (all inside the 8 KiB stack copy), with work at the bottom and every
    # 50 levels; perf script prints at most kernel.perf_event_max_stack = 127 user frames.
    assert max(depths) >= 120
    assert any(51 <= depth <= 101 for depth in depths)
    cut_by_max_stack = [s for s in samples if s.frames and s.frames[-1].symbol == "recurse_deep_nontail"]
    assert cut_by_max_stack, "no sample cut at perf's 127-frame limit"
    assert max(len(s.user_frames()) for s in cut_by_max_stack) == 127


def test_c_big_frames_cut_by_stack_copy(perf_script_samples):
    # 48 levels of ~540 bytes overflow the 8 KiB copy: perf reads a zero return address past its
    # end and prints it decremented, "ffffffffffffffff [unknown] ([unknown])", as the last frame.
    samples = find(perf_script_samples("c"), ["recurse_big_frames"])
    assert len(samples) >= 5
    cut = [s for s in samples if s.frames[-1].ip == 0xFFFFFFFFFFFFFFFF and s.frames[-2].symbol == "recurse_big_frames"]
    assert cut, "no recurse_big_frames sample cut short by the stack copy"


def test_c_qsort_calls_back_through_libc(perf_script_samples):
    samples = perf_script_samples("c")
    for sample in samples:
        names = [f.symbol for f in sample.frames]
        if names and names[0] == "compare_records_with_work" and "phase_qsort_callbacks" in names:
            between = sample.frames[1:names.index("phase_qsort_callbacks")]
            if between and all(f.dso.endswith("/" + LIBC_NAME) for f in between):
                return
    pytest.fail("no sample with compare_records_with_work called from libc's qsort")


def test_c_plt_calls_into_libm(perf_script_samples):
    leaves_in_libm = [s for s in perf_script_samples("c") if len(s.frames) >= 2
                      and s.frames[0].dso.endswith("/" + LIBM_NAME) and s.frames[1].symbol == "phase_plt_libm_libc"]
    assert len(leaves_in_libm) >= 3


@pytest.mark.parametrize("handler, beneath", [
    ("sigalrm_handler_work", ["spin_until_signal", "phase_signal_timer"]),
    ("sigusr1_handler_work", None),
])
def test_c_signal_handler_over_restore_rt(handler, beneath, perf_script_samples):
    found = 0
    for sample in perf_script_samples("c"):
        names = [f.symbol for f in sample.frames]
        if handler not in names:
            continue
        index = names.index(handler)
        if index + 1 < len(names) and is_signal_trampoline(sample.frames[index + 1]):
            below = names[index + 2:]
            if beneath is None:   # raise(): libc's pthread_kill path, then our phase
                ok = "phase_signal_raise" in below and sample.frames[index + 2].dso.endswith("/" + LIBC_NAME)
            else:
                ok = below[:len(beneath)] == beneath
            found += ok
    assert found >= 3, f"{handler}: {found} samples with __restore_rt and the interrupted code beneath"


def test_c_samples_inside_handler_body(perf_script_samples):
    # the handler as the leaf, directly above __restore_rt: the unwinder starts in a handler
    leaf_handlers = [s for s in perf_script_samples("c") if len(s.frames) >= 2
                     and s.frames[0].symbol in ("sigalrm_handler_work", "sigusr1_handler_work")
                     and is_signal_trampoline(s.frames[1])]
    assert leaf_handlers


def test_c_drap_frame(perf_recordings, perf_script_samples):
    binary = perf_recordings.settings.build_dir / "cworkload"
    dump = subprocess.run(["readelf", "--debug-dump=frames", str(binary)], capture_output=True, text=True).stdout
    address = symbol_address(binary, "drap_realigned_vla")
    fde = re.search(rf"FDE cie=\w+ pc=0*{address:x}\.\.\w+\n(.*?)\n\n", dump, re.S)
    assert fde, f"no FDE at drap_realigned_vla ({address:#x})"
    assert "DW_CFA_def_cfa: r10 (r10) ofs 0" in fde.group(1)
    assert "DW_CFA_def_cfa_expression" in fde.group(1)
    assert find(perf_script_samples("c"), ["drap_callee_leaf", "drap_realigned_vla", "phase_drap_realign", "main"])
    assert find(perf_script_samples("c"), ["drap_realigned_vla", "phase_drap_realign", "main"])


def symbol_address(binary: Path, name: str) -> int:
    text = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return next(int(line.split()[0], 16) for line in text.splitlines() if line.endswith(" " + name))


def test_c_noreturn_call_is_last_instruction(perf_recordings, perf_script_samples):
    size = symbol_sizes(perf_recordings.settings.build_dir / "cworkload")["noreturn_caller"]
    hits = find(perf_script_samples("c"), ["noreturn_spin_then_longjmp", "noreturn_caller", "phase_noreturn_longjmp"])
    assert hits
    caller = next(f for f in hits[0].frames if f.symbol == "noreturn_caller")
    # perf shows return address - 1; the return address itself is one past noreturn_caller's end
    assert caller.offset + 1 == size, f"return address at +{caller.offset + 1:#x}, function size {size:#x}"


# ---- the frame-pointer variants ------------------------------------------------------------------

@pytest.mark.parametrize("name, binary, section", [
    ("c-fp", "cworkload-fp", None), ("c-fp-debugframe", "cworkload-fp-debugframe", ".debug_frame")])
def test_fp_variants_without_eh_frame_cfi(name, binary, section, perf_recordings, perf_script_samples):
    perf_recordings.get(name)
    path = perf_recordings.settings.build_dir / binary
    dump = subprocess.run(["readelf", "--debug-dump=frames", str(path)], capture_output=True, text=True).stdout
    address = symbol_address(path, "phase_drap_realign")
    covered = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"FDE cie=\w+ pc=(\w+)\.\.(\w+)", dump)]
    in_eh_frame = dump.split("Contents of the .debug_frame section")[0]
    assert not any(a <= address < b for a, b in
                   [(int(a, 16), int(b, 16)) for a, b in re.findall(r"FDE cie=\w+ pc=(\w+)\.\.(\w+)", in_eh_frame)])
    assert any(a <= address < b for a, b in covered) == (section is not None)
    assert find(perf_script_samples(name), ["drap_realigned_vla", "phase_drap_realign"])


# ---- the others ----------------------------------------------------------------------------------

def test_python_interpreter_frames(perf_script_samples):
    samples = perf_script_samples("python")
    assert len(find(samples, ["_PyEval_EvalFrameDefault"])) >= 0.5 * len(samples)


def test_compiler_frames(perf_script_samples, perf_recordings):
    samples = perf_script_samples("compiler")
    compiler = perf_recordings.get("compiler").command[0]
    dsos = ("libLLVM-14.so.1", "libclang-cpp.so.14") if compiler == "clang-14" else ("cc1plus",)
    in_compiler = [s for s in samples if any(f.dso.endswith(dsos) for f in s.frames)]
    assert len(in_compiler) >= 0.5 * len(samples)


@pytest.mark.parametrize("name", ["hackbench-threads", "hackbench-processes"])
def test_hackbench_many_tasks(name, perf_script_samples):
    assert len({s.tid for s in perf_script_samples(name)}) >= 20
