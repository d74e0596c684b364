"""Copies that open an `if` of a Pipelined loop (plan_pipeline `_guards_hoisted`): taken out in
front of it with the condition as their guard and run ahead, or left in their iteration with the
reason -Wlost-pipeline and explain give. On sm_90a a loop whose body is that one `if` of its
copies and gemm runs by warp roles, both roles taking a stage of the ring only where the
condition holds (plan_pipeline `ring_guard`, sm90.py `_run`). The block-sparse GEMM itself is the
golden pipeline_if (codegen, all targets), blocksparse_waves_warp_roles (sm_90a, in a wave loop)
and tests/golden/explain/pipeline_if; the GPU check blocksparse_gemm."""

from __future__ import annotations

import pathlib

import pytest

from tilec import tir, tir_walk
from tilec.driver import compile_file, elaborate
from tilec.explain import explain_program, render_text
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
    assert loop.warp_specialized == (arch == "sm_90a")  # the ring's stages taken where the condition holds
    assert refusals(loop) == []


def _source(tmp_path: pathlib.Path, body: str) -> str:
    path = tmp_path / "k.tile"
    path.write_text(KERNEL.format(body=body, stages="num_stages=3"))
    return str(path)


def _roles(text: str) -> tuple[str, str]:
    """The producer thread's code and the consumers' of a kernel with warp roles (128 threads)."""
    kernel = text[text.index("masked_kernel(") :]
    producer = kernel[kernel.index("if (tx == 128) {") : kernel.index("} else {")]
    return producer, kernel[kernel.index("} else {") :]


def test_both_roles_take_a_stage_only_where_the_condition_holds(tmp_path: pathlib.Path) -> None:
    text = compile_file(_source(tmp_path, BLOCKSPARSE), arch="sm_90a")
    producer, consumers = _roles(text)
    mask = "bx < M / 64 && k < K / 32 ? Mask[bx * (K / 32) + k] : false"
    assert mask in producer and mask in consumers  # the same test, of the same iteration, on both sides
    assert "const int stage = (filled + taken) % 3;" in producer and "filled += taken;" in producer
    assert producer.index(mask) < producer.index("tilec_mbarrier_wait(&empty_bar[stage]")
    assert "const int stage_1 = (consumed + taken_1) % 3;" in consumers and "consumed += taken_1;" in consumers
    # the previous stage is freed once a later taken iteration's wgmmas retire it, the last after
    # the loop: none where no iteration was taken
    assert consumers.count("if (taken_1 > 0 && lane == 0) {") == 2
    assert "cp_async" not in text[text.index("masked_kernel(") :]


def test_a_condition_without_loads_takes_stages_too(tmp_path: pathlib.Path) -> None:
    """A condition of the loop variable and a scalar (every other K tile): both roles compute it."""
    body = BLOCKSPARSE.replace("if Mask[bx, k]:", "if k % 2 != skip:")
    loop = _loop(tmp_path, body, "sm_90a")
    assert loop.warp_specialized
    producer, consumers = _roles(compile_file(_source(tmp_path, body), arch="sm_90a"))
    assert "if (k % 2 != skip) {" in producer and "if (k % 2 != skip) {" in consumers


def test_explain_says_the_loop_runs_by_warp_roles_with_the_guard(tmp_path: pathlib.Path) -> None:
    text = render_text(explain_program(elaborate(_source(tmp_path, BLOCKSPARSE), arch="sm_90a"), "sm_90a"))
    assert "num_stages=3, warp roles with the guard of the `if` at line 9: one thread of a producer" in text
    assert "only the iterations where Mask[bx, k] holds take a stage" in text
    assert "producer if Mask[bx, k] (up to 3 stages ahead)" in text


@pytest.mark.parametrize(
    "body",
    [
        # the condition through a name the body binds: the consumers' body is not the `if` alone
        "            on = Mask[bx, k]\n" + BLOCKSPARSE.replace("if Mask[bx, k]:", "if on:"),
        # one copy in every iteration, one under the mask: the ring's stages hold both
        "            copy(A[bx * 64, k * 32], A_shared)\n            if Mask[bx, k]:\n"
        "                copy(B[k * 32, 0], B_shared)\n                gemm(A_shared, B_shared, acc)",
        # a statement beside the `if`
        BLOCKSPARSE + "\n            for i, j in Parallel(64, 64):\n                acc[i, j] *= 0.5",
    ],
)
def test_other_guarded_bodies_keep_cp_async_on_sm90a(tmp_path: pathlib.Path, body: str) -> None:
    loop = _loop(tmp_path, body, "sm_90a")
    assert producers(loop) and not loop.warp_specialized


def test_a_mask_the_kernel_writes_keeps_cp_async(tmp_path: pathlib.Path) -> None:
    """The producer and the consumers read the condition at different times: a tensor the kernel
    writes could give them different answers, and the ring's two sides would part."""
    path = tmp_path / "k.tile"
    text = KERNEL.format(body=BLOCKSPARSE, stages="num_stages=3")
    path.write_text(text.replace("        clear(acc)\n", "        clear(acc)\n        Mask[bx, 0] = True\n"))
    kernel = run_passes(elaborate(str(path), arch="sm_90a"), "sm_90a", tile_ir_passes(), verify=True)[0].kernel
    loop = next(s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined")
    assert producers(loop) and not loop.warp_specialized


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
