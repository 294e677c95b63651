"""Golden diffs against GNU readelf 2.40 on real binaries of this machine.

For each file of the fixed sample (scripts/oracle_files.py: ~200 files by path hash plus libc,
ld.so, libstdc++ and libLLVM-14), `fastunwind table FILE` must print exactly what
`readelf --debug-dump=frames-interp FILE` prints and `table --raw FILE` exactly what
`readelf --debug-dump=frames FILE` prints. Both get the identical path string. `make sweep` runs
the same comparison over every enumerated file.
"""
from __future__ import annotations

import pytest

from scripts import oracle_files
from tests.support.tools import assert_matches_readelf

SAMPLE = oracle_files.sample(200)


def _test_id(path) -> str:
    return str(path).replace("/usr/lib/x86_64-linux-gnu/", "lib/").replace("/usr/", "")


@pytest.mark.parametrize("mode", ["interp", "raw"])
@pytest.mark.parametrize("path", SAMPLE, ids=_test_id)
def test_table_matches_readelf(path, mode):
    assert_matches_readelf(path, modes=(mode,))
