"""Real perf recordings and the CLI end to end (tests/__init__.py)."""
