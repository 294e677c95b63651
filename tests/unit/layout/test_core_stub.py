"""src/fastunwind/_core.pyi types every name of the C extension and nothing else: its top-level names
equal `dir(_core)`'s (without dunders), both ways. A name added to a C method table, type or
constant list without the stub (or left in the stub after the C side dropped it) fails here.
stubtest cannot check the signatures: C functions without __text_signature__ have none to compare.
"""

from __future__ import annotations

import ast
from pathlib import Path

from fastunwind import _core

STUB = Path(_core.__file__).with_name("_core.pyi")


def stub_names() -> set[str]:
    """Names the stub declares at module level: classes, functions, constants. Its own type aliases
    (`_X = ...`, private) are left out."""
    names: set[str] = set()
    for node in ast.parse(STUB.read_text(), str(STUB)).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return {name for name in names if not name.startswith("_")}


def test_stub_declares_every_name_of_core() -> None:
    core = {name for name in dir(_core) if not name.startswith("__")}
    stub = stub_names()
    assert sorted(core - stub) == [], "in _core, missing from _core.pyi"
    assert sorted(stub - core) == [], "in _core.pyi, not in _core"
