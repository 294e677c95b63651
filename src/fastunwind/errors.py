"""Typed errors of fastunwind.

Every failure caused by input (a file, a section, an address) is one of these, with a message that
says what went wrong, where (file, section, offset in hex) and which value was seen. The C core raises
them by name, so Python callers catch one hierarchy whichever layer found the problem.
"""

from __future__ import annotations


class FastunwindError(Exception):
    """Base class of every error fastunwind raises on bad input or unsupported data."""


class ElfError(FastunwindError):
    """The file is not a readable ELF file of a supported kind, or one of its structures is malformed
    (a section or segment outside the file, a bad string index, an undecompressable section)."""


class FileChangedError(FastunwindError):
    """A file was truncated in place while fastunwind read it through a mapping (cp over a library, a
    build rewriting an .so, perf still writing a perf.data): the pages past its new end read as zeros
    (native/core/mapped_file.h), so nothing computed from them is answered. The message names the
    file."""


class CfiError(FastunwindError):
    """Call frame information is malformed: an entry overruns its section, a CIE pointer is wrong, an
    opcode or pointer encoding is unknown, a bound (state stack, register number) is exceeded.

    The message names the section and the offset of the CIE/FDE in hex."""


class ExprError(FastunwindError):
    """A DWARF expression could not be decoded or evaluated (unknown operation, stack underflow or
    overflow, step limit, unreadable memory)."""


class CompactTableError(FastunwindError):
    """A compact unwind table (native/core/compact_table.h) could not be built, or a serialized one is not
    usable: bad magic, another format version, a size that differs from its header's (truncated),
    arrays outside the file, unsorted row starts, a rule index out of range, a build-id that is not
    the module's. A cached table that raises this is rebuilt, never used."""


class EhElfError(FastunwindError):
    """A compiled unwind table (eh_elf, `fastunwind compile`) could not be generated, compiled or
    loaded: no CFI in the file, the C compiler missing or failing (its output is in the message), or
    a cached shared object that is truncated, not an ELF file, or built for another ABI version,
    generator version, build-id or set of DWARF rows. A cached object that raises this is rebuilt,
    never used."""


class NoUnwindInfo(FastunwindError, LookupError):
    """No FDE covers the requested address."""


class PerfDataError(FastunwindError):
    """A perf.data recording is malformed or unsupported: a bad magic or header, a section outside the
    file, a record whose size is below 8 bytes or runs past the end, a sample field that overruns its
    record, an attr of a bad size, a corrupt or oversized COMPRESSED stream.

    The message names the file offset in hex ("perf.data+0x1a30: ..."); records decoded from a
    COMPRESSED stream name the COMPRESSED record and the offset in the decompressed stream."""


class TraceError(FastunwindError):
    """A command could not be traced (`fastunwind check --trace`): it does not exist or cannot be
    executed, ptrace is refused (another tracer, a seccomp or Yama policy), or the tracee vanished
    under the tracer. The message names the command and the system's reason."""


class LiveError(FastunwindError):
    """A live process could not be snapshot (`fastunwind backtrace -p PID`): it does not exist or
    exited during the snapshot, a thread asked for is not one of its threads, or no thread could be
    traced (permission, yama's kernel.yama.ptrace_scope, another tracer). The message names the pid
    and the reason. A snapshot where only some threads failed is not an error: each such thread
    carries its outcome."""


class BpfError(FastunwindError):
    """The kernel refused the in-kernel unwinder (`fastunwind record --bpf`): loading the BPF program
    (no CONFIG_BPF_SYSCALL, no BTF, not root, the verifier), creating or filling a map, or attaching to
    a perf event. The message names the step and the system's reason."""


class BpfMapMemoryError(BpfError):
    """The kernel refused the memory of the in-kernel unwinder's table map (its size, `record --bpf
    --table-mib`): too much for the machine or for the memory the caller's cgroup may take. A
    smaller map may be allowed."""


class ScriptError(FastunwindError):
    """The program a command runs cannot be found from its file (`record --bpf -- CMD`): a script
    whose interpreter is missing or not on the PATH (`#!/usr/bin/env NAME`), a file neither ELF nor
    script, or interpreters that loop or chain past their bound. The message names the command and
    the file."""


class CoreFileError(FastunwindError):
    """A core file cannot be read: not an x86-64 ELF core, a program header or note outside the file,
    a note that overruns its segment, a count beyond its named limit (threads, files, segments),
    overlapping PT_LOAD segments. The message names the structure and its file offset in hex."""
