"""Manual pipeline schedules, `Pipelined(..., order=[...], stage=[...], group=[[...]])`
(schedules.py, plan_pipeline, lower/scheduled.py): a schedule that is the inferred pipeline
generates the same code; another is followed (its plan, its code, explain's table); TileLang's
keywords pass through import-tilelang. The misuses are error goldens (tests/golden/errors/schedule_*)."""

from __future__ import annotations

import pathlib
import re
import textwrap

import pytest

from tilec import explain, tir, tir_walk
from tilec.diagnostics import CompileError
from tilec.driver import compile_file, elaborate
from tilec.import_tilelang import convert
from tilec.pipeline import compile_with_warnings, run_passes, tile_ir_passes

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "gpu" / "programs"

GEMM = """\
kernel gemm(A: Tensor((M, K), float16), B: Tensor((K, N), float16), C: Tensor((M, N), float32)):
    with Kernel(ceildiv(N, 128), ceildiv(M, 128), threads=128) as (bx, by):
        A_shared = alloc_shared((128, 32), float16)
        B_shared = alloc_shared((32, 128), float16)
        acc = alloc_fragment((128, 128), float32)
        clear(acc)
        for k in Pipelined(ceildiv(K, 32), {loop}):
            copy(A[by * 128, k * 32], A_shared)
            copy(B[k * 32, bx * 128], B_shared)
            gemm(A_shared, B_shared, acc)
        copy(acc, C[by * 128, bx * 128])
"""


def _write(tmp_path: pathlib.Path, name: str, loop: str) -> str:
    path = tmp_path / name / "gemm.tile"
    path.parent.mkdir()
    path.write_text(GEMM.format(loop=loop))
    return str(path)


def _code(text: str) -> list[str]:
    """The generated code without its comments (they quote the Pipelined line as written)."""
    return [line for line in text.splitlines() if not line.lstrip().startswith("//")]


def _loop(path: str, arch: str) -> tir.For:
    kernel = run_passes(elaborate(path, arch=arch), arch, tile_ir_passes(), verify=True)[0].kernel
    return next(s for s in tir_walk.stmts(kernel.body) if isinstance(s, tir.For) and s.kind == "pipelined")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "gfx90a"])
@pytest.mark.parametrize(
    "schedule",
    [
        "order=[0, 1, 2], stage=[0, 0, 2]",
        "order=[-1, -1, 0], stage=[-1, -1, 2]",
        "num_stages=3, order=[1, 0, 2], stage=[0, 0, 2]",
    ],
)
def test_the_inferred_schedule_generates_the_same_code(tmp_path: pathlib.Path, arch: str, schedule: str) -> None:
    if "-1" in schedule:
        schedule = "num_stages=3, " + schedule
    plain = compile_file(_write(tmp_path, "plain", "num_stages=3"), arch=arch)
    manual = _write(tmp_path, "manual", schedule)
    assert _code(compile_file(manual, arch=arch)) == _code(plain)
    loop = _loop(manual, arch)
    assert loop.schedule is not None and loop.schedule.as_inferred and not loop.schedule.honoured
    assert loop.warp_specialized == (arch == "sm_90a")  # warp roles stay
    text = explain.render_text(explain.explain_program(elaborate(manual, arch=arch), arch))
    assert "the manual schedule (order=, stage=) is the inferred pipeline: the code is the same" in text


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_manual_schedule_is_followed(tmp_path: pathlib.Path, arch: str) -> None:
    path = _write(tmp_path, "manual", "order=[1, 2, 0], stage=[0, 0, 2]")  # copies after the gemm
    loop = _loop(path, arch)
    assert loop.schedule is not None and loop.schedule.honoured and not loop.warp_specialized
    assert (loop.num_stages, loop.schedule.ahead, loop.schedule.pending) == (3, (2, 2, 0), 1)
    assert loop.schedule.not_warp_roles == (arch == "sm_90a")
    code = compile_file(path, arch=arch)
    steady = code[code.index("for (int k = 0;") :]
    # the gemm of tile k, then the copies of tile k + 2, guarded; one commit; two prologue iterations
    assert steady.index("gemm(A_shared, B_shared, acc)") < steady.index("copy(A[by * 128, k * 32], A_shared)")
    assert "if (k + 2 < (K + 31) / 32)" in steady and "tilec_cp_async_wait<1>();" in steady
    assert "prologue: iteration -2 of the schedule" in code and "prologue: iteration -1 of the schedule" in code
    text = explain.render_text(explain.explain_program(elaborate(path, arch=arch), arch))
    assert "manual schedule (order=, stage=)" in text
    assert ("warp roles follow only the inferred schedule" in text) == (arch == "sm_90a")
    assert "k + 2 (into stage (k + 2) % 3)" in text


def test_a_copy_grouped_with_other_statements_runs_in_their_iteration(tmp_path: pathlib.Path) -> None:
    path = _write(tmp_path, "mixed", "order=[0, 1], stage=[0, 1], group=[[0], [1, 2]]")
    loop = _loop(path, "sm_80")
    assert loop.schedule is not None and loop.schedule.honoured and loop.schedule.ahead == (1, 0)
    assert [c.dst.buffer.name for c in loop.body if isinstance(c, tir.Copy) and c.pipeline] == ["A_shared"]


def test_a_schedule_without_copies(tmp_path: pathlib.Path) -> None:
    """A rotation of compute only: the next row's scaling runs in the iteration of this row's sum,
    with no asynchronous groups to wait for and no -Wlost-pipeline (the loop does run by stages)."""
    path = tmp_path / "rotate.tile"
    path.write_text(
        textwrap.dedent(
            """\
            kernel k(X: Tensor((N, 64), float32), Y: Tensor((N, 64), float32)):
                with Kernel(1, threads=128) as bx:
                    a = alloc_fragment((64,), float32)
                    s = alloc_fragment((64,), float32)
                    clear(s)
                    for k in Pipelined(N, order=[1, 0], stage=[0, 1]):
                        for j in Parallel(64):
                            a[j] = X[k, j] * 2.0
                        for j in Parallel(64):
                            s[j] += a[j]
                    copy(s, Y[0, 0])
            """
        )
    )
    code = compile_file(str(path))
    assert "prologue: iteration -1 of the schedule" in code and "if (k + 1 < N)" in code
    assert "wait" not in code.split("prologue")[1] and "commit" not in code.split("prologue")[1]
    assert not compile_with_warnings(elaborate(str(path)), "sm_80").warnings


def test_the_attention_schedule_plan() -> None:
    """TileLang's wgmma-pipelined attention schedule: K runs two tiles ahead (its gemm is a stage
    earlier than V's), V one; each wait retires every group (num_stages=2)."""
    loop = _loop(str(PROGRAMS / "attention_schedule.tile"), "sm_80")
    assert loop.schedule is not None and loop.schedule.honoured
    assert loop.schedule.ahead == (2, 1, 1, 0, 1, 0) and loop.schedule.pending == 0
    copies = [s for s in loop.body if isinstance(s, tir.Copy) and s.pipeline == "producer"]
    assert [c.dst.buffer.name for c in copies] == ["K_shared", "V_shared"]
    program = elaborate(str(PROGRAMS / "attention_schedule.tile"))
    text = explain.render_text(explain.explain_program(program))
    assert "-1           -1     k + 2 (into stage k % 2)" in text
    assert "0 (group 1)  0      k + 1" in text and "1            2      k " in text


def test_a_schedule_with_bindings(tmp_path: pathlib.Path) -> None:
    """A `let` is not a scheduled statement; one the copies use is written into their indices."""
    path = tmp_path / "paged.tile"
    text = (PROGRAMS / "paged_gather.tile").read_text()
    path.write_text(text.replace("Pipelined(T, num_stages=3)", "Pipelined(T, order=[1, 0], stage=[0, 2])"))
    loop = _loop(str(path), "sm_80")
    assert loop.schedule is not None and loop.schedule.units == ((1,), (2,)) and loop.schedule.ahead == (2, 0)
    assert "Table[bx * T + k + 2]" in compile_file(str(path))  # the copy of tile k + 2 reads its own entry


def test_import_tilelang_passes_the_schedule_through(tmp_path: pathlib.Path) -> None:
    program = textwrap.dedent(
        """
        import tilelang.language as T

        def attn(M, N, K, bm=64, bk=32):
            @T.prim_func
            def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float")):
                with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, bm), threads=128) as (bx, by):
                    a_s = T.alloc_shared((bm, bk), "float16")
                    b_s = T.alloc_shared((bk, 64), "float16")
                    c_f = T.alloc_fragment((bm, 64), "float")
                    T.clear(c_f)
                    for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2, order=[-1, 0, -1], stage=[-1, 1, -1],
                                         group=[[0], [1], [2]]):
                        T.copy(A[by * bm, k * bk], a_s)
                        T.gemm(a_s, b_s, c_f)
                        T.copy(B[k * bk, bx * 64], b_s)
                    T.copy(c_f, C[by * bm, bx * 64])
            return main
        """
    )
    text = convert(program, "attn.py")
    assert "order=[-1, 0, -1], stage=[-1, 1, -1]" in text and "group=[[0], [1], [2]]" in text
    path = tmp_path / "attn.tile"
    path.write_text(text)
    loop = _loop(str(path), "sm_80")
    assert loop.schedule is not None and loop.schedule.as_inferred  # copies -1, the gemm in the last stage


# ------------------------------------------------------------------ every accepted schedule is exact


def _accesses(loop: tir.For, pos: tuple[int, ...]) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    reads: set[tir.Buffer] = set()
    writes: set[tir.Buffer] = set()
    for x in tir_walk.stmts(tuple(loop.body[p] for p in pos)):
        w = set(tir_walk.written(x))
        writes |= w
        reads |= {r.buffer for r in tir_walk.regions(x) if r.buffer not in w}
        reads |= {ld.buffer for e in tir_walk.stmt_exprs(x) for ld in tir_walk.loads(e)}
    return reads, writes


def _replay(loop: tir.For, trips: int) -> str | None:
    """Run the body's units in source order, then as the plan emits them (iteration it runs unit u
    on it + ahead[u], in order; a copied tile lives in slot i % num_stages, visible once the wait
    of a later iteration leaves at most `pending` newer groups): None when every read sees the
    write it sees in source order, else what differs. A unit's own tile reads use iteration i's copy."""
    sched = loop.schedule
    assert sched is not None
    n_units = len(sched.units)
    acc = {u: _accesses(loop, sched.units[u]) for u in range(n_units)}
    tiles = {c.dst.buffer for c in loop.body if isinstance(c, tir.Copy) and c.pipeline == "producer"}
    expected: dict[tuple[int, int], list] = {}
    state: dict[tuple[tir.Buffer, int | None], tuple[int, int]] = {}
    for i in range(trips):
        for u in range(n_units):
            reads, writes = acc[u]
            expected[(u, i)] = [state.get((b, i if b in tiles else None)) for b in sorted(reads, key=lambda b: b.name)]
            for b in writes:
                state[(b, i if b in tiles else None)] = (u, i)
    state.clear()
    slots: dict[tuple[tir.Buffer, int], tuple[int, int, int]] = {}
    emitted = sorted(range(n_units), key=lambda u: (sched.order[u], sched.units[u]))
    for it in range(-max(sched.ahead), trips):
        for u in emitted:
            i = it + sched.ahead[u]
            if not 0 <= i < trips:
                continue
            reads, writes = acc[u]
            got = []
            for b in sorted(reads, key=lambda b: b.name):
                if b not in tiles:
                    got.append(state.get((b, None)))
                    continue
                slot = slots.get((b, i % loop.num_stages))
                landed = slot is not None and slot[1] == i and slot[2] <= it - 1 - sched.pending
                got.append(slot[:2] if landed and slot is not None else ("not landed", slot))
            if got != expected[(u, i)]:
                return f"unit {u} of iteration {i} read {got}, not {expected[(u, i)]}"
            for b in writes:
                if b in tiles:
                    slots[(b, i % loop.num_stages)] = (u, i, it)
                else:
                    state[(b, None)] = (u, i)
    return None


def test_every_accepted_schedule_is_exact(tmp_path: pathlib.Path) -> None:
    """Seeded random order/stage lists on two programs: each schedule tilec accepts and follows
    replays the source order's reads exactly (the rules in schedules.py are enough)."""
    import random

    rng = random.Random(15)
    sources = [(PROGRAMS / "attention_schedule.tile").read_text(), (PROGRAMS / "gemm_schedule.tile").read_text()]
    followed = 0
    for n in range(60):
        src = sources[n % 2]
        lists = src[src.index("order=") : src.index("):\n", src.index("order="))]
        mutated = re.sub(r"-?\d+", lambda m: str(rng.choice([-1, 0, 1, 2])) if rng.random() < 0.35 else m[0], lists)
        path = tmp_path / f"s{n}.tile"
        path.write_text(src.replace(lists, mutated))
        try:
            loop = _loop(str(path), "sm_80")
        except CompileError:
            continue
        if loop.schedule is None or not loop.schedule.honoured:
            continue
        followed += 1
        for trips in (1, 2, 3, 6):
            assert _replay(loop, trips) is None, (mutated, trips, _replay(loop, trips))
    assert followed >= 5
