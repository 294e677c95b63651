"""Differential property: at every interval of a module's rows (first byte, last byte, one inside,
the gaps between FDEs, around the covered range), from random register and memory states, one
compiled step (eh_elf) gives exactly what the DWARF interpreter gives: status, caller's registers
and their validity, fault address. The seed is printed; rerun one with FASTUNWIND_TEST_SEED=N."""

from __future__ import annotations

import os
import random
from collections import Counter
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from fastunwind import _core
from fastunwind.tables import eh_elf
from fastunwind.address_space import ModuleImage

from tests.support.eh_elf_agreement import (Agreement, check_module, compare_states,
                                            dwarf_space)
from tests.support.paths import WORKLOADS_DIR
from tests.support.step_batch import (BIAS, RECORD_SIZE, STACK_ADDRESS, STATE_WORDS, addresses_to_check, module_spaces,
                                      random_stack, random_states, seed_from_environment, signal_context_states,
                                      signal_trampoline_fde)
from tests.support.step_batch import CASES, CASES_DIR

LIBRARIES = {
    "libc": "/lib/x86_64-linux-gnu/libc.so.6",
    "ld.so": "/lib64/ld-linux-x86-64.so.2",
    "libstdc++": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "libm": "/lib/x86_64-linux-gnu/libm.so.6",
    "libpython": str(Path(sysconfig.get_config_var("LIBDIR") or "/usr/lib") / (sysconfig.get_config_var("LDLIBRARY") or "")),
    "python3": os.path.realpath("/usr/bin/python3"),
}
WORKLOADS = ("cworkload", "cworkload-fp", "cworkload-fp-debugframe")


class Compiled:
    """Images and their eh_elfs, compiled on first request into the session's cache directory."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._done: dict[str, tuple[ModuleImage, object]] = {}

    def get(self, path: str | Path):
        path = str(path)
        if path not in self._done:
            image = ModuleImage.load(path)
            (result,) = eh_elf.compile_images([image], directory=str(self.directory))
            if isinstance(result, Exception):
                raise result
            self._done[path] = (image, result)
        return self._done[path]


@pytest.fixture(scope="session")
def compiled(tmp_path_factory) -> Compiled:
    return Compiled(tmp_path_factory.mktemp("eh_elf_cache"))


@pytest.fixture(scope="session")
def workloads(tmp_path_factory) -> Path:
    """workloads/'s C variants (CFI in .eh_frame; .debug_frame only; none), built once."""
    if not shutil.which("gcc") or not shutil.which("make"):
        pytest.skip("gcc and make are needed to build workloads/")
    out = tmp_path_factory.mktemp("workloads")
    built = subprocess.run(["make", "-s", "-C", str(WORKLOADS_DIR), f"OUT={out}"], capture_output=True,
                           text=True)
    if built.returncode != 0:
        pytest.fail(f"make -C workloads failed:\n{built.stderr}", pytrace=False)
    return out


def run(compiled, path, seed: int, per_address: int, min_recovered: float, max_interpret: float = 0.01):
    image, built = compiled.get(path)
    result = check_module(image, built.eh_elf, seed, per_address)
    print(f"{path}: seed {seed}, {result.states} states, statuses {dict(result.statuses)}; "
          f"{built.ranges} ranges, {built.bodies} bodies")
    assert result.states > 0
    assert not result.mismatches, f"seed {seed}:\n" + "\n".join(result.mismatches)
    compared = result.states - result.statuses["interpret"] - result.statuses["no_info"]
    assert result.recovered >= min_recovered * compared, "the random states hardly ever unwind: vacuous"
    # an expression the generator does not compile is the interpreter's; in real code it stays rare
    assert result.statuses["interpret"] <= max_interpret * result.states
    return result


@pytest.mark.parametrize("name", LIBRARIES)
def test_every_row_of_a_library_steps_as_the_interpreter(name, compiled):
    path = LIBRARIES[name]
    if not os.path.isfile(path):
        pytest.skip(f"{path} not installed")
    run(compiled, path, seed_from_environment(sum(map(ord, name))), per_address=2, min_recovered=0.5)


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_row_of_a_workload_steps_as_the_interpreter(name, compiled, workloads):
    run(compiled, workloads / name, seed_from_environment(sum(map(ord, name))), per_address=20,
        min_recovered=0.3)


@pytest.mark.parametrize("case,source,flags", CASES, ids=[c[0] for c in CASES])
def test_hand_written_cases_step_as_the_interpreter(case, source, flags, tmp_path, assemble, compiled):
    binary = assemble(CASES_DIR / source, tmp_path, flags)
    # the cases include expressions on purpose (expressions.s: nothing but): INTERPRET is expected
    run(compiled, binary, seed_from_environment(sum(map(ord, case))), per_address=40, min_recovered=0.04,
        max_interpret=1.0)


def test_the_signal_trampoline_steps_as_the_interpreter_wherever_its_context_lies(compiled):
    """__restore_rt's body loads the 17 registers of the signal context from the window after one
    check, or reads them one by one when the context runs past the dump: the interpreter's result
    (registers, or the fault address of the first unreadable slot) either way, from
    signal_context_states."""
    path = LIBRARIES["libc"]
    image, built = compiled.get(path)
    fde = signal_trampoline_fde(path)
    seed = seed_from_environment(1717)
    rng = random.Random(seed)
    base, end, *_ = _core.eh_elf_rows(image.eh_frame, image.debug_frame)
    stack = random_stack(rng, base, end)
    states = signal_context_states(rng, fde.pc_begin)
    svmas = [fde.pc_begin] * (len(states) // (8 * STATE_WORDS))
    result = Agreement(path, seed)
    compare_states(built.eh_elf, dwarf_space(image, base, end), svmas, states, stack, result)
    assert not result.mismatches, f"seed {seed}:\n" + "\n".join(result.mismatches)
    # both paths ran: the whole context in the window, and reads past the dump
    assert result.statuses["signal"] > 0 and result.statuses["past_dump"] > 0, result.statuses


def check_auto_order(compiled, path, seed: int) -> Counter:
    """Backend "auto" with both a compact table and an eh_elf: at every row (addresses_to_check),
    what settles the step is the compact rule where the table has one on its fast path, else the
    compiled body (the table's slow rows), else the interpreter; and from random states every step
    is the interpreter's. Returns how often each source settled."""
    image, built = compiled.get(path)
    compact = image.load_compact_table(use_cache=False)
    spaces = module_spaces(image, compact, ("auto", "table", "compiled", "dwarf"), built.eh_elf)
    rng = random.Random(seed)
    svmas = addresses_to_check(compact, rng)
    sources = Counter()
    for svma in svmas:
        table, body = spaces["table"].step_source(BIAS + svma), spaces["compiled"].step_source(BIAS + svma)
        expected = body if table == "interpreter" else table
        assert spaces["auto"].step_source(BIAS + svma) == expected, f"{path}: svma {svma:#x}"
        sources[expected] += 1
    stack = random_stack(rng, compact.base_svma, compact.end_svma)
    states = random_states(rng, svmas)
    auto = _core.step_batch(spaces["auto"], states, stack, STACK_ADDRESS)
    dwarf = _core.step_batch(spaces["dwarf"], states, stack, STACK_ADDRESS)
    differ = [f"{svmas[i]:#x}" for i in range(len(svmas))
              if auto[i * RECORD_SIZE:(i + 1) * RECORD_SIZE] != dwarf[i * RECORD_SIZE:(i + 1) * RECORD_SIZE]]
    assert not differ, f"{path}, seed {seed}: auto differs from the interpreter at svma {differ[:10]}"
    return sources


@pytest.mark.parametrize("name", ["libc", "cworkload"])
def test_auto_takes_the_compact_rule_then_the_compiled_body(name, compiled, workloads):
    """The compact table's fast path first (the walk cache and walk shapes serve it), the eh_elf for
    the rows it leaves to the interpreter: libc's slow rows settle as bodies; cworkload's DRAP rows
    (slow rows until compact format 7) are compact rules with saves relative to rbp."""
    path = LIBRARIES["libc"] if name == "libc" else workloads / name
    sources = check_auto_order(compiled, path, seed_from_environment(sum(map(ord, name)) + 1))
    print(f"{path}: {dict(sources)}")
    if name == "libc":
        assert sources["rule"] > 100 * sources["body"] > 0, sources
    else:
        assert sources["rule"] > 100 and sources["rbp_slots_rule"] > 0 and sources["body"] == 0, sources
