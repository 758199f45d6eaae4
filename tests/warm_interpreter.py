"""A fresh interpreter per import, without paying torch's import each time: one server process
imports the ``preload`` packages once, then forks a child per module, which imports that module
alone and says which top-level packages it then holds (tests/test_layering.py).

A child is a fresh interpreter plus the preloaded third-party packages and nothing of the
project: a module's own import order, circles and layering are exercised as in a new process.
The caller uses it only for modules that may load everything the server preloaded (``preloaded``),
so the packages a child reports never include a forbidden one that the server brought in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from attrs import frozen

SERVER = """
import importlib, json, os, sys, traceback
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), flush=True)
for line in sys.stdin:
    module, out, err = line.rstrip("\\n").split("\\t")
    pid = os.fork()
    if pid == 0:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        os.dup2(os.open(out, flags), 1)
        os.dup2(os.open(err, flags), 2)
        code = 0
        try:
            importlib.import_module(module)
            print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


@frozen
class Imported:
    """What importing one module alone did: exit code, standard output and error."""

    returncode: int
    stdout: str
    stderr: str


class WarmInterpreter:
    """The forking server (``start``): ``run(module, folder)`` imports ``module`` in a child."""

    def __init__(self, preload: tuple[str, ...], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in, self._out = self.process.stdin, self.process.stdout
        #: The top-level packages every child holds before its import.
        self.preloaded = frozenset(json.loads(self._out.readline()))

    def run(self, module: str, folder: Path) -> Imported:
        out, err = folder / f"{module}.out", folder / f"{module}.err"
        self._in.write(f"{module}\t{out}\t{err}\n")
        self._in.flush()
        code = int(self._out.readline())
        return Imported(code, out.read_text(), err.read_text())

    def close(self) -> None:
        self._in.close()
        self.process.wait(60)
