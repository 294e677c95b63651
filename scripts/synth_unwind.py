"""Unwinding through code whose CFI is missing or wrong: record programs that spend their time there
and count, for each `--synth` mode, how many of the samples that land in that code unwind to the
outermost frame, and whether every other sample unwinds exactly as with the CFI alone.

Two programs: a seeded one built here (assembly without CFI, assembly whose CFI is wrong in the ways
tests/integration/test_check_seeded.py seeds, inline assembly that moves rsp behind gcc's CFI, a
function that keeps its frame in rcx across a call as x264's do, each a loop the samples land in,
called from C with CFI), and an ffmpeg encode of a synthetic clip with
libx264 (Debian's ffmpeg: x264's and FFmpeg's assembly has no CFI). "Those functions" are what
code no FDE covers (x264's assembly has no symbols left to name it: it is reached through function
pointers) and the FDEs `fastunwind check` judges `mismatch`. The encode is recorded twice: as it
runs, and with its main thread's stack made present first (STACK_PREFAULT_BYTES): perf's stack copy
ends at the first page that is not, which x264's large stack arrays leave between its frames.

    python -m scripts.synth_unwind [--seconds S] [--out DIR]     (make synth-unwind)

prints, per program and mode, the samples landing there, how many of them end at an outermost
frame (one whose declared CFI says the stack ends there, as crt1's `_start` and glibc's `clone3`
do, or the process's entry code with rbp 0), how they ended otherwise, the frames through synthesized
or corrected rows, samples whose stack ended `end` elsewhere ("false ends": must be none), and
samples without a derived row whose frames differ from the DWARF backend's ("differing": must be
none); then the CPU time to build the compact tables of the files each recording maps with each
mode, and to load them cached. Exit status 1 if false ends or differing samples are found, or if
`repair` completes fewer than REQUIRED_PERCENT of the landed samples (of those whose walk stayed
within the stack dump, for the encode recorded as it runs).
"""

from __future__ import annotations

import argparse
import array
import bisect
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# the 8 KiB perf records by default cut x264's deep frames short: the largest dump perf allows
STACK_BYTES = 65528
#: The main thread's stack made present before the program runs (STACK_PREFAULT_C, LD_PRELOADed):
#: perf copies the user stack in the sampling interrupt, where a page that is not present cannot be
#: faulted in, so the copy ends at the first such page above rsp; x264's encoder keeps large arrays
#: on the stack that it does not touch whole, and leaves such pages between its frames.
STACK_PREFAULT_BYTES = 512 * 1024
STACK_PREFAULT_C = r"""
#include <alloca.h>
#include <string.h>
/* at load, before main: the stack below touched, its pages present from then on */
__attribute__((constructor)) static void touch_stack(void)
{
    char *below = alloca(STACK_PREFAULT_BYTES);
    memset(below, 1, STACK_PREFAULT_BYTES);
    __asm__ volatile("" : : "r"(below) : "memory");
}
"""
FREQUENCY = 1000
PAGE_BYTES = 4096
#: what `repair` must reach on the landed samples (issue 23)
REQUIRED_PERCENT = 95.0

SEEDED_ASSEMBLY = r"""
        .text
        .globl spin_no_cfi, spin_off_by_8, spin_missing_adjust, spin_wrong_slot, no_cfi_calls, spin_by_pointer
        .globl spin_realigned

        .type spin_no_cfi, @function
spin_no_cfi:                      # no CFI at all: saves registers, keeps a frame, loops
        push %rbx
        push %r12
        sub $24, %rsp
        mov %rdi, %rax
1:      add %rax, %rbx
        mov %rbx, 8(%rsp)
        dec %rax
        jnz 1b
        add $24, %rsp
        pop %r12
        pop %rbx
        ret
        .size spin_no_cfi, .-spin_no_cfi

        .type spin_off_by_8, @function
spin_off_by_8:                    # the CFA declared 8 too far after the push
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 24
        .cfi_offset %rbx, -16
        mov %rdi, %rax
1:      add %rax, %rbx
        dec %rax
        jnz 1b
        pop %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size spin_off_by_8, .-spin_off_by_8

        .type spin_missing_adjust, @function
spin_missing_adjust:              # sub rsp without .cfi_adjust_cfa_offset
        .cfi_startproc
        sub $40, %rsp
        mov %rdi, %rax
1:      mov %rax, (%rsp)
        dec %rax
        jnz 1b
        add $40, %rsp
        ret
        .cfi_endproc
        .size spin_missing_adjust, .-spin_missing_adjust

        .type spin_wrong_slot, @function
spin_wrong_slot:                  # rbx declared at CFA-24, the push put it at CFA-16
        .cfi_startproc
        push %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -24
        mov %rdi, %rax
1:      add %rax, %rbx
        dec %rax
        jnz 1b
        pop %rbx
        .cfi_def_cfa_offset 8
        .cfi_restore %rbx
        ret
        .cfi_endproc
        .size spin_wrong_slot, .-spin_wrong_slot

spin_by_pointer:                  # no CFI, no function symbol: C reaches it through a pointer
        push %rbp                 # (check finds it from the lea that takes its address)
        mov %rsp, %rbp
        push %r13
        mov %rdi, %rax
1:      add %rax, %r13
        dec %rax
        jnz 1b
        pop %r13
        pop %rbp
        ret

        .type no_cfi_calls, @function
no_cfi_calls:                     # no CFI, in the middle of the stack: calls C that loops
        push %rbx
        sub $16, %rsp
        mov %rdi, %rbx
        call spin_c
        add $16, %rsp
        pop %rbx
        ret
        .size no_cfi_calls, .-no_cfi_calls

        .type spin_realigned, @function
spin_realigned:                   # no CFI: the stack realigned, the entry rsp kept in rcx across a call
        mov %rsp, %rcx            # to a helper that leaves rcx alone (x264's x86inc.asm functions)
        and $-32, %rsp
        sub $64, %rsp
        mov %rdi, %rax
        call 2f                   # the helper loops
        mov %rdi, %rax
1:      mov %rax, 8(%rsp)         # and so does the code after the call
        dec %rax
        jnz 1b
        mov %rcx, %rsp
        ret
        .size spin_realigned, .-spin_realigned
2:      mov %rax, %rdx            # no symbol: found as a call target
3:      dec %rdx
        jnz 3b
        ret
"""

SEEDED_C = r"""
#include <stdlib.h>
extern void spin_no_cfi(long), spin_off_by_8(long), spin_missing_adjust(long), spin_wrong_slot(long);
extern void no_cfi_calls(long), spin_realigned(long);
__attribute__((noinline)) long spin_c(long n) {           /* gcc's CFI, called from code without */
    long total = 0;
    for (long i = 0; i < n; i++) {
        total += i * n;
        __asm__ volatile("" : "+r"(total));
    }
    return total;
}
__attribute__((noinline)) void inline_asm_spin(long n) {  /* rsp moves in the asm, the CFI does not know */
    __asm__ volatile("sub $64, %%rsp\n"
                     "1: movq %0, (%%rsp)\n"
                     "dec %0\n"
                     "jnz 1b\n"
                     "add $64, %%rsp\n" : "+r"(n) : : "memory");
}
extern void spin_by_pointer(long);
void (*volatile spin_pointer)(long);
__attribute__((noinline)) void round_of_calls(long n) {
    spin_pointer = spin_by_pointer;                       /* lea: its address taken in code with CFI */
    spin_pointer(n);
    spin_no_cfi(n);
    spin_off_by_8(n);
    spin_missing_adjust(n);
    spin_wrong_slot(n);
    no_cfi_calls(n);
    spin_realigned(n);
    inline_asm_spin(n);
}
int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 50;
    for (long r = 0; r < rounds; r++)
        round_of_calls(2000000);
    return 0;
}
"""


def build_seeded(directory: Path) -> Path:
    """The seeded program, built in `directory` (gcc -O2: no frame pointers)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "seeded_spin.S").write_text(SEEDED_ASSEMBLY)
    (directory / "seeded_spin.c").write_text(SEEDED_C)
    program = directory / "seeded_spin"
    built = subprocess.run(["gcc", "-O2", "-o", str(program), str(directory / "seeded_spin.S"),
                            str(directory / "seeded_spin.c")], capture_output=True, text=True)
    if built.returncode:
        raise RuntimeError(f"gcc failed:\n{built.stderr}")
    return program


def build_stack_prefault(directory: Path) -> Path:
    """The library that makes STACK_PREFAULT_BYTES of the main thread's stack present (LD_PRELOAD)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "stack_prefault.c").write_text(STACK_PREFAULT_C)
    library = directory / "stack_prefault.so"
    built = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", f"-DSTACK_PREFAULT_BYTES={STACK_PREFAULT_BYTES}",
                            "-o", str(library), str(directory / "stack_prefault.c")], capture_output=True, text=True)
    if built.returncode:
        raise RuntimeError(f"gcc failed:\n{built.stderr}")
    return library


def seeded_command(program: Path, seconds: float) -> list[str]:
    """About `seconds` of the seeded program's loops here (a round takes ~12 ms on a 3 GHz core)."""
    return [str(program), str(max(1, round(seconds / 0.012)))]


def ffmpeg_command(directory: Path, seconds: float) -> list[str]:
    """An x264 encode of ffmpeg's synthetic test pattern, one thread, about `seconds` of work."""
    frames = max(5, round(seconds * 40))
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
            "testsrc=size=640x360:rate=25", "-frames:v", str(frames), "-c:v", "libx264", "-threads", "1",
            str(directory / "encoded.mp4")]


def record(command: list[str], data_file: Path, preload: Path | None = None) -> None:
    """`perf record --call-graph dwarf` of `command` into `data_file` (with `preload` in its
    LD_PRELOAD); RuntimeError with perf's message if it fails."""
    environment = ["env", f"LD_PRELOAD={preload}"] if preload else []
    ran = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(FREQUENCY), "--call-graph",
                          f"dwarf,{STACK_BYTES}", "-o", str(data_file), "--", *environment, *command],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if ran.returncode:
        raise RuntimeError(f"perf record failed ({ran.returncode}): {ran.stderr.strip()}")


def mismatch_ranges(path: str) -> list[tuple[int, int]]:
    """The FDEs `fastunwind check` judges `mismatch` in the file at `path`, sorted (svma)."""
    from fastunwind.check import check_file

    return sorted((v.pc_begin, v.pc_end) for v in check_file(path).verdicts() if v.verdict == "mismatch")


def in_ranges(ranges: list[tuple[int, int]], address: int) -> bool:
    i = bisect.bisect_right(ranges, (address, 2**64)) - 1
    return i >= 0 and ranges[i][0] <= address < ranges[i][1]


@dataclass
class ModeCount:
    """What one mode's walks of a recording found (see the module's docstring)."""

    mode: str
    samples: int = 0
    landed: int = 0
    complete: int = 0
    landed_outcomes: Counter[str] = field(default_factory=Counter)
    synthesized_frames: int = 0
    corrected_frames: int = 0
    derived_samples: int = 0
    false_ends: int = 0
    differing: int = 0
    #: landed samples ending `truncated` whose dump perf cut short of STACK_BYTES at a page boundary:
    #: at a page of the stack that was not present (STACK_PREFAULT_BYTES says why)
    cut_at_absent_page: int = 0

    @property
    def complete_percent(self) -> float:
        return 100.0 * self.complete / self.landed if self.landed else 0.0

    @property
    def within_dump_percent(self) -> float:
        """Of the landed samples whose walk did not run past the stack dump (perf copies at most
        STACK_BYTES of stack, and stops at the first page that is not present), the complete ones:
        what any unwinder could have completed from the recording."""
        walked = self.landed - self.landed_outcomes["truncated"]
        return 100.0 * self.complete / walked if walked else 0.0


class _Outermost:
    """Whether a frame is an outermost one: its step is the process's entry code, or a declared row
    without a return address (DW_CFA_undefined rip: crt1's _start, glibc's clone3), by the tables
    of the CFI alone."""

    def __init__(self) -> None:
        self._rules: dict[tuple[str, int], bool] = {}

    def __call__(self, core: object, image: object, lookup: int, bias: int) -> bool:
        if core.step_source(lookup) == "entry_code":  # type: ignore[attr-defined]
            return True
        table = image.compact  # type: ignore[attr-defined]
        found = table.lookup(lookup - bias) if table is not None else None
        if found is None:
            return False
        key = (image.path, found[1])  # type: ignore[attr-defined]
        if key not in self._rules:
            rule = table.rule(found[1])
            self._rules[key] = rule["ra_offset"] is None and rule["cfa"] not in ("no_info", "slow")
        return self._rules[key]


def analyse(data_file: Path, modes: tuple[str, ...] = ("off", "missing", "repair")) -> list[ModeCount]:
    """Walk every sample of the recording with each mode (backend auto) and with the DWARF
    backend, and count what ModeCount states."""
    from fastunwind import _core
    from fastunwind.address_space import ImageCache
    from fastunwind.perf.data import PerfData
    from fastunwind.perf.replay import replay
    from fastunwind.perf.walk import walk_samples
    from fastunwind.walk import FRAME_KINDS, OUTCOMES

    perf = PerfData.open(str(data_file))
    replayed = replay(perf, ImageCache())
    spaces = replayed.session.spaces
    space_ids = replayed.space_ids.tobytes()
    outermost = _Outermost()
    plain = [s.to_core("auto", "off") for s in spaces]  # the CFI alone: what has none, what ends
    mismatches: dict[str, list[tuple[int, int]]] = {}
    derived = _core.FRAME_CORRECTED | _core.FRAME_SYNTHESIZED
    return_address_kinds = {FRAME_KINDS.index("cfi"), FRAME_KINDS.index("frame_pointer")}

    def walk(backend: str, synth: str) -> tuple[bytes, array.array[int], array.array[int], bytes, bytes, bytes]:
        batch = walk_samples(perf.native, space_ids, [s.to_core(backend, synth) for s in spaces])
        starts, ips, modules = array.array("I"), array.array("Q"), array.array("I")
        starts.frombytes(batch.frame_starts)
        ips.frombytes(batch.ips)
        modules.frombytes(batch.modules)
        return batch.outcomes, starts, ips, modules.tobytes(), batch.kinds, batch.flags

    reference_outcomes, reference_starts, reference_ips, _, _, _ = walk("dwarf", "off")
    counts = []
    for mode in modes:
        outcomes, starts, ips, module_bytes, kinds, flags = walk("auto", mode)
        modules = array.array("I")
        modules.frombytes(module_bytes)
        count = ModeCount(mode, synthesized_frames=flags.count(_core.FRAME_SYNTHESIZED),
                          corrected_frames=flags.count(_core.FRAME_CORRECTED))
        for sample, code in enumerate(outcomes):
            if code >= len(OUTCOMES):
                continue  # not walked (no user registers, or outside every address space)
            count.samples += 1
            frames = range(starts[sample], starts[sample + 1])
            space = spaces[replayed.space_ids[sample]]
            touched = any(flags[f] & derived for f in frames)
            count.derived_samples += touched
            if not touched and (code != reference_outcomes[sample] or ips[frames.start:frames.stop] !=
                                reference_ips[reference_starts[sample]:reference_starts[sample + 1]]):
                count.differing += 1
            ended_outermost = False
            if len(frames):
                last = frames[-1]
                mapping = space.mappings[modules[last]] if modules[last] < len(space.mappings) else None
                if mapping is not None and mapping.image is not None:
                    lookup = ips[last] - (1 if kinds[last] in return_address_kinds else 0)
                    ended_outermost = outermost(plain[replayed.space_ids[sample]], mapping.image, lookup, mapping.bias)
            if OUTCOMES[code] == "end" and not ended_outermost:
                count.false_ends += 1
            first = frames.start if len(frames) else None
            if first is None or modules[first] >= len(space.mappings):
                continue
            mapping = space.mappings[modules[first]]
            if mapping.image is None:
                continue
            path = mapping.image.path
            if path not in mismatches:
                mismatches[path] = mismatch_ranges(path)
            without_cfi = plain[replayed.space_ids[sample]].step_source(ips[first]) in ("no_info", "entry_code")
            if not without_cfi and not in_ranges(mismatches[path], ips[first] - mapping.bias):
                continue
            count.landed += 1
            outcome = OUTCOMES[code]
            complete = outcome == "end" and ended_outermost
            count.complete += complete
            count.landed_outcomes["complete" if complete else outcome] += 1
            if outcome == "truncated":
                recorded = perf.sample(sample)
                dump_end = (recorded.reg("sp") or 0) + len(recorded.stack)
                count.cut_at_absent_page += len(recorded.stack) < STACK_BYTES and dump_end % PAGE_BYTES == 0
        counts.append(count)
    return counts


def report(name: str, counts: list[ModeCount]) -> str:
    lines = [f"{name}: {counts[0].samples} samples walked",
             f"  {'synth':8} {'landed':>7} {'to outermost':>14} {'not truncated':>13}  "
             f"{'through synthesized/corrected rows':>36}  {'false ends':>10} {'differing':>9}  "
             "other outcomes of the landed"]
    for c in counts:
        others = ", ".join(f"{k} {v}" for k, v in c.landed_outcomes.most_common() if k != "complete") or "-"
        cut = f" ({c.cut_at_absent_page} of the truncated cut at a page not present)" if c.cut_at_absent_page else ""
        lines.append(f"  {c.mode:8} {c.landed:7} {c.complete:6} ({c.complete_percent:5.1f}%) {c.within_dump_percent:12.1f}%  "
                     f"{c.synthesized_frames:>14} / {c.corrected_frames:<6} frames in {c.derived_samples:6} samples  "
                     f"{c.false_ends:10} {c.differing:9}  {others}{cut}")
    return "\n".join(lines)


def failures(counts: list[ModeCount], within_dump: bool = False) -> list[str]:
    """What the counts break of the module's promises (empty: none); `within_dump`: `repair`'s
    figure is taken over the landed samples whose walk stayed within the stack dump perf copied
    (a recording whose dumps perf cut short, docs/DESIGN.md says why that is the fair count)."""
    problems = []
    for c in counts:
        if c.mode != "off" and c.false_ends:
            problems.append(f"{c.mode}: {c.false_ends} stacks ended `end` short of an outermost frame")
        if c.differing:
            problems.append(f"{c.mode}: {c.differing} samples without a derived row differ from the DWARF backend")
        figure = c.within_dump_percent if within_dump else c.complete_percent
        if c.mode == "repair" and figure < REQUIRED_PERCENT:
            problems.append(f"repair: {c.complete_percent:.1f}% of the landed samples complete, "
                            f"{c.within_dump_percent:.1f}% of those within the stack dump "
                            f"(at least {REQUIRED_PERCENT}% required of {'those' if within_dump else 'all'})")
    return problems


def table_costs(paths: list[str], repeat: int = 3) -> dict[str, tuple[float, float]]:
    """CPU seconds (best of `repeat`) to build the compact tables of every file of `paths` with each
    synth mode, from the files (cold: parsed, checked and synthesized here) and from the cache."""
    import time

    from fastunwind.address_space import ModuleImage
    from fastunwind.tables import compact

    costs = {}
    with tempfile.TemporaryDirectory(prefix="synth-tables-") as cache:
        for mode in compact.SYNTH_MODES:
            for path in paths:  # untimed: fills the cache
                compact.load(ModuleImage.load(path), cache, synth=mode)
            best = [float("inf"), float("inf")]
            for _ in range(repeat):
                for which, use_cache in ((0, False), (1, True)):
                    images = [ModuleImage.load(path) for path in paths]
                    started = time.process_time()
                    for image in images:
                        compact.load(image, cache, use_cache=use_cache, synth=mode)
                    best[which] = min(best[which], time.process_time() - started)
            costs[mode] = (best[0], best[1])
    return costs


def mapped_files(data_file: Path) -> list[str]:
    """The files a recording maps (as the replay finds them)."""
    from fastunwind.address_space import ImageCache
    from fastunwind.perf.data import PerfData
    from fastunwind.perf.replay import replay

    spaces = replay(PerfData.open(str(data_file)), ImageCache()).session.spaces
    return sorted({m.image.path for s in spaces for m in s.mappings if m.image is not None})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of each program (default: 3)")
    parser.add_argument("--out", type=Path, help="keep the programs and recordings here (default: a temporary directory)")
    args = parser.parse_args(argv)
    if not shutil.which("perf"):
        print("synth_unwind: perf is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="synth-unwind-") as scratch:
        directory = args.out or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        # name: (command, what to LD_PRELOAD, whether repair's figure counts only walks within the dump)
        programs: dict[str, tuple[list[str], Path | None, bool]] = {
            "seeded": (seeded_command(build_seeded(directory), args.seconds), None, False)}
        if shutil.which("ffmpeg"):
            encode = ffmpeg_command(directory, args.seconds)
            programs["ffmpeg-x264"] = (encode, None, True)
            programs["ffmpeg-x264-prefaulted"] = (encode, build_stack_prefault(directory), False)
        else:
            print("synth_unwind: ffmpeg is not installed (make setup installs it): the encode is skipped",
                  file=sys.stderr)
        problems = []
        for name, (command, preload, within_dump) in programs.items():
            data_file = directory / f"{name}.data"
            record(command, data_file, preload)
            counts = analyse(data_file)
            print(report(name, counts), flush=True)
            files = mapped_files(data_file)
            costs = table_costs(files)
            print(f"  compact tables of its {len(files)} files, CPU s (best of 3), built / from the cache: " +
                  ", ".join(f"{mode} {cold:.2f} / {cached:.3f}" for mode, (cold, cached) in costs.items()), flush=True)
            problems += [f"{name}: {p}" for p in failures(counts, within_dump)]
    for problem in problems:
        print(f"synth_unwind: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
