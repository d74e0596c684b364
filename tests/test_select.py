"""Instruction records (instructions.py, backends/cuda/instructions.py) and the select pass:
which record each gemm gets per target, dtype and operand placement; the records' fragments
against the PTX tables of backends/cuda/fragments.py; the choice printed by `--emit tir`."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from tilec import fragment_algebra as fa
from tilec import tir
from tilec.backends.cuda import fragments as ptx
from tilec.backends.cuda.instructions import (
    MMA_M16N8K16,
    MMA_M16N8K32,
    SIMT_FMA,
    WGMMA_M64NNK16,
    WGMMA_M64NNK16_RS,
    WGMMA_M64NNK32,
)
from tilec.dtypes import DType
from tilec.elaborate import elaborate_file
from tilec.instructions import Instruction
from tilec.passes.select import select
from tilec.pipeline import compile_program
from tilec.targets import TARGETS, get_target

ROOT = pathlib.Path(__file__).resolve().parent.parent

_GEMM = """
kernel k(A: Tensor(({a_shape}), {t}), B: Tensor(({b_shape}), {t}), C: Tensor(({m}, {n}), {acc})):
    with Kernel(1, threads={threads}) as bx:
        A_s = alloc_{a_scope}(({a_shape}), {t})
        B_s = alloc_shared(({b_shape}), {t})
        acc = alloc_fragment(({m}, {n}), {acc})
        clear(acc)
{load_a}        copy(B[0, 0], B_s)
        gemm(A_s, B_s, acc{flags})
        copy(acc, C[0, 0])
"""


def _chosen(
    arch: str,
    t: str,
    acc: str,
    k: int = 32,
    ta: bool = False,
    tb: bool = False,
    a_scope: str = "shared",
    threads: int = 128,
    m: int = 64,
    n: int = 64,
) -> str | None:
    a_shape = f"{k}, {m}" if ta else f"{m}, {k}"
    b_shape = f"{n}, {k}" if tb else f"{k}, {n}"
    flags = (", transpose_A=True" if ta else "") + (", transpose_B=True" if tb else "")
    load_a = "        copy(A[0, 0], A_s)\n"
    text = _GEMM.format(
        a_shape=a_shape,
        b_shape=b_shape,
        t=t,
        acc=acc,
        m=m,
        n=n,
        threads=threads,
        a_scope=a_scope,
        load_a=load_a,
        flags=flags,
    )
    program = select(elaborate_file("k.tile", text=text, arch=arch), get_target(arch))
    (gemm,) = [s for s in program.kernels[0].body if isinstance(s, tir.Gemm)]
    return gemm.instruction


K16, K32, SIMT, WG = MMA_M16N8K16.name, MMA_M16N8K32.name, SIMT_FMA.name, WGMMA_M64NNK16.name
WG32, WG_RS = WGMMA_M64NNK32.name, WGMMA_M64NNK16_RS.name


@pytest.mark.parametrize(
    ("arch", "t", "acc", "placement", "chosen"),
    [
        ("sm_80", "float16", "float32", {}, K16),
        ("sm_80", "bfloat16", "float32", {"ta": True}, K16),  # ldmatrix.trans reads A (K, M)
        ("sm_90a", "float16", "float32", {"tb": True}, WG),  # both K-major (64-byte swizzle rows)
        ("sm_90a", "float16", "float32", {}, WG),  # B (K, N): MN-major through its descriptor
        ("sm_90a", "bfloat16", "float32", {"ta": True}, WG),  # A (K, M) likewise
        ("sm_90a", "float16", "float32", {"a_scope": "fragment"}, WG_RS),  # wgmma with A from registers
        ("sm_90a", "float16", "float32", {"a_scope": "fragment", "ta": True}, K16),  # a register A is K-major
        ("sm_90a", "float16", "float32", {"threads": 64}, K16),  # two warps: no warp group
        ("sm_90a", "float16", "float32", {"m": 32}, K16),  # fewer rows than one m64 tile
        ("sm_90a", "float16", "float32", {"k": 24}, SIMT),  # 48-byte rows: no swizzle, no k16 steps
        ("sm_80", "float16", "float32", {"a_scope": "fragment"}, K16),  # A from registers (or staged)
        ("sm_80", "float16", "float16", {}, SIMT),  # no float16 accumulator record
        ("sm_80", "float32", "float32", {}, SIMT),
        ("sm_80", "float16", "float32", {"k": 24}, SIMT),  # K not a whole number of 16-deep steps
        ("sm_80", "int8", "int32", {"tb": True}, K32),
        ("sm_86", "int8", "int32", {"tb": True}, K32),
        ("sm_80", "int8", "int32", {}, SIMT),  # B (K, N): ldmatrix cannot transpose 8-bit elements
        ("sm_80", "int8", "int32", {"ta": True, "tb": True}, SIMT),  # A (K, M): likewise
        ("sm_80", "int8", "int32", {"tb": True, "a_scope": "fragment"}, SIMT),  # 8-bit A only from shared
        ("sm_80", "int8", "int32", {"tb": True, "k": 48}, SIMT),  # K not a whole number of 32-deep steps
        ("sm_80", "float8_e4m3", "float32", {"tb": True}, SIMT),  # fp8 mma.sync from sm_89
        ("sm_86", "float8_e5m2", "float32", {"tb": True}, SIMT),
        ("sm_89", "float8_e4m3", "float32", {"tb": True}, K32),
        ("sm_90a", "float8_e5m2", "float32", {"tb": True}, WG32),  # A (M, K), B (N, K): both K-major
        ("sm_90a", "float8_e4m3", "float32", {"tb": True, "k": 128}, WG32),  # 128-byte swizzle rows
        ("sm_90a", "int8", "int32", {"tb": True}, WG32),  # 32-byte rows: the 32-byte swizzle
        ("sm_90a", "uint8", "int32", {"tb": True, "k": 64}, WG32),
        ("sm_90a", "int8", "int32", {}, SIMT),  # B (K, N): 8-bit wgmma is K-major only, as is mma.sync
        ("sm_90a", "float8_e4m3", "float32", {"ta": True, "tb": True}, SIMT),  # A (K, M) likewise
        ("sm_90a", "int8", "int32", {"tb": True, "threads": 64}, K32),  # two warps: no warp group
        ("sm_90a", "int8", "int32", {"tb": True, "n": 40}, K32),  # no m64n40k32.s32
        ("sm_90a", "float8_e4m3", "float32", {"tb": True, "n": 40}, WG32),  # the fp8 wgmma has it
        ("sm_90a", "int8", "int32", {"tb": True, "n": 48}, WG32),
        ("sm_90a", "int8", "int32", {"tb": True, "n": 80, "threads": 256}, K32),  # 2 groups of n40
        ("sm_80", "uint8", "int32", {"tb": True}, SIMT),  # no u8 mma.sync record
        ("sm_89", "float8_e4m3", "float32", {}, SIMT),
    ],
)
def test_selection_per_target_dtype_and_placement(arch: str, t: str, acc: str, placement: dict, chosen: str) -> None:
    assert _chosen(arch, t, acc, **placement) == chosen


def test_an_accumulator_that_does_not_tile_over_the_warps_runs_on_simt() -> None:
    # 16x64 over 32 warps: no grid of warps with whole m16n8 tiles divides it; over 8 warps one does
    assert _chosen("sm_80", "float16", "float32", threads=1024, m=16) == SIMT
    assert _chosen("sm_80", "float16", "float32", threads=256, m=16) == K16


def test_every_target_ends_with_a_record_that_takes_any_gemm() -> None:
    for target in TARGETS.values():
        assert target.instructions[-1].operands is None and target.instructions[-1].group == "thread"
        names = [r.name for r in target.instructions]
        assert len(set(names)) == len(names)


def test_select_keeps_the_program_it_reads() -> None:
    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    selected = select(program, get_target("sm_80"))
    gemms = [s for s in program.kernels[0].body if isinstance(s, tir.For) for s in s.body if isinstance(s, tir.Gemm)]
    assert gemms and all(g.instruction is None for g in gemms)
    assert selected.kernels[0].span == program.kernels[0].span


def test_emit_tir_names_the_instruction() -> None:
    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    text = compile_program(program, emit="tir")  # after every Tile IR pass: the plan's flag follows
    assert "clear_accum=False, instruction=mma_sync_m16n8k16, fragments_ahead=True)" in text
    int8 = elaborate_file(
        str(ROOT / "examples" / "gemm_int8.tile"), {"dtype": "float8_e4m3", "accum_dtype": "float32"}, arch="sm_80"
    )
    assert "instruction=simt_fma)" in compile_program(int8, arch="sm_80", emit="tir")
    int8 = elaborate_file(
        str(ROOT / "examples" / "gemm_int8.tile"), {"dtype": "float8_e4m3", "accum_dtype": "float32"}, arch="sm_89"
    )
    assert "instruction=mma_sync_m16n8k32, fragments_ahead=True)" in compile_program(int8, arch="sm_89", emit="tir")


# ---------------------------------------------------------------- the records' fragments

MMA_RECORDS = (MMA_M16N8K16, MMA_M16N8K32)


@pytest.mark.parametrize("record", MMA_RECORDS, ids=lambda r: r.name)
def test_record_fragments_have_the_instruction_shape_and_cover(record: Instruction) -> None:
    m, n, k = record.shape
    a, b, c = (make() for make in record.fragments)
    assert (a.shape, b.shape, c.shape) == ((m, k), (k, n), (m, n))
    for frag in (a, b, c):
        assert frag.threads == 32 and fa.cover_errors(frag) == [] and fa.is_bijective(frag)


@pytest.mark.parametrize("record", MMA_RECORDS, ids=lambda r: r.name)
def test_record_accumulator_is_its_c_fragment_tiled_over_warps(record: Instruction) -> None:
    one = record.accumulator((16, 8), 32, "Square", None)
    assert one is not None and fa.flat_elements(fa.from_fragment(one)) == fa.flat_elements(record.fragments[2]())
    tiled = record.accumulator((64, 64), 128, "FullRow", None)  # 4 warps of 16 rows, 8 n8 tiles each
    assert tiled is not None
    expected = fa.tile_threads(fa.tile_slots(record.fragments[2](), (1, 8)), (4, 1))
    assert _by_thread(fa.from_fragment(tiled)) == _by_thread(expected)


def _by_thread(frag: fa.FragmentMap) -> dict[int, set[tuple[int, ...] | None]]:
    out: dict[int, set[tuple[int, ...] | None]] = {}
    for (t, _), ix in fa.elements(frag).items():
        out.setdefault(t, set()).add(ix)
    return out


def _words(frag: fa.FragmentMap, dim: int, per_word: int) -> dict[tuple[int, int], set[tuple[int, ...]]]:
    """(thread, 32-bit register) -> the words (element index with `dim` divided by `per_word`) it
    holds: a register's elements must be one word of consecutive elements along `dim`."""
    out: dict[tuple[int, int], set[tuple[int, ...]]] = {}
    for (t, slot), ix in fa.elements(frag).items():
        assert ix is not None
        word = tuple(i // per_word if d == dim else i for d, i in enumerate(ix))
        out.setdefault((t, fa.flat_slot(frag, slot) // per_word), set()).add(word)
    assert all(len(w) == 1 for w in out.values())
    return out


def test_8bit_fragments_are_the_16bit_ones_in_words() -> None:
    # why one ldmatrix (b16) loads the m16n8k32 operands untransposed: in 32-bit words the k32 A
    # (16 x 32 bytes) and B are the k16 A and B, along K
    a16, b16, _ = (make() for make in MMA_M16N8K16.fragments)
    a32, b32, _ = (make() for make in MMA_M16N8K32.fragments)
    assert _words(a32, 1, 4) == _words(a16, 1, 2)
    assert _words(b32, 0, 4) == _words(b16, 0, 2)
    assert fa.flat_elements(ptx.ldmatrix_x4_regs()) == fa.flat_elements(a16)


def test_8bit_fragments_match_the_ptx_tables() -> None:
    where_a = fa.locate(ptx.mma_m16n8k32_a())  # a0..a15 of lane 0: rows 0/8, columns 0..3 and 16..19
    assert where_a[(0, 3)] == (0, 3) and where_a[(8, 0)] == (0, 4) and where_a[(0, 16)] == (0, 8)
    assert where_a[(15, 31)] == (31, 15) and where_a[(2, 5)] == (9, 1)
    where_b = fa.locate(ptx.mma_m16n8k32_b())
    assert where_b[(3, 0)] == (0, 3) and where_b[(16, 0)] == (0, 4) and where_b[(5, 2)] == (9, 1)


def test_explain_and_lowering_follow_the_targets_records(monkeypatch: pytest.MonkeyPatch) -> None:
    # a target without tensor-core records: the same gemm is explained and lowered as SIMT FMA
    from tilec.explain import explain_program

    program = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {})
    (ops,) = [t for t in explain_program(program)[0].tables if t.title == "Tile ops"]
    assert any(row[2].startswith("mma.sync m16n8k16 float16 -> float32 (tensor cores)") for row in ops.rows)
    monkeypatch.setitem(TARGETS, "sm_80", dataclasses.replace(get_target("sm_80"), instructions=(SIMT_FMA,)))
    (ops,) = [t for t in explain_program(program)[0].tables if t.title == "Tile ops"]
    gemm_rows = [row for row in ops.rows if row[1].startswith("gemm(")]
    assert gemm_rows and all(row[2].startswith("SIMT FMA (CUDA cores), micro-tile") for row in gemm_rows)
    text = compile_program(program)
    assert (
        "mma.sync" not in text
        and "ldmatrix" not in text
        and "instruction=simt_fma" in compile_program(program, emit="tir")
    )


def test_every_targets_backend_module_provides_the_lowerings() -> None:
    from tilec.lower.context import Backend, backend_of

    methods = [name for name in dir(Backend) if not name.startswith("_")]  # gemm, setup, ..., async_copy
    for target in TARGETS.values():
        module = backend_of(target)
        assert all(callable(getattr(module, name)) for name in methods)
        assert isinstance(module.ASYNC_COPY_BYTES, tuple)  # the data the protocol names
        assert all(isinstance(n, tuple) for n in module.ATOMIC_ADD_LANES.values())
        assert set(Backend.__annotations__) == {"ASYNC_COPY_BYTES", "ATOMIC_ADD_LANES"}


# ---------------------------------------------------------------- wgmma (sm_90a)


def test_wgmma_d_fragment_covers_a_warp_group() -> None:
    d = ptx.wgmma_m64n8k16_c()
    assert d.threads == 128 and fa.cover_errors(d) == [] and fa.is_bijective(d)
    where = fa.locate(d)  # (row, column) -> (thread, flat slot): warp 1 holds rows 16..31, as mma.s C
    assert where[(0, 0)] == (0, 0) and where[(8, 1)] == (0, 3) and where[(17, 2)] == (37, 0)


def test_wgmma_accumulator_is_its_d_fragment_tiled_over_warp_groups() -> None:
    d = ptx.wgmma_m64n8k16_c()
    one = WGMMA_M64NNK16.accumulator((64, 8), 128, "Square", None)
    assert one is not None and fa.flat_elements(fa.from_fragment(one)) == fa.flat_elements(d)
    wide = WGMMA_M64NNK16.accumulator((64, 256), 128, "Square", None)  # one m64n256k16: d[0..127]
    assert wide is not None and fa.flat_elements(fa.from_fragment(wide)) == fa.flat_elements(fa.tile_slots(d, (1, 32)))
    two = WGMMA_M64NNK16.accumulator((128, 256), 256, "Square", None)  # two warp groups along M
    assert two is not None
    assert _by_thread(fa.from_fragment(two)) == _by_thread(fa.tile_threads(fa.tile_slots(d, (1, 32)), (2, 1)))
    split = WGMMA_M64NNK16.accumulator((64, 256), 256, "Square", None)  # 64 rows: the groups split N
    assert split is not None
    assert _by_thread(fa.from_fragment(split)) == _by_thread(fa.tile_threads(fa.tile_slots(d, (1, 16)), (1, 2)))
    assert WGMMA_M64NNK16.accumulator((64, 64), 96, "Square", None) is None  # no whole warp group


def test_wgmma_register_a_fragment_covers_a_warp_group() -> None:
    a = ptx.wgmma_m64k16_a()
    assert a.threads == 128 and fa.cover_errors(a) == [] and fa.is_bijective(a)
    where = fa.locate(a)  # warp 1 holds rows 16..31 as mma.sync's A: a4 is column 8, a2 row 8
    assert where[(0, 0)] == (0, 0) and where[(8, 0)] == (0, 2) and where[(0, 8)] == (0, 4) and where[(16, 3)] == (33, 1)


@pytest.mark.parametrize(("m", "k", "threads"), [(64, 64, 128), (128, 128, 256), (128, 64, 128), (256, 32, 256)])
def test_an_accumulator_laid_out_tile_is_wgmmas_register_a(m: int, k: int, threads: int) -> None:
    # P laid out as the wgmma accumulator of its (M, K) shape: for each m64 tile mt and k step kk,
    # each thread's 8 registers from (mt * K/8 + 2 kk) * 4 on (sm90._a_registers) are exactly the
    # elements wgmma's register A fragment gives that thread, in order
    frag = WGMMA_M64NNK16.accumulator((m, k), threads, "FullRow", None)
    assert frag is not None and WGMMA_M64NNK16_RS.a_registers_fit is not None
    assert WGMMA_M64NNK16_RS.a_registers_fit(frag, frag)
    held = fa.flat_elements(fa.from_fragment(frag))  # (thread, register) -> (row, column)
    a = fa.flat_elements(ptx.wgmma_m64k16_a())  # (thread in group, register) -> (row, column) in m64 x k16
    groups, tiles = threads // 128, frag.local_parts[0].extent
    for t in range(threads):
        g, lane = divmod(t, 128)
        for mt in range(tiles):
            for kk in range(k // 16):
                for r in range(8):
                    row, col = a[(lane, r)]
                    want = (g * tiles * 64 + mt * 64 + row, kk * 16 + col)
                    assert held[(t, (mt * (k // 8) + 2 * kk) * 4 + r)] == want, (t, mt, kk, r)
    assert groups * tiles * 64 == m


def test_flash_attention_takes_wgmma_for_both_products() -> None:
    # Q K^T from shared tiles by descriptors, P V with P from registers (wgmma's register form):
    # both accumulators are wgmma's, their rows split alike over the warp groups
    program = elaborate_file(str(ROOT / "examples" / "flash_attention.tile"), {}, arch="sm_90a")
    text = compile_program(program, arch="sm_90a", emit="tir")
    assert re.search(r"instruction=wgmma_m64nNk16[,)]", text) and "instruction=wgmma_m64nNk16_rs," in text
    assert "mma_sync" not in text


def test_a_kernel_whose_gemms_cannot_all_take_wgmma_keeps_them_on_one_warp_record() -> None:
    # a transposed register A (K, M) has no wgmma form: both gemms of the kernel stay on mma.sync,
    # so that their accumulators split their rows alike
    text = """
kernel k(A: Tensor((64, 64), float16), B: Tensor((64, 64), float16), C: Tensor((64, 64), float32)):
    with Kernel(1, threads=128) as bx:
        A_s = alloc_shared((64, 64), float16)
        B_s = alloc_shared((64, 64), float16)
        p = alloc_fragment((64, 64), float32)
        p16 = alloc_fragment((64, 64), float16)
        acc = alloc_fragment((64, 64), float32)
        copy(A, A_s)
        copy(B, B_s)
        gemm(A_s, B_s, p, clear_accum=True)
        copy(p, p16)
        gemm(p16, B_s, acc, transpose_A=True, clear_accum=True)
        copy(acc, C)
"""
    out = compile_program(elaborate_file("k.tile", text=text, arch="sm_90a"), arch="sm_90a", emit="tir")
    assert out.count("instruction=mma_sync_m16n8k16") == 2 and "wgmma" not in out


def test_a_kernels_mfma_gemms_take_one_tile_shape() -> None:
    # MLA decode's 32x512 output alone would take 32x32 MFMAs, its 32x16 scores only fit 16x16 ones:
    # both take 16x16x16, so that the online softmax's row statistics serve both accumulators
    defines = {"block_N": "16", "threads": "128"}
    program = elaborate_file(str(ROOT / "examples" / "mla_decode.tile"), defines, arch="gfx90a")
    text = compile_program(program, arch="gfx90a", emit="tir")
    assert text.count("instruction=mfma_16x16x16") == 3 and "mfma_32x32x8" not in text
    gemm = elaborate_file(str(ROOT / "examples" / "gemm.tile"), {"block_N": "128", "block_K": "32"}, arch="gfx90a")
    assert "instruction=mfma_32x32x8," in compile_program(gemm, arch="gfx90a", emit="tir")


def test_wgmma_k32_writes_the_k16_accumulator() -> None:
    # D does not depend on K: the 8-bit record's accumulator and D fragment are the 16-bit one's
    assert WGMMA_M64NNK32.accumulator is WGMMA_M64NNK16.accumulator
    assert WGMMA_M64NNK32.fragments == WGMMA_M64NNK16.fragments
    # one k step is the same 32 bytes of a swizzle row for both (the descriptors' k offsets)
    assert WGMMA_M64NNK32.shape[2] * DType.int8.bytes == WGMMA_M64NNK16.shape[2] * DType.float16.bytes


@pytest.mark.parametrize("record", (WGMMA_M64NNK16, WGMMA_M64NNK32), ids=lambda r: r.name)
def test_wgmma_helpers_exist_for_exactly_the_widths_select_allows(record: Instruction) -> None:
    from tilec.backends.cuda.spelling import HELPERS

    assert record.operands is not None
    for types in record.operands:
        t, acc = types.operand.tile_name, types.accumulator.tile_name
        for n in range(8, 257, 8):
            chosen = _chosen("sm_90a", t, acc, tb=True, n=n) == record.name
            assert chosen == (types.helper.format(n=n) in HELPERS), (t, n)
