"""The repository's folders, named once: tests and helpers use these instead of counting
`Path(__file__).parents[N]`, which breaks whenever a file moves to another depth.
"""
from __future__ import annotations

from pathlib import Path

#: the checkout: tests/support/paths.py is two folders below it
REPO_ROOT = Path(__file__).resolve().parents[2]
#: the package's sources; subprocesses get it on PYTHONPATH, so they run this checkout's code even
#: when another fastunwind is installed
SRC = REPO_ROOT / "src"
TESTS = REPO_ROOT / "tests"
#: hand-written assembly and C cases diffed against readelf (tests/golden/cases/README.md)
CASES_DIR = TESTS / "golden" / "cases"
#: programs recorded with perf: workloads/Makefile's C workload, the real-binary corpus
#: (workloads/corpus/, scripts/corpus.py) and the symbol-name programs (workloads/symbols/)
WORKLOADS_DIR = REPO_ROOT / "workloads"
CORPUS_SOURCES = WORKLOADS_DIR / "corpus"
SYMBOL_PROGRAMS = WORKLOADS_DIR / "symbols"
FUZZ_DIR = REPO_ROOT / "native" / "fuzz"
#: the `fastunwind` command (native/cli), which setup.py builds beside the extension
LAUNCHER = SRC / "fastunwind" / "launcher"
