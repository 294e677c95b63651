"""`fastunwind check` on EVERY ELF file with CFI on this machine (`make sweep-check`): counts.

Files come from scripts/oracle_files.py (the same enumeration as `make sweep`), largest first, checked
in JOBS worker processes. Printed: files checked and failed, FDEs by verdict, the share of FDEs
decided and of instructions of decided FDEs agreeing, uncovered ranges, the commonest reasons for
undecided FDEs, and the files with mismatches. Exit status 0 (counts are the result, not a test).

examples:
  python3 -m scripts.sweep_check                     # every file (from the repository root)
  python3 -m scripts.sweep_check --sample 200        # the suite's fixed sample of 200 files + named ones
  python3 -m scripts.sweep_check --json > c.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from scripts import oracle_files


def check_one(path: str) -> dict[str, Any]:
    from fastunwind.check import check_file, reason_class

    try:
        result = check_file(path)
    except Exception as error:  # a file the checker cannot read is counted, not fatal
        return {"path": path, "error": f"{type(error).__name__}: {error}"}
    counts = result.counts()
    reasons = Counter(reason_class(v.reason) for v in result.verdicts() if v.verdict == "undecided")
    return {"path": path, "fdes": counts.fdes, "instructions_agree": counts.instructions_agree,
            "instructions_mismatch": counts.instructions_mismatch, "instructions_unknown": counts.instructions_unknown,
            "uncovered": counts.uncovered, "reasons": dict(reasons)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    oracle_files.add_selection_arguments(parser, "check")
    args = parser.parse_args(argv)
    paths = oracle_files.selected_paths(args)
    started = time.perf_counter()
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(check_one, path) for path in paths]
        for done, future in enumerate(as_completed(futures), 1):
            results.append(future.result())
            if sys.stderr.isatty() and done % 20 == 0:
                print(f"\r  {done}/{len(paths)} files", end="", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - started
    ok = [r for r in results if "error" not in r]
    fdes = Counter()
    reasons: Counter[str] = Counter()
    agree = mismatch = unknown = uncovered = 0
    for r in ok:
        fdes.update(r["fdes"])
        reasons.update(r["reasons"])
        agree += r["instructions_agree"]
        mismatch += r["instructions_mismatch"]
        unknown += r["instructions_unknown"]
        uncovered += r["uncovered"]
    total = sum(fdes.values())
    summary = {
        "files": len(results), "failed": len(results) - len(ok), "seconds": round(seconds, 1), "fdes": dict(fdes),
        "decided_percent": round(100.0 * (fdes["agree"] + fdes["mismatch"]) / total, 3) if total else 100.0,
        "agreement_percent": round(100.0 * agree / (agree + mismatch + unknown), 4) if agree + mismatch + unknown else 100.0,
        "uncovered": uncovered,
        "files_with_mismatches": sorted(((r["fdes"]["mismatch"], r["path"]) for r in ok if r["fdes"]["mismatch"]),
                                        reverse=True),
        "undecided_reasons": reasons.most_common(15),
        "failures": [(r["path"], r["error"]) for r in results if "error" in r],
    }
    if args.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
        return 0
    print(f"\n{summary['files']} files ({summary['failed']} failed) in {seconds:.1f} s; {total} FDEs: "
          f"{fdes['agree']} agree, {fdes['mismatch']} mismatch, {fdes['undecided']} undecided "
          f"({summary['decided_percent']}% decided); instructions of decided FDEs: {agree} of "
          f"{agree + mismatch + unknown} agree ({summary['agreement_percent']}%); {uncovered} uncovered ranges")
    print(f"files with mismatches: {len(summary['files_with_mismatches'])}")
    for count, path in summary["files_with_mismatches"][:25]:
        print(f"  {count:>6}  {path}")
    print("undecided, by reason:")
    for reason, count in summary["undecided_reasons"]:
        print(f"  {count:>6}  {reason}")
    for path, error in summary["failures"][:20]:
        print(f"  failed: {path}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
