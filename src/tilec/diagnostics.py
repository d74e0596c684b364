"""User-facing diagnostics.

A `Diagnostic` is a user error: a span, a message, optional notes pointing at
other spans, and a hint saying what to do instead. `render` turns one into the
plain text that golden `.err` files hold:

    examples/gemm.tile:12:9: error: unknown name 'A_shard'
       12 |         copy(A_shard, C)
          |              ^^^^^^^
    hint: did you mean 'A_shared'?

A warning is a Diagnostic too, with severity "warning" and the name that
`-Wno-NAME` silences (WARNINGS lists them); compilation collects warnings
instead of raising them, and `with_options` applies the command line's
`-Wno-NAME` / `-Werror` to them, as gcc does:

    gather.tile:13:13: warning: copy into 'A_shared' does not run ahead: ... [-Wlost-pipeline]

Colour is added only at the CLI edge (cli.py). An unexpected exception is not a
Diagnostic: the driver reports it as an internal compiler error (exit code 2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
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
    name: str | None = None  # a warning's -W name (WARNINGS); kept when -Werror makes it an error
    limit: str | None = None  # the target's limit an error is over ("shared memory"): a build may
    # then fit its configuration to the target (tune/fit.py)


# The warnings tilec reports, by the name `-Wno-NAME` silences: what each one means.
WARNINGS = {
    "lost-pipeline": "a copy of a Pipelined(num_stages >= 2) loop runs in its own iteration, not ahead",
    "single-buffer": "a register-staged pipeline keeps one LDS buffer per tile: num_stages of them do not fit",
    "simt-gemm": "a gemm whose operand types a tensor core takes runs on CUDA cores (SIMT FMA)",
    "annotated-operand": "an operand's annotate_layout keeps a gemm off the instruction that lays out its own tiles",
    "register-spill": "a kernel's register estimate passes what a thread has: the rest spills to local memory",
    "config-fit": "the default configuration is over a target's limit: the nearest candidate point that fits is built",
    "bank-conflict": "a gemm's shared-memory operand loads have bank conflicts the tile's layout could not avoid",
}


@dataclass(frozen=True, slots=True)
class WarningOptions:
    """The command line's say on warnings: the names silenced (-Wno-NAME), whether every
    warning is an error (-Werror), and the names that are (-Werror=NAME)."""

    disabled: frozenset[str] = frozenset()
    werror: bool = False
    errors: frozenset[str] = frozenset()


def warning(
    span: Span | None, name: str, message: str, hint: str | None = None, notes: tuple[Note, ...] = ()
) -> Diagnostic:
    """The warning `name` (a key of WARNINGS) at `span`."""
    assert name in WARNINGS, f"unknown warning {name}"
    return Diagnostic(span, message, hint, notes, "warning", name)


def with_options(warnings: Sequence[Diagnostic], options: WarningOptions) -> list[Diagnostic]:
    """`warnings` less those silenced, as errors under -Werror (or their -Werror=NAME)."""
    kept = [w for w in warnings if w.name not in options.disabled]
    return [dataclasses.replace(w, severity="error") if _is_error(w, options) else w for w in kept]


def _is_error(w: Diagnostic, options: WarningOptions) -> bool:
    return options.werror or w.name in options.errors


class CompileError(Exception):
    """Raised to stop compilation; carries every diagnostic collected so far."""

    def __init__(self, diagnostics: list[Diagnostic], candidate_sets: tuple = ()):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics
        # the file's candidate sets (tir.CandidateSet), when elaboration read them: tune/fit.py
        self.candidate_sets = candidate_sets

    @property
    def over_limits_only(self) -> bool:
        """Every error is one of a target's limits (Diagnostic.limit): another configuration may fit."""
        errors = [d for d in self.diagnostics if d.severity == "error"]
        return bool(errors) and all(d.limit for d in errors)


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


def _named(diag: Diagnostic) -> str:
    """The message with gcc's tag of a named warning: [-Wname], or [-Werror=name] once an error."""
    if diag.name is None:
        return diag.message
    flag = f"-W{diag.name}" if diag.severity == "warning" else f"-Werror={diag.name}"
    return f"{diag.message} [{flag}]"


def render(diag: Diagnostic) -> str:
    """Plain-text rendering of one diagnostic (what golden .err and .warn files hold)."""
    lines = _located(diag.span, diag.severity, _named(diag))
    for note in diag.notes:
        lines += _located(note.span, "note", note.message)
    if diag.hint:
        lines.append(f"hint: {diag.hint}")
    return "\n".join(lines) + "\n"


def render_all(diags: list[Diagnostic]) -> str:
    return "".join(render(d) for d in diags)
