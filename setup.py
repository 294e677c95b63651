"""Build the C core (fastunwind._core). Everything else is declared in pyproject.toml.

FASTUNWIND_SANITIZE=1 builds the extension with ASAN+UBSAN (see `make asan`);
FASTUNWIND_DEBUG=1 builds it with -O0 -g; FASTUNWIND_PGO=0 leaves out the profile-guided pass
(PGO_TRAINING).
"""
import os
import shutil
import subprocess
import sys
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from distutils.command.build_scripts import build_scripts  # setuptools' distutils (imported after setuptools)

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
    # one partition: no static function is promoted and renamed (`name.lto_priv.0`), so frames in the
    # core keep their names (stacks.unwind_current_thread's leaf is `unwind_self`)
    compile_args += ["-O2", "-flto=auto", "-flto-partition=one"]
    link_args += ["-flto=auto", "-flto-partition=one", "-O2"]

# The optimized build (`make build`, a wheel) is guided by a profile: the extension is built with
# counters, `check` runs on the system's libc and libstdc++ (PGO_TRAINING), and the extension is
# built again from the counts. Code the training does not run is optimized as without a profile
# (-fprofile-partial-training). docs/DESIGN.md, "check", Speed.
PGO = not os.environ.get("FASTUNWIND_SANITIZE") and not os.environ.get("FASTUNWIND_DEBUG") \
    and os.environ.get("FASTUNWIND_PGO", "1") != "0"
PGO_PROFILES = os.path.abspath(".build/pgo")
PGO_TRAINING = """
import os
from fastunwind.check import check_file
for path in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6"):
    if os.path.exists(path):
        check_file(path)
"""

# The in-kernel unwinder (native/bpf): the BPF program is compiled by clang-14 -target bpf against
# this kernel's types (vmlinux.h from its BTF: CO-RE relocates the fields it reads on other kernels)
# and embedded in the extension as the skeleton bpftool generates (unwind.skel.h).
BPF_BUILD = ".build/bpf"


def build_bpf_skeleton() -> None:
    os.makedirs(BPF_BUILD, exist_ok=True)
    vmlinux = os.path.join(BPF_BUILD, "vmlinux.h")
    if not os.path.exists(vmlinux):
        with open(vmlinux + ".tmp", "wb") as out:
            subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"],
                           stdout=out, check=True)
        os.replace(vmlinux + ".tmp", vmlinux)
    obj = os.path.join(BPF_BUILD, "unwind.bpf.o")
    subprocess.run(["clang-14", "-g", "-O2", "-Wall", "-Werror", "-target", "bpf", "-D__TARGET_ARCH_x86",
                    "-I", BPF_BUILD, "-I", "native/core", "-c", "native/bpf/unwind.bpf.c", "-o", obj], check=True)
    skeleton = subprocess.run(["bpftool", "gen", "skeleton", obj, "name", "fu_unwind"], check=True,
                              stdout=subprocess.PIPE).stdout
    with open(os.path.join(BPF_BUILD, "unwind.skel.h"), "wb") as out:
        out.write(skeleton)


build_bpf_skeleton()

# The launcher (native/cli): the `fastunwind` command, a C program that serves `backtrace -p`,
# `core`, `perf-script -i` and `report -i` without starting Python and hands every other command
# line to the Python CLI: the `fastunwind-python` script pip installs beside it, else (the
# in-place build, run from the tree) the interpreter building it (FASTUNWIND_PYTHON overrides).
# The core's sources it needs are linked into it statically. It is the wheel's `fastunwind`
# script, so `pip install` makes it the command (docs/DESIGN.md, "The launcher").
LAUNCHER = "launcher"  #: its file name, beside the extension
COMMAND = "fastunwind"  #: its name as the installed command
LAUNCHER_CORE_SOURCES = ["address_space.c", "cache_paths.c", "mapped_file.c", "cfi_eval.c", "cfi_eh_frame_hdr.c", "cfi_parse.c", "compact_table.c", "coredump.c", "elf_file.c",
                         "demangle.c", "dwarf_expr.c", "eh_elf.c", "error.c", "live.c", "lookup.c", "memory.c", "perf_data.c", "perf_regs.c",
                         "perf_replay.c", "perf_script.c", "perf_walk.c", "plt.c", "report.c", "srcline.c",
                         "snapshot.c", "symbol_cache.c", "symbols.c", "walk.c", "x86_64.c"]


class BuildWithLauncher(build_ext):
    def launcher_path(self) -> str:
        """Built in place (`make build`, an editable install): beside the extension, where the
        tests and the venv's command run it; else in the build's temporary folder, for the wheel's
        scripts only (LauncherScript)."""
        if self.inplace:
            return os.path.join(os.path.dirname(self.get_ext_fullpath("fastunwind._core")), LAUNCHER)
        return os.path.join(self.build_temp, COMMAND)

    def _build_extension(self, extra_compile: list[str], extra_link: list[str]) -> None:
        """The extension built (again) with these flags besides compile_args and link_args: the
        first time by build_ext.run, which sets the compiler up, then by build_extensions."""
        for extension in self.extensions:
            extension.extra_compile_args = compile_args + extra_compile
            extension.extra_link_args = link_args + extra_link
        self.force = True
        if isinstance(self.compiler, str) or self.compiler is None:
            super().run()
        else:
            self.build_extensions()

    def run(self) -> None:
        if PGO:
            shutil.rmtree(PGO_PROFILES, ignore_errors=True)
            self._build_extension(["-fprofile-generate", "-fprofile-update=prefer-atomic",
                                   f"-fprofile-dir={PGO_PROFILES}"], ["-fprofile-generate"])
            # the package where the extension is built: src in place, else the build's folder, where
            # build_py has put its Python files
            package_root = os.path.dirname(os.path.dirname(os.path.abspath(self.get_ext_fullpath("fastunwind._core"))))
            training = subprocess.run([sys.executable, "-c", PGO_TRAINING], env=dict(os.environ, PYTHONPATH=package_root))
            if training.returncode == 0:
                self._build_extension(["-fprofile-use", "-fprofile-partial-training",
                                       f"-fprofile-dir={PGO_PROFILES}", "-Wno-missing-profile"], [])
            else:
                print("setup.py: the profile's training run failed: the extension is built without a profile",
                      file=sys.stderr)
                self._build_extension([], [])
        else:
            super().run()
        python = os.environ.get("FASTUNWIND_PYTHON", sys.executable)
        sources = sorted(glob("native/cli/*.c")) + [f"native/core/{name}" for name in LAUNCHER_CORE_SOURCES]
        objects = self.compiler.compile(
            sources, output_dir=os.path.join(self.build_temp, "launcher"),
            include_dirs=["native/cli", "native/core", "src/fastunwind/include"],
            macros=[("FU_CLI_PYTHON", '"' + python.replace("\\", "\\\\").replace('"', '\\"') + '"')],
            extra_postargs=[a for a in compile_args if a != "-fvisibility=hidden"] + ["-ffunction-sections",
                                                                                      "-fdata-sections"],
            depends=sorted(glob("native/cli/*.h") + glob("native/core/*.[ch]") + glob("native/core/*.inc")))
        directory, name = os.path.split(self.launcher_path())
        self.compiler.link_executable(
            objects, name, output_dir=directory,
            # demangle.c: libiberty's demangler (a static library); perf_data.c: zstd; srcline.c
            # (perf_script.c's source lines): libdw, libelf and their decompressors, all static, so
            # that the launcher loads no library but libc
            libraries=["iberty", ":libdw.a", ":libelf.a", ":libzstd.a", ":libz.a", ":liblzma.a", ":libbz2.a"],
            extra_postargs=["-Wl,--gc-sections", "-Wl,--as-needed"]
            + [a for a in link_args if not a.startswith("-Wl,")],  # the sanitizers, LTO as the extension's
            target_lang="c")


class LauncherScript(build_scripts):
    """The wheel's scripts: the launcher, copied as it is under the command's name (build_scripts
    would read the ELF program as text, for a shebang to rewrite)."""

    def get_source_files(self) -> list[str]:
        return []  # built, not a source of the sdist

    def copy_scripts(self) -> tuple[list[str], list[str]]:
        self.run_command("build_ext")
        launcher = self.get_finalized_command("build_ext").launcher_path()
        self.mkpath(self.build_dir)
        command = os.path.join(self.build_dir, COMMAND)
        self.copy_file(launcher, command)
        os.chmod(command, 0o755)
        return [command], [command]


setup(
    cmdclass={"build_ext": BuildWithLauncher, "build_scripts": LauncherScript},
    scripts=[COMMAND],
    ext_modules=[
        Extension(
            "fastunwind._core",
            # native/core: the C core (pure C11, no Python API); native/py: the bindings (py_*.c)
            sources=sorted(glob("native/core/*.c")) + sorted(glob("native/py/*.c")) + ["native/bpf/bpf_session.c"],
            # a header change rebuilds every file (*.inc: parts of one translation unit)
            depends=sorted(glob("native/core/*.[ch]") + glob("native/core/*.inc") + glob("native/py/*.h")
                           + glob("native/bpf/*.[ch]")),
            include_dirs=["native/core", "native/py", "native/bpf", BPF_BUILD, "src/fastunwind/include"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            # perf_data.c: PERF_RECORD_COMPRESSED (perf record -z); demangle.c: libiberty's demangler
            # (libiberty-dev ships only a static, PIC libiberty.a); synth_decode.c: Zydis 4, the x86
            # decoder (libzydis-dev); bpf_session.c: libbpf (libbpf-dev) loads the in-kernel unwinder;
            # srcline.c: elfutils' libdw, DWARF line tables and inline DIEs (libdw-dev)
            libraries=["zstd", "iberty", "Zydis", "bpf", "dw", "elf"],
        )
    ]
)
