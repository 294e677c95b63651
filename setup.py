"""Build the C core (fastunwind._core). Everything else is declared in pyproject.toml.

FASTUNWIND_SANITIZE=1 builds the extension with ASAN+UBSAN (see `make asan`);
FASTUNWIND_DEBUG=1 builds it with -O0 -g.
"""
import os
from glob import glob

from setuptools import Extension, setup

compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"]
# libiberty's symbols stay inside the extension (not exported to other modules)
link_args: list[str] = ["-Wl,--exclude-libs,ALL"]
if os.environ.get("FASTUNWIND_SANITIZE"):
    compile_args += ["-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                     "-fno-sanitize-recover=undefined"]
    link_args += ["-fsanitize=address,undefined"]
elif os.environ.get("FASTUNWIND_DEBUG"):
    compile_args += ["-O0", "-g"]
else:
    compile_args += ["-O2"]

setup(
    ext_modules=[
        Extension(
            "fastunwind._core",
            # native/core: the C core (pure C11, no Python API); native/py: the bindings (py_*.c)
            sources=sorted(glob("native/core/*.c")) + sorted(glob("native/py/*.c")),
            # a header change rebuilds every file (*.inc: parts of one translation unit)
            depends=sorted(glob("native/core/*.[ch]") + glob("native/core/*.inc") + glob("native/py/*.h")),
            include_dirs=["native/core", "native/py", "src/fastunwind/include"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            # perf_data.c: PERF_RECORD_COMPRESSED (perf record -z); demangle.c: libiberty's demangler
            # (libiberty-dev ships only a static, PIC libiberty.a); synth_decode.c: Zydis 4, the x86
            # decoder (libzydis-dev); srcline.c: elfutils' libdw, DWARF line tables and inline DIEs
            # (libdw-dev)
            libraries=["zstd", "iberty", "Zydis", "dw", "elf"],
        )
    ]
)
