"""write_atomically: modes with the umask untouched, writes through links, special files refused."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from artifact.atomic import NotARegularFileError, current_umask, write_atomically


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_0666_less_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        write_atomically(tmp_path / "a.json", "{}")
        assert os.umask(0o027) == 0o027  # unchanged by the write
    finally:
        os.umask(old)
    assert mode(tmp_path / "a.json") == 0o640
    assert (tmp_path / "a.json").read_text() == "{}"


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("old")
    path.chmod(0o600)
    write_atomically(path, "new")
    assert (mode(path), path.read_text()) == (0o600, "new")


def test_concurrent_writers_never_make_world_writable_files(tmp_path: Path) -> None:
    """The old writer set the umask to 0 for a moment: another thread's file could get 0o666."""

    def write(index: int) -> None:
        for k in range(25):
            write_atomically(tmp_path / f"f{index}-{k}", "x")
            (tmp_path / f"g{index}-{k}").write_text("x")  # a plain open() at the same time

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(mode(path) & 0o002 == 0 for path in tmp_path.iterdir())


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real" / "a.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomically(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    assert sorted(p.name for p in real.parent.iterdir()) == ["a.json"]  # no temp file left


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "target.json")
    write_atomically(link, "new")
    assert link.is_symlink() and (tmp_path / "target.json").read_text() == "new"


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_special_files_are_refused_and_left_alone(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        target = tmp_path / "out.json"
        os.mkfifo(target)
        words = "a FIFO"
    elif kind == "directory":
        target = tmp_path / "out.json"
        target.mkdir()
        words = "a directory"
    else:
        target = Path("/dev/null")
        words = "a device"
    before = target.lstat()
    with pytest.raises(NotARegularFileError, match=f"is {words}, not a regular file"):
        write_atomically(target, "x")
    after = target.lstat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert not [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]


def test_a_link_to_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "out.json"
    link.symlink_to(fifo)
    with pytest.raises(NotARegularFileError, match="a FIFO"):
        write_atomically(link, "x")
    assert link.is_symlink() and stat.S_ISFIFO(fifo.stat().st_mode)
