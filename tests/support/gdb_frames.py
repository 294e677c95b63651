"""Run inside gdb (`gdb -batch -p PID -x gdb_frames.py`): every thread's frames with their PCs and
the registers gdb knows at each (all that fastunwind names), printed as one JSON line after
"FRAMES ". Registers gdb reports as <not saved> are left out. Frames of inlined calls (gdb shows
them where it has debug info, e.g. libc6-dbg's) are left out: their registers are those of the
real frame they are in, and eu-stack and fastunwind number real frames only."""

import json

import gdb  # type: ignore[import-not-found]

REGISTERS = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
             "r14", "r15", "rip", "eflags", "cs", "ss", "ds", "es", "fs", "gs", "fs_base", "gs_base")
MAX_FRAMES = 1024

frames = []
for inferior in gdb.inferiors():
    for thread in inferior.threads():
        thread.switch()
        frame, number = gdb.newest_frame(), 0
        while frame is not None and number < MAX_FRAMES:
            if frame.type() == gdb.INLINE_FRAME:
                frame = frame.older()
                continue
            known = {}
            for name in REGISTERS:
                try:
                    value = frame.read_register(name)
                    if not value.is_optimized_out:
                        known[name] = int(value) & (1 << 64) - 1
                except gdb.error:
                    pass
            frames.append({"tid": thread.ptid[1], "frame": number, "pc": int(frame.pc()), "registers": known})
            frame, number = frame.older(), number + 1
print("FRAMES " + json.dumps(frames))
