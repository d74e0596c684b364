"""What a name means during elaboration: the values scopes bind.

    param block_M = 128           block_M -> Val(IntImm(128), weak=True)
    param dtype = float16         dtype   -> DTypeVal(float16)
    A_shared = alloc_shared(...)  A_shared -> BufVal(Buffer("A_shared", ..., "shared"))
    q = Q[bz, :, 0:64]            q       -> SubVal(Q, (bz, SliceVal(...), SliceVal(...)))
    macro softmax(...)            softmax -> MacroVal(def, its file's scope)

A `Poison` marks a name whose definition failed (already reported): a use of
it quietly abandons the statement, so one mistake gives one diagnostic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from tilec import syntax as S
from tilec import tir
from tilec.dtypes import DType
from tilec.fold import Val
from tilec.source import Span


@dataclass(frozen=True, slots=True)
class BufVal:
    buffer: tir.Buffer


@dataclass(frozen=True, slots=True)
class SliceVal:
    lo: tir.Expr
    hi: tir.Expr
    span: Span


@dataclass(frozen=True, slots=True)
class SubVal:
    """`A[i, j]` (an element, or an origin when used as a tile operand) or
    `A[i, a:b]` (a region)."""

    buffer: tir.Buffer
    items: tuple[tir.Expr | SliceVal, ...]
    span: Span

    @property
    def is_element(self) -> bool:
        return not any(isinstance(i, SliceVal) for i in self.items)


@dataclass(frozen=True, slots=True)
class DTypeVal:
    dtype: DType


@dataclass(frozen=True, slots=True)
class StrVal:
    value: str


@dataclass(frozen=True, slots=True)
class TupleVal:
    items: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class MacroVal:
    macro: S.MacroDef
    scope: Scope = field(repr=False)


@dataclass(frozen=True, slots=True)
class BuiltinVal:
    """A built-in function, tile op, loop kind or `Kernel`/`Tensor`."""

    name: str


@dataclass(frozen=True, slots=True)
class PolicyVal:
    name: str


class Poison:
    """The value of a name whose definition failed."""


POISON = Poison()

Value: TypeAlias = Val | BufVal | SubVal | DTypeVal | StrVal | TupleVal | MacroVal | BuiltinVal | PolicyVal | Poison


@dataclass(eq=False)
class Scope:
    """Names visible at one point: a chain of dicts, innermost first."""

    parent: Scope | None = None
    names: dict[str, Value] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # name -> file it was defined in (globals)

    def lookup(self, name: str) -> Value | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def visible(self) -> list[str]:
        names: list[str] = []
        scope: Scope | None = self
        while scope is not None:
            names += scope.names
            scope = scope.parent
        return names

    def child(self) -> Scope:
        return Scope(self)


class Abandon(Exception):
    """Stop elaborating the current statement; its error is already reported."""
