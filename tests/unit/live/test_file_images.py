"""live.FileImages: module images known by the file they were read from, so that a path through
/proc/PID or a file replaced at its path never gives a stale image, and one file under several
paths is opened once."""

import os
import shutil

from fastunwind.live import FileImages

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBM = "/lib/x86_64-linux-gnu/libm.so.6"


def test_a_file_replaced_at_its_path_is_opened_again(tmp_path):
    images = FileImages()
    path = tmp_path / "lib.so"
    shutil.copy(LIBC, path)
    first = images.get(str(path))
    assert first is not None and first.build_id == images.get(LIBC).build_id
    replacement = tmp_path / "new.so"
    shutil.copy(LIBM, replacement)
    os.replace(replacement, path)
    second = images.get(str(path))
    assert second is not None and second is not first and second.build_id == images.get(LIBM).build_id


def test_one_file_under_two_paths_is_opened_once(tmp_path):
    images = FileImages()
    link = tmp_path / "libc-link.so"
    link.symlink_to(LIBC)
    assert images.get(str(link)) is images.get(LIBC)
    assert images.has(LIBC) and images.get(str(tmp_path / "missing")) is None
