"""Helpers shared by the test layers, imported by their full names (`from tests.support.tools import
run_fastunwind`): builders of hand-made input, oracles' parsers, the perf recording fixtures
(recordings.py, registered by tests/conftest.py), the mutation workers (run with `python -m`) and the
repository's paths (paths.py). hostile_builder.py stays standard library only: native/fuzz/make_corpus.py
imports it before the venv exists, and so this file imports nothing.
"""
