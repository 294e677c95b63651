"""Files truncated in place while fastunwind has them mapped (core/mapped_file.h): a library copied
over, perf.data rewritten. Each victim runs in a process of its own: without the guard it would die of
SIGBUS; with it, it gets FileChangedError naming the file, or the file is classified as unreadable.
A SIGBUS the guard does not own still kills."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from fastunwind import _core
from fastunwind.errors import FileChangedError

from tests.support import perf_builder as b

LIBRARY = "/lib/x86_64-linux-gnu/libm.so.6"
#: what the file is cut to: its headers stay, every other page goes
KEPT_BYTES = 4096

#: the victims' shared start: a copy of the library at argv[1], and a way to cut it
PRELUDE = """
import os, sys
from fastunwind.errors import FileChangedError
path = sys.argv[1]
def cut():
    os.truncate(path, 4096)
def report(operation):
    try:
        result = operation()
    except FileChangedError as error:
        print("FileChangedError:", error)
    else:
        print("answered:", result)
def cut_while_opened():
    # the file cut while an image of it is made: between its headers and its CFI's location
    from fastunwind import image as image_module
    frame_sources = image_module.frame_sources
    def cut_then_frame_sources(elf):
        if elf.path == path:
            cut()
            elf.symbols()  # reads past the cut
        return frame_sources(elf)
    image_module.frame_sources = cut_then_frame_sources
"""


def run_victim(body: str, *args: str, faulthandler: bool = False) -> subprocess.CompletedProcess[str]:
    options = ["-X", "faulthandler"] if faulthandler else []
    return subprocess.run([sys.executable, *options, "-c", PRELUDE + textwrap.dedent(body), *args],
                          capture_output=True, text=True, timeout=120)


def survived(result: subprocess.CompletedProcess[str]) -> str:
    """The victim's output, after asserting that it exited normally (not by a signal)."""
    assert result.returncode == 0, (result.returncode, result.stderr)
    return result.stdout


@pytest.fixture
def library(tmp_path):
    copy = tmp_path / "libm-copy.so"
    shutil.copy(LIBRARY, copy)
    return str(copy)


@pytest.mark.parametrize("operation", [
    "image.elf.symbols()",
    "image.eh_frame",
    "fastunwind.symbols.symbol_table_for_file(image.elf)",
    "fastunwind.cfi.UnwindInfo.from_elf(image.elf)",
    "fastunwind.tables.compact.load(image, use_cache=False) or compact.error(image)",
])
def test_an_image_cut_under_its_mapping_gives_file_changed_error(library, operation):
    output = survived(run_victim(f"""
        import fastunwind.cfi
        import fastunwind.symbols
        import fastunwind.tables.compact
        from fastunwind.tables import compact
        from fastunwind.address_space import ImageCache
        image = ImageCache().get(path)
        assert image is not None
        cut()
        report(lambda: {operation})
    """, library))
    if operation.startswith("fastunwind.tables"):
        # the compact table's contract is None and why: the walker then has no table of zeros
        assert output.startswith("answered: ") and "changed while read" in output, output
    else:
        assert output.startswith(f"FileChangedError: {library}: changed while read"), output


def test_the_guard_serves_under_faulthandler_enabled_before_it(library):
    # python -X faulthandler (and pytest) install faulthandler first: the guard chains to it
    output = survived(run_victim("""
        from fastunwind.address_space import ImageCache
        image = ImageCache().get(path)
        cut()
        report(lambda: image.eh_frame)
    """, library, faulthandler=True))
    assert output.startswith(f"FileChangedError: {library}: changed while read"), output


def test_a_cached_compact_table_cut_under_the_walker_is_checked_with_its_image(library, tmp_path):
    # the walker reads a cached table in place: a cut of it is the image's change too
    output = survived(run_victim("""
        from fastunwind.image import ModuleImage
        from fastunwind.tables import compact
        built = ModuleImage.load(path)
        assert compact.load(built, sys.argv[2]) is not None  # built, and written to the cache
        image = ModuleImage.load(path)
        table = compact.load(image, sys.argv[2])
        assert compact.source(image) == "cache"
        os.truncate(compact.cache_path(image, sys.argv[2]), 4096)
        image.check_unchanged()  # nothing read past the cut yet
        rows = table.slow_ranges()  # the walker's reads of the table
        report(image.check_unchanged)
    """, library, str(tmp_path / "cache")))
    assert output.startswith(f"FileChangedError: {tmp_path / 'cache'}/") and "changed while read" in output, output


def test_check_of_a_file_cut_while_checked_gives_file_changed_error(library):
    # cut right after the image is opened: every verdict after that reads the zeros
    output = survived(run_victim("""
        import fastunwind.check as check
        load = check.ModuleImage.load
        def load_then_cut(p):
            image = load(p)
            cut()
            return image
        check.ModuleImage.load = load_then_cut
        report(lambda: check.check_file(path))
    """, library))
    assert output.startswith(f"FileChangedError: {library}: changed while read"), output


def test_a_module_cut_while_opened_is_a_mapping_without_an_image(library):
    # parse_proc_maps' contract: a file that cannot be read is a mapping without an image, with the reason
    output = survived(run_victim("""
        from fastunwind.address_space import ImageCache, parse_proc_maps
        cut_while_opened()
        images = ImageCache()
        maps = f"7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 {path}\\n"
        (mapping,) = parse_proc_maps(maps, images).mappings
        print(mapping.image, images.changed(path))
    """, library))
    assert output.startswith(f"None {library}: changed while read"), output


def test_a_live_backtrace_of_a_process_mapping_a_module_cut_while_opened_has_no_image_for_it(library):
    holder = subprocess.Popen([sys.executable, "-c", "import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); "
                               "print('ready', flush=True); time.sleep(60)", library],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "ready\n"
        result = run_victim("""
            from fastunwind import live
            cut_while_opened()
            images = live.FileImages()
            space, _maps = live.address_space(int(sys.argv[2]), images)
            print([m.image for m in space.mappings if m.path == path])
            snapshot = live.backtrace(int(sys.argv[2]), images=images)
            print(len(snapshot.threads), snapshot.threads[0].outcome)
        """, library, str(holder.pid))
    finally:
        holder.kill()
        holder.wait()
    if "not_permitted" in result.stderr or "ptrace" in result.stderr:
        pytest.skip(f"ptrace is refused here: {result.stderr.strip()[-200:]}")
    lines = survived(result).splitlines()
    assert lines[0].startswith("[None") and "ModuleImage" not in lines[0], lines
    assert lines[1].startswith("1 "), lines


def test_a_core_walk_names_a_module_cut_while_opened_as_not_used(library):
    output = survived(run_victim("""
        from types import SimpleNamespace
        from fastunwind.core import CoreFile
        from fastunwind.address_space import ImageCache
        cut_while_opened()
        images = ImageCache()
        image, problem = CoreFile._check(SimpleNamespace(_images=images), path, path, None)
        print(image, problem)
    """, library))
    assert f"{library}: unreadable: {library}: changed while read" in output, output


def recording(path, rounds):
    """A file-mode recording of `rounds` rounds of samples with user stacks (read in place, from the
    file's bytes), many windows long."""
    attr = b.Attr(sample_type=b.IP | b.TID | b.TIME | b.REGS_USER | b.STACK_USER, sample_regs_user=0xff0fff,
                  sample_stack_user=64)
    records = [b.comm_record(attr, 1, 1, "w", time=1)]
    for r in range(rounds):
        records += [b.sample_record(attr, ip=0x1000 + i, pid=1, tid=1, time=10 + r * 100 + i, regs=list(range(20)),
                                    stack=bytes([1 + i % 255]) * 64) for i in range(100)]
        records.append(b.record(b.FINISHED_ROUND, b""))
    with open(path, "wb") as f:
        f.write(b.file_mode([attr], b"".join(records)))


@pytest.mark.parametrize("decode_ahead", [False, True])
def test_a_perf_data_cut_while_streamed_gives_file_changed_error(tmp_path, decode_ahead):
    path = tmp_path / "perf.data"
    recording(path, rounds=200)
    assert path.stat().st_size > 64 * KEPT_BYTES
    output = survived(run_victim(f"""
        from fastunwind.perf.data import PerfData
        perf = PerfData.open_stream(path, window_bytes=4096, decode_ahead={decode_ahead})
        windows = 0
        try:
            while perf.native.next_window() is not None:
                windows += 1
                if windows == 2:
                    cut()  # perf (or cp) rewriting the file under the reader
        except FileChangedError as error:
            print("FileChangedError:", error, windows)
        else:
            print("read whole", windows)
    """, str(path)))
    assert output.startswith("FileChangedError: perf.data: changed while read"), output


def test_a_perf_data_opened_whole_and_cut_says_so_before_its_samples_are_used(tmp_path):
    path = tmp_path / "perf.data"
    recording(path, rounds=200)
    output = survived(run_victim("""
        from fastunwind.perf import data
        data.HUGE_PAGE_READ_MAX_BYTES = 0  # mapped, not read into memory
        perf = data.PerfData.open(path)
        cut()
        stacks = [perf.native.sample_stack(i) for i in range(perf.sample_count)]  # past the cut: zeros
        report(perf.check_unchanged)
    """, str(path)))
    assert output.startswith(f"FileChangedError: {path}: changed while read"), output


def test_perf_script_of_a_recording_cut_while_read_exits_with_the_error(tmp_path):
    # the CLI's stream, cut between two windows: one line of error and status 1, not a signal
    path = tmp_path / "perf.data"
    recording(path, rounds=200)
    result = run_victim("""
        from fastunwind import cli
        from fastunwind.perf import data
        open_stream = data.PerfData.open_stream
        def open_then_cut(*args, **kwargs):
            perf = open_stream(*args, **kwargs)
            cut()
            return perf
        data.PerfData.open_stream = open_then_cut
        sys.exit(cli.main(["perf-script", "-i", path]))
    """, str(path))
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "changed while read" in result.stderr, result.stderr


@pytest.mark.parametrize("faulthandler", [False, True])
def test_a_sigbus_outside_the_guarded_files_still_kills(library, faulthandler):
    # Python's own mmap of the file is not registered: its fault is handed on (to faulthandler's
    # handler when it is on, then the default action)
    result = run_victim("""
        import mmap
        from fastunwind import _core  # the guard is installed
        with open(path, "rb") as f:
            mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        cut()
        print(mapping[len(mapping) - 1])
    """, library, faulthandler=faulthandler)
    assert result.returncode == -signal.SIGBUS, (result.returncode, result.stderr)
    if faulthandler:
        assert "Fatal Python error: Bus error" in result.stderr


def test_a_guarded_file_reads_as_the_file(library):
    with open(library, "rb") as f:
        with _core.MappedFile(f.fileno(), library) as mapped:
            assert len(mapped) == os.path.getsize(library)
            assert bytes(memoryview(mapped)[:4]) == b"\x7fELF"
            assert mapped.name == library and not mapped.changed
            mapped.check()
            view = memoryview(mapped)
            with pytest.raises(BufferError):
                mapped.close()
            view.release()
    with pytest.raises(ValueError, match="closed"):
        len(mapped)


def test_a_guarded_file_cut_reads_zeros_and_says_so(library):
    with open(library, "rb") as f:
        mapped = _core.MappedFile(f.fileno(), library)
    os.truncate(library, KEPT_BYTES)
    assert bytes(memoryview(mapped)[KEPT_BYTES:KEPT_BYTES + 64]) == bytes(64)
    assert mapped.changed
    with pytest.raises(FileChangedError, match=f"{library}: changed while read"):
        mapped.check()
    mapped.close()


def test_an_empty_or_irregular_file_is_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for path in (empty, tmp_path):
        descriptor = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(ValueError, match="empty|not a regular file"):
                _core.MappedFile(descriptor, str(path))
        finally:
            os.close(descriptor)


def test_beyond_the_guarded_bound_a_file_is_read_into_memory(tmp_path, library):
    # every slot taken: the next file is a copy, which a cut does not touch
    output = survived(run_victim("""
        from fastunwind import _core
        small = sys.argv[2]
        held = []
        with open(small, "rb") as f:
            held = [_core.MappedFile(f.fileno(), small) for _ in range(_core.MAPPED_FILE_MAX_GUARDED)]
        with open(path, "rb") as f:
            extra = _core.MappedFile(f.fileno(), path)
        size = len(extra)
        cut()
        data = bytes(extra)
        print(len(data) == size, data[-16:] != bytes(16), extra.changed)
    """, library, str(tmp_path / "small")))
    assert output.split() == ["True", "True", "False"], output


@pytest.fixture(autouse=True)
def small_file(tmp_path):
    (tmp_path / "small").write_bytes(b"x" * 100)


def test_the_guard_serves_under_faulthandler_enabled_after_it(library):
    # faulthandler.enable() after the import installs its handler over the guard, once the image is
    # open: the operation's start puts the guard back in front of it
    output = survived(run_victim("""
        import faulthandler
        from fastunwind.address_space import ImageCache
        image = ImageCache().get(path)
        faulthandler.enable()
        cut()
        report(lambda: image.eh_frame)
    """, library))
    assert output.startswith(f"FileChangedError: {library}: changed while read"), output


def test_the_guard_serves_a_mapping_opened_after_faulthandler_enabled_after_it(library):
    output = survived(run_victim("""
        import faulthandler
        from fastunwind import _core
        faulthandler.enable()
        from fastunwind.address_space import ImageCache
        cut_while_opened()
        images = ImageCache()
        print(images.get(path), images.changed(path))
    """, library))
    assert output.startswith(f"None {library}: changed while read"), output


@pytest.mark.parametrize("sequence,traceback", [
    ("faulthandler.enable()", True),
    ("faulthandler.enable(); _core.guard_mapped_files(); faulthandler.disable()", False),
    ("faulthandler.enable(); _core.guard_mapped_files(); faulthandler.disable(); faulthandler.enable()", True),
])
def test_a_sigbus_outside_the_guarded_files_kills_once_under_faulthandler_enabled_after_it(library, sequence,
                                                                                           traceback):
    # the guard put back in front of faulthandler hands it the fault (one traceback), and what
    # faulthandler then re-raises to its own previous handler, the guard, goes to the default action;
    # a faulthandler disabled since put the guard back, and is not called (nor is a fault repeated forever)
    result = run_victim(f"""
        import faulthandler, mmap
        from fastunwind import _core
        {sequence}
        _core.guard_mapped_files()
        with open(path, "rb") as f:
            mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        cut()
        print(mapping[len(mapping) - 1])
    """, library)
    assert result.returncode == -signal.SIGBUS, (result.returncode, result.stderr)
    assert result.stderr.count("Fatal Python error: Bus error") == (1 if traceback else 0), result.stderr


def test_putting_the_guard_back_costs_nothing_when_it_is_in_front():
    assert _core.guard_mapped_files() is False


#: an eh_elf of it compiles in ~0.1 s (tests/unit/eh_elf)
SMALL_LIBRARY = "/lib/x86_64-linux-gnu/libpthread.so.0"


def test_a_compiled_table_cut_while_loaded_runs_from_its_private_copy(tmp_path):
    # its code runs from the mapping dlopen made, where no page of zeros may stand in: that mapping
    # is of a sealed copy, which a cut of the cache file does not reach
    if not os.path.isfile(SMALL_LIBRARY):
        pytest.skip(f"{SMALL_LIBRARY} not installed")
    output = survived(run_victim(f"""
        import ctypes
        from fastunwind.tables import eh_elf
        from fastunwind.address_space import ModuleImage
        image = ModuleImage.load("{SMALL_LIBRARY}")
        (built,) = eh_elf.compile_images([image], directory=os.path.dirname(path))
        assert not isinstance(built, Exception), built
        del built  # its eh_elf unloaded
        os.rename(eh_elf.cache_path(image, os.path.dirname(path)), path)
        loaded = eh_elf.open_cached(image, path)
        with open("/proc/self/maps") as f:
            rows = [line.split() for line in f if "fastunwind-eh_elf" in line or path in line]
        os.truncate(path, 4096)
        for row in rows:  # what the walker's calls into it read: its code and tables
            start, end = (int(x, 16) for x in row[0].split("-"))
            if row[1][0] == "r":
                for page in range(start, end, 4096):
                    ctypes.string_at(page, 1)
        print(len(rows) > 0, sum(path in " ".join(row) for row in rows), loaded.row_count > 0)
    """, str(tmp_path / "eh_elf.so")))
    assert output.split() == ["True", "0", "True"], output


def test_a_table_printed_from_a_file_cut_while_printed_writes_nothing(library):
    # readelf's text of the zeros past the cut would look like the file's: none of it is written
    result = run_victim("""
        from fastunwind import cfi_print, cli
        section_table = cfi_print.section_table
        def cut_then_section_table(*args):
            cut()
            return section_table(*args)
        cfi_print.section_table = cut_then_section_table
        sys.exit(cli.main(["table", "--no-follow-links", path]))
    """, library)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stdout == "", result.stdout[:400]
    assert f"{library}: changed while read" in result.stderr, result.stderr


def test_a_table_printed_from_a_file_left_whole_is_written_whole(library):
    # readelf's text, its separate debug file's sections too (readelf exits 1 on a NOBITS .eh_frame there)
    result = run_victim("""
        from fastunwind import cli
        sys.exit(cli.main(["table", path]))
    """, library)
    assert result.returncode == 0, result.stderr
    expected = subprocess.run(["readelf", "--debug-dump=frames-interp", library], capture_output=True,
                              text=True).stdout
    assert result.stdout == expected
