"""The code blocks of README.md and docs/*.md, checked against the compiler so the docs cannot drift.

Every fenced block names what it holds in its info string; a bare ``` fence fails the test. The
forms this test reads:

    ```tile                      a whole .tile program: compiled for sm_80 (Tile IR to CUDA C++,
                                 no clang-format); imports resolve to examples/
    ```tile arch=sm_90a          ... compiled for the targets named (several: arch=sm_80,sm_90a)
    ```tile error="text"         ... must fail (check or build) with a diagnostic holding "text"
    ```tile snippet              statements: parsed inside a kernel's Kernel block
    ```tile sketch               notation (`[, gy]`, alternatives): not compiled
    ```sh                        each `tilec ...` command: its subcommand and every flag it names
                                 exist (the click options `tilec --help` prints)

Any other language (text, c++, make, cmake, json, python) is shown as written. docs/explain.md is
generated output (tests/test_explain.py checks it against `tilec explain`).
"""

from __future__ import annotations

import pathlib
import re
import shlex
import shutil
from dataclasses import dataclass

import click
import pytest

from tilec import cli, driver
from tilec.diagnostics import CompileError, render_all
from tilec.parse import parse
from tilec.source import SourceFile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)```(.*)$")
KNOWN = {"tile", "sh", "text", "c++", "c", "make", "cmake", "json", "python"}


@dataclass(frozen=True)
class Block:
    doc: str
    line: int  # of the opening fence
    info: str
    text: str

    @property
    def lang(self) -> str:
        return self.info.split()[0] if self.info else ""

    @property
    def words(self) -> list[str]:
        return shlex.split(self.info)[1:]

    def option(self, key: str) -> str | None:
        return next((w.split("=", 1)[1] for w in self.words if w.startswith(key + "=")), None)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(path: pathlib.Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, info, start = m.group(1), m.group(2).strip(), i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :])
            i += 1
        found.append(Block(str(path.relative_to(ROOT)), start + 1, info, "\n".join(body) + "\n"))
        i += 1
    return found


ALL = [b for doc in DOCS for b in blocks(doc)]
TILE = [b for b in ALL if b.lang == "tile"]
SHELL = [b for b in ALL if b.lang == "sh"]


def test_every_block_says_what_it_holds() -> None:
    unnamed = [str(b) for b in ALL if b.lang not in KNOWN]
    assert not unnamed, f"fences without a known language (```tile, ```text, ...): {unnamed}"
    assert len(TILE) >= 5 and SHELL


def _program_dir(block: Block, tmp_path: pathlib.Path) -> pathlib.Path:
    """tmp_path with the block as doc.tile and the examples' files it imports beside it."""
    for name in re.findall(r'^import "([^"]+)"', block.text, re.M):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    (tmp_path / "doc.tile").write_text(block.text, encoding="utf-8")
    return tmp_path / "doc.tile"


def _compile(path: pathlib.Path, arch: str) -> None:
    program = driver.check_file(str(path), arch=arch)
    driver.compile_program_text(program, arch=arch, formatted=False)


def _snippet(block: Block) -> None:
    body = "".join(f"        {line}\n" for line in block.text.splitlines())
    text = f"kernel k(A: Tensor((M, N), float16)):\n    with Kernel(1, threads=128) as bx:\n{body}"
    parse(SourceFile(f"{block}", text))


@pytest.mark.parametrize("block", TILE, ids=str)
def test_tile_block(block: Block, tmp_path: pathlib.Path) -> None:
    if "sketch" in block.words:
        return
    if "snippet" in block.words:
        _snippet(block)
        return
    path = _program_dir(block, tmp_path)
    expected = block.option("error")
    for arch in (block.option("arch") or "sm_80").split(","):
        if expected is None:
            _compile(path, arch)
            continue
        with pytest.raises(CompileError) as e:
            _compile(path, arch)
        assert expected in render_all(e.value.diagnostics), f"{block}: wrong error for {arch}"


def _commands(block: Block) -> list[list[str]]:
    """The tilec command lines of a shell block, as words after `tilec` (`$(tilec ...)` too)."""
    found = []
    for line in block.text.splitlines():
        line = line.split("  #", 1)[0].removeprefix("$ ")
        for m in re.finditer(r"(?:^|\$\(|\s)(?:\.venv/bin/)?tilec\s+([^)]*)", line):
            found.append([w.strip("[]") for w in shlex.split(m.group(1))])
    return found


def _flags(command: click.Command) -> set[str]:
    names = {"-h", "--help"}
    for p in command.params:
        names.update(p.opts, p.secondary_opts)
    return names


@pytest.mark.parametrize("block", SHELL, ids=str)
def test_shell_block(block: Block) -> None:
    for words in _commands(block):
        command: click.Command = cli.cli
        if words and not words[0].startswith("-"):
            assert words[0] in cli.cli.commands, f"{block}: no command 'tilec {words[0]}'"
            command = cli.cli.commands[words[0]]
        for w in words[1:] if command is not cli.cli else words:
            flag = w.split("=", 1)[0]
            if flag.startswith("-") and flag != "-":
                flag = flag if flag in _flags(command) else flag[:2]  # -DNAME=VALUE is -D NAME=VALUE
                assert flag in _flags(command), f"{block}: 'tilec {command.name}' has no option {flag}"


def test_shell_commands_found() -> None:
    assert sum(len(_commands(b)) for b in SHELL) >= 7
