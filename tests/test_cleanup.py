"""lower/cleanup.py: `const` scalars nothing reads are dropped; whatever any statement reads stays."""

from __future__ import annotations

from tilec import thread_ir as T
from tilec import tir
from tilec.dtypes import DType
from tilec.lower.cleanup import drop_unused

I32 = DType.int32


def _const(name: str, value: int) -> T.Decl:
    return T.Decl(name, I32, init=tir.IntImm(value, I32), const=True)


def test_an_unread_constant_is_dropped() -> None:
    used = T.Assign(T.Subscript("out", (tir.IntImm(0, I32),), I32), tir.Var("a", I32, "thread"))
    assert drop_unused([_const("a", 1), _const("b", 2), used]) == [_const("a", 1), used]


def test_a_constant_only_a_barrier_reads_stays() -> None:
    bar = T.Subscript("bars", (tir.IntImm(0, I32),), DType.uint64)
    wait = T.Barrier("mbarrier_wait", (bar, tir.Var("phase", I32, "thread")))
    assert drop_unused([_const("phase", 0), wait]) == [_const("phase", 0), wait]


def test_constants_read_inside_loops_branches_and_scopes_stay() -> None:
    def read(name: str) -> T.Stmt:
        return T.Call(T.Intrin("use", (tir.Var(name, I32, "thread"),), I32))

    loop = T.Loop(T.Sym("i", I32), tir.IntImm(0, I32), tir.Var("n", I32, "thread"), body=(read("a"),))
    branch = T.IfThen(tir.Var("c", DType.bool, "thread"), (read("b"),), (T.Scope("op", (read("d"),)),))
    names = ["n", "a", "c", "b", "d", "e"]
    out = drop_unused([*(_const(x, 0) for x in names), loop, branch])
    assert [s.name for s in out if isinstance(s, T.Decl)] == names[:-1]
