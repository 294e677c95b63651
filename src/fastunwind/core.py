"""Core files: every thread's stack from an ELF core file (the kernel's, or gdb's `gcore`).

    >>> import fastunwind.core
    >>> with fastunwind.core.open("core.1234") as core:  # doctest: +SKIP
    ...     for thread in core.threads():
    ...         print(thread.tid, [frame.symbol for frame in thread.frames])

The core is parsed in C (native/core/coredump.c): a thread per NT_PRSTATUS, the process's name
(NT_PRPSINFO), the vDSO and the program's headers (NT_AUXV), the mapped files (NT_FILE) and the
memory the dump holds (PT_LOAD). Each mapped file is looked up (its own path, the same path under
`sysroot`, or `exe` for the program) and checked against the build-id the core's memory holds for
it (the kernel dumps the first page of every ELF mapping: coredump_filter bit 4, on by default): a
file whose build-id differs, or that cannot be read, is reported (`CoreFile.problems`, one line per
module) and not used. The vDSO's image comes from the core itself. The files also give the walker
the memory the dump left out (file-backed text and read-only data, p_filesz < p_memsz), as
eu-stack reads them. The threads are then walked in C over the core's memory (py_walk.c,
unwind_core) and named as every source's are (stacks.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from types import TracebackType

from fastunwind import _core, stacks
from fastunwind.address_space import VDSO, AddressSpace, ImageCache, Mapping, ModuleImage, vdso_image_of
from fastunwind.elf import PF_X
from fastunwind.errors import CoreFileError, ElfError
from fastunwind.typecheck import NamedTuple


class CoreModule(NamedTuple):
    """A file the process had mapped, as the core describes it and as it was found here."""

    path: str  #: as the core names it (NT_FILE), or VDSO
    start: int  #: avma of its first mapping
    file: str | None  #: the file used for it, None if none is (missing, unreadable, mismatched)
    build_id: str | None  #: the build-id the core's memory holds for it (hex), None if it holds none
    problem: str | None  #: why it is not used, None if it is


def _map_file(path: str) -> _core.MappedFile | None:
    """The file mapped read-only and guarded, or None if it is empty or not a regular file (OSError
    if it cannot be opened)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_size == 0:
            return None
        return _core.MappedFile(descriptor, path)
    finally:
        os.close(descriptor)


def _executable(segment: tuple[int, int] | None, image: ModuleImage | None, offset: int) -> bool:
    """Whether a file mapping at `offset` was executable: its PT_LOAD's flags (memsz, p_flags) say,
    where the core has one (the kernel writes one per mapping); gdb's gcore writes none for a
    mapping it does not dump (text), and then the file's own segment at that offset says. A mapping
    of a file not found and without a PT_LOAD is kept as executable: it names the module of a frame
    in it."""
    if segment is not None:
        return bool(segment[1] & PF_X)
    if image is None:
        return True
    return image.elf.offset_executable(offset)


class CoreFile:
    """A core file opened for unwinding: its threads, the modules found for its mappings, and the
    reasons for those not used. Close it (or use it as a context manager) to release the maps."""

    def __init__(self, path: str | os.PathLike[str], *, exe: str | None = None, sysroot: str | None = None,
                 images: ImageCache | None = None) -> None:
        self.path = os.fspath(path)
        mapped = _map_file(self.path)
        if mapped is None:
            raise CoreFileError(f"{self.path}: empty, or not a regular file")
        self._map = mapped
        self._file_maps: list[_core.MappedFile] = []
        try:
            self._core = _core.CoreFile(self._map)
        except CoreFileError as error:
            self._map.close()
            raise CoreFileError(f"{self.path}: {error}") from None
        self._map.check()  # truncated while parsed
        self._images = images or ImageCache()
        self.modules, mappings, mapped_files = self._find_modules(exe, sysroot)
        self._core.set_mapped_files(mapped_files)
        self.space = AddressSpace(mappings)

    @property
    def pid(self) -> int:
        return self._core.pid

    @property
    def name(self) -> str:
        """The process's name (the kernel's comm, 15 bytes at most)."""
        return self._core.name

    @property
    def truncated_bytes(self) -> int:
        """Memory bytes the core's headers promise beyond the end of the file (a truncated core)."""
        return self._core.truncated_bytes

    def read(self, address: int, size: int) -> bytes | None:
        """The process's memory as the walker reads it: the dump, else the mapped files (for what
        the dump left out); None where neither holds all `size` bytes."""
        return self._core.read(address, size)

    @property
    def problems(self) -> list[str]:
        """One line per module not used, and one for a truncated core."""
        lines = [module.problem for module in self.modules if module.problem]
        if self.truncated_bytes:
            lines.append(f"{self.path}: truncated: {self.truncated_bytes:#x} bytes of memory the headers list are "
                         "missing")
        return lines

    def _find_modules(self, exe: str | None, sysroot: str | None
                      ) -> tuple[tuple[CoreModule, ...], list[Mapping], list[tuple[int, memoryview]]]:
        core = self._core
        files = [(start, end, offset, os.fsdecode(path)) for start, end, offset, path in core.files()]
        segments = {vaddr: (memsz, flags) for vaddr, memsz, _filesz, _present, flags in core.segments()}
        _sysinfo, _entry, phdr = core.auxv
        program = next((path for start, end, _offset, path in files if start <= phdr < end), None)
        modules: list[CoreModule] = []
        mappings: list[Mapping] = []
        mapped_files: list[tuple[int, memoryview]] = []
        by_path: dict[str, list[tuple[int, int, int]]] = {}
        for start, end, offset, path in files:
            by_path.setdefault(path, []).append((start, end, offset))
        for path, ranges in by_path.items():
            header = min((start for start, _end, offset in ranges if offset == 0), default=None)
            expected = core.build_id_at(header) if header is not None else None
            magic = core.read(header, 4) if header is not None else None
            if magic is not None and magic != b"\x7fELF":
                continue  # the core holds the file's first page and it is not ELF: data, not a module
            candidate = exe if exe is not None and path == program else (
                os.path.join(sysroot, path.lstrip("/")) if sysroot else path)
            image, problem = self._check(path, candidate, expected)
            if image is None and magic is None and not any(
                    segments.get(start, (0, 0))[1] & PF_X for start, _end, _offset in ranges):
                continue  # nothing says it is code (locale files, fonts): not a module
            modules.append(CoreModule(path, min(start for start, _end, _offset in ranges),
                                      candidate if image else None, expected.hex() if expected else None, problem))
            file_map = self._map_file(candidate) if image else None
            for start, end, offset in sorted(ranges):
                if _executable(segments.get(start), image, offset):
                    bias = image.bias_for_mapping(start, end, offset) if image else None
                    mappings.append(Mapping(start, end, offset, path, image if bias is not None else None, bias or 0))
                if file_map is not None and offset < len(file_map):
                    mapped_files.append((start, memoryview(file_map)[offset:offset + end - start]))
        if exe is not None and program is None:
            modules.append(CoreModule(exe, 0, None, None, f"--exe {exe}: no mapping of the core holds the program's "
                                      f"headers (AT_PHDR {phdr:#x}): not used"))
        vdso = self._vdso()
        if vdso is not None:
            module, mapping = vdso
            if any(m.start < mapping.end and mapping.start < m.end for m in mappings):
                module = CoreModule(VDSO, module.start, None, module.build_id,
                                    f"{VDSO} at {module.start:#x}: inside a mapped file: not used")
            else:
                mappings.append(mapping)
            modules.append(module)
        mapped_files.sort(key=lambda pair: pair[0])
        return tuple(modules), mappings, mapped_files

    def _check(self, path: str, candidate: str, expected: bytes | None) -> tuple[ModuleImage | None, str | None]:
        """The image of `candidate` for the module `path`, or None and why it is not used."""
        image = self._images.get(candidate)
        if image is None:
            changed = self._images.changed(candidate)
            reason = ("not found" if not os.path.exists(candidate) else
                      "not a readable ELF file" if changed is None else f"unreadable: {changed}")
            where = "" if candidate == path else f" (looked up as {candidate})"
            return None, f"{path}{where}: {reason}: not used"
        if expected is not None and image.build_id != expected:
            found = image.build_id.hex() if image.build_id else "none"
            return None, f"{path}: build-id {expected.hex()} in the core, {found} in {candidate}: not used"
        return image, None

    def _map_file(self, path: str) -> _core.MappedFile | None:
        try:
            mapped = _map_file(path)
        except OSError:
            return None
        if mapped is not None:
            self._file_maps.append(mapped)
        return mapped

    def _vdso(self) -> tuple[CoreModule, Mapping] | None:
        """The vDSO's module and mapping from the core's own copy of it (AT_SYSINFO_EHDR)."""
        start = self._core.auxv[0]
        segment = next(((vaddr, memsz, present) for vaddr, memsz, _filesz, present, _flags in self._core.segments()
                        if vaddr == start), None) if start else None
        if segment is None:
            return None
        vaddr, memsz, present = segment
        data = self._core.read(vaddr, present) if present else None
        if data is None:
            return (CoreModule(VDSO, start, None, None, f"{VDSO} at {start:#x}: not in the core: not used"),
                    Mapping(vaddr, vaddr + memsz, 0, VDSO, None, 0))
        try:
            image = vdso_image_of(data)
        except ElfError as error:
            return (CoreModule(VDSO, start, None, None, f"{VDSO} at {start:#x}: {error}: not used"),
                    Mapping(vaddr, vaddr + memsz, 0, VDSO, None, 0))
        bias = image.bias_for_mapping(vaddr, vaddr + memsz, 0)
        return (CoreModule(VDSO, start, VDSO, image.build_id.hex() if image.build_id else None, None),
                Mapping(vaddr, vaddr + memsz, 0, VDSO, image if bias is not None else None, bias or 0))

    def threads(self, *, with_registers: bool = False, max_frames: int = _core.WALK_MAX_FRAMES,
                synth: str = "off") -> tuple[stacks.Thread, ...]:
        """Every thread's stack, in the core's order (the thread that took the signal first);
        `with_registers`: each frame's registers too; `synth`: the rows derived from the machine
        code (tables.compact.SYNTH_MODES)."""
        _core.guard_mapped_files()  # in front of a SIGBUS handler installed since the core was opened
        threads = tuple(self._iter_threads(with_registers, max_frames, synth))
        self.check_unchanged()
        return threads

    def check_unchanged(self) -> None:
        """FileChangedError if the core, a file mapped for the memory it left out or a module's file
        was truncated in place since it was opened: the walks read zeros there."""
        for mapped in [self._map, *self._file_maps]:
            mapped.check()
        self.space.check_unchanged()

    def _iter_threads(self, with_registers: bool, max_frames: int, synth: str) -> Iterator[stacks.Thread]:
        space = self.space.to_core(synth=synth)
        mappings = self.space.mappings
        known: stacks.KnownFrames = {}  # the threads share most of their frames: each named once
        for tid, _signal, user_registers, registers in self._core.threads():
            by_frame: list[tuple[int | None, ...]] = []
            if with_registers:
                outcome, fault, raw, by_frame = _core.unwind_core(space, self._core, registers, max_frames,
                                                                  frame_registers=True)
            else:
                outcome, fault, raw = _core.unwind_core(space, self._core, registers, max_frames)
            frames = stacks.symbolize(raw, lambda module: mappings[module] if module is not None else None,
                                      by_frame, known, stacks.state_of_user_registers(user_registers))
            yield stacks.Thread(tid, self.name, frames, outcome, fault)

    def snapshot(self, *, with_registers: bool = False, synth: str = "off") -> stacks.ProcessSnapshot:
        return stacks.ProcessSnapshot(self.pid, self.threads(with_registers=with_registers, synth=synth))

    def close(self) -> None:
        """Release the core's and the files' maps; the CoreFile is not usable after."""
        del self._core  # the C core holds views of every map
        for mapped in [*self._file_maps, self._map]:
            try:
                mapped.close()
            except BufferError:
                pass  # a frame's caller still holds a view: the map goes with it

    def __enter__(self) -> CoreFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def open(path: str | os.PathLike[str], *, exe: str | None = None, sysroot: str | None = None) -> CoreFile:  # noqa: A001
    """Open core file `path`: `exe` is the program's file where its path in the core is not the
    right one, `sysroot` a directory the core's paths are looked up under (a core from another
    machine)."""
    return CoreFile(path, exe=exe, sysroot=sysroot)
