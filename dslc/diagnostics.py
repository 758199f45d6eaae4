"""Diagnostics as data: code, span, message, notes and hints; one plain-text renderer."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

import attrs

from artifact.write import JsonObject
from dslc.codes import Code
from dslc.source import Span


@attrs.frozen
class Note:
    """A secondary place worth showing (e.g. where a name was first declared)."""

    message: str
    span: Span | None = None


@attrs.frozen
class Diagnostic:
    severity: str  # "error" or "warning"
    code: Code
    message: str
    span: Span | None = None
    notes: tuple[Note, ...] = ()
    hints: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.code, Code) or self.severity not in ("error", "warning"):
            raise ValueError(f"bad diagnostic {self.severity}[{self.code}]")

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def as_error(self) -> Diagnostic:
        """The same diagnostic promoted to an error (`--strict`)."""
        return attrs.evolve(self, severity="error")

    def sort_key(self) -> tuple[str, int, int, Code]:
        if self.span is None:
            return ("", 0, 0, self.code)
        return (self.span.source.name, self.span.line, self.span.column, self.code)


def error(
    code: Code,
    message: str,
    span: Span | None,
    *,
    notes: Iterable[Note] = (),
    hints: Iterable[str] = (),
) -> Diagnostic:
    return Diagnostic("error", code, message, span, tuple(notes), tuple(hints))


def warning(
    code: Code, message: str, span: Span | None, *, hints: Iterable[str] = ()
) -> Diagnostic:
    return Diagnostic("warning", code, message, span, (), tuple(hints))


class CompileError(Exception):
    """Raised once a stage of the compiler has collected errors it cannot go past."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(render(d) for d in self.diagnostics))


def did_you_mean(name: str, candidates: Iterable[str]) -> tuple[str, ...]:
    """A `help:` line naming the closest candidates, as mypy's best_matches does."""
    matches = difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.6)
    if not matches:
        return ()
    quoted = " or ".join(f"'{m}'" for m in matches)
    return (f"did you mean {quoted}?",)


EXCERPT_WIDTH = 100


def _excerpt(span: Span, gutter: int) -> list[str]:
    """The culprit's line with a caret span, windowed so a 1 MiB line stays readable."""
    text = span.source.line(span.line).expandtabs(1)
    end = span.end_column if span.end_line == span.line else len(text) + 1
    width = max(1, min(end, len(text) + 1) - span.column)
    start = 0 if len(text) <= EXCERPT_WIDTH else max(0, span.column - 1 - EXCERPT_WIDTH // 2)
    shown = text[start : start + EXCERPT_WIDTH]
    prefix = "..." if start else ""
    suffix = "..." if start + EXCERPT_WIDTH < len(text) else ""
    width = min(width, EXCERPT_WIDTH - (span.column - 1 - start))
    pad = " " * gutter
    return [
        f"{span.line:>{gutter}} | {prefix}{shown}{suffix}",
        f"{pad} | {' ' * (len(prefix) + span.column - 1 - start)}{'^' * max(1, width)}",
    ]


def render(diagnostic: Diagnostic) -> str:
    """The human form: `FILE:LINE:COL: error[CODE]: MESSAGE`, the line, a caret span, notes,
    help.
    """
    span = diagnostic.span
    where = f"{span}: " if span is not None else ""
    lines = [f"{where}{diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}"]
    spans = [s for s in [span, *(n.span for n in diagnostic.notes)] if s is not None]
    gutter = max((len(str(s.line)) for s in spans), default=1)
    if span is not None:
        lines += _excerpt(span, gutter)
    for note in diagnostic.notes:
        if note.span is not None:
            lines.append(f"{note.span}: note: {note.message}")
            lines += _excerpt(note.span, gutter)
        else:
            lines.append(f"note: {note.message}")
    lines += [f"help: {hint}" for hint in diagnostic.hints]
    return "\n".join(lines)


def to_json(diagnostic: Diagnostic) -> JsonObject:
    """The `--format json` entry of docs/language.md (plus notes and hints)."""
    span = diagnostic.span
    return {
        "severity": diagnostic.severity,
        "code": diagnostic.code.value,
        "message": diagnostic.message,
        "file": span.source.name if span else None,
        "line": span.line if span else None,
        "column": span.column if span else None,
        "end_line": span.end_line if span else None,
        "end_column": span.end_column if span else None,
        "notes": [note.message for note in diagnostic.notes],
        "hints": list(diagnostic.hints),
    }


def dedupe(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """One diagnostic per (code, place): a parent's flaw inherited by children is said once."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for d in diagnostics:
        key = (d.severity, d.code, d.sort_key())
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
