"""The Target registry (targets.py) and what reads it: emit's spellings and headers,
toolchain and runtime flags, elaborate's limits, the CLI's --arch choices."""

from __future__ import annotations

import dataclasses

import pytest

from tilec import emit, runtime, tir, toolchain
from tilec import thread_ir as T
from tilec.dtypes import DType
from tilec.targets import ARCHES, TARGETS, get_target, target_of_capability

F32, F16, I32 = DType.float32, DType.float16, DType.int32
SM80 = get_target("sm_80")


def kernel(body: tuple[T.Stmt, ...] = (), tensors: tuple[str, ...] = ("float32",), **kw) -> T.Kernel:
    abi = {"name": "k", "tensors": [{"name": f"A{i}", "dtype": d, "shape": [4]} for i, d in enumerate(tensors)]}
    params = tuple(T.Param(f"A{i}", F32, pointer=True) for i in range(len(tensors)))
    return T.Kernel("k", params, 128, (tir.IntImm(1, I32),), 0, body, abi, **kw)


def module(*kernels: T.Kernel, helpers: tuple[str, ...] = ()) -> T.Module:
    return T.Module(kernels, helpers, SM80.headers, "k.tile")


# ---------------------------------------------------------------- the registry


def test_one_record_per_arch() -> None:
    assert ARCHES == ("sm_80", "sm_86", "sm_89", "sm_90a", "gfx90a", "gfx942")
    for arch, t in TARGETS.items():
        if t.language == "hip":
            assert (t.backend, t.warp_size, t.smem_limit, t.gencode) == ("hip.cdna", 64, 65536, arch)
            continue
        backend = "cuda.sm90" if arch == "sm_90a" else "cuda.sm80"  # wgmma; the rest as sm_80
        assert (t.arch, t.language, t.backend, t.warp_size) == (arch, "cuda", backend, 32)
        assert t.gencode == f"arch=compute_{arch[3:]},code={arch}"
    assert target_of_capability(9, 0) is get_target("sm_90a")
    assert target_of_capability(7, 5) is None
    assert target_of_capability(9, 10) is None  # gfx90a's (9, 0x0a) is no CUDA device's


def test_hipcc_flags_come_from_the_record() -> None:
    from tilec.targets import compiler_flags

    gfx90a = get_target("gfx90a")
    assert compiler_flags(gfx90a, "hsaco", werror=True) == [
        "--genco", "--offload-arch=gfx90a", "-O3", "-std=c++17", "-Werror"
    ]  # fmt: skip
    assert compiler_flags(gfx90a, "shared")[:2] == ["-shared", "-fPIC"]
    assert gfx90a.compiler.env == {"HIP_PLATFORM": "amd"} and gfx90a.compiler.source_suffix == ".hip"


def test_cli_arch_choices_are_the_registry() -> None:
    from tilec import cli

    arch = next(p for p in cli.build.params if p.name == "arch")
    assert tuple(arch.type.choices) == ARCHES  # type: ignore[attr-defined]


def test_toolchain_and_runtime_read_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TARGETS, "sm_80", dataclasses.replace(SM80, gencode="arch=compute_80,code=[sm_80,compute_80]"))
    assert toolchain.gencode("sm_80") == ["-gencode", "arch=compute_80,code=[sm_80,compute_80]"]
    assert "arch=compute_80,code=[sm_80,compute_80]" in runtime.nvcc_flags("sm_80")
    with pytest.raises(ValueError, match="unknown GPU architecture 'sm_75'"):
        runtime.nvcc_flags("sm_75")


def test_elaborate_reads_warp_size_and_smem_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.diagnostics import CompileError
    from tilec.elaborate import elaborate_file

    text = (
        "kernel k(A: Tensor((64,), float32)):\n"
        "    with Kernel(1, threads=96) as bx:\n"
        "        S = alloc_shared((64,), float32)\n"
        "        copy(A[0], S)\n"
    )
    elaborate_file("k.tile", text=text)  # 96 threads: three warps of 32
    monkeypatch.setitem(TARGETS, "sm_80", dataclasses.replace(SM80, warp_size=64, smem_limit=128))
    with pytest.raises(CompileError) as info:
        elaborate_file("k.tile", text=text)
    assert "positive multiple of 64" in str(info.value.diagnostics[0].message)
    monkeypatch.setitem(TARGETS, "sm_80", dataclasses.replace(SM80, smem_limit=128))
    with pytest.raises(CompileError) as info:
        elaborate_file("k.tile", text=text)
    assert "uses 256 bytes of shared memory; sm_80 allows 128" in str(info.value.diagnostics[0].message)


# ---------------------------------------------------------------- spellings


def test_neutral_forms_are_spelled_by_the_record() -> None:
    sp = SM80.spelling
    v = T.Sym("v", F32)
    assert emit.expr_text(T.Builtin("thread_index"), sp) == "threadIdx.x"
    assert emit.expr_text(T.Builtin("grid_dim_y"), sp) == "gridDim.y"
    assert emit.expr_text(T.Intrin("shfl_xor", (v, tir.IntImm(16, I32)), F32), sp) == (
        "__shfl_xor_sync(0xffffffffu, v, 16)"
    )
    assert emit.stmt_lines(T.Barrier("block"), sp) == ["__syncthreads();"]
    assert emit.stmt_lines(T.Barrier("async_wait", (tir.IntImm(1, I32),)), sp) == ["tilec_cp_async_wait<1>();"]
    # the forms lowering produces today pass through as written
    assert emit.stmt_lines(T.Call(T.Intrin("__syncthreads", (), I32)), sp) == ["__syncthreads();"]
    with pytest.raises(NotImplementedError, match="'mbarrier_wait' is not spelled for this target yet"):
        emit.stmt_lines(T.Barrier("mbarrier_wait"), sp)


def test_host_prologue_is_printed_before_the_launch() -> None:
    k = kernel(host_prologue=(T.Comment("descriptors"),))
    text = emit.emit_module(module(k), SM80)
    assert text.index("// descriptors") < text.index("k_kernel<<<") and "cudaStream_t stream" in text
    assert "// descriptors" not in emit.emit_module(module(kernel()), SM80)


def test_barrier_helpers_come_with_their_barrier() -> None:
    text = emit.emit_module(module(kernel((T.Barrier("async_commit"),))), SM80)
    assert "void tilec_cp_async_commit()" in text and "tilec_smem_addr" in text


# ---------------------------------------------------------------- headers


def headers(*kernels: T.Kernel, helpers: tuple[str, ...] = ()) -> list[str]:
    return list(emit.used_headers(module(*kernels, helpers=helpers), SM80))


def test_headers_only_those_used() -> None:
    assert headers(kernel()) == ["cuda_runtime.h"]
    assert headers(kernel(tensors=("float16",))) == ["cuda_runtime.h", "cuda_fp16.h"]
    cast = T.Assign(T.Sym("x", F32), tir.Cast(T.Sym("y", DType.bfloat16), F32))
    assert headers(kernel((cast,))) == ["cuda_runtime.h", "cuda_bf16.h"]
    fp8 = T.Decl("r", DType.float8_e4m3, (4,))
    assert headers(kernel((T.Scope("", (fp8,)),))) == ["cuda_runtime.h", "cuda_fp8.h"]
    assert headers(kernel(), helpers=("pack",)) == ["cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h"]
    assert headers(kernel(), helpers=("mma_f16",)) == ["cuda_runtime.h"]  # its text names no half type
    printf = T.Call(T.Intrin("printf", ('"oops\\n"',), I32))
    assert headers(kernel((printf,))) == ["cuda_runtime.h", "stdio.h"]
    raw = T.Decl("ok", DType.bool, (), tir.Var("reinterpret_cast<uintptr_t>(A0) % 16 == 0", I32, "thread"))
    assert headers(kernel((raw,))) == ["cuda_runtime.h", "stdint.h"]


def test_comments_do_not_pull_headers() -> None:
    body = (T.Comment("printf a half"), T.Scope("half of uintptr_t", ()))
    assert headers(kernel(body)) == ["cuda_runtime.h"]


def test_header_file_uses_the_record() -> None:
    from tilec import driver

    k = kernel(tensors=("float16",))
    k = dataclasses.replace(k, abi={**k.abi, "scalars": [{"name": "s", "dtype": "bfloat16"}], "dims": ["M"]})
    text = driver.header_text(emit.emit_module(module(k), SM80), "k.tile", "sm_80")
    assert "#include <cuda_runtime.h>\n#include <cuda_bf16.h>\n" in text
    assert "    cudaStream_t stream);  // stream to launch on" in text
