"""Lowering is functions over one explicit context per kernel (lower/context.py): its inputs
cannot be replaced while a kernel is lowered, its state starts empty, and a fresh context
lowers a kernel to the same Thread IR every time (nothing is left over between kernels)."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from tilec import thread_ir as T
from tilec.backends.cuda import sm80
from tilec.elaborate import elaborate_file
from tilec.emit import thread_text
from tilec.lower import lower_kernel
from tilec.lower.context import new_context
from tilec.passes.infer_layouts import infer_layouts
from tilec.passes.plan_pipeline import plan_pipeline
from tilec.passes.select import select
from tilec.targets import get_target

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _gemm():
    target = get_target("sm_80")
    (kernel,) = select(elaborate_file(str(ROOT / "examples" / "gemm.tile"), {}), target).kernels
    kernel, layouts = infer_layouts(kernel, target)
    return plan_pipeline(kernel, target), layouts, target


def test_context_inputs_are_frozen_and_its_state_starts_empty() -> None:
    kernel, layouts, target = _gemm()
    ctx = new_context(kernel, layouts, target)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.kernel = kernel  # the point: inputs cannot be reassigned
    assert ctx.backend is sm80  # the module Target.backend names
    assert [ctx.name(t) for t in kernel.tensors] == ["A", "B", "C"]  # parameters are named first
    assert ctx.tx.name == "tx" and ctx.state.bounds == {ctx.tx: kernel.threads - 1}
    state = ctx.state
    assert not (state.views or state.flags or state.prologue or state.written or state.helpers)
    assert state.red_buf is None and state.swizzle is None and not state.async_copy


def test_each_kernel_is_lowered_from_a_fresh_context() -> None:
    kernel, layouts, target = _gemm()
    first = lower_kernel(kernel, layouts, target)
    second = lower_kernel(kernel, layouts, target)
    module = lambda k: T.Module((k,), k.helpers, target.headers, "gemm.tile")  # noqa: E731
    assert thread_text(module(first)) == thread_text(module(second))
    assert first.dynamic_smem == second.dynamic_smem > 0  # where the last shared view ends
    assert "cp_async" in first.helpers
