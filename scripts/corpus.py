#!/usr/bin/env python3
"""The real-binary corpus: programs built here with every linker, layout, language and runtime on
the machine, and Debian's own programs, each recorded with `perf record --call-graph dwarf` and
written out by `perf script` (the oracle), for tests/golden/test_corpus.py to compare sample by
sample with fastunwind's unwinding.

    python3 -m scripts.corpus OUT_DIR [--only c-lld,rust] [--seconds 0.4] [--list]    (from the repository root)

`make test` runs the cases marked `sample`; `make corpus` all of them. A case whose tool is
missing is skipped with the reason. Each case is judged one of two ways:

    perf       ≥ 99% of the samples whose stack perf unwound completely have identical user frames
               (dso, address), and symbol names agree on ≥ 99% of the frames both print at one address
    complete   where perf 6.1 cannot unwind (processes exec'd during its recording, Go programs,
               static programs):
               ≥ 95% of the samples reach the outermost frame, and every caller frame's return
               address follows a call instruction in its file (tests/golden/test_corpus.py)

The C program (workloads/corpus/linked.c) is linked by GNU ld, gold, lld and mold, as PIE and
not, static, with and without separate code pages and at a fixed address: the layouts that decide
which PT_LOAD segment a mapping maps (lld and mold start the executable segment in the read-only
one's last page).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from scripts import record_workloads

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCES = REPO_ROOT / "workloads" / "corpus"
DEFAULT_SECONDS = 0.4
FREQUENCY = 1000


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    description: str
    tools: tuple[str, ...]                        # executables that must be on PATH
    build: Callable[[Path], list[list[str]]]      # commands that build the case into the directory
    command: Callable[[Path, float], list[str]]   # what perf records, given the directory and seconds
    judge: str = "perf"                           # "perf" or "complete" (module docstring)
    sample: bool = False                          # in `make test`
    #: after recording, before unwinding: commands that rebuild or delete the binary (perf's
    #: build-id cache has the recorded one)
    after_recording: Callable[[Path], list[list[str]]] | None = None

    def binary(self, directory: Path) -> Path:
        return directory / self.name


def _c(name: str, description: str, flags: tuple[str, ...], linker: str = "bfd", sample: bool = False,
       tools: tuple[str, ...] = ()) -> Case:
    linked = str(SOURCES / "linked.c")

    def build(directory: Path) -> list[list[str]]:
        return [["gcc", "-O2", f"-fuse-ld={linker}", *flags, linked, "-o", str(directory / name)]]

    return Case(name, description, ("gcc", *tools), build,
                lambda directory, seconds: [str(directory / name), f"{seconds:g}"], sample=sample)


def _rebuilt(directory: Path) -> list[list[str]]:
    # the same program with one more instruction: another build-id at the same path
    return [["gcc", "-O2", "-fuse-ld=lld", "-DREBUILT", "-Dleaf=leaf_rebuilt", str(SOURCES / "linked.c"),
             "-o", str(directory / "c-lld-rebuilt")]]


def _rust(name: str, flags: tuple[str, ...]) -> Callable[[Path], list[list[str]]]:
    return lambda directory: [["rustc", "-O", "-C", "debuginfo=0", *flags, str(SOURCES / "program.rs"),
                               "-o", str(directory / name)]]


def _go(directory: Path) -> list[list[str]]:
    return [["go", "build", "-o", str(directory / "go"), str(SOURCES / "program.go")]]


def _text_file(directory: Path, words: int) -> Path:
    """Text of `words` words that compresses slowly (xz, gzip), made once."""
    path = directory / f"input-{words}.txt"
    if not path.exists():
        path.write_text(" ".join(f"w{(i * 2654435761) % 100003:05d}" for i in range(words)) + "\n")
    return path


def _compress(tool: str, words_per_second: int, *flags: str) -> Callable[[Path, float], list[str]]:
    """`tool` compressing text sized to take about the given seconds (rates measured here: xz -6
    690k words a second, gzip -9 950k)."""
    return lambda directory, seconds: [tool, *flags, "-k", "-f", str(_text_file(directory, int(seconds * words_per_second)))]


def _exec_loop(directory: Path, seconds: float) -> list[str]:
    """A shell exec'ing short programs for about `seconds`: /bin/true (all start-up: ld.so, libc's
    initialisation) and gzip on a 100k-word file (about 0.1 s of work each)."""
    text = _text_file(directory, 100_000)
    rounds = max(3, int(seconds / 0.12))
    return ["sh", "-c", f"for i in $(seq {rounds}); do /bin/true; /bin/true; gzip -9 -c {text} > /dev/null; done"]


CASES: dict[str, Case] = {case.name: case for case in [
    _c("c-bfd", "C, GNU ld, PIE (Debian's default)", (), sample=True),
    _c("c-bfd-nopie", "C, GNU ld, not PIE", ("-no-pie",)),
    _c("c-bfd-noseparate-code", "C, GNU ld, -z noseparate-code (code in the headers' page)",
       ("-Wl,-z,noseparate-code",)),
    _c("c-bfd-fixed", "C, GNU ld, not PIE, text at a fixed address (-Ttext-segment)",
       ("-no-pie", "-Wl,-Ttext-segment=0x20000000")),
    # perf 6.1 stops after the first frame of a static non-PIE program: judged by completeness
    dataclasses.replace(_c("c-static", "C, GNU ld, static", ("-static",)), judge="complete"),
    _c("c-static-pie", "C, GNU ld, static PIE", ("-static-pie",)),
    _c("c-gold", "C, gold, PIE", (), "gold", tools=("ld.gold",)),
    _c("c-lld", "C, lld, PIE (R and R E segments share a file page)", (), "lld", sample=True, tools=("ld.lld",)),
    _c("c-lld-nopie", "C, lld, not PIE", ("-no-pie",), "lld", tools=("ld.lld",)),
    _c("c-lld-separate-code", "C, lld, -z separate-code", ("-Wl,-z,separate-code",), "lld", tools=("ld.lld",)),
    _c("c-mold", "C, mold, PIE (segments share file pages)", (), "mold", sample=True, tools=("mold",)),
    _c("c-mold-nopie", "C, mold, not PIE", ("-no-pie",), "mold", tools=("mold",)),
    dataclasses.replace(
        _c("c-lld-rebuilt", "C, lld, rebuilt after recording: perf's build-id cache has the recorded one", (),
           "lld", sample=True, tools=("ld.lld",)), after_recording=_rebuilt),
    dataclasses.replace(
        _c("c-lld-deleted", "C, lld, deleted after recording: perf's build-id cache has it", (), "lld",
           tools=("ld.lld",)), after_recording=lambda directory: [["rm", str(directory / "c-lld-deleted")]]),
    Case("c-realigned", "C, gcc -O2 -mstackrealign: functions realigning the stack through a DRAP register "
         "(r10; r13 in a nested function), their saves relative to rbp", ("gcc",),
         lambda d: [["gcc", "-O2", "-mstackrealign", str(SOURCES / "realigned.c"), "-o", str(d / "c-realigned")]],
         lambda d, s: [str(d / "c-realigned"), f"{s:g}"], sample=True),
    Case("rust", "Rust, rustc -O (rust-lld, legacy mangling)", ("rustc",), _rust("rust", ()),
         lambda d, s: [str(d / "rust"), f"{s:g}"], sample=True),
    Case("rust-v0", "Rust, rustc -O, v0 symbol mangling", ("rustc",),
         _rust("rust-v0", ("-C", "symbol-mangling-version=v0")), lambda d, s: [str(d / "rust-v0"), f"{s:g}"]),
    # perf 6.1 stops after the first frame of a Go program (its CFI is only in a compressed
    # .debug_frame): judged by completeness
    Case("go", "Go, go build (Go's linker, static, CFI in a compressed .debug_frame)", ("go",), _go,
         lambda d, s: [str(d / "go"), f"{s:g}"], judge="complete", sample=True),
    Case("cpp", "C++ through libstdc++ (g++ -O2)", ("g++",),
         lambda d: [["g++", "-O2", str(SOURCES / "program.cc"), "-o", str(d / "cpp")]],
         lambda d, s: [str(d / "cpp"), f"{s:g}"], sample=True),
    Case("fork-exec", "sh running /bin/true and gzip in a loop: processes exec'd during the recording", ("sh", "gzip"),
         lambda d: [], _exec_loop,
         judge="complete", sample=True),
    Case("xz", "Debian's xz -6 (liblzma)", ("xz",), lambda d: [], _compress("xz", 690_000, "-6", "-T1")),
    Case("gzip", "Debian's gzip -9", ("gzip",), lambda d: [], _compress("gzip", 950_000, "-9")),
]}


def missing_tools(case: Case) -> list[str]:
    return [tool for tool in case.tools if not shutil.which(tool)]


def _environment(directory: Path) -> dict[str, str]:
    # Go keeps its build cache under $HOME by default; a directory of the corpus's own instead
    return {**os.environ, "GOCACHE": str(directory / "go-cache"), "GOPATH": str(directory / "go-path"),
            "GO111MODULE": "off", "CGO_ENABLED": "0"}


def _run_all(commands: list[list[str]], directory: Path) -> None:
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, env=_environment(directory),
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr.strip()}")


def record(case: Case, directory: Path, seconds: float = DEFAULT_SECONDS) -> record_workloads.Recording:
    """Build the case, record it with perf and write perf script's output beside the recording
    (rebuilding or deleting the binary in between where the case says so)."""
    directory.mkdir(parents=True, exist_ok=True)
    workload = record_workloads.Workload(case.name, case.description, case.tools,
                                         lambda settings: case.command(directory, seconds))
    missing = missing_tools(case)
    if missing:
        return record_workloads.record(workload, directory, record_workloads.Settings())
    _run_all(case.build(directory), directory)
    settings = record_workloads.Settings(seconds=seconds, frequency=FREQUENCY, build_dir=directory)
    recording = record_workloads.record(workload, directory, settings, write_script=case.after_recording is None)
    if recording.status == "recorded" and case.after_recording is not None:
        _run_all(case.after_recording(directory), directory)
        script_file = directory / f"{case.name}.perf-script.txt"
        with open(script_file, "wb") as output:
            subprocess.run(record_workloads.perf_script_command(recording.data_file), stdout=output,
                           stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, check=True)
        recording = dataclasses.replace(recording, script_file=script_file)
    return recording


def selected(which: str | None) -> list[str]:
    """The case names of `make test` (which: None or "sample"), of `make corpus` ("all"), or a
    comma-separated list."""
    if which in (None, "", "sample"):
        return [name for name, case in CASES.items() if case.sample]
    if which == "all":
        return list(CASES)
    names = [name for name in which.split(",") if name]
    unknown = [name for name in names if name not in CASES]
    if unknown:
        raise ValueError(f"unknown corpus case {', '.join(unknown)}; known: {', '.join(CASES)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build and record the real-binary corpus (perf record --call-graph dwarf + perf script).",
        epilog="cases: " + "; ".join(f"{c.name}: {c.description}" for c in CASES.values())
        + "\n\nexample: python3 -m scripts.corpus .build/corpus --only c-lld,rust",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="where the binaries, NAME.data and NAME.perf-script.txt go")
    parser.add_argument("--only", default="all", help="comma-separated case names, 'sample' or 'all' (default)")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="seconds each case runs")
    arguments = parser.parse_args(argv)
    try:
        names = selected(arguments.only)
    except ValueError as error:
        parser.error(str(error))
    out_dir = arguments.out_dir.resolve()
    problem = record_workloads.perf_problem(out_dir)
    if problem:
        print(problem.message, file=sys.stderr)
        return problem.exit_status
    failed = False
    for name in names:
        try:
            recording = record(CASES[name], out_dir, arguments.seconds)
        except RuntimeError as error:
            print(f"failed   {name}: {error}", flush=True)
            failed = True
            continue
        print(recording.summary(), flush=True)
        failed |= recording.status == "failed"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
