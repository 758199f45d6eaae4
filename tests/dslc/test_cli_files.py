"""The command line and special files: FIFOs, devices and symlinks are read and written safely,
and values beyond the float range print without an internal error."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dslc.cli import cli
from tests.examples import LANGUAGE_EXAMPLE


def run(*args: str) -> Result:
    """`dslc ARGS` in-process; never the internal-error exit."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code != 3, result.output
    assert "internal error:" not in result.output
    return result


@pytest.fixture
def wan(tmp_path: Path) -> Path:
    path = tmp_path / "wan.wf"
    path.write_text(LANGUAGE_EXAMPLE)
    return path


def test_a_fifo_input_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "in.wf"
    os.mkfifo(fifo)
    result = run("check", str(fifo))
    assert result.exit_code == 2
    assert f"not a regular file: {fifo}" in result.stderr
    assert "no such file" not in result.stderr


def test_build_to_a_fifo_is_refused_and_the_fifo_kept(tmp_path: Path, wan: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    result = run("build", str(wan), "-o", str(fifo))
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: cannot write {fifo}: is a FIFO, not a regular file"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_build_to_a_device_is_refused_and_the_node_kept(tmp_path: Path, wan: Path) -> None:
    # As root the old writer renamed its temp file over the device node itself; make our own
    # node then (like /dev/full: major 1, minor 7), never risk the real one.
    if os.geteuid() == 0:
        device = tmp_path / "full"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    else:
        device = Path("/dev/full")
    before = device.lstat()
    result = run("build", str(wan), "-o", str(device))
    assert result.exit_code == 1
    assert "is a device, not a regular file" in result.stderr
    after = device.lstat()
    assert (after.st_ino, after.st_rdev, stat.S_ISCHR(after.st_mode)) == (
        before.st_ino,
        before.st_rdev,
        True,
    )


def test_build_through_a_symlink_writes_its_target(tmp_path: Path, wan: Path) -> None:
    target = tmp_path / "artifacts" / "formulas.json"
    target.parent.mkdir()
    link = tmp_path / "formulas.json"
    link.symlink_to(target)
    assert run("build", str(wan), "-o", str(link)).exit_code == 0
    assert link.is_symlink()
    assert json.loads(target.read_text())["format"] == "workload-formulas"


def test_fmt_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.wf"
    real.write_text("pipeline   q{param steps:int=4 in [1,10]\nstage S{iterations=steps}}\n")
    link = tmp_path / "link.wf"
    link.symlink_to(real)
    assert run("fmt", str(link)).exit_code == 0
    assert link.is_symlink()
    assert real.read_text().startswith("pipeline q {\n")


HUGE = """\
pipeline big {
    param n: int = 7 in [1, 10]
    stage S {
        memory ~ (n * 100000000000000000000000000000) ** 11 / 3
        time ~ 1 / ((n * 100000000000000000000000000000) ** 11 * 3)
    }
}
"""


def test_values_beyond_the_float_range_print(tmp_path: Path) -> None:
    """A non-integral measure above the float range was an OverflowError (exit 3)."""
    path = tmp_path / "big.wf"
    path.write_text(HUGE)
    table = run("eval", str(path), "big")
    assert table.exit_code == 0
    assert "~6591089...(328 digits)" in table.stdout
    as_json = run("eval", str(path), "big", "--json")
    assert as_json.exit_code == 1
    assert "beyond the range of a JSON number" in as_json.stderr
    explained = run("explain", str(path), "big", "--probe", "n=2")
    assert explained.exit_code == 0
    assert "~6826666...(322 digits)" in explained.stdout
