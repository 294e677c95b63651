"""fastunwind: fast, trustworthy DWARF CFI parsing, evaluation and stack unwinding for Linux x86-64."""

from fastunwind.errors import CfiError, ElfError, ExprError, FastunwindError, NoUnwindInfo

__version__ = "0.1.0"

__all__ = ["CfiError", "ElfError", "ExprError", "FastunwindError", "NoUnwindInfo", "__version__"]
