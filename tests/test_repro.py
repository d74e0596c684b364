"""The reproducers of issue 13, one test each: tests/repro/NN-*.tile (copies of the issue's
files, whose headers give the command, what was observed and what is expected).

A diagnostic that is expected is compared with tests/repro/NN-*.err (pytest --update-golden
rewrites them); a reproducer that should compile is compiled. Repro 13 (5,000 one-line
statements, superlinear) is checked through its two causes, each on a generated body.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time

import pytest

import cpu_speed
from tilec import cli, driver
from tilec.diagnostics import CompileError, render_all
from tilec.elaborate import _KernelState, elaborate_file
from tilec.lower.context import Names
from tilec.targets import CUDA_SPELLING

ROOT = pathlib.Path(__file__).resolve().parent.parent
REPRO = ROOT / "tests" / "repro"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def repro(name: str) -> pathlib.Path:
    (path,) = REPRO.glob(f"{name}-*.tile")
    return path


def diagnostics(path: pathlib.Path, defines: dict[str, str] | None = None) -> str:
    """What `tilec check` prints for `path`, as a user at the repository root sees it."""
    with pytest.raises(CompileError) as info:
        elaborate_file(path.relative_to(ROOT).as_posix(), defines or {})
    return render_all(info.value.diagnostics)


def run(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(args))
    return int(exit_info.value.code or 0)


@pytest.fixture(autouse=True)
def at_root(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TILEC_CACHE", str(tmp_path / "cache"))


# ---------------------------------------------------------------- diagnostics with goldens


@pytest.mark.parametrize(
    ("name", "defines", "golden_name"),
    [
        ("02", {}, None),  # 500-term sum: located "nested too deeply", no RecursionError
        ("04", {}, None),  # 65536x64 fragment: a prompt error, not a hang in lowering
        ("05", {}, None),  # byte 0xff: file:line:col of the bad byte
        ("07", {"threads": "1e400"}, "threads"),  # only the -D error, no "has no Kernel block"
        ("07", {"block": "99999999999999999999"}, "block"),  # blames the -D value, not the default
        ("09", {"block_M": "1073741824"}, None),  # float f[536870912] per thread: an error
        ("10", {}, None),  # fp8 gemm accumulator: tilec's error, not nvcc's
        ("11", {}, None),  # atomic_add on int8: tilec's error, not nvcc's
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_expected_diagnostic(name: str, defines: dict[str, str], golden_name: str | None, golden) -> None:
    path = repro(name)
    start = time.process_time()
    text = diagnostics(path, defines)
    assert time.process_time() - start < 2.0 * cpu_speed.scale()
    assert "Traceback" not in text and "internal" not in text
    assert text.count("error:") == 1
    golden.check(path.with_suffix(f".{golden_name}.err" if golden_name else ".err"), text)


def test_02_nesting_error_points_at_the_sum() -> None:
    text = diagnostics(repro("02"))
    assert text.startswith("tests/repro/02-deep-expression-recursion.tile:5:11: error: expression nested too deeply")


def test_05_bad_byte_located_in_an_imported_file_too(tmp_path: pathlib.Path) -> None:
    (tmp_path / "latin1.tile").write_bytes(b"param a = 1\n# caf\xe9\n")
    (tmp_path / "main.tile").write_text('import "latin1.tile"\n')
    with pytest.raises(CompileError) as info:
        elaborate_file(str(tmp_path / "main.tile"))
    (d,) = info.value.diagnostics
    assert (d.span.file.path, d.span.line, d.span.column) == (str(tmp_path / "latin1.tile"), 2, 6)
    assert d.message == "the file is not valid UTF-8: byte 0xe9 (invalid continuation byte)"
    assert [n.message for n in d.notes] == ["imported here"]


def test_05_utf16_file_gets_its_own_hint(tmp_path: pathlib.Path) -> None:
    (tmp_path / "u16.tile").write_bytes("param a = 1\n".encode("utf-16"))
    with pytest.raises(CompileError) as info:
        elaborate_file(str(tmp_path / "u16.tile"))
    (d,) = info.value.diagnostics
    assert (d.span.line, d.span.column) == (1, 1) and d.hint is not None and "UTF-16" in d.hint


# ---------------------------------------------------------------- programs that now compile


def test_01_define_fixes_a_symbolic_dimension() -> None:
    (k,) = elaborate_file(repro("01").relative_to(ROOT).as_posix(), {"N": "4096"}).kernels
    assert k.dims == () and k.tensors[0].const_shape == (4096,)
    assert [str(getattr(g, "value", g)) for g in k.grid] == ["32"]  # ceildiv(4096, 128), folded


def test_01_gemm_with_a_fixed_dimension() -> None:
    text = driver.compile_file("examples/gemm.tile", {"M": "4096"})
    assert '"shape": [4096, "K"]' in text and '"dims": ["K", "N"]' in text


def test_06_import_through_a_symlinked_directory(tmp_path: pathlib.Path) -> None:
    shutil.copytree(REPRO / "06-import-symlink", tmp_path / "p")
    os.symlink("sub", tmp_path / "p" / "sub_link")
    program = elaborate_file(str(tmp_path / "p" / "main.tile"))
    assert program.files == (str(tmp_path / "p" / "main.tile"), str(tmp_path / "p" / "sub" / "common.tile"))


def test_12_fp8_let_is_converted_explicitly() -> None:
    text = driver.compile_file(repro("12").relative_to(ROOT).as_posix())
    assert "const __nv_fp8_e4m3 t = static_cast<__nv_fp8_e4m3>(static_cast<float>(s) * 2.0f);" in text


@pytest.mark.toolchain
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_12_output_compiles_with_nvcc(tmp_path: pathlib.Path) -> None:
    cu = tmp_path / "o.cu"
    cu.write_text(driver.compile_file(repro("12").relative_to(ROOT).as_posix()))
    cmd = [NVCC, "-ptx", "-std=c++17", "-arch=sm_80", str(cu), "-o", os.devnull]  # the C++ front end is enough
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- output paths (03, 08)


def test_03_output_under_a_regular_file(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "out.cu"
    assert run("build", str(repro("03")), "-o", str(out)) == 1
    err = capsys.readouterr().err
    assert err == f"error: {out}: Not a directory\n"


def test_03_output_onto_a_directory(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("build", str(repro("03")), "-o", str(tmp_path)) == 1
    assert capsys.readouterr().err == f"error: {tmp_path}: Is a directory\n"
    assert tmp_path.is_dir()


def test_08_output_into_a_missing_directory(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "no" / "such" / "dir" / "out.cu"
    assert run("build", str(repro("08")), "-o", str(out)) == 1
    err = capsys.readouterr().err
    assert err == f"error: {out}: no such directory '{out.parent}' (create it first)\n"
    assert not (tmp_path / "no").exists()


def test_08_nothing_written_when_one_output_cannot_be(tmp_path: pathlib.Path) -> None:
    out, header = tmp_path / "k.cu", tmp_path / "missing" / "k.h"
    assert run("build", str(repro("08")), "-o", str(out), "--header", str(header)) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name != "cache"] == []


def test_08_unwritable_output_names_the_output_not_the_temporary(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied", str(tmp_path / ".k.cu.x1y2.tmp"))

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    with pytest.raises(PermissionError) as info:
        driver.write_atomic(str(tmp_path / "k.cu"), "text")
    assert info.value.filename == str(tmp_path / "k.cu")


def test_08_empty_output_path_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("build", str(repro("08")), "-o", "") == 1
    assert "-o needs a path, not an empty string" in capsys.readouterr().err


def test_out_dir_is_created(tmp_path: pathlib.Path) -> None:
    gen = tmp_path / "gen" / "sub"
    assert run("build", str(repro("08")), "--out-dir", str(gen)) == 0
    assert (gen / "08-output-dir-created.cu").is_file()


# ---------------------------------------------------------------- 13: linear in the body's length


def long_body(statements: int) -> str:
    """Repro 13's kernel with `statements` one-line statements."""
    lines = ["kernel k(A: Tensor((1024,), float32)):", "    with Kernel(1, threads=128) as bx:"]
    lines += ["        x = alloc_fragment((128,), float32)"] + [f"        fill(x, {i})" for i in range(statements)]
    return "\n".join(lines) + "\n"


def compile_seconds(statements: int) -> float:
    """CPU seconds of elaborate + codegen (no clang-format) of a long body."""
    start = time.process_time()
    program = elaborate_file("long.tile", text=long_body(statements))
    driver.compile_program_text(program, formatted=False)
    return time.process_time() - start


def test_13_compile_time_is_linear_in_statements() -> None:
    compile_seconds(50)  # warm: parser tables, imports
    small, large = compile_seconds(250), compile_seconds(2000)
    assert large < 16 * small, f"8x the statements took {large / small:.1f}x the time"


def test_13_fresh_names_are_linear() -> None:
    start = time.process_time()
    names, state = Names(CUDA_SPELLING.reserved), _KernelState("k")
    given = [names.fresh("x") for _ in range(20_000)] + [state.fresh("x") for _ in range(20_000)]
    assert time.process_time() - start < 1.0 * cpu_speed.scale()
    assert given[:3] == ["x", "x_1", "x_2"] and given[20_000:20_003] == ["x", "x_1", "x_2"]
    assert len(set(given[:20_000])) == 20_000


def test_13_fresh_names_skip_names_taken_by_another_base() -> None:
    names = Names(CUDA_SPELLING.reserved)  # grid: a name the CUDA launcher declares
    assert [names.fresh(n) for n in ("x", "x_1", "x", "x", "grid")] == ["x", "x_1", "x_2", "x_3", "grid_"]


def format_seconds(statements: int) -> float:
    """CPU seconds clang-format spends on one function of `statements` blocks."""
    body = "".join(f"// k.tile:{i}: fill(x, {i})\n{{\nx[0] = {i}.0f;\n}}\n" for i in range(statements))
    before = os.times()
    driver.format_texts([f"void f(float* x) {{\n{body}}}\n"])
    after = os.times()
    return after.children_user + after.children_system - before.children_user - before.children_system


@pytest.mark.toolchain  # clang-format on a 16,000-statement function
def test_13_clang_format_is_linear_in_function_length() -> None:
    """AllowShortFunctionsOnASingleLine: Inline made clang-format quadratic in a function's length."""
    small, large = format_seconds(2_000), format_seconds(16_000)
    assert large < 16 * max(small, 0.01), f"8x the statements took {large / max(small, 0.01):.1f}x the time"
