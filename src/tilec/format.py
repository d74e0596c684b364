"""clang-format over generated C++: the last stage before the text is written.

    extern "C" int gemm(half* A, half* B, half* C, int M, int N, int K, ...) { const dim3 grid(...); ...

becomes the same code laid out by the style file shipped with tilec
(src/tilec/data/tilec.clang-format). The binary is the one from the pinned
`clang-format` PyPI package, never whatever is on PATH: another release lays
out code differently, and the output must be byte-identical on every machine.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from tilec.toolchain import ToolchainError

STYLE_FILE = os.path.join(os.path.dirname(__file__), "data", "tilec.clang-format")


def clang_format_path() -> str:
    """The pinned clang-format binary (`$TILEC_CLANG_FORMAT` overrides it)."""
    override = os.environ.get("TILEC_CLANG_FORMAT")
    if override:
        return override
    candidates = []
    spec = importlib.util.find_spec("clang_format")
    if spec is not None and spec.origin:
        candidates.append(os.path.join(os.path.dirname(spec.origin), "data", "bin", "clang-format"))
    candidates.append(os.path.join(os.path.dirname(sys.executable), "clang-format"))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise ToolchainError(
        "clang-format not found: tilec needs the pinned PyPI package (pip install 'clang-format==23.1.3'); "
        "set TILEC_CLANG_FORMAT to use another binary"
    )


def format_cpp(text: str, filename: str = "kernel.cu") -> str:
    """`text` formatted with tilec's style; `filename` only picks the language."""
    return _run([f"--assume-filename={filename}"], text.encode()).decode()


def format_many(texts: Sequence[str]) -> list[str]:
    """Each of `texts` (CUDA C++) formatted as `format_cpp` does, by one clang-format
    process: a `tilec build --out-dir` of many files pays its start-up once."""
    if len(texts) <= 1:
        return [format_cpp(t) for t in texts]
    with tempfile.TemporaryDirectory(prefix="tilec-format-") as tmp:
        paths = [os.path.join(tmp, f"{i}.cu") for i in range(len(texts))]
        for path, text in zip(paths, texts, strict=True):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        _run(["-i", *paths], b"")
        out = []
        for path in paths:
            with open(path, encoding="utf-8") as f:
                out.append(f.read())
        return out


def _run(args: list[str], stdin: bytes) -> bytes:
    cmd = [clang_format_path(), f"--style=file:{STYLE_FILE}", *args]
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, check=False)
    except OSError as exc:
        raise ToolchainError(f"cannot run clang-format ({cmd[0]}): {exc}") from exc
    if proc.returncode != 0:
        raise ToolchainError(f"clang-format failed (exit {proc.returncode}):\n{proc.stderr.decode(errors='replace')}")
    return proc.stdout
