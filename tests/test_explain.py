"""`tilec explain`: tables of layouts, instructions and pipeline plans; the fragment SVG."""

from __future__ import annotations

import pathlib
import xml.etree.ElementTree as ET

import pytest

from tilec import cli, explain
from tilec import layout as L
from tilec.driver import elaborate
from tilec.simplify import int_

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.tile"))
GOLDEN = sorted((ROOT / "tests" / "golden" / "explain").glob("*.tile"))
SVG = "{http://www.w3.org/2000/svg}"


def run(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(args))
    return int(exit_info.value.code or 0)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_explain_every_example(path: pathlib.Path) -> None:
    program = elaborate(str(path))
    text = explain.render_text(explain.explain_program(program))
    for k in program.kernels:
        assert f"kernel {k.name} (" in text
    if program.kernels:
        assert "Tile ops" in text and "dynamic shared memory:" in text and "registers per thread" in text
    assert text == explain.render_text(explain.explain_program(elaborate(str(path))))  # deterministic


@pytest.mark.parametrize("case", GOLDEN, ids=lambda p: p.name)
def test_explain_golden(case: pathlib.Path, golden) -> None:
    text = explain.render_text(explain.explain_program(elaborate(str(case))))
    golden.check(case.with_suffix(".txt"), text)


def test_explain_on_gfx90a_speaks_of_waves_and_mfma_tiles() -> None:
    # the words are the target's (Spelling.explain): waves of 64 lanes, MFMA tiles, staged copies
    gemm = ROOT / "tests" / "golden" / "codegen" / "gemm_pipelined.tile"
    text = explain.render_text(explain.explain_program(elaborate(str(gemm), arch="gfx90a"), arch="gfx90a"))
    assert "kernel gemm_pipelined (gemm_pipelined.tile:2): 64 threads = 1 x wave64, grid (" in text
    assert "MFMA 32x32x8 float16 -> float32 (matrix cores, wave64), 1x1 waves, 1x1 MFMA tiles per wave" in text
    assert "copies issued 2 iteration(s) ahead as register-staged global load + LDS store" in text
    assert "warp" not in text and "mma tiles" not in text
    mla = elaborate(str(ROOT / "examples" / "mla_decode.tile"), {"block_N": "16", "threads": "128"}, arch="gfx90a")
    assert "2x1 waves, 1x32 MFMA tiles per wave" in explain.render_text(explain.explain_program(mla, arch="gfx90a"))


def test_explain_shows_gfx942_8bit_mfma_and_a_single_buffered_pipeline() -> None:
    fp8 = ROOT / "tests" / "golden" / "codegen" / "gemm_fp8_fnuz.tile"
    text = explain.render_text(explain.explain_program(elaborate(str(fp8), arch="gfx942"), arch="gfx942"))
    assert "MFMA 32x32x16 float8_e4m3fnuz -> float32 (matrix cores, wave64)" in text
    roles = ROOT / "tests" / "golden" / "codegen" / "gemm_warp_roles.tile"
    text = explain.render_text(explain.explain_program(elaborate(str(roles), arch="gfx90a"), arch="gfx90a"))
    assert "num_stages=3, one buffer per tile (3 are over the shared memory)" in text
    assert text.count("k + 1 (registers)") == 2 and "copies of their tiles" not in text


def test_explain_shows_strides_and_the_maps_built_from_them() -> None:
    views = ROOT / "tests" / "golden" / "codegen" / "tensor_strides.tile"
    text = explain.render_text(explain.explain_program(elaborate(str(views))))
    assert "strides (sM, sN); the last stride is not 1: element by element (no vector accesses, no TMA)" in text
    assert "strides (N + 8, 1), symbolic M, N" in text
    scores = explain.render_text(
        explain.explain_program(elaborate(str(ROOT / "tests/gpu/programs/strided_views.tile")))
    )
    assert "fragment -> global: element by element (the last stride of O is not 1)" in scores
    roles = ROOT / "tests" / "golden" / "codegen" / "gemm_strides_warp_roles.tile"
    text = explain.render_text(explain.explain_program(elaborate(str(roles), arch="sm_90a"), arch="sm_90a"))
    assert "global -> shared: TMA (cp.async.bulk.tensor), 1 box of 32x128" in text
    assert "from the strides the tensors were declared with (pitches in elements, rows first: A_map: lda;" in text
    assert "(a tensor's rows not 16-byte aligned, or a stride not a multiple of 16 bytes)" in text


def test_explain_shows_views_and_their_tensor_maps() -> None:
    views = ROOT / "tests" / "golden" / "codegen" / "tensor_view.tile"
    text = explain.render_text(explain.explain_program(elaborate(str(views), arch="sm_90a"), arch="sm_90a"))
    assert "A_flat    global    float16  [Z * M, K]  a view of A's memory, row-major, symbolic Z * M, K" in text
    assert "copy(A_flat[by * 128, k * 32], A_shared)   global -> shared: TMA (cp.async.bulk.tensor)" in text


def test_instructions_follow_lowering() -> None:
    text = explain.render_text(explain.explain_program(elaborate(str(ROOT / "examples" / "gemm.tile"))))
    assert "mma.sync m16n8k16 float16 -> float32 (tensor cores), 2x4 warps, 4x8 mma tiles per warp" in text
    assert "num_stages=3: copies issued 2 iteration(s) ahead as cp.async" in text
    assert "GEMM main loop: the gemm's fragments are loaded one k step ahead" in text
    assert "global -> shared: cp.async 16 B (8 x float16), issued ahead" in text
    assert "dynamic shared memory: 147456 bytes" in text  # 3 stages of A 128x64, B 64x256 float16, swizzled
    assert "gemm operands 48" in text  # two register sets of 4x4 A + 8x2 B words


def test_reduce_plan_mirrors_lowering() -> None:
    # 256 threads along the reduced dim: 32 lanes by shuffles, 8 warps through shared memory.
    frag = L.default((1, 2048), 256, 4)
    assert explain.cross_thread_plan(frag, 1, 32) == (8, 32, 8)
    # 16 threads per row at stride 1 (the flash-attention accumulator): shuffles only.
    acc = L.accumulator((64, 64), 128)
    assert explain.cross_thread_plan(acc, 1, 32) == (4, 16, 1)
    # rows split over 8 threads at stride 16: 2 shuffle lanes (stride 16 x 2 = 32), 4 groups via shared.
    assert explain.cross_thread_plan(acc, 0, 32) == (8, 2, 4)


# ---------------------------------------------------------------- ownership


def layout_owners(frag: L.Fragment) -> dict[tuple[int, ...], tuple[set[int], int]]:
    """Owners by evaluating layout.py's own (symbolic) forward map for every
    thread and register: independent of explain's integer arithmetic."""
    held: dict[tuple[int, ...], tuple[set[int], int]] = {}
    for t in range(frag.threads):
        coords = L.thread_coords(frag, int_(t))
        if hasattr(L, "tile_index"):  # parts-based Fragment
            regs = [(L.tile_index(frag, coords, dg), L.slot(frag, dg).value) for dg in L.local_digits(frag)]
        else:
            regs = [(L.element_index(frag, coords, lc), L.local_slot(frag, lc)) for lc in L.local_indices(frag)]
        for index_exprs, slot in regs:
            index = tuple(e.value for e in index_exprs)
            if all(i < n for i, n in zip(index, frag.shape)):
                threads, old = held.setdefault(index, (set(), slot))
                assert old == slot, f"{index}: replicas in different slots"
                threads.add(t)
    return held


def _docstring_fragment() -> L.Fragment:
    """layout.py's docstring example: tile (4, 16), 8 threads, 2-element vectors along dim 1."""
    if hasattr(L, "cyclic"):
        return L.cyclic((4, 16), (2, 4), (1, 2), 8)
    return L.Fragment((4, 16), (L.Axis(2, 0), L.Axis(4, 1)), (1, 2))


def test_docstring_example() -> None:
    frag = _docstring_fragment()
    for i in range(4):
        for j in range(16):
            tids, slot = explain.owners(frag, (i, j))
            assert tids == ((i % 2) * 4 + (j // 2) % 4,)
            assert slot == (i // 2) * 4 + (j // 8) * 2 + j % 2


@pytest.mark.parametrize(
    "frag",
    [
        L.accumulator((64, 64), 128),
        L.reduced(L.accumulator((64, 64), 128), 1),
        L.default((1, 2048), 256, 4),
        L.default((8, 100), 128, 2),
    ],
    ids=["accumulator", "reduced", "row", "padded"],
)
def test_every_element_owned_once_per_replica(frag: L.Fragment) -> None:
    expected = layout_owners(frag)
    assert set(expected) == set(_indices(frag.shape))
    seen: dict[tuple[int, int], tuple[int, ...]] = {}
    for index in _indices(frag.shape):
        tids, slot = explain.owners(frag, index)
        assert (set(tids), slot) == expected[index]
        assert len(tids) == explain.replication(frag)
        for t in tids:
            assert (t, slot) not in seen, f"{index} and {seen[(t, slot)]} share thread {t} slot {slot}"
            seen[(t, slot)] = index
            assert 0 <= slot < frag.local_size


def _indices(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for n in shape:
        out = [p + (i,) for p in out for i in range(n)]
    return out


# ---------------------------------------------------------------- SVG


def _cells(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "cell"]


def test_svg_acc_s_of_flash_attention() -> None:
    program = elaborate(str(ROOT / "examples" / "flash_attention.tile"))
    svg = explain.explain_svg(program, "acc_s")
    cells = _cells(svg)
    assert len(cells) == 16 * 16  # a 128x64 tile is capped at its top-left 16x16 block
    assert "top-left 16x16 block of 128x64" in svg
    expected = layout_owners(L.mma_accumulator((128, 64), 128, "FullRow"))
    by_index = {tuple(map(int, c.get("data-index", "").split(","))): c for c in cells}
    for index in [(0, 0), (0, 1), (1, 0), (7, 15), (8, 0), (15, 15), (3, 9)]:
        threads, slot = expected[index]
        cell = by_index[index]
        assert {int(t) for t in cell.get("data-threads", "").split(",")} == threads
        assert int(cell.get("data-slot", "-1")) == slot
    # mma.sync accumulator, 4 warps of 32 rows (two m16 tiles each), 8 n8 tiles across: element (i, j)
    # is in lane 4 * (i % 8) + (j % 8) / 2 of warp i / 32, register
    # 4 * (8 * (i % 32 / 16) + j / 8) + 2 * (i % 16 / 8) + j % 2
    assert by_index[(9, 3)].get("data-threads") == str(4 * 1 + 1)
    assert by_index[(9, 3)].get("data-slot") == str(2 + 1)
    assert by_index[(12, 10)].get("data-slot") == str(4 * 1 + 2 * 1 + 0)
    assert "T5" in ET.tostring(by_index[(9, 3)], encoding="unicode")


def test_svg_replicated_fragment_lists_replicas() -> None:
    program = elaborate(str(ROOT / "examples" / "flash_attention.tile"))
    cells = _cells(explain.explain_svg(program, "m", color_by="thread"))
    assert len(cells) == 32  # a 1-D tile is one row, capped at 32
    first = cells[0]
    # a row maximum of the mma accumulator is held by the 4 lanes of a quad
    assert first.get("data-threads") == "0,1,2,3"
    assert "T0,T1,…(4)" in ET.tostring(first, encoding="unicode")


def test_svg_whole_small_tile() -> None:
    program = elaborate(str(ROOT / "tests" / "golden" / "explain" / "attention_step.tile"))
    cells = _cells(explain.explain_svg(program, "s"))
    assert len(cells) == 16 * 16


def test_svg_errors() -> None:
    program = elaborate(str(ROOT / "examples" / "gemm.tile"))
    with pytest.raises(ValueError, match="shared buffer"):
        explain.explain_svg(program, "A_shared")
    with pytest.raises(ValueError, match="no buffer 'nope'"):
        explain.explain_svg(program, "nope")


# ---------------------------------------------------------------- the command


def test_cli_explain_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("explain", str(ROOT / "examples" / "gemm.tile"), "-D", "block_K=16") == 0
    out = capsys.readouterr().out
    assert out.startswith("kernel gemm (gemm.tile:11): 256 threads")
    assert "mma.sync m16n8k16 float16 -> float32 (tensor cores)" in out


def test_cli_explain_svg(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "acc.svg"
    path = str(ROOT / "examples" / "flash_attention.tile")
    assert run("explain", path, "--kernel", "flash_attention", "--svg", str(out), "--buffer", "acc_o") == 0
    assert len(_cells(out.read_text())) == 16 * 16
    assert f"wrote {out}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (("--svg", "x.svg"), "--svg and --buffer go together"),
        (("--kernel", "nope"), "no kernel 'nope'"),
        (("--svg", "x.svg", "--buffer", "B_shared"), "--svg draws fragments"),
    ],
)
def test_cli_explain_usage_errors(args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("explain", str(ROOT / "examples" / "gemm.tile"), *args) == 1
    assert message in capsys.readouterr().err


def test_cli_explain_user_error(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(A: Tensor((N,), float16)):\n    with Kernel(1, threads=32) as bx:\n        x = y\n")
    assert run("explain", str(bad)) == 1
    assert "error:" in capsys.readouterr().err


def test_docs_are_current() -> None:
    """docs/explain.md holds the real output; `python docs/make_explain.py` regenerates it."""
    doc = (ROOT / "docs" / "explain.md").read_text()
    for name in ("gemm", "flash_attention"):
        text = explain.render_text(explain.explain_program(elaborate(str(ROOT / "examples" / f"{name}.tile"))))
        assert text in doc, f"docs/explain.md is stale for {name}.tile: run python docs/make_explain.py"
    program = elaborate(str(ROOT / "examples" / "flash_attention.tile"))
    picture = (ROOT / "docs" / "explain-flash_attention-acc_s.svg").read_text()
    assert picture == explain.explain_svg(program, "acc_s"), "run python docs/make_explain.py"


def test_8bit_gemm_instruction() -> None:
    text = explain.render_text(explain.explain_program(elaborate(str(ROOT / "examples" / "gemm_int8.tile"))))
    assert "mma.sync m16n8k32 int8 -> int32 (tensor cores)" in text
    assert "GEMM main loop: the gemm's fragments are loaded one k step ahead" in text


def test_warp_roles_on_sm90a() -> None:
    """On sm_90a the GEMM example runs by warp roles: explain says so (producer warp group,
    persistent tiles, TMA boxes and their maps, the staged TMA-store epilogue, the fallback)."""
    program = elaborate(str(ROOT / "examples" / "gemm.tile"))
    text = explain.render_text(explain.explain_program(program, "sm_90a"))
    assert "256 threads + a producer warp group (384 in all)" in text
    assert "walked by at most one block per multiprocessor (persistent)" in text
    assert "TMA (cp.async.bulk.tensor), 1 box of 64x128 (128-byte swizzle, map A_map)" in text
    assert "TMA (cp.async.bulk.tensor), 4 boxes of 64x64 (128-byte swizzle, map B_map)" in text
    assert "a column block at a time through the two halves of a swizzled shared staging tile" in text
    assert "TMA stores (4 boxes of 64x128" in text
    # 4 stages of 48 KB and a 32 KB staging tile fit where num_stages=3 asked for 3 (ring_depth)
    assert "warp roles (num_stages=3, deepened to 4" in text
    assert "one thread of a producer warp group issues the copies" in text
    assert "into a ring of 4 stages" in text
    assert "producer (up to k + 4)" in text
    assert "dynamic shared memory: 230400 bytes" in text
    assert "gemm operands 0" in text  # wgmma reads both operands through descriptors
    assert "the launcher builds the tensor maps A_map, B_map, C_map" in text
    assert "it runs gemm_fallback" in text
    assert "cp.async 16 B" not in text


def test_thread_level_table_speaks_each_targets_shuffles_and_barrier() -> None:
    # lane_index(), warp_index(), shuffles and sync_threads(), as the target spells them
    case = str(ROOT / "tests" / "golden" / "codegen" / "warp_shuffle.tile")
    cuda = explain.render_text(explain.explain_program(elaborate(case)))
    assert "Thread-level" in cuda and "__shfl_xor_sync among the 32 lanes of a warp" in cuda
    assert "__shfl_down_sync among the 32 lanes of a warp" in cuda
    assert "__syncthreads() (block barrier)" in cuda and "tx % 32: the lane in its warp" in cuda
    hip = explain.render_text(explain.explain_program(elaborate(case, arch="gfx90a"), arch="gfx90a"))
    assert "__shfl_xor among the 64 lanes of a wave" in hip and "tx / 64: the wave in the block" in hip
    gemm = str(ROOT / "tests" / "golden" / "codegen" / "gemm_pipelined.tile")
    assert "Thread-level" not in explain.render_text(explain.explain_program(elaborate(gemm)))


def test_totals_count_what_each_loop_synchronizes() -> None:
    """TileLang's MLA decode on sm_90a: its consumer loop's barriers are the two cross-warp
    reductions' own (two each) and one before P V reads the P tile, with one proxy fence (the P
    tile's stores, read by wgmma); the latent and rotary scores are waited for once."""
    path = str(ROOT / "tests" / "corpus" / "tilelang" / "mla_decode.tile")
    text = explain.render_text(explain.explain_program(elaborate(path, arch="sm_90a"), arch="sm_90a"))
    assert (
        "per iteration of the loop at mla_decode.tile:54: "
        "5 barriers (4 in tile ops' own code), 1 proxy fence, 2 wgmma waits, 1 mbarrier wait"
    ) in text
