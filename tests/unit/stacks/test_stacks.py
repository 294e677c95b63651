"""The shared stack model (fastunwind.stacks): unwinding with each frame's registers, symbolizing,
and the text and JSON renderings."""

import io
import json
import random

from fastunwind import stacks, walk
from fastunwind.address_space import current_process
from fastunwind.stacks import Frame, ProcessSnapshot, Thread, render_json, render_text, unwind_thread

def registers(**known: int) -> dict[str, int | None]:
    """A frame's registers as the walk gives them: every walker register, then eflags, the segment
    registers and bases; None where unknown."""
    return {name: known.get(name) for name in stacks.REGISTER_NAMES + stacks.STATE_REGISTER_NAMES}


REGISTERS = registers(rax=1, rip=0x401136, eflags=0x246, cs=0x33, ss=0x2b, fs_base=0x7f0000002000)
#: the register lines of a frame with only rdx, rip and cs known (rip 0x401200)
MAIN_REGISTER_LINES = [
    "    rax <unknown>           rdx 0x0000000000000002  rcx <unknown>           rbx <unknown>",
    "    rsi <unknown>           rdi <unknown>           rbp <unknown>           rsp <unknown>",
    "     r8 <unknown>            r9 <unknown>           r10 <unknown>           r11 <unknown>",
    "    r12 <unknown>           r13 <unknown>           r14 <unknown>           r15 <unknown>",
    "    rip 0x0000000000401200  eflags <unknown>            cs 0x0000000000000033   ss <unknown>",
    "     ds <unknown>            es <unknown>            fs <unknown>            gs <unknown>",
    "    fs_base <unknown>           gs_base <unknown>",
]
LEAF_REGISTER_LINES = [
    "    rax 0x0000000000000001  rdx <unknown>           rcx <unknown>           rbx <unknown>",
    *MAIN_REGISTER_LINES[1:4],
    "    rip 0x0000000000401136  eflags 0x0000000000000246   cs 0x0000000000000033   ss 0x000000000000002b",
    MAIN_REGISTER_LINES[5],
    "    fs_base 0x00007f0000002000  gs_base <unknown>",
]


def snapshot() -> ProcessSnapshot:
    frames = (Frame(0x401136, "leaf", 0x6, "/bin/prog", "first", REGISTERS),
              Frame(0x401200, "main", 0x20, "/bin/prog", "cfi", registers(rdx=2, rip=0x401200, cs=0x33)),
              Frame(0x7f0000001000, None, 0, None, "frame_pointer", {}))
    return ProcessSnapshot(42, (Thread(42, "prog", frames, "end"),
                                Thread(43, "worker", frames[:1], "truncated", 0x7ffd0000),
                                Thread(44, "gone", (), "exited", 0, 0, "No such process")))


def test_text_names_every_frame_and_marks_incomplete_stacks():
    out = io.StringIO()
    render_text(snapshot(), out)
    assert out.getvalue().splitlines() == [
        "PID 42",
        "TID 42 (prog):",
        "#0  0x0000000000401136 in leaf+0x6 (/bin/prog)",
        *LEAF_REGISTER_LINES,
        "#1  0x0000000000401200 in main+0x20 (/bin/prog)",
        *MAIN_REGISTER_LINES,
        "#2  0x00007f0000001000 in ??",
        "TID 43 (worker):",
        "#0  0x0000000000401136 in leaf+0x6 (/bin/prog)",
        *LEAF_REGISTER_LINES,
        "(stack incomplete: truncated at 0x7ffd0000)",
        "TID 44 (gone):",
        "(stack incomplete: exited: No such process)",
    ]


def test_json_has_the_issue_shape():
    out = io.StringIO()
    render_json(snapshot(), out)
    data = json.loads(out.getvalue())
    assert data["pid"] == 42
    first = data["threads"][0]
    assert (first["tid"], first["name"], first["outcome"]) == (42, "prog", "end")
    assert first["frames"][0] == {"address": 0x401136, "symbol": "leaf", "offset": 6, "module": "/bin/prog",
                                  "registers": REGISTERS}
    assert data["threads"][1]["outcome"] == "truncated"


def test_json_is_json_dumps_of_the_snapshot():
    """core/snapshot.c's JSON is what json.dump writes of the same snapshot, whatever its strings:
    quotes, backslashes, control characters, non-ASCII names and paths' undecodable bytes
    (surrogateescape), characters outside the BMP."""
    odd = ["plain", 'q"uo\\te', "tab\tnew\nline\x01\x7f", "é€😀", "/tmp/\udcff\udcfe-x", ""]
    rng = random.Random(3)
    frames = tuple(Frame(rng.randrange(1 << 64), rng.choice([*odd, None]), rng.randrange(1 << 64),
                         rng.choice([*odd, None]), "cfi", registers(rax=rng.randrange(1 << 64), rip=5))
                   for _ in range(40))
    threads = tuple(Thread(tid, name, frames[tid:tid + 7], rng.choice(["end", "truncated"]), 0, 0, "")
                    for tid, name in enumerate(odd))
    snap = ProcessSnapshot(7, threads)
    out = io.StringIO()
    render_json(snap, out)
    expected = {"pid": 7, "threads": [
        {"tid": t.tid, "name": t.name, "outcome": t.outcome, "frames": [
            {"address": f.address, "symbol": f.symbol, "offset": f.offset, "module": f.module,
             "registers": dict(f.registers)} for f in t.frames]} for t in threads]}
    assert out.getvalue() == json.dumps(expected) + "\n"


def test_frame_registers_follow_the_walk():
    """Each frame's recovered registers: frame 0's are the given ones, every frame's rip its address,
    and asking for them changes no frame."""
    rng = random.Random(7)
    space = current_process()
    executable = [m for m in space.mappings if m.image is not None]
    for _ in range(200):
        mapping = rng.choice(executable)
        sp = rng.randrange(1 << 47) & ~7
        words = [rng.choice([rng.randrange(1 << 64), rng.randrange(mapping.start, mapping.end)]) for _ in range(64)]
        stack = b"".join(w.to_bytes(8, "little") for w in words)
        registers = {r: rng.randrange(1 << 64) for r in range(16)}
        registers.update({7: sp, 16: rng.randrange(mapping.start, mapping.end)})
        plain, outcome, fault = unwind_thread(space, registers, stack, sp, max_frames=32)
        state = [rng.randrange(1 << 64) for _ in stacks.STATE_REGISTER_NAMES]
        with_registers, outcome_again, fault_again = unwind_thread(space, registers, stack, sp, max_frames=32,
                                                                   state=state, with_registers=True)
        assert (outcome, fault) == (outcome_again, fault_again)
        assert [f.address for f in plain] == [f.address for f in with_registers]
        assert all(f.registers == {} for f in plain)
        given_state = dict(zip(stacks.STATE_REGISTER_NAMES, state))
        assert with_registers[0].registers == {stacks.REGISTER_NAMES[r]: v for r, v in registers.items()} | given_state
        assert all(f.registers["rip"] == f.address for f in with_registers)
        # a caller keeps the thread's segment selectors and bases; its flags are unknown
        kept = given_state | {"eflags": None}
        assert all({name: f.registers[name] for name in kept} == kept for f in with_registers[1:])


def test_current_thread_is_symbolized_and_its_images_kept():
    thread = stacks.unwind_current_thread()
    assert thread.complete and thread.frames[0].symbol == "unwind_self"
    assert "__libc_start_call_main" in [f.symbol for f in thread.frames]
    first = walk._own_address_space()
    assert walk._own_address_space() is first  # the maps did not change: the same space and tables
