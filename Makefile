# fastunwind — set-up, build and checks. `make demo` and `make test` work on a fresh Debian machine:
# they install the system packages and the Python environment they need first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .build

# Oracles and build tools: readelf (binutils), llvm-dwarfdump-14 / llvm-readelf-14 (llvm-14),
# gcc, libdw and libunwind headers for the peers' harnesses, zlib/zstd for compressed sections,
# perf (linux-perf) and the recorded workloads: hackbench (rt-tests), clang-14 compiling a big file;
# the real-binary corpus: the other linkers (lld, mold; gold is in binutils) and Go (golang-go);
# libiberty (libiberty-dev) demangles C++ and Rust names in the C core; Zydis (libzydis-dev) decodes
# x86-64 machine code for `check` (native/core/synth_decode.c); chromium and its driver open the HTML
# flame graph in the tests (tests/integration/test_flame_graph_browser.py); libbpf (libbpf-dev) and
# bpftool build and load the in-kernel unwinder of `record --bpf` (native/bpf).
SYSTEM_PACKAGES := binutils gcc g++ make llvm-14 clang-14 elfutils libdw-dev libunwind-dev \
                   zlib1g-dev libzstd-dev pkg-config xz-utils linux-perf rt-tests \
                   lld mold golang-go libiberty-dev libzydis-dev chromium chromium-driver gdb time ffmpeg \
                   libbpf-dev bpftool debuginfod libc6-dbg

NATIVE := $(wildcard native/core/*.[ch] native/core/*.inc native/py/*.[ch] native/bpf/*.[ch] native/cli/*.[ch])
EXTENSION := src/fastunwind/_core$(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
LAUNCHER := src/fastunwind/launcher
DEMO_FILE ?= /lib/x86_64-linux-gnu/libc.so.6

.PHONY: FORCE all setup build demo test corpus sweep sweep-check asan fuzz bench bench-unwind bench-eh-elf bench-perf-script \
        bench-check bench-synth bench-core bench-trace bench-bpf bench-bpf-pool bench-record decode-compare synth-unwind clean

all: build

# The list is a file that changes only when the list does, so that adding a package installs it on
# machines that already have the stamp.
$(STAMPS)/system-packages.list: FORCE
	@mkdir -p $(STAMPS)
	@echo '$(SYSTEM_PACKAGES)' | cmp -s - $@ || echo '$(SYSTEM_PACKAGES)' > $@

$(STAMPS)/system.stamp: scripts/install-system-packages.sh $(STAMPS)/system-packages.list
	@mkdir -p $(STAMPS)
	scripts/install-system-packages.sh $(SYSTEM_PACKAGES)
	@touch $@

$(STAMPS)/venv.stamp: pyproject.toml $(STAMPS)/system.stamp
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@# pip installs the launcher as the `fastunwind` command (setup.py); an editable install's is a
	@# copy of it as then built, this venv's follows the in-place build as its Python code does
	ln -sf ../../$(LAUNCHER) $(VENV)/bin/fastunwind
	@touch $@

# --force: make has already seen a source change; setuptools compares whole-second mtimes and would
# keep the old extension after an edit made within the second of the last build.
$(EXTENSION): $(NATIVE) setup.py $(STAMPS)/venv.stamp
	$(PY) setup.py -q build_ext --inplace --force

setup: $(STAMPS)/venv.stamp
build: $(EXTENSION)

demo: build
	@echo "== fastunwind table --summary $(DEMO_FILE)"
	$(VENV)/bin/fastunwind table --summary $(DEMO_FILE)
	@echo
	@echo "== the same table, compared with readelf --debug-dump=frames-interp"
	@$(VENV)/bin/fastunwind table $(DEMO_FILE) > $(STAMPS)/demo-table.txt
	@# readelf exits 1 when it meets a NOBITS .eh_frame in a separate debug file (libc6-dbg); its output is what counts
	@readelf --debug-dump=frames-interp $(DEMO_FILE) > $(STAMPS)/demo-readelf.txt || true
	@cmp -s $(STAMPS)/demo-table.txt $(STAMPS)/demo-readelf.txt \
	  && echo "identical to readelf: $$(wc -l < $(STAMPS)/demo-table.txt) lines" \
	  || { echo "DIFFERENT from readelf:"; diff $(STAMPS)/demo-table.txt $(STAMPS)/demo-readelf.txt | head -20; exit 1; }
	@echo
	@echo "== fastunwind lookup $(DEMO_FILE) <an address inside its first multi-row FDE>"
	$(VENV)/bin/fastunwind lookup $(DEMO_FILE) $$($(PY) -m scripts.demo_address $(DEMO_FILE))
	@echo
	@echo "== perf record --call-graph dwarf of the bundled C workload, unwound by fastunwind"
	@status=0; $(PY) -m scripts.record_workloads $(STAMPS)/demo --only c --seconds 1 > $(STAMPS)/demo-record.log 2>&1 || status=$$?; \
	if [ $$status -eq 0 ]; then \
	  $(VENV)/bin/fastunwind perf-script -i $(STAMPS)/demo/c.data | awk -v RS= '/sigalrm_handler_work/ {print; exit}'; \
	  echo; $(VENV)/bin/fastunwind perf-script -i $(STAMPS)/demo/c.data --stats; \
	  echo; echo "== its modules compiled to eh_elfs (fastunwind compile --from), then the walker timed per backend"; \
	  $(VENV)/bin/fastunwind compile --from $(STAMPS)/demo/c.data && \
	  COLUMNS=120 $(VENV)/bin/fastunwind bench -i $(STAMPS)/demo/c.data --backend auto,table,compiled,dwarf --repeat 5; \
	else \
	  cat $(STAMPS)/demo-record.log; echo "(perf could not record here: the stack unwinding part of the demo is skipped)"; \
	fi

test: build
	$(VENV)/bin/mypy --strict src/fastunwind && $(PY) -m pytest -q tests

# The whole real-binary corpus (scripts/corpus.py: every linker and layout, Rust, Go, C++, Debian's
# programs) against perf script; `make test` runs its sample.
corpus: build
	FASTUNWIND_CORPUS=all $(PY) -m pytest -q tests/golden/test_corpus.py

# Every ELF file with CFI under the system's library, binary, LLVM and Python directories.
sweep: build
	$(PY) -m scripts.sweep

# `fastunwind check` on the same files: FDEs by verdict, agreement, undecided reasons (counts only).
sweep-check: build
	$(PY) -m scripts.sweep_check

# The decoder's fast path against Zydis on every instruction of the .text of libc, ld.so, libstdc++,
# python3.11 and libLLVM-14 (`make test` compares libc's and ld.so's).
decode-compare: build
	FASTUNWIND_DECODE_COMPARE=all $(PY) -m pytest -q tests/golden/test_decode_real_binaries.py

# The C core under AddressSanitizer + UndefinedBehaviorSanitizer: standalone drivers run the
# hostile-input corpus and mutated real sections, perf.data recordings, and the stack walker over
# hostile, generated and mutated stacks (native/fuzz/README.md).
asan: $(STAMPS)/system.stamp
	$(MAKE) -C native/fuzz asan

fuzz: $(STAMPS)/system.stamp
	$(MAKE) -C native/fuzz fuzz

bench: build
	$(PY) -m benchmarks.bench_cfi

# `fastunwind check libLLVM-14.so.1` against `readelf -wF` of the same file (docs/BENCHMARKS.md).
bench-check: build
	$(PY) -m benchmarks.bench_check

# `fastunwind synth` of libc and libLLVM-14 against `readelf -wF` of the same files (docs/BENCHMARKS.md).
bench-synth: build
	$(PY) -m benchmarks.bench_synth
# `fastunwind core` against `eu-stack --core` and gdb on a gcore of a 64-thread process.
bench-core: build
	$(PY) -m benchmarks.bench_core

# `fastunwind check --trace`: steps per second on real commands against a bare ptrace loop.
bench-trace: build
	$(PY) -m benchmarks.bench_trace

# The walker against libunwind, libdw and a frame-pointer walk on the same perf samples.
bench-unwind: build
	$(PY) -m benchmarks.bench_unwind

# Unwinding through synthesized rows: the seeded program and an x264 encode (as it runs, and with its
# stack's pages present) recorded, samples that land in code without CFI or with wrong CFI counted by
# how far they unwind with --synth off, missing and repair (docs/BENCHMARKS.md, "Unwinding through
# synthesized rows").
SYNTH_UNWIND_SECONDS ?= 3
synth-unwind: build
	$(PY) -m scripts.synth_unwind --seconds $(SYNTH_UNWIND_SECONDS)

# End to end on big recordings: fastunwind perf-script against perf script, time and peak RSS side
# by side (docs/BENCHMARKS.md, "End to end on big recordings"). The recordings are made once: clang-14
# compiling a generated file (~55 MB), hackbench -P (~100 MB), python 500 frames deep (~440 MB) and the
# same at 4 kHz for a minute (~1.9 GB; 2 GB of disk).
BENCH_BIG := $(STAMPS)/bench-perf-script
BENCH_BIG_RECORDINGS := $(BENCH_BIG)/50mb/compiler.data $(BENCH_BIG)/100mb/hackbench-processes.data \
                        $(BENCH_BIG)/400mb/python.data $(BENCH_BIG)/2gb/python.data
BENCH_BIG_RUNS ?= 3
$(BENCH_BIG)/50mb/compiler.data: | $(STAMPS)/venv.stamp
	$(PY) -m scripts.record_workloads $(BENCH_BIG)/50mb --only compiler --seconds 4.5 --no-script
$(BENCH_BIG)/100mb/hackbench-processes.data: | $(STAMPS)/venv.stamp
	$(PY) -m scripts.record_workloads $(BENCH_BIG)/100mb --only hackbench-processes --seconds 14 --no-script
$(BENCH_BIG)/400mb/python.data: | $(STAMPS)/venv.stamp
	$(PY) -m scripts.record_workloads $(BENCH_BIG)/400mb --only python --seconds 24 --no-script
$(BENCH_BIG)/2gb/python.data: | $(STAMPS)/venv.stamp
	$(PY) -m scripts.record_workloads $(BENCH_BIG)/2gb --only python --seconds 55 --frequency 4000 --no-script
bench-perf-script: build $(BENCH_BIG_RECORDINGS)
	$(PY) -m benchmarks.bench_perf_script --runs $(BENCH_BIG_RUNS) $(BENCH_BIG_RECORDINGS)

# Compiled unwind tables: generation and compile time, code size against .eh_frame.
bench-eh-elf: build
	$(PY) -m benchmarks.bench_eh_elf

# record --bpf against perf record --call-graph dwarf and no profiler (root: docs/BENCHMARKS.md); each
# run's report is kept in .build/bench-bpf, and bench-bpf-pool gives the verdicts of all their rounds
# together (bench_bpf refuses reports of different trees)
BENCH_BPF_REPORTS = .build/bench-bpf
bench-bpf: build
	mkdir -p $(BENCH_BPF_REPORTS)
	$(PY) -m benchmarks.bench_bpf --json $(BENCH_BPF_REPORTS)/$$(date -u +%Y%m%dT%H%M%S).json
bench-bpf-pool: build
	$(PY) -m benchmarks.bench_bpf --pool $(BENCH_BPF_REPORTS)/*.json

# record's overhead on the profiled program: fastunwind record (and --bpf as root) against perf record +
# perf script and no profiler, at 99 and 999 Hz (docs/BENCHMARKS.md)
bench-record: build
	$(PY) -m benchmarks.bench_record --repeat 5 --seconds 4

clean:
	rm -rf build $(STAMPS) src/fastunwind/_core*.so src/*.egg-info
	$(MAKE) -C native/fuzz clean 2>/dev/null || true
