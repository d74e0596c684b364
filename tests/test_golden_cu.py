"""Golden `.cu` tests, one directory per target:

    tests/golden/codegen/NAME.tile          the input (shared by every target)
    tests/golden/codegen/sm_80/NAME.cu      its output for --arch sm_80
    tests/golden/codegen/sm_90a/NAME.cu     ... for --arch sm_90a
    tests/golden/codegen/gfx90a/NAME.hip    ... for --arch gfx90a (HIP: the compiler record's suffix)
    tests/golden/codegen/gfx942/NAME.hip    ... for --arch gfx942

Every input has a golden in every target directory (a missing one fails). A case may
start with a comment line giving build options, e.g. `# tilec-args: -D block_M=64`
(as in tests/golden/errors); `--arch X` there pins the case to target X, and it then
has a golden only in X's directory. Regenerate with `pytest --update-golden
tests/test_golden_cu.py` (a new target: create its directory first); review every
diff like code.
"""

from __future__ import annotations

import pathlib
import shlex

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CODEGEN = ROOT / "tests" / "golden" / "codegen"
INPUTS = sorted(CODEGEN.glob("*.tile"))
TARGETS = sorted(d.name for d in CODEGEN.iterdir() if d.is_dir())

# Inputs a target rejects with a diagnostic (tests/test_toolchain_hip.py checks each one's message).
UNSUPPORTED: dict[str, dict[str, str]] = {
    # two 64 KB tiles live at once, packed by lifetime: still over the 64 KB of LDS
    # and CDNA has no 4-bit matrix instruction (no CUDA-core fallback for packed operands)
    # and no atomic add of 16-bit floats (ROCm 5.2's headers)
    "gfx90a": {
        "shared_packed": "shared memory",
        "gemm_int4": "gemm of int4 operands is not supported on gfx90a",
        "atomic_add_pairs": "gfx90a has no atomic add for float16",
    },
    "gfx942": {
        "shared_packed": "shared memory",
        "gemm_int4": "gemm of int4 operands is not supported on gfx942",
        "atomic_add_pairs": "gfx942 has no atomic add for float16",
    },
}


def suffix(target: str) -> str:
    from tilec.targets import get_target

    return get_target(target).compiler.source_suffix


def case_options(text: str) -> tuple[str, dict[str, str]]:
    arch, defines = "sm_80", {}
    first = text.split("\n", 1)[0]
    if first.startswith("# tilec-args:"):
        words = shlex.split(first.removeprefix("# tilec-args:"))
        for flag, value in zip(words[::2], words[1::2], strict=True):
            if flag == "--arch":
                arch = value
            elif flag == "-D":
                name, _, val = value.partition("=")
                defines[name] = val
            else:
                raise ValueError(f"unknown option {flag} in the first line of a golden case")
    return arch, defines


def _pins_target(text: str) -> bool:
    first = text.split("\n", 1)[0]
    return first.startswith("# tilec-args:") and "--arch" in shlex.split(first.removeprefix("# tilec-args:"))


def cases() -> list[tuple[str, pathlib.Path]]:
    """(target, input) for every target directory and every input not pinned to another target."""
    out = []
    for path in INPUTS:
        text = path.read_text()
        arch, _ = case_options(text)
        out += [
            (target, path)
            for target in TARGETS
            if (not _pins_target(text) or target == arch) and path.stem not in UNSUPPORTED.get(target, {})
        ]
    return out


@pytest.mark.parametrize(("target", "case"), cases(), ids=lambda x: x if isinstance(x, str) else x.stem)
def test_codegen_golden(target: str, case: pathlib.Path, golden, monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.driver import compile_file

    monkeypatch.chdir(ROOT)
    _, defines = case_options(case.read_text())
    actual = compile_file(str(case.relative_to(ROOT)), defines, target)
    golden.check(CODEGEN / target / case.with_suffix(suffix(target)).name, actual)


@pytest.mark.parametrize(
    ("target", "stem"), [(t, stem) for t, cases in UNSUPPORTED.items() for stem in cases], ids="-".join
)
def test_unsupported_cases_are_diagnostics(target: str, stem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each input a target goes without is refused with the message UNSUPPORTED gives."""
    from tilec.diagnostics import CompileError
    from tilec.driver import compile_file

    monkeypatch.chdir(ROOT)
    with pytest.raises(CompileError, match=UNSUPPORTED[target][stem]):
        compile_file(f"tests/golden/codegen/{stem}.tile", {}, target)


def test_every_target_has_a_directory() -> None:
    assert TARGETS == ["gfx90a", "gfx942", "sm_80", "sm_90a"]
    goldens = [p for target in TARGETS for p in (CODEGEN / target).glob(f"*{suffix(target)}")]
    stray = [str(p.relative_to(CODEGEN)) for p in goldens if not (CODEGEN / f"{p.stem}.tile").exists()]
    assert stray == [], f"goldens without an input in {CODEGEN}"


def test_case_options() -> None:
    assert case_options("kernel\n") == ("sm_80", {})
    assert case_options("# tilec-args: --arch sm_90a -D a=1 -D b=x\n") == ("sm_90a", {"a": "1", "b": "x"})


def test_the_launcher_refuses_tensors_past_32_bit_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """One test per set of symbolic factors, with the largest constant beside them; a tensor that is
    one symbolic dimension needs none (an int argument cannot pass 2^31 - 1); a grid extent
    `(N + c) / t` needs N <= 2^31 - 1 - c (its sum and the last block's indices), unless N's own
    count test has a constant factor; all before the grid is computed."""
    from tilec import driver
    from tilec.elaborate import elaborate_file

    monkeypatch.chdir(ROOT)
    mla = driver.compile_program_text(driver.elaborate("examples/mla_decode.tile"), formatted=False)
    assert (
        "if (1LL * B * H * 2048LL > 2147483647LL || 1LL * B * S * 512LL > 2147483647LL || H > 2147483616) "
        "return (int)cudaErrorInvalidValue;" in mla
    )
    add = driver.compile_file("examples/elementwise_add.tile")
    assert "2147483647" not in add  # N is an int: no count test
    refusal, grid = add.index("if (N > 2147481600)"), add.index("const dim3 grid((N + 2047) / 2048")
    assert refusal < grid  # (N + 2047) is computed only once it cannot wrap
    text = (  # a 1-D tensor whose one dimension is an expression: M * 4 may pass an int
        "kernel wide(B: Tensor((M, 8), float16), A: Tensor((M * 4,), float16)):\n"
        "    with Kernel(ceildiv(M, 128), threads=128) as bx:\n"
        "        a = alloc_fragment((128,), float16)\n"
        "        copy(A[bx * 128], a)\n"
        "        copy(a, A[bx * 128])\n"
    )
    wide = driver.compile_program_text(elaborate_file("wide.tile", text=text), formatted=False)
    assert "1LL * (static_cast<long long>(M) * 4) > 2147483647LL" in wide  # widened before it is evaluated
