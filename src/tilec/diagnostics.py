"""User-facing diagnostics.

A `Diagnostic` is a user error: a span, a message, optional notes pointing at
other spans, and a hint saying what to do instead. `render` turns one into the
plain text that golden `.err` files hold:

    examples/gemm.tile:12:9: error: unknown name 'A_shard'
       12 |         copy(A_shard, C)
          |              ^^^^^^^
    hint: did you mean 'A_shared'?

Colour is added only at the CLI edge (cli.py). An unexpected exception is not a
Diagnostic: the driver reports it as an internal compiler error (exit code 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilec.source import Span


@dataclass(frozen=True, slots=True)
class Note:
    span: Span | None
    message: str


@dataclass(frozen=True, slots=True)
class Diagnostic:
    span: Span | None
    message: str
    hint: str | None = None
    notes: tuple[Note, ...] = ()
    severity: str = "error"


class CompileError(Exception):
    """Raised to stop compilation; carries every diagnostic collected so far."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


@dataclass
class DiagnosticBag:
    """Collects diagnostics of one phase; `check` raises if any was an error."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, span: Span | None, message: str, hint: str | None = None, notes: tuple[Note, ...] = ()) -> None:
        self.items.append(Diagnostic(span, message, hint, notes))

    def check(self) -> None:
        if self.items:
            raise CompileError(list(self.items))


def error(span: Span | None, message: str, hint: str | None = None, notes: tuple[Note, ...] = ()) -> CompileError:
    """A CompileError holding one diagnostic, for `raise error(...)`."""
    return CompileError([Diagnostic(span, message, hint, notes)])


def _excerpt(span: Span) -> list[str]:
    line = span.line
    text = span.file.line_text(line)
    col = span.column
    line_end = span.file.line_starts[line - 1] + len(text)
    width = max(1, min(span.end, line_end) - span.start)
    gutter = f"{line:>5} | "
    blank = " " * (len(gutter) - 2) + "| "
    return [gutter + text.rstrip(), blank + " " * (col - 1) + "^" * width]


def _located(span: Span | None, kind: str, message: str) -> list[str]:
    if span is None or not span.file.text:
        return [f"{kind}: {message}"]
    return [f"{span.location()}: {kind}: {message}", *_excerpt(span)]


def render(diag: Diagnostic) -> str:
    """Plain-text rendering of one diagnostic (what golden .err files hold)."""
    lines = _located(diag.span, diag.severity, diag.message)
    for note in diag.notes:
        lines += _located(note.span, "note", note.message)
    if diag.hint:
        lines.append(f"hint: {diag.hint}")
    return "\n".join(lines) + "\n"


def render_all(diags: list[Diagnostic]) -> str:
    return "".join(render(d) for d in diags)
