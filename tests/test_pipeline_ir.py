"""The IRs between the stages: the Tile IR of every example verifies, prints,
and survives layout inference and lowering; `--emit tir` and `--emit thread`
give text. (tir_print.verify is the check run after each pass.)"""

from __future__ import annotations

import pathlib

import pytest

from tilec import tir_print
from tilec.elaborate import elaborate_file
from tilec.passes.infer_layouts import infer_layouts
from tilec.pipeline import compile_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("tests/golden/codegen/*.tile"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_ir_verifies_before_and_after_passes(path: pathlib.Path) -> None:
    program = elaborate_file(str(path), {})
    tir_print.verify(program)
    for kernel in program.kernels:
        layouts = infer_layouts(kernel)
        fragments = [s.buffer for s in kernel.body if getattr(s, "buffer", None) is not None]
        for buf in fragments:
            if buf.scope == "fragment":
                frag = layouts.buffers[buf]
                assert frag.shape == buf.const_shape
                assert frag.threads == kernel.threads
    tir_print.verify(program)  # passes must not mutate the program they read
    if program.kernels:
        assert "__global__" in compile_program(program)


def test_emit_tir_and_thread_text() -> None:
    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    tir_text = compile_program(program, emit="tir")
    assert tir_text.startswith("kernel gemm(A: float16[M, K] global")
    assert "gemm A_shared[" in tir_text and "pipelined(0, (K + 63) / 64, 1, stages=3)" in tir_text
    thread_text = compile_program(program, emit="thread")
    assert thread_text.startswith("kernel gemm threads=256")
    assert "__syncthreads();" in thread_text


def test_verifier_rejects_a_broken_program() -> None:
    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    kernel = program.kernels[0]
    body = tuple(s for s in kernel.body if not (type(s).__name__ == "Alloc" and s.buffer.name == "A_shared"))
    broken = type(kernel)(**{**{f: getattr(kernel, f) for f in kernel.__dataclass_fields__}, "body": body})
    with pytest.raises(tir_print.VerifyError, match="A_shared"):
        tir_print.verify(type(program)((broken,), program.files))


def test_shared_memory_is_checked_again_after_multi_buffering(tmp_path: pathlib.Path) -> None:
    from tilec.diagnostics import CompileError, render_all

    src = (ROOT / "examples" / "gemm.tile").read_text()
    path = tmp_path / "gemm.tile"
    path.write_text(src)
    # 128x128x128 float16 tiles fit once (64 KiB), not in 4 padded stages on sm_86 (99 KiB)
    program = elaborate_file(str(path), {"block_K": "128", "num_stages": "4"}, arch="sm_86")
    with pytest.raises(CompileError) as caught:
        compile_program(program, arch="sm_86")
    text = render_all(caught.value.diagnostics)
    assert "once its pipelines are multi-buffered; sm_86 allows 101376" in text
    assert "hint: use fewer num_stages" in text
