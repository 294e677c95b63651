"""The BPF table map's evictions (bpf_layout.h fu_bpf_ring): when the map is short, the modules no
loaded process maps go before those a process still does, oldest first, and the recorder counts the
modules it had to evict while in use (`modules_evicted_in_use`: their frames end `table_evicted`).
Real compact tables (libc, libstdc++, libm) in a map sized to hold two of them. Skipped as
test_record_bpf.py is."""

from __future__ import annotations

import pytest

from fastunwind import _core
from fastunwind.address_space import ImageCache
from fastunwind.tables import compact
from tests.integration.bpf.test_record_bpf import PROBLEM

pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")

LIBRARIES = ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libm.so.6")
IDENTITY = (0, 0, 0, 0)  # not checked: no sample is taken


def tables() -> list[_core.CompactTable]:
    images = ImageCache()
    out = []
    for path in LIBRARIES:
        image = images.get(path)
        table = compact.for_image(image, "off") if image else None
        if table is None:
            pytest.skip(f"{path}: no compact table")
        out.append(table)
    return out


def slots(table: _core.CompactTable) -> int:
    session = _core.BpfSession(1 << 20)
    try:
        session.load_module(table)
        return session.slots_used
    finally:
        session.close()


def test_a_module_in_use_outlives_an_older_one_no_process_maps() -> None:
    libc, libstdcxx, libm = tables()
    assert slots(libm) <= slots(libstdcxx)
    # libc, then libstdc++ end to end, and a little more: libm fits only where one of them was
    session = _core.BpfSession(slots(libc) + slots(libstdcxx) + 16)
    try:
        in_use = session.load_module(libc)
        assert session.set_process(1, IDENTITY, [(0x10000, 0x20000, 0, *in_use)])
        unused = session.load_module(libstdcxx)
        assert session.set_process(2, IDENTITY, [(0x10000, 0x20000, 0, *unused)])
        session.forget_process(2)  # exited: its libstdc++ is no longer mapped by a loaded process
        session.load_module(libm)
        # the ring's next window (from 0: too near the end) would be libc's, mapped by process 1
        assert session.module_loaded(*in_use) and not session.module_loaded(*unused)
        assert session.evicted_in_use == 0
        # when only modules in use are left, one goes, and is counted
        session.load_module(libstdcxx)
        assert session.evicted_in_use == 1 and not session.module_loaded(*in_use)
    finally:
        session.close()
