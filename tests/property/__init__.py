"""Property tests: the C core against a small reference implementation (tests/__init__.py)."""
