"""The `tilec` command line: exit codes, atomic outputs, depfiles, headers, --check, the cache.

Most tests run the CLI in-process with the compiler stages replaced by stubs
(so they hold whatever state the front end and code generator are in); the
ones marked `needs_compiler` run the real thing.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import tilec
from tilec import cli, driver
from tilec.diagnostics import CompileError, Diagnostic, warning
from tilec.pipeline import Output
from tilec.source import SourceFile, Span

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCALE_CU = (ROOT / "tests" / "data" / "scale.cu").read_text()
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"), reason="nvcc not found"
)


def run(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(args))
    return int(exit_info.value.code or 0)


@pytest.fixture(autouse=True)
def private_cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.setenv("TILEC_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TILEC_NO_CACHE", raising=False)
    return tmp_path / "cache"


class FakeProgram:
    def __init__(self, files: tuple[str, ...]):
        self.files = files


@pytest.fixture
def stub_compiler(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Replace elaborate/codegen: the output is SCALE_CU plus the source text;
    a source containing `error` is a user error, `crash` an internal error, `slow` a warning."""
    calls = {"elaborate": 0, "imports": {}}

    def elaborate(path, defines=None, arch="sm_80"):
        calls["elaborate"] += 1
        text = pathlib.Path(path).read_text()
        if "error" in text:
            source = SourceFile(path, text)
            raise CompileError([Diagnostic(Span(source, 0, 5), "bad kernel", hint="write a good one")])
        if "crash" in text:
            raise ZeroDivisionError("boom")
        return FakeProgram((path, *calls["imports"].get(path, ())))

    def compile_program_output(program, arch="sm_80", emit="cuda", formatted=True, after=None, bounds=False):
        body = pathlib.Path(program.files[0]).read_text()
        extra = "".join(pathlib.Path(f).read_text() for f in program.files[1:])
        stop = f" after {after}" if after else ""
        text = SCALE_CU + f"// {arch} {emit}{stop}\n// {body.strip()} {extra.strip()}\n"
        warns = (
            (warning(Span(SourceFile(program.files[0], body), 0, 6), "simt-gemm", "slow"),) if "slow" in body else ()
        )
        return Output(text, warns)

    monkeypatch.setattr(driver, "elaborate", elaborate)
    monkeypatch.setattr(driver, "compile_program_output", compile_program_output)
    monkeypatch.setattr(driver, "format_texts", list)
    return calls


@pytest.fixture
def kernel(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "k.tile"
    path.write_text("kernel fine\n")
    return path


# ---------------------------------------------------------------- exit codes


@pytest.mark.toolchain
def test_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "tilec", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout == f"tilec {tilec.__version__}\n"


def test_cmake_dir(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--cmake-dir") == 0
    path = pathlib.Path(capsys.readouterr().out.strip())
    assert (path / "TilecConfig.cmake").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("build",), "Missing argument"),
        (("build", "k.tile", "-D", "foo"), "'foo' is not NAME=VALUE"),
        (("build", "k.tile", "-D", "=3"), "'=3' is not NAME=VALUE"),
        (("build", "k.tile", "-D", "1x=3"), "'1x=3' is not NAME=VALUE"),
        (("build", "k.tile", "-D", "x="), "'x=' has an empty value"),
        (("build", "k.tile", "--arch", "sm_75"), "'sm_75' is not one of"),
        (("build", "k.tile", "--emit", "ptx"), "'ptx' is not one of"),
        (("build", "a.tile", "b.tile", "-o", "x.cu"), "several inputs need --out-dir"),
        (("build", "k.tile", "--check"), "--check needs -o"),
        (("build", "k.tile", "--cubin", "a", "--obj", "b"), "at most one of"),
        (("build", "k.tile", "-MD"), "-MD needs -o"),
        (("build", "k.tile", "--emit", "tir", "--header", "k.h"), "--header/--headers need --emit cuda"),
        (("build", "a.tile", "--out-dir", "d", "-o", "x.cu"), "--out-dir writes"),
        (("build", "d1/a.tile", "d2/a.tile", "--out-dir", "d"), "would both write a.cu"),
        (("check", "k.tile", "-D", "x"), "'x' is not NAME=VALUE"),
        (("frobnicate",), "No such command"),
    ],
)
def test_usage_errors_exit_1(args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(*args) == 1
    assert message in capsys.readouterr().err


def test_defines_are_passed(stub_compiler: dict, kernel: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    real = driver.build_many

    def build_many(paths, defines, *args, **kwargs):
        seen.update(defines)
        return real(paths, defines, *args, **kwargs)

    monkeypatch.setattr(driver, "build_many", build_many)
    assert run("build", str(kernel), "-D", "block_M=64", "-Dthreads = 256", "-o", str(kernel.with_suffix(".cu"))) == 0
    assert seen == {"block_M": "64", "threads": "256"}


def test_missing_input_is_a_user_error(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.cu"
    assert run("build", str(tmp_path / "nope.tile"), "-o", str(out)) == 1
    assert f"error: cannot read {tmp_path / 'nope.tile'}: no such file" in capsys.readouterr().err
    assert not out.exists()
    assert run("check", str(tmp_path)) == 1


def test_user_error_exit_1_and_stale_output_removed(
    stub_compiler: dict, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "bad.tile"
    src.write_text("error here\n")
    out, header, dep = tmp_path / "bad.cu", tmp_path / "bad.h", tmp_path / "bad.d"
    for stale in (out, header, dep):
        stale.write_text("stale")
    assert run("build", str(src), "-o", str(out), "--header", str(header), "-MD") == 1
    err = capsys.readouterr().err
    assert f"{src}:1:1: error: bad kernel" in err and "hint: write a good one" in err
    assert "\x1b[" not in err  # no colour when stderr is not a terminal
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["bad.tile"]


def test_internal_error_exit_2(stub_compiler: dict, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "crash.tile"
    src.write_text("crash\n")
    assert run("build", str(src), "-o", str(tmp_path / "crash.cu")) == 2
    err = capsys.readouterr().err
    assert f"internal compiler error while compiling {src}: ZeroDivisionError: boom" in err
    assert "bug in tilec" in err and "Traceback" in err
    assert not (tmp_path / "crash.cu").exists()
    assert run("check", str(src)) == 2


@pytest.mark.toolchain
@needs_nvcc
def test_toolchain_error_exit_3(
    stub_compiler: dict, kernel: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(driver, "compile_program_output", lambda *a, **k: Output(SCALE_CU + "this is not C++;\n", ()))
    out, cubin = kernel.with_suffix(".cu"), kernel.with_suffix(".cubin")
    cubin.write_text("stale")
    assert run("build", str(kernel), "-o", str(out), "--cubin", str(cubin)) == 3
    err = capsys.readouterr().err
    assert f"nvcc failed on {out}" in err and f"{out.name}(" in err  # nvcc's own message, naming the file
    assert not out.exists() and not cubin.exists()
    assert [p.name for p in kernel.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_worst_exit_code_wins() -> None:
    assert cli.worst([0, 1, 3, 1]) == 3
    assert cli.worst([3, 2, 1]) == 2
    assert cli.worst([]) == 0


# ---------------------------------------------------------------- outputs


def test_build_writes_output_atomically(stub_compiler: dict, kernel: pathlib.Path) -> None:
    out = kernel.parent / "sub" / "k.cu"
    out.parent.mkdir()
    assert run("build", str(kernel), "-o", str(out), "--arch", "sm_90a") == 0
    assert out.read_text().startswith(SCALE_CU) and "// sm_90a cuda" in out.read_text()
    assert sorted(p.name for p in out.parent.iterdir()) == ["k.cu"]


def test_build_to_stdout(stub_compiler: dict, kernel: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("build", str(kernel), "--emit", "tir") == 0
    assert "// sm_80 tir" in capsys.readouterr().out


def test_write_atomic_leaves_nothing_on_failure(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "x.cu"
    with pytest.raises(TypeError):
        driver.write_atomic(str(target), 42)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    driver.write_atomic(str(target), "a")
    driver.write_atomic(str(target), "b")
    assert target.read_text() == "b" and list(tmp_path.iterdir()) == [target]


def test_a_device_output_is_written_in_place_never_replaced(tmp_path: pathlib.Path) -> None:
    """`-o /dev/null` wrote a file over the device and renamed it there (as root, /dev/null was
    gone); a FIFO stands for the device here."""
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    driver.write_atomic(str(fifo), "kernel")
    reader.join(5)
    assert got == [b"kernel"] and stat.S_ISFIFO(fifo.stat().st_mode)
    driver.remove_output(str(fifo))  # a failed build's clean-up leaves it alone
    assert stat.S_ISFIFO(fifo.stat().st_mode) and list(tmp_path.iterdir()) == [fifo]


def test_header_from_abi_line(stub_compiler: dict, kernel: pathlib.Path) -> None:
    header = kernel.with_suffix(".h")
    assert run("build", str(kernel), "-o", str(kernel.with_suffix(".cu")), "--header", str(header)) == 0
    text = header.read_text()
    assert "#pragma once" in text and "#include <cuda_fp16.h>" in text
    assert "int scale(\n" in text
    assert "    void* X,  // device pointer, float32[N, 4], contiguous\n" in text
    assert "    half bias,  // scalar float16\n" in text
    assert "    int N,  // symbolic dimension\n" in text
    assert "    cudaStream_t stream);  // stream to launch on\n" in text


@pytest.mark.toolchain
@needs_nvcc
def test_header_compiles_with_host_code(tmp_path: pathlib.Path) -> None:
    header = tmp_path / "scale.h"
    header.write_text(driver.header_text(SCALE_CU, "scale.tile"))
    main = tmp_path / "main.cu"
    main.write_text('#include "scale.h"\nint main() { return scale(nullptr, nullptr, 1.0f, half(0), 0, 0); }\n')
    cu = tmp_path / "scale.cu"
    cu.write_text(SCALE_CU)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    proc = subprocess.run(
        [nvcc, "-arch=sm_80", "-Werror", "all-warnings", "-o", str(tmp_path / "a.out"), str(main), str(cu)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_depfile_text_escapes() -> None:
    text = driver.depfile_text("out dir/k.cu", ["k.tile", "my lib/common.tile", "a$b.tile", "k.tile"])
    assert text == "out\\ dir/k.cu: \\\n  k.tile \\\n  my\\ lib/common.tile \\\n  a$$b.tile\n"
    phony = driver.depfile_text(["k.cu", "k.h"], ["k.tile", "c.tile"], phony=True)
    assert phony == "k.cu k.h: \\\n  k.tile \\\n  c.tile\n\nc.tile:\n"


def test_depfile_absolute_when_target_absolute(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = driver.depfile_text(str(tmp_path / "k.cu"), ["k.tile"])
    assert text == f"{tmp_path}/k.cu: \\\n  {tmp_path}/k.tile\n"


def test_md_writes_depfile_with_imports(stub_compiler: dict, tmp_path: pathlib.Path) -> None:
    main, common = tmp_path / "k.tile", tmp_path / "common.tile"
    main.write_text("kernel\n")
    common.write_text("shared\n")
    stub_compiler["imports"][str(main)] = (str(common),)
    out = tmp_path / "k.cu"
    assert run("build", str(main), "-o", str(out), "-MD") == 0
    assert (tmp_path / "k.d").read_text() == f"{out}: \\\n  {main} \\\n  {common}\n"
    header = tmp_path / "k.h"
    (tmp_path / "deps").mkdir()
    assert run("build", str(main), "-o", str(out), "-MF", str(tmp_path / "deps" / "x.d"), "--header", str(header)) == 0
    assert (tmp_path / "deps" / "x.d").read_text().startswith(f"{out} {header}: ")


# ---------------------------------------------------------------- --check, --out-dir


def test_check_identical_different_missing(
    stub_compiler: dict, kernel: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = kernel.with_suffix(".cu")
    assert run("build", str(kernel), "-o", str(out), "--check") == 1
    assert "does not exist" in capsys.readouterr().err and not out.exists()
    assert run("build", str(kernel), "-o", str(out)) == 0
    assert run("build", str(kernel), "-o", str(out), "--check") == 0
    assert capsys.readouterr().out == ""
    good = out.read_text()
    out.write_text(good.replace("int i = ", "int j = "))
    assert run("build", str(kernel), "-o", str(out), "--check") == 1
    captured = capsys.readouterr()
    assert f"--- {out} (on disk)" in captured.out and f"+++ {out} (from {kernel})" in captured.out
    assert "-  int j = blockIdx.x" in captured.out and "+  int i = blockIdx.x" in captured.out
    assert "out of date" in captured.err
    assert "int j = " in out.read_text()  # --check never writes


def test_out_dir_many_inputs(stub_compiler: dict, tmp_path: pathlib.Path) -> None:
    inputs = []
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.tile").write_text(f"kernel {name}\n")
        inputs.append(str(tmp_path / f"{name}.tile"))
    gen = tmp_path / "gen"
    assert run("build", *inputs, "--out-dir", str(gen), "--headers", "-MD") == 0
    names = sorted(p.name for p in gen.iterdir())
    assert names == ["a.cu", "a.d", "a.h", "b.cu", "b.d", "b.h", "c.cu", "c.d", "c.h"]
    assert "// kernel b" in (gen / "b.cu").read_text()
    assert run("build", *inputs, "--out-dir", str(gen), "--check") == 0


def test_out_dir_keeps_going_after_an_error(stub_compiler: dict, tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.tile").write_text("error\n")
    (tmp_path / "b.tile").write_text("fine\n")
    gen = tmp_path / "gen"
    assert run("build", str(tmp_path / "a.tile"), str(tmp_path / "b.tile"), "--out-dir", str(gen)) == 1
    assert sorted(p.name for p in gen.iterdir()) == ["b.cu"]


# ---------------------------------------------------------------- cache


def test_cache_serves_unchanged_rebuilds(stub_compiler: dict, tmp_path: pathlib.Path) -> None:
    main, common = tmp_path / "k.tile", tmp_path / "common.tile"
    main.write_text("kernel\n")
    common.write_text("v1\n")
    stub_compiler["imports"][str(main)] = (str(common),)
    first = driver.build(str(main))
    again = driver.build(str(main))
    assert stub_compiler["elaborate"] == 1
    assert again.cached and again.text == first.text and again.files == first.files
    assert driver.build(str(main), {"x": "1"}).cached is False  # defines are part of the key
    assert driver.build(str(main), arch="sm_90a").cached is False
    common.write_text("v2\n")  # an imported file changed
    changed = driver.build(str(main))
    assert not changed.cached and "v2" in changed.text
    assert driver.build(str(main), cache=False).cached is False
    assert stub_compiler["elaborate"] == 5


def test_cache_can_be_disabled(stub_compiler: dict, kernel: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(kernel.with_suffix(".cu"))
    assert run("build", str(kernel), "-o", out) == 0
    assert run("build", str(kernel), "-o", out) == 0
    assert stub_compiler["elaborate"] == 1
    assert run("build", str(kernel), "-o", out, "--no-cache") == 0
    monkeypatch.setenv("TILEC_NO_CACHE", "1")
    assert run("build", str(kernel), "-o", out) == 0
    assert stub_compiler["elaborate"] == 3


def test_unwritable_cache_is_only_slower(stub_compiler: dict, kernel: pathlib.Path, tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("TILEC_CACHE", str(blocker))
    assert run("build", str(kernel), "-o", str(kernel.with_suffix(".cu"))) == 0


# ---------------------------------------------------------------- colour


def test_colour_only_at_the_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.text import Text

    line = cli._colour_line(Text, "k.tile:3:5: error: unknown name 'x'")
    assert [(s.start, s.end, str(s.style)) for s in line.spans] == [(0, 10, "bold"), (12, 18, "bold red")]
    caret = cli._colour_line(Text, "      |     ^^^")
    assert [str(s.style) for s in caret.spans] == ["bold green"]
    assert [str(s.style) for s in cli._colour_line(Text, "hint: do this").spans] == ["cyan"]


# ---------------------------------------------------------------- the real compiler


@pytest.fixture
def needs_compiler() -> None:
    pytest.importorskip("tilec.elaborate")
    pytest.importorskip("tilec.pipeline")


def test_real_user_error(needs_compiler: None, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.tile"
    src.write_text((ROOT / "examples" / "gemm.tile").read_text().replace("clear(C_local)", "clear(C_locl)"))
    out = tmp_path / "bad.cu"
    out.write_text("stale")
    assert run("build", str(src), "-o", str(out)) == 1
    assert "error:" in capsys.readouterr().err
    assert not out.exists()


def test_real_unknown_define(needs_compiler: None, tmp_path: pathlib.Path) -> None:
    assert (
        run("build", str(ROOT / "examples" / "gemm.tile"), "-D", "no_such_param=3", "-o", str(tmp_path / "x.cu")) == 1
    )
    assert not (tmp_path / "x.cu").exists()


def test_real_emit_after_a_pass(
    needs_compiler: None, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tilec import timing

    gemm = str(ROOT / "examples" / "gemm.tile")
    timing.TIMES.clear()  # the phases of this process so far
    assert run("build", gemm, "--emit", "thread", "--after", "lower", "--time", "--no-cache") == 0
    out, err = capsys.readouterr()
    assert out.startswith("kernel gemm threads=256")
    assert all(f"  {name} " in err for name in ("infer_layouts", "plan_pipeline", "lower", "emit"))
    assert "  cleanup " not in err  # the pipeline stopped after lower
    assert run("build", gemm, "--emit", "thread", "--after", "no_pass", "-o", str(tmp_path / "x.thread")) == 1
    assert "--after no_pass: no such pass" in capsys.readouterr().err
    assert not (tmp_path / "x.thread").exists()


def test_real_check_command(needs_compiler: None) -> None:
    assert run("check", str(ROOT / "examples" / "gemm.tile"), str(ROOT / "examples" / "softmax.tile")) == 0


@pytest.mark.toolchain
def test_check_imports_stay_light(needs_compiler: None) -> None:
    """`tilec check` must start fast: no code generator, no TVM, no rich without a terminal."""
    cmd = [sys.executable, "-X", "importtime", "-m", "tilec", "check", "examples/gemm.tile"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "tilec.elaborate" in imported
    assert not {"tvm", "rich", "tilec.pipeline", "tilec.lower", "tilec.emit", "tilec.format"} & imported


# ---------------------------------------------------------------- warnings (-W)


@pytest.fixture
def slow_kernel(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "slow.tile"
    path.write_text("kernel slow\n")  # the stub compiler warns (simt-gemm) on "slow"
    return path


def test_warnings_are_printed_and_the_build_succeeds(
    stub_compiler: dict, slow_kernel: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = slow_kernel.with_suffix(".cu")
    assert run("build", str(slow_kernel), "-o", str(out)) == 0
    assert f"{slow_kernel}:1:1: warning: slow [-Wsimt-gemm]" in capsys.readouterr().err
    assert out.exists()


@pytest.mark.parametrize("flags", [("-Werror",), ("-Werror=simt-gemm",), ("-Wno-simt-gemm", "-Werror=simt-gemm")])
def test_werror_fails_and_leaves_no_output(
    stub_compiler: dict, slow_kernel: pathlib.Path, flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    out = slow_kernel.with_suffix(".cu")
    out.write_text("stale")
    assert run("build", str(slow_kernel), "-o", str(out), *flags) == 1
    assert "error: slow [-Werror=simt-gemm]" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("flags", [("-Wno-simt-gemm",), ("-Werror", "-Wno-simt-gemm"), ("-Werror", "-Wno-error")])
def test_silenced_or_not_errors(
    stub_compiler: dict, slow_kernel: pathlib.Path, flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    out = slow_kernel.with_suffix(".cu")
    assert run("build", str(slow_kernel), "-o", str(out), *flags) == 0
    err = capsys.readouterr().err
    assert ("warning: slow" in err) == ("-Wno-simt-gemm" not in flags)
    assert out.exists()


def test_unknown_warning_name_is_a_usage_error(
    stub_compiler: dict, slow_kernel: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("build", str(slow_kernel), "-Wno-simt-gem") == 1
    assert "no warning 'simt-gem'" in capsys.readouterr().err


def test_builds_with_warnings_are_not_cached(
    stub_compiler: dict, slow_kernel: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = slow_kernel.with_suffix(".cu")
    for _ in range(2):
        assert run("build", str(slow_kernel), "-o", str(out)) == 0
        assert "[-Wsimt-gemm]" in capsys.readouterr().err
    assert stub_compiler["elaborate"] == 2


def test_warning_flags_are_read_in_order() -> None:
    assert cli.parse_warning_flags(["error"]).werror
    assert not cli.parse_warning_flags(["error", "no-error"]).werror
    assert cli.parse_warning_flags(["no-lost-pipeline", "lost-pipeline"]).disabled == frozenset()


EXTERN_TILE = ROOT / "tests" / "gpu" / "programs" / "extern_gelu.tile"
EXTERN_HEADER = ROOT / "tests" / "gpu" / "programs" / "extern_ops.cuh"


@pytest.mark.toolchain
@needs_nvcc
def test_include_puts_the_header_relative_to_the_output_and_nvcc_finds_it(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--include: `#include "HEADER"` after the generated includes, its path from the output's
    folder; the depfile lists it; the cubin builds (nvcc resolves it beside the .cu)."""
    out = tmp_path / "build" / "k.cu"
    out.parent.mkdir()
    monkeypatch.chdir(ROOT)
    code = run("build", str(EXTERN_TILE), "--include", str(EXTERN_HEADER.relative_to(ROOT)), "-o", str(out),
               "--cubin", str(tmp_path / "k.cubin"), "-MD")  # fmt: skip
    assert code == 0
    text = out.read_text()
    rel = os.path.relpath(EXTERN_HEADER, out.parent)
    assert f'#include <stdint.h>\n#include "{rel}"\n' in text
    assert "user_gelu(t)" in text and "user_axpb(3, " in text
    assert str(EXTERN_HEADER) in (tmp_path / "build" / "k.d").read_text()
    assert (tmp_path / "k.cubin").stat().st_size > 0


def test_include_needs_cuda_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("build", str(EXTERN_TILE), "--include", "x.h", "--emit", "tir") == 1
    assert "--include needs --emit cuda" in capsys.readouterr().err


def test_runtime_finds_the_headers_of_a_file_and_keys_its_cache_on_them(tmp_path: pathlib.Path) -> None:
    from tilec import runtime

    (tmp_path / "ops.cuh").write_text("// v1\n")
    source = '#include <stdint.h>\n#include "ops.cuh"\n'
    flags, texts = runtime.user_headers(source, str(tmp_path))
    assert flags == ("-I", str(tmp_path)) and "// v1" in texts
    assert runtime.user_headers("#include <stdint.h>\n", str(tmp_path)) == ((), "")
