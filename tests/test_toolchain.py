"""nvcc: every example compiles for sm_80 and sm_90a without warnings, every golden
.cu for the target of its directory (tests/golden/codegen/ARCH/), and --cubin /
--obj / --shared produce their files. Skipped without nvcc."""

from __future__ import annotations

import os
import pathlib
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from tilec import toolchain

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.tile"))
CODEGEN = ROOT / "tests" / "golden" / "codegen"
GOLDEN_STEMS = sorted({cu.stem for cu in CODEGEN.glob("*/*.cu")})
SCALE_CU = ROOT / "tests" / "data" / "scale.cu"
ARCHES = ("sm_80", "sm_90a")

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"), reason="nvcc not found"
)


def compile_all_arches(cus: dict[str, pathlib.Path], out_dir: pathlib.Path) -> None:
    """One .cu per arch, compiled at once (nvcc is single-threaded) with
    -Werror all-warnings; nvcc must print nothing at all."""

    def one(arch: str) -> tuple[str, str]:
        cu = cus[arch]
        return arch, toolchain.compile_cubin(str(cu), str(out_dir / f"{cu.stem}.{arch}.cubin"), arch, werror=True)

    with ThreadPoolExecutor(len(cus)) as pool:
        for arch, output in pool.map(one, cus):
            assert output == "", f"nvcc printed for {cus[arch].name} ({arch}):\n{output}"


def test_gencode() -> None:
    assert toolchain.gencode("sm_80") == ["-gencode", "arch=compute_80,code=sm_80"]
    assert toolchain.gencode("sm_90a") == ["-gencode", "arch=compute_90a,code=sm_90a"]
    with pytest.raises(toolchain.ToolchainError, match="unknown GPU architecture 'ampere'"):
        toolchain.gencode("ampere")


def test_command_line() -> None:
    cmd = toolchain.nvcc_command("shared", "k.cu", "k.so", "sm_89", werror=True)
    assert cmd[1:] == [
        "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_89,code=sm_89",
        "-O3", "-std=c++17", "-lineinfo", "-Werror", "all-warnings", "-o", "k.so", "k.cu",
    ]  # fmt: skip


@pytest.mark.toolchain
@pytest.mark.parametrize("kind", ["cubin", "obj", "shared"])
def test_binaries_are_produced(kind: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / f"scale.{kind}"
    compile_fn = {"cubin": toolchain.compile_cubin, "obj": toolchain.compile_obj, "shared": toolchain.compile_shared}
    assert compile_fn[kind](str(SCALE_CU), str(out), "sm_80", werror=True) == ""
    magic = out.read_bytes()[:4]
    assert magic == b"\x7fELF"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


@pytest.mark.toolchain
def test_failure_names_the_file_and_leaves_nothing(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text(SCALE_CU.read_text() + "\nint unused_global = undefined_name;\n")
    out = tmp_path / "bad.cubin"
    out.write_bytes(b"stale")
    with pytest.raises(toolchain.ToolchainError) as info:
        toolchain.compile_cubin(str(bad), str(out))
    message = str(info.value)
    assert message.startswith(f"nvcc failed on {bad} (exit ")
    assert f"{bad}(" in message and "undefined_name" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.cu"]


@pytest.mark.toolchain
def test_warnings_are_errors_when_asked(tmp_path: pathlib.Path) -> None:
    warn = tmp_path / "warn.cu"
    warn.write_text('extern "C" __global__ void f(int* p) { int unused; p[0] = 1; }\n')
    assert "unused" in toolchain.compile_cubin(str(warn), str(tmp_path / "a.cubin"))
    with pytest.raises(toolchain.ToolchainError, match="unused"):
        toolchain.compile_cubin(str(warn), str(tmp_path / "b.cubin"), werror=True)


@pytest.fixture(scope="module")
def compiler() -> None:
    pytest.importorskip("tilec.elaborate")
    pytest.importorskip("tilec.pipeline")


@pytest.mark.toolchain
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_compiles(
    example: pathlib.Path, compiler: None, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tilec import driver

    monkeypatch.chdir(ROOT)
    cus = {}
    for arch in ARCHES:
        cus[arch] = tmp_path / f"{example.stem}.{arch}.cu"
        cus[arch].write_text(driver.compile_file(str(example.relative_to(ROOT)), arch=arch))
    compile_all_arches(cus, tmp_path)


@pytest.mark.toolchain
@pytest.mark.parametrize("stem", GOLDEN_STEMS)
def test_golden_compiles(stem: str, tmp_path: pathlib.Path) -> None:
    goldens = {arch: CODEGEN / arch / f"{stem}.cu" for arch in ARCHES}
    compile_all_arches({arch: cu for arch, cu in goldens.items() if cu.exists()}, tmp_path)


@pytest.mark.toolchain
def test_cli_binary_flags(compiler: None, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec import cli

    monkeypatch.setenv("TILEC_CACHE", str(tmp_path / "cache"))
    src = str(ROOT / "examples" / "make" / "kernels" / "axpy.tile")
    for flag, name in (("--cubin", "a.cubin"), ("--obj", "a.o"), ("--shared", "a.so")):
        with pytest.raises(SystemExit) as info:
            cli.main(["build", src, "-o", str(tmp_path / "a.cu"), flag, str(tmp_path / name)])
        assert info.value.code == 0
        assert (tmp_path / name).read_bytes()[:4] == b"\x7fELF"


# ---------------------------------------------------------------- clang-format


def test_format_is_stable_and_keeps_the_abi_line() -> None:
    from tilec.format import format_cpp

    abi = '// tilec-abi: {"kernels": [' + ", ".join(f'{{"name": "k{i}"}}' for i in range(20)) + "]}"
    src = f'// Generated\n{abi}\nextern "C" int k(int a,int b){{if(a){{return b;}}return 0;}}\n'
    once = format_cpp(src)
    assert once.splitlines()[1] == abi  # never rewrapped, however long
    assert "  if (a) {\n    return b;\n  }" in once
    assert format_cpp(once) == once


def test_format_missing_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilec.format import format_cpp

    monkeypatch.setenv("TILEC_CLANG_FORMAT", "/nonexistent/clang-format")
    with pytest.raises(toolchain.ToolchainError, match="cannot run clang-format"):
        format_cpp("int x;\n")


def test_a_binary_into_a_device_is_written_through(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--cubin /dev/null` (a FIFO here): the compiler writes a temporary file elsewhere, copied into
    the device, which is neither replaced by a rename nor removed (shutil.copyfile refused a FIFO:
    an internal error)."""
    import stat
    import sys
    import threading

    write = "import sys; open(sys.argv[1], 'wb').write(b'cubin')"
    monkeypatch.setattr(toolchain, "nvcc_command", lambda kind, src, out, *a, **k: [sys.executable, "-c", write, out])
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    toolchain.run_nvcc("cubin", str(tmp_path / "k.cu"), str(fifo), "sm_90a")
    reader.join(5)
    assert got == [b"cubin"] and stat.S_ISFIFO(fifo.stat().st_mode)
    assert list(tmp_path.iterdir()) == [fifo]
