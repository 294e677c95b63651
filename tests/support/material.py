"""Pull peers' test material into the git-ignored cache `.cache/material/` and build it.

Two sources, both through their package registries (shared/ORACLES.md):

* pyelftools 0.33 sdist (PyPI, `pip download --no-binary :all:`): ~55 x86-64 ELF files with CFI under
  `test/` and `examples/` (both sections, compressed `.debug_frame`, zPLR, Solaris and FreePascal
  objects, a debuglink pair). Used as shipped.
* binutils 2.40 testsuite (Debian `binutils-source`, `apt-get download` into the cache, unpacked with
  `dpkg-deb -x`, no root install): `gas/testsuite/gas/cfi/*.s` assembled with `as --64` and the
  `#as:` flags of their `.d` file (the tests for other architectures fail to assemble and are
  counted, not hidden), and the linked tests `ld-elf/eh*.d` and the `ld-x86-64` PLT tests that dump
  `-wf`, built per their `#source:`/`#as:`/`#ld:` lines.

* elfutils' backtrace test cores (Debian source package `elfutils`, the .orig tarball of the installed
  version from the Debian mirror's pool): `tests/backtrace.<arch>.core.bz2` with the executables
  they were dumped from, `tests/backtrace.<arch>.exec.bz2`, decompressed into the cache; the frames
  elfutils' own tests expect of them are in tests/backtrace.c (callback_verify) and
  tests/backtrace-subr.sh (check_core).

Downloads happen once; the builds are redone on every call into the cache (about a second), so a
changed toolchain never leaves stale objects behind. Every failure raises MaterialUnavailable with a
message fit for `pytest.skip`.

`python3 -m tests.support.material` (from the repository root) fetches and builds everything and prints what it got.
"""
from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from scripts import oracle_files
from tests.support.paths import REPO_ROOT

CACHE = REPO_ROOT / ".cache" / "material"

PYELFTOOLS_VERSION = "0.33"
BINUTILS_VERSION = "2.40"
# An installed binutils-source (same version as the tools) is used when the download fails.
INSTALLED_BINUTILS_TARBALL = Path(f"/usr/src/binutils/binutils-{BINUTILS_VERSION}.tar.xz")
BINUTILS_MEMBERS = [
    "gas/testsuite/gas/cfi/",
    "ld/testsuite/ld-elf/eh",
    "ld/testsuite/ld-x86-64/",  # only the *plt* files are kept, see _wanted_binutils_member
]
COMMAND_TIMEOUT = 300


class MaterialUnavailable(Exception):
    """The material could not be fetched or built; the message says what and why."""


def _run(command: list[str], cwd: Path | None = None, what: str = "") -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise MaterialUnavailable(f"{what}: {error}") from error
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()[-3:]
        raise MaterialUnavailable(f"{what}: {' / '.join(message) or f'exit {result.returncode}'}")
    return result


def _dedupe_by_content(paths: list[Path]) -> list[Path]:
    seen: set[str] = set()
    unique = []
    for path in paths:
        digest = hashlib.sha1(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            unique.append(path)
    return unique


# ---------------------------------------------------------------------------------------------
# pyelftools

def pyelftools_root() -> Path:
    """The unpacked test material of the pyelftools sdist (downloaded on first use)."""
    root = CACHE / f"pyelftools-{PYELFTOOLS_VERSION}"
    done = root / ".complete"
    if done.exists():
        return root
    downloads = CACHE / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    archive = downloads / f"pyelftools-{PYELFTOOLS_VERSION}.tar.gz"
    if not archive.exists():
        _run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
              "--disable-pip-version-check", "-d", str(downloads), f"pyelftools=={PYELFTOOLS_VERSION}"],
             what=f"could not download pyelftools {PYELFTOOLS_VERSION} sdist")
        if not archive.exists():
            raise MaterialUnavailable(f"could not download pyelftools {PYELFTOOLS_VERSION} sdist: "
                                      f"pip did not produce {archive.name}")
    shutil.rmtree(root, ignore_errors=True)
    prefix = f"pyelftools-{PYELFTOOLS_VERSION}/"
    try:
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and m.name.startswith((prefix + "test/", prefix + "examples/"))
                       and not m.name.endswith(".py")]
            for member in members:
                member.name = member.name[len(prefix):]
            tar.extractall(root, members=members, filter="data")
    except (OSError, tarfile.TarError) as error:
        raise MaterialUnavailable(f"could not unpack {archive}: {error}") from error
    done.touch()
    return root


@functools.cache
def pyelftools_files() -> list[Path]:
    """The x86-64 ELF files with CFI in the pyelftools sdist's tests and examples, one per content."""
    root = pyelftools_root()
    return _dedupe_by_content([item.path for item in oracle_files.enumerate_files([root])])


# ---------------------------------------------------------------------------------------------
# binutils

def _wanted_binutils_member(relative: str) -> bool:
    if relative.startswith("ld/testsuite/ld-x86-64/"):
        name = relative.rsplit("/", 1)[1]
        return "plt" in name and "x32" not in name
    return any(relative.startswith(prefix) for prefix in BINUTILS_MEMBERS)


def binutils_root() -> Path:
    """The unpacked binutils testsuite subset (downloaded with apt-get on first use)."""
    root = CACHE / f"binutils-{BINUTILS_VERSION}"
    done = root / ".complete"
    if done.exists():
        return root
    downloads = CACHE / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    tarball = None
    debs = sorted(downloads.glob("binutils-source_*.deb"))
    download_error = ""
    if not debs:
        try:
            _run(["apt-get", "download", "binutils-source"], cwd=downloads,
                 what="could not download Debian binutils-source")
        except MaterialUnavailable as error:
            download_error = str(error)
        debs = sorted(downloads.glob("binutils-source_*.deb"))
    if debs:
        unpacked = downloads / "binutils-source"
        shutil.rmtree(unpacked, ignore_errors=True)
        _run(["dpkg-deb", "-x", str(debs[-1]), str(unpacked)], what=f"could not unpack {debs[-1].name}")
        found = sorted(unpacked.glob("usr/src/binutils/binutils-*.tar.*"))
        tarball = found[-1] if found else None
    elif INSTALLED_BINUTILS_TARBALL.exists():
        tarball = INSTALLED_BINUTILS_TARBALL
    if tarball is None:
        raise MaterialUnavailable(download_error or "binutils-source holds no binutils tarball")
    shutil.rmtree(root, ignore_errors=True)
    try:
        with tarfile.open(tarball) as tar:
            members = []
            for member in tar:
                relative = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.isfile() and _wanted_binutils_member(relative):
                    member.name = relative
                    members.append(member)
            tar.extractall(root, members=members, filter="data")
    except (OSError, tarfile.TarError) as error:
        raise MaterialUnavailable(f"could not unpack {tarball}: {error}") from error
    done.touch()
    return root


@dataclass
class DumpTest:
    """The build instructions of one binutils `.d` file (the `#key: value` header lines)."""

    path: Path
    sources: list[str] = field(default_factory=list)
    as_flags: list[str] = field(default_factory=list)
    ld_flags: list[str] | None = None  # None: assemble only
    readelf: str = ""
    expects_error: bool = False

    @classmethod
    def parse(cls, path: Path) -> "DumpTest":
        test = cls(path)
        for line in path.read_text(errors="replace").splitlines():
            match = re.match(r"#(\w+):\s*(.*)$", line)
            if not match:
                continue
            key, value = match.groups()
            # $NO_DT_RELR_LDFLAGS and the like are harness variables; the default linker needs none.
            words = [w for w in value.split() if not w.startswith("$")]
            if key == "source":
                test.sources.append(words[0])
            elif key == "as":
                test.as_flags += words
            elif key == "ld":
                test.ld_flags = (test.ld_flags or []) + words
            elif key == "readelf":
                test.readelf = value
            elif key == "error":
                test.expects_error = True
        if not test.sources:
            test.sources = [path.stem + ".s"]
        return test


@dataclass
class Built:
    files: list[Path]
    skipped: dict[str, str]  # test name -> why it was not built (e.g. another architecture's assembly)


def _build(test: DumpTest, out_dir: Path) -> Path:
    directory = test.path.parent
    objects = []
    for index, source in enumerate(test.sources):
        obj = out_dir / f"{test.path.stem}.{index}.o" if test.ld_flags is not None else out_dir / f"{test.path.stem}.o"
        flags = test.as_flags if "--64" in test.as_flags else ["--64", *test.as_flags]
        _run(["as", *flags, "-o", str(obj), source], cwd=directory, what=f"as {source}")
        objects.append(obj)
    if test.ld_flags is None:
        return objects[0]
    output = out_dir / test.path.stem
    _run(["ld", *test.ld_flags, "-o", str(output), *map(str, objects)], cwd=directory,
         what=f"ld for {test.path.name}")
    return output


@functools.cache
def binutils_files() -> Built:
    """Build the x86-64-applicable gas CFI tests and the ld eh/PLT tests into the cache."""
    root = binutils_root()
    out_dir = CACHE / "build" / "binutils"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    tests = sorted((root / "gas/testsuite/gas/cfi").glob("*.d"))
    ld_elf = root / "ld/testsuite/ld-elf"
    tests += sorted(ld_elf.glob("eh[0-9]*.d")) + [ld_elf / "eh-frame-hdr.d"]
    tests += [d for d in sorted((root / "ld/testsuite/ld-x86-64").glob("*plt*.d"))
              if "-wf" in DumpTest.parse(d).readelf]
    built = Built([], {})
    # eh-group has no .d file: eh-group.exp links its two sources with -r, then with -e _start.
    group = DumpTest(ld_elf / "eh-group.d", sources=["eh-group1.s", "eh-group2.s"],
                     as_flags=["--defsym", "ELF64=1"], ld_flags=["-r"])
    for path in tests + [group.path]:
        test = group if path == group.path else DumpTest.parse(path)
        name = f"{path.parent.name}/{path.stem}"
        if test.expects_error:
            built.skipped[name] = "the test expects the assembler to reject it"
            continue
        section = "cfi" if path.parent.name == "cfi" else "ld"
        target_dir = out_dir / section
        target_dir.mkdir(exist_ok=True)
        try:
            output = _build(test, target_dir)
        except MaterialUnavailable as error:
            built.skipped[name] = str(error)
            continue
        if test is group:
            relocatable = output.rename(target_dir / "eh-group.r.o")
            try:
                _run(["ld", "-e", "_start", "-o", str(output), str(relocatable)], what="ld for eh-group")
            except MaterialUnavailable as error:
                built.skipped[name] = str(error)
                continue
        if oracle_files.cfi_section_bytes(output) is None:
            built.skipped[name] = "built, but has no CFI section"
            continue
        built.files.append(output)
    return built


#: where Debian keeps the elfutils source tarballs (its mirror's pool)
ELFUTILS_POOL = "https://deb.debian.org/debian/pool/main/e/elfutils"
#: the backtrace cores of elfutils' tests kept (name without .core/.exec): the x86-64 ones, with and
#: without frame pointers, and the x32 one (an x86-64 machine's 32-bit ABI: not supported)
ELFUTILS_CORES = ("backtrace.x86_64", "backtrace.x86_64.fp", "backtrace.x32")


def installed_elfutils_version() -> str:
    """The upstream version of the installed elfutils ("0.188" of Debian's "0.188-2.1")."""
    result = _run(["dpkg-query", "-W", "-f=${Version}", "elfutils"], what="elfutils is not installed")
    return result.stdout.strip().split(":")[-1].split("-")[0]


def elfutils_backtrace_cores() -> Path:
    """A directory of elfutils' backtrace cores and executables (ELFUTILS_CORES, decompressed),
    from the Debian .orig tarball of the installed elfutils version (downloaded on first use)."""
    version = installed_elfutils_version()
    root = CACHE / f"elfutils-{version}"
    done = root / ".complete"
    if done.exists():
        return root
    downloads = CACHE / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    tarball = downloads / f"elfutils_{version}.orig.tar.bz2"
    if not tarball.exists():
        import urllib.request

        partial = tarball.with_suffix(".part")
        try:
            with urllib.request.urlopen(f"{ELFUTILS_POOL}/{tarball.name}", timeout=COMMAND_TIMEOUT) as response:
                partial.write_bytes(response.read())
        except OSError as error:
            raise MaterialUnavailable(f"could not download {ELFUTILS_POOL}/{tarball.name}: {error}") from error
        partial.rename(tarball)
    wanted = {f"tests/{name}.{kind}.bz2" for name in ELFUTILS_CORES for kind in ("core", "exec")}
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    import bz2

    try:
        with tarfile.open(tarball) as tar:
            for member in tar:
                relative = member.name.split("/", 1)[1] if "/" in member.name else ""
                if relative in wanted:
                    extracted = tar.extractfile(member)
                    if extracted is not None:
                        (root / Path(relative).stem).write_bytes(bz2.decompress(extracted.read()))
    except (OSError, tarfile.TarError, ValueError) as error:
        raise MaterialUnavailable(f"could not unpack {tarball}: {error}") from error
    if len(list(root.iterdir())) != len(wanted):
        raise MaterialUnavailable(f"{tarball.name} lacks some of {sorted(wanted)}")
    done.touch()
    return root


if __name__ == "__main__":
    try:
        print(f"elfutils backtrace cores: {elfutils_backtrace_cores()}")
    except MaterialUnavailable as error:
        print(f"elfutils backtrace cores: unavailable: {error}")
    for label, getter in (("pyelftools", pyelftools_files), ("binutils", binutils_files)):
        try:
            got = getter()
        except MaterialUnavailable as error:
            print(f"{label}: unavailable: {error}")
            continue
        files = got if isinstance(got, list) else got.files
        print(f"{label}: {len(files)} files")
        for path in files:
            print(f"    {path}")
        for name, why in getattr(got, "skipped", {}).items():
            print(f"    skipped {name}: {why.splitlines()[0][:120]}")
