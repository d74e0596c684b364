"""FILE.tune.json: the configuration `tilec tune` chose per shape, which `tilec build --tuned` applies.

    {"tilec_tune": 1, "source": "gemm.tile", "arch": "sm_90a", "gpu": "h200", "basis": "model",
     "default": {"block_M": "128", "block_K": "32"},
     "shapes": [{"shape": {"M": 8192, "N": 8192, "K": 8192}, "defines": {...}, "seconds": 0.0021}]}

A build knows its shape only when -D fixes the dimensions (`-D M=8192`); then it takes the
entry of the nearest shape (the least sum of |log2| ratios over the dimensions both name, the
first on a tie) among those whose bucket holds the build's sizes (`"bucket": {"M": [4097, 8192]}`,
written for `--shape M=LO..HI`: buckets.py). A build with symbolic dimensions -- the usual
one, whose launcher takes M, N, K at run time -- takes `default`, the choice for the first
`--shape` tuned. A -D on the command line wins over the file's value for the same param.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tilec.diagnostics import CompileError, Diagnostic
from tilec.tune.buckets import Range, holds

VERSION = 1


@dataclass(frozen=True, slots=True)
class Choice:
    shape: dict[str, int]
    defines: dict[str, str]
    seconds: float  # the model's estimate, or the measured median with basis "measured"
    bucket: dict[str, Range] = field(default_factory=dict)  # per ranged dimension, the sizes served


@dataclass(frozen=True, slots=True)
class TuneFile:
    source: str  # the .tile file's name
    arch: str
    gpu: str
    basis: str  # "model" or "measured"
    choices: tuple[Choice, ...]  # one per --shape, the first the default

    @property
    def default(self) -> dict[str, str]:
        return self.choices[0].defines


def dumps(t: TuneFile) -> str:
    """The JSON text, keys in a fixed order (deterministic, diffable)."""
    body = {
        "tilec_tune": VERSION,
        "source": t.source,
        "arch": t.arch,
        "gpu": t.gpu,
        "basis": t.basis,
        "default": t.default,
        "shapes": [_entry(c) for c in t.choices],
    }
    return json.dumps(body, indent=2) + "\n"


def _entry(c: Choice) -> dict:
    entry = {"shape": c.shape, "defines": c.defines, "seconds": c.seconds}
    return entry | ({"bucket": {k: list(r) for k, r in c.bucket.items()}} if c.bucket else {})


def _choice(e: dict) -> Choice:
    shape = {k: int(v) for k, v in e["shape"].items()}
    bucket = {k: (int(lo), int(hi)) for k, (lo, hi) in e.get("bucket", {}).items()}
    return Choice(shape, {k: str(v) for k, v in e["defines"].items()}, e["seconds"], bucket)


def loads(text: str, path: str) -> TuneFile:
    """Parse a tune file; a malformed one is a CompileError naming `path`."""
    try:
        body = json.loads(text)
        if body.get("tilec_tune") != VERSION:
            raise ValueError(f"not a version-{VERSION} tilec tune file")
        choices = tuple(_choice(e) for e in body["shapes"])
        if not choices:
            raise ValueError("no shapes")
        return TuneFile(body["source"], body["arch"], body["gpu"], body["basis"], choices)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CompileError([Diagnostic(None, f"{path}: not a tilec tune file ({e})")]) from None


def read(path: str) -> TuneFile:
    try:
        with open(path, encoding="utf-8") as f:
            return loads(f.read(), path)
    except OSError as e:
        raise CompileError([Diagnostic(None, f"cannot read tune file {path}: {e.strerror or e}")]) from None


def choose(t: TuneFile, defines: Mapping[str, str]) -> dict[str, str]:
    """The tuned -D values for a build with `defines`: when -D fixes dimensions the file's
    shapes name, the nearest of the shapes whose buckets hold those sizes (of all shapes when
    none does), else the default; the build's own -D win."""
    fixed = {k: int(v) for k, v in defines.items() if v.isdigit() and any(k in c.shape for c in t.choices)}
    picked = t.default
    if fixed:
        inside = [c for c in t.choices if holds(c.bucket, fixed)]
        picked = min(inside or t.choices, key=lambda c: _distance(c.shape, fixed)).defines
    return {**picked, **defines}


def _distance(shape: Mapping[str, int], fixed: Mapping[str, int]) -> float:
    return sum(abs(math.log2(shape[k] / v)) for k, v in fixed.items() if k in shape and v > 0)


def check_applies(t: TuneFile, path: str, source: str, arch: str) -> None:
    """A tune file is for one .tile file and one arch: a mismatch is a user error."""
    if os.path.basename(source) != t.source:
        raise CompileError([Diagnostic(None, f"{path} was tuned for {t.source}, not {os.path.basename(source)}")])
    if arch != t.arch:
        raise CompileError(
            [Diagnostic(None, f"{path} was tuned for --arch {t.arch}; this build is for {arch}", hint="tune again")]
        )
