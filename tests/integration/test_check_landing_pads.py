"""C++ exception handling under `fastunwind check`: landing pads are entered from the calls of their
call-site range (the LSDA the FDE's augmentation names), with the pushed arguments of the call
popped (DW_CFA_GNU_args_size), and gcc's `.cold` parts from the jumps of the hot part, so the code
there is checked, not left unreached. Built with g++ -O2 at test time."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fastunwind.check import FileCheck, FdeVerdict, check_file
from fastunwind.elf import ElfFile

CXX_SOURCE = r"""
#include <stdexcept>
#include <string>
void may_throw(int);
void sink(unsigned long);
struct Guard {
    std::string name;
    ~Guard() { sink(name.size()); }
};
int with_cleanup(int x)
{
    Guard g{std::to_string(x)};
    may_throw(x);
    Guard h{std::to_string(x + 1)};
    may_throw(x + 1);
    return (int)(g.name.size() + h.name.size());
}
void many(long, long, long, long, long, long, long, long);
int with_stack_arguments(long x)
{
    Guard g{std::to_string(x)};
    many(x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7); /* two arguments pushed */
    return (int)g.name.size();
}
int with_catch(int x)
{
    try {
        may_throw(x);
    } catch (const std::runtime_error &e) {
        sink(e.what()[0]);
        return -1;
    } catch (...) {
        return -2;
    }
    return x;
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[FileCheck, dict[str, int]]:
    directory = tmp_path_factory.mktemp("landing_pads")
    source = directory / "pads.cc"
    source.write_text(CXX_SOURCE)
    library = directory / "libpads.so"
    # arguments pushed (not stored into space reserved at entry): DW_CFA_GNU_args_size at the calls
    made = subprocess.run(["g++", "-shared", "-fPIC", "-O2", "-mno-accumulate-outgoing-args", "-o", str(library),
                           str(source)],
                          capture_output=True, text=True)
    if made.returncode:
        pytest.fail(f"g++ failed:\n{made.stderr}", pytrace=False)
    with ElfFile.open(library) as elf:
        symbols = {s.name: s.value for s in elf.symbols() if s.name}
    return check_file(str(library)), symbols


def fdes_of(result: FileCheck, symbols: dict[str, int], function: str) -> list[FdeVerdict]:
    """The FDEs of a function: its own, and those of its `.cold` part if gcc split one off."""
    starts = {address for name, address in symbols.items() if name.startswith(function) and
              (name == function or name.startswith(function + ".cold"))}
    found = [v for v in result.verdicts() if v.pc_begin in starts]
    assert found, f"no FDE for {function}"
    return found


@pytest.mark.parametrize("function", ["_Z12with_cleanupi", "_Z10with_catchi", "_Z20with_stack_argumentsl"])
def test_landing_pads_are_checked(built: tuple[FileCheck, dict[str, int]], function: str) -> None:
    result, symbols = built
    for verdict in fdes_of(result, symbols, function):
        assert verdict.verdict == "agree", (hex(verdict.pc_begin), verdict.reason)
        assert verdict.instructions[3] == 0, f"{verdict.instructions[3]} instructions unreached at {verdict.pc_begin:#x}"


def test_every_fde_of_the_library_is_reached_whole(built: tuple[FileCheck, dict[str, int]]) -> None:
    result, _symbols = built
    left = [(hex(v.pc_begin), v.instructions[3], v.reason) for v in result.verdicts() if v.instructions[3]]
    assert not left
