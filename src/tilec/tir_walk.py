"""Walking the Tile IR in one place, so that passes don't each re-implement the recursion.

Expressions (shared with Thread IR): every sub-expression, pre-order.

    [type(x).__name__ for x in subexprs(A[i + 1] * 2.0)]
      -> ['BinOp', 'Load', 'BinOp', 'Var', 'IntImm', 'FloatImm']

Statements: `bodies(s)` is the one exhaustive match over `tir.Stmt` (a new
statement kind is a type error until it says which statement lists it holds);
on it stand `stmts` (every statement, pre-order, into the bodies of For,
While, Parallel and If), `blocks` (every statement list) and `map_stmts` (a rewrite).

    [type(s).__name__ for s in stmts(kernel.body)]
      -> ['Alloc', 'For', 'Copy', 'Gemm', 'Parallel', 'Store']
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any, assert_never

from tilec import thread_ir as T
from tilec import tir

# Any expression node: Tile IR's, Thread IR's C forms, and a vector reference (the target or
# value of an Assign).
Node = T.Expr | T.VecRef


def children(e: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of an expression node (an intrinsic's C text arguments aside)."""
    return _CHILDREN[type(e)](e)  # a KeyError here is a node type missing from the table


def _none(e: Node) -> tuple[Node, ...]:
    return ()


# By exact type rather than a `match`: the walk is the compiler's innermost loop, and most nodes
# are leaves, which a `match` reaches only after trying every other class.
_CHILDREN: dict[type, Callable[[Any], tuple[Node, ...]]] = {
    tir.BinOp: lambda e: (e.a, e.b),
    tir.UnaryOp: lambda e: (e.a,),
    tir.Cast: lambda e: (e.value,),
    tir.Select: lambda e: (e.cond, e.a, e.b),
    tir.Call: lambda e: e.args,
    T.Intrin: lambda e: tuple(x for x in e.args if not isinstance(x, str)),
    tir.Load: lambda e: e.indices,
    T.Subscript: lambda e: e.indices,
    T.AddressOf: lambda e: (e.target,),
    T.VecRef: lambda e: (e.target,),
    **dict.fromkeys((tir.IntImm, tir.FloatImm, tir.BoolImm, tir.Var, T.Sym, T.Builtin), _none),
}


def subexprs(e: Node) -> Iterator[Node]:
    """`e` and everything below it, pre-order."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def loads(e: tir.Expr) -> list[tir.Load]:
    return [x for x in subexprs(e) if isinstance(x, tir.Load)]


def variables(e: Node) -> set[tir.Var]:
    return {x for x in subexprs(e) if isinstance(x, tir.Var)}


# ---------------------------------------------------------------- statements

Body = tuple[tir.Stmt, ...]


def bodies(s: tir.Stmt) -> tuple[Body, ...]:
    """The statement lists directly inside `s`: a loop's body, a branch's then and else."""
    match s:
        case tir.For() | tir.While() | tir.Parallel():
            return (s.body,)
        case tir.If():
            return (s.then, s.orelse)
        case (
            tir.Alloc()
            | tir.Break()
            | tir.SyncThreads()
            | tir.Let()
            | tir.Store()
            | tir.Copy()
            | tir.Gemm()
            | tir.Fill()
            | tir.Reduce()
            | tir.CumSum()
            | tir.Atomic()
            | tir.Print()
            | tir.DeviceAssert()
            | tir.UseSwizzle()
            | tir.AnnotateLayout()
        ):
            return ()
        case _:
            assert_never(s)


def regions(s: tir.Stmt) -> tuple[tir.Region, ...]:
    """The buffer regions `s` itself names (a tile op's operands), in field order."""
    match s:
        case tir.Copy(src, dst):
            return (src, dst)
        case tir.Gemm(a, b, c):
            return (a, b, c)
        case tir.Fill(dst=dst):
            return (dst,)
        case tir.Reduce(src=src, dst=dst) | tir.CumSum(src=src, dst=dst):
            return (src, dst)
        case tir.Atomic(dst, src):
            return (dst,) if src is None else (dst, src)
        case tir.Print(value=value):
            return (value,) if isinstance(value, tir.Region) else ()
        case (
            tir.Alloc()
            | tir.Let()
            | tir.Store()
            | tir.For()
            | tir.While()
            | tir.Break()
            | tir.SyncThreads()
            | tir.Parallel()
            | tir.If()
            | tir.DeviceAssert()
            | tir.UseSwizzle()
            | tir.AnnotateLayout()
        ):
            return ()
        case _:
            assert_never(s)


def stmt_exprs(s: tir.Stmt) -> tuple[tir.Expr, ...]:
    """The expressions `s` itself holds (not those of its bodies' statements): values,
    conditions, bounds, indices, an alloc_var's init, and its regions' starts and extents."""
    match s:
        case tir.Alloc(init=init):
            own: tuple[tir.Expr, ...] = () if init is None else (init,)
        case tir.Let(value=value) | tir.Fill(value=value):
            own = (value,)
        case tir.Store(_, indices, value):
            own = (*indices, value)
        case tir.Atomic(value=value):
            own = () if value is None else (value,)
        case tir.For(start=start, stop=stop, step=step):
            own = (start, stop, step)
        case tir.If(cond=cond) | tir.While(cond=cond) | tir.DeviceAssert(cond=cond):
            own = (cond,)
        case tir.Print(value=value):
            own = () if isinstance(value, tir.Region) else (value,)
        case tir.Copy(pad=pad, guard=guard):
            own = tuple(e for e in (pad, guard) if e is not None)
        case (
            tir.Gemm()
            | tir.Reduce()
            | tir.CumSum()
            | tir.Break()
            | tir.SyncThreads()
            | tir.Parallel()
            | tir.UseSwizzle()
            | tir.AnnotateLayout()
        ):
            own = ()
        case _:
            assert_never(s)
    return own + tuple(e for r in regions(s) for e in (*r.starts, *r.extents))


def map_stmt_exprs(s: tir.Stmt, fn: Callable[[tir.Expr], tir.Expr]) -> tir.Stmt:
    """`s` with `fn` applied to each expression of `stmt_exprs(s)` (its bodies as they are);
    `s` itself when `fn` returns every one unchanged."""

    def region(r: tir.Region) -> tir.Region:
        return dataclasses.replace(r, starts=tuple(map(fn, r.starts)), extents=tuple(map(fn, r.extents)))

    out: tir.Stmt
    match s:
        case tir.Alloc(init=init):
            out = s if init is None else dataclasses.replace(s, init=fn(init))
        case tir.Let(value=value):
            out = dataclasses.replace(s, value=fn(value))
        case tir.Fill(dst, value):
            out = dataclasses.replace(s, dst=region(dst), value=fn(value))
        case tir.Store(_, indices, value):
            out = dataclasses.replace(s, indices=tuple(map(fn, indices)), value=fn(value))
        case tir.Atomic(dst, src, value):
            out = dataclasses.replace(
                s,
                dst=region(dst),
                src=None if src is None else region(src),
                value=None if value is None else fn(value),
            )
        case tir.For(start=start, stop=stop, step=step):
            out = dataclasses.replace(s, start=fn(start), stop=fn(stop), step=fn(step))
        case tir.If(cond=cond) | tir.While(cond=cond) | tir.DeviceAssert(cond=cond):
            out = dataclasses.replace(s, cond=fn(cond))
        case tir.Print(value=value):
            out = dataclasses.replace(s, value=region(value) if isinstance(value, tir.Region) else fn(value))
        case tir.Copy(src, dst, pad=pad, guard=guard):
            out = dataclasses.replace(
                s,
                src=region(src),
                dst=region(dst),
                pad=None if pad is None else fn(pad),
                guard=None if guard is None else fn(guard),
            )
        case tir.Reduce(src=src, dst=dst) | tir.CumSum(src=src, dst=dst):
            out = dataclasses.replace(s, src=region(src), dst=region(dst))
        case tir.Gemm(a, b, c):
            out = dataclasses.replace(s, a=region(a), b=region(b), c=region(c))
        case tir.Break() | tir.SyncThreads() | tir.Parallel() | tir.UseSwizzle() | tir.AnnotateLayout():
            out = s
        case _:
            assert_never(s)
    same = all(x is y for x, y in zip(stmt_exprs(s), stmt_exprs(out), strict=True))
    return s if same else out


def written(s: tir.Stmt) -> tuple[tir.Buffer, ...]:
    """The buffers `s` itself writes (not its bodies' statements): a tile op's destination,
    a store's buffer, an alloc_var given its first value."""
    match s:
        case tir.Copy(dst=dst) | tir.Fill(dst=dst) | tir.Reduce(dst=dst) | tir.CumSum(dst=dst) | tir.Atomic(dst=dst):
            return (dst.buffer,)
        case tir.Gemm(c=c):
            return (c.buffer,)
        case tir.Store(buffer=b):
            return (b,)
        case tir.Alloc(buffer=b, init=init):
            return () if init is None else (b,)
        case (
            tir.Let()
            | tir.For()
            | tir.While()
            | tir.Break()
            | tir.SyncThreads()
            | tir.Parallel()
            | tir.If()
            | tir.Print()
            | tir.DeviceAssert()
            | tir.UseSwizzle()
            | tir.AnnotateLayout()
        ):
            return ()
        case _:
            assert_never(s)


def buffers(s: tir.Stmt) -> set[tir.Buffer]:
    """Every buffer `s` and the statements in its bodies read or write: the tile ops' operands,
    the buffers they write (`written`) and those their expressions load."""
    out: set[tir.Buffer] = set()
    for x in stmts((s,)):
        out |= {r.buffer for r in regions(x)} | set(written(x))
        out |= {ld.buffer for e in stmt_exprs(x) for ld in loads(e)}
    return out


def with_bodies(s: tir.Stmt, new: tuple[Body, ...]) -> tir.Stmt:
    """`s` with the statement lists `bodies(s)` replaced by `new` (`s` itself when all are the same)."""
    if all(a is b for a, b in zip(bodies(s), new, strict=True)):
        return s
    match s:
        case tir.For() | tir.While() | tir.Parallel():
            return dataclasses.replace(s, body=new[0])
        case tir.If():
            return dataclasses.replace(s, then=new[0], orelse=new[1])
        case _:  # bodies(s) is () and so is new: returned above
            raise AssertionError(f"{type(s).__name__} holds no statements")


def stmts(body: Body, into_parallel: bool = True) -> Iterator[tir.Stmt]:
    """Every statement of `body` and of the statement lists below it, pre-order; with
    `into_parallel=False`, not the per-element statements of Parallel bodies (tile level only)."""
    for s in body:
        yield s
        if into_parallel or not isinstance(s, tir.Parallel):
            for inner in bodies(s):
                yield from stmts(inner, into_parallel)


def blocks(body: Body) -> Iterator[Body]:
    """`body` and every statement list below it: loop bodies, then and else branches."""
    yield body
    for s in body:
        for inner in bodies(s):
            yield from blocks(inner)


def map_stmts(body: Body, fn: Callable[[tir.Stmt], tir.Stmt]) -> Body:
    """`body` with `fn` applied to every statement, top-down: `fn` sees each statement as it is
    in `body` (so a pass may look up what its analysis found about that very node), then the
    statement lists of what `fn` returns are mapped in turn. Unchanged parts are the same
    objects: mapping the identity returns `body` itself."""
    out = tuple(_map_one(s, fn) for s in body)
    return body if all(a is b for a, b in zip(body, out, strict=True)) else out


def _map_one(s: tir.Stmt, fn: Callable[[tir.Stmt], tir.Stmt]) -> tir.Stmt:
    top = fn(s)
    return with_bodies(top, tuple(map_stmts(inner, fn) for inner in bodies(top)))


def map_kernel(kernel: tir.Kernel, fn: Callable[[tir.Stmt], tir.Stmt]) -> tir.Kernel:
    """`kernel` with `map_stmts` applied to its body (`kernel` itself when nothing changed)."""
    body = map_stmts(kernel.body, fn)
    return kernel if body is kernel.body else dataclasses.replace(kernel, body=body)


# ---------------------------------------------------------------- generic walks (emit, lanes)


def node_fields(node: object) -> tuple[str, ...]:
    """The fields of `node` if it is an IR dataclass instance, none otherwise: what a generic
    walk (one that covers node kinds added later without a case) enters, looked up once per class."""
    # A class is hashable; mypy checks `type[object]` against object.__hash__ as if it were an instance.
    return () if isinstance(node, type) else _fields_of(type(node))  # type: ignore[arg-type]


@functools.cache
def _fields_of(cls: type) -> tuple[str, ...]:
    # init fields only: a node's cache (tir.BinOp._hash) is not part of what it says
    return tuple(f.name for f in dataclasses.fields(cls) if f.init) if dataclasses.is_dataclass(cls) else ()
