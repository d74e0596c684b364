"""Device compiler invocations (nvcc, hipcc): the generated file to a cubin/hsaco, an object or a shared library.

    compile_cubin("build/gemm.cu", "build/gemm.cubin", "sm_90a")
      runs  nvcc -cubin -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo
                 -o build/.gemm.cubin.XXXX.tmp build/gemm.cu
      then renames the temporary file to build/gemm.cubin.

The flags are the target record's (targets.py: Target.compiler, Target.gencode);
for gfx90a, `hipcc --genco --offload-arch=gfx90a -O3 -std=c++17` with HIP_PLATFORM=amd.

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

from tilec.driver import is_device
from tilec.targets import ARCHES, TARGETS, Target, compiler_flags


class ToolchainError(Exception):
    """An external tool (nvcc, clang-format) is missing or failed."""


def find_compiler(target: Target) -> str:
    """The target's compiler from PATH, else from the bin/ of its toolkit's roots (nvcc:
    `$CUDA_HOME`, `$CUDA_PATH`, /usr/local/cuda; hipcc: `$ROCM_PATH`, `$HIP_PATH`, /opt/rocm)."""
    c = target.compiler
    found = shutil.which(c.command)
    if found:
        return found
    for root in (*(os.environ.get(v) for v in c.homes), c.default_home):
        if root:
            path = os.path.join(root, "bin", c.command)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    raise ToolchainError(
        f"{c.command} not found: put its toolkit's bin/ on PATH or set {c.homes[0]} (needed for --arch {target.arch})"
    )


def find_nvcc() -> str:
    """nvcc, the CUDA targets' compiler (find_compiler)."""
    return find_compiler(TARGETS["sm_80"])


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
    """The compile command of `arch`'s compiler (nvcc or hipcc, as the record names)."""
    target = target_of(arch)
    if kind not in target.compiler.kind_flags:
        kinds = ", ".join(f"--{k}" for k in target.compiler.kind_flags)
        raise ToolchainError(f"--{kind} is not an output of {target.compiler.command} for {arch}: use {kinds}")
    return [find_compiler(target), *compiler_flags(target, kind, werror), *extra, "-o", out, src]


def run_nvcc(kind: str, src: str, out: str, arch: str, werror: bool = False, extra: Sequence[str] = ()) -> str:
    """Compile `src` to `out` atomically; returns nvcc's output (warnings), raises ToolchainError."""
    out_dir = tempfile.gettempdir() if is_device(out) else os.path.dirname(os.path.abspath(out))
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out)}.", suffix=".tmp", dir=out_dir)
    os.close(fd)
    try:
        cmd = nvcc_command(kind, src, tmp, arch, werror, extra)
        try:
            env = {**os.environ, **target_of(arch).compiler.env}
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        except OSError as exc:
            raise ToolchainError(f"cannot run {os.path.basename(cmd[0])} ({cmd[0]}): {exc}") from exc
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise ToolchainError(f"{os.path.basename(cmd[0])} failed on {src} (exit {proc.returncode}):\n{output}")
        if is_device(out):  # `--cubin /dev/null`, a FIFO: written through, never replaced by a rename
            with open(tmp, "rb") as src_file, open(out, "wb") as dst:
                shutil.copyfileobj(src_file, dst)
            _remove(tmp)
        else:
            os.replace(tmp, out)
        return output
    except BaseException:
        _remove(tmp)
        if not is_device(out):
            _remove(out)
        raise


def compile_cubin(cu_path: str, out: str, arch: str = "sm_80", werror: bool = False) -> str:
    return run_nvcc("cubin", cu_path, out, arch, werror)


def compile_hsaco(hip_path: str, out: str, arch: str = "gfx90a", werror: bool = False) -> str:
    return run_nvcc("hsaco", hip_path, out, arch, werror)


def compile_obj(cu_path: str, out: str, arch: str = "sm_80", werror: bool = False) -> str:
    return run_nvcc("obj", cu_path, out, arch, werror)


def compile_shared(cu_path: str, out: str, arch: str = "sm_80", werror: bool = False) -> str:
    return run_nvcc("shared", cu_path, out, arch, werror)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
