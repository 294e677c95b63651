"""Property test: symbol names leave the C core (native/core/symbols.c, append_utf8) as Python's
`bytes.decode("utf-8", "replace")` leaves them: well-formed UTF-8 kept, one U+FFFD per maximal
ill-formed subpart (Unicode 15, §3.9, "U+FFFD Substitution of Maximal Subparts").

Names are random bytes drawn to hit the decoder's edges: lead bytes of every length, continuation
bytes in and out of place, the surrogate range (ED A0..BF), overlongs (C0, C1, E0 80..9F, F0 80..8F),
code points past U+10FFFF (F4 90.., F5..FF), sequences cut by the name's end. The run is
derandomised with a fixed seed, printed in the test header and in every failure (`note`); explore
others with FASTUNWIND_HYPOTHESIS_SEED=<n> and FASTUNWIND_HYPOTHESIS_EXAMPLES=<n>.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from fastunwind import _core

from tests.support.symbol_section import SymbolSection

SEED = int(os.environ.get("FASTUNWIND_HYPOTHESIS_SEED", "2211"))
EXAMPLES = int(os.environ.get("FASTUNWIND_HYPOTHESIS_EXAMPLES", "400"))
print(f"\n[symbols utf8 property] hypothesis seed {SEED}, {EXAMPLES} examples")

#: bytes around UTF-8's boundaries (no NUL: a name ends at its first)
EDGE_BYTES = st.sampled_from([0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                              0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF8, 0xFE, 0xFF])
PIECES = st.one_of(
    st.binary(min_size=1, max_size=4).filter(lambda b: 0 not in b),
    st.lists(EDGE_BYTES, min_size=1, max_size=4).map(bytes),
    st.text(min_size=1, max_size=3).map(lambda t: t.encode("utf-8", "surrogatepass")).filter(lambda b: 0 not in b),
)
NAMES = st.lists(PIECES, min_size=1, max_size=8).map(b"".join)
#: symbols are 16 bytes apart, each 8 long, so that every one is its own lookup's answer
SPACING = 16


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(NAMES, min_size=1, max_size=32))
def test_names_decode_as_python_replaces(names: list[bytes]) -> None:
    note(f"seed {SEED}")
    section = SymbolSection()
    for i, name in enumerate(names):
        section.add(name, 0x1000 + SPACING * i, 8)
    table = _core.SymbolTable.from_elf([section.source()])
    for i, name in enumerate(names):
        note(f"name {i}: {name!r}")
        assert table.lookup(0x1000 + SPACING * i) == (name.decode("utf-8", "replace"), 0)
