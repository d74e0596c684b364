"""HIP's software fp8 types (backends/hip/spelling.py FP8_TYPE), compiled for the host by the
system C++ compiler and checked against the formats' definitions: every one of the 256 codes of
each of the four formats decodes to its value, and floats encode to the nearest code (ties to an
even mantissa), saturating at the largest finite value, NaN to NaN, as CUDA's __nv_fp8 types do.
The floats are every code's value, every midpoint between neighbours and the floats either side
of it, values past the largest, subnormals, signed zeros, infinities and NaN."""

from __future__ import annotations

import math
import pathlib
import shutil
import struct
import subprocess

import pytest

from tilec.backends.hip import spelling as hip

# name -> (exponent bits, mantissa bits, bias, FNUZ): the formats the typedefs name
FORMATS = {
    "tilec_fp8_e4m3": (4, 3, 7, False),
    "tilec_fp8_e5m2": (5, 2, 15, False),
    "tilec_fp8_e4m3fnuz": (4, 3, 8, True),
    "tilec_fp8_e5m2fnuz": (5, 2, 16, True),
}

SHIM = """#include <cmath>
#include <cstdio>
#include <cstring>
#define __device__
static unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
"""

MAIN = """
template <class T> static void run(const char* name) {
  for (int c = 0; c < 256; ++c) {
    T t; t.bits = static_cast<unsigned char>(c);
    std::printf("%s d %d %08x\\n", name, c, __float_as_uint(static_cast<float>(t)));
  }
  unsigned u;
  std::FILE* f = std::fopen("floats.txt", "r");
  while (std::fscanf(f, "%x", &u) == 1) std::printf("%s e %08x %d\\n", name, u, T(__uint_as_float(u)).bits);
  std::fclose(f);
}
int main() {
"""


def decode(code: int, e_bits: int, m_bits: int, bias: int, fnuz: bool) -> float:
    """The value of `code` by the format's definition (OCP 8-bit floats; AMD's FNUZ variants)."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    if fnuz:
        if code == 0x80:
            return math.nan
    elif e_bits == 5 and e == 31:  # IEEE-like: infinities and NaNs
        return sign * math.inf if m == 0 else math.nan
    elif e_bits == 4 and e == 15 and m == 7:  # e4m3fn: only NaN, no infinities
        return math.nan
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + m / 2**m_bits) * 2.0 ** (e - bias)


def finite_codes(fmt: tuple[int, int, int, bool]) -> list[tuple[float, int]]:
    """(value, code) of every finite code, negative zero aside, ascending."""
    values = [(decode(c, *fmt), c) for c in range(256)]
    return sorted((v, c) for v, c in values if math.isfinite(v) and not (v == 0 and c & 0x80))


def encode(x: float, fmt: tuple[int, int, int, bool]) -> int:
    """The code a float converts to: the nearest finite value (ties: the even code), |x| above
    the largest saturating to it; NaN to the format's NaN; zero keeps its sign unless FNUZ."""
    fnuz = fmt[3]
    if math.isnan(x):
        return 0x80 if fnuz else 0x7F
    codes = finite_codes(fmt)
    largest = codes[-1][0]
    a = min(abs(x), largest)
    best = min(codes, key=lambda vc: (abs(vc[0] - abs(a)), vc[1] & 1) if vc[0] >= 0 else (math.inf, 0))
    code = best[1]
    negative = math.copysign(1.0, x) < 0
    if negative and not (fnuz and code == 0):
        code |= 0x80
    return code


def f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(u: int) -> float:
    return struct.unpack("<f", struct.pack("<I", u))[0]


def probe_floats() -> list[int]:
    """float32 bit patterns to encode: values, midpoints and their neighbours, for every format."""
    out: set[int] = {f32(0.0), f32(-0.0), f32(math.inf), f32(-math.inf), 0x7FC00000, 0xFFC00000}
    for fmt in FORMATS.values():
        values = [v for v, _ in finite_codes(fmt) if v >= 0]
        for lo, hi in zip(values, values[1:], strict=False):
            mid = f32((lo + hi) / 2)
            out |= {f32(lo), mid, mid - 1, mid + 1}
        top = values[-1]
        out |= {f32(top * 1.03), f32(top * 1.0625), f32(top * 2), f32(1e30), f32(values[1] / 3), f32(values[1] / 2)}
    return sorted(out | {u | 0x80000000 for u in out})


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp("fp8")
    typedefs = "\n".join(hip.FP8_TYPEDEFS.values())
    calls = "".join(f'  run<{name}>("{name}");\n' for name in FORMATS)
    (d / "fp8.cpp").write_text(SHIM + hip.FP8_TYPE + "\n" + typedefs + MAIN + calls + "}\n")
    (d / "floats.txt").write_text("\n".join(f"{u:08x}" for u in probe_floats()) + "\n")
    subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(d / "fp8"), str(d / "fp8.cpp")], check=True)
    return subprocess.run([str(d / "fp8")], cwd=d, check=True, capture_output=True, text=True).stdout.splitlines()


def test_the_typedefs_name_the_formats() -> None:
    assert set(hip.FP8_TYPEDEFS) == set(FORMATS)


@pytest.mark.parametrize("name", FORMATS)
def test_every_code_decodes_to_its_value(results: list[str], name: str) -> None:
    fmt = FORMATS[name]
    rows = (r.split() for r in results)
    decoded = {int(c): from_bits(int(u, 16)) for n, kind, c, u in rows if (n, kind) == (name, "d")}
    assert len(decoded) == 256
    for code, got in decoded.items():
        want = decode(code, *fmt)
        same = got == want and math.copysign(1, got) == math.copysign(1, want)
        assert (math.isnan(got) and math.isnan(want)) or same, f"{name} code {code:#04x}: {got} != {want}"


@pytest.mark.parametrize("name", FORMATS)
def test_floats_encode_to_the_nearest_code(results: list[str], name: str) -> None:
    fmt = FORMATS[name]
    encoded = [(int(u, 16), int(c)) for n, kind, u, c in (r.split() for r in results) if (n, kind) == (name, "e")]
    assert len(encoded) == len(probe_floats()) > 1000
    wrong = [(hex(u), from_bits(u), c, encode(from_bits(u), fmt)) for u, c in encoded if c != encode(from_bits(u), fmt)]
    assert not wrong, f"{name}: {len(wrong)} floats encode wrongly, e.g. {wrong[:5]}"


def test_a_hip_file_defines_only_the_fp8_types_it_uses(tmp_path: pathlib.Path) -> None:
    from tilec.driver import compile_file

    src = tmp_path / "k.tile"
    src.write_text(
        "kernel k(X: Tensor((N,), float8_e5m2fnuz), Y: Tensor((N,), float32)):\n"
        "    with Kernel(ceildiv(N, 64), threads=64) as bx:\n"
        "        for i in Parallel(64):\n"
        "            Y[bx * 64 + i] = X[bx * 64 + i] * 2.0\n"
    )
    text = compile_file(str(src), {}, "gfx90a")
    assert "struct tilec_fp8 {" in text and text.count("typedef tilec_fp8<") == 1
    assert "tilec_fp8_e5m2fnuz;" in text
