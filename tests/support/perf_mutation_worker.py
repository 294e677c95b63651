"""Mutate perf.data recordings and parse each mutant: the only acceptable failure is PerfDataError.

    python -m tests.support.perf_mutation_worker SEED COUNT FILE...    (from the repository root)

Run in a subprocess by tests/fuzz/test_perf_data_hostile.py (with src/ on PYTHONPATH) so a crash or
a hang fails the test instead of killing or stalling pytest. Prints the seed first so a failure can be replayed.
"""
from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

from fastunwind import _core
from fastunwind.errors import PerfDataError


def record_offsets(data: bytes) -> list[int]:
    """Offsets of the records in the data section (best effort, for size-field mutations)."""
    if len(data) < 16:
        return []
    size = struct.unpack_from("<Q", data, 8)[0]
    if size == 16:
        pos, end = 16, len(data)
    elif len(data) >= 104:
        pos, length = struct.unpack_from("<QQ", data, 40)
        end = min(len(data), pos + length)
    else:
        return []
    out = []
    while pos + 8 <= end and len(out) < 100000:
        type_, _misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8:
            break
        out.append(pos)
        if type_ == 66 and pos + 12 <= end:
            size += (struct.unpack_from("<I", data, pos + 8)[0] + 7) & ~7
        elif type_ == 71 and pos + 16 <= end:
            size += struct.unpack_from("<Q", data, pos + 8)[0]
        pos += size
    return out


def mutate(rng: random.Random, data: bytes, offsets: list[int]) -> bytes:
    out = bytearray(data)
    kind = rng.randrange(7)
    if kind == 0:  # flip a few bits anywhere
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    elif kind == 1 and offsets:  # a record's size field
        pos = rng.choice(offsets)
        struct.pack_into("<H", out, pos + 6, rng.choice([0, 1, 7, 8, 9, 15, 16, 0xffff, rng.randrange(65536)]))
    elif kind == 2 and offsets:  # a record's type
        pos = rng.choice(offsets)
        struct.pack_into("<I", out, pos, rng.choice([1, 3, 4, 7, 9, 10, 64, 66, 67, 71, 78, 80, 81, rng.randrange(200)]))
    elif kind == 3 and offsets:  # a u64 inside a record body set to a hostile value
        pos = rng.choice(offsets)
        size = struct.unpack_from("<H", out, pos + 6)[0]
        if size >= 16:
            at = pos + 8 + 8 * rng.randrange((size - 8) // 8)
            if at + 8 <= len(out):
                struct.pack_into("<Q", out, at, rng.choice([0, 1, 2**63, 2**64 - 1, 2**32, 0x10000, rng.getrandbits(64)]))
    elif kind == 4:  # truncate
        del out[rng.randrange(len(out)):]
    elif kind == 5:  # a header field
        at = rng.randrange(0, min(len(out), 104) - 7, 8) if len(out) >= 8 else 0
        if at + 8 <= len(out):
            struct.pack_into("<Q", out, at, rng.choice([0, 8, 16, 72, 104, 2**63, rng.getrandbits(64), len(out) - 8]))
    else:  # insert or delete bytes in the middle
        i = rng.randrange(len(out))
        if rng.random() < 0.5:
            del out[i:i + rng.randint(1, 16)]
        else:
            out[i:i] = rng.randbytes(rng.randint(1, 16))
    return bytes(out)


def main() -> int:
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    print(f"seed {seed}", flush=True)
    stats = {"ok": 0, "error": 0}
    for path in sys.argv[3:]:
        data = Path(path).read_bytes()
        offsets = record_offsets(data)
        rng = random.Random(f"{seed}:{Path(path).name}")
        for n in range(count):
            mutant = mutate(rng, data, offsets)
            try:
                perf = _core.PerfData(mutant, 64 << 20)
                # touch what the Python API reads
                perf.attrs(), perf.build_ids(), perf.cmdline(), perf.events()
                for i in range(min(perf.sample_count, 50)):
                    perf.sample(i), perf.sample_callchain(i), perf.sample_stack(i), perf.sample_regs(i)
                    perf.sample_extra(i)
                stats["ok"] += 1
            except PerfDataError as error:
                if "perf.data+0x" not in str(error) and "perf.data" not in str(error):
                    print(f"{path} mutant {n}: message without an offset: {error}")
                    return 1
                stats["error"] += 1
            except Exception as error:  # noqa: BLE001 - anything else is the bug being hunted
                print(f"{path} mutant {n}: {type(error).__name__}: {error}")
                Path(path + f".mutant{n}").write_bytes(mutant)
                return 1
    print(stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
