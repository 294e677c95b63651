"""The real ELF files that the readelf golden tests and `make sweep` compare fastunwind against.

`enumerate_files()` lists every x86-64 ELF file with CFI (a `.eh_frame`, `.debug_frame` or
`.zdebug_frame` section) under the system library and binary folders, LLVM 14 and this Python
installation. It reads the ELF and section headers itself (a few hundred bytes per file), so listing
~3,000 files takes about a second; it never runs readelf to decide.

`sample(n)` is the fixed subset the default test suite checks: the first `n` files by SHA-1 of their
path (stable across runs on one machine, no seed to remember), minus files whose CFI is so large
that the readelf output would dominate the suite, plus the named files that matter most (libc, the
dynamic loader, libstdc++ and the 100 MB libLLVM-14, always included whatever their size).

This module also holds the streaming comparison both users share: `compare_outputs()` runs the tool
under test and readelf concurrently and compares their stdout chunk by chunk, so libLLVM's ~80 MB of
text is never held in memory whole, and reports the first differing line with context.

Run it directly to list the files: `python3 scripts/oracle_files.py [--sample] [--sizes]`.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import stat
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SRC_DIR = REPO_ROOT / "src"

SEARCH_ROOTS = [
    Path("/usr/lib/x86_64-linux-gnu"),
    Path("/usr/bin"),
    Path("/usr/lib/llvm-14"),
    Path(sys.base_prefix).resolve(),
]

# The named files are always in the sample, whatever their size or hash.
NAMED_FILES = ["libc.so.6", "ld-linux-x86-64.so.2", "libstdc++.so.6", "libLLVM-14.so.1"]
NAMED_DIRS = [Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib/llvm-14/lib")]

# Largest CFI (sum of the frame sections' sizes) a hashed sample file may have. Measured on
# Debian 12: readelf -wF prints ~13 bytes of text per byte of .eh_frame, and libc's 0.2 MB
# .eh_frame is ~1 s round trip for both modes; 256 KiB keeps every sampled file near that.
SAMPLE_MAX_CFI_BYTES = 256 * 1024

CFI_SECTIONS = (b".eh_frame", b".debug_frame", b".zdebug_frame")
EM_X86_64 = 62
# Reading more than this many section headers means the header is nonsense; real files have <100k.
MAX_SECTIONS = 1 << 20



@dataclass(frozen=True)
class CfiFile:
    path: Path
    cfi_bytes: int  # summed sizes of the CFI sections


def cfi_section_bytes(path: Path) -> int | None:
    """Summed size of the CFI sections if `path` is a little-endian 64-bit x86-64 ELF file with any,
    else None. Reads only the ELF header, the section header table and the section name table."""
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
                return None
            (machine,) = struct.unpack_from("<H", header, 18)
            if machine != EM_X86_64:
                return None
            (shoff,) = struct.unpack_from("<Q", header, 40)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", header, 58)
            if shoff == 0 or shentsize < 64:
                return None
            if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering lives in section 0
                f.seek(shoff)
                first = f.read(64)
                if len(first) < 64:
                    return None
                if shnum == 0:
                    (shnum,) = struct.unpack_from("<Q", first, 32)
                if shstrndx == 0xFFFF:
                    (shstrndx,) = struct.unpack_from("<I", first, 40)
            if not 0 < shnum <= MAX_SECTIONS or shstrndx >= shnum:
                return None
            f.seek(shoff)
            table = f.read(shnum * shentsize)
            if len(table) < shnum * shentsize:
                return None
            name_offset, name_size = struct.unpack_from("<QQ", table, shstrndx * shentsize + 24)
            if name_size > 64 << 20:
                return None
            f.seek(name_offset)
            names = f.read(name_size)
    except OSError:
        return None
    total = 0
    found = False
    for index in range(shnum):
        (name,) = struct.unpack_from("<I", table, index * shentsize)
        (size,) = struct.unpack_from("<Q", table, index * shentsize + 32)
        end = names.find(b"\0", name)
        if end < 0:
            continue
        if names[name:end] in CFI_SECTIONS:
            found = True
            total += size
    return total if found else None


# Suffixes that are never ELF; skipping them keeps a walk of the Python prefix (~57k files, mostly
# sources and bytecode) to about a second.
NOT_ELF_SUFFIXES = frozenset(
    ".py .pyc .pyi .pyx .pxd .pxi .txt .rst .md .html .css .js .json .toml .cfg .ini .yaml .yml .xml "
    ".h .hpp .c .cc .cpp .inc .def .td .png .svg .gif .jpg .ico .gz .xz .bz2 .zip .whl .npy .npz .csv "
    ".dat .pem .mo .po .tcl .tk .cmake .la .pc .typed .sh .pl .pm .el .vim".split()
)
SKIP_DIRECTORIES = frozenset({"__pycache__"})


def _walk(root: Path):
    """Regular files and symlinks under `root`, without following directory symlinks."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRECTORIES:
                        stack.append(Path(entry.path))
                    continue
            except OSError:
                continue
            if os.path.splitext(entry.name)[1] not in NOT_ELF_SUFFIXES:
                yield entry


def enumerate_files(roots: list[Path] | None = None) -> list[CfiFile]:
    """Every distinct x86-64 ELF file with CFI under `roots`, sorted by path. Symlinks are resolved
    and hard links deduplicated by inode, so each file appears once, under its real path."""
    seen_inodes: set[tuple[int, int]] = set()
    found: list[CfiFile] = []
    for root in roots or SEARCH_ROOTS:
        for entry in _walk(root.resolve()):
            try:
                info = os.stat(entry.path)  # follows a symlink to its target
                if not stat.S_ISREG(info.st_mode) or info.st_size < 64:
                    continue
                key = (info.st_dev, info.st_ino)
                if key in seen_inodes:
                    continue
                seen_inodes.add(key)
                path = Path(entry.path).resolve(strict=True) if entry.is_symlink() else Path(entry.path)
            except (OSError, RuntimeError):
                continue
            size = cfi_section_bytes(path)
            if size is not None:
                found.append(CfiFile(path, size))
    found.sort(key=lambda item: str(item.path))
    return found


def _path_hash(path: Path) -> str:
    return hashlib.sha1(str(path).encode()).hexdigest()


def named_files() -> list[Path]:
    """The always-checked files that exist on this machine, resolved."""
    result = []
    for name in NAMED_FILES:
        for directory in NAMED_DIRS:
            candidate = directory / name
            if candidate.exists():
                result.append(candidate.resolve())
                break
    return result


def add_selection_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """The options of a run over this machine's files (scripts.sweep_check, scripts.drap_census):
    FILES, --sample N, -j, --json; `selected_paths` reads them."""
    parser.add_argument("files", nargs="*", type=Path, help=f"files to {verb} (default: every file with CFI)")
    parser.add_argument("--sample", type=int, default=None, help="only the named files and this many others")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true")


def selected_paths(args: argparse.Namespace) -> list[str]:
    """The files named, else every file with CFI (or the named files and --sample N others), the
    largest CFI first, so that the biggest libraries do not finish last."""
    if args.files:
        return [str(p) for p in args.files]
    found = enumerate_files()
    if args.sample is not None:
        chosen = set(sample(args.sample, found))
        found = [f for f in found if f.path in chosen]
    return [str(f.path) for f in sorted(found, key=lambda f: -f.cfi_bytes)]


def sample(n: int = 200, files: list[CfiFile] | None = None) -> list[Path]:
    """The default suite's fixed subset: the named files, then the first `n` small-enough files by
    SHA-1 of the path."""
    files = enumerate_files() if files is None else files
    named = named_files()
    chosen = list(named)
    small = [item for item in files if item.cfi_bytes <= SAMPLE_MAX_CFI_BYTES and item.path not in named]
    small.sort(key=lambda item: _path_hash(item.path))
    chosen += [item.path for item in small[:n]]
    return chosen


# ---------------------------------------------------------------------------------------------
# The two commands being compared, and the streaming comparison.

MODES = {"interp": ("table",), "raw": ("table", "--raw")}
READELF_FLAGS = {"interp": "--debug-dump=frames-interp", "raw": "--debug-dump=frames"}


def subprocess_env() -> dict[str, str]:
    """The environment for the CLI: src/ on PYTHONPATH unless the package is installed, no colour."""
    env = dict(os.environ)
    paths = [str(SRC_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["NO_COLOR"] = "1"
    return env


def tool_command(args: list[str]) -> list[str]:
    """argv for `python3 -m fastunwind ARGS` (subprocess_env() puts src/ on PYTHONPATH)."""
    return [sys.executable, "-m", "fastunwind", *args]


def readelf_command(mode: str, path: str | os.PathLike[str]) -> list[str]:
    return ["readelf", READELF_FLAGS[mode], str(path)]


def fastunwind_command(mode: str, path: str | os.PathLike[str]) -> list[str]:
    return tool_command([*MODES[mode], str(path)])


@dataclass
class Comparison:
    """Outcome of running both commands on one file in one mode."""

    tool_argv: list[str]
    readelf_argv: list[str]
    identical: bool
    tool_returncode: int = 0
    readelf_returncode: int = 0
    tool_stderr: str = ""
    readelf_stderr: str = ""
    first_difference_line: int | None = None  # 1-based
    context: list[str] = field(default_factory=list)
    bytes_compared: int = 0
    killed: bool = False  # the harness stopped the processes after the first difference
    timed_out: bool = False

    def readelf_complained(self) -> bool:
        lowered = self.readelf_stderr.lower()
        return "warning" in lowered or "error" in lowered or self.readelf_returncode != 0

    def _status(self, returncode: int) -> str:
        if returncode < 0 and self.killed:
            return f"{returncode}, stopped by the harness after the difference"
        return str(returncode)

    def describe(self) -> str:
        """A short explanation fit for an assertion message (a few lines, never the whole output)."""
        lines = [
            f"tool:    {shlex.join(self.tool_argv)} (exit {self._status(self.tool_returncode)})",
            f"readelf: {shlex.join(self.readelf_argv)} (exit {self._status(self.readelf_returncode)})",
        ]
        if self.identical:
            lines.append(f"stdout identical ({self.bytes_compared} bytes)")
        elif self.first_difference_line is None:
            lines.append("timed out:")
            lines += self.context
        else:
            lines.append(f"first difference at stdout line {self.first_difference_line}:")
            lines += self.context
        for who, text in (("tool", self.tool_stderr), ("readelf", self.readelf_stderr)):
            if text.strip():
                tail = text.strip().splitlines()[-6:]
                lines.append(f"{who} stderr (last {len(tail)} lines):")
                lines += ["    " + line for line in tail]
        return "\n".join(lines)


CHUNK = 1 << 20
CONTEXT_LINES = 3
STDERR_KEEP = 16 * 1024


def _read_exactly(stream, size: int) -> bytes:
    """read() on a pipe may return short; keep reading until `size` bytes or EOF."""
    parts = []
    remaining = size
    while remaining > 0:
        data = stream.read(remaining)
        if not data:
            break
        parts.append(data)
        remaining -= len(data)
    return b"".join(parts)


def _first_difference(a: bytes, b: bytes) -> int:
    """Offset of the first differing byte of two unequal byte strings (binary search on slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high) // 2
        if a[low : middle + 1] == b[low : middle + 1]:
            low = middle + 1
        else:
            high = middle
    return low


def _context(before: bytes, tool: bytes, oracle: bytes, line_number: int) -> list[str]:
    """Lines around the first difference: a few shared lines before, then each side's lines."""
    shared = before.split(b"\n")[-CONTEXT_LINES - 1 : -1] if before else []
    out = []
    first_shared = line_number - len(shared)
    for offset, line in enumerate(shared):
        out.append(f"  {'both':7} {first_shared + offset:>8} {line.decode(errors='replace')!r}")
    for label, data in (("tool   ", tool), ("readelf", oracle)):
        pieces = data.split(b"\n")
        if pieces and pieces[-1] == b"":
            pieces.pop()
        pieces = pieces[: CONTEXT_LINES + 1]
        if not pieces:
            out.append(f"  {label} <end of output>")
        for offset, line in enumerate(pieces):
            out.append(f"  {label} {line_number + offset:>8} {line.decode(errors='replace')!r}")
    return out


# Generous: the slowest file (libLLVM-14, ~80 MB of output) takes readelf about 1 s per mode.
COMPARE_TIMEOUT_SECONDS = 600


def compare_outputs(tool_argv: list[str], readelf_argv: list[str],
                    timeout: float = COMPARE_TIMEOUT_SECONDS) -> Comparison:
    """Run both commands concurrently and compare their stdout without keeping it whole."""
    with tempfile.TemporaryFile() as tool_err, tempfile.TemporaryFile() as oracle_err:
        tool = subprocess.Popen(tool_argv, stdout=subprocess.PIPE, stderr=tool_err,
                                stdin=subprocess.DEVNULL, env=subprocess_env())
        oracle = subprocess.Popen(readelf_argv, stdout=subprocess.PIPE, stderr=oracle_err,
                                  stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
        result = Comparison(tool_argv, readelf_argv, identical=True)
        # A tool stuck in a loop would block the reads forever: kill both at the deadline, which
        # ends the reads with EOF and the comparison with a difference.
        def stop_both() -> None:
            result.timed_out = True
            for process in (tool, oracle):
                if process.poll() is None:
                    process.kill()

        watchdog = threading.Timer(timeout, stop_both)
        watchdog.daemon = True
        watchdog.start()
        previous = b""  # tail of the last equal chunk, for context lines
        lines_before = 0
        drained = False  # both streams read to EOF, so both processes can exit by themselves
        try:
            while True:
                tool_chunk = _read_exactly(tool.stdout, CHUNK)
                oracle_chunk = _read_exactly(oracle.stdout, CHUNK)
                if tool_chunk != oracle_chunk:
                    at = _first_difference(tool_chunk, oracle_chunk)
                    # Pull a little more so both sides can show a few lines past the difference.
                    tool_rest = tool_chunk[at:] + _read_exactly(tool.stdout, 4096)
                    oracle_rest = oracle_chunk[at:] + _read_exactly(oracle.stdout, 4096)
                    line_start = tool_chunk.rfind(b"\n", 0, at) + 1
                    line_number = lines_before + tool_chunk.count(b"\n", 0, line_start) + 1
                    before = previous + tool_chunk[:line_start]
                    tool_line = tool_chunk[line_start:at] + tool_rest
                    oracle_line = oracle_chunk[line_start:at] + oracle_rest
                    result.identical = False
                    result.first_difference_line = line_number
                    result.context = _context(before[-8192:], tool_line, oracle_line, line_number)
                    result.bytes_compared += at
                    break
                if not tool_chunk:
                    drained = True
                    break
                result.bytes_compared += len(tool_chunk)
                lines_before += tool_chunk.count(b"\n")
                previous = (previous + tool_chunk)[-8192:]
        finally:
            watchdog.cancel()
            for process in (tool, oracle):
                if process.poll() is None and not drained:
                    process.kill()
                    result.killed = True
                process.stdout.close()
            result.tool_returncode = tool.wait()
            result.readelf_returncode = oracle.wait()
        if result.timed_out:
            result.identical = False
            result.context.insert(0, f"  (both processes killed after the {timeout:.0f} s time limit, "
                                     f"{result.bytes_compared} bytes compared equal before that)")
        tool_err.seek(0)
        oracle_err.seek(0)
        result.tool_stderr = tool_err.read(STDERR_KEEP).decode(errors="replace")
        result.readelf_stderr = oracle_err.read(STDERR_KEEP).decode(errors="replace")
    return result


def compare_file(path: str | os.PathLike[str], mode: str) -> Comparison:
    """fastunwind `table` (mode "interp") or `table --raw` (mode "raw") against readelf on one file."""
    return compare_outputs(fastunwind_command(mode, path), readelf_command(mode, path))


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python3 scripts/oracle_files.py --sample --sizes")
    parser.add_argument("--sample", action="store_true", help="list the default suite's sample only")
    parser.add_argument("-n", type=int, default=200, help="sample size (default 200)")
    parser.add_argument("--sizes", action="store_true", help="print the CFI section bytes too")
    options = parser.parse_args(argv)
    files = enumerate_files()
    sizes = {item.path: item.cfi_bytes for item in files}
    paths = sample(options.n, files) if options.sample else [item.path for item in files]
    for path in paths:
        print(f"{sizes.get(path, 0):>10} {path}" if options.sizes else path)
    print(f"{len(paths)} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
