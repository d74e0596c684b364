"""Signatures of the built-in names of the .tile language, and argument binding.

    gemm(A, B, C, transpose_A=False, transpose_B=False, policy=Square, clear_accum=False)

`bind` matches a call's positional and keyword arguments to a signature the
way Python does, and reports arity and keyword mistakes as diagnostics:

    gemm(A_s, B_s)               -> "gemm() is missing argument 'C'"
    copy(a, b, c)                -> "copy() takes 2 arguments but 3 were given"
    reduce_max(s, d, dims=1)     -> "reduce_max() has no keyword 'dims'" + "did you mean 'dim'?"
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from tilec import syntax as S
from tilec.diagnostics import error
from tilec.dtypes import DTYPE_NAMES
from tilec.fold import MATH_FUNCS
from tilec.source import Span
from tilec.tir import Scope


@dataclass(frozen=True)
class Sig:
    """Positional parameters (the first `required` of them are required),
    then parameters with defaults, which positional arguments fill too unless
    `keyword_only`. `variadic` collects extra positional arguments under "*"
    (between `required` and `most`)."""

    params: tuple[str, ...] = ()
    keywords: dict[str, object] = field(default_factory=dict)
    required: int | None = None  # default: all params
    variadic: bool = False
    most: int | None = None
    keyword_only: bool = False

    def text(self, name: str) -> str:
        parts = list(self.params) if not self.variadic else ["..."]
        parts += ["*"] if self.keyword_only and self.keywords else []
        parts += [f"{k}={_show(v)}" for k, v in self.keywords.items()]
        return f"{name}({', '.join(parts)})"


def _show(v: object) -> str:
    return f'"{v}"' if isinstance(v, str) and v not in POLICIES else str(v)


_REDUCE = Sig(("src", "dst"), {"dim": -1, "clear": True})
_ARG_REDUCE = Sig(("src", "dst"), {"dim": -1, "values": None})  # values: a fragment for the max / min too

TILE_OPS: dict[str, Sig] = {
    "copy": Sig(("src", "dst"), {"pad": 0}, keyword_only=True),
    "gemm": Sig(
        ("A", "B", "C"), {"transpose_A": False, "transpose_B": False, "policy": "Square", "clear_accum": False}
    ),
    "fill": Sig(("buf", "value")),
    "clear": Sig(("buf",)),
    "reduce_max": _REDUCE,
    "reduce_min": _REDUCE,
    "reduce_sum": _REDUCE,
    "reduce_abssum": _REDUCE,
    "reduce_absmax": _REDUCE,
    "reduce_bitand": _REDUCE,
    "reduce_bitor": _REDUCE,
    "reduce_bitxor": _REDUCE,
    "reduce_argmax": _ARG_REDUCE,
    "reduce_argmin": _ARG_REDUCE,
    "cumsum": Sig(("src", "dst"), {"dim": 0, "reverse": False}),
    "cummax": Sig(("src", "dst"), {"dim": 0, "reverse": False}),
    "cummin": Sig(("src", "dst"), {"dim": 0, "reverse": False}),
    "atomic_add": Sig(("dst", "value")),
    "atomic_max": Sig(("dst", "value")),
    "atomic_min": Sig(("dst", "value")),
    "use_swizzle": Sig(("panel_size",), {"order": "row"}),
    "annotate_layout": Sig(("buf", "layout")),
    "print": Sig(("value",), {"msg": ""}),
    "device_assert": Sig(("cond",), {"msg": ""}),
    "sync_threads": Sig(()),
}

ALLOCS: dict[str, Sig] = {
    "alloc_shared": Sig(("shape", "dtype")),
    "alloc_fragment": Sig(("shape", "dtype")),
    "alloc_local": Sig(("shape", "dtype")),
    "alloc_var": Sig(("dtype",), {"init": None}),
}
ALLOC_SCOPE: dict[str, Scope] = {
    "alloc_shared": "shared",
    "alloc_fragment": "fragment",
    "alloc_local": "local",
    "alloc_var": "var",
}

LOOPS: dict[str, Sig] = {
    "Pipelined": Sig(
        (), {"num_stages": 0, "order": None, "stage": None, "group": None}, required=1, variadic=True, most=2
    ),
    "Parallel": Sig((), {}, required=1, variadic=True),
    "serial": Sig((), {}, required=1, variadic=True, most=3),
    "range": Sig((), {}, required=1, variadic=True, most=3),
    "Serial": Sig((), {}, required=1, variadic=True, most=3),  # TileLang's T.Serial
    "unroll": Sig((), {}, required=1, variadic=True, most=3),
    "vectorized": Sig((), {}, required=1, variadic=True, most=3),  # TileLang's T.vectorized: an unrolled loop
}

FUNCS: dict[str, Sig] = {
    "ceildiv": Sig(("a", "b")),
    "min": Sig((), {}, required=2, variadic=True),
    "max": Sig((), {}, required=2, variadic=True),
    "abs": Sig(("x",)),
    "clamp": Sig(("x", "lo", "hi")),
    "pow": Sig(("x", "y")),
    "cast": Sig(("x", "dtype")),
    "reinterpret": Sig(("x", "dtype")),  # TileLang's T.reinterpret(value, dtype): the same bits as another type
    "if_then_else": Sig(("cond", "a", "b")),
    "infinity": Sig(("dtype",)),
    "max_value": Sig(("dtype",)),
    "min_value": Sig(("dtype",)),
    "thread_index": Sig(()),
    "get_thread_binding": Sig((), {"dim": 0}),  # TileLang's name of thread_index()
    "lane_index": Sig(()),
    "warp_index": Sig(()),
    "shfl_xor": Sig(("x", "mask")),
    "shfl_down": Sig(("x", "delta")),
    "call_extern": Sig((), {}, required=2, variadic=True),  # (dtype, "name", args...)
    **{f: Sig(("x",)) for f in MATH_FUNCS},
}

SPECIAL: dict[str, Sig] = {
    "Kernel": Sig((), {"threads": 128}, required=1, variadic=True, most=3),
    "Tensor": Sig(("shape", "dtype"), {"data": None, "strides": None}),  # TileLang's order
}

POLICIES = ("Square", "FullRow", "FullCol")
SHARED_LAYOUTS = ("row_major", "padded", "swizzle_32B", "swizzle_64B", "swizzle_128B")

ALL_SIGS: dict[str, Sig] = {**TILE_OPS, **ALLOCS, **LOOPS, **FUNCS, **SPECIAL}
BUILTIN_NAMES: tuple[str, ...] = tuple(ALL_SIGS) + tuple(DTYPE_NAMES) + POLICIES


_SUB_BYTE_HINT = "use int4, uint4 or float4_e2m1, or store the values in uint8 and unpack them with shifts and masks"

# TileLang names that tilec does not have yet: (message, hint). Reported as such,
# not as an unknown name with a near miss (`int4` is not a misspelt `int64`).
UNSUPPORTED: dict[str, tuple[str, str]] = {
    **{
        t: (f"{t} (sub-byte types) is not supported yet", _SUB_BYTE_HINT)
        for t in (
            *(f"{sign}int{bits}" for sign in ("", "u") for bits in (1, 2)),
            *("float6_e2m3fn", "float6_e3m2fn"),
        )
    },
    "Persistent": (
        "Persistent (a persistent tile loop) is not supported yet",
        "launch one block per SM and loop over the tiles yourself: for w in serial(ceildiv(tiles, sm_num))",
    ),
    "im2col": ("im2col is not supported yet", "copy the input window of each tile with copy() of a region"),
    "alloc_barrier": ("alloc_barrier (explicit mbarriers) is not supported yet", "Pipelined places the barriers"),
}


def unsupported(name: str, span: Span) -> None:
    """Report a TileLang name tilec does not support yet; nothing for other names."""
    if name in UNSUPPORTED:
        message, hint = UNSUPPORTED[name]
        raise error(span, message, hint=hint)


def did_you_mean(name: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    if not close and name.lower() in {c.lower() for c in candidates}:
        close = [c for c in candidates if c.lower() == name.lower()][:1]
    return f"did you mean '{close[0]}'?" if close else None


@dataclass
class Bound:
    """The arguments of one call matched to a signature: `args` by parameter
    name (only those given), `rest` the variadic positional ones."""

    args: dict[str, S.Expr]
    rest: list[S.Expr]


def bind(call: S.Call, name: str, sig: Sig) -> Bound:
    """Python's rules: positional arguments fill `params` then `keywords` in
    order (variadic and keyword-only signatures take keywords by name only)."""
    names = list(sig.params) + ([] if sig.variadic or sig.keyword_only else list(sig.keywords))
    given = len(call.args)
    most = sig.most if sig.variadic else len(names)
    required = len(sig.params) if sig.required is None else sig.required
    if most is not None and given > most:
        takes = f"{most} argument{'s' if most != 1 else ''}" if most == required else f"at most {most} arguments"
        raise error(
            call.args[most].span.to(call.args[-1].span),
            f"{name}() takes {takes} but {given} were given",
            hint=f"the signature is {sig.text(name)}",
        )
    bound = Bound({}, list(call.args)) if sig.variadic else Bound(dict(zip(names, call.args)), [])
    for kw in call.keywords:
        _bind_keyword(kw, name, sig, bound, names)
    if sig.variadic and len(bound.rest) < required:
        raise error(
            call.span,
            f"{name}() needs at least {required} argument{'s' if required > 1 else ''}",
            hint=f"the signature is {sig.text(name)}",
        )
    missing = [p for p in sig.params[:required] if p not in bound.args]
    if not sig.variadic and missing:
        raise error(
            call.span, f"{name}() is missing argument '{missing[0]}'", hint=f"the signature is {sig.text(name)}"
        )
    return bound


def _bind_keyword(kw: S.Keyword, name: str, sig: Sig, bound: Bound, names: list[str]) -> None:
    if kw.name in bound.args:
        raise error(kw.name_span, f"argument '{kw.name}' given twice in {name}()")
    if kw.name in sig.keywords or kw.name in names:
        bound.args[kw.name] = kw.value
        return
    options = list(dict.fromkeys(names + list(sig.keywords)))
    hint = did_you_mean(kw.name, options)
    if kw.name == "strides":
        hint = "strides= belongs to a kernel's tensor parameters: X: Tensor((dims...), dtype, strides=(...))"
    if hint is None:
        hint = f"{name}() takes the keywords {', '.join(options)}" if options else f"{name}() takes no keywords"
    raise error(kw.name_span, f"{name}() has no keyword '{kw.name}'", hint=hint)
