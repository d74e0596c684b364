"""Shared memory packed by lifetime (shared_plan.py): lifetimes on small programs (straight
code, loops, pipelined loops, branches, warp roles), the first-fit plan, when a kernel is packed,
and the barriers between tiles that come to share bytes."""

from __future__ import annotations

import pathlib

from tilec import thread_ir as T
from tilec import tir
from tilec.dtypes import DType
from tilec.elaborate import elaborate_file
from tilec.explain import explain_program, render_text
from tilec.pipeline import PASSES, run_passes
from tilec.shared_plan import packed, peak_bytes, plan_shared, shared_lifetimes
from tilec.sync import place_barriers

HEAD = """kernel k(A: Tensor((1024, 64), float16), B: Tensor((1024, 64), float16), C: Tensor((1024, 64), float16)):
    with Kernel(8, threads=128) as bx:
        X = alloc_shared([64, 64], float16)
        Y = alloc_shared([64, 64], float16)
        acc = alloc_fragment([64, 64], float32)
"""


def program(tmp_path: pathlib.Path, body: str, head: str = HEAD) -> tir.Program:
    path = tmp_path / "k.tile"
    path.write_text(head + "".join(f"        {line}\n" for line in body.strip("\n").splitlines()))
    return elaborate_file(str(path), {})


def lives(tmp_path: pathlib.Path, body: str) -> dict[str, tuple[int, int]]:
    """Each tile's lifetime, by name, as source lines."""
    (kernel,) = program(tmp_path, body).kernels
    return {b.name: live.lines for b, live in shared_lifetimes(kernel).items()}


def test_a_tile_dead_before_another_is_born_does_not_meet_it(tmp_path: pathlib.Path) -> None:
    out = lives(
        tmp_path,
        """
copy(A[bx * 64, 0], X)
copy(X, acc)
copy(acc, Y)
copy(Y, C[bx * 64, 0])
""",
    )
    assert out == {"X": (6, 7), "Y": (8, 9)}


def test_a_tile_used_in_a_loop_is_live_for_all_of_it(tmp_path: pathlib.Path) -> None:
    out = lives(
        tmp_path,
        """
copy(A[bx * 64, 0], X)
for k in serial(4):
    copy(X, acc)
    copy(acc, X)
copy(acc, Y)
copy(Y, C[bx * 64, 0])
""",
    )
    assert out == {"X": (6, 9), "Y": (10, 11)}


def test_a_tile_an_iteration_overwrites_first_is_live_only_where_used(tmp_path: pathlib.Path) -> None:
    """gemm_persistent's wave loop: each iteration fills X before reading it and writes Y after,
    so they share bytes; Z, read before it is written in an iteration, is live for the whole loop."""
    body = """
for w in serial(4):
    copy(A[w * 64, 0], X)
    copy(X, acc)
    copy(acc, Y)
    copy(Y, C[w * 64, 0])
"""
    assert lives(tmp_path, body) == {"X": (7, 8), "Y": (9, 10)}
    carried = """
for w in serial(4):
    copy(X, acc)
    copy(A[w * 64, 0], X)
    copy(acc, Y)
    copy(Y, C[w * 64, 0])
"""
    assert lives(tmp_path, carried) == {"X": (6, 10), "Y": (9, 10)}


def test_a_pipelined_loops_tiles_are_live_for_all_of_it(tmp_path: pathlib.Path) -> None:
    """X's stages are live for the whole pipelined loop, and no longer: each wave fills them
    before reading them. Filled in part, X keeps what earlier waves left: live for all waves."""
    body = """
clear(acc)
for w in serial(4):
    for k in Pipelined(4, num_stages=2):
        copy(A[w * 64 + k, 0], X)
        copy(X, acc)
    copy(acc, Y)
    copy(Y, C[w * 64, 0])
"""
    assert lives(tmp_path, body) == {"X": (8, 10), "Y": (11, 12)}
    part = body.replace("copy(A[w * 64 + k, 0], X)", "copy(A[w * 64 + k, 0], X[0:64, 0:16])")
    assert lives(tmp_path, part) == {"X": (7, 12), "Y": (11, 12)}


def test_tiles_in_the_two_branches_of_an_if_follow_program_order(tmp_path: pathlib.Path) -> None:
    """Only one branch runs: a tile of the then branch and one of the else branch never meet; a
    tile read after the branch is live across it."""
    out = lives(
        tmp_path,
        """
if bx > 2:
    copy(A[bx * 64, 0], X)
    copy(X, acc)
else:
    copy(B[bx * 64, 0], Y)
    copy(Y, acc)
copy(acc, C[bx * 64, 0])
""",
    )
    assert out == {"X": (7, 8), "Y": (10, 11)}


def test_a_kernel_with_warp_roles_shares_nothing() -> None:
    root = pathlib.Path(__file__).resolve().parent.parent
    (u,) = run_passes(elaborate_file(str(root / "examples" / "gemm.tile"), {}), "sm_90a")
    assert u.lowered is not None and u.lowered.consumer_threads
    assert shared_lifetimes(u.kernel) == {}
    assert all(s.live is None for s in u.lowered.body if isinstance(s, T.SharedView))


def view(name: str, nbytes: int, live: tuple[int, int] | None, align: int = 16) -> T.SharedView:
    return T.SharedView(name, DType.uint8, (nbytes,), 0, align, T.Lifetime(*live) if live else None)


def test_first_fit_keeps_alignment_and_never_shares_scratch() -> None:
    q, k = view("Q", 4096, (0, 5)), view("K", 1000, (0, 9))
    red = view("red_buf", 512, None)
    o = view("O", 2048, (6, 9), align=1024)  # a descriptor swizzle's alignment
    assert packed([q, k, red, o]) == [0, 4096, 5104, 0]
    late = view("late", 256, (7, 8))
    assert packed([q, red, late]) == [0, 4096, 0]
    assert packed([red, late]) == [0, 512]


def kernel_of(*views: T.SharedView) -> T.Kernel:
    size = max(v.offset + v.dims[0] for v in views)
    return T.Kernel("k", (), 128, (), size, views, {})


def test_a_kernel_is_packed_only_when_it_saves_bytes_and_by_default_only_over_the_limit() -> None:
    q, o = view("Q", 4096, (0, 5)), view("O", 4096, (6, 9))
    k = kernel_of(q, T.SharedView("O", DType.uint8, (4096,), 4096, 16, o.live))
    assert plan_shared(k, limit=65536) is k
    out = plan_shared(k, limit=65536, packing="always")
    assert out.dynamic_smem == 4096
    assert [s.offset for s in out.body if isinstance(s, T.SharedView)] == [0, 0]
    assert T.Comment("O shares bytes with Q (lifetimes lines 0, 0)") in out.body
    assert plan_shared(k, limit=4096).dynamic_smem == 4096  # over the limit: packed
    both = kernel_of(q, T.SharedView("K", DType.uint8, (4096,), 4096, 16, T.Lifetime(0, 9)))
    assert plan_shared(both, limit=0) is both  # nothing to save


def op(name: str, **access: str) -> T.Scope:
    fields = {k: frozenset({v}) for k, v in access.items()}
    return T.Scope(name, (), access=T.SharedAccess(**fields))  # type: ignore[arg-type]


def barriers(*stmts: T.Stmt) -> list[str]:
    out = place_barriers(T.Kernel("k", (), 128, (), 8192, stmts, {})).body
    return ["|" if isinstance(s, T.Barrier) else s.comment for s in out if isinstance(s, (T.Scope, T.Barrier))]


def test_a_barrier_separates_the_tiles_that_share_bytes() -> None:
    x = T.SharedView("X", DType.float32, (1024,), 0)
    y_shared = T.SharedView("Y", DType.float32, (1024,), 0)
    y_apart = T.SharedView("Y", DType.float32, (1024,), 4096)
    accesses = (op("write X", writes="X"), op("read X", reads="X"), op("write Y", writes="Y"))
    assert barriers(x, y_shared, *accesses) == ["write X", "|", "read X", "|", "write Y"]
    assert barriers(x, y_apart, *accesses) == ["write X", "|", "read X", "write Y"]
    stage = (op("read X", reads="X"), op("prologue into Y", stage_writes="Y"))
    assert barriers(x, y_shared, *stage) == ["read X", "|", "prologue into Y"]
    assert barriers(x, y_apart, *stage) == ["read X", "prologue into Y"]


PACKED = """kernel k(A: Tensor((1024, 256), float16), D: Tensor((1024, 256), float16)):
    with Kernel(8, threads=256) as bx:
        A_shared = alloc_shared([128, 256], float16)
        B_shared = alloc_shared([128, 256], float16)
        C_shared = alloc_shared([128, 256], float16)
        D_shared = alloc_shared([128, 256], float16)
"""


def test_elaboration_checks_the_tiles_live_at_once(tmp_path: pathlib.Path) -> None:
    body = """
copy(A[bx * 128, 0], A_shared)
copy(A_shared, B_shared)
copy(B_shared, C_shared)
copy(C_shared, D_shared)
copy(D_shared, D[bx * 128, 0])
"""
    prog = program(tmp_path, body, PACKED)  # 4 x 64 KB declared, 2 live at once
    (kernel,) = prog.kernels
    tiles = [s.buffer for s in kernel.body if isinstance(s, tir.Alloc)]
    assert peak_bytes(kernel, tiles) == 2 * 65536
    text = render_text(explain_program(prog, "sm_80"))
    assert "dynamic shared memory: 131072 bytes, packed by lifetime from 262144" in text
    assert "C_shared shares bytes with A_shared (lifetimes lines 9-10, 7-8)" in text


def test_the_pipeline_runs_the_plan_before_barriers() -> None:
    names = [p.name for p in PASSES]
    assert names.index("lower") < names.index("plan_shared") < names.index("check_shared_memory")
    assert names.index("plan_shared") < names.index("sync")
