"""Copies that open an `if` of a Pipelined loop (plan_pipeline `_guards_hoisted`): taken out in
front of it with the condition as their guard and run ahead, or left in their iteration with the
reason -Wlost-pipeline and explain give. The block-sparse GEMM itself is the golden pipeline_if
(codegen, all targets) and tests/golden/explain/pipeline_if; the GPU check blocksparse_gemm."""

from __future__ import annotations

import pathlib

import pytest

from tilec import tir, tir_walk
from tilec.driver import compile_file, elaborate
from tilec.passes.plan_pipeline import producers, refusals
from tilec.pipeline import run_passes, tile_ir_passes

KERNEL = """\
kernel masked(A: Tensor((M, K), float16), B: Tensor((K, 64), float16), Mask: Tensor((M // 64, K // 32), "bool"),
              C: Tensor((M, 64), float32), skip: int32):
    with Kernel(ceildiv(M, 64), threads=128) as bx:
        A_shared = alloc_shared((64, 32), float16)
        B_shared = alloc_shared((32, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        clear(acc)
        for k in Pipelined(ceildiv(K, 32), {stages}):
{body}
        copy(acc, C[bx * 64, 0])
"""

BLOCKSPARSE = """\
            if Mask[bx, k]:
                copy(A[bx * 64, k * 32], A_shared)
                copy(B[k * 32, 0], B_shared)
                gemm(A_shared, B_shared, acc)"""


def _loop(tmp_path: pathlib.Path, body: str, arch: str = "sm_80", stages: str = "num_stages=3") -> tir.For:
    path = tmp_path / "k.tile"
    path.write_text(KERNEL.format(body=body, stages=stages))
    kernel = run_passes(elaborate(str(path), arch=arch), arch, tile_ir_passes(), verify=True)[0].kernel
    return next(s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "gfx90a"])
def test_the_copies_of_an_if_run_ahead_under_its_condition(tmp_path: pathlib.Path, arch: str) -> None:
    loop = _loop(tmp_path, BLOCKSPARSE, arch)
    a, b, rest = loop.body
    assert [c.dst.buffer.name for c in producers(loop)] == ["A_shared", "B_shared"]
    assert isinstance(a, tir.Copy) and isinstance(b, tir.Copy) and a.guard == b.guard
    assert isinstance(rest, tir.If) and a.guard == rest.cond and [type(t) for t in rest.then] == [tir.Gemm]
    assert not loop.warp_specialized  # warp roles have no skipped stages: cp.async with wgmma on sm_90a
    assert refusals(loop) == []


def test_an_if_of_copies_only_leaves_no_if(tmp_path: pathlib.Path) -> None:
    body = "            copy(A[bx * 64, k * 32], A_shared)\n            if Mask[bx, k]:\n"
    body += "                copy(B[k * 32, 0], B_shared)\n            gemm(A_shared, B_shared, acc)"
    loop = _loop(tmp_path, body.replace("gemm(A_shared, B_shared, acc)", "pass"))
    assert [type(t) for t in loop.body] == [tir.Copy, tir.Copy]
    assert loop.body[0].pipeline == loop.body[1].pipeline == "producer"


def test_a_condition_through_a_let_is_written_out(tmp_path: pathlib.Path) -> None:
    body = "            on = Mask[bx, k]\n" + BLOCKSPARSE.replace("if Mask[bx, k]:", "if on:")
    loop = _loop(tmp_path, body)
    copies = producers(loop)
    assert len(copies) == 2 and all(isinstance(c.guard, tir.Load) and c.guard.buffer.name == "Mask" for c in copies)
    path = tmp_path / "k.tile"
    text = compile_file(str(path), arch="sm_80")
    assert text.count("tilec_cp_async_commit();") == 2  # the prologue's and the loop's: one group an iteration
    assert "Mask[" in text and "k + 2" in text


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (  # the tile is read where the copy may have been skipped
            "            if k != skip:\n                copy(B[k * 32, 0], B_shared)\n"
            "            copy(A[bx * 64, k * 32], A_shared)\n            gemm(A_shared, B_shared, acc)",
            "its tile 'B_shared' is read outside the `if`",
        ),
        (  # an else branch
            BLOCKSPARSE + "\n            else:\n                clear(acc)",
            "only copies at the top level of the body, or opening an `if` (without else) there, run ahead",
        ),
        (  # the condition is a value of the iteration
            "            flag = acc[0, 0] > 0.0\n" + BLOCKSPARSE.replace("if Mask[bx, k]:", "if flag:"),
            "the condition of its `if` (line 10) uses 'flag', loaded in the loop body",
        ),
        (  # a copy after the if's first statement that is not a copy
            "            if Mask[bx, k]:\n                copy(A[bx * 64, k * 32], A_shared)\n"
            "                clear(acc)\n                copy(B[k * 32, 0], B_shared)\n"
            "                gemm(A_shared, B_shared, acc)",
            "only copies at the top level of the body, or opening an `if` (without else) there, run ahead",
        ),
    ],
)
def test_copies_that_stay_in_their_iteration_say_why(tmp_path: pathlib.Path, body: str, reason: str) -> None:
    loop = _loop(tmp_path, body)
    assert any(reason in r.reason for _, r in refusals(loop)), [r.reason for _, r in refusals(loop)]


def test_a_manual_schedule_keeps_its_if(tmp_path: pathlib.Path) -> None:
    loop = _loop(tmp_path, BLOCKSPARSE, stages="num_stages=3, order=[0], stage=[0]")
    assert isinstance(loop.body[0], tir.If) and producers(loop) == []


def test_a_tile_the_if_writes_again_keeps_its_copy(tmp_path: pathlib.Path) -> None:
    body = BLOCKSPARSE + "\n                fill(A_shared, 0.0)"
    loop = _loop(tmp_path, body)
    assert [c.dst.buffer.name for c in producers(loop)] == ["B_shared"]
    branch = loop.body[-1]  # A's copy stays in the `if`, unguarded
    assert isinstance(branch, tir.If) and isinstance(branch.then[0], tir.Copy) and branch.then[0].guard is None
    assert any("writes its tile 'A_shared' elsewhere too" in r.reason for _, r in refusals(loop))
