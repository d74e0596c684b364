"""Shared test fixtures. `pytest --update-golden` rewrites golden files.

A golden test compares produced text with a file checked in for its input
(`tests/golden/errors/x.tile` -> `x.err` beside it; `tests/golden/codegen/x.tile` ->
`codegen/sm_80/x.cu`, one directory per target; `tests/golden/ir/sm_80/gemm.tir`).
A missing golden fails.

Every compilation in the tests verifies the IR after every pass (TILEC_VERIFY=1,
read by pipeline.py; subprocess CLIs inherit it). Tests that run nvcc, CMake/Make
projects or tilec as a subprocess are marked `toolchain`: `pytest -m "not toolchain"`
is the fast path for local iteration.
"""

from __future__ import annotations

import os
import pathlib

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from the current output")


def pytest_configure(config: pytest.Config) -> None:
    os.environ["TILEC_VERIFY"] = "1"


class Golden:
    def __init__(self, update: bool):
        self.update = update

    def check(self, expected_path: pathlib.Path, actual: str) -> None:
        if self.update:
            expected_path.write_text(actual)
            return
        if not expected_path.exists():
            pytest.fail(f"missing golden file {expected_path} (run pytest --update-golden and review it)")
        expected = expected_path.read_text()
        assert actual == expected, f"output differs from {expected_path} (pytest --update-golden rewrites it)"


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    return Golden(bool(request.config.getoption("--update-golden")))
