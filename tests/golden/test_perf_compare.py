"""compare: classification of sample pairs on small hand-made stacks, so a harness bug cannot pass
as "identical"."""
from __future__ import annotations

from tests.support import perf_compare as compare
from tests.support.perf_script_format import Frame, Sample

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
EXE = "/tmp/cworkload"
KERNEL = Frame(0xFFFFFFFF81000130, "entry_SYSCALL_64_after_hwframe", 0x76, "[kernel.kallsyms]")
MAIN = [Frame(0x19DA, "leaf", 0x4A, EXE), Frame(0x138E, "main", 0x22E, EXE),
        Frame(0x27249, "__libc_start_call_main", 0x79, LIBC), Frame(0x27304, "__libc_start_main", 0x84, LIBC)]
GARBAGE = Frame(0xFFFFFFFFFFFFFFFF, "[unknown]", None, "[unknown]")


def sample(frames, time="1.000001", tid=7):
    return Sample("cworkload", tid, time, tuple(frames))


def kind(ours, perf):
    return compare.compare_sample(sample(ours), sample(perf))


def test_identical_ignores_kernel_frames_and_symbols():
    renamed = [Frame(f.ip, "other", 0, f.dso) for f in MAIN]
    result = kind([KERNEL, *MAIN], renamed)
    assert result.kind == "identical" and result.frame_index is None


def test_longer_and_shorter():
    assert (kind(MAIN, MAIN[:2]).kind, kind(MAIN, MAIN[:2]).frame_index) == ("ours_longer", 2)
    assert (kind(MAIN[:3], MAIN).kind, kind(MAIN[:3], MAIN).frame_index) == ("ours_shorter", 3)


def test_perf_stopped_at_unknown():
    # perf's trailing frames without a map (ffffffffffffffff: a zero return address, decremented)
    assert kind(MAIN, [*MAIN[:3], GARBAGE]).kind == "perf_stopped_at_unknown"
    assert kind(MAIN[:3], [*MAIN[:3], GARBAGE]).kind == "perf_stopped_at_unknown"
    # a garbage address is not a kernel frame once user frames came before it
    assert sample([*MAIN[:3], GARBAGE]).kernel_frames() == ()


def test_unmapped_where_perf_printed_nothing():
    unmapped = Frame(0x55922B430B6F, "[unknown]", None, "[unknown]")
    assert kind([KERNEL, unmapped], [KERNEL]).kind == "unmapped_where_perf_empty"
    assert kind([MAIN[0]], []).kind == "ours_longer"  # a mapped frame perf left out is not this


def test_differ_at_frame_by_address_or_dso():
    moved = [MAIN[0], Frame(0x138F, "main", 0x22F, EXE), *MAIN[2:]]
    assert (kind(moved, MAIN).kind, kind(moved, MAIN).frame_index) == ("differ_at_frame", 1)
    other_dso = [MAIN[0], Frame(0x138E, "main", 0x22E, "/tmp/other"), *MAIN[2:]]
    assert kind(other_dso, MAIN).kind == "differ_at_frame"


def test_report_matching_and_missing():
    perf = [sample(MAIN, "1.000001"), sample(MAIN, "1.000002"), sample(MAIN, "1.000002"),
            sample(MAIN, "1.000003")]
    ours = [sample(MAIN, "1.000001"), sample(MAIN, "1.000002"), sample(MAIN[:2], "1.000002"),
            sample(MAIN, "1.000004"), sample(MAIN, "1.000001", tid=8)]
    report = compare.compare(ours, perf)
    counts = report.counts
    assert counts["identical"] == 2 and counts["ours_shorter"] == 1
    assert counts["missing_in_ours"] == 1 and counts["missing_in_perf"] == 2
    assert report.matched == 3 and len(report.comparisons) == 6
    text = report.describe()
    assert "2 identical (33.3%)" in text and "ours_shorter at user frame 2" in text
    assert "tid 8 time 1.000001: missing_in_perf" in text
    assert report.to_json()["counts"]["missing_in_perf"] == 2


def test_command_line(tmp_path, capsys):
    from tests.support.perf_script_format import render
    (tmp_path / "perf.txt").write_text(render([sample(MAIN)]))
    (tmp_path / "ours.txt").write_text(render([sample(MAIN[:2])]))
    assert compare.main([str(tmp_path / "perf.txt"), str(tmp_path / "perf.txt")]) == 0
    assert compare.main([str(tmp_path / "ours.txt"), str(tmp_path / "perf.txt")]) == 1
    assert "ours_shorter" in capsys.readouterr().out
