"""Golden diffs against the oracles: readelf, llvm-dwarfdump, perf script (tests/__init__.py)."""
