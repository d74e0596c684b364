"""Warp roles for a GEMM main loop inside the kernel's own serial loops and ifs (TileLang's
persistent GEMM walks its tiles in a wave loop of its own): plan_pipeline.skeleton decides what
the producer can replay, sm90.py replays it, and the kernel keeps its grid."""

from __future__ import annotations

import pathlib

from tilec import tir, tir_walk
from tilec.driver import compile_file
from tilec.elaborate import elaborate_file
from tilec.explain import explain_program, render_text
from tilec.pipeline import run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent

HEAD = """kernel k(A: Tensor((M, K), float16), B: Tensor((K, N), float16), C: Tensor((M, N), float32),
         T: Tensor((8,), int32)):
    with Kernel(16, threads=128) as b:
        A_s = alloc_shared((128, 64), float16)
        B_s = alloc_shared((64, 128), float16)
        acc = alloc_fragment((128, 128), float32)
"""

MAIN_LOOP = """
for k in Pipelined(ceildiv(K, 64), num_stages=3):
    copy(A[bx * 128, k * 64], A_s)
    copy(B[k * 64, by * 128], B_s)
    gemm(A_s, B_s, acc)
copy(acc, C[bx * 128, by * 128])
"""


def source(tmp_path: pathlib.Path, outer: str, indent: int) -> pathlib.Path:
    """A kernel whose body is `outer` with the main loop (and its epilogue) at `indent` spaces
    below it, at the place marked `@`."""
    loop = "".join(" " * indent + line + "\n" for line in MAIN_LOOP.strip("\n").splitlines())
    body = "".join(f"        {line}\n" for line in outer.strip("\n").splitlines())
    path = tmp_path / "k.tile"
    path.write_text(HEAD + body.replace(" " * 8 + "@\n", "".join(" " * 8 + x + "\n" for x in loop.splitlines())))
    return path


WAVES = """
for w in serial(ceildiv(ceildiv(M, 128) * ceildiv(N, 128), 16)):
    t = 16 * w + b
    bx = t % ceildiv(M, 128)
    by = t // ceildiv(M, 128)
    if by * 128 < N:
        clear(acc)
@
"""


def main_loop(path: pathlib.Path) -> tir.For:
    (u,) = run_passes(elaborate_file(str(path), {}), "sm_90a")
    return next(s for s in tir_walk.stmts(u.kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined")


def test_the_corpus_persistent_gemm_runs_by_warp_roles_on_its_own_grid() -> None:
    program = elaborate_file(str(ROOT / "tests" / "corpus" / "tilelang" / "gemm_persistent.tile"), {})
    units = {u.kernel.name: u for u in run_passes(program, "sm_90a")}
    u = units["matmul_persistent"]
    assert u.lowered is not None and u.lowered.consumer_threads == 256
    assert not u.lowered.persistent and u.lowered.fallback is not None  # the user's grid of sm_num blocks
    top = units["matmul_non_persistent"].lowered  # its main loop at the top: the compiler's tile walk
    assert top is not None and top.persistent
    loops = [s for s in tir_walk.stmts(u.kernel.body) if isinstance(s, tir.For) and s.warp_specialized]
    assert len(loops) == 1


def test_the_producer_replays_the_wave_loop_lets_and_test(tmp_path: pathlib.Path) -> None:
    text = compile_file(str(source(tmp_path, WAVES, 8)), {}, arch="sm_90a")
    producer = text[text.index("if (tx == 128) {") : text.index("} else {", text.index("if (tx == 128) {"))]
    assert "(replayed by the producer)" in producer and "for (int w = 0;" in producer
    assert "const int t = w * 16 + b;" in producer and "if (by * 128 < N) {" in producer
    assert "tilec_persistent_blocks" not in text and "const dim3 grid(16, 1, 1);" in text
    assert text.count("filled += (K + 63) / 64;") == 1 and text.count("consumed += (K + 63) / 64;") == 1


def test_a_loop_in_an_else_branch_is_replayed_under_the_negated_test(tmp_path: pathlib.Path) -> None:
    outer = WAVES.replace(
        "    if by * 128 < N:\n        clear(acc)\n@", "    if by * 128 >= N:\n        clear(acc)\n    else:\n@"
    )
    text = compile_file(str(source(tmp_path, outer, 8)), {}, arch="sm_90a")
    assert "if (!(by * 128 >= N)) {" in text


def test_what_the_producer_cannot_replay_keeps_the_cp_async_pipeline(tmp_path: pathlib.Path) -> None:
    loads = WAVES.replace("if by * 128 < N:", "if T[w % 8] > 0:")  # a load: not the producer's to compute
    breaks = WAVES.replace("    if by * 128 < N:", "    if w > 100:\n        break\n    if by * 128 < N:")
    for i, outer in enumerate((loads, breaks)):
        folder = tmp_path / str(i)
        folder.mkdir()
        loop = main_loop(source(folder, outer, 8))
        assert not loop.warp_specialized and loop.num_stages == 3


def test_explain_says_the_nested_loop_runs_by_warp_roles(tmp_path: pathlib.Path) -> None:
    text = render_text(explain_program(elaborate_file(str(source(tmp_path, WAVES, 8)), {}), "sm_90a"))
    assert "num_stages=3, warp roles: one thread of a producer warp group" in text
    assert "the producer replays the loops and ifs around it, lines 7, 11; the kernel keeps its grid" in text
    assert "grid (16)" in text and "(persistent)" not in text
