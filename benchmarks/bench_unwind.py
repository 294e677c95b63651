"""Benchmark of the walker: fastunwind against libunwind, libdw and a frame-pointer walk, on the
same perf samples, in one run.

    .venv/bin/python -m benchmarks.bench_unwind [RECORDING.data ...] [--repeat N] [--rounds R] [--json [FILE]]
    make bench-unwind

Without recordings, the default workloads are recorded first with scripts/record_workloads.py
(hackbench -T, the paper's benchmark; the C workload; CPython) into .build/bench-unwind/recordings
(`--reuse` keeps recordings already there). For each recording:

1. benchmarks/export_samples.py replays it with fastunwind's API and writes the samples with user
   registers (registers, stack dump, address space) to a flat file;
2. fastunwind's walker: `_core.unwind_samples` over exactly those samples, N passes; its `walk_ns`
   (the time of its C loop over the samples) is the figure;
3. the peers in benchmarks/peers/ (built with `make -C benchmarks/peers`) unwind the same file N
   times and time their whole unwinding loop: libunwind (remote API, global cache, as perf), libdw
   (one Dwfl session per address space), the frame-pointer walk; steps 2 and 3 run R rounds, every
   tool once a round, each round a cold start: every harness is a new process, and fastunwind
   replays the recording afresh (new address spaces, empty walk caches, the recording read again).
   Before its first pass every tool writes 256 MiB of other memory (evict_caches here,
   bench_evict_caches in the harnesses), so that first pass is a cold unwinder on samples out of the
   CPU caches. Each tool's figures combine its rounds (ToolResult.merged): all passes as one run
   would count them (the first round's first pass in, later rounds' left out), the first pass as
   the median of the rounds' cold ones, the best pass as the best of all. Then two informational
   variants, one pass each: libunwind without its cache, libdw with perf's per-sample session;
4. agreement: per sample, each peer's PC list (sampled IP, then return addresses) against ours.

Then, for the hackbench recording, end to end: `fastunwind perf-script -i X > /dev/null` against
`perf script --no-inline -F comm,tid,time,ip,sym,symoff,dso -i X > /dev/null`, best of 3 each,
interleaved, after one untimed warm-up of each.

Targets (the walker issue), reported as met or not; nothing here asserts a timing:
libunwind ns/frame ÷ ours ≥ 25, libdw ns/frame ÷ ours ≥ 25, ours ns/frame ÷ frame-pointer walk's ≤ 3,
perf script's time ÷ ours > 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from fastunwind import _core
from fastunwind import eh_elf
from fastunwind.perf.bench import time_backend
from fastunwind.perf.walk import DEFAULT_MAX_FRAMES

from benchmarks import export_samples
from benchmarks.bench_perf_script import end_to_end

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORK = os.path.join(REPO, ".build", "bench-unwind")
PEERS_SOURCE = os.path.join(REPO, "benchmarks", "peers")
#: hackbench -T is the paper's benchmark; c-fp (frame pointers, no CFI in the program) is where the
#: frame-pointer walk follows whole chains, so its per-frame speed limit is meaningful
DEFAULT_WORKLOADS = ("hackbench-threads", "c", "python", "c-fp")
END_TO_END_RUNS = 3

TARGET_PEER_RATIO = 25.0  #: peer ns/frame ÷ ours, at least
TARGET_FP_RATIO = 3.0  #: ours ns/frame ÷ frame-pointer walk's, at most


@dataclass
class ToolResult:
    tool: str
    samples: int
    frames: int  #: per pass
    ns_total: int
    passes: int
    first_passes_ns: list[int] = field(default_factory=list)  #: each round's cold first pass
    ns_best_pass: int | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    pcs: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)  #: perf sample index -> PCs
    note: str = ""

    @property
    def ns_first_pass(self) -> float | None:
        """The median of the rounds' cold first passes."""
        return statistics.median(self.first_passes_ns) if self.first_passes_ns else None

    @property
    def ns_per_frame(self) -> float:
        return self.ns_total / (self.frames * self.passes) if self.frames else float("nan")

    @property
    def ns_per_frame_best_pass(self) -> float:
        best = self.ns_best_pass if self.ns_best_pass is not None else self.ns_total / self.passes
        return best / self.frames if self.frames else float("nan")

    @property
    def ns_per_frame_first_pass(self) -> float:
        first = self.ns_first_pass if self.ns_first_pass is not None else self.ns_total / self.passes
        return first / self.frames if self.frames else float("nan")

    @property
    def ns_per_sample(self) -> float:
        return self.ns_total / (self.samples * self.passes) if self.samples else float("nan")

    @property
    def ns_per_sample_best_pass(self) -> float:
        best = self.ns_best_pass if self.ns_best_pass is not None else self.ns_total / self.passes
        return best / self.samples if self.samples else float("nan")

    def merged(self, later: ToolResult) -> ToolResult:
        """This run and a later run of the same tool on the same samples as one result: all passes
        as if one run had made them (the later run's first pass, its own cold start, is left out of
        the mean), both runs' cold first passes kept (their median is the first-pass figure), the
        best of both. The frames found are this run's (every run finds the same)."""
        total, passes = later.ns_total, later.passes
        if later.first_passes_ns and passes > 1:
            total, passes = total - later.first_passes_ns[0], passes - 1
        best = [b for b in (self.ns_best_pass, later.ns_best_pass) if b is not None]
        return ToolResult(self.tool, self.samples, self.frames, self.ns_total + total, self.passes + passes,
                          self.first_passes_ns + later.first_passes_ns, min(best) if best else None, self.outcomes,
                          self.pcs, self.note)

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "samples": self.samples, "frames": self.frames, "passes": self.passes,
                "ns_total": self.ns_total, "ns_per_frame": self.ns_per_frame,
                "ns_per_frame_first_pass": self.ns_per_frame_first_pass,
                "ns_per_frame_best_pass": self.ns_per_frame_best_pass, "ns_per_sample": self.ns_per_sample,
                "ns_first_pass": self.ns_first_pass, "first_passes_ns": self.first_passes_ns,
                "ns_best_pass": self.ns_best_pass,
                "outcomes": self.outcomes, "note": self.note}


@dataclass
class Agreement:
    peer: str
    compared: int = 0
    identical: int = 0
    same_frame_count: int = 0
    peer_prefix_of_ours: int = 0  #: the peer stopped earlier, same frames so far
    ours_prefix_of_peer: int = 0  #: we stopped earlier
    diverged: int = 0  #: a frame differs
    first_divergences: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---- recordings --------------------------------------------------------------------------------------


def record_defaults(reuse: bool, seconds: float, names: tuple[str, ...] = DEFAULT_WORKLOADS,
                    work: str = WORK) -> list[str]:
    """Recordings of the named workloads under `work`/recordings (made with
    scripts/record_workloads.py; kept and reused with `reuse`)."""
    out_dir = os.path.join(work, "recordings")
    paths = [os.path.join(out_dir, f"{name}.data") for name in names]
    if reuse and all(os.path.exists(path) for path in paths):
        return paths
    command = [sys.executable, os.path.join(REPO, "scripts", "record_workloads.py"), out_dir,
               "--only", ",".join(names), "--no-script", "--seconds", f"{seconds:g}"]
    print("recording:", shlex.join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=sys.stderr)  # stdout stays clean for --json
    return [path for path in paths if os.path.exists(path)]


# ---- fastunwind ----------------------------------------------------------------------------------------


#: our fast backends, whose ratios to the peers are reported: auto (the default, the reference the
#: peers are compared with: compact tables, and the recording's eh_elfs, compiled below, for the rows
#: the tables leave to the interpreter), the compact tables alone (auto before `fastunwind
#: compile`), the compiled eh_elfs
FAST_BACKENDS = ("auto", "table", "compiled")
#: each a row, in this order (the fast ones first): and the DWARF interpreter alone
OUR_BACKENDS = FAST_BACKENDS + ("dwarf",)


def run_ours(replay: export_samples.Exported, repeat: int, backend: str) -> ToolResult:
    """fastunwind's walker (fastunwind.bench.time_backend, the same measurement as `fastunwind
    bench`) over the exported samples."""
    timing = time_backend(replay.perf, replay.replayed, backend, repeat, DEFAULT_MAX_FRAMES, evict=True)
    exported = replay.exported()
    name = "fastunwind" if backend == "auto" else f"fastunwind-{backend}"
    tool = ToolResult(name, len(exported), 0, timing.total_ns, repeat, [timing.passes_ns[0]], min(timing.passes_ns))
    for index in exported:
        tool.pcs[index] = timing.pcs.get(index, ())
    tool.outcomes = dict(timing.outcomes)
    tool.frames = sum(map(len, tool.pcs.values()))
    return tool


# ---- the peers -----------------------------------------------------------------------------------------


def build_peers() -> str:
    out = os.path.join(WORK, "peers")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["make", "-s", "-C", PEERS_SOURCE, f"OUT={out}"], check=True)
    return out


def read_pcs(path: str) -> dict[int, tuple[int, ...]]:
    pcs = {}
    with open(path) as f:
        for line in f:
            words = line.split()
            pcs[int(words[0])] = tuple(int(word, 16) for word in words[1:])
    return pcs


def run_peer(binary: str, samples_file: str, repeat: int, label: str, mode: str | None = None,
             keep_pcs: bool = True) -> ToolResult:
    frames_file = f"{samples_file}.{label}.pcs"
    command = [binary, samples_file, str(repeat)]
    if keep_pcs:
        command += ["--frames", frames_file]
    if mode:
        command += ["--mode", mode]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited {completed.returncode}:\n{completed.stderr}")
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    tool = ToolResult(report["tool"], report["samples"], report["frames"], report["ns_total"], report["repeat"],
                      [report["ns_first_pass"]] if report.get("ns_first_pass") is not None else [],
                      report.get("ns_best_pass"), report.get("outcomes", {}))
    if report.get("first_error"):
        tool.note = f"first error: {report['first_error']}"
    if keep_pcs:
        tool.pcs = read_pcs(frames_file)
    return tool


def agreement(ours: ToolResult, peer: ToolResult) -> Agreement:
    result = Agreement(peer.tool)
    for index, theirs in peer.pcs.items():
        mine = ours.pcs.get(index)
        if mine is None:
            continue
        result.compared += 1
        result.same_frame_count += len(mine) == len(theirs)
        if mine == theirs:
            result.identical += 1
        elif mine[: len(theirs)] == theirs:
            result.peer_prefix_of_ours += 1
        elif theirs[: len(mine)] == mine:
            result.ours_prefix_of_peer += 1
        else:
            result.diverged += 1
            if len(result.first_divergences) < 3:
                at = next(k for k in range(min(len(mine), len(theirs))) if mine[k] != theirs[k])
                result.first_divergences.append({"perf_sample_index": index, "frame": at, "ours": hex(mine[at]),
                                                 "theirs": hex(theirs[at])})
    return result


# ---- end to end ----------------------------------------------------------------------------------------


# bench_perf_script.end_to_end: both whole processes, interleaved, after one warm-up each


# ---- the machine ---------------------------------------------------------------------------------------


def package_version(name: str) -> str:
    found = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name], capture_output=True, text=True,
                           check=False)
    return found.stdout.strip() or "unknown"


def machine() -> dict[str, Any]:
    cpu_model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "native", "src"],
                           capture_output=True, text=True, check=False)
    perf = subprocess.run(["perf", "--version"], capture_output=True, text=True, check=False)
    gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True, check=False)
    return {
        "cpu_model": cpu_model, "nproc": os.cpu_count(), "kernel": platform.release(),
        "python": platform.python_version(), "perf": perf.stdout.strip(), "gcc": gcc.stdout.strip(),
        "libunwind": package_version("libunwind-dev"), "libdw": package_version("libdw-dev"),
        "fastunwind_commit": commit.stdout.strip() + (" (with uncommitted changes in src/ or native/)"
                                                      if dirty.stdout.strip() else ""),
        "extension_built": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(_core.__file__))),
        "load_average_at_start": os.getloadavg(),
    }


# ---- one recording -------------------------------------------------------------------------------------


def bench_recording(recording: str, repeat: int, rounds: int, peers: str, progress) -> dict[str, Any]:
    name = os.path.splitext(os.path.basename(recording))[0]
    samples_file = os.path.join(WORK, f"{name}.samples")
    started = time.perf_counter()
    replay = export_samples.replay_recording(recording)
    replay_seconds = time.perf_counter() - started
    with open(samples_file, "wb") as out:
        exported = export_samples.write_samples(replay, out)
    progress(f"{name}: {exported['samples']} samples with user registers of {replay.perf.sample_count}; "
             f"{exported['spaces']} address spaces")
    # auto and compiled use every module's eh_elf: built (or found in the cache) before timing
    started = time.perf_counter()
    images = {m.image.path: m.image for m in replay.replayed.session.mappings if m.image is not None}
    compiled = eh_elf.compile_images([image for image in images.values()
                                      if any(t is not None and t.row_count for t in (image.eh_frame, image.debug_frame))])
    compile_seconds = time.perf_counter() - started
    failed = [str(r) for r in compiled if isinstance(r, Exception)]
    if failed:
        raise SystemExit(f"{name}: fastunwind compile failed: {failed}")
    progress(f"{name}: eh_elfs of {len(compiled)} modules ready in {compile_seconds:.1f} s")
    # Rounds interleave the tools: each runs once a round, so a stretch of disturbance on the machine
    # (this VM's neighbours come and go) reaches every tool instead of whichever ran then.
    runs = [("ours", backend, None, repeat) for backend in OUR_BACKENDS] + [
        ("libunwind", "libunwind_bench", None, repeat), ("libdw", "libdw_bench", None, repeat),
        ("fp", "fp_bench", None, repeat)]
    tools: list[ToolResult] = []
    for round_ in range(rounds):
        # Each round starts cold, as each harness starts a new process: the recording replayed
        # afresh (fresh images, which load the eh_elfs; empty walk caches), then one untimed walk
        # that reads the recording's stack dumps and maps the memory the walks write their frames
        # to, as each harness reads its sample file and maps its frame arrays before its timing
        # starts. What it leaves in the CPU caches is evicted before each first pass.
        replay = export_samples.replay_recording(recording)
        time_backend(replay.perf, replay.replayed, "dwarf", 1, DEFAULT_MAX_FRAMES)
        for k, (label, what, mode, passes) in enumerate(runs):
            if label == "ours":  # evicts after its set-up, as each harness does (bench_evict_caches)
                tool = run_ours(replay, passes, what)
            else:  # the frames are the same every round: read once
                tool = run_peer(os.path.join(peers, what), samples_file, passes, label, mode, keep_pcs=round_ == 0)
            if round_ == 0:
                tools.append(tool)
            else:
                tools[k] = tools[k].merged(tool)
    # the peers' uncached variants, one pass each: slow, and for information only
    for label, binary, mode in (("libunwind-no-cache", "libunwind_bench", "no-cache"),
                                ("libdw-per-sample", "libdw_bench", "per-sample")):
        tools.append(run_peer(os.path.join(peers, binary), samples_file, 1, label, mode))
    for tool in tools:
        progress(f"{name}: {tool.tool} {tool.ns_per_frame:.1f} ns/frame")
    ours = tools[0]
    agreements = [agreement(ours, tool) for tool in tools[1:]]
    # the backends must agree exactly with each other (compact tables and eh_elfs are exact)
    for tool in tools[1:len(OUR_BACKENDS)]:
        if tool.pcs != ours.pcs:
            raise SystemExit(f"{name}: {tool.tool} found other frames than {ours.tool}")
    by_name = {tool.tool: tool for tool in tools}
    # Three views of ns/frame: all passes (ns_total / frames: the harnesses' own figure), the first
    # pass (cold caches and lazy set-up, like one perf script run) and the best pass (warm: the
    # unwinder's own cost). Each ratio is computed in each view.
    # For each of our fast backends (the first tools).
    ratios: dict[str, Any] = {}
    for backend in tools[:len(FAST_BACKENDS)]:
        q: dict[str, Any] = {}
        for view in ("all", "first", "best"):
            def per_frame(tool: ToolResult, view: str = view) -> float:
                return {"all": tool.ns_per_frame, "first": tool.ns_per_frame_first_pass,
                        "best": tool.ns_per_frame_best_pass}[view]
            q[view] = {"libunwind_over_ours": per_frame(by_name["libunwind"]) / per_frame(backend),
                       "libdw_over_ours": per_frame(by_name["libdw"]) / per_frame(backend),
                       "ours_over_fp": per_frame(backend) / per_frame(by_name["fp"])}
        # per sample in the best pass: the frame-pointer walk's first pass is all cold misses (it does
        # almost no work), so any view that includes it says more about memory than about walking
        q["ours_over_fp_per_sample"] = backend.ns_per_sample_best_pass / by_name["fp"].ns_per_sample_best_pass
        ratios[backend.tool] = q
    return {"name": name, "recording": recording, "samples_file": samples_file, "export": exported,
            "all_samples": replay.perf.sample_count, "replay_seconds": replay_seconds,
            "compile_seconds": compile_seconds,
            "tools": [tool.to_json() for tool in tools], "agreement": [a.to_json() for a in agreements],
            "ratios": ratios}


# ---- reports -------------------------------------------------------------------------------------------


def yes_no(met: bool) -> str:
    return "yes" if met else "**no**"


def outcome_text(outcomes: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1]) if v)


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [(f"**Machine:** {m['cpu_model']}, {m['nproc']} CPUs, Linux {m['kernel']}; {m['perf']}; libunwind "
             f"{m['libunwind']}, libdw (elfutils) {m['libdw']}, gcc {m['gcc']} -O2 for the harnesses; Python "
             f"{m['python']}; fastunwind at {m['fastunwind_commit']}, extension built {m['extension_built']}. "
             f"Load average {m['load_average_at_start'][0]:.2f} at the start, "
             f"{results['load_average_at_end'][0]:.2f} at the end; {results['rounds']} round(s) of {results['repeat']} passes "
             f"per tool, interleaved."), ""]
    lines += [("| recording | tool | frames | ns/frame: all passes / first / best | ns/sample | "
               "first pass / best pass, ms | outcomes (first pass) | "
               "agrees with ours (identical / peer stopped earlier / we stopped earlier / differ) |"),
              "|---|---|---|---|---|---|---|---|"]
    for r in results["recordings"]:
        agreements = {a["peer"]: a for a in r["agreement"]}
        for t in r["tools"]:
            a = agreements.get(t["tool"])
            agree = (f"{a['identical']} / {a['peer_prefix_of_ours']} / {a['ours_prefix_of_peer']} / {a['diverged']}"
                     f" of {a['compared']}" if a else "—")
            passes = (f"{t['ns_first_pass'] / 1e6:.2f} / {t['ns_best_pass'] / 1e6:.2f}"
                      if t["ns_first_pass"] is not None and t["passes"] > 1 else
                      f"{t['ns_total'] / 1e6:.2f} (1 pass)")
            lines.append(f"| {r['name']} ({r['export']['samples']} samples) | {t['tool']} | {t['frames']:,} | "
                         f"{t['ns_per_frame']:.1f} / {t['ns_per_frame_first_pass']:.1f} / {t['ns_per_frame_best_pass']:.1f} | "
                         f"{t['ns_per_sample']:.0f} | {passes} | "
                         f"{outcome_text(t['outcomes'])} | {agree} |")
    lines += ["", "Ratios of ns/frame, each as all passes / first pass / best pass (✓ target met, ✗ not):", "",
              ("| recording | ours | libunwind ÷ ours (target ≥ 25) | libdw ÷ ours (target ≥ 25) | "
               "ours ÷ frame pointers (target ≤ 3) | ours ÷ frame pointers, per sample (best pass) |"),
              "|---|---|---|---|---|---|"]
    for r in results["recordings"]:
        for backend, q in r["ratios"].items():
            def views(key: str, met, q: dict[str, Any] = q) -> str:
                return " / ".join(f"{q[v][key]:.1f}x {'✓' if met(q[v][key]) else '✗'}" for v in ("all", "first", "best"))

            lines.append(f"| {r['name']} | {backend} | {views('libunwind_over_ours', lambda x: x >= TARGET_PEER_RATIO)} | "
                         f"{views('libdw_over_ours', lambda x: x >= TARGET_PEER_RATIO)} | "
                         f"{views('ours_over_fp', lambda x: x <= TARGET_FP_RATIO)} | {q['ours_over_fp_per_sample']:.1f}x |")
    e = results.get("end_to_end")
    if e:
        lines += ["", (f"End to end on {os.path.basename(e['recording'])}, best of {len(e['ours_seconds'])}: "
                      f"`{e['ours_command']}` {e['ours_best'] * 1e3:.0f} ms, `{e['perf_command']}` "
                      f"{e['perf_best'] * 1e3:.0f} ms: perf script ÷ ours = {e['ratio']:.2f}x "
                      f"(target > 1: {yes_no(e['ratio'] > 1)}).")]
    return "\n".join(lines)


def rich_report(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 170)
    m = results["machine"]
    console.print(f"[bold]machine[/bold] {m['cpu_model']}, nproc {m['nproc']}, Linux {m['kernel']}, load "
                  f"{m['load_average_at_start'][0]:.2f} → {results['load_average_at_end'][0]:.2f}; {m['perf']}, "
                  f"libunwind {m['libunwind']}, libdw {m['libdw']}; fastunwind {m['fastunwind_commit']}")
    table = Table(title="Unwinding the same perf samples (ns per frame: lower is faster)", header_style="bold")
    for column in ("recording", "tool", "frames", "ns/frame", "first pass", "best pass", "ns/sample", "outcomes", "identical to ours",
                   "peer shorter", "ours shorter", "differ"):
        table.add_column(column, justify="left" if column in ("recording", "tool", "outcomes") else "right")
    for r in results["recordings"]:
        agreements = {a["peer"]: a for a in r["agreement"]}
        for t in r["tools"]:
            a = agreements.get(t["tool"])
            cells = ([f"{a['identical']}/{a['compared']}", str(a["peer_prefix_of_ours"]), str(a["ours_prefix_of_peer"]),
                      str(a["diverged"])] if a else ["", "", "", ""])
            table.add_row(r["name"], t["tool"], f"{t['frames']:,}", f"{t['ns_per_frame']:.1f}",
                          f"{t['ns_per_frame_first_pass']:.1f}", f"{t['ns_per_frame_best_pass']:.1f}", f"{t['ns_per_sample']:.0f}", outcome_text(t["outcomes"]), *cells)
        table.add_section()
    console.print(table)
    ratios = Table(title="Ratios of ns/frame: all passes / first pass / best pass "
                         "(targets: peers ÷ ours ≥ 25, ours ÷ frame pointers ≤ 3)", header_style="bold")
    for column in ("recording", "ours", "libunwind ÷ ours", "libdw ÷ ours", "ours ÷ fp"):
        ratios.add_column(column, justify="left" if column in ("recording", "ours") else "right")
    for r in results["recordings"]:
        for backend, q in r["ratios"].items():
            def colour(key: str, met, q: dict[str, Any] = q) -> str:
                return " / ".join(f"[{'green' if met(q[v][key]) else 'red'}]{q[v][key]:.1f}x[/]"
                                  for v in ("all", "first", "best"))

            ratios.add_row(r["name"], backend, colour("libunwind_over_ours", lambda x: x >= TARGET_PEER_RATIO),
                           colour("libdw_over_ours", lambda x: x >= TARGET_PEER_RATIO),
                           colour("ours_over_fp", lambda x: x <= TARGET_FP_RATIO))
    console.print(ratios)
    e = results.get("end_to_end")
    if e:
        console.print(f"[bold]end to end[/bold] {os.path.basename(e['recording'])}: fastunwind perf-script "
                      f"{e['ours_best'] * 1e3:.0f} ms, perf script {e['perf_best'] * 1e3:.0f} ms (best of "
                      f"{len(e['ours_seconds'])}): ratio {e['ratio']:.2f}x")
    for r in results["recordings"]:
        for a in r["agreement"]:
            for d in a["first_divergences"]:
                console.print(f"  {r['name']}: {a['peer']} differs at sample {d['perf_sample_index']} frame "
                              f"{d['frame']}: ours {d['ours']}, theirs {d['theirs']}")
    console.print("\n[bold]markdown[/bold]\n")
    print(markdown(results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="fastunwind's walker against libunwind, libdw and a frame-pointer walk on the same perf samples.",
        epilog="example: .venv/bin/python -m benchmarks.bench_unwind --repeat 10\n"
               "         .venv/bin/python -m benchmarks.bench_unwind my.data --json out.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recordings", nargs="*", help="perf.data files (default: record hackbench -T, c, python)")
    parser.add_argument("--repeat", type=int, default=10,
                        help="passes over the samples per tool and round (default 10)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, each running every tool once in turn (default 3: with --repeat 10, 30 passes "
                             "per tool, and the best pass is robust to a disturbed stretch)")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                        help="write every figure as JSON to FILE (or stdout, instead of the tables)")
    parser.add_argument("--reuse", action="store_true", help="reuse the default recordings if already made")
    parser.add_argument("--seconds", type=float, default=1.5, help="recording length of the default workloads")
    parser.add_argument("--end-to-end", default=None, metavar="RECORDING",
                        help="recording for the perf-script comparison (default: the hackbench one, or the first)")
    arguments = parser.parse_args(argv)
    if arguments.repeat < 1 or arguments.rounds < 1:
        parser.error("--repeat and --rounds must be at least 1")
    quiet = arguments.json == "-"

    def progress(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    os.makedirs(WORK, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(), "repeat": arguments.repeat, "rounds": arguments.rounds}
    recordings = [os.path.abspath(path) for path in arguments.recordings] or record_defaults(arguments.reuse,
                                                                                              arguments.seconds)
    peers = build_peers()
    results["recordings"] = [bench_recording(path, arguments.repeat, arguments.rounds, peers, progress) for path in recordings]
    e2e = arguments.end_to_end or next((p for p in recordings if "hackbench" in os.path.basename(p)), recordings[0])
    progress(f"end to end on {e2e}")
    results["end_to_end"] = end_to_end(e2e, END_TO_END_RUNS)
    results["load_average_at_end"] = os.getloadavg()
    if arguments.json == "-":
        json.dump(results, sys.stdout, indent=1)
        print()
        return 0
    if arguments.json:
        with open(arguments.json, "w") as f:
            json.dump(results, f, indent=1)
    rich_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
