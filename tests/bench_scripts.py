"""Loading a script of bench/ as a module, for the tests of the benchmark scripts."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType


def load_bench(name: str) -> ModuleType:
    """A script of bench/ as a module (`from bench_scripts import load_bench`); registered in
    sys.modules, where its dataclasses look their module up."""
    path = pathlib.Path(__file__).resolve().parent.parent / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
