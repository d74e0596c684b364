"""The corpus GPU table's specs (bench/corpus_gpu.py) against the corpus, and the prebuild that feeds it.

No GPU and no torch needed: corpus_gpu.py imports only the standard library at module level.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import corpus_gpu  # noqa: E402
import corpus_prebuild  # noqa: E402


def test_every_program_that_builds_has_a_spec_and_no_other() -> None:
    buildable = set(corpus_prebuild.buildable())
    assert len(buildable) >= 22
    assert sorted(buildable - set(corpus_gpu.SPECS)) == [], "corpus programs without a spec"
    assert sorted(set(corpus_gpu.SPECS) - set(corpus_prebuild.corpus_programs())) == [], "specs of no program"
    assert sorted(set(corpus_gpu.SPECS) - buildable) == [], "specs of programs that do not build for sm_90a"


def test_corpus_gpu_imports_no_torch_at_module_level() -> None:
    text = (ROOT / "bench" / "corpus_gpu.py").read_text()
    top = [ln for ln in text.splitlines() if ln.startswith(("import ", "from "))]
    assert not [ln for ln in top if "torch" in ln or "tilelang" in ln or "tilec" in ln], top


@pytest.mark.parametrize("name", sorted(corpus_gpu.SPECS))
def test_spec_is_consistent(name: str) -> None:
    spec = corpus_gpu.SPECS[name]
    assert spec.name == name
    header = (ROOT / "tests" / "corpus" / "tilelang" / f"{name}.tile").read_text()
    match = corpus_prebuild.SOURCE.match(header)
    assert match and match.group(1) == spec.source, "the spec's TileLang source is the .tile header's"
    assert sum(c.timed for c in spec.cases) == 1, "exactly one timed case"
    assert not any(c.timed and c.also_timed for c in spec.cases), "the row's case is not also timed"
    assert all(c.build in spec.builds for c in spec.cases), "every case runs a build the prebuild makes"
    assert len({c.label for c in spec.cases}) == len(spec.cases)
    assert spec.parts and len(set(spec.parts)) == len(spec.parts)
    assert spec.load in ("import", "defs")
    assert spec.how, "how TileLang's kernel is called"
    assert len(spec.cases) > 1 or spec.no_ragged, "a ragged case, or why there is none"
    params = corpus_prebuild.params_of(header, {})
    for defines in spec.builds.values():
        assert set(defines) <= set(params), "-D overrides only params the file has"


def test_streamk_schedule_matches_the_tile_params() -> None:
    # the .tile's derived params, evaluated as tilec does for the defaults: the example's own values
    sched = corpus_gpu.streamk_schedule(256, 1024, 512)
    assert sched["streamk_tiles"] == 20 and sched["sm_patition_factor"] == 1
    assert sched["streamk_full_tiles"] == 20 * 16 // 108 and sched["streamk_partial_tiles"] == 20 * 16 % 108


def test_definitions_only_keeps_what_a_jit_function_needs() -> None:
    import ast

    tree = ast.parse("import os\nM = 8192\nX = f(M)\ndef g():\n    return M\nprint(g())\nclass C:\n    pass\n")
    kept = corpus_gpu.definitions_only(tree)
    assert [type(n).__name__ for n in kept.body] == ["Import", "Assign", "FunctionDef", "ClassDef"]


def test_prebuild_writes_an_entry_per_spec_build(tmp_path: pathlib.Path) -> None:
    mirror = corpus_prebuild.MIRROR if os.path.isdir(corpus_prebuild.MIRROR) else ""
    out = tmp_path / "corpus"
    assert corpus_prebuild.main(["--out", str(out), "--mirror", mirror]) == 0
    manifest = json.loads((out / corpus_gpu.MANIFEST).read_text())
    expected = {corpus_gpu.build_id(n, b) for n, s in corpus_gpu.SPECS.items() for b in s.builds}
    assert set(manifest["builds"]) == expected
    for bid, entry in manifest["builds"].items():
        assert entry["ok"], (bid, entry.get("error"))
        assert entry["arch"] == "sm_90a"
        spec = corpus_gpu.SPECS[entry["program"]]
        assert entry["defines"] == spec.builds[entry["build"]]
        assert all(entry["params"][k] == v for k, v in entry["defines"].items())
        text = (out / entry["cu"]).read_text()
        assert text.splitlines()[1].startswith("// tilec-abi:")
        assert entry["tilelang_source"] == f"tilelang/{spec.source}"
        if mirror:
            assert (out / entry["tilelang_source"]).is_file()
    assert set(manifest["programs"]) == set(corpus_gpu.SPECS)
    assert set(manifest["not_built"]) == set(corpus_prebuild.corpus_programs()) - set(corpus_gpu.SPECS)


def test_corpus_folder_is_git_ignored() -> None:
    assert "/.corpus/" in (ROOT / ".gitignore").read_text().splitlines()
