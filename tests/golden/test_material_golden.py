"""Golden diffs against readelf on peers' test material (tests/support/material.py).

Every x86-64 ELF file with CFI from the pyelftools 0.33 sdist, every x86-64-applicable gas CFI test
of binutils 2.40 and the ld eh*/PLT tests: `table` == readelf -wF and `table --raw` == readelf -wf,
stdout only (where readelf warns about an unrelated section, the warning text is not ours to copy).
If the material cannot be fetched the tests skip with the reason.
"""
from __future__ import annotations

import pytest

from tests.support.material import CACHE, MaterialUnavailable, binutils_files, pyelftools_files
from tests.support.tools import assert_matches_readelf

# binutils 2.40 has 14 gas CFI tests that assemble for x86-64 (cfi-common-1..9, cfi-x86_64,
# cfi-label, cie-version-1/3/4, reloc-pe-i386), 6 ld-elf eh tests plus eh-frame-hdr and eh-group,
# and 4 ld-x86-64 IBT PLT tests; fewer means the build went wrong, not that the material shrank.
MINIMUM_BINUTILS_FILES = 25


def _material():
    """(source, path or None, skip reason) triples, one per file; computed once per session."""
    params = []
    for source, getter in (("pyelftools", pyelftools_files), ("binutils", binutils_files)):
        try:
            got = getter()
        except MaterialUnavailable as error:
            params.append(pytest.param(source, None, str(error), id=f"{source}-unavailable"))
            continue
        files = got if isinstance(got, list) else got.files
        for path in files:
            label = str(path.relative_to(CACHE)).replace("build/binutils/", "binutils/")
            params.append(pytest.param(source, path, "", id=label))
    return params


MATERIAL = _material()


@pytest.mark.parametrize("mode", ["interp", "raw"])
@pytest.mark.parametrize("source, path, unavailable", MATERIAL)
def test_material_matches_readelf(source, path, unavailable, mode):
    if path is None:
        pytest.skip(unavailable)
    assert_matches_readelf(path, modes=(mode,))


def test_binutils_material_was_built():
    try:
        built = binutils_files()
    except MaterialUnavailable as error:
        pytest.skip(str(error))
    other_architectures = [name for name, why in built.skipped.items() if "Error" in why or "option" in why]
    print(f"{len(built.files)} binutils tests built; {len(other_architectures)} gas tests do not "
          f"assemble for x86-64; skipped: {sorted(built.skipped)}")
    assert len(built.files) >= MINIMUM_BINUTILS_FILES, built.skipped
