"""Shared test fixtures. `pytest --update-golden` rewrites golden files.

A golden test compares produced text with a file checked in beside its input
(`tests/golden/**/x.tile` -> `x.cu` / `x.err`). A missing golden fails.
"""

from __future__ import annotations

import pathlib

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from the current output")


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
