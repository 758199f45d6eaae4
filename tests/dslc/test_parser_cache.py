"""The analysed grammar kept between processes (Lark's `cache=PATH`): a parser loaded from it
parses exactly as a freshly built one, and a missing, stale or corrupt file is rebuilt, never an
error. Each case runs in a fresh interpreter: the parser is built once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Prints, as JSON, the cache path the parser used and a digest of every formula file's AST: the
# dataclass reprs hold every node and name (spans are left out of equality, not of repr).
PROBE = """
import hashlib, json, sys
from pathlib import Path
from dslc.parse import parse_text, parser_cache_path
digest = hashlib.sha256()
for path in sorted(Path("formulas").glob("*.wf")):
    digest.update(repr(parse_text(path.read_text(), path.name)).encode())
print(json.dumps({"cache": parser_cache_path(), "ast": digest.hexdigest()}))
"""


def run(cache_dir: str | None) -> dict[str, str | None]:
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
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # a rebuilt cache is silent
    result: dict[str, str | None] = json.loads(done.stdout)
    return result


def test_a_cached_parser_parses_as_a_fresh_one_and_bad_files_are_rebuilt(tmp_path: Path) -> None:
    uncached = run("")
    assert uncached["cache"] is None and not list(tmp_path.iterdir())
    written = run(str(tmp_path))
    (path,) = tmp_path.iterdir()
    assert written["cache"] == str(path) and path.stat().st_size > 1000
    loaded = run(str(tmp_path))  # now read from the file
    assert uncached["ast"] == written["ast"] == loaded["ast"]
    for bad in (b"", b"not a cache\n", path.read_bytes()[:500]):  # empty, foreign, truncated
        path.write_bytes(bad)
        assert run(str(tmp_path))["ast"] == uncached["ast"]
        assert path.stat().st_size > 1000  # rewritten whole


def test_a_folder_that_cannot_be_made_means_no_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run(str(blocker / "sub"))  # under a plain file: makedirs fails
    assert result["cache"] is None
    assert run("relative/dir")["cache"] is None  # never a folder that depends on the cwd
