"""Masks decided once per tile: a Parallel loop that selects on a comparison of its indices gets
a copy for each tile where the comparison is the same at every index, chosen by one uniform test.

TileLang's programs mask every step (a key tile's scores start at 0 or -inf); most tiles are
wholly inside, and the per-element compare and select are work the softmax's issue slots pay for:

    for k in pipelined(0, 16, 1, stages=2):
      for i, j in parallel(128, 128):
        acc_s[i, j] = if_then_else(k * 128 + j >= seq_kv, -infinity(float32), 0.0)

becomes, with seq_kv a dimension (no tile provably passes it wholly: no copy for that side),

      if k * 128 + 127 < seq_kv:              # no index of this key tile reaches seq_kv
        for i, j in parallel(128, 128):
          acc_s[i, j] = 0.0
      else:
        for i, j in parallel(128, 128):
          acc_s[i, j] = if_then_else(k * 128 + j >= seq_kv, -infinity(float32), 0.0)

and with seq_kv = 2048 the test holds for every k of the loop, so only the first copy is left.

What is decided: a comparison (< <= > >=) of two signed 32/64-bit integer expressions linear in
the loop's indices (constant coefficients; `let`s of the body substituted) whose other terms are
the same in every thread (block indices, serial-loop variables, dimensions, scalars, lets of
those; no memory reads). Over the tile it ranges from its smallest to its largest value, which
gives the two tests. A test that provably always holds keeps its copy alone; one that provably
never holds gets none (`_proves`: the enclosing loops' bounds, the grid's extents, the enclosing
ifs' conditions, `min` in a bound, `x // d` bounds; memoized and depth-bounded; what it cannot
prove keeps its copy). Unsigned and narrower arithmetic (it wraps) and values read from memory
(an `alloc_var` changes) prove nothing. One comparison per loop, the first found; its other
comparisons stay per element. A loop that reads or writes global memory is left as written:
there the comparisons are bounds checks, which lowering reads to leave the accesses they guard
unchecked (a copy without them would check each access instead).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Literal

from tilec import tir, tir_walk
from tilec.dtypes import DType
from tilec.simplify import Linear, combine, from_linear, linear, scale, simplify, substitute
from tilec.uniformity import Varying, per_thread, thread_varying

Compare = Literal["<", "<=", ">", ">="]
_NEGATE: dict[Compare, Compare] = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclasses.dataclass(frozen=True, slots=True)
class _Scope:
    """What is known where a statement sits: each variable's candidate bounds (inclusive, as
    linear forms; any one of them holds), the values of the `let`s above it, the kernel's
    thread-varying names and the conditions of the ifs around it."""

    lower: Mapping[tir.Var, tuple[Linear, ...]]
    upper: Mapping[tir.Var, tuple[Linear, ...]]
    lets: Mapping[tir.Var, tir.Expr]
    varying: Varying  # names whose values differ between threads (uniformity.thread_varying)
    facts: tuple[Linear, ...] = ()  # forms >= 0 here: the conditions of the ifs around

    def knowing(self, cond: tir.Expr) -> _Scope:
        """The scope inside an `if cond` (its comparisons joined by `and`, each a fact)."""
        if isinstance(cond, tir.BinOp) and cond.op == "and":
            return self.knowing(cond.a).knowing(cond.b)
        fact = _fact(cond) if isinstance(cond, tir.BinOp) and _stable(cond) else None
        return self if fact is None else dataclasses.replace(self, facts=(*self.facts, fact))

    def bound(self, var: tir.Var, lower: tuple[Linear, ...], upper: tuple[Linear, ...]) -> _Scope:
        return dataclasses.replace(self, lower={**self.lower, var: lower}, upper={**self.upper, var: upper})


def decide_masks(kernel: tir.Kernel) -> tir.Kernel:
    scope = _Scope({}, {}, {}, thread_varying(kernel.body))
    for var, extent in zip(kernel.block_vars, kernel.grid, strict=True):
        scope = scope.bound(var, (({}, 0),), _minus_one(extent))
    body = _body(kernel.body, scope)
    return kernel if body is kernel.body else dataclasses.replace(kernel, body=body)


def _body(body: tuple[tir.Stmt, ...], scope: _Scope, positions_fixed: bool = False) -> tuple[tir.Stmt, ...]:
    """`body` with its masks decided; in the body of a loop whose `Pipelined(order=, stage=,
    group=)` schedule names statements by position, a mask that would go away stays as written."""
    out: list[tir.Stmt] = []
    for s in body:
        new = _stmt(s, scope)
        out.extend(new if len(new) == 1 or not positions_fixed else [s])
        if isinstance(s, tir.Let):
            scope = dataclasses.replace(scope, lets={**scope.lets, s.var: s.value})
    return body if len(out) == len(body) and all(a is b for a, b in zip(out, body)) else tuple(out)


def _stmt(s: tir.Stmt, scope: _Scope) -> list[tir.Stmt]:
    if isinstance(s, tir.Parallel):
        return _decide(s, scope)
    if isinstance(s, tir.For):
        lower: tuple[Linear, ...] = ()
        upper: tuple[Linear, ...] = ()
        if isinstance(s.step, tir.IntImm) and s.step.value > 0:  # start <= var <= stop - 1
            lower = _candidates(s.start, scope, "lower")
            upper = tuple(_shift(b, -1) for b in _candidates(s.stop, scope, "upper"))
        inner = _body(s.body, scope.bound(s.var, lower, upper), positions_fixed=s.schedule is not None)
        return [tir_walk.with_bodies(s, (inner,))]
    if isinstance(s, tir.If):
        then, orelse = _body(s.then, scope.knowing(s.cond)), _body(s.orelse, scope.knowing(_not(s.cond)))
        return [tir_walk.with_bodies(s, (then, orelse))]
    new = tuple(_body(b, scope) for b in tir_walk.bodies(s))
    return [tir_walk.with_bodies(s, new)]


def _not(cond: tir.Expr) -> tir.Expr:
    if isinstance(cond, tir.BinOp) and cond.op in _NEGATE:
        return _negated(cond)
    return tir.UnaryOp("not", cond, cond.dtype)


# ---------------------------------------------------------------- one Parallel loop


def _decide(p: tir.Parallel, scope: _Scope) -> list[tir.Stmt]:
    """`p` versioned by its first decidable comparison (nothing where a copy that always runs
    does nothing: a mask that keeps every element of every tile the loop sees)."""
    if _touches_global(p):
        return [p]  # its condition is what lowering proves those accesses in bounds by
    found = next(_decidable(p, scope), None)
    if found is None:
        return [p]
    cond, all_true, all_false = found
    versions = []
    for test, value in ((all_true, True), (all_false, False)):
        if _proves(test, scope):
            folded = _folded(p, cond, value)
            return [folded] if folded.body else []
        if not _proves(_negated(test), scope):
            versions.append((test, value))
    out: tir.Stmt = p
    for test, value in reversed(versions):
        folded = _folded(p, cond, value)
        if folded.body:
            out = tir.If(test, (folded,), (out,), p.span)
        else:  # nothing to do on those tiles
            out = tir.If(_negated(test), (out,), (), p.span)
    return [out]


def _touches_global(p: tir.Parallel) -> bool:
    return any(b.scope == "global" for b in tir_walk.buffers(p))


def _decidable(p: tir.Parallel, scope: _Scope) -> Iterator[tuple[tir.BinOp, tir.BinOp, tir.BinOp]]:
    """Each comparison of `p`'s body over its indices, with the tests that it holds at every
    index of the tile and at none."""
    lets: dict[tir.Var, tir.Expr] = {}
    for s in tir_walk.stmts(p.body):
        exprs = tir_walk.stmt_exprs(s)
        for e in exprs:
            for node in tir_walk.subexprs(e):
                if isinstance(node, tir.BinOp) and node.op in _NEGATE:
                    tests = _tests(node, p, lets, scope)
                    if tests is not None:
                        yield node, *tests
        if isinstance(s, tir.Let) and _exact(s.var):
            lets[s.var] = substitute(s.value, lets)


def _tests(
    cond: tir.BinOp, p: tir.Parallel, lets: dict[tir.Var, tir.Expr], scope: _Scope
) -> tuple[tir.BinOp, tir.BinOp] | None:
    if not _exact(cond):
        return None
    a, b = linear(substitute(cond.a, lets)), linear(substitute(cond.b, lets))
    if a is None or b is None:
        return None
    extents = dict(zip(p.vars, p.extents, strict=True))
    if not (_indexed(a, extents) or _indexed(b, extents)):
        return None
    if not all(atom in extents or _uniform(atom, scope) for lin in (a, b) for atom in lin[0]):
        return None
    op: Compare = cond.op  # type: ignore[assignment]
    lo_a, hi_a, lo_b, hi_b = _lo(a, extents), _hi(a, extents), _lo(b, extents), _hi(b, extents)
    # a op b everywhere: the worst pair of ends holds it; nowhere: the best pair fails it
    if op in ("<", "<="):
        return _compare(op, hi_a, lo_b, cond), _compare(_NEGATE[op], lo_a, hi_b, cond)
    return _compare(op, lo_a, hi_b, cond), _compare(_NEGATE[op], hi_a, lo_b, cond)


def _indexed(lin: Linear, extents: Mapping[tir.Var, int]) -> bool:
    return any(atom in extents for atom in lin[0])


def _uniform(e: tir.Expr, scope: _Scope) -> bool:
    """Whether `e` is the same in every thread and reads no memory (the test before the loop and
    the comparison in it must see the same values); no device function of the program's."""
    if tir_walk.loads(e) or per_thread(e, scope.varying):
        return False
    return not any(isinstance(x, tir.Call) and x.func.startswith(tir.EXTERN) for x in tir_walk.subexprs(e))


def _lo(lin: Linear, extents: Mapping[tir.Var, int]) -> tir.Expr:
    return _end(lin, extents, greatest=False)


def _hi(lin: Linear, extents: Mapping[tir.Var, int]) -> tir.Expr:
    return _end(lin, extents, greatest=True)


def _end(lin: Linear, extents: Mapping[tir.Var, int], greatest: bool) -> tir.Expr:
    """The linear form's least or greatest value over the tile, indices put at their ends."""
    terms, c = lin
    rest = {atom: coef for atom, coef in terms.items() if atom not in extents}
    for atom, coef in terms.items():
        if isinstance(atom, tir.Var) and atom in extents:
            last = coef * (extents[atom] - 1)
            c += max(0, last) if greatest else min(0, last)
    return from_linear((rest, c))


def _compare(op: Compare, a: tir.Expr, b: tir.Expr, like: tir.BinOp) -> tir.BinOp:
    return tir.BinOp(op, a, b, like.dtype, like.span)


def _negated(test: tir.BinOp) -> tir.BinOp:
    return dataclasses.replace(test, op=_NEGATE[test.op])  # type: ignore[index]


def _folded(p: tir.Parallel, cond: tir.BinOp, value: bool) -> tir.Parallel:
    """`p` with `cond` replaced by `value` and folded: selects and ifs on it take their branch,
    and the body's lets nothing reads any more go."""

    def fold(e: tir.Expr) -> tir.Expr:
        return simplify(_replaced(e, cond, tir.BoolImm(value)))

    body = tir_walk.map_stmts(p.body, lambda s: tir_walk.map_stmt_exprs(s, fold))
    body = tuple(s for s in _taken(body) if not _self_store(s))
    return dataclasses.replace(p, body=_live(body))


def _self_store(s: tir.Stmt) -> bool:
    """`x[i, j] = x[i, j]`: what a mask that keeps its element folds to."""
    return isinstance(s, tir.Store) and s.value == tir.Load(s.buffer, s.indices)


def _replaced(e: tir.Expr, old: tir.Expr, new: tir.Expr) -> tir.Expr:
    """`e` with every occurrence of `old` (structurally equal) replaced by `new`."""
    if e == old:
        return new
    match e:
        case tir.BinOp(op, a, b, dtype):
            return tir.BinOp(op, _replaced(a, old, new), _replaced(b, old, new), dtype, e.span)
        case tir.UnaryOp(op, a, dtype):
            return tir.UnaryOp(op, _replaced(a, old, new), dtype, e.span)
        case tir.Select(c, a, b, dtype):
            parts = (_replaced(c, old, new), _replaced(a, old, new), _replaced(b, old, new))
            return tir.Select(*parts, dtype, e.span)
        case tir.Cast(v, dtype):
            return tir.Cast(_replaced(v, old, new), dtype, e.span)
        case tir.Call(f, args, dtype):
            return tir.Call(f, tuple(_replaced(x, old, new) for x in args), dtype, e.span)
        case tir.Load(buf, idx):
            return tir.Load(buf, tuple(_replaced(x, old, new) for x in idx), e.span)
        case _:
            return e


def _taken(body: tuple[tir.Stmt, ...]) -> tuple[tir.Stmt, ...]:
    """Ifs whose condition folded to a constant replaced by the branch taken."""
    out: list[tir.Stmt] = []
    for s in body:
        if isinstance(s, tir.If) and isinstance(s.cond, tir.BoolImm):
            out.extend(_taken(s.then if s.cond.value else s.orelse))
        else:
            out.append(tir_walk.with_bodies(s, tuple(_taken(b) for b in tir_walk.bodies(s))))
    return tuple(out)


def _live(body: tuple[tir.Stmt, ...]) -> tuple[tir.Stmt, ...]:
    """`body` without the lets that nothing after them reads."""
    out: list[tir.Stmt] = []
    read: set[tir.Var] = set()
    for s in reversed(body):
        if isinstance(s, tir.Let) and s.var not in read:
            continue
        out.append(s)
        for inner in tir_walk.stmts((s,)):
            for e in tir_walk.stmt_exprs(inner):
                read |= tir_walk.variables(e)
    return tuple(reversed(out))


# ---------------------------------------------------------------- proofs over the scope


def _proves(test: tir.BinOp, scope: _Scope) -> bool:
    """Whether `test` (a comparison of uniform integers) holds wherever the scope's bounds do."""
    fact = _fact(test)
    return fact is not None and _nonnegative(fact, scope, _DEPTH, {})


def _fact(test: tir.BinOp) -> Linear | None:
    """The form that is >= 0 exactly when integer comparison `test` holds, or None."""
    if test.op not in _NEGATE or not _exact(test):
        return None
    a, b = linear(test.a), linear(test.b)
    if a is None or b is None:
        return None
    diff = combine(b, a, -1) if test.op in ("<", "<=") else combine(a, b, -1)
    return (diff[0], diff[1] - 1) if test.op in ("<", ">") else diff


_DEPTH = 5  # substitutions and facts per proof: enough for a causal bound through a let of min
_FACTS = 4  # the innermost ifs' conditions a proof tries


def _nonnegative(lin: Linear, scope: _Scope, depth: int, seen: dict[tuple, bool]) -> bool:
    """lin >= 0 for every value of its variables within their bounds: each term in turn is put at
    the end that makes the form least (a bound may be another variable's form, `k <= bx`), or
    lin is an enclosing if's fact plus a form that is. `seen` memoizes the forms tried."""
    terms, c = lin
    if not terms:
        return c >= 0
    if depth == 0:
        return False
    key = (frozenset(terms.items()), c, depth)
    if key not in seen:
        seen[key] = False  # while it is tried: a form that comes back is not proven by itself
        seen[key] = _tried(lin, scope, depth, seen)
    return seen[key]


def _tried(lin: Linear, scope: _Scope, depth: int, seen: dict[tuple, bool]) -> bool:
    """The facts are matched to the form in lowest terms; the bounds go into it as it is (a
    `x // 128` bound needs the term's coefficient a multiple of 128)."""
    terms, c = lin
    tight = _tight(lin)
    facts = scope.facts[-_FACTS:]
    if any(_nonnegative(combine(tight, _tight(fact), -1), scope, depth - 1, seen) for fact in facts):
        return True  # lin = fact + something >= 0
    for atom, coef in terms.items():
        rest = ({a: k for a, k in terms.items() if a is not atom}, c)
        for end, k in _scaled_ends(atom, coef, scope, depth, seen):
            if _nonnegative(combine(rest, scale(end, k), 1), scope, depth - 1, seen):
                return True
    return False


def _tight(lin: Linear) -> Linear:
    """The same set of integer solutions of lin >= 0, its terms divided by their gcd (and the
    constant rounded down): 64 k + 63 >= 0 is k >= 0."""
    terms, c = lin
    g = math.gcd(*terms.values()) if terms else 0
    if g <= 1:
        return lin
    return {atom: coef // g for atom, coef in terms.items()}, c // g


def _scaled_ends(
    atom: tir.Expr, coef: int, scope: _Scope, depth: int, seen: dict[tuple, bool]
) -> Iterator[tuple[Linear, int]]:
    """Forms f with coef * atom >= scale * f: the atom's bounds on the side that makes the term
    least; for `x // d` with coef a multiple of d, d * (x // d) >= x - (d - 1) (C's `//` rounds
    toward zero: true for every x) and d * (x // d) <= x (only for x >= 0, which is proven first)."""
    match atom:
        case tir.BinOp("//", x, tir.IntImm(d)) if d > 0 and coef % d == 0 and (lin := linear(x)) is not None:
            if coef > 0:
                yield _shift(lin, -(d - 1)), coef // d
            elif _nonnegative(lin, scope, depth - 1, seen):
                yield lin, coef // d
        case _:
            for end in _ends(atom, scope, "lower" if coef > 0 else "upper"):
                yield end, coef


def _ends(atom: tir.Expr, scope: _Scope, side: Literal["lower", "upper"]) -> tuple[Linear, ...]:
    if isinstance(atom, tir.Var) and atom in scope.lets:
        return _candidates(scope.lets[atom], scope, side) if _exact(atom) else ()
    if isinstance(atom, tir.Var):
        known = (scope.lower if side == "lower" else scope.upper).get(atom)
        if known is not None:
            return known
        return (({}, 0),) if side == "lower" and atom.kind in ("dim", "block") else ()
    return _candidates(atom, scope, side) if isinstance(atom, tir.Call) else ()


def _candidates(e: tir.Expr, scope: _Scope, side: Literal["lower", "upper"]) -> tuple[Linear, ...]:
    """Linear forms that bound `e` from one side: itself when linear, each argument of a `min`
    from above (of a `max` from below), a let's value."""
    e = simplify(e)
    if not (_stable(e) and _exact(e)):
        return ()
    pick = "min" if side == "upper" else "max"
    if isinstance(e, tir.Call) and e.func == pick:
        return tuple(c for arg in e.args for c in _candidates(arg, scope, side))
    if isinstance(e, tir.Var) and e in scope.lets:
        return _candidates(scope.lets[e], scope, side)
    lin = linear(e)
    return () if lin is None or (isinstance(e, tir.Call) and e.func in ("min", "max")) else (lin,)


def _exact(e: tir.Expr) -> bool:
    """Whether `e`'s integer arithmetic is the integers' (as the proofs and tests reason): signed
    and 32 bits or wider throughout. Unsigned values wrap below zero (`u - 1`), a narrower let
    wraps when stored (`t: int8 = s + 100`)."""
    for node in tir_walk.subexprs(e):
        dtype = getattr(node, "dtype", None)
        if dtype is not None and dtype.is_int and dtype not in (DType.int32, DType.int64):
            return False
    return True


def _stable(e: tir.Expr) -> bool:
    """Whether `e` reads no memory: a variable (`alloc_var`) or buffer may change after the
    statement a fact or bound comes from, a let's or a loop variable's value cannot."""
    return not tir_walk.loads(e)


def _shift(lin: Linear, by: int) -> Linear:
    return lin[0], lin[1] + by


def _minus_one(extent: tir.Expr) -> tuple[Linear, ...]:
    lin = linear(extent)
    return () if lin is None else (_shift(lin, -1),)
