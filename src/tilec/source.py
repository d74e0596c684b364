"""Source files and spans.

Every syntax node and IR node carries a `Span`: byte offsets into one shared
`SourceFile`. Line and column are computed lazily, only when a diagnostic or a
comment in the generated code needs them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True, eq=False)
class SourceFile:
    path: str
    text: str

    @cached_property
    def line_starts(self) -> list[int]:
        starts = [0]
        for i, ch in enumerate(self.text):
            if ch == "\n":
                starts.append(i + 1)
        return starts

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return line + 1, offset - self.line_starts[line] + 1

    def line_text(self, line: int) -> str:
        start = self.line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]


@dataclass(frozen=True, slots=True)
class Span:
    file: SourceFile = field(repr=False, compare=False)
    start: int
    end: int

    @property
    def line(self) -> int:
        return self.file.position(self.start)[0]

    @property
    def column(self) -> int:
        return self.file.position(self.start)[1]

    @property
    def text(self) -> str:
        return self.file.text[self.start : self.end]

    def to(self, other: Span) -> Span:
        """The span covering both `self` and `other`."""
        return Span(self.file, min(self.start, other.start), max(self.end, other.end))

    def location(self) -> str:
        return f"{self.file.path}:{self.line}:{self.column}"


BUILTIN = SourceFile("<builtin>", "")
NO_SPAN = Span(BUILTIN, 0, 0)
