"""Bounds verifier (`tilec build --verify`): every index of the Thread IR proven inside its buffer.

The expensive sibling of thread_verify.py (which checks cheap structural invariants after every
pass): this one runs once, on the finished kernel, and asks TVM's analyzer (arith.Prover) whether

    A_shared[stage][i_1 * 64 ^ i_1 % 8 * 8 ^ j_1]   0 <= stage < 3 and 0 <= (...) < 8192
    C_local[g0 * 32 + g1 * 4 + e1]                  0 <= (...) < 128
    A[(by * 128 + i_1) * K + stage * 64 + j_1]      under `by * 128 + i_1 < M && stage * 64 + j_1 < K`:
                                                    0 <= by * 128 + i_1 < M and 0 <= stage * 64 + j_1 < K

hold for every thread and every iteration. The walk binds the thread index to [0, threads), each
block index to [0, its grid extent) (the grid size to the grid; a persistent kernel's is only
>= 1), each loop counter to [start, stop), tensor dimensions to >= 0; substitutes every
`const` scalar by its value; and assumes each enclosing condition (an `if`'s, a `?:`'s, the left
side of an `&&`). A mutable integer with an initial value that some index or loop bound reads is
a counter (`filled += k_tiles`): each read some value >= 0, each update checked to keep it so; one
no index reads (a reduction's integer accumulator) is data. Anything else (a loaded value, an
intrinsic's result, a float) is an unknown of its type; an integer constant the same in every
thread of the block (`k_begin = bz * chunk`) a variable in the bounds the analyzer finds for it.
Division and remainder are C's, rounding toward zero, in the analyzer as in enumeration. Each conjunct of
`0 <= i && i < extent` is proven by one of: a condition in force stating it, enumeration, or the
analyzer (its rewriting, then symbolic bounds with Z3). Enumeration, which decides XOR swizzles
where the analyzer cannot, evaluates the conjunct at every point of its variables' domain
(constant ranges only, at most 2**20 points, keeping the points where the conditions over those
variables alone hold): a proof, since every point is checked. What none of them proves is a
failure ("could not be proven", with a point where it fails when enumeration found one), never a
pass.

Soundness: every variable ranges over a superset of its values at run time and every assumption
holds where it is assumed, so a proven index is in bounds on every path of every thread.
Taken as given, not proven: the block variables' ranges (the raster lowering writes), the
widths of intrinsics other than the vector copies (below); 32-bit overflow is not modelled.

Global tensors are flat pointers in C, so lowering records each access's per-dimension index and
extent (`Subscript.within`): the verifier proves the flat index equal to their row-major
flattening (for a tensor declared with strides, the sum of each index times its stride,
`Subscript.strides`) and each index inside its dimension, which implies the flat index inside
the tensor (for strides, inside the memory the launcher's caller describes by them).

Widths: a vector move (`VecRef`) covers all its lanes, `tilec_cp_async_N` both its N-byte
operands, and a vector atomic add (`tilec_red_add_f32x4`, `tilec_atomic_add_f16x2`) both its
N-element ones; any other intrinsic taking an address is checked at that element only (matrix
instructions' operands, register arrays and tiles whose extents lowering sizes by construction).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, assert_never

from tilec import thread_ir as T
from tilec import tir
from tilec.diagnostics import CompileError, Diagnostic
from tilec.dtypes import DType
from tilec.lower.cexpr import flatten, strided
from tilec.source import NO_SPAN, Span
from tilec.tir_print import expr_text

if TYPE_CHECKING:
    from tilec.arith import Prover

I32, BOOL = DType.int32, DType.bool
INT_MAX = 2**31 - 1
MAX_POINTS = 1 << 20  # the most points one index is enumerated at
MAX_FAILURES = 20  # reported per kernel (the rest are the same bug, most likely)
_CP_ASYNC = re.compile(r"tilec_cp_async_(\d+)$")
_VECTOR_ADD = re.compile(r"tilec_(?:red|atomic)_add_(?:f32|f16|bf16)x(\d+)$")  # the backends' atomic_add_vector

Checked: TypeAlias = T.Expr | T.VecRef


@dataclass(frozen=True, slots=True)
class _Counter:
    """A mutable integer, non-negative at every read: its initial value and every update
    (`x = v`, `x += v` with v >= 0) are checked to keep it so (one induction, overflow aside)."""


COUNTER = _Counter()


@dataclass(frozen=True, slots=True)
class _Array:
    dims: tuple[int, ...] | None  # None: a global tensor (a pointer)
    dtype: DType


@dataclass(slots=True)
class _Walker:
    """One kernel's walk: names in scope, the conditions in force, the failures found."""

    kernel: T.Kernel
    prover: Prover
    # a name's value, array, counter, or None (a mutable scalar the verifier does not follow)
    scopes: list[dict[str, tir.Expr | _Array | _Counter | None]] = field(default_factory=list)
    ranges: dict[tir.Var, tuple[int, int]] = field(default_factory=dict)  # constant [lo, hi) per variable
    assumed: list[tir.Expr] = field(default_factory=list)
    counters: dict[str, tir.Var] = field(default_factory=dict)  # counter_read's variable per counter and epoch
    indexing: frozenset[str] = frozenset()  # the names some index or loop bound reads (_index_names)
    epochs: dict[str, int] = field(default_factory=dict)  # assignments so far, per alloc_var
    scalars: dict[tuple[str, int], tir.Var] = field(default_factory=dict)  # scalar_read's variables
    read_only: frozenset[str] = frozenset()  # the tensors the kernel only reads (const parameters)
    elements: dict[tuple[str, tuple[tir.Expr, ...]], tir.Var] = field(default_factory=dict)  # element_read's
    span: Span = NO_SPAN
    failures: list[Diagnostic] = field(default_factory=list)
    proven: set[tuple[tir.Expr, tuple[tir.Expr, ...]]] = field(default_factory=set)

    # ------------------------------------------------------------ names and facts

    def lookup(self, name: str) -> tir.Expr | _Array | _Counter | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return self.unknown(I32)

    def unknown(self, dtype: DType) -> tir.Var:
        """A fresh variable standing for a value the verifier does not follow."""
        return tir.Var("unknown", _kind(dtype) if _tracked(dtype) else DType.float32, "scalar")

    def bind(self, var: tir.Var, lo: int, hi: int) -> None:
        if var in self.ranges:
            return  # a dimension that is also the grid's extent: bound once, as a dimension
        self.ranges[var] = (lo, hi)
        self.prover.bind(var, lo, hi)

    @contextmanager
    def assume(self, cond: tir.Expr) -> Iterator[None]:
        if isinstance(cond, tir.BoolImm) and cond.value:
            yield
            return
        self.assumed.append(cond)
        with self.prover.assume(cond):
            yield
        self.assumed.pop()

    # ------------------------------------------------------------ statements

    def block(self, stmts: tuple[T.Stmt, ...]) -> None:
        self.scopes.append({})
        self.run(stmts)
        self.scopes.pop()

    def run(self, stmts: tuple[T.Stmt, ...]) -> None:
        """`stmts` in order; after a block variable's declaration, under its range."""
        for n, s in enumerate(stmts):
            if isinstance(s, T.Decl) and s.name in self.kernel.block_vars:
                with self.assume(self.block_var(s.name)):
                    self.run(stmts[n + 1 :])
                return
            self.stmt(s)

    def stmt(self, s: T.Stmt) -> None:
        match s:
            case T.Decl(name, dtype, dims, init, _, const):
                if init is not None:
                    self.check(init)
                self.scopes[-1][name] = self.declared(name, dtype, dims, init, const)
            case T.SharedView(name, dtype, dims):
                self.scopes[-1][name] = _Array(dims, dtype)
            case T.Assign(target, value, op):
                self.check(target)
                self.check(value)
                if isinstance(target, T.Sym) and self.lookup(target.name) is COUNTER:
                    self.update(target.name, value, op)
                if isinstance(target, T.Subscript) and not target.indices:
                    self.epochs[target.array] = self.epochs.get(target.array, 0) + 1
            case T.Loop(var, start, stop, _, _, body):  # every step stays in [start, stop)
                self.loop(var, start, stop, body)
            case T.IfThen(cond, then, orelse):
                self.branches(cond, then, orelse)
            case T.While(cond, body):  # the body runs where the condition holds
                self.new_epochs(body)
                self.check(cond)
                with self.assume(self.value(cond)):
                    self.block(body)
            case T.Break():
                pass
            case T.Call(call):
                self.check(call)
            case T.Barrier(_, args):
                for a in args:
                    self.check(a)
            case T.Comment():
                pass
            case T.Scope(_, body, span):
                outer, self.span = self.span, span if span != NO_SPAN else self.span
                self.block(body)
                self.span = outer
            case _:
                assert_never(s)

    def declared(self, name: str, dtype: DType, dims: tuple[int, ...], init: tir.Expr | None, const: bool) -> Any:
        """What a name stands for: an array, a constant's value, or None (a mutable scalar)."""
        if dims:
            return _Array(dims, dtype)
        if const and init is not None:
            return self.constant(name, dtype, self.value(init))
        if dtype.is_int and init is not None and name in self.indexing:
            self.update(name, init, "=")
            return COUNTER
        return None

    def update(self, name: str, value: T.Expr | T.VecRef, op: str) -> None:
        """An assignment to counter `name`: `=` or `+=` of a value at least 0."""
        v = self.value(value) if not isinstance(value, T.VecRef) else self.unknown(I32)
        if op not in ("=", "+=") or not self.proves(_op("<=", tir.IntImm(0), v, BOOL)):
            self.fail(f"counter '{name}' may become negative ({name} {op} {expr_text(v)})")
        self.epochs[name] = self.epochs.get(name, 0) + 1  # later reads: a new value, no old facts

    def constant(self, name: str, dtype: DType, v: tir.Expr) -> tir.Expr:
        """A constant's value as used: substituted, except an integer the same in every thread
        of the block (`k_begin = bz * chunk`), which becomes a variable in the bounds the
        analyzer finds for it, so that guards written with it stay linear."""
        uniform = all(x.kind in ("dim", "block", "let") for x in _variables(v))
        if not dtype.is_int or not uniform or isinstance(v, tir.Var | tir.IntImm):
            return v
        var = tir.Var(name, I32, "let")
        lo, hi = self.prover.bounds(v)
        if -INT_MAX <= lo <= hi < INT_MAX:
            self.bind(var, lo, hi + 1)
        return var

    def block_var(self, name: str) -> tir.Expr:
        """A block variable: in [0, its grid extent) whatever raster computed it (the kernel's
        `block_vars`); that fact, to assume for the rest of its block."""
        var = tir.Var(name, I32, "block")
        self.bind(var, 0, INT_MAX)
        self.scopes[-1][name] = var
        return _op("<", var, self.value(self.kernel.grid[self.kernel.block_vars.index(name)]), BOOL)

    def new_epochs(self, body: tuple[T.Stmt, ...]) -> None:
        """Before a loop: the alloc_vars and counters its body assigns hold a value of some
        iteration, not the one they held before the loop (scalar_read and counter_read then give
        new variables)."""
        for s in _assigned_vars(body):
            self.epochs[s] = self.epochs.get(s, 0) + 1

    def scalar_read(self, name: str) -> tir.Var:
        """An alloc_var's value since its last assignment: one unconstrained variable per
        assignment (epoch), so two reads between assignments are the same value."""
        key = (name, self.epochs.get(name, 0))
        if key not in self.scalars:
            self.scalars[key] = tir.Var(f"{name}_{key[1]}", I32, "scalar")
        return self.scalars[key]

    def loop(self, var: T.Sym, start: tir.Expr, stop: tir.Expr, body: tuple[T.Stmt, ...]) -> None:
        self.new_epochs(body)
        self.check(start)
        self.check(stop)
        lo, hi = self.value(start), self.value(stop)
        counter = tir.Var(var.name, I32, "loop")
        if isinstance(lo, tir.IntImm) and isinstance(hi, tir.IntImm):
            if lo.value >= hi.value:
                return  # never runs
            self.bind(counter, lo.value, hi.value)
        self.scopes.append({var.name: counter})
        with self.assume(_op("and", _op("<=", lo, counter, BOOL), _op("<", counter, hi, BOOL), BOOL)):
            self.block(body)
        self.scopes.pop()

    def branches(self, cond: tir.Expr, then: tuple[T.Stmt, ...], orelse: tuple[T.Stmt, ...]) -> None:
        self.check(cond)
        c = self.value(cond)
        with self.assume(c):
            self.block(then)
        with self.assume(_not(c)):
            self.block(orelse)

    # ------------------------------------------------------------ expressions: what is accessed

    def check(self, e: Checked) -> None:
        """Every access in `e` inside its buffer, under the conditions that guard it."""
        match e:
            case tir.BinOp("and" | "or" as op, a, b):
                self.check(a)
                left = self.value(a)
                with self.assume(left if op == "and" else _not(left)):
                    self.check(b)
            case tir.Select(c, a, b):
                self.check(c)
                cond = self.value(c)
                with self.assume(cond):
                    self.check(a)
                with self.assume(_not(cond)):
                    self.check(b)
            case tir.BinOp(_, a, b):
                self.check(a)
                self.check(b)
            case tir.UnaryOp(_, a) | tir.Cast(a):
                self.check(a)
            case tir.Call(_, args):
                for x in args:
                    self.check(x)
            case T.Intrin(name, args):
                self.intrinsic(name, args)
            case T.Subscript():
                self.access(e, 1)
            case T.VecRef(target, nbytes):
                self.access(target, max(1, nbytes // target.dtype.bytes))
            case T.AddressOf(target):
                self.access(target, 1)
            case tir.IntImm() | tir.FloatImm() | tir.BoolImm() | tir.Var() | T.Sym() | T.Builtin() | tir.Load():
                pass
            case _:
                assert_never(e)

    def intrinsic(self, name: str, args: tuple[T.Expr | str, ...]) -> None:
        nbytes, lanes = _CP_ASYNC.match(name), _VECTOR_ADD.match(name)
        for a in args:
            if isinstance(a, T.AddressOf) and nbytes:
                self.access(a.target, max(1, int(nbytes.group(1)) // a.target.dtype.bytes))
            elif isinstance(a, T.AddressOf) and lanes:
                self.access(a.target, int(lanes.group(1)))
            elif not isinstance(a, str):
                self.check(a)

    def access(self, s: T.Subscript, lanes: int) -> None:
        """`s` and the `lanes - 1` elements after it inside their array."""
        for i in s.indices:
            self.check(i)
        info = self.lookup(s.array)
        if not isinstance(info, _Array):
            return  # a parameter scalar or register (thread_verify rejects indices into those)
        if info.dims is None:
            self.global_access(s, lanes)
            return
        dims = list(info.dims)
        if s.reinterpret and dims:
            dims[-1] = dims[-1] * info.dtype.bytes // s.dtype.bytes
        for k, (i, d) in enumerate(zip(s.indices, dims)):
            last = lanes - 1 if k == len(dims) - 1 else 0
            self.inside(s.array, k, self.value(i), last, tir.IntImm(d))

    def global_access(self, s: T.Subscript, lanes: int) -> None:
        """A tensor element: its flat index the flattening of `within`, each index in its dimension."""
        if not s.within:
            self.fail(f"access to tensor '{s.array}' records no per-dimension index (Subscript.within)")
            return
        idx = tuple(self.value(i) for i, _ in s.within)
        extents = tuple(self.value(d) for _, d in s.within)
        steps = tuple(self.value(d) for d in s.strides)
        expected = _flat(idx, extents) if not steps else strided(idx, steps)
        flat = _op("==", self.value(s.indices[0]), expected, BOOL)
        if not self.prover.can_prove(flat):
            layout = "row-major flattening" if not steps else "offset by its strides"
            self.fail(f"index {expr_text(self.value(s.indices[0]))} of tensor '{s.array}' is not its {layout}")
        for k, (i, d) in enumerate(zip(idx, extents)):
            self.inside(s.array, k, i, lanes - 1 if k == len(idx) - 1 else 0, d)

    def inside(self, array: str, k: int, i: tir.Expr, last: int, d: tir.Expr) -> None:
        """0 <= i and i + last < d, or a failure naming the index, its range and the extent."""
        if isinstance(i, tir.IntImm) and isinstance(d, tir.IntImm) and 0 <= i.value and i.value + last < d.value:
            return
        top = _op("+", i, tir.IntImm(last), I32) if last else i
        cond = _op("and", _op("<=", tir.IntImm(0), i, BOOL), _op("<", top, d, BOOL), BOOL)
        if self.proves(cond):
            return
        lo, hi = self.prover.bounds(i)
        covers = f" (and the {last} after it)" if last else ""
        self.fail(
            f"index {expr_text(i)}{covers} of '{array}' (dimension {k}) could not be proven inside "
            f"[0, {expr_text(d)}): the analyzer bounds it by [{lo}, {hi}]{self.witness(cond)}"
        )

    def proves(self, cond: tir.Expr) -> bool:
        """`cond` under the conditions in force: each conjunct one of theirs, true at every point
        of its variables' domain, or proven by the analyzer."""
        key = (cond, tuple(self.assumed))
        if key in self.proven:
            return True
        given = {c for a in self.assumed for c in _conjuncts(a)}
        ok = all(
            c in given or enumerate_holds(c, self.assumed, self.ranges) is True or self.prover.can_prove(c)
            for c in _conjuncts(cond)
        )
        if ok:
            self.proven.add(key)
        return ok

    def witness(self, cond: tir.Expr) -> str:
        point = enumerate_holds(cond, self.assumed, self.ranges)
        if isinstance(point, dict):
            at = ", ".join(f"{v.name} = {n}" for v, n in point.items())
            return f"; it is outside at {at}"
        return "; enumeration undecided (a variable without a constant range, or over 2**20 points)"

    def fail(self, message: str) -> None:
        if len(self.failures) < MAX_FAILURES:
            self.failures.append(Diagnostic(self.span, f"kernel '{self.kernel.name}': {message}"))

    # ------------------------------------------------------------ expressions: their values

    def value(self, e: T.Expr) -> tir.Expr:
        """`e` over the walk's variables: constants substituted, the rest an unknown of its type."""
        match e:
            case tir.IntImm(v):
                return tir.IntImm(v)
            case tir.BoolImm():
                return e
            case T.Subscript(name, ()) if _tracked(e.dtype):  # an alloc_var
                return self.scalar_read(name)
            case T.Subscript(name, idx) if _tracked(e.dtype) and name in self.read_only and not e.reinterpret:
                return self.element_read(name, tuple(self.value(i) for i in idx), _kind(e.dtype))
            case tir.Var(name) | T.Sym(name):
                bound = self.lookup(name)
                if bound is COUNTER:
                    return self.counter_read(name)
                return bound if isinstance(bound, tir.Expr) else self.unknown(e.dtype)
            case T.Builtin(name):
                return self.builtin(name)
            case T.Intrin("warp_uniform", (x,)) if not isinstance(x, str):  # lane 0's value, every lane's
                return self.value(x)
            case tir.BinOp(op, a, b, d):
                return self.binop(op, a, b, d)
            case tir.UnaryOp("not" | "-" as op, a, d) if _tracked(d):
                return tir.UnaryOp(op, self.value(a), _kind(d))
            case tir.Select(c, a, b, d) if _tracked(d):
                return tir.Select(self.value(c), self.value(a), self.value(b), _kind(d))
            case tir.Cast(v, d) if _tracked(d) and _tracked(v.dtype) and d.is_int == v.dtype.is_int:
                return self.value(v)
            case tir.Call("min" | "max" as f, (a, b), d) if d.is_int:
                return tir.Call(f, (self.value(a), self.value(b)), I32)
            case _:
                return self.unknown(e.dtype)

    def element_read(self, name: str, idx: tuple[tir.Expr, ...], kind: DType = I32) -> tir.Var:
        """An element of a tensor the kernel only reads (a `const` parameter: a page table): one
        variable per element read, unbounded, so that two reads of it (a gathered copy's flat
        index and its per-dimension one, `Table[bx * T + k]` in both) are the same value; of
        type `kind` (a mask's bool: `m < n ? Mask[m] : false`, the condition of a copy)."""
        key = (name, idx)
        if key not in self.elements:
            self.elements[key] = tir.Var(f"{name}[{len(self.elements)}]", kind, "scalar")
        return self.elements[key]

    def counter_read(self, name: str) -> tir.Var:
        """A counter's value: some integer at least 0, one variable per counter and epoch (so
        that two reads in one access, its flat index and its per-dimension one, are the same
        value, while a condition on it before an update says nothing after; only the range is
        assumed, which holds for every value it takes)."""
        epoch = self.epochs.get(name, 0)
        key = name if epoch <= 1 else f"{name}_{epoch}"  # epoch 1: the declaration's value
        if key not in self.counters:
            self.counters[key] = tir.Var(key, I32, "scalar")
            self.bind(self.counters[key], 0, INT_MAX)
        return self.counters[key]

    def binop(self, op: tir.BinOpName, a: T.Expr, b: T.Expr, d: DType) -> tir.Expr:
        if op in ("/", "**") or not (_tracked(a.dtype) and _tracked(b.dtype) and _tracked(d)):
            return self.unknown(d)
        return _op("//" if op == "/" else op, self.value(a), self.value(b), _kind(d))

    def builtin(self, name: T.BuiltinName) -> tir.Expr:
        bound = self.lookup(name)
        return bound if isinstance(bound, tir.Expr) else self.unknown(I32)


# ---------------------------------------------------------------- enumeration


def enumerate_holds(
    cond: tir.Expr, assumed: list[tir.Expr], ranges: dict[tir.Var, tuple[int, int]]
) -> bool | dict[tir.Var, int] | None:
    """`cond` at every point of its variables' ranges where the assumptions over those variables
    hold: True, a point where it fails, or None when it cannot tell (a variable without a
    constant range, or more than MAX_POINTS points)."""
    import numpy as np

    names = sorted(_variables(cond), key=lambda v: v.name)  # deterministic witnesses
    if any(v not in ranges for v in names):
        return None
    sizes = [ranges[v][1] - ranges[v][0] for v in names]
    if _product(sizes) > MAX_POINTS:
        return None
    grids = np.meshgrid(*(np.arange(*ranges[v], dtype=np.int64) for v in names), indexing="ij")
    env = {v: g.ravel() for v, g in zip(names, grids)} if names else {}
    where = np.ones(max(1, _product(sizes)), dtype=bool)
    for a in assumed:
        if _variables(a) <= set(names):
            holds = np.asarray(_evaluate(a, env))
            if holds.dtype == bool:  # else it reads data (an arg-reduction's running value): left out
                where &= np.broadcast_to(holds, where.shape)
    bad = where & ~np.broadcast_to(_evaluate(cond, env), where.shape)
    if not bad.any():
        return True
    at = int(np.argmax(bad))
    return {v: int(env[v][at]) for v in names}


def _product(sizes: list[int]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def _variables(e: tir.Expr) -> set[tir.Var]:
    match e:
        case tir.Var():
            return {e}
        case tir.BinOp(_, a, b):
            return _variables(a) | _variables(b)
        case tir.UnaryOp(_, a):
            return _variables(a)
        case tir.Select(c, a, b):
            return _variables(c) | _variables(a) | _variables(b)
        case tir.Call(_, args):
            return set().union(*(_variables(x) for x in args))
        case _:
            return set()


def _evaluate(e: tir.Expr, env: dict[tir.Var, Any]) -> Any:
    """`e` at every point at once (numpy arrays; C's division, rounding toward zero)."""
    import numpy as np

    match e:
        case tir.IntImm(v) | tir.BoolImm(v):
            return np.int64(v)
        case tir.Var():
            return env[e]
        case tir.UnaryOp("not", a):
            return ~_evaluate(a, env).astype(bool)
        case tir.UnaryOp("-", a):
            return -_evaluate(a, env)
        case tir.Select(c, a, b):
            return np.where(_evaluate(c, env).astype(bool), _evaluate(a, env), _evaluate(b, env))
        case tir.Call("min" | "max" as f, (a, b)):
            return getattr(np, f"{f}imum")(_evaluate(a, env), _evaluate(b, env))
        case tir.BinOp(op, a, b):
            return _apply(op, _evaluate(a, env), _evaluate(b, env))
        case _:
            raise TypeError(f"bounds_verify: cannot evaluate {e!r}")


def _apply(op: str, x: Any, y: Any) -> Any:
    import numpy as np

    if op in ("//", "%"):
        y = np.where(y == 0, 1, y)  # C leaves it undefined; the analyzer's answer stands for it
        q = np.abs(x) // np.abs(y) * np.sign(x) * np.sign(y)
        return q if op == "//" else x - q * y
    table = {
        "+": np.add,
        "-": np.subtract,
        "*": np.multiply,
        "^": np.bitwise_xor,
        "&": np.bitwise_and,
        "|": np.bitwise_or,
        "<<": np.left_shift,
        ">>": np.right_shift,
        "<": np.less,
        "<=": np.less_equal,
        ">": np.greater,
        ">=": np.greater_equal,
        "==": np.equal,
        "!=": np.not_equal,
        "and": np.logical_and,
        "or": np.logical_or,
    }
    return table[op](x, y)


# ---------------------------------------------------------------- helpers


def _tracked(d: DType) -> bool:
    """Values the verifier follows: integers and booleans."""
    return d.is_int or d == BOOL


def _kind(d: DType) -> DType:
    return BOOL if d == BOOL else I32


def _op(op: tir.BinOpName, a: tir.Expr, b: tir.Expr, d: DType) -> tir.Expr:
    return tir.BinOp(op, a, b, d)


def _not(c: tir.Expr) -> tir.Expr:
    if isinstance(c, tir.BoolImm):
        return tir.BoolImm(not c.value)
    return tir.UnaryOp("not", c, BOOL)


def _conjuncts(c: tir.Expr) -> list[tir.Expr]:
    if isinstance(c, tir.BinOp) and c.op == "and":
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _assigned_vars(body: tuple[T.Stmt, ...]) -> set[str]:
    """The alloc_vars (scalars assigned through a subscript without indices) and the counters
    (mutable integers) `body` assigns."""
    out: set[str] = set()
    for s in body:
        match s:
            case T.Assign(T.Subscript(name, ())) | T.Assign(T.Sym(name)):
                out.add(name)
            case T.Loop() | T.Scope() | T.While():
                out |= _assigned_vars(s.body)
            case T.IfThen(_, then, orelse):
                out |= _assigned_vars(then) | _assigned_vars(orelse)
    return out


def _indexing(body: tuple[T.Stmt, ...]) -> set[str]:
    """The names an index or a loop bound reads, directly or through the values of other names
    (`const int stage = filled % 3` makes `filled` one when `stage` indexes)."""
    reads: dict[str, set[str]] = {}
    for s in T.all_stmts(body):
        match s:
            case T.Decl(name, _, _, init) if init is not None:
                reads.setdefault(name, set()).update(_index_names(init, True))
            case T.Assign(T.Sym(name), value):
                reads.setdefault(name, set()).update(_index_names(value, True))
    out, todo = set(), list(_index_names(body))
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo += reads.get(name, ())
    return out


def _index_names(node: object, inside: bool = False) -> set[str]:
    """The names read in an index (a subscript's indices and per-dimension ones) or a loop's bounds
    anywhere in `node` (a Thread IR tree): the scalars whose values decide where memory is accessed."""
    if isinstance(node, (tuple, list)):
        return set().union(*(_index_names(x, inside) for x in node)) if node else set()
    if isinstance(node, (tir.Var, T.Sym)):
        return {node.name} if inside else set()
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return set()
    out: set[str] = set()
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        indexes = (isinstance(node, T.Subscript) and f.name in ("indices", "within")) or (
            isinstance(node, T.Loop) and f.name in ("start", "stop")
        )
        out |= _index_names(value, inside or indexes)
    return out


def _flat(idx: tuple[tir.Expr, ...], extents: tuple[tir.Expr, ...]) -> tir.Expr:
    """Row-major flattening, in the analyzer's terms (lowering's own `flatten` simplifies too)."""
    return flatten(idx, extents)


# ---------------------------------------------------------------- the kernel


def _start(walker: _Walker, k: T.Kernel) -> list[tir.Expr]:
    """The kernel's outermost names (parameters, dimensions, thread and block indices) bound;
    the facts to assume (each block index below its grid extent)."""
    dims = set(k.abi.get("dims", ()))
    top: dict[str, tir.Expr | _Array | _Counter | None] = {}
    for p in k.params:
        top[p.name] = _Array(None, p.dtype) if p.pointer else tir.Var(p.name, _kind(p.dtype), "dim")
    walker.scopes.append(top)
    for name in dims:
        var = top.get(name)
        if isinstance(var, tir.Var):
            walker.bind(var, 0, INT_MAX)
    tx = tir.Var("thread", I32, "thread")
    walker.bind(tx, 0, k.threads)
    top["thread_index"] = top["thread_index_reread"] = tx  # the same register, read again
    return [_grid_axis(walker, top, axis, walker.value(e), k.persistent) for axis, e in zip("xyz", k.grid)]


def _grid_axis(walker: _Walker, top: dict, axis: str, extent: tir.Expr, persistent: bool) -> tir.Expr:
    """The block index in [0, grid size), that the grid's extent (at least 1 for a persistent kernel)."""
    block = tir.Var(f"block_{axis}", I32, "block")
    grid = tir.Var(f"grid_{axis}", I32, "block") if persistent else extent
    if isinstance(grid, tir.Var):
        walker.bind(grid, 1, INT_MAX)
    walker.bind(block, 0, grid.value if isinstance(grid, tir.IntImm) else INT_MAX)
    top[f"block_index_{axis}"] = block
    top[f"grid_dim_{axis}"] = grid
    return _op("<", block, grid, BOOL)


def verify_bounds(k: T.Kernel) -> list[Diagnostic]:
    """Every index of `k` (and of its fallback kernel) proven inside its buffer; the failures."""
    from tilec.arith import Prover

    read_only = frozenset(p.name for p in k.params if p.pointer and p.const)
    walker = _Walker(k, Prover(), indexing=frozenset(_indexing(k.body)), read_only=read_only)
    facts = _start(walker, k)
    with _assumed_all(walker, facts):
        walker.block(k.body)
    found = list(walker.failures)
    return found + (verify_bounds(k.fallback) if k.fallback is not None else [])


@contextmanager
def _assumed_all(walker: _Walker, facts: list[tir.Expr]) -> Iterator[None]:
    """Each of `facts` assumed, nested."""
    if not facts:
        yield
        return
    with walker.assume(facts[0]), _assumed_all(walker, facts[1:]):
        yield


def check_module(module: T.Module) -> None:
    """Raises CompileError holding every failure of every kernel of `module`."""
    failures = [d for k in module.kernels for d in verify_bounds(k)]
    if failures:
        raise CompileError(failures)
