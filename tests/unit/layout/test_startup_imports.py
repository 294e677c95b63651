"""What a command imports before it reads a byte: start-up is a fixed cost of every run (a 100 MB
recording takes perf script 0.2 s; table, check and lookup run on small files in loops, from
scripts and editors), so modules that only other commands, other options or only compiling need
stay out of its import path. Checked by module names, not by timing: typing (~12M instructions;
the package takes what it needs at run time from fastunwind.typecheck), dataclasses (with inspect,
~6 ms, plus ~0.5 ms a class), the CFI inspection API, logging, subprocess, hashlib (OpenSSL), rich,
json (--json's), shlex (compiling's), pathlib (with urllib.parse and ipaddress), html, threading
on the backtrace path (a lock is _thread's); and shutil, which argparse imports for the terminal's
width whenever a parser adds an argument unless the formatter finds it (commands.HelpFormatter).
And no record class on the perf-script path has its annotations compiled (typing.NamedTuple turns
each string annotation into a ForwardRef, which compiles it: the first compile() of a run sets up
the compiler, ~9M instructions, each one after ~50k)."""
from __future__ import annotations

import subprocess
import sys

import pytest

KEPT_OUT = ("typing", "dataclasses", "inspect", "fastunwind.cfi", "concurrent.futures", "logging", "subprocess", "hashlib",
            "rich", "tempfile", "json", "shlex", "pathlib", "html")
#: kept out of `fastunwind backtrace -p` too (perf-script's threads need it): threading
KEPT_OUT_OF_BACKTRACE = (*KEPT_OUT, "threading")


def test_the_perf_script_path_imports_none_of_the_heavy_modules():
    probe = ("import sys, fastunwind.cli, fastunwind.commands.perf_script, fastunwind.perf.script\n"
             f"print(' '.join(m for m in {KEPT_OUT!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == []


#: the CFI inspection API is these commands' work: its dataclasses (and their inspect) come with it
KEPT_OUT_OF_CFI_COMMANDS = ("typing", "rich", "subprocess", "logging", "shlex", "pathlib", "html")
#: the short commands' paths (the command's module and its work's, after fastunwind.cli's)
SHORT_COMMAND_PATHS = {
    "fastunwind.commands.table, fastunwind.cfi_print": KEPT_OUT,
    "fastunwind.commands.check, fastunwind.check": KEPT_OUT,
    "fastunwind.commands.cache, fastunwind.cache": KEPT_OUT,
    "fastunwind.commands.lookup, fastunwind.cfi": (*KEPT_OUT_OF_CFI_COMMANDS, "json"),
    "fastunwind.commands.synth, fastunwind.synth": KEPT_OUT_OF_CFI_COMMANDS,
}


@pytest.mark.parametrize("modules", SHORT_COMMAND_PATHS)
def test_a_short_commands_path_imports_none_of_the_heavy_modules(modules: str) -> None:
    kept_out = SHORT_COMMAND_PATHS[modules]
    probe = (f"import sys, fastunwind.cli, {modules}\n"
             f"print(' '.join(m for m in {kept_out!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == []


def test_building_every_commands_parser_imports_no_typing() -> None:
    """--help and --version build the parser of every command, importing every command's module."""
    probe = "import sys, fastunwind.cli\nfastunwind.cli.build_parser()\nprint('typing' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == ["False"]


def test_the_backtrace_path_imports_none_of_the_heavy_modules():
    """`fastunwind backtrace -p PID` (text) imports what it needs to walk and name the threads only."""
    probe = ("import sys, fastunwind.cli, fastunwind.commands.backtrace, fastunwind.live, fastunwind.stacks\n"
             f"print(' '.join(m for m in {KEPT_OUT_OF_BACKTRACE!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == []



def test_the_core_path_imports_none_of_the_heavy_modules():
    """`fastunwind core FILE` (text) imports what it needs to read the core, walk and name its threads."""
    probe = ("import sys, fastunwind.cli, fastunwind.commands.core, fastunwind.core, fastunwind.stacks\n"
             f"print(' '.join(m for m in {KEPT_OUT!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == []
def test_building_a_commands_parser_imports_no_shutil():
    """argparse's own formatter imports shutil (bz2, lzma, fnmatch: ~7M instructions) to lay out help
    nobody asked for; the CLI's formatters find the width without it."""
    probe = ("import sys, fastunwind.cli\n"
             "fastunwind.cli.build_parser('perf-script')\n"
             "fastunwind.cli.build_parser().parse_args(['backtrace', '-p', '1'])\n"
             "print('shutil' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == ["False"]


def test_the_perf_script_path_compiles_no_annotations():
    probe = ("import typing\n"
             "made = []\n"
             "init = typing.ForwardRef.__init__\n"
             "def counted(self, arg, *args, **kwargs):\n"
             "    made.append(arg)\n"
             "    init(self, arg, *args, **kwargs)\n"
             "typing.ForwardRef.__init__ = counted\n"
             "import fastunwind.cli, fastunwind.commands.perf_script, fastunwind.perf.script\n"
             "print(' '.join(made))")
    compiled = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    assert compiled == []
