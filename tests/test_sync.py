"""Barrier placement (sync.place_barriers) on small hand-built Thread IR: each
tile op is a Scope with the shared tiles it reads and writes, the pass adds
`block` barriers where the hazards are."""

from __future__ import annotations

import pathlib

import pytest

from tilec import thread_ir as T
from tilec import tir
from tilec.diagnostics import CompileError
from tilec.dtypes import DType
from tilec.sync import BLOCK, place_barriers, shared_reads_writes

I32 = DType.int32
COMMIT = T.Barrier("async_commit")
ROOT = pathlib.Path(__file__).resolve().parent.parent
BAR = T.Subscript("bars", (tir.IntImm(0, I32),), DType.uint64)


def op(name: str, **access: object) -> T.Scope:
    """A tile op called `name` (its comment) doing `access` (SharedAccess fields, names as strings)."""
    fields = {k: frozenset(v) if isinstance(v, str) else v for k, v in access.items()}
    return T.Scope(name, (), access=T.SharedAccess(**fields))  # type: ignore[arg-type]


def wait(pending: int) -> T.Barrier:
    return T.Barrier("async_wait", (tir.IntImm(pending, I32),))


def loop(*body: T.Stmt, stop: tir.Expr | None = None) -> T.Loop:
    bound = stop if stop is not None else tir.Var("n", I32, "thread")
    return T.Loop(T.Sym("k", I32), tir.IntImm(0, I32), bound, body=body)


def placed(*stmts: T.Stmt) -> tuple[T.Stmt, ...]:
    kernel = T.Kernel("k", (), 128, (), 0, stmts, {})
    return place_barriers(kernel).body


def shape(stmts: tuple[T.Stmt, ...]) -> list[object]:
    """Statements as names: a Scope's comment, `|` for a block barrier, a loop or branch as a list."""
    out: list[object] = []
    for s in stmts:
        match s:
            case T.Scope(comment=c):
                out.append(c)
            case T.Barrier(kind="block"):
                out.append("|")
            case T.Barrier(kind=kind):
                out.append(kind)
            case T.Loop(body=body) | T.While(body=body):
                out.append(shape(body))
            case T.Break():
                out.append("break")
            case T.IfThen(then=then, orelse=orelse):
                out.append(("if", shape(then), shape(orelse)))
            case T.Comment(text=text):
                out.append("//" + text)
            case _:
                out.append(type(s).__name__)
    return out


def test_write_then_read_needs_a_barrier() -> None:
    assert shape(placed(op("copy", writes="A"), op("gemm", reads="A"))) == ["copy", "|", "gemm"]


def test_read_then_overwrite_needs_a_barrier() -> None:
    assert shape(placed(op("gemm", reads="A"), op("copy", writes="A"))) == ["gemm", "|", "copy"]


def test_write_then_write_needs_a_barrier() -> None:
    assert shape(placed(op("fill", writes="A"), op("copy", writes="A"))) == ["fill", "|", "copy"]


def test_no_hazard_no_barrier() -> None:
    stmts = (op("copy A", writes="A"), op("copy B", writes="B"), op("r1", reads="C"), op("r2", reads="C"))
    assert shape(placed(*stmts)) == ["copy A", "copy B", "r1", "r2"]


def test_one_barrier_retires_every_pending_access() -> None:
    stmts = (op("copy A", writes="A"), op("copy B", writes="B"), op("use A", reads="A"), op("use B", reads="B"))
    assert shape(placed(*stmts)) == ["copy A", "copy B", "|", "use A", "use B"]


def test_an_existing_barrier_is_used() -> None:
    assert shape(placed(op("copy", writes="A"), BLOCK, op("gemm", reads="A"))) == ["copy", "|", "gemm"]


def test_cp_async_write_needs_no_barrier_until_its_wait() -> None:
    stmts = (
        op("cp.async A", async_writes="A"),
        COMMIT,
        op("copy B", writes="B"),
        op("use B", reads="B"),  # A's copy is in flight: only B's write is ordered here
        wait(0),
        op("use A", reads="A"),  # A is complete in each thread now; the block sees it after a barrier
    )
    assert shape(placed(*stmts)) == ["cp.async A", "async_commit", "copy B", "|", "use B", "async_wait", "|", "use A"]


def test_cp_async_write_checks_earlier_reads() -> None:
    stmts = (op("use A", reads="A"), op("cp.async A", async_writes="A"), COMMIT, wait(0), BLOCK, op("use", reads="A"))
    assert shape(placed(*stmts)) == ["use A", "|", "cp.async A", "async_commit", "async_wait", "|", "use"]


def test_reading_an_unwaited_cp_async_write_is_an_internal_error() -> None:
    with pytest.raises(CompileError, match="internal: 'A' is accessed while an asynchronous write"):
        placed(op("cp.async A", async_writes="A"), COMMIT, BLOCK, op("use A", reads="A"))


def test_a_wait_retires_all_but_the_newest_groups() -> None:
    stmts = (
        op("cp A", async_writes="A"),
        COMMIT,
        op("cp B", async_writes="B"),
        COMMIT,
        wait(1),
        op("use A", reads="A"),
    )
    assert shape(placed(*stmts))[-2:] == ["|", "use A"]
    with pytest.raises(CompileError, match="'B'"):
        placed(*stmts, op("use B", reads="B"))


def test_loop_carried_hazard_is_ordered_at_the_end_of_the_body() -> None:
    # iteration k reads A, then overwrites it; iteration k + 1 reads it again
    body = shape(placed(loop(op("use A", reads="A"), op("copy A", writes="A"))))
    assert body == [["use A", "|", "copy A", "|"]]


def test_loop_starts_with_nothing_pending() -> None:
    stmts = (op("copy A", writes="A"), T.Comment("the loop"), loop(op("use B", reads="B"), op("copy C", writes="C")))
    assert shape(placed(*stmts)) == ["copy A", "|", "//the loop", ["use B", "copy C", "|"]]


def test_reads_of_tiles_the_loop_never_writes_need_no_barrier_between_iterations() -> None:
    # the next iteration only reads A again; the write after the loop waits for the reads
    stmts = (op("copy A", writes="A"), loop(op("use A", reads="A")), op("copy A again", writes="A"))
    assert shape(placed(*stmts)) == ["copy A", "|", ["use A"], "|", "copy A again"]


def test_a_loop_reading_a_tile_it_also_writes_ends_with_a_barrier() -> None:
    stmts = (loop(op("use A", reads="A"), op("use B", reads="B"), op("copy A", writes="A")),)
    assert shape(placed(*stmts)) == [["use A", "use B", "|", "copy A", "|"]]


def test_loop_without_shared_accesses_is_left_alone() -> None:
    stmts = (op("copy A", writes="A"), loop(op("registers")), op("use A", reads="A"))
    assert shape(placed(*stmts)) == ["copy A", ["registers"], "|", "use A"]


def test_loop_beginning_with_a_barrier_needs_none_at_its_end() -> None:
    stmts = (loop(BLOCK, op("use A", reads="A"), op("copy B", writes="B")), op("use B", reads="B"))
    assert shape(placed(*stmts)) == [["|", "use A", "copy B"], "|", "use B"]


def test_branches_start_from_the_same_state_and_join() -> None:
    branch = T.IfThen(tir.Var("c", DType.bool, "thread"), (op("use A", reads="A"), op("copy B", writes="B")), ())
    out = shape(placed(op("copy A", writes="A"), branch, op("use B", reads="B")))
    assert out == ["copy A", ("if", ["|", "use A", "copy B"], []), "|", "use B"]


def test_else_branch_is_checked_against_the_state_before_the_if() -> None:
    branch = T.IfThen(tir.Var("c", DType.bool, "thread"), (op("copy B", writes="B"),), (op("use A", reads="A"),))
    out = shape(placed(op("copy A", writes="A"), branch))
    assert out == ["copy A", ("if", ["copy B"], ["|", "use A"])]


def test_pipeline_stage_writes_are_the_schedules() -> None:
    # a pipelined iteration: wait + barrier (lowering's), refill stage k + 2, read stage k
    body = (wait(1), BLOCK, op("cp.async A[k + 2]", stage_writes="A"), COMMIT, op("gemm A[k]", reads="A"))
    out = shape(placed(op("prologue", stage_writes="A"), COMMIT, op("prologue", stage_writes="A"), COMMIT, loop(*body)))
    assert out[-1] == ["async_wait", "|", "cp.async A[k + 2]", "async_commit", "gemm A[k]"]


def test_early_copy_is_retired_by_the_pipelines_first_wait() -> None:
    prologue = loop(op("cp.async A[p]", stage_writes="A"), COMMIT, stop=tir.IntImm(2, I32))
    steady = loop(wait(1), BLOCK, op("gemm", reads="Q"), op("cp.async A", stage_writes="A"), COMMIT)
    stmts = (op("cp.async Q", async_writes="Q"), COMMIT, prologue, steady, wait(0), BLOCK)
    assert shape(placed(*stmts))[3] == ["async_wait", "|", "gemm", "cp.async A", "async_commit"]
    empty = loop(op("cp.async A[p]", stage_writes="A"), COMMIT, stop=tir.IntImm(0, I32))
    with pytest.raises(CompileError, match="'Q'"):  # a prologue that never runs: wait<1> keeps Q's group
        placed(op("cp.async Q", async_writes="Q"), COMMIT, empty, steady)


def test_tma_writes_are_complete_after_their_mbarrier_wait() -> None:
    tma = op("tma A", tx_writes="A", mbarrier=BAR)
    stmts = (tma, T.Barrier("mbarrier_wait", (BAR, tir.IntImm(0, I32))), op("use A", reads="A"))
    assert shape(placed(*stmts)) == ["tma A", "mbarrier_wait", "use A"]
    with pytest.raises(CompileError, match="'A'"):
        placed(tma, BLOCK, op("use A", reads="A"))


def test_hopper_slots_retire_nothing() -> None:
    slots = [T.Barrier(k, (BAR,)) for k in ("mbarrier_init", "mbarrier_arrive", "mbarrier_expect_tx")]
    slots += [T.Barrier("named", (tir.IntImm(1, I32), tir.IntImm(256, I32))), T.Barrier("fence_proxy_async")]
    out = shape(placed(op("copy A", writes="A"), *slots, op("use A", reads="A")))
    assert out[-2:] == ["|", "use A"]


def test_an_unknown_statement_is_a_runtime_error() -> None:
    with pytest.raises(AssertionError):
        placed(object())  # type: ignore[arg-type]


def _scopes(stmts: tuple[T.Stmt, ...]) -> list[T.Scope]:
    out: list[T.Scope] = []
    for s in stmts:
        match s:
            case T.Scope():
                out.append(s)
            case T.Loop(body=body):
                out += _scopes(body)
            case T.IfThen(then=then, orelse=orelse):
                out += _scopes(then) + _scopes(orelse)
    return out


def _lowered_scopes(case: str) -> list[T.Scope]:
    from tilec.elaborate import elaborate_file
    from tilec.pipeline import lower_program

    program = elaborate_file(f"tests/golden/codegen/{case}.tile", {}, arch="sm_80")
    return _scopes(lower_program(program, "sm_80").kernels[0].body)


def test_lowering_records_accesses_on_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert any(s.access.stage_writes for s in _lowered_scopes("gemm_pipelined"))  # the pipeline's producers
    simt = _lowered_scopes("gemm_simt")
    assert any(s.access.writes for s in simt)  # the copies into shared tiles
    assert any(s.access.reads and s.access.scratch for s in simt)  # the gemm reading them


def test_every_barrier_kind_is_spelled_for_sm_90a() -> None:
    from typing import get_args

    from tilec import emit
    from tilec.targets import get_target

    sp = get_target("sm_90a").spelling
    args = (BAR, tir.IntImm(1, I32))
    lines = {kind: emit.stmt_lines(T.Barrier(kind, args), sp) for kind in get_args(T.BarrierKind)}
    assert lines["mbarrier_wait"] == ["tilec_mbarrier_wait(&bars[0], 1);"]
    assert lines["named"] == ['asm volatile("bar.sync %0, %1;" ::"r"(bars[0]), "r"(1) : "memory");']
    assert lines["fence_proxy_async"] == ['asm volatile("fence.proxy.async.shared::cta;" ::: "memory");']
    assert {sp.barrier_helpers[k] for k in lines if k.startswith("mbarrier")} == {"mbarrier"}
    assert "mbarrier_wait" not in get_target("sm_80").spelling.barriers  # sm_80 has no try_wait.parity


def sub(array: str, i: int = 0) -> T.Subscript:
    return T.Subscript(array, (tir.IntImm(i, I32),), DType.float32)


def load(array: str, i: int = 0) -> tir.Expr:
    """`array[i]` read in an expression (Thread IR subscripts stand where Tile IR loads were)."""
    return sub(array, i)  # type: ignore[return-value]


def view(name: str) -> T.SharedView:
    return T.SharedView(name, DType.float32, (64,), 0)


def test_scalar_statements_outside_tile_ops_are_ordered_too() -> None:
    store = T.Assign(sub("A", 1), load("A", 2))  # A[1] = A[2], by every thread
    read = T.Decl("v", DType.float32, init=load("A"), const=True)  # a Let reading A
    out = shape(placed(view("A"), op("copy", writes="A"), store, read, op("use", reads="A")))
    assert out == ["SharedView", "copy", "|", "Assign", "|", "Decl", "use"]
    registers = T.Assign(sub("acc"), load("frag"))  # not shared arrays: nothing to order
    assert shape(placed(view("A"), op("copy", writes="A"), registers)) == ["SharedView", "copy", "Assign"]


def test_branch_condition_and_loop_bounds_read_shared_arrays() -> None:
    cond = tir.BinOp(">", load("A"), tir.FloatImm(0.0, DType.float32), DType.bool)
    out = shape(placed(view("A"), op("copy", writes="A"), T.IfThen(cond, (op("r"),))))
    assert out == ["SharedView", "copy", "|", ("if", ["r"], [])]
    bound = T.Loop(T.Sym("i", I32), tir.IntImm(0, I32), tir.Cast(load("A"), I32), body=(op("r"),))
    assert shape(placed(view("A"), op("copy", writes="A"), bound)) == ["SharedView", "copy", "|", ["r"]]


def test_a_branch_on_a_shared_tile_waits_for_the_copy_into_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.elaborate import elaborate_file
    from tilec.emit import thread_text
    from tilec.pipeline import lower_program

    source = """kernel k(A: Tensor((M, N), float16), B: Tensor((M, N), float16)):
    with Kernel(ceildiv(N, 64), ceildiv(M, 32), threads=128) as (bx, by):
        A_shared = alloc_shared((32, 64), float16)
        copy(A[by * 32, bx * 64], A_shared)
        if A_shared[0, 0] > 0:
            B[by * 32, bx * 64] = 1
"""
    monkeypatch.chdir(ROOT)
    text = thread_text(lower_program(elaborate_file("k.tile", {}, text=source), "sm_80"))
    lines = [line.strip() for line in text.splitlines()]
    branch = next(i for i, line in enumerate(lines) if line.startswith("if (static_cast<float>(A_shared[0][0])"))
    assert lines[branch - 1] == "__syncthreads();"


def test_a_scalar_access_before_the_barrier_leaves_the_loop_end_barrier() -> None:
    """An iteration's first barrier orders it against the previous iteration only when nothing
    before it touches shared memory: a read of A there needs the barrier at the body's end."""
    read = T.Decl("v", DType.float32, init=load("A"))
    assert shape(placed(view("A"), loop(read, BLOCK, op("copy", writes="A")))) == [
        "SharedView",
        ["Decl", "|", "copy", "|"],
    ]
    store = T.Assign(sub("A"), tir.FloatImm(1.0, DType.float32))
    assert shape(placed(view("A"), loop(store, BLOCK, op("gemm", reads="A")))) == [
        "SharedView",
        ["Assign", "|", "gemm", "|"],
    ]
    registers = T.Decl("v", DType.float32, init=load("frag"))  # no shared array: the barrier still leads
    assert shape(placed(view("A"), loop(registers, BLOCK, op("copy", writes="A")))) == [
        "SharedView",
        ["Decl", "|", "copy"],
    ]


@pytest.mark.parametrize("stages", [3, 9, 11, 16])
def test_a_prologue_is_walked_for_every_iteration(stages: int) -> None:
    """The prologue commits one group per iteration, however many: the main loop's first wait
    (stages - 2 pending) retires the early copy's group only once all of them are counted."""
    prologue = T.Loop(
        T.Sym("p", I32), tir.IntImm(0, I32), tir.IntImm(stages - 1, I32), body=(op("fill", stage_writes="K"), COMMIT)
    )
    out = placed(op("early", async_writes="Q"), COMMIT, prologue, loop(wait(stages - 2), BLOCK, op("gemm", reads="Q")))
    assert shape(out) == ["early", "async_commit", ["fill", "async_commit"], ["async_wait", "|", "gemm"]]


def test_flash_attention_with_more_stages_than_any_fixed_walk_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.driver import compile_file

    monkeypatch.chdir(ROOT / "examples")
    defines = {"num_stages": "11", "dim": "32", "block_M": "64", "block_N": "16"}
    code = compile_file("flash_attention.tile", defines)
    assert "tilec_cp_async_wait<9>();" in code  # stages - 2 groups left in flight


def test_a_loop_of_unknown_trip_count_must_settle() -> None:
    """Committing a group each iteration and never waiting leaves more in flight every time."""
    with pytest.raises(CompileError, match="do not settle"):
        placed(loop(op("fill", stage_writes="K"), COMMIT))
    settles = loop(op("fill", stage_writes="K"), COMMIT, wait(1))  # one group carried over
    assert shape(placed(settles)) == [["fill", "async_commit", "async_wait"]]


def test_an_alloc_var_initialized_from_a_shared_tile_reads_it() -> None:
    shared = tir.Buffer("A_shared", (tir.IntImm(4, I32),), DType.float32, "shared")
    v = tir.Buffer("v", (), DType.float32, "var")
    i = tir.Var("i", I32, "loop")
    init = tir.Alloc(v, init=tir.Load(shared, (i,)))
    parallel = tir.Parallel((i,), (4,), (init,))
    assert shared_reads_writes(parallel) == ({shared}, set())


def _thread_lines(source: str) -> list[str]:
    from tilec.elaborate import elaborate_file
    from tilec.emit import thread_text
    from tilec.pipeline import lower_program

    text = thread_text(lower_program(elaborate_file("k.tile", {}, text=source), "sm_80"))
    return [line.strip() for line in text.splitlines()]


_ALLOC_VAR_IN_PARALLEL = """kernel k(A: Tensor((M, N), float32), B: Tensor((M, N), float32)):
    with Kernel(ceildiv(N, 64), ceildiv(M, 32), threads=128) as (bx, by):
        A_shared = alloc_shared((32, 64), float32)
        copy(A[by * 32, bx * 64], A_shared)
        for i, j in Parallel(32, 64):
            v = alloc_var(float32, init=INIT)
            B[by * 32 + i, bx * 64 + j] = v
"""


def test_an_alloc_var_reading_a_shared_tile_waits_for_the_copy_into_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    lines = _thread_lines(_ALLOC_VAR_IN_PARALLEL.replace("INIT", "A_shared[0, 0]"))
    read = lines.index("float v = A_shared[0][0];")
    parallel = max(i for i, line in enumerate(lines[:read]) if "Parallel(32, 64)" in line)
    assert lines[parallel - 1] == "__syncthreads();"


def test_an_alloc_var_init_in_a_parallel_loop_binds_its_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    lines = _thread_lines(_ALLOC_VAR_IN_PARALLEL.replace("INIT", "A_shared[i, 63 - j]"))
    i, j = (next(x for x in lines if x.startswith(f"const int {n}")).split()[2] for n in ("i_", "j_"))
    assert f"float v = A_shared[{i}][63 - {j}];" in lines


COND = tir.BinOp("<", tir.Var("t", I32, "thread"), tir.Var("n", I32, "thread"), DType.bool)


def test_while_loop_is_a_loop_of_unknown_trip_count() -> None:
    """Nothing pending on entry (a barrier before it), nothing at the body's end (a barrier there)."""
    body = placed(op("w", writes="A"), T.While(COND, (op("r", reads="A"), op("w2", writes="B"))), op("rb", reads="B"))
    assert shape(body) == ["w", "|", ["r", "w2", "|"], "rb"]


def test_break_leaves_its_loop_with_what_is_pending() -> None:
    """The write before a break is pending after the loop: the read there gets a barrier."""
    leave = T.IfThen(tir.BoolImm(True), (T.Break(),))
    body = placed(loop(op("w", writes="A"), leave, op("w2", writes="B")), op("r", reads="A"))
    assert shape(body) == [["w", ("if", ["break"], []), "w2", "|"], "|", "r"]


def test_a_loop_without_break_needs_no_barrier_after_it() -> None:
    """The same loop without the break: its body ends with nothing pending."""
    body = placed(loop(op("w", writes="A"), op("w2", writes="B")), op("r", reads="A"))
    assert shape(body) == [["w", "w2", "|"], "r"]


MINE = frozenset({((i,), i) for i in range(128)})  # element i touched by thread i
SHIFTED = frozenset({((i,), (i + 1) % 128) for i in range(128)})  # element i by thread i + 1


def test_accesses_of_a_tile_by_its_elements_owners_need_no_barrier() -> None:
    # each thread reads what it wrote itself (lower/owners.py): no barrier; another thread's
    # element, or an op without an owner map, keeps it
    write = op("copy", writes="A", owners=(("A", MINE),))
    same = op("use", reads="A", owners=(("A", MINE),))
    other = op("use", reads="A", owners=(("A", SHIFTED),))
    assert shape(placed(view("A"), write, same)) == ["SharedView", "copy", "use"]
    assert shape(placed(view("A"), write, other)) == ["SharedView", "copy", "|", "use"]
    assert shape(placed(view("A"), write, op("use", reads="A"))) == ["SharedView", "copy", "|", "use"]
    # a second writer with other owners after a read by the owners: a barrier before it
    read = op("read", reads="A", owners=(("A", MINE),))
    assert shape(placed(view("A"), write, read, other)) == ["SharedView", "copy", "read", "|", "use"]


def test_a_loop_whose_tiles_only_their_owners_touch_has_no_barrier_per_iteration() -> None:
    body = (op("copy", writes="A", owners=(("A", MINE),)), op("use", reads="A", owners=(("A", MINE),)))
    assert shape(placed(view("A"), loop(*body))) == ["SharedView", ["copy", "use"]]
    # one access of the loop by other owners: the iteration ends with a barrier again
    mixed = (*body, op("late", reads="A", owners=(("A", SHIFTED),)))
    assert shape(placed(view("A"), loop(*mixed))) == ["SharedView", ["copy", "use", "|", "late", "|"]]


# ---------------------------------------------------------------- stores of each iteration apart

K = tir.Var("k", I32, "thread")  # the counter of `counted`, as the body reads it
TX = T.Decl("tx", I32, init=T.Builtin("thread_index"), const=True)
BX = T.Decl("bx", I32, init=T.Builtin("block_index_x"), const=True)


def counted(*body: T.Stmt) -> T.Loop:
    return T.Loop(T.Sym("k", I32), tir.IntImm(0, I32), tir.IntImm(64, I32), body=body)


def at(array: str, *indices: tir.Expr) -> T.Subscript:
    return T.Subscript(array, indices, DType.float32)


def name(n: str) -> tir.Var:
    return tir.Var(n, I32, "thread")


def plus(a: tir.Expr, b: tir.Expr | int, op: tir.BinOpName = "+") -> tir.Expr:
    return tir.BinOp(op, a, tir.IntImm(b, I32) if isinstance(b, int) else b, I32)


def stores_then_read(*stores: T.Subscript, extra: tuple[T.Stmt, ...] = ()) -> list[object]:
    """`stores` (each of the value 1) in a loop over k, then a read of S after it."""
    body = tuple(T.Assign(s, tir.FloatImm(1.0, DType.float32)) for s in stores) + extra
    read = T.Decl("v", DType.float32, init=load("S"))
    return shape(placed(view("S"), T.SharedView("S2", DType.float32, (64, 64), 256), TX, BX, counted(*body), read))


HEAD = ["SharedView", "SharedView", "Decl", "Decl"]

_GEMV = """kernel k(A: Tensor((K,), float16), B: Tensor((N, K), float16), C: Tensor((N,), float16)):
    with Kernel(ceildiv(N, 128), threads=128) as bn:
        tn = get_thread_binding(0)
        A_shared = alloc_shared((128,), float16)
        B_shared = alloc_shared((128, 128), float16)
        C_reg = alloc_local((1,), float32)
        clear(C_reg)
        for bk in serial(ceildiv(K, 128)):
            for tk in serial(128):
                A_shared[tk] = A[bk * 128 + tk]
                B_shared[tn, tk] = B[bn * 128 + tn, bk * 128 + tk]
            for tk in serial(128):
                C_reg[0] += A_shared[tk].astype(float32) * B_shared[tn, tk].astype(float32)
        C[bn * 128 + tn] = C_reg[0]
"""


def test_stores_of_each_iteration_into_its_own_elements_need_no_barrier_per_iteration() -> None:
    """TileLang's naive GEMV: `A_shared[tk] = ...; B_shared[tn][tk] = ...` over tk. No two
    iterations store into one element: the loop ends with no barrier, its stores stay pending,
    and the read after it gets the barrier."""
    tx = name("tx")
    assert stores_then_read(at("S", K), at("S2", tx, K)) == [*HEAD, ["Assign", "Assign"], "|", "Decl"]
    # k * 2 + (bx + 3) and (bx + 3) + k * 2: the same c and e (the barrier between the two stores
    # is the one every pair of stores into an array gets)
    offset = plus(plus(K, 2, "*"), plus(name("bx"), 3))
    same = plus(plus(name("bx"), 3), plus(K, 2, "*"))
    assert stores_then_read(at("S", offset), at("S", same)) == [*HEAD, ["Assign", "|", "Assign"], "|", "Decl"]


def test_the_gemv_fill_loop_has_no_barrier_and_the_read_loop_one_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    lines = _thread_lines(_GEMV)
    fill = lines.index("for (int tk = 0; tk < 128; ++tk) {")
    assert lines[fill + 3] == "}"  # two stores, then the loop's end
    assert lines[fill + 4 : fill + 6] == ["__syncthreads();", "for (int tk_1 = 0; tk_1 < 128; ++tk_1) {"]
    assert lines[fill + 7 : fill + 10] == ["}", "__syncthreads();", "}"]  # before the next iteration's stores


@pytest.mark.parametrize(
    "index",
    [
        plus(K, 4, "%"),  # not one element per iteration
        tir.IntImm(0, I32),  # every iteration the same element
        plus(K, 0, "*"),
        plus(K, name("tx")),  # thread 1's k = 0 is thread 0's k = 1
        plus(K, name("n")),  # a name the pass knows nothing of
        plus(K, K, "*"),
    ],
)
def test_stores_that_may_meet_across_iterations_keep_the_barrier(index: tir.Expr) -> None:
    assert stores_then_read(at("S", index)) == [*HEAD, ["Assign", "|"], "Decl"]


def test_stores_apart_only_with_the_same_index_in_one_dimension() -> None:
    ends_with_barrier = [*HEAD, ["Assign", "|", "Assign", "|"], "Decl"]
    assert stores_then_read(at("S", K), at("S", plus(K, 1))) == ends_with_barrier  # iteration k's 2nd is k + 1's 1st
    assert stores_then_read(at("S", K), at("S", plus(K, 2, "*"))) == ends_with_barrier
    assert stores_then_read(at("S2", K, name("bx")), at("S2", name("bx"), K)) == ends_with_barrier
    # the first dimension is k in both (the read after the loop is of S: no barrier)
    assert stores_then_read(at("S2", K, tir.IntImm(0, I32)), at("S2", K, name("tx"))) == [
        *HEAD,
        ["Assign", "|", "Assign"],
        "Decl",
    ]


def test_a_store_and_a_read_of_the_array_in_the_body_keep_the_barrier() -> None:
    """A read of S[k + 1] meets the next iteration's store; `S[k] = S[k] * 2` by every thread
    reads and stores one element in several threads."""
    read = T.Decl("w", DType.float32, init=sub("S", 0))
    next_one = T.Decl("w", DType.float32, init=at("S", plus(K, 1)))  # type: ignore[arg-type]
    assert stores_then_read(at("S", K), extra=(next_one,)) == [*HEAD, ["Assign", "|", "Decl", "|"], "Decl"]
    assert stores_then_read(at("S", K), extra=(read,)) == [*HEAD, ["Assign", "|", "Decl", "|"], "Decl"]
    double = T.Assign(at("S", K), tir.BinOp("*", at("S", K), tir.FloatImm(2.0, DType.float32), DType.float32))  # type: ignore[arg-type]
    assert shape(placed(view("S"), counted(double))) == ["SharedView", ["Assign", "|"]]
    compound = T.Assign(at("S", K), tir.FloatImm(2.0, DType.float32), "+=")
    assert shape(placed(view("S"), counted(compound))) == ["SharedView", ["Assign", "|"]]


def test_stores_apart_with_a_tile_op_or_a_changing_name_keep_the_barrier() -> None:
    use = op("use", reads="S")
    assert stores_then_read(at("S", K), extra=(use,)) == [*HEAD, ["Assign", "|", "use", "|"], "Decl"]
    j = T.Decl("j", I32, init=plus(K, 1), const=True)  # declared in the body: differs between iterations
    store = T.Assign(at("S", plus(K, name("j"))), tir.FloatImm(1.0, DType.float32))
    assert shape(placed(view("S"), counted(j, store))) == ["SharedView", ["Decl", "Assign", "|"]]
    inner = T.Loop(
        T.Sym("i", I32), tir.IntImm(0, I32), tir.IntImm(4, I32), body=(T.Assign(at("S", plus(K, name("i"))), K),)
    )
    assert stores_then_read(extra=(inner,)) == [*HEAD, [["Assign"], "|"], "Decl"]
    vector = T.Assign(T.VecRef(at("S", plus(K, 4, "*")), 16), T.VecRef(at("G", K), 16))
    assert stores_then_read(extra=(vector,)) == [*HEAD, ["Assign", "|"], "Decl"]


def test_nested_loops_storing_apart() -> None:
    """S2[i][k] over k inside a loop over i: apart in both loops (no barrier in either, the read
    after them gets one); S[k] inside the loop over i: apart over k only, the outer iterations
    overwrite it."""
    i = name("i")
    s2 = T.SharedView("S2", DType.float32, (64, 64), 0)
    outer = T.Loop(
        T.Sym("i", I32), tir.IntImm(0, I32), tir.IntImm(64, I32), body=(counted(T.Assign(at("S2", i, K), K)),)
    )
    zero = tir.IntImm(0, I32)
    assert shape(placed(s2, outer, T.Decl("v", DType.float32, init=at("S2", zero, zero)))) == [  # type: ignore[arg-type]
        "SharedView",
        [["Assign"]],
        "|",
        "Decl",
    ]
    outer = T.Loop(T.Sym("i", I32), tir.IntImm(0, I32), tir.IntImm(64, I32), body=(counted(T.Assign(at("S", K), K)),))
    assert shape(placed(view("S"), outer)) == ["SharedView", [["Assign"], "|"]]


def test_stores_apart_into_views_sharing_bytes_keep_the_barrier() -> None:
    """S and R share bytes (shared_plan): stores into both are one storage's, never apart."""
    shares = T.SharedView("R", DType.float32, (64,), 0)
    body = (T.Assign(at("S", K), K), T.Assign(at("R", K), K))
    assert shape(placed(view("S"), shares, counted(*body))) == [
        "SharedView",
        "SharedView",
        ["Assign", "|", "Assign", "|"],
    ]
    later = T.Decl("v", DType.float32, init=at("R", tir.IntImm(0, I32)))  # type: ignore[arg-type]
    # only S in the loop: apart; the read of R after it meets the pending stores into S's bytes
    assert shape(placed(view("S"), shares, counted(body[0]), later)) == [
        "SharedView",
        "SharedView",
        ["Assign"],
        "|",
        "Decl",
    ]


def reduction(name: str) -> T.Scope:
    """A cross-warp reduction's op: registers first, then its own barrier before its scratch."""
    fold = T.Assign(T.Sym("red", DType.float32), tir.FloatImm(0.0, DType.float32))
    return T.Scope(name, (fold, BLOCK), access=T.SharedAccess(scratch=True))


def test_an_op_opening_with_a_barrier_needs_none_before_it() -> None:
    stmts = (op("copy A", writes="A"), reduction("reduce"), op("use A", reads="A"))
    assert shape(placed(*stmts)) == ["copy A", "reduce", "use A"]


def test_an_op_touching_shared_memory_before_its_barrier_gets_one() -> None:
    store = T.Assign(T.Subscript("A", (tir.IntImm(0, I32),), DType.float32), tir.FloatImm(0.0, DType.float32))
    late = T.Scope("late barrier", (store, BLOCK), access=T.SharedAccess(writes=frozenset({"A"})))
    stmts = (T.SharedView("A", DType.float32, (4,), 0), op("use A", reads="A"), late)
    assert shape(placed(*stmts)) == ["SharedView", "use A", "|", "late barrier"]


def test_a_loop_whose_next_iteration_meets_a_barrier_first_needs_none_at_its_end() -> None:
    # MLA decode: P V reads P; the next iteration's reduction meets its barrier before P is written
    body = (op("scores", reads="Q"), reduction("reduce"), op("copy P", writes="P"), op("P V", reads="P"))
    assert shape(placed(loop(*body))) == [["scores", "reduce", "copy P", "|", "P V"]]


def test_a_hazard_before_the_next_barrier_keeps_the_loop_end_barrier() -> None:
    body = (op("copy P", writes="P"), reduction("reduce"), op("P V", reads="P"))
    assert shape(placed(loop(*body))) == [["copy P", "reduce", "P V", "|"]]


def fences(stmts: tuple[T.Stmt, ...]) -> list[object]:
    """`shape`, with proxy fences shown as `fence` and a Scope's own barriers after its name."""
    out: list[object] = []
    for s in stmts:
        match s:
            case T.Barrier(kind="fence_proxy_async"):
                out.append("fence")
            case T.Scope(comment=c, body=body) if any(isinstance(x, T.Barrier) for x in body):
                out.append((c, fences(body)))
            case T.Loop(body=body):
                out.append(fences(body))
            case _:
                out += shape((s,))
    return out


def test_proxy_fences_only_where_the_async_proxy_may_read_what_was_written() -> None:
    # wgmma reads Q and P through the async proxy; the reduction's scratch is never read so
    wgmma = op("wgmma", reads="QP", proxy_reads=True)
    body = (
        op("copy Q", writes="Q"),
        op("scores", reads="Q", proxy_reads=True),
        reduction("reduce"),
        op("copy P", writes="P"),
        op("P V", reads="P", proxy_reads=True),
    )
    views = [T.SharedView(name, DType.float16, (64,), at) for name, at in (("Q", 0), ("P", 128))]
    out = fences(placed(*views, wgmma, loop(*body)))
    # Q's copy is fenced at the barrier before the scores; the reduction's barrier, with nothing
    # written since, is not; P's copy is fenced before P V; the loop needs no barrier at its end
    assert out == [
        "SharedView",
        "SharedView",
        "wgmma",
        "|",
        ["copy Q", "fence", "|", "scores", ("reduce", ["Assign", "|"]), "copy P", "fence", "|", "P V"],
    ]


def test_an_op_opening_with_a_barrier_is_fenced_there_when_it_orders_a_write() -> None:
    views = [T.SharedView(name, DType.float16, (64,), at) for name, at in (("Q", 0), ("P", 128))]
    stmts = (*views, op("copy Q", writes="Q"), reduction("reduce"), op("scores", reads="Q", proxy_reads=True))
    assert fences(placed(*stmts))[2:] == ["copy Q", ("reduce", ["Assign", "fence", "|"]), "scores"]


def test_a_loop_ending_dirty_fences_its_first_barrier() -> None:
    # the copy of P at the end of iteration k is read by iteration k + 1's wgmma, behind its barrier
    views = [T.SharedView("P", DType.float16, (64,), 0)]
    body = (BLOCK, op("P V", reads="P", proxy_reads=True), op("other", reads="Q"), op("copy P", writes="P"))
    assert fences(placed(*views, loop(*body))) == ["SharedView", ["fence", "|", "P V", "other", "|", "copy P"]]


def test_a_loop_condition_reading_what_the_body_stores_keeps_the_end_barrier() -> None:
    # `while (F[0] < 10)` reads F before the next iteration's reduction meets its barrier
    F0 = T.Subscript("F", (tir.IntImm(0, I32),), DType.int32)
    cond = tir.BinOp("<", F0, tir.IntImm(10, I32), DType.bool)
    store = T.Assign(F0, tir.IntImm(1, I32))
    views = (T.SharedView("F", DType.int32, (4,), 0), T.SharedView("X", DType.int32, (4,), 16))
    w = T.While(cond, (reduction("reduce"), op("other", reads="X"), store))
    assert shape(placed(*views, w))[2] == ["reduce", "other", "Assign", "|"]
