import json, os, statistics, sys
sys.path.insert(0, os.getcwd())
from benchmarks.bench_bpf import sign_test, median_interval
d = json.load(open(sys.argv[1])); pairs_spec = [p.split("/") for p in sys.argv[2].split(",")]
rounds = d["rounds"]
loads = [r["load"] for r in rounds]
print(f"{len(rounds)} rounds, load {min(loads):.1f}-{max(loads):.1f}; median CPU " + ", ".join(f"{n} {statistics.median(r[n]['cpu'] for r in rounds):.3f}" for n in d["names"]))
for a, b in pairs_spec:
    pairs = [(r[a]["cpu"], r[b]["cpu"]) for r in rounds]
    lo, hi, p = sign_test(pairs)
    med, l, h = median_interval([x / y for x, y in pairs])
    per = lambda x: (x - 1) * statistics.median(r[b]["cpu"] for r in rounds) * 1e3
    print(f"| {a} / {b} | {lo} | {hi} | {p:.2g} | {med:.4f} | {l:.4f}-{h:.4f} | {per(med):+.1f} ms ({per(l):+.1f} to {per(h):+.1f}) |")
