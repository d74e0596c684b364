"""The tile walk of a persistent warp-role kernel (lower/kernel.py `_warp_roles`): in round t block b
takes tile t * gridDim.x + b (t even) or t * gridDim.x + gridDim.x - 1 - b (t odd). The kernel's own
Thread IR for `block_tiles` and `tile_id` is evaluated here for many tile and block counts: every
tile is taken exactly once, by one block, and a block's tiles alternate ends of their rounds."""

from __future__ import annotations

import pathlib

import pytest

from tilec import thread_ir as T
from tilec import tir
from tilec.dtypes import DType
from tilec.elaborate import elaborate_file
from tilec.pipeline import run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent


def walk_kernel() -> T.Kernel:
    path = ROOT / "examples" / "gemm.tile"
    (unit,) = run_passes(elaborate_file(str(path), text=path.read_text(), arch="sm_90a"), "sm_90a")
    assert unit.lowered is not None and unit.lowered.persistent
    return unit.lowered


def value(e: object, env: dict[str, int]) -> int:
    """C's integer value of a walk expression (its names bound in `env`)."""
    match e:
        case tir.IntImm(v) | tir.BoolImm(v):
            return int(v)
        case tir.Var(name) | T.Sym(name):
            return env[name]
        case T.Builtin("block_index_x"):
            return env["blockIdx.x"]
        case T.Builtin("grid_dim_x"):
            return env["gridDim.x"]
        case tir.Cast(v):
            return value(v, env)
        case tir.Select(c, a, b):
            return value(a, env) if value(c, env) else value(b, env)
        case tir.BinOp(op, a, b):
            x, y = value(a, env), value(b, env)
            ops = {"+": x + y, "-": x - y, "*": x * y, "==": int(x == y), "<": int(x < y)}
            if op in ("//", "%"):  # nonnegative operands here: C's and Python's agree
                assert x >= 0 and y > 0
                return x // y if op == "//" else x % y
            return ops[op]
    raise TypeError(f"no case for {e!r}")


def decls(stmts: tuple[T.Stmt, ...], name: str) -> list[tir.Expr]:
    found = [s.init for s in T.all_stmts(stmts) if isinstance(s, T.Decl) and s.name == name and s.init is not None]
    assert found, name
    return found


def test_both_roles_walk_the_same_tiles() -> None:
    """The producer's thread and the consumers each run the walk: the same tile index, each loop
    bounded by the kernel's one `block_tiles`."""
    k = walk_kernel()
    producer, consumers = decls(k.body, "tile_id")
    assert producer == consumers
    walks = [s for s in T.all_stmts(k.body) if isinstance(s, T.Loop) and s.var.name == "t"]
    assert len(walks) == 2 and all(isinstance(w.stop, tir.Var) and w.stop.name == "block_tiles" for w in walks)


@pytest.mark.parametrize("grid", [1, 2, 3, 7, 66, 132, 264])
def test_every_tile_is_taken_once_and_rounds_alternate(grid: int) -> None:
    k = walk_kernel()
    names = ("rounds", "last_round_place", "block_tiles", "tile_id")
    rounds, last_place, mine, tile_id = (decls(k.body, n)[-1] for n in names)
    for tiles in (1, grid - 1, grid, grid + 1, 2 * grid, 2 * grid + 3, 3 * grid - 1, 5 * grid + grid // 2):
        if tiles < 1:
            continue
        taken: list[int] = []
        for b in range(grid):
            env = {"tiles": tiles, "blockIdx.x": b, "gridDim.x": grid}
            env["rounds"] = value(rounds, env)
            env["last_round_place"] = value(last_place, env)
            mine_b = value(mine, env)
            walk = [value(tile_id, {**env, "t": t}) for t in range(mine_b)]
            assert all(x // grid == t for t, x in enumerate(walk)), "one tile a round"
            assert all(x % grid == (b if t % 2 == 0 else grid - 1 - b) for t, x in enumerate(walk))
            taken += walk
        assert sorted(taken) == list(range(tiles)), (grid, tiles)


def test_with_bodies_rewrites_each_statement_list_and_keeps_the_other_fields() -> None:
    """thread_ir.with_bodies, through which the edge paths' reread and the nested lane names walk
    a kernel: an `if` keeps its condition and its `edge` flag."""
    mark = T.Comment("x")
    cond = tir.BoolImm(True)
    branch = T.IfThen(cond, (mark,), (mark,), edge=True)
    doubled = T.with_bodies(branch, lambda body: body * 2)
    assert doubled == T.IfThen(cond, (mark, mark), (mark, mark), edge=True)
    loop = T.Loop(T.Sym("k", DType.int32), tir.IntImm(0), tir.IntImm(4), 1, False, (branch,))
    assert T.with_bodies(loop, lambda body: ()).body == ()
    assert T.with_bodies(mark, lambda body: ()) is mark
