"""Lower Tile IR to Thread IR: what each thread of the block does.

Every tile op becomes a `Scope` of Thread IR headed by the `.tile` line it
came from. Most ops are reduced to one mechanism, a *distributed loop*: a
loop nest over a tile whose elements are spread over the threads by a
Fragment layout (layout.py). A `Parallel` loop runs its body under its
inferred layout; `copy`, `fill` and `atomic_add` of tiles build such a body
(`dst[i, j] = src[i, j]`) and run it the same way, which gives every one of
them bounds checks against tensor edges and 16-byte vector accesses:

    copy(A[by * 128, k * 32], A_shared)     # 128 threads, float16
  ->
    for (int g0 = 0; g0 < 4; ++g0) {          // 4 rows per thread
      if (vec_ok && by * 128 + ... < M && ... + 8 <= K) {
        *(uint4*)&A_shared[g0 * 32 + tx / 4][tx % 4 * 8] = *(const uint4*)&A[...];
      } else { ... element by element, zero outside the tensor ... }
    }

gemm (SIMT FMA over the accumulator's micro-tile), reduce (in-thread, then
warp shuffles, then shared memory across warps) and cumsum have their own
lowerings below. Barriers are placed by a small tracker of shared-memory
reads and writes (`_Sync`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import assert_never

from tilec import layout as L
from tilec import thread_ir as T
from tilec import tir
from tilec.diagnostics import error
from tilec.dtypes import DType
from tilec.passes.infer_layouts import Layouts
from tilec.simplify import gcd_of, int_, simplify, substitute
from tilec.targets import Target

I32 = DType.int32
F32 = DType.float32

_RESERVED = {
    "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "int", "long", "register", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "half", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize",
    "min", "max", "abs", "exp", "log", "sqrt", "smem", "printf", "new", "delete", "this", "class",
    "template", "namespace", "true", "false", "inline", "asm", "dim3", "stream", "grid", "block",
}


# ---------------------------------------------------------------- names


@dataclass
class _Names:
    """One name per IR object, derived from the user's name; deterministic."""

    taken: set[str] = field(default_factory=set)
    given: dict[object, str] = field(default_factory=dict)  # keyed by the object (identity hash)

    def fresh(self, base: str) -> str:
        name = base if base not in _RESERVED else base + "_"
        n = 1
        while name in self.taken:
            name = f"{base}_{n}"
            n += 1
        self.taken.add(name)
        return name

    def of(self, obj: tir.Buffer | tir.Var) -> str:
        if obj not in self.given:
            self.given[obj] = self.fresh(obj.name)
        return self.given[obj]


# ---------------------------------------------------------------- barriers


@dataclass
class _Sync:
    """Shared buffers read and written since the last __syncthreads()."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)

    def before(self, reads: set[str], writes: set[str]) -> list[T.Stmt]:
        hazard = (reads & self.writes) or (writes & (self.reads | self.writes))
        out: list[T.Stmt] = [_syncthreads()] if hazard else []
        if hazard:
            self.reads, self.writes = set(), set()
        self.reads |= reads
        self.writes |= writes
        return out

    def flush(self) -> list[T.Stmt]:
        if self.reads or self.writes:
            self.reads, self.writes = set(), set()
            return [_syncthreads()]
        return []


def _syncthreads() -> T.Call:
    return T.Call(T.Intrin("__syncthreads", (), DType.int32))


# ---------------------------------------------------------------- expressions


def _conjuncts(e: tir.Expr) -> list[tir.Expr]:
    if isinstance(e, tir.BinOp) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [] if isinstance(e, tir.BoolImm) and e.value else [e]


def _and(conds: list[tir.Expr]) -> tir.Expr:
    unique: list[tir.Expr] = []
    for c in conds:
        for part in _conjuncts(simplify(c)):
            if part not in unique:
                unique.append(part)
    out: tir.Expr = tir.BoolImm(True)
    for c in unique:
        out = c if isinstance(out, tir.BoolImm) and out.value else tir.BinOp("and", out, c, DType.bool)
    return simplify(out)


def _add(a: tir.Expr, b: tir.Expr) -> tir.Expr:
    return tir.BinOp("+", a, b, I32)


def _mul(a: tir.Expr, k: int) -> tir.Expr:
    return tir.BinOp("*", a, int_(k), I32)


def _lt(a: tir.Expr, b: tir.Expr) -> tir.Expr:
    return tir.BinOp("<", a, b, DType.bool)


def _vars_in(e: tir.Expr) -> set[tir.Var]:
    out: set[tir.Var] = set()

    def walk(x: object) -> None:
        if isinstance(x, tir.Var):
            out.add(x)
        elif isinstance(x, T.Subscript):
            for i in x.indices:
                walk(i)
        elif isinstance(x, tir.Load):
            for i in x.indices:
                walk(i)
        elif isinstance(x, (tir.BinOp,)):
            walk(x.a)
            walk(x.b)
        elif isinstance(x, (tir.UnaryOp,)):
            walk(x.a)
        elif isinstance(x, tir.Cast):
            walk(x.value)
        elif isinstance(x, tir.Select):
            walk(x.cond)
            walk(x.a)
            walk(x.b)
        elif isinstance(x, (tir.Call, T.Intrin)):
            for a in x.args:
                walk(a)

    walk(e)
    return out


def compute_dtype(d: DType) -> DType:
    """Type arithmetic is done in: float32 for the 8- and 16-bit floats."""
    return F32 if d.is_low_precision else d


def _cast(e: tir.Expr, d: DType) -> tir.Expr:
    if isinstance(e, tir.Cast) and e.value.dtype == d and e.dtype == F32:
        return e.value  # half -> float -> half is the identity
    return e if e.dtype == d else tir.Cast(e, d)


@dataclass
class _Access:
    """How one element access reads in a distributed loop: the C expression
    and whether a global bound check applies."""

    ref: T.Subscript
    inbounds: tir.Expr


# ---------------------------------------------------------------- the kernel


@dataclass
class _Loop:
    """A distributed loop being lowered: its layout and per-dim index exprs."""

    layout: L.Fragment
    index: tuple[tir.Expr, ...]  # tile index per dim, in terms of loop counters
    local: tuple[tir.Expr, ...]  # local coordinate per dim (g * vec + e)
    vars: tuple[tir.Var, ...]  # the tir vars bound to index (Parallel's vars)


class KernelLowering:
    def __init__(self, kernel: tir.Kernel, layouts: Layouts, target: Target):
        self.kernel = kernel
        self.layouts = layouts
        self.target = target
        self.names = _Names()
        for t in kernel.tensors:
            self.names.of(t)
        for v in (*kernel.scalars, *kernel.dims, *kernel.block_vars):
            self.names.of(v)
        self.tx = tir.Var(self.names.fresh("tx"), I32, "thread")
        self.bounds: dict[tir.Var, int] = {self.tx: kernel.threads - 1}
        self.smem = 0
        self.views: list[T.SharedView] = []
        self.red_offset: int | None = None
        self.written: set[str] = set()
        self.sync = _Sync()
        self.swizzle: tir.UseSwizzle | None = None
        self.vec_flags: dict[str, str] = {}  # condition text key -> const bool name
        self.prologue: list[T.Stmt] = []
        self.assumed: list[tir.Expr] = []
        self.cvars: dict[tir.Var, tir.Var] = {}  # user variable -> its C-named twin (one object each)  # conditions known to hold where code is being built

    # ------------------------------------------------------------ entry

    def run(self) -> T.Kernel:
        body = self.block(self.kernel.body)
        head = self._block_index() + self.views_stmts() + self.prologue
        params = self._params()
        abi = self._abi()
        grid = tuple(simplify(self.value(g, None)) for g in self.kernel.grid)
        body = drop_unused(head + body)
        return T.Kernel(self.kernel.name, params, self.kernel.threads, grid, self.smem_total(), tuple(body), abi)

    def smem_total(self) -> int:
        return self.smem

    def views_stmts(self) -> list[T.Stmt]:
        return list(self.views)

    def _params(self) -> tuple[T.Param, ...]:
        out = []
        for t in self.kernel.tensors:
            name = self.names.of(t)
            const = "" if name in self.written else "const "
            shape = ", ".join(_expr_text(d) for d in t.shape)
            access = "written" if name in self.written else "read"
            out.append(T.Param(name, f"{const}{t.dtype.cname}* __restrict__", f"{t.dtype.tile_name}[{shape}], {access}"))
        for v in self.kernel.scalars:
            out.append(T.Param(self.names.of(v), v.dtype.cname, f"scalar {v.dtype.tile_name}"))
        for v in self.kernel.dims:
            out.append(T.Param(self.names.of(v), "int", "symbolic dimension"))
        return tuple(out)

    def _abi(self) -> dict:
        def dim(d: tir.Expr) -> int | str:
            return d.value if isinstance(d, tir.IntImm) else self.names.of(d) if isinstance(d, tir.Var) else "?"

        return {
            "name": self.kernel.name,
            "tensors": [
                {"name": self.names.of(t), "dtype": t.dtype.tile_name, "shape": [dim(d) for d in t.shape]}
                for t in self.kernel.tensors
            ],
            "scalars": [{"name": self.names.of(v), "dtype": v.dtype.tile_name} for v in self.kernel.scalars],
            "dims": [self.names.of(v) for v in self.kernel.dims],
        }

    def _block_index(self) -> list[T.Stmt]:
        out: list[T.Stmt] = [T.Decl(self.tx.name, I32, init=_raw("threadIdx.x"), const=True)]
        names = [self.names.of(v) for v in self.kernel.block_vars]
        axes = ["blockIdx.x", "blockIdx.y", "blockIdx.z"]
        sw = self.swizzle
        if sw is None or len(names) < 2:
            for name, axis in zip(names, axes):
                out.append(T.Decl(name, I32, init=_raw(axis), const=True))
            return out
        # Panels of `panel_size` block rows (order row) walked column by column, for L2 reuse.
        p = sw.panel_size
        first, second = ("x", "y") if sw.order == "row" else ("y", "x")
        out += [
            T.Decl("tile_id", I32, init=_raw("blockIdx.y * gridDim.x + blockIdx.x"), const=True),
            T.Decl("panel_tiles", I32, init=_raw(f"{p} * gridDim.{first}"), const=True),
            T.Decl("panel", I32, init=_raw("tile_id / panel_tiles"), const=True),
            T.Decl("in_panel", I32, init=_raw("tile_id % panel_tiles"), const=True),
            T.Decl("panel_rows", I32, init=_raw(f"min({p}, (int)gridDim.{second} - panel * {p})"), const=True),
        ]
        b_first = names[0] if first == "x" else names[1]
        b_second = names[1] if first == "x" else names[0]
        out.append(T.Decl(b_second, I32, init=_raw(f"panel * {p} + in_panel % panel_rows"), const=True))
        out.append(T.Decl(b_first, I32, init=_raw("in_panel / panel_rows"), const=True))
        if len(names) > 2:
            out.append(T.Decl(names[2], I32, init=_raw("blockIdx.z"), const=True))
        return out

    # ------------------------------------------------------------ statements

    def block(self, stmts: tuple[tir.Stmt, ...]) -> list[T.Stmt]:
        out: list[T.Stmt] = []
        for s in stmts:
            out += self.stmt(s)
        return out

    def stmt(self, s: tir.Stmt) -> list[T.Stmt]:
        match s:
            case tir.Alloc():
                return self.alloc(s)
            case tir.Let(var, value):
                return [T.Decl(self.names.of(var), var.dtype, init=self.value(value, None), const=True)]
            case tir.Store():
                return self.scalar_store(s)
            case tir.Copy():
                return self.op(s, self.copy(s))
            case tir.Fill():
                return self.op(s, self.fill(s))
            case tir.Parallel():
                return self.op(s, self.parallel(s))
            case tir.Gemm():
                return self.op(s, self.gemm(s))
            case tir.Reduce():
                return self.op(s, self.reduce(s))
            case tir.CumSum():
                return self.op(s, self.cumsum(s))
            case tir.AtomicAdd():
                return self.op(s, self.atomic_region(s) if s.src is not None else self.atomic_element(s))
            case tir.For():
                return self.loop(s)
            case tir.If():
                return self.if_(s)
            case tir.Print():
                return self.op(s, self.print_(s))
            case tir.DeviceAssert():
                return [self.assert_(s, None)]
            case tir.UseSwizzle():
                self.swizzle = s
                return []
            case _:
                assert_never(s)

    def op(self, s: tir.Stmt, body: list[T.Stmt]) -> list[T.Stmt]:
        reads, writes = _shared_rw(s)
        pre = self.sync.before({b.name for b in reads}, {b.name for b in writes})
        return pre + [T.Scope(_comment(s), tuple(body), s.span)]

    def alloc(self, s: tir.Alloc) -> list[T.Stmt]:
        buf = s.buffer
        name = self.names.of(buf)
        match buf.scope:
            case "shared":
                self.shared_view(name, buf.dtype, buf.const_shape)
                return []
            case "fragment":
                frag = self.layouts.buffers[buf]
                return [T.Decl(name, buf.dtype, (frag.local_size,))]
            case "local":
                return [T.Decl(name, buf.dtype, buf.const_shape)]
            case "var":
                init = self.value(s.init, None) if s.init is not None else None
                return [T.Decl(name, buf.dtype, (), init=_cast(init, buf.dtype) if init is not None else None)]
            case "global":
                raise error(s.span, "tensors cannot be allocated inside a kernel")

    def shared_view(self, name: str, dtype: DType, dims: tuple[int, ...]) -> None:
        self.smem = (self.smem + 15) // 16 * 16
        self.views.append(T.SharedView(name, dtype, dims, self.smem))
        self.smem += math.prod(dims) * dtype.bytes

    def scalar_store(self, s: tir.Store) -> list[T.Stmt]:
        if s.buffer.scope == "fragment":
            raise error(
                s.span,
                f"fragment '{s.buffer.name}' can only be written inside a Parallel loop or by a tile op",
                hint="wrap the assignment in `for i, j in Parallel(...)`",
            )
        ref = self.ref(s.buffer, s.indices, None)
        if s.buffer.scope == "global":
            self.written.add(ref.ref.array)
        value = _cast(self.value(s.value, None), s.buffer.dtype)
        return [T.Assign(ref.ref, value)]

    def loop(self, s: tir.For) -> list[T.Stmt]:
        var = self.names.of(s.var)
        touches = _touches_shared(s.body)
        pre = self.sync.flush() if touches else []
        body = self.block(s.body)
        if touches:
            body += self.sync.flush()
        step = s.step.value if isinstance(s.step, tir.IntImm) else 1
        loop = T.Loop(
            T.Sym(var, I32), self.value(s.start, None), self.value(s.stop, None), step, s.kind == "unroll", tuple(body)
        )
        if s.kind == "pipelined":
            comment = f"{_where(s)}: {s.span.text.splitlines()[0].strip() if s.span.text else 'Pipelined loop'}"
            return pre + [T.Comment(comment), loop]
        return pre + [loop]

    def if_(self, s: tir.If) -> list[T.Stmt]:
        cond = self.value(s.cond, None)
        saved = _Sync(set(self.sync.reads), set(self.sync.writes))
        then = self.block(s.then)
        after_then = self.sync
        self.sync = saved
        orelse = self.block(s.orelse)
        self.sync = _Sync(after_then.reads | self.sync.reads, after_then.writes | self.sync.writes)
        return [T.IfThen(cond, tuple(then), tuple(orelse))]

    # ------------------------------------------------------------ values

    def value(self, e: tir.Expr, loop: _Loop | None) -> tir.Expr:
        """The C-ready form of an expression: buffers resolved to subscripts,
        low-precision arithmetic widened to float32, indices simplified."""
        match e:
            case tir.IntImm() | tir.BoolImm():
                return e
            case tir.FloatImm(v, d):
                return tir.FloatImm(v, compute_dtype(d))
            case tir.Var():
                if e.kind == "thread":  # already a C name (counters, threadIdx.x)
                    return e
                if e not in self.cvars:
                    self.cvars[e] = tir.Var(self.names.of(e), e.dtype, "thread")
                return _cast(self.cvars[e], compute_dtype(e.dtype))
            case tir.Load(buf, idx):
                acc = self.ref(buf, idx, loop)
                ref: tir.Expr = acc.ref  # type: ignore[assignment]
                ref = _cast(ref, compute_dtype(buf.dtype))
                if not all(c in self.assumed for c in _conjuncts(acc.inbounds)):
                    ref = tir.Select(acc.inbounds, ref, _zero(compute_dtype(buf.dtype)), compute_dtype(buf.dtype))
                return ref
            case tir.BinOp(op, a, b, d):
                va, vb = self.value(a, loop), self.value(b, loop)
                if op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                    return simplify(tir.BinOp(op, va, vb, d))
                cd = compute_dtype(d)
                return simplify(tir.BinOp(op, _cast(va, cd), _cast(vb, cd), cd))
            case tir.UnaryOp(op, a, d):
                return simplify(tir.UnaryOp(op, self.value(a, loop), compute_dtype(d)))
            case tir.Select(c, a, b, d):
                cd = compute_dtype(d)
                return tir.Select(self.value(c, loop), _cast(self.value(a, loop), cd), _cast(self.value(b, loop), cd), cd)
            case tir.Cast(v, d):
                inner = self.value(v, loop)
                if d.is_low_precision:  # round through the narrow type, keep computing in float
                    return tir.Cast(_cast(inner, d) if inner.dtype == F32 else tir.Cast(_cast(inner, F32), d), F32)
                return _cast(inner, d)
            case tir.Call(f, args, d):
                cd = compute_dtype(d)
                return tir.Call(f, tuple(_cast(self.value(a, loop), cd) for a in args), cd)
            case _:
                assert_never(e)

    def ref(self, buf: tir.Buffer, idx: tuple[tir.Expr, ...], loop: _Loop | None) -> _Access:
        """The subscript of one element and its bound condition."""
        name = self.names.of(buf)
        idx = tuple(simplify(self.value(i, loop)) for i in idx)
        true: tir.Expr = tir.BoolImm(True)
        match buf.scope:
            case "global":
                flat = _flatten(idx, tuple(self.value(d, None) for d in buf.shape))
                conds = [_lt(i, self.value(d, None)) for i, d in zip(idx, buf.shape) if not self._below(i, d)]
                return _Access(T.Subscript(name, (flat,), buf.dtype), _and(conds))
            case "shared" | "local":
                return _Access(T.Subscript(name, idx, buf.dtype), true)
            case "var":
                return _Access(T.Subscript(name, (), buf.dtype), true)
            case "fragment":
                if loop is None:
                    raise error(
                        idx[0].span if idx else buf.span,
                        f"fragment '{buf.name}' can only be indexed inside a Parallel loop",
                        hint="copy it to a shared or local buffer to read single elements",
                    )
                return _Access(T.Subscript(name, (self.slot(buf, idx, loop),), buf.dtype), true)

    def slot(self, buf: tir.Buffer, idx: tuple[tir.Expr, ...], loop: _Loop) -> tir.Expr:
        frag = self.layouts.buffers[buf]
        dims = []
        for i in idx:
            pos = next((d for d, e in enumerate(loop.index) if e is i or e == i), None)
            if pos is None:
                raise error(buf.span, f"internal: fragment '{buf.name}' index not a loop variable")
            dims.append(pos)
        slot: tir.Expr = int_(0)
        for d, extent in zip(dims, frag.local_shape):
            slot = tir.BinOp("+", tir.BinOp("*", slot, int_(extent), I32), loop.local[d], I32)
        return simplify(slot)

    def _below(self, i: tir.Expr, d: tir.Expr) -> bool:
        """True if index `i` is provably below the constant extent `d`."""
        if not isinstance(d, tir.IntImm):
            return False
        hi = _upper(i, self.bounds)
        return hi is not None and hi < d.value

    # ------------------------------------------------------------ distributed loops

    def distributed(
        self, layout: L.Fragment, vars: tuple[tir.Var, ...], body: tuple[tir.Stmt, ...], vectorize: bool = True
    ) -> list[T.Stmt]:
        """Run `body` for every element of `layout`'s shape this thread owns.

        Per tile dim d the thread walks groups g (of `vec[d]` elements) and
        lanes e inside a group: index = g * vec * split + coord * vec + e. The
        loop variables keep the user's names (`const int i = ...;`)."""
        coords = L.thread_coords(layout, self.tx)
        rank = len(layout.shape)
        groups: list[T.Sym | None] = []
        lanes: list[T.Sym | None] = []
        index: list[tir.Expr] = []
        local: list[tir.Expr] = []
        for d in range(rank):
            v, t = layout.vec[d], layout.split(d)
            ng = layout.local_shape[d] // v
            g = T.Sym(self._fresh(f"g{d}" if rank > 1 else "g"), I32) if ng > 1 else None
            e = T.Sym(self._fresh(f"e{d}" if rank > 1 else "e"), I32) if v > 1 else None
            gv = _sym_var(g, ng, self.bounds) if g else int_(0)
            ev = _sym_var(e, v, self.bounds) if e else int_(0)
            c = coords[d][0] if t > 1 else int_(0)
            index.append(simplify(_add(_add(_mul(gv, v * t), _mul(c, v)), ev)))
            local.append(simplify(_add(_mul(gv, v), ev)))
            groups.append(g)
            lanes.append(e)
        padded = [d for d in range(rank) if layout.shape[d] % (layout.vec[d] * layout.split(d))]
        lane = lanes[-1] if vectorize and layout.vec[-1] > 1 else None
        inner, vectorized = self._element_body(layout, vars, body, tuple(index), tuple(local), padded, lane)
        nest = inner
        for d in reversed(range(rank)):
            lane_d = lanes[d]
            if lane_d is not None and not (d == rank - 1 and vectorized):
                nest = [T.Loop(lane_d, int_(0), int_(layout.vec[d]), 1, True, tuple(nest))]
            g = groups[d]
            if g is not None:
                nest = [T.Loop(g, int_(0), int_(layout.local_shape[d] // layout.vec[d]), 1, True, tuple(nest))]
        return nest

    def _fresh(self, base: str) -> str:
        return self.names.fresh(base)

    def _element_body(
        self,
        layout: L.Fragment,
        vars: tuple[tir.Var, ...],
        body: tuple[tir.Stmt, ...],
        index: tuple[tir.Expr, ...],
        local: tuple[tir.Expr, ...],
        padded: list[int],
        lane: T.Sym | None,
    ) -> tuple[list[T.Stmt], bool]:
        """The per-element code, and whether it took the vectorized form."""
        decls: list[T.Stmt] = []
        named: list[tir.Expr] = []
        for d, (v, i) in enumerate(zip(vars, index)):
            if isinstance(i, tir.IntImm):
                named.append(i)
                continue
            cvar = tir.Var(self._fresh(v.name), I32, "thread")
            self.bounds[cvar] = layout.shape[d] - 1
            decls.append(T.Decl(cvar.name, I32, init=i, const=True))
            named.append(cvar)
        scalar_loop = _Loop(layout, tuple(named), local, vars)
        guard = _and([_lt(named[d], int_(layout.shape[d])) for d in padded])
        bound = tuple(substitute_stmt(s, dict(zip(vars, named))) for s in body)
        scalar = decls + _guarded(guard, self.elements(bound, scalar_loop))
        if lane is None:
            return scalar, False
        full = _Loop(layout, index, local, vars)
        vec = self.vector_path(tuple(substitute_stmt(s, dict(zip(vars, index))) for s in body), full, lane, layout.vec[-1])
        if vec is None:
            return scalar, False
        cond, vbody = vec
        lane_v = next(v for v in self.bounds if v.name == lane.name)
        outer_guard = simplify(substitute(_and([_lt(index[d], int_(layout.shape[d])) for d in padded]), {lane_v: int_(0)}))
        scalar_lanes = T.Loop(lane, int_(0), int_(layout.vec[-1]), 1, True, tuple(scalar))
        chosen = vbody if isinstance(cond, tir.BoolImm) and cond.value else [T.IfThen(cond, tuple(vbody), (scalar_lanes,))]
        return _guarded(outer_guard, chosen), True

    def elements(self, body: tuple[tir.Stmt, ...], loop: _Loop) -> list[T.Stmt]:
        """Thread IR of a Parallel body for one element (indices already bound)."""
        out: list[T.Stmt] = []
        for s in body:
            match s:
                case tir.Store(buf, idx, value):
                    acc = self.ref(buf, idx, loop)
                    if buf.scope == "global":
                        self.written.add(acc.ref.array)
                    self.assumed = _conjuncts(acc.inbounds)  # loads under the store's own guard need none
                    assign = T.Assign(acc.ref, _cast(self.value(value, loop), buf.dtype))
                    self.assumed = []
                    out += _guarded(acc.inbounds, [assign])
                case tir.Let(var, value):
                    out.append(T.Decl(self.names.of(var), var.dtype, init=self.value(value, loop), const=True))
                case tir.Alloc(buf, init) if buf.scope == "var":
                    value = _cast(self.value(init, loop), buf.dtype) if init is not None else None
                    out.append(T.Decl(self.names.of(buf), buf.dtype, (), init=value))
                case tir.If(cond, then, orelse):
                    out.append(T.IfThen(self.value(cond, loop), tuple(self.elements(then, loop)), tuple(self.elements(orelse, loop))))
                case tir.For():
                    out.append(
                        T.Loop(
                            T.Sym(self.names.of(s.var), I32),
                            self.value(s.start, loop),
                            self.value(s.stop, loop),
                            s.step.value if isinstance(s.step, tir.IntImm) else 1,
                            s.kind == "unroll",
                            tuple(self.elements(s.body, loop)),
                        )
                    )
                case tir.AtomicAdd(dst=dst, value=value) if value is not None:
                    out += self._atomic(dst.buffer, dst.starts, value, loop)
                case tir.Print(value=value, msg=msg) if not isinstance(value, tir.Region):
                    out.append(_printf(msg, self.value(value, loop)))
                case tir.DeviceAssert():
                    out.append(self.assert_(s, loop))
                case _:
                    raise error(s.span, "this statement cannot appear inside a Parallel loop", hint="move it out of the loop")
        return out

    def vector_path(
        self, body: tuple[tir.Stmt, ...], loop: _Loop, lane: T.Sym, width: int
    ) -> tuple[tir.Expr, list[T.Stmt]] | None:
        """The 16-byte-vector version of a body of plain stores, or None.

        Each global/shared access whose last index is `base + lane` becomes one
        vector load into registers before the lane loop, or one vector store
        after it; the rest of the body runs per lane on those registers."""
        lane_var = next(v for v in self.bounds if isinstance(v, tir.Var) and v.name == lane.name)
        if not all(isinstance(s, tir.Store) for s in body):
            return None
        stores = [s for s in body if isinstance(s, tir.Store)]
        accesses: dict[tuple, tuple[tir.Buffer, tuple[tir.Expr, ...]]] = {}
        loads: list[tir.Load] = []
        for s in stores:
            _collect_loads(s.value, loads)
        vec_loads: dict[tir.Load, str] = {}
        conds: list[tir.Expr] = []
        pre: list[T.Stmt] = []
        post: list[T.Stmt] = []
        written = {s.buffer for s in stores}
        lane_zero = {lane_var: int_(0)}
        for ld in loads:
            if ld.buffer.scope not in ("global", "shared") or ld.buffer in written:
                continue
            plan = self._vec_access(ld.buffer, ld.indices, lane_var, width, lane_zero)
            if plan is None:
                continue
            key = (ld.buffer, tuple(map(_key, ld.indices)))
            if key in accesses:
                vec_loads[ld] = accesses[key][0]  # type: ignore[assignment]
                continue
            reg = self._fresh(f"{self.names.of(ld.buffer)}_v")
            cond, ref = plan
            conds.append(cond)
            pre.append(T.Decl(reg, ld.buffer.dtype, (width,), align=16))
            pre += _vec_moves(T.Subscript(reg, (int_(0),), ld.buffer.dtype), ref, width)
            reg_buf = tir.Buffer(reg, (int_(width),), ld.buffer.dtype, "local")
            self.names.given[reg_buf] = reg
            vec_loads[ld] = reg_buf  # type: ignore[assignment]
            accesses[key] = (reg_buf, ())
        lane_body: list[T.Stmt] = []
        for s in stores:
            value = _replace_loads(s.value, {ld: tir.Load(r, (lane_var,)) for ld, r in vec_loads.items()})  # type: ignore[arg-type]
            target_plan = None
            if s.buffer.scope in ("global", "shared"):
                target_plan = self._vec_access(s.buffer, s.indices, lane_var, width, lane_zero)
            if target_plan is None:
                if s.buffer.scope in ("global",):
                    return None  # a scalar global store needs per-element bounds: keep the scalar path
                lane_body += self.elements((tir.Store(s.buffer, s.indices, value, s.span),), loop)
                continue
            cond, ref = target_plan
            conds.append(cond)
            reg = self._fresh(f"{self.names.of(s.buffer)}_v")
            pre.append(T.Decl(reg, s.buffer.dtype, (width,), align=16))
            lane_body.append(T.Assign(T.Subscript(reg, (self.value(lane_var, loop),), s.buffer.dtype), _cast(self.value(value, loop), s.buffer.dtype)))
            post += _vec_moves(ref, T.Subscript(reg, (int_(0),), s.buffer.dtype), width)
            if s.buffer.scope == "global":
                self.written.add(ref.array)
        if not conds:
            return None
        body_out = pre + [T.Loop(T.Sym(lane.name, I32), int_(0), int_(width), 1, True, tuple(lane_body))] + post
        return _and(conds), body_out

    def _vec_access(
        self, buf: tir.Buffer, idx: tuple[tir.Expr, ...], lane: tir.Var, width: int, lane_zero: dict
    ) -> tuple[tir.Expr, T.Subscript] | None:
        """(condition, subscript of the first element) for a vector access, or None."""
        if width * buf.dtype.bytes > 16 and (width * buf.dtype.bytes) % 16:
            return None
        if (width * buf.dtype.bytes) & (width * buf.dtype.bytes - 1):
            return None
        if any(lane in _vars_in(i) for i in idx[:-1]):
            return None
        last = simplify(idx[-1])
        base = simplify(substitute(last, lane_zero))
        if simplify(tir.BinOp("-", last, base, I32)) != lane:
            return None
        if any(v.kind == "let" for i in idx for v in _vars_in(i)):
            return None
        if gcd_of(self.value(base, None)) % width:
            return None
        base_idx = tuple(substitute(i, lane_zero) for i in idx)
        acc = self.ref(buf, base_idx, None)
        conds: list[tir.Expr] = []
        if buf.scope == "shared":
            if buf.const_shape[-1] % width:
                return None
        else:
            conds.append(self._aligned(buf, width))
            shape = tuple(self.value(d, None) for d in buf.shape)
            vals = tuple(simplify(self.value(i, None)) for i in base_idx)
            for i, d in zip(vals[:-1], shape[:-1]):
                if not self._below(i, d):
                    conds.append(_lt(i, d))
            last_end = simplify(tir.BinOp("+", vals[-1], int_(width), I32))
            hi = _upper(vals[-1], self.bounds)
            if not (isinstance(shape[-1], tir.IntImm) and hi is not None and hi + width <= shape[-1].value):
                conds.append(tir.BinOp("<=", last_end, shape[-1], DType.bool))
        return _and(conds), acc.ref

    def _aligned(self, buf: tir.Buffer, width: int) -> tir.Expr:
        """A kernel-wide flag: the tensor's rows start on `width`-element boundaries."""
        name = self.names.of(buf)
        key = f"{name}/{width}"
        if key not in self.vec_flags:
            flag = self._fresh(f"{name}_vec{width}")
            self.vec_flags[key] = flag
            conds = [f"reinterpret_cast<uintptr_t>({name}) % 16 == 0"]
            if len(buf.shape) > 1 and not (isinstance(buf.shape[-1], tir.IntImm) and buf.shape[-1].value % width == 0):
                conds.append(f"{_expr_text(self.value(buf.shape[-1], None))} % {width} == 0")
            self.prologue.append(T.Decl(flag, DType.bool, init=_raw(" && ".join(conds)), const=True))
        return tir.Var(self.vec_flags[key], DType.bool, "let")

    # ------------------------------------------------------------ tile ops

    def parallel(self, s: tir.Parallel) -> list[T.Stmt]:
        layout = self.layouts.loops[id(s)]
        return self.distributed(layout, s.vars, s.body)

    def _region_loop(self, ext: tuple[int, ...], name: str) -> tuple[tuple[tir.Var, ...], tuple[int, ...]]:
        shape = tuple(e for e in ext if e != 1) or (1,)
        return _index_vars(len(shape)), shape

    def _region_index(
        self, region: tir.Region, vars: tuple[tir.Var, ...], shape: tuple[int, ...]
    ) -> tuple[tir.Expr, ...]:
        """Buffer index of element `vars` of a loop over `shape`: the region's
        non-unit dims take the loop's non-unit dims in order (unit dims of
        either side are squeezed away, as operand shapes are compared)."""
        loop_dims = [vars[d] for d, n in enumerate(shape) if n != 1]
        out = []
        for start, ext in zip(region.starts, region.extents):
            if _const(ext) == 1 or not loop_dims:
                out.append(start)
            else:
                out.append(simplify(tir.BinOp("+", start, loop_dims.pop(0), I32)))
        return tuple(out)

    def _tile_layout(self, regions: list[tir.Region], shape: tuple[int, ...]) -> L.Fragment:
        for r in regions:
            if r.buffer.scope == "fragment":
                frag = self.layouts.buffers[r.buffer]
                if frag.shape != shape:
                    raise error(r.span, f"a tile op on fragment '{r.buffer.name}' must cover the whole fragment")
                return frag
        if any(r.buffer.scope in ("local", "var") for r in regions):
            return L.Fragment(shape, (L.Axis(self.kernel.threads, None),), tuple([1] * (len(shape) - 1) + [_vec_width(shape[-1], regions)]))
        return L.default(shape, self.kernel.threads, max(r.buffer.dtype.bytes for r in regions))

    def copy(self, s: tir.Copy) -> list[T.Stmt]:
        ext = tuple(_const(e) for e in s.dst.extents)
        src_ext = tuple(_const(e) for e in s.src.extents)
        vars, shape = self._region_loop(ext if any(x != 1 for x in ext) else src_ext, "i")
        if s.dst.buffer.scope == "fragment":
            shape = self.layouts.buffers[s.dst.buffer].shape
            vars = _index_vars(len(shape))
        elif s.src.buffer.scope == "fragment":
            shape = self.layouts.buffers[s.src.buffer].shape
            vars = _index_vars(len(shape))
        layout = self._tile_layout([s.src, s.dst], shape)
        src_idx = self._region_index(s.src, vars, shape)
        dst_idx = self._region_index(s.dst, vars, shape)
        body = (tir.Store(s.dst.buffer, dst_idx, tir.Load(s.src.buffer, src_idx), s.span),)
        return self.distributed(layout, vars, body)

    def fill(self, s: tir.Fill) -> list[T.Stmt]:
        ext = tuple(_const(e) for e in s.dst.extents)
        vars, shape = self._region_loop(ext, "i")
        if s.dst.buffer.scope == "fragment":
            shape = self.layouts.buffers[s.dst.buffer].shape
            vars = _index_vars(len(shape))
        if s.dst.buffer.scope == "var":
            return [T.Assign(T.Subscript(self.names.of(s.dst.buffer), (), s.dst.buffer.dtype), _cast(self.value(s.value, None), s.dst.buffer.dtype))]
        layout = self._tile_layout([s.dst], shape)
        body = (tir.Store(s.dst.buffer, self._region_index(s.dst, vars, shape), s.value, s.span),)
        return self.distributed(layout, vars, body)

    def atomic_region(self, s: tir.AtomicAdd) -> list[T.Stmt]:
        assert s.src is not None
        ext = tuple(_const(e) for e in s.src.extents)
        vars, shape = self._region_loop(ext, "i")
        if s.src.buffer.scope == "fragment":
            shape = self.layouts.buffers[s.src.buffer].shape
            vars = _index_vars(len(shape))
        layout = self._tile_layout([s.src], shape)
        src_idx = self._region_index(s.src, vars, shape)
        dst_idx = self._region_index(s.dst, vars, shape)
        body = (tir.AtomicAdd(tir.Region(s.dst.buffer, dst_idx, tuple(int_(1) for _ in dst_idx)), None, tir.Load(s.src.buffer, src_idx), s.span),)
        out = self.distributed(layout, vars, body, vectorize=False)
        return _replica_guard(layout, self.tx, out)

    def atomic_element(self, s: tir.AtomicAdd) -> list[T.Stmt]:
        assert s.value is not None
        return [T.IfThen(tir.BinOp("==", self.tx, int_(0), DType.bool), tuple(self._atomic(s.dst.buffer, s.dst.starts, s.value, None)))]

    def _atomic(self, buf: tir.Buffer, idx: tuple[tir.Expr, ...], value: tir.Expr, loop: _Loop | None) -> list[T.Stmt]:
        acc = self.ref(buf, idx, loop)
        if buf.scope == "global":
            self.written.add(acc.ref.array)
        v = _cast(self.value(value, loop), buf.dtype)
        call = T.Call(T.Intrin("atomicAdd", (_AddrOf(acc.ref), v), buf.dtype))  # type: ignore[arg-type]
        return _guarded(acc.inbounds, [call])

    def gemm(self, s: tir.Gemm) -> list[T.Stmt]:
        c = s.c.buffer
        frag = self.layouts.buffers[c]
        out: list[T.Stmt] = []
        a_region = s.a
        if s.a.buffer.scope == "fragment":
            a_region, staging = self.stage_fragment(s.a)
            out += staging
        if s.b.buffer.scope == "fragment":
            raise error(s.b.span, "gemm's B operand must be in shared memory", hint="copy it to an alloc_shared buffer first")
        m, n = frag.shape if len(frag.shape) == 2 else (1, frag.shape[0])
        a_ext = [_const(e) for e in a_region.extents if _const(e) != 1] or [1]
        k_extent = a_ext[0] if s.transpose_a else a_ext[-1]
        coords = L.thread_coords(frag, self.tx)
        lm, ln = frag.local_shape
        tm, tn = frag.split(0), frag.split(1)
        acc_t = compute_dtype(c.dtype)
        cname = self.names.of(c)
        if s.clear_accum:
            i = T.Sym(self._fresh("i"), I32)
            out.append(T.Loop(i, int_(0), int_(frag.local_size), 1, True, (T.Assign(T.Subscript(cname, (_symv(i),), c.dtype), _zero(c.dtype)),)))
        kk = tir.Var(self._fresh("kk"), I32, "thread")
        self.bounds[kk] = k_extent - 1
        row_i = T.Sym(self._fresh("mi"), I32)
        col_i = T.Sym(self._fresh("ni"), I32)
        rv = _sym_var(row_i, lm, self.bounds)
        cv = _sym_var(col_i, ln, self.bounds)
        row = simplify(tir.BinOp("+", tir.BinOp("*", rv, int_(tm), I32), coords[0][0] if tm > 1 else int_(0), I32))
        col = simplify(tir.BinOp("+", tir.BinOp("*", cv, int_(tn), I32), coords[1][0] if tn > 1 else int_(0), I32))
        a_reg = self._fresh(f"{self.names.of(a_region.buffer)}_frag")
        b_reg = self._fresh(f"{self.names.of(s.b.buffer)}_frag")
        a_idx = (kk, row) if s.transpose_a else (row, kk)
        b_idx = (col, kk) if s.transpose_b else (kk, col)
        a_load = self.value(tir.Load(a_region.buffer, self._operand_index(a_region, a_idx)), None)
        b_load = self.value(tir.Load(s.b.buffer, self._operand_index(s.b, b_idx)), None)
        if lm * tm != m:
            a_load = tir.Select(_lt(row, int_(m)), a_load, _zero(a_load.dtype), a_load.dtype)
        if ln * tn != n:
            b_load = tir.Select(_lt(col, int_(n)), b_load, _zero(b_load.dtype), b_load.dtype)
        fma = T.Assign(
            T.Subscript(cname, (simplify(tir.BinOp("+", tir.BinOp("*", rv, int_(ln), I32), cv, I32)),), c.dtype),
            tir.BinOp("*", tir.Load(tir.Buffer(a_reg, (), acc_t, "local"), (rv,)), tir.Load(tir.Buffer(b_reg, (), acc_t, "local"), (cv,)), acc_t),
            "+=",
        )
        inner: tuple[T.Stmt, ...] = (
            T.Decl(a_reg, acc_t, (lm,)),
            T.Loop(row_i, int_(0), int_(lm), 1, True, (T.Assign(T.Subscript(a_reg, (rv,), acc_t), _cast(a_load, acc_t)),)),
            T.Decl(b_reg, acc_t, (ln,)),
            T.Loop(col_i, int_(0), int_(ln), 1, True, (T.Assign(T.Subscript(b_reg, (cv,), acc_t), _cast(b_load, acc_t)),)),
            T.Loop(row_i, int_(0), int_(lm), 1, True, (T.Loop(col_i, int_(0), int_(ln), 1, True, (_fma_local(fma, a_reg, b_reg),)),)),
        )
        out.append(T.Loop(T.Sym(kk.name, I32), int_(0), int_(k_extent), 1, k_extent <= 64, inner))
        return out

    def _operand_index(self, region: tir.Region, idx2: tuple[tir.Expr, tir.Expr]) -> tuple[tir.Expr, ...]:
        """Buffer index of element (idx2[0], idx2[1]) of a 2-D gemm operand region:
        the two logical dims are the region's last two non-unit dims."""
        rank = len(region.extents)
        dims = [d for d, e in enumerate(region.extents) if _const(e) != 1]
        if len(dims) < 2:
            dims = sorted(set(dims) | set(range(rank - (2 - len(dims)) - len(dims), rank)))[-2:]
        dims = dims[-2:]
        out = list(region.starts)
        for d, i in zip(dims, idx2):
            out[d] = simplify(tir.BinOp("+", region.starts[d], i, I32))
        return tuple(out)

    def stage_fragment(self, region: tir.Region) -> tuple[tir.Region, list[T.Stmt]]:
        """Write a register operand to a shared scratch tile (the SIMT gemm reads
        operands from shared memory); returns the scratch region and the code."""
        buf = region.buffer
        name = self._fresh(f"{self.names.of(buf)}_smem")
        scratch = tir.Buffer(name, buf.shape, buf.dtype, "shared", buf.span)
        self.names.given[scratch] = name
        self.shared_view(name, buf.dtype, buf.const_shape)
        frag = self.layouts.buffers[buf]
        vars = _index_vars(len(frag.shape))
        body = (tir.Store(scratch, vars, tir.Load(buf, vars)),)
        code = [_syncthreads(), *self.distributed(frag, vars, body), _syncthreads()]
        self.sync.reads.add(name)
        return tir.Region(scratch, tuple(int_(0) for _ in frag.shape), tuple(int_(x) for x in frag.shape), region.span), code

    def reduce(self, s: tir.Reduce) -> list[T.Stmt]:
        src, dst = s.src.buffer, s.dst.buffer
        sf = self.layouts.buffers[src]
        df = self.layouts.buffers[dst]
        dim = s.dim
        acc_t = compute_dtype(src.dtype)
        if not L.same_placement(df, L.reduced(sf, dim)):
            raise error(s.span, f"'{dst.name}' is not laid out as a reduction of '{src.name}'", hint="use a fresh alloc_fragment for the result")
        out: list[T.Stmt] = []
        coords = L.thread_coords(sf, self.tx)
        sname, dname = self.names.of(src), self.names.of(dst)
        rank = len(sf.shape)
        t = sf.split(dim)
        for dslot, dlocal in enumerate(L.local_indices(df)):
            acc = self._fresh("red")
            out.append(T.Decl(acc, acc_t, (), init=_identity(s.kind, acc_t)))
            for r in range(sf.local_shape[dim]):
                slocal = dlocal[:dim] + (r,) + dlocal[dim:] if rank > 1 else (r,)
                idx = L.element_index(sf, coords, slocal)
                x: tir.Expr = _cast(T.Subscript(sname, (int_(L.local_slot(sf, slocal)),), src.dtype), acc_t)  # type: ignore[arg-type]
                if s.kind in ("abssum", "absmax"):
                    x = tir.Call("abs", (x,), acc_t)
                upd = T.Assign(T.Sym(acc, acc_t), _combine(s.kind, tir.Var(acc, acc_t, "let"), x))
                pad = [_lt(i, int_(n)) for d, (i, n) in enumerate(zip(idx, sf.shape)) if sf.shape[d] % (sf.vec[d] * sf.split(d))]
                out += _guarded(_and(pad), [upd])
            if t > 1:
                out += self._cross_thread(s.kind, acc, acc_t, sf.axis_stride(dim), t)
            target = T.Subscript(dname, (int_(dslot),), dst.dtype)
            val: tir.Expr = tir.Var(acc, acc_t, "let")
            if not s.clear:
                val = _combine(s.kind, _cast(target, acc_t), val)  # type: ignore[arg-type]
            out.append(T.Assign(target, _cast(val, dst.dtype)))
        return out

    def _cross_thread(self, kind: str, acc: str, dtype: DType, stride: int, count: int) -> list[T.Stmt]:
        out: list[T.Stmt] = []
        accv = tir.Var(acc, dtype, "let")
        inner = 1
        while inner < count and stride * inner * 2 <= 32:
            inner *= 2
        mask = stride * inner // 2
        while mask >= stride and inner > 1:
            other = T.Intrin("__shfl_xor_sync", ("0xffffffffu", accv, int_(mask)), dtype)
            out.append(T.Assign(T.Sym(acc, dtype), _combine(kind, accv, other)))  # type: ignore[arg-type]
            mask //= 2
        outer = count // inner
        if outer > 1:
            red = self._red_scratch(dtype)
            step = stride * inner
            base = simplify(tir.BinOp("-", self.tx, tir.BinOp("*", tir.BinOp("%", tir.BinOp("//", self.tx, int_(step), I32), int_(outer), I32), int_(step), I32), I32))
            out += [_syncthreads(), T.Assign(T.Subscript(red, (self.tx,), dtype), accv), _syncthreads()]
            out.append(T.Assign(T.Sym(acc, dtype), T.Subscript(red, (base,), dtype)))  # type: ignore[arg-type]
            k = T.Sym(self._fresh("k"), I32)
            kv = _sym_var(k, outer, self.bounds)
            other_ref = T.Subscript(red, (simplify(tir.BinOp("+", base, tir.BinOp("*", kv, int_(step), I32), I32)),), dtype)
            out.append(T.Loop(k, int_(1), int_(outer), 1, True, (T.Assign(T.Sym(acc, dtype), _combine(kind, accv, other_ref)),)))  # type: ignore[arg-type]
        return out

    def _red_scratch(self, dtype: DType) -> str:
        if self.red_offset is None:
            name = self._fresh("red_buf")
            self.shared_view(name, DType.float64, (self.kernel.threads,))
            self.red_offset = 1
            self._red_name = name
        return f"reinterpret_cast<{dtype.cname}*>({self._red_name})"

    def cumsum(self, s: tir.CumSum) -> list[T.Stmt]:
        """One thread per line along `dim`, scanning it serially (in place is fine)."""
        src, dst = s.src, s.dst
        ext = tuple(_const(e) for e in src.extents)
        n = ext[s.dim]
        lines = ext[: s.dim] + ext[s.dim + 1 :] or (1,)
        vars = _index_vars(len(lines))
        layout = L.default(lines, self.kernel.threads, 16)
        k = tir.Var("k", I32, "loop")
        pos = simplify(tir.BinOp("-", int_(n - 1), k, I32)) if s.reverse else k
        full = (*vars[: s.dim], pos, *vars[s.dim :]) if len(ext) > 1 else (pos,)
        running = tir.Buffer("running", (), compute_dtype(src.buffer.dtype), "var")
        src_i = tuple(simplify(tir.BinOp("+", st, i, I32)) for st, i in zip(src.starts, full))
        dst_i = tuple(simplify(tir.BinOp("+", st, i, I32)) for st, i in zip(dst.starts, full))
        step = (
            tir.Store(running, (), tir.BinOp("+", tir.Load(running, ()), tir.Load(src.buffer, src_i), running.dtype)),
            tir.Store(dst.buffer, dst_i, tir.Load(running, ())),
        )
        body = (tir.Alloc(running, _zero(running.dtype)), tir.For(k, int_(0), int_(n), int_(1), "serial", step))
        return self.distributed(layout, vars, body, vectorize=False)

    def print_(self, s: tir.Print) -> list[T.Stmt]:
        if isinstance(s.value, tir.Region):
            r = s.value
            ext = tuple(_const(e) for e in r.extents)
            vars, shape = self._region_loop(ext, "i")
            if r.buffer.scope == "fragment":
                shape = self.layouts.buffers[r.buffer].shape
                vars = _index_vars(len(shape))
                layout = self.layouts.buffers[r.buffer]
            else:
                layout = L.Fragment(shape, (L.Axis(self.kernel.threads, None),), tuple(1 for _ in shape))
            idx = self._region_index(r, vars, shape)
            body = (tir.Print(tir.Load(r.buffer, idx), f"{s.msg or r.buffer.name}"),)
            out = self.distributed(layout, vars, body, vectorize=False)
            return out if r.buffer.scope == "fragment" else [T.IfThen(tir.BinOp("==", self.tx, int_(0), DType.bool), tuple(out))]
        return [T.IfThen(tir.BinOp("==", self.tx, int_(0), DType.bool), (_printf(s.msg, self.value(s.value, None)),))]

    def assert_(self, s: tir.DeviceAssert, loop: _Loop | None) -> T.Stmt:
        cond = self.value(s.cond, loop)
        msg = f"{s.span.file.path}:{s.span.line}: device_assert failed: {s.msg}"
        return T.IfThen(
            tir.UnaryOp("not", cond, DType.bool),
            (T.Call(T.Intrin("printf", (_c_string(msg + "\\n"),), I32)), T.Call(T.Intrin("__trap", (), I32))),
        )


# ---------------------------------------------------------------- helpers


@dataclass(frozen=True)
class _AddrOf:
    ref: T.Subscript
    dtype: DType = DType.int64


def _index_vars(rank: int) -> tuple[tir.Var, ...]:
    """Loop variables of a tile op's element loop: i, j, k, l, ..."""
    names = "ijklmn"
    return tuple(tir.Var(names[d] if d < len(names) else f"i{d}", I32, "loop") for d in range(rank))


def _c_string(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def _printf(msg: str, value: tir.Expr) -> T.Call:
    if value.dtype.is_float:
        fmt, arg = "%f", tir.Cast(value, DType.float64)
    elif value.dtype == DType.bool:
        fmt, arg = "%d", tir.Cast(value, I32)
    elif value.dtype.bits == 64:
        fmt, arg = "%lld", tir.Cast(value, DType.int64)
    else:
        fmt, arg = "%d", tir.Cast(value, I32)
    text = f"{msg}: {fmt}\\n" if msg else f"{fmt}\\n"
    return T.Call(T.Intrin("printf", (_c_string(text), arg), I32))  # type: ignore[arg-type]


def _raw(text: str) -> tir.Var:
    """A C expression spelled out (built-in registers such as threadIdx.x)."""
    return tir.Var(text, I32, "thread")


def _symv(sym: T.Sym) -> tir.Var:
    return tir.Var(sym.name, I32, "thread")


def _sym_var(sym: T.Sym, extent: int, bounds: dict[tir.Var, int]) -> tir.Var:
    v = tir.Var(sym.name, I32, "thread")
    bounds[v] = extent - 1
    return v


def _zero(d: DType) -> tir.Expr:
    if d.is_float:
        return tir.FloatImm(0.0, compute_dtype(d))
    if d == DType.bool:
        return tir.BoolImm(False)
    return tir.IntImm(0, d)


def _identity(kind: str, d: DType) -> tir.Expr:
    inf = float("inf")
    if kind == "max":
        return tir.FloatImm(-inf, d) if d.is_float else tir.IntImm(-(2 ** (d.bits - 1)), d)
    if kind == "min":
        return tir.FloatImm(inf, d) if d.is_float else tir.IntImm(2 ** (d.bits - 1) - 1, d)
    return _zero(d)


def _combine(kind: str, a: tir.Expr, b: tir.Expr) -> tir.Expr:
    d = a.dtype
    if kind in ("max", "absmax"):
        return tir.Call("max", (a, b), d)
    if kind == "min":
        return tir.Call("min", (a, b), d)
    return tir.BinOp("+", a, b, d)


def _const(e: tir.Expr) -> int:
    assert isinstance(e, tir.IntImm), f"non-constant extent {e}"
    return e.value


def _vec_width(last: int, regions: list[tir.Region]) -> int:
    v = 16 // max(r.buffer.dtype.bytes for r in regions)
    while v > 1 and last % v:
        v //= 2
    return max(v, 1)


def _flatten(idx: tuple[tir.Expr, ...], shape: tuple[tir.Expr, ...]) -> tir.Expr:
    flat: tir.Expr = int_(0)
    for i, d in zip(idx, shape):
        flat = tir.BinOp("+", tir.BinOp("*", flat, d, I32), i, I32)
    return simplify(flat)


def _guarded(cond: tir.Expr, body: list[T.Stmt]) -> list[T.Stmt]:
    if isinstance(cond, tir.BoolImm):
        return body if cond.value else []
    return [T.IfThen(cond, tuple(body))]


def _replica_guard(layout: L.Fragment, tx: tir.Var, body: list[T.Stmt]) -> list[T.Stmt]:
    """Only replica 0 of a replicated layout does side effects (atomics)."""
    if not layout.replicated:
        return body
    coords = L.thread_coords(layout, tx)
    conds = [tir.BinOp("==", c, int_(0), DType.bool) for c in coords.get(None, [])]
    return _guarded(_and(conds), body)


def _upper(e: tir.Expr, bounds: dict[tir.Var, int]) -> int | None:
    """An upper bound of a nonnegative index expression, or None if unknown."""
    match e:
        case tir.IntImm(v):
            return v
        case tir.Var():
            for k, v in bounds.items():
                if k is e or (k.name == e.name and k.kind == e.kind):
                    return v
            return None
        case tir.BinOp("+", a, b):
            ua, ub = _upper(a, bounds), _upper(b, bounds)
            return None if ua is None or ub is None else ua + ub
        case tir.BinOp("*", a, b):
            ua, ub = _upper(a, bounds), _upper(b, bounds)
            return None if ua is None or ub is None else ua * ub
        case tir.BinOp("//", a, tir.IntImm(c)) if c > 0:
            ua = _upper(a, bounds)
            return None if ua is None else ua // c
        case tir.BinOp("%", _, tir.IntImm(c)) if c > 0:
            return c - 1
        case _:
            return None


def _key(e: tir.Expr) -> object:
    return e


def _collect_loads(e: tir.Expr, out: list[tir.Load]) -> None:
    match e:
        case tir.Load(_, idx):
            out.append(e)
            for i in idx:
                _collect_loads(i, out)
        case tir.BinOp(_, a, b):
            _collect_loads(a, out)
            _collect_loads(b, out)
        case tir.UnaryOp(_, a) | tir.Cast(a):
            _collect_loads(a, out)
        case tir.Select(c, a, b):
            for x in (c, a, b):
                _collect_loads(x, out)
        case tir.Call(_, args):
            for x in args:
                _collect_loads(x, out)
        case _:
            pass


def _replace_loads(e: tir.Expr, table: dict[tir.Load, tir.Expr]) -> tir.Expr:
    match e:
        case tir.Load(buf, idx):
            for k, v in table.items():
                if k is e or (k.buffer is buf and k.indices == idx):
                    return v
            return e
        case tir.BinOp(op, a, b, d):
            return tir.BinOp(op, _replace_loads(a, table), _replace_loads(b, table), d, e.span)
        case tir.UnaryOp(op, a, d):
            return tir.UnaryOp(op, _replace_loads(a, table), d, e.span)
        case tir.Cast(v, d):
            return tir.Cast(_replace_loads(v, table), d, e.span)
        case tir.Select(c, a, b, d):
            return tir.Select(_replace_loads(c, table), _replace_loads(a, table), _replace_loads(b, table), d, e.span)
        case tir.Call(f, args, d):
            return tir.Call(f, tuple(_replace_loads(x, table) for x in args), d, e.span)
        case _:
            return e


def _vec_moves(dst: T.Subscript, src: T.Subscript, width: int) -> list[T.Stmt]:
    """16-byte (or narrower) moves of `width` elements from src to dst."""
    total = width * src.dtype.bytes
    chunk = min(16, total)
    per = chunk // src.dtype.bytes
    out: list[T.Stmt] = []
    for k in range(total // chunk):
        d = _offset(dst, k * per)
        s = _offset(src, k * per)
        out.append(T.Assign(T.VecRef(d, chunk), T.VecRef(s, chunk)))
    return out


def _offset(ref: T.Subscript, delta: int) -> T.Subscript:
    if delta == 0:
        return ref
    idx = ref.indices[:-1] + (simplify(tir.BinOp("+", ref.indices[-1], int_(delta), I32)),)
    return T.Subscript(ref.array, idx, ref.dtype)


def _fma_local(fma: T.Assign, a_reg: str, b_reg: str) -> T.Assign:
    """Rewrite the register loads of a gemm update into subscripts."""
    assert isinstance(fma.value, tir.BinOp)
    a, b = fma.value.a, fma.value.b
    assert isinstance(a, tir.Load) and isinstance(b, tir.Load)
    sa = T.Subscript(a_reg, a.indices, a.buffer.dtype)
    sb = T.Subscript(b_reg, b.indices, b.buffer.dtype)
    return T.Assign(fma.target, tir.BinOp("*", sa, sb, fma.value.dtype), "+=")  # type: ignore[arg-type]


def substitute_stmt(s: tir.Stmt, env: dict[tir.Var, tir.Expr]) -> tir.Stmt:
    """Bind loop variables in a Parallel body statement."""
    sub = lambda e: simplify(substitute(e, env))  # noqa: E731
    match s:
        case tir.Store(buf, idx, value):
            return tir.Store(buf, tuple(sub(i) for i in idx), sub(value), s.span)
        case tir.Let(var, value):
            return tir.Let(var, sub(value), s.span)
        case tir.If(cond, then, orelse):
            return tir.If(sub(cond), tuple(substitute_stmt(t, env) for t in then), tuple(substitute_stmt(t, env) for t in orelse), s.span)
        case tir.For(var, start, stop, step, kind, body, stages):
            return tir.For(var, sub(start), sub(stop), step, kind, tuple(substitute_stmt(t, env) for t in body), stages, s.span)
        case tir.AtomicAdd(dst, src, value) if value is not None:
            return tir.AtomicAdd(tir.Region(dst.buffer, tuple(sub(i) for i in dst.starts), dst.extents, dst.span), src, sub(value), s.span)
        case tir.Print(value, msg) if not isinstance(value, tir.Region):
            return tir.Print(sub(value), msg, s.span)
        case tir.DeviceAssert(cond, msg):
            return tir.DeviceAssert(sub(cond), msg, s.span)
        case _:
            return s


def _shared_rw(s: tir.Stmt) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    """Shared buffers a tile op reads and writes."""
    reads: set[tir.Buffer] = set()
    writes: set[tir.Buffer] = set()

    def rd(e: object) -> None:
        if isinstance(e, tir.Load):
            if e.buffer.scope == "shared":
                reads.add(e.buffer)
            for i in e.indices:
                rd(i)
        elif isinstance(e, tir.BinOp):
            rd(e.a)
            rd(e.b)
        elif isinstance(e, (tir.UnaryOp,)):
            rd(e.a)
        elif isinstance(e, tir.Cast):
            rd(e.value)
        elif isinstance(e, tir.Select):
            rd(e.cond)
            rd(e.a)
            rd(e.b)
        elif isinstance(e, tir.Call):
            for a in e.args:
                rd(a)

    def region(r: tir.Region | None, out: set[tir.Buffer]) -> None:
        if r is not None and r.buffer.scope == "shared":
            out.add(r.buffer)

    def walk(x: tir.Stmt) -> None:
        match x:
            case tir.Copy(src, dst):
                region(src, reads)
                region(dst, writes)
            case tir.Gemm(a, b, c):
                region(a, reads)
                region(b, reads)
            case tir.Fill(dst, v):
                region(dst, writes)
                rd(v)
            case tir.Reduce(src=src, dst=dst):
                region(src, reads)
                region(dst, writes)
            case tir.CumSum(src=src, dst=dst):
                region(src, reads)
                region(dst, writes)
            case tir.AtomicAdd(dst, src, value):
                region(src, reads)
                if value is not None:
                    rd(value)
            case tir.Store(buf, idx, value):
                if buf.scope == "shared":
                    writes.add(buf)
                for i in idx:
                    rd(i)
                rd(value)
            case tir.Let(_, value):
                rd(value)
            case tir.If(cond, then, orelse):
                rd(cond)
                for t in then + orelse:
                    walk(t)
            case tir.For(body=body) | tir.Parallel(body=body):
                for t in body:
                    walk(t)
            case tir.Print(value=value):
                if isinstance(value, tir.Region):
                    region(value, reads)
                else:
                    rd(value)
            case tir.DeviceAssert(cond=cond):
                rd(cond)
            case _:
                pass

    walk(s)
    return reads, writes


def _touches_shared(stmts: tuple[tir.Stmt, ...]) -> bool:
    for s in stmts:
        r, w = _shared_rw(s)
        if r or w or isinstance(s, (tir.Reduce, tir.Gemm)):
            return True
    return False


def _comment(s: tir.Stmt) -> str:
    return f"{_where(s)}: {' '.join(s.span.text.split())}" if s.span.text else type(s).__name__


def _where(s: tir.Stmt) -> str:
    import os

    return f"{os.path.basename(s.span.file.path)}:{s.span.line}"


def _expr_text(e: tir.Expr) -> str:
    from tilec.emit import expr_text

    return expr_text(e)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _names_used(x: object, out: set[str]) -> None:
    """Every identifier an expression or statement mentions (C text included)."""
    match x:
        case tir.Var(name) | T.Sym(name):
            out.update(_IDENT.findall(name))
        case T.Subscript(array, indices):
            out.update(_IDENT.findall(array))
            for i in indices:
                _names_used(i, out)
        case T.Decl(init=init) | T.Assign(value=init) if init is not None:
            _names_used(init, out)
            if isinstance(x, T.Assign):
                _names_used(x.target, out)
        case T.VecRef(target):
            _names_used(target, out)
        case T.Loop(var, start, stop, _, _, body):
            for e in (start, stop, *body):
                _names_used(e, out)
        case T.IfThen(cond, then, orelse):
            for e in (cond, *then, *orelse):
                _names_used(e, out)
        case T.Scope(body=body):
            for e in body:
                _names_used(e, out)
        case T.Call(call):
            _names_used(call, out)
        case T.Intrin(args=args) | tir.Call(args=args):
            for a in args:
                if not isinstance(a, str):
                    _names_used(a, out)
        case tir.BinOp(a=a, b=b):
            _names_used(a, out)
            _names_used(b, out)
        case tir.UnaryOp(a=a) | tir.Cast(value=a):
            _names_used(a, out)
        case tir.Select(cond, a, b):
            for e in (cond, a, b):
                _names_used(e, out)
        case _AddrOf(ref):
            _names_used(ref, out)
        case _:
            pass


def drop_unused(body: list[T.Stmt]) -> list[T.Stmt]:
    """Remove `const` scalar declarations nothing reads (nvcc warns on them)."""
    while True:
        used: set[str] = set()
        for s in body:
            _names_used(s, used)
        pruned = _prune(body, used)
        if pruned == body:
            return body
        body = pruned


def _prune(stmts: list[T.Stmt], used: set[str]) -> list[T.Stmt]:
    out: list[T.Stmt] = []
    for s in stmts:
        match s:
            case T.Decl(name, const=True, dims=()) if name not in used:
                continue
            case T.Loop(var, start, stop, step, unroll, body):
                out.append(T.Loop(var, start, stop, step, unroll, tuple(_prune(list(body), used))))
            case T.IfThen(cond, then, orelse):
                out.append(T.IfThen(cond, tuple(_prune(list(then), used)), tuple(_prune(list(orelse), used))))
            case T.Scope(comment, body, span):
                out.append(T.Scope(comment, tuple(_prune(list(body), used)), span))
            case _:
                out.append(s)
    return out


def lower_kernel(kernel: tir.Kernel, layouts: Layouts, target: Target) -> T.Kernel:
    return KernelLowering(kernel, layouts, target).run()
