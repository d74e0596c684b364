"""tir_walk's statement traversal: every statement kind is visited, pre-order, into every body;
the rewriter rebuilds only what changes (mapping the identity returns the very same body).

That a statement kind missing from `bodies` is a type error is mypy's part (`make lint`):
drop `| tir.AnnotateLayout()` from its leaf case and mypy reports
`Argument 1 to "assert_never" has incompatible type "AnnotateLayout"; expected "Never"`."""

from __future__ import annotations

import dataclasses
import typing

from tilec import tir, tir_walk
from tilec.dtypes import DType

F32, I32, BOOL = DType.float32, DType.int32, DType.bool


def _region(buf: tir.Buffer) -> tir.Region:
    return tir.Region(buf, (tir.IntImm(0),), (tir.IntImm(4),))


def _body() -> tuple[tir.Stmt, ...]:
    """One statement of every kind, nested in a For, a Parallel, both branches of an If and a While."""
    g = tir.Buffer("G", (tir.IntImm(4),), F32, "global")
    s = tir.Buffer("S", (tir.IntImm(4),), F32, "shared")
    f = tir.Buffer("F", (tir.IntImm(4),), F32, "fragment")
    c = tir.Buffer("C", (tir.IntImm(4), tir.IntImm(4)), F32, "fragment")
    r = tir.Buffer("R", (tir.IntImm(4),), F32, "fragment")
    i, k, x = tir.Var("i", I32, "loop"), tir.Var("k", I32, "loop"), tir.Var("x", I32, "let")
    full_c = tir.Region(c, (tir.IntImm(0), tir.IntImm(0)), (tir.IntImm(4), tir.IntImm(4)))
    parallel = tir.Parallel((i,), (4,), (tir.Store(f, (i,), tir.FloatImm(1.0)),))
    branch = tir.If(
        tir.BoolImm(True),
        (tir.Print(tir.IntImm(1), "then"), parallel),
        (tir.DeviceAssert(tir.BoolImm(True), "else"),),
    )
    loop = tir.For(
        k,
        tir.IntImm(0),
        tir.IntImm(2),
        tir.IntImm(1),
        "serial",
        (
            tir.Copy(_region(g), _region(s)),
            tir.Gemm(full_c, full_c, full_c, False, False, "Square", False),
            tir.Reduce("sum", full_c, _region(r), 1, True),
            branch,
        ),
    )
    return (
        tir.UseSwizzle(8, "row"),
        tir.Alloc(s),
        tir.AnnotateLayout(s, "padded"),
        tir.Let(x, tir.IntImm(3)),
        tir.Fill(_region(f), tir.FloatImm(0.0)),
        loop,
        tir.CumSum(_region(f), _region(f), 0, False),
        tir.Atomic(_region(g), _region(f), None),
        tir.SyncThreads(),
        tir.While(tir.BoolImm(True), (tir.Break(),)),
    )


def _names(stmts: typing.Iterable[tir.Stmt]) -> list[str]:
    return [type(s).__name__ for s in stmts]


def test_every_statement_kind_is_visited_pre_order() -> None:
    visited = list(tir_walk.stmts(_body()))
    assert {type(s) for s in visited} == set(typing.get_args(tir.Stmt))
    assert _names(visited) == [
        "UseSwizzle",
        "Alloc",
        "AnnotateLayout",
        "Let",
        "Fill",
        "For",
        "Copy",
        "Gemm",
        "Reduce",
        "If",
        "Print",
        "Parallel",
        "Store",
        "DeviceAssert",
        "CumSum",
        "Atomic",
        "SyncThreads",
        "While",
        "Break",
    ]


def test_tile_level_walk_skips_parallel_bodies() -> None:
    visited = _names(tir_walk.stmts(_body(), into_parallel=False))
    assert "Parallel" in visited and "Store" not in visited
    assert len(visited) == len(list(tir_walk.stmts(_body()))) - 1


def test_blocks_are_every_statement_list() -> None:
    body = _body()
    loop = body[5]
    assert isinstance(loop, tir.For)
    branch = loop.body[3]
    assert isinstance(branch, tir.If)
    parallel = branch.then[1]
    assert isinstance(parallel, tir.Parallel)
    while_ = body[-1]
    assert isinstance(while_, tir.While)
    expected = [body, loop.body, branch.then, parallel.body, branch.orelse, while_.body]
    assert [list(b) for b in tir_walk.blocks(body)] == [list(b) for b in expected]
    assert all(a is b for a, b in zip(tir_walk.blocks(body), expected, strict=True))


def test_mapping_the_identity_returns_the_same_objects() -> None:
    body = _body()
    assert tir_walk.map_stmts(body, lambda s: s) is body
    kernel = tir.Kernel("k", (), (), (), (tir.IntImm(1),), (tir.Var("bx", I32, "block"),), 32, body)
    assert tir_walk.map_kernel(kernel, lambda s: s) is kernel


def test_a_rewrite_reaches_nested_statements_and_keeps_the_rest() -> None:
    body = _body()
    originals = {id(s) for s in tir_walk.stmts(body)}
    seen: list[int] = []

    def mark(s: tir.Stmt) -> tir.Stmt:
        seen.append(id(s))  # top-down: fn sees the statements of `body` themselves
        if isinstance(s, tir.Store):
            return dataclasses.replace(s, value=tir.FloatImm(2.0))
        return s

    out = tir_walk.map_stmts(body, mark)
    assert set(seen) <= originals and len(seen) == len(originals)
    stores = [s for s in tir_walk.stmts(out) if isinstance(s, tir.Store)]
    assert [s.value for s in stores] == [tir.FloatImm(2.0)]
    # the path to the store is rebuilt; every statement beside it is the same object
    assert out is not body and out[5] is not body[5]
    assert all(a is b for i, (a, b) in enumerate(zip(out, body, strict=True)) if i != 5)
    old_if, new_if = body[5].body[3], out[5].body[3]
    assert new_if.orelse is old_if.orelse and new_if.then[0] is old_if.then[0]


def test_with_bodies_replaces_each_statement_list() -> None:
    body = _body()
    branch = body[5].body[3]
    swapped = tir_walk.with_bodies(branch, (branch.orelse, branch.then))
    assert isinstance(swapped, tir.If)
    assert swapped.then is branch.orelse and swapped.orelse is branch.then and swapped.cond is branch.cond
    assert tir_walk.with_bodies(branch, tir_walk.bodies(branch)) is branch
    assert tir_walk.bodies(body[0]) == ()


# ---------------------------------------------------------------- a statement's own expressions


def _with_inits() -> tuple[tir.Stmt, ...]:
    """`_body()` plus the optional expressions it leaves out: an alloc_var's init, an element
    atomic_add's value, a printed expression and a region print."""
    v = tir.Buffer("v", (), F32, "var")
    g = tir.Buffer("G", (tir.IntImm(4),), F32, "global")
    element = tir.Region(g, (tir.IntImm(2),), (tir.IntImm(1),))
    s = tir.Buffer("S", (tir.IntImm(4),), F32, "shared")
    mask = tir.Load(tir.Buffer("Mask", (tir.IntImm(4),), BOOL, "global"), (tir.IntImm(3),))
    return (
        *_body(),
        tir.Alloc(v, init=tir.FloatImm(5.0)),
        tir.Atomic(element, None, tir.FloatImm(6.0)),
        tir.Print(_region(g), "tile"),
        tir.Copy(_region(g), _region(s), guard=mask),  # a producer taken from the top of an `if`
    )


def test_stmt_exprs_are_the_statements_own_expressions() -> None:
    by_kind = {type(s).__name__: s for s in tir_walk.stmts(_body())}
    loop, store, fill = by_kind["For"], by_kind["Store"], by_kind["Fill"]
    assert isinstance(loop, tir.For) and isinstance(store, tir.Store) and isinstance(fill, tir.Fill)
    assert tir_walk.stmt_exprs(loop) == (loop.start, loop.stop, loop.step)  # not its body's
    assert tir_walk.stmt_exprs(store) == (*store.indices, store.value)
    assert tir_walk.stmt_exprs(fill) == (fill.value, *fill.dst.starts, *fill.dst.extents)
    copy = by_kind["Copy"]
    assert isinstance(copy, tir.Copy)
    assert tir_walk.stmt_exprs(copy) == (*copy.src.starts, *copy.src.extents, *copy.dst.starts, *copy.dst.extents)
    assert tir_walk.stmt_exprs(by_kind["Parallel"]) == ()
    alloc_var, element_add, region_print = _with_inits()[-4:-1]
    assert tir_walk.stmt_exprs(alloc_var) == (tir.FloatImm(5.0),)  # an alloc_var's init
    assert tir_walk.stmt_exprs(element_add)[0] == tir.FloatImm(6.0)
    assert tir_walk.stmt_exprs(region_print) == (tir.IntImm(0), tir.IntImm(4))
    guarded = _with_inits()[-1]
    assert isinstance(guarded, tir.Copy) and guarded.guard is not None
    assert tir_walk.stmt_exprs(guarded)[0] == guarded.guard  # its guard, then its regions


def test_map_stmt_exprs_rewrites_every_expression_and_keeps_unchanged_statements() -> None:
    seven = tir.IntImm(7)

    def bump(e: tir.Expr) -> tir.Expr:
        return seven if isinstance(e, tir.IntImm) else tir.FloatImm(9.0) if isinstance(e, tir.FloatImm) else e

    for s in tir_walk.stmts(_with_inits()):
        assert tir_walk.map_stmt_exprs(s, lambda e: e) is s
        out = tir_walk.map_stmt_exprs(s, bump)
        assert type(out) is type(s) and tir_walk.bodies(out) == tir_walk.bodies(s)
        assert tir_walk.stmt_exprs(out) == tuple(bump(e) for e in tir_walk.stmt_exprs(s))
        assert (out is s) == all(bump(e) is e for e in tir_walk.stmt_exprs(s))


def test_written_is_each_statements_destination() -> None:
    written = {type(s).__name__: tir_walk.written(s) for s in tir_walk.stmts(_body())}
    assert [b.name for b in written["Copy"]] == ["S"] and [b.name for b in written["Gemm"]] == ["C"]
    assert [b.name for b in written["Store"]] == ["F"] and [b.name for b in written["Atomic"]] == ["G"]
    assert written["Alloc"] == () and written["For"] == () and written["Print"] == ()
    alloc_var = _with_inits()[-4]
    assert [b.name for b in tir_walk.written(alloc_var)] == ["v"]  # given its first value


def test_children_of_every_expression_kind() -> None:
    from tilec import thread_ir as T

    i, one = tir.Var("i", I32, "loop"), tir.IntImm(1)
    buf = tir.Buffer("S", (tir.IntImm(4),), F32, "shared")
    sub = T.Subscript("S", (i,), F32)
    nodes: dict[type, tuple[tir_walk.Node, tuple[tir_walk.Node, ...]]] = {
        tir.IntImm: (one, ()),
        tir.FloatImm: (tir.FloatImm(1.0), ()),
        tir.BoolImm: (tir.BoolImm(True), ()),
        tir.Var: (i, ()),
        tir.BinOp: (tir.BinOp("+", i, one, I32), (i, one)),
        tir.UnaryOp: (tir.UnaryOp("-", i, I32), (i,)),
        tir.Select: (tir.Select(tir.BoolImm(True), i, one, I32), (tir.BoolImm(True), i, one)),
        tir.Cast: (tir.Cast(i, F32), (i,)),
        tir.Call: (tir.Call("max", (i, one), I32), (i, one)),
        tir.Load: (tir.Load(buf, (i,)), (i,)),
        T.Sym: (T.Sym("tx", I32), ()),
        T.Subscript: (sub, (i,)),
        T.Intrin: (T.Intrin("f", ("text", i), I32), (i,)),  # C text is no sub-expression
        T.Builtin: (T.Builtin("thread_index"), ()),
        T.AddressOf: (T.AddressOf(sub), (sub,)),
        T.VecRef: (T.VecRef(sub, 16), (sub,)),
    }
    every_kind = set(typing.get_args(tir.Expr)) | {T.Sym, T.Subscript, T.Intrin, T.Builtin, T.AddressOf, T.VecRef}
    assert set(nodes) == every_kind
    for node, kids in nodes.values():
        assert tir_walk.children(node) == kids
    assert [type(x).__name__ for x in tir_walk.subexprs(T.AddressOf(sub))] == ["AddressOf", "Subscript", "Var"]


def test_every_expression_node_type_has_children() -> None:
    """`children` dispatches on the exact type (a table, for speed): the table must name every
    member of Tile IR's and Thread IR's expression unions, and the vector reference."""
    from tilec import thread_ir as T

    kinds = set(typing.get_args(T.Expr)) | {T.VecRef}  # T.Expr: tir.Expr's members and its own
    assert kinds <= set(tir_walk._CHILDREN), kinds - set(tir_walk._CHILDREN)
