"""Layering: the CUDA (and HIP) words, the warp sizes and imports of a backend stay in
src/tilec/backends/<language>/ (and, for the imports, in targets.py, which assembles their records).
Everything else is target-neutral: a new target adds modules, it does not edit these."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "src" / "tilec"
CUDA_BACKEND = PACKAGE / "backends" / "cuda"
BACKENDS = (CUDA_BACKEND, PACKAGE / "backends" / "hip")

# CUDA spellings (issue 10's list, and the PTX/C names a lowering would otherwise write). CUDA's
# vector type uint4 is not among them: `uint4` is also a dtype of the language (4-bit unsigned).
CUDA_WORDS = re.compile(
    r"__syncthreads|threadIdx|cp\.async|mma\.sync|<<<|cudaStream_t|ldmatrix|__shfl|atomicAdd|__half|uint2\b"
)

# Integer literals 32 and 64 in target-neutral code that are not a warp size (nor two warps),
# by module and source line, each with its reason. Any other one is a warp size to be read
# from Target.warp_size or an instruction record.
NOT_WARP_SIZES: dict[tuple[str, str], str] = {
    ("budget.py", "MAX_BLOCK_NESTING = 32"): "a nesting limit",
    ("budget.py", "ADDRESS_REGISTERS = 64"): "registers a thread needs beside its fragments",
    ("layout_algebra.py", "return row_bytes if row_bytes in (32, 64) else None"): "swizzle widths in bytes",
    ("dtypes.py", 'float32 = ("float32", "float", 32, "float")'): "bits of a type",
    ("dtypes.py", 'float64 = ("float64", "double", 64, "float")'): "bits of a type",
    ("dtypes.py", 'int32 = ("int32", "int", 32, "int")'): "bits of a type",
    ("dtypes.py", 'int64 = ("int64", "long long", 64, "int")'): "bits of a type",
    ("dtypes.py", 'uint32 = ("uint32", "unsigned int", 32, "uint")'): "bits of a type",
    ("dtypes.py", 'uint64 = ("uint64", "unsigned long long", 64, "uint")'): "bits of a type",
    ("dtypes.py", "return self.is_float and self.bits < 32"): "bits of a type",
    ("lower/cexpr.py", "elif value.dtype.bits == 64:"): "bits of a type",
    ("fold.py", "INT_MIN, UINT_MAX = -(2**63), 2**64 - 1"): "the range of a 64-bit integer",
    ("fold.py", 'if op in ("<<", ">>") and not 0 <= int(y) < 64:'): "shift counts of a 64-bit integer",
    ("fold.py", "if isinstance(y, int) and not isinstance(y, float) and abs(y) > 64 and abs(x) > 1:"): (
        "a bound on folded powers"
    ),
    ("explain.py", "@functools.lru_cache(maxsize=64)"): "a cache size",
    ("tune/peaks.py", "RESIDENT_BLOCKS = 32  # blocks one SM holds at most, sm_80 to sm_90"): "blocks per SM",
    ("explain.py", "cw, ch, left, top = 64, 36, 44, 92"): "SVG cell geometry in pixels",
    ("layout_algebra.py", "BANKS = 32"): "shared-memory banks",
    ("layout.py", "SECTOR_BYTES = 32  # the unit of a global memory access: a lone 16-byte vector uses half of one"): (
        "bytes of a memory sector"
    ),
    ("layout_algebra.py", "if swizzle_bytes not in (32, 64, 128):"): "swizzle widths in bytes",
    ("passes/infer_layouts.py", "if shape[-1] == 64:"): "64 16-bit columns: one 128-byte swizzle",
    ("passes/infer_layouts.py", "elif shape[-1] % 64 == 0 and main_loop:"): "64 16-bit columns: one 128-byte swizzle",
}


def _neutral_modules() -> list[pathlib.Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if not any(b in p.parents for b in BACKENDS)]


def _name(path: pathlib.Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_the_neutral_modules_exist() -> None:
    names = {_name(p) for p in _neutral_modules()}
    assert {"emit.py", "explain.py", "targets.py", "lower/kernel.py", "passes/select.py"} <= names
    assert not any(n.startswith(("backends/cuda/", "backends/hip/")) for n in names)


def test_no_cuda_spelling_outside_the_cuda_backend() -> None:
    hits = [
        f"{_name(p)}:{n}: {line.strip()}"
        for p in _neutral_modules()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if CUDA_WORDS.search(line)
    ]
    assert hits == [], "CUDA spellings belong in backends/cuda/ (the target's records):\n" + "\n".join(hits)


def test_the_cuda_words_are_in_the_backend() -> None:
    # the pattern still finds what it is meant to find
    backend = "\n".join(p.read_text() for p in sorted(CUDA_BACKEND.glob("*.py")))
    for word in ("__syncthreads", "threadIdx", "cp.async", "mma.sync", "<<<", "cudaStream_t", "ldmatrix", "uint2"):
        assert CUDA_WORDS.search(word) and word in backend, word


def _int_literals(path: pathlib.Path, values: tuple[int, ...]) -> list[tuple[int, str]]:
    text = path.read_text()
    lines = text.splitlines()
    return [
        (node.lineno, lines[node.lineno - 1].strip())
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value in values
    ]


def test_no_literal_warp_size_outside_the_target_records() -> None:
    found = {(_name(p), line): n for p in _neutral_modules() for n, line in _int_literals(p, (32, 64))}
    unexplained = [
        f"{module}:{n}: {line}" for (module, line), n in found.items() if (module, line) not in NOT_WARP_SIZES
    ]
    assert unexplained == [], "a warp size comes from Target.warp_size or a record:\n" + "\n".join(unexplained)
    stale = [key for key in NOT_WARP_SIZES if key not in found]
    assert stale == [], f"exceptions that no longer match a line: {stale}"


def _imported_modules(path: pathlib.Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            out |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return out


@pytest.mark.parametrize("language", ["cuda", "hip"])
def test_only_the_target_registry_imports_a_backend(language: str) -> None:
    # lowering reaches a backend's lowerings through Target.backend (lower.context.backend_of), by name
    package = f"tilec.backends.{language}"
    importers = sorted(
        _name(p)
        for p in _neutral_modules()
        if any(m == package or m.startswith(package + ".") for m in _imported_modules(p))
    )
    assert importers == ["targets.py"]


def test_the_backends_do_not_import_each_other() -> None:
    for backend, other in ((BACKENDS[0], "hip"), (BACKENDS[1], "cuda")):
        for p in sorted(backend.glob("*.py")):
            assert not any(m.startswith(f"tilec.backends.{other}") for m in _imported_modules(p)), _name(p)
