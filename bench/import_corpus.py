"""Convert every TileLang corpus program's source with `tilec import-tilelang` and compare with the corpus.

    .venv/bin/python bench/import_corpus.py [--mirror /work/.mirror/tile-ai+tilelang/repo] [--markdown]

For each tests/corpus/tilelang/*.tile, the source its first line names (`# source: examples/... @ COMMIT`)
is read from the bare git mirror of tile-ai/tilelang at that commit, converted into a temporary
directory, and the result built for sm_80 and sm_90a. "hand edits" compares it with the hand-written
corpus file: "none" when both build to the same CUDA for both targets (comments aside), else what
differs (params, kernels, code). The table is printed as text, or as Markdown with --markdown.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tilec import driver  # noqa: E402
from tilec.diagnostics import CompileError  # noqa: E402
from tilec.import_tilelang import convert  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "tilelang"
MIRROR = "/work/.mirror/tile-ai+tilelang/repo"
ARCHES = ("sm_80", "sm_90a")
SOURCE = re.compile(r"^# source: (examples/\S+\.py) @ ([0-9a-f]{40})$", re.M)
PARAM = re.compile(r"^param (\w+) = (.*?)(?:\s+#.*)?$", re.M)
KERNEL = re.compile(r"^kernel (\w+)\(", re.M)


def read_source(mirror: str, rel: str, commit: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={mirror}", "show", f"{commit}:{rel}"], check=True, capture_output=True, text=True
    ).stdout


def build(path: pathlib.Path, arch: str) -> str | None:
    """The CUDA of `path` for `arch` without its comment lines, or None if it does not build."""
    try:
        text = driver.compile_program_text(driver.elaborate(str(path), {}, arch), arch, formatted=False)
    except CompileError:
        return None
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def first_error(path: pathlib.Path, arch: str) -> str:
    try:
        driver.compile_program_text(driver.elaborate(str(path), {}, arch), arch, formatted=False)
    except CompileError as exc:
        return exc.diagnostics[0].message
    return ""


def differences(converted: str, corpus: str) -> list[str]:
    """What differs between the two .tile texts, as a reader would list it."""
    mine, theirs = dict(PARAM.findall(converted)), dict(PARAM.findall(corpus))
    found = [f"{n} {mine[n]} (corpus {theirs[n]})" for n in mine if n in theirs and mine[n] != theirs[n]]
    found += [f"corpus param {n} = {theirs[n]}" for n in theirs if n not in mine]
    kernels, corpus_kernels = KERNEL.findall(converted), KERNEL.findall(corpus)
    if kernels != corpus_kernels:
        found.append(f"kernels {', '.join(kernels)} (corpus {', '.join(corpus_kernels)})")
    return found


def row(tile: pathlib.Path, mirror: str, work: pathlib.Path) -> tuple[str, str, str, str, str]:
    corpus = tile.read_text()
    match = SOURCE.match(corpus)
    assert match, tile
    rel, commit = match.groups()
    out = work / f"{tile.stem}.tile"
    try:
        out.write_text(convert(read_source(mirror, rel, commit), rel, source_commit=commit))
    except CompileError as exc:
        d = exc.diagnostics[0]
        where = f"{d.span.line}:{d.span.column}: " if d.span else ""
        return tile.stem, "diagnostic", "-", "-", where + d.message
    converted = out.read_text()
    mine = {a: build(out, a) for a in ARCHES}
    builds = [a for a in ARCHES if mine[a] is not None]
    compiles = "yes" if len(builds) == len(ARCHES) else (", ".join(builds) + " only" if builds else "no")
    if not builds:
        return tile.stem, "yes", compiles, "yes", first_error(out, ARCHES[-1])
    theirs = {a: build(tile, a) for a in ARCHES}
    same = all(mine[a] == theirs[a] for a in builds)
    diffs = differences(converted, corpus)
    if same and (builds == list(ARCHES) or all(theirs[a] is None for a in ARCHES if a not in builds)):
        return (
            tile.stem,
            "yes",
            compiles,
            "none",
            "same CUDA as the corpus file" + (f" ({'; '.join(diffs)})" if diffs else ""),
        )
    why = "; ".join(diffs) or "the generated code differs"
    if len(builds) < len(ARCHES):
        why = f"{first_error(out, next(a for a in ARCHES if a not in builds))}; {why}"
    return tile.stem, "yes", compiles, "yes", why


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=MIRROR, help="bare git mirror of tile-ai/tilelang")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row(t, args.mirror, pathlib.Path(tmp)) for t in sorted(CORPUS.glob("*.tile"))]
    head = ("program", "converted", "compiles", "hand edits", "why")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    else:
        width = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        for r in [head, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r[:4], width, strict=True)) + "  " + r[4])
    good = sum(1 for r in rows if r[2] == "yes" and r[3] == "none")
    print(f"\n{good} of {len(rows)} convert without hand edits and compile for {' and '.join(ARCHES)}")


if __name__ == "__main__":
    main()
