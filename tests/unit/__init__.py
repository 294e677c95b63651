"""Tests of one pipeline stage each, on hand-built inputs (tests/__init__.py)."""
