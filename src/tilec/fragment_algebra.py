"""Fragment algebra: which thread, and which of its registers, holds each element of a tile.

A `FragmentMap` is the general, symbolic form of a fragment: `index` gives
the tile element held by thread `thread` in register slot `slots` (one
variable per slot axis; the flat slot number is row-major over them), and
`replica` labels which copy of the tile a thread helps hold. The grid/vector
fragments of layout.py convert to it (`from_fragment`), and so do the
fragments of a target's matrix instructions, which no grid describes (the
CUDA ones: backends/cuda/fragments.py). An m16n8 accumulator C of a 32-lane warp:

    C (16 x 8), slots (i1, i0) = c0..c3:
        lane, (i1, i0) -> (lane // 4 + i1 * 8, lane % 4 * 2 + i0)
    reduce(C, dim=1) (a row max):
        lane, (i1,)    -> (lane // 4 + i1 * 8,)   replica lane % 4 * 2: a quad holds each row

Derivations keep the form: `reduce`/`project` (as layout.reduced/projected),
`permute` (a transposed view), `replicate`, `tile_slots`/`tile_threads`
(repeat an instruction's fragment over a warp tile and over warps), and
`addresses` composes a shared-memory Layout with a fragment. Checks enumerate
(`holders`, `cover_errors`); arith.prove_bijective proves the affine ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tilec import layout, tir
from tilec.dtypes import DType
from tilec.layout_algebra import Layout
from tilec.simplify import int_, simplify, substitute

_I = DType.int32
Slot = tuple[int, ...]


def _var(name: str, kind: tir.VarKind = "loop") -> tir.Var:
    return tir.Var(name, _I, kind)


def _bin(op: tir.BinOpName, a: tir.Expr, b: tir.Expr | int) -> tir.Expr:
    return tir.BinOp(op, a, int_(b) if isinstance(b, int) else b, _I)


@dataclass(frozen=True, slots=True)
class FragmentMap:
    """(thread, slot axes) -> tile index; `replica` (over thread) in [0, replica_extent)."""

    shape: tuple[int, ...]
    thread: tir.Var
    threads: int
    slot_vars: tuple[tir.Var, ...]
    slot_shape: tuple[int, ...]
    index: tuple[tir.Expr, ...]
    replica: tir.Expr
    replica_extent: int = 1

    @property
    def slots(self) -> int:
        return math.prod(self.slot_shape)

    @property
    def bounds(self) -> dict[tir.Var, int]:
        """Each variable's extent (for arith.simplify / can_prove / prove_bijective)."""
        return {self.thread: self.threads} | dict(zip(self.slot_vars, self.slot_shape))


def _free(e: tir.Expr, var: tir.Var) -> bool:
    """True if `var` occurs in `e`."""
    match e:
        case tir.Var():
            return e is var
        case tir.BinOp(_, a, b):
            return _free(a, var) or _free(b, var)
        case tir.UnaryOp(_, a) | tir.Cast(a):
            return _free(a, var)
        case tir.Select(c, a, b):
            return _free(c, var) or _free(a, var) or _free(b, var)
        case tir.Call(_, args):
            return any(_free(x, var) for x in args)
        case _:
            return False


# ---------------------------------------------------------------- fast integer evaluation

# Python spellings of the integer operators (indices are nonnegative: // and % are C's / and %)
_ARITH = frozenset({"+", "-", "*", "//", "%", "^", "&", "|", "<<", ">>"})
_COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})


def compile_int(e: tir.Expr, params: Sequence[tir.Var]) -> Callable[..., int]:
    """A Python function of `params` computing `e` (for enumerating whole fragments quickly):
    the expression is written out as one Python lambda, which runs several times faster than a
    tree walk per call.

        compile_int(tx % 4 * 2 + s0, (tx, s0))   ->   lambda p0, p1: (((p0 % 4) * 2) + p1)
    """
    return _compile(_python(e, params, _names(params)), params)


def compile_index(exprs: Sequence[tir.Expr], params: Sequence[tir.Var]) -> Callable[..., tuple[int, ...]]:
    """`compile_int` of several expressions at once: one function returning their tuple."""
    names = _names(params)
    return _compile("(" + "".join(f"{_python(e, params, names)}, " for e in exprs) + ")", params)


def _names(params: Sequence[tir.Var]) -> list[str]:
    return [f"p{i}" for i in range(len(params))]


# What the generated text may name: it is our own, of ints, names and these
_EVAL_GLOBALS: dict[str, Any] = {"__builtins__": {}, "int": int, "bool": bool, "range": range}


def _compile(body: str, params: Sequence[tir.Var]) -> Callable[..., Any]:
    return eval(f"lambda {', '.join(_names(params))}: {body}", _EVAL_GLOBALS)


def _python(x: tir.Expr, params: Sequence[tir.Var], names: list[str]) -> str:
    match x:
        case tir.IntImm(v):
            return str(int(v))
        case tir.Var():
            return names[params.index(x)]
        case tir.BinOp(op, a, b):
            pa, pb = _python(a, params, names), _python(b, params, names)
            if op in _ARITH:
                return f"({pa} {op} {pb})"
            if op in _COMPARE:
                return f"int({pa} {op} {pb})"
            if op in ("and", "or"):
                return f"int(bool({pa}) {op} bool({pb}))"
            raise TypeError(f"not a fragment index operator: {op!r}")
        case _:
            raise TypeError(f"not a fragment index expression: {x!r}")


def elements(frag: FragmentMap) -> dict[tuple[int, Slot], tuple[int, ...] | None]:
    """(thread, slot coordinates) -> element index, None for a padding slot (outside the tile)."""
    names, loops, inside, coords = _enumeration(frag)
    return _run(f"{{({names[0]}, {_tuple(names[1:])}): ({_tuple(coords)} if {inside} else None) {loops}}}")


def touches(
    frag: FragmentMap, dims: Sequence[tir.Var], indices: Sequence[Sequence[tir.Expr]]
) -> list[tuple[tuple[int, ...], int]]:
    """(index, thread) for every element a thread of `frag` holds and every index in `indices`
    (expressions of `dims`, the tile's coordinates): which thread touches what, in one pass.
    TypeError or ValueError when an index reads something besides `dims`."""
    names, loops, inside, coords = _enumeration(frag)
    pairs = "".join(f"({_tuple(_python(e, dims, coords) for e in ix)}, {names[0]}), " for ix in indices)
    return _run(f"[pair {loops} if {inside} for pair in ({pairs})]")


def _enumeration(frag: FragmentMap) -> tuple[list[str], str, str, list[str]]:
    """The pieces of a generated comprehension over every (thread, slot) of `frag`: the names of
    thread and slot axes, their loops, the test that the slot lies in the tile (binding the element's
    coordinates to the last list of names). Owner maps and fragment checks enumerate tens of thousands
    of slots per build; one comprehension runs them several times faster than a call per slot."""
    params = (frag.thread, *frag.slot_vars)
    names, coords = _names(params), [f"i{k}" for k in range(len(frag.index))]
    loops = " ".join(f"for {n} in range({x})" for n, x in zip(names, (frag.threads, *frag.slot_shape)))
    inside = " and ".join(
        f"0 <= ({c} := {_python(e, params, names)}) < {n}" for c, e, n in zip(coords, frag.index, frag.shape)
    )
    return names, loops, inside or "True", coords


def _tuple(items: Iterable[str]) -> str:
    return "(" + "".join(f"{x}, " for x in items) + ")"


def _run(comprehension: str) -> Any:
    return _compile(comprehension, ())()


def layout_slots(slot_shape: Sequence[int]) -> list[Slot]:
    out: list[Slot] = [()]
    for extent in slot_shape:
        out = [p + (i,) for p in out for i in range(extent)]
    return out


def holders(frag: FragmentMap) -> dict[tuple[int, ...], list[tuple[int, int, Slot]]]:
    """element index -> every (replica, thread, slot) holding it."""
    rep = compile_int(frag.replica, (frag.thread,))
    replica = [rep(t) for t in range(frag.threads)]
    out: dict[tuple[int, ...], list[tuple[int, int, Slot]]] = {}
    for (t, s), ix in elements(frag).items():
        if ix is not None:
            out.setdefault(ix, []).append((replica[t], t, s))
    return out


def cover_errors(frag: FragmentMap) -> list[str]:
    """Empty when every element is held exactly once by each replica, and replicas are labelled
    within range; otherwise a description of each failure (first few)."""
    errors: list[str] = []
    table = holders(frag)
    labels = {r for hs in table.values() for r, _, _ in hs}
    if any(not 0 <= r < frag.replica_extent for r in labels):
        errors.append(f"replica labels {sorted(labels)} outside [0, {frag.replica_extent})")
    expected = sorted(labels)
    for ix in layout_slots(frag.shape):
        reps = sorted(r for r, _, _ in table.get(ix, []))
        if reps != expected:  # every label once (`expected` has no repeats)
            errors.append(f"element {ix} held by replicas {reps}, expected each of {expected} once")
        if len(errors) > 4:
            break
    return errors


def is_bijective(frag: FragmentMap) -> bool:
    """Every (thread, slot) holds a distinct real element and every element is held: no replication."""
    table = elements(frag)
    held = [ix for ix in table.values() if ix is not None]
    return len(held) == len(table) == math.prod(frag.shape) and len(set(held)) == len(held)


def locate(frag: FragmentMap) -> dict[tuple[int, ...], tuple[int, int]]:
    """The inverse of a bijective fragment: element -> (thread, flat slot)."""
    if not is_bijective(frag):
        raise ValueError("locate needs a bijective fragment (no replication, no padding)")
    return {ix: (t, flat_slot(frag, s)) for (t, s), ix in elements(frag).items() if ix is not None}


def flat_elements(frag: FragmentMap) -> dict[tuple[int, int], tuple[int, ...] | None]:
    """(thread, flat register slot) -> element: what two fragments must agree on to be the same."""
    return {(t, flat_slot(frag, s)): ix for (t, s), ix in elements(frag).items()}


def flat_slot(frag: FragmentMap, slot: Slot) -> int:
    flat = 0
    for s, n in zip(slot, frag.slot_shape):
        flat = flat * n + s
    return flat


# ---------------------------------------------------------------- conversion from layout.Fragment


def from_fragment(frag: layout.Fragment) -> FragmentMap:
    """The FragmentMap of a layout.py fragment: one slot axis per local part (so the flat slot is
    layout.slot), the index from layout.tile_index, and the replica label numbering the
    replication digits of the thread id (least significant first, as the thread parts)."""
    tid = _var("tid", "thread")
    digits = layout.thread_coords(frag, tid)
    slot_vars = tuple(_var(f"r{k}") for k in range(len(frag.local_parts)))
    index = layout.tile_index(frag, digits, list(slot_vars))
    replica: tir.Expr = int_(0)
    extent = 1
    for part, digit in zip(frag.thread_parts, digits):
        if part.dim is None and part.extent > 1:
            replica = simplify(_bin("+", replica, _bin("*", digit, extent)))
            extent *= part.extent
    slot_shape = tuple(p.extent for p in frag.local_parts)
    return FragmentMap(frag.shape, tid, frag.threads, slot_vars, slot_shape, index, replica, extent)


# ---------------------------------------------------------------- derivations


def reduce(frag: FragmentMap, dim: int) -> FragmentMap:
    """The fragment of reduce(frag, dim) (layout.reduced for grid fragments): the slot axes that
    walk `dim` disappear, and threads that differed only along `dim` become replicas of each other."""
    along = [v for v in frag.slot_vars if _free(frag.index[dim], v)]
    for d, e in enumerate(frag.index):
        if d != dim and any(_free(e, v) for v in along):
            raise ValueError(f"slot axes of dimension {dim} also move dimension {d}: not separable")
    keep = [k for k, v in enumerate(frag.slot_vars) if v not in along]
    base = simplify(substitute(frag.index[dim], {v: int_(0) for v in along}))  # this thread's first coordinate
    shape, index = frag.shape[:dim] + frag.shape[dim + 1 :], frag.index[:dim] + frag.index[dim + 1 :]
    if not shape:
        shape, index = (1,), (int_(0),)
    replica = simplify(_bin("+", _bin("*", frag.replica, frag.shape[dim]), base))
    return FragmentMap(
        shape,
        frag.thread,
        frag.threads,
        tuple(frag.slot_vars[k] for k in keep),
        tuple(frag.slot_shape[k] for k in keep),
        index,
        replica,
        frag.replica_extent * frag.shape[dim],
    )


def permute(frag: FragmentMap, perm: Sequence[int]) -> FragmentMap:
    """frag o perm: new dimension k is old dimension perm[k] (permute(f, (1, 0)) is the transpose)."""
    if sorted(perm) != list(range(len(frag.shape))):
        raise ValueError(f"{tuple(perm)} is not a permutation of {len(frag.shape)} dimensions")
    return FragmentMap(
        tuple(frag.shape[p] for p in perm),
        frag.thread,
        frag.threads,
        frag.slot_vars,
        frag.slot_shape,
        tuple(frag.index[p] for p in perm),
        frag.replica,
        frag.replica_extent,
    )


def project(frag: FragmentMap, dims: Sequence[int]) -> FragmentMap:
    """layout.projected: keep dimensions `dims` (in that order), the others become replication."""
    for d in sorted(set(range(len(frag.shape))) - set(dims), reverse=True):
        frag = reduce(frag, d)
        dims = [k - (k > d) for k in dims]
    return permute(frag, dims)


def replicate(frag: FragmentMap, n: int) -> FragmentMap:
    """n copies side by side: thread t + k * threads holds what t holds, as replica k."""
    t = frag.thread
    inner = _bin("%", t, frag.threads)
    index = tuple(simplify(substitute(x, {t: inner})) for x in frag.index)
    old = simplify(substitute(frag.replica, {t: inner}))
    replica = simplify(_bin("+", _bin("*", _bin("//", t, frag.threads), frag.replica_extent), old))
    return FragmentMap(
        frag.shape, t, frag.threads * n, frag.slot_vars, frag.slot_shape, index, replica, frag.replica_extent * n
    )


def tile_slots(frag: FragmentMap, counts: Sequence[int]) -> FragmentMap:
    """Repeat the fragment `counts[d]` times along each dimension inside the same threads: new
    outer slot axes step over the copies (an mma fragment repeated over a warp's tile)."""
    tiles = tuple(_var(f"r{d}") for d in range(len(counts)))
    index = tuple(
        simplify(_bin("+", x, _bin("*", r, n))) if c > 1 else x
        for x, r, n, c in zip(frag.index, tiles, frag.shape, counts)
    )
    keep = [k for k, c in enumerate(counts) if c > 1]
    return FragmentMap(
        tuple(n * c for n, c in zip(frag.shape, counts)),
        frag.thread,
        frag.threads,
        tuple(tiles[k] for k in keep) + frag.slot_vars,
        tuple(counts[k] for k in keep) + frag.slot_shape,
        index,
        frag.replica,
        frag.replica_extent,
    )


def tile_threads(frag: FragmentMap, counts: Sequence[int]) -> FragmentMap:
    """Repeat the fragment over groups of threads (warps), groups row-major over `counts`:
    thread t = group * threads + t' holds element index' + group coordinate * shape."""
    t = frag.thread
    inner, group = _bin("%", t, frag.threads), _bin("//", t, frag.threads)
    index: list[tir.Expr] = []
    stride = 1
    for d in reversed(range(len(counts))):
        x = simplify(substitute(frag.index[d], {t: inner}))
        if counts[d] > 1:
            coord = _bin("%", _bin("//", group, stride), counts[d]) if stride > 1 else _bin("%", group, counts[d])
            x = simplify(_bin("+", x, _bin("*", coord, frag.shape[d])))
        index.insert(0, x)
        stride *= counts[d]
    replica = simplify(substitute(frag.replica, {t: inner}))
    return FragmentMap(
        tuple(n * c for n, c in zip(frag.shape, counts)),
        t,
        frag.threads * stride,
        frag.slot_vars,
        frag.slot_shape,
        tuple(index),
        replica,
        frag.replica_extent,
    )


def addresses(layout_: Layout, frag: FragmentMap, origin: Sequence[tir.Expr | int] = ()) -> tir.Expr:
    """Layout o fragment: the shared-memory offset of the element a (thread, slot) holds, for the
    fragment placed at `origin` of the layout's tile (defaults to the corner)."""
    origin = tuple(origin) or (0,) * len(frag.shape)
    index = [x if o == 0 else _bin("+", x, o) for x, o in zip(frag.index, origin)]
    return layout_.expr(tuple(index))
