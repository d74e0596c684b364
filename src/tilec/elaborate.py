"""Elaborate a parsed .tile file into the checked Tile IR (`tir.Program`).

Params and `-D` overrides, constant folding, imports, macro inlining, names,
dtypes, shapes and memory scopes. Every user mistake becomes a Diagnostic;
several are collected per run (each statement is checked on its own, and a
name whose definition failed is "poisoned" so its uses stay quiet).

    param block_M = 64
    kernel k(A: Tensor((M,), float32)):          kernel k(A: float32[M] global)  dims (M,)
        with Kernel(ceildiv(M, block_M),    ->     grid ((M + 63) // 64,) threads 128 as (bx,)
                    threads=128) as bx:            A_s: float32[64] shared
            A_s = alloc_shared((block_M,), float32)  copy A[bx * 64 : +64] -> A_s[0 : 64]
            copy(A[bx * block_M], A_s)

This module holds kernels and statements; its helpers are params.py (files,
imports, params, -D), tensors.py (tensor parameters, strides, views),
expressions.py (expressions), fold.py (literal typing, folding), builtins.py
(signatures, argument binding), shapes.py (tile operands and op checks) and
values.py (what names are bound to).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from tilec import fold, shapes, tir, tir_walk
from tilec import syntax as S
from tilec.budget import (
    MAX_BLOCK_NESTING,
    MAX_EXPR_NESTING,
    MAX_MACRO_NESTING,
    MAX_STATEMENTS,
    MAX_SUBSTITUTED_NODES,
    REGISTER_FACTOR,
    register_limit,
    registers,
    tree_size,
)
from tilec.builtins import (
    ALL_SIGS,
    ALLOC_SCOPE,
    ALLOCS,
    BUILTIN_NAMES,
    FUNCS,
    LOOPS,
    POLICIES,
    SHARED_LAYOUTS,
    TILE_OPS,
    Sig,
    bind,
    did_you_mean,
    unsupported,
)
from tilec.diagnostics import CompileError, Diagnostic, Note, error
from tilec.dtypes import DTYPE_NAMES, DTYPES, DType
from tilec.fold import Val
from tilec.params import Fatal, File
from tilec.schedules import read_schedule
from tilec.shared_plan import declared_bytes, peak_tiles
from tilec.source import NO_SPAN, Span
from tilec.targets import Target, get_target
from tilec.tensors import TensorElaborator, check_packed_shape
from tilec.uniformity import not_uniform
from tilec.values import (
    POISON,
    Abandon,
    BufVal,
    BuiltinVal,
    DTypeVal,
    MacroVal,
    Poison,
    PolicyVal,
    Scope,
    SubVal,
    Value,
)


def elaborate_file(
    path: str, defines: dict[str, str] | None = None, text: str | None = None, arch: str = "sm_80"
) -> tir.Program:
    """Parse and check `path` (or `text`, shown as `path`); raise CompileError
    carrying every diagnostic found."""
    return _Elaborator(dict(defines or {}), arch).run(path, text)


@dataclass
class _KernelState:
    name: str
    used: set[str] = field(default_factory=set)
    tensors: list[tir.Buffer] = field(default_factory=list)
    views: list[tir.Buffer] = field(default_factory=list)
    scalars: list[tir.Var] = field(default_factory=list)
    dims: list[tir.Var] = field(default_factory=list)
    shared: list[tir.Buffer] = field(default_factory=list)
    in_block: bool = False
    depth: int = 0  # loop / if nesting inside the Kernel block
    in_parallel: bool = False  # inside the body of a Parallel loop
    loops: list[str] = field(default_factory=list)  # kinds of the loops around the statement, innermost last
    block: tuple[tuple[tir.Expr, ...], tuple[tir.Var, ...], int, tuple[tir.Stmt, ...]] | None = None
    block_span: Span | None = None
    macros: list[tuple[str, Span]] = field(default_factory=list)  # the inlining stack
    threads: int = 0  # of the Kernel block, once its header is checked
    thread_shape: tuple[int, ...] = ()  # `threads=(x, y[, z])`: the extents get_thread_binding(d) indexes
    statements: int = 0  # elaborated so far, macro bodies once per call
    fragment_registers: list[tuple[tir.Buffer, int]] = field(default_factory=list)  # per thread
    next_suffix: dict[str, int] = field(default_factory=dict)  # name -> the first suffix not yet tried

    def fresh(self, name: str) -> str:
        """A name unique in this kernel: the user's, else name_1, name_2...; the
        search resumes where the last one for `name` stopped (used names stay used)."""
        candidate, n = name, self.next_suffix.get(name, 0)
        while candidate in self.used:
            n += 1
            candidate = f"{name}_{n}"
        self.next_suffix[name] = n
        self.used.add(candidate)
        return candidate


class _OverBudget(Exception):
    """Stop elaborating a kernel: a compile-work budget (budget.py) is spent; the
    diagnostic is already reported."""


class _Elaborator(TensorElaborator):
    @property
    def target(self) -> Target:
        """The arch's record: its shared-memory limit and warp size bound what a kernel may use."""
        return get_target(self.arch)

    def run(self, path: str, text: str | None) -> tir.Program:
        try:
            main = self.load(path, text, None, [])
        except Fatal as f:
            raise CompileError(self.diags + f.diags) from None
        kernels = []
        for item in main.module.items:
            if isinstance(item, S.KernelDef):
                k = self.kernel(item, main)
                if k is not None:
                    kernels.append(k)
        self.check_defines()
        if self.diags:
            raise CompileError(self.diags, tuple(self.candidate_sets))
        return tir.Program(tuple(kernels), tuple(self.files), tuple(self.candidate_sets))

    # ------------------------------------------------------------ kernels

    def kernel(self, k: S.KernelDef, env: File) -> tir.Kernel | None:
        kx = _KernelState(k.name)
        scope = env.scope.child()
        before = len(self.diags)
        for p in k.params:
            try:
                self.kparam(p, scope, kx)
            except CompileError as e:
                scope.names[p.name] = POISON
                self.report(e.diagnostics)
            except Abandon:
                scope.names[p.name] = POISON
        try:
            self.block(k.body, scope, kx)
        except _OverBudget:
            return None
        if kx.block is None:
            if kx.block_span is None and len(self.diags) == before:  # not a Kernel block that failed
                self.diags.append(
                    Diagnostic(
                        k.span,
                        f"kernel '{k.name}' has no Kernel block",
                        hint="put its body in `with Kernel(grid, threads=128) as bx:`",
                    )
                )
            return None
        grid, block_vars, threads, body = kx.block
        self.check_types(kx.tensors, body)
        kernel = tir.Kernel(
            k.name,
            tuple(kx.tensors),
            tuple(kx.scalars),
            tuple(kx.dims),
            grid,
            block_vars,
            threads,
            body,
            k.span,
            tuple(kx.views),
        )
        self.check_shared_memory(k, kx, kernel)
        self.check_registers(k, kx)
        return kernel

    def check_shared_memory(self, k: S.KernelDef, kx: _KernelState, kernel: tir.Kernel) -> None:
        """The most bytes of shared tiles live at once (tiles whose lifetimes do not meet share
        bytes: shared_plan.py) against the target's limit."""
        limit = self.target.smem_limit
        live = peak_tiles(kernel, kx.shared)
        total = sum(declared_bytes(b) for b in live)
        if total > limit:
            largest = sorted(live, key=lambda b: -declared_bytes(b))[:4]
            self.diags.append(
                Diagnostic(
                    k.span,
                    f"kernel '{k.name}' uses {total} bytes of shared memory; {self.arch} allows {limit}",
                    hint="use smaller tiles or fewer pipeline stages",
                    notes=tuple(Note(b.span, f"'{b.name}' takes {declared_bytes(b)} bytes") for b in largest),
                    limit="shared memory",
                )
            )

    def check_types(self, tensors: list[tir.Buffer], body: tuple[tir.Stmt, ...]) -> None:
        """Each tensor or allocation of an element type the target's language has no type for
        (Target.missing_types: AMD's FNUZ fp8 on CUDA) is reported once, where it is declared."""
        allocs = [s.buffer for s in tir_walk.stmts(body) if isinstance(s, tir.Alloc)]
        for buf in (*tensors, *allocs):
            hint = self.target.missing_types.get(buf.dtype)
            if hint is not None:
                message = f"'{buf.name}' is {buf.dtype.tile_name}, which {self.arch} does not support"
                self.diags.append(Diagnostic(buf.span, message, hint=hint))

    def check_registers(self, k: S.KernelDef, kx: _KernelState) -> None:
        limit = register_limit(self.target.max_registers)
        total = sum(n for _, n in kx.fragment_registers)
        if total <= limit:
            return
        largest = sorted(kx.fragment_registers, key=lambda item: -item[1])[:4]
        self.diags.append(
            Diagnostic(
                k.span,
                f"kernel '{k.name}' needs {total} registers per thread for its fragments and local arrays; "
                f"{self.register_rule()}",
                hint=self.register_hint(),
                notes=tuple(Note(buf.span, f"'{buf.name}' needs {n} registers per thread") for buf, n in largest),
            )
        )

    def register_rule(self) -> str:
        most = self.target.max_registers
        return f"tilec allows {register_limit(most)} ({REGISTER_FACTOR} x the {most} registers a thread can have)"

    def register_hint(self) -> str:
        return (
            f"use smaller tiles or more threads; past {self.target.max_registers} registers "
            "a thread spills to local memory"
        )

    def kparam(self, p: S.KParam, scope: Scope, kx: _KernelState) -> None:
        if p.name in scope.names:
            raise error(p.name_span, f"'{p.name}' is already a parameter or dimension of kernel '{kx.name}'")
        if p.name in BUILTIN_NAMES:
            raise error(p.name_span, f"'{p.name}' is a built-in name", hint="give it another name")
        t = p.type
        if isinstance(t, S.Call) and isinstance(t.func, S.Name) and t.func.id == "Tensor":
            self.tensor_param(p, t, scope, kx)
            return
        if isinstance(t, S.Call) and isinstance(t.func, S.Name) and t.func.id in DTYPE_NAMES:
            raise error(
                t.span,
                f"the type of scalar '{p.name}' is a dtype alone, not a call of {t.func.id}",
                hint=f"a tensor is Tensor((dims...), {t.func.id}), with strides=(...) for a view",
            )
        if isinstance(t, S.Name) and t.id not in DTYPE_NAMES and scope.lookup(t.id) is None and t.id not in ALL_SIGS:
            unsupported(t.id, t.span)
            hint = (
                did_you_mean(t.id, list(DTYPES) + ["Tensor"])
                or "write Tensor((dims...), dtype) or a dtype like float32"
            )
            raise error(t.span, f"unknown type '{t.id}'", hint=hint)
        v = self.ev(t, scope, kx)
        if not isinstance(v, DTypeVal):
            raise error(t.span, f"the type of '{p.name}' must be Tensor((dims...), dtype) or a dtype")
        if v.dtype.is_subbyte:
            raise error(
                t.span,
                f"a scalar argument cannot be {v.dtype.tile_name}: sub-byte elements exist only packed in tensors",
                hint=f"pass it as {v.dtype.value_type.tile_name}",
            )
        var = tir.Var(kx.fresh(p.name), v.dtype, "scalar", p.span)
        kx.scalars.append(var)
        scope.names[p.name] = Val(var)

    def block(self, body: tuple[S.Stmt, ...], scope: Scope, kx: _KernelState) -> tuple[tir.Stmt, ...]:
        out: list[tir.Stmt] = []
        for s in body:
            kx.statements += 1
            if kx.statements > MAX_STATEMENTS:
                message = f"kernel '{kx.name}' has more than {MAX_STATEMENTS} statements once its macros are inlined"
                self.over_budget(s.span, message, "split the work into several kernels, or loop over it", kx)
            try:
                out += self.stmt(s, scope, kx)
            except CompileError as e:
                self.report(e.diagnostics, kx)
            except Abandon:
                pass
        return tuple(out)

    def over_budget(self, span: Span, message: str, hint: str, kx: _KernelState) -> None:
        """Report a spent compile-work budget (docs/language.md, Limits) and stop the kernel."""
        self.report([Diagnostic(span, message, hint=hint)], kx)
        raise _OverBudget()

    def stmt(self, s: S.Stmt, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        match s:
            case S.Pass():
                return []
            case S.With():
                return self.kernel_block(s, scope, kx)
            case S.Assign():
                return self.assign(s, scope, kx)
            case S.AugAssign():
                return self.aug_assign(s, scope, kx)
            case S.ExprStmt():
                return self.expr_stmt(s, scope, kx)
            case S.For():
                return self.for_(s, scope, kx)
            case S.If():
                return self.if_(s, scope, kx)
            case S.While():
                return self.while_(s, scope, kx)
            case S.Break():
                return [self.break_(s, kx)]
        raise AssertionError(s)

    def while_(self, s: S.While, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        """`while cond:` at block level; uniformity.py checks that `cond` is block-uniform."""
        self.not_in_parallel("while", s.span, kx)
        cond = self.condition(s.cond, scope, kx)
        body = self.loop_body(s.body, scope.child(), kx, "while")
        return [tir.While(cond.expr, body, s.span)]

    def break_(self, s: S.Break, kx: _KernelState) -> tir.Stmt:
        """`break` out of the innermost serial or while loop."""
        self.not_in_parallel("break", s.span, kx)
        if not kx.loops:
            raise error(s.span, "`break` outside a loop", hint="break leaves a serial(...) or while loop")
        if kx.loops[-1] not in ("serial", "while"):
            raise error(
                s.span,
                f"`break` out of {'an' if kx.loops[-1] == 'unroll' else 'a'} {kx.loops[-1]} loop is not supported",
                hint="only serial(...) and while loops can be left with break",
            )
        return tir.Break(s.span)

    def not_in_parallel(self, word: str, span: Span, kx: _KernelState) -> None:
        """`while` and `break` are statements of the whole block, never of Parallel's iterations."""
        self.need_block(f"`{word}`", span, kx)
        if kx.in_parallel:
            raise error(
                span,
                f"`{word}` is not supported inside `Parallel`",
                hint="the iterations of a Parallel loop run at once, spread over the threads; loop with serial(...)",
            )

    def loop_body(self, body: tuple[S.Stmt, ...], scope: Scope, kx: _KernelState, kind: str) -> tuple[tir.Stmt, ...]:
        """The body of a loop of `kind` (serial, unroll, pipelined, while), which a `break` leaves."""
        kx.loops.append(kind)
        try:
            return self.nested(body, scope, kx)
        finally:
            kx.loops.pop()

    def need_block(self, what: str, span: Span, kx: _KernelState) -> None:
        if not kx.in_block:
            raise error(span, f"{what} outside the Kernel block", hint="move it inside `with Kernel(...) as ...:`")

    def kernel_block(self, s: S.With, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        call = s.context
        if kx.in_block or kx.macros:
            raise error(s.span, "`with Kernel(...)` must be directly in the kernel body")
        if kx.block is not None or kx.block_span is not None:
            first = kx.block_span
            raise error(
                s.span,
                f"kernel '{kx.name}' has a second Kernel block",
                notes=(Note(first, "the first one is here"),) if first else (),
                hint="a kernel has exactly one Kernel block; write a second kernel",
            )
        kx.block_span = s.span
        if isinstance(call, S.Call) and isinstance(call.func, S.Attribute):
            self.callee(call, scope, kx)  # reports `T.Kernel` helpfully
        if not (isinstance(call, S.Call) and self.callee_name(call, scope) == "Kernel"):
            raise error(call.span, "expected `with Kernel(grid..., threads=T) as (bx, ...)`")
        b = bind(call, "Kernel", ALL_SIGS["Kernel"])
        grid = tuple(self.int_expr(g, scope, kx, "a grid extent") for g in b.rest)
        kx.thread_shape = self.thread_shape(b.args.get("threads"), scope, kx)
        threads = math.prod(kx.thread_shape)
        if not self.target.block_size_ok(threads):
            node = b.args.get("threads") or call
            raise error(node.span, f"{self.target.block_size_rule()}; got {threads}", hint="use 128 or 256 threads")
        if len(s.targets) != len(grid):
            raise error(
                s.span,
                f"Kernel has {len(grid)} grid dimension{'s' if len(grid) > 1 else ''} but "
                f"{len(s.targets)} block variable{'s' if len(s.targets) > 1 else ''}",
                hint="name one block index per grid dimension: `as (bx, by)`",
            )
        inner = scope.child()
        block_vars = tuple(self.bind_var(t, inner, kx, "block") for t in s.targets)
        kx.threads = threads
        kx.in_block = True
        body = self.block(s.body, inner, kx)
        kx.in_block = False
        self.report(not_uniform(body))
        kx.block = (grid, block_vars, threads, body)
        return []

    def thread_shape(self, node: S.Expr | None, scope: Scope, kx: _KernelState) -> tuple[int, ...]:
        """`threads=T`, or TileLang's `threads=(x, y[, z])`: a block of x * y * z threads, launched
        one-dimensional; get_thread_binding(d) takes its index apart, x fastest."""
        if not isinstance(node, S.Tuple):
            return (self.const_int(node, scope, kx, "threads", 128),)
        if not 1 <= len(node.items) <= 3:
            raise error(node.span, "threads=(x, y, z) has one to three extents", hint="threads=(32, 4)")
        shape = tuple(self.const_int(t, scope, kx, "a thread extent", 1) for t in node.items)
        for t, n in zip(node.items, shape, strict=True):
            if n < 1:
                raise error(t.span, f"a thread extent must be positive; got {n}")
        return shape

    def bind_var(self, t: S.Name, scope: Scope, kx: _KernelState, kind: tir.VarKind) -> tir.Var:
        self.check_new_name(t.id, t.span, scope)
        var = tir.Var(kx.fresh(t.id), DType.int32, kind, t.span)
        scope.names[t.id] = Val(var)
        return var

    def check_new_name(self, name: str, span: Span, scope: Scope) -> None:
        old = scope.lookup(name)
        if isinstance(old, Poison):
            raise Abandon()
        if old is not None:
            raise error(
                span,
                f"'{name}' is already defined; names cannot be rebound",
                hint="use another name, or x = alloc_var(dtype) for a variable you assign to",
            )
        if name in BUILTIN_NAMES:
            raise error(span, f"'{name}' is a built-in name", hint="give it another name")

    def assign(self, s: S.Assign, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        target = s.target
        if isinstance(target, S.Subscript):
            return self.store(target, None, s.value, s.span, scope, kx)
        if not isinstance(target, S.Name):
            raise error(
                target.span, "cannot assign to this expression", hint="assign to a name or to an element like buf[i, j]"
            )
        old = scope.lookup(target.id)
        if isinstance(old, BufVal) and old.buffer.scope == "var":
            self.need_block("assignment", s.span, kx)
            value = self.scalar(s.value, scope, kx)
            return [tir.Store(old.buffer, (), fold.convert(value, old.buffer.dtype, s.span), s.span)]
        self.check_new_name(target.id, target.span, scope)
        try:
            if isinstance(s.value, S.Call) and self.callee_name(s.value, scope) == "Tensor":
                return self.view(target, s.value, scope, kx)
            alloc = self.alloc_kind(s.value, scope)
            if alloc is not None:
                return self.alloc(target, s.value, alloc, s.span, scope, kx)  # type: ignore[arg-type]  # alloc_kind: a Call
            return self.let(target, self.ev(s.value, scope, kx), s.span, scope, kx)
        except (CompileError, Abandon):
            scope.names[target.id] = POISON
            raise

    def let(self, target: S.Name, v: Value, span: Span, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        if isinstance(v, Poison):
            raise Abandon()
        if isinstance(v, (BuiltinVal, MacroVal)):
            raise error(span, f"cannot bind a name to '{v.name if isinstance(v, BuiltinVal) else v.macro.name}'")
        if isinstance(v, SubVal) and v.is_element:
            v = self.as_val(v, span)
        if isinstance(v, BufVal) and v.buffer.scope == "var":
            v = self.as_val(v, span)
        if not isinstance(v, Val) or fold.const(v.expr) is not None or isinstance(v.expr, tir.Var) or not kx.in_block:
            if isinstance(v, Val):
                where = "names bound before the Kernel block are substituted where they are used"
                self.check_substituted(target.id, v.expr, span, where + "; bind it inside the block, computed once")
            scope.names[target.id] = v
            return []
        var = tir.Var(kx.fresh(target.id), v.dtype, "let", target.span)
        scope.names[target.id] = Val(var)
        return [tir.Let(var, v.expr, span)]

    @staticmethod
    def check_substituted(name: str, e: tir.Expr, span: Span, hint: str) -> None:
        """A name bound to an expression stands for it where it is used: keep that bounded."""
        nodes, depth = tree_size(e)
        if nodes > MAX_SUBSTITUTED_NODES or depth > MAX_EXPR_NESTING:
            raise error(
                span,
                f"'{name}' stands for an expression of {nodes} terms, {depth} levels deep, once the names in it "
                f"are substituted; tilec allows {MAX_SUBSTITUTED_NODES} terms and {MAX_EXPR_NESTING} levels",
                hint=hint,
            )

    def aug_assign(self, s: S.AugAssign, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        target = s.target
        if isinstance(target, S.Subscript):
            return self.store(target, s.op, s.value, s.span, scope, kx)
        if isinstance(target, S.Name):
            old = scope.lookup(target.id)
            if isinstance(old, Poison):
                raise Abandon()
            if isinstance(old, BufVal) and old.buffer.scope == "var":
                self.need_block("assignment", s.span, kx)
                cur = Val(tir.Load(old.buffer, (), target.span))
                value = fold.binop(s.op, cur, self.scalar(s.value, scope, kx), s.span)
                return [tir.Store(old.buffer, (), fold.convert(value, old.buffer.dtype, s.span), s.span)]
            if old is None and target.id not in BUILTIN_NAMES:
                raise self.unknown(target, scope)
            raise error(
                target.span,
                f"cannot update '{target.id}': names cannot be rebound",
                hint=f"declare it with {target.id} = alloc_var(dtype, init) to update it",
            )
        raise error(target.span, "cannot assign to this expression")

    def store(
        self, target: S.Subscript, op: str | None, value_node: S.Expr, span: Span, scope: Scope, kx: _KernelState
    ) -> list[tir.Stmt]:
        self.need_block("assignment", span, kx)
        sub = self.ev(target, scope, kx)
        if isinstance(sub, Poison):
            raise Abandon()
        assert isinstance(sub, SubVal)
        if not sub.is_element:
            raise error(target.span, "cannot assign to a region", hint="use copy() or fill() for tiles")
        indices = tuple(sub.items)  # an element: no SliceVal among the items
        if sub.buffer.dtype.is_subbyte:
            t = sub.buffer.dtype
            raise error(
                target.span,
                f"cannot store one element of {t.tile_name} buffer '{sub.buffer.name}': two elements share a "
                "byte, and the threads writing them would race",
                hint="fill sub-byte tiles with copy() or fill(); to write packed data, declare the tensor uint8 "
                "and store whole bytes: Q[i, j] = (lo & 15) | (hi << 4)",
            )
        value = self.scalar(value_node, scope, kx)
        if op is not None:
            value = fold.binop(op, Val(tir.Load(sub.buffer, indices, target.span)), value, span)  # type: ignore[arg-type]  # (as above)
        return [tir.Store(sub.buffer, indices, fold.convert(value, sub.buffer.dtype, span), span)]  # type: ignore[arg-type]  # (as above)

    # ------------------------------------------------------------ allocations

    def alloc_kind(self, node: S.Expr, scope: Scope) -> str | None:
        if isinstance(node, S.Call):
            name = self.callee_name(node, scope)
            if name in ALLOCS:
                return name
        return None

    def alloc(
        self, target: S.Name, call: S.Call, kind: str, span: Span, scope: Scope, kx: _KernelState
    ) -> list[tir.Stmt]:
        self.need_block(f"{kind}()", call.span, kx)
        b = bind(call, kind, ALLOCS[kind])
        buf_scope = ALLOC_SCOPE[kind]
        if buf_scope != "var" and kx.depth > 0:
            raise error(
                call.span,
                f"{kind}() must be at the top level of the Kernel block",
                hint="allocate before the loop or if, and reuse the buffer inside it",
            )
        dtype = self.dtype_arg(b.args["dtype"], scope, kx)
        if dtype.is_subbyte and buf_scope != "shared":
            raise error(
                b.args["dtype"].span,
                f"{kind}() cannot hold {dtype.tile_name}: sub-byte elements exist only packed, in tensors and "
                "shared tiles",
                hint=f"use alloc_shared for a packed tile, or {dtype.value_type.tile_name} registers: "
                f"alloc_fragment(shape, {dtype.value_type.tile_name})",
            )
        if buf_scope == "var":
            init_node = b.args.get("init")
            init = None
            if init_node is not None:
                init = fold.convert(self.scalar(init_node, scope, kx), dtype, init_node.span)
            buf = tir.Buffer(kx.fresh(target.id), (), dtype, "var", span)
            scope.names[target.id] = BufVal(buf)
            return [tir.Alloc(buf, init, span=span)]
        shape = self.shape_arg(b.args["shape"], scope, kx)
        if dtype.is_subbyte:
            check_packed_shape(target.id, tir.IntImm(shape[-1]), dtype, b.args["shape"].span)
        need = 0 if buf_scope == "shared" else self.check_registers_of(buf_scope, target.id, shape, dtype, span, kx)
        buf = tir.Buffer(
            kx.fresh(target.id), tuple(tir.IntImm(d, DType.int32, span) for d in shape), dtype, buf_scope, span
        )
        if buf_scope == "shared":
            kx.shared.append(buf)
        else:
            kx.fragment_registers.append((buf, need))
        scope.names[target.id] = BufVal(buf)
        return [tir.Alloc(buf, None, span=span)]

    @staticmethod
    def alloc_registers(buf_scope: str, shape: tuple[int, ...], dtype: DType, kx: _KernelState) -> int:
        """Registers per thread: a fragment is spread over the block, a local array is per thread."""
        elements = math.prod(shape)
        per_thread = elements if buf_scope == "local" else -(-elements // kx.threads)
        return registers(per_thread, dtype)

    def check_registers_of(
        self, buf_scope: str, name: str, shape: tuple[int, ...], dtype: DType, span: Span, kx: _KernelState
    ) -> int:
        """Registers per thread of a fragment or local array; one over the budget
        is an error at once, so that nothing after it spends time on its elements.
        (Shared tiles need no such check: the shared-memory limit bounds them.)"""
        need = self.alloc_registers(buf_scope, shape, dtype, kx)
        if need > register_limit(self.target.max_registers):
            words = {"fragment": f"fragment '{name}'", "local": f"local array '{name}'"}[buf_scope]
            tile = f"{words} ({'x'.join(map(str, shape))} {dtype.tile_name})"
            spread = f"spread over {kx.threads} threads" if buf_scope == "fragment" else "in each thread"
            message = f"{tile} needs {need} registers per thread ({spread}); {self.register_rule()}"
            raise error(span, message, hint=self.register_hint())
        return need

    def shape_arg(self, node: S.Expr, scope: Scope, kx: _KernelState) -> tuple[int, ...]:
        items = self.shape_items(node, scope, kx)
        if not items:
            raise error(node.span, "a buffer needs at least one dimension")
        dims = []
        for v, span in items:
            c = fold.const(self.as_val(v, span).expr)
            if not isinstance(c, int) or isinstance(c, bool):
                raise error(
                    span,
                    "allocation shapes must be compile-time constants",
                    hint="use params or literals for tile sizes",
                )
            if c <= 0:
                raise error(span, f"a buffer dimension must be positive, not {c}")
            dims.append(c)
        return tuple(dims)

    # ------------------------------------------------------------ calls as statements

    def expr_stmt(self, s: S.ExprStmt, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        e = s.expr
        if not isinstance(e, S.Call):
            raise error(e.span, "this expression does nothing", hint="assign it to a name, or call a tile op")
        f = self.callee(e, scope, kx)
        if isinstance(f, MacroVal):
            return self.inline(f, e, scope, kx)
        if isinstance(f, BuiltinVal) and f.name in TILE_OPS:
            self.need_block(f"{f.name}()", e.span, kx)
            op = self.tile_op(f.name, e, scope, kx)
            return list(op) if isinstance(op, tuple) else [op]
        if isinstance(f, BuiltinVal) and f.name in ALLOCS:
            raise error(e.span, f"the buffer of {f.name}() must be given a name", hint=f"write x = {f.name}(...)")
        if isinstance(f, BuiltinVal) and f.name in FUNCS:
            raise error(e.span, f"the result of {f.name}() is unused", hint="assign it to a name or store it")
        if isinstance(f, BuiltinVal):
            raise error(e.span, f"{f.name}(...) cannot be used as a statement")
        raise error(e.func.span, f"'{e.func.span.text}' is not a function or tile op")

    def inline(self, m: MacroVal, call: S.Call, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        name = m.macro.name
        if any(n == name for n, _ in kx.macros):
            raise error(call.span, f"macro '{name}' calls itself", hint="macros are inlined; recursion cannot end")
        if len(kx.macros) >= MAX_MACRO_NESTING:
            raise error(call.span, f"macro calls nested more than {MAX_MACRO_NESTING} deep", hint="inline fewer levels")
        params = tuple(p.id for p in m.macro.params)
        b = bind(call, name, Sig(params))
        mscope = m.scope.child()
        for p in params:
            v = self.ev(b.args[p], scope, kx)
            if isinstance(v, Poison):
                raise Abandon()
            if isinstance(v, Val):
                hint = "a macro's arguments are substituted where it uses them; bind this one to a name first"
                self.check_substituted(p, v.expr, b.args[p].span, hint)
            mscope.names[p] = v
        kx.macros.append((name, call.span))
        try:
            return list(self.block(m.macro.body, mscope, kx))
        finally:
            kx.macros.pop()

    def tile_op(self, name: str, call: S.Call, scope: Scope, kx: _KernelState) -> tir.Stmt | tuple[tir.Stmt, ...]:
        b = bind(call, name, TILE_OPS[name])
        args = b.args
        span = call.span

        def opnd(role: str) -> shapes.Operand:
            node = args[role]
            return shapes.operand(self.ev_value(node, scope, kx), node.span, name, role)

        def flag(key: str) -> bool:
            return self.const_bool(args.get(key), scope, kx, key, bool(TILE_OPS[name].keywords[key]))

        match name:
            case "copy":
                return shapes.copy(opnd("src"), opnd("dst"), span, self.pad(args.get("pad"), scope, kx))
            case "gemm":
                policy = self.policy(args.get("policy"), scope, kx)
                return shapes.gemm(
                    opnd("A"),
                    opnd("B"),
                    opnd("C"),
                    (flag("transpose_A"), flag("transpose_B"), policy, flag("clear_accum")),
                    span,
                )
            case "fill":
                return shapes.fill(opnd("buf"), self.scalar(args["value"], scope, kx), span)
            case "clear":
                return shapes.fill(opnd("buf"), fold.literal(0, span), span)
            case "cumsum" | "cummax" | "cummin":
                dim = self.const_int(args.get("dim"), scope, kx, "dim", 0)
                return shapes.cumsum(name.removeprefix("cum"), opnd("src"), opnd("dst"), dim, flag("reverse"), span)
            case "atomic_add" | "atomic_max" | "atomic_min":
                return self.atomic(name.removeprefix("atomic_"), args["dst"], args["value"], span, scope, kx)
            case "use_swizzle":
                return self.use_swizzle(args, span, scope, kx)
            case "annotate_layout":
                return self.annotate_layout(args, span, scope, kx)
            case "print":
                return self.print_(args, span, scope, kx)
            case "device_assert":
                cond = self.condition(args["cond"], scope, kx)
                return tir.DeviceAssert(cond.expr, self.string(args.get("msg"), scope, kx, "msg"), span)
            case "sync_threads":
                self.not_in_parallel("sync_threads()", span, kx)
                return tir.SyncThreads(span)
        kind = name.removeprefix("reduce_")
        dim = self.const_int(args.get("dim"), scope, kx, "dim", -1)
        if kind in ("argmax", "argmin"):
            index = shapes.arg_reduce(kind, opnd("src"), opnd("dst"), dim, span)
            if args.get("values") is None:
                return index
            # the values too: a reduce_max (reduce_min) of the same source beside it
            values = shapes.reduce(kind.removeprefix("arg"), opnd("src"), opnd("values"), dim, True, span)
            return (values, index)
        return shapes.reduce(kind, opnd("src"), opnd("dst"), dim, flag("clear"), span)

    def pad(self, node: S.Expr | None, scope: Scope, kx: _KernelState) -> shapes.Pad | None:
        """A copy's `pad=` value, which must be a compile-time constant (None: not given)."""
        if node is None:
            return None
        value = fold.const(self.scalar(node, scope, kx).expr)
        if value is None:
            raise error(
                node.span,
                "copy() pad must be a compile-time constant",
                hint="a literal, a param or a constant expression such as -infinity(float16)",
            )
        return shapes.Pad(value, node.span)

    def atomic(
        self, op: str, dst_node: S.Expr, value_node: S.Expr, span: Span, scope: Scope, kx: _KernelState
    ) -> tir.Stmt:
        """`atomic_add`, `atomic_max` or `atomic_min` (`op`) of a tile or of one element."""
        name = f"atomic_{op}"
        dst = self.ev_value(dst_node, scope, kx)
        self.check_atomic_type(op, dst, dst_node.span)
        value = self.ev_value(value_node, scope, kx)
        if self.is_tile(value):
            src = shapes.operand(value, value_node.span, name, "value")
            return shapes.atomic_tile(op, shapes.operand(dst, dst_node.span, name, "dst"), src, span)
        if not (isinstance(dst, SubVal) and dst.is_element):
            raise error(
                dst_node.span,
                f"{name}() of a scalar value needs a single element as destination",
                hint=f"index the destination: {name}(C[i, j], value)",
            )
        return shapes.atomic_element(op, dst, self.as_val(value, value_node.span), span)

    def check_atomic_type(self, op: str, dst: Value, span: Span) -> None:
        if not isinstance(dst, (BufVal, SubVal)) or dst.buffer.scope not in shapes.ATOMIC_SCOPES:
            return  # shapes.py reports a destination that is neither a global tensor nor shared memory
        dtype = dst.buffer.dtype
        kinds = self.target.atomic_add_types if op == "add" else self.target.atomic_minmax_types
        if dtype not in kinds:
            names = ", ".join(d.tile_name for d in DTYPES.values() if d in kinds)
            raise error(
                span,
                f"atomic_{op}() into '{dst.buffer.name}' ({dtype.tile_name}): {self.arch} has no atomic {op} for "
                f"{dtype.tile_name}",
                hint=f"{'accumulate into' if op == 'add' else 'use'} a tensor of one of: {names}",
            )

    @staticmethod
    def is_tile(v: Value) -> bool:
        return (isinstance(v, BufVal) and v.buffer.scope != "var") or (isinstance(v, SubVal) and not v.is_element)

    def use_swizzle(self, args: dict[str, S.Expr], span: Span, scope: Scope, kx: _KernelState) -> tir.Stmt:
        panel = self.const_int(args.get("panel_size"), scope, kx, "panel_size", 0)
        if panel <= 0:
            raise error(args["panel_size"].span, f"panel_size must be positive, not {panel}")
        order = self.string(args.get("order"), scope, kx, "order", "row")
        if order not in ("row", "col"):
            raise error(args["order"].span, f'order must be "row" or "col", not "{order}"')
        return tir.UseSwizzle(panel, order, span)  # type: ignore[arg-type]  # order: checked above

    def annotate_layout(self, args: dict[str, S.Expr], span: Span, scope: Scope, kx: _KernelState) -> tir.Stmt:
        node = args["buf"]
        v = self.ev_value(node, scope, kx)
        if not (isinstance(v, BufVal) and v.buffer.scope == "shared"):
            raise error(
                node.span,
                "annotate_layout() takes a whole alloc_shared buffer",
                hint="register tiles (alloc_fragment) get their layouts from the ops that use them",
            )
        layout = self.string(args.get("layout"), scope, kx, "layout")
        if layout not in SHARED_LAYOUTS:
            hint = did_you_mean(layout, SHARED_LAYOUTS) or "one of: " + ", ".join(SHARED_LAYOUTS)
            raise error(args["layout"].span, f"unknown shared-memory layout '{layout}'", hint=hint)
        if layout.startswith("swizzle_"):
            from tilec.layout_algebra import swizzled

            try:
                shape, d = v.buffer.const_shape, v.buffer.dtype
                stored = (*shape[:-1], shape[-1] // 2) if d.is_subbyte else shape  # packed: the bytes
                swizzled(stored, 1 if d.is_subbyte else d.bytes, int(layout[len("swizzle_") : -1]))
            except ValueError as e:
                hint = "use a narrower swizzle, or a tile whose rows are whole 16-byte chunks"
                raise error(args["layout"].span, f"'{v.buffer.name}' cannot take {layout}: {e}", hint=hint) from None
        return tir.AnnotateLayout(v.buffer, layout, span)  # type: ignore[arg-type]  # layout: checked above

    def print_(self, args: dict[str, S.Expr], span: Span, scope: Scope, kx: _KernelState) -> tir.Stmt:
        node = args["value"]
        v = self.ev_value(node, scope, kx)
        msg = self.string(args.get("msg"), scope, kx, "msg")
        if self.is_tile(v):
            return tir.Print(shapes.region(shapes.operand(v, node.span, "print", "value")), msg, span)
        return tir.Print(self.as_val(v, node.span).expr, msg, span)

    def policy(self, node: S.Expr | None, scope: Scope, kx: _KernelState) -> str:
        if node is None:
            return "Square"
        name = node.span.text
        if isinstance(node, S.Attribute) and isinstance(node.value, S.Name) and node.value.id == "GemmWarpPolicy":
            name = node.attr
        elif isinstance(node, S.Str):
            name = node.value
        elif isinstance(node, S.Name):
            v = scope.lookup(node.id)
            name = v.name if isinstance(v, PolicyVal) else node.id
        if name not in POLICIES:
            raise error(
                node.span,
                f"unknown gemm policy '{name}'",
                hint=did_you_mean(name, POLICIES) or "use Square, FullRow or FullCol",
            )
        return name

    # ------------------------------------------------------------ loops and ifs

    def for_(self, s: S.For, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        self.need_block("a for loop", s.span, kx)
        it = s.iter
        kind = self.callee_name(it, scope) if isinstance(it, S.Call) else None
        if kind not in LOOPS:
            if isinstance(it, S.Call):
                self.callee(it, scope, kx)
            raise error(
                it.span, "a for loop runs over Pipelined(...), Parallel(...), serial(...), range(...) or unroll(...)"
            )
        assert isinstance(it, S.Call) and kind is not None
        b = bind(it, kind, LOOPS[kind])
        if kind == "Parallel":
            return [self.parallel(s, b.rest, scope, kx)]
        if len(s.targets) != 1:
            raise error(s.span, f"a {kind} loop has one loop variable, not {len(s.targets)}")
        if kind == "Pipelined":
            bounds = [self.int_expr(a, scope, kx, "a loop bound") for a in b.rest]
            start, stop = (fold.imm(0, DType.int32, it.span), bounds[0]) if len(bounds) == 1 else bounds
            stages = self.const_int(b.args.get("num_stages"), scope, kx, "num_stages", 0)
            if stages < 0:
                raise error(b.args["num_stages"].span, f"num_stages must be 0 or more, not {stages}")
            step: tir.Expr = fold.imm(1, DType.int32, it.span)
        else:
            start, stop, step = self.range_args(b.rest, it, scope, kx)
            stages = 0
        inner = scope.child()
        var = self.bind_var(s.targets[0], inner, kx, "loop")
        unrolled = kind in ("unroll", "vectorized")  # a thread's own loop, which nvcc vectorizes where it can
        for_kind: tir.ForKind = "pipelined" if kind == "Pipelined" else ("unroll" if unrolled else "serial")
        body = self.loop_body(s.body, inner, kx, for_kind)
        schedule = None
        if kind == "Pipelined":

            def const_int(node: S.Expr, what: str) -> int:
                return self.const_int(node, scope, kx, what, 0)

            schedule, stages = read_schedule(b.args, body, stages, const_int)
        return [tir.For(var, start, stop, step, for_kind, body, stages, s.span, schedule=schedule)]

    def range_args(
        self, args: list[S.Expr], it: S.Call, scope: Scope, kx: _KernelState
    ) -> tuple[tir.Expr, tir.Expr, tir.Expr]:
        vals = [self.int_expr(a, scope, kx, "a loop bound") for a in args]
        one, zero = fold.imm(1, DType.int32, it.span), fold.imm(0, DType.int32, it.span)
        if len(vals) == 1:
            return zero, vals[0], one
        if len(vals) == 2:
            return vals[0], vals[1], one
        step = fold.const(vals[2])
        if not isinstance(step, int) or step == 0:
            raise error(args[2].span, "a loop step must be a nonzero compile-time constant")
        return vals[0], vals[1], vals[2]

    def parallel(self, s: S.For, args: list[S.Expr], scope: Scope, kx: _KernelState) -> tir.Stmt:
        extents = []
        for a in args:
            v = self.scalar(a, scope, kx)
            c = fold.const(v.expr)
            if not isinstance(c, int) or isinstance(c, bool):
                raise error(
                    a.span,
                    "Parallel extents must be compile-time constants",
                    hint="use params or literals; loop over a symbolic range with serial(...)",
                )
            if c <= 0:
                raise error(a.span, f"a Parallel extent must be positive, not {c}")
            extents.append(c)
        if len(s.targets) != len(extents):
            raise error(
                s.span,
                f"Parallel has {len(extents)} extent{'s' if len(extents) > 1 else ''} but "
                f"{len(s.targets)} loop variable{'s' if len(s.targets) > 1 else ''}",
            )
        inner = scope.child()
        vars_ = tuple(self.bind_var(t, inner, kx, "loop") for t in s.targets)
        outer, kx.in_parallel = kx.in_parallel, True
        try:
            body = self.nested(s.body, inner, kx)
        finally:
            kx.in_parallel = outer
        return tir.Parallel(vars_, tuple(extents), _unit_indices(vars_, extents, body), span=s.span)

    def nested(self, body: tuple[S.Stmt, ...], scope: Scope, kx: _KernelState) -> tuple[tir.Stmt, ...]:
        if kx.depth + len(kx.macros) >= MAX_BLOCK_NESTING:
            self.over_budget(
                body[0].span if body else NO_SPAN,
                f"blocks nested more than {MAX_BLOCK_NESTING} deep once macros are inlined",
                "nest fewer loops, or call fewer macros from inside loops of other macros",
                kx,
            )
        kx.depth += 1
        try:
            return self.block(body, scope, kx)
        finally:
            kx.depth -= 1

    def if_(self, s: S.If, scope: Scope, kx: _KernelState) -> list[tir.Stmt]:
        self.need_block("an if statement", s.span, kx)
        cond = self.condition(s.cond, scope, kx)
        c = fold.const(cond.expr)
        if c is not None:  # decided at compile time, like Python `if` in TileLang
            return list(self.nested(s.then if c else s.orelse, scope.child(), kx))
        then = self.nested(s.then, scope.child(), kx)
        orelse = self.nested(s.orelse, scope.child(), kx)
        return [tir.If(cond.expr, then, orelse, s.span)]

    def condition(self, node: S.Expr, scope: Scope, kx: _KernelState) -> Val:
        v = self.scalar(node, scope, kx)
        if v.dtype != DType.bool:
            raise error(
                node.span, f"a condition must be a bool, not {v.dtype.tile_name}", hint="compare it, e.g. x != 0"
            )
        return v


def _unit_indices(vars_: tuple[tir.Var, ...], extents: list[int], body: tuple[tir.Stmt, ...]) -> tuple[tir.Stmt, ...]:
    """`body` with each constant index 0 of a fragment's extent-1 dimension written as a loop
    variable of extent 1 (which is 0 too), one variable per dimension of an access: TileLang's
    `sum[0]` in `Parallel(1, D)` is `sum[i]`, an index layout inference can follow. Reads only: a
    store to that element from every iteration of the loop would race, and stays an error. Nested
    Parallel loops have their own."""
    units = [v for v, n in zip(vars_, extents) if n == 1]
    if not units:
        return body

    def indices(buf: tir.Buffer, idx: tuple[tir.Expr, ...]) -> tuple[tir.Expr, ...]:
        if buf.scope != "fragment":
            return idx
        free = [v for v in units if not any(v in tir_walk.variables(i) for i in idx)]
        out = []
        for i, n in zip(idx, buf.shape):
            zero = isinstance(i, tir.IntImm) and i.value == 0 and isinstance(n, tir.IntImm) and n.value == 1
            out.append(free.pop(0) if zero and free else i)
        return tuple(out)

    def expr(e: tir.Expr) -> tir.Expr:
        match e:
            case tir.Load(buf, idx):
                return tir.Load(buf, indices(buf, tuple(expr(i) for i in idx)), e.span)
            case tir.BinOp(op, a, b, d):
                return tir.BinOp(op, expr(a), expr(b), d, e.span)
            case tir.UnaryOp(op, a, d):
                return tir.UnaryOp(op, expr(a), d, e.span)
            case tir.Select(c, a, b, d):
                return tir.Select(expr(c), expr(a), expr(b), d, e.span)
            case tir.Cast(v, d):
                return tir.Cast(expr(v), d, e.span)
            case tir.Call(f, args, d):
                return tir.Call(f, tuple(expr(x) for x in args), d, e.span)
        return e

    def stmt(t: tir.Stmt) -> tir.Stmt:
        if isinstance(t, tir.Parallel):
            return t
        if isinstance(t, tir.Store):  # its value and indices, not the element it writes
            value, idx = expr(t.value), tuple(expr(i) for i in t.indices)
            t = replace(t, value=value, indices=idx)
        else:
            t = tir_walk.map_stmt_exprs(t, expr)
        return tir_walk.with_bodies(t, tuple(tuple(stmt(x) for x in b) for b in tir_walk.bodies(t)))

    return tuple(stmt(t) for t in body)
