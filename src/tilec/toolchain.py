"""nvcc invocations: the generated `.cu` to a cubin, an object or a shared library.

    compile_cubin("build/gemm.cu", "build/gemm.cubin", "sm_90a")
      runs  nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo
                 -o build/.gemm.cubin.XXXX.tmp build/gemm.cu
      then renames the temporary file to build/gemm.cubin.

The flags are the target record's (targets.py: Target.compiler, Target.gencode).

Outputs appear atomically: nvcc writes a temporary file beside the output,
renamed into place only on success; on failure the temporary file and any
stale old output are removed, so Make never sees an out-of-date file as new.
A failure raises ToolchainError carrying nvcc's own messages (which name the
`.cu` file and line); the CLI maps it to exit code 3.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

from tilec.targets import ARCHES, TARGETS, Target, compiler_flags


class ToolchainError(Exception):
    """An external tool (nvcc, clang-format) is missing or failed."""


def find_nvcc() -> str:
    """nvcc from PATH, else `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, /usr/local/cuda/bin."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            path = os.path.join(root, "bin", "nvcc")
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    raise ToolchainError("nvcc not found: put the CUDA toolkit's bin/ on PATH or set CUDA_HOME")


def target_of(arch: str) -> Target:
    """The registry's record of `arch` (targets.TARGETS); ToolchainError if there is none."""
    if arch not in TARGETS:
        raise ToolchainError(f"unknown GPU architecture '{arch}' (expected one of {', '.join(ARCHES)})")
    return TARGETS[arch]


def gencode(arch: str) -> list[str]:
    """`sm_80` -> `-gencode arch=compute_80,code=sm_80` (the target record's arch flag and gencode)."""
    target = target_of(arch)
    return [target.compiler.arch_flag, target.gencode]


def nvcc_command(
    kind: str, src: str, out: str, arch: str, werror: bool = False, extra: Sequence[str] = ()
) -> list[str]:
    return [find_nvcc(), *compiler_flags(target_of(arch), kind, werror), *extra, "-o", out, src]


def run_nvcc(kind: str, src: str, out: str, arch: str, werror: bool = False, extra: Sequence[str] = ()) -> str:
    """Compile `src` to `out` atomically; returns nvcc's output (warnings), raises ToolchainError."""
    out_dir = os.path.dirname(os.path.abspath(out))
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=out_dir)
    os.close(fd)
    try:
        cmd = nvcc_command(kind, src, tmp, arch, werror, extra)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise ToolchainError(f"cannot run nvcc ({cmd[0]}): {exc}") from exc
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise ToolchainError(f"nvcc failed on {src} (exit {proc.returncode}):\n{output}")
        os.replace(tmp, out)
        return output
    except BaseException:
        _remove(tmp)
        _remove(out)
        raise


def compile_cubin(cu_path: str, out: str, arch: str = "sm_80", werror: bool = False) -> str:
    return run_nvcc("cubin", cu_path, out, arch, werror)


def compile_obj(cu_path: str, out: str, arch: str = "sm_80", werror: bool = False) -> str:
    return run_nvcc("obj", cu_path, out, arch, werror)


def compile_shared(cu_path: str, out: str, arch: str = "sm_80", werror: bool = False) -> str:
    return run_nvcc("shared", cu_path, out, arch, werror)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
