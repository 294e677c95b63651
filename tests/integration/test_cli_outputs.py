"""What scripts consume from every command: `-o FILE` writes exactly what standard output would
have shown (an unwritable path is one line and a failure, before any work), `--json` where a
script reads the result (cache, bench, perf-script's statistics); and what people watch: progress
bars on stderr, on a terminal only, over the recording's span for perf-script and report and per C
unit for compile, without colour under NO_COLOR."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.paths import SRC
from tests.support.terminal import on_a_terminal

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
#: an SGR sequence that sets a colour (foreground, background, bright, 256/true colour)
COLOUR = re.compile(rb"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
                   **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}, **(env or {})}
    return subprocess.run([sys.executable, "-m", "fastunwind", *args], capture_output=True, text=True,
                          env=environment, stdin=subprocess.DEVNULL)


def commands(data: str, cache_dir: str) -> list[list[str]]:
    """Every command, in a form whose output does not change from one run to the next."""
    return [["table", LIBC], ["table", "--json", LIBC], ["lookup", LIBC, "0x2728f"], ["lookup", "--json", LIBC, "0x2728f"],
            ["check", "--json", "/usr/bin/true"], ["synth", "/usr/bin/true"], ["synth", "--json", "/usr/bin/true"],
            ["compile", "--json", "/usr/bin/true", "--cache-dir", cache_dir],
            ["cache"], ["cache", "--json"], ["report", "-i", data, "--json"], ["report", "-i", data],
            ["perf-script", "-i", data], ["perf-script", "-i", data, "--format", "gecko"]]


#: fields that are timings, different in every run
TIMINGS = re.compile(r'"(?:generate_seconds|compile_seconds|seconds|setup_seconds|walk_ns)": [0-9.e-]+|'
                     r"\d+\.\d+ s\b|\d+\.\d+ ms\b")


def test_every_command_writes_its_output_to_the_file_of_o(perf_recordings, tmp_path):
    data = str(perf_recordings.get("c").data_file)
    cache_dir = str(tmp_path / "eh_elf")
    run("compile", "/usr/bin/true", "--cache-dir", cache_dir)  # built once: later runs find it cached
    for index, command in enumerate(commands(data, cache_dir)):
        out = tmp_path / f"out-{index}"
        to_stdout = run(*command)
        to_file = run(*command, "-o", str(out))
        assert to_file.returncode == to_stdout.returncode and to_file.returncode in (0, 2), (command, to_file.stderr)
        assert to_file.stdout == "" and to_stdout.stdout, command
        assert TIMINGS.sub("T", out.read_text()) == TIMINGS.sub("T", to_stdout.stdout), command
    bench = tmp_path / "bench.json"
    assert run("bench", "-i", data, "--repeat", "1", "--json", "-o", str(bench)).stdout == ""
    assert json.loads(bench.read_text())["samples"] > 0


@pytest.mark.parametrize("command, status", [(["table", LIBC], 1), (["check", "/usr/bin/true"], 3),
                                             (["cache", "--json"], 1), (["report", "-i", "{data}"], 1)])
def test_an_unwritable_output_is_one_line_before_any_work(perf_recordings, tmp_path, command, status):
    command = [part.replace("{data}", str(perf_recordings.get("c").data_file)) for part in command]
    result = run(*command, "-o", str(tmp_path / "no" / "such" / "dir"))
    assert result.returncode == status and result.stdout == ""
    assert result.stderr == f"fastunwind: error: cannot write {tmp_path}/no/such/dir: No such file or directory\n"


def test_json_of_cache_bench_and_perf_script_statistics(perf_recordings, tmp_path):
    data = str(perf_recordings.get("c").data_file)
    cache = json.loads(run("cache", "--json", env={"XDG_CACHE_HOME": str(tmp_path)}).stdout)
    assert cache == {"root": f"{tmp_path}/fastunwind", "entries": 0, "bytes": 0,
                     "kinds": [{"kind": kind, "entries": 0, "bytes": 0, "directory": f"{tmp_path}/fastunwind/{kind}"}
                               for kind in ("compact", "eh_elf", "symbols", "debug", "recordings")]}
    bench = json.loads(run("bench", "-i", data, "--backend", "auto,dwarf", "--repeat", "2", "--json").stdout)
    assert [backend["backend"] for backend in bench["backends"]] == ["auto", "dwarf"]
    for backend in bench["backends"]:
        assert backend["same_frames"] == bench["samples"] and sum(backend["outcomes"].values()) == bench["samples"]
        assert 0 < backend["ns_per_frame"]["best"] <= backend["ns_per_frame"]["all"]
    stats = json.loads(run("perf-script", "-i", data, "--json").stdout)
    text = run("perf-script", "-i", data, "--stats").stdout
    assert text.startswith(f"{stats['samples']} samples, {stats['unwound_samples']} with user stacks, "
                           f"{stats['frames']} user frames")
    assert sum(stats["outcomes"].values()) == stats["samples"] and stats["source"] == "dwarf"
    assert all(re.search(rf"^\s*{name}\s+{count}\s*$", text, re.MULTILINE) for name, count in stats["outcomes"].items())
    assert stats["frames_per_sample"]["max"] <= 127 and {module["path"] for module in stats["modules"]}


@pytest.mark.parametrize("verb", ["perf-script", "report"])
def test_progress_over_the_recordings_span_on_a_terminal_only(perf_recordings, verb):
    data = str(perf_recordings.get("hackbench-threads").data_file)
    result, shown = on_a_terminal([verb, "-i", data], {"FORCE_COLOR": "1"})
    assert result.returncode == 0 and result.stdout == run(verb, "-i", data).stdout.encode()
    assert b"hackbench-threads.data" in shown and b"100%" in shown  # the span read, to its end
    assert COLOUR.search(shown)  # colour, as the terminal allows
    plain, shown = on_a_terminal([verb, "-i", data], {"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert plain.returncode == 0 and b"100%" in shown and not COLOUR.search(shown)  # https://no-color.org
    assert run(verb, "-i", data).stderr == ""  # not a terminal: nothing


def test_compile_shows_its_progress_per_c_unit(tmp_path):
    result, shown = on_a_terminal(["compile", LIBC, "--cache-dir", str(tmp_path), "-j", "2"], {"NO_COLOR": "1"})
    assert result.returncode == 0, shown[-400:]
    units = int(re.search(rb", (\d+) units;", result.stdout)[1])
    assert units >= 2  # libc's eh_elf is more than one unit, each counted as it is compiled
    assert re.search(rb"compiled \S+libc\.so\.6 \(\w+\.c\)", shown)  # the bar names units (as its refresh catches them)
    done, total = re.findall(rb" (\d+)/(\d+) ", shown)[-1]
    assert int(done) == int(total) == units and not COLOUR.search(shown)
