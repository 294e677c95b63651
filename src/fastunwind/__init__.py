"""fastunwind: fast, trustworthy DWARF CFI parsing, evaluation and stack unwinding for Linux x86-64.

`fastunwind.backtrace(pid)` (live.py) and `fastunwind.unwind_current_thread()` (stacks.py) give
symbolized thread stacks; they are imported on first use, so that importing the package (or any of
its modules) stays cheap.
"""

from __future__ import annotations


from fastunwind.errors import CfiError, ElfError, ExprError, FastunwindError, LiveError, NoUnwindInfo
from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any
    from fastunwind.live import backtrace
    from fastunwind.stacks import unwind_current_thread

__version__ = "0.1.0"

__all__ = ["CfiError", "ElfError", "ExprError", "FastunwindError", "LiveError", "NoUnwindInfo", "__version__",
           "backtrace", "unwind_current_thread"]


def __getattr__(name: str) -> Any:
    if name == "backtrace":
        from fastunwind.live import backtrace

        return backtrace
    if name == "unwind_current_thread":
        from fastunwind.stacks import unwind_current_thread

        return unwind_current_thread
    raise AttributeError(f"module 'fastunwind' has no attribute {name!r}")
