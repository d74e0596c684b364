"""The IRs between the stages: the Tile IR of every example verifies, prints,
and survives layout inference and lowering; `--emit tir` and `--emit thread`
give text; the pass hook (pipeline.py) verifies, times and stops after a pass.
(tir_print.verify and thread_verify.verify_kernel are the checks run after each pass.)"""

from __future__ import annotations

import pathlib
import re

import pytest

from tilec import tir, tir_print, tir_walk
from tilec.driver import compile_file, elaborate
from tilec.dtypes import DType
from tilec.elaborate import elaborate_file
from tilec.passes.infer_layouts import infer_layouts
from tilec.passes.select import select_kernel
from tilec.pipeline import PASSES, compile_program, run_passes, tile_ir_passes
from tilec.targets import get_target

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("tests/golden/codegen/*.tile"))


def test_emit_tir_and_thread_text() -> None:
    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    tir_text = compile_program(program, emit="tir")
    assert tir_text.startswith("kernel gemm(A: float16[M, K] global")
    assert "gemm A_shared[" in tir_text and "pipelined(0, (K + 63) // 64, 1, stages=3)" in tir_text
    thread_text = compile_program(program, emit="thread")
    assert thread_text.startswith("kernel gemm threads=256")
    assert "__syncthreads();" in thread_text


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_emit_tir_prints_every_program(path: pathlib.Path) -> None:
    """The Tile IR printer spells expressions as .tile does, whatever the target can compute
    (it printed through the C emitter, which has no bfloat16 exp: an internal error)."""
    pinned = re.search(r"^# tilec-args:.*--arch (\S+)", path.read_text(), re.M)  # a case for one target
    arch = pinned.group(1) if pinned else "sm_80"
    text = compile_program(elaborate_file(str(path), {}, arch=arch), arch=arch, emit="tir", after="elaborate")
    assert "static_cast" not in text and not re.search(r"\d\.\d*f\b|\bexp2f\(|\[\w+\]\[", text)  # C spellings


def test_emit_tir_spells_expressions_as_tile_does() -> None:
    text = compile_program(elaborate_file(str(ROOT / "tests/golden/codegen/math_casts.tile"), {}), emit="tir")
    assert "cast(sigmoid(x) * exp2(x) + rsqrt(abs(x) + 1.0), float8_e4m3)" in text
    assert "cast(if_then_else(x > 0.0, max(tanh(x), erf(x)), floor(x) - log2(1.0 + x * x)), float32)" in text


def test_tile_ir_expressions_keep_their_shape_when_printed() -> None:
    f32, i32 = DType.float32, DType.int32
    a, b, c = (tir.Var(n, i32, "loop") for n in "abc")
    cmp = tir.BinOp("==", tir.BinOp("<", a, b, DType.bool), c, DType.bool)
    assert tir_print.expr_text(cmp) == "(a < b) == c"  # not the chain a < b == c
    assert tir_print.expr_text(tir.BinOp("-", a, tir.BinOp("-", b, c, i32), i32)) == "a - (b - c)"
    x = tir.Var("x", f32, "loop")
    assert tir_print.expr_text(tir.BinOp("**", tir.FloatImm(-0.0, f32), x, f32)) == "(-0.0) ** x"
    assert tir_print.expr_text(tir.FloatImm(float("-inf"), f32)) == "-infinity(float32)"


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


# ---------------------------------------------------------------- pipeline plan and instruction choice


def _plan(text: str, tmp_path: pathlib.Path, arch: str = "sm_80"):
    from tilec import tir
    from tilec.passes.plan_pipeline import plan_pipeline

    path = tmp_path / "k.tile"
    path.write_text(text)
    (kernel,) = elaborate_file(str(path), {}, arch=arch).kernels
    kernel = select_kernel(kernel, get_target(arch))
    kernel, layouts = infer_layouts(kernel, get_target(arch))
    kernel = plan_pipeline(kernel, get_target(arch))  # its decisions on the nodes
    stmts, stack = [], list(kernel.body)
    while stack:
        s = stack.pop(0)
        stmts.append(s)
        if isinstance(s, tir.For):
            stack = list(s.body) + stack
    return kernel, layouts, stmts


_MAIN_LOOP = """
kernel k(A: Tensor((M, K), {t}), B: Tensor(({b}), {t}), C: Tensor((M, N), {acc})):
    with Kernel(ceildiv(N, 64), ceildiv(M, 64), threads=128) as (bx, by):
        A_s = alloc_shared((64, {bk}), {t})
        B_s = alloc_shared(({bs}), {t})
        acc = alloc_fragment((64, 64), {acc})
        clear(acc)
        for k in Pipelined(ceildiv(K, {bk}), num_stages={stages}):
            copy(A[by * 64, k * {bk}], A_s)
            copy(B[{borigin}], B_s)
            gemm(A_s, B_s, acc{flags})
        copy(acc, C[by * 64, bx * 64])
"""


def _main_loop(t="float16", acc="float32", bk=32, stages=3, nk=False):
    b, bs, borigin = ("N, K", f"64, {bk}", f"bx * 64, k * {bk}") if nk else ("K, N", f"{bk}, 64", f"k * {bk}, bx * 64")
    flags = ", transpose_B=True" if nk else ""
    return _MAIN_LOOP.format(t=t, acc=acc, bk=bk, stages=stages, b=b, bs=bs, borigin=borigin, flags=flags)


def _gemm(stmts):
    from tilec import tir

    return next(s for s in stmts if isinstance(s, tir.Gemm))


@pytest.mark.parametrize(
    ("case", "ahead"),
    [
        ({}, True),  # copies + one tensor-core gemm, 3 stages, two 16-deep steps per tile
        ({"stages": 2}, False),  # two stages: the next tile is not in flight during the last step
        ({"bk": 16}, False),  # one step per tile: the two register sets could not alternate
        ({"bk": 48}, False),  # three steps
        ({"t": "float32"}, False),  # SIMT gemm
        ({"t": "int8", "acc": "int32", "bk": 64, "nk": True}, True),  # two 32-deep m16n8k32 steps
        ({"t": "int8", "acc": "int32", "bk": 32, "nk": True}, False),  # one 32-deep step
    ],
)
def test_main_loop_is_recognized(case: dict, ahead: bool, tmp_path: pathlib.Path) -> None:
    _, _, stmts = _plan(_main_loop(**case), tmp_path)
    assert _gemm(stmts).fragments_ahead == ahead


def test_main_loop_needs_nothing_else_in_the_body(tmp_path: pathlib.Path) -> None:
    scale = "            for i, j in Parallel(64, 64):\n                acc[i, j] *= 0.5\n"
    text = _main_loop().replace("            gemm(A_s, B_s, acc)\n", "            gemm(A_s, B_s, acc)\n" + scale)
    _, _, stmts = _plan(text, tmp_path)
    assert not _gemm(stmts).fragments_ahead


_EARLY = """
kernel k(Q: Tensor((S, 64), float16), K: Tensor((S, 64), float16), O: Tensor((S, 64), float32)):
    with Kernel(ceildiv(S, 64), threads=128) as bx:
        Q_s = alloc_shared((64, 64), float16)
        K_s = alloc_shared((64, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        copy(Q[bx * 64, 0], Q_s)
        clear(acc)
{between}        for k in Pipelined(ceildiv(S, 64), num_stages=2):
            copy(K[k * 64, 0], K_s)
            gemm(Q_s, K_s, acc, transpose_B=True)
        copy(acc, O[bx * 64, 0])
"""


@pytest.mark.parametrize(
    ("between", "early"),
    [
        ("", True),  # Q's tile is first read inside the loop, after its first wait
        ("        copy(Q_s, O[bx * 64, 0])\n", False),  # read before the loop: must be a plain copy
    ],
)
def test_copy_before_a_pipeline_runs_as_cp_async(between: str, early: bool, tmp_path: pathlib.Path) -> None:
    from tilec import tir

    _, _, stmts = _plan(_EARLY.format(between=between), tmp_path)
    q_copy = next(s for s in stmts if isinstance(s, tir.Copy) and s.dst.buffer.name == "Q_s")
    assert (q_copy.pipeline == "early") == early
    if early:  # issued as cp.async, and no barrier for it before the pipeline's own first wait
        text = compile_program(elaborate_file(str(tmp_path / "k.tile"), {}))
        before_loop = text[: text.index("for (int k")]
        assert "tilec_cp_async_16(&Q_s" in before_loop and "__syncthreads" not in before_loop


_PTX = {"mma_sync_m16n8k32": "mma.sync.aligned.m16n8k32", "wgmma_m64nNk32": "wgmma.mma_async.sync.aligned.m64n64k32"}


@pytest.mark.parametrize(
    ("t", "acc", "nk", "arch", "chosen"),
    [
        ("int8", "int32", True, "sm_80", "mma_sync_m16n8k32"),
        ("int8", "int32", False, "sm_80", "simt_fma"),  # B (K, N): ldmatrix cannot transpose 8-bit elements
        ("float8_e4m3", "float32", True, "sm_80", "simt_fma"),  # fp8 mma needs sm_89
        ("float8_e4m3", "float32", True, "sm_89", "mma_sync_m16n8k32"),
        ("float8_e5m2", "float32", True, "sm_90a", "wgmma_m64nNk32"),
        ("int8", "int32", True, "sm_90a", "wgmma_m64nNk32"),
        ("int8", "int32", False, "sm_90a", "simt_fma"),  # 8-bit wgmma reads K-major operands only
    ],
)
def test_8bit_gemms_on_tensor_cores(t: str, acc: str, nk: bool, arch: str, chosen: str, tmp_path: pathlib.Path) -> None:
    _, layouts, stmts = _plan(_main_loop(t=t, acc=acc, bk=64, nk=nk), tmp_path, arch)
    assert _gemm(stmts).instruction == chosen
    text = compile_program(elaborate_file(str(tmp_path / "k.tile"), {}, arch=arch), arch=arch)
    for name, ptx in _PTX.items():
        assert (ptx in text) == (name == chosen)


def test_spread_copies_keep_the_wait_counts(tmp_path: pathlib.Path) -> None:
    # four 16-deep steps: A's copy before step 1, B's before step 2, each its own commit group; the
    # barrier before step 3 may leave exactly those two groups (tile k + 2) in flight
    path = tmp_path / "k.tile"
    path.write_text(_main_loop(bk=64))
    text = compile_program(elaborate_file(str(path), {}))
    loop = text[text.index("for (int k = 0") :]
    loop = loop[: loop.index("tilec_cp_async_wait<0>")]
    assert loop.count("tilec_cp_async_commit()") == 2
    assert loop.count("tilec_cp_async_wait<2>()") == 1 and loop.count("__syncthreads()") == 1
    assert loop.index("copy(A[") < loop.index("copy(B[") < loop.index("tilec_cp_async_wait<2>")


_TWO_GEMMS = """
kernel k(Q: Tensor((S, 32), float16), K: Tensor((S, 32), float16), V: Tensor((S, 32), float16),
         O: Tensor((S, 32), float16)):
    with Kernel(ceildiv(S, 32), threads=64) as bx:
        Q_s = alloc_shared((32, 32), float16)
        K_s = alloc_shared((32, 32), float16)
        V_s = alloc_shared((32, 32), float16)
        s = alloc_fragment((32, 32), float32)
        p = alloc_fragment((32, 32), float16)
        o = alloc_fragment((32, 32), float32)
        copy(Q[bx * 32, 0], Q_s)
        clear(o)
        for k in Pipelined(ceildiv(S, 32), num_stages=2):
            copy(K[k * 32, 0], K_s)
            copy(V[k * 32, 0], V_s)
            gemm(Q_s, K_s, s, transpose_B=True, policy=FullRow, clear_accum=True)
            copy(s, p)
            gemm(p, V_s, o, policy=FullRow)
        copy(o, O[bx * 32, 0])
"""


def test_copy_first_read_after_a_gemm_is_issued_after_it(tmp_path: pathlib.Path) -> None:
    # K is read by the first gemm: issued at the top; V only by the second: issued after the first,
    # and the iteration's one commit follows it (the top wait still waits for one group)
    from tilec import tir

    _, _, stmts = _plan(_TWO_GEMMS, tmp_path)
    copies = {s.dst.buffer.name: s for s in stmts if isinstance(s, tir.Copy) and s.dst.buffer.scope == "shared"}
    followed = [s for s in stmts if isinstance(s, tir.Gemm) and s.then_issue]
    assert len(followed) == 1 and followed[0] is _gemm(stmts)
    assert followed[0].then_issue == (copies["V_s"].dst.buffer,)
    loop = _compile(_TWO_GEMMS, tmp_path)
    loop = loop[loop.index("for (int k = 0") : loop.rindex("tilec_cp_async_wait<0>")]
    assert loop.count("tilec_cp_async_commit()") == 1 and loop.count("tilec_cp_async_wait<0>") == 1
    assert loop.index("copy(K[") < loop.index("gemm(Q_s") < loop.index("copy(V[") < loop.index("commit")
    assert loop.index("commit") < loop.index("gemm(p, V_s")


def test_copies_of_a_one_gemm_loop_stay_at_the_top(tmp_path: pathlib.Path) -> None:
    _, _, stmts = _plan(_main_loop(stages=2), tmp_path)
    assert _gemm(stmts).then_issue == ()


# ---------------------------------------------------------------- regressions found in review


def _compile(text: str, tmp_path: pathlib.Path) -> str:
    path = tmp_path / "k.tile"
    path.write_text(text)
    return compile_program(elaborate_file(str(path), {}))


def test_early_copy_waits_for_earlier_readers_of_its_tile(tmp_path: pathlib.Path) -> None:
    text = _compile(
        """
kernel k(A: Tensor((M, 64), float16), B: Tensor((N, 64), float16), X: Tensor((M, 64), float16),
         C: Tensor((M, 64), float32)):
    with Kernel(ceildiv(M, 64), threads=128) as bx:
        A_s = alloc_shared((64, 64), float16)
        B_s = alloc_shared((64, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        clear(acc)
        copy(X[bx * 64, 0], A_s)
        gemm(A_s, A_s, acc, transpose_B=True)
        copy(A[bx * 64, 0], A_s)
        for k in Pipelined(ceildiv(N, 64), num_stages=2):
            copy(B[k * 64, 0], B_s)
            gemm(A_s, B_s, acc, transpose_B=True)
        copy(acc, C[bx * 64, 0])
""",
        tmp_path,
    )
    # the first gemm's ldmatrix reads of A_s come before a barrier, then the early cp.async overwrites A_s
    between = text[text.index(": gemm(A_s, A_s, acc") : text.index(": copy(A[bx * 64, 0], A_s)")]
    assert "__syncthreads();" in between


def test_copy_read_by_the_pipeline_prologue_is_not_early(tmp_path: pathlib.Path) -> None:
    # the producers' indices read T_s in the prologue, before any wait: T_s must be written and
    # published by a barrier before the loop
    text = _compile(
        """
kernel k(Kc: Tensor((P, 64), float16), Tab: Tensor((G, 16), int32), A: Tensor((64, 64), float16),
         C: Tensor((G, 64, 64), float32)):
    with Kernel(G, threads=128) as bx:
        T_s = alloc_shared((16,), int32)
        A_s = alloc_shared((64, 64), float16)
        B_s = alloc_shared((64, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        clear(acc)
        copy(A[0, 0], A_s)
        copy(Tab[bx, 0], T_s)
        for k in Pipelined(16, num_stages=3):
            copy(Kc[T_s[k] * 64, 0], B_s)
            gemm(A_s, B_s, acc, transpose_B=True)
        copy(acc, C[bx, 0, 0])
""",
        tmp_path,
    )
    after_t = text[text.index("k.tile:11: copy(Tab") : text.index("software pipeline")]
    assert "tilec_cp_async" not in after_t and "__syncthreads();" in after_t


def test_interior_flags_never_read_memory(tmp_path: pathlib.Path) -> None:
    # cp.async copies get a kernel-wide `{tensor}_interior` flag (here: alignment and bx < G, which
    # a grid of M blocks does not prove); the parts of the bound test that read shared memory or a
    # variable stay in the loop
    text = _compile(
        """
kernel k(A: Tensor((G, M, N), float16), Idx: Tensor((G,), int32), C: Tensor((G, 64, N), float16)):
    with Kernel(M, threads=128) as bx:
        I_s = alloc_shared((1,), int32)
        row = alloc_var(int32, 0)
        S = alloc_shared((64, 64), float16)
        T = alloc_shared((64, 64), float16)
        copy(Idx[bx], I_s)
        row = bx * 64
        for j in Pipelined(ceildiv(N, 64), num_stages=2):
            copy(A[bx, I_s[0] * 64, j * 64], S)
            copy(A[bx, row, j * 64], T)
            copy(S, C[bx, 0, j * 64])
            copy(T, C[bx, 0, j * 64])
""",
        tmp_path,
    )
    flags = [line for line in text.splitlines() if "_interior =" in line]
    assert flags and not any("I_s" in f or "row" in f for f in flags)
    assert "I_s[0] * 64 + 64 <= M" in text


def test_copy_through_a_table_the_loop_writes_is_not_run_ahead(tmp_path: pathlib.Path) -> None:
    # T_s is rewritten every iteration, so A's copy of iteration k + 1 cannot be issued before it
    from tilec import tir
    from tilec.passes.plan_pipeline import producers

    _, _, stmts = _plan(
        """
kernel k(A: Tensor((M, 64), float16), Idx: Tensor((N,), int32), C: Tensor((N, 64), float16)):
    with Kernel(1, threads=128) as bx:
        T_s = alloc_shared((1,), int32)
        S = alloc_shared((64, 64), float16)
        for j in Pipelined(ceildiv(N, 64), num_stages=2):
            copy(Idx[j], T_s)
            copy(A[T_s[0], 0], S)
            copy(S, C[j * 64, 0])
""",
        tmp_path,
    )
    (loop,) = [s for s in stmts if isinstance(s, tir.For)]
    assert {s.dst.buffer.name for s in producers(loop)} == {"T_s"}


def test_synchronous_copies_test_bounds_in_place(tmp_path: pathlib.Path) -> None:
    # a hoisted flag held registers in row loops (RMSNorm at 256 threads: 108 instead of 64)
    text = _compile(
        """
kernel k(A: Tensor((G, N), float16), C: Tensor((G, N), float16)):
    with Kernel(ceildiv(G, 4), threads=128) as bx:
        S = alloc_shared((4, 256), float16)
        for j in range(ceildiv(N, 256)):
            copy(A[bx * 4, j * 256], S)
            copy(S, C[bx * 4, j * 256])
""",
        tmp_path,
    )
    assert "_interior =" not in text and "bx * 4 + 4 <= G" in text


def test_main_loop_gemm_of_a_tile_with_itself(tmp_path: pathlib.Path) -> None:
    text = _compile(
        """
kernel k(A: Tensor((M, K), float16), C: Tensor((M, M), float32)):
    with Kernel(ceildiv(M, 64), threads=128) as bx:
        A_s = alloc_shared((64, 32), float16)
        acc = alloc_fragment((64, 64), float32)
        clear(acc)
        for k in Pipelined(ceildiv(K, 32), num_stages=3):
            copy(A[bx * 64, k * 32], A_s)
            gemm(A_s, A_s, acc, transpose_B=True)
        copy(acc, C[bx * 64, bx * 64])
""",
        tmp_path,
    )
    assert "fragments are loaded one k step ahead" in text


def test_barrier_before_a_copy_whose_indices_read_shared_memory(tmp_path: pathlib.Path) -> None:
    text = _compile(
        """
kernel k(Kc: Tensor((P, 64), float16), Tab: Tensor((G, 16), int32), C: Tensor((G, 64, 64), float16)):
    with Kernel(G, threads=128) as bx:
        T_s = alloc_shared((16,), int32)
        B_s = alloc_shared((64, 64), float16)
        copy(Tab[bx, 0], T_s)
        copy(Kc[T_s[0] * 64, 0], B_s)
        copy(B_s, C[bx, 0, 0])
""",
        tmp_path,
    )
    between = text[text.index(": copy(Tab[bx, 0], T_s)") : text.index(": copy(Kc[T_s[0] * 64, 0], B_s)")]
    assert "__syncthreads();" in between


def test_no_interior_flag_merely_renames_the_alignment_flag() -> None:
    import re

    text = compile_program(elaborate_file(str(ROOT / "examples" / "rmsnorm.tile"), {}))
    assert "_vec8" in text
    assert not re.search(r"const bool \w+_interior = \w+_vec\d+;", text)


# ---------------------------------------------------------------- the pass hook and both verifiers

GOLDEN_INPUTS = FILES + sorted(ROOT.glob("tests/golden/errors/*.tile"))


def _first_line_arch(text: str) -> str:
    words = text.split("\n", 1)[0].split()
    return words[words.index("--arch") + 1] if "--arch" in words else "sm_80"


@pytest.mark.parametrize("path", GOLDEN_INPUTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_both_verifiers_pass_after_every_pass(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every example and golden input, pass by pass: the Tile IR verifier after a Tile IR pass, the
    # Thread IR verifier after a Thread IR pass; an error golden stops at its diagnostic
    from tilec.diagnostics import CompileError
    from tilec.emit import emit_module
    from tilec.pipeline import PASSES, Unit, thread_module, verify_unit
    from tilec.targets import get_target

    monkeypatch.chdir(ROOT)
    arch = _first_line_arch(path.read_text())
    try:
        program = elaborate_file(str(path.relative_to(ROOT)), {}, arch=arch)
    except CompileError:
        return
    tir_print.verify(program)
    elaborated = repr(program)  # every field of every node (the printer leaves some out)
    target, units = get_target(arch), []
    for kernel in program.kernels:
        unit = Unit(kernel, target)
        for p in PASSES:
            try:
                unit = p.run(unit)
            except CompileError:
                assert path.parent.name == "errors", f"{p.name} failed on {path}"
                return
            verify_unit(p.leaves, unit)
        assert unit.layouts is not None
        for buf in [s.buffer for s in kernel.body if isinstance(s, tir.Alloc) and s.buffer.scope == "fragment"]:
            assert unit.layouts.buffers[buf].shape == buf.const_shape
            assert unit.layouts.buffers[buf].threads == kernel.threads
        units.append(unit)
    assert repr(program) == elaborated, "a pass mutated the program it read"
    if program.kernels:
        assert "__global__" in emit_module(thread_module(units, program, target), target)


def test_the_hook_verifies_after_each_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from tilec import pipeline
    from tilec import thread_ir as T
    from tilec.dtypes import DType

    def breaks_the_thread_ir(u: pipeline.Unit) -> pipeline.Unit:
        assert u.lowered is not None
        stray = T.Assign(T.Sym("nowhere", DType.int32), T.Sym("nowhere", DType.int32))
        return replace(u, lowered=replace(u.lowered, body=(*u.lowered.body, stray)))

    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    monkeypatch.setattr(pipeline, "PASSES", (*pipeline.PASSES, pipeline.Pass("break", "thread", breaks_the_thread_ir)))
    assert "__global__" in compile_program(program, verify=False)
    with pytest.raises(tir_print.VerifyError, match="'nowhere' used before its declaration"):
        compile_program(program, verify=True)


def test_the_hook_times_every_pass() -> None:
    from tilec import pipeline, timing

    timing.TIMES.clear()
    compile_program(elaborate_file(str(ROOT / "examples" / "gemm.tile"), {}))
    assert [name for name in timing.TIMES if name != "verify"] == [*(p.name for p in pipeline.PASSES), "emit"]


@pytest.mark.parametrize(
    ("emit", "after", "starts"),
    [
        ("tir", "elaborate", "kernel gemm(A: float16[M, K] global"),
        ("tir", "select", "kernel gemm(A: float16[M, K] global"),
        ("tir", "plan_pipeline", "kernel gemm(A: float16[M, K] global"),
        ("thread", "lower", "kernel gemm threads=256"),
        ("thread", "cleanup", "kernel gemm threads=256"),
    ],
)
def test_emit_after_a_pass(emit: str, after: str, starts: str) -> None:
    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    text = compile_program(program, emit=emit, after=after)
    assert text.startswith(starts)
    if emit == "tir":  # the gemm's instruction record is the select pass's: absent before it, kept after
        assert ("instruction=" in text) == (after != "elaborate")


def test_emit_after_lower_is_before_cleanup() -> None:
    # lowering names every loop index; clean-up drops the constants nothing reads
    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    lowered = compile_program(program, emit="thread", after="lower")
    cleaned = compile_program(program, emit="thread", after="cleanup")
    assert compile_program(program, emit="thread", after=PASSES[-1].name) == compile_program(program, emit="thread")
    assert lowered.count("const int") > cleaned.count("const int")


@pytest.mark.parametrize(
    ("emit", "after", "message"),
    [
        ("tir", "bogus", "--after bogus: no such pass"),
        ("thread", "infer_layouts", "'infer_layouts' leaves Tile IR"),
        ("tir", "lower", "'lower' leaves Thread IR"),
        ("cuda", "lower", "--after lower needs --emit tir or --emit thread"),
    ],
)
def test_emit_after_a_wrong_pass_is_a_user_error(emit: str, after: str, message: str) -> None:
    from tilec.diagnostics import CompileError

    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    with pytest.raises(CompileError, match=message):
        compile_program(program, emit=emit, after=after)


def test_emit_thread_spells_the_targets_barriers() -> None:
    """`--emit thread` prints with the target's spelling: sm_90a's mbarriers and named barriers too."""
    text = compile_program(elaborate_file(str(ROOT / "examples" / "gemm.tile"), {}), "sm_90a", emit="thread")
    assert "tilec_mbarrier_init(" in text and "bar.sync" in text


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_gemm_adding_into_the_next_ones_accumulator_is_waited_for_with_it(arch: str) -> None:
    """TileLang's MLA decode adds the rotary scores into the latent ones: on wgmma the first
    product's group is waited for with the second's (then_accumulates); P V into another
    accumulator, and mma.sync's synchronous products, are not chained."""
    from tilec import driver, tir_walk
    from tilec.pipeline import run_passes, tile_ir_passes

    path = str(ROOT / "tests" / "corpus" / "tilelang" / "mla_decode.tile")
    defines = {"block_H": "64", "block_N": "32"} if arch == "sm_80" else {}  # sm_80: fit its shared memory
    (unit,) = run_passes(driver.elaborate(path, defines, arch), arch, tile_ir_passes(), widen=False)
    gemms = [s for s in tir_walk.stmts(unit.kernel.body) if isinstance(s, tir.Gemm)]
    assert [(g.a.buffer.name, g.then_accumulates) for g in gemms] == [
        ("Q_shared", arch == "sm_90a"),
        ("Q_pe_shared", False),
        ("S_shared", False),
    ]
    if arch == "sm_90a":
        cuda = driver.compile_file(path, defines, arch=arch)
        loop = cuda[cuda.index("(consumers: wgmma)") :]
        first, second = loop.index("gemm(Q_shared"), loop.index("gemm(Q_pe_shared")
        assert "tilec_wgmma_wait" not in loop[first:second]  # the one wait follows the rotary part
        assert "tilec_wgmma_wait<0>" in loop[second : loop.index("copy(scores_max")]


def test_a_register_a_of_wgmma_takes_no_descriptor_layout() -> None:
    """P of P V on wgmma's register form is a fragment: only the shared operands get a descriptor
    swizzle. 80-column key tiles (FlashAttention-3's at D 256) made P's 160-byte rows fit no
    swizzle, an internal error."""
    from tilec import driver

    defines = {"dim": "256", "block_N": "80", "threads": "256"}
    cuda = driver.compile_file(str(ROOT / "examples" / "flash_attention.tile"), defines, arch="sm_90a")
    assert "tilec_wgmma_m64n80k16_f16" in cuda and "tilec_wgmma_m64n256k16_rs_f16" in cuda


def test_gemms_of_a_manual_schedule_are_not_chained(tmp_path: pathlib.Path) -> None:
    """order=/stage= may issue two neighbouring gemms in different iterations (lower/scheduled.py):
    the first must then be waited for on its own (a review found a cp.async overwriting its tile)."""
    text = """
kernel k(Q: Tensor((64, 64), float16), K: Tensor((N, 64), float16), R: Tensor((N, 64), float16),
         O: Tensor((64, 64), float32)):
    with Kernel(1, threads=128) as bx:
        Q_s = alloc_shared((64, 64), float16)
        K_s = alloc_shared((64, 64), float16)
        R_s = alloc_shared((64, 64), float16)
        s = alloc_fragment((64, 64), float32)
        o = alloc_fragment((64, 64), float32)
        copy(Q, Q_s)
        clear(o)
        for k in Pipelined(ceildiv(N, 64), num_stages=2, order=[-1, -1, 2, 3, 0, 1], stage=[-1, -1, 0, 0, 1, 1]):
            copy(K[k * 64, 0], K_s)
            copy(R[k * 64, 0], R_s)
            clear(s)
            gemm(Q_s, K_s, s, transpose_B=True)
            gemm(Q_s, R_s, s, transpose_B=True)
            for i, j in Parallel(64, 64):
                o[i, j] += s[i, j]
        copy(o, O)
"""
    _, _, stmts = _plan(text, tmp_path, arch="sm_90a")
    gemms = [s for s in stmts if isinstance(s, tir.Gemm)]
    assert len(gemms) == 2 and all(g.instruction == "wgmma_m64nNk16" for g in gemms)
    assert not any(g.then_accumulates for g in gemms)


TWO_DEPTHS = """\
kernel two(A: Tensor((M, K), float16), B: Tensor((K, N), float16), C: Tensor((M, N), float16)):
    with Kernel(ceildiv(N, 128), ceildiv(M, 64), threads=128) as (bx, by):
        A_shared = alloc_shared((64, 64), float16)
        B_shared = alloc_shared((64, 128), float16)
        C_local = alloc_fragment((64, 128), float32)
        clear(C_local)
        for k in Pipelined(ceildiv(K, 64), num_stages=3):
            copy(A[by * 64, k * 64], A_shared)
            copy(B[k * 64, bx * 128], B_shared)
            gemm(A_shared, B_shared, C_local)
        for k in Pipelined(ceildiv(K, 64), num_stages=2):
            copy(A[by * 64, k * 64], A_shared)
            copy(B[k * 64, bx * 128], B_shared)
            gemm(A_shared, B_shared, C_local)
        copy(C_local, C[by * 64, bx * 128])
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_tile_two_pipelines_fill_keeps_the_deeper_ones_stages(tmp_path: pathlib.Path, arch: str) -> None:
    """The 3-stage loop writes stage (k + 2) % 3 of the tiles: with the 2-stage loop's count
    alone they had 2 stages, and stage 2 of A_shared was B_shared's bytes (the build's
    verification, on in the tests, proves every stage index inside its tile)."""
    path = tmp_path / "two.tile"
    path.write_text(TWO_DEPTHS)
    kernel = run_passes(elaborate(str(path), arch=arch), arch, tile_ir_passes(), verify=True)[0].kernel
    allocs = {s.buffer.name: s.stages for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.Alloc)}
    assert allocs["A_shared"] == 3 and allocs["B_shared"] == 3
    assert "A_shared" in compile_file(str(path), arch=arch)
