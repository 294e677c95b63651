"""One module per CLI command; each has add_parser(subparsers) and run(args) -> exit status."""

from __future__ import annotations

import argparse
from typing import Any


def command_parser(subparsers: Any, name: str, summary: str, description: str | None, example: str
                   ) -> argparse.ArgumentParser:
    """A command's subparser: `summary` in the command list, the module's docstring as its
    description and its examples after the options, both kept as written."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=summary, description=description, epilog=example, formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser
