"""The benchmarks (benchmarks/README.md). A package, so that they import each other and the tests'
helpers by name: run them from the repository root as `.venv/bin/python -m benchmarks.NAME`, as the
Makefile's bench targets do."""
