#!/usr/bin/env python3
"""Record the workloads under workloads/ with `perf record --call-graph dwarf`: the perf.data
fixtures fastunwind's perf walker is compared against `perf script` on.

    python3 scripts/record_workloads.py OUT_DIR [--seconds 1.5] [--frequency 2000] [--only c,python]

For each workload it runs

    perf record -e cpu-clock -F FREQUENCY [-m 1024] --call-graph dwarf[,STACK_BYTES] -o OUT_DIR/NAME.data -- COMMAND

(-m 1024 only as root: see Settings.mmap_pages)

and, unless --no-script, writes the oracle next to it:

    perf script --no-inline -F comm,tid,time,event,ip,sym,symoff,dso -i OUT_DIR/NAME.data > OUT_DIR/NAME.perf-script.txt

plus OUT_DIR/manifest.json describing every recording (command, sample count, lost chunks, timings).
The C workloads are built first with `make -C workloads OUT=BUILD_DIR` (default OUT_DIR/build).

Exit status: 0 all recorded (workloads whose tool is missing are skipped and listed), 1 a workload
failed, 2 usage error, EXIT_PERF_NOT_PERMITTED (77) perf may not record here (the message says how to
permit it), EXIT_PERF_UNAVAILABLE (69) perf is not installed or perf_event_open does not exist.
The functions are also the library tests/support/recordings.py records its session fixtures with.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKLOADS_DIR = REPO_ROOT / "workloads"

# sysexits.h: EX_NOPERM and EX_UNAVAILABLE, so a caller can tell "fix permissions" from "install perf".
EXIT_PERF_NOT_PERMITTED = 77
EXIT_PERF_UNAVAILABLE = 69

PERF_SCRIPT_FIELDS = "comm,tid,time,event,ip,sym,symoff,dso"


def perf_script_command(data_file: str | os.PathLike[str]) -> list[str]:
    """The oracle command whose output tests/support/perf_script_format.py parses."""
    return ["perf", "script", "--no-inline", "-F", PERF_SCRIPT_FIELDS, "-i", str(data_file)]


# ---- workloads -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Settings:
    seconds: float = 1.5          # wall time each workload aims for
    frequency: int = 2000         # perf record -F
    stack_bytes: int | None = None  # --call-graph dwarf,N; None = perf's default (8192)
    # perf record -m: hackbench lost ~70 chunks per 1.5 s with perf's default buffer (512 KiB for
    # root) and none with 1024 pages (4 MiB per CPU). Unprivileged users may only lock
    # kernel.perf_event_mlock_kb (516 KiB), so they keep the default.
    mmap_pages: int | None = 1024 if os.geteuid() == 0 else None
    build_dir: Path = REPO_ROOT / ".build" / "workloads"


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    description: str
    tools: tuple[str, ...]                                   # executables that must be on PATH
    command: Callable[[Settings], list[str]]
    install_hint: str = ""                                   # how to get a missing tool


def _python_interpreter() -> str:
    # Debian's /usr/bin/python3 (a stable, packaged binary with .eh_frame) rather than whatever a
    # pyenv shim or venv resolves to: the shim is a bash script and would be what perf records.
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def _big_source(settings: Settings, language: str) -> Path:
    """Generate the compiler workload's input, sized by the compile times measured in gen_big_c.py:
    about 100 C functions per second of clang-14 -O2, 40 C++ functions per second of g++ -O2."""
    functions = max(20, int(settings.seconds * (100 if language == "c" else 40)))
    suffix = "c" if language == "c" else "cpp"
    path = settings.build_dir / f"big-{functions}.{suffix}"
    if not path.exists():
        settings.build_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(WORKLOADS_DIR / "gen_big_c.py"), "--functions",
                        str(functions), "--language", language, "-o", str(path)], check=True)
    return path


def _compiler_command(settings: Settings) -> list[str]:
    if shutil.which("clang-14"):
        return ["clang-14", "-O2", "-c", str(_big_source(settings, "c")), "-o", "/dev/null"]
    return ["g++", "-O2", "-c", str(_big_source(settings, "c++")), "-o", "/dev/null"]


#: hackbench's tasks mostly wait on their sockets: on an idle machine 40 loops gave 78 cpu-clock
#: samples at 1 kHz, short of the suite's 100; a loaded one gives more (its tasks spin longer)
HACKBENCH_MIN_LOOPS = 100


def _hackbench_loops(settings: Settings) -> str:
    # hackbench's default 10 groups x 40 tasks take ~6 ms per loop on 2 cores unrecorded, about
    # twice that under perf with 8 KiB stack copies: 80 loops per second of recording.
    return str(max(HACKBENCH_MIN_LOOPS, int(settings.seconds * 80)))


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("c", "cworkload: gcc -O2 -fomit-frame-pointer -g, CFI in .eh_frame; every phase",
             ("make", "gcc"), lambda s: [str(s.build_dir / "cworkload"), f"{s.seconds:g}"]),
    Workload("c-fp", "cworkload-fp: frame pointers, no CFI for the program's own code",
             ("make", "gcc"), lambda s: [str(s.build_dir / "cworkload-fp"), f"{s.seconds:g}"]),
    Workload("c-fp-debugframe", "cworkload-fp-debugframe: frame pointers, CFI in .debug_frame only",
             ("make", "gcc"),
             lambda s: [str(s.build_dir / "cworkload-fp-debugframe"), f"{s.seconds:g}"]),
    Workload("python", "workloads/recursive.py: CPython 3, 500 Python frames deep",
             (), lambda s: [_python_interpreter(), str(WORKLOADS_DIR / "recursive.py"),
                            f"{s.seconds:g}"]),
    Workload("compiler", "clang-14 -O2 -c on a generated C file (g++ on generated C++ without clang-14)",
             (), _compiler_command),
    Workload("hackbench-threads", "hackbench -T: threads passing messages over socketpairs",
             ("hackbench",), lambda s: ["hackbench", "-T", "-l", _hackbench_loops(s)],
             "apt-get install rt-tests"),
    Workload("hackbench-processes", "hackbench -P: forked processes passing messages",
             ("hackbench",), lambda s: ["hackbench", "-P", "-l", _hackbench_loops(s)],
             "apt-get install rt-tests"),
]}


def missing_tools(workload: Workload) -> list[str]:
    tools = list(workload.tools)
    if workload.name == "compiler" and not shutil.which("clang-14"):
        tools.append("g++")
    return [tool for tool in tools if not shutil.which(tool)]


# ---- perf availability ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PerfProblem:
    exit_status: int   # EXIT_PERF_NOT_PERMITTED or EXIT_PERF_UNAVAILABLE
    message: str       # what is wrong and how to fix it, ready to print


def _paranoid_level() -> str:
    try:
        return Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    except OSError:
        return "unreadable"


def perf_problem(scratch_dir: Path) -> PerfProblem | None:
    """None when `perf record --call-graph dwarf` works here; otherwise why not and how to fix it.
    Probes with a real recording of `true`, since whether perf may record depends on
    perf_event_paranoid, capabilities, seccomp and the kernel together."""
    if not shutil.which("perf"):
        return PerfProblem(EXIT_PERF_UNAVAILABLE,
                           "perf is not installed: apt-get install linux-perf")
    scratch_dir.mkdir(parents=True, exist_ok=True)
    probe_file = scratch_dir / "perf-probe.data"
    probe = subprocess.run(["perf", "record", "-e", "cpu-clock", "-F", "100", "--call-graph", "dwarf",
                            "-o", str(probe_file), "--", "true"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
    probe_file.unlink(missing_ok=True)
    if probe.returncode == 0:
        return None
    error = probe.stderr.strip()
    paranoid = _paranoid_level()
    if re.search(r"perf_event_paranoid|Permission denied|No permission|EACCES|EPERM|not permitted",
                 error, re.IGNORECASE):
        return PerfProblem(EXIT_PERF_NOT_PERMITTED, (
            f"perf may not record here (kernel.perf_event_paranoid = {paranoid}, uid {os.getuid()}).\n"
            "Permit it with either of:\n"
            "    sudo sysctl kernel.perf_event_paranoid=1\n"
            "    (or run this as root)\n"
            f"perf said:\n    {error.splitlines()[0] if error else '(nothing)'}"))
    if re.search(r"perf_event_open|Function not implemented|ENOSYS|ENOENT|not supported", error,
                 re.IGNORECASE):
        return PerfProblem(EXIT_PERF_UNAVAILABLE, (
            "perf_event_open is not available here (a container without it, or a kernel built "
            f"without perf events).\nperf said:\n    {error.splitlines()[0] if error else '(nothing)'}"))
    return PerfProblem(EXIT_PERF_UNAVAILABLE,
                       f"perf record failed on `true` (exit {probe.returncode}):\n{error}")


# ---- building and recording ----------------------------------------------------------------------

def build(settings: Settings) -> None:
    """Build the C variants into settings.build_dir (incremental; make prints nothing when current)."""
    settings.build_dir.mkdir(parents=True, exist_ok=True)
    built = subprocess.run(["make", "-s", "-C", str(WORKLOADS_DIR), f"OUT={settings.build_dir}"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError(f"make -C workloads OUT={settings.build_dir} failed:\n{built.stderr}")


@dataclasses.dataclass(frozen=True)
class Recording:
    name: str
    data_file: Path | None            # None when skipped or failed
    command: tuple[str, ...]
    perf_command: tuple[str, ...]
    status: str                       # "recorded", "skipped" or "failed"
    reason: str = ""                  # why skipped/failed
    samples: int = 0                  # from "Captured and wrote ... (N samples)"
    lost_chunks: int = 0
    record_seconds: float = 0.0
    script_file: Path | None = None
    script_seconds: float = 0.0

    def summary(self) -> str:
        if self.status != "recorded":
            return f"{self.status:8} {self.name}: {self.reason}"
        size = self.data_file.stat().st_size / 1e6 if self.data_file else 0
        lost = f", LOST {self.lost_chunks} chunks" if self.lost_chunks else ""
        script = f", perf script {self.script_seconds:.1f} s" if self.script_file else ""
        return (f"recorded {self.name}: {self.samples} samples, {size:.1f} MB, "
                f"{self.record_seconds:.1f} s{lost}{script} -> {self.data_file}")

    def to_json(self) -> dict:
        result = dataclasses.asdict(self)
        for key in ("data_file", "script_file"):
            result[key] = str(result[key]) if result[key] else None
        return result


def record(workload: Workload, out_dir: Path, settings: Settings, write_script: bool = True) -> Recording:
    command = workload.command(settings)
    call_graph = "dwarf" if settings.stack_bytes is None else f"dwarf,{settings.stack_bytes}"
    data_file = out_dir / f"{workload.name}.data"
    buffer = ["-m", str(settings.mmap_pages)] if settings.mmap_pages else []
    perf_command = ["perf", "record", "-e", "cpu-clock", "-F", str(settings.frequency), *buffer,
                    "--call-graph", call_graph, "-o", str(data_file), "--", *command]
    missing = missing_tools(workload)
    if missing:
        hint = f" ({workload.install_hint})" if workload.install_hint else ""
        return Recording(workload.name, None, tuple(command), tuple(perf_command), "skipped",
                         f"{', '.join(missing)} not found{hint}")
    start = time.monotonic()
    result = subprocess.run(perf_command, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                            cwd=out_dir)
    elapsed = time.monotonic() - start
    if result.returncode != 0 or not data_file.exists():
        return Recording(workload.name, None, tuple(command), tuple(perf_command), "failed",
                         f"perf record exited {result.returncode}:\n{result.stderr.strip()}",
                         record_seconds=elapsed)
    samples = re.search(r"\((\d+) samples\)", result.stderr)
    lost = re.search(r"lost (\d+) chunks", result.stderr)
    recording = Recording(workload.name, data_file, tuple(command), tuple(perf_command), "recorded",
                          samples=int(samples.group(1)) if samples else 0,
                          lost_chunks=int(lost.group(1)) if lost else 0, record_seconds=elapsed)
    if write_script:
        script_file = out_dir / f"{workload.name}.perf-script.txt"
        start = time.monotonic()
        with open(script_file, "wb") as output:
            scripted = subprocess.run(perf_script_command(data_file), stdout=output,
                                      stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        if scripted.returncode != 0:
            return dataclasses.replace(recording, status="failed", reason=(
                f"perf script exited {scripted.returncode}:\n{scripted.stderr.decode(errors='replace')}"))
        recording = dataclasses.replace(recording, script_file=script_file,
                                        script_seconds=time.monotonic() - start)
    return recording


def record_all(out_dir: Path, settings: Settings, names: list[str] | None = None,
               write_script: bool = True, progress: Callable[[str], None] = lambda line: None
               ) -> list[Recording]:
    """Build, then record each named workload (all by default) into out_dir; writes manifest.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    build(settings)
    recordings = []
    for name in names or list(WORKLOADS):
        recording = record(WORKLOADS[name], out_dir, settings, write_script)
        progress(recording.summary())
        recordings.append(recording)
    perf_version = subprocess.run(["perf", "--version"], capture_output=True, text=True).stdout.strip()
    manifest = {"perf_version": perf_version, "settings": {
        "seconds": settings.seconds, "frequency": settings.frequency,
        "stack_bytes": settings.stack_bytes, "mmap_pages": settings.mmap_pages, "build_dir": str(settings.build_dir)},
        "perf_script_fields": PERF_SCRIPT_FIELDS,
        "recordings": [recording.to_json() for recording in recordings]}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return recordings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Record the workloads with perf record --call-graph dwarf (and their perf script oracle).",
        epilog="workloads: " + "; ".join(f"{w.name}: {w.description}" for w in WORKLOADS.values())
        + "\n\nexample: python3 scripts/record_workloads.py .build/recordings --seconds 1 --only c,c-fp",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="where NAME.data, NAME.perf-script.txt and manifest.json go")
    parser.add_argument("--seconds", type=float, default=1.5, help="wall time per workload (default 1.5)")
    parser.add_argument("--frequency", type=int, default=2000, help="perf record -F (default 2000)")
    parser.add_argument("--stack-bytes", type=int, default=None,
                        help="user stack bytes copied per sample: --call-graph dwarf,N (default perf's 8192)")
    parser.add_argument("--only", default="", help="comma-separated workload names (default all)")
    parser.add_argument("--build-dir", type=Path, default=None,
                        help="where the C workloads are built (default OUT_DIR/build)")
    parser.add_argument("--no-script", action="store_true", help="do not write NAME.perf-script.txt")
    parser.add_argument("--json", action="store_true", help="print the manifest as JSON at the end")
    arguments = parser.parse_args(argv)
    names = [name for name in arguments.only.split(",") if name]
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    if arguments.seconds <= 0 or arguments.frequency <= 0:
        parser.error("--seconds and --frequency must be positive")
    out_dir = arguments.out_dir.resolve()
    settings = Settings(seconds=arguments.seconds, frequency=arguments.frequency,
                        stack_bytes=arguments.stack_bytes,
                        build_dir=(arguments.build_dir or out_dir / "build").resolve())
    problem = perf_problem(out_dir)
    if problem:
        print(problem.message, file=sys.stderr)
        return problem.exit_status
    try:
        recordings = record_all(out_dir, settings, names or None, not arguments.no_script,
                                progress=lambda line: print(line, flush=True))
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"record_workloads: {error}", file=sys.stderr)
        return 1
    if arguments.json:
        print((out_dir / "manifest.json").read_text(), end="")
    print(f"manifest: {out_dir / 'manifest.json'}")
    return 1 if any(recording.status == "failed" for recording in recordings) else 0


if __name__ == "__main__":
    sys.exit(main())
