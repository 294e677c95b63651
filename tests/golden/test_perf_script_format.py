"""perf_script_format: parse and render perf 6.1's `perf script -F comm,tid,time,ip,sym,symoff,dso`
output; hand-written lines for each form, then a byte-exact round trip on every real recording."""
from __future__ import annotations

import pytest

from scripts import record_workloads
from tests.support.perf_script_format import Frame, PerfScriptFormatError, Sample, parse, parse_frame, render

SAMPLE_TEXT = (
    "cworkload  6915  2555.833453: \n"
    "\tffffffff81000130 entry_SYSCALL_64_after_hwframe+0x76 ([kernel.kallsyms])\n"
    "\t            1cdd sigusr1_handler_work+0x3d (/tmp/wl/cworkload)\n"
    "\t           3c04f [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\t            1000 _init+0x0 (/usr/lib/x86_64-linux-gnu/libpthread.so.0)\n"
    "\tffffffffffffffff [unknown] ([unknown])\n"
    "\n"
    "Web Content 123456    12.000001: \n"
    "\t         211cb4f clang::driver::CC1Command::Execute(llvm::ArrayRef<std::optional<llvm::StringRef> >, "
    "std::string*, bool*) const+0x13f (/usr/lib/llvm-14/lib/libclang-cpp.so.14)\n"
    "\t            1234 f+0x4 (/tmp/dir with space (copy)/lib.so (deleted))\n"
    "\n"
    "kworker/0:1      7 123456.100000: \n"   # a comm ending in a space: one more than %5d pads
    "\n"
)


def test_parse_fields():
    samples = parse(SAMPLE_TEXT)
    assert [(s.comm, s.tid, s.time) for s in samples] == [
        ("cworkload", 6915, "2555.833453"), ("Web Content", 123456, "12.000001"),
        ("kworker/0:1 ", 7, "123456.100000")]
    first = samples[0]
    assert first.frames[0] == Frame(0xFFFFFFFF81000130, "entry_SYSCALL_64_after_hwframe", 0x76, "[kernel.kallsyms]")
    assert first.frames[2] == Frame(0x3C04F, "[unknown]", None, "/usr/lib/x86_64-linux-gnu/libc.so.6")
    assert first.frames[3].offset == 0
    assert [f.symbol for f in first.kernel_frames()] == ["entry_SYSCALL_64_after_hwframe"]
    # ffffffffffffffff after user frames is a garbage user frame, not a kernel one.
    assert first.user_frames()[-1].ip == 0xFFFFFFFFFFFFFFFF and len(first.user_frames()) == 4
    cxx, deleted = samples[1].frames
    assert cxx.symbol.endswith("bool*) const") and cxx.offset == 0x13F
    assert deleted.dso == "/tmp/dir with space (copy)/lib.so (deleted)" and deleted.symbol == "f"
    assert samples[2].frames == ()


def test_round_trip_hand_written():
    assert render(parse(SAMPLE_TEXT)) == SAMPLE_TEXT


def test_frozen():
    sample = parse(SAMPLE_TEXT)[0]
    with pytest.raises(AttributeError):
        sample.tid = 1  # type: ignore[misc]
    assert isinstance(sample, Sample) and isinstance(sample.frames, tuple)


@pytest.mark.parametrize("line, where", [
    ("\t1234 f+0x4 (/x)", None),                    # address not padded to 16 columns
    ("\t            1234 f (/x)", None),            # symbol without +0x offset
    ("\t            1234 f+0x4 /x", None),          # no DSO group
    ("            1234 f+0x4 (/x)", None),          # no tab
])
def test_bad_frames(line, where):
    with pytest.raises(PerfScriptFormatError):
        parse_frame(line, 3)


@pytest.mark.parametrize("text, line_number", [
    ("cworkload 6915 2555.833453:\n\n", 1),         # header without the trailing space
    ("cworkload  6915  2555.833453: \n\t            1234 f+0x4 (/x)\n", 2),   # no blank line at the end
    ("\t            1234 f+0x4 (/x)\n\n", 1),       # a frame before any header
])
def test_bad_documents(text, line_number):
    with pytest.raises(PerfScriptFormatError) as raised:
        parse(text)
    assert raised.value.line_number == line_number
    assert f"line {line_number}" in str(raised.value)


@pytest.mark.parametrize("name", list(record_workloads.WORKLOADS))
def test_round_trip_real_recording(name, perf_script_text, perf_script_samples):
    text = perf_script_text(name)
    samples = perf_script_samples(name)
    assert samples, f"perf script printed no samples for {name}"
    assert render(samples) == text


def test_headers_with_the_event_name_round_trip():
    text = "cworkload  6915  2555.833453: cpu-clock: \n\t            1234 f+0x4 (/x)\n\n"
    (sample,) = parse(text)
    assert (sample.comm, sample.tid, sample.time, sample.event) == ("cworkload", 6915, "2555.833453", "cpu-clock")
    assert render([sample]) == text
