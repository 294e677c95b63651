"""`python -m fastunwind` runs the CLI; so does `fastunwind-python`, the script pip installs (the
Python CLI the launcher hands the command lines it does not serve itself to)."""

from __future__ import annotations

import gc

from fastunwind.typecheck import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NoReturn


def run() -> NoReturn:
    # Start-up (imports, the parser) makes thousands of objects and no garbage cycles: without the
    # cyclic collector it costs ~6M instructions less (~4% of a perf-script run on a 100 MB
    # recording); cli.main turns it back on before a command runs.
    gc.disable()
    from fastunwind.cli import exit_now, main

    exit_now(main())


if __name__ == "__main__":
    run()
