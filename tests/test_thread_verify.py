"""The Thread IR verifier (thread_verify.py): a small kernel that verifies, and one
broken copy of it per invariant, each rejected with a message naming the culprit.
(Every example and golden input verifies after every pass: tests/test_pipeline_ir.py.)"""

from __future__ import annotations

import pytest

from tilec import thread_ir as T
from tilec import tir
from tilec.dtypes import DType
from tilec.targets import get_target
from tilec.thread_verify import verify_kernel
from tilec.tir_print import VerifyError

F32, I32 = DType.float32, DType.int32
ZERO, ONE = tir.IntImm(0), tir.IntImm(1)
PARAMS = (T.Param("A", F32, pointer=True), T.Param("N", I32))


def kernel(*body: T.Stmt, smem: int = 0, helpers: tuple[str, ...] = ()) -> T.Kernel:
    return T.Kernel("k", PARAMS, 128, (tir.Var("N", I32, "dim"),), smem, body, {}, helpers)


def verify(*body: T.Stmt, smem: int = 0, helpers: tuple[str, ...] = (), arch: str = "sm_80") -> None:
    verify_kernel(kernel(*body, smem=smem, helpers=helpers), get_target(arch))


def r(*idx: tir.Expr) -> T.Subscript:
    return T.Subscript("r", idx, F32)


R = T.Decl("r", F32, (4,))
X = T.Decl("x", I32)
COUNTER = T.Sym("i", I32)


def test_a_correct_kernel_verifies() -> None:
    tx = T.Decl("tx", I32, init=T.Builtin("thread_index"), const=True)  # type: ignore[arg-type]
    loop = T.Loop(COUNTER, ZERO, tir.IntImm(4), body=(T.Assign(r(tir.Var("i", I32, "loop")), tir.FloatImm(0.0)),))
    load = T.Subscript("r", (ONE,), F32)
    store = T.Assign(T.Subscript("A", (tir.Var("tx", I32, "thread"),), F32), load)  # type: ignore[arg-type]
    view = T.SharedView("S", F32, (8, 4), 0)
    exp2 = T.Assign(r(ZERO), T.Intrin("tilec_exp2", (load,), F32))  # type: ignore[arg-type]
    shadow = T.Scope("inner", (T.Decl("r", F32, (2,)), T.Barrier("block")))
    show = T.Call(T.Intrin("printf", ('"r = %f\\n"', load), I32))  # type: ignore[arg-type]
    verify(tx, R, loop, store, view, exp2, show, shadow, smem=128, helpers=("exp2",))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ((T.Assign(r(ZERO), tir.FloatImm(1.0)),), "'r' used before its declaration"),
        ((R, R), "'r' declared twice in one scope"),
        ((R, T.Assign(r(ZERO, ZERO), tir.FloatImm(1.0))), "2 indices into 'r' \\(declared with 1\\)"),
        ((R, T.Assign(r(tir.IntImm(4)), tir.FloatImm(1.0))), "constant index 4 outside 'r' \\(extent 4\\)"),
        ((T.Assign(T.Subscript("A", (ZERO, ZERO), F32), tir.FloatImm(1.0)),), "2 indices into pointer 'A'"),
        ((T.Decl("c", I32, init=ZERO, const=True), T.Assign(T.Sym("c", I32), ONE)), "assignment to const 'c'"),
        ((T.Assign(T.Sym("N", I32), ONE),), "assignment to const 'N'"),  # a scalar parameter
        ((T.Loop(COUNTER, ZERO, tir.FloatImm(2.5)),), "loop 'i' has a bound of type float32"),
        ((T.Loop(COUNTER, ZERO, ONE, step=0),), "loop 'i' needs an int counter and a positive step"),
        ((X, T.Loop(COUNTER, ZERO, ONE), T.Assign(T.Sym("x", I32), tir.Var("i", I32, "loop"))), "'i' used before"),
        ((T.Scope("copy(A, S)", (R,)), T.Assign(r(ZERO), tir.FloatImm(1.0))), "'r' used before"),
        ((T.Call(T.Intrin("tilec_exp2", (ONE,), F32)),), "defined by helper 'exp2', which the kernel does not list"),
        ((T.Call(T.Intrin("no_such_function", (), I32)),), "unknown intrinsic 'no_such_function'"),
        ((T.Barrier("named"),), "barrier kind 'named' is not spelled for this target"),
        ((T.Barrier("async_wait"),), "barrier 'async_wait' takes 1 arguments, not 0"),
        ((T.SharedView("S", F32, (8, 4), 64),), "shared view 'S' \\(128 bytes at offset 64\\) is outside"),
        ((T.Assign(T.Subscript("*A", (ZERO,), F32), tir.FloatImm(1.0)),), "'\\*A' is not an identifier"),
        ((T.Decl("x", I32, init=tir.Var("threadIdx.x", I32, "thread")),), "'threadIdx.x' is not an identifier"),
        ((T.Call(T.Intrin("printf", ("fmt", ONE), I32)),), "argument fmt of 'printf' is C text, not a string literal"),
    ],
)
def test_a_broken_invariant_is_rejected(body: tuple[T.Stmt, ...], message: str) -> None:
    with pytest.raises(VerifyError, match=message):
        verify(*body, smem=128)


def test_tile_ir_left_in_the_thread_ir_is_rejected() -> None:
    buf = tir.Buffer("acc", (tir.IntImm(4),), F32, "fragment")
    fill = tir.Fill(tir.Region(buf, (ZERO,), (tir.IntImm(4),)), tir.FloatImm(0.0))
    with pytest.raises(VerifyError, match="Tile IR statement Fill left in the Thread IR"):
        verify(fill)  # type: ignore[arg-type]
    with pytest.raises(VerifyError, match="Tile IR load of 'acc' left in the Thread IR"):
        verify(R, T.Assign(r(ZERO), tir.Load(buf, (ZERO,))))


def test_the_message_names_the_lowered_statement() -> None:
    with pytest.raises(VerifyError, match=r"^k: 'q' used before its declaration \(in 'gemm.tile:9: copy\(A, S\)'\)$"):
        verify(T.Scope("gemm.tile:9: copy(A, S)", (T.Assign(T.Sym("q", I32), ZERO),)))


def test_barrier_arguments_follow_the_target_spelling() -> None:
    # sm_90a spells the mbarrier slots: a wait takes the mbarrier and its phase
    bar = T.Decl("bar", DType.uint64, (1,), shared=True)
    mbar = T.Subscript("bar", (ZERO,), DType.uint64)
    verify(bar, T.Barrier("mbarrier_wait", (mbar, ZERO)), T.Barrier("fence_proxy_async"), arch="sm_90a")
    with pytest.raises(VerifyError, match="barrier 'mbarrier_wait' takes 2 arguments, not 1"):
        verify(bar, T.Barrier("mbarrier_wait", (mbar,)), arch="sm_90a")


def test_views_share_bytes_only_between_tiles_never_live_together() -> None:
    early, late = T.Lifetime(0, 3), T.Lifetime(4, 6)
    verify(T.SharedView("S", F32, (8, 4), 0, live=early), T.SharedView("U", F32, (8, 4), 0, live=late), smem=128)
    scratch = T.SharedView("red_buf", F32, (8, 4), 0)  # no lifetime: live throughout
    with pytest.raises(VerifyError, match="shared views 'S' and 'red_buf' share bytes while both are live"):
        verify(T.SharedView("S", F32, (8, 4), 0, live=early), scratch, smem=128)
