"""The launcher (native/cli) reads only options the Python CLI has, with the same meaning: every
row of its option tables (arguments.c) is an option of that verb's Python parser taking the same
kind of value, so that a command line it serves means what the Python CLI would make of it."""

from __future__ import annotations

import argparse
import re

import pytest

from fastunwind import cli
from fastunwind._core import COMPACT_SYNTH_MODES
from tests.support.paths import REPO_ROOT

ARGUMENTS = REPO_ROOT / "native" / "cli" / "arguments.c"
#: the verbs the launcher serves
VERBS = ["backtrace", "core", "perf-script", "report"]
#: a table: `static const fu_cli_option BACKTRACE_OPTIONS[] = { ... };`
TABLE = re.compile(r"static const fu_cli_option (\w+)_OPTIONS\[\] = \{(.*?)\n\};", re.DOTALL)
ROW = re.compile(r'\{(NULL|"(-\w)"), "(--[\w-]+)", (FU_CLI_\w+)\}')


def launcher_tables() -> dict[str, list[tuple[str | None, str, str]]]:
    tables = {}
    for verb, body in TABLE.findall(ARGUMENTS.read_text()):
        tables[verb.lower().replace("_", "-")] = [(short or None, long, kind) for _, short, long, kind in ROW.findall(body)]
    return tables


def subparser(verb: str) -> argparse.ArgumentParser:
    parser = cli.build_parser(verb)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = action.choices[verb]
    return found


def kind_of(action: argparse.Action) -> str:
    """The launcher's name (arguments.h fu_cli_value) of what the Python option takes."""
    if isinstance(action, argparse._StoreTrueAction):
        return "FU_CLI_FLAG"
    if isinstance(action, argparse._StoreAction) and tuple(action.choices or ()) == tuple(COMPACT_SYNTH_MODES):
        return "FU_CLI_SYNTH"
    if isinstance(action, argparse._AppendAction) and action.type is int:
        return "FU_CLI_INT_APPEND"
    if isinstance(action, argparse._StoreAction) and action.type is int:
        return "FU_CLI_INT"
    if isinstance(action, argparse._StoreAction) and action.type is None and action.nargs is None:
        return "FU_CLI_PATH"
    return f"something else ({type(action).__name__}, type {action.type})"


def test_the_tables_are_read() -> None:
    assert sorted(launcher_tables()) == ["backtrace", "core", "perf-script", "report"]
    assert all(rows for rows in launcher_tables().values())


@pytest.mark.parametrize("verb", VERBS)
def test_every_launcher_option_is_the_python_parsers(verb: str) -> None:
    actions = {name: action for action in subparser(verb)._actions for name in action.option_strings}
    for short, long, kind in launcher_tables()[verb]:
        assert long in actions, f"{verb} {long}: not an option of the Python CLI"
        action = actions[long]
        assert kind_of(action) == kind, f"{verb} {long}: the launcher reads {kind}, Python {kind_of(action)}"
        assert [s for s in action.option_strings if not s.startswith("--")] == ([short] if short else [])


def test_core_has_one_positional_file_and_the_others_none() -> None:
    positionals = {verb: [a.dest for a in subparser(verb)._actions if not a.option_strings] for verb in VERBS}
    assert positionals == {"backtrace": [], "core": ["file"], "perf-script": [], "report": []}


#: the options of each verb the launcher leaves to the Python CLI (the run's other outputs, the
#: tables and source lines it does not read from the caches, the filters)
LEFT_TO_PYTHON = {
    "backtrace": {"--help"},
    "core": {"--help"},
    "perf-script": {"--help", "--stats", "--json", "--format", "--max-frames", "--backend", "--synth",
                    "--inline", "--no-inline", "--fields", "--comm", "--comms", "--pid", "--tid", "--cpu", "--time"},
    "report": {"--help", "--no-children", "--per-thread", "--json", "--max-frames", "--synth", "--comm", "--comms",
               "--pid", "--tid", "--cpu", "--time"},
}


@pytest.mark.parametrize("verb", VERBS)
def test_every_python_option_of_the_verb_is_served_or_left_to_python(verb: str) -> None:
    """An option the launcher does not know makes it hand the command line to Python: listed here,
    so that a new option of the verb is a decision (serve it in C, or leave it to Python)."""
    served = {long for _, long, _ in launcher_tables()[verb]}
    python = {name for action in subparser(verb)._actions for name in action.option_strings
              if name.startswith("--")}
    assert python - served == LEFT_TO_PYTHON[verb]
