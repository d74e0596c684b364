"""The driver: one `.tile` file in, formatted text out, written atomically.

    compile_file("examples/gemm.tile", {"BLOCK_M": "64"}, arch="sm_90a")
      = elaborate_file  (parse, -D overrides, imports -> Tile IR Program)
      -> compile_program (passes, lower, emit -> unformatted C++)
      -> format_cpp      (pinned clang-format, shipped style)

`build` returns a `Result` holding the warnings too (`build(path).warnings`:
diagnostics of severity "warning", which the caller filters and prints; the CLI
applies -Wno-NAME and -Werror). It adds a content-hash cache in front of that: the key is the main
file's path and bytes, the defines, the arch, the emit kind (and `--after`) and tilec itself;
the entry records every `.tile` read (imports included) with its hash, so an
unchanged rebuild reads a few files and never imports the compiler. A build with
warnings is not cached: every rebuild reports them again.

Outputs are written through `write_atomic` (temporary file beside the target,
then `os.replace`) into directories that must exist, as gcc and nvcc require;
`remove_output` deletes a stale output after a failure so Make cannot mistake
it for an up-to-date file. Heavy modules (lark, TVM) are
imported inside functions so `tilec --version` and cache hits stay cheap.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import tilec
from tilec.timing import phase

if TYPE_CHECKING:
    from tilec import tir
    from tilec.diagnostics import Diagnostic
    from tilec.pipeline import Output
    from tilec.targets import Launch

EMITS = ("cuda", "tir", "thread")


@dataclass(frozen=True, slots=True)
class Result:
    text: str
    files: tuple[str, ...]  # every .tile read, the main file first
    cached: bool = False
    warnings: tuple[Diagnostic, ...] = ()  # pipeline.compile_with_warnings's, unfiltered


# ---------------------------------------------------------------- compiling


def elaborate(path: str, defines: Mapping[str, str] | None = None, arch: str = "sm_80"):
    """Parse and check `path` -> tir.Program (raises CompileError)."""
    if not os.path.isfile(path):
        from tilec.diagnostics import error

        reason = "is a directory" if os.path.isdir(path) else "no such file"
        raise error(None, f"cannot read {path}: {reason}")
    with phase("import front end"):
        from tilec.elaborate import elaborate_file
    with phase("elaborate"):
        return elaborate_file(path, dict(defines or {}), arch=arch)


def check_file(path: str, defines: Mapping[str, str] | None = None, arch: str = "sm_80"):
    """What `tilec check` does: parse and elaborate, no code generation."""
    return elaborate(path, defines, arch)


def compile_program_text(
    program, arch: str = "sm_80", emit: str = "cuda", formatted: bool = True, after: str | None = None
) -> str:
    """The text of `program`: CUDA C++ through clang-format unless `formatted` is
    False (then the caller formats it, as `build_many` does for many files at once).
    `after` names the pass whose IR `--emit tir|thread` prints (pipeline.py); each
    pass is a phase of its own."""
    return compile_program_output(program, arch, emit, formatted, after).text


def compile_program_output(
    program,
    arch: str = "sm_80",
    emit: str = "cuda",
    formatted: bool = True,
    after: str | None = None,
    bounds: bool = False,
) -> Output:
    """`compile_program_text`'s text with the program's warnings (`bounds`: verified by
    bounds_verify.py first, as `tilec build --verify` asks)."""
    with phase("import back end"):
        from tilec.pipeline import compile_with_warnings
    out = compile_with_warnings(program, arch, emit, after, bounds=bounds)
    if emit == "cuda" and formatted:
        return dataclasses.replace(out, text=format_texts([out.text])[0])
    return out


def with_includes(result: Result, headers: Sequence[str], out: str | None) -> Result:
    """`result` with `#include "HEADER"` after the generated includes for each of `headers`
    (`--include`), each path relative to the folder of `out` (as given without one), and the
    headers among the files the depfile lists."""
    if not headers:
        return result
    lines = result.text.split("\n")
    at = max((i for i, line in enumerate(lines) if line.startswith("#include")), default=-1) + 1
    where = os.path.dirname(os.path.abspath(out)) if out is not None else None
    paths = [os.path.relpath(h, where) if where is not None else h for h in headers]
    added = [f'#include "{p}"' for p in paths]
    text = "\n".join(lines[:at] + added + lines[at:])
    return dataclasses.replace(result, text=text, files=(*result.files, *headers))


def format_texts(texts: Sequence[str]) -> list[str]:
    from tilec.format import format_many

    with phase("clang-format"):
        return format_many(texts)


def compile_file(
    path: str,
    defines: Mapping[str, str] | None = None,
    arch: str = "sm_80",
    emit: str = "cuda",
    after: str | None = None,
) -> str:
    """The formatted CUDA C++ (or `--emit tir|thread [--after PASS]` text) for one `.tile` file."""
    return compile_program_text(elaborate(path, defines, arch), arch, emit, after=after)


def build(
    path: str,
    defines: Mapping[str, str] | None = None,
    arch: str = "sm_80",
    emit: str = "cuda",
    cache: bool = True,
    after: str | None = None,
) -> Result:
    """compile_file plus the files read (for depfiles), through the cache."""
    outcome = build_many([path], defines, arch, emit, cache, after)[0]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def build_many(
    paths: Sequence[str],
    defines: Mapping[str, str] | None = None,
    arch: str = "sm_80",
    emit: str = "cuda",
    cache: bool = True,
    after: str | None = None,
    bounds: bool = False,
) -> list[Result | Exception]:
    """`build` of each path, in one process: a file's failure is its own entry
    (the exception), and the C++ of every file compiled goes through one
    clang-format run. `bounds` (`--verify`) proves every index in bounds first, and
    never answers from the cache (a cached build was never verified)."""
    cache = cache and not bounds
    defines = dict(defines or {})
    outcomes: list[Result | Exception] = []
    fresh: list[tuple[int, str | None, Result]] = []  # (index, cache key, unformatted result)
    for path in paths:
        try:
            key = None
            if cache:
                with phase("cache lookup"):
                    key = _cache_key(path, defines, arch, emit, after)
                    hit = _cache_get(key) if key is not None else None
                if hit is not None:
                    outcomes.append(hit)
                    continue
            program, out = _compile_fitted(path, defines, arch, emit, after, bounds)
            result = Result(out.text, tuple(program.files) or (path,), warnings=out.warnings)
        except Exception as exc:  # noqa: BLE001 - reported by the caller, per file
            outcomes.append(exc)
            continue
        fresh.append((len(outcomes), key, result))
        outcomes.append(result)
    if emit == "cuda" and fresh:
        try:
            texts = format_texts([r.text for _, _, r in fresh])
        except Exception as exc:  # noqa: BLE001 - clang-format failed: every fresh file fails with it
            for i, _, _ in fresh:
                outcomes[i] = exc
            return outcomes
        fresh = [(i, key, dataclasses.replace(r, text=t)) for (i, key, r), t in zip(fresh, texts, strict=True)]
    for i, key, result in fresh:
        outcomes[i] = result
        if key is not None and not result.warnings:
            _cache_put(key, result)
    return outcomes


def _compile_fitted(path: str, defines: dict[str, str], arch: str, emit: str, after: str | None, bounds: bool):
    """(program, output) of `path`; where its default configuration is over the target's limits,
    of the nearest point of its candidate sets that fits, with a -Wconfig-fit warning (tune/fit.py).
    `--emit tir` and `--after PASS` stop before the lowered shared-memory check: they show the
    configuration as written unless elaboration's own check already refused it."""
    from tilec.diagnostics import CompileError

    program = None
    try:
        program = elaborate(path, defines, arch)
        return program, compile_program_output(program, arch, emit, formatted=False, after=after, bounds=bounds)
    except CompileError as exc:
        sets = exc.candidate_sets or (program.candidate_sets if program is not None else ())
        if not sets or not exc.over_limits_only:
            raise
        from tilec.tune import fit

        found = fit.nearest(path, defines, arch, sets)
        if found is None and program is not None and program.candidate_sets:
            return program, _single_buffered(program, arch, emit, after, bounds, exc)
        if found is None:
            raise
        point, program = found
        out = compile_program_output(program, arch, emit, formatted=False, after=after, bounds=bounds)
        note = fit.warning(path, arch, exc, point, sets, defines)
        return program, dataclasses.replace(out, warnings=(note, *out.warnings))


def _single_buffered(
    program: tir.Program, arch: str, emit: str, after: str | None, bounds: bool, exc: Exception
) -> Output:
    """`program` as written with its sets set aside, so that a register-staged pipeline over the
    target's shared memory keeps one buffer per tile (Target.single_buffer); `exc` (the error as
    written) stands where that does not fit either."""
    from tilec.diagnostics import CompileError

    try:
        plain = dataclasses.replace(program, candidate_sets=())
        return compile_program_output(plain, arch, emit, formatted=False, after=after, bounds=bounds)
    except CompileError:
        raise exc from None


# ---------------------------------------------------------------- outputs


def check_output_path(path: str) -> None:
    """Raise the OSError that writing `path` would meet: its directory must exist
    (tilec, like gcc and nvcc, creates none) and `path` must not be a directory."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    if not os.path.isdir(directory):
        missing = os.path.dirname(path) or directory
        raise FileNotFoundError(errno.ENOENT, f"no such directory '{missing}' (create it first)", path)


def is_device(path: str) -> bool:
    """`path` is an existing file that is not a regular file or directory (`/dev/null`, a FIFO):
    written in place, never replaced by a rename nor removed after a failure."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_atomic(path: str, data: str | bytes) -> None:
    """Write `path` via a temporary file in the same directory and a rename; an
    error names `path`, never the temporary file. A device (`-o /dev/null`) is
    written in place: renaming over it would replace the device with a file."""
    check_output_path(path)
    if is_device(path):
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=os.path.dirname(os.path.abspath(path))
        )
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        remove_output(tmp)
        raise OSError(exc.errno, exc.strerror, path) from None
    except BaseException:
        remove_output(tmp)
        raise


def remove_output(path: str | None) -> None:
    """Delete a (stale) output, best effort: what is missing or cannot be removed
    (a directory given as the output, a read-only directory) stays, and the error
    that made the caller clean up is the one reported. A device is no output to remove."""
    if path and not is_device(path):
        try:
            os.unlink(path)
        except OSError:
            pass


def _make_escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def depfile_text(targets: str | Sequence[str], files: Iterable[str], phony: bool = False) -> str:
    """Make-format dependencies of `targets` on `files`, as `gcc -MD` writes
    them (`phony` adds an empty rule per dependency, as `-MP` does). When the
    first target is absolute the dependencies are made absolute too, so the
    depfile means the same from any directory (CMake's DEPFILE)."""
    targets = [targets] if isinstance(targets, str) else list(targets)
    deps = list(dict.fromkeys(files))
    if os.path.isabs(targets[0]):
        deps = list(dict.fromkeys(os.path.abspath(d) for d in deps))
    head = " ".join(_make_escape(t) for t in targets) + ":"
    lines = [head + "".join(f" \\\n  {_make_escape(d)}" for d in deps)]
    if phony:
        lines += [f"\n{_make_escape(d)}:" for d in deps[1:]]
    return "\n".join(lines) + "\n"


def header_text(cu_text: str, source: str, arch: str = "sm_80") -> str:
    """C prototypes of the launchers in `cu_text`, read from its ABI line; the
    stream type and headers are those of `arch`'s target record."""
    from tilec.dtypes import DTYPES
    from tilec.runtime import parse_abi
    from tilec.targets import get_target

    target = get_target(arch)
    kernels = parse_abi(cu_text)["kernels"]
    scalar_types = {DTYPES[s["dtype"]].cname for k in kernels for s in k.get("scalars", [])}
    of_name = target.header_rules.of_name
    needed = {target.header_rules.always} | {of_name[t] for t in scalar_types if t in of_name}
    lines = [
        f"// Generated by tilec {tilec.__version__} from {source}. Do not edit.",
        "#pragma once",
        "",
        *[f"#include <{h}>" for h in target.headers if h in needed],
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
    ]
    for kernel in kernels:
        lines += ["", *_prototype(kernel, DTYPES, target.launch)]
    lines += ["", "#ifdef __cplusplus", '}  // extern "C"', "#endif", ""]
    return "\n".join(lines)


def _prototype(kernel: dict, dtypes: Mapping, launch: Launch) -> list[str]:
    name = kernel["name"]
    args: list[tuple[str, str]] = []
    shaped: set[str] = set()  # names in some shape; the other dims are strides only
    for t in kernel.get("tensors", []):
        shape = ", ".join(str(d) for d in t["shape"])
        layout = "contiguous" if "strides" not in t else f"strides ({', '.join(str(s) for s in t['strides'])})"
        args.append((f"void* {t['name']}", f"device pointer, {t['dtype']}[{shape}], {layout}"))
        shaped |= {d for d in t["shape"] if isinstance(d, str)}
    for s in kernel.get("scalars", []):
        args.append((f"{dtypes[s['dtype']].cname} {s['name']}", f"scalar {s['dtype']}"))
    for d in kernel.get("dims", []):
        args.append((f"int {d}", "symbolic dimension" if d in shaped else "symbolic stride, in elements"))
    args.append((launch.stream_param, "stream to launch on"))
    lines = [launch.prototype_doc.format(name=name), f"int {name}("]
    for i, (decl, comment) in enumerate(args):
        sep = ");" if i == len(args) - 1 else ","
        lines.append(f"    {decl}{sep}  // {comment}")
    return lines


# ---------------------------------------------------------------- cache


def cache_root() -> str:
    """`$TILEC_CACHE`, else `$XDG_CACHE_HOME/tilec`, else ~/.cache/tilec."""
    root = os.environ.get("TILEC_CACHE")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tilec")


def _tilec_fingerprint() -> str:
    """tilec's version plus size/mtime of its own files: an edited compiler
    (editable install) never serves output of its older self."""
    h = hashlib.sha256(tilec.__version__.encode())
    pkg = os.path.dirname(os.path.abspath(tilec.__file__))
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".tmp")):
                continue
            st = os.stat(os.path.join(dirpath, name))
            h.update(f"{os.path.relpath(os.path.join(dirpath, name), pkg)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    h.update(_clang_format_stamp().encode())
    return h.hexdigest()


def _clang_format_stamp() -> str:
    """The formatter binary is part of the output's recipe too."""
    try:
        from tilec.format import clang_format_path

        path = clang_format_path()
        st = os.stat(path)
        return f"{path}:{st.st_size}:{st.st_mtime_ns}"
    except Exception:  # noqa: BLE001 - missing is reported when formatting, not here
        return "no clang-format"


def _file_hash(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _cache_key(path: str, defines: Mapping[str, str], arch: str, emit: str, after: str | None) -> str | None:
    main = _file_hash(path)
    if main is None:
        return None
    blob = json.dumps(
        [_tilec_fingerprint(), path, os.path.abspath(path), main, sorted(defines.items()), arch, emit, after],
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _cache_file(key: str) -> str:
    return os.path.join(cache_root(), "build", key[:2], key + ".json")


def _cache_get(key: str) -> Result | None:
    try:
        with open(_cache_file(key), encoding="utf-8") as f:
            entry = json.load(f)
        deps = entry["deps"]
        if any(_file_hash(d["abs"]) != d["sha256"] for d in deps):
            return None
        return Result(entry["text"], tuple(d["path"] for d in deps), cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_put(key: str, result: Result) -> None:
    deps = [{"path": p, "abs": os.path.abspath(p), "sha256": _file_hash(p)} for p in result.files]
    if any(d["sha256"] is None for d in deps):
        return
    try:
        os.makedirs(os.path.dirname(_cache_file(key)), exist_ok=True)
        write_atomic(_cache_file(key), json.dumps({"deps": deps, "text": result.text}))
    except OSError:
        pass  # a read-only cache only costs speed
