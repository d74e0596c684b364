"""Compile-work budgets (tilec/budget.py) and the front-end checks for what nvcc would reject:
each limit gives one located diagnostic, promptly, and the hang cases of issue 13 (tile sizes
from 1000 to 2**31 given to the examples by -D) finish within the time budget."""

from __future__ import annotations

import pathlib
import re
import time

import pytest

import cpu_speed
from tilec import budget, driver, tir, tir_walk
from tilec.budget import registers
from tilec.diagnostics import CompileError, Diagnostic
from tilec.dtypes import DTYPES
from tilec.elaborate import elaborate_file
from tilec.targets import get_target

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.tile"))


def errors(text: str, defines: dict[str, str] | None = None) -> list[Diagnostic]:
    with pytest.raises(CompileError) as info:
        elaborate_file("t.tile", defines or {}, text=text)
    return info.value.diagnostics


def kernel(body: str, params: str = "A: Tensor((M, N), float32)", threads: int = 128, pre: str = "") -> str:
    lines = "".join(f"        {line}\n" for line in body.strip("\n").split("\n"))
    return f"{pre}kernel k({params}):\n    with Kernel(1, threads={threads}) as bx:\n{lines}"


# ---------------------------------------------------------------- registers per thread


def test_register_limit_is_four_register_files() -> None:
    assert budget.register_limit(get_target("sm_90a").max_registers) == 1020


def test_fragment_at_the_limit_is_accepted_one_more_is_not() -> None:
    elaborate_file("t.tile", text=kernel("x = alloc_fragment((128, 1020), float32)"))
    (d,) = errors(kernel("x = alloc_fragment((128, 1021), float32)"))
    assert (d.span.line, d.span.column) == (3, 9)
    assert d.message.startswith("fragment 'x' (128x1021 float32) needs 1021 registers per thread (spread over 128")
    assert d.hint is not None and "255 registers" in d.hint


def test_narrow_types_pack_into_registers() -> None:
    elaborate_file("t.tile", text=kernel("x = alloc_fragment((128, 4080), int8)"))  # 1020 registers
    elaborate_file("t.tile", text=kernel("x = alloc_local((2040,), float16)"))


def test_local_arrays_count_per_thread() -> None:
    (d,) = errors(kernel("x = alloc_local((1021,), float32)", threads=1024))
    assert d.message.startswith("local array 'x' (1021 float32) needs 1021 registers per thread (in each thread)")


def test_kernel_total_lists_the_largest_allocations() -> None:
    body = "\n".join(
        ["a = alloc_fragment((128, 600), float32)", "b = alloc_local((300,), float32)"]
        + ["c = alloc_fragment((128, 200), float32)"]
    )
    (d,) = errors(kernel(body))
    assert d.message.startswith("kernel 'k' needs 1100 registers per thread for its fragments and local arrays")
    assert [(n.span.line, n.message) for n in d.notes] == [
        (3, "'a' needs 600 registers per thread"),
        (4, "'b' needs 300 registers per thread"),
        (5, "'c' needs 200 registers per thread"),
    ]


def test_an_oversized_fragment_poisons_its_uses() -> None:
    (d,) = errors(kernel("x = alloc_fragment((1 << 30, 64), float32)\nclear(x)\ncopy(A[0, 0], x)"))
    assert "registers per thread" in d.message


# ---------------------------------------------------------------- statements and nesting


def test_statement_budget_stops_exponential_macros() -> None:
    macros = "macro m0(x):\n    fill(x, 1.0)\n" + "".join(
        f"macro m{i}(x):\n    m{i - 1}(x)\n    m{i - 1}(x)\n" for i in range(1, 16)
    )
    start = time.process_time()
    (d,) = errors(kernel("x = alloc_fragment((128,), float32)\nm15(x)", pre=macros))
    assert time.process_time() - start < 2.0 * cpu_speed.scale()
    assert d.message == f"kernel 'k' has more than {budget.MAX_STATEMENTS} statements once its macros are inlined"
    assert len(d.notes) == 15 and d.notes[-1].message == "in macro 'm15' called here"


def test_statements_up_to_the_budget_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tilec.elaborate.MAX_STATEMENTS", 100)
    body = "x = alloc_fragment((128,), float32)\n" + "\n".join(["fill(x, 1.0)"] * 98)
    elaborate_file("t.tile", text=kernel(body))  # the Kernel block, the alloc and 98 fills
    (d,) = errors(kernel(body + "\nfill(x, 2.0)"))
    assert d.message == "kernel 'k' has more than 100 statements once its macros are inlined"
    assert d.span.text == "fill(x, 2.0)"


def test_macro_nesting_limit() -> None:
    macros = "macro m0(x):\n    fill(x, 1.0)\n" + "".join(f"macro m{i}(x):\n    m{i - 1}(x)\n" for i in range(1, 18))
    elaborate_file("t.tile", text=kernel("x = alloc_fragment((128,), float32)\nm15(x)", pre=macros))
    (d,) = errors(kernel("x = alloc_fragment((128,), float32)\nm16(x)", pre=macros))
    assert d.message == f"macro calls nested more than {budget.MAX_MACRO_NESTING} deep"


def loops(depth: int) -> str:
    return "".join(" " * i + f"for i{i} in serial(2):\n" for i in range(depth)) + " " * depth + "x = x + 1.0"


def test_block_nesting_is_checked_when_parsing() -> None:
    elaborate_file("t.tile", text=kernel("x = alloc_var(float32)\n" + loops(budget.MAX_BLOCK_NESTING - 2)))
    (d,) = errors(kernel("x = alloc_var(float32)\n" + loops(budget.MAX_BLOCK_NESTING - 1)))
    assert d.message == f"block nested too deeply: 33 levels, tilec allows {budget.MAX_BLOCK_NESTING}"


def test_elif_chains_count_as_nesting() -> None:
    chain = "if bx == 0:\n    x = 1.0\n" + "".join(f"elif bx == {i}:\n    x = 2.0\n" for i in range(1, 40))
    (d,) = errors(kernel("x = alloc_var(float32)\n" + chain))
    assert d.message.startswith("block nested too deeply") and d.span.text.startswith("elif bx == 30")


def test_block_nesting_through_macros_is_checked_when_inlining() -> None:
    macros = "macro m0(x):\n    x = 1.0\n" + "".join(
        f"macro m{i}(x):\n    for j in serial(2):\n        for k in serial(2):\n            m{i - 1}(x)\n"
        for i in range(1, 12)
    )
    (d,) = errors(kernel("x = alloc_var(float32)\nm11(x)", pre=macros))
    assert d.message == f"blocks nested more than {budget.MAX_BLOCK_NESTING} deep once macros are inlined"


@pytest.mark.parametrize(
    "shape",
    [
        lambda d: " + ".join(["x[i]"] * d),
        lambda d: "(x[i] * " * d + "x[i]" + ")" * d,
        lambda d: "-" * d + "x[i]",
        lambda d: "max(x[i], " * d + "x[i]" + ")" * d,
        lambda d: "x[i] if " + " and ".join(["x[i] < 1.0"] * d) + " else 0.0",
    ],
    ids=["sum", "parens", "unary", "calls", "and"],
)
def test_expression_nesting_compiles_up_to_the_limit_and_is_located_beyond(shape) -> None:
    def program(depth: int) -> str:
        body = f"x = alloc_fragment((128,), float32)\nfor i in Parallel(128):\n    x[i] = {shape(depth)}"
        return kernel(body + "\ncopy(x, A[0, 0])")

    fits = next(d for d in range(budget.MAX_EXPR_NESTING, 0, -1) if _depth_ok(program(d)))
    assert fits >= budget.MAX_EXPR_NESTING - 3  # the deepest accepted compiles all the way
    driver.compile_program_text(elaborate_file("t.tile", text=program(fits)), formatted=False)
    (d,) = errors(program(budget.MAX_EXPR_NESTING + 50))
    assert d.message.startswith("expression nested too deeply") and d.span.line == 5


def _depth_ok(text: str) -> bool:
    try:
        elaborate_file("t.tile", text=text)
        return True
    except CompileError as e:
        assert all(d.message.startswith("expression nested too deeply") for d in e.diagnostics)
        return False


def lets_before_the_block(lets: list[str], grid: str) -> str:
    head = "kernel k(A: Tensor((N,), float32)):\n" + "".join(f"    {line}\n" for line in lets)
    return head + f"    with Kernel({grid}, threads=128) as bx:\n        pass\n"


def test_substituted_names_cannot_double_without_end() -> None:
    lets = ["a0 = N + 1"] + [f"a{i} = a{i - 1} * a{i - 1}" for i in range(1, 26)]
    start = time.process_time()
    (d,) = errors(lets_before_the_block(lets, "a25"))
    assert time.process_time() - start < 2.0 * cpu_speed.scale()
    assert d.span.text == "a12 = a11 * a11"  # 2**14 - 1 terms: the first over the budget
    assert d.message.startswith("'a12' stands for an expression of 16383 terms, 14 levels deep")


def test_substituted_names_cannot_nest_without_end() -> None:
    lets = ["a0 = N + 1"] + [f"a{i} = a{i - 1} + 1" for i in range(1, 120)]
    (d,) = errors(lets_before_the_block(lets, "a119"))
    assert d.span.text == "a99 = a98 + 1" and "101 levels deep" in d.message


def test_macro_arguments_cannot_double_without_end() -> None:
    macros = "macro m0(x, v):\n    for i in Parallel(128):\n        x[i] = v\n" + "".join(
        f"macro m{i}(x, v):\n    m{i - 1}(x, v * v)\n" for i in range(1, 16)
    )
    body = "x = alloc_fragment((128,), float32)\nm15(x, s + 1.0)"
    start = time.process_time()
    (d,) = errors(kernel(body, params="A: Tensor((128,), float32), s: float32", pre=macros))
    assert time.process_time() - start < 2.0 * cpu_speed.scale()
    assert d.span.text == "v * v" and d.message.startswith("'v' stands for an expression of 16383 terms")


def test_substituted_names_within_the_budget_compile() -> None:
    lets = ["a0 = N + 1"] + [f"a{i} = a{i - 1} * a{i - 1}" for i in range(1, 10)]
    program = elaborate_file("t.tile", text=lets_before_the_block(lets, "a9"))
    assert "N + 1" in driver.compile_program_text(program, formatted=False)  # substituted into the grid


# ---------------------------------------------------------------- int32 dimensions


def test_tensor_dimensions_are_int32() -> None:
    (d,) = errors("kernel k(A: Tensor((4294967296,), float32)):\n    with Kernel(1, threads=32) as bx:\n        pass\n")
    assert d.message == "a tensor dimension must be at most 2147483647 (dimensions are int32), not 4294967296"
    (d,) = errors(
        "kernel k(A: Tensor((N,), float32)):\n    with Kernel(1, threads=32) as bx:\n        pass\n",
        {"N": "2147483648"},
    )
    assert d.message == "-D N=2147483648: a dimension must be at most 2147483647 (dimensions are int32)"


# ---------------------------------------------------------------- what nvcc would reject


# (sub-byte types cannot be fragments at all: tests/test_subbyte.py)
@pytest.mark.parametrize(
    "dtype",
    sorted(d for d in DTYPES if DTYPES[d] not in get_target("sm_80").missing_types and not DTYPES[d].is_subbyte),
)
def test_atomic_add_only_on_types_with_a_hardware_atomic(dtype: str) -> None:
    text = kernel(
        f"c = alloc_fragment((64, 64), {dtype})\nclear(c)\natomic_add(C[0, 0], c)\natomic_add(C[1, 1], c[0, 0])",
        params=f"C: Tensor((M, N), {dtype})",
    )
    if DTYPES[dtype] in get_target("sm_80").atomic_add_types:
        elaborate_file("t.tile", text=text)
        return
    diags = errors(text)
    assert [d.message for d in diags] == [f"atomic_add() into 'C' ({dtype}): sm_80 has no atomic add for {dtype}"] * 2


@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_fp8_gemm_accumulator_is_an_error(dtype: str) -> None:
    body = "\n".join(
        ["A_s = alloc_shared((64, 32), float16)", "B_s = alloc_shared((32, 64), float16)"]
        + [f"C_l = alloc_fragment((64, 64), {dtype})", "gemm(A_s, B_s, C_l)"]
    )
    (d,) = errors(kernel(body))
    assert d.message.startswith(f"gemm() accumulator 'C_l' is {dtype}") and d.span.text == "C_l"


# ---------------------------------------------------------------- the hang cases of issue 13


def block_params(path: pathlib.Path) -> list[str]:
    return re.findall(r"^param (block_\w+)", path.read_text(), re.M)


HANG_CASES = [
    (path, name, value) for path in EXAMPLES for name in block_params(path) for value in (1000, 65536, 2**31 - 1)
]


@pytest.mark.parametrize(("path", "name", "value"), HANG_CASES, ids=[f"{p.stem}-{n}={v}" for p, n, v in HANG_CASES])
def test_huge_tiles_finish_promptly(path: pathlib.Path, name: str, value: int) -> None:
    start = time.process_time()
    try:
        driver.compile_program_text(driver.elaborate(str(path), {name: str(value)}), formatted=False)
    except CompileError:
        pass
    assert time.process_time() - start < 2.0 * cpu_speed.scale()


def test_register_estimate_counts_tiles_that_are_never_live_together_once() -> None:
    """Attention's scores (float32) die at the cast to the probabilities (float16) that P V reads:
    the estimate is the most live at one statement, not the sum of every fragment."""
    from tilec.budget import register_estimate
    from tilec.pipeline import run_passes, tile_ir_passes

    path = str(ROOT / "bench" / "programs" / "tune" / "attention.tile")
    defines = {"block_M": "128", "block_N": "64", "num_stages": "2", "threads": "128"}
    (unit,) = run_passes(driver.elaborate(path, defines, "sm_90a"), "sm_90a", tile_ir_passes(), widen=False)
    est = register_estimate(unit.kernel, unit.layouts, unit.target)
    frags = {a.buffer.name: a.buffer for a in tir_walk.stmts(unit.kernel.body) if isinstance(a, tir.Alloc)}
    every = sum(registers(unit.layouts.buffers[b].local_size, b.dtype) for b in frags.values() if b.scope == "fragment")
    assert every == 64 + 32 + 128 + 5 * 4  # acc_s, acc_s_cast, acc_o, five row statistics
    assert est.fragments < every and est.total <= 255  # ptxas: 255 registers, 28 bytes spilled
    wide = dict(defines, block_N="128")  # scores of 128 columns: 340 live at the cast, far over
    (unit,) = run_passes(driver.elaborate(path, wide, "sm_90a"), "sm_90a", tile_ir_passes(), widen=False)
    assert register_estimate(unit.kernel, unit.layouts, unit.target).total > 300
