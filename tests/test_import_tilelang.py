"""`tilec import-tilelang` (src/tilec/import_tilelang/): TileLang-style snippets written for these
tests (no TileLang code is copied here), their .tile text, that it compiles, and each diagnostic."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from tilec import cli, driver
from tilec.diagnostics import CompileError, render_all
from tilec.import_tilelang import convert

JIT_GEMM = """
import tilelang
import tilelang.language as T


@tilelang.jit
def mm(A, B, bm, bn, bk=32, dtype=T.float16, acc="float"):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        a_s = T.alloc_shared((bm, bk), dtype)
        b_s = T.alloc_shared((bk, bn), dtype)
        c_f = T.alloc_fragment((bm, bn), acc)
        T.clear(c_f)
        # the main loop
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
            T.copy(A[by * bm, k * bk], a_s)
            T.copy(B[k * bk, bx * bn], b_s)
            T.gemm(a_s, b_s, c_f, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(bm, bn):
            c_f[i, j] = T.max(c_f[i, j], 0)
        T.copy(c_f, C[by * bm, bx * bn])
    return C


def main():
    mm.compile(M=256, N=256, K=256, bm=64, bn=64)
"""

EXPECTED_GEMM = """\
# source: mm.py
# converted by `tilec import-tilelang`
param bm = 64
param bn = 64
param bk = 32
param dtype = float16
param acc = float32

kernel mm(A: Tensor((M, K), dtype), B: Tensor((K, N), dtype), C: Tensor((M, N), dtype)):
    with Kernel(ceildiv(N, bn), ceildiv(M, bm), threads=128) as (bx, by):
        a_s = alloc_shared((bm, bk), dtype)
        b_s = alloc_shared((bk, bn), dtype)
        c_f = alloc_fragment((bm, bn), acc)
        clear(c_f)
        # the main loop
        for k in Pipelined(ceildiv(K, bk), num_stages=2):
            copy(A[by * bm, k * bk], a_s)
            copy(B[k * bk, bx * bn], b_s)
            gemm(a_s, b_s, c_f, policy=GemmWarpPolicy.FullRow)
        for i, j in Parallel(bm, bn):
            c_f[i, j] = max(c_f[i, j], 0)
        copy(c_f, C[by * bm, bx * bn])
"""

FACTORY_NORM = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def _row_scale(rows, cols, blk=1, threads=128, dtype="float16"):
    accum = T.float32
    inv = 1.0 / cols
    shape = [rows, cols]

    @T.prim_func
    def main(X: T.Tensor(shape, dtype), Y: T.Tensor(shape, dtype), alpha: T.float32):
        with T.Kernel(T.ceildiv(rows, blk), threads=threads) as bx:
            x_f = T.alloc_fragment((blk, cols), accum)
            s = T.alloc_fragment((blk,), accum)
            T.copy(X[bx * blk, 0], x_f)
            T.reduce_sum(x_f, s, dim=1)
            for i, j in T.Parallel(blk, cols):
                x_f[i, j] = T.Cast(accum, x_f[i, j]) * T.float32(1.0) * inv + s[T.floordiv(i, 1)] * alpha
            T.copy(x_f, Y[bx * blk, 0])

    return main


if __name__ == "__main__":
    kernel = _row_scale(64, 1024)
"""


def _convert(text: str, path: str = "mm.py", **kw) -> str:
    return convert(textwrap.dedent(text), path, **kw)


def _compiles(text: str, tmp_path: pathlib.Path, arch: str = "sm_80") -> str:
    path = tmp_path / "k.tile"
    path.write_text(text)
    return driver.compile_program_text(driver.elaborate(str(path), {}, arch), arch, formatted=False)


def _error(text: str, **kw) -> str:
    with pytest.raises(CompileError) as info:
        _convert(text, **kw)
    diagnostics = info.value.diagnostics
    assert all(d.span is not None for d in diagnostics), render_all(diagnostics)
    return render_all(diagnostics)


def test_jit_style_golden(tmp_path: pathlib.Path) -> None:
    text = _convert(JIT_GEMM)
    assert text == EXPECTED_GEMM
    for arch in ("sm_80", "sm_90a"):
        assert "__global__" in _compiles(text, tmp_path, arch)


def test_factory_style(tmp_path: pathlib.Path) -> None:
    text = _convert(FACTORY_NORM, "norm.py", source_commit="a" * 40)
    assert text.startswith(f"# source: norm.py @ {'a' * 40}\n# converted by `tilec import-tilelang`\n")
    assert "param rows = 64\nparam cols = 1024\nparam blk = 1\nparam threads = 128\nparam dtype = float16\n" in text
    assert "param inv = 1.0 / cols" in text  # a Python local keeps its formula
    assert "kernel row_scale(X: Tensor([rows, cols], dtype), Y: Tensor([rows, cols], dtype), alpha: float32):" in text
    assert "cast(x_f[i, j], accum) * cast(1.0, float32) * inv + s[i // 1] * alpha" in text
    assert "__global__" in _compiles(text, tmp_path)


def test_defines_and_argparse_defaults(tmp_path: pathlib.Path) -> None:
    source = JIT_GEMM.replace("    mm.compile(M=256, N=256, K=256, bm=64, bn=64)", "    mm.compile(bm=args.bm, bn=64)")
    source += '\nparser = argparse.ArgumentParser()\nparser.add_argument("--bm", type=int, default=128)\n'
    assert "param bm = 128" in _convert(source)
    assert "param bm = 32" in _convert(source, defines={"bm": "32"})


def test_spellings(tmp_path: pathlib.Path) -> None:
    text = _convert(
        """
        import tilelang.language as T

        @tilelang.jit
        def k(X, n=64):
            L = T.const("L")
            X: T.Tensor((L,), T.float32)
            with T.Kernel(T.ceildiv(L, n), threads=64) as bx:
                v = T.alloc_fragment((1,), T.int32, "local")
                buf = T.alloc_shared((n,), "float")
                v[0] = T.get_thread_binding(0)
                for i in T.Serial(2):
                    buf[v[0]] = X[bx * n + v[0]].astype(T.float32) + T.floordiv(i, 2)
                T.copy(buf, X[bx * n])
        """
    )
    assert "v = alloc_var(int32)" in text
    assert "v = thread_index()" in text
    assert "for i in Serial(2):" in text
    assert "buf = alloc_shared((n,), 'float32')" in text
    assert "buf[v] = cast(X[bx * n + v], float32) + i // 2" in text
    assert "__global__" in _compiles(text, tmp_path)


def test_kernel_named_main_takes_the_factory_name() -> None:
    assert "kernel row_scale(" in _convert(FACTORY_NORM)


def test_function_option_and_param_clash(tmp_path: pathlib.Path) -> None:
    second = FACTORY_NORM.replace("_row_scale", "_row_scale2").replace("blk=1", "blk=2")
    second = second.replace("kernel = _row_scale2(64, 1024)", "kernel = _row_scale2(64, 1024)")
    both = FACTORY_NORM + second.split("import tilelang.language as T", 1)[1]
    text = _convert(both)
    assert "param blk = 1" in text and "param row_scale2_blk = 2" in text
    assert "__global__" in _compiles(text, tmp_path)
    assert "row_scale2" not in _convert(both, function="_row_scale")


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ("T.annotate_layout({a_s: make_swizzled_layout(a_s)})", "T.annotate_layout is not converted"),
        ("T.im2col(A, a_s, 0, 0, 0, 0, 0)", "im2col is not supported yet"),
        ("T.mystery(a_s)", "T.mystery has no .tile equivalent"),
        ("T.fill(a_s, lambda x: x)", "cannot convert this Python expression (lambda)"),
        ("T.fill(a_s, [x for x in range(2)][0])", "cannot convert this Python expression (listcomp)"),
    ],
)
def test_kernel_diagnostics(snippet: str, message: str) -> None:
    source = JIT_GEMM.replace("        T.clear(c_f)\n", f"        T.clear(c_f)\n        {snippet}\n")
    rendered = _error(source)
    assert rendered.startswith("mm.py:17:")
    assert message in rendered and "hint:" in rendered


def test_python_control_flow_outside_the_kernel() -> None:
    source = JIT_GEMM.replace(
        '    M, N, K = T.const("M, N, K")\n', '    M, N, K = T.const("M, N, K")\n    if bq > 2:\n        pass\n'
    )
    rendered = _error(source)
    assert "mm.py:9:8: error: cannot evaluate this Python condition outside the kernel statically" in rendered
    source = JIT_GEMM.replace(
        '    M, N, K = T.const("M, N, K")\n', '    M, N, K = T.const("M, N, K")\n    for q in range(2):\n        pass\n'
    )
    assert "cannot convert this Python statement outside the kernel (for)" in _error(source)


def test_unresolved_value_and_unparsable() -> None:
    assert "argument 'bm' must be a compile-time constant here, and no value for it can be read" in _error(
        JIT_GEMM.replace("bm=64, ", "")
    )
    assert "mm.py:1:5: error: not valid Python: '(' was never closed" in _error("x = (\nimport\n")
    with pytest.raises(CompileError):
        _convert("def f():\n    return 1\n")


def test_cli(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "mm.py"
    src.write_text(JIT_GEMM)
    out = tmp_path / "mm.tile"
    with pytest.raises(SystemExit) as info:
        cli.main(["import-tilelang", str(src), "-o", str(out), "--source-commit", "b" * 40])
    assert info.value.code == 0
    assert out.read_text().startswith(f"# source: {src} @ {'b' * 40}")
    bad = tmp_path / "bad.py"
    bad.write_text(JIT_GEMM.replace("T.clear(c_f)", "T.im2col(c_f)"))
    with pytest.raises(SystemExit) as info:
        cli.main(["import-tilelang", str(bad), "-o", str(out)])
    assert info.value.code == 1
    assert not out.exists()  # a failed conversion leaves no output behind
    err = capsys.readouterr().err
    assert f"{bad}:16:9: error: im2col is not supported yet" in err and "Traceback" not in err


def test_vectorized_loops_convert(tmp_path: pathlib.Path) -> None:
    text = _convert(
        """
        import tilelang.language as T

        @tilelang.jit
        def scale(X, dtype=T.float32):
            N = T.const("N")
            X: T.Tensor((N,), dtype)
            Y = T.empty((N,), dtype)
            with T.Kernel(T.ceildiv(N, 1024), threads=128) as bx:
                r = T.alloc_local((8,), dtype)
                for v in T.vectorized(8):
                    r[v] = X[bx * 1024 + T.get_thread_binding(0) * 8 + v] * 2.0
                for v in T.vectorized(8):
                    Y[bx * 1024 + T.get_thread_binding(0) * 8 + v] = r[v]
            return Y
        """,
        "scale.py",
    )
    assert text.count("for v in vectorized(8):") == 2
    assert "#pragma unroll" in _compiles(text, tmp_path)


def test_views_of_a_tensors_data_convert(tmp_path: pathlib.Path) -> None:
    text = _convert(
        """
        import tilelang.language as T

        @tilelang.jit
        def flat(A, dtype=T.float16):
            Z, M, K = T.const("Z, M, K")
            A: T.Tensor((Z, M, K), dtype)
            Y = T.empty((Z * M,), dtype)
            with T.Kernel(T.ceildiv(Z * M, 128), threads=128) as bx:
                A_rows = T.Tensor((Z * M, K), dtype, A.data)
                for i in T.Parallel(128):
                    Y[bx * 128 + i] = A_rows[bx * 128 + i, 0]
            return Y
        """,
        "flat.py",
    )
    assert "A_rows = Tensor((Z * M, K), dtype, A.data)" in text
    assert "A[(bx * 128 + i) * K]" in _compiles(text, tmp_path)
