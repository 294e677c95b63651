"""The paper's if-tree lookup (`fastunwind compile --lookup tree`): the same steps as the DWARF
interpreter at every range, like the default table lookup (the bodies are shared; only the search
for a PC's body differs). Small files keep it quick; the tree's size is measured by
benchmarks/bench_eh_elf.py --lookup tree."""

from __future__ import annotations

import os

import pytest

from fastunwind.tables import eh_elf
from fastunwind.address_space import ModuleImage

from tests.support.eh_elf_agreement import check_module

FILES = ["/usr/bin/hackbench", "/lib64/ld-linux-x86-64.so.2"]


@pytest.mark.parametrize("path", FILES)
def test_tree_lookup_steps_as_the_interpreter(path, tmp_path):
    if not os.path.isfile(path):
        pytest.skip(f"{path} not installed")
    image = ModuleImage.load(path)
    (built,) = eh_elf.compile_images([image], directory=str(tmp_path), lookup="tree")
    assert not isinstance(built, Exception), built
    assert any(name.startswith("tree_") for name in eh_elf.generate(image, "tree").units)
    result = check_module(image, built.eh_elf, seed=7, per_address=2)
    assert result.states > 0 and not result.mismatches, "\n".join(result.mismatches)
    assert result.recovered > 0


def test_an_unknown_lookup_is_refused():
    with pytest.raises(ValueError, match="lookup 'trie'"):
        eh_elf.generate(ModuleImage.load("/usr/bin/hackbench"), "trie")
