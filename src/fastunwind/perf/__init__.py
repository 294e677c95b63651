"""perf.data recordings, stage by stage: data.py reads them (native/core/perf_data.c), replay.py ties
every sample to its process's address space, walk.py walks the samples in one C call, script.py
symbolizes and prints them as `perf script` does, bench.py times the walker on them. A module here
imports only the modules before it in that order."""
