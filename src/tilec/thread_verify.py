"""Thread IR verifier: the invariants every Thread IR pass keeps, checked after
each one in the tests (pipeline.py's hook; `TILEC_VERIFY=1` in a build).

What it rejects, each a bug lowering or a later pass could make and nvcc would
report far from its cause (or not at all):

    x = 1;                          // 'x' used before its declaration
    float r[4]; float r[4];         // 'r' declared twice in one scope
    r[0][1] = 0.0f;                 // two indices into 'r' (declared with one)
    r[4] = 0.0f;                    // constant index 4 outside 'r' (extent 4)
    const int c = 0; c = 1;         // assignment to const 'c' (or to a scalar parameter)
    for (int i = 0; i < 2.5f; ...)  // a loop bound that is not an integer
    tilec_mma_m16n8k16_f16(...)     // a helper the kernel does not list (it would not be emitted)
    T.Barrier("named")              // a barrier kind the target cannot spell yet
    tir.Copy(...)                   // a Tile IR statement left in the Thread IR
    SharedView at smem + 65536      // a view past the kernel's dynamic shared memory
    Subscript("(float*)buf", ...)   // C text where a name belongs (not an identifier)

    Intrin("printf", ("x", ...))   // a string argument that is not a C string literal

The one C text the Thread IR still carries is a string literal argument (printf's format,
lower/cexpr.c_string); everything else is a name or a node the emitter spells.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TypeAlias, assert_never, get_args

from tilec import thread_ir as T
from tilec import tir
from tilec.shared_plan import disjoint, overlap
from tilec.targets import Spelling, Target
from tilec.tir_print import VerifyError

Expr: TypeAlias = T.Expr | T.VecRef  # a value or a target of an assignment

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_CALLED = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^<>()]*>)?\s*\(")  # `name(` or `name<N>(` in C text
_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')  # `"x = %d\n"`
_PLACEHOLDER = re.compile(r"\{(\d+)\}")  # `{0}`: an argument of a spelling template
_TILE_STMTS = get_args(tir.Stmt)


@dataclass(frozen=True, slots=True)
class _Name:
    dims: tuple[int, ...] | None  # None: a pointer (one index, no extent known)
    const: bool = False


@dataclass(slots=True)
class _Checker:
    kernel: T.Kernel
    spelling: Spelling
    scopes: list[dict[str, _Name]] = field(default_factory=list)
    where: str = ""  # the innermost Scope comment (the .tile line being lowered)

    def fail(self, message: str) -> VerifyError:
        at = f" (in '{self.where}')" if self.where else ""
        return VerifyError(f"{self.kernel.name}: {message}{at}")

    # ------------------------------------------------------------ names

    def declare(self, name: str, info: _Name) -> None:
        if name in self.scopes[-1]:
            raise self.fail(f"'{name}' declared twice in one scope")
        self.scopes[-1][name] = info

    def lookup(self, name: str) -> _Name:
        """The declaration of `name` (an identifier: C text is no name)."""
        if not _IDENTIFIER.fullmatch(name):
            raise self.fail(f"'{name}' is not an identifier (C text in the Thread IR)")
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.fail(f"'{name}' used before its declaration")

    def block(self, stmts: tuple[T.Stmt, ...]) -> None:
        self.scopes.append({})
        for s in stmts:
            self.stmt(s)
        self.scopes.pop()

    # ------------------------------------------------------------ statements

    def stmt(self, s: T.Stmt) -> None:
        if isinstance(s, _TILE_STMTS):
            raise self.fail(f"Tile IR statement {type(s).__name__} left in the Thread IR")
        match s:
            case T.Decl(name, _, dims, init, _, const):
                if init is not None:
                    self.expr(init)
                self.declare(name, _Name(dims, const))
            case T.SharedView(name, dtype, dims, offset):
                self.shared_view(name, dtype.bytes, dims, offset)
            case T.Assign(target, value):
                self.assign_target(target)
                self.expr(value)
            case T.Loop(var, start, stop, step, _, body):
                self.loop(var, start, stop, step, body)
            case T.While(cond, body):
                self.expr(cond)
                self.block(body)
            case T.IfThen(cond, then, orelse):
                self.expr(cond)
                self.block(then)
                self.block(orelse)
            case T.Call(call):
                self.expr(call)
            case T.Barrier(kind, args):
                self.barrier(kind, args)
            case T.Comment() | T.Break():
                pass
            case T.Scope(comment, body):
                outer, self.where = self.where, comment or self.where
                self.block(body)
                self.where = outer
            case _:
                assert_never(s)

    def shared_view(self, name: str, elem_bytes: int, dims: tuple[int, ...], offset: int) -> None:
        size = elem_bytes
        for d in dims:
            size *= d
        if offset < 0 or offset + size > self.kernel.dynamic_smem:
            raise self.fail(
                f"shared view '{name}' ({size} bytes at offset {offset}) is outside the kernel's "
                f"{self.kernel.dynamic_smem} bytes of dynamic shared memory"
            )
        self.declare(name, _Name(dims))

    def assign_target(self, target: T.Subscript | T.Sym | T.VecRef) -> None:
        name = target.name if isinstance(target, T.Sym) else _array(target)
        if self.lookup(name).const:
            raise self.fail(f"assignment to const '{name}'")
        self.expr(target)

    def loop(self, var: T.Sym, start: tir.Expr, stop: tir.Expr, step: int, body: tuple[T.Stmt, ...]) -> None:
        for bound in (start, stop):
            self.expr(bound)
            if not bound.dtype.is_int:
                raise self.fail(f"loop '{var.name}' has a bound of type {bound.dtype.tile_name}")
        if step <= 0 or not var.dtype.is_int:
            raise self.fail(f"loop '{var.name}' needs an int counter and a positive step")
        self.scopes.append({var.name: _Name(())})
        self.block(body)
        self.scopes.pop()

    def barrier(self, kind: T.BarrierKind, args: tuple[T.Expr, ...]) -> None:
        if kind not in get_args(T.BarrierKind):
            raise self.fail(f"unknown barrier kind '{kind}'")
        template = self.spelling.barriers.get(kind)
        if template is None:
            raise self.fail(f"barrier kind '{kind}' is not spelled for this target")
        arity = len(set(_PLACEHOLDER.findall(template)))
        if template and len(args) != arity:  # "": nothing to do on this target, whatever the arguments
            raise self.fail(f"barrier '{kind}' takes {arity} arguments, not {len(args)}")
        for a in args:
            self.expr(a)

    # ------------------------------------------------------------ expressions

    def expr(self, e: Expr) -> None:
        match e:
            case tir.IntImm() | tir.FloatImm() | tir.BoolImm() | T.Builtin():
                pass
            case tir.Var(name) | T.Sym(name):
                self.lookup(name)
            case tir.BinOp(_, a, b):
                self.expr(a)
                self.expr(b)
            case tir.UnaryOp(_, a) | tir.Cast(a):
                self.expr(a)
            case tir.Select(c, a, b):
                for x in (c, a, b):
                    self.expr(x)
            case tir.Call(_, args):
                for x in args:
                    self.expr(x)
            case tir.Load(buf):
                raise self.fail(f"Tile IR load of '{buf.name}' left in the Thread IR")
            case T.Subscript():
                self.subscript(e)
            case T.Intrin(name, args):
                self.intrinsic(name, args)
            case T.VecRef(target) | T.AddressOf(target):
                self.subscript(target)
            case _:
                assert_never(e)

    def subscript(self, s: T.Subscript) -> None:
        """`array[i]...`: one index per dimension, constant indices inside the extent."""
        info = self.lookup(s.array)
        for i in s.indices:
            self.expr(i)
        if info.dims is None:
            if len(s.indices) != 1:
                raise self.fail(f"{len(s.indices)} indices into pointer '{s.array}'")
            return
        if len(s.indices) != len(info.dims):
            raise self.fail(f"{len(s.indices)} indices into '{s.array}' (declared with {len(info.dims)})")
        for i, d in zip(s.indices, info.dims):
            if isinstance(i, tir.IntImm) and not 0 <= i.value < d:
                raise self.fail(f"constant index {i.value} outside '{s.array}' (extent {d})")

    def intrinsic(self, name: str, args: tuple[T.Expr | str, ...]) -> None:
        helper = _helper_defining(self.spelling, name)
        if helper is not None and helper not in self.kernel.helpers:
            raise self.fail(f"'{name}' is defined by helper '{helper}', which the kernel does not list")
        if helper is None and name not in _spelled_calls(self.spelling) and not name.startswith(tir.EXTERN):
            raise self.fail(f"unknown intrinsic '{name}'")
        for a in args:
            if not isinstance(a, str):
                self.expr(a)
            elif not _STRING_LITERAL.fullmatch(a):  # printf's format: the one C text left
                raise self.fail(f"argument {a} of '{name}' is C text, not a string literal")


def _array(target: T.Subscript | T.VecRef) -> str:
    return target.array if isinstance(target, T.Subscript) else target.target.array


@functools.cache
def _helper_functions(spelling: Spelling) -> dict[str, str]:
    """Function name -> the inline helper whose text defines it."""
    return {fn: helper for helper, text in spelling.helpers.items() for fn in _defined(text)}


def _defined(text: str) -> list[str]:
    """The functions a helper's text defines (`__device__ ... name(`)."""
    heads = [_CALLED.search(line) for line in text.split("\n") if line.startswith("__device__")]
    return [m.group(1) for m in heads if m]


def _helper_defining(spelling: Spelling, name: str) -> str | None:
    """The helper defining function `name` (a template's call `f<1, 0>` names `f`)."""
    return _helper_functions(spelling).get(name.split("<", 1)[0])


@functools.cache
def _spelled_calls(spelling: Spelling) -> frozenset[str]:
    """The neutral intrinsic names and every function the record's templates call
    (the functions of barrier statements and intrinsics: lowering still writes some by name)."""
    templates = (*spelling.intrinsics.values(), *spelling.barriers.values())
    return frozenset(spelling.intrinsics) | {m.group(1) for t in templates for m in _CALLED.finditer(t)}


def verify_kernel(k: T.Kernel, target: Target) -> None:
    """Raises VerifyError on the first broken invariant of `k`."""
    checker = _Checker(k, target.spelling)
    params = {p.name: _Name(None if p.pointer else (), const=not p.pointer) for p in k.params}
    checker.scopes.append(params)
    for g in k.grid:
        checker.expr(g)
    checker.block(k.body)
    _check_sharing(checker, k.body)
    checker.block(k.host_prologue)


def _check_sharing(checker: _Checker, body: tuple[T.Stmt, ...]) -> None:
    """Views sharing bytes hold tiles whose lifetimes never meet (shared_plan.py)."""
    views = [s for s in body if isinstance(s, T.SharedView)]
    for i, v in enumerate(views):
        for w in views[:i]:
            if overlap(v, w) and not disjoint(v.live, w.live):
                raise checker.fail(f"shared views '{w.name}' and '{v.name}' share bytes while both are live")
