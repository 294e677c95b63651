"""The `fastunwind` command line: help with examples, `lookup` and `table` output (text, JSON,
summary) checked against the Python API, error exits, NO_COLOR.

Every command must exit 1 with one "fastunwind: error: <what>" line on stderr (no traceback) when the
input is bad (STYLE.md habit 4 and 9).
"""

from __future__ import annotations

import argparse
import json

import pytest

from fastunwind.cfi import UnwindInfo

from tests.support.cli import build_small_program, build_split_debug_program, colour_codes, run_cli, with_broken_cie

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli")
    program = build_small_program(directory)
    broken = with_broken_cie(program, directory / "small-broken-cie")
    truncated = directory / "small-truncated"
    truncated.write_bytes(program.read_bytes()[:3000])
    short = directory / "short-text"
    short.write_text("hello\n")
    text = directory / "long-text"
    text.write_text("not an ELF file at all\n" * 20)
    return {"program": program, "broken": broken, "truncated": truncated, "short": short, "text": text,
            "missing": directory / "does-not-exist"}


# ---- help ---------------------------------------------------------------------------------------------

def test_help():
    result = run_cli(["--help"])
    assert result.returncode == 0
    assert "table" in result.stdout and "lookup" in result.stdout
    assert "COMMAND --help" in result.stdout


@pytest.mark.parametrize("command", ["table", "lookup"])
def test_command_help_has_an_example(command):
    result = run_cli([command, "--help"])
    assert result.returncode == 0
    assert "examples:" in result.stdout
    assert f"fastunwind {command} " in result.stdout.split("examples:", 1)[1]


@pytest.mark.parametrize("columns", [None, "50", "200", "0", "wide"])
def test_help_is_as_wide_as_argparse_makes_it(monkeypatch, columns):
    """The CLI's formatters find the width without shutil; shutil's answer is the oracle."""
    import shutil

    from fastunwind.commands import HelpFormatter, terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
    assert HelpFormatter("fastunwind")._width == argparse.HelpFormatter("fastunwind")._width


def test_version():
    result = run_cli(["--version"])
    assert result.returncode == 0 and result.stdout.startswith("fastunwind ")


def test_no_command_is_a_usage_error():
    result = run_cli([])
    assert result.returncode == 2 and "usage:" in result.stderr


# ---- lookup -------------------------------------------------------------------------------------------

def _interesting_address(path):
    """An address inside a multi-row FDE, past its first row."""
    info = UnwindInfo.open(path)
    section = info.sections[0]
    for fde in section.fdes():
        rows = section.rows(fde)
        if len(rows) >= 3 and rows[1].end > rows[1].start:
            return info, rows[1].start
    raise AssertionError("no multi-row FDE")


@pytest.mark.parametrize("which", ["program", "libc"])
def test_lookup_text_matches_the_api(files, which):
    path = files["program"] if which == "program" else LIBC
    info, address = _interesting_address(path)
    section, fde, row = info.lookup(address)
    result = run_cli(["lookup", path, hex(address)])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"0x{address:x}: FDE at {section.name}+0x{fde.offset:x} ")
    assert f"(pc 0x{fde.pc_begin:x}..0x{fde.pc_end:x}, CIE at 0x{fde.cie.offset:x}" in lines[0]
    assert lines[1] == f"row 0x{row.start:x}..0x{row.end:x}"
    assert lines[2] == f"  CFA = {row.cfa.describe()}"
    assert len(lines) == 3 + len(row.registers)
    assert lines[-1].split("=", 1)[1].strip() == row.registers[max(row.registers)].describe()


def test_lookup_json_matches_the_api(files):
    info, address = _interesting_address(files["program"])
    section, fde, row = info.lookup(address)
    for spelled in (hex(address), str(address)):
        result = run_cli(["lookup", "--json", files["program"], spelled])
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["address"] == address
        assert document["section"] == section.name
        assert (document["fde_offset"], document["cie_offset"]) == (fde.offset, fde.cie.offset)
        assert (document["pc_begin"], document["pc_end"]) == (fde.pc_begin, fde.pc_end)
        assert document["signal_frame"] is False
        assert document["row"] == json.loads(json.dumps(row.to_json()))


def test_lookup_in_a_signal_frame():
    """libc's __restore_rt: text says "signal frame", JSON has signal_frame true and the expression
    rules with their llvm-style text."""
    info = UnwindInfo.open(LIBC)
    section = info.sections[0]
    (fde,) = [f for f in section.fdes() if f.signal_frame]
    address = fde.pc_begin + 1
    text = run_cli(["lookup", LIBC, hex(address)])
    assert text.returncode == 0
    assert '"zRS", signal frame)' in text.stdout.splitlines()[0]
    assert "  CFA = DW_OP_breg7 RSP+160, DW_OP_deref" in text.stdout.splitlines()
    document = json.loads(run_cli(["lookup", "--json", LIBC, hex(address)]).stdout)
    assert document["signal_frame"] is True
    assert document["row"]["cfa"] == {"kind": "cfa_expression", "expression": "77a00106",
                                      "text": "DW_OP_breg7 RSP+160, DW_OP_deref"}
    assert document["row"] == json.loads(json.dumps(info.lookup(address)[2].to_json()))


def test_lookup_through_a_separate_debug_file(tmp_path):
    """A function described only in .debug_frame of the separate debug file: the text names that
    file, the JSON gives its path."""
    stripped, debug_file = build_split_debug_program(tmp_path)
    info = UnwindInfo.open(stripped)
    debug_frame = info.sections[-1]
    assert debug_frame.path == str(debug_file)
    fde = max(debug_frame.fdes(), key=lambda f: f.pc_end - f.pc_begin)
    text = run_cli(["lookup", stripped, hex(fde.pc_begin)])
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"0x{fde.pc_begin:x}: FDE at .debug_frame+0x{fde.offset:x} of {debug_file} ")
    document = json.loads(run_cli(["lookup", "--json", stripped, hex(fde.pc_begin)]).stdout)
    assert (document["section"], document["path"]) == (".debug_frame", str(debug_file))


def test_lookup_of_an_uncovered_address(files):
    result = run_cli(["lookup", files["program"], "0x10"])
    assert result.returncode == 1
    assert result.stderr.strip() == f"fastunwind: error: {files['program']}: no FDE covers 0x10"


def test_lookup_bad_address_message():
    result = run_cli(["lookup", LIBC, "zz"])
    assert result.returncode == 2
    assert "<lambda>" not in result.stderr


# ---- table ----------------------------------------------------------------------------------------------

def test_table_json_matches_the_api(files):
    result = run_cli(["table", "--json", files["program"]])
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["file"] == str(files["program"])
    info = UnwindInfo.open(files["program"])
    assert [s["name"] for s in document["sections"]] == [s.name for s in info.sections]
    for listed, section in zip(document["sections"], info.sections):
        assert listed["errors"] == []
        assert listed["address"] == section.address
        fdes = list(section.fdes())
        assert [f["offset"] for f in listed["fdes"]] == [f.offset for f in fdes]
        for entry, fde in zip(listed["fdes"], fdes):
            assert (entry["pc_begin"], entry["pc_end"], entry["lsda"]) == (fde.pc_begin, fde.pc_end, fde.lsda)
            assert entry["rows"] == json.loads(json.dumps([row.to_json() for row in section.rows(fde)]))


def test_table_summary_mentions_fdes_and_rows(files):
    result = run_cli(["table", "--summary", files["program"]], env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    info = UnwindInfo.open(files["program"])
    eh_frame = info.sections[0]
    fde_count = sum(1 for _ in eh_frame.fdes())
    assert ".eh_frame: " in result.stdout
    assert f"{fde_count} FDEs, {eh_frame.row_count} rows" in result.stdout
    assert "sorted entries, used for lookups" in result.stdout
    assert colour_codes(result.stdout) == []  # not a terminal: no colour whatever the environment


def test_table_default_output(files):
    result = run_cli(["table", files["program"]])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Contents of the .eh_frame section:")


def test_summary_of_malformed_cfi_reports_and_exits_1(files):
    result = run_cli(["table", "--summary", files["broken"]], env={"COLUMNS": "200"})
    assert result.returncode == 1
    assert "malformed entries, first: CIE at .eh_frame+0x0: unsupported CIE version 9" in result.stdout


def test_table_json_of_malformed_cfi_lists_errors_and_exits_1(files):
    result = run_cli(["table", "--json", files["broken"]])
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert any("unsupported CIE version 9" in error for error in document["sections"][0]["errors"])


# ---- NO_COLOR --------------------------------------------------------------------------------------------

def test_summary_uses_colour_when_forced(files):
    """FORCE_COLOR makes rich colour a pipe: the malformed-entries line is red. (Checks that the
    NO_COLOR test below can see colour at all.)"""
    result = run_cli(["table", "--summary", files["broken"]], env={"FORCE_COLOR": "1", "COLUMNS": "200"})
    assert colour_codes(result.stdout), result.stdout


@pytest.mark.parametrize("which", ["broken", "program"])
def test_summary_honours_no_color(files, which):
    """https://no-color.org: NO_COLOR set (any non-empty value) means no ANSI colour, even where
    colour would otherwise be forced. Bold is not colour and may stay."""
    result = run_cli(["table", "--summary", files[which]],
                     env={"NO_COLOR": "1", "FORCE_COLOR": "1", "COLUMNS": "200"})
    assert result.returncode == (1 if which == "broken" else 0)
    assert "FDEs" in result.stdout
    assert colour_codes(result.stdout) == [], repr(result.stdout[:400])


# ---- errors ---------------------------------------------------------------------------------------------

COMMANDS = [
    pytest.param(["table"], id="table"),
    pytest.param(["table", "--raw"], id="table --raw"),
    pytest.param(["table", "--json"], id="table --json"),
    pytest.param(["table", "--summary"], id="table --summary"),
    pytest.param(["lookup", "{path}", "0x1000"], id="lookup"),
]


def _command(command, path):
    if "{path}" in command:
        return [part.replace("{path}", str(path)) for part in command]
    return [*command, path]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("which, message", [
    ("short", r"file too short for e_ident"),
    ("text", r"not an ELF file: magic at offset 0x0 is"),
    ("truncated", r"extends beyond the end of the file \(size 0xbb8\)"),
])
def test_bad_input_exits_1_with_one_error_line(files, command, which, message):
    import re

    path = files[which]
    result = run_cli(_command(command, path))
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"fastunwind: error: {path}: ")
    assert re.search(message, lines[0]), lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_file_exits_1_with_one_error_line(files, command):
    path = files["missing"]
    result = run_cli(_command(command, path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"fastunwind: error: {path}")


def test_directory_is_refused(tmp_path):
    result = run_cli(["table", tmp_path])
    assert result.returncode == 1
    assert result.stderr.startswith(f"fastunwind: error: {tmp_path}: not a regular file")
