"""The tile walk of a persistent warp-role kernel (lower/kernel.py `_warp_roles`): in round t block b
takes tile t * gridDim.x + b (t even) or t * gridDim.x + gridDim.x - 1 - b (t odd). The kernel's own
Thread IR for `block_tiles` and `tile_id` is evaluated here for many tile and block counts: every
tile is taken exactly once, by one block, and a block's tiles alternate ends of their rounds. The
same for the walk of clusters of two (`_cluster_walk`): every tile of the grid taken once, the two
blocks of a cluster on neighbouring rows of one column in every round."""

from __future__ import annotations

import pathlib

import pytest

from tilec import thread_ir as T
from tilec import tir
from tilec.dtypes import DType
from tilec.elaborate import elaborate_file
from tilec.passes import plan_pipeline
from tilec.pipeline import run_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent


def walk_kernel(path: pathlib.Path = ROOT / "bench" / "programs" / "bmm_bias.tile") -> T.Kernel:
    """A persistent kernel's Thread IR: by default one whose blocks walk alone (a batched grid: no
    clusters); examples/gemm.tile's blocks walk in clusters of two where they are on."""
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
        case tir.Call("min", (a, b)):
            return min(value(a, env), value(b, env))
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


@pytest.mark.parametrize("clusters", [1, 3, 33, 66])
@pytest.mark.parametrize(("m", "n"), [(128, 256), (384, 256), (1152, 520), (4096, 4096), (8192, 8192), (4095, 8191)])
def test_clusters_take_every_tile_once_on_neighbouring_rows(
    clusters: int, m: int, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/gemm.tile (128x256 tiles, panels of 8 rows) in clusters of two: over the grid's
    tiles, each (bx, by) inside it taken by exactly one block; the two blocks of a cluster walk
    the same pairs, on rows 2p and 2p + 1 of one column (the second past the grid for an odd
    number of rows: the one place a row outside it appears)."""
    monkeypatch.setattr(plan_pipeline, "CLUSTER_PAIRS", True)  # off until measured on a GPU
    k = walk_kernel(ROOT / "examples" / "gemm.tile")
    assert k.cluster == 2
    names = ("cta_rank", "tiles", "rounds", "last_round_place", "block_tiles")
    per_tile = ("pair_id", "panel_tiles", "panel", "in_panel", "panel_rows", "pair_row", "bx", "by")
    head = {x: decls(k.body, x)[0] for x in names}
    walk = {x: decls(k.body, x)[-1] for x in per_tile}  # the consumers' (the producer's is the same)
    rows, cols = -(-m // 128), -(-n // 256)
    grid = 2 * min(clusters, cols * -(-rows // 2))  # the launcher's tilec_cluster_blocks
    taken: list[tuple[int, int]] = []
    for cluster in range(grid // 2):
        seen = []
        for rank in (0, 1):
            env = {"M": m, "N": n, "K": 64, "blockIdx.x": 2 * cluster + rank, "gridDim.x": grid}
            for x in names:
                env[x] = value(head[x], env)
            tiles = []
            for t in range(env["block_tiles"]):
                env_t = {**env, "t": t}
                for x in per_tile:
                    env_t[x] = value(walk[x], env_t)
                tiles.append((env_t["bx"], env_t["by"]))
            seen.append(tiles)
        assert len(seen[0]) == len(seen[1]), "both blocks walk the same pairs"
        for (bx0, by0), (bx1, by1) in zip(*seen):
            assert bx0 == bx1 and by0 % 2 == 0 and by1 == by0 + 1
        taken += [(bx, by) for tiles in seen for bx, by in tiles if by < rows]
        assert all(by <= rows for tiles in seen for _, by in tiles)
    assert sorted(taken) == sorted((bx, by) for bx in range(cols) for by in range(rows)), (m, n, clusters)


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
