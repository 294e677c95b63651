"""`fastunwind perf-script --format`: speedscope's file checked against the facts of its format
(speedscope's src/lib/file-format-spec.ts, the schema https://www.speedscope.app/file-format-schema.json
is generated from) and holding every sample, per thread, with the first frames report counts; the
Firefox profiler's processed profile checked against the facts of its format (no JSON schema or
validator of it is published on PyPI or in Debian: the facts are the profiler's src/types/profile.js
at preprocessedProfileVersion 49, as samply's fxprof-processed-profile writes it), holding every
sample with perf script's time and stack; -o; --folded as --format folded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from decimal import Decimal

from fastunwind import _core
from tests.support.paths import SRC

#: the facts of speedscope's file format checked here
SCHEMA = "https://www.speedscope.app/file-format-schema.json"
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}
FILE_KEYS = {"$schema", "shared", "profiles", "name", "activeProfileIndex", "exporter"}
FRAME_KEYS = {"name", "file", "line", "col"}
SAMPLED_KEYS = {"type", "name", "unit", "startValue", "endValue", "samples", "weights"}


#: the facts of the Firefox profiler's processed profile checked here (src/types/profile.js)
GECKO_KEYS = {"meta", "libs", "threads", "pages", "profilerOverhead", "counters"}
GECKO_META_KEYS = {"version", "preprocessedProfileVersion", "interval", "startTime", "product", "symbolicated",
                   "categories", "markerSchema", "sampleUnits", "processType"}
GECKO_LIB_KEYS = {"name", "path", "debugName", "debugPath", "breakpadId", "codeId", "arch"}
GECKO_THREAD_KEYS = {"name", "isMainThread", "pid", "tid", "processName", "processType", "processStartupTime",
                     "processShutdownTime", "registerTime", "unregisterTime", "pausedRanges", "frameTable",
                     "funcTable", "stackTable", "samples", "markers", "resourceTable", "nativeSymbols",
                     "stringArray"}
#: each table of a thread: its columns (each a list of `length` values)
GECKO_TABLE_COLUMNS = {
    "frameTable": {"address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol", "innerWindowID",
                   "line", "column"},
    "funcTable": {"name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber"},
    "stackTable": {"prefix", "frame", "category", "subcategory"},
    "samples": {"stack", "time"},
    "markers": {"data", "name", "startTime", "endTime", "phase", "category"},
    "resourceTable": {"lib", "name", "host", "type"},
    "nativeSymbols": {"libIndex", "address", "name", "functionSize"},
}
MARKER_LOCATIONS = {"marker-chart", "marker-table", "timeline-overview", "timeline-memory", "timeline-ipc",
                    "timeline-fileio", "stack-chart"}


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
           **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}}
    return subprocess.run([sys.executable, "-m", "fastunwind", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)


def check_speedscope(document: dict) -> None:
    """Every required field with its type, nothing the format does not define."""
    assert set(document) <= FILE_KEYS and {"$schema", "shared", "profiles"} <= set(document)
    assert document["$schema"] == SCHEMA
    frames = document["shared"]["frames"]
    assert isinstance(frames, list) and frames
    for frame in frames:
        assert set(frame) <= FRAME_KEYS and isinstance(frame["name"], str)
        assert isinstance(frame.get("file", ""), str)
    assert 0 <= document.get("activeProfileIndex", 0) < len(document["profiles"])
    for profile in document["profiles"]:
        assert set(profile) == SAMPLED_KEYS and profile["type"] == "sampled"
        assert isinstance(profile["name"], str) and profile["unit"] in UNITS
        assert isinstance(profile["startValue"], (int, float)) and profile["endValue"] >= profile["startValue"]
        assert len(profile["samples"]) == len(profile["weights"])
        assert all(isinstance(weight, (int, float)) and weight >= 0 for weight in profile["weights"])
        for stack in profile["samples"]:
            assert stack and all(isinstance(index, int) and 0 <= index < len(frames) for index in stack)


def test_speedscope_holds_every_sample_of_every_thread(perf_recordings, tmp_path):
    data = str(perf_recordings.get("hackbench-threads").data_file)
    out = tmp_path / "profile.json"
    result = run("perf-script", "-i", data, "--format", "speedscope", "-o", str(out))
    assert result.returncode == 0 and result.stdout == "", result.stderr
    document = json.loads(out.read_text())
    check_speedscope(document)
    frames = document["shared"]["frames"]
    # every sample, in its thread's profile ("comm pid/tid"), as many as perf script prints per tid
    text = run("perf-script", "-i", data).stdout
    per_tid = Counter(int(block.split()[1]) for block in text.split("\n\n") if block.strip())
    profiles = {int(profile["name"].rsplit("/", 1)[1]): profile for profile in document["profiles"]}
    assert {tid: len(profile["samples"]) for tid, profile in profiles.items()} == per_tid
    # each stack's last frame (the leaf) is the function report counts as self
    leaves = Counter((frames[stack[-1]]["name"], frames[stack[-1]].get("file", ""))
                     for profile in document["profiles"] for stack in profile["samples"])
    report = json.loads(run("report", "-i", data, "--json", "--sort", "dso,sym").stdout)
    assert leaves == Counter({(f["name"], f["module"]): f["self"] for f in report["functions"]})
    # a stack that did not reach its end is rooted at its outcome, a frame in no file: "[truncated]"
    roots = [frames[stack[0]] for profile in document["profiles"] for stack in profile["samples"]]
    assert all(root.get("file") or (root["name"].startswith("[") and root["name"].endswith("]")) for root in roots)


def test_folded_is_format_folded_and_output_goes_to_the_file(perf_recordings, tmp_path):
    data = str(perf_recordings.get("c").data_file)
    folded = run("perf-script", "-i", data, "--folded").stdout
    assert folded and run("perf-script", "-i", data, "--format", "folded").stdout == folded
    out = tmp_path / "c.txt"
    assert run("perf-script", "-i", data, "-o", str(out)).stdout == ""
    assert out.read_text() == run("perf-script", "-i", data).stdout
    result = run("perf-script", "-i", data, "--format", "speedscope", "-o", str(tmp_path / "no" / "dir.json"))
    assert result.returncode == 1 and result.stderr.startswith("fastunwind: error: cannot write ")
    assert len(result.stderr.splitlines()) == 1


def check_gecko(document: dict) -> None:
    """The processed profile's structure: every key the profiler reads, every column as long as its
    table, every index into another table in range, a stack's prefix before it, times in order."""
    assert set(document) == GECKO_KEYS
    meta = document["meta"]
    assert GECKO_META_KEYS <= set(meta)
    assert isinstance(meta["version"], int) and meta["preprocessedProfileVersion"] == 49
    assert meta["interval"] > 0 and meta["symbolicated"] is True and isinstance(meta["product"], str)
    assert meta["sampleUnits"]["time"] == "ms"
    categories = meta["categories"]
    assert categories and all(set(c) == {"name", "color", "subcategories"} and c["subcategories"] for c in categories)
    schemas = {schema["name"]: schema for schema in meta["markerSchema"]}
    for schema in schemas.values():
        assert set(schema["display"]) <= MARKER_LOCATIONS
        assert all({"key", "format"} <= set(field) for field in schema["data"])
    libs = document["libs"]
    assert all(set(lib) == GECKO_LIB_KEYS and isinstance(lib["path"], str) for lib in libs)
    for thread in document["threads"]:
        assert set(thread) == GECKO_THREAD_KEYS
        assert isinstance(thread["pid"], str) and isinstance(thread["tid"], str) and isinstance(thread["name"], str)
        strings = thread["stringArray"]
        assert all(isinstance(string, str) for string in strings)
        for table, columns in GECKO_TABLE_COLUMNS.items():
            assert columns <= set(thread[table]), table
            assert all(len(thread[table][column]) == thread[table]["length"] for column in columns), table
        frames, funcs, stacks = thread["frameTable"], thread["funcTable"], thread["stackTable"]
        resources, samples, markers = thread["resourceTable"], thread["samples"], thread["markers"]
        assert all(0 <= func < funcs["length"] for func in frames["func"])
        assert all(0 <= category < len(categories) for category in frames["category"] + stacks["category"])
        assert all(0 <= name < len(strings) for name in funcs["name"] + resources["name"] + markers["name"])
        assert all(resource == -1 or 0 <= resource < resources["length"] for resource in funcs["resource"])
        assert all(0 <= lib < len(libs) for lib in resources["lib"])
        assert all(prefix is None or 0 <= prefix < index for index, prefix in enumerate(stacks["prefix"]))
        assert all(0 <= frame < frames["length"] for frame in stacks["frame"])
        assert all(isinstance(stack, int) and 0 <= stack < stacks["length"] for stack in samples["stack"])
        assert samples["time"] == sorted(samples["time"]) and samples.get("weight") is None
        assert samples["weightType"] == "samples"
        for data, start, phase in zip(markers["data"], markers["startTime"], markers["phase"]):
            assert data["type"] in schemas and phase == 0 and isinstance(start, (int, float, Decimal))
            assert 0 <= data["cause"]["stack"] < stacks["length"]


def _text_samples(text: str) -> dict[int, list[tuple[int, list[str]]]]:
    """perf-script's text per tid: (time in µs, the frames' symbols leaf first, "[unknown]" kept)."""
    per_tid: dict[int, list[tuple[int, list[str]]]] = {}
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        header, *lines = block.strip("\n").split("\n")
        fields = header.split()
        tid = int(fields[1])
        seconds, _, micros = fields[2].rstrip(":").partition(".")
        names = [line.strip().split(" ", 1)[1].rsplit(" (", 1)[0].rpartition("+0x")[0] or
                 line.strip().split(" ", 1)[1].rsplit(" (", 1)[0] for line in lines]
        per_tid.setdefault(tid, []).append((int(seconds) * 1_000_000 + int(micros), names))
    return per_tid


def test_gecko_holds_every_sample_with_perf_scripts_time_and_stack(perf_recordings, tmp_path):
    data = str(perf_recordings.get("hackbench-threads").data_file)
    out = tmp_path / "profile.json"
    result = run("perf-script", "-i", data, "--format", "gecko", "-o", str(out))
    assert result.returncode == 0 and result.stdout == "", result.stderr
    document = json.loads(out.read_text(), parse_float=Decimal)  # times exactly as written
    check_gecko(document)
    text = _text_samples(run("perf-script", "-i", data).stdout)
    threads = {int(thread["tid"]): thread for thread in document["threads"]}
    assert {tid: thread["samples"]["length"] for tid, thread in threads.items()} == \
        {tid: len(samples) for tid, samples in text.items()}
    incomplete = 0
    for tid, thread in threads.items():
        strings, stacks = thread["stringArray"], thread["stackTable"]
        name = [strings[n] for n in thread["funcTable"]["name"]]
        for stack, time, (micros, names) in zip(thread["samples"]["stack"], thread["samples"]["time"], text[tid]):
            assert int(time * 1000) == micros  # ms, as perf script's seconds (which it cuts to µs)
            frames = []
            while stack is not None:
                frames.append(name[stacks["frame"][stack]])
                stack = stacks["prefix"][stack]
            if frames[-1] in OUTCOME_ROOTS and frames[-1] not in names:
                frames.pop()  # the outcome rooting a stack that did not reach its end
                incomplete += 1
            # a frame without a symbol is its address in the profile, [unknown] in the text
            assert [n if t == "[unknown]" else t for n, t in zip(frames, names)] == frames and \
                len(frames) == len(names), (tid, micros)
        markers = thread["markers"]
        assert markers["length"] == sum(1 for s in thread["samples"]["stack"] if _root_is_outcome(thread, s))
    assert incomplete == sum(thread["markers"]["length"] for thread in threads.values())


#: the roots of stacks that did not reach their end ("[no_unwind_info]"); a frame without a symbol
#: ("[unknown perf]") is bracketed too, but is no outcome
OUTCOME_ROOTS = frozenset(f"[{o}]" for o in (*_core.SAMPLE_OUTCOMES, *_core.BPF_OUTCOMES) if o not in ("?", "end"))


def _root_is_outcome(thread: dict, stack: int) -> bool:
    stacks, strings = thread["stackTable"], thread["stringArray"]
    while stacks["prefix"][stack] is not None:
        stack = stacks["prefix"][stack]
    return strings[thread["funcTable"]["name"][stacks["frame"][stack]]] in OUTCOME_ROOTS
