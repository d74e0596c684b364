"""Elaboration: params and -D, literal typing and folding, symbolic dims,
regions and origins, macros (hygiene, naming), imports, and the IR shape of
each construct. Mistakes are covered by tests/golden/errors."""

from __future__ import annotations

import math
import pathlib

import pytest

from tilec import tir, tir_walk
from tilec.diagnostics import CompileError
from tilec.dtypes import DType
from tilec.elaborate import elaborate_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEAD = "kernel k(A: Tensor((M, N), float16), C: Tensor((M, N), float32)):\n    with Kernel(4, threads=128) as bx:\n"


def prog(text: str, defines: dict[str, str] | None = None, **kw) -> tir.Program:
    return elaborate_file("t.tile", defines or {}, text=text, **kw)


def kbody(lines: str, pre: str = "", defines: dict[str, str] | None = None) -> tuple[tir.Stmt, ...]:
    text = pre + HEAD + "".join("        " + line + "\n" for line in lines.splitlines())
    (k,) = prog(text, defines).kernels
    return k.body


def messages(text: str, defines: dict[str, str] | None = None, **kw) -> list[str]:
    with pytest.raises(CompileError) as info:
        prog(text, defines, **kw)
    return [d.message for d in info.value.diagnostics]


def walk(stmts: tuple[tir.Stmt, ...]):
    for s in stmts:
        yield s
        for attr in ("body", "then", "orelse"):
            yield from walk(getattr(s, attr, ()))


# ---------------------------------------------------------------- examples


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.tile")), ids=lambda p: p.stem)
def test_every_example_elaborates(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    program = elaborate_file(path.relative_to(ROOT).as_posix())
    assert program.files[0] == path.relative_to(ROOT).as_posix()


def test_gemm_from_the_issue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    (k,) = elaborate_file("examples/gemm.tile").kernels
    assert [t.name for t in k.tensors] == ["A", "B", "C"]
    assert [d.name for d in k.dims] == ["M", "K", "N"]
    assert k.threads == 256 and [v.name for v in k.block_vars] == ["bx", "by"]
    loop = next(s for s in k.body if isinstance(s, tir.For))
    assert loop.kind == "pipelined" and loop.num_stages == 3
    copy_a = loop.body[0]
    assert isinstance(copy_a, tir.Copy)
    assert [e.value for e in copy_a.src.extents] == [128, 64]  # type: ignore[attr-defined]
    gemm = loop.body[2]
    assert isinstance(gemm, tir.Gemm) and gemm.policy == "Square" and not gemm.transpose_b


# ---------------------------------------------------------------- params and -D


def test_params_fold_and_define_overrides() -> None:
    text = "param bm = 64\nparam bk = bm // 2\n" + HEAD + "        A_s = alloc_shared((bm, bk), float16)\n"
    (alloc,) = prog(text).kernels[0].body
    assert alloc.buffer.const_shape == (64, 32)  # type: ignore[union-attr]
    (alloc,) = prog(text, {"bm": "128"}).kernels[0].body
    assert alloc.buffer.const_shape == (128, 64)  # type: ignore[union-attr]


def test_define_values_by_type() -> None:
    pre = "param f = 1.5\nparam b = False\nparam d = float16\nparam t: float32 = 2\n"
    body = "X = alloc_fragment((4,), d)\nfill(X, f if b else t)"
    alloc, fill = kbody(body, pre, {"f": "3", "b": "True", "d": "bfloat16"})
    assert alloc.buffer.dtype == DType.bfloat16  # type: ignore[union-attr]
    assert isinstance(fill, tir.Fill) and fill.value == tir.FloatImm(3.0, DType.bfloat16)


def test_define_errors() -> None:
    assert messages("param n = 4\n", {"n": "x"}) == ["-D n=x: expected an int for param 'n'"]
    assert messages("param n = 4\n", {"m": "1"})[0].startswith("-D m: no param")
    assert messages("param n: bool = False\n", {"n": "2"}) == ["-D n=2: expected True or False for param 'n'"]


def test_define_fixes_a_symbolic_dimension() -> None:
    (k,) = prog(HEAD + "        pass\n", {"M": "256"}).kernels
    assert [d.name for d in k.dims] == ["N"]
    assert k.tensors[0].shape[0] == tir.IntImm(256)


def test_dimensions_may_be_expressions_of_earlier_ones() -> None:
    text = (
        "param block = 64\nparam groups = 4\n"
        "kernel k(A: Tensor((M, H), float16), B: Tensor((M // block, H * groups, ceildiv(M, 32)), bool)):\n"
        "    with Kernel(4, threads=128) as bx:\n        pass\n"
    )
    (k,) = prog(text).kernels
    assert [d.name for d in k.dims] == ["M", "H"]
    m, h = k.dims
    assert k.tensors[1].shape[:2] == (
        tir.BinOp("//", m, tir.IntImm(64), DType.int32),
        tir.BinOp("*", h, tir.IntImm(4), DType.int32),
    )
    (fixed,) = prog(text, {"M": "256"}).kernels
    assert fixed.tensors[1].shape[0] == tir.IntImm(4)


STRIDED = (
    "param pad = 8\n"
    "kernel k(K: Tensor((B, S, D), float16, strides=(sB, sS, 1)), V: Tensor((B, S, D), float16, strides=(sB, sS, 1)),\n"
    "         O: Tensor((S, D), float32, strides=(D + pad, 1)), X: Tensor((S,), float32)):\n"
    "    with Kernel(ceildiv(S, sS), threads=128) as bx:\n        pass\n"
)


def test_strides_are_ints_new_names_or_dimension_expressions() -> None:
    (k,) = prog(STRIDED).kernels
    assert [d.name for d in k.dims] == ["B", "S", "D", "sB", "sS"]
    keys, values, out, x = k.tensors
    s_b, s_s = k.dims[3:]
    assert keys.strides == (s_b, s_s, tir.IntImm(1)) and values.strides == keys.strides  # the same names
    assert out.strides == (tir.BinOp("+", k.dims[2], tir.IntImm(8), DType.int32), tir.IntImm(1))
    assert x.strides is None  # row-major
    assert s_s in tir_walk.variables(k.grid[0])  # a stride's name is an ordinary name


def test_define_fixes_a_symbolic_stride() -> None:
    (k,) = prog(STRIDED, {"sS": "4096"}).kernels
    assert [d.name for d in k.dims] == ["B", "S", "D", "sB"]
    assert k.tensors[0].strides[1] == tir.IntImm(4096)  # type: ignore[index]


def test_a_view_is_a_buffer_in_its_tensors_memory() -> None:
    text = (
        "kernel k(A: Tensor((Z, M, K), float16)):\n"
        "    A_flat = Tensor((Z * M, K), float16, A)\n"
        "    A_all = Tensor((Z * M * K,), float16, A_flat.data)\n"
        "    with Kernel(4, threads=128) as bx:\n        A_all[bx] = A_flat[bx, 0]\n"
    )
    (k,) = prog(text).kernels
    (a,) = k.tensors
    assert [v.name for v in k.views] == ["A_flat", "A_all"] and all(v.view_of is a for v in k.views)
    assert k.views[1].shape == (
        tir.BinOp("*", tir.BinOp("*", k.dims[0], k.dims[1], DType.int32), k.dims[2], DType.int32),
    )
    assert k.dims == k.dims[:3]  # a view adds no dimension


def test_buffer_attributes() -> None:
    body = (
        "acc = alloc_fragment((64, 32), float32)\n"
        "s = alloc_shared((acc.shape[0], acc.shape[-1] * 2), A.dtype)\n"
        "t = alloc_fragment(acc.shape, acc.dtype)\n"
        "fill(acc, -infinity(acc.dtype))"
    )
    _, s, t, fill = kbody(body)
    assert isinstance(s, tir.Alloc) and s.buffer.const_shape == (64, 64) and s.buffer.dtype == DType.float16
    assert isinstance(t, tir.Alloc) and t.buffer.const_shape == (64, 32) and t.buffer.dtype == DType.float32
    assert isinstance(fill, tir.Fill) and fill.value == tir.FloatImm(-math.inf, DType.float32)


def test_tilelang_spellings_are_aliases() -> None:
    alloc, loop = kbody("x = alloc_fragment((4,), float8_e4m3fn)\nfor k in Serial(4):\n    x[k] = 0")
    assert isinstance(alloc, tir.Alloc) and alloc.buffer.dtype == DType.float8_e4m3
    assert isinstance(loop, tir.For) and loop.kind == "serial"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("x = alloc_fragment((4,), uint2)", "uint2 (sub-byte types) is not supported yet"),
        ('x = alloc_fragment((4,), "int1")', "int1 (sub-byte types) is not supported yet"),
        ("x = alloc_shared((4,), float6_e2m3fn)", "float6_e2m3fn (sub-byte types) is not supported yet"),
        ("im2col(A, C)", "im2col is not supported yet"),
        ("for t in Persistent(4):\n    pass", "Persistent (a persistent tile loop) is not supported yet"),
    ],
)
def test_unsupported_tilelang_names_say_so(line: str, message: str) -> None:
    text = HEAD + "".join("        " + x + "\n" for x in line.splitlines())
    assert messages(text) == [message]


def test_typed_param_is_strong() -> None:
    (fill,) = kbody("X = alloc_fragment((4,), float16)\nfill(X, s)", "param s: float32 = 0.5\n")[1:]
    assert isinstance(fill, tir.Fill) and fill.value == tir.FloatImm(0.5, DType.float16)


# ---------------------------------------------------------------- literal typing and folding


def _let_value(lines: str) -> tir.Expr:
    stmts = kbody(lines)
    let = [s for s in stmts if isinstance(s, tir.Let)][-1]
    return let.value


def test_int_literal_next_to_float_takes_its_type() -> None:
    v = _let_value("X = alloc_fragment((4,), float16)\ny = X[bx] * 2")
    assert isinstance(v, tir.BinOp) and v.dtype == DType.float16
    assert v.b == tir.FloatImm(2.0, DType.float16)


def test_float_literal_next_to_int_promotes_to_float32() -> None:
    v = _let_value("y = bx * 0.5")
    assert isinstance(v, tir.BinOp) and v.dtype == DType.float32
    assert v.a == tir.Cast(tir.Var("bx", DType.int32, "block"), DType.float32) or isinstance(v.a, tir.Cast)


def test_mixed_float_dtypes_promote() -> None:
    v = _let_value("X = alloc_fragment((4,), float16)\nY = alloc_fragment((4,), float32)\ny = X[bx] + Y[bx]")
    assert isinstance(v, tir.BinOp) and v.dtype == DType.float32 and isinstance(v.a, tir.Cast)


def test_constant_folding() -> None:
    (alloc,) = kbody("X = alloc_shared((ceildiv(100, 32) * 2, 2 ** 3 + (7 // 2) % 2), float16)")
    assert alloc.buffer.const_shape == (8, 9)  # type: ignore[union-attr]


def test_c_division_semantics_when_folding() -> None:
    (alloc,) = kbody("X = alloc_shared((-7 // 2 + 10, -7 % 2 + 10), float16)")
    assert alloc.buffer.const_shape == (7, 9)  # type: ignore[union-attr]


def test_ceildiv_of_symbolic() -> None:
    (k,) = prog(
        "kernel k(A: Tensor((N,), float16)):\n    with Kernel(ceildiv(N, 64), threads=64) as bx:\n        pass\n"
    ).kernels
    (g,) = k.grid
    assert isinstance(g, tir.BinOp) and g.op == "//" and isinstance(g.a, tir.BinOp) and g.a.b == tir.IntImm(63)


def test_builtins() -> None:
    v = _let_value("X = alloc_fragment((4,), float16)\ny = exp(X[bx]) + max(X[bx], 0) + cast(bx, float16)")
    assert v.dtype == DType.float16
    stmts = kbody("X = alloc_fragment((4,), float32)\nfill(X, -infinity(float32))\nfill(X, max_value(float16))")
    assert stmts[1].value == tir.FloatImm(-math.inf, DType.float32)  # type: ignore[union-attr]
    assert stmts[2].value == tir.FloatImm(65504.0, DType.float32)  # type: ignore[union-attr]
    v = _let_value("y = if_then_else(bx < 2, 1, 2)")
    assert isinstance(v, tir.Select) and v.dtype == DType.int32


def test_clamp_is_min_of_max() -> None:
    v = _let_value("X = alloc_fragment((4,), float32)\ny = clamp(X[bx], -448.0, 448.0)")
    assert isinstance(v, tir.Call) and v.func == "min" and v.dtype == DType.float32
    inner = v.args[0]
    assert isinstance(inner, tir.Call) and inner.func == "max" and v.args[1] == tir.FloatImm(448.0, DType.float32)
    assert inner.args[1] == tir.FloatImm(-448.0, DType.float32)
    (store,) = kbody("C[0, 0] = clamp(7, 0, 5)")  # folded
    assert isinstance(store, tir.Store) and store.value == tir.FloatImm(5.0, DType.float32)


def test_power_with_small_constant_exponent_is_multiplication() -> None:
    v = _let_value("X = alloc_fragment((4,), float32)\ny = X[bx] ** 2")
    assert isinstance(v, tir.BinOp) and v.op == "*"
    v = _let_value("X = alloc_fragment((4,), float32)\ny = X[bx] ** 0.5")
    assert isinstance(v, tir.Call) and v.func == "pow"


def test_compile_time_if_keeps_one_branch() -> None:
    stmts = kbody("if causal:\n    C[0, 0] = 1\nelse:\n    C[0, 0] = 2", "param causal = True\n")
    (store,) = stmts
    assert isinstance(store, tir.Store) and store.value == tir.FloatImm(1.0, DType.float32)


# ---------------------------------------------------------------- statements


def test_alloc_var_store_and_augmented_assign() -> None:
    stmts = kbody("x = alloc_var(int32, 1)\nx = x + 1\nx += 2\nC[0, 0] = x")
    alloc, s1, s2, s3 = stmts
    assert isinstance(alloc, tir.Alloc) and alloc.buffer.scope == "var" and alloc.init == tir.IntImm(1)
    assert isinstance(s1, tir.Store) and s1.indices == () and isinstance(s1.value, tir.BinOp)
    assert isinstance(s2, tir.Store) and isinstance(s2.value, tir.BinOp) and isinstance(s2.value.a, tir.Load)
    assert isinstance(s3, tir.Store) and isinstance(s3.value, tir.Cast)


def test_buffer_augmented_assign_desugars() -> None:
    (_, store) = kbody("X = alloc_fragment((4, 4), float32)\nX[1, 2] *= 3")
    assert isinstance(store, tir.Store) and isinstance(store.value, tir.BinOp) and store.value.op == "*"


def test_loops() -> None:
    stmts = kbody(
        "for i in serial(2, 10, 2):\n    pass\nfor j in range(4):\n    pass\n"
        "for u in unroll(3):\n    pass\nfor p in Pipelined(1, 9, num_stages=2):\n    pass\n"
        "for a, b in Parallel(4, 8):\n    pass"
    )
    s, r, u, pl, par = stmts
    assert isinstance(s, tir.For) and s.kind == "serial" and s.step == tir.IntImm(2)
    assert isinstance(r, tir.For) and r.start == tir.IntImm(0) and r.stop == tir.IntImm(4)
    assert isinstance(u, tir.For) and u.kind == "unroll"
    assert isinstance(pl, tir.For) and pl.kind == "pipelined" and pl.num_stages == 2 and pl.start == tir.IntImm(1)
    assert isinstance(par, tir.Parallel) and par.extents == (4, 8)


def test_lets_inside_and_outside_the_block() -> None:
    text = (
        "kernel k(A: Tensor((N,), float32)):\n    n = ceildiv(N, 64)\n"
        "    with Kernel(n, threads=64) as bx:\n        y = bx + n\n        A[y] = 0\n"
    )
    (k,) = prog(text).kernels
    let, store = k.body
    assert isinstance(k.grid[0], tir.BinOp)
    assert isinstance(let, tir.Let) and let.var.name == "y"


def test_unique_names_per_kernel() -> None:
    stmts = kbody("for i in serial(2):\n    pass\nfor i in serial(2):\n    pass\nfor i in serial(2):\n    pass")
    assert [s.var.name for s in stmts] == ["i", "i_1", "i_2"]  # type: ignore[union-attr]


def test_region_operands() -> None:
    stmts = kbody(
        "X = alloc_shared((1, 64), float16)\ncopy(A[bx, bx * 64:(bx + 1) * 64], X)\n"
        "copy(X, A[bx, 0])\ncopy(X[0, :], A[3, 0])",
        pre="",
    )
    _, c1, c2, c3 = stmts[:4]
    assert [e.value for e in c1.src.extents] == [1, 64]  # type: ignore[union-attr]
    assert [e.value for e in c2.dst.extents] == [1, 64]  # type: ignore[union-attr]
    assert isinstance(c3, tir.Copy)


def test_origin_takes_extents_right_aligned() -> None:
    text = (
        "kernel k(Q: Tensor((B, S, 64), float16)):\n    with Kernel(1, threads=128) as bx:\n"
        "        Q_s = alloc_shared((32, 64), float16)\n        copy(Q[bx, 0, 0], Q_s)\n"
    )
    (_, c) = prog(text).kernels[0].body
    assert [e.value for e in c.src.extents] == [1, 32, 64]  # type: ignore[union-attr]


def test_gemm_transpose_and_keywords() -> None:
    stmts = kbody(
        "A_s = alloc_shared((64, 32), float16)\nB_s = alloc_shared((64, 32), float16)\n"
        "C_l = alloc_fragment((64, 64), float32)\n"
        "gemm(A_s, B_s, C_l, transpose_B=True, policy=FullRow, clear_accum=True)"
    )
    g = stmts[-1]
    assert isinstance(g, tir.Gemm) and g.transpose_b and g.policy == "FullRow" and g.clear_accum


def test_reduce_and_cumsum() -> None:
    stmts = kbody(
        "S = alloc_fragment((64, 32), float32)\nm = alloc_fragment((64,), float32)\n"
        "reduce_max(S, m, dim=-1, clear=False)\nT_s = alloc_shared((64, 32), float32)\n"
        "cumsum(T_s, T_s, dim=1, reverse=True)"
    )
    r, c = stmts[2], stmts[4]
    assert isinstance(r, tir.Reduce) and r.dim == 1 and not r.clear and r.kind == "max"
    assert isinstance(c, tir.CumSum) and c.dim == 1 and c.reverse


def test_atomic_add_forms() -> None:
    stmts = kbody("X = alloc_fragment((64, 64), float32)\natomic_add(C[bx * 64, 0], X)\natomic_add(C[bx, 1], 1)")
    tile, elem = stmts[1], stmts[2]
    assert isinstance(tile, tir.Atomic) and tile.src is not None and tile.value is None
    assert isinstance(elem, tir.Atomic) and elem.src is None and elem.value == tir.FloatImm(1.0, DType.float32)


def test_misc_ops() -> None:
    stmts = kbody(
        'use_swizzle(8, order="col")\nprint(bx, "bx")\ndevice_assert(bx < 4, "small")\n'
        "X = alloc_fragment((4,), float32)\nprint(X)"
    )
    sw, pr, da, _, pr2 = stmts
    assert isinstance(sw, tir.UseSwizzle) and sw.panel_size == 8 and sw.order == "col"
    assert isinstance(pr, tir.Print) and pr.msg == "bx"
    assert isinstance(da, tir.DeviceAssert) and da.msg == "small"
    assert isinstance(pr2, tir.Print) and isinstance(pr2.value, tir.Region)


# ---------------------------------------------------------------- macros and imports


def test_macro_inlining_is_hygienic_and_names_are_unique() -> None:
    pre = (
        "macro scaled(dst, src, factor):\n    t = alloc_fragment((4,), float32)\n"
        "    for i in Parallel(4):\n        dst[i] = src[i] * factor\n\n"
    )
    stmts = kbody(
        "t = alloc_fragment((4,), float32)\nu = alloc_fragment((4,), float32)\nscaled(u, t, 2)\nscaled(t, u, 0.5)", pre
    )
    allocs = [s.buffer.name for s in stmts if isinstance(s, tir.Alloc)]
    assert allocs == ["t", "u", "t_1", "t_2"]
    loops = [s for s in stmts if isinstance(s, tir.Parallel)]
    assert [v.name for p in loops for v in p.vars] == ["i", "i_1"]
    store = loops[0].body[0]
    assert isinstance(store, tir.Store) and store.buffer.name == "u"
    assert store.span.text == "dst[i] = src[i] * factor"  # spans of the macro body


def test_macro_keyword_args_and_arity() -> None:
    pre = "macro z(buf, v):\n    fill(buf, v)\n\n"
    stmts = kbody("X = alloc_fragment((4,), float32)\nz(X, v=1)", pre)
    assert isinstance(stmts[1], tir.Fill)
    assert messages(pre + HEAD + "        X = alloc_fragment((4,), float32)\n        z(X)\n") == [
        "z() is missing argument 'v'"
    ]


def test_imports(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.tile").write_text('import "b.tile"\nparam bm = 32\nmacro z(x):\n    clear(x)\n')
    (tmp_path / "lib" / "b.tile").write_text("param acc = float32\n")
    (tmp_path / "main.tile").write_text(
        'import "lib/a.tile"\nimport "lib/b.tile"\n'
        "kernel k(A: Tensor((N,), float16)):\n    with Kernel(1, threads=32) as bx:\n"
        "        X = alloc_fragment((bm,), acc)\n        z(X)\n"
    )
    monkeypatch.chdir(tmp_path)
    p = elaborate_file("main.tile")
    assert p.files == ("main.tile", "lib/a.tile", "lib/b.tile")
    alloc, fill = p.kernels[0].body
    assert alloc.buffer.const_shape == (32,) and alloc.buffer.dtype == DType.float32  # type: ignore[union-attr]
    assert isinstance(fill, tir.Fill)


def test_several_kernels_and_errors_in_each() -> None:
    text = (
        "kernel a(A: Tensor((N,), float32)):\n    with Kernel(1, threads=33) as bx:\n        pass\n"
        "kernel b(A: Tensor((N,), float32)):\n    with Kernel(1, threads=32) as bx:\n        x = nope\n"
    )
    msgs = messages(text)
    assert len(msgs) == 2 and "threads" in msgs[0] and "unknown name 'nope'" in msgs[1]


def test_shared_memory_limit_per_arch() -> None:
    text = HEAD + "        X = alloc_shared((256, 128), float32)\n"
    assert prog(text, arch="sm_90a").kernels
    assert prog(text, arch="sm_80").kernels
    assert messages(text, arch="sm_86") == ["kernel 'k' uses 131072 bytes of shared memory; sm_86 allows 101376"]


def test_missing_main_file_is_a_diagnostic() -> None:
    with pytest.raises(CompileError) as info:
        elaborate_file("/nonexistent/x.tile")
    assert info.value.diagnostics[0].span is None


@pytest.mark.parametrize(
    "snippet",
    [
        "X = alloc_shared((1 << 70, 2), float16)",
        "x = 2 ** 100000",
        "x = 10 ** 400 * 1.5",
        "x = 1 // 0",
        "x = exp(1000.0)",
        "x = log(-1.0)",
        "x = cast(infinity(float32), int32)",
        "x = 1 << 99",
        "X = alloc_shared((0, 4), float16)",
        "x = A[-1, 0]",
        "x = sqrt(-1)",
    ],
)
def test_odd_constants_never_crash(snippet: str) -> None:
    try:
        kbody(snippet)
    except CompileError:
        pass


def test_thread_index_and_its_tilelang_name() -> None:
    (let, other) = kbody("t = thread_index()\nu = get_thread_binding(0)")
    assert isinstance(let, tir.Let) and let.value == tir.Call("thread_index", (), DType.int32)
    assert isinstance(other, tir.Let) and other.value == let.value


def test_lanes_warps_shuffles_and_block_barrier() -> None:
    lane, warp, v, shuffled, sync = kbody(
        "l = lane_index()\nw = warp_index()\nv = alloc_var(float16, 0)\nv = shfl_xor(v, 1)\nsync_threads()"
    )
    assert isinstance(lane, tir.Let) and lane.value == tir.Call("lane_index", (), DType.int32)
    assert isinstance(warp, tir.Let) and warp.value == tir.Call("warp_index", (), DType.int32)
    assert isinstance(v, tir.Alloc) and isinstance(shuffled, tir.Store) and isinstance(sync, tir.SyncThreads)
    call = shuffled.value
    assert isinstance(call, tir.Call) and call.func == "shfl_xor" and call.dtype == DType.float16


def test_while_and_break_under_uniform_conditions() -> None:
    alloc, loop = kbody("i = alloc_var(int32, bx)\nwhile i < M:\n    if i == 7:\n        break\n    i += 1")
    assert isinstance(alloc, tir.Alloc) and isinstance(loop, tir.While)
    branch = loop.body[0]
    assert isinstance(branch, tir.If) and isinstance(branch.then[0], tir.Break)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("while thread_index() < M:\n    pass", "it reads thread_index()"),
        ("i = alloc_var(int32, 0)\nfor j in Parallel(128):\n    i = j\nwhile i < M:\n    pass", "it reads 'i'"),
        ("for k in serial(M):\n    t = thread_index()\n    if t == 0:\n        break", "(it reads 't'"),
        ("for k in unroll(4):\n    break", "`break` out of an unroll loop is not supported"),
        ("while lane_index() < M:\n    pass", "it reads lane_index()"),
        ("v = alloc_var(int32, shfl_xor(bx, 1))\nwhile v < M:\n    v += 1", "it reads 'v'"),
        ("if thread_index() < 32:\n    sync_threads()", "sync_threads() where the threads of the block may not all"),
        ("for i in serial(thread_index()):\n    sync_threads()", "sync_threads() where the threads"),
        ("if warp_index() == 0:\n    x = shfl_down(bx, 1)", "a warp shuffle where the threads of the block"),
    ],
)
def test_varying_conditions_and_misplaced_breaks_are_errors(lines: str, message: str) -> None:
    text = HEAD + "".join("        " + x + "\n" for x in lines.splitlines())
    assert any(message in m for m in messages(text)), messages(text)


def test_vectorized_is_an_unrolled_loop() -> None:
    text = (
        "kernel k(X: Tensor((N,), float32)):\n    with Kernel(1, threads=32) as bx:\n"
        "        r = alloc_local((8,), float32)\n        for v in vectorized(8):\n            r[v] = X[v]\n"
    )
    (loop,) = [s for s in elaborate_file("t.tile", text=text).kernels[0].body if isinstance(s, tir.For)]
    assert loop.kind == "unroll"
