"""Shape buckets: `--shape M=1..16384,N=4096,K=4096` tunes one shape per bucket of M.

    expand({"M": (1, 16384), "N": (4096, 4096), "K": (4096, 4096)})
  -> [Bucket({"M": 16384, ...}, {"M": (8193, 16384)}), Bucket({"M": 8192, ...}, {"M": (4097, 8192)}),
      ..., Bucket({"M": 1, ...}, {"M": (1, 1)})]

A range LO..HI is cut at the powers of two inside it: each bucket covers (p/2, p] and is tuned at
its upper end p, whose tiles fit every size of the bucket (the first bucket starts at LO, the last
ends at HI, tuned at HI when HI is no power of two). Several ranged dimensions give the product
of their buckets. The buckets come largest first, so the first `--shape`'s largest bucket is the
tune file's default (the choice of a build with symbolic dimensions). `tilec build --tuned` with
`-D M=3000` takes the bucket that holds 3000: the one tuned at 4096.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

Range = tuple[int, int]  # LO..HI, both included


@dataclass(frozen=True, slots=True)
class Bucket:
    shape: dict[str, int]  # the sizes tuned
    ranges: dict[str, Range]  # per ranged dimension, the sizes this bucket's choice serves


def cuts(lo: int, hi: int) -> list[Range]:
    """LO..HI cut at the powers of two inside it, smallest first: 1..8 -> (1,1) (2,2) (3,4) (5,8)."""
    ends = sorted({1 << e for e in range(hi.bit_length()) if lo <= 1 << e <= hi} | {hi})
    return [(lo if i == 0 else ends[i - 1] + 1, end) for i, end in enumerate(ends)]


def expand(spec: Mapping[str, Range]) -> list[Bucket]:
    """Every bucket of `spec` (a size per dimension, a range for some), largest first."""
    names = list(spec)
    per_dim = [list(reversed(cuts(*spec[n]))) for n in names]
    out = []
    for combo in itertools.product(*per_dim):
        shape = {n: r[1] for n, r in zip(names, combo, strict=True)}
        ranged = {n: r for n, r in zip(names, combo, strict=True) if spec[n][0] != spec[n][1]}
        out.append(Bucket(shape, ranged))
    return out


def holds(ranges: Mapping[str, Range], sizes: Mapping[str, int]) -> bool:
    """Whether every size of a dimension `ranges` names lies in its range."""
    return all(lo <= sizes[n] <= hi for n, (lo, hi) in ranges.items() if n in sizes)
