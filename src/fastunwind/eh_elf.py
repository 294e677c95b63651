"""Compatibility name: docs/BENCHMARKS.md documents `fastunwind.eh_elf.compile_images`. The code is
in tables/eh_elf.py (generation, compiling, the cache), elf/dynamic.py (`with_dependencies`) and
perf/replay.py (`recorded_files`, which was `recorded_modules`)."""

from fastunwind.elf.dynamic import with_dependencies
from fastunwind.perf.replay import recorded_files as recorded_modules
from fastunwind.tables.eh_elf import (GENERATOR_VERSION, LOOKUPS, OPTIMIZATION, CompileResult, Generated, cache_dir,
                                      cache_path, compile_images, compiler, generate, load, open_cached,
                                      write_sources)

__all__ = ["GENERATOR_VERSION", "LOOKUPS", "OPTIMIZATION", "CompileResult", "Generated", "cache_dir", "cache_path",
           "compile_images", "compiler", "generate", "load", "open_cached", "recorded_modules", "with_dependencies",
           "write_sources"]
