"""fastunwind's tests, in layers (STYLE.md habit 8), each in its own folder:

    unit/<stage>/  hand-built inputs for one pipeline stage (elf, cfi_parse, cfi_eval, lookup, cfi,
                   dwarf_expr, table, eh_elf, address_space, walk, perf_data, perf_regs, symbols,
                   cache, cli)
    golden/        diffs against the oracles: readelf, llvm-dwarfdump, perf script (cases/ holds the
                   hand-written assembly and C they assemble)
    property/      the C core against a small reference: the DWARF expression evaluator, compact and
                   compiled (eh_elf) steps against the interpreter
    integration/   real perf recordings and the CLI end to end
    fuzz/          hostile and mutated input, the walker's ASAN run
    support/       the helpers they share (`from tests.support.X import ...`); no test here

Every folder is a package, so pytest puts the repository root on the import path and test modules
import `tests.support`, `scripts` and `benchmarks` by their full names.
"""
