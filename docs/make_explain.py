"""Regenerate docs/explain.md and its picture by running `tilec explain` (run from the repository root).

python docs/make_explain.py
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SVG = "docs/explain-flash_attention-acc_s.svg"
GEMM = ["examples/gemm.tile"]
FLASH = ["examples/flash_attention.tile", "--svg", SVG, "--buffer", "acc_s"]

INTRO = """# Seeing what the compiler did: `tilec explain`

`tilec explain FILE.tile` prints, for each kernel, what tilec inferred and chose:

1. **Buffers**: every tensor and allocation with its layout. A fragment's layout is its thread
   digits and register digits (`threads [4@1/2 8@0/1 ...]`: 4 threads along dim 1 at stride 2, then
   8 along dim 0 at stride 1; an extent without `@` is replication), and the last column is what it
   costs each thread in registers. A shared tile is row-major, with the XOR swizzle or the padded
   rows that its gemm's operand loads (ldmatrix) need to be free of bank conflicts. A tensor
   declared with `strides=` shows them (`strides (sB, sS, sH, 1)`), and, when its last stride is
   not the literal 1, that it is read and written element by element (no vector accesses, no TMA);
   on sm_90a the totals name the tensor maps built from strides and their pitches.
2. **Tile ops** in source order (`file:line`; ops of an imported macro point at their own file), the
   instruction lowering uses for each, and the work per thread.
3. **Pipeline plan** of every `Pipelined` loop: the stages requested, what tilec does with them
   (copies issued ahead as cp.async into one copy of their tiles per stage, or why a loop runs
   plain), and the stage each statement runs in. A loop with a manual schedule
   (`Pipelined(..., order=, stage=, group=)`) lists each statement's stage, order (its group's, with
   `group=`) and the iteration it works on in iteration k of the emitted loop (`k + 1`: one ahead;
   a copy's stage of its tile), with the prologue's length and the groups each wait leaves in flight;
   a schedule that is the inferred pipeline says the code is the same, and on sm_90a a loop that
   would have had warp roles says they are off (`tests/golden/explain/pipeline_schedule.txt`).
4. **Totals**: dynamic shared memory (from the lowered kernel, scratch included), what each loop
   that synchronizes runs per iteration (block barriers, those inside tile ops' own code apart, such
   as a cross-warp reduction's; on sm_90a the proxy fences and the waits for wgmma groups and
   mbarriers), and an estimate of registers per thread.

On a terminal the tables are drawn with rich; piped, they are the plain text below (deterministic).
Options: `--kernel NAME`, `-D NAME=VALUE`, `--arch`, and `--svg OUT.svg --buffer NAME` to draw a
fragment's thread-to-element map (`--color-by warp|thread`).

This page is generated: `python docs/make_explain.py` rewrites it and the picture.
"""

PICTURE = """The score accumulator `acc_s` (128x64 float32, 128 threads) as `--svg` draws it: each cell is
one element, labelled with the thread that holds it (`T<k>`) and its register slot (`r<s>`),
coloured by warp. It has mma.sync's accumulator layout: each warp holds 32 rows, and within a warp
thread = 4 * (row % 8) + (column % 8) // 2, so a thread holds pairs of adjacent columns, every 8th
column pair of rows 8 apart, and the 4 threads sharing a row are 4 consecutive lanes of one warp,
which is why `reduce_max(acc_s, m, dim=1)` needs only shuffles over 4 lanes (`shfl.xor over 4
lanes` above). Only the top-left 16x16 block of the tile is drawn.

![acc_s thread-to-element map](explain-flash_attention-acc_s.svg)
"""


def explain(args: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), NO_COLOR="1")
    cmd = [sys.executable, "-m", "tilec", "explain", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout


def page() -> str:
    parts = [INTRO, "## GEMM\n", "```text", "$ tilec explain " + " ".join(GEMM), explain(GEMM) + "```\n"]
    parts += ["## Flash attention\n", "```text", "$ tilec explain " + " ".join(FLASH), explain(FLASH) + "```\n"]
    parts.append(PICTURE)
    return "\n".join(parts)


if __name__ == "__main__":
    (ROOT / "docs" / "explain.md").write_text(page())
    print(f"wrote docs/explain.md and {SVG}")
