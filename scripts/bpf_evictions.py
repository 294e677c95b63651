"""What the BPF table map's evictions cost under `record --bpf -a` on a busy machine.

Records every process twice, as tests/integration/bpf/test_sample_all.py does (the first recording
builds the tables), while the test's programs run (clang-14 on the compiler workload, hackbench -P)
beside LOOPS threads that run compile and debug tools one after another (g++, gcc, gdb, python3,
perf, llvm-dwarfdump-14: short-lived processes with big tables). Prints one JSON line: the test
programs' samples by outcome, those cut by an eviction (`no_table` before the `table_evicted`
outcome, `table_evicted` since), the modules evicted and how many of them a live process mapped
(each table load compared with the recorder's modules before it), and the rows loaded. The figures
of docs/DESIGN.md, "record --bpf" (eviction). Needs root, as record --bpf. Exit status 0.

examples (from the repository root):
  sudo .venv/bin/python -m scripts.bpf_evictions --loops 3
  sudo .venv/bin/python -m scripts.bpf_evictions --loops 0 --build-dir /tmp/workloads
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fastunwind.address_space import ModuleImage
from fastunwind.bpf import BpfProfile, BpfRecorder
from scripts import record_workloads

#: the test's programs (test_sample_all.py) and their command names
WORKLOADS = ("compiler", "hackbench-processes")
NAMES = {"clang-14", "clang", "g++", "cc1plus", "hackbench"}
FREQUENCY = 499
CXX = "#include <map>\n#include <regex>\n#include <string>\n#include <vector>\n" \
      "int f() { std::map<std::string, std::vector<int>> m; std::regex r(\"a+\"); return (int)m.size(); }\n"


class CountingRecorder(BpfRecorder):
    """A recorder that notes, at each table load, the modules it evicted and whether a live loaded
    process mapped them."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.evicted: list[bool] = []  #: per eviction: a live process mapped the module

    def _module(self, image: ModuleImage) -> tuple[int, int] | None:
        session = self._session
        before = [key for key in self._modules.values() if session.module_loaded(*key)]
        rows = self._rows_loaded
        found = super()._module(image)
        if self._rows_loaded != rows:  # a table loaded
            mapped = {key for pid, process in self._processes.items() if os.path.exists(f"/proc/{pid}")
                      for key in process.module_keys}
            self.evicted += [key in mapped for key in before if not session.module_loaded(*key)]
        return found


def loops(commands: list[list[str]], stop: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        subprocess.run(commands[i % len(commands)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        i += 1


def record_all_while(commands: list[list[str]], recorder: BpfRecorder | None = None) -> BpfProfile:
    """A recording of every process (by `recorder`, made for it if None), the commands started once
    it samples (at its first poll)."""
    recorder = recorder or BpfRecorder(frequency=FREQUENCY, sample_all=True)
    recorder.add_running()
    children: list[subprocess.Popen[bytes]] = []

    def finished() -> bool:
        if not children:
            children.extend(subprocess.Popen(c, stdout=subprocess.DEVNULL) for c in commands)
        return all(c.poll() is not None for c in children)

    try:
        return recorder.run(finished)
    finally:
        for child in children:
            child.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=3, help="threads running tools one after another (3)")
    parser.add_argument("--build-dir", type=Path, help="where the workloads are built (a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        settings = record_workloads.Settings(seconds=1.5, frequency=FREQUENCY, build_dir=args.build_dir or Path(scratch))
        record_workloads.build(settings)
        commands = [record_workloads.WORKLOADS[name].command(settings) for name in WORKLOADS]
        source = Path(scratch) / "tables.cpp"
        source.write_text(CXX)
        tools = [["g++", "-O2", "-c", str(source), "-o", "/dev/null"], ["gcc", "-O2", "-c", "-x", "c", "/dev/null",
                 "-o", "/dev/null"], ["gdb", "-nx", "-batch", "-ex", "print 1"],
                 ["python3", "-c", "import json, decimal, sqlite3, ssl, ctypes"], ["perf", "list", "sw"],
                 ["llvm-dwarfdump-14", "--version"]]
        record_all_while(commands)  # builds the tables
        stop = threading.Event()
        threads = [threading.Thread(target=loops, args=(tools, stop)) for _ in range(args.loops)]
        for thread in threads:
            thread.start()
        time.sleep(2 if threads else 0)
        try:
            recorder = CountingRecorder(frequency=FREQUENCY, sample_all=True)
            profile = record_all_while(commands, recorder)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
    mine: Counter[str] = Counter()
    for stack, n in profile.stacks.items():
        if stack.user and profile.comm(stack.pid, stack.space_pid) in NAMES:
            mine[stack.outcome] += n
    walked = sum(mine.values()) - mine["not_loaded"]
    print(json.dumps({"load": os.getloadavg()[0], "outcomes": dict(mine),
                      "cut_by_eviction": mine["no_table"] + mine["table_evicted"],
                      "complete_of_walked": round(mine["end"] / walked, 3) if walked else None,
                      "evictions": len(recorder.evicted), "evicted_while_mapped": sum(recorder.evicted),
                      "rows_loaded": profile.rows_loaded}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
