"""passes/decide_masks.py and passes/fuse_clears.py: masks decided per tile, zeros folded into gemms.

The property: wherever the versions' tests send a tile (every block, key tile and size tried),
the copy that runs stores the value the loop as written stores, at every element."""

from __future__ import annotations

import itertools
import pathlib
import time

import pytest

from tilec import tir, tir_walk
from tilec.elaborate import elaborate_file
from tilec.passes.decide_masks import decide_masks
from tilec.passes.fuse_clears import fuse_clears
from tilec.pipeline import compile_program
from tilec.simplify import simplify, substitute

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROGRAM = """
param BM = 64
param BN = 32
kernel masks(A: Tensor((S, 64), float32), O: Tensor((S, BN), float32)):
    with Kernel(ceildiv(S, BM), threads=128) as bx:
        acc = alloc_fragment((BM, BN), float32)
        clear(acc)
        loop_range = {stop}
        for k in range(loop_range):
            for i, j in Parallel(BM, BN):
                q = bx * BM + i
                acc[i, j] = acc[i, j] + if_then_else({cond}, 1.0, -1.0)
        copy(acc, O[bx * BM, 0])
"""

CAUSAL_STOP = "min(ceildiv(S, BN), ceildiv((bx + 1) * BM, BN))"
CASES = {
    "past the end": ("k * BN + j >= S", "ceildiv(S, BN)"),
    "causal": ("q >= k * BN + j", CAUSAL_STOP),
    "causal, strict": ("k * BN + j > q", CAUSAL_STOP),
    "window": ("q - (k * BN + j) < 40", CAUSAL_STOP),
    "both indices": ("i + 3 * j < k * 5 + 7", "ceildiv(S, BN)"),
    "no tile decided": ("j < 16", "ceildiv(S, BN)"),
}


def _kernel(tmp_path: pathlib.Path, cond: str, stop: str) -> tir.Kernel:
    path = tmp_path / "masks.tile"
    path.write_text(PROGRAM.format(cond=cond, stop=stop))
    return elaborate_file(str(path), {}).kernels[0]


def _int(e: tir.Expr) -> int:
    """A constant int expression's value (simplify folds all but min)."""
    if isinstance(e, tir.Call) and e.func == "min":
        return min(_int(x) for x in e.args)
    e = simplify(e)
    assert isinstance(e, tir.IntImm), e
    return e.value


def _loop(kernel: tir.Kernel) -> tir.For:
    return next(s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.For))


def _value(p: tir.Parallel, env: dict[tir.Var, tir.Expr], i: int, j: int) -> float:
    """What `p` stores at (i, j) (acc read as 0): its lets and store folded to a constant."""
    env = {**env, p.vars[0]: tir.IntImm(i), p.vars[1]: tir.IntImm(j)}
    for s in p.body:
        if isinstance(s, tir.Let):
            env[s.var] = simplify(substitute(s.value, env))
        elif isinstance(s, tir.Store):
            folded = simplify(substitute(s.value, env))
            return float(_constant(folded))
    raise AssertionError("no store")


def _constant(e: tir.Expr) -> float:
    match e:
        case tir.FloatImm(v) | tir.IntImm(v):
            return v
        case tir.BinOp("+", tir.Load(), b):  # acc[i, j] + c
            return _constant(b)
        case _:
            raise AssertionError(f"not folded: {e}")


def _runs(body: tuple[tir.Stmt, ...], env: dict[tir.Var, tir.Expr]) -> tir.Parallel | None:
    """The Parallel loop that `body` (the k loop's, after the pass) runs for the values in env."""
    for s in body:
        if isinstance(s, tir.Parallel):
            return s
        if isinstance(s, tir.If):
            cond = simplify(substitute(s.cond, env))
            assert isinstance(cond, tir.BoolImm), f"test not uniform: {cond}"
            taken = _runs(s.then if cond.value else s.orelse, env)
            if taken is not None or cond.value or s.orelse:
                return taken
    return None


@pytest.mark.parametrize("name", CASES)
def test_the_copy_that_runs_stores_what_the_loop_does(tmp_path: pathlib.Path, name: str) -> None:
    before = _kernel(tmp_path, *CASES[name])
    after = decide_masks(before)
    written, decided = _loop(before), _loop(after)
    original = next(s for s in written.body if isinstance(s, tir.Parallel))
    (s_dim,) = before.dims
    stop_let = next(s for s in tir_walk.stmts(before.body) if isinstance(s, tir.Let))
    for size in (1, 31, 33, 64, 100, 128, 161):
        env: dict[tir.Var, tir.Expr] = {s_dim: tir.IntImm(size)}
        blocks = -(-size // 64)
        for bx in range(blocks):
            env[before.block_vars[0]] = tir.IntImm(bx)
            for k in range(_int(substitute(stop_let.value, env))):
                env[written.var] = env[decided.var] = tir.IntImm(k)
                runs = _runs(decided.body, env)
                for i, j in itertools.product(range(64), range(32)):
                    want = _value(original, env, i, j)
                    got = 0.0 if runs is None else _value(runs, env, i, j)
                    assert got == want, (name, size, bx, k, i, j)


def test_versions_by_case(tmp_path: pathlib.Path) -> None:
    """How many copies each mask gets: the decided side alone where a test always holds, none for
    a side no tile of the loop reaches, the loop untouched where nothing is decidable."""

    def ifs(name: str) -> int:
        k = _loop(decide_masks(_kernel(tmp_path, *CASES[name])))
        return sum(isinstance(s, tir.If) for s in tir_walk.stmts(k.body))

    assert ifs("past the end") == 1  # inside S, or not: no tile of the loop lies wholly past S
    assert ifs("causal") == 1  # below the diagonal, or not: the loop stops before tiles above it
    assert ifs("window") == 2  # inside the window, wholly outside it, or straddling it
    assert ifs("no tile decided") == 0


def test_a_constant_size_decides_every_tile(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "masks.tile"
    path.write_text("param S = 256\n" + PROGRAM.format(cond="k * BN + j >= S", stop="ceildiv(S, BN)"))
    loop = _loop(decide_masks(elaborate_file(str(path), {}).kernels[0]))
    (p,) = loop.body
    assert isinstance(p, tir.Parallel) and "Select" not in repr(p.body)


def test_a_thread_dependent_condition_is_left_alone(tmp_path: pathlib.Path) -> None:
    """A load in the comparison (a per-thread value) decides nothing per tile."""
    k = _kernel(tmp_path, "k * BN + j >= cast(A[i, 0], int32)", "ceildiv(S, BN)")
    assert decide_masks(k) is k


def test_the_mha_fwd_bhsd_mask_becomes_the_gemms_clear() -> None:
    """TileLang's mha_fwd_bhsd starts each key tile's scores at its mask: at a size the key
    tiles divide, every tile is inside, the mask is zeros and the gemm clears instead."""
    path = ROOT / "tests" / "corpus" / "tilelang" / "mha_fwd_bhsd.tile"
    kernel = fuse_clears(decide_masks(elaborate_file(str(path), {"seq_kv": "2048", "seq_q": "2048"}).kernels[0]))
    loop = _loop(kernel)
    first = [s for s in loop.body if not isinstance(s, tir.Copy)][0]
    assert isinstance(first, tir.Gemm) and first.clear_accum


ZEROS = """
kernel z(A: Tensor((64, 64), float16), B: Tensor((64, 64), float16), C: Tensor((64, 64), float32)):
    with Kernel(1, threads=128) as bx:
        A_s = alloc_shared((64, 64), float16)
        B_s = alloc_shared((64, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        copy(A, A_s)
        copy(B, B_s)
        {zero}
        gemm(A_s, B_s, acc)
        copy(acc, C)
"""


@pytest.mark.parametrize(
    ("zero", "fused"),
    [
        ("clear(acc)", True),
        ("fill(acc, 0.0)", True),
        ("for i, j in Parallel(64, 64):\n            acc[i, j] = 0.0", True),
        ("fill(acc, 1.0)", False),
        ("fill(acc[0:32, :], 0.0)", False),
        ("for i, j in Parallel(64, 64):\n            acc[j, i] = 0.0", False),  # every element, but not as read
    ],
)
def test_zeros_before_a_gemm_become_its_clear(tmp_path: pathlib.Path, zero: str, fused: bool) -> None:
    path = tmp_path / "z.tile"
    path.write_text(ZEROS.format(zero=zero))
    kernel = fuse_clears(elaborate_file(str(path), {}).kernels[0])
    gemm = next(s for s in kernel.body if isinstance(s, tir.Gemm))
    assert gemm.clear_accum == fused
    assert any(isinstance(s, tir.Fill | tir.Parallel) for s in kernel.body) != fused


def test_explain_says_which_tiles_each_copy_runs_on() -> None:
    from tilec import explain

    path = ROOT / "tests" / "golden" / "codegen" / "attention_warp_roles.tile"
    text = explain.render_text(explain.explain_program(elaborate_file(str(path), {}), "sm_90a"))
    # its mask of 0 / -inf moved after the gemm (fuse_clears): only the last key tile needs it
    assert "runs on the tiles where k * 64 + 63 >= S (mask decided per tile); the other tiles need none" in text


# ---------------------------------------------------------------- regressions found in review

MUTATED = """
kernel p(O: Tensor((64, 32), float32)):
    with Kernel(1, threads=128) as bx:
        acc = alloc_fragment((64, 32), float32)
        v = alloc_var(int32, 4)
        clear(acc)
        t = v
        v = 0
        for k in range(t):
            if v < 1:
                for i, j in Parallel(64, 32):
                    acc[i, j] = acc[i, j] + if_then_else(k * 32 + j < 32, 1.0, -1.0)
        copy(acc, O[0, 0])
"""

NEGATIVE_DIVIDEND = """
kernel p(O: Tensor((64, 32), float32)):
    with Kernel(1, threads=128) as bx:
        acc = alloc_fragment((64, 32), float32)
        clear(acc)
        for k in range(100, 120):
            for i, j in Parallel(64, 32):
                acc[i, j] = acc[i, j] + if_then_else(j + 128 * ((-k - 1) // 128) < -31, 1.0, -1.0)
        copy(acc, O[0, 0])
"""


UNSIGNED = """
kernel p(O: Tensor((64, 32), float32), u: uint32):
    with Kernel(1, threads=128) as bx:
        acc = alloc_fragment((64, 32), float32)
        clear(acc)
        if u - 1 < 3:
            clear(acc)
        else:
            for k in range(u - 3, 8):
                for i, j in Parallel(64, 32):
                    acc[i, j] = acc[i, j] + if_then_else(k * 32 + j >= 32, 1.0, -1.0)
        copy(acc, O[0, 0])
"""

NARROW = """
kernel p(O: Tensor((64, 32), float32), s: int8):
    with Kernel(1, threads=128) as bx:
        acc = alloc_fragment((64, 32), float32)
        clear(acc)
        t = s + 100
        if s > -100:
            for k in range(t, 8):
                for i, j in Parallel(64, 32):
                    acc[i, j] = acc[i, j] + if_then_else(k * 32 + j >= 32, 1.0, -1.0)
        copy(acc, O[0, 0])
"""


@pytest.mark.parametrize(
    "source",
    [MUTATED, NEGATIVE_DIVIDEND, UNSIGNED, NARROW],
    ids=["alloc_var", "negative //", "uint32 wraps", "int8 let wraps"],
)
def test_nothing_is_proven_from_memory_floor_division_or_wrapping(tmp_path: pathlib.Path, source: str) -> None:
    """A bound or if through an alloc_var (`t = v`, then `v = 0`; `if v < 1`) proves nothing (the
    variable changes after it); `d * (x // d) <= x` needs x >= 0 (C's // rounds toward zero);
    unsigned and narrow arithmetic wraps (`u - 1 < 3` is false at u = 0; `t: int8 = s + 100`).
    Each once folded the mask to its true side for every tile."""
    path = tmp_path / "p.tile"
    path.write_text(source)
    loop = _loop(decide_masks(elaborate_file(str(path), {}).kernels[0]))
    assert any(isinstance(s, tir.If) for s in tir_walk.stmts(loop.body)), "a version, not a fold"
    assert "Select" in repr(loop.body), "the per-element mask is kept for the tiles not decided"


def test_many_nested_ifs_compile_quickly(tmp_path: pathlib.Path) -> None:
    """The proofs are memoized and bounded: seven nested ifs of facts took 38 s before."""
    ifs = "".join(f"{'    ' * (n + 4)}if k + {n} * m - bx < a + {n} * b - c:\n" for n in range(7))
    body = "    " * 11 + "for i, j in Parallel(64, 32):\n" + "    " * 12
    body += "acc[i, j] = acc[i, j] + if_then_else(k * 32 + j + m - by < S - d + c, 1.0, -1.0)\n"
    source = (
        "kernel p(O: Tensor((S, T), float32), a: int32, b: int32, c: int32, d: int32):\n"
        "    with Kernel(ceildiv(S, 64), ceildiv(T, 64), threads=128) as (bx, by):\n"
        "        acc = alloc_fragment((64, 32), float32)\n"
        "        clear(acc)\n"
        "        for k in range(min(ceildiv(S, 32), by + 3)):\n"
        "            for m in range(max(bx, a), min(T, b + k)):\n" + ifs + body + "        copy(acc, O[0, 0])\n"
    )
    path = tmp_path / "p.tile"
    path.write_text(source)
    kernel = elaborate_file(str(path), {}).kernels[0]
    start = time.perf_counter()
    decide_masks(kernel)
    assert time.perf_counter() - start < 5.0


def test_a_scheduled_loop_keeps_its_statements_in_place() -> None:
    """Pipelined(order=, stage=, group=) names statements by position: `clear(s)` before the gemm
    stays (fusing it moved every later position; the build failed with an IndexError)."""
    path = ROOT / "tests" / "decide_masks" / "schedule_clear.tile"
    for arch in ("sm_80", "sm_90a"):
        compile_program(elaborate_file(str(path), {}, arch=arch), arch=arch)


def test_a_gemm_reading_its_accumulator_keeps_the_zeros_first(tmp_path: pathlib.Path) -> None:
    """gemm(acc, B_s, acc) after clear(acc) reads the zeros as A: the clear is not folded into it."""
    path = tmp_path / "z.tile"
    path.write_text(ZEROS.replace("gemm(A_s, B_s, acc)", "gemm(acc, B_s, acc)").format(zero="clear(acc)"))
    kernel = fuse_clears(elaborate_file(str(path), {}).kernels[0])
    assert any(isinstance(s, tir.Fill) for s in kernel.body)


MASK_BEFORE_GEMM = """
kernel m(Q: Tensor((S, 64), float16), K: Tensor((S, 64), float16), O: Tensor((S, 64), float32)):
    with Kernel(ceildiv(S, 64), threads=128) as bx:
        Q_s = alloc_shared((64, 64), float16)
        K_s = alloc_shared((64, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        copy(Q[bx * 64, 0], Q_s)
        for k in range(ceildiv(S, 64)):
            copy(K[k * 64, 0], K_s)
            for i, j in Parallel(64, 64):
                acc[i, j] = {mask}
            gemm(Q_s, K_s, acc, transpose_B=True)
        copy(acc, O[bx * 64, 0])
"""


@pytest.mark.parametrize(
    ("mask", "moved"),
    [
        ("if_then_else(k * 64 + j < S, 0.0, -infinity(float32))", True),
        ("if_then_else(bx * 64 + i >= k * 64 + j, 0.0, if_then_else(j < 8, infinity(float32), 0.0))", True),
        ("if_then_else(k * 64 + j < S, 0.5, -infinity(float32))", False),  # adding 0.5 rounds differently
        ("if_then_else(k * 64 + j < S, -infinity(float32), -infinity(float32))", False),  # no 0: a fill
        ("if_then_else(acc[i, j] > 0.0, 0.0, -infinity(float32))", False),  # reads the accumulator
    ],
)
def test_a_mask_of_zeros_and_infinities_moves_after_the_gemm(tmp_path: pathlib.Path, mask: str, moved: bool) -> None:
    """acc = 0 | inf, then acc += Q K^T, is acc = Q K^T then acc = acc | inf: adding 0 or an
    infinity gives the same before or after the products (which are finite)."""
    path = tmp_path / "m.tile"
    path.write_text(MASK_BEFORE_GEMM.format(mask=mask))
    loop = _loop(fuse_clears(elaborate_file(str(path), {}).kernels[0]))
    kinds = [type(s).__name__ for s in loop.body]
    if not moved:
        assert kinds == ["Copy", "Parallel", "Gemm"] and not loop.body[2].clear_accum  # type: ignore[attr-defined]
        return
    assert kinds == ["Copy", "Gemm", "Parallel"] and loop.body[1].clear_accum  # type: ignore[attr-defined]
    (store,) = loop.body[2].body  # type: ignore[attr-defined]
    leaves = repr(store.value)
    assert "FloatImm(value=0.0" not in leaves and "Load(buffer=Buffer(name='acc'" in leaves


def test_a_mask_whose_let_reads_the_accumulator_stays_before_the_gemm(tmp_path: pathlib.Path) -> None:
    """A name bound in the mask's loop from the accumulator would read the products once the mask
    moved after the gemm: the loop stays where it is."""
    path = tmp_path / "m.tile"
    body = "old = acc[i, j]\n                acc[i, j] = if_then_else(old > 0.0, 0.0, -infinity(float32))"
    path.write_text(MASK_BEFORE_GEMM.format(mask="0.0").replace("acc[i, j] = 0.0", body))
    loop = _loop(fuse_clears(elaborate_file(str(path), {}).kernels[0]))
    assert [type(s).__name__ for s in loop.body] == ["Copy", "Parallel", "Gemm"]
    assert isinstance(loop.body[1].body[0], tir.Let)  # type: ignore[attr-defined]


def test_a_scheduled_loop_keeps_a_mask_that_would_go_away() -> None:
    """A mask that keeps every element (N a multiple of 64) would be dropped; a Pipelined(order=,
    stage=, group=) schedule names the loop's statements by position, so it stays (the build
    failed with an IndexError)."""
    path = ROOT / "tests" / "decide_masks" / "schedule_mask.tile"
    for arch in ("sm_80", "sm_90a"):
        compile_program(elaborate_file(str(path), {}, arch=arch), arch=arch)
