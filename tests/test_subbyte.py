"""Sub-byte types (int4, uint4, float4_e2m1): elaboration's value types and refusals, the pass
pack_subbyte (byte buffers half as wide), the ABI and runtime's packed shapes, the inline helpers
run on the host, reinterpret(), and the gemm on mma.sync m16n8k64."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from tilec import runtime, tir, tir_walk
from tilec.backends import SHARED_HELPERS
from tilec.diagnostics import CompileError
from tilec.driver import compile_file
from tilec.dtypes import DTYPE_NAMES, DType
from tilec.elaborate import elaborate_file
from tilec.passes.pack_subbyte import FP4_VALUES, fp4_e2m1_code, pack_subbyte
from tilec.pipeline import compile_program

ROOT = pathlib.Path(__file__).resolve().parent.parent

UNPACK = """
kernel k(Q: Tensor((M, K), int4), U: Tensor((M, 64), uint4), F: Tensor((M, 64), float4_e2m1),
         Out: Tensor((M, 64), float32)):
    with Kernel(ceildiv(M, 16), threads=128) as bx:
        Q_s = alloc_shared((16, 64), int4)
        clear(Q_s)
        copy(Q[bx * 16, 64], Q_s)
        for i, j in Parallel(16, 64):
            Out[bx * 16 + i, j] = Q_s[i, j] + U[bx * 16 + i, j] * F[bx * 16 + i, j]
"""


def _kernel(tmp_path: pathlib.Path, text: str, arch: str = "sm_80") -> tir.Kernel:
    path = tmp_path / "k.tile"
    path.write_text(text)
    return elaborate_file(str(path), {}, arch=arch).kernels[0]


def _errors(tmp_path: pathlib.Path, text: str, arch: str = "sm_80") -> list[str]:
    path = tmp_path / "k.tile"
    path.write_text(text)
    with pytest.raises(CompileError) as info:
        compile_program(elaborate_file(str(path), {}, arch=arch), arch)
    return [d.message for d in info.value.diagnostics]


def test_the_names_and_their_value_types() -> None:
    assert DTYPE_NAMES["float4_e2m1fn"] is DType.float4_e2m1  # TileLang's spelling
    assert "int4x2" not in DTYPE_NAMES  # the packed byte types are not written in source
    for t, value in ((DType.int4, DType.int8), (DType.uint4, DType.uint8), (DType.float4_e2m1, DType.float32)):
        assert t.is_subbyte and t.bits == 4 and t.value_type is value
        assert t.storage.is_packed and t.storage.bits == 8
    assert DType.int4.int_bounds == (-8, 7) and DType.uint4.int_bounds == (0, 15)


def test_elements_read_as_their_value_types(tmp_path: pathlib.Path) -> None:
    k = _kernel(tmp_path, UNPACK)
    (store,) = [s for s in tir_walk.stmts(k.body) if isinstance(s, tir.Store)]
    casts = [e for e in tir_walk.subexprs(store.value) if isinstance(e, tir.Cast) and isinstance(e.value, tir.Load)]
    assert sorted(c.dtype.tile_name for c in casts) == ["float32", "int8", "uint8"]


def test_pack_subbyte_halves_the_innermost_dimension(tmp_path: pathlib.Path) -> None:
    k = pack_subbyte(_kernel(tmp_path, UNPACK))
    q = k.tensors[0]
    assert q.dtype is DType.int4x2 and isinstance(q.shape[1], tir.BinOp) and q.shape[1].op == "//"
    assert [t.dtype for t in k.tensors] == [DType.int4x2, DType.uint4x2, DType.float4_e2m1x2, DType.float32]
    assert k.tensors[1].shape[1] == tir.IntImm(32)
    stmts = list(tir_walk.stmts(k.body))
    (alloc,) = [s for s in stmts if isinstance(s, tir.Alloc)]
    assert alloc.buffer.dtype is DType.int4x2 and alloc.buffer.const_shape == (16, 32)
    (fill,) = [s for s in stmts if isinstance(s, tir.Fill)]
    assert fill.value == tir.IntImm(0, DType.int4x2)
    (copy,) = [s for s in stmts if isinstance(s, tir.Copy)]
    assert copy.src.starts[1] == tir.IntImm(32) and copy.src.extents[1] == tir.IntImm(32)
    exprs = [e for s in stmts for x in tir_walk.stmt_exprs(s) for e in tir_walk.subexprs(x)]
    calls = sorted(e.func for e in exprs if isinstance(e, tir.Call))
    assert calls == ["unpack_fp4_e2m1", "unpack_int4", "unpack_uint4"]
    assert pack_subbyte(k) is k  # nothing sub-byte is left


def test_the_abi_names_the_elements_and_the_launcher_refuses_odd_k(tmp_path: pathlib.Path) -> None:
    (tmp_path / "k.tile").write_text(UNPACK)
    text = compile_file(str(tmp_path / "k.tile"), {}, arch="sm_80")
    abi = runtime.parse_abi(text)["kernels"][0]
    assert [(t["dtype"], t["shape"]) for t in abi["tensors"]] == [
        ("int4", ["M", "K"]),
        ("uint4", ["M", 64]),
        ("float4_e2m1", ["M", 64]),
        ("float32", ["M", 64]),
    ]
    assert "K % 2 != 0" in text  # the launcher's refusal of an int4 row with no packed form
    assert "unsigned char* __restrict__ Q" in text.replace("const ", "")
    for helper in ("tilec_int4(", "tilec_uint4(", "tilec_fp4_e2m1("):
        assert helper in text


def test_the_runtime_binds_packed_shapes() -> None:
    spec = {"name": "Q", "dtype": "int4", "shape": ["M", "K"]}
    assert runtime.logical_shape(spec, (3, 8)) == (3, 16)
    assert runtime.logical_shape({"dtype": "float32"}, (3, 8)) == (3, 8)
    kernel = {"name": "k", "tensors": [spec], "dims": ["M", "K"]}
    assert runtime.infer_dims(kernel, [runtime.logical_shape(spec, (3, 8))]) == [3, 16]


def test_fp4_codes() -> None:
    assert [fp4_e2m1_code(v) for v in FP4_VALUES] == list(range(8))
    assert fp4_e2m1_code(-1.5) == 8 | 3 and fp4_e2m1_code(100.0) == 7 and fp4_e2m1_code(0.25) == 0
    assert fp4_e2m1_code(2.5) == 4  # the tie goes to the even code (2.0)


HOST_SHIM = """#include <cstdio>
#include <cstring>
#define __device__
#define __forceinline__ inline
static float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
"""


def test_the_unpack_helpers_on_the_host(tmp_path: pathlib.Path) -> None:
    """tilec_int4 / tilec_uint4 / tilec_fp4_e2m1 of every byte and both nibbles."""
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    main = """int main() {
  for (int b = 0; b < 256; ++b)
    for (int j = 0; j < 2; ++j)
      std::printf("%d %d %d %g\\n", tilec_int4(b, j), tilec_uint4(b, j), 0, tilec_fp4_e2m1(b, j));
}
"""
    src = HOST_SHIM + SHARED_HELPERS["int4"] + SHARED_HELPERS["fp4_e2m1"] + "\n" + main
    (tmp_path / "h.cpp").write_text(src)
    subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(tmp_path / "h"), str(tmp_path / "h.cpp")], check=True)
    lines = subprocess.run([str(tmp_path / "h")], check=True, capture_output=True, text=True).stdout.split("\n")
    for n, line in enumerate(lines[:-1]):
        nibble = (n // 2 >> (4 * (n % 2))) & 15
        s, u, _, f = line.split()
        assert int(u) == nibble and int(s) == nibble - 16 * (nibble >= 8)
        magnitude = FP4_VALUES[nibble & 7]
        assert float(f) == (-magnitude if nibble & 8 else magnitude)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("Q_s[i, j] = 1", "cannot store one element of int4 buffer 'Q_s'"),
        ("Out[bx * 16 + i, j] = cast(Q_s[i, j], uint4)", "cast() cannot convert to uint4"),
        ("Out[bx * 16 + i, j] = reinterpret(Q_s[i, j], float16)", "reinterpret() keeps the bits"),
        ("Out[bx * 16 + i, j] = reinterpret(Out[bx * 16 + i, j], int16)", "reinterpret() keeps the bits"),
    ],
)
def test_refusals_inside_parallel(tmp_path: pathlib.Path, line: str, message: str) -> None:
    text = f"""
kernel k(Out: Tensor((M, 64), float32)):
    with Kernel(ceildiv(M, 16), threads=128) as bx:
        Q_s = alloc_shared((16, 64), int4)
        for i, j in Parallel(16, 64):
            {line}
"""
    (got,) = _errors(tmp_path, text)
    assert got.startswith(message), got


def test_tile_ops_of_subbyte_tiles_are_refused_at_the_op(tmp_path: pathlib.Path) -> None:
    text = """
kernel k(Q: Tensor((M, 64), int4), Out: Tensor((M,), int32)):
    with Kernel(ceildiv(M, 16), threads=128) as bx:
        Q_s = alloc_shared((16, 64), int4)
        Q_t = alloc_shared((16, 64), int4)
        copy(Q[bx * 16, 0], Q_s)
        cumsum(Q_s, Q_t, dim=1)
        fill(Q_t, bx)
        copy(Q[bx * 16:bx * 16 + 16, 0:63], Q_t[0:16, 0:63])
"""
    got = _errors(tmp_path, text)
    assert got[0] == "cumsum of the int4 tile 'Q_s' is not supported"
    assert got[1] == "fill of int4 tile 'Q_t' needs a constant value"
    assert got[2].startswith("copy of 'Q' (int4) covers 63 elements of its innermost dimension")


def test_reinterpret_literals_take_the_width_of_the_type(tmp_path: pathlib.Path) -> None:
    text = """
kernel k(H: Tensor((64,), float16), Y: Tensor((64,), uint32)):
    with Kernel(1, threads=64) as bx:
        for i in Parallel(64):
            H[i] = reinterpret(0x3C00, float16)
            Y[i] = reinterpret(1.0, uint32) + reinterpret(H[i], uint16)
"""
    k = _kernel(tmp_path, text)
    stores = [s for s in tir_walk.stmts(k.body) if isinstance(s, tir.Store)]
    calls = [e for s in stores for e in tir_walk.subexprs(s.value) if isinstance(e, tir.Call)]
    assert [(c.args[0].dtype.tile_name, c.dtype.tile_name) for c in calls] == [  # type: ignore[union-attr]
        ("uint16", "float16"),
        ("float32", "uint32"),
        ("float16", "uint16"),
    ]
    (tmp_path / "k.tile").write_text(text)
    code = compile_file(str(tmp_path / "k.tile"), {}, arch="sm_80")
    assert "tilec_bitcast<half>(" in code and "tilec_bitcast<unsigned short>(H[i" in code


def test_int4_gemm_takes_the_4bit_mma_on_both_targets() -> None:
    for arch in ("sm_80", "sm_90a"):
        text = compile_file(str(ROOT / "tests/corpus/tilelang/gemm_int4.tile"), {}, arch=arch)
        assert "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32" in text
        assert "wgmma" not in text
