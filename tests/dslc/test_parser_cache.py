"""The parser's tables kept between processes (`dslc.parser_cache`): a parser loaded from the
cache parses exactly as a freshly built one; a missing, stale or corrupt file of ours is rebuilt
silently; and anything a hostile or careless hand put at the cache path (a link, a FIFO, a device,
another user's file, a folder others may write) is left untouched, named in one note on stderr,
while the formulas still parse as they should. Each case runs in a fresh interpreter (the parser
is built once per process), under a memory cap and a timeout, so a read of `/dev/zero` or a wait
on a FIFO fails the test instead of hanging it."""

from __future__ import annotations

import ast
import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from dslc.parser_cache import MAX_CACHE_BYTES, cache_name

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534

# Prints, as JSON, the cache path the parser used and a digest of every formula file's AST: the
# reprs hold every node and name (spans are left out of equality, not of repr).
PROBE = """
import hashlib, json, sys
from pathlib import Path
from dslc.parse import parse_text, parser_cache_path
digest = hashlib.sha256()
for path in sorted(Path("formulas").glob("*.wf")):
    digest.update(repr(parse_text(path.read_text(), path.name)).encode())
print(json.dumps({"cache": parser_cache_path(), "ast": digest.hexdigest()}))
"""


@attrs.frozen
class Run:
    cache: str | None
    ast: str
    stderr: str


def _cap_memory() -> None:
    cap = 1 << 30  # reading /dev/zero or a sparse file whole would pass it
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def run(cache_dir: str | None) -> Run:
    env = {k: v for k, v in os.environ.items() if k != "DSLC_CACHE_DIR"}
    if cache_dir is not None:
        env["DSLC_CACHE_DIR"] = cache_dir
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a FIFO opened for reading would wait for a writer for ever
        preexec_fn=_cap_memory,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return Run(result["cache"], result["ast"], done.stderr)


@pytest.fixture(scope="module")
def fresh() -> str:
    """The AST digest of a parser built in memory."""
    uncached = run("")
    assert uncached.cache is None and uncached.stderr == ""
    return uncached.ast


def test_a_cached_parser_parses_as_a_fresh_one_and_bad_files_are_rebuilt(
    tmp_path: Path, fresh: str
) -> None:
    folder = tmp_path / "made" / "here"
    written = run(str(folder))
    (path,) = folder.iterdir()
    assert written.cache == str(path) and path.name == cache_name()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # made for the user alone
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    good = path.read_bytes()
    assert good.startswith(b'{"format":"dslc LALR tables"') and len(good) > 1000
    loaded = run(str(folder))  # now read from the file
    assert fresh == written.ast == loaded.ast and written.stderr == loaded.stderr == ""
    assert path.read_bytes() == good  # read, not rewritten
    stale = good.replace(b'"key":"', b'"key":"0', 1)  # another grammar's tables
    wrong = json.loads(good)
    wrong["tables"]["data"]["parser"] = {"__type__": "Lark"}  # JSON, but no parser
    for bad in (b"", b"not a cache\n", good[:500], stale, json.dumps(wrong).encode()):
        path.write_bytes(bad)
        rebuilt = run(str(folder))
        assert rebuilt.ast == fresh and rebuilt.stderr == ""
        rewritten = path.read_bytes()  # whole (Lark's terminal order may differ between runs)
        assert json.loads(rewritten)["key"] == json.loads(good)["key"]
        assert run(str(folder)).ast == fresh and path.read_bytes() == rewritten  # read again
    assert [p.name for p in folder.iterdir()] == [cache_name()]  # no temporary file left


def test_a_file_too_large_is_never_read(tmp_path: Path, fresh: str) -> None:
    """A sparse file past the limit: reading it whole would pass the memory cap."""
    path = tmp_path / cache_name()
    with path.open("wb") as handle:
        handle.truncate(2 << 30)
    assert path.stat().st_size > MAX_CACHE_BYTES
    rebuilt = run(str(tmp_path))
    assert rebuilt.ast == fresh and rebuilt.stderr == ""
    assert 1000 < path.stat().st_size < MAX_CACHE_BYTES  # ours: replaced by the tables


def test_a_symbolic_link_is_never_written_through(tmp_path: Path, fresh: str) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("the user's own file\n")
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    (folder / cache_name()).symlink_to(target)
    for _ in range(2):
        result = run(str(folder))
        assert result.ast == fresh
        assert result.stderr.count("\n") == 1 and "is a symbolic link" in result.stderr
        assert target.read_text() == "the user's own file\n"
        assert (folder / cache_name()).readlink() == target


def test_a_fifo_or_a_device_is_neither_waited_on_nor_read(tmp_path: Path, fresh: str) -> None:
    fifo, device = tmp_path / "fifo", tmp_path / "device"
    fifo.mkdir(mode=0o700)
    device.mkdir(mode=0o700)
    os.mkfifo(fifo / cache_name(), 0o600)
    (device / cache_name()).symlink_to("/dev/zero")
    for folder, why in ((fifo, "is not a regular file"), (device, "is a symbolic link")):
        result = run(str(folder))
        assert result.ast == fresh and why in result.stderr
    assert stat.S_ISFIFO((fifo / cache_name()).lstat().st_mode)
    assert (device / cache_name()).readlink() == Path("/dev/zero")


def test_another_users_file_is_left_alone(tmp_path: Path, fresh: str) -> None:
    path = tmp_path / cache_name()
    path.write_text("planted\n")
    os.chown(path, NOBODY, NOBODY)
    result = run(str(tmp_path))
    assert result.ast == fresh and f"belongs to user {NOBODY}" in result.stderr
    assert path.read_text() == "planted\n" and path.stat().st_uid == NOBODY


def test_a_file_others_may_write_is_left_alone(tmp_path: Path, fresh: str) -> None:
    run(str(tmp_path))
    path = tmp_path / cache_name()
    path.chmod(0o666)
    good = path.read_bytes()
    result = run(str(tmp_path))
    assert result.ast == fresh and "is writable by others" in result.stderr
    assert path.read_bytes() == good and stat.S_IMODE(path.stat().st_mode) == 0o666


def test_a_folder_that_is_not_the_users_own_is_not_used(tmp_path: Path, fresh: str) -> None:
    open_to_all = tmp_path / "shared"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    for folder, why in ((open_to_all, "is writable by others"), (theirs, "belongs to user")):
        result = run(str(folder))
        assert result.ast == fresh and why in result.stderr and str(folder) in result.stderr
        assert list(folder.iterdir()) == []  # nothing written there


def test_a_folder_that_cannot_be_made_means_no_cache(tmp_path: Path, fresh: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    under_a_file = run(str(blocker / "sub"))  # makedirs fails: nowhere to keep it, no note
    assert under_a_file.ast == fresh and under_a_file.stderr == ""
    assert blocker.read_text() == ""
    assert run("relative/dir").cache is None  # never a folder that depends on the cwd
    assert not (ROOT / "relative").exists()


def test_the_compiler_never_unpickles() -> None:
    """The tables are JSON read by the strict reader: nothing in `dslc` imports pickle or marshal,
    nor asks Lark for its own cache (a pickle)."""
    for path in (ROOT / "dslc").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] + [getattr(node, "module", "") or ""]
                assert not any(n.split(".")[0] in ("pickle", "marshal") for n in names), path
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Lark"):
                assert "cache" not in {k.arg for k in node.keywords}, path
