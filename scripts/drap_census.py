"""How common GCC's DRAP frames are on this machine, and what the compact table leaves slow.

For every ELF file with CFI (scripts/oracle_files.py, as `make sweep`; or the files named, or
`--sample N`): the DWARF rows (readelf -wF's rows) whose callee-saved registers are saved relative to
rbp (`DW_CFA_expression: DW_OP_breg6 (rbp): k`, the DRAP frames' saves), the FDEs holding them, those
rows that also save a callee-saved register relative to the CFA (r13, a DRAP register pushed before
the realignment), and the compact table's slow rows and the code bytes they cover (built afresh, not
from the cache). The figures of docs/DESIGN.md, "DRAP frames are rules". Exit status 0.

examples:
  python3 -m scripts.drap_census                   # every file (from the repository root)
  python3 -m scripts.drap_census --sample 200      # make sweep-check's sample
  python3 -m scripts.drap_census /usr/lib/x86_64-linux-gnu/libx265.so.199 --json
"""
from __future__ import annotations

import argparse
import array
import json
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from scripts import oracle_files

CALLEE_SAVED = (3, 6, 12, 13, 14, 15)  #: rbx, rbp, r12-r15 (DWARF numbers)
RBP_BASE = "DW_OP_breg6 RBP"  #: llvm-dwarfdump's text of DW_OP_breg6, as CfiTable.format_expression gives it


def saved_at_rbp(table, rule: tuple[int, int, int, int]) -> bool:
    """Whether a register rule is `DW_CFA_expression: DW_OP_breg6 (rbp): k` and nothing more."""
    from fastunwind import _core

    if rule[0] != _core.RULE_EXPRESSION:
        return False
    text = table.format_expression(rule[2], rule[3], "llvm")
    return text.startswith(RBP_BASE) and "," not in text


def census(path: str) -> dict[str, int | str]:
    from fastunwind import _core
    from fastunwind.address_space import ModuleImage

    counts: Counter[str] = Counter()
    try:
        image = ModuleImage.load(path)
        for table in (image.eh_frame, image.debug_frame):
            if table is None or table.entry_count == 0:
                continue
            states = array.array("I", table.rows()[1])
            _, first_bytes, count_bytes, _, _ = table.entry_arrays()
            first, count = array.array("I", first_bytes), array.array("I", count_bytes)
            forms: dict[int, tuple[bool, bool]] = {}  # state -> (rbp-relative saves, mixed with CFA-relative)
            for entry in range(table.entry_count):
                holds = False
                for row in range(first[entry], first[entry] + count[entry]):
                    state = states[row]
                    if state not in forms:
                        _, columns = table.state(state)
                        at_rbp = any(column in CALLEE_SAVED and saved_at_rbp(table, rule) for column, rule in columns)
                        at_cfa = any(rule[0] == _core.RULE_OFFSET and column in CALLEE_SAVED for column, rule in columns)
                        forms[state] = (at_rbp, at_rbp and at_cfa)
                    at_rbp, mixed = forms[state]
                    counts["rows"] += 1
                    counts["rbp_rows"] += at_rbp
                    counts["mixed_rows"] += mixed
                    holds |= at_rbp
                counts["fdes"] += count[entry] > 0
                counts["rbp_fdes"] += holds
        compact = image.load_compact_table(use_cache=False)
        if compact is not None:
            counts["slow_rows"] += compact.slow_row_count
            counts["slow_bytes"] += compact.slow_bytes
    except Exception as error:  # a file that cannot be read is counted, not fatal
        return {"path": path, "error": f"{type(error).__name__}: {error}"}
    return {"path": path, **counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    oracle_files.add_selection_arguments(parser, "count")
    args = parser.parse_args(argv)
    paths = oracle_files.selected_paths(args)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(census, paths, chunksize=8))
    totals: Counter[str] = Counter()
    for result in results:
        totals.update({k: v for k, v in result.items() if isinstance(v, int)})
    with_rbp = sorted((r for r in results if r.get("rbp_rows")), key=lambda r: -int(r["rbp_rows"]))
    summary = {"files": len(results), "failed": sum("error" in r for r in results), **totals,
               "files_with_rbp_rows": [{"path": r["path"], "rbp_rows": r["rbp_rows"], "rbp_fdes": r["rbp_fdes"]}
                                       for r in with_rbp]}
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"{summary['files']} files ({summary['failed']} failed): {totals['fdes']:,} FDEs, {totals['rows']:,} DWARF rows")
    print(f"rows with saves relative to rbp: {totals['rbp_rows']:,} in {totals['rbp_fdes']:,} FDEs of "
          f"{len(with_rbp)} files ({totals['mixed_rows']:,} also with a CFA-relative save)")
    print(f"compact tables: {totals['slow_rows']:,} slow rows over {totals['slow_bytes']:,} bytes of code")
    for r in with_rbp[:10]:
        print(f"  {r['rbp_rows']:6} rows {r['rbp_fdes']:5} FDEs  {r['path']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
