"""Docs as tests: run the fenced examples of a Markdown page and compare what they show.

The conventions a page follows (this docstring is their one statement, for writers too):

- ```` ```console ````: lines starting with `$ ` are commands, the lines up to the next `$ ` the
  output they must print (stdout and stderr together). A line `...` stands for any number of
  lines, and `...` inside a line for any text. `$ echo $?` prints the previous command's status.
- ```` ```bash ````: every line (comments aside) is a command that must exit 0; nothing is compared.
- ```` ```python ````: run in order, in one namespace per page. An expression statement ending in
  `# -> VALUE` must have `repr(value) == VALUE` (`...` matches any text; two spaces end VALUE, so
  a remark may follow). Preceded by `<!-- file: NAME -->`, it is not run but written to NAME (a
  test file, a factory), for the commands that follow.
- ```` ```wf ````: a file containing `pipeline` must compile without errors. Preceded by
  `<!-- file: NAME -->`, it is also written to NAME, for the commands that follow.
- `<!-- not run: REASON -->` right before a fence skips that block (REASON is required).
- Any other block that shows a `$ dslc` command fails: mark it `console`, or not run.

Commands run with bash in a scratch folder holding a copy of `formulas/`, the artifact
`build/formulas.json` built from it (as `dslc build formulas/ -o build/formulas.json` writes it) and
a link to the virtual environment (`.venv`), with `dslc` on the PATH, no colour and no terminal
width. Python blocks run with that folder as the working directory.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs

from dslc.compiler import compile_paths
from dslc.emit import artifact, dumps

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<key>not run|file):\s*(?P<value>.*?)\s*-->\s*$")
RUNNABLE = ("dslc ", ".venv/bin/dslc ", ".venv/bin/python -m pytest ", "echo $?", "cat ", "ls ")
COMMAND_SECONDS = 300  # a hang guard for one command, not a performance bound


@attrs.frozen
class Block:
    """One fenced block: its language, text, first line (1-based) and the marker before it."""

    lang: str
    text: str
    line: int
    skip: str | None = None
    file: str | None = None


def blocks(markdown: str) -> Iterator[Block]:
    """The fenced blocks of a page, in order, each with the marker on the line before its fence."""
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = opening["indent"]
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
        marker = MARKER.match(lines[index - 1]) if index else None
        skip = marker["value"] if marker and marker["key"] == "not run" else None
        file = marker["value"] if marker and marker["key"] == "file" else None
        yield Block(opening["lang"], "\n".join(body) + "\n", index + 2, skip, file)
        index = end + 1


def matches(shown: str, real: str) -> bool:
    """Whether one shown line matches a real one (`...` inside a line stands for any text)."""
    pattern = ".*".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, real) is not None


def output_matches(shown: list[str], real: list[str]) -> bool:
    """Whether shown lines match real ones; a `...` line stands for any number of lines."""
    if not shown:
        return not real
    if shown[0].strip() == "...":
        return any(output_matches(shown[1:], real[k:]) for k in range(len(real) + 1))
    return bool(real) and matches(shown[0], real[0]) and output_matches(shown[1:], real[1:])


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class Page:
    """Runs one page's blocks in order in a scratch folder, collecting failures."""

    def __init__(self, path: Path, scratch: Path) -> None:
        self.path = path
        self.scratch = scratch
        self.failures: list[str] = []
        self.status = 0
        self.namespace: dict[str, object] = {"__name__": "__doc__"}
        shutil.copytree(ROOT / "formulas", scratch / "formulas")
        (scratch / "build").mkdir()
        (scratch / "build" / "formulas.json").write_text(_formulas_artifact())
        (scratch / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
        self.env = {
            **os.environ,
            "PATH": f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("COLUMNS", None)

    def fail(self, block: Block, offset: int, message: str) -> None:
        self.failures.append(f"{self.path.name}:{block.line + offset}: {message}")

    def run(self) -> list[str]:
        for block in blocks(self.path.read_text()):
            if block.skip is not None:
                if not block.skip:
                    self.fail(block, -1, "`not run` needs a reason")
                continue
            handler = getattr(self, f"_{block.lang}", None)
            if handler is not None:
                handler(block)
            elif re.search(r"^\$ (\.venv/bin/)?dslc\b", block.text, re.MULTILINE):
                self.fail(block, 0, f"a ```{block.lang} block shows a command: mark it console")
        return self.failures

    def _shell(self, command: str) -> tuple[int, str]:
        if command == "echo $?":
            return 0, f"{self.status}\n"
        if not command.startswith(RUNNABLE):
            return -1, f"not a documented command ({', '.join(RUNNABLE)}): {command}"
        done = subprocess.run(
            ["bash", "-c", command],
            check=False,
            cwd=self.scratch,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_SECONDS,
        )
        self.status = done.returncode
        return done.returncode, done.stdout

    def _console(self, block: Block) -> None:
        lines = block.text.rstrip("\n").split("\n")
        starts = [k for k, line in enumerate(lines) if line.startswith("$ ")]
        if not starts:
            self.fail(block, 0, "a console block without a `$ ` command")
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(lines)
            command = lines[start][2:].strip()
            status, out = self._shell(command)
            if status == -1:
                self.fail(block, start, out)
                continue
            shown = _lines("\n".join(lines[start + 1 : end]))
            if not output_matches(shown, _lines(out)):
                self.fail(
                    block,
                    start,
                    f"`{command}` printed:\n{out}--- but the page shows:\n" + "\n".join(shown),
                )

    def _bash(self, block: Block) -> None:
        for offset, line in enumerate(block.text.split("\n")):
            command = re.sub(r"\s+#.*$", "", line).strip()
            if not command or command.startswith("#"):
                continue
            status, out = self._shell(command)
            if status != 0:
                self.fail(block, offset, f"`{command}` exited {status}:\n{out}")

    def _wf(self, block: Block) -> None:
        from dslc.compiler import compile_text

        if block.file:
            self._write(block)
            return  # a file for the commands: what they print is the check
        if re.search(r"^\s*pipeline\s", block.text, re.MULTILINE):
            result = compile_text(block.text, f"{self.path.name}:{block.line}")
            for error in result.errors:
                self.fail(block, (error.span.line - 1) if error.span else 0, error.message)

    def _write(self, block: Block) -> None:
        target = self.scratch / str(block.file)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text)

    def _python(self, block: Block) -> None:
        if block.file:
            self._write(block)
            return
        try:
            tree = _with_checks(block.text)
            code = compile(tree, f"{self.path.name}:{block.line}", "exec")
        except SyntaxError as error:
            self.fail(block, (error.lineno or 1) - 1, f"not Python: {error.msg}")
            return
        shown: list[str] = []
        self.namespace["__shown__"] = lambda value, text, line: _compare(shown, value, text, line)
        cwd = Path.cwd()
        os.chdir(self.scratch)
        try:
            exec(code, self.namespace)  # noqa: S102 -- running the page's own example is the test
        except Exception as error:  # noqa: BLE001 -- any failure of the example is reported
            self.fail(block, 0, f"raised {type(error).__name__}: {error}")
        finally:
            os.chdir(cwd)
        for failure in shown:
            line, message = failure.split(":", 1)
            self.fail(block, int(line) - 1, message.strip())


def _compare(failures: list[str], value: object, text: str, line: int) -> None:
    if not matches(text, repr(value)):
        failures.append(f"{line}: shows {text} but the value is {value!r}")


class _Shown(ast.NodeTransformer):
    """Turns `EXPR  # -> VALUE` statements into `__shown__(EXPR, "VALUE", LINE)` calls."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        line = self.lines[(node.end_lineno or node.lineno) - 1]
        found = re.search(r"#\s*->\s*(.*?)(\s{2,}.*)?$", line)
        if not found:
            return node
        call = ast.Call(
            ast.Name("__shown__", ast.Load()),
            [node.value, ast.Constant(found[1].strip()), ast.Constant(node.lineno)],
            [],
        )
        return ast.copy_location(ast.Expr(call), node)


def _with_checks(text: str) -> ast.Module:
    tree = _Shown(text.split("\n")).visit(ast.parse(text))
    return ast.fix_missing_locations(tree)


@functools.cache
def _formulas_artifact() -> str:
    """The artifact of `formulas/`, built once per test session."""
    result = compile_paths([ROOT / "formulas"])
    assert result.ok and result.program is not None, [d.message for d in result.errors]
    return dumps(artifact(result.program))


def run_page(path: Path, scratch: Path) -> list[str]:
    """Every failure of one page's examples, as `PAGE:LINE: message` (empty: the page is right)."""
    return Page(path, scratch).run()


def pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
