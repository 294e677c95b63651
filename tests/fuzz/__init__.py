"""Hostile, mutated and sanitizer-checked input (tests/__init__.py)."""
