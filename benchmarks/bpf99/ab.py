"""EXPERIMENT (branch bpf99, not kept): paired rounds of variants of `record --bpf` at 99 Hz and of perf
record, in a shuffled order each round, on the compiler workload; the target's CPU from getrusage of a
wrapper (wrap.py), with its context switches and migrations. As root, from the tree's root:

    AB_RT=1 .venv/bin/python benchmarks/bpf99/ab.py SECONDS ROUNDS OUT.json VARIANT,VARIANT,...
    .venv/bin/python benchmarks/bpf99/analyze.py OUT.json A/B,A/B,...

AB_RT=CPU runs the profiled program SCHED_FIFO 10 pinned to CPU (no other job preempts it: the quiet
machine's case on a loaded one). Variants: variants.py."""
import json, math, os, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fastunwind import bpf
from fastunwind.bpf import BpfRecorder
from scripts import record_workloads as rw

WRAP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrap.py")
STATS = Path("/proc/sys/kernel/bpf_stats_enabled")

def wrapped(cmd, f):
    return [sys.executable, WRAP, str(f), *cmd]

def run_bpf(cmd, hz, work, stats="1", rescan=0.5, poll=0.1, extra=None):
    f = work / "cpu"
    saved = STATS.read_text().strip()
    STATS.write_text(stats)
    bpf.RESCAN_SECONDS, bpf.POLL_SECONDS = rescan, poll
    try:
        rec = BpfRecorder(frequency=hz)
        if extra:
            extra(rec)
        rec.preload(shutil.which(cmd[0]))
        child = rec.launch(wrapped(cmd, f))
        rec.run(lambda: child.poll() is not None)
    finally:
        bpf.RESCAN_SECONDS, bpf.POLL_SECONDS = 0.5, 0.1
        STATS.write_text(saved)
    return json.loads(f.read_text())

def run_perf(cmd, hz, work, stacks=True, extra_args=()):
    f = work / "cpu"
    cg = ["--call-graph", "dwarf"] if stacks else []
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), *cg, *extra_args, "-o", str(work / "perf.data"),
                    "--", *wrapped(cmd, f)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(f.read_text())

def run_none(cmd, work):
    f = work / "cpu"
    subprocess.run(wrapped(cmd, f), check=True)
    return json.loads(f.read_text())

def sign(pairs):
    b = sum(x < y for x, y in pairs); a = sum(x > y for x, y in pairs); n = a + b
    if not n: return b, a, 1.0
    return b, a, min(1.0, 2 * sum(math.comb(n, k) for k in range(min(a, b) + 1)) / 2 ** n)

def report(rounds, names, base):
    for key in ("cpu", "stime", "nvcsw", "nivcsw", "se.nr_migrations", "minflt", "wall"):
        print(f"  {key}: medians " + ", ".join(f"{n} {statistics.median(r[n].get(key, 0) for r in rounds):.4g}" for n in names))
    for n in names:
        if n == base: continue
        pairs = [(r[n]["cpu"], r[base]["cpu"]) for r in rounds]
        b, a, p = sign(pairs)
        ratios = sorted(x / y for x, y in pairs)
        print(f"  cpu {n} / {base}: lower {b} higher {a} p={p:.3g} median {statistics.median(ratios):.4f} mean {statistics.mean(ratios):.4f}")

def main():
    seconds = float(sys.argv[1]); rounds = int(sys.argv[2]); out = sys.argv[3]; names = sys.argv[4].split(",")
    base = names[0]
    cmd = rw.WORKLOADS["compiler"].command(rw.Settings(seconds=seconds))
    import variants
    work = Path(tempfile.mkdtemp())
    measured = []
    import random; rng = random.Random(int(os.environ.get("SEED", "1")))
    for i in range(rounds):
        order = list(names); rng.shuffle(order)
        r = {"load": os.getloadavg()[0], "order": order}
        for n in order:
            r[n] = variants.VARIANTS[n](cmd=cmd, work=work)
        measured.append(r)
        Path(out).write_text(json.dumps({"cmd": cmd, "names": names, "rounds": measured}))
        if (i + 1) % 10 == 0 or i + 1 == rounds:
            print(f"after {i+1} rounds (load {r['load']:.1f}, {time.strftime('%H:%M:%S')}):", flush=True)
            report(measured, names, base)
            sys.stdout.flush()

if __name__ == "__main__":
    main()
