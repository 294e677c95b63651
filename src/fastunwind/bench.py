"""Compatibility name: docs/BENCHMARKS.md documents `fastunwind.bench.time_backend`. The code is in
perf/bench.py."""

from fastunwind.perf.bench import BackendTiming, differing_samples, evict_caches, time_backend

__all__ = ["BackendTiming", "differing_samples", "evict_caches", "time_backend"]
